"""Pause, resume, stop and restart in the herder: config-topic records in, actions out (no I/O)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from kconnect.runtime.group import protocol
from kconnect.runtime.group.herder import (
    Action,
    Herder,
    ReportRestarting,
    RequestRejoin,
    RestartPlan,
    StartConnector,
    StartTask,
    StopConnector,
    StopTask,
    TransitionConnector,
    TransitionTask,
    restart_plan,
)
from kconnect.runtime.group.protocol import ConnectAssignment
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import config_log, status_log
from kconnect.runtime.storage.config_log import ConfigState, RestartRequest, TargetState
from kconnect.runtime.storage.status_log import State, StatusState

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
A0, A1 = TaskId("a", 0), TaskId("a", 1)


@dataclass
class ConfigTopic:
    """A config topic a test appends records to, folded as a worker folds it."""

    state: ConfigState = field(default_factory=ConfigState)
    offset: int = 0

    def write(self, *records: config_log.ConfigRecord) -> config_log.ClusterConfigSnapshot:
        for record in records:
            self.state = config_log.apply(self.state, record, self.offset)
            self.offset += 1
        return self.state.snapshot()

    def connector(self, name: str, tasks: int, initial: TargetState | None = None) -> None:
        if initial is not None:
            self.write(config_log.TargetStateRecord(name, initial))
        self.write(config_log.ConnectorConfig(name, {"connector.class": SOURCE, "name": name}))
        self.write(*(config_log.TaskConfig(TaskId(name, i), {"task": str(i)}) for i in range(tasks)))
        self.write(config_log.TaskCommit(name, tasks))


def assignment(connectors: tuple[str, ...], tasks: tuple[TaskId, ...]) -> ConnectAssignment:
    return ConnectAssignment(
        version=2,
        error=protocol.NO_ERROR,
        leader="m1",
        leader_url="http://w1:8083/",
        config_offset=0,
        connectors=connectors,
        tasks=tasks,
    )


def statuses(connector: State, **tasks: State) -> StatusState:
    state = StatusState()
    state = status_log.apply(state, status_log.ConnectorStatus("a", connector, None, "w1", 1))
    for key, task_state in tasks.items():
        task = TaskId("a", int(key.removeprefix("t")))
        state = status_log.apply(state, status_log.TaskStatus(task, task_state, None, "w1", 1))
    return state


def running(topic: ConfigTopic, owned: tuple[TaskId, ...] = (A0, A1)) -> Herder:
    """A herder that owns connector ``a`` and ``owned`` tasks, all started."""
    h = Herder("w1", topic.state.snapshot())
    h.on_rebalanced(1, "m1", "sessioned", assignment(("a",), owned), statuses(State.RUNNING))
    return h


def without_rejoins(actions: list[Action]) -> list[Action]:
    return [a for a in actions if not isinstance(a, RequestRejoin)]


# ----------------------------------------------------------------------------------- target states


def test_pause_then_resume_transitions_the_connector_and_its_tasks_in_place() -> None:
    topic = ConfigTopic()
    topic.connector("a", 2)
    h = running(topic)
    actions = h.on_config(topic.write(config_log.TargetStateRecord("a", TargetState.PAUSED)))
    assert actions == [
        TransitionConnector("a", TargetState.PAUSED),
        TransitionTask(A0, TargetState.PAUSED),
        TransitionTask(A1, TargetState.PAUSED),
    ]
    # Nothing is stopped or restarted: a resume needs no rebalance.
    actions = h.on_config(topic.write(config_log.TargetStateRecord("a", TargetState.STARTED)))
    assert actions == [
        TransitionConnector("a", TargetState.STARTED),
        TransitionTask(A0, TargetState.STARTED),
        TransitionTask(A1, TargetState.STARTED),
    ]
    # The same state again is no transition.
    assert h.on_config(topic.write(config_log.TargetStateRecord("a", TargetState.STARTED))) == []


def test_stop_as_the_leader_writes_it_stops_the_tasks_and_reports_the_connector_stopped() -> None:
    """Java's stop: empty task configs first, then the STOPPED target state."""
    topic = ConfigTopic()
    topic.connector("a", 2)
    h = running(topic)
    actions = h.on_config(topic.write(config_log.TaskCommit("a", 0)))
    assert actions == [StopTask(A0), StopTask(A1), RequestRejoin("connectors or task configs changed")]
    actions = h.on_config(topic.write(config_log.TargetStateRecord("a", TargetState.STOPPED)))
    assert actions == [TransitionConnector("a", TargetState.STOPPED)]
    assert h.running_connectors.keys() == {"a"} and not h.running_tasks


