"""A source task as a poll loop on the driver: records from the task's ``poll`` to Kafka, their source
offsets to the offsets topic once Kafka has every record before them.

Source tasks pass through Spark only when the connector has transforms: ``SourceTask.poll`` is
driver-side user code (it reads files, sockets, APIs on this machine) and its records must be produced in
poll order with their source offsets tracked per record. Their keys and values are encoded with the
configured converters (``source_encoding``); with transforms, each poll batch then goes through the chain
as one frame (``source_batch``), and records the chain drops are acknowledged with
``commit_record(record, None)`` and their offsets committed. They are produced with an idempotent
confluent-kafka producer, on a worker one shared by every task with the same producer settings
(``producer_pool``: a process holds only about 1,000 Kafka clients), and their source offsets are
written to the offsets topic every ``offset.flush.interval.ms`` and on stop, only after the task's own
records before them were acknowledged. With ``exactly.once.source.support=enabled`` a transactional
producer of the task's own carries records and offsets in one transaction per boundary instead (KIP-618;
``exactly_once``).

The decision of which offsets to write (:func:`latest_source_offsets`) is a pure function at the top.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kconnect.runtime.dataplane.connect_data import ConnectDataError
from kconnect.runtime.dataplane.errors_policy import ERROR_MESSAGE
from kconnect.runtime.dataplane.exactly_once import (
    ExactlyOnce,
    TaskTransactionContext,
    TransactionBoundary,
    commit_due,
    connector_boundaries,
    producer_settings,
)
from kconnect.runtime.dataplane.producer_pool import ProducerPool, TaskProducer
from kconnect.runtime.dataplane.sink_batch import tolerance_message
from kconnect.runtime.dataplane.source_batch import raw_row, source_plan, transform_batch
from kconnect.runtime.dataplane.source_encoding import source_encoder
from kconnect.runtime.dataplane.task_runner import TaskRunner, produce
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import ConnectorError, SourceRecord, SourceTask
from kconnect.runtime.plugins.plugin_metrics import PluginMetrics, PluginMetricsRegistry
from kconnect.runtime.storage.kafka_log import KafkaLogError
from kconnect.runtime.storage.offset_log import OffsetMap, OffsetState, SourceOffset, partition_json
from kconnect.runtime.storage.offset_log import encode as encode_offset


def latest_source_offsets(connector: str, records: Sequence[SourceRecord]) -> list[SourceOffset]:
    """The offsets-topic records for a run of produced records: the last offset per source partition, in
    the order of those last records.

    Paid once per offset flush for every record produced since the last one, so it walks backwards and
    builds (and validates) a ``SourceOffset`` only for each partition's last record; a partition map
    object seen before (tasks usually reuse one per partition) is not keyed again.
    """
    latest: dict[object, SourceOffset] = {}
    keys: dict[int, object] = {}  # id(partition map) -> its key; the records keep the maps alive
    for record in reversed(records):
        if record.source_offset is None:
            continue
        partition: OffsetMap | None = record.source_partition
        key = keys.get(id(partition), _UNKEYED)
        if key is _UNKEYED:
            key = keys[id(partition)] = _partition_key(partition)
        if key not in latest:
            latest[key] = SourceOffset(connector, partition, record.source_offset)
    return list(reversed(latest.values()))


def merge_source_offsets(older: Sequence[SourceOffset], newer: Sequence[SourceOffset]) -> list[SourceOffset]:
    """Offsets a failed write left behind (``older``) joined with the next flush's: one per source
    partition, the newer winning, as Java's OffsetStorageWriter merges a cancelled flush back."""
    merged: dict[object, SourceOffset] = {}
    for offset in (*older, *newer):
        key = _partition_key(offset.partition)
        merged.pop(key, None)  # a partition moves to where its newest offset stands
        merged[key] = offset
    return list(merged.values())


_UNKEYED = object()


def _partition_key(partition: OffsetMap | None) -> object:
    """A cheap identity for a source partition, paid per produced record: its sorted items when they are
    hashable (the common flat map of strings and numbers), else its canonical JSON. The two spellings
    never collide: one is a tuple, the other a string."""
    if partition is None:
        return None
    try:
        key = tuple(sorted(partition.items()))
        hash(key)
    except TypeError:
        return partition_json(partition)
    return key


