"""FileStream source and sink connectors and their tasks, on real temporary files."""

from __future__ import annotations

import io
import os
import sys
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.connectors.file import (
    SINK_CONFIG_DEF,
    SOURCE_CONFIG_DEF,
    FileStreamSinkConnector,
    FileStreamSinkTask,
    FileStreamSourceConnector,
    FileStreamSourceTask,
)
from kconnect.runtime import __version__
from kconnect.runtime.plugins.api import (
    ConnectorError,
    ExactlyOnceSupport,
    InMemoryOffsetStorageReader,
    OffsetStorageReader,
    SinkRecord,
    SourceRecord,
    TopicPartition,
)
from kconnect.runtime.plugins.config_def import ConfigValidationError


class _SourceContext:
    def __init__(self, reader: InMemoryOffsetStorageReader | None = None) -> None:
        self.reader = reader or InMemoryOffsetStorageReader()

    def configs(self) -> Mapping[str, str]:
        return {}

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self.reader


_started: list[FileStreamSourceTask] = []


@pytest.fixture(autouse=True)
def no_idle_wait(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No idle waits in tests, and every source task stopped (its file closed) afterwards."""
    monkeypatch.setattr(FileStreamSourceTask, "idle_wait_s", 0.0)
    yield
    while _started:
        _started.pop().stop()


def _source_task(
    path: Path | None, reader: InMemoryOffsetStorageReader | None = None, **extra: str
) -> FileStreamSourceTask:
    task = FileStreamSourceTask()
    task.initialize(_SourceContext(reader))
    props = {"topic": "lines", **extra}
    if path is not None:
        props["file"] = str(path)
    task.start(props)
    _started.append(task)
    return task


def _drain(task: FileStreamSourceTask) -> list[SourceRecord]:
    records: list[SourceRecord] = []
    while batch := task.poll():
        records.extend(batch)
    return records


# ---- connectors


def test_connector_versions_and_config_defs() -> None:
    assert FileStreamSourceConnector().version() == __version__
    assert FileStreamSinkConnector().version() == __version__
    assert FileStreamSourceTask().version() == __version__
    assert FileStreamSinkTask().version() == __version__
    assert SOURCE_CONFIG_DEF.names() == ["file", "topic", "batch.size"]
    assert SOURCE_CONFIG_DEF.config_keys["topic"].required
    assert SOURCE_CONFIG_DEF.config_keys["batch.size"].default == 2000
    assert SOURCE_CONFIG_DEF.config_keys["file"].default is None
    assert SINK_CONFIG_DEF.names() == ["file"]
    assert FileStreamSourceConnector().config_def() is SOURCE_CONFIG_DEF
    assert FileStreamSinkConnector().config_def() is SINK_CONFIG_DEF
    assert FileStreamSourceConnector().task_class() is FileStreamSourceTask
    assert FileStreamSinkConnector().task_class() is FileStreamSinkTask


@pytest.mark.parametrize("max_tasks", [1, 2, 5])
def test_source_runs_exactly_one_task_whatever_tasks_max(max_tasks: int) -> None:
    connector = FileStreamSourceConnector()
    props = {
        "name": "src",
        "connector.class": "FileStreamSource",
        "file": "/tmp/in.txt",
        "topic": "t",
        "tasks.max": "5",
    }
    connector.start(props)
    assert connector.task_configs(max_tasks) == [props]


@pytest.mark.parametrize("max_tasks", [1, 3])
def test_sink_runs_one_copy_of_its_config_per_task(max_tasks: int) -> None:
    connector = FileStreamSinkConnector()
    props = {"name": "snk", "topics": "a,b", "file": "/tmp/out.txt"}
    connector.start(props)
    configs = connector.task_configs(max_tasks)
    assert configs == [props] * max_tasks
    configs[0]["file"] = "changed"
    assert connector.task_configs(1) == [props], "each task gets its own copy"


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({}, 'Missing required configuration "topic" which has no default value.'),
        ({"topic": ""}, "Invalid value  for configuration topic: String must be non-empty"),
        ({"topic": "a,b"}, "Invalid value a,b for configuration topic: must name a single topic, not a list"),
        (
            {"topic": "t", "batch.size": "many"},
            "Invalid value many for configuration batch.size: Not a number of type INT",
        ),
    ],
)
def test_source_start_rejects_bad_configs(props: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigValidationError) as info:
        FileStreamSourceConnector().start(props)
    assert str(info.value) == message


def test_exactly_once_needs_a_real_file() -> None:
    connector = FileStreamSourceConnector()
    assert connector.exactly_once_support({"topic": "t", "file": "/x"}) is ExactlyOnceSupport.SUPPORTED
    assert connector.exactly_once_support({"topic": "t"}) is ExactlyOnceSupport.UNSUPPORTED
    assert connector.exactly_once_support({"topic": "t", "file": ""}) is ExactlyOnceSupport.UNSUPPORTED


@pytest.mark.parametrize(
    ("props", "offsets", "error"),
    [
        ({"file": "/f"}, [({"filename": "/f"}, {"position": 10}), ({"filename": "/g"}, None)], None),
        ({"file": "/f"}, [({"filename": "/f"}, {"position": 0})], None),
        (
            {},
            [({"filename": "/f"}, {"position": 1})],
            "Offsets cannot be modified if the 'file' configuration is unspecified",
        ),
        (
            {"file": "/f"},
            [({"filename": "/f"}, {"pos": 1})],
            "Offset objects should either be null or contain the key 'position'",
        ),
        ({"file": "/f"}, [({"filename": "/f"}, {"position": "1"})], "expected to be a Long value"),
        ({"file": "/f"}, [({"filename": "/f"}, {"position": True})], "expected to be a Long value"),
        ({"file": "/f"}, [({"filename": "/f"}, {"position": -1})], "should be a non-negative value"),
        (
            {"file": "/f"},
            [({"name": "/f"}, {"position": 1})],
            "Partition objects should contain the key 'filename'",
        ),
    ],
)
def test_source_alter_offsets(props: dict[str, str], offsets: Any, error: str | None) -> None:
    connector = FileStreamSourceConnector()
    if error is None:
        assert connector.alter_offsets(props, offsets) is True
    else:
        with pytest.raises(ConnectorError, match=error):
            connector.alter_offsets(props, offsets)


def test_sink_accepts_any_offsets() -> None:
    assert FileStreamSinkConnector().alter_offsets(
        {}, {TopicPartition("t", 0): 5, TopicPartition("t", 1): None}
    )


# ---- source task


def test_source_task_reads_a_file_from_the_start(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"first\nsecond\r\nthird\rfourth\n")
    before = int(time.time() * 1000)
    task = _source_task(path)
    records = task.poll()
    assert records is not None
    assert [r.value for r in records] == ["first", "second", "third", "fourth"]
    assert [r.source_offset for r in records] == [
        {"position": 6},
        {"position": 14},
        {"position": 20},
        {"position": 27},
    ]
    assert all(r.source_partition == {"filename": str(path)} for r in records)
    assert all(r.topic == "lines" and r.partition is None and r.key is None for r in records)
    assert all(r.timestamp is not None and r.timestamp >= before for r in records)
    assert task.poll() is None
    task.stop()


def test_source_task_resumes_from_a_stored_position(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"one\ntwo\nthree\n")
    first = _drain(_source_task(path))
    assert [r.value for r in first] == ["one", "two", "three"]
    # The runtime committed the offset of "one"; a new task resumes after it.
    reader = InMemoryOffsetStorageReader([(first[0].source_partition or {}, first[0].source_offset)])
    resumed = _source_task(path, reader)
    records = _drain(resumed)
    assert [(r.value, r.source_offset) for r in records] == [
        ("two", {"position": 8}),
        ("three", {"position": 14}),
    ]
    resumed.stop()


def test_source_task_positions_are_bytes_even_for_multibyte_text(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_text("héllo\nwörld\n", encoding="utf-8")
    records = _drain(_source_task(path))
    assert [(r.value, r.source_offset) for r in records] == [
        ("héllo", {"position": 7}),
        ("wörld", {"position": 14}),
    ]
    reader = InMemoryOffsetStorageReader([({"filename": str(path)}, {"position": 7})])
    assert [r.value for r in _drain(_source_task(path, reader))] == ["wörld"]


def test_source_task_follows_a_growing_file_and_waits_for_whole_lines(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"a\npart")
    task = _source_task(path)
    assert [r.value for r in task.poll() or []] == ["a"]
    assert task.poll() is None, "an unterminated line is not a record yet"
    with path.open("ab") as f:
        f.write(b"ial\r")
    assert task.poll() is None, "a trailing \\r may be the start of \\r\\n"
    with path.open("ab") as f:
        f.write(b"\nb\n")
    records = task.poll() or []
    assert [(r.value, r.source_offset) for r in records] == [
        ("partial", {"position": 11}),
        ("b", {"position": 13}),
    ]
    task.stop()


def test_source_task_batches_by_batch_size(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"".join(b"line%d\n" % i for i in range(7)))
    task = _source_task(path, **{"batch.size": "3"})
    sizes = []
    values = []
    while batch := task.poll():
        sizes.append(len(batch))
        values += [r.value for r in batch]
    assert sizes == [3, 3, 1]
    assert values == [f"line{i}" for i in range(7)]


def test_source_task_waits_for_a_missing_file(tmp_path: Path) -> None:
    path = tmp_path / "later.txt"
    task = _source_task(path)
    assert task.poll() is None
    path.write_bytes(b"now\n")
    assert [r.value for r in task.poll() or []] == ["now"]


def test_source_task_rejects_an_offset_of_the_wrong_type(tmp_path: Path) -> None:
    path = tmp_path / "in.txt"
    path.write_bytes(b"x\n")
    reader = InMemoryOffsetStorageReader([({"filename": str(path)}, {"position": "12"})])
    with pytest.raises(ConnectorError, match="Offset position is the incorrect type"):
        _source_task(path, reader).poll()


def test_source_task_needs_a_topic() -> None:
    with pytest.raises(ConnectorError, match="missing topic setting"):
        FileStreamSourceTask().start({"file": "/x"})


def test_stop_cuts_an_idle_poll_short(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(FileStreamSourceTask, "idle_wait_s", 30.0)
    path = tmp_path / "empty.txt"
    path.write_bytes(b"")
    task = _source_task(path)
    result: list[Any] = []
    poller = threading.Thread(target=lambda: result.append(task.poll()))
    started = time.monotonic()
    poller.start()
    time.sleep(0.1)
    task.stop()
    poller.join(5)
    assert not poller.is_alive()
    assert time.monotonic() - started < 5
    assert result == [None]


def test_source_task_reads_stdin_without_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    read_fd, write_fd = os.pipe()
    stdin = io.TextIOWrapper(io.BufferedReader(io.FileIO(read_fd, "rb")))
    monkeypatch.setattr(sys, "stdin", stdin)
    try:
        task = _source_task(None)
        assert task.poll() is None, "nothing written yet: poll must not block"
        os.write(write_fd, b"typed\nin\n")
        records = task.poll() or []
        assert [(r.value, r.source_partition, r.source_offset) for r in records] == [
            ("typed", {"filename": None}, {"position": None}),
            ("in", {"filename": None}, {"position": None}),
        ]
        task.stop()
        assert not stdin.closed, "stop() leaves stdin open"
    finally:
        os.close(write_fd)
        stdin.close()


@settings(max_examples=60, deadline=None)
@given(
    lines=st.lists(
        st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters="\r\n"), max_size=20),
        min_size=1,
        max_size=15,
    ),
    endings=st.lists(st.sampled_from(["\n", "\r\n", "\r"]), min_size=15, max_size=15),
    batch=st.integers(min_value=1, max_value=4),
)
def test_source_task_splits_any_lines_and_counts_every_byte(
    tmp_path_factory: pytest.TempPathFactory, lines: list[str], endings: list[str], batch: int
) -> None:
    # A final bare \r cannot be told from the start of \r\n until more arrives, so end with \n; and a
    # bare \r followed by an empty line ended by \n *is* \r\n, so that one pair is written as \r\n.
    endings = [*endings[: len(lines) - 1], "\n"]
    for i in range(len(lines) - 1):
        if endings[i] == "\r" and lines[i + 1] == "" and endings[i + 1].startswith("\n"):
            endings[i] = "\r\n"
    data = "".join(line + end for line, end in zip(lines, endings, strict=False)).encode("utf-8")
    path = tmp_path_factory.mktemp("prop") / "in.txt"
    path.write_bytes(data)
    records = _drain(_source_task(path, **{"batch.size": str(batch)}))
    assert [r.value for r in records] == lines
    assert records[-1].source_offset == {"position": len(data)}


@settings(max_examples=80, deadline=None)
@given(
    data=st.binary(max_size=200).map(lambda b: b.replace(b"\r", b"\n")),
    limit=st.integers(min_value=1, max_value=6),
    position=st.one_of(st.none(), st.integers(min_value=0, max_value=10_000)),
)
def test_lines_split_at_once_are_the_lines_scanned_one_by_one(
    data: bytes, limit: int, position: int | None
) -> None:
    """A buffer without \\r (the common case) is split in one call (``_split_lines``); the lines, their
    positions, what stays in the buffer and the position after them are what the line-by-line scan gives,
    also for invalid UTF-8, empty lines and a partial last line."""
    split, scanned = FileStreamSourceTask(), FileStreamSourceTask()
    for task in (split, scanned):
        task._buffer = bytearray(data)
        task._position = position
    assert split._split_lines(limit) == scanned._scan_lines(limit)
    assert (split._buffer, split._position) == (scanned._buffer, scanned._position)


# ---- sink task


def _record(value: Any, offset: int = 0) -> SinkRecord:
    return SinkRecord(topic="t", partition=0, offset=offset, key=None, value=value)


def test_sink_task_appends_values_as_lines(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    path.write_text("existing\n", encoding="utf-8")
    task = FileStreamSinkTask()
    task.start({"file": str(path)})
    task.put([_record("plain", 0), _record("ünïcode", 1)])
    task.put([_record(None, 2), _record(b"bytes", 3), _record(42, 4), _record(True, 5)])
    task.put([_record({"a": 1, "b": [1, 2]}, 6)])
    task.flush({TopicPartition("t", 0): 7})
    assert (
        path.read_text(encoding="utf-8")
        == "existing\nplain\nünïcode\nnull\nbytes\n42\ntrue\n{a=1, b=[1, 2]}\n"
    )
    assert task.pre_commit({TopicPartition("t", 0): 7}) == {TopicPartition("t", 0): 7}
    task.stop()
    task.stop()  # idempotent


def test_sink_task_lines_reach_the_file_on_flush(tmp_path: Path) -> None:
    path = tmp_path / "out.txt"
    task = FileStreamSinkTask()
    task.start({"file": str(path)})
    task.put([_record("x" * 10)])
    task.flush({})
    assert path.read_text(encoding="utf-8") == "x" * 10 + "\n"
    task.stop()


def test_sink_task_writes_stdout_without_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    task = FileStreamSinkTask()
    task.start({"file": ""})
    task.put([_record("to stdout")])
    task.flush({})
    task.stop()
    assert capsys.readouterr().out == "to stdout\n"
    assert not sys.stdout.closed


def test_sink_task_can_write_to_a_given_stream() -> None:
    out = io.StringIO()
    task = FileStreamSinkTask(out)
    task.start({"file": "/ignored"})
    task.put([_record("a"), _record("b")])
    task.stop()
    assert out.getvalue() == "a\nb\n"
    assert not out.closed


def test_sink_task_reports_a_file_it_cannot_create(tmp_path: Path) -> None:
    path = tmp_path / "no-such-dir" / "out.txt"
    with pytest.raises(ConnectorError, match=f"Couldn't find or create file '{path}' for FileStreamSinkTask"):
        FileStreamSinkTask().start({"file": str(path)})
    with pytest.raises(ConnectorError, match="not started"):
        FileStreamSinkTask().put([_record("x")])


@pytest.fixture
def sink_pair(tmp_path: Path) -> Iterator[tuple[FileStreamSourceTask, FileStreamSinkTask, Path, Path]]:
    source_path = tmp_path / "in.txt"
    sink_path = tmp_path / "out.txt"
    source_path.write_text("".join(f"{i}\n" for i in range(100)), encoding="utf-8")
    source = _source_task(source_path)
    sink = FileStreamSinkTask()
    sink.start({"file": str(sink_path)})
    yield source, sink, source_path, sink_path
    source.stop()
    sink.stop()


def test_source_to_sink_round_trip(
    sink_pair: tuple[FileStreamSourceTask, FileStreamSinkTask, Path, Path],
) -> None:
    source, sink, source_path, sink_path = sink_pair
    offset = 0
    while batch := source.poll():
        sink.put([_record(r.value, offset + i) for i, r in enumerate(batch)])
        offset += len(batch)
    sink.flush({TopicPartition("t", 0): offset})
    assert sink_path.read_bytes() == source_path.read_bytes()


def test_a_busy_file_is_looked_at_again_soon_and_an_idle_one_once_a_second(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FileStreamSourceTask, "idle_wait_s", 1.0)
    path = tmp_path / "in.txt"
    path.write_text("a\nb\n")
    task = _source_task(path)
    waits: list[float] = []
    monkeypatch.setattr(task._stopping, "wait", waits.append)
    assert [r.value for r in task.poll() or []] == ["a", "b"]
    for _ in range(6):
        assert task.poll() is None
    assert waits == [0.5, 1.0, 1.0, 1.0, 1.0, 1.0]
    fresh = _source_task(tmp_path / "missing.txt")  # nothing ever read: a whole second each time
    monkeypatch.setattr(fresh._stopping, "wait", waits.append)
    waits.clear()
    assert fresh.poll() is None and fresh.poll() is None
    assert waits == [1.0, 1.0]
