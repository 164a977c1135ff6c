"""Verifiable source and sink connectors, and a checker for lost and duplicated records.

They re-implement Apache Kafka Connect's ``org.apache.kafka.connect.tools.VerifiableSourceConnector`` and
``VerifiableSinkConnector`` (what Kafka's own system tests use to find lost and duplicated records
across worker restarts and rebalances), answer to the same class names and config keys (``topic``,
``throughput``, ``complete.record.data``; the connectors add ``id`` to each task's config) and
produce the same records and source offsets, so a config written for Java runs here and offsets
survive a move between the two:

- each source task counts its own sequence numbers from 0; the record key is the task id and the value
  the seqno (or, with ``complete.record.data=true``, the map ``{"name", "task", "topic", "time_ms",
  "seqno"}``); source partition ``{"id": <task>}``, offset ``{"seqno": <seqno>}``; a restarted task
  resumes at the committed seqno + 1;
- ``throughput`` caps each task's records per second averaged since it started; a negative value
  means unthrottled and 0 lets one record out and then nothing, as Java's ThroughputThrottler does.

Java prints one JSON line per record to standard output, which its tests scrape from the worker's log.
kconnect does the same unless ``file`` (kconnect's own key, on both connectors) names a file: then the
source appends one line per record Kafka acknowledged and the sink one line per record it flushed,
each batch in a single ``write`` on an ``O_APPEND`` descriptor followed by ``fsync``, so several tasks
and worker processes can share one file and a line that is there survived. The sink writes only in
``flush``, and the runtime commits consumer offsets only after ``flush``: under at-least-once delivery
every acknowledged seqno must therefore appear in the sink's file, perhaps more than once.
:func:`verify` says which did not and which came twice.

Java's ``VerifiableSinkConnector`` declares itself a ``SourceConnector`` (an old slip; its task is a
``SinkTask``); here it is a sink connector, since the runtime decides what to run from the type.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, ClassVar, Final, TypeGuard

from kconnect.connectors.uniform import UniformTasks
from kconnect.runtime import __version__, logs
from kconnect.runtime.plugins.api import (
    ConnectorError,
    ExactlyOnceSupport,
    SinkConnector,
    SinkRecord,
    SinkTask,
    SourceConnector,
    SourceRecord,
    SourceTask,
    TopicPartition,
)
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    CompositeValidator,
    ConfigDef,
    ConfigValidationError,
    Importance,
    LambdaValidator,
    NonEmptyString,
    Type,
)

log = logs.get(__name__)

NAME_CONFIG: Final = "name"
ID_CONFIG: Final = "id"
TOPIC_CONFIG: Final = "topic"
THROUGHPUT_CONFIG: Final = "throughput"
COMPLETE_RECORD_DATA_CONFIG: Final = "complete.record.data"
#: kconnect's own key (Java has none): where lines go instead of standard output.
FILE_CONFIG: Final = "file"

#: Source partition and offset fields, as Java's VerifiableSourceTask stores them.
ID_FIELD: Final = "id"
SEQNO_FIELD: Final = "seqno"

UNTHROTTLED: Final = -1


def _single_topic(name: str, value: Any) -> None:
    if isinstance(value, str) and "," in value:
        # A comma never appears in a Kafka topic name: this is a list, which a source cannot honour.
        raise ConfigValidationError(name, value, "must name a single topic, not a list")


_FILE_DOC: Final = (
    "kconnect only (Apache Kafka Connect has no such key): a file each task appends one JSON line to "
    "per record, durably (one write and an fsync per batch), instead of printing to standard output. "
)

SOURCE_CONFIG_DEF: Final = (
    ConfigDef()
    .define(
        TOPIC_CONFIG,
        Type.STRING,
        NO_DEFAULT,
        CompositeValidator.of(
            NonEmptyString(), LambdaValidator.with_(_single_topic, "a single topic name (no commas)")
        ),
        Importance.HIGH,
        "The topic every task writes its sequence numbers to.",
    )
    .define(
        THROUGHPUT_CONFIG,
        Type.LONG,
        UNTHROTTLED,
        None,
        Importance.HIGH,
        "Records per second per task, averaged since the task started. A negative value means "
        "unthrottled; 0 lets one record out and then nothing, as in Apache Kafka Connect. Java requires "
        "this key; kconnect defaults it to -1.",
    )
    .define(
        COMPLETE_RECORD_DATA_CONFIG,
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "Whether a record's value is the map {name, task, topic, time_ms, seqno} rather than the seqno.",
    )
    .define(
        FILE_CONFIG,
        Type.STRING,
        None,
        None,
        Importance.LOW,
        _FILE_DOC + 'The source writes the records Kafka acknowledged, marked "committed": true.',
    )
)

SINK_CONFIG_DEF: Final = ConfigDef().define(
    FILE_CONFIG,
    Type.STRING,
    None,
    None,
    Importance.LOW,
    _FILE_DOC + 'The sink writes the records it flushed, marked "flushed": true, with the '
    "partition and offset they were read from.",
)


# --------------------------------------------------------------------------------------------------
# Pure parts: records, offsets, pacing


def source_partition(task_id: int) -> dict[str, int]:
    """A task's source partition ``{"id": <task>}``, spelt as Java's VerifiableSourceTask spells it so that
    offsets move between the two runtimes."""
    return {ID_FIELD: task_id}


def source_offset(seqno: int) -> dict[str, int]:
    """A record's source offset ``{"seqno": <seqno>}``, Java's spelling: the task resumes one past it."""
    return {SEQNO_FIELD: seqno}


def _is_int(value: Any) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool)


def next_seqno(offset: Mapping[str, Any] | None) -> int:
    """The seqno a task resumes at: one past the committed one, or 0 when nothing was committed."""
    if offset is None:
        return 0
    seqno = offset.get(SEQNO_FIELD)
    if not _is_int(seqno) or seqno < 0:
        raise ConnectorError(
            f"Committed offset {json.dumps(dict(offset), default=str)} of a VerifiableSourceTask is invalid: "
            f"'{SEQNO_FIELD}' must be a non-negative integer"
        )
    return seqno + 1


def record_data(name: str, task: int, topic: str, time_ms: int, seqno: int) -> dict[str, Any]:
    """What Java prints for a record, in its complete value's field order."""
    return {"name": name, "task": task, "topic": topic, "time_ms": time_ms, "seqno": seqno}


