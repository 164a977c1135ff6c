"""Parquet sink connector: topics to Parquet files, written by Spark on its executors, exactly once.

Layout under ``path`` (Confluent's HDFS/S3 sinks use the same names, so their users recognise them)::

    <path>/<topic>/[<field>=<value>/...]<topic>+<kafkaPartition>+<startOffset>+<endOffset>.parquet
    <path>/_temporary-kconnect/<connector>-<task>/{stage,publish}/...   (work in progress; never read)

Why it is built this way:

- Each micro-batch reaches the task as a DataFrame (``FrameSinkTask.put_frame``); no row is collected to
  the driver. Complete windows (below) in a batch are written straight from it; what is left is *staged*
  with Spark's Parquet writer under ``_temporary-kconnect`` until its window completes or times out.
- A Kafka partition's records are cut into *rolls*: windows of ``flush.size`` consecutive offsets starting
  at the first offset not yet published, or, when ``rotate.interval.ms`` has passed since the oldest
  staged record arrived, everything consumed so far. A roll is written by one Spark job into a publish
  directory (one file per roll and ``partition.field.name`` value) and then *published by rename*: readers
  of ``<path>/<topic>`` never see a partial file.
- A file's name is the offset window of its roll, inclusive. Windows never overlap, so a name is never
  reused with other contents, and the largest end offset among published names is where a restarted
  task resumes writing: records at or below it are filtered out in Spark (they come back when a crash
  fell between a publish and the offset commit). A publish directory whose Spark job committed
  (``_SUCCESS``) is a redo log: whoever opens the partition next finishes its renames. ``pre_commit``
  reports only published offsets, so staged data lost in a crash is read again from Kafka. Together:
  a restart, a task moved to another worker and a SIGKILL leave each record in exactly one file.

Limits: ``path`` must be a POSIX directory all workers see (renames are ``os.replace``); one connector per
``path`` and topic; records with a null value are skipped (Confluent's ``behavior.on.null.values=ignore``);
time rotation is checked whenever the runtime calls ``pre_commit`` (after each batch and about every
half second while the topic is idle).

Columns: a struct value (JSON with schemas, or a struct made by transforms) becomes one column per field;
any other value (schemaless JSON text, string, bytes, a primitive) becomes one column ``value``. Fields
named in ``partition.field.name`` become Hive-style directories and, as with Spark's and Hive's
partitioned tables, are not repeated inside the files: read with Hive partitioning to get them back.
"""

from __future__ import annotations

import os
import shutil
import time
import urllib.parse
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kconnect.connectors.uniform import UniformTasks
from kconnect.runtime import __version__, logs
from kconnect.runtime.plugins.api import (
    ConnectorError,
    FrameBatch,
    FrameSinkTask,
    SinkConnector,
    TopicPartition,
)
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    ConfigDef,
    ConfigValidationError,
    Importance,
    LambdaValidator,
    NonEmptyString,
    Range,
    ValidString,
)
from kconnect.runtime.plugins.config_def import Type as ConfigType

log = logs.get(__name__)

PATH_CONFIG = "path"
FLUSH_SIZE_CONFIG = "flush.size"
ROTATE_INTERVAL_MS_CONFIG = "rotate.interval.ms"
PARTITION_FIELD_NAME_CONFIG = "partition.field.name"
PARQUET_CODEC_CONFIG = "parquet.codec"
#: Added by the connector to each task's config: the task's number, which names its work directory.
TASK_ID_CONFIG = "parquet.task.id"

CODECS = ("none", "snappy", "gzip", "zstd")
#: Work in progress lives here, under ``path``; a leading underscore keeps Spark, Hive and pyarrow from
#: treating it as data.
WORK_DIR = "_temporary-kconnect"
SUFFIX = ".parquet"
#: The publish frame's column that names each output file; a partition column, so a directory level.
FILE_COLUMN = "_kconnect_file"
#: The offset column of staged data: a name no value field is likely to have.
OFFSET_COLUMN = "_kconnect_offset"
SUCCESS = "_SUCCESS"


def _rotate_interval_ok(name: str, value: Any) -> None:
    if value is not None and value != -1 and value < 1:
        raise ConfigValidationError(name, value, "must be -1 (off) or a positive number of milliseconds")


def _field_names_ok(name: str, value: Any) -> None:
    for item in value or ():
        if not item or "." in item or "/" in item or "=" in item:
            raise ConfigValidationError(
                name, ",".join(value), f"'{item}' is not a top-level field name (no '.', '/', '=' or blanks)"
            )


