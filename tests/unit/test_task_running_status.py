"""A task is RUNNING only once its start returned and its loop runs (issue 15): the runner's state, the
Spark executor's answers and its listener, and the worker's status writes, which the herder's thread and
the tasks' threads make in either order.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping

from kconnect.config.worker import WorkerConfig
from kconnect.runtime.dataplane.executor import TaskListener, TaskState
from kconnect.runtime.dataplane.spark_executor import SparkExecutor
from kconnect.runtime.dataplane.task_runner import TaskRunner
from kconnect.runtime.group import herder as hd
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import SourceRecord, SourceTask
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.tasks import Tasks
from kconnect.runtime.shell.view import WorkerMetrics
from kconnect.runtime.storage import status_log
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, TargetState
from kconnect.runtime.storage.offset_log import OffsetState

BASE = {
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
}
TASK = TaskId("c", 0)
WAIT_S = 30.0  # an upper bound for a thread to get somewhere; every wait ends on an event


class GatedSource(SourceTask):
    """A source task whose ``start`` returns only once the test opens its gate (a slow start)."""

    gate = threading.Event()

    def version(self) -> str:
        return "1"

    def start(self, props: dict[str, str]) -> None:
        assert GatedSource.gate.wait(WAIT_S), "the test never opened the gate"

    def poll(self) -> list[SourceRecord] | None:
        return None

    def stop(self) -> None:
        pass


class LoopRunner(TaskRunner):
    """A runner whose loop only reports that it runs and waits to be stopped."""

    def run(self) -> None:
        self.loop_began()
        self._stopping.wait()


class Heard:
    """What a runner or executor told its listener, with an event per kind to wait on."""

    def __init__(self) -> None:
        self.running: list[TaskId] = []
        self.failed: list[tuple[TaskId, str]] = []
        self.got_running = threading.Event()
        self.got_failure = threading.Event()

    def on_running(self, task: TaskId) -> None:
        self.running.append(task)
        self.got_running.set()

    def on_failure(self, task: TaskId, trace: str) -> None:
        self.failed.append((task, trace))
        self.got_failure.set()


def _gated_runner(heard: Heard) -> LoopRunner:
    GatedSource.gate = threading.Event()
    return LoopRunner(TASK, GatedSource(), {}, heard.on_failure, on_running=heard.on_running)


def test_a_runner_is_unassigned_until_its_start_returned_then_running_and_resumes_running_at_once() -> None:
    heard = Heard()
    runner = _gated_runner(heard)
    runner.start(paused=False)
    try:
        assert runner.state() == "UNASSIGNED"  # start() is still waiting for the gate, on the task's thread
        assert heard.running == []
        GatedSource.gate.set()
        assert heard.got_running.wait(WAIT_S)
        assert heard.running == [TASK] and runner.state() == "RUNNING"
        runner.set_paused(True)
        assert runner.state() == "PAUSED"
        runner.set_paused(False)
        assert runner.state() == "RUNNING"  # its loop already ran: no second report needed
        assert heard.running == [TASK]
    finally:
        assert runner.stop(WAIT_S)


def test_a_task_started_paused_then_resumed_before_its_loop_ran_is_unassigned() -> None:
    heard = Heard()
    runner = _gated_runner(heard)
    runner.start(paused=True)
    try:
        assert runner.state() == "PAUSED"
        runner.set_paused(False)
        assert runner.state() == "UNASSIGNED"
        GatedSource.gate.set()
        assert heard.got_running.wait(WAIT_S)
        assert runner.state() == "RUNNING"
    finally:
        assert runner.stop(WAIT_S)


def test_a_runner_stopped_before_its_loop_ran_never_reports_running() -> None:
    heard = Heard()
    runner = _gated_runner(heard)
    runner.start(paused=False)
    assert not runner.stop(0.05)  # its start is still waiting: the stop gives up on the thread
    GatedSource.gate.set()
    assert runner._thread is not None
    runner._thread.join(WAIT_S)
    assert not runner._thread.is_alive()
    assert heard.running == [] and heard.failed == []


class FailingStart(GatedSource):
    def start(self, props: dict[str, str]) -> None:
        raise RuntimeError("the source is unreachable")


def test_a_start_that_raises_on_the_tasks_thread_fails_the_task_with_its_trace() -> None:
    heard = Heard()
    runner = LoopRunner(TASK, FailingStart(), {}, heard.on_failure, on_running=heard.on_running)
    runner.start(paused=False)
    assert heard.got_failure.wait(WAIT_S)
    [(task, trace)] = heard.failed
    assert task == TASK and "the source is unreachable" in trace
    assert runner.state() == "FAILED" and heard.running == []
    assert runner.stop(WAIT_S)


# --- the Spark executor's answers and its listener (a source task: no SparkSession, no broker needed)


def _executor(heard: Heard) -> SparkExecutor:
    executor = SparkExecutor(
        WorkerConfig.from_properties(BASE),
        PluginRegistry.discover(file_connectors=True),
        OffsetState,
        lambda records: None,
    )
    executor.set_listener(TaskListener(failed=heard.on_failure, running=heard.on_running))
    return executor


TASK_CONFIG = {"task.class": f"{__name__}.GatedSource", "bootstrap.servers": "unused:9092"}


def test_the_executor_answers_unassigned_and_reports_running_once_the_start_returned() -> None:
    heard = Heard()
    executor = _executor(heard)
    GatedSource.gate = threading.Event()
    try:
        assert executor.start_task(TASK, TASK_CONFIG, "STARTED").state == "UNASSIGNED"
        assert executor.task_state(TASK) == TaskState("UNASSIGNED", None, None)
        assert executor.transition_task(TASK, "STARTED").state == "UNASSIGNED"  # its loop never ran yet
        GatedSource.gate.set()
        assert heard.got_running.wait(WAIT_S)
        assert heard.running == [TASK]
        assert executor.task_state(TASK) == TaskState("RUNNING", None, None)
        assert executor.transition_task(TASK, "PAUSED").state == "PAUSED"
        assert executor.transition_task(TASK, "STARTED").state == "RUNNING"
    finally:
        executor.close(WAIT_S)
    assert executor.task_state(TASK) is None


def test_the_executor_reports_no_running_for_a_task_stopped_before_its_loop_ran() -> None:
    heard = Heard()
    executor = _executor(heard)
    GatedSource.gate = threading.Event()
    assert executor.start_task(TASK, TASK_CONFIG, "STARTED").state == "UNASSIGNED"
    thread = executor._runners[TASK]._thread
    executor.stop_task(TASK, 0.05)  # abandoned while its start waits
    GatedSource.gate.set()
    assert thread is not None
    thread.join(WAIT_S)
    assert not thread.is_alive()
    assert executor.task_state(TASK) is None
    assert executor.held() == set() and heard.running == [] and heard.failed == []


def test_a_task_whose_overrides_the_workers_policy_refuses_fails_to_start() -> None:
    """The policy is checked again where the task's clients are made, as Java's Worker does: the worker
    may have been restarted with a stricter policy since the config was validated."""
    executor = SparkExecutor(
        WorkerConfig.from_properties({**BASE, "connector.client.config.override.policy": "None"}),
        PluginRegistry.discover(file_connectors=True),
        OffsetState,
        lambda records: None,
    )
    try:
        state = executor.start_task(TASK, {**TASK_CONFIG, "producer.override.acks": "all"}, "STARTED")
        assert state.state == "FAILED"
        assert (
            state.trace is not None
            and "Client Config Overrides not allowed: producer.override.acks" in state.trace
        )
        assert executor.held() == set()
    finally:
        executor.close(WAIT_S)


# --- the worker's writes


class FakeExecutor:
    """Answers what the test sets, as an executor whose task thread moved on meanwhile would."""

    def __init__(self) -> None:
        self.answer = TaskState("UNASSIGNED")
        self.now: TaskState | None = TaskState("UNASSIGNED")

    def start_task(self, task: TaskId, config: Mapping[str, str], target_state: str) -> TaskState:
        return self.answer

    def stop_task(self, task: TaskId, timeout_s: float) -> None:
        self.now = None

    def transition_task(self, task: TaskId, target_state: str) -> TaskState:
        return self.answer

    def task_state(self, task: TaskId) -> TaskState | None:
        return self.now


class FakeStores:
    """The status writes, and the status topic as this worker has read it."""

    def __init__(self) -> None:
        self.written: list[status_log.TaskStatus] = []
        self.read = status_log.StatusState()

    def put_status(self, status: status_log.ConnectorStatus | status_log.TaskStatus) -> None:
        assert isinstance(status, status_log.TaskStatus)
        self.written.append(status)

    def snapshot(self) -> ClusterConfigSnapshot:
        return ClusterConfigSnapshot(connector_configs={"c": {}}, target_states={"c": TargetState.STARTED})

    def status_state(self) -> status_log.StatusState:
        return self.read


def _tasks() -> tuple[Tasks, FakeExecutor, FakeStores, hd.Herder]:
    executor, stores = FakeExecutor(), FakeStores()
    tasks = Tasks(WorkerConfig.from_properties(BASE), "w0", executor, stores, WorkerMetrics())  # type: ignore[arg-type]
    herder = hd.Herder("w0", ClusterConfigSnapshot())
    herder.group = hd.GroupView(generation=7)
    return tasks, executor, stores, herder


def _states(stores: FakeStores) -> list[tuple[str, int]]:
    return [(s.state.value, s.generation) for s in stores.written]


def test_running_is_written_with_the_current_generation_only_while_the_executor_holds_it_running() -> None:
    tasks, executor, stores, herder = _tasks()
    tasks.start(hd.StartTask(TASK, {}, TargetState.STARTED), 6)
    executor.now = TaskState("PAUSED")
    tasks.running(TASK, herder)  # paused meanwhile: not RUNNING
    executor.now = TaskState("RUNNING", None, "1.0")
    tasks.running(TASK, herder)
    tasks.stop(hd.StopTask(TASK), 7)
    tasks.running(TASK, herder)  # a report that comes after the stop writes nothing
    assert _states(stores) == [("UNASSIGNED", 6), ("RUNNING", 7), ("UNASSIGNED", 7)]
    assert stores.written[1].version == "1.0"


def test_the_start_writes_what_the_task_is_by_then_so_an_early_failure_is_not_overwritten() -> None:
    tasks, executor, stores, herder = _tasks()
    executor.now = TaskState("FAILED", "boom")  # its thread failed before the herder's thread wrote
    tasks.failed(TASK, "boom", herder)
    tasks.start(hd.StartTask(TASK, {}, TargetState.STARTED), 7)
    assert _states(stores) == [("FAILED", 7), ("FAILED", 7)]
    assert stores.written[-1].trace == "boom"


def test_running_is_not_written_over_a_newer_generations_status_from_another_worker() -> None:
    tasks, executor, stores, herder = _tasks()
    newer = status_log.TaskStatus(TASK, status_log.State.UNASSIGNED, None, "w1", 8)
    stores.read = status_log.apply(status_log.StatusState(), newer)
    executor.now = TaskState("RUNNING")
    tasks.running(TASK, herder)
    assert stores.written == []
