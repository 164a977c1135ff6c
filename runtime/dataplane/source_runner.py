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

The module holds the task's life and its plain (non-transactional) loop. The decision of which offsets
to write (:func:`latest_source_offsets`) is pure, in ``source_offsets``; preparing records is shared with
the exactly-once loop (``source_records``, ``source_transactions``); the task's context is
``source_context``.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

from kconnect.runtime.dataplane.exactly_once import (
    ExactlyOnce,
    TaskTransactionContext,
    TransactionBoundary,
)
from kconnect.runtime.dataplane.producer_pool import ProducerPool, TaskProducer
from kconnect.runtime.dataplane.source_batch import source_plan
from kconnect.runtime.dataplane.source_context import OffsetReader, SourceContext, no_spark
from kconnect.runtime.dataplane.source_encoding import source_encoder
from kconnect.runtime.dataplane.source_offsets import latest_source_offsets, merge_source_offsets
from kconnect.runtime.dataplane.source_transactions import TransactionalSourceLoop
from kconnect.runtime.dataplane.task_runner import produce
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import ConnectorError, SourceRecord, SourceTask
from kconnect.runtime.plugins.plugin_metrics import PluginMetricsRegistry
from kconnect.runtime.storage.kafka_log import KafkaLogError
from kconnect.runtime.storage.offset_log import OffsetState, SourceOffset

__all__ = ["SourceTaskRunner", "latest_source_offsets", "merge_source_offsets"]


class _Submitted:
    """One poll on its way to Kafka: the source offsets its records leave to write (the last per source
    partition), how many records it had, and how many of them are not acknowledged yet (records skipped
    or dropped before producing are not counted: nothing will acknowledge them).

    Why the offsets and not the records: a poll waits here until the offset flush after its last
    acknowledgement (``offset.flush.interval.ms``, a minute by default), and holding the records (their
    keys and values) that long kept a fast source's every record of the last minute in memory (a
    FileStreamSource at ~48,000 records/s reached 940 MiB; bench/avro_pipeline.py). Java's
    SubmittedRecords keeps each record's partition and offset only, too."""

    __slots__ = ("offsets", "pending", "size")

    def __init__(self, offsets: list[SourceOffset], size: int) -> None:
        self.offsets = offsets
        self.size = size
        self.pending = 0


class SourceTaskRunner(TransactionalSourceLoop):
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
        self._spark: Callable[[], Any] = spark if spark is not None else no_spark
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
            reader = OffsetReader(task_id.connector, read_offsets)
            self.source.initialize(
                SourceContext(self.config, reader, self.plugin_metrics, self._transactions, self._spark)
            )
        except BaseException:
            self.close_plugin_metrics()
            raise

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
        batch = _Submitted(latest_source_offsets(self.task_id.connector, records), len(records))
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
        offsets: list[SourceOffset] = []
        records = 0
        while self._submitted and self._submitted[0].pending == 0:
            batch = self._submitted.popleft()
            offsets = merge_source_offsets(offsets, batch.offsets) if offsets else batch.offsets
            records += batch.size
        if not records and not self._unstored:
            return
        if self._unstored:
            offsets, self._unstored = merge_source_offsets(self._unstored, offsets), []
        if final or self._committer is None:
            self._store(offsets, records, started)
        else:
            self._storing = self._committer.submit(self._store, offsets, records, started)

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
            # Only a producer made for this task is connected here: one that other tasks already use is
            # connected, and asking it for every topic's metadata queued that request before their records
            # on the same broker connection (a worker warming 80 tasks for a hand-over held its sources'
            # records 2-4.5 s: bench/rolling.py at 5 x 200, 2026-11-29).
            handle = self._producers.acquire(self._settings())
            self._warm_producer = handle
            if handle.created:
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

    def _wake(self) -> None:
        if self._stopping.is_set():
            # SourceTask.stop is called from another thread so that a blocked poll returns.
            try:
                self.source.stop()
            except Exception as exc:
                self.log.warning("task stop failed", error=str(exc))
