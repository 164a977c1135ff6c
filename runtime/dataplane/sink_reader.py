"""One Kafka consumer that reads for every worker-placed sink task with the same client settings.

Why shared: a consumer is a librdkafka client with threads of its own that wake on timers and send a fetch
every ``fetch.wait.max.ms`` even when nothing arrives; a hundred idle sink tasks with a consumer each
spent about 0.04 cores doing nothing (measured: 50 idle consumers 0.019 cores). confluent-kafka also
takes a pthread TSS key per client and glibc allows 1,024 per process, so a consumer per task would cap a
worker near a thousand sink tasks (``producer_pool`` met that limit for source producers). One consumer
fetches for all of them and costs the same whether it reads one partition or a thousand.

How the tasks stay apart:

- Each task has an :class:`Inbox`; the reader's thread polls the consumer and appends each message to the
  inbox of the task its partition is assigned to. A task's thread waits on its own inbox only, so an
  idle task's thread sleeps until a record (or a stop) arrives.
- Every change to the consumer (assign, unassign, pause, resume) is a request run on the reader's thread
  between polls: librdkafka's consumer is not shared across threads here. The requests queued at a time
  run as one batch, after one metadata request for the topics new to the consumer among them, and a
  poll follows each batch: a burst of assignments (a worker taking its sink tasks home) must not hold
  the other tasks' records while a request per topic goes to the broker in turn.
- A task whose inbox holds more than ``INBOX_HIGH`` messages has its partitions paused until it has taken
  them below ``INBOX_LOW``: a slow task never fills the worker's memory nor holds up the others.
- A rewind (``SinkTaskContext.offset``) re-assigns the partition at the new offset; the reader then puts a
  marker in the inbox, and the task drops that partition's messages until it sees the marker, so nothing
  read before the rewind is delivered after it.
- Offsets are committed to each connector's own group (``connect-<connector>``) through the reader's admin
  client (the OffsetCommit a consumer that only assigns partitions sends), and read from it when a task
  starts; the shared consumer's own group never commits anything.
"""

from __future__ import annotations

import contextlib
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kconnect.runtime import logs
from kconnect.runtime.plugins.api import TopicPartition

log = logs.get(__name__)

#: Messages a task's inbox may hold before its partitions are paused, and the level that resumes them. A
#: pause drops what librdkafka prefetched for the partition and a resume fetches it again: at 5,000/1,000
#: a 400,000-line backlog moved at 9,146 records/s, at 50,000/20,000 at 75,564 (bench/dataplane.py). At
#: about 150 bytes a record a full inbox holds some 7 MB.
INBOX_HIGH = 50000
INBOX_LOW = 20000
#: How long one ``poll`` of the reader waits: the most a request (an assignment, a pause) waits for it.
POLL_S = 0.05
#: Messages taken from the consumer in one go after the first.
CONSUME_BATCH = 1000
#: The bound of the metadata request that tells the consumer of a topic new to it.
READ_METADATA_S = 10.0
#: How old cluster metadata may be when a task asks for its partitions (``list_topics``).
METADATA_MAX_AGE_S = 5.0
#: How often the reader's thread notes its consumer's positions (a local call) for the tasks' stall watch.
POSITIONS_S = 1.0
#: How old the log end offsets a reader's tasks share may be (one ListOffsets for all of them).
ENDS_MAX_AGE_S = 5.0
#: The shared consumer's own group id: only to satisfy librdkafka, nothing is committed to it.
READER_GROUP = "kconnect-sink-reader"
#: Consumer-only librdkafka keys an admin client made from consumer settings leaves out (it would warn).
_CONSUMER_ONLY_PREFIXES = (
    "fetch.",
    "auto.",
    "enable.auto.",
    "enable.partition.eof",
    "isolation.level",
    "queued.",
    "max.poll.interval.ms",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "partition.assignment.strategy",
    "group.",
    "check.crcs",
    "consume.callback.max.messages",
    "max.partition.fetch.bytes",
    "offset.store.method",
    "enable.auto.offset.store",
)


