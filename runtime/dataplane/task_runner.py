"""Per-task loops of the data plane: a sink task as a Structured Streaming query, a source task as a
poll loop. Each runs on a thread of its own so a slow or failing task never holds the herder or another task.

Sink tasks (``SinkTaskRunner``): a streaming query over ``kafka_source.KafkaDataSource`` with
``foreachBatch`` on the driver: the raw frame through the connector's converters, transforms and
``errors.*`` policy (``sink_batch``); failed rows fail the task (``errors.tolerance=none``) or are logged and
dead-lettered (``=all``) before anything is committed; good rows -> ``SinkRecord`` -> ``put`` ->
``pre_commit`` (which flushes) -> commit of the consumer offsets to group ``connect-<connector>``.
A ``FrameSinkTask`` (Parquet, JDBC) gets the good rows as one DataFrame (``put_frame``) instead: its
writes run on Spark's executors and no row is collected to the driver.
Offsets move only after the output is durable: at-least-once, and a task restarted anywhere resumes from
that group's offsets. Each sink task's Spark work runs in its own FAIR scheduler pool and job group.

Source tasks (``SourceTaskRunner``) pass through Spark only when the connector has transforms:
``SourceTask.poll`` is driver-side user code (it reads files, sockets, APIs on this machine) and its
records must be produced in poll order with their source offsets tracked per record. Their keys and values
are encoded with the configured converters (``source_encoding``); with transforms, each poll batch then
goes through the chain as one frame (``source_batch``), and records the chain drops are acknowledged with
``commit_record(record, None)`` and their offsets committed. They are produced with an idempotent
confluent-kafka producer, and their source offsets are written to the offsets topic every
``offset.flush.interval.ms`` and on stop, only after a producer flush has had every record before them
acknowledged. With ``exactly.once.source.support=enabled`` a transactional producer carries records and
offsets in one transaction per boundary instead (KIP-618; ``exactly_once``).

The decisions (which offsets to commit) are pure functions at the top of the module.
"""

from __future__ import annotations

import importlib
import shutil
import tempfile
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from py4j.protocol import Py4JJavaError

from kconnect.runtime import logs
from kconnect.runtime.client_config import Role, task_clients
from kconnect.runtime.dataplane.errors_policy import ERROR_MESSAGE
from kconnect.runtime.dataplane.exactly_once import ExactlyOnce, commit_due, producer_settings
from kconnect.runtime.dataplane.sink_batch import (
    FAILURE_COLUMNS,
    RECORD_COLUMNS,
    prepare,
    record_schemas,
    records_from_columns,
    sink_plan,
    tolerance_message,
)
from kconnect.runtime.dataplane.source_batch import raw_row, source_plan, transform_batch
from kconnect.runtime.dataplane.source_encoding import source_encoder
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import (
    ConnectorError,
    FrameBatch,
    FrameSinkTask,
    PluginRegistry,
    RetriableError,
    SinkRecord,
    SinkTask,
    SourceRecord,
    SourceTask,
    Task,
    TopicPartition,
)
from kconnect.runtime.storage.offset_log import OffsetMap, OffsetState, SourceOffset, partition_json
from kconnect.runtime.storage.offset_log import encode as encode_offset

log = logs.get(__name__)

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


# ------------------------------------------------------------------------------------------ pure core


def consumed_offsets(rows: Iterable[Sequence[Any]]) -> dict[TopicPartition, int]:
    """Next offset to read per partition after a batch of raw rows (topic, partition, offset, ...)."""
    out: dict[TopicPartition, int] = {}
    for row in rows:
        tp = TopicPartition(str(row[0]), int(row[1]))
        out[tp] = max(out.get(tp, 0), int(row[2]) + 1)
    return out


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


