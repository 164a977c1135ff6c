"""A member's learners (issue 25; ``runtime/group/learner.py``): the sans-I/O machine as a table of event
sequences and the actions they emit, the reconciler's record carrying them, and a herder honouring them
(``learns`` on) or ignoring them (off: today's behaviour).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

import pytest

from kconnect.runtime.group import learner, protocol
from kconnect.runtime.group.group_records import (
    Assigned,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    GroupState,
    Learner,
    TargetAssignmentValue,
    TargetMember,
)
from kconnect.runtime.group.herder import Herder, StartTask, WriteGroupRecords
from kconnect.runtime.group.learner import (
    ActivatePreparedTask,
    DiscardPreparedTask,
    LearnerReady,
    Learning,
    PrepareTask,
)
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName
from kconnect.runtime.group.reconciler import reconcile
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import config_log
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, ConfigState, Properties, TargetState

T0, T1 = TaskId("a", 0), TaskId("a", 1)
C0: Properties = {"task": "0", "v": "1"}
C1: Properties = {"task": "1", "v": "1"}
C0_NEW: Properties = {"task": "0", "v": "2"}
CONFIGS = {T0: C0, T1: C1}
STARTED = TargetState.STARTED

# ------------------------------------------------------------------------------------ the machine

Event = Callable[[Learning], tuple[Learning, list[object]]]


def target(
    *learners: Learner, share: frozenset[TaskId] = frozenset(), configs: Mapping[TaskId, Properties] = CONFIGS
) -> Event:
    def run(state: Learning) -> tuple[Learning, list[object]]:
        state, actions = learner.on_target(state, frozenset(learners), share, configs)
        return state, list(actions)

    return run


def prepared(task: TaskId, attempt: int) -> Event:
    def run(state: Learning) -> tuple[Learning, list[object]]:
        state, actions = learner.on_prepared(state, task, attempt)
        return state, list(actions)

    return run


def failed(task: TaskId, attempt: int) -> Event:
    def run(state: Learning) -> tuple[Learning, list[object]]:
        state, actions = learner.on_preparation_failed(state, task, attempt)
        return state, list(actions)

    return run


def start(task: TaskId, config: Properties) -> Event:
    def run(state: Learning) -> tuple[Learning, list[object]]:
        state, action = learner.on_start(state, task, config, STARTED)
        return state, [] if action is None else [action]

    return run


def L(task: TaskId, since: int = 100, ready: bool = False) -> Learner:
    return Learner(task, ready, since)


@dataclass(frozen=True)
class Row:
    events: tuple[Event, ...]
    #: The actions of each event, in order.
    actions: tuple[list[object], ...]
    #: The learners as the member then reports them, for the target's learners ``reported_for``.
    reported_for: frozenset[Learner] = frozenset()
    reported: frozenset[Learner] = frozenset()


ROWS: dict[str, Row] = {
    "learner-assigned-prepares": Row(
        (target(L(T0)),), ([PrepareTask(T0, C0, 1)],), frozenset({L(T0)}), frozenset({L(T0)})
    ),
    "prepared-is-ready": Row(
        (target(L(T0)), prepared(T0, 1)),
        ([PrepareTask(T0, C0, 1)], [LearnerReady(T0)]),
        frozenset({L(T0)}),
        frozenset({L(T0, ready=True)}),
    ),
    "the-same-target-again-changes-nothing": Row(
        (target(L(T0)), prepared(T0, 1), target(L(T0))), ([PrepareTask(T0, C0, 1)], [LearnerReady(T0)], [])
    ),
    "promoted-then-started-activates": Row(
        (target(L(T0)), prepared(T0, 1), target(share=frozenset({T0})), start(T0, C0)),
        ([PrepareTask(T0, C0, 1)], [LearnerReady(T0)], [], [ActivatePreparedTask(T0, C0, STARTED, 1)]),
    ),
    "dropped-is-discarded": Row(
        (target(L(T0), L(T1)), target(L(T1))),
        ([PrepareTask(T0, C0, 1), PrepareTask(T1, C1, 2)], [DiscardPreparedTask(T0, 1)]),
    ),
    "dropped-then-started-plainly-before-ready": Row(
        # The deadline passed: the target gives it as active while the preparation is not done.
        (target(L(T0)), target(share=frozenset({T0})), start(T0, C0)),
        ([PrepareTask(T0, C0, 1)], [DiscardPreparedTask(T0, 1)], []),
    ),
    "started-before-the-target-said-so-discards-and-starts-cold": Row(
        (target(L(T0)), start(T0, C0)), ([PrepareTask(T0, C0, 1)], [DiscardPreparedTask(T0, 1)])
    ),
    "a-new-learner-of-the-same-task-prepares-again": Row(
        (target(L(T0)), prepared(T0, 1), target(L(T0, since=900))),
        ([PrepareTask(T0, C0, 1)], [LearnerReady(T0)], [DiscardPreparedTask(T0, 1), PrepareTask(T0, C0, 2)]),
        frozenset({L(T0, since=900)}),
        frozenset({L(T0, since=900)}),
    ),
    "a-changed-config-prepares-again": Row(
        (target(L(T0)), prepared(T0, 1), target(L(T0), configs={T0: C0_NEW})),
        (
            [PrepareTask(T0, C0, 1)],
            [LearnerReady(T0)],
            [DiscardPreparedTask(T0, 1), PrepareTask(T0, C0_NEW, 2)],
        ),
        frozenset({L(T0)}),
        frozenset({L(T0)}),
    ),
    "promoted-with-a-changed-config-starts-cold": Row(
        (
            target(L(T0)),
            prepared(T0, 1),
            target(share=frozenset({T0}), configs={T0: C0_NEW}),
            start(T0, C0_NEW),
        ),
        ([PrepareTask(T0, C0, 1)], [LearnerReady(T0)], [DiscardPreparedTask(T0, 1)], []),
    ),
    "no-config-yet-no-preparation": Row(
        (target(L(T0), configs={}),), ([],), frozenset({L(T0)}), frozenset({L(T0)})
    ),
    "a-stale-answer-changes-nothing": Row(
        (target(L(T0)), prepared(T0, 7), prepared(T1, 1)),
        ([PrepareTask(T0, C0, 1)], [], []),
        frozenset({L(T0)}),
        frozenset({L(T0)}),
    ),
    "failed-is-released-and-never-ready": Row(
        (target(L(T0)), failed(T0, 1), prepared(T0, 1), target(L(T0)), target()),
        ([PrepareTask(T0, C0, 1)], [DiscardPreparedTask(T0, 1)], [], [], []),
    ),
    "failed-then-started-plainly": Row(
        (target(L(T0)), failed(T0, 1), start(T0, C0)),
        ([PrepareTask(T0, C0, 1)], [DiscardPreparedTask(T0, 1)], []),
    ),
}


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
def test_learner_machine(row: Row) -> None:
    state = Learning()
    for event, expected in zip(row.events, row.actions, strict=True):
        state, actions = event(state)
        assert actions == expected
    if row.reported_for:
        assert learner.reported(state, row.reported_for) == row.reported


def test_discard_all_releases_every_preparation_once() -> None:
    state, _ = learner.on_target(Learning(), frozenset({L(T0), L(T1)}), frozenset(), CONFIGS)
    state, _ = learner.on_preparation_failed(state, T1, 2)
    state, actions = learner.discard_all(state)
    assert actions == [DiscardPreparedTask(T0, 1)] and not state.tasks


# ------------------------------------------------------------------------------------ reconcile

G = "connect-cluster"


def group(
    shares: Mapping[str, Assigned],
    learners: Mapping[str, frozenset[Learner]],
    current: Mapping[str, CurrentMemberAssignmentValue],
    epoch: int = 5,
) -> GroupState:
    members = tuple(
        TargetMember(m, 0, shares.get(m, Assigned()), 2, b"", learners.get(m, frozenset()))
        for m in sorted(set(shares) | set(learners))
    )
    return GroupState(G, epoch=epoch, target=TargetAssignmentValue(epoch, members), current=dict(current))


def tasks(*items: TaskId) -> Assigned:
    return Assigned(tasks=frozenset(items))


def test_the_record_lists_the_learners_the_target_asks_for_and_never_claims_them() -> None:
    # m2 learns a-0, which m1 owns but has not listed yet: a learner never claims it.
    state = group({"m1": tasks(T0)}, {"m2": frozenset({L(T0)})}, {})
    step = reconcile(
        state, "m2", Assigned(), None, acknowledged=False, learners=frozenset({L(T0, ready=True), L(T1)})
    )
    assert step.record is not None
    assert step.record.assigned == Assigned() and step.start == Assigned()
    assert step.record.learners == frozenset({L(T0, ready=True)}), "only learners the target asks for"
    # Without learners the record is what it always was.
    plain = reconcile(state, "m1", Assigned(), None, acknowledged=False)
    assert plain.record is not None and plain.record.learners == frozenset()


def test_readiness_is_news_the_member_writes() -> None:
    state = group({"m1": tasks(T0)}, {"m2": frozenset({L(T0)})}, {})
    first = reconcile(state, "m2", Assigned(), None, acknowledged=False, learners=frozenset({L(T0)}))
    assert first.record is not None
    same = reconcile(state, "m2", Assigned(), first.record, acknowledged=False, learners=frozenset({L(T0)}))
    assert same.record is None
    ready = frozenset({L(T0, ready=True)})
    news = reconcile(state, "m2", Assigned(), first.record, acknowledged=False, learners=ready)
    assert news.record is not None and news.record.learners == ready


# ------------------------------------------------------------------------------------ the herder


def snapshot(version: str = "1") -> ClusterConfigSnapshot:
    state = ConfigState()
    records: list[config_log.ConfigRecord] = [
        config_log.ConnectorConfig("a", {"connector.class": "X", "name": "a"}),
        config_log.TaskConfig(T0, {"task": "0", "v": version}),
        config_log.TaskConfig(T1, {"task": "1", "v": "1"}),
        config_log.TaskCommit("a", 2),
    ]
    for offset, record in enumerate(records):
        state = config_log.apply(state, record, offset)
    return state.snapshot()


def reconciling_herder(member: str, *, learns: bool) -> Herder:
    herder = Herder(member, snapshot())
    herder.learns = learns
    herder.coordinator_settings = type(herder.coordinator_settings)(group_id=G)
    herder.on_rejoin_preparing(member_lost=False, selected_protocol=ProtocolName.SESSIONED)
    done = ConnectAssignment(protocol.V2, protocol.NO_ERROR, "m1", "http://m1/", 3, (), (), reconcile=True)
    herder.on_rebalanced(1, member, ProtocolName.SESSIONED, done)
    assert herder.group.reconciling
    return herder


def written(actions: list[object]) -> CurrentMemberAssignmentValue:
    writes = [a for a in actions if isinstance(a, WriteGroupRecords)]
    assert len(writes) == 1
    ((key, value),) = writes[0].records
    assert isinstance(key, CurrentMemberAssignmentKey) and isinstance(value, CurrentMemberAssignmentValue)
    return value


def test_a_herder_that_does_not_learn_ignores_learners() -> None:
    herder = reconciling_herder("m2", learns=False)
    actions = herder.on_group_records(group({"m1": tasks(T0)}, {"m2": frozenset({L(T0)})}, {}), 0)
    assert not [a for a in actions if isinstance(a, PrepareTask | DiscardPreparedTask | ActivatePreparedTask)]
    assert written(actions).learners == frozenset()


def test_a_herder_learns_reports_ready_and_activates_on_promotion() -> None:
    herder = reconciling_herder("m2", learns=True)
    m1 = CurrentMemberAssignmentValue(5, 0, tasks(T0), 2, b"")
    learning = group({"m1": tasks(T0)}, {"m2": frozenset({L(T0)})}, {"m1": m1})
    actions = herder.on_group_records(learning, 0)
    assert [a for a in actions if isinstance(a, PrepareTask)] == [
        PrepareTask(T0, dict(snapshot().task_configs("a")[0]), 1)
    ]
    assert written(actions).learners == frozenset({L(T0)})
    assert herder.on_task_prepared(T0, 99, learning) == [], "a stale answer"
    ready = herder.on_task_prepared(T0, 1, learning)
    mine = written(ready)
    assert mine.learners == frozenset({L(T0, ready=True)}) and mine.assigned == Assigned()
    # Promoted: m2's share holds a-0; m1 has revoked it (its record lists nothing).
    m1_released = CurrentMemberAssignmentValue(6, 0, Assigned(), 2, b"")
    promoted = group({"m2": tasks(T0)}, {}, {"m1": m1_released, "m2": mine}, epoch=6)
    claim = herder.on_group_records(promoted, 0)
    claimed = written(claim)
    assert claimed.assigned == tasks(T0) and claimed.learners == frozenset()
    assert not [a for a in claim if isinstance(a, StartTask | ActivatePreparedTask | DiscardPreparedTask)]
    read_back = group({"m2": tasks(T0)}, {}, {"m1": m1_released, "m2": claimed}, epoch=6)
    started = herder.on_group_records(read_back, 0)
    assert started == [ActivatePreparedTask(T0, dict(snapshot().task_configs("a")[0]), STARTED, 1)]
    assert T0 in herder.running_tasks and not herder.learning.tasks


def test_a_herder_starts_cold_what_it_had_not_finished_preparing() -> None:
    herder = reconciling_herder("m2", learns=True)
    m1 = CurrentMemberAssignmentValue(5, 0, tasks(T0), 2, b"")
    herder.on_group_records(group({"m1": tasks(T0)}, {"m2": frozenset({L(T0)})}, {"m1": m1}), 0)
    # The learner timed out: the next target gives a-0 to m2 the plain way.
    m1_released = CurrentMemberAssignmentValue(6, 0, Assigned(), 2, b"")
    dropped = group({"m2": tasks(T0)}, {}, {"m1": m1_released}, epoch=6)
    actions = herder.on_group_records(dropped, 0)
    assert DiscardPreparedTask(T0, 1) in actions
    claimed = written(actions)
    started = herder.on_group_records(
        group({"m2": tasks(T0)}, {}, {"m1": m1_released, "m2": claimed}, epoch=6), 0
    )
    assert [type(a) for a in started] == [StartTask]


def test_a_leaving_herder_discards_what_it_prepares() -> None:
    herder = reconciling_herder("m2", learns=True)
    herder.owned_tasks.add(T1)
    herder.on_group_records(group({"m1": tasks(T0), "m2": tasks(T1)}, {"m2": frozenset({L(T0)})}, {}), 0)
    actions = herder.begin_leave()
    assert actions[0] == DiscardPreparedTask(T0, 1) and not herder.learning.tasks
