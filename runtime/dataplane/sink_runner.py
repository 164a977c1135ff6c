"""A sink task as a Structured Streaming query: records from Kafka to the task's ``put``, offsets committed
to the consumer group ``connect-<connector>`` only once the output is durable.

The query reads with ``kafka_source.KafkaDataSource`` and runs ``foreachBatch`` on the driver: the raw
frame through the connector's converters, transforms and ``errors.*`` policy (``sink_batch``); failed rows
fail the task (``errors.tolerance=none``) or are logged and dead-lettered (``=all``) before anything is
committed; good rows -> ``SinkRecord`` -> ``put`` -> ``pre_commit`` (which flushes) -> commit of the
consumer offsets. A ``FrameSinkTask`` (Parquet, JDBC) gets the good rows as one DataFrame
(``put_frame``) instead: its writes run on Spark's executors and no row is collected to the driver.
Offsets move only after the output is durable: at-least-once, and a task restarted anywhere resumes from
that group's offsets. Each sink task's Spark work runs in a job group of its own, in the sinks' FAIR
scheduler pool (``scheduler_pools``).

The decisions (which offsets to commit) are pure functions at the top of the module.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from py4j.protocol import Py4JJavaError

from kconnect.runtime.dataplane import spark_kafka
from kconnect.runtime.dataplane.converters.json_converter import Sample
from kconnect.runtime.dataplane.frame_batch import EXTRA_AT, batch_positions, prepared_as_guessed
from kconnect.runtime.dataplane.scheduler_pools import SINKS_POOL
from kconnect.runtime.dataplane.scratch import make_scratch_dir
from kconnect.runtime.dataplane.sink_batch import (
    FAILURE_COLUMNS,
    RECORD_COLUMNS,
    SinkPlan,
    batch_samples,
    envelope_aggregates,
    infers_schemas,
    merged_bounds,
    prepare,
    prepared_on_stream,
    record_schemas,
    records_from_columns,
    sink_plan,
    tolerance_message,
)
from kconnect.runtime.dataplane.task_runner import TaskRunner, produce
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import (
    ConnectorError,
    FrameBatch,
    FrameSinkTask,
    RetriableError,
    SinkRecord,
    SinkTask,
    TopicPartition,
)
from kconnect.runtime.plugins.plugin_metrics import PluginMetrics, PluginMetricsRegistry

#: How often a sink task's streaming query looks for new records.
SINK_TRIGGER = "500 milliseconds"
#: How many failed Spark jobs in a row a sink task's query is restarted for before the task fails.
SPARK_JOB_RETRIES = 3
#: The wait before a put that raised RetriableError is retried when the task set no timeout.
RETRY_WITHOUT_TIMEOUT_S = 0.1
#: The most records one ``SinkTask.put`` call is given: Java's consumer default max.poll.records.
MAX_PUT_RECORDS = 500
#: After this long without a batch a frame sink task's ``pre_commit`` is called from the runner thread.
IDLE_PRE_COMMIT_S = 1.0


def consumed_offsets(rows: Iterable[Sequence[Any]]) -> dict[TopicPartition, int]:
    """Next offset to read per partition after a batch of raw rows (topic, partition, offset, ...)."""
    out: dict[TopicPartition, int] = {}
    for row in rows:
        tp = TopicPartition(str(row[0]), int(row[1]))
        out[tp] = max(out.get(tp, 0), int(row[2]) + 1)
    return out


#: The topic a row was read from, copied before a transformation chain (a router changes ``topic``). Its
#: partition and offset need no copy: no transformation changes them (``TransformChain`` refuses one that
#: would), so those columns still say where the row was read.
READ_TOPIC = "read__topic"


def consumed_offsets_of_table(table: Any) -> dict[TopicPartition, int]:
    """:func:`consumed_offsets` of an Arrow table with ``topic``, ``partition`` and ``offset`` columns,
    aggregated by Arrow rather than row by row in Python."""
    grouped = table.group_by(["topic", "partition"]).aggregate([("offset", "max")])
    return {
        TopicPartition(str(t), int(p)): int(o) + 1
        for t, p, o in zip(
            grouped.column("topic").to_pylist(),
            grouped.column("partition").to_pylist(),
            grouped.column("offset_max").to_pylist(),
            strict=True,
        )
    }


def offsets_to_commit(
    consumed: Mapping[TopicPartition, int],
    pre_commit: Mapping[TopicPartition, int],
    committed: Mapping[TopicPartition, int],
) -> dict[TopicPartition, int]:
    """What to commit after ``pre_commit``: the task's answer, limited to partitions this task has
    consumed and to offsets it has consumed up to, without what is already committed at that offset.

    A task may hold records back by answering lower offsets (or none for a partition); it may not commit
    past what was consumed, which would skip records nobody delivered.
    """
    out: dict[TopicPartition, int] = {}
    for tp, offset in pre_commit.items():
        if tp not in consumed:
            continue
        safe = min(int(offset), consumed[tp])
        if committed.get(tp) != safe:
            out[tp] = safe
    return out


# --- sink


class _SinkContext:
    def __init__(self, runner: SinkTaskRunner) -> None:
        self._runner = runner

    def configs(self) -> Mapping[str, str]:
        return self._runner.config

    def assignment(self) -> set[TopicPartition]:
        return set(self._runner.assignment)

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Resume these partitions at these offsets: applied after the current ``put`` or ``open``
        (see ``SinkTaskRunner._rewound``)."""
        self._runner.rewind(offsets)

    def timeout(self, timeout_ms: int) -> None:
        """How long to wait before the records of a ``put`` that raised RetriableError come again."""
        self._runner.retry_timeout_ms = int(timeout_ms)

    def pause(self, *partitions: TopicPartition) -> None:
        self._runner.log.warning("SinkTaskContext.pause is not supported by this data plane yet; ignored")

    def resume(self, *partitions: TopicPartition) -> None:
        """Nothing is paused (see ``pause``)."""

    def request_commit(self) -> None:
        """Every batch already ends with a commit."""

    def plugin_metrics(self) -> PluginMetrics:
        return self._runner.plugin_metrics