def client_settings(
    kind: Role, security_protocol: str, worker_passthrough: Mapping[str, str], task_config: Mapping[str, str]
) -> dict[str, str]:
    """librdkafka settings for one of a task's clients: worker ``<kind>.*`` then the connector's
    ``<kind>.override.*`` (Java's rule; kconnect applies overrides without an override policy check), and
    for ``admin`` the worker's top-level settings first, as Java's connector admin clients. Java names are
    translated (:mod:`kconnect.runtime.client_config`); a connector override no client has is ignored
    with a warning, one that cannot be translated fails the task naming the key."""
    translated = task_clients(kind, security_protocol, worker_passthrough, task_config)
    overridden = {k[len(f"{kind}.override.") :] for k in task_config if k.startswith(f"{kind}.override.")}
    ignored = [f"{kind}.override.{k}" for k in translated.ignored if k in overridden]
    if ignored:
        log.warning("connector client overrides no kconnect client has (ignored)", keys=ignored)
    return translated.settings


def _produce(
    producer: Any, topic: str, key: bytes | None, value: bytes | None, kwargs: dict[str, Any]
) -> None:
    """Produce one record, letting deliveries drain the local queue while it is full."""
    while True:
        try:
            producer.produce(topic, value=value, key=key, **kwargs)
            return
        except BufferError:
            producer.poll(0.1)


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


# ------------------------------------------------------------------------------------------ runners


@dataclass
class RunnerCounters:
    records: int = 0
    offset_commits: int = 0
    offset_commit_ms_total: float = 0.0


def instantiate_task(registry: PluginRegistry, config: Mapping[str, str]) -> Task:
    """The task object for a task config: ``task.class`` if the config names one, else the connector's."""
    name = config.get("task.class")
    if name:
        module, _, qualname = name.rpartition(".")
        try:
            obj: Any = importlib.import_module(module)
            for part in qualname.split("."):
                obj = getattr(obj, part)
        except (ImportError, AttributeError, ValueError):
            obj = None
        if isinstance(obj, type) and issubclass(obj, Task):
            return obj()
    connector_class = config.get("connector.class")
    if not connector_class:
        raise ConnectorError("the task config names neither task.class nor connector.class")
    return registry.new_connector(connector_class).task_class()()


class TaskRunner:
    """What the executor holds per task: a thread, a target state, counters and the way to stop."""

    def __init__(
        self,
        task_id: TaskId,
        task: Task,
        config: Mapping[str, str],
        on_failure: Callable[[TaskId, str], None],
    ) -> None:
        self.task_id = task_id
        self.task = task
        self.config = dict(config)
        self.counters = RunnerCounters()
        self._on_failure = on_failure
        self._stopping = threading.Event()
        self._running = threading.Event()  # set while the target state is STARTED
        self._thread: threading.Thread | None = None
        self.failed: str | None = None
        self.log = logs.get("kconnect.task", task=str(task_id))

    # --- lifecycle, called by the executor

    #: Whether the plugin task is started by ``run`` on the task's own thread instead of by ``start``
    #: (an exactly-once source task must first fence older instances and read offsets to the end).
    starts_on_thread = False

    def start(self, paused: bool) -> None:
        """Start the plugin task on the caller's thread (quick), then its loop on a thread of its own."""
        if not self.starts_on_thread:
            self.task.start(dict(self.config))
        if not paused:
            self._running.set()
        self._thread = threading.Thread(target=self._main, name=f"task-{self.task_id}", daemon=True)
        self._thread.start()

    def set_paused(self, paused: bool) -> None:
        if paused:
            self._running.clear()
        else:
            self._running.set()
        self._wake()

    def stop(self, timeout_s: float) -> bool:
        """Ask the loop to end and wait at most ``timeout_s``; False if it did not end in time."""
        self._stopping.set()
        self._running.set()
        self._wake()
        thread = self._thread
        if thread is not None:
            thread.join(timeout_s)
            return not thread.is_alive()
        return True

    # --- the loop

    def _main(self) -> None:
        logs.bind(task=str(self.task_id))
        try:
            self.run()
        except BaseException:
            trace = traceback.format_exc()
            if self._stopping.is_set():
                # Torn down under its feet while stopping: not a failure to report, as the task is gone.
                self.log.warning("task raised while stopping", trace=trace)
                return
            self.failed = trace
            self.log.error("task failed", trace=trace)
            self._on_failure(self.task_id, trace)
        finally:
            try:
                self.task.stop()
            except Exception as exc:
                self.log.warning("task stop failed", error=str(exc))

    def run(self) -> None:
        raise NotImplementedError

    def _wake(self) -> None:
        """Cut a wait in the loop short (subclasses override)."""


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


