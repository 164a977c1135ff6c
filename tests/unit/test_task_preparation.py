"""The data plane's side of the warm-up hand-over (issue 25): a learner's preparation, its activation and
its release, in the Spark executor (``TaskPreparer``), the runners that warm something up (a sink's
consumer loop, a source's shared producer), the worker's task actions, and which workers say they learn.

No broker: the Kafka clients are fakes that record what was asked of them, so the tests can say what a
preparation must never do (assign, poll, produce, commit, call the plugin task's ``start``).
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from connectors.file import FileStreamSinkTask
from kconnect.config.worker import WorkerConfig
from kconnect.runtime.dataplane.executor import TaskListener, TaskPreparer, TaskState
from kconnect.runtime.dataplane.producer_pool import ProducerPool
from kconnect.runtime.dataplane.sink_loop import WorkerSinkTaskRunner
from kconnect.runtime.dataplane.spark_executor import SparkExecutor
from kconnect.runtime.group.handover import WarmupSettings
from kconnect.runtime.group.learner import ActivatePreparedTask, DiscardPreparedTask, PrepareTask
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import SourceRecord, SourceTask
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.tasks import TaskPrepared, Tasks
from kconnect.runtime.shell.view import WorkerMetrics
from kconnect.runtime.shell.worker import Worker
from kconnect.runtime.storage import status_log
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, TargetState
from kconnect.runtime.storage.offset_log import OffsetState
from tests.support.held_executor import HeldTasks

BASE = {
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
    "key.converter": "org.apache.kafka.connect.storage.StringConverter",
    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
}
TASK = TaskId("c", 0)
WAIT_S = 30.0


class CountingSource(SourceTask):
    """A source task that counts its ``start`` calls and produces nothing."""

    starts: list[dict[str, str]] = []

    def version(self) -> str:
        return "1"

    def start(self, props: dict[str, str]) -> None:
        CountingSource.starts.append(props)

    def poll(self) -> list[SourceRecord] | None:
        threading.Event().wait(0.05)
        return None

    def stop(self) -> None:
        pass


SOURCE = {"task.class": f"{__name__}.CountingSource", "topic": "t"}


class FakeProducer:
    """A producer that produces nothing and answers metadata at once."""

    made: list[FakeProducer] = []

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.produced = 0
        self.closed = False
        self.metadata_asked = 0
        FakeProducer.made.append(self)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object:
        self.metadata_asked += 1
        return object()

    def produce(self, *args: Any, **kwargs: Any) -> None:
        self.produced += 1

    def poll(self, timeout: float = 0) -> int:
        threading.Event().wait(min(timeout, 0.01))
        return 0

    def flush(self, _timeout: float = 0) -> int:
        return 0

    def __len__(self) -> int:
        return 0

    def purge(self) -> None:
        pass

    def close(self, *_args: Any) -> None:
        self.closed = True


class Heard:
    def __init__(self) -> None:
        self.running = threading.Event()
        self.failed: list[str] = []

    def listener(self) -> TaskListener:
        return TaskListener(
            failed=lambda _t, trace: self.failed.append(trace), running=lambda _t: self.running.set()
        )


@pytest.fixture
def executor() -> Any:
    CountingSource.starts = []
    FakeProducer.made = []
    ex = SparkExecutor(
        WorkerConfig.from_properties(BASE),
        PluginRegistry.discover(file_connectors=True),
        OffsetState,
        lambda records: None,
        sync_offsets=OffsetState,
    )
    ex._producers = ProducerPool(FakeProducer)
    heard = Heard()
    ex.set_listener(heard.listener())
    ex.heard = heard
    yield ex
    ex.close(WAIT_S)


def test_a_prepared_source_is_made_and_connected_but_neither_started_nor_held(executor: Any) -> None:
    assert isinstance(executor, TaskPreparer)
    assert executor.prepare_task(TASK, SOURCE, 1) is True
    assert CountingSource.starts == []  # the owner elsewhere runs it: start() is the activation's
    assert executor.held() == set() and executor.task_state(TASK) is None
    assert executor.prepared() == {TASK}
    [producer] = FakeProducer.made
    assert producer.metadata_asked == 1 and producer.produced == 0  # connected, nothing produced
    assert executor.counters() == {"task_starts": 0, "task_stops": 0}


def test_a_second_preparation_on_a_shared_producer_asks_no_metadata(executor: Any) -> None:
    """A producer other tasks use is connected already: asking it for every topic's metadata again put that
    request ahead of their records on its broker connection, 80 times over in a hand-over."""
    assert executor.prepare_task(TASK, SOURCE, 1)
    assert executor.prepare_task(TaskId("copy", 0), SOURCE, 1)
    [producer] = FakeProducer.made
    assert producer.metadata_asked == 1


def test_activating_starts_the_prepared_runner_itself(executor: Any) -> None:
    assert executor.prepare_task(TASK, SOURCE, 3)
    runner = executor._prepared[TASK].runner
    state = executor.start_prepared(TASK, 3, SOURCE, "STARTED")
    assert state is not None and state.state in ("UNASSIGNED", "RUNNING")  # its thread may be quick
    assert executor.heard.running.wait(WAIT_S)
    assert executor._runners[TASK] is runner and runner.handed_over
    assert len(CountingSource.starts) == 1
    assert executor.task_state(TASK) == TaskState("RUNNING", None, None)
    assert executor.prepared() == set() and executor.held() == {TASK}
    assert len(FakeProducer.made) == 1  # the producer the preparation connected is the one the task uses
    assert executor.counters()["task_starts"] == 1


@pytest.mark.parametrize(
    ("attempt", "config"),
    [(4, SOURCE), (3, {**SOURCE, "topic": "other"})],
    ids=["another attempt", "another config"],
)
def test_no_activation_of_a_preparation_for_another_attempt_or_config(
    executor: Any, attempt: int, config: dict[str, str]
) -> None:
    assert executor.prepare_task(TASK, SOURCE, 3)
    runner = executor._prepared[TASK].runner
    assert executor.start_prepared(TASK, attempt, config, "STARTED") is None
    assert executor.prepared() == set() and executor.held() == set()
    assert runner._warm_producer is None and len(executor._producers) == 0  # released
    assert CountingSource.starts == []


def test_a_discarded_preparation_is_released(executor: Any) -> None:
    assert executor.prepare_task(TASK, SOURCE, 1)
    runner = executor._prepared[TASK].runner
    executor.discard_prepared(TASK, 1)
    assert executor.prepared() == set() and runner._warm_producer is None
    assert len(executor._producers) == 0  # its only user gone: the shared producer closed
    assert executor.start_prepared(TASK, 1, SOURCE, "STARTED") is None


def test_a_preparation_discarded_before_it_began_never_begins(executor: Any) -> None:
    executor.discard_prepared(TASK, 2)
    assert executor.prepare_task(TASK, SOURCE, 2) is False
    assert executor.prepared() == set() and FakeProducer.made == []
    assert executor.prepare_task(TASK, SOURCE, 3) is True  # a newer attempt prepares


def test_a_preparation_discarded_while_it_runs_releases_itself(
    executor: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate, inside = threading.Event(), threading.Event()
    from kconnect.runtime.dataplane.source_runner import SourceTaskRunner

    original = SourceTaskRunner.prepare

    def slow(self: SourceTaskRunner) -> None:
        original(self)
        inside.set()
        assert gate.wait(WAIT_S)

    monkeypatch.setattr(SourceTaskRunner, "prepare", slow)
    answer: list[bool] = []
    thread = threading.Thread(target=lambda: answer.append(executor.prepare_task(TASK, SOURCE, 1)))
    thread.start()
    assert inside.wait(WAIT_S)
    executor.discard_prepared(TASK, 1)
    gate.set()
    thread.join(WAIT_S)
    assert answer == [False]
    assert executor.prepared() == set() and len(executor._producers) == 0


def test_a_failed_preparation_raises_and_holds_nothing(executor: Any) -> None:
    with pytest.raises(Exception, match="no Task class"):
        executor.prepare_task(TASK, {"task.class": "no.such.Task"}, 1)
    assert executor.prepared() == set() and executor.held() == set()


def test_close_releases_every_preparation(executor: Any) -> None:
    assert executor.prepare_task(TASK, SOURCE, 1)
    executor.close(WAIT_S)
    assert executor.prepared() == set() and len(executor._producers) == 0


# --- a sink task's consumer loop: the consumer made, found its share and positions, nothing assigned


class FakeReader:
    """The shared reader calls a sink loop makes, recorded."""

    name = "fake-reader"

    def __init__(self) -> None:
        self.calls: list[str] = []

    def list_topics(self, timeout_s: float) -> Any:
        self.calls.append("list_topics")
        meta = type("T", (), {"error": None, "partitions": {0: None, 1: None}})()
        return type("M", (), {"topics": {"lines": meta}})()

    def committed(self, group: str, partitions: Any, timeout_s: float) -> dict[Any, int]:
        self.calls.append("committed")
        return {}

    def assign(self, inbox: Any, offsets: Any, rewind: bool = False) -> None:
        self.calls.append("assign")

    def unassign(self, inbox: Any, partitions: Any) -> threading.Event:
        self.calls.append("unassign")
        done = threading.Event()
        done.set()
        return done

    def drained(self, inbox: Any) -> None:
        self.calls.append("take")

    def commit(self, group: str, offsets: Any, timeout_s: float) -> None:
        self.calls.append("commit")


class FakeReaders:
    """The worker's pool of shared readers: hands out one reader and counts its users."""

    def __init__(self) -> None:
        self.reader = FakeReader()
        self.acquired = 0
        self.released = 0

    def acquire(self, settings: Any, connector: str, topics: Any) -> FakeReader:
        self.acquired += 1
        return self.reader

    def release(self, reader: Any, connector: str) -> None:
        self.released += 1


