"""A table sink's commit round that runs beside the next batch (``rounds.RoundThread``): nothing it covers
is answered to ``pre_commit`` before it has ended, and a round that failed fails the task for good.

No Spark: the round is a future the test ends by hand, as the round thread would.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from kconnect.connectors.lakehouse.iceberg import IcebergSinkTask
from kconnect.connectors.lakehouse.rounds import InFlight
from kconnect.connectors.lakehouse.table_sink import Stage
from kconnect.runtime.plugins.api import ConnectorError, TopicPartition

TP = TopicPartition("orders", 0)


@pytest.fixture
def task(tmp_path: Path) -> Iterator[IcebergSinkTask]:
    sink = IcebergSinkTask()
    sink.start(
        {
            "name": "ice",
            "connector.class": "IcebergSinkConnector",
            "topics": "orders",
            "iceberg.tables": "db.orders",
            "iceberg.catalog.warehouse": str(tmp_path / "warehouse"),
            "iceberg.control.commit.interval-ms": "10000",
            "task.id": "0",
        }
    )
    yield sink
    sink.stop()


def in_flight(task: IcebergSinkTask, ended: Future[float], stages: list[Stage]) -> list[float]:
    """Put a round covering ``TP`` up to offset 10 in flight; the list gets its end time once settled."""
    finished: list[float] = []

    def finish(at: float) -> None:
        task._committed[TP] = 10
        finished.append(at)

    def undo() -> None:
        task._staged = stages + task._staged

    task._rounds.flight = InFlight(ended, finish, undo)
    return finished


def test_a_rounds_offsets_are_answered_only_once_it_has_ended(task: IcebergSinkTask) -> None:
    gate = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        ended = pool.submit(lambda: 5.0 if gate.wait(30) else 0.0)
        finished = in_flight(task, ended, [])
        assert task.pre_commit({TP: 10}) == {}  # still appending: Kafka's offsets stay behind
        assert task._rounds.flight is not None and finished == []
        gate.set()
        ended.result(30)
    assert task.pre_commit({TP: 10}) == {TP: 10}
    assert finished == [5.0] and task._rounds.flight is None


def test_a_round_that_failed_fails_the_task_and_keeps_failing(task: IcebergSinkTask) -> None:
    ended: Future[float] = Future()
    ended.set_exception(ConnectorError("table db.orders: the append failed: disk full"))
    staged = Stage("/scratch/stage/1", {TP: (0, 9)}, 1.0, 100, 1.0)
    finished = in_flight(task, ended, [staged])
    with pytest.raises(ConnectorError, match="disk full"):
        task.pre_commit({TP: 10})
    assert finished == [] and task._committed == {}
    assert task._staged == [staged]  # back in the list, as a commit that failed leaves it
    with pytest.raises(ConnectorError, match="disk full"):  # and every later step, not only the first
        task.pre_commit({TP: 10})
    with pytest.raises(ConnectorError, match="disk full"):
        task.close([TP])


def test_closing_waits_for_the_round_in_flight(task: IcebergSinkTask) -> None:
    gate = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        ended = pool.submit(lambda: 7.0 if gate.wait(30) else 0.0)
        finished = in_flight(task, ended, [])
        threading.Timer(0.2, gate.set).start()
        task.close([TP])  # waits for it (and then forgets the partition)
    assert finished == [7.0]