def reader_key(settings: Mapping[str, Any]) -> tuple[tuple[str, Any], ...]:
    """Equal settings, whatever their order, share a reader."""
    return tuple(sorted(settings.items()))


def admin_settings(consumer: Mapping[str, Any]) -> dict[str, Any]:
    """The settings of a consumer (connection, security) without the keys only consumers take."""
    return {k: v for k, v in consumer.items() if not k.startswith(_CONSUMER_ONLY_PREFIXES)}


@dataclass(frozen=True)
class Rewound:
    """Put in an inbox after its partition was re-assigned at ``offset``: what follows comes from there."""

    tp: TopicPartition
    offset: int


@dataclass(frozen=True)
class ReadError:
    """An error the consumer reported for one of the inbox's partitions."""

    tp: TopicPartition
    fatal: bool
    message: str


#: Group coordinator errors a consumer's own offset requests retry by themselves; an admin request does not.
_COORDINATOR_RETRIABLE = (
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "NOT_COORDINATOR",
    "REQUEST_TIMED_OUT",
)


#: The longest one attempt of a committed-offsets read waits before another consumer asks again.
COMMITTED_ATTEMPT_S = 10.0


class CommitFailed(Exception):
    """A partition of an offset commit answered with an error (``retriable``: the coordinator moved or is
    loading, as while a broker restarts or leadership moves)."""

    def __init__(self, message: str, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable


def _coordinator_retriable(error: object) -> bool:
    """Whether a client error names one of the coordinator errors that
    ``retried_on_coordinator_errors`` waits out."""
    return any(name in str(error) for name in _COORDINATOR_RETRIABLE)


def _attempt_timed_out(error: object) -> bool:
    """A coordinator error, or a bounded attempt's own local timeout (librdkafka's ``_TIMED_OUT``)."""
    return _coordinator_retriable(error) or "code=_TIMED_OUT" in str(error)


def retried_on_coordinator_errors(
    call: Callable[[], Any], timeout_s: float, retriable: Callable[[object], bool] = _coordinator_retriable
) -> Any:
    """``call`` again while the group's coordinator is loading or moving (a fresh broker answers
    COORDINATOR_LOAD_IN_PROGRESS for a while), as Java's consumer retries its offset requests, until
    ``timeout_s``; ``retriable`` judges a client error (a :class:`CommitFailed` says so itself)."""
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return call()
        except (KafkaException, CommitFailed) as exc:
            # A commit's partition error was judged on that error alone, not on a message that also
            # carries the group's and topic's names.
            again = exc.retriable if isinstance(exc, CommitFailed) else retriable(exc)
            if not again or time.monotonic() + 0.2 >= deadline:
                raise
            time.sleep(0.2)


def group_committed(
    conf: Mapping[str, Any], partitions: Iterable[tuple[str, int]], timeout_s: float
) -> dict[tuple[str, int], int]:
    """The offsets the group ``conf`` names committed for ``partitions`` (those without one left out), read
    by a consumer that never subscribes nor commits, asked again while the group's coordinator moves
    (:func:`retried_on_coordinator_errors`). A consumer, not the admin client: librdkafka (2.16;
    confluentinc/librdkafka#5040) handles an admin ListConsumerGroupOffsets answered NOT_COORDINATOR by
    asking the client's consumer group, which an admin client does not have, and dereferences NULL."""
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    asked = [KafkaTopicPartition(topic, partition) for topic, partition in partitions]
    deadline = time.monotonic() + timeout_s

    def once() -> list[Any]:
        # Each attempt is bounded and asks through a new consumer, so a new coordinator lookup: one attempt
        # given the whole timeout spent it on NOT_COORDINATOR answers while the group's coordinator moved
        # (``make faults``, 2026-11-29: a restarted sink task found no partitions for 150 s).
        attempt = min(COMMITTED_ATTEMPT_S, max(0.5, deadline - time.monotonic()))
        consumer = Consumer(dict(conf))
        try:
            return list(consumer.committed(asked, timeout=attempt))
        finally:
            consumer.close()

    found = retried_on_coordinator_errors(once, timeout_s, _attempt_timed_out)
    return {(tp.topic, tp.partition): tp.offset for tp in found if tp.offset >= 0 and tp.error is None}


class Claims:
    """Which connectors' tasks a reader serves, and which topics each reads there: a consumer reads a
    partition at one position, so a topic is read on a reader for one connector only (its tasks share the
    topic's partitions between them); a ``topics.regex`` connector, whose topics are known only later,
    has a reader to itself."""

    def __init__(self) -> None:
        self.topics: dict[str, str] = {}
        self.tasks: dict[str, int] = {}
        self.exclusive: str | None = None

    @property
    def users(self) -> int:
        return sum(self.tasks.values())

    def fits(self, connector: str, topics: set[str] | None) -> bool:
        """Whether a task of ``connector`` reading ``topics`` (None: a pattern) may read here."""
        if self.exclusive is not None:
            return self.exclusive == connector
        if topics is None:
            return not self.tasks or set(self.tasks) == {connector}
        return all(self.topics.get(t, connector) == connector for t in topics)

    def claim(self, connector: str, topics: set[str] | None) -> None:
        self.tasks[connector] = self.tasks.get(connector, 0) + 1
        if topics is None:
            self.exclusive = connector
        else:
            self.topics.update(dict.fromkeys(topics, connector))

    def unclaim(self, connector: str) -> None:
        self.tasks[connector] -= 1
        if self.tasks[connector] == 0:
            del self.tasks[connector]
            self.topics = {t: c for t, c in self.topics.items() if c != connector}
            if self.exclusive == connector:
                self.exclusive = None


class Inbox:
    """One task's share of the reader: the messages read for its partitions, in order per partition."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.cond = threading.Condition()
        self.items: deque[Any] = deque()
        #: Set by the reader when it paused this inbox's partitions (touched on the reader's thread only).
        self.paused = False
        self.partitions: set[TopicPartition] = set()
        self.closed = False

    def put(self, item: Any) -> None:
        with self.cond:
            self.items.append(item)
            self.cond.notify()

    def take(self, limit: int, timeout_s: float) -> list[Any]:
        """Up to ``limit`` items, waiting at most ``timeout_s`` for the first."""
        with self.cond:
            if not self.items:
                self.cond.wait(timeout_s)
            n = min(limit, len(self.items))
            return [self.items.popleft() for _ in range(n)]

    def wake(self) -> None:
        """Cut a ``take`` short (a stop, a pause)."""
        with self.cond:
            self.cond.notify_all()

    def __len__(self) -> int:
        return len(self.items)


class SinkReader:
    """A consumer and an admin client shared by the sink tasks whose consumer settings are equal."""

    def __init__(self, settings: Mapping[str, Any], name: str) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka.admin import AdminClient

        self.name = name
        self.key = reader_key(settings)
        #: Which connectors' tasks read here (the pool's bookkeeping, under its lock).
        self.claims = Claims()
        self._metadata_lock = threading.Lock()
        self._metadata: tuple[float, Any] = (0.0, None)
        self._requests: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()
        #: Topics new to the consumer whose metadata assignments queued for the reader's thread want
        #: (``assign``; looked up together by ``_learn_topics``).
        self._wanted_lock = threading.Lock()
        self._wanted: set[str] = set()
        self._owners: dict[TopicPartition, Inbox] = {}
        #: Where each partition was assigned from (a concrete offset, or librdkafka's logical one).
        self._starts: dict[TopicPartition, int] = {}
        #: The consumer's positions, noted by the reader's thread every ``POSITIONS_S`` (read by tasks).
        self._positions: dict[TopicPartition, int] = {}
        self._positions_at = 0.0
        self._ends_lock = threading.Lock()
        self._ends: dict[TopicPartition, tuple[float, int]] = {}
        self._ends_asked_at = -1e9
        self._isolation = str(settings.get("isolation.level", "read_committed")).lower()
        self._stop = threading.Event()
        conf: dict[str, Any] = {
            # Without it librdkafka pauses a partition's fetching for a second whenever its prefetch queue
            # is full, which a backlog read in batches reaches.
            "fetch.queue.backoff.ms": 10,
            # A partition assigned while a fetch to its broker waits for data is fetched only once that
            # fetch returns: with the default 500 ms long poll a task moved here waited about a second for
            # its first record (bench/handover.py). One consumer polling a broker ten times a second when
            # idle costs next to nothing; a task's own setting (consumer.fetch.max.wait.ms) still wins.
            "fetch.wait.max.ms": 100,
            **settings,
            "client.id": name,
            "group.id": READER_GROUP,
            "enable.auto.commit": False,
            "enable.auto.offset.store": False,
        }
        self._conf = conf
        self._consumer = Consumer(conf)
        #: Times the consumer was replaced by a fresh one (``rebuild``).
        self.rebuilds = 0
        self._admin = AdminClient({**admin_settings(settings), "client.id": f"{name}-admin"})
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    # --- called from task threads

    def request(self, change: Callable[[], None]) -> threading.Event:
        """Run ``change`` on the reader's thread; the event is set once it ran."""
        done = threading.Event()

        def run() -> None:
            try:
                change()
            finally:
                done.set()

        self._requests.put(run)
        return done

    def assign(self, inbox: Inbox, offsets: Mapping[TopicPartition, int], rewind: bool = False) -> None:
        """Read ``offsets``' partitions for ``inbox`` from those offsets (librdkafka's logical offsets
        ``OFFSET_BEGINNING``/``OFFSET_END`` included); with ``rewind``, partitions it reads already are
        re-assigned and a :class:`Rewound` marker follows in the inbox."""
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        def change() -> None:
            # The metadata of a topic new to the consumer was asked for before this ran (``_learn_topics``).
            # A partition read for another inbox is taken over: that inbox's task is stopping (or was
            # abandoned past task.shutdown.graceful.timeout.ms) and its unassign may come after this
            # assignment. librdkafka refuses to assign a partition twice (_CONFLICT), so without the
            # take-over the new task's assignment failed and the old one's unassign then removed the
            # partition: the new task ran, RUNNING, and read nothing (issue 29).
            again = [tp for tp in offsets if tp in self._owners]
            for tp in again:
                previous = self._owners.pop(tp)
                previous.partitions.discard(tp)
            if again:
                self._consumer.incremental_unassign(
                    [KafkaTopicPartition(t.topic, t.partition) for t in again]
                )
            self._consumer.incremental_assign(
                [KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()]
            )
            for tp, offset in offsets.items():
                self._owners[tp] = inbox
                self._starts[tp] = offset
                self._positions.pop(tp, None)
                inbox.partitions.add(tp)
                if inbox.paused:
                    self._consumer.pause([KafkaTopicPartition(tp.topic, tp.partition)])
            if rewind:
                for tp, offset in offsets.items():
                    inbox.put(Rewound(tp, offset))

        with self._wanted_lock:  # before the request is queued: its batch looks these up first
            self._wanted.update(tp.topic for tp in offsets)
        self.request(change)

    def unassign(self, inbox: Inbox, partitions: Iterable[TopicPartition]) -> threading.Event:
        """Stop reading ``partitions`` for ``inbox``."""
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        gone = list(partitions)

        def change() -> None:
            mine = [tp for tp in gone if self._owners.get(tp) is inbox]
            for tp in mine:
                del self._owners[tp]
                self._starts.pop(tp, None)
                self._positions.pop(tp, None)
                inbox.partitions.discard(tp)
            if mine:
                self._consumer.incremental_unassign([KafkaTopicPartition(t.topic, t.partition) for t in mine])

        return self.request(change)

    def reseek(self, inbox: Inbox, offsets: Mapping[TopicPartition, int]) -> threading.Event:
        """Re-establish the reading of ``inbox``'s partitions at ``offsets`` (the stall watchdog's action,
        ``stall_watch``): each is unassigned and assigned again at its offset, which drops whatever the
        consumer held for it (a fetch position, a back-off, a leader it waits for) and makes librdkafka
        look the partition up afresh. The offsets are where the task's reading stands, so nothing is read
        twice or skipped. A partition the reader does not read for the inbox (lost to a failed request, held
        by another inbox) is assigned to it, as ``assign`` does."""
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        def change() -> None:
            held = [KafkaTopicPartition(tp.topic, tp.partition) for tp in offsets if tp in self._owners]
            if held:
                self._consumer.incremental_unassign(held)
            self._consumer.incremental_assign(
                [KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()]
            )
            for tp, offset in offsets.items():
                previous = self._owners.get(tp)
                if previous is not None and previous is not inbox:
                    previous.partitions.discard(tp)
                self._owners[tp] = inbox
                inbox.partitions.add(tp)
                self._starts[tp] = offset
                self._positions.pop(tp, None)
            if inbox.paused:
                self._consumer.pause([KafkaTopicPartition(tp.topic, tp.partition) for tp in offsets])

        return self.request(change)

    def rebuild(self, inbox: Inbox, offsets: Mapping[TopicPartition, int]) -> threading.Event:
        """Replace the consumer by a fresh one (the stall watchdog's second step, when a re-seek did not
        bring ``inbox``'s reading back): new connections, new metadata, no fetcher state carried over.
        Every partition of the reader is assigned again where its reading stands (the old consumer's
        position, which is past everything already handed to an inbox), ``offsets`` for ``inbox``'s (taken
        over if another inbox held them, as ``assign`` does); paused inboxes stay paused. The old consumer
        is closed on a thread of its own: a consumer stuck on a connection may take long to close."""
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        def change() -> None:
            old = self._consumer
            where: dict[TopicPartition, int] = {}
            owned = [KafkaTopicPartition(t.topic, t.partition) for t in self._owners]
            try:
                noted = old.position(owned) if owned else []
            except Exception:  # the positions noted last serve then
                noted = []
            for tp in self._owners:
                where[tp] = self._starts.get(tp, -1)
            for t in noted:
                if t.offset >= 0:
                    where[TopicPartition(t.topic, t.partition)] = t.offset
            for tp, offset in offsets.items():
                previous = self._owners.get(tp)
                if previous is not None and previous is not inbox:
                    previous.partitions.discard(tp)
                self._owners[tp] = inbox
                inbox.partitions.add(tp)
                where[tp] = offset
            self._consumer = Consumer(self._conf)
            self.rebuilds += 1
            threading.Thread(target=old.close, name=f"{self.name}-close", daemon=True).start()
            if where:
                self._consumer.incremental_assign(
                    [KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in where.items()]
                )
            self._starts.update(where)
            self._positions = {}
            paused = [
                KafkaTopicPartition(tp.topic, tp.partition) for tp, box in self._owners.items() if box.paused
            ]
            if paused:
                self._consumer.pause(paused)

        return self.request(change)

    def positions(self, inbox: Inbox) -> dict[TopicPartition, int]:
        """Where the reading of each partition the reader reads for ``inbox`` stands: the next offset the
        consumer hands it (noted every ``POSITIONS_S``), else the offset it was assigned from; a partition
        assigned at a logical offset and not read yet is left out (its position is not known)."""
        out: dict[TopicPartition, int] = {}
        for tp in set(inbox.partitions):
            position = self._positions.get(tp)
            if position is None or position < 0:
                position = self._starts.get(tp)
            if position is not None and position >= 0:
                out[tp] = position
        return out

    def ends(self, partitions: Iterable[TopicPartition]) -> dict[TopicPartition, int]:
        """The log end offsets of ``partitions`` known now (the last stable offset under ``read_committed``,
        the consumer's default, which a reader never passes), from a ListOffsets of the admin client, not
        the consumer's cached watermarks (a stalled fetcher's cache is as stale as its position).

        Never waits: answers what is known and, when that is older than ``ENDS_MAX_AGE_S``, asks again for
        every partition of the reader in one request whose answers arrive for a later call (a task's
        thread must not wait on a broker that is down). A partition whose end is not known (its leader
        down) is left out; an older answer serves until a newer one comes (an end only grows)."""
        from confluent_kafka import IsolationLevel
        from confluent_kafka import TopicPartition as KafkaTopicPartition
        from confluent_kafka.admin import OffsetSpec

        wanted = set(partitions)
        with self._ends_lock:
            now = time.monotonic()
            known = {tp: self._ends[tp][1] for tp in wanted if tp in self._ends}
            stale = any(now - self._ends.get(tp, (-1e9, 0))[0] > ENDS_MAX_AGE_S for tp in wanted)
            if not stale or now - self._ends_asked_at <= ENDS_MAX_AGE_S:
                return known
            self._ends_asked_at = now
        # Asked outside the lock: a future that is done already runs its callback at once, which takes it.
        ask = wanted | set(self._owners)
        level = (
            IsolationLevel.READ_UNCOMMITTED
            if self._isolation == "read_uncommitted"
            else IsolationLevel.READ_COMMITTED
        )
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]  # untyped in confluent-kafka
        request = {KafkaTopicPartition(tp.topic, tp.partition): latest for tp in ask}
        try:
            futures = self._admin.list_offsets(
                request, isolation_level=level, request_timeout=READ_METADATA_S
            )
        except Exception as exc:
            log.info("sink reader: end offsets not asked", reader=self.name, error=str(exc))
            futures = {}
        for ktp, future in futures.items():
            future.add_done_callback(self._noted_end(TopicPartition(ktp.topic, ktp.partition), now))
        return known

    def _noted_end(self, tp: TopicPartition, asked_at: float) -> Callable[[Any], None]:
        def noted(future: Any) -> None:
            try:
                offset = int(future.result().offset)
            except Exception:  # its leader down or moving: no evidence this time
                return
            with self._ends_lock:
                if asked_at >= self._ends.get(tp, (-1e9, 0))[0]:
                    self._ends[tp] = (asked_at, offset)

        return noted

    def drained(self, inbox: Inbox) -> None:
        """The task took its inbox below ``INBOX_LOW``: resume its partitions if they were paused."""
        if inbox.paused and len(inbox) <= INBOX_LOW:
            self.request(lambda: self._pause(inbox, False))

    def committed(
        self, group: str, partitions: Iterable[TopicPartition], timeout_s: float
    ) -> dict[TopicPartition, int]:
        """The group's committed offsets of ``partitions`` (partitions without one are left out).

        Through :func:`group_committed` (a consumer of ``group``, not the admin client): a worker died of
        librdkafka#5040 (SIGSEGV, no Python stack) when a connector group's coordinator broker was SIGKILLed
        under ``bench/brokers_random.py`` (issue 29)."""
        conf = {**self._conf, "group.id": group, "client.id": f"{self.name}-committed"}
        asked = [(tp.topic, tp.partition) for tp in partitions]
        found = group_committed(conf, asked, timeout_s) if asked else {}
        return {TopicPartition(topic, partition): offset for (topic, partition), offset in found.items()}

    def commit(self, group: str, offsets: Mapping[TopicPartition, int], timeout_s: float) -> None:
        """Commit ``offsets`` to the group, as a consumer that only assigns partitions does; asked again
        while the group's coordinator moves or loads, until ``timeout_s``; raises :class:`CommitFailed` or
        the client's error past that."""
        from confluent_kafka import ConsumerGroupTopicPartitions
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        tps = [KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()]
        request = [ConsumerGroupTopicPartitions(group, tps)]

        def once() -> None:
            answer = self._admin.alter_consumer_group_offsets(request)[group].result(timeout_s)
            for tp in answer.topic_partitions or []:
                if tp.error is not None:
                    text = f"committing {tp.topic}-{tp.partition} to group {group}: {tp.error}"
                    raise CommitFailed(text, _coordinator_retriable(tp.error))

        retried_on_coordinator_errors(once, timeout_s)

    def list_topics(self, timeout_s: float) -> Any:
        """Cluster metadata, from the admin client: only the reader's own thread calls the consumer (a
        ``list_topics`` from another thread waited behind its polls for good). An answer younger than
        ``METADATA_MAX_AGE_S`` serves every task of the reader: a hundred tasks each looking for new
        partitions every ten seconds would otherwise ask ten times a second."""
        with self._metadata_lock:
            taken_at, metadata = self._metadata
            if metadata is None or time.monotonic() - taken_at > METADATA_MAX_AGE_S:
                metadata = self._admin.list_topics(timeout=timeout_s)
                self._metadata = (time.monotonic(), metadata)
            return metadata

    def close(self) -> None:
        """Stop the reader's thread, then close its consumer; a thread still inside the consumer after
        10 s keeps it open (closed under a thread in a librdkafka call, the client's freed handle kills
        the process with SIGSEGV), and the consumer is left to the garbage collector."""
        self._stop.set()
        self._thread.join(10)
        if self._thread.is_alive():
            log.warning(
                "sink reader's thread did not stop in 10 s; its consumer is left open", reader=self.name
            )
            return
        self._consumer.close()

    # --- the reader's thread

    def _learn_topics(self) -> None:
        """Ask the broker for the metadata of the topics new to the consumer that the queued assignments
        read, in one request: one topic's alone, several topics' with every topic's (the client asks for
        one topic or all).

        Why: librdkafka learns a topic new to the consumer from a metadata request it schedules itself,
        half a second or more after the assignment (measured); asking for it first saves that wait. Asked
        once per topic, on this thread, between polls, a burst of assignments held every task of the reader
        without a record for as long as the requests took one after another: bench/rolling.py at 5 x 200
        (2026-11-29 10:18), a worker back from its restart took its 80 sink tasks home within 2 s and its
        reader, asking for 80 topics in turn, polled nothing for 2.6 s, the longest gaps of the whole roll
        (all 30 longest were such sinks: 1.4-3 s from their loop running to their first record). Only a
        saving: while a broker is down the request may time out, and the assignments happen all the same
        (a raise there left a task believing it read a partition nobody read)."""
        with self._wanted_lock:
            wanted, self._wanted = self._wanted, set()
        new = sorted(wanted - {tp.topic for tp in self._owners})
        if not new:
            return
        try:
            self._consumer.list_topics(topic=new[0] if len(new) == 1 else None, timeout=READ_METADATA_S)
        except Exception as exc:
            log.info("sink reader: metadata of new topics not read", topics=len(new), error=str(exc))

    def _pause(self, inbox: Inbox, paused: bool) -> None:
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        if inbox.paused == paused:
            return
        inbox.paused = paused
        tps = [KafkaTopicPartition(tp.topic, tp.partition) for tp in inbox.partitions]
        if tps:
            (self._consumer.pause if paused else self._consumer.resume)(tps)

    def _note_positions(self) -> None:
        """Note the consumer's positions for the tasks' stall watch, at most every ``POSITIONS_S``."""
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        now = time.monotonic()
        if now - self._positions_at < POSITIONS_S or not self._owners:
            return
        self._positions_at = now
        try:
            noted = self._consumer.position([KafkaTopicPartition(t.topic, t.partition) for t in self._owners])
        except Exception as exc:  # a diagnostic only: the watch then goes by the assigned offsets
            log.debug("sink reader: positions not read", reader=self.name, error=str(exc))
            return
        self._positions = {
            TopicPartition(tp.topic, tp.partition): tp.offset for tp in noted if tp.offset >= 0
        }

    def _run(self) -> None:
        from confluent_kafka import KafkaError

        while not self._stop.is_set():
            batch: list[Callable[[], None]] = []
            with contextlib.suppress(queue.Empty):
                while True:
                    batch.append(self._requests.get_nowait())
            if batch:
                self._learn_topics()
            for change in batch:
                try:
                    change()
                except Exception as exc:  # a request the consumer refused: its task sees nothing arrive
                    log.warning("sink reader request failed", reader=self.name, error=str(exc))
            self._note_positions()
            # Requests queued meanwhile wait for one poll that returns at once, not for the long one.
            first = self._consumer.poll(0 if not self._requests.empty() else POLL_S)
            if first is None:
                continue
            messages = [first, *self._consumer.consume(num_messages=CONSUME_BATCH, timeout=0)]
            read: dict[Inbox, list[Any]] = {}
            for m in messages:
                error = m.error()
                topic, partition = m.topic(), m.partition()
                tp = TopicPartition(topic, partition) if topic is not None and partition is not None else None
                inbox = self._owners.get(tp) if tp is not None else None
                if error is not None:
                    fatal = error.fatal() or error.code() == KafkaError._AUTO_OFFSET_RESET
                    if inbox is not None and tp is not None:
                        inbox.put(ReadError(tp, fatal, error.str()))
                    else:
                        log.warning("sink reader: consumer error; the client retries", error=error.str())
                    continue
                if inbox is None:
                    continue  # a partition given up since it was fetched
                read.setdefault(inbox, []).append(m)
            for inbox, batch in read.items():
                with inbox.cond:
                    inbox.items.extend(batch)
                    inbox.cond.notify()
                if not inbox.paused and len(inbox) > INBOX_HIGH:
                    self._pause(inbox, True)


