"""The Parquet sink's pure decisions (file names, rolls, what is staged and published, renames) as tables,
and the task itself on a local SparkSession with hand-made batches: rolls, Hive directories, and a crash
in the middle of publishing that a new task instance finishes without duplicating a record."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.connectors.parquet import (
    FILE_COLUMN,
    FileName,
    ParquetSinkConfig,
    ParquetSinkConnector,
    ParquetSinkTask,
    PartitionState,
    StagedBatch,
    after_publish,
    after_staging,
    direct_end,
    last_published,
    parse_file_name,
    publish_end,
    publish_moves,
    roll_windows,
    stage_range,
)
from kconnect.runtime.plugins.api import ConnectorError, FrameBatch, TopicPartition
from kconnect.runtime.plugins.config_def import ConfigValidationError

TP0 = TopicPartition("orders", 0)
TP1 = TopicPartition("orders", 1)
TOPICS = st.from_regex(r"[A-Za-z0-9._-]{1,20}", fullmatch=True)


# ------------------------------------------------------------------------------------------ names


@given(TOPICS, st.integers(0, 10_000), st.integers(0, 2**62), st.integers(0, 2**20))
def test_file_names_round_trip(topic: str, partition: int, start: int, length: int) -> None:
    name = FileName(topic, partition, start, start + length)
    assert str(name).endswith(".parquet")
    assert parse_file_name(str(name)) == name
    assert parse_file_name(name.stem) == name


@pytest.mark.parametrize(
    "name",
    [
        "orders+0+5.parquet",  # three fields
        "+0+1+2.parquet",  # no topic
        "orders+x+1+2.parquet",
        "orders+0+9+2.parquet",  # end before start
        "orders+0+-1+2.parquet",
        "part-00000-abc.c000.snappy.parquet",
        "_SUCCESS",
    ],
)
def test_other_names_are_not_published_files(name: str) -> None:
    assert parse_file_name(name) is None


def test_last_published_is_the_largest_end_of_that_partition_only() -> None:
    names = ["orders+0+0+9.parquet", "orders+0+10+19.parquet", "orders+1+0+99.parquet", "x.parquet"]
    assert last_published(names, TP0) == 19
    assert last_published(names, TP1) == 99
    assert last_published(names, TopicPartition("orders", 2)) is None
    assert last_published(["ord+0+0+500.parquet"], TP0) is None


@pytest.mark.parametrize(
    ("start", "end", "size", "expected"),
    [
        (0, 9, 5, [(0, 4), (5, 9)]),
        (0, 11, 5, [(0, 4), (5, 9), (10, 11)]),
        (7, 7, 5, [(7, 7)]),
        (100, 102, 1, [(100, 100), (101, 101), (102, 102)]),
    ],
)
def test_roll_windows(start: int, end: int, size: int, expected: list[tuple[int, int]]) -> None:
    assert roll_windows(start, end, size) == expected


# ------------------------------------------------------------------------------------------ decisions


def batch(first: int, last: int, at: float = 0.0, leaf: str | None = "leaf") -> StagedBatch:
    return StagedBatch(f"{leaf}-{first}" if leaf else None, first, last, at)


@pytest.mark.parametrize(
    ("state", "consumed", "expected"),
    [
        (PartitionState(), (0, 9), (0, 9)),  # nothing known: all of it
        (PartitionState(10), (5, 14), (10, 14)),  # 5..9 already in files: re-read after a crash
        (PartitionState(10), (0, 9), None),  # all of it already in files
        (PartitionState(10), (50, 60), (50, 60)),  # the log moved on (retention): begin where it is
        (PartitionState(0, (batch(0, 9),)), (8, 12), (10, 12)),  # staged already up to 9
    ],
)
def test_stage_range(
    state: PartitionState, consumed: tuple[int, int], expected: tuple[int, int] | None
) -> None:
    assert stage_range(state, *consumed) == expected


def test_staging_keeps_the_publish_start_unless_the_log_moved_on() -> None:
    assert after_staging(PartitionState(), batch(3, 9)).start == 3
    assert after_staging(PartitionState(10), batch(10, 12)).start == 10
    assert after_staging(PartitionState(10), batch(50, 60)).start == 50
    staged = after_staging(PartitionState(10, (batch(10, 12),)), batch(13, 20))
    assert staged.start == 10 and staged.consumed_end == 20


@pytest.mark.parametrize(
    ("staged", "now", "force", "expected", "why"),
    [
        ((batch(0, 3, 0.0),), 0.5, False, None, "less than one window, not old"),
        ((batch(0, 4, 0.0),), 0.5, False, 4, "one complete window"),
        ((batch(0, 3, 0.0), batch(4, 11, 0.4)), 0.5, False, 9, "two complete windows, the tail waits"),
        ((batch(0, 3, 0.0),), 1.0, False, 3, "the oldest staged record waited rotate.interval.ms"),
        ((batch(0, 3, 0.0), batch(4, 11, 0.4)), 1.2, False, 9, "the tail's own batch is young"),
        ((batch(0, 3, 0.0), batch(4, 11, 0.4)), 1.5, False, 11, "the tail's batch is old too"),
        ((batch(0, 2, 0.0),), 0.0, True, 2, "a schema change publishes everything"),
    ],
)
def test_publish_end(
    staged: tuple[StagedBatch, ...], now: float, force: bool, expected: int | None, why: str
) -> None:
    state = PartitionState(0, staged)
    assert publish_end(state, 5, 1000, now, force) == expected, why


def test_rotation_off_and_nothing_staged() -> None:
    assert publish_end(PartitionState(0, (batch(0, 3, 0.0),)), 5, -1, 1e9) is None
    assert publish_end(PartitionState(7), 5, 1000, 1e9) is None
    assert publish_end(PartitionState(), 5, 1000, 1e9) is None


@pytest.mark.parametrize(
    ("state", "lo", "hi", "expected"),
    [
        (PartitionState(), 0, 3, None),  # no complete window
        (PartitionState(), 0, 4, 4),
        (PartitionState(10), 10, 23, 19),  # two windows; 20..23 will be staged
        (PartitionState(0, (batch(0, 2),)), 3, 20, None),  # something staged first: stage after it
    ],
)
def test_direct_end(state: PartitionState, lo: int, hi: int, expected: int | None) -> None:
    assert direct_end(state, lo, hi, 5) == expected


def test_after_publish_drops_only_fully_published_batches() -> None:
    state = PartitionState(0, (batch(0, 3), batch(4, 11), batch(12, 12, leaf=None)))
    after, done = after_publish(state, 9)
    assert after == PartitionState(10, (batch(4, 11), batch(12, 12, leaf=None)))
    assert done == ["leaf-0"]
    after, done = after_publish(after, 12)
    assert after == PartitionState(13) and done == ["leaf-4"]


def test_publish_moves_name_files_by_roll_under_the_topic() -> None:
    files = [
        "_SUCCESS",
        f"{FILE_COLUMN}=orders+0+0+4/grp=a/part-00000-x.c000.snappy.parquet",
        f"{FILE_COLUMN}=orders+0+0+4/grp=a/.part-00000-x.c000.snappy.parquet.crc",
        f"{FILE_COLUMN}=orders+1+5+9/part-00001-y.c000.parquet",
        f"{FILE_COLUMN}=orders%2B2+0+1/part-00001-y.c000.parquet",  # an escaped '+' still reads back
        "stray/part-0.parquet",
    ]
    assert publish_moves(files, "/out") == sorted(
        [
            (files[1], "/out/orders/grp=a/orders+0+0+4.parquet"),
            (files[3], "/out/orders/orders+1+5+9.parquet"),
            (files[4], "/out/orders/orders+2+0+1.parquet"),
        ]
    )


# ------------------------------------------------------------------------------------------ config


@pytest.mark.parametrize(
    ("props", "key", "allowed"),
    [
        ({"flush.size": "0"}, "flush.size", "at least 1"),
        ({"rotate.interval.ms": "0"}, "rotate.interval.ms", "-1 (off)"),
        ({"parquet.codec": "lzma"}, "parquet.codec", "snappy"),
        ({"partition.field.name": "a,b.c"}, "partition.field.name", "top-level"),
        ({"path": ""}, "path", ""),
    ],
)
def test_bad_config_names_key_value_and_what_is_allowed(
    props: dict[str, str], key: str, allowed: str
) -> None:
    full = {"path": "/tmp/x", "flush.size": "10", **props}
    with pytest.raises(ConfigValidationError) as err:
        ParquetSinkConfig.parse(full)
    assert key in str(err.value) and allowed in str(err.value)
    assert props[key] in str(err.value) or props[key] == ""


def test_config_defaults_and_task_configs() -> None:
    config = ParquetSinkConfig.parse({"path": "/tmp/x", "flush.size": "10", "partition.field.name": "a, b"})
    assert config == ParquetSinkConfig("/tmp/x", 10, -1, ("a", "b"), "snappy")
    with pytest.raises(ConfigValidationError, match=r'"flush\.size"'):
        ParquetSinkConfig.parse({"path": "/tmp/x"})
    connector = ParquetSinkConnector()
    connector.start({"name": "pq", "path": "/tmp/x", "flush.size": "10", "topics": "t"})
    configs = connector.task_configs(2)
    assert [c["parquet.task.id"] for c in configs] == ["0", "1"]
    assert all(c["path"] == "/tmp/x" for c in configs)


# ------------------------------------------------------------------------------------------ on Spark


@pytest.fixture(scope="module")
def spark() -> Any:
    from tests.support.spark import local_spark

    return local_spark()


def frame_batch(spark: Any, rows: Sequence[tuple[int, int]], groups: str = "abc") -> FrameBatch:
    """A batch of topic ``orders`` as the runner hands it over: (partition, offset) rows whose value is
    the struct {id: offset * 10 + partition, grp: one of ``groups``}."""
    from pyspark.sql import types as T

    value = T.StructType([T.StructField("id", T.LongType()), T.StructField("grp", T.StringType())])
    schema = T.StructType(
        [
            T.StructField("topic", T.StringType()),
            T.StructField("partition", T.IntegerType()),
            T.StructField("offset", T.LongType()),
            T.StructField("timestamp", T.LongType()),
            T.StructField("key", T.StringType()),
            T.StructField("value", value),
        ]
    )
    data = [("orders", p, o, 0, None, (o * 10 + p, groups[o % len(groups)])) for p, o in rows]
    offsets: dict[TopicPartition, tuple[int, int]] = {}
    for p, o in rows:
        tp = TopicPartition("orders", p)
        lo, hi = offsets.get(tp, (o, o))
        offsets[tp] = (min(lo, o), max(hi, o))
    return FrameBatch(spark.createDataFrame(data, schema), None, None, offsets, 0)


def started(path: Path, **extra: str) -> ParquetSinkTask:
    task = ParquetSinkTask()
    task.start({"name": "pq", "path": str(path), "flush.size": "5", "partition.field.name": "grp", **extra})
    task.open([TP0, TP1])
    return task


def published(path: Path) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(d, f), path)
        for d, _, files in os.walk(path)
        for f in files
        if "_temporary-kconnect" not in d
    )


def ids(path: Path) -> list[int]:
    table = pads.dataset(str(path / "orders"), format="parquet", partitioning="hive").to_table()
    return sorted(table.column("id").to_pylist())


def test_rolls_hive_directories_and_commits_only_published_offsets(spark: Any, tmp_path: Path) -> None:
    task = started(tmp_path)
    task.put_frame(frame_batch(spark, [(0, o) for o in range(12)] + [(1, o) for o in range(3)]))
    answer = task.pre_commit({TP0: 12, TP1: 3})
    # Two complete windows of partition 0 are published; its tail and partition 1 wait in staging.
    assert answer == {TP0: 10, TP1: 0}
    assert published(tmp_path) == sorted(
        f"orders/grp={g}/orders+0+{s}+{s + 4}.parquet" for g in "abc" for s in (0, 5)
    )
    assert ids(tmp_path) == [o * 10 for o in range(10)]
    table = pads.dataset(str(tmp_path / "orders/grp=a"), format="parquet").to_table()
    assert table.column_names == ["id"]  # the field is the directory, as in Hive tables
    with pytest.raises(ConnectorError, match=r"partition.field.name=nope.*fields are id, grp"):
        started(tmp_path / "other", **{"partition.field.name": "nope"}).put_frame(
            frame_batch(spark, [(0, 0)])
        )


def test_a_crash_mid_publish_is_finished_by_the_next_instance(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = started(tmp_path)
    real_move = ParquetSinkTask._move

    def crash_after_one(base: Path, moves: Sequence[tuple[str, str]]) -> int:
        real_move(base, moves[:1])
        raise OSError("killed mid-publish")

    monkeypatch.setattr(ParquetSinkTask, "_move", staticmethod(crash_after_one))
    with pytest.raises(OSError):
        # Offsets 0..4 of partition 0 are a complete window: published straight from the batch.
        first.put_frame(frame_batch(spark, [(0, o) for o in range(7)] + [(1, o) for o in range(4)]))
    monkeypatch.undo()
    assert len(published(tmp_path)) == 1  # one of the roll's three files is out, two are not
    # No close(): the instance is gone as after SIGKILL. Nothing was committed, so the next instance
    # reads from offset 0 again, and more records arrive.
    second = started(tmp_path)
    second.put_frame(frame_batch(spark, [(0, o) for o in range(10)] + [(1, o) for o in range(5)]))
    assert second.pre_commit({TP0: 10, TP1: 5}) == {TP0: 10, TP1: 5}
    assert ids(tmp_path) == sorted([o * 10 for o in range(10)] + [o * 10 + 1 for o in range(5)])
    names = {parse_file_name(os.path.basename(f)) for f in published(tmp_path)}
    assert names == {FileName("orders", 0, 0, 4), FileName("orders", 0, 5, 9), FileName("orders", 1, 0, 4)}
    assert len(published(tmp_path)) == 9  # three files (grp=a, b, c) per roll, none twice
    assert os.listdir(tmp_path / "_temporary-kconnect/pq-0/publish") == []
    stage = tmp_path / "_temporary-kconnect/pq-0/stage"
    assert not stage.exists() or os.listdir(stage) == []  # complete windows were never staged