class SinkTaskRunner(TaskRunner):
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
        producer_settings: Mapping[str, str] | None = None,
        admin_settings: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(task_id, task, config, on_failure)
        self.sink: SinkTask = task
        #: The dead letter queue's producer and admin client (Java's connector producer and admin configs).
        self._producer_settings = dict(producer_settings or {})
        self._admin_settings = dict(admin_settings or {})
        self._spark = spark
        self.task_count = task_count
        self._bootstrap = bootstrap
        self._converters = dict(converters)
        # Built here so a bad converter, transform or errors.* key fails the task at start, clearly.
        self._plan = sink_plan(self._converters, config, task_id.connector, task_id.task)
        self._dlq_producer: Any = None
        self._dlq_error: str | None = None
        self._consumer_settings = dict(consumer_settings)
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
        self._query: Any = None
        self._lock = threading.Lock()
        # Serialises a frame sink's batches with the idle pre_commit calls made from the runner thread.
        self._sink_lock = threading.Lock()
        self._last_batch_end = 0.0
        self._idle_busy = False
        self.sink.initialize(_SinkContext(self))

    @property
    def pool(self) -> str:
        return f"{self.task_id.connector}-{self.task_id.task}"

    def _client_conf(self) -> dict[str, str]:
        return {"bootstrap.servers": self._bootstrap, **self._consumer_settings}

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        from confluent_kafka import Consumer
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        if self._committer is None:
            self._committer = Consumer(
                {**self._client_conf(), "group.id": self.group_id, "enable.auto.commit": False}
            )
        started = time.monotonic()
        self._committer.commit(
            offsets=[KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()],
            asynchronous=False,
        )
        self.counters.offset_commits += 1
        self.counters.offset_commit_ms_total += (time.monotonic() - started) * 1000
        self._committed.update(offsets)

    def _batch(self, frame: Any, batch_id: int) -> None:
        """foreachBatch, on the driver: convert and transform, handle failed rows, deliver, make durable,
        then commit. The prepared rows come to the driver once, as Arrow columns (``toArrow``), which
        costs far less per record than ``collect``'s Row objects. With transforms the raw batch is cached,
        as it is read twice (positions and rows); without, it is read once, and again only for dead letters.
        """
        import pyarrow.compute as pc
        from pyspark.sql import functions as F

        from kconnect.runtime.dataplane.errors_policy import ERROR_MESSAGE, split

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
        raw = frame.persist() if transforms else frame
        try:
            consumed: dict[TopicPartition, int] = {}
            if transforms:
                # From the raw rows, not the transformed ones: a router changes the topic, Filter drops
                # rows, and the consumer must still move past every record it read.
                positions = raw.groupBy("topic", "partition").agg(F.max("offset")).collect()
                if not positions:
                    return
                consumed = {TopicPartition(str(r[0]), int(r[1])): int(r[2]) + 1 for r in positions}
            prepared = prepare(self._plan, raw)
            # Only what a good record needs, and the error message that tells good from failed: the other
            # failure columns (the raw key and value among them, as large as the record) are fetched for
            # failed rows alone, below; collecting them for every row would double what travels.
            table = prepared.select(*RECORD_COLUMNS, ERROR_MESSAGE).toArrow()
            if not transforms:
                # Without transforms every raw row is here, under its own topic: no extra Spark job.
                if table.num_rows == 0:
                    return
                consumed = consumed_offsets_of_table(table)
            errors = table.column(ERROR_MESSAGE)
            if errors.null_count != len(errors):
                failed = split(prepared)[1]
                bad = [row.asDict() for row in failed.select(*RECORD_COLUMNS, *FAILURE_COLUMNS).collect()]
                self._handle_failed(failed, bad)
                table = table.filter(pc.is_null(errors))
            key_schema, value_schema = record_schemas(prepared)
        except Py4JJavaError as exc:
            if self._spark_failed(exc):
                return
            raise
        finally:
            if transforms:
                raw.unpersist()
        self._spark_failures = 0
        collected = time.monotonic()
        new = {tp for tp in consumed if tp not in self.assignment}
        if new:
            self.assignment |= new
            self.sink.open(sorted(new, key=str))
            if self._rewound():
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
        answer = self.sink.pre_commit(dict(self._consumed))
        to_commit = offsets_to_commit(self._consumed, answer, self._committed)
        if to_commit:
            self._commit(to_commit)
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
        """foreachBatch for a frame sink task: the prepared frame goes to ``put_frame`` without being
        collected; only positions (one small aggregation) and failed rows (usually none) reach the driver.
        """
        from pyspark.sql import functions as F

        from kconnect.runtime.dataplane.errors_policy import split

        raw = frame.persist()
        prepared = None
        try:
            positions = raw.groupBy("topic", "partition").agg(F.min("offset"), F.max("offset")).collect()
            if not positions:
                return
            ranges = {TopicPartition(str(r[0]), int(r[1])): (int(r[2]), int(r[3])) for r in positions}
            prepared = prepare(self._plan, raw).persist()
            good, failed = split(prepared)
            bad = [row.asDict() for row in failed.select(*RECORD_COLUMNS, *FAILURE_COLUMNS).collect()]
            if bad:
                self._handle_failed(failed, bad)
            key_schema, value_schema = record_schemas(prepared)
            new = {tp for tp in ranges if tp not in self.assignment}
            if new:
                self.assignment |= new
                sink.open(sorted(new, key=str))
            written = sink.put_frame(
                FrameBatch(
                    frame=good.select(*RECORD_COLUMNS),
                    key_schema=key_schema,
                    value_schema=value_schema,
                    offsets=ranges,
                    batch_id=batch_id,
                )
            )
            if written is not None:
                self.counters.records += written
        finally:
            if prepared is not None:
                prepared.unpersist()
            raw.unpersist()
        self._consumed.update({tp: last + 1 for tp, (_, last) in ranges.items()})
        answer = sink.pre_commit(dict(self._consumed))
        to_commit = offsets_to_commit(self._consumed, answer, self._committed)
        if to_commit:
            self._commit(to_commit)
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
            answer = self.sink.pre_commit(dict(self._consumed))
            to_commit = offsets_to_commit(self._consumed, answer, self._committed)
            if to_commit:
                self._commit(to_commit)
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

    def _handle_failed(self, failed: Any, rows: list[dict[str, Any]]) -> None:
        """Failed rows: fail the task (tolerance none) or log and dead-letter them (tolerance all)."""
        from kconnect.runtime.dataplane.errors_policy import Decision, dlq_rows

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
        if policy.dead_letter:
            letters = dlq_rows(failed, policy, self.task_id.connector, self.task_id.task).collect()
            self._dead_letter(letters)
        self.log.warning(
            "records skipped on errors", count=len(rows), dead_letter_topic=policy.dlq_topic or None
        )

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
            while True:
                try:
                    producer.produce(policy.dlq_topic, value=value, key=key, **kwargs)
                    break
                except BufferError:
                    producer.poll(0.1)
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
        sc = spark.sparkContext
        sc.setLocalProperty("spark.scheduler.pool", self.pool)
        sc.setJobGroup(f"kconnect-{self.pool}", f"kconnect sink task {self.task_id}", True)
        options = {
            **({"topics": ",".join(self.topics)} if self.topics else {"topics.regex": self.topics_regex}),
            "group.id": self.group_id,
            "auto.offset.reset": self._consumer_settings.get("auto.offset.reset", "earliest"),
            "task.index": str(self.task_id.task),
            "task.count": str(self.task_count),
            **{f"kafka.{k}": v for k, v in self._client_conf().items() if k != "auto.offset.reset"},
        }
        self._checkpoint = tempfile.mkdtemp(prefix=f"kconnect-{self.pool}-")
        from kconnect.runtime.dataplane.kafka_reader import FORMAT

        frame = spark.readStream.format(FORMAT).options(**options).load()
        return (
            frame.writeStream.queryName(f"kconnect-{self.pool}")
            .foreachBatch(self._batch)
            .option("checkpointLocation", self._checkpoint)
            .trigger(processingTime=SINK_TRIGGER)
            .start()
        )

    def _stop_query(self) -> None:
        with self._lock:
            query, self._query = self._query, None
        if query is not None:
            try:
                query.stop()
            finally:
                shutil.rmtree(self._checkpoint, ignore_errors=True)

    def run(self) -> None:
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
                    self.log.info("sink query started", pool=self.pool, group=self.group_id)
                if query.awaitTermination(0.5):
                    error = query.exception()
                    raise ConnectorError(
                        f"the streaming query of sink task {self.task_id} ended: {error or 'stopped'}"
                    )
                if self._restart.is_set():  # a rewind: the next query starts from the committed offsets
                    self._stop_query()
                    continue
                if isinstance(self.sink, FrameSinkTask):
                    self._idle_pre_commit()
        finally:
            self._stop_query()
            if self.assignment:
                try:
                    self.sink.close(sorted(self.assignment, key=str))
                except Exception as exc:
                    self.log.warning("closing partitions failed", error=str(exc))
            if self._committer is not None:
                self._committer.close()
            if self._dlq_producer is not None:
                self._dlq_producer.flush(5)


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
    def __init__(self, config: Mapping[str, str], reader: _OffsetReader) -> None:
        self._config = config
        self._reader = reader

    def configs(self) -> Mapping[str, str]:
        return self._config

    @property
    def offset_storage_reader(self) -> _OffsetReader:
        return self._reader