CONFIG_DEF = (
    ConfigDef()
    .define(
        PATH_CONFIG,
        ConfigType.STRING,
        NO_DEFAULT,
        NonEmptyString(),
        Importance.HIGH,
        "Directory the Parquet files are written under, one subdirectory per topic. Every worker must see "
        "it at the same path (a local disk with one worker, else a shared mount): files are published by "
        "rename.",
    )
    .define(
        FLUSH_SIZE_CONFIG,
        ConfigType.INT,
        NO_DEFAULT,
        Range.at_least(1),
        Importance.HIGH,
        "Offsets per file: a Kafka partition's records are cut into windows of this many consecutive "
        "offsets, and a window's file is published once the task has read past its end. A file holds at "
        "most this many records.",
    )
    .define(
        ROTATE_INTERVAL_MS_CONFIG,
        ConfigType.LONG,
        -1,
        LambdaValidator.with_(_rotate_interval_ok, "-1 (off) or a positive number of milliseconds"),
        Importance.MEDIUM,
        "Publish a partially filled file this long (wall clock) after its first record was read; -1 "
        "turns time-based rolling off.",
    )
    .define(
        PARTITION_FIELD_NAME_CONFIG,
        ConfigType.LIST,
        "",
        LambdaValidator.with_(_field_names_ok, "comma-separated top-level field names of the value"),
        Importance.MEDIUM,
        "Top-level fields of the (struct) record value whose values name Hive-style directories "
        "<field>=<value>, in this order. Empty: no field directories.",
    )
    .define(
        PARQUET_CODEC_CONFIG,
        ConfigType.STRING,
        "snappy",
        ValidString.in_(*CODECS),
        Importance.LOW,
        "Compression codec of the Parquet files.",
    )
)


@dataclass(frozen=True)
class ParquetSinkConfig:
    """The connector's keys parsed once, at task start, into typed fields, so staging and publishing never
    re-read strings."""

    path: str
    flush_size: int
    rotate_interval_ms: int
    partition_fields: tuple[str, ...]
    codec: str

    @classmethod
    def parse(cls, props: Mapping[str, str]) -> ParquetSinkConfig:
        """Parse with the ConfigDef, whose validators already refuse bad values naming the key; there are no
        cross-key rules."""
        parsed = CONFIG_DEF.parse(props)
        return cls(
            path=str(parsed[PATH_CONFIG]),
            flush_size=int(parsed[FLUSH_SIZE_CONFIG]),
            rotate_interval_ms=int(parsed[ROTATE_INTERVAL_MS_CONFIG]),
            partition_fields=tuple(parsed[PARTITION_FIELD_NAME_CONFIG] or ()),
            codec=str(parsed[PARQUET_CODEC_CONFIG]),
        )


# ------------------------------------------------------------------------------------------ pure core


@dataclass(frozen=True, slots=True, order=True)
class FileName:
    """What a published file holds: the offsets ``[start, end]`` (inclusive) of one roll of a partition."""

    topic: str
    partition: int
    start: int
    end: int

    def __str__(self) -> str:
        return f"{self.topic}+{self.partition}+{self.start}+{self.end}{SUFFIX}"

    @property
    def stem(self) -> str:
        """The name without ``.parquet``: Spark's partition directory for a roll is named by it, and
        :func:`publish_moves` turns it back into the file name."""
        return str(self)[: -len(SUFFIX)]


def parse_file_name(name: str) -> FileName | None:
    """The inverse of ``str(FileName)``, also for a stem without ``.parquet``; None for any other name.

    A topic cannot contain ``+`` (Kafka allows only letters, digits, ``.``, ``_`` and ``-``), so the last
    three ``+``-separated fields are the numbers.
    """
    stem = name[: -len(SUFFIX)] if name.endswith(SUFFIX) else name
    parts = stem.rsplit("+", 3)
    if len(parts) != 4 or not parts[0] or not all(p.isdigit() for p in parts[1:]):
        return None
    start, end = int(parts[2]), int(parts[3])
    if end < start:
        return None
    return FileName(parts[0], int(parts[1]), start, end)


def last_published(names: Iterable[str], tp: TopicPartition) -> int | None:
    """The last offset already in a published file of this partition, from the files' names."""
    ends = [
        f.end
        for f in (parse_file_name(n) for n in names)
        if f is not None and f.topic == tp.topic and f.partition == tp.partition
    ]
    return max(ends) if ends else None


