"""Verifiable source and sink connectors, driven through the plugin API, and the loss/duplicate checker.

No broker: tasks get in-memory contexts, pacing runs on a fake clock, the sink writes real temporary
files. The live plan (real workers, real broker) builds on these parts.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.connectors.verifiable import (
    SINK_CONFIG_DEF,
    SOURCE_CONFIG_DEF,
    VerifiableSinkConnector,
    VerifiableSinkTask,
    VerifiableSourceConnector,
    VerifiableSourceTask,
    due_records,
    expected_from_last,
    expected_from_offsets,
    next_seqno,
    seconds_until_due,
    seen_in_lines,
    verify,
)
from kconnect.runtime import __version__
from kconnect.runtime.plugins.api import (
    ConnectorError,
    InMemoryOffsetStorageReader,
    OffsetStorageReader,
    SinkRecord,
    SourceRecord,
    TopicPartition,
)
from kconnect.runtime.plugins.config_def import ConfigValidationError
from kconnect.runtime.plugins.connector_validation import validate_connector_config
from kconnect.runtime.plugins.registry import PluginRegistry

JAVA_SOURCE = "org.apache.kafka.connect.tools.VerifiableSourceConnector"
JAVA_SINK = "org.apache.kafka.connect.tools.VerifiableSinkConnector"


class _SourceContext:
    def __init__(self, reader: InMemoryOffsetStorageReader | None = None) -> None:
        self.reader = reader or InMemoryOffsetStorageReader()

    def configs(self) -> Mapping[str, str]:
        return {}

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        return self.reader


class _FakeTime:
    """A monotonic clock that only moves when a task waits, so pacing is checked without sleeping."""

    def __init__(self) -> None:
        self.now = 100.0
        self.waits: list[float] = []

    def clock(self) -> float:
        return self.now

    def wait(self, seconds: float) -> bool:
        self.waits.append(seconds)
        self.now += seconds
        return False


def _source_props(**extra: str) -> dict[str, str]:
    return {"name": "verify", "topic": "seq", "throughput": "-1", "id": "0", **extra}


def _source_task(
    props: dict[str, str],
    reader: InMemoryOffsetStorageReader | None = None,
    fake: _FakeTime | None = None,
    output: io.StringIO | None = None,
) -> VerifiableSourceTask:
    fake = fake or _FakeTime()
    task = VerifiableSourceTask(
        output if output is not None else io.StringIO(),
        clock=fake.clock,
        wait=fake.wait,
        wall_clock_ms=lambda: 1_700_000_000_000,
    )
    task.initialize(_SourceContext(reader))
    task.start(props)
    return task


def _sink_task(props: dict[str, str], output: io.StringIO | None = None) -> VerifiableSinkTask:
    task = VerifiableSinkTask(output, wall_clock_ms=lambda: 1_700_000_000_000)
    task.start(props)
    return task


def _as_sink_records(
    records: list[SourceRecord], partition: int = 0, first_offset: int = 0
) -> list[SinkRecord]:
    return [
        SinkRecord(r.topic, partition, first_offset + i, key=r.key, value=r.value)
        for i, r in enumerate(records)
    ]


# ---- connectors


def test_connectors_answer_to_java_class_names_and_split_into_numbered_tasks() -> None:
    registry = PluginRegistry.discover(file_connectors=True)
    assert registry.find(JAVA_SOURCE).cls is VerifiableSourceConnector
    assert registry.find(JAVA_SINK).cls is VerifiableSinkConnector
    assert registry.find("VerifiableSource").type == "source"
    assert registry.find("VerifiableSinkConnector").type == "sink"  # Java's says source: a slip

    source = VerifiableSourceConnector()
    assert source.version() == __version__
    assert source.config_def() is SOURCE_CONFIG_DEF
    assert source.task_class() is VerifiableSourceTask
    props = {"name": "v", "connector.class": JAVA_SOURCE, "topic": "seq", "throughput": "10"}
    source.start(props)
    configs = source.task_configs(3)
    assert [c["id"] for c in configs] == ["0", "1", "2"]
    assert all({k: v for k, v in c.items() if k != "id"} == props for c in configs)

    sink = VerifiableSinkConnector()
    assert sink.config_def() is SINK_CONFIG_DEF
    assert sink.task_class() is VerifiableSinkTask
    sink.start({"name": "s", "topics": "seq"})
    assert [c["id"] for c in sink.task_configs(2)] == ["0", "1"]


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"throughput": "10"}, 'Missing required configuration "topic" which has no default value.'),
        ({"topic": "a,b"}, "Invalid value a,b for configuration topic: must name a single topic, not a list"),
        ({"topic": ""}, "Invalid value  for configuration topic: String must be non-empty"),
        (
            {"topic": "t", "throughput": "fast"},
            "Invalid value fast for configuration throughput: Not a number of type LONG",
        ),
        (
            {"topic": "t", "complete.record.data": "yes"},
            "Invalid value yes for configuration complete.record.data: "
            "Expected value to be either true or false",
        ),
    ],
)
def test_source_connector_start_rejects_bad_configs_naming_key_and_value(
    props: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigValidationError) as error:
        VerifiableSourceConnector().start(props)
    assert str(error.value) == message


# ---- validation through the runtime's validate path


def _errors(result: Any) -> dict[str, list[str]]:
    return {c.value.name: c.value.errors for c in result.configs if c.value is not None and c.value.errors}


def test_validate_accepts_a_java_config_of_each_connector() -> None:
    registry = PluginRegistry.discover(file_connectors=True)
    source = validate_connector_config(
        registry,
        {
            "connector.class": JAVA_SOURCE,
            "name": "vs",
            "tasks.max": "3",
            "topic": "seq",
            "throughput": "1000",
            "complete.record.data": "true",
        },
    )
    assert (source.error_count, _errors(source)) == (0, {})
    sink = validate_connector_config(
        registry,
        {"connector.class": JAVA_SINK, "name": "vk", "tasks.max": "2", "topics": "seq", "file": "/tmp/x"},
    )
    assert (sink.error_count, _errors(sink)) == (0, {})
    assert source.name == JAVA_SOURCE
    assert "throughput" in {c.definition.name for c in source.configs if c.definition is not None}


def test_validate_reports_each_bad_value_against_its_key() -> None:
    registry = PluginRegistry.discover(file_connectors=True)
    source = validate_connector_config(
        registry,
        {"connector.class": "VerifiableSource", "name": "vs", "topic": "a,b", "throughput": "1.5"},
    )
    assert _errors(source) == {
        "topic": ["Invalid value a,b for configuration topic: must name a single topic, not a list"],
        "throughput": ["Invalid value 1.5 for configuration throughput: Not a number of type LONG"],
    }
    assert source.error_count == 2
    missing = validate_connector_config(registry, {"connector.class": "VerifiableSource", "name": "vs"})
    assert _errors(missing) == {
        "topic": ['Missing required configuration "topic" which has no default value.']
    }
    sink = validate_connector_config(registry, {"connector.class": "VerifiableSink", "name": "vk"})
    assert _errors(sink) == {  # as for every sink, Java's message on both keys
        "topics": ["Must configure one of topics or topics.regex"],
        "topics.regex": ["Must configure one of topics or topics.regex"],
    }


# ---- source task: records, offsets, restarts


def test_source_records_carry_task_key_seqno_value_and_javas_partition_and_offset() -> None:
    task = _source_task(_source_props(id="2"))
    records = task.poll()
    assert records is not None and len(records) == VerifiableSourceTask.max_batch
    first = records[0]
    assert (first.topic, first.key, first.value, first.partition) == ("seq", 2, 0, None)
    assert first.source_partition == {"id": 2}
    assert first.source_offset == {"seqno": 0}
    assert [r.value for r in records] == list(range(len(records)))
    more = task.poll()
    assert more is not None and more[0].value == len(records)


def test_source_resumes_after_the_committed_seqno_of_its_own_partition() -> None:
    reader = InMemoryOffsetStorageReader([({"id": 1}, {"seqno": 41}), ({"id": 0}, {"seqno": 7})])
    task = _source_task(_source_props(id="1"), reader)
    records = task.poll()
    assert records is not None
    assert [r.value for r in records[:3]] == [42, 43, 44]
    assert task.starting_seqno == 42


@settings(max_examples=40, deadline=None)
@given(
    committed=st.none() | st.integers(min_value=0, max_value=10**12),
    polls_before=st.integers(min_value=1, max_value=3),
    batch=st.integers(min_value=1, max_value=7),
)
def test_sequence_is_continuous_across_a_restart_from_the_committed_offset(
    committed: int | None, polls_before: int, batch: int
) -> None:
    """A task restarted from the last committed offset carries on with no gap and no repeat."""
    reader = InMemoryOffsetStorageReader([] if committed is None else [({"id": 0}, {"seqno": committed})])
    seen: list[int] = []
    for _ in range(2):
        task = _source_task(_source_props(), reader)
        task.max_batch = batch
        for _ in range(polls_before):
            records = task.poll()
            assert records is not None
            seen += [r.value for r in records]
            # the runtime commits the last record's offset
            reader.put(records[-1].source_partition or {}, records[-1].source_offset)
        task.stop()
    start = 0 if committed is None else committed + 1
    assert seen == list(range(start, start + 2 * polls_before * batch))


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(None, 0), ({"seqno": 0}, 1), ({"seqno": 99}, 100), ({"seqno": 2**62}, 2**62 + 1)],
)
def test_next_seqno(offset: dict[str, Any] | None, expected: int) -> None:
    assert next_seqno(offset) == expected


@pytest.mark.parametrize("offset", [{}, {"seqno": "5"}, {"seqno": -1}, {"seqno": True}, {"current": 3}])
def test_a_corrupt_committed_offset_fails_the_task_saying_what_is_wrong(offset: dict[str, Any]) -> None:
    reader = InMemoryOffsetStorageReader([({"id": 0}, offset)])
    with pytest.raises(ConnectorError, match="'seqno' must be a non-negative integer"):
        _source_task(_source_props(), reader)


@pytest.mark.parametrize("task_id", [None, "", "one"])
def test_a_task_without_an_integer_id_fails_naming_the_key(task_id: str | None) -> None:
    props = _source_props()
    del props["id"]
    if task_id is not None:
        props["id"] = task_id
    with pytest.raises(ConnectorError, match=r"'id' is .* it must be an integer"):
        _source_task(props)
    with pytest.raises(ConnectorError, match=r"'id' is .* it must be an integer"):
        _sink_task({k: v for k, v in props.items() if k in ("name", "id")})


def test_complete_record_data_makes_the_value_javas_map() -> None:
    task = _source_task(_source_props(**{"complete.record.data": "true", "id": "3"}))
    records = task.poll()
    assert records is not None
    assert records[1].value == {
        "name": "verify",
        "task": 3,
        "topic": "seq",
        "time_ms": 1_700_000_000_000,
        "seqno": 1,
    }
    assert list(records[1].value) == ["name", "task", "topic", "time_ms", "seqno"]
    assert records[1].source_offset == {"seqno": 1}


def test_source_prints_java_lines_for_each_record_and_each_acknowledgement() -> None:
    out = io.StringIO()
    task = _source_task(_source_props(throughput="0"), output=out)
    records = task.poll()
    assert records is not None and len(records) == 1
    task.commit_record(records[0], metadata=object())
    task.commit_record(records[0], metadata=None)  # dropped by a transform: not acknowledged
    lines = [json.loads(line) for line in out.getvalue().splitlines()]
    record = {"name": "verify", "task": 0, "topic": "seq", "time_ms": 1_700_000_000_000, "seqno": 0}
    assert lines == [record, {**record, "committed": True}]


def test_source_file_holds_only_acknowledged_records_once_committed(tmp_path: Path) -> None:
    path = tmp_path / "acked.jsonl"
    task = VerifiableSourceTask(wall_clock_ms=lambda: 1_700_000_000_000)
    task.initialize(_SourceContext())
    task.start(_source_props(file=str(path)))
    records = task.poll()
    assert records is not None
    for record in records[:3]:
        task.commit_record(record, metadata=object())
    assert not path.exists() or path.read_text() == ""
    task.commit()
    assert seen_in_lines(path.read_text().splitlines(), marker="committed") == [(0, 0), (0, 1), (0, 2)]
    task.commit_record(records[3], metadata=object())
    task.stop()  # acknowledged records are written on stop too
    assert seen_in_lines(path.read_text().splitlines(), marker="committed")[-1] == (0, 3)


def test_acknowledgements_of_the_final_flush_after_stop_are_still_written(tmp_path: Path) -> None:
    """The runtime stops the task, then flushes: late acks and commit() must not fail (seen live)."""
    path = tmp_path / "acked.jsonl"
    task = VerifiableSourceTask(wall_clock_ms=lambda: 1_700_000_000_000)
    task.initialize(_SourceContext())
    task.start(_source_props(file=str(path)))
    records = task.poll()
    assert records is not None
    task.stop()
    task.commit_record(records[0], metadata=object())
    task.commit_record(records[1], metadata=object())
    task.commit()
    task.commit()  # nothing new: nothing written
    assert seen_in_lines(path.read_text().splitlines(), marker="committed") == [(0, 0), (0, 1)]


# ---- throttling, on a fake clock


@pytest.mark.parametrize(
    ("throughput", "elapsed", "produced", "limit", "due"),
    [
        (-1, 0.0, 10**9, 500, 500),  # negative: unthrottled
        (10, 0.0, 0, 500, 1),  # the first record goes at once
        (10, 0.0, 1, 500, 0),
        (10, 0.1, 1, 500, 1),
        (10, 1.0, 1, 500, 10),
        (10, 1.05, 11, 500, 0),
        (1000, 10.0, 0, 500, 500),  # capped by the batch limit
        (0, 0.0, 0, 500, 1),  # 0: one record, as Java's throttler lets one out
        (0, 1e6, 1, 500, 0),
        (5, -1.0, 0, 500, 1),  # a clock that went backwards counts as no time
    ],
)
def test_due_records_table(throughput: int, elapsed: float, produced: int, limit: int, due: int) -> None:
    assert due_records(throughput, elapsed, produced, limit) == due


@pytest.mark.parametrize(
    ("throughput", "elapsed", "produced", "wait"),
    [(-1, 0.0, 5, 0.0), (10, 0.0, 1, 0.1), (10, 0.25, 3, 0.05), (10, 1.0, 3, 0.0), (0, 0.0, 0, 0.0)],
)
def test_seconds_until_due_table(throughput: int, elapsed: float, produced: int, wait: float) -> None:
    assert seconds_until_due(throughput, elapsed, produced) == pytest.approx(wait)
    assert seconds_until_due(0, 5.0, 1) == float("inf")


@pytest.mark.parametrize("throughput", [1, 7, 50, 1000])
def test_throttled_source_averages_its_throughput_on_the_fake_clock(throughput: int) -> None:
    fake = _FakeTime()
    task = _source_task(_source_props(throughput=str(throughput)), fake=fake)
    start = fake.now
    produced = 0
    while fake.now - start < 10.0:
        records = task.poll()
        produced += len(records or [])
        if not records:
            fake.now += 0.001  # a poll that found nothing due; time moves on regardless
    # record n is due at n / throughput seconds: in 10 s (and not a record more) that is 10*t + 1
    assert produced == pytest.approx(10 * throughput + 1, abs=1)
    assert all(0 <= w <= VerifiableSourceTask.max_wait_s for w in fake.waits)


def test_throughput_zero_emits_one_record_then_waits_at_most_max_wait() -> None:
    fake = _FakeTime()
    task = _source_task(_source_props(throughput="0"), fake=fake)
    assert [r.value for r in task.poll() or []] == [0]
    assert task.poll() is None
    assert fake.waits == [VerifiableSourceTask.max_wait_s]


def test_stop_makes_a_waiting_poll_return_nothing() -> None:
    task = VerifiableSourceTask(io.StringIO())  # the real wait: the task's stop event
    task.initialize(_SourceContext())
    task.start(_source_props(throughput="0"))
    assert task.poll() is not None
    task.stop()
    assert task.poll() is None
    unthrottled = _source_task(_source_props())
    unthrottled.stop()
    assert unthrottled.poll() is None


# ---- sink task


def _sink_props(path: Path | None = None, task_id: str = "0") -> dict[str, str]:
    props = {"name": "vk", "topics": "seq", "id": task_id}
    if path is not None:
        props["file"] = str(path)
    return props


def test_sink_file_gets_one_flushed_line_per_record_only_on_flush(tmp_path: Path) -> None:
    path = tmp_path / "seen.jsonl"
    task = _sink_task(_sink_props(path, "1"))
    source = _source_task(_source_props(id="4"))
    records = (source.poll() or [])[:3]
    task.put(_as_sink_records(records, partition=2, first_offset=10))
    assert path.read_text() == ""
    task.flush({TopicPartition("seq", 2): 13})
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert lines[0] == {
        "name": "vk",
        "task": 4,
        "sinkTask": 1,
        "topic": "seq",
        "partition": 2,
        "offset": 10,
        "time_ms": 1_700_000_000_000,
        "seqno": 0,
        "flushed": True,
    }
    assert [(x["offset"], x["seqno"]) for x in lines] == [(10, 0), (11, 1), (12, 2)]
    task.flush({})  # nothing new: nothing written
    assert len(path.read_text().splitlines()) == 3


def test_records_put_but_not_flushed_are_not_written_when_the_task_stops(tmp_path: Path) -> None:
    path = tmp_path / "seen.jsonl"
    task = _sink_task(_sink_props(path))
    task.put([SinkRecord("seq", 0, 0, key=0, value=0)])
    task.stop()
    assert path.read_text() == ""
    task.put([SinkRecord("seq", 0, 1, key=0, value=1)])
    with pytest.raises(ConnectorError, match="was closed: the task has been stopped"):
        task.flush({})
    assert path.read_text() == ""


def test_tasks_sharing_a_file_keep_their_lines_whole(tmp_path: Path) -> None:
    path = tmp_path / "shared.jsonl"
    tasks = [_sink_task(_sink_props(path, str(i))) for i in range(3)]
    for round_ in range(20):
        for i, task in enumerate(tasks):
            task.put([SinkRecord("seq", i, round_ * 50 + j, key=i, value=round_ * 50 + j) for j in range(50)])
            task.flush({})
    lines = path.read_text().splitlines()
    assert len(lines) == 3 * 20 * 50
    result = verify(seen_in_lines(lines), {i: range(1000) for i in range(3)})
    assert (result.ok, result.duplicate_count, result.lost_count) == (True, 0, 0)


def test_sink_without_file_prints_javas_put_and_flushed_lines() -> None:
    out = io.StringIO()
    task = _sink_task(_sink_props(), out)
    task.put([SinkRecord("seq", 0, 5, key=1, value=9)])
    task.flush({})
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first == {
        "name": "vk",
        "task": 1,
        "sinkTask": 0,
        "topic": "seq",
        "partition": 0,
        "offset": 5,
        "time_ms": 1_700_000_000_000,
        "seqno": 9,
    }
    assert second == {**first, "flushed": True}
    assert seen_in_lines(out.getvalue().splitlines()) == [(1, 9)]


@pytest.mark.parametrize(
    ("key", "value", "task", "seqno"),
    [
        (3, 17, 3, 17),
        ("3", "17", 3, 17),  # StringConverter
        (b"3", b"17", 3, 17),  # ByteArrayConverter
        (3, {"name": "v", "task": 3, "topic": "seq", "time_ms": 1, "seqno": 17}, 3, 17),
        (None, {"name": "v", "task": 3, "topic": "seq", "time_ms": 1, "seqno": 17}, 3, 17),
        (None, "not a number", None, "not a number"),
    ],
)
def test_sink_reads_task_and_seqno_whatever_the_converter(
    key: Any, value: Any, task: Any, seqno: Any
) -> None:
    out = io.StringIO()
    sink = _sink_task(_sink_props(), out)
    sink.put([SinkRecord("seq", 0, 0, key=key, value=value)])
    line = json.loads(out.getvalue().splitlines()[0])
    assert (line["task"], line["seqno"]) == (task, seqno)


def test_a_file_that_cannot_be_opened_fails_start_naming_it(tmp_path: Path) -> None:
    bad = tmp_path / "no-such-dir" / "seen.jsonl"
    with pytest.raises(
        ConnectorError, match=r"cannot open '.*no-such-dir/seen.jsonl' \(the 'file' setting\)"
    ):
        _sink_task(_sink_props(bad))


# ---- source to sink, with a crash in between


def test_at_least_once_through_a_sink_crash_shows_duplicates_but_no_loss(tmp_path: Path) -> None:
    path = tmp_path / "seen.jsonl"
    source = _source_task(_source_props())
    source.max_batch = 10
    log: list[SinkRecord] = []  # the topic
    for _ in range(5):
        log += _as_sink_records(source.poll() or [], first_offset=len(log))
    committed = 0  # the consumer offset
    sink = _sink_task(_sink_props(path))
    sink.put(log[0:20])
    sink.flush({})
    committed = 20
    sink.put(log[20:35])
    sink.flush({})  # flushed, but the worker dies before committing offset 35
    sink.put(log[35:40])  # put, never flushed
    sink.stop()
    sink = _sink_task(_sink_props(path))
    sink.put(log[committed:])  # redelivered from the last committed offset
    sink.flush({})
    result = verify(seen_in_lines(path.read_text().splitlines()), expected_from_last({0: 49}))
    assert result.ok
    assert result.lost_count == 0
    assert result.duplicate_count == 15
    assert result.duplicates == {0: {s: 2 for s in range(20, 35)}}
    assert result.summary() == "50 expected, 65 seen, 0 lost, 15 duplicate(s), 0 unexpected"


# ---- the checker


@pytest.mark.parametrize(
    ("seen", "expected", "lost", "duplicates", "unexpected"),
    [
        ([], {}, {}, {}, {}),
        ([(0, 0), (0, 1), (0, 2)], {0: range(3)}, {}, {}, {}),
        ([(0, 0), (0, 2)], {0: range(3)}, {0: (1,)}, {}, {}),
        ([], {0: range(2), 1: range(1)}, {0: (0, 1), 1: (0,)}, {}, {}),
        ([(0, 1), (0, 0), (0, 1), (0, 1)], {0: range(2)}, {}, {0: {1: 3}}, {}),
        ([(0, 0), (0, 5), (7, 0)], {0: range(1)}, {}, {}, {0: (5,), 7: (0,)}),
        ([(1, 0), (0, 0), (1, 0)], {0: [0], 1: {0, 1}}, {1: (1,)}, {1: {0: 2}}, {}),
    ],
)
def test_verify_table(
    seen: list[tuple[int, int]],
    expected: dict[int, Any],
    lost: dict[int, tuple[int, ...]],
    duplicates: dict[int, dict[int, int]],
    unexpected: dict[int, tuple[int, ...]],
) -> None:
    result = verify(seen, expected)
    assert (result.lost, result.duplicates, result.unexpected) == (lost, duplicates, unexpected)
    assert result.ok == (not lost)
    assert result.seen == len(seen)
    assert result.lost_count == sum(len(v) for v in lost.values())
    assert result.duplicate_count == sum(n - 1 for d in duplicates.values() for n in d.values())


@settings(max_examples=60, deadline=None)
@given(
    st.dictionaries(
        st.integers(0, 4),
        st.tuples(st.integers(0, 30), st.sets(st.integers(0, 30)), st.sets(st.integers(0, 30))),
        max_size=4,
    )
)
def test_verify_finds_exactly_what_was_dropped_and_repeated(
    plan: dict[int, tuple[int, set[int], set[int]]],
) -> None:
    seen: list[tuple[int, int]] = []
    expected: dict[int, range] = {}
    for task, (last, dropped, repeated) in plan.items():
        expected[task] = range(last + 1)
        for seqno in range(last + 1):
            if seqno not in dropped:
                seen.append((task, seqno))
                if seqno in repeated:
                    seen.append((task, seqno))
    result = verify(seen, expected)
    for task, (last, dropped, repeated) in plan.items():
        assert result.lost.get(task, ()) == tuple(sorted(d for d in dropped if d <= last))
        assert set(result.duplicates.get(task, {})) == {r for r in repeated if r <= last and r not in dropped}
    assert result.unexpected == {}


def test_seen_in_lines_keeps_only_marked_json_lines_with_integer_task_and_seqno() -> None:
    lines = [
        "[2024-01-01 00:00:00] INFO a log line",
        '{"task":0,"seqno":1}',  # Java's put echo: not flushed
        '{"task":0,"seqno":2,"flushed":true}',
        '{"task":0,"seqno":3,"flushed":"true"}',
        '{"task":"x","seqno":4,"flushed":true}',
        '{"task":1,"seqno":5,"committed":true}',
        "[1, 2]",
        "",
        '{"task":1,"seqno":6,"flushed":true,"sinkTask":2}',
    ]
    assert seen_in_lines(lines) == [(0, 2), (1, 6)]
    assert seen_in_lines(lines, marker="committed") == [(1, 5)]


def test_expected_from_offsets_reads_committed_source_offsets() -> None:
    offsets = [
        ({"id": 0}, {"seqno": 41}),
        ({"id": 1}, {"seqno": 0}),
        ({"id": 2}, None),  # reset: nothing expected of it
        ({"filename": "/x"}, {"position": 10}),  # not a verifiable task's
        ({"id": 3}, {"seqno": "7"}),
        (None, {"seqno": 1}),
    ]
    assert expected_from_offsets(offsets) == {0: range(42), 1: range(1)}
    assert expected_from_offsets(offsets) == expected_from_last({0: 41, 1: 0})