class SinkTaskRunner(TaskRunner):
    """One sink task: a Structured Streaming query whose micro-batches go through the connector's
    converters, transforms and errors.* policy to ``put`` (or ``put_frame``), then ``pre_commit``, then a
    commit of the consumer group's offsets.

    Why a streaming query and not a consumer loop: Spark reads and converts the records on its
    executors, and a restarted query resumes from the group's committed offsets, so the task can move to
    any worker. Why offsets commit last: only what the task says is durable is committed (at-least-once).
    """

    def __init__(
        self,
        task_id: TaskId,
        task: SinkTask,
        config: Mapping[str, str],
        on_failure: Callable[[TaskId, str], None],
        *,
        spark: Callable[[], Any],
        task_count: int,
        bootstrap: str,
        converters: Mapping[str, str],
        consumer_settings: Mapping[str, str],
        consumer_props: Mapping[str, str] | None = None,
        producer_settings: Mapping[str, str] | None = None,
        admin_settings: Mapping[str, str] | None = None,
        plugin_metrics: PluginMetricsRegistry | None = None,
        on_running: Callable[[TaskId], None] | None = None,
        plan: SinkPlan | None = None,
    ) -> None:
        super().__init__(task_id, task, config, on_failure, plugin_metrics, on_running)
        self.sink: SinkTask = task
        #: The dead letter queue's producer and admin client (Java's connector producer and admin configs).
        self._producer_settings = dict(producer_settings or {})
        self._admin_settings = dict(admin_settings or {})
        self._spark = spark
        self.task_count = task_count
        self._bootstrap = bootstrap
        self._converters = dict(converters)
        # Built by now so a bad converter, transform or errors.* key fails the task at start, clearly;
        # ``plan`` is the one the executor already built to choose the placement (configuring converters
        # and transforms twice per task start was the same work twice).
        self._plan = plan or sink_plan(self._converters, config, task_id.connector, task_id.task)
        #: Whether the query's batches arrive converted and transformed (``_start_query``), with these
        #: record schemas; frame sinks prepare each batch themselves, after reading its positions.
        self._on_stream = not isinstance(task, FrameSinkTask) and prepared_on_stream(self._plan)
        self._stream_schemas: tuple[Any, Any] = (None, None)
        self._dlq_producer: Any = None
        self._dlq_error: str | None = None
        self._consumer_settings = dict(consumer_settings)
        #: The same consumer settings Java-named, for Spark's Kafka source (``spark_kafka``).
        self._consumer_props = dict(consumer_props or {})
        self._reader_choice: spark_kafka.Reader | None = None
        #: The partitions a query Spark's Kafka source reads was given, watched for new ones.
        self._kafka_watch: spark_kafka.PartitionWatch | None = None
        self.group_id = self._consumer_settings.pop("group.id", f"connect-{task_id.connector}")
        self.topics = [t.strip() for t in config.get("topics", "").split(",") if t.strip()]
        self.topics_regex = (config.get("topics.regex") or "").strip()
        if bool(self.topics) == bool(self.topics_regex):
            raise ConnectorError("Must configure one of topics or topics.regex")
        self.assignment: set[TopicPartition] = set()
        #: SinkTaskContext.offset requests not applied yet, and the query restart that applies them.
        self._rewind: dict[TopicPartition, int] = {}
        self._restart = threading.Event()
        #: SinkTaskContext.timeout: the wait before a put that raised RetriableError is retried (once).
        self.retry_timeout_ms = -1
        self._spark_failures = 0  # failed Spark jobs in a row (see _spark_failed)
        self._consumed: dict[TopicPartition, int] = {}
        self._committed: dict[TopicPartition, int] = {}
        self._committer: Any = None
        #: The committer a preparation made (:meth:`prepare`), until ``run`` takes it.
        self._warm_committer: Any = None
        #: The query a preparation planned (a ``DataStreamWriter`` not started), until the loop starts it.
        self._planned: Any = None
        self._checkpoint = ""
        self._query: Any = None
        self._lock = threading.Lock()
        # Serialises a frame sink's batches with the idle pre_commit calls made from the runner thread.
        self._sink_lock = threading.Lock()
        self._last_batch_end = 0.0
        #: The last frame batch's envelope samples and records (``frame_batch.prepared_as_guessed``).
        self._last_samples: dict[str, Sample] | None = None
        self._last_records: int | None = None
        self._idle_busy = False
        try:
            self.monitor_converters(self._plan.key_converter, self._plan.value_converter)
            self.sink.initialize(_SinkContext(self))
        except BaseException:
            self.close_plugin_metrics()
            raise

    @property
    def pool(self) -> str:
        """The task's name in Spark (its job group, query, checkpoint directory and data source), so that
        its Spark work can be told apart and cancelled alone."""
        return f"{self.task_id.connector}-{self.task_id.task}"

    def _client_conf(self) -> dict[str, str]:
        return {"bootstrap.servers": self._bootstrap, **self._consumer_settings}

    def _new_committer(self) -> Any:
        from confluent_kafka import Consumer

        return Consumer({**self._client_conf(), "group.id": self.group_id, "enable.auto.commit": False})

    def prepare(self) -> None:
        """A learner's preparation: the worker's SparkSession started (seconds on a worker that has none
        yet: the JVM, Spark's context), the query planned up to its start (:meth:`_plan_query`) and the
        committer made and connected. The query itself starts with the task: a started query reads."""
        self._spark()
        if not self._chosen_reader().spark_kafka:
            # Spark's Kafka source is given its start offsets, which are the group's when the task starts
            # (a learner prepares while the task's previous owner still commits): it plans at the start.
            self._planned = self._plan_query()
        committer = self._new_committer()
        try:
            committer.list_topics(timeout=30)
        except BaseException:
            committer.close()
            raise
        self._warm_committer = committer
        self.log.info("sink task prepared", group=self.group_id, placement=self.placement)

    def _release_warm(self) -> None:
        committer, self._warm_committer = self._warm_committer, None
        if committer is not None:
            committer.close()
        if self._planned is not None:  # planned, never started: its checkpoint directory goes too
            self._planned = None
            shutil.rmtree(self._checkpoint, ignore_errors=True)

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        if self._committer is None:
            self._committer = self._new_committer()
        started = time.monotonic()
        self._committer.commit(
            offsets=[KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()],
            asynchronous=False,
        )
        self.counters.count_offset_commit(started)
        self._committed.update(offsets)

    def _batch(self, frame: Any, batch_id: int) -> None:
        """foreachBatch, on the driver: convert and transform, handle failed rows, deliver, make durable,
        then commit. The prepared rows come to the driver once, as Arrow columns (``toArrow``), which
        costs far less per record than ``collect``'s Row objects, and with them what the consumer read:
        with transforms, the source topic, partition and offset of every row read, the rows a Filter
        dropped among them (kept and marked, not delivered), so one Spark job serves both. The batch
        arrives prepared where the plan allows (``prepared_on_stream``); else it is prepared here, and the
        raw batch cached only where schemaless JSON's schema is inferred first (read twice). Dead letters
        read the failed rows again.
        """
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        from kconnect.runtime.dataplane.errors_policy import ERROR_MESSAGE, split
        from kconnect.runtime.dataplane.transforms import DROPPED

        if self._restart.is_set():
            return  # a rewind is pending: these records come again, from the rewound offsets
        if isinstance(self.sink, FrameSinkTask):
            with self._sink_lock:
                try:
                    self._frame_batch(self.sink, frame, batch_id)
                finally:
                    self._last_batch_end = time.monotonic()
            return
        started = time.monotonic()
        transforms = bool(self._plan.chain.transforms)
        cached = infers_schemas(self._plan)  # never so for a plan prepared on the stream
        raw = frame.persist() if cached else frame
        try:
            # With transforms, the rows as read, not as transformed, are what was consumed: a router
            # changes the topic, Filter drops rows, and the consumer must still move past every record.
            read: tuple[str, ...] = (READ_TOPIC, DROPPED) if transforms else ()
            prepared = frame if self._on_stream else self._prepared(raw)
            # Only what a good record needs, and the error message that tells good from failed: the other
            # failure columns (the raw key and value among them, as large as the record) are fetched for
            # failed rows alone, below; collecting them for every row would double what travels.
            table = prepared.select(*RECORD_COLUMNS, ERROR_MESSAGE, *read).toArrow()
            if table.num_rows == 0:
                return
            if transforms:
                where = table.select([READ_TOPIC, "partition", "offset"])
                consumed = consumed_offsets_of_table(where.rename_columns(["topic", "partition", "offset"]))
                delivered = pc.invert(table.column(DROPPED))
                failed = pc.and_(pc.is_valid(table.column(ERROR_MESSAGE)), delivered)
                if pc.any(failed).as_py():
                    self._handle_failed(split(prepared)[1].where(~F.col(DROPPED)))
                table = table.filter(pc.and_(delivered, pc.is_null(table.column(ERROR_MESSAGE))))
            else:
                # Without transforms every raw row is here, under its own topic.
                consumed = consumed_offsets_of_table(table)
                errors = table.column(ERROR_MESSAGE)
                if errors.null_count != len(errors):
                    self._handle_failed(split(prepared)[1])
                    table = table.filter(pc.is_null(errors))
            key_schema, value_schema = self._stream_schemas if self._on_stream else record_schemas(prepared)
        except Py4JJavaError as exc:
            if self._spark_failed(exc):
                return
            raise
        finally:
            if cached:
                frame.unpersist()
        self._spark_failures = 0
        # Java records the topic each consumed record was read from, before transforms and conversion.
        self.track_topics({tp.topic for tp in consumed})
        collected = time.monotonic()
        if self._open_new(consumed) and self._rewound():
            return  # open() moved the start (a task that keeps its own offsets): nothing delivered
        build_s = 0.0
        # put() takes at most MAX_PUT_RECORDS at a time, as Java's takes one poll (max.poll.records):
        # only that many SinkRecords exist at once, however large the micro-batch.
        for start in range(0, table.num_rows, MAX_PUT_RECORDS):
            part = table.slice(start, MAX_PUT_RECORDS)
            began = time.monotonic()
            records = records_from_columns(
                {name: part.column(name).to_pylist() for name in RECORD_COLUMNS}, key_schema, value_schema
            )
            build_s += time.monotonic() - began
            self._put(records)
        put = time.monotonic()
        self.counters.records += table.num_rows
        self._consumed.update(consumed)
        self._pre_commit()
        self._rewound()
        # Where a batch's time goes (``PUT /admin/loggers/kconnect.task {"level": "DEBUG"}`` shows it).
        self.log.debug(
            "sink batch",
            batch=batch_id,
            records=table.num_rows,
            spark_ms=round((collected - started) * 1000),
            build_ms=round(build_s * 1000),
            put_ms=round((put - collected - build_s) * 1000),
            commit_ms=round((time.monotonic() - put) * 1000),
        )

    def _prepared(self, frame: Any) -> Any:
        """A raw frame (the stream, or one batch) converted and transformed; with transforms, each row's
        topic as read copied first (``READ_TOPIC``) and the rows a Filter drops kept, marked."""
        from pyspark.sql import functions as F

        transforms = bool(self._plan.chain.transforms)
        if transforms:
            frame = frame.withColumn(READ_TOPIC, F.col("topic"))
        return prepare(self._plan, frame, keep_dropped=transforms)

    def _pre_commit(self) -> None:
        """Ask the task what of the consumed records it has made durable (``pre_commit``, which flushes),
        and commit that much to the group: after every batch, and on a frame sink's idle timer."""
        answer = self.sink.pre_commit(dict(self._consumed))
        to_commit = offsets_to_commit(self._consumed, answer, self._committed)
        if to_commit:
            self._commit_durable(to_commit)

    def _commit_durable(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Commit what ``pre_commit`` says is durable (a runner may keep a failed commit for the next)."""
        self._commit(offsets)

    def _open_new(self, partitions: Iterable[TopicPartition]) -> bool:
        """``open`` the partitions this task reads for the first time (Java opens them on assignment); True
        if there were any."""
        new = {tp for tp in partitions if tp not in self.assignment}
        if not new:
            return False
        self.assignment |= new
        self.sink.open(sorted(new, key=str))
        return True

    def _spark_failed(self, exc: Exception) -> bool:
        """A Spark job of the batch's own reading and converting failed (not the task's code): restart the
        query from the committed offsets, as a moved task would start, up to SPARK_JOB_RETRIES times in a
        row; True when it will. Seen once in CI: two queries starting together in one local SparkSession,
        a task binary that did not deserialize (java.io.OptionalDataException); local masters retry no
        Spark task, so one such hiccup would otherwise fail the Connect task for good."""
        self._spark_failures += 1
        if self._spark_failures > SPARK_JOB_RETRIES:
            return False
        reason = next((line for line in str(exc).splitlines() if "Exception" in line), str(exc)[:300])
        self.log.warning(
            "a Spark job of the sink batch failed; the query restarts from the committed offsets",
            attempt=self._spark_failures,
            of=SPARK_JOB_RETRIES,
            reason=reason[:500],
        )
        self._restart.set()
        return True

    def _put(self, records: list[SinkRecord]) -> None:
        """``put``, again with the same records while it raises RetriableError (Java redelivers the batch
        at the next poll; the task bounds its own retries, as the JDBC sinks' ``max.retries``)."""
        while True:
            try:
                self.sink.put(records)
                return
            except RetriableError as exc:
                wait_ms, self.retry_timeout_ms = self.retry_timeout_ms, -1
                wait_s = wait_ms / 1000 if wait_ms > 0 else RETRY_WITHOUT_TIMEOUT_S
                self.log.warning(
                    "put failed with a retriable error; the same records again",
                    error=str(exc),
                    wait_ms=round(wait_s * 1000),
                )
                if self._stopping.wait(wait_s):
                    raise

    def rewind(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Note ``SinkTaskContext.offset`` requests (from the task, on any thread); applied by
        ``_rewound`` after the current ``put`` or ``open``, since the query cannot seek mid-batch."""
        with self._lock:
            self._rewind.update({tp: int(offset) for tp, offset in offsets.items()})

    def _rewound(self) -> bool:
        """Apply ``SinkTaskContext.offset``: commit the requested offsets to the task's group and restart
        the query, whose reader starts from the group's committed offsets (Java's consumer seeks). Batches
        planned before the restart are skipped (``_batch``): their records come again. True if applied."""
        with self._lock:
            rewind, self._rewind = self._rewind, {}
        if not rewind:
            return False
        self._commit(rewind)
        self._consumed.update(rewind)
        self._restart.set()
        self.log.info(
            "partitions rewound by the task; the query restarts there",
            offsets={str(tp): offset for tp, offset in sorted(rewind.items(), key=lambda i: str(i[0]))},
        )
        return True

    def _frame_batch(self, sink: FrameSinkTask, frame: Any, batch_id: int) -> None:
        """foreachBatch for a frame sink task: the prepared frame goes to ``put_frame`` uncollected; only
        positions (one small aggregation) and failed rows (usually none) reach the driver."""
        from kconnect.runtime.dataplane.errors_policy import split

        read_ms = int(time.time() * 1000)  # the batch's end offsets were fixed just before this call
        if sink.COALESCE_READS:
            frame = frame.coalesce(max(1, frame.sparkSession.sparkContext.defaultParallelism))
        raw: Any = None
        prepared: Any = None
        try:
            # One pass when the batch is as the last (frame_batch); else held raw, read for its positions
            # and envelope schemas in one job, then prepared.
            prepared, positions = prepared_as_guessed(
                self._plan, frame, self._last_samples, self._last_records
            ) or (None, [])
            if prepared is None:
                raw = frame.persist()
                positions = batch_positions(raw, envelope_aggregates(self._plan))
            if not positions:
                return
            ranges = {TopicPartition(str(r[0]), int(r[1])): (int(r[2]), int(r[3])) for r in positions}
            stamps = [int(r[4]) for r in positions if r[4] is not None]
            records = sum(last - first + 1 for first, last in ranges.values())
            if prepared is None:
                samples = batch_samples(self._plan, raw, merged_bounds(positions, EXTRA_AT))
                prepared = prepare(self._plan, raw, records=records, samples=samples).persist()
                self._last_samples = samples
            self._last_records = records
            self.track_topics({tp.topic for tp in ranges})
            good, failed = split(prepared)
            self._handle_failed(failed)
            key_schema, value_schema = record_schemas(prepared)
            self._open_new(ranges)
            written = sink.put_frame(
                FrameBatch(
                    frame=good.select(*RECORD_COLUMNS),
                    key_schema=key_schema,
                    value_schema=value_schema,
                    offsets=ranges,
                    batch_id=batch_id,
                    oldest_ms=min(stamps) if stamps else None,
                    read_ms=read_ms,
                )
            )
            if written is not None:
                self.counters.records += written
        finally:
            for held in (prepared, raw):
                if held is not None:
                    held.unpersist()
        self._consumed.update({tp: last + 1 for tp, (_, last) in ranges.items()})
        self._pre_commit()
        self._rewound()

    def _idle_pre_commit(self) -> None:
        """Ask a frame sink task what it can commit although no batch came: Java's WorkerSinkTask calls
        preCommit on a timer whether records arrive or not, and that is what lets a sink publish a file
        by time (``rotate.interval.ms``) on a topic that has gone quiet.

        Only when idle (no batch for a second, none running): while batches flow, each one asks. The
        runner thread must stay free to stop the query; a stop cancels Spark jobs started here (_wake).
        """
        if self._stopping.is_set() or time.monotonic() - self._last_batch_end < IDLE_PRE_COMMIT_S:
            return
        if not self._sink_lock.acquire(blocking=False):
            return
        try:
            if not self._consumed:
                return
            self._idle_busy = True
            self._pre_commit()
        finally:
            self._idle_busy = False
            self._sink_lock.release()

    def _wake(self) -> None:
        """On stop, cancel the Spark jobs of an idle pre_commit: the thread that must stop the query is
        running them, and a stop that times out leaves the old query running beside the next one."""
        if self._stopping.is_set() and self._idle_busy:
            try:
                self._spark().sparkContext.cancelJobGroup(f"kconnect-{self.pool}")
            except Exception as exc:
                self.log.warning("cancelling the idle pre_commit's Spark jobs failed", error=str(exc))

    def _handle_failed(self, failed: Any) -> None:
        """Failed rows (``failed``, the prepared frame's failed part): fail the task (tolerance none) or log
        and dead-letter them (tolerance all). Only the failed rows are fetched to the driver, with their
        failure columns; usually there are none."""
        from kconnect.runtime.dataplane.errors_policy import dlq_rows

        rows = [row.asDict() for row in failed.select(*RECORD_COLUMNS, *FAILURE_COLUMNS).collect()]
        if not rows:
            return
        policy = self._plan.policy
        self._fail_or_log(rows)
        if policy.dead_letter:
            letters = dlq_rows(failed, policy, self.task_id.connector, self.task_id.task).collect()
            self._dead_letter(letters)
        self.log.warning(
            "records skipped on errors", count=len(rows), dead_letter_topic=policy.dlq_topic or None
        )

    def _fail_or_log(self, rows: list[dict[str, Any]]) -> None:
        """Failed rows (``RECORD_COLUMNS`` and ``FAILURE_COLUMNS``): fail the task with Java's message
        (``errors.tolerance=none``), else log each one if ``errors.log.enable`` says so."""
        from kconnect.runtime.dataplane.errors_policy import Decision

        policy = self._plan.policy
        if policy.decide(len(rows)) is Decision.FAIL_TASK:
            raise ConnectorError(tolerance_message(rows[0]))
        if policy.log_enable:
            for row in rows:
                line = policy.log_line(row)
                # structlog owns "timestamp" (the log time); the record's own goes under another name.
                if "timestamp" in line:
                    line["record_timestamp"] = line.pop("timestamp")
                for side in ("key", "value"):
                    if isinstance(line.get(side), bytes | bytearray):
                        line[side] = bytes(line[side]).decode("utf-8", errors="replace")
                self.log.error("error handling a record; skipped (errors.tolerance=all)", **line)

    def _on_dlq_delivery(self, error: Any, message: Any) -> None:
        if error is not None and self._dlq_error is None:
            self._dlq_error = f"producing to dead letter queue topic {message.topic()} failed: {error}"

    def _dead_letter(self, letters: list[Any]) -> None:
        """Write dead letters and wait for them: the batch's offsets are committed only after this."""
        from confluent_kafka import Producer
        from confluent_kafka.admin import AdminClient
        from confluent_kafka.cimpl import NewTopic

        policy = self._plan.policy
        if self._dlq_producer is None:
            admin = AdminClient({"bootstrap.servers": self._bootstrap, **self._admin_settings})
            if policy.dlq_topic not in admin.list_topics(timeout=15).topics:
                futures = admin.create_topics([NewTopic(policy.dlq_topic, 1, policy.dlq_replication_factor)])
                for future in futures.values():
                    try:
                        future.result(30)
                    except Exception as exc:  # created meanwhile by another task: fine
                        if "TOPIC_ALREADY_EXISTS" not in str(exc):
                            raise ConnectorError(
                                "could not create errors.deadletterqueue.topic.name="
                                f"{policy.dlq_topic}: {exc}"
                            ) from exc
            self._dlq_producer = Producer(
                {
                    "bootstrap.servers": self._bootstrap,
                    "client.id": f"connector-dlq-producer-{self.task_id}",
                    **self._producer_settings,
                }
            )
        producer = self._dlq_producer
        for letter in letters:
            kwargs: dict[str, Any] = {"on_delivery": self._on_dlq_delivery}
            if letter["timestamp"] is not None and letter["timestamp"] >= 0:
                kwargs["timestamp"] = int(letter["timestamp"])
            headers = [
                (h["key"], None if h["value"] is None else bytes(h["value"])) for h in letter["headers"] or ()
            ]
            if headers:
                kwargs["headers"] = headers
            key = None if letter["key"] is None else bytes(letter["key"])
            value = None if letter["value"] is None else bytes(letter["value"])
            produce(producer, policy.dlq_topic, key, value, kwargs)
        outstanding = producer.flush(30)
        if self._dlq_error is not None:
            raise ConnectorError(self._dlq_error)
        if outstanding:
            raise ConnectorError(
                f"{outstanding} dead letters to {policy.dlq_topic} unacknowledged after 30 s; "
                "offsets not committed"
            )

    def _start_query(self) -> Any:
        self._restart.clear()  # a new query reads from the committed offsets, rewinds included
        spark = self._spark()
        # The task's pool and job group are the starting thread's (the query's thread inherits them).
        sc = spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", SINKS_POOL)  # configured (``scheduler_pools``)
        sc.setJobGroup(f"kconnect-{self.pool}", f"kconnect sink task {self.task_id}", True)
        writer, self._planned = self._planned, None
        return (writer or self._plan_query()).start()

    def _plan_query(self) -> Any:
        """The task's query up to its start: its data source registered, the stream loaded (its schema
        only: Spark asks the source for a reader when the query starts), converted and transformed where
        the plan allows, the writer set up. Nothing is read until ``start``."""
        spark = self._spark()
        options = {
            **({"topics": ",".join(self.topics)} if self.topics else {"topics.regex": self.topics_regex}),
            "group.id": self.group_id,
            "auto.offset.reset": self._consumer_settings.get("auto.offset.reset", "earliest"),
            "task.index": str(self.task_id.task),
            "task.count": str(self.task_count),
            **{f"kafka.{k}": v for k, v in self._client_conf().items() if k != "auto.offset.reset"},
        }
        self._checkpoint = str(make_scratch_dir("kconnect-checkpoint-", self.pool))
        from kconnect.runtime.dataplane.kafka_reader import task_data_source

        frame = self._spark_kafka_stream(spark, options)
        if frame is None:
            source = task_data_source(self.pool)
            spark.dataSource.register(source)
            frame = spark.readStream.format(source.name()).options(**options).load()
        if self._on_stream:
            frame = self._prepared(frame)
            self._stream_schemas = record_schemas(frame)
        return (
            frame.writeStream.queryName(f"kconnect-{self.pool}")
            .foreachBatch(self._batch)
            .option("checkpointLocation", self._checkpoint)
            .trigger(processingTime=SINK_TRIGGER)
        )

    def _chosen_reader(self) -> spark_kafka.Reader:
        """Spark's Kafka source or the Python one (``spark_kafka.choose``), decided once per task."""
        if self._reader_choice is None:
            choice = spark_kafka.choose(spark_kafka.available(self._spark()), self._consumer_props)
            self.log.info("sink task reader", spark_kafka=choice.spark_kafka, reason=choice.reason)
            self._reader_choice = choice
        return self._reader_choice

    def _spark_kafka_stream(self, spark: Any, options: Mapping[str, str]) -> Any:
        """The task's stream read by Spark's Kafka source (``spark_kafka.stream``), or None to read with the
        Python source; the partitions it was given are watched (``_loop``) until the query stops."""
        if not self._chosen_reader().spark_kafka:
            return None
        frame, self._kafka_watch = spark_kafka.stream(
            spark, options, self._consumer_props, self._bootstrap, f"kconnect-{self.pool}"
        )
        return frame

    def _stop_query(self) -> None:
        watch, self._kafka_watch = self._kafka_watch, None
        if watch is not None:
            watch.close()
        with self._lock:
            query, self._query = self._query, None
        if query is not None:
            try:
                query.stop()
            finally:
                shutil.rmtree(self._checkpoint, ignore_errors=True)

    #: Where the task's records are read, converted and put (``kconnect_task_placement`` in /metrics):
    #: here a Structured Streaming query's micro-batches; ``sink_loop.WorkerSinkTaskRunner`` says
    #: ``worker`` (a consumer loop on the task's thread, no Spark job).
    placement = "query"

    def run(self) -> None:
        """The task's loop (:meth:`_loop`); on the way out close the partitions and the task's clients."""
        if self._committer is None and self._warm_committer is not None:
            self._committer, self._warm_committer = self._warm_committer, None
        try:
            self._loop()
        finally:
            self._close()

    def _loop(self) -> None:
        """Keep the query running while the task is started, stop it while paused, restart it after a
        rewind or a failed Spark job. The task is RUNNING once its first query is active (the SparkSession
        and the query take seconds to start)."""
        try:
            while not self._stopping.is_set():
                if not self._running.is_set():
                    self._stop_query()
                    self._running.wait(0.5)
                    continue
                with self._lock:
                    query = self._query
                if query is None:
                    query = self._start_query()
                    with self._lock:
                        self._query = query
                    self.log.info(
                        "sink query started",
                        pool=self.pool,
                        group=self.group_id,
                        prepared_on_stream=self._on_stream,
                        reader="spark-kafka" if self._kafka_watch and self._kafka_watch.given else "python",
                    )
                    if query.isActive:
                        # RUNNING from here, not from the first batch: the topics may well be empty.
                        self.loop_began()
                if query.awaitTermination(0.5):
                    error = query.exception()
                    raise ConnectorError(
                        f"the streaming query of sink task {self.task_id} ended: {error or 'stopped'}"
                    )
                if self._kafka_watch is not None and self._kafka_watch.changed(self.log):
                    self._restart.set()
                if self._restart.is_set():  # a rewind: the next query starts from the committed offsets
                    self._stop_query()
                    continue
                if isinstance(self.sink, FrameSinkTask):
                    self._idle_pre_commit()
        finally:
            self._stop_query()

    def _close(self) -> None:
        """Close the partitions the task opened, then its own clients (committer, dead letter producer)."""
        if self.assignment:
            try:
                self.sink.close(sorted(self.assignment, key=str))
            except Exception as exc:
                self.log.warning("closing partitions failed", error=str(exc))
        if self._committer is not None:
            self._committer.close()
        if self._dlq_producer is not None:
            self._dlq_producer.flush(5)