def due_records(throughput: int, elapsed_s: float, produced: int, limit: int) -> int:
    """How many more records a task may return now, at most ``limit``.

    The schedule lets record number ``n`` (0-based, counted since the task started) out once
    ``elapsed_s * throughput >= n``, so the first goes at once and the average rate is ``throughput``;
    with 0 only the first goes, as Java's throttler lets one record through and then blocks.
    """
    if throughput < 0:
        return limit
    # The epsilon keeps float error (0.1 * 10 = 0.9999...) from holding a due record back.
    allowed = math.floor(max(elapsed_s, 0.0) * throughput + 1e-9) + 1
    return max(0, min(limit, allowed - produced))


def seconds_until_due(throughput: int, elapsed_s: float, produced: int) -> float:
    """How long until the next record is due (0 if it is); infinite when none ever will be."""
    if throughput < 0:
        return 0.0
    if throughput == 0:
        return 0.0 if produced == 0 else math.inf
    return max(0.0, produced / throughput - elapsed_s)


def _json_line(data: Mapping[str, Any]) -> str:
    return json.dumps(data, separators=(",", ":"), default=str)


def _as_int(value: Any) -> Any:
    """A seqno or task id as an int, whichever converter delivered it (JSON number, string, bytes)."""
    if _is_int(value):
        return value
    if isinstance(value, bytes | bytearray):
        value = bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            return value
    return value


def sink_line_data(name: str, sink_task: int, record: SinkRecord, time_ms: int) -> dict[str, Any]:
    """What the sink records of one record: Java's fields plus the partition it came from.

    Java takes ``task`` from the key and ``seqno`` from the value as they are; with
    ``complete.record.data`` the value is the whole map, so kconnect takes both from it instead.
    """
    task, seqno = record.key, record.value
    if isinstance(seqno, Mapping) and SEQNO_FIELD in seqno:
        if task is None:
            task = seqno.get("task")
        seqno = seqno[SEQNO_FIELD]
    return {
        "name": name,
        "task": _as_int(task),
        "sinkTask": sink_task,
        "topic": record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "time_ms": time_ms,
        "seqno": _as_int(seqno),
    }