def _sink_runner(tmp_path: Path, readers: FakeReaders) -> WorkerSinkTaskRunner:
    return WorkerSinkTaskRunner(
        TASK,
        FileStreamSinkTask(),
        {"topics": "lines", "file": str(tmp_path / "out.txt")},
        lambda _t, trace: None,
        spark=lambda: pytest.fail("a sink loop needs no SparkSession"),
        task_count=1,
        bootstrap="unused:9092",
        converters={"key.converter": BASE["key.converter"], "value.converter": BASE["value.converter"]},
        consumer_settings={},
        readers=readers,  # type: ignore[arg-type]
    )


def test_a_sink_loop_prepares_its_reader_and_its_loop_takes_it(tmp_path: Path) -> None:
    readers = FakeReaders()
    runner = _sink_runner(tmp_path, readers)
    runner.prepare()
    assert readers.reader.calls == ["list_topics", "committed"]  # nothing assigned: nothing read for it
    assert not (tmp_path / "out.txt").exists()  # the plugin task's start() opens the file: not called
    runner.start(paused=False)
    deadline = threading.Event()
    for _ in range(200):
        if "take" in readers.reader.calls:
            break
        deadline.wait(0.05)
    assert runner.stop(WAIT_S)
    assert readers.acquired == 1, "the loop acquired a second reader instead of taking the prepared one"
    assert "assign" in readers.reader.calls and "take" in readers.reader.calls
    assert readers.released == 1