class SourceTaskRunner(TaskRunner):
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
    ) -> None:
        super().__init__(task_id, task, config, on_failure)
        self.source: SourceTask = task
        #: Set when the worker has exactly.once.source.support=enabled: records and offsets go to Kafka
        #: in one transaction per boundary (``exactly_once``), and the task starts on its own thread.
        self.eos = exactly_once
        self.starts_on_thread = exactly_once is not None
        self._sync_offsets = sync_offsets
        self._fence = fence
        self._open: list[SourceRecord] = []  # records of the open transaction, in poll order
        self._acks: dict[int, Any] = {}  # index in _open -> delivery metadata
        self._in_transaction = False
        self._begun = 0.0  # monotonic time the open transaction began
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
        #: Each poll's records in poll order, with how many are still unacknowledged.
        self._submitted: deque[_Submitted] = deque()
        #: The committer thread (non-transactional tasks, while running) and its write under way.
        self._committer: ThreadPoolExecutor | None = None
        self._storing: Future[None] | None = None
        self._delivery_error: str | None = None
        self._hears_acks = type(task).commit_record is not SourceTask.commit_record
        self.source.initialize(_SourceContext(self.config, _OffsetReader(task_id.connector, read_offsets)))

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is not None and self._delivery_error is None:
            self._delivery_error = f"producing to {message.topic()} failed: {error}"

    def _batch_callback(self, batch: _Submitted) -> Callable[[Any, Any], None]:
        """The producer callback for the records of one poll: count each acknowledgement, note a failure."""

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                batch.pending -= 1
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

        def delivered(error: Any, message: Any) -> None:
            if error is None:
                batch.pending -= 1
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
            _produce(producer, topic, key, value, kwargs)
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
            storing.result()  # a failed write fails the task here, on its own thread
        if not self._submitted:
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
        if not records:
            return
        offsets = latest_source_offsets(self.task_id.connector, records)
        if final or self._committer is None:
            self._store(offsets, len(records), started)
        else:
            self._storing = self._committer.submit(self._store, offsets, len(records), started)

    def _store(self, offsets: list[SourceOffset], records: int, started: float) -> None:
        """Write one flush's offsets and tell the task (``commit``, which Java also calls from its
        committer thread)."""
        if offsets:
            self._write_offsets(offsets)
        self.counters.offset_commits += 1
        self.counters.offset_commit_ms_total += (time.monotonic() - started) * 1000
        self.source.commit()
        # How far the task has got (``PUT /admin/loggers/kconnect.task {"level": "DEBUG"}`` shows it).
        self.log.debug(
            "source offsets flushed",
            records=records,
            total=self.counters.records,
            flush_ms=round((time.monotonic() - started) * 1000),
        )

    def run(self) -> None:
        if self.eos is not None:
            self._run_transactional(self.eos)
            return
        from confluent_kafka import Producer

        producer = Producer(
            {
                "bootstrap.servers": self._bootstrap,
                "client.id": f"connector-producer-{self.task_id}",
                **self._producer_settings,
                "enable.idempotence": True,
            }
        )
        next_flush = time.monotonic() + self._flush_interval_s
        self._committer = ThreadPoolExecutor(1, thread_name_prefix=f"offsets-{self.task_id}")
        try:
            while not self._stopping.is_set():
                if not self._running.is_set():
                    self._flush(producer)
                    self._running.wait(0.5)
                    continue
                records = self.source.poll() or []
                if records:
                    self._send(producer, records)
                producer.poll(0)
                if self._delivery_error is not None:
                    raise ConnectorError(self._delivery_error)
                if time.monotonic() >= next_flush:
                    self._flush(producer)
                    next_flush = time.monotonic() + self._flush_interval_s
        finally:
            if self.failed is None and self._delivery_error is None:
                try:
                    self._flush(producer, final=True)
                except Exception as exc:
                    self.log.warning("final offset flush failed", error=str(exc))
            self._committer.shutdown(wait=True)

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
        clean = False
        try:
            while not self._stopping.is_set():
                if not self._running.is_set():
                    self._commit_transaction(producer, eos)
                    self._running.wait(0.5)
                    continue
                records = self.source.poll() or []
                self.counters.records += len(records)
                for record, out in self._prepare(records):
                    self._begin(producer)
                    if out is not None:
                        topic, key, value, kwargs = out
                        kwargs["on_delivery"] = self._transactional_ack(len(self._open))
                        try:
                            _produce(producer, topic, key, value, kwargs)
                        except KafkaException as exc:
                            raise ConnectorError(
                                self._transaction_failure("producing a record", exc)
                            ) from exc
                    # Skipped or dropped records' offsets commit with the others (commit_record with None).
                    self._open.append(record)
                producer.poll(0)
                if self._delivery_error is not None:
                    raise ConnectorError(self._delivery_error)
                due = commit_due(
                    eos.policy, open_records=len(self._open), now_s=time.monotonic(), begun_s=self._begun
                )
                if due:
                    self._commit_transaction(producer, eos)
            clean = True
        finally:
            if clean:
                # A clean stop commits what was polled, as Java's final offset commit does.
                self._commit_transaction(producer, eos)
            else:
                self._abort_transaction(producer)
            producer.flush(5)

    def _begin(self, producer: Any) -> None:
        from confluent_kafka import KafkaException

        if self._open or self._in_transaction:
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

        def delivered(error: Any, message: Any) -> None:
            # Nothing may raise here: an exception inside a librdkafka callback surfaces as a SystemError
            # from whichever poll or flush served it, without the cause.
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
                _produce(producer, eos.offsets_topic, key, value, {"on_delivery": self._on_delivery})
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
        self.counters.offset_commits += 1
        self.counters.offset_commit_ms_total += (time.monotonic() - started) * 1000
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
        if policy.log_enable:
            for index, row in failed:
                fields: dict[str, Any] = {"topic": records[index].topic, "message": row.get(ERROR_MESSAGE)}
                if policy.log_include_messages:
                    fields.update(key=repr(records[index].key), value=repr(records[index].value))
                self.log.error("error transforming a source record; skipped (errors.tolerance=all)", **fields)
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
        from kconnect.runtime.dataplane.connect_data import ConnectDataError

        try:
            encoded: tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]
            encoded = self._encoder.encode(record)
            return encoded
        except ConnectDataError as exc:
            policy = self._encoder.policy
            message = f"converting a record for topic {record.topic} failed: {exc}"
            if not policy.tolerance_all:
                raise ConnectorError(f"Tolerance exceeded in error handler: {message}") from exc
            if policy.log_enable:
                fields: dict[str, Any] = {"topic": record.topic, "message": str(exc)}
                if policy.log_include_messages:
                    fields.update(key=repr(record.key), value=repr(record.value))
                self.log.error("error converting a source record; skipped (errors.tolerance=all)", **fields)
            return None

    def _wake(self) -> None:
        if self._stopping.is_set():
            # SourceTask.stop is called from another thread so that a blocked poll returns.
            try:
                self.source.stop()
            except Exception as exc:
                self.log.warning("task stop failed", error=str(exc))