class SinkReaders:
    """The worker's sink readers, reference-counted: made by the first task that needs one, closed when
    the last one lets it go. Tasks share a reader when their consumer settings are equal and their topics
    fit (:class:`Claims`); a connector that sinks a topic another one reads on every reader gets a new one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._readers: dict[tuple[tuple[str, Any], ...], list[SinkReader]] = {}
        self._count = 0

    def acquire(
        self, settings: Mapping[str, Any], connector: str, topics: Iterable[str] | None
    ) -> SinkReader:
        """A reader for a task of ``connector`` reading ``topics`` (None: a pattern)."""
        key = reader_key(settings)
        wanted = None if topics is None else set(topics)
        with self._lock:
            readers = self._readers.setdefault(key, [])
            reader = next((r for r in readers if r.claims.fits(connector, wanted)), None)
            if reader is None:
                self._count += 1
                reader = SinkReader(settings, f"kconnect-sink-reader-{self._count}")
                readers.append(reader)
                log.info("shared sink reader created", reader=reader.name, readers=len(self))
            reader.claims.claim(connector, wanted)
            return reader

    def release(self, reader: SinkReader, connector: str) -> None:
        with self._lock:
            reader.claims.unclaim(connector)
            last = reader.claims.users == 0
            readers = self._readers.get(reader.key, [])
            if last and reader in readers:
                readers.remove(reader)
                if not readers:
                    del self._readers[reader.key]
        if last:
            reader.close()
            log.info("shared sink reader closed", reader=reader.name)

    def __len__(self) -> int:
        return sum(len(r) for r in self._readers.values())