def test_a_discarded_sink_preparation_releases_its_reader(tmp_path: Path) -> None:
    readers = FakeReaders()
    runner = _sink_runner(tmp_path, readers)
    runner.prepare()
    runner.release_prepared()
    assert (readers.acquired, readers.released) == (1, 1) and runner._warm_reader is None


# --- the worker's task actions


class FakePreparer:
    """An executor that prepares on demand and answers what the test sets."""

    def __init__(self) -> None:
        self.prepared: dict[TaskId, int] = {}
        self.started: list[str] = []
        self.fail_with: Exception | None = None
        self.discarded: list[tuple[TaskId, int]] = []

    def start_task(self, task: TaskId, config: Mapping[str, str], target_state: str) -> TaskState:
        self.started.append("cold")
        return TaskState("UNASSIGNED")

    def prepare_task(self, task: TaskId, config: Mapping[str, str], attempt: int) -> bool:
        if self.fail_with is not None:
            raise self.fail_with
        self.prepared[task] = attempt
        return True

    def start_prepared(
        self, task: TaskId, attempt: int, config: Mapping[str, str], target_state: str
    ) -> TaskState | None:
        if self.prepared.pop(task, None) != attempt:
            return None
        self.started.append("prepared")
        return TaskState("UNASSIGNED")

    def discard_prepared(self, task: TaskId, attempt: int) -> None:
        self.discarded.append((task, attempt))

    def task_state(self, task: TaskId) -> TaskState | None:
        return TaskState("UNASSIGNED")


class FakeStores:
    def __init__(self) -> None:
        self.written: list[Any] = []

    def put_status(self, status: Any) -> None:
        self.written.append(status)

    def snapshot(self) -> ClusterConfigSnapshot:
        return ClusterConfigSnapshot(connector_configs={"c": {}}, target_states={"c": TargetState.STARTED})

    def status_state(self) -> status_log.StatusState:
        return status_log.StatusState()


def _tasks(executor: FakePreparer) -> tuple[Tasks, FakeStores]:
    stores = FakeStores()
    tasks = Tasks(WorkerConfig.from_properties(BASE), "w1", executor, stores, WorkerMetrics())  # type: ignore[arg-type]
    return tasks, stores


def _prepare(tasks: Tasks, action: PrepareTask) -> TaskPrepared:
    got: list[TaskPrepared] = []
    done = threading.Event()

    def hear(event: TaskPrepared) -> None:
        got.append(event)
        done.set()

    tasks.prepare(action, hear)
    assert done.wait(WAIT_S)
    return got[0]