def test_a_connector_created_paused_or_stopped_starts_in_that_state() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1, initial=TargetState.PAUSED)
    topic.connector("b", 0, initial=TargetState.STOPPED)
    h = Herder("w1", topic.state.snapshot())
    actions = h.on_rebalanced(1, "m1", "sessioned", assignment(("a", "b"), (A0,)))
    starts = [(a.name, a.target_state) for a in actions if isinstance(a, StartConnector)]
    assert starts == [("a", TargetState.PAUSED), ("b", TargetState.STOPPED)]
    assert [a.target_state for a in actions if isinstance(a, StartTask)] == [TargetState.PAUSED]


def test_a_target_state_change_while_rebalancing_applies_when_the_rebalance_completes() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    h = running(topic, (A0,))
    h.on_rejoin_preparing(member_lost=False, selected_protocol="sessioned")
    assert h.on_config(topic.write(config_log.TargetStateRecord("a", TargetState.PAUSED))) == []
    actions = h.on_rebalanced(2, "m1", "sessioned", assignment((), ()))
    assert actions == [TransitionConnector("a", TargetState.PAUSED), TransitionTask(A0, TargetState.PAUSED)]


# ---------------------------------------------------------------------------------------- restarts


def test_restart_with_tasks_stops_marks_restarting_and_starts_once_per_request() -> None:
    topic = ConfigTopic()
    topic.connector("a", 2)
    h = running(topic)
    snap = topic.write(config_log.RestartRequest("a", include_tasks=True))
    actions = h.on_config(snap, statuses(State.RUNNING, t0=State.RUNNING, t1=State.RUNNING))
    assert [type(a).__name__ for a in actions] == [
        "StopConnector",
        "ReportRestarting",
        "StopTask",
        "StopTask",
        "ReportRestarting",
        "ReportRestarting",
        "StartConnector",
        "StartTask",
        "StartTask",
    ]
    assert actions[1] == ReportRestarting("a") and actions[4] == ReportRestarting("a", A0)
    # Read again (another record moved the topic on): the same request is not carried out twice.
    assert h.on_config(topic.write(config_log.TargetStateRecord("a", TargetState.STARTED))) == []
    # A new request is.
    actions = h.on_config(topic.write(config_log.RestartRequest("a")))
    assert actions[:2] == [StopConnector("a"), ReportRestarting("a")]
    assert [type(a).__name__ for a in actions] == ["StopConnector", "ReportRestarting", "StartConnector"]


def test_only_failed_restarts_only_what_failed() -> None:
    topic = ConfigTopic()
    topic.connector("a", 2)
    h = running(topic)
    snap = topic.write(config_log.RestartRequest("a", include_tasks=True, only_failed=True))
    actions = h.on_config(snap, statuses(State.RUNNING, t0=State.RUNNING, t1=State.FAILED))
    assert actions == [
        StopTask(A1),
        ReportRestarting("a", A1),
        StartTask(A1, {"task": "1"}, TargetState.STARTED),
    ]


def test_a_restart_of_work_owned_elsewhere_changes_nothing_here() -> None:
    topic = ConfigTopic()
    topic.connector("a", 2)
    h = Herder("w1", topic.state.snapshot())
    h.on_rebalanced(1, "m1", "sessioned", assignment((), (A1,)))
    snap = topic.write(config_log.RestartRequest("a", include_tasks=True))
    actions = h.on_config(snap, statuses(State.RUNNING, t0=State.RUNNING, t1=State.RUNNING))
    # Only the task held here restarts; the connector and task 0 belong to other workers.
    assert actions == [
        StopTask(A1),
        ReportRestarting("a", A1),
        StartTask(A1, {"task": "1"}, TargetState.STARTED),
    ]


