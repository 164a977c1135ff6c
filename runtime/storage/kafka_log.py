"""A read-to-end log over one compacted internal topic (Apache Kafka Connect's KafkaBasedLog).

Every worker consumes the whole topic from the beginning on a background thread and hands each record
to a callback; ``read_to_end`` is the barrier the herder uses before it trusts its view (before joining,
before answering as leader). Writes go through an idempotent producer and are acknowledged by all
in-sync replicas, so a record a caller was told is written survives a broker fail-over.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, Producer, TopicPartition

from kconnect.runtime import logs

log = logs.get(__name__)


@dataclass(frozen=True, slots=True)
class LogRecord:
    """One record of an internal topic as handed to the callback: a plain copy of the client's message, so the
    folds that consume it never touch confluent_kafka objects."""

    topic: str
    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp_ms: int


RecordCallback = Callable[[LogRecord], None]


def group_error(code: int) -> bool:
    """Whether a reader's error is about its consumer group, which a log's reader never uses.

    Why: Java's KafkaBasedLog reads without a group, so a worker's principal needs no group ACL for it;
    confluent-kafka requires a ``group.id`` even for a consumer that only assigns, and librdkafka then
    looks the group's coordinator up, which a broker with an authorizer refuses with
    GROUP_AUTHORIZATION_FAILED unless an ACL names that made-up group. Nothing is committed or fetched
    through it, so the refusal changes nothing the log does and is not worth a warning.
    """
    return code == KafkaError.GROUP_AUTHORIZATION_FAILED


#: Errors of an end-offset query that a leader election or a reconnect resolves (Java's RetriableException
#: family: no leader yet, not the leader, metadata not there yet, a request that timed out or lost its
#: connection). Anything else (authorization, a topic that does not exist after all) fails at once.
_RETRIABLE_END_OFFSET_ERRORS: frozenset[int] = frozenset(
    {
        KafkaError._UNKNOWN_PARTITION,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
        KafkaError._WAIT_COORD,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError.NETWORK_EXCEPTION,
        KafkaError.OFFSET_NOT_AVAILABLE,
        KafkaError.UNKNOWN_LEADER_EPOCH,
        KafkaError.FENCED_LEADER_EPOCH,
    }
)
_RETRY_BACKOFF_S = 0.2
#: End-offset errors that a probe whose cached metadata names a dead leader (or none) keeps answering:
#: a query sent to the dead broker times out; a partition whose cached leader is gone is "unknown".
_STALE_LEADER_ERRORS: frozenset[int] = frozenset({KafkaError._TIMED_OUT, KafkaError._UNKNOWN_PARTITION})
#: The least time between two renewals of a log's probe (an unknown partition answers at once).
_PROBE_RENEW_INTERVAL_S = 2.0


def retriable_end_offset_error(code: int | None) -> bool:
    """Whether an end-offset query that failed with ``code`` may succeed if asked again shortly."""
    return code is not None and code in _RETRIABLE_END_OFFSET_ERRORS


class _SharedProbe:
    """A watermark consumer that several threads query at once, closed only when nobody is inside it.

    Why: librdkafka answers a watermark query with the GIL released, so closing the client from one thread
    while another waits in ``get_watermark_offsets`` frees the handle under it, and the process dies of
    SIGSEGV with no Python stack (bench/brokers_random.py lost a worker so, issue 29: several source tasks
    read the offsets topic's end as a broker died, and one of them renewed the probe). A retired probe is
    closed by its last user.
    """

    def __init__(self, client: Any) -> None:
        self.client = client
        self.users = 0
        self.retired = False


class KafkaLogError(RuntimeError):
    """The log could not be read or written (broker unreachable, topic missing, write not acknowledged)."""


class KafkaLog:
    """Consumes ``topic`` from the beginning forever; ``on_record`` runs on the consuming thread."""

    def __init__(
        self,
        topic: str,
        bootstrap_servers: str,
        on_record: RecordCallback,
        client_id: str,
        consumer_overrides: dict[str, str] | None = None,
        producer_overrides: dict[str, str] | None = None,
        client_settings: Mapping[str, str] | None = None,
    ) -> None:
        """``client_settings``: the worker's own client settings (security), librdkafka-named."""
        base = {
            "bootstrap.servers": bootstrap_servers,
            # librdkafka 2.16 re-bootstraps a client whose brokers are all down and starts each new
            # connection at the initial backoff again, so at its 100 ms default the worker's dozen
            # internal-topic clients used ~4.4% of a core while the broker was away (1 s: ~1.1%); a
            # worker reading its own topics can wait a second longer after an outage.
            "reconnect.backoff.ms": 1000,
            **(client_settings or {}),
        }
        self.topic = topic
        self._on_record = on_record
        self._consumer = Consumer(
            {
                **base,
                "group.id": f"{client_id}-{topic}-reader",  # required by the client; never used to commit
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "isolation.level": "read_committed",
                "client.id": f"{client_id}-{topic}-reader",
                "fetch.wait.max.ms": 100,
                # The end of a partition as the fetch answer reports it: past the control records of
                # transactions (an exactly-once source's offsets), which no record handed out ever is.
                "enable.partition.eof": True,
                **(consumer_overrides or {}),
            }
        )
        self._producer = Producer(
            {
                **base,
                "client.id": f"{client_id}-{topic}-writer",
                "enable.idempotence": True,
                "acks": "all",
                "linger.ms": 0,
                # Java's producer places keyed records by murmur2 of the key; the status and offsets
                # topics are shared with Java workers, so a key must land on the partition they expect.
                "partitioner": "murmur2_random",
                **(producer_overrides or {}),
            }
        )
        # End offsets come from a consumer of their own: librdkafka blocks a watermark query on a
        # consumer that another thread is inside consume() with.
        probe_settings = {
            **base,
            "group.id": f"{client_id}-{topic}-probe",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
            "client.id": f"{client_id}-{topic}-probe",
            **(consumer_overrides or {}),
        }
        self._new_probe: Callable[[], Any] = lambda: Consumer(probe_settings)
        self._probe = _SharedProbe(self._new_probe())
        self._probe_lock = threading.Lock()
        self._probe_renewed = time.monotonic()
        self._positions: dict[int, int] = {}  # partition -> next offset to read
        self._cond = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._partitions: list[int] = []
        self._error: BaseException | None = None
        #: Concurrent ``read_to_end`` calls share end-offset queries (see :meth:`_ends_since_now`).
        self._ends_cond = threading.Condition()
        self._ends_started = 0  # queries started so far; the number of the one running, if any
        self._ends_running = False
        self._ends_done = 0  # the number of the last query answered, whose ends are ``_ends_last``
        self._ends_last: dict[int, int] = {}

    def start(self, timeout_s: float = 30.0) -> None:
        """Assign every partition of the topic from its beginning and start the consuming thread; a missing
        topic fails here, at start-up, rather than leaving a worker that silently never sees a record."""
        # A topic created a moment ago may not be in this broker's metadata yet (another broker's
        # controller answered its creation): wait for it, as Java's KafkaBasedLog.start does.
        deadline = time.monotonic() + timeout_s
        while True:
            md = self._consumer.list_topics(self.topic, timeout=max(0.1, deadline - time.monotonic()))
            tmd = md.topics.get(self.topic)
            if tmd is not None and tmd.error is None and tmd.partitions:
                break
            if time.monotonic() + _RETRY_BACKOFF_S >= deadline:
                raise KafkaLogError(f"internal topic '{self.topic}' does not exist or has no partitions")
            time.sleep(_RETRY_BACKOFF_S)
        self._partitions = sorted(tmd.partitions)
        self._consumer.assign([TopicPartition(self.topic, p, OFFSET_BEGINNING) for p in self._partitions])
        with self._cond:
            self._positions = {p: 0 for p in self._partitions}
        self._thread = threading.Thread(target=self._run, name=f"kafka-log-{self.topic}", daemon=True)
        self._thread.start()

    @property
    def partition_count(self) -> int:
        """How many partitions the topic has (known once started): the group-records writer places a group's
        records by it (``group_records.partition_for``), so one partition holds a whole group."""
        return len(self._partitions)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                # poll() returns as soon as one record is there; consume() with a timeout would wait the
                # whole timeout for a full batch, delaying every record (a config write a REST call waits
                # on, a target a member acts on) by up to 0.2 s. The rest of what was fetched follows
                # without waiting.
                self._producer.poll(0)  # delivery reports of writes nobody waits for (send_async)
                first = self._consumer.poll(0.2)
                msgs = [] if first is None else [first, *self._consumer.consume(num_messages=499, timeout=0)]
            except KafkaException as exc:  # pragma: no cover - client-level failure
                log.warning("internal topic read failed", topic=self.topic, error=str(exc))
                time.sleep(0.5)
                continue
            advanced = False
            for msg in msgs:
                err = msg.error()
                if err is not None:
                    if err.code() == KafkaError._PARTITION_EOF:
                        # Read to the end: a transaction's commit marker takes an offset after the last
                        # record, so positions counted from records alone would never reach the end.
                        with self._cond:
                            partition = msg.partition() or 0
                            end = msg.offset() or 0
                            if end > self._positions.get(partition, 0):
                                self._positions[partition] = end
                                advanced = True
                    elif group_error(err.code()):
                        log.debug("internal topic reader's group refused (unused)", topic=self.topic)
                    else:
                        log.warning("internal topic read error", topic=self.topic, error=str(err))
                    continue
                record = LogRecord(
                    topic=msg.topic() or self.topic,
                    partition=msg.partition() or 0,
                    offset=msg.offset() or 0,
                    key=msg.key(),
                    value=msg.value(),
                    timestamp_ms=msg.timestamp()[1],
                )
                try:
                    self._on_record(record)
                except Exception as exc:  # a bad record must never stop the log
                    log.warning(
                        "skipping internal record the worker could not apply",
                        topic=self.topic,
                        partition=record.partition,
                        offset=record.offset,
                        key=record.key.decode("utf-8", "replace") if record.key else None,
                        error=str(exc),
                    )
                with self._cond:
                    self._positions[record.partition] = record.offset + 1
                advanced = True
            if advanced:
                with self._cond:
                    self._cond.notify_all()

    def end_offsets(self, timeout_s: float = 10.0) -> dict[int, int]:
        """The current end offset of every partition, read through the separate probe consumer and never from
        a cache, so that ``read_to_end`` waits for what was written up to now.

        A partition whose leader is moving (a broker died and the controller has not elected another yet)
        answers with a retriable error for a few seconds; as Java's KafkaBasedLog (``retryEndOffsets``), the
        query is retried until ``timeout_s`` has passed, and only then is the last error raised.
        """
        deadline = time.monotonic() + timeout_s
        ends: dict[int, int] = {}
        for p in self._partitions:
            while True:
                remaining = max(0.1, deadline - time.monotonic())
                try:
                    with self._probe_in_use() as probe:
                        _low, high = probe.get_watermark_offsets(
                            TopicPartition(self.topic, p), timeout=remaining, cached=False
                        )
                    break
                except KafkaException as exc:
                    code = exc.args[0].code() if exc.args and isinstance(exc.args[0], KafkaError) else None
                    if code in _STALE_LEADER_ERRORS:
                        self._renew_probe(p, str(exc))
                    if (
                        not retriable_end_offset_error(code)
                        or time.monotonic() + _RETRY_BACKOFF_S >= deadline
                    ):
                        raise KafkaLogError(
                            f"could not read the end offsets of '{self.topic}': {exc}"
                        ) from exc
                    log.info(
                        "end offsets not available yet, retrying",
                        topic=self.topic,
                        partition=p,
                        error=str(exc),
                    )
                    time.sleep(_RETRY_BACKOFF_S)
            ends[p] = high
        return ends

    def _renew_probe(self, partition: int, error: str) -> None:
        """Replace the probe consumer after a watermark query timed out or found the partition unknown
        (at most every :data:`_PROBE_RENEW_INTERVAL_S`).

        Why: the probe only queries watermarks, so librdkafka holds the topic's leaders in its metadata
        cache without ever refreshing them (no subscription, no fetch to fail): once a partition's leader
        is SIGKILLed, every later query goes to the dead broker and times out, for as long as the cache
        entry lives (15 minutes by default). Both workers of test_group_coordinator_killed_under_connect_
        protocol read the group records' end this way for minutes after the coordinator's broker died
        ("Timed out", or "Unknown partition" for as long), and the group's work waited for them. A new
        client starts from fresh metadata.
        """
        now = time.monotonic()
        if now - self._probe_renewed < _PROBE_RENEW_INTERVAL_S:
            return
        self._probe_renewed = now
        fresh = _SharedProbe(self._new_probe())
        with self._probe_lock:
            old, self._probe = self._probe, fresh
        log.info(
            "end-offset probe renewed after a query timed out",
            topic=self.topic,
            partition=partition,
            error=error,
        )
        self._retire(old)

    @contextmanager
    def _probe_in_use(self) -> Iterator[Any]:
        """The current probe, counted as in use until the block ends (see :class:`_SharedProbe`)."""
        with self._probe_lock:
            probe = self._probe
            if probe.retired:
                raise KafkaLogError(f"the log of '{self.topic}' is stopped")
            probe.users += 1
        try:
            yield probe.client
        finally:
            with self._probe_lock:
                probe.users -= 1
                last = probe.retired and probe.users == 0
            if last:
                self._close_probe(probe)

    def _retire(self, probe: _SharedProbe) -> None:
        """Close ``probe`` now if nobody queries it, else leave that to its last user."""
        with self._probe_lock:
            probe.retired = True
            idle = probe.users == 0
        if idle:
            self._close_probe(probe)

    def _close_probe(self, probe: _SharedProbe) -> None:
        try:
            probe.client.close()
        except Exception as exc:  # a client that no longer closes cleanly must not fail the read
            log.warning("closing the old end-offset probe failed", topic=self.topic, error=str(exc))

    def read_to_end(self, timeout_s: float = 30.0) -> bool:
        """Block until every record written before the call has been handed to the callback."""
        deadline = time.monotonic() + timeout_s
        ends = self._ends_since_now(timeout_s)
        with self._cond:
            while any(self._positions.get(p, 0) < end for p, end in ends.items()):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return False
                self._cond.wait(min(remaining, 0.2))
        return True

    def _ends_since_now(self, timeout_s: float) -> dict[int, int]:
        """End offsets from a query that started after this call did, shared by every caller waiting.

        Why shared: each query asks the broker for every partition in turn (25 for an offsets topic), and
        a worker starting a thousand source tasks at once has each read the offsets topic to its end
        before ``start``, as Java's offset reader does. A query that started after a caller arrived
        answers with ends at or past everything written before that call, which is all it needs; one
        already running when it arrived may not, so it waits for the next, which one of the waiters
        starts. A thousand callers cost two or three queries instead of a thousand.
        """
        deadline = time.monotonic() + timeout_s
        with self._ends_cond:
            wanted = self._ends_started + 1
            while self._ends_done < wanted:
                if not self._ends_running:
                    self._ends_running = True
                    self._ends_started += 1
                    number = self._ends_started
                    break
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise KafkaLogError(f"could not read the end offsets of '{self.topic}' in time")
                self._ends_cond.wait(min(remaining, 0.2))
            else:
                return dict(self._ends_last)
        try:
            ends = self.end_offsets(max(0.1, deadline - time.monotonic()))
        except BaseException:
            with self._ends_cond:
                self._ends_running = False
                self._ends_cond.notify_all()
            raise
        with self._ends_cond:
            self._ends_running = False
            self._ends_done, self._ends_last = number, ends
            self._ends_cond.notify_all()
        return dict(ends)

    def send(
        self, key: bytes, value: bytes | None, timeout_s: float = 30.0, partition: int | None = None
    ) -> int:
        """Write one record and wait for its acknowledgement; returns its offset.

        Waits for this record alone, not for every record the producer holds: a status written without
        waiting (:meth:`send_async`) to a partition whose leader died must not hold a later write to
        another partition for ``timeout_s``."""
        done = threading.Event()
        result: dict[str, object] = {}

        def delivered(err: KafkaError | None, msg: object) -> None:
            result["err"] = err
            result["msg"] = msg
            done.set()

        kwargs: dict[str, object] = {"key": key, "value": value, "on_delivery": delivered}
        if partition is not None:
            kwargs["partition"] = partition
        self._producer.produce(self.topic, **kwargs)  # type: ignore[arg-type]
        deadline = time.monotonic() + timeout_s
        while not done.is_set():
            left = deadline - time.monotonic()
            if left <= 0:
                raise KafkaLogError(f"write to '{self.topic}' was not acknowledged within {timeout_s:.0f} s")
            self._producer.poll(min(left, 0.1))
        if result["err"] is not None:
            raise KafkaLogError(f"write to '{self.topic}' failed: {result['err']}")
        return int(result["msg"].offset())  # type: ignore[attr-defined]

    def send_async(self, key: bytes, value: bytes | None, what: str) -> None:
        """Write one record without waiting for it, as Java's status store writes (``KafkaBasedLog.send``
        with a callback): the herder reports a task stopped while a partition's leader is being elected,
        and waiting there held its thread past ``rebalance.timeout.ms`` so the worker left its group.

        The idempotent producer keeps records of one key in order and retries on its own until
        ``message.timeout.ms``; a record it gives up on is logged with ``what`` (never its value)."""

        def delivered(err: KafkaError | None, msg: object) -> None:
            if err is not None:
                log.warning("internal record not written", topic=self.topic, record=what, error=str(err))

        try:
            self._producer.produce(self.topic, key=key, value=value, on_delivery=delivered)
        except BufferError as exc:  # the local queue is full: the record is lost, so say so
            raise KafkaLogError(f"write to '{self.topic}' refused: {exc}") from exc
        self._producer.poll(0)

    def stop(self) -> None:
        """Stop the consuming thread and flush pending writes before closing the clients, so a write the
        worker already made is not dropped at shutdown."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        try:
            self._producer.flush(5)
        finally:
            if self._thread is not None and self._thread.is_alive():
                # Closed under the thread's poll, the client's freed handle would kill the process.
                log.warning("log thread did not stop in 5 s; its consumer is left open", topic=self.topic)
            else:
                self._consumer.close()
            self._retire(self._probe)
