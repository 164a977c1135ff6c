"""A release stops its tasks together (Java's ``Worker.stopAndAwaitTasks``).

Why: stopped one after another, each waiting ``task.shutdown.graceful.timeout.ms``, a worker releasing six
tasks while a broker died held its herder thread past ``rebalance.timeout.ms``; its heartbeat side left the
group and the leader held the work as lost for ``scheduled.rebalance.max.delay.ms``
(``bench/brokers_random.py``, issue 29). The executor here meets all stops at a barrier: if they were made
one at a time the first would wait alone and break it, whatever the machine's speed.
"""

from __future__ import annotations

import threading
from typing import Any

from kconnect.config.worker import WorkerConfig
from kconnect.runtime.group import herder as hd
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.tasks import Tasks
from kconnect.runtime.shell.view import WorkerMetrics
from kconnect.runtime.storage import status_log
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, TargetState

BASE = {
    "bootstrap.servers": "127.0.0.1:9092",
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    "task.shutdown.graceful.timeout.ms": "3000",
}
TASKS = [TaskId("c", n) for n in range(4)]


class MeetingExecutor:
    """Each stop waits for all the others to be under way too."""

    def __init__(self, parties: int) -> None:
        self.barrier = threading.Barrier(parties, timeout=2.0)
        self.met: list[TaskId] = []
        self.alone: list[TaskId] = []
        self._lock = threading.Lock()

    def stop_task(self, task: TaskId, timeout_s: float) -> None:
        try:
            self.barrier.wait()
        except threading.BrokenBarrierError:
            with self._lock:
                self.alone.append(task)
            return
        with self._lock:
            self.met.append(task)


class FakeStores:
    def __init__(self) -> None:
        self.written: list[Any] = []
        self.read: list[status_log.StatusRecord] = []  # what the worker has read of the status topic

    def put_status(self, status: Any) -> None:
        self.written.append(status)

    def status_state(self) -> status_log.StatusState:
        return status_log.apply_all(status_log.StatusState(), self.read)

    def snapshot(self) -> ClusterConfigSnapshot:
        return ClusterConfigSnapshot(connector_configs={"c": {}}, target_states={"c": TargetState.STARTED})


def _tasks(executor: MeetingExecutor) -> tuple[Tasks, FakeStores]:
    stores = FakeStores()
    tasks = Tasks(WorkerConfig.from_properties(BASE), "w1", executor, stores, WorkerMetrics())  # type: ignore[arg-type]
    return tasks, stores


def test_a_release_stops_its_tasks_together_and_reports_each_unassigned() -> None:
    executor = MeetingExecutor(len(TASKS))
    tasks, stores = _tasks(executor)
    tasks.stop_all([hd.StopTask(t) for t in TASKS], generation=9)
    assert executor.alone == [] and sorted(executor.met) == TASKS
    assert [(s.task, s.state, s.generation) for s in stores.written] == [
        (t, status_log.State.UNASSIGNED, 9) for t in TASKS
    ]


def test_stops_one_at_a_time_would_not_meet() -> None:
    """The barrier can fail: the single-task path, used in a loop, leaves each stop alone."""
    executor = MeetingExecutor(2)
    executor.barrier = threading.Barrier(2, timeout=0.2)
    tasks, _ = _tasks(executor)
    for t in TASKS[:2]:
        tasks.stop(hd.StopTask(t), generation=9)
    assert executor.alone == TASKS[:2] and executor.met == []


def test_a_stopped_task_another_worker_runs_at_a_newer_generation_is_not_reported_unassigned() -> None:
    """Java's ``putSafe`` on a task's shutdown: the UNASSIGNED is not awaited, and the task's new owner may
    have reported it RUNNING already; written over it, a Java worker (which reads statuses with no
    generation rule) would show the task UNASSIGNED for good."""
    executor = MeetingExecutor(2)
    tasks, stores = _tasks(executor)
    stores.read = [
        status_log.TaskStatus(TASKS[0], status_log.State.RUNNING, None, "w2", 10),
        status_log.TaskStatus(TASKS[1], status_log.State.RUNNING, None, "w2", 9),
    ]
    tasks.stop_all([hd.StopTask(t) for t in TASKS[:2]], generation=9)
    assert [(s.task, s.state) for s in stores.written] == [(TASKS[1], status_log.State.UNASSIGNED)]