def test_restart_requests_read_at_startup_are_history() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    topic.write(config_log.RestartRequest("a", include_tasks=True))
    h = Herder("w1", config_log.ClusterConfigSnapshot())
    h.on_startup_config(topic.state.snapshot())
    actions = h.on_rebalanced(1, "m1", "sessioned", assignment(("a",), (A0,)), statuses(State.RUNNING))
    assert [type(a).__name__ for a in actions] == ["StartConnector", "StartTask"]


def test_a_restart_read_during_a_rebalance_runs_when_it_completes() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    h = running(topic, (A0,))
    h.on_rejoin_preparing(member_lost=False, selected_protocol="sessioned")
    assert h.on_config(topic.write(config_log.RestartRequest("a")), statuses(State.RUNNING)) == []
    actions = h.on_rebalanced(2, "m1", "sessioned", assignment((), ()))
    assert [type(a).__name__ for a in actions] == ["StopConnector", "ReportRestarting", "StartConnector"]


def test_a_stopped_connector_restarts_into_its_target_state() -> None:
    topic = ConfigTopic()
    topic.connector("a", 0, initial=TargetState.STOPPED)
    h = Herder("w1", topic.state.snapshot())
    h.on_rebalanced(1, "m1", "sessioned", assignment(("a",), ()))
    actions = h.on_config(
        topic.write(config_log.RestartRequest("a", include_tasks=True)), statuses(State.STOPPED)
    )
    assert actions[-1] == StartConnector(
        "a", topic.state.snapshot().connector_config("a") or {}, TargetState.STOPPED
    )


def test_task_restart_on_its_owner() -> None:
    topic = ConfigTopic()
    topic.connector("a", 2)
    h = running(topic)
    actions = h.on_restart_task(A1)
    assert actions == [
        StopTask(A1),
        ReportRestarting("a", A1),
        StartTask(A1, {"task": "1"}, TargetState.STARTED),
    ]
    assert h.on_restart_task(TaskId("a", 7)) == []


@pytest.mark.parametrize(
    ("include_tasks", "only_failed", "connector", "t0", "t1", "expected"),
    [
        # Java's RestartRequest: the connector restarts unless only failed ones are asked for.
        (False, False, State.RUNNING, State.RUNNING, State.FAILED, RestartPlan(True, ())),
        (True, False, State.RUNNING, State.RUNNING, State.FAILED, RestartPlan(True, (A0, A1))),
        (False, True, State.RUNNING, State.RUNNING, State.FAILED, RestartPlan(False, ())),
        (False, True, State.FAILED, State.RUNNING, State.FAILED, RestartPlan(True, ())),
        (True, True, State.RUNNING, State.RUNNING, State.FAILED, RestartPlan(False, (A1,))),
        (True, True, State.FAILED, State.FAILED, State.FAILED, RestartPlan(True, (A0, A1))),
        (True, True, State.PAUSED, State.PAUSED, State.PAUSED, RestartPlan(False, ())),
    ],
)
def test_restart_plan_table(
    include_tasks: bool, only_failed: bool, connector: State, t0: State, t1: State, expected: RestartPlan
) -> None:
    topic = ConfigTopic()
    topic.connector("a", 2)
    request = RestartRequest("a", include_tasks=include_tasks, only_failed=only_failed)
    assert restart_plan(request, topic.state.snapshot(), statuses(connector, t0=t0, t1=t1)) == expected


def test_restart_plan_needs_the_connector_and_its_status() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    assert restart_plan(RestartRequest("a"), topic.state.snapshot(), StatusState()) is None
    assert restart_plan(RestartRequest("zz"), topic.state.snapshot(), statuses(State.RUNNING)) is None
    # A task with no status yet counts as not failed.
    only = RestartRequest("a", include_tasks=True, only_failed=True)
    assert restart_plan(only, topic.state.snapshot(), statuses(State.FAILED)) == RestartPlan(True, ())
