"""The task shell both table sinks share: stage micro-batches, commit to tables by records, bytes or time,
resume from the tables' own commit metadata.

Why it is built this way:

- Each micro-batch reaches the task as a DataFrame (``FrameSinkTask.put_frame``); it is *staged* as Parquet
  in the task's scratch directory (a Spark job on the executors, nothing collected), so a commit can cover
  many batches: tables get fewer, larger files and snapshots than one commit per micro-batch would make.
- A commit (:func:`commits.commit_due`: N records, B bytes or T ms, whichever first; checked after each
  batch and about every half second while the topic is idle; an interval commit starts early by the time
  the last commit took, so that records are queryable about an interval after they were read) reads the
  staged Parquet back, routes rows to tables, creates or evolves each table, and writes it with the
  format's own atomic commit carrying the Kafka offsets it covers (``kconnect.offsets.<connector>``).
  Then, and only then, ``pre_commit`` lets the runtime commit those offsets to Kafka.
- Exactly once with no coordinator: just before writing a table, the task reads the offsets the table
  already holds and drops rows below them. Records read again after a crash between a table commit and the
  Kafka offset commit, after a rebalance, or already written by a zombie, are never written twice; staged
  data lost in a crash was never committed anywhere, so Kafka gives it again. A partition opened here seeks
  (``SinkTaskContext.offset``) to what its tables hold when that is ahead of the consumer group.
- A round's last steps may run beside the next micro-batch (``rounds``: Iceberg's appends of tables whose
  files are written); nothing it covers counts as committed before they have ended.
- Table maintenance (``maintenance``: compaction, snapshot expiry or VACUUM) runs on the task's own thread
  right after ``pre_commit``'s commit check, so never during one of its commits, one table at a time, on
  the tables this task has written. A maintenance step that fails is logged and retried at the next
  interval: it leaves the table as it was, and the data path must not stop for it.
"""

from __future__ import annotations

import abc
import contextvars
import shutil
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar, TypeVar

from kconnect.connectors.lakehouse import config as cfg
from kconnect.connectors.lakehouse.commits import (
    below_floors_condition,
    commit_directly,
    commit_due,
    lead_time,
    sql_string,
    unwritten_from,
    wait_start,
)
from kconnect.connectors.lakehouse.evolution import Evolution, SchemaEvolutionError, plan, quote_name
from kconnect.connectors.lakehouse.maintenance import MaintenancePolicy, MaintenanceResult, maintenance_due
from kconnect.connectors.lakehouse.rounds import Deferred, RoundThread, run_steps
from kconnect.connectors.lakehouse.routing import topic_table
from kconnect.runtime import __version__, logs
from kconnect.runtime.dataplane.scratch import make_scratch_dir
from kconnect.runtime.plugins.api import ConnectorError, FrameBatch, FrameSinkTask, TopicPartition
from kconnect.runtime.plugins.config_def import ConfigDef

log = logs.get(__name__)

#: Bookkeeping columns of staged rows; user fields keep their names beside them.
TOPIC, PARTITION, OFFSET, OP, ROUTE = "_kc_topic", "_kc_partition", "_kc_offset", "_kc_op", "_kc_route"
META = (TOPIC, PARTITION, OFFSET)
DELETE_OPS = ("d", "D")
#: How many of a commit's tables are written at once (each its own Spark job and catalog commit).
COMMIT_THREADS = 8

_I = TypeVar("_I")
_R = TypeVar("_R")


@dataclass(frozen=True)
class Stage:
    """One staged micro-batch: its Parquet directory (None: no rows, e.g. only null values), the offset
    ranges it covers, when its records' wait for a commit counts from (``commits.wait_start``), its size on
    disk and when its batch was read (its end offsets fixed: a later record is in a later batch)."""

    path: str | None
    ranges: Mapping[TopicPartition, tuple[int, int]]
    at: float
    size: int
    read: float = 0.0