def _produce_kwargs(
    partition: int | None, timestamp: int | None, headers: list[tuple[str, bytes | None]]
) -> dict[str, Any]:
    """``produce``'s optional arguments for one record: only those it has (a fresh dict per record, as
    the caller adds its ``on_delivery``)."""
    kwargs: dict[str, Any] = {}
    if partition is not None:
        kwargs["partition"] = partition
    if timestamp is not None:
        kwargs["timestamp"] = timestamp
    if headers:
        kwargs["headers"] = headers
    return kwargs


#: What the producer is given for one record: topic, key, value and ``produce`` keyword arguments.
Outgoing = tuple[str, bytes | None, bytes | None, dict[str, Any]]


def _no_spark() -> Any:
    raise ConnectorError("no SparkSession for this task")


# --- source


class _Submitted:
    """The records of one poll on their way to Kafka, and how many of them are not acknowledged yet
    (records skipped or dropped before producing are not counted: nothing will acknowledge them)."""

    __slots__ = ("pending", "records")

    def __init__(self, records: list[SourceRecord]) -> None:
        self.records = records
        self.pending = 0


class _OffsetReader:
    def __init__(self, connector: str, offsets: Callable[[], OffsetState]) -> None:
        self._connector = connector
        self._offsets = offsets

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self._offsets().offset(self._connector, partition)

    def offsets(
        self, partitions: Iterable[Mapping[str, Any]]
    ) -> list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
        state = self._offsets()
        return [(p, state.offset(self._connector, p)) for p in partitions]


class _SourceContext:
    def __init__(
        self,
        config: Mapping[str, str],
        reader: _OffsetReader,
        metrics: PluginMetrics,
        transactions: TaskTransactionContext | None,
        spark: Callable[[], Any] = _no_spark,
    ) -> None:
        self._config = config
        self._reader = reader
        self._metrics = metrics
        self._transactions = transactions
        self._spark = spark

    def spark_session(self) -> Any:
        """The worker's SparkSession (started by the first caller), for a task that reads its input with
        Spark (the JDBC source's bulk loads); ConnectorError where the task runs without one (an executor).
        Not part of ``SourceTaskContext``: a task looks it up with ``getattr`` and does without."""
        return self._spark()

    def configs(self) -> Mapping[str, str]:
        return self._config

    @property
    def offset_storage_reader(self) -> _OffsetReader:
        return self._reader

    def plugin_metrics(self) -> PluginMetrics:
        return self._metrics

    def transaction_context(self) -> TaskTransactionContext | None:
        return self._transactions