def roll_windows(start: int, end: int, flush_size: int) -> list[tuple[int, int]]:
    """The files publishing ``[start, end]`` holds: windows of ``flush_size`` offsets from ``start``, the
    last one cut at ``end``. The Spark job computes the same windows per row (see ``_roll_columns``)."""
    return [(s, min(s + flush_size - 1, end)) for s in range(start, end + 1, flush_size)]


@dataclass(frozen=True, slots=True)
class StagedBatch:
    """One micro-batch's records of one partition in the staging area (``leaf`` None: nothing was
    written, e.g. every value was null, but the offsets still need publishing so they can be committed)."""

    leaf: str | None
    first: int
    last: int
    staged_at: float


@dataclass(frozen=True)
class PartitionState:
    """One open partition: the next offset to publish and what is staged after it."""

    start: int | None = None
    staged: tuple[StagedBatch, ...] = ()

    @property
    def consumed_end(self) -> int | None:
        """The last offset staged for the partition, or None with nothing staged: where the next staging
        begins and the farthest a forced publish goes."""
        return self.staged[-1].last if self.staged else None


def stage_range(state: PartitionState, first: int, last: int) -> tuple[int, int] | None:
    """The part of a consumed range ``[first, last]`` still to be staged: what lies after the published
    and staged offsets (a re-read after a crash repeats what files already hold); None if nothing."""
    start = state.start
    if state.consumed_end is not None:
        start = state.consumed_end + 1
    elif start is None or first > start:
        # Nothing published or staged yet, or the log moved on (retention, a reset): begin where it is.
        start = first
    lo = max(first, start)
    return (lo, last) if lo <= last else None


def after_staging(state: PartitionState, batch: StagedBatch) -> PartitionState:
    """The state with a newly staged batch (its range from :func:`stage_range`)."""
    start = state.start
    if start is None or (not state.staged and batch.first > start):
        start = batch.first
    return PartitionState(start, (*state.staged, batch))


def publish_end(
    state: PartitionState, flush_size: int, rotate_interval_ms: int, now: float, force: bool = False
) -> int | None:
    """Through which offset to publish now, or None: every complete window of ``flush_size`` offsets, and
    everything consumed when ``force`` (a schema change) or when the oldest staged record left after the
    complete windows has waited ``rotate_interval_ms`` (wall clock)."""
    consumed = state.consumed_end
    if state.start is None or consumed is None or consumed < state.start:
        return None
    if force:
        return consumed
    full = state.start + (consumed - state.start + 1) // flush_size * flush_size - 1
    if rotate_interval_ms >= 0 and full < consumed:
        oldest = next(b.staged_at for b in state.staged if b.last > full)
        if (now - oldest) * 1000 >= rotate_interval_ms:
            return consumed
    return full if full >= state.start else None


def direct_end(state: PartitionState, lo: int, hi: int, flush_size: int) -> int | None:
    """Through which offset a batch's range ``[lo, hi]`` (from :func:`stage_range`) can be published
    straight from the batch, skipping staging: the complete windows it holds, when nothing is staged
    before it (then ``lo`` is where the next window starts). None when there is no such window."""
    if state.staged:
        return None
    full = lo + (hi - lo + 1) // flush_size * flush_size - 1
    return full if full >= lo else None


def after_publish(state: PartitionState, end: int) -> tuple[PartitionState, list[str]]:
    """The state once ``[start, end]`` is published, and the staged leaves no longer needed."""
    keep = tuple(b for b in state.staged if b.last > end)
    done = [b.leaf for b in state.staged if b.last <= end and b.leaf is not None]
    return PartitionState(end + 1, keep), done


def publish_moves(files: Iterable[str], root: str) -> list[tuple[str, str]]:
    """Renames that publish a Spark output: ``<FILE_COLUMN>=<stem>/<field dirs>/part-*.parquet`` (paths
    relative to the publish directory) -> ``<root>/<topic>/<field dirs>/<stem>.parquet``; other files
    (``_SUCCESS``, checksums) are not published."""
    moves: list[tuple[str, str]] = []
    for rel in files:
        parts = rel.split("/")
        if len(parts) < 2 or not parts[0].startswith(FILE_COLUMN + "="):
            continue
        if not parts[-1].endswith(SUFFIX) or parts[-1].startswith((".", "_")):
            continue
        name = parse_file_name(urllib.parse.unquote(parts[0].split("=", 1)[1]))
        if name is None:
            continue
        moves.append((rel, os.path.join(root, name.topic, *parts[1:-1], str(name))))
    return sorted(moves)


# ------------------------------------------------------------------------------------------ connector