@dataclass(frozen=True)
class Pick:
    """Where a table's rows come from when they are one value's rows of the commit's shared frame: that
    frame (``source``), its column naming each row's table (the route field's value or the topic) and this
    table's value; ``bound``: at most how many rows ``source`` has (the records the commit covers);
    ``collected``: ``source``'s rows already on the driver as a pyarrow Table, when the commit collected
    them to route them (:meth:`TableSinkTask._collect_small`), else None.

    Why: a format can then take every table's rows of a round in one pass over ``source`` instead of a
    scan (and a plan) per table."""

    source: Any
    column: str
    value: str
    bound: int
    collected: Any = None

    def rows(self) -> Any:
        """This table's rows of ``source`` (without the route column), as a frame made now."""
        picked = self.source.where(f"{self.column} = {sql_string(self.value)}")
        return picked.drop(ROUTE) if self.column == ROUTE else picked

    def fields(self) -> list[Any]:
        """The fields of :meth:`rows`, read from ``source`` (its schema is read once, not once a table)."""
        return [f for f in self.source.schema.fields if f.name != ROUTE]


@dataclass(frozen=True)
class Pending:
    """One table's part of a commit, ready to write: its rows (META columns kept, rows the table holds
    dropped; None: not made yet, see :meth:`frame`), the next offset per partition its commit records, its
    id columns in upsert mode, where its rows were picked from (None: not a single value's rows of a
    shared frame) and the condition that drops the rows it holds (None: none dropped).

    Why rows may be left unmade: making a frame is a plan the JVM analyses; a round of 50 tables made 100
    of them (a selection and a projection each) that the one-pass write of picked tables never uses."""

    table: str
    rows: Any
    covered: Mapping[TopicPartition, int]
    ids: tuple[str, ...]
    pick: Pick | None = None
    keep: str | None = None

    def frame(self) -> Any:
        """The rows to write as a frame: ``rows``, or the pick's rows with ``keep`` applied, made now."""
        if self.rows is not None:
            return self.rows
        if self.pick is None:
            raise ConnectorError(f"table {self.table}: neither rows nor where to pick them from")
        picked = self.pick.rows()
        return picked if self.keep is None else picked.where(self.keep)

    def fields(self) -> list[Any]:
        """The fields of :meth:`frame`, without making it when the rows are picked."""
        return (
            list(self.rows.schema.fields)
            if self.rows is not None or self.pick is None
            else self.pick.fields()
        )


#: One table of a commit: its name, its rows (None: to be made from the pick), the next offset per partition
#: its commit records, and where its rows were picked from (``Pick``; None: not one value's rows of a
#: shared frame).
Route = tuple[str, Any, dict[TopicPartition, int], Pick | None]