def _task_id(props: Mapping[str, str], task_kind: str) -> int:
    raw = props.get(ID_CONFIG)
    try:
        return int(str(raw).strip())
    except ValueError:
        raise ConnectorError(
            f"Invalid {task_kind} configuration: '{ID_CONFIG}' is {raw!r}, it must be an integer "
            "(the connector sets it for each task)"
        ) from None


# --------------------------------------------------------------------------------------------------
# The checker (pure)


@dataclass(frozen=True)
class Verification:
    """What a run lost and duplicated, per source task.

    ``lost`` lists expected seqnos nobody saw, ``duplicates`` counts every sighting of seqnos seen
    more than once, ``unexpected`` lists seqnos seen that were not expected (a source that produced
    beyond what the caller expected is not an error under at-least-once, so ``ok`` ignores them).
    """

    lost: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    duplicates: Mapping[int, Mapping[int, int]] = field(default_factory=dict)
    unexpected: Mapping[int, tuple[int, ...]] = field(default_factory=dict)
    seen: int = 0
    expected: int = 0

    @property
    def lost_count(self) -> int:
        """How many expected seqnos no sink line shows; any at all means at-least-once delivery was broken."""
        return sum(len(s) for s in self.lost.values())

    @property
    def duplicate_count(self) -> int:
        """Extra copies: a seqno seen three times counts two."""
        return sum(n - 1 for counts in self.duplicates.values() for n in counts.values())

    @property
    def ok(self) -> bool:
        """Nothing lost: at-least-once held (duplicates are allowed by it)."""
        return self.lost_count == 0

    def summary(self) -> str:
        """One line for a test's failure message or a log, with every count, so a failed run says at once
        whether records were lost, repeated or unexpected."""
        return (
            f"{self.expected} expected, {self.seen} seen, {self.lost_count} lost, "
            f"{self.duplicate_count} duplicate(s), {sum(len(s) for s in self.unexpected.values())} unexpected"
        )


def seen_in_lines(lines: Iterable[str], marker: str = "flushed") -> list[tuple[int, int]]:
    """``(task, seqno)`` of every JSON line marked ``marker: true``, in order.

    Anything else is skipped: log lines mixed into standard output (Java's advice is to keep the lines
    that parse as JSON), Java's unflushed/uncommitted echo of each record, and lines whose task or seqno
    is not an integer.
    """
    seen: list[tuple[int, int]] = []
    for line in lines:
        try:
            data = json.loads(line)
        except ValueError:
            continue
        if not isinstance(data, dict) or data.get(marker) is not True:
            continue
        task, seqno = data.get("task"), data.get(SEQNO_FIELD)
        if _is_int(task) and _is_int(seqno):
            seen.append((task, seqno))
    return seen


def expected_from_last(last_seqnos: Mapping[int, int]) -> dict[int, range]:
    """Per task, every seqno from 0 up to and including its last committed one."""
    return {task: range(last + 1) for task, last in last_seqnos.items()}


def expected_from_offsets(
    offsets: Iterable[tuple[Mapping[str, Any] | None, Mapping[str, Any] | None]],
) -> dict[int, range]:
    """Per task, every seqno up to its committed source offset: what a sink must have seen.

    Takes ``(partition, offset)`` pairs as the offsets topic or ``GET /connectors/{name}/offsets``
    gives them (``{"id": 0}``, ``{"seqno": 41}``); pairs that are not a verifiable task's are skipped,
    so the whole answer for a connector can be passed in.
    """
    expected: dict[int, range] = {}
    for partition, offset in offsets:
        task = None if partition is None else partition.get(ID_FIELD)
        seqno = None if offset is None else offset.get(SEQNO_FIELD)
        if _is_int(task) and _is_int(seqno) and seqno >= 0:
            expected[task] = range(max(seqno + 1, len(expected.get(task, range(0)))))
    return expected