def test_the_worker_prepares_on_a_thread_and_activates_the_preparation() -> None:
    executor = FakePreparer()
    tasks, stores = _tasks(executor)
    assert _prepare(tasks, PrepareTask(TASK, {"k": "v"}, 5)) == TaskPrepared(TASK, 5)
    assert stores.written == []  # the owner elsewhere reports the task's status, not the learner
    tasks.activate(ActivatePreparedTask(TASK, {"k": "v"}, TargetState.STARTED, 5), generation=7)
    assert executor.started == ["prepared"]
    [status] = stores.written
    assert (status.task, status.state, status.generation) == (TASK, status_log.State.UNASSIGNED, 7)


def test_an_activation_without_a_preparation_starts_the_task_cold() -> None:
    executor = FakePreparer()
    tasks, stores = _tasks(executor)
    tasks.activate(ActivatePreparedTask(TASK, {"k": "v"}, TargetState.STARTED, 5), generation=7)
    assert executor.started == ["cold"] and len(stores.written) == 1


def test_a_failed_preparation_is_heard_with_its_trace_and_a_discard_reaches_the_executor() -> None:
    executor = FakePreparer()
    executor.fail_with = RuntimeError("broker unreachable")
    tasks, stores = _tasks(executor)
    event = _prepare(tasks, PrepareTask(TASK, {"k": "v"}, 2))
    assert event.task == TASK and event.attempt == 2 and "broker unreachable" in (event.trace or "")
    tasks.discard(DiscardPreparedTask(TASK, 2))
    assert executor.discarded == [(TASK, 2)] and stores.written == []


def test_an_executor_that_cannot_prepare_answers_a_failed_preparation() -> None:
    tasks, _stores = _tasks(HeldTasks())  # type: ignore[arg-type]
    event = _prepare(tasks, PrepareTask(TASK, {"k": "v"}, 1))
    assert event.trace is not None and "cannot prepare" in event.trace


# --- which workers say they learn


@pytest.mark.parametrize(
    ("props", "held", "learns"),
    [
        ({}, False, True),  # the defaults: group.protocol=connect, max.warmup.tasks=2, the Spark executor
        ({"max.warmup.tasks": "0"}, False, False),
        ({"group.protocol": "classic"}, False, False),
        ({"connect.protocol": "eager"}, False, False),
        ({}, True, False),  # an executor that cannot prepare
    ],
)
def test_a_worker_learns_only_under_reconciliation_with_warm_up_on_and_a_preparing_executor(
    props: dict[str, str], held: bool, learns: bool
) -> None:
    config = WorkerConfig.from_properties({**BASE, "listeners": "http://127.0.0.1:18083", **props})
    worker = Worker(config, executor=HeldTasks() if held else None)  # type: ignore[arg-type]
    assert worker.herder.learns is learns
    assert worker.leader.metadata(worker.url).learns is learns
    assert worker.herder.coordinator_settings.warmup == WarmupSettings(
        config.max_warmup_tasks, config.task_warmup_timeout_ms, config.task_shutdown_graceful_timeout_ms
    )


# --- a sink query: the SparkSession up and the query planned, nothing started


class FakeCommitter:
    def __init__(self) -> None:
        self.closed = False

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> object:
        return object()

    def close(self) -> None:
        self.closed = True


def test_a_sink_query_is_planned_but_not_started_and_a_discard_removes_its_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kconnect.runtime.dataplane.sink_runner import SinkTaskRunner
    from tests.support.spark import local_spark

    spark = local_spark()
    # Loading the stream makes a Python worker instantiate the data source: it must import kconnect, as
    # the worker's own SparkSession sees to (PYSPARK_PYTHON); the shared test session may predate that.
    monkeypatch.setattr(spark.sparkContext, "pythonExec", sys.executable)
    committer = FakeCommitter()
    runner = SinkTaskRunner(
        TaskId("planned", 0),
        FileStreamSinkTask(),
        {"topics": "lines", "file": str(tmp_path / "out.txt")},
        lambda _t, trace: None,
        spark=lambda: spark,
        task_count=1,
        bootstrap="unused:9092",
        converters={"key.converter": BASE["key.converter"], "value.converter": BASE["value.converter"]},
        consumer_settings={},
    )
    runner._new_committer = lambda: committer  # type: ignore[method-assign]
    runner.prepare()
    assert runner._planned is not None and runner._warm_committer is committer
    assert Path(runner._checkpoint).is_dir()
    assert not [q for q in spark.streams.active if q.name == f"kconnect-{runner.pool}"]  # nothing reads
    assert not (tmp_path / "out.txt").exists()  # the task's start() was not called
    runner.release_prepared()
    assert runner._planned is None and committer.closed
    assert not Path(runner._checkpoint).exists()