class TableSinkTask(FrameSinkTask):
    """Stages batches and commits them to tables; a table format supplies the ``_table_*`` methods."""

    PREFIX: ClassVar[str]
    CONFIG: ClassVar[ConfigDef]
    #: A commit's rows are routed and written by table, whatever Spark partitions a batch came in.
    COALESCE_READS = True

    def __init__(self) -> None:
        self.config: cfg.TableSinkConfig | None = None
        self._scratch: Path | None = None
        self._spark: Any = None
        self._staged: list[Stage] = []
        self._value_type: Any = None
        #: Next offset not yet staged or held by the tables (rows below it are dropped at staging).
        self._floor: dict[TopicPartition, int] = {}
        #: Next offset every table holds: what ``pre_commit`` lets the runtime commit to Kafka.
        self._committed: dict[TopicPartition, int] = {}
        self._opening: set[TopicPartition] = set()
        self._counter = 0
        self.commits = 0
        #: Tables this task has written (maintenance works on these) and when maintenance last ran.
        self._tables: set[str] = set()
        self._assigned: set[TopicPartition] = set()
        self._maintained_at = time.time()
        self._pool: ThreadPoolExecutor | None = None
        #: How long the last commit took (None: none yet): the next starts that much early.
        self._took: float | None = None
        #: When the newest batch the last commit covered was read (None: no commit yet), the floor of
        #: ``commits.wait_start``.
        self._covered_read: float | None = None
        #: The commit whose last steps run beside the next batch (``rounds``), and the steps the commit
        #: being made defers (None: it may defer none).
        self._rounds = RoundThread()
        self._deferred: list[Deferred] | None = None
        #: When the last commit check ended, and the time between the last two (``commits.lead_time``).
        self._checked_at: float | None = None
        self._check_gap: float | None = None

    def version(self) -> str:
        return __version__

    # --- what a table format supplies

    @abc.abstractmethod
    def _prepare(self, spark: Any) -> None:
        """Check the worker's SparkSession can write the format (naming the spark.* keys if not)."""

    @abc.abstractmethod
    def _table_schema(self, spark: Any, table: str) -> Any:
        """The table's Spark schema, or None if it does not exist."""

    @abc.abstractmethod
    def _create_table(self, spark: Any, table: str, schema: Any) -> None: ...

    @abc.abstractmethod
    def _evolve_table(self, spark: Any, table: str, change: Evolution) -> None: ...

    @abc.abstractmethod
    def _held_offsets(self, spark: Any, table: str) -> dict[TopicPartition, int]:
        """The next offset per partition this connector's commits to the table hold."""

    @abc.abstractmethod
    def _maintain_table(self, spark: Any, table: str, policy: MaintenancePolicy) -> MaintenanceResult:
        """Compact the table's small files, then expire snapshots (or VACUUM), as ``policy`` says; never
        remove what :meth:`_held_offsets` needs."""

    @abc.abstractmethod
    def _write(
        self, spark: Any, table: str, rows: Any, covered: Mapping[TopicPartition, int], ids: tuple[str, ...]
    ) -> None:
        """Append ``rows`` (or merge them by ``ids`` in upsert mode, ``OP`` saying delete) in one atomic
        commit that records ``covered`` (next offset per partition) for this connector. ``rows`` keeps the
        META columns for formats that commit per partition; drop them before writing."""

    # --- lifecycle

    def start(self, props: dict[str, str]) -> None:
        self.config = cfg.parse(self.CONFIG, props, self.PREFIX)
        label = f"{self.config.connector}-{props.get(cfg.TASK_ID_CONFIG, '0')}".replace("/", "_")
        self._scratch = make_scratch_dir("kconnect-lakehouse-", label)
        self._staged, self._floor, self._committed, self._opening = [], {}, {}, set()
        self._value_type = None
        self._tables, self._assigned, self._maintained_at = set(), set(), time.time()
        self._took = None
        self._covered_read = None
        self._rounds, self._deferred = RoundThread(), None
        self._checked_at = self._check_gap = None

    def stop(self) -> None:
        """Staged rows were never committed anywhere: dropping them is safe, Kafka has them. A round in
        flight ends first (its files are in the scratch directory); what it committed is in its tables'
        snapshots, which a task resuming reads, whether or not Kafka's offsets caught up."""
        self._rounds.shutdown()
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        """Note the partitions; their tables' offsets are read at the first batch (it has the session)."""
        parts = set(partitions)
        self._opening.update(parts)
        self._assigned.update(parts)

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        """Commit what is staged before the partitions go (a new owner would read them again, and drop what
        the tables hold), then forget them."""
        gone = set(partitions)
        self._settle(wait=True)
        if self._staged and self._spark is not None:
            self._commit("close", defer=False)
        self._assigned -= gone
        for tp in gone:
            self._floor.pop(tp, None)
            self._committed.pop(tp, None)
            self._opening.discard(tp)

    # --- data

    def put_frame(self, batch: FrameBatch) -> int | None:
        from pyspark.sql.types import StructType

        frame = batch.frame
        now = time.time()
        read_at = now if batch.read_ms is None else min(now, batch.read_ms / 1000)
        # What this batch does next (resume, floors, a commit) builds on the last round's outcome.
        self._settle(wait=True)
        # The records' wait for a commit counts from when the oldest was produced (see commits.wait_start).
        oldest = None if batch.oldest_ms is None else batch.oldest_ms / 1000
        received = wait_start(now, oldest, self._covered_read)
        if self._spark is None:
            self._spark = frame.sparkSession
            self._prepare(self._spark)
        value_type = frame.schema["value"].dataType
        if not isinstance(value_type, StructType):
            raise ConnectorError(
                f"{type(self).__name__} writes records with schemas (struct values, e.g. JsonConverter with "
                f"schemas.enable=true); the values are {value_type.simpleString()}"
            )
        if self._opening:
            self._resume(batch.offsets)
        if self._value_type is not None and value_type != self._value_type and self._staged:
            self._commit("schema change", defer=False)  # one schema per commit's staged files
        self._value_type = value_type
        ranges: dict[TopicPartition, tuple[int, int]] = {}
        pending = {tp for stage in self._staged for tp in stage.ranges}
        floor_before = dict(self._floor)
        for tp, (first, last) in batch.offsets.items():
            todo = unwritten_from(first, last, self._floor.get(tp))
            self._floor[tp] = max(self._floor.get(tp, 0), last + 1)
            if todo is not None:
                ranges[tp] = todo
            elif tp not in pending:
                self._committed[tp] = max(self._committed.get(tp, 0), last + 1)
        read = sum(last - first + 1 for first, last in batch.offsets.values())
        try:
            if ranges:
                self._stage_or_commit(frame, batch, ranges, received, read_at)
        except BaseException:  # a Spark job failed or cancelled, the query stopped: the rows come again
            self._floor = floor_before  # and must not be skipped then as written
            raise
        return read

    def _stage_or_commit(
        self,
        frame: Any,
        batch: FrameBatch,
        ranges: dict[TopicPartition, tuple[int, int]],
        received: float,
        at: float,
    ) -> None:
        """The rows of ``ranges`` committed to their tables when the batch is due alone, else staged."""
        from pyspark.sql import functions as F

        # Only partitions whose batch starts below what is staged or held need a filter (rows re-read).
        floors = {
            tp: ranges[tp][0] if tp in ranges else last + 1
            for tp, (first, last) in batch.offsets.items()
            if (ranges[tp][0] if tp in ranges else last + 1) > first
        }
        wanted = below_floors_condition(floors, "`topic`", "`partition`", "`offset`")
        keep = F.col("value").isNotNull() if wanted is None else F.expr(wanted) & F.col("value").isNotNull()
        rows = frame.where(keep).select(
            F.col("topic").alias(TOPIC),
            F.col("partition").alias(PARTITION),
            F.col("offset").alias(OFFSET),
            "value",
        )
        records = sum(hi - lo + 1 for lo, hi in ranges.values())
        policy = self._config().policy
        direct = commit_directly(
            policy,
            bool(self._staged),
            records,
            received,
            time.time(),
            lead_time(policy, self._took, self._check_gap),
        )
        # The tables are written through the session the connector's catalog is set in: a query started
        # again (a rewind) runs its batches in a session of its own, whose frames are staged as before.
        # A batch without rows is staged as an empty stage, as before: no table is created for it.
        if direct is not None and (
            not frame.sparkSession._jsparkSession.equals(self._spark._jsparkSession) or rows.isEmpty()
        ):
            direct = None
        if direct is not None:
            self._commit(direct, (rows, ranges, at))
            return
        self._counter += 1
        target = self._dir() / "stage" / f"{int(time.time() * 1000)}-{self._counter}"
        rows.write.parquet(str(target))
        files = list(target.glob("part-*.parquet"))
        size = sum(f.stat().st_size for f in files)
        self._staged.append(Stage(str(target) if files else None, ranges, received, size, at))

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        """Commit to the tables when due; answer the offsets every table holds. While a round is in flight
        it only answers (the next check after it ends commits what is due then)."""
        config = self._config()
        now = time.time()
        if self._checked_at is not None:
            self._check_gap = now - self._checked_at
        if not self._settle(wait=False):
            self._checked_at = now
            return {tp: offset for tp, offset in self._committed.items() if tp in current_offsets}
        records = sum(hi - lo + 1 for s in self._staged for lo, hi in s.ranges.values())
        size = sum(s.size for s in self._staged)
        oldest = self._staged[0].at if self._staged else None
        reason = commit_due(
            config.policy, records, size, oldest, now, lead_time(config.policy, self._took, self._check_gap)
        )
        if reason is not None:
            self._commit(reason)
        self._checked_at = time.time()
        if (
            maintenance_due(config.maintenance, self._maintained_at, time.time())
            and self._session() is not None
            and self._settle(wait=True)  # never beside a round's appends
        ):
            self._maintain()
        return {tp: offset for tp, offset in self._committed.items() if tp in current_offsets}

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Durability is the table commit's; ``pre_commit`` does it and never calls this."""

    # --- maintenance

    def _session(self) -> Any:
        """The worker's SparkSession: the first batch's, or (a task restarted on an idle topic has had no
        batch yet) the one the worker already runs; None when it runs none."""
        if self._spark is None:
            from pyspark import SparkContext
            from pyspark.sql import SparkSession

            if SparkContext._active_spark_context is None:
                return None
            self._spark = SparkSession.builder.getOrCreate()
            self._prepare(self._spark)
        return self._spark

    def _maintain(self) -> None:
        """Maintain each table this task has written or its partitions route to, one at a time, logging
        what each step did."""
        config = self._config()
        routed = {t for tp in self._assigned for t in self._known_tables(tp)} - self._tables
        for table in sorted(self._tables | routed):
            started = time.monotonic()
            try:
                if table in routed and not self._exists(table):
                    continue
                result = self._maintain_table(self._spark, table, config.maintenance)
            except Exception as exc:
                log.warning(
                    "table maintenance failed; retried at the next interval",
                    table=table,
                    error=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
                    connector=config.connector,
                )
                continue
            log.info(
                "table maintained",
                table=table,
                files_rewritten=result.files_rewritten,
                files_added=result.files_added,
                snapshots_expired=result.snapshots_expired,
                files_deleted=result.files_deleted,
                skipped=result.skipped,
                seconds=round(time.monotonic() - started, 2),
                connector=config.connector,
            )
        self._maintained_at = time.time()

    # --- resume

    def _resume(self, batch: Mapping[TopicPartition, tuple[int, int]]) -> None:
        """For partitions opened since the last batch: where their tables' commits say to resume. Where that
        is past this batch, ask the runtime to seek there (rows below it are dropped either way)."""
        config = self._config()
        opening, self._opening = self._opening, set()
        held_by: dict[str, dict[TopicPartition, int]] = {}
        seek: dict[TopicPartition, int] = {}
        for tp in sorted(opening, key=str):
            tables = self._known_tables(tp)
            if not tables:
                continue  # dynamic routing: tables are known per row; each commit drops what its table holds
            offsets = []
            for table in tables:
                if table not in held_by:
                    held_by[table] = self._held_offsets(self._spark, table) if self._exists(table) else {}
                offsets.append(held_by[table].get(tp))
            if any(o is None for o in offsets):
                continue
            resume = min(o for o in offsets if o is not None)
            self._floor[tp] = max(self._floor.get(tp, 0), resume)
            self._committed[tp] = max(self._committed.get(tp, 0), resume)
            if tp in batch and resume > batch[tp][1] + 1 and self.context is not None:
                seek[tp] = resume
            log.info(
                "partition opened",
                partition=str(tp),
                resume=resume,
                tables=tables,
                connector=config.connector,
            )
        if seek and self.context is not None:
            self.context.offset(seek)

    def _known_tables(self, tp: TopicPartition) -> list[str]:
        routing = self._config().routing
        if routing.dynamic:
            return []
        if routing.by_topic:
            return [topic_table(routing.tables[0], tp.topic)]
        if routing.route_field:
            return []  # which of the tables a partition's rows reach depends on each row
        return list(routing.tables)

    def _exists(self, table: str) -> bool:
        return self._table_schema(self._spark, table) is not None

    # --- commit

    def _commit(
        self,
        reason: str,
        direct: tuple[Any, Mapping[TopicPartition, tuple[int, int]], float] | None = None,
        defer: bool = True,
    ) -> None:
        """Write everything staged to its tables (or, ``direct``, a batch's rows, ranges and read time,
        nothing being staged: see ``commits.commit_directly``), then advance what ``pre_commit`` answers.
        With ``defer`` the format may leave its last steps (``_deferred``) to run beside the next batch:
        the bookkeeping then waits for them (:meth:`_settle`)."""
        from pyspark.sql import functions as F

        self._settle(wait=True)  # one round at a time: this one reads what the last one committed
        config = self._config()
        spark = self._spark
        stages, self._staged = self._staged, []
        covered: dict[TopicPartition, int] = {}
        lows: dict[TopicPartition, int] = {}
        for ranges in [*(s.ranges for s in stages), *([direct[1]] if direct else [])]:
            for tp, (lo, hi) in ranges.items():
                covered[tp] = max(covered.get(tp, 0), hi + 1)
                lows[tp] = min(lows.get(tp, lo), lo)
        read = max([s.read for s in stages] + ([direct[2]] if direct else []), default=time.time())
        paths = [s.path for s in stages if s.path is not None]
        began = time.time()
        tables_written: list[str] = []
        self._deferred = [] if defer else None

        def put_back() -> None:  # not committed: a retry (or a restart) writes them
            self._staged = stages + self._staged

        try:
            if paths or direct:
                data = direct[0] if direct else spark.read.parquet(*paths)
                columns: list[Any] = [*META, "value.*"]
                if config.routing.route_field:
                    columns.append(F.col("value." + config.routing.route_field).cast("string").alias(ROUTE))
                flat = data.select(*columns)
                rows = self._cdc(flat) if config.upsert else flat
                many = config.routing.by_topic or config.routing.route_field is not None
                if many:  # the staged files are read once, not once per table
                    rows = rows.persist()
                bound = sum(covered[tp] - lows[tp] for tp in covered)
                try:
                    routes = self._routes(rows, covered, bound)
                    self._write_tables(routes, lows)
                finally:
                    if many:
                        rows.unpersist()
                for table, _, _, _ in routes:
                    tables_written.append(table)
                    self._tables.add(table)
        except Exception:
            if self._deferred:  # every table is attempted, as without deferring
                try:
                    run_steps(self._deferred)
                except Exception as exc:
                    log.warning("a deferred table step failed too", error=str(exc).splitlines()[0][:300])
            self._deferred = None
            put_back()
            raise
        deferred, self._deferred = self._deferred or [], None

        def finish(ended: float) -> None:
            for tp, offset in covered.items():
                self._committed[tp] = max(self._committed.get(tp, 0), offset)
            for stage in stages:
                if stage.path:
                    shutil.rmtree(stage.path, ignore_errors=True)
            self.commits += 1
            self._covered_read = read
            if not deferred:  # the commit held the task: the gap to the next check is a batch's
                self._checked_at = ended
            self._took = ended - began
            log.info(
                "committed to tables",
                reason=reason,
                staged=direct is None,
                beside_next_batch=bool(deferred),
                tables=tables_written,
                through={str(tp): o for tp, o in sorted(covered.items(), key=lambda i: str(i[0]))},
                seconds=round(ended - began, 2),
                connector=config.connector,
            )

        if not deferred:
            finish(time.time())
            return

        self._rounds.submit(deferred, finish, put_back)

    def _settle(self, wait: bool) -> bool:
        """The round in flight settled (``rounds.RoundThread.settle``): True when none is in flight."""
        return self._rounds.settle(wait)

    def _write_tables(self, routes: list[Route], lows: Mapping[TopicPartition, int]) -> None:
        """Write each table of a commit: first each table is made ready (created or evolved, the offsets it
        holds read, the rows it holds dropped: :meth:`_ready`), then the format writes those it can in one
        go (:meth:`_write_together`), then the rest one by one (:meth:`_write`). Each table's commit is
        its own (its snapshot names only the offsets it covers). Per-table steps run up to COMMIT_THREADS
        at once: most of a small table's step is waiting on the catalog and the file system, not the cores.
        Every table is attempted; the first failure is raised once all are done (the ones that committed
        hold their offsets: a retry drops those rows). ``lows``: the lowest offset per partition the
        commit writes."""
        spark = self._spark
        readied, errors = self._each(lambda r: self._ready(*r, lows), routes)
        pending = [w for w in readied if w is not None]
        if pending:
            rest, failed_together = self._write_together(spark, pending)
            errors.extend(failed_together)
            _, failed = self._each(lambda w: self._write(spark, w.table, w.frame(), w.covered, w.ids), rest)
            errors.extend(failed)
        if errors:
            raise errors[0]

    def _each(self, step: Callable[[_I], _R], items: list[_I]) -> tuple[list[_R], list[BaseException]]:
        """``step`` of each item, up to COMMIT_THREADS at once (in the caller's Spark job group, scheduler
        pool and log context): the results of those that succeeded, in order, and the errors."""
        if len(items) <= 1:
            results: list[_R] = []
            errors: list[BaseException] = []
            for item in items:
                try:
                    results.append(step(item))
                except Exception as exc:
                    errors.append(exc)
            return results, errors
        from pyspark.util import inheritable_thread_target

        if self._pool is None:
            self._pool = ThreadPoolExecutor(COMMIT_THREADS, thread_name_prefix="kconnect-table-commit")
        futures = [
            self._pool.submit(contextvars.copy_context().run, inheritable_thread_target(step), item)
            for item in items
        ]
        done = [(f.exception(), f) for f in futures]
        return [f.result() for e, f in done if e is None], [e for e, _ in done if e is not None]

    def _write_together(
        self, spark: Any, pending: list[Pending]
    ) -> tuple[list[Pending], list[BaseException]]:
        """Write what the format can of ``pending`` at once (e.g. one Spark job for the data files of many
        tables, then a commit per table); answer the ones left to :meth:`_write` and the errors of those it
        attempted. By default: all left, none attempted."""
        return pending, []

    def _routes(self, rows: Any, covered: Mapping[TopicPartition, int], bound: int) -> list[Route]:
        """(table, its rows, the offsets its commit records, where its rows were picked from) for each
        table this commit writes; ``bound``: at most how many rows ``rows`` has."""
        from pyspark.sql import functions as F

        routing = self._config().routing
        if routing.by_topic:
            pattern = routing.tables[0]
            topics = sorted({tp.topic for tp in covered})
            return [
                (
                    topic_table(pattern, topic),
                    None,  # made from the pick when needed
                    {tp: o for tp, o in covered.items() if tp.topic == topic},
                    Pick(rows, TOPIC, topic, bound),
                )
                for topic in topics
            ]
        field = routing.route_field
        if field is None:
            return [(table, rows, dict(covered), None) for table in routing.tables]
        routed = rows
        if routing.dynamic:
            # A small commit's rows may come to the driver once (the format writes them from there): its
            # routes are read from them, not from a job of their own.
            collected = self._collect_small(routed, bound)
            if collected is not None:
                found = list(set(collected.column(ROUTE).to_pylist()))
            else:
                found = [r[0] for r in routed.select(ROUTE).distinct().collect()]
            if None in found:
                m = routed.where(F.col(ROUTE).isNull()).select(*META).limit(1).collect()[0]
                raise ConnectorError(
                    f"record {m[0]}-{m[1]}@{m[2]} has no value in route field {field}: it names no table"
                )
            names = sorted(found)
            # SQL text: one gateway call per table (Column objects cost several calls each in PySpark 4).
            return [
                (name, None, dict(covered), Pick(routed, ROUTE, name, bound, collected))  # rows: when needed
                for name in names
            ]
        return [
            (
                table,
                routed.where(F.col(ROUTE).rlike(routing.route_regex[table])).drop(ROUTE),
                dict(covered),
                None,  # a row may reach several tables
            )
            for table in routing.tables
        ]

    def _collect_small(self, rows: Any, bound: int) -> Any:
        """A commit's rows (``bound``: at most this many) as a pyarrow Table on the driver, when the format
        writes a commit this small from there anyway (then routing them needs no Spark job of its own);
        None otherwise. By default: None."""
        return None

    def _cdc(self, flat: Any) -> Any:
        """Upsert mode: a Debezium envelope (``op``, ``before``, ``after``) becomes the row image (``after``,
        or ``before`` for a delete) with ``OP``; else the cdc-field (if any) gives ``OP``. Only the newest
        record per id within the commit is kept (ids are per table; deduplicated at the write)."""
        from pyspark.sql import functions as F

        config = self._config()
        names = set(flat.columns)
        if {"op", "before", "after"} <= names:
            image = F.when(F.col("op").isin(*DELETE_OPS), F.col("before")).otherwise(F.col("after"))
            extra = [ROUTE] if ROUTE in names else []
            return flat.select(*META, *extra, F.col("op").alias(OP), image.alias("_kc_image")).select(
                *META, *extra, OP, "_kc_image.*"
            )
        if config.cdc_field:
            return flat.withColumn(OP, F.col(config.cdc_field).cast("string"))
        return flat.withColumn(OP, F.lit("u"))

    def _ready(
        self,
        table: str,
        rows: Any,
        covered: dict[TopicPartition, int],
        pick: Pick | None,
        lows: Mapping[TopicPartition, int],
    ) -> Pending | None:
        """Create or evolve the table, read what it holds and drop those rows: what is left to write (None:
        the table holds all of it). Only partitions where the table holds more than the commit's lowest
        offset (``lows``) are filtered: in the steady state none."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        config = self._config()
        spark = self._spark
        fields = pick.fields() if rows is None and pick is not None else rows.schema.fields
        data_schema = StructType([f for f in fields if f.name not in (*META, OP, ROUTE)])
        schema = self._table_schema(spark, table)
        if schema is None:
            if not config.auto_create:
                raise ConnectorError(
                    f"table {table} does not exist and {self.PREFIX}tables.auto-create-enabled is false"
                )
            self._create_table(spark, table, data_schema)
            log.info(
                "table created", table=table, schema=data_schema.simpleString(), connector=config.connector
            )
            held: dict[TopicPartition, int] = {}
        else:
            try:
                change = plan(schema, data_schema, config.evolve)
            except SchemaEvolutionError as exc:
                raise ConnectorError(f"table {table}: {exc}") from exc
            if not change.empty:
                self._evolve_table(spark, table, change)
                log.info(
                    "table evolved",
                    table=table,
                    add=[p for p, _ in change.add],
                    widen=[p for p, _ in change.widen],
                )
            held = self._held_offsets(spark, table)
        todo = {tp: o for tp, o in covered.items() if held.get(tp, 0) < o}
        if not todo:
            log.warning(
                "table already holds these offsets (a zombie or an earlier run wrote them)", table=table
            )
            return None
        floors = {tp: held[tp] for tp in covered if held.get(tp, 0) > lows.get(tp, 0)}
        condition = below_floors_condition(floors, TOPIC, PARTITION, OFFSET)
        if condition is not None and rows is not None:  # else every row of the commit is new to the table
            rows = rows.where(F.expr(condition))  # (picked rows: Pending.frame applies it when made)
        return Pending(table, rows, todo, config.ids(table) if config.upsert else (), pick, condition)

    # --- helpers

    def _dir(self) -> Path:
        if self._scratch is None:
            raise ConnectorError(f"{type(self).__name__} is not started")
        return self._scratch

    def _config(self) -> cfg.TableSinkConfig:
        if self.config is None:
            raise ConnectorError(f"{type(self).__name__} is not started")
        return self.config


def merge_statement(target: str, view: str, columns: list[str], ids: tuple[str, ...]) -> str:
    """MERGE INTO ``target`` from ``view`` by ``ids``: a delete op deletes a matched row, any other op
    updates it or inserts a new one; a delete of an id the table does not hold does nothing."""

    on = " AND ".join(f"t.{quote_name(i)} = s.{quote_name(i)}" for i in ids)
    deletes = ", ".join(f"'{op}'" for op in DELETE_OPS)
    sets = ", ".join(f"t.{quote_name(c)} = s.{quote_name(c)}" for c in columns)
    names = ", ".join(quote_name(c) for c in columns)
    values = ", ".join("s." + quote_name(c) for c in columns)
    return (
        f"MERGE INTO {target} t USING {view} s ON {on} "
        f"WHEN MATCHED AND s.{OP} IN ({deletes}) THEN DELETE "
        f"WHEN MATCHED THEN UPDATE SET {sets} "
        f"WHEN NOT MATCHED AND s.{OP} NOT IN ({deletes}) THEN INSERT ({names}) VALUES ({values})"
    )
