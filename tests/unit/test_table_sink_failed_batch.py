"""A table sink's batch that ends half-way (a failed or cancelled Spark job, or its query stopped for a
rewind or new partitions) leaves its rows to come again: the next reading of the same offsets writes them.

Found live (CI, 2026-11-30): a CDC sink's first batch was cancelled when its query restarted on Spark's
Kafka source; the floor it had raised made the new query's batch skip the five change events for good.
The table write is replaced here by a recorder (no Iceberg); the batch is a real Spark frame.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kconnect.connectors.lakehouse.iceberg import IcebergSinkTask
from kconnect.runtime.plugins.api import FrameBatch, TopicPartition
from tests.support.spark import local_spark

TP = TopicPartition("cdc", 0)


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    return local_spark()


@pytest.fixture
def task(tmp_path: Path, spark: Any) -> Iterator[IcebergSinkTask]:
    sink = IcebergSinkTask()
    sink.start(
        {
            "name": "ice-cdc",
            "connector.class": "IcebergSinkConnector",
            "topics": "cdc",
            "iceberg.tables": "db.cdc",
            "iceberg.catalog.warehouse": str(tmp_path / "warehouse"),
            "task.id": "0",
        }
    )
    sink._spark = spark  # the session is set up (no Iceberg catalog needed: the write is recorded)
    yield sink
    sink.stop()


def batch(spark: Any, offsets: range) -> FrameBatch:
    rows = [("cdc", 0, o, (o, f"n{o}")) for o in offsets]
    frame = spark.createDataFrame(
        rows, "topic string, partition int, offset long, value struct<id:int,name:string>"
    )
    return FrameBatch(
        frame=frame,
        key_schema=None,
        value_schema=None,
        offsets={TP: (offsets[0], offsets[-1])},
        batch_id=0,
        oldest_ms=None,
        read_ms=None,
    )


def test_rows_of_a_batch_that_failed_half_way_are_written_when_read_again(
    task: IcebergSinkTask, spark: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    def cancelled(*_args: Any) -> None:
        raise RuntimeError("Job 42 cancelled: the query was stopped")

    monkeypatch.setattr(task, "_stage_or_commit", cancelled)
    with pytest.raises(RuntimeError, match="cancelled"):
        task.put_frame(batch(spark, range(5)))
    assert task._floor == {} and task._committed == {}  # nothing of it counts as written

    written: list[dict[TopicPartition, tuple[int, int]]] = []
    monkeypatch.setattr(task, "_stage_or_commit", lambda _f, _b, ranges, *_: written.append(dict(ranges)))
    assert task.put_frame(batch(spark, range(5))) == 5
    assert written == [{TP: (0, 4)}]  # every row again, none skipped
    assert task._floor == {TP: 5}
    # Read a third time (a rewind), the same rows are below the floor: not written twice.
    assert task.put_frame(batch(spark, range(5))) == 5
    assert written == [{TP: (0, 4)}]