class SourceTaskRunner(TaskRunner):
    """One source task: a poll loop on the driver that produces each record to Kafka and writes the
    source offsets of what Kafka acknowledged to the offsets topic.

    Why on the driver and not in Spark: ``poll`` is the task's own code reading this machine's files,
    sockets or APIs, in order; Spark serves only the connector's transforms. Why offsets wait for
    acknowledgements: a restarted task resumes after the last stored offset, so an offset must never be
    stored ahead of a record Kafka does not have. With exactly-once support, records and offsets go in
    one transaction instead.
    """

    def __init__(
        self,
        task_id: TaskId,
        task: SourceTask,
        config: Mapping[str, str],
        on_failure: Callable[[TaskId, str], None],
        *,
        bootstrap: str,
        converters: Mapping[str, str],
        producer_settings: Mapping[str, str],
        read_offsets: Callable[[], OffsetState],
        write_offsets: Callable[[list[SourceOffset]], None],
        flush_interval_ms: int,
        flush_timeout_ms: int,
        exactly_once: ExactlyOnce | None = None,
        sync_offsets: Callable[[], OffsetState] | None = None,
        fence: Callable[[str], None] | None = None,
        spark: Callable[[], Any] | None = None,
        plugin_metrics: PluginMetricsRegistry | None = None,
        on_running: Callable[[TaskId], None] | None = None,
        producers: ProducerPool | None = None,
    ) -> None:
        super().__init__(task_id, task, config, on_failure, plugin_metrics, on_running)
        self.source: SourceTask = task
        #: The worker's shared producers (``producer_pool``): a non-transactional task produces through
        #: the one for its settings instead of a producer of its own. None: a producer of its own (a
        #: Spark task runs one task).
        self._producers = producers
        #: Set when the worker has exactly.once.source.support=enabled: records and offsets go to Kafka
        #: in one transaction per boundary (``exactly_once``), and ``run`` starts the task after fencing.
        self.eos = exactly_once
        self.run_starts_task = exactly_once is not None
        self._sync_offsets = sync_offsets
        self._fence = fence
        self._open: list[SourceRecord] = []  # records of the open transaction, in poll order
        self._acks: dict[int, Any] = {}  # index in _open -> delivery metadata
        self._in_transaction = False
        self._begun = 0.0  # monotonic time the open transaction began
        #: Bumped when a transaction is aborted: delivery reports of its records (librdkafka purges those
        #: still queued, with an error) are then ignored rather than failing the task or landing in _acks.
        self._generation = 0
        #: The task's TransactionContext: only with exactly-once and transaction.boundary=connector (Java
        #: hands out null otherwise, and so does ``transaction_context()``).
        self._transactions = (
            TaskTransactionContext()
            if exactly_once is not None and exactly_once.policy.boundary is TransactionBoundary.CONNECTOR
            else None
        )
        self._bootstrap = bootstrap
        self._converters = dict(converters)
        self._encoder = source_encoder(self._converters, config)
        #: Transforms and predicates, through Spark (None without transforms: no Spark at all).
        self._plan = source_plan(self._encoder, config, task_id.connector, task_id.task)
        if self._plan is not None and spark is None:
            raise ConnectorError("transforms on source records need the Spark data plane")
        self._spark: Callable[[], Any] = spark if spark is not None else _no_spark
        self._producer_settings = dict(producer_settings)
        self._write_offsets = write_offsets
        self._flush_interval_s = flush_interval_ms / 1000
        self._flush_timeout_s = flush_timeout_ms / 1000
        #: The shared producer's handle a preparation took (:meth:`prepare`), until ``run`` takes it.
        self._warm_producer: TaskProducer | None = None
        #: Each poll's records in poll order, with how many are still unacknowledged.
        self._submitted: deque[_Submitted] = deque()
        #: The committer thread (non-transactional tasks, while running) and its write under way.
        self._committer: ThreadPoolExecutor | None = None
        self._storing: Future[None] | None = None
        #: Offsets whose write failed (the offsets topic's leader moving, a write not acknowledged in
        #: time): written again, merged with newer ones, by the next flush. Java cancels such a flush and
        #: retries it too; the task runs on.
        self._unstored: list[SourceOffset] = []
        self._delivery_error: str | None = None
        self._hears_acks = type(task).commit_record is not SourceTask.commit_record
        #: Topics of records Kafka acknowledged since the last look (KIP-558 tracking, when on): Java
        #: records a source task's topic from the producer's callback, under the topic it was sent to.
        self._acked_topics: set[str] = set()
        try:
            self.monitor_converters(self._encoder.key_converter, self._encoder.value_converter)
            reader = _OffsetReader(task_id.connector, read_offsets)
            self.source.initialize(
                _SourceContext(self.config, reader, self.plugin_metrics, self._transactions, self._spark)
            )
        except BaseException:
            self.close_plugin_metrics()
            raise

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is not None and self._delivery_error is None:
            self._delivery_error = f"producing to {message.topic()} failed: {error}"

    def _batch_callback(self, batch: _Submitted) -> Callable[[Any, Any], None]:
        """The producer callback for the records of one poll: count each acknowledgement, note a failure."""

        acked = self._acked_topics if self.active_topics is not None else None

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                batch.pending -= 1
                if acked is not None:
                    acked.add(message.topic())
            else:
                self._on_delivery(error, message)

        return delivered

    def _delivery_callback(self, batch: _Submitted, record: SourceRecord) -> Callable[[Any, Any], None]:
        """The producer callback for one record of a task that hears of each: count it, note a failure,
        or tell the task Kafka has it.

        Java's WorkerSourceTask calls ``commitRecord(record, metadata)`` from the producer's callback
        once a record is acknowledged; tasks that report what reached Kafka (the verifiable source)
        rely on it. The callback runs inside ``producer.poll``/``flush`` on this task's own thread.
        """

        acked = self._acked_topics if self.active_topics is not None else None

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                batch.pending -= 1
                if acked is not None:
                    acked.add(message.topic())
                self._tell_task(record, message)
            else:
                self._on_delivery(error, message)

        return delivered

    def _send(self, producer: Any, records: list[SourceRecord]) -> None:
        batch = _Submitted(records)
        self._submitted.append(batch)
        # A closure per record only for tasks that want to hear of each acknowledgement.
        each = None if self._hears_acks else self._batch_callback(batch)
        for record, out in self._prepare(records):
            if out is None:
                # Skipped on an error (errors.tolerance=all) or dropped by the chain: Java tells the task
                # at once and still commits the record's offset.
                self._tell_task(record, None)
                continue
            topic, key, value, kwargs = out
            kwargs["on_delivery"] = each or self._delivery_callback(batch, record)
            batch.pending += 1
            produce(producer, topic, key, value, kwargs)
        self.counters.records += len(records)

    def _flush(self, producer: Any, final: bool = False) -> None:
        """Commit the source offsets of the records acknowledged so far, polls in order: up to the first
        poll that still has a record on its way (Java's SubmittedRecords rule), so an offset is never
        stored ahead of a record Kafka does not have.

        Why the poll loop never waits here: writing offsets is a round trip to the offsets topic, so it
        runs on the committer thread (Java's SourceTaskOffsetCommitter), and acknowledgements are
        counted as they come instead of waiting for the producer (``flush``). A flush due while the
        last write still runs leaves its records for the next one. Only the ``final`` flush, at stop,
        waits: for what is on its way (up to ``offset.flush.timeout.ms``) and for its own write.
        """
        if self._storing is not None:
            if not final and not self._storing.done():
                return
            storing, self._storing = self._storing, None
            storing.result()  # a failure other than the offsets write (the task's commit) fails the task
        if not self._submitted and not self._unstored:
            return
        started = time.monotonic()
        if final:
            outstanding = producer.flush(self._flush_timeout_s)
            if outstanding:
                self.log.warning(
                    "records still unacknowledged after offset.flush.timeout.ms; their offsets not committed",
                    outstanding=outstanding,
                )
        else:
            producer.poll(0)
        if self._delivery_error is not None:
            raise ConnectorError(self._delivery_error)
        records: list[SourceRecord] = []
        while self._submitted and self._submitted[0].pending == 0:
            records.extend(self._submitted.popleft().records)
        if not records and not self._unstored:
            return
        offsets = latest_source_offsets(self.task_id.connector, records)
        if self._unstored:
            offsets, self._unstored = merge_source_offsets(self._unstored, offsets), []
        if final or self._committer is None:
            self._store(offsets, len(records), started)
        else:
            self._storing = self._committer.submit(self._store, offsets, len(records), started)

    def _store(self, offsets: list[SourceOffset], records: int, started: float) -> None:
        """Write one flush's offsets and tell the task (``commit``, which Java also calls from its
        committer thread)."""
        if offsets:
            try:
                self._write_offsets(offsets)
            except KafkaLogError as exc:
                # Not the task's fault and nothing lost: the records are in Kafka, only their offsets
                # wait (a restart meanwhile re-sends from the last committed ones: at least once).
                # Set here, read by the next flush only once this write is done.
                self._unstored = list(offsets)
                self.log.error("source offsets not committed; the next flush retries them", error=str(exc))
                return
        self.counters.count_offset_commit(started)
        self.source.commit()
        # How far the task has got (``PUT /admin/loggers/kconnect.task {"level": "DEBUG"}`` shows it).
        self.log.debug(
            "source offsets flushed",
            records=records,
            total=self.counters.records,
            flush_ms=round((time.monotonic() - started) * 1000),
        )

    def _settings(self) -> dict[str, Any]:
        """The non-transactional producer's settings (the shared pool's key)."""
        return {"bootstrap.servers": self._bootstrap, **self._producer_settings, "enable.idempotence": True}

    def prepare(self) -> None:
        """A learner's preparation: the SparkSession started when the connector has transforms (a Spark
        plan), and the producer connected: a handle on the worker's shared producer for the task's settings,
        made now if no task here uses one yet (an idempotent producer gets its producer id meanwhile).
        Nothing is polled or produced. An exactly-once task prepares no producer: initialising its
        transactional producer would fence the instance its owner runs."""
        if self._plan is not None:
            self._spark()
        if self.eos is None and self._producers is not None:
            handle = self._producers.acquire(self._settings())
            self._warm_producer = handle
            handle.shared.producer.list_topics(timeout=30)
        self.log.info("source task prepared", producer=self._warm_producer is not None)

    def _release_warm(self) -> None:
        handle, self._warm_producer = self._warm_producer, None
        if handle is not None and self._producers is not None:
            self._producers.release(handle, self._flush_timeout_s)

    def _before_start(self) -> None:
        """Every task reads the offsets topic to its end before its ``start``, as Java's offset reader
        reads to the end before it answers: a task that moved here, handed over or cold, must resume after
        the last offsets its old owner wrote as it stopped, which this worker's tail of the topic may not
        have reached yet (a reconciled move takes ~30 ms). Concurrent starts share the end-offset queries
        (``KafkaLog.read_to_end``), so a worker starting a thousand tasks pays for a few."""
        if self._sync_offsets is None:
            return
        try:
            self._sync_offsets()
        except Exception as exc:  # the offsets as read so far, as a cold start uses
            self.log.warning("offsets topic not read to its end before start", error=str(exc))

    def run(self) -> None:
        """Poll, produce and flush offsets on the ``offset.flush.interval.ms`` timer while started; flush
        while paused; a final flush on a clean stop. Transactional when exactly-once is on."""
        if self.eos is not None:
            self._run_transactional(self.eos)
            return
        settings = self._settings()
        if self._producers is not None:
            shared, self._warm_producer = self._warm_producer, None
            if shared is None:
                shared = self._producers.acquire(settings)
            try:
                self._run_producing(shared)
            finally:
                self._producers.release(shared, self._flush_timeout_s)
            return
        from confluent_kafka import Producer

        self._run_producing(Producer({"client.id": f"connector-producer-{self.task_id}", **settings}))

    def _run_producing(self, producer: Any) -> None:
        """The non-transactional loop, through ``producer``: a confluent-kafka Producer of the task's own or
        its handle on a shared one (``producer_pool.TaskProducer``: the same ``produce``/``poll``/``flush``,
        limited to this task's records)."""
        next_flush = time.monotonic() + self._flush_interval_s
        self._committer = ThreadPoolExecutor(1, thread_name_prefix=f"offsets-{self.task_id}")
        self.loop_began()  # the task's start returned (on this thread, before run): RUNNING from here
        try:
            while not self._stopping.is_set():
                if not self._running.is_set():
                    self._flush(producer)
                    producer.poll(0)  # a paused task too hears that its (shared) producer failed
                    self._running.wait(0.5)
                    continue
                records = self.source.poll() or []
                if records:
                    self._send(producer, records)
                producer.poll(0)
                if self._delivery_error is not None:
                    raise ConnectorError(self._delivery_error)
                self._track_acknowledged()
                if time.monotonic() >= next_flush:
                    self._flush(producer)
                    next_flush = time.monotonic() + self._flush_interval_s
        finally:
            if self.failed is None and self._delivery_error is None:
                try:
                    self._flush(producer, final=True)
                    self._track_acknowledged()
                except Exception as exc:
                    self.log.warning("final offset flush failed", error=str(exc))
            self._committer.shutdown(wait=True)

    def _track_acknowledged(self) -> None:
        if self._acked_topics:
            topics = set(self._acked_topics)
            self._acked_topics.clear()  # the same set: the delivery callbacks hold it
            self.track_topics(topics)

    # --- exactly-once (KIP-618)

    def _run_transactional(self, eos: ExactlyOnce) -> None:
        """The poll loop with one producer transaction per boundary, records and offsets together.

        Order as Java's: the connector's task generation fenced first (``fence``: the leader's round of
        zombie fencing, done once per new generation), then ``init_transactions`` (fences every older
        instance of this task and aborts what it left open), then the offsets read to the end of the
        topic (only committed ones: the worker reads with read_committed), and only then ``task.start``,
        so the task resumes after the last record that was committed with its offset.
        """
        from confluent_kafka import KafkaException, Producer

        if self._fence is not None:
            self._fence(self.task_id.connector)
        producer = Producer(
            {
                "bootstrap.servers": self._bootstrap,
                "client.id": f"connector-producer-{self.task_id}",
                **producer_settings(self._producer_settings, eos),
            }
        )
        timeout_s = max(self._flush_timeout_s, 30.0)
        try:
            producer.init_transactions(timeout_s)
        except KafkaException as exc:
            raise ConnectorError(self._transaction_failure("initializing transactions", exc)) from exc
        self.log.info("transactional producer ready", transactional_id=eos.transactional_id)
        if self._sync_offsets is not None:
            self._sync_offsets()
        self.source.start(dict(self.config))
        self.loop_began()
        clean = False
        try:
            while not self._stopping.is_set():
                if not self._running.is_set():
                    # Java commits when the task is paused, so that no transaction hangs open (a
                    # connector-defined one only if the task asked: its boundaries are its own).
                    self._end_final_transaction(producer, eos)
                    self._running.wait(0.5)
                    continue
                records = self.source.poll() or []
                self.counters.records += len(records)
                prepared = self._prepare(records)
                if self._transactions is not None:
                    self._dispatch_connector_defined(producer, eos, self._transactions, prepared)
                    continue
                self._dispatch(producer, prepared)
                due = commit_due(
                    eos.policy, open_records=len(self._open), now_s=time.monotonic(), begun_s=self._begun
                )
                if due:
                    self._commit_transaction(producer, eos)
            clean = True
        finally:
            if clean:
                # A clean stop commits what was polled, as Java's final offset commit does.
                self._end_final_transaction(producer, eos)
            self._abort_transaction(producer)  # what a failure, or a task that never ended it, left open
            self._final_flush(producer, clean)

    def _final_flush(self, producer: Any, clean: bool) -> None:
        """Flush what is left; a fenced producer fails here too. After a clean loop that failure is the
        task's, said as every transactional failure is (naming the transactional.id and the fencing); while
        another failure is already on its way out, that one says why and this one must not replace it."""
        from confluent_kafka import KafkaException

        try:
            producer.flush(5)
        except KafkaException as exc:
            if clean:
                raise ConnectorError(self._transaction_failure("flushing at stop", exc)) from exc
            self.log.warning("final flush failed", error=str(exc))

    def _dispatch(self, producer: Any, prepared: list[tuple[SourceRecord, Outgoing | None]]) -> None:
        """Send records into the open transaction (begun by the first), then serve delivery reports."""
        from confluent_kafka import KafkaException

        for record, out in prepared:
            self._begin(producer)
            if out is not None:
                topic, key, value, kwargs = out
                kwargs["on_delivery"] = self._transactional_ack(len(self._open))
                try:
                    produce(producer, topic, key, value, kwargs)
                except KafkaException as exc:
                    raise ConnectorError(self._transaction_failure("producing a record", exc)) from exc
            # Skipped or dropped records' offsets commit with the others (commit_record with None).
            self._open.append(record)
        producer.poll(0)
        if self._delivery_error is not None:
            raise ConnectorError(self._delivery_error)

    def _dispatch_connector_defined(
        self,
        producer: Any,
        eos: ExactlyOnce,
        transactions: TaskTransactionContext,
        prepared: list[tuple[SourceRecord, Outgoing | None]],
    ) -> None:
        """One batch under ``transaction.boundary=connector``: send it in runs, ending the transaction
        where the task's requests say (:func:`connector_boundaries`); the rest stays open.

        The requests are taken once the batch is in hand, so those made while ``poll`` ran (the usual
        place) apply to this batch; a batch request applies after an empty poll too, as in Java.
        """
        requests = transactions.take([record for record, _ in prepared])
        done = 0
        for end in connector_boundaries(len(prepared), len(self._open), requests):
            self._dispatch(producer, prepared[done : end.after])
            done = end.after
            if end.abort:
                self._abort_and_commit_offsets(producer, eos)
            else:
                self._commit_transaction(producer, eos)
        self._dispatch(producer, prepared[done:])  # also when empty: it serves delivery reports

    def _end_final_transaction(self, producer: Any, eos: ExactlyOnce) -> None:
        """At a pause or a clean stop: commit the open transaction, or under ``connector`` boundaries only
        what the task asked for with a batch request (Java's ``shouldCommitFinalTransaction``). What a
        stop leaves open is then aborted without its offsets, so the next instance polls it again: Java
        leaves it to the broker's transaction timeout or the next instance's fencing, to the same end."""
        if self._transactions is None:
            self._commit_transaction(producer, eos)
            return
        for end in connector_boundaries(0, len(self._open), self._transactions.take(())):
            if end.abort:
                self._abort_and_commit_offsets(producer, eos)
            else:
                self._commit_transaction(producer, eos)

    def _begin(self, producer: Any, *, again: bool = False) -> None:
        """Begin a transaction unless one is open; ``again``: after an abort, for its offsets alone."""
        from confluent_kafka import KafkaException

        if not again and (self._open or self._in_transaction):
            return
        try:
            producer.begin_transaction()
        except KafkaException as exc:
            raise ConnectorError(self._transaction_failure("beginning a transaction", exc)) from exc
        self._in_transaction = True
        self._begun = time.monotonic()

    def _transactional_ack(self, index: int) -> Callable[[Any, Any], None]:
        """Delivery callback under a transaction: keep the metadata; ``commit_record`` waits for the commit
        (an acknowledged record of an aborted transaction never reaches a read_committed reader)."""
        generation = self._generation

        def delivered(error: Any, message: Any) -> None:
            # Nothing may raise here: an exception inside a librdkafka callback surfaces as a SystemError
            # from whichever poll or flush served it, without the cause.
            if generation != self._generation:
                return  # a record of a transaction the task aborted: purged or discarded, as it asked
            if error is None:
                self._acks[index] = message
            elif self._delivery_error is None:
                try:
                    self._delivery_error = self._transaction_failure(f"producing to {message.topic()}", error)
                except Exception as exc:
                    self._delivery_error = f"producing to {message.topic()} failed: {error} ({exc!r})"

        return delivered

    def _transaction_failure(self, doing: str, cause: Any) -> str:
        """The task's failure message; names fencing plainly, since it means another instance runs.

        ``cause`` is a KafkaException (which carries a KafkaError) or a KafkaError from a delivery report.
        """
        error = cause.args[0] if isinstance(cause, Exception) and cause.args else cause
        code = getattr(error, "code", lambda: None)()
        from confluent_kafka import KafkaError

        fenced_codes = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
        transactional_id = self.eos.transactional_id if self.eos is not None else "?"
        if code in fenced_codes or "fenced" in str(error).lower():
            return (
                f"The transactional producer of task {self.task_id} (transactional.id={transactional_id}) "
                f"was fenced out while {doing}: a newer instance of this task has started elsewhere "
                f"(zombie fencing), so this one stops without committing. Cause: {error}"
            )
        return f"Task {self.task_id} failed while {doing} (transactional.id={transactional_id}): {error}"

    def _abort_and_commit_offsets(self, producer: Any, eos: ExactlyOnce) -> None:
        """The task asked for an abort: discard the open transaction's records, then commit their source
        offsets in a transaction of their own, so that the task is not handed the same input again after
        a restart (Java does the same). ``commit_record`` then gets None for them: no reader sees them."""
        from confluent_kafka import KafkaException

        if not self._open:
            return
        if self._in_transaction:
            self._generation += 1
            self._in_transaction = False
            try:
                producer.abort_transaction(max(self._flush_timeout_s, 30.0))
            except KafkaException as exc:
                raise ConnectorError(self._transaction_failure("aborting a transaction", exc)) from exc
            self._acks = {}
        self.log.info("transaction aborted as the task asked", records=len(self._open))
        self._begin(producer, again=True)
        self._commit_transaction(producer, eos)

    def _commit_transaction(self, producer: Any, eos: ExactlyOnce) -> None:
        """Add the open records' offsets to the transaction, commit it, then tell the task."""
        from confluent_kafka import KafkaException

        if not self._open:
            return
        started = time.monotonic()
        records, self._open = self._open, []
        try:
            for offset in latest_source_offsets(self.task_id.connector, records):
                key, value = encode_offset(offset)
                produce(producer, eos.offsets_topic, key, value, {"on_delivery": self._on_delivery})
            # commit_transaction flushes and reports a failed send or a fencing as its own error. No
            # flush() before it: with a fenced (fatal) producer confluent-kafka's flush raises a bare
            # SystemError that hides the cause.
            producer.commit_transaction(max(self._flush_timeout_s, 30.0))
        except KafkaException as exc:
            self._in_transaction = False
            message = self._transaction_failure("committing a transaction", exc)
            error = exc.args[0] if exc.args else None
            if not (error is not None and error.fatal()):
                # A fatal (fenced) producer can abort nothing; the newer instance's init aborted it.
                self._try_abort(producer)
            raise ConnectorError(message) from exc
        except ConnectorError:
            self._in_transaction = False
            self._try_abort(producer)
            raise
        self._in_transaction = False
        producer.flush(self._flush_timeout_s)  # nothing is outstanding: this serves the delivery reports
        acks, self._acks = self._acks, {}
        self.counters.count_offset_commit(started)
        if self.active_topics is not None:
            self.track_topics({message.topic() for message in acks.values()})
        for index, record in enumerate(records):
            self._tell_task(record, acks.get(index))  # None: skipped or dropped by the chain, never produced
        self.source.commit()

    def _try_abort(self, producer: Any) -> None:
        try:
            producer.abort_transaction(10)
        except Exception as exc:  # fenced or fatal: the broker aborts it when the new instance inits
            self.log.warning("aborting the transaction failed", error=str(exc))

    def _abort_transaction(self, producer: Any) -> None:
        """On failure nothing polled since the last commit may become visible (Java aborts too)."""
        if self._in_transaction:
            self._generation += 1
            self._in_transaction = False
            self._open = []
            self._acks = {}
            self._try_abort(producer)

    def _prepare(self, records: list[SourceRecord]) -> list[tuple[SourceRecord, Outgoing | None]]:
        """Each polled record with what to produce for it: encoded with the converters, through the
        chain when the connector has transforms (one Spark job per batch), None when it is skipped on an
        error (errors.tolerance=all) or dropped by the chain.

        Runs for every source record on the driver, so the common path (no transforms) goes straight
        from the record to the producer's arguments, with nothing built in between.
        """
        if self._plan is None:
            prepared: list[tuple[SourceRecord, Outgoing | None]] = []
            for record in records:
                encoded = self._encode(record)
                if encoded is None:
                    prepared.append((record, None))
                    continue
                key, value, headers = encoded
                kwargs = _produce_kwargs(record.partition, record.timestamp, headers)
                prepared.append((record, (record.topic, key, value, kwargs)))
            return prepared
        rows: list[tuple[Any, ...]] = []
        for index, record in enumerate(records):
            encoded = self._encode(record)
            if encoded is not None:
                rows.append(raw_row(index, record, encoded))
        out: dict[int, Outgoing] = {}
        if rows:
            batch = transform_batch(self._spark(), self._plan, rows)
            if batch.failed:
                self._handle_failed(records, batch.failed)
            out = {
                p.index: (p.topic, p.key, p.value, _produce_kwargs(p.partition, p.timestamp, p.headers))
                for p in batch.produced
            }
        return [(record, out.get(index)) for index, record in enumerate(records)]

    def _handle_failed(self, records: list[SourceRecord], failed: list[tuple[int, dict[str, Any]]]) -> None:
        """Conversion or transformation failures: fail the task (tolerance none) or log and skip them."""
        policy = self._encoder.policy
        if not policy.tolerance_all:
            raise ConnectorError(tolerance_message(failed[0][1]))
        for index, row in failed:
            self._log_skipped("transforming", records[index], row.get(ERROR_MESSAGE))
        self.log.warning("source records skipped on errors", count=len(failed))

    def _tell_task(self, record: SourceRecord, metadata: Any) -> None:
        """``commit_record``: Java logs a task's failure there and carries on, since the record is in Kafka
        (or was dropped) whatever the task thinks of it."""
        try:
            self.source.commit_record(record, metadata)
        except Exception as exc:
            self.log.warning("commit_record failed", error=str(exc))

    def _encode(
        self, record: SourceRecord
    ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]] | None:
        """The record as bytes; None when it cannot be converted and errors.tolerance=all skips it."""
        try:
            encoded: tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]
            encoded = self._encoder.encode(record)
            return encoded
        except ConnectDataError as exc:
            policy = self._encoder.policy
            message = f"converting a record for topic {record.topic} failed: {exc}"
            if not policy.tolerance_all:
                raise ConnectorError(f"Tolerance exceeded in error handler: {message}") from exc
            self._log_skipped("converting", record, str(exc))
            return None

    def _log_skipped(self, doing: str, record: SourceRecord, message: Any) -> None:
        """Log a record skipped on an error under errors.tolerance=all, as ``errors.log.enable`` and
        ``errors.log.include.messages`` ask: conversion and transformation failures read alike."""
        policy = self._encoder.policy
        if not policy.log_enable:
            return
        fields: dict[str, Any] = {"topic": record.topic, "message": message}
        if policy.log_include_messages:
            fields.update(key=repr(record.key), value=repr(record.value))
        self.log.error(f"error {doing} a source record; skipped (errors.tolerance=all)", **fields)

    def _wake(self) -> None:
        if self._stopping.is_set():
            # SourceTask.stop is called from another thread so that a blocked poll returns.
            try:
                self.source.stop()
            except Exception as exc:
                self.log.warning("task stop failed", error=str(exc))