def verify(seen: Iterable[tuple[int, int]], expected: Mapping[int, Iterable[int]]) -> Verification:
    """Compare the ``(task, seqno)`` pairs a sink saw with the seqnos each task should have delivered."""
    counts: Counter[tuple[int, int]] = Counter(seen)
    expected_sets = {task: set(seqnos) for task, seqnos in expected.items()}
    lost: dict[int, tuple[int, ...]] = {}
    for task, seqnos in sorted(expected_sets.items()):
        missing = tuple(sorted(s for s in seqnos if (task, s) not in counts))
        if missing:
            lost[task] = missing
    duplicates: dict[int, dict[int, int]] = {}
    unexpected: dict[int, list[int]] = {}
    for (task, seqno), n in sorted(counts.items()):
        if n > 1:
            duplicates.setdefault(task, {})[seqno] = n
        if seqno not in expected_sets.get(task, ()):
            unexpected.setdefault(task, []).append(seqno)
    return Verification(
        lost=lost,
        duplicates=duplicates,
        unexpected={task: tuple(s) for task, s in unexpected.items()},
        seen=sum(counts.values()),
        expected=sum(len(s) for s in expected_sets.values()),
    )


# --------------------------------------------------------------------------------------------------
# Output: stdout as Java, or a shared append-only file


class _LineFile:
    """An ``O_APPEND`` file written a batch at a time, each batch one ``write`` then ``fsync``.

    One ``write`` per batch keeps lines of tasks sharing the file whole; ``fsync`` makes a line's
    presence mean it survived, which is what lets a test trust the file after a crash.
    """

    def __init__(self, path: str, owner: str) -> None:
        self.path = path
        try:
            self._fd: int | None = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        except OSError as exc:
            raise ConnectorError(
                f"{owner} cannot open '{path}' (the '{FILE_CONFIG}' setting) for appending: {exc}"
            ) from exc
        self._lock = threading.Lock()

    def append(self, lines: Sequence[str], after_close: bool = False) -> None:
        """Append ``lines``; once closed, refuse, unless ``after_close`` (one open-write-close)."""
        if not lines:
            return
        payload = "".join(line + "\n" for line in lines).encode("utf-8")
        with self._lock:
            fd, late = self._fd, self._fd is None
            if late and not after_close:
                raise ConnectorError(f"'{self.path}' was closed: the task has been stopped")
            if fd is None:
                fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                view = memoryview(payload)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                if late:
                    os.close(fd)

    def close(self) -> None:
        with self._lock:
            fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)


def _wall_clock_ms() -> int:
    return int(time.time() * 1000)


# --------------------------------------------------------------------------------------------------
# Connectors


class VerifiableSourceConnector(UniformTasks, SourceConnector):
    """As many tasks as asked for, each producing its own sequence numbers to ``topic``."""

    class_aliases = ("org.apache.kafka.connect.tools.VerifiableSourceConnector",)
    CONFIG = SOURCE_CONFIG_DEF
    TASK_INDEX_KEY = ID_CONFIG

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """SUPPORTED, as Java's: each task's records are a pure function of its committed offset, so a task
        restarted after an aborted transaction produces exactly the records that were lost."""
        # Each task's seqnos are a pure function of its committed offset, so a restarted task replays
        # exactly what an aborted transaction lost (Java's VerifiableSourceConnector says SUPPORTED too).
        return ExactlyOnceSupport.SUPPORTED


class VerifiableSinkConnector(UniformTasks, SinkConnector):
    """As many tasks as asked for, each recording the seqnos it consumed."""

    class_aliases = ("org.apache.kafka.connect.tools.VerifiableSinkConnector",)
    CONFIG = SINK_CONFIG_DEF
    TASK_INDEX_KEY = ID_CONFIG


# --------------------------------------------------------------------------------------------------
# Tasks