class ParquetSinkConnector(UniformTasks, SinkConnector):
    """Writes the records of its topics to Parquet files under ``path``; see the module docstring."""

    CONFIG = CONFIG_DEF
    TASK_INDEX_KEY = TASK_ID_CONFIG

    def check(self, props: Mapping[str, str]) -> None:
        """Refuse a bad config at start, naming the key, with the same parse the task uses."""
        ParquetSinkConfig.parse(props)

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]) -> bool:
        """Any offsets are accepted: rewinding cannot duplicate records, because the task skips offsets that
        published files' names already cover, whatever the consumer group says."""
        # Files already published are skipped by their names, whatever the consumer offsets say.
        return True


# ------------------------------------------------------------------------------------------ task


@dataclass
class _Work:
    """The task's directories under ``path``."""

    root: Path
    own: Path
    counter: int = field(default=0)

    @property
    def all(self) -> Path:
        return self.root / WORK_DIR

    def next_dir(self, kind: str) -> Path:
        self.counter += 1
        return self.own / kind / f"{int(time.time() * 1000)}-{self.counter}"


def _files_under(directory: Path) -> list[str]:
    out: list[str] = []
    for dirpath, _, files in os.walk(directory):
        rel = os.path.relpath(dirpath, directory)
        out.extend(name if rel == "." else f"{rel}/{name}".replace(os.sep, "/") for name in files)
    return out