class VerifiableSourceTask(SourceTask):
    """Returns the next seqnos as fast as ``throughput`` allows; resumes after the committed one.

    ``clock`` (monotonic seconds), ``wait`` (sleep up to that many seconds, returning early on stop)
    and ``wall_clock_ms`` (the ``time_ms`` field) can be injected, so pacing is testable without
    sleeping.
    """

    #: Most records one poll returns; Java returns one, more makes an unthrottled Python task faster
    #: without changing what reaches Kafka.
    max_batch: ClassVar[int] = 500
    #: Longest a poll waits for the next record to fall due, so the runtime keeps control.
    max_wait_s: ClassVar[float] = 1.0

    def __init__(
        self,
        output: IO[str] | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        wait: Callable[[float], Any] | None = None,
        wall_clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        self._given_output = output
        self._clock = clock
        self._stopping = threading.Event()
        self._wait = wait if wait is not None else self._stopping.wait
        self._wall_clock_ms = wall_clock_ms
        self.name = ""
        self.id = 0
        self.topic = ""
        self.throughput = UNTHROTTLED
        self.complete_record_data = False
        self.starting_seqno = 0
        self.seqno = 0
        self._started_at = 0.0
        self._file: _LineFile | None = None
        self._acked: list[str] = []
        self._lock = threading.Lock()

    def version(self) -> str:
        """kconnect's version: the task ships with the runtime."""
        return __version__

    def start(self, props: dict[str, str]) -> None:
        """Read the config and resume one past the committed seqno (0 when none), so that a restarted or moved
        task continues its sequence; the pacing clock starts here."""
        parsed = SOURCE_CONFIG_DEF.parse(props)
        self.name = props.get(NAME_CONFIG, "")
        self.id = _task_id(props, "VerifiableSourceTask")
        self.topic = parsed[TOPIC_CONFIG]
        self.throughput = int(parsed[THROUGHPUT_CONFIG])
        self.complete_record_data = bool(parsed[COMPLETE_RECORD_DATA_CONFIG])
        offset = None
        if self.context is not None:
            offset = self.context.offset_storage_reader.offset(source_partition(self.id))
        self.seqno = self.starting_seqno = next_seqno(offset)
        self._stopping.clear()
        if parsed[FILE_CONFIG] and self._given_output is None:
            self._file = _LineFile(parsed[FILE_CONFIG], "VerifiableSourceTask")
        self._started_at = self._clock()
        log.info(
            "verifiable source task started",
            connector=self.name,
            task=self.id,
            topic=self.topic,
            seqno=self.starting_seqno,
            throughput=self.throughput,
        )

    def poll(self) -> list[SourceRecord] | None:
        """The seqnos now due under ``throughput``, at most ``max_batch``; when none is due, wait (at most
        ``max_wait_s``, cut short by stop) and return None if still none, so the runner regains control."""
        if self._stopping.is_set():
            return None
        count = self._due()
        if count == 0:
            delay = seconds_until_due(self.throughput, self._clock() - self._started_at, self._produced())
            self._wait(min(delay, self.max_wait_s))
            if self._stopping.is_set():
                return None
            count = self._due()
            if count == 0:
                return None
        now_ms = self._wall_clock_ms()
        records = [self._record(self.seqno + i, now_ms) for i in range(count)]
        self.seqno += count
        return records

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        """A record Kafka acknowledged: its line, marked ``"committed": true``, is printed at once or, with
        ``file``, queued for the next commit, so the file lists only what Kafka really holds. A record a
        transform dropped gets no line."""
        if metadata is None or record.source_offset is None:
            return  # dropped by a transform: it never reached Kafka
        data = record_data(
            self.name, self.id, self.topic, self._wall_clock_ms(), record.source_offset[SEQNO_FIELD]
        )
        data["committed"] = True
        line = _json_line(data)
        if self._file is None:
            self._print([line])
        else:
            with self._lock:
                self._acked.append(line)

    def commit(self) -> None:
        """Write the queued acknowledged lines (one write and fsync) when the runtime commits offsets, so a
        line in the file means the record survived."""
        self._write_acked()

    def stop(self) -> None:
        """Stop polling, write the acknowledged lines still queued and close the file; acknowledgements that
        arrive after this still get their lines (see ``_write_acked``)."""
        self._stopping.set()
        self._write_acked()
        if self._file is not None:
            self._file.close()

    def _write_acked(self) -> None:
        """Record acknowledged seqnos. The runtime's final offset flush comes after ``stop`` (as in
        Java, ``commit`` may follow ``stop``): its acknowledgements are real and still get their lines."""
        with self._lock:
            lines, self._acked = self._acked, []
        if self._file is not None:
            self._file.append(lines, after_close=True)

    def _produced(self) -> int:
        return self.seqno - self.starting_seqno

    def _due(self) -> int:
        return due_records(
            self.throughput, self._clock() - self._started_at, self._produced(), self.max_batch
        )

    def _record(self, seqno: int, now_ms: int) -> SourceRecord:
        data = record_data(self.name, self.id, self.topic, now_ms, seqno)
        if self._file is None:
            self._print([_json_line(data)])
        return SourceRecord(
            source_partition=source_partition(self.id),
            source_offset=source_offset(seqno),
            topic=self.topic,
            key=self.id,
            value=data if self.complete_record_data else seqno,
        )

    def _print(self, lines: Sequence[str]) -> None:
        out = self._given_output or sys.stdout
        out.write("".join(line + "\n" for line in lines))


class VerifiableSinkTask(SinkTask):
    """Notes every record it is given and, on ``flush``, records them as flushed.

    Without ``file`` it prints as Java does: a line per record from ``put`` and the same line with
    ``"flushed": true`` from ``flush``. With ``file`` only the flushed lines are written, durably.
    Records put but not flushed when the task stops are dropped: their offsets were not committed,
    so they will be delivered again.
    """

    def __init__(
        self, output: IO[str] | None = None, *, wall_clock_ms: Callable[[], int] = _wall_clock_ms
    ) -> None:
        self._given_output = output
        self._wall_clock_ms = wall_clock_ms
        self.name = ""
        self.id = 0
        self._file: _LineFile | None = None
        self._unflushed: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def version(self) -> str:
        """kconnect's version: the task ships with the runtime."""
        return __version__

    def start(self, props: dict[str, str]) -> None:
        """Read the config, start with nothing noted, and open the shared file when ``file`` is set, so
        that a file that cannot be opened fails the task at start."""
        parsed = SINK_CONFIG_DEF.parse(props)
        self.name = props.get(NAME_CONFIG, "")
        self.id = _task_id(props, "VerifiableSinkTask")
        self._unflushed = []
        if parsed[FILE_CONFIG] and self._given_output is None:
            self._file = _LineFile(parsed[FILE_CONFIG], "VerifiableSinkTask")

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Note each record (and print it, as Java does, without ``file``); nothing is recorded as seen until
        :meth:`flush`, because only flushed records have committed offsets."""
        now_ms = self._wall_clock_ms()
        batch = [sink_line_data(self.name, self.id, record, now_ms) for record in records]
        if self._file is None:
            self._print([_json_line(data) for data in batch])
        with self._lock:
            self._unflushed.extend(batch)

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Record the noted records as flushed, just before the runtime commits their offsets, so every
        committed seqno has a line."""
        now_ms = self._wall_clock_ms()
        with self._lock:
            batch, self._unflushed = self._unflushed, []
        lines = [_json_line({**data, "time_ms": now_ms, "flushed": True}) for data in batch]
        if self._file is None:
            self._print(lines)
        else:
            self._file.append(lines)

    def stop(self) -> None:
        """Forget unflushed records (their offsets were not committed, so they will come again) and close the
        file; the closed file makes a later flush fail rather than print."""
        with self._lock:
            self._unflushed = []
        if self._file is not None:
            self._file.close()  # kept, so that a flush after stop fails rather than print instead

    def _print(self, lines: Sequence[str]) -> None:
        if lines:
            out = self._given_output or sys.stdout
            out.write("".join(line + "\n" for line in lines))


# The connectors are defined before their tasks (the module reads top-down as Java's files).
VerifiableSourceConnector.TASK = VerifiableSourceTask
VerifiableSinkConnector.TASK = VerifiableSinkTask