class ParquetSinkTask(FrameSinkTask):
    """Stages each micro-batch with Spark, publishes rolls by rename, commits only what is published."""

    def __init__(self) -> None:
        self.config: ParquetSinkConfig | None = None
        self._work: _Work | None = None
        self._states: dict[TopicPartition, PartitionState] = {}
        self._value_type: Any = None
        self._spark: Any = None

    def version(self) -> str:
        """kconnect's version: the connector ships with the runtime."""
        return __version__

    def start(self, props: dict[str, str]) -> None:
        """Parse the config and clean this task's work directory: its staging is dropped (those records come
        again from Kafka) and so are publish jobs that never committed, while committed ones are kept for
        :meth:`open` to finish."""
        self.config = ParquetSinkConfig.parse(props)
        root = Path(self.config.path)
        name = props.get("name", "parquet").replace("/", "_")
        work = _Work(root, root / WORK_DIR / f"{name}-{props.get(TASK_ID_CONFIG, '0')}")
        # A previous run of this task left unpublished staging (read again from Kafka) and maybe a Spark
        # job that never committed; a committed publish directory is kept for open() to finish.
        shutil.rmtree(work.own / "stage", ignore_errors=True)
        publish = work.own / "publish"
        if publish.is_dir():
            for child in publish.iterdir():
                if not (child / SUCCESS).exists():
                    shutil.rmtree(child, ignore_errors=True)
        work.own.mkdir(parents=True, exist_ok=True)
        self._work = work
        self._states = {}
        self._value_type = None

    def stop(self) -> None:
        """Nothing to release: staged data is dropped in ``close`` and read again from Kafka."""

    # --- partitions

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        """For each partition assigned here: finish any committed publish job for it (whichever task left it),
        drop stale staging, and resume after the last offset a published file's name shows."""
        work = self._require_work()
        for tp in partitions:
            self._finish_publishing(tp)
            self._discard_staging(tp)
            topic_dir = work.root / tp.topic
            names = [os.path.basename(f) for f in _files_under(topic_dir)] if topic_dir.is_dir() else []
            last = last_published(names, tp)
            self._states[tp] = PartitionState(None if last is None else last + 1)
            log.info("partition opened", partition=str(tp), last_published=last)

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        """Forget a partition moving elsewhere and delete what this task staged for it: those offsets were not
        committed, so the new owner reads them again."""
        for tp in partitions:
            state = self._states.pop(tp, None)
            for batch in state.staged if state else ():
                if batch.leaf:
                    shutil.rmtree(batch.leaf, ignore_errors=True)

    def _finish_publishing(self, tp: TopicPartition) -> None:
        """Redo the renames of committed publish jobs for this partition (any task's: the partition may
        have moved here from another task)."""
        work = self._require_work()
        prefix = f"{FILE_COLUMN}={tp.topic}+{tp.partition}+"
        for publish in sorted(work.all.glob("*/publish/*")):
            if not (publish / SUCCESS).exists():
                continue
            for sub in sorted(publish.glob(prefix + "*")):
                rel = sub.relative_to(publish).as_posix()
                files = [f"{rel}/{f}" for f in _files_under(sub)]
                moved = self._move(publish, publish_moves(files, str(work.root)))
                if moved:
                    log.warning(
                        "finished publishing files of an interrupted roll", partition=str(tp), files=moved
                    )
                shutil.rmtree(sub, ignore_errors=True)
            if not any(p.name.startswith(FILE_COLUMN + "=") for p in publish.iterdir()):
                shutil.rmtree(publish, ignore_errors=True)

    def _discard_staging(self, tp: TopicPartition) -> None:
        for leaf in self._require_work().all.glob(f"*/stage/*/topic={tp.topic}/partition={tp.partition}"):
            shutil.rmtree(leaf, ignore_errors=True)

    @staticmethod
    def _move(base: Path, moves: Sequence[tuple[str, str]]) -> int:
        for src, dst in moves:
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            os.replace(base / src, dst)
        return len(moves)

    # --- data

    def put_frame(self, batch: FrameBatch) -> int | None:
        """Take one micro-batch: skip offsets already published or staged, write complete windows straight to
        their files, stage the rest with Spark; a value schema change first publishes what is staged, so each
        file has one schema. Returns the records the batch read, known from its offsets without a Spark job.
        """
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        config = self._require_config()
        work = self._require_work()
        frame = batch.frame
        self._spark = frame.sparkSession
        value_type = frame.schema["value"].dataType
        if config.partition_fields:
            if not isinstance(value_type, StructType):
                raise ConnectorError(
                    f"{PARTITION_FIELD_NAME_CONFIG}={','.join(config.partition_fields)} needs struct record "
                    f"values (e.g. JSON with schemas); the values are {value_type.simpleString()}"
                )
            missing = [f for f in config.partition_fields if f not in value_type.fieldNames()]
            if missing:
                raise ConnectorError(
                    f"{PARTITION_FIELD_NAME_CONFIG}={','.join(config.partition_fields)}: the value has no "
                    f"field {', '.join(missing)}; its fields are {', '.join(value_type.fieldNames())}"
                )
        if self._value_type is not None and value_type != self._value_type:
            # One schema per file, as Confluent's sinks roll on a schema change.
            log.info("value schema changed: publishing what is staged", schema=value_type.simpleString())
            self._publish(force=True)
        self._value_type = value_type

        ranges: dict[TopicPartition, tuple[int, int]] = {}
        for tp, (first, last) in batch.offsets.items():
            state = self._states.setdefault(tp, PartitionState())
            todo = stage_range(state, first, last)
            if todo is not None:
                ranges[tp] = todo
        read = sum(last - first + 1 for first, last in batch.offsets.values())
        direct = {
            tp: end
            for tp, (lo, hi) in ranges.items()
            if (end := direct_end(self._states[tp], lo, hi, config.flush_size)) is not None
        }
        if direct:
            # Complete windows go from the batch to their files at once: no staging write and read back.
            for tp in direct:
                self._states[tp] = PartitionState(ranges[tp][0])
            source = frame.where(F.col("value").isNotNull()).select(
                F.col("topic").alias("_t"),
                F.col("partition").alias("_p"),
                F.col("offset").alias(OFFSET_COLUMN),
                "value",
            )
            published = self._publish_from(source, direct)
            for tp, end in direct.items():
                self._states[tp] = PartitionState(end + 1)
                _, hi = ranges.pop(tp)
                if end < hi:
                    ranges[tp] = (end + 1, hi)
            log.info(
                "published", files=published, through={str(tp): e for tp, e in direct.items()}, direct=True
            )
        if not ranges:
            return read
        wanted = F.lit(False)
        for tp, (lo, hi) in ranges.items():
            wanted = wanted | (
                (F.col("topic") == tp.topic)
                & (F.col("partition") == tp.partition)
                & F.col("offset").between(lo, hi)
            )
        target = work.next_dir("stage")
        (
            frame.where(wanted & F.col("value").isNotNull())
            .select(
                "topic",
                "partition",
                F.col("topic").alias("_t"),
                F.col("partition").alias("_p"),
                F.col("offset").alias(OFFSET_COLUMN),
                "value",
            )
            .write.partitionBy("topic", "partition")
            .parquet(str(target))
        )
        now = time.time()
        for tp, (lo, hi) in ranges.items():
            leaf = target / f"topic={tp.topic}" / f"partition={tp.partition}"
            staged = StagedBatch(str(leaf) if leaf.is_dir() else None, lo, hi, now)
            self._states[tp] = after_staging(self._states[tp], staged)
        return read

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        """Publish the rolls that are due; answer, per partition, the first offset not yet in a file."""
        self._publish(force=False)
        return {
            tp: state.start
            for tp, state in self._states.items()
            if state.start is not None and tp in current_offsets
        }

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Everything is durable once published; ``pre_commit`` publishes and never calls this."""

    def _publish(self, force: bool) -> None:
        config = self._require_config()
        now = time.time()
        ends: dict[TopicPartition, int] = {}
        for tp, state in self._states.items():
            end = publish_end(state, config.flush_size, config.rotate_interval_ms, now, force)
            if end is not None:
                ends[tp] = end
        if not ends:
            return
        leaves = sorted(
            {
                b.leaf
                for tp, end in ends.items()
                for b in self._states[tp].staged
                if b.leaf is not None and b.first <= end
            }
        )
        work = self._require_work()
        published = 0
        if leaves:
            published = self._publish_from(self._require_spark().read.parquet(*leaves), ends)
        for tp, end in ends.items():
            state, done = after_publish(self._states[tp], end)
            self._states[tp] = state
            for leaf in done:
                shutil.rmtree(leaf, ignore_errors=True)
        self._prune(work.own / "stage")
        log.info(
            "published",
            files=published,
            through={str(tp): end for tp, end in ends.items()},
            forced=force,
        )

    def _publish_from(self, source: Any, ends: Mapping[TopicPartition, int]) -> int:
        """Write the windows from each partition's start through ``ends`` with one Spark job, then
        publish the files by rename; ``source`` has the columns ``_t, _p, OFFSET_COLUMN, value``."""
        work = self._require_work()
        target = work.next_dir("publish")
        self._write_rolls(source, ends, target)
        # The job committed (_SUCCESS): from here on the directory is a redo log for open().
        published = self._move(target, publish_moves(_files_under(target), str(work.root)))
        shutil.rmtree(target, ignore_errors=True)
        return published

    def _write_rolls(self, staged: Any, ends: Mapping[TopicPartition, int], target: Path) -> None:
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructType

        config = self._require_config()
        size = config.flush_size
        window = F.lit(None).cast("long")
        last = F.lit(None).cast("long")
        chosen = F.lit(False)
        for tp, end in ends.items():
            start = self._states[tp].start
            assert start is not None
            this = (F.col("_t") == tp.topic) & (F.col("_p") == tp.partition)
            inside = this & F.col(OFFSET_COLUMN).between(start, end)
            chosen = chosen | inside
            window = F.when(inside, F.floor((F.col(OFFSET_COLUMN) - start) / size) * size + start).otherwise(
                window
            )
            last = F.when(this, F.lit(end)).otherwise(last)
        rows = staged.where(chosen).withColumn("_w", window.cast("long"))
        rows = rows.withColumn(
            FILE_COLUMN,
            F.concat_ws(
                "+",
                F.col("_t"),
                F.col("_p").cast("string"),
                F.col("_w").cast("string"),
                F.least(F.col("_w") + size - 1, last).cast("string"),
            ),
        )
        fields = list(config.partition_fields)
        value_type = rows.schema["value"].dataType
        columns = ["value.*"] if isinstance(value_type, StructType) else ["value"]
        keys = [FILE_COLUMN, *fields]
        out = rows.select(FILE_COLUMN, OFFSET_COLUMN, *columns)
        (
            out.repartition(*keys)
            .sortWithinPartitions(*keys, OFFSET_COLUMN)
            .drop(OFFSET_COLUMN)
            .write.partitionBy(*keys)
            .option("compression", config.codec)
            .parquet(str(target))
        )

    def _prune(self, directory: Path) -> None:
        """Remove staging directories left with no data (only Spark's markers)."""
        if not directory.is_dir():
            return
        for child in directory.iterdir():
            if not any(p.is_dir() for p in child.glob("topic=*/partition=*")):
                shutil.rmtree(child, ignore_errors=True)

    def _require_config(self) -> ParquetSinkConfig:
        if self.config is None:
            raise ConnectorError("ParquetSinkTask is not started")
        return self.config

    def _require_spark(self) -> Any:
        if self._spark is None:
            raise ConnectorError("ParquetSinkTask has had no batch yet")
        return self._spark

    def _require_work(self) -> _Work:
        if self._work is None:
            raise ConnectorError("ParquetSinkTask is not started")
        return self._work


# The connector is defined before its task (configuration first, as the module reads).
ParquetSinkConnector.TASK = ParquetSinkTask
