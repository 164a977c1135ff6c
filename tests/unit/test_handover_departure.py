"""A leaving member that departs before its hand-over ends (issue 34): its remaining work is reassigned at
once, while a member that vanished without announcing it is still held for the delay (KIP-415).

Replayed through ``coordinate`` and the real group-records codec, as the leader writes and reads them:
three members run six tasks, ``m3`` announces it is leaving, the target keeps its two tasks in its share
while ``m1`` and ``m2`` learn them, and ``m3`` then leaves the group (LeaveGroup once its hand-over ran past
``rebalance.timeout.ms``, or dropped by the broker) with both still in its share.
bench/rolling.py at 5 x 200 (2026-11-29): the leader held such a worker's 2-3 tasks for
``scheduled.rebalance.max.delay.ms`` (300 s) as if it had crashed: a 304 s gap in their output.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from kconnect.runtime.group import group_records as gr
from kconnect.runtime.group import protocol
from kconnect.runtime.group.coordinator import CoordinatorInput, Decision, coordinate
from kconnect.runtime.group.group_records import (
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    RecordKey,
    RecordValue,
)
from kconnect.runtime.group.handover import WarmupSettings
from kconnect.runtime.group.herder import StopTask
from kconnect.runtime.group.protocol import ProtocolName, WorkerState
from kconnect.runtime.ids import TaskId
from tests.support.reconcile_model import ReconcileModel
from tests.unit.test_handover import Topic as HandoverTopic

G = "connect-cluster"
NOW = 1_700_000_000_000
DELAY = 300_000
WARMUP = WarmupSettings(max_warmup_tasks=2, warmup_timeout_ms=60_000, graceful_timeout_ms=5_000)
Record = tuple[RecordKey, RecordValue | None]


class Topic(HandoverTopic):
    """test_handover's folded group-records partition, with each member's share of the target."""

    def shares(self) -> dict[str, set[TaskId]]:
        state = self.state
        assert state is not None and state.target is not None
        return {m.member_id: set(m.assigned.tasks) for m in state.target.members}


def member(name: str, *, leaving: bool = False) -> tuple[int, WorkerState]:
    return protocol.V2, WorkerState(
        f"http://{name}:8083/", 10, None, leaving=leaving, reconciles=True, learns=True
    )


def inputs(
    members: Mapping[str, tuple[int, WorkerState]], now: int, work: Mapping[str, int] | None = None
) -> CoordinatorInput:
    return CoordinatorInput(
        group_id=G,
        generation=1,
        protocol=ProtocolName.SESSIONED,
        leader_id="m1",
        leader_url="http://m1:8083/",
        members=members,
        work=work if work is not None else {"a": 6},
        config_offset=10,
        now_ms=now,
        max_delay_ms=DELAY,
        rebalance_timeout_ms=20_000,
        warmup=WARMUP,
    )


def step(
    topic: Topic,
    members: Mapping[str, tuple[int, WorkerState]],
    now: int,
    work: Mapping[str, int] | None = None,
) -> Decision:
    decision = coordinate(topic.state, inputs(members, now, work))
    topic.write(decision.records, now)
    return decision


def delay_of(decision: Decision) -> int:
    """The delay the installed target sends its members (0: nothing held back)."""
    state_target = [v for k, v in decision.records if isinstance(v, gr.TargetAssignmentValue)]
    assert len(state_target) == 1
    return max(protocol.decode_assignment(m.metadata).delay_ms for m in state_target[0].members)


def three_running(
    names: Sequence[str] = ("m1", "m2", "m3"),
) -> tuple[Topic, dict[str, tuple[int, WorkerState]]]:
    """Every member runs its balanced share of a-0..a-5, acknowledged."""
    topic = Topic()
    members = {m: member(m) for m in names}
    now = NOW
    for _ in range(4):  # the first target, then the hand-overs and claims of a group that grew at once
        step(topic, members, now)
        for m in names:
            topic.report(m, now + 1)
        now += 10
    assert all(len(s) == 6 // len(names) for s in topic.shares().values()), topic.shares()
    return topic, members


def handing_over(topic: Topic, members: dict[str, tuple[int, WorkerState]], now: int) -> set[TaskId]:
    """``m3`` announces it is leaving: its tasks stay in its share while the others learn them."""
    members["m3"] = member("m3", leaving=True)
    runs = topic.shares()["m3"]
    started = step(topic, members, now)
    assert started.bumped and started.handover is not None
    assert topic.shares()["m3"] == runs, "kept on the leaving member while its new owners learn it"
    for m in members:
        topic.report(m, now + 1)
    return runs


def test_a_leaving_member_that_departs_mid_hand_over_has_its_tasks_reassigned_at_once() -> None:
    topic, members = three_running()
    kept = handing_over(topic, members, NOW + 1_000)
    # m3's hand-over runs past rebalance.timeout.ms: it leaves the group with both tasks in its share.
    del members["m3"]
    departed = step(topic, members, NOW + 21_000)
    assert departed.bumped
    assert delay_of(departed) == 0, "not held as if it had crashed"
    shares = topic.shares()
    assert set(shares) == {"m1", "m2"}
    assert kept <= shares["m1"] | shares["m2"]
    assert shares["m1"] | shares["m2"] == {TaskId("a", n) for n in range(6)}
    assert len(shares["m1"]) == len(shares["m2"]) == 3
    # Its member metadata and its record are gone: its claims no longer hold anyone back.
    state = topic.state
    assert state is not None and "m3" not in state.current and "m3" not in state.members
    assert departed.wake_at_ms is None or departed.wake_at_ms < NOW + 21_000 + DELAY


def test_a_member_that_vanished_without_announcing_it_is_held_for_the_delay() -> None:
    topic, members = three_running()
    lost = topic.shares()["m3"]
    del members["m3"]
    vanished = step(topic, members, NOW + 1_000)
    assert vanished.bumped
    assert delay_of(vanished) == DELAY
    shares = topic.shares()
    assert not lost & (shares["m1"] | shares["m2"]), "held back for the crashed member's return"
    assert vanished.wake_at_ms == NOW + 1_000 + DELAY


def test_a_departed_leaving_members_work_goes_at_once_while_a_crashed_ones_is_held() -> None:
    # Four members; m4 crashes, then m3 (leaving, mid hand-over) departs while m4's delay runs.
    topic, members = three_running(("m1", "m2", "m3", "m4", "m5", "m6"))
    lost = topic.shares()["m4"]
    del members["m4"]
    vanished = step(topic, members, NOW + 500)
    assert delay_of(vanished) == DELAY
    for m in members:
        topic.report(m, NOW + 501)
    kept = handing_over(topic, members, NOW + 1_000)
    del members["m3"]
    departed = step(topic, members, NOW + 21_000)
    shares = topic.shares()
    everyone = set().union(*shares.values())
    assert kept <= everyone, "the leaving member's tasks are reassigned at once"
    assert not lost & everyone, "the crashed member's are still held"
    assert delay_of(departed) == DELAY - 20_500
    assert departed.wake_at_ms == NOW + 500 + DELAY


def test_a_leaving_member_that_handed_everything_over_departs_without_a_new_delay() -> None:
    topic, members = three_running()
    handing_over(topic, members, NOW + 1_000)
    # Both learners ready: promoted, then m3 releases them and its share is empty.
    state = topic.state
    assert state is not None and state.target is not None
    for entry in state.target.members:
        ready = frozenset(replace(x, ready=True) for x in entry.learners)
        value = CurrentMemberAssignmentValue(state.target.assignment_epoch, 0, entry.assigned, 2, b"", ready)
        topic.write([(CurrentMemberAssignmentKey(G, entry.member_id), value)], NOW + 2_000)
    step(topic, members, NOW + 2_001)
    assert topic.shares()["m3"] == set()
    for m in members:
        topic.report(m, NOW + 2_002)
    del members["m3"]
    departed = step(topic, members, NOW + 3_000)
    assert delay_of(departed) == 0
    assert set().union(*topic.shares().values()) == {TaskId("a", n) for n in range(6)}


# ------------------------------------------------------- real herders (tests/support/reconcile_model)


def test_real_herders_a_leaving_worker_stopped_mid_hand_over_has_its_tasks_started_elsewhere_at_once() -> (
    None
):
    """The shell's ``Worker.stop`` past ``rebalance.timeout.ms``: the learners of the leaving worker's tasks
    never got ready; it stops everything and leaves. The others start those tasks in the round that
    follows, without the model clock moving (nothing waits for ``scheduled.rebalance.max.delay.ms``); no
    task ever runs on two members (the model checks after every step)."""
    model = ReconcileModel(
        ("m1", "m2", "m3"), {"a": 6}, max_delay_ms=DELAY, warmup=WARMUP, learns=True, prepare_in_settle=False
    )
    model.settle()
    leaving = model.members["m3"]
    kept = set(leaving.tasks)
    assert kept
    model.begin_leave("m3")
    for _ in range(3):
        model.quiet_pass()
    assert leaving.tasks == kept and not leaving.ready_to_leave, "still handing over: learners not ready"
    started = model.now_ms
    model.remove("m3")  # stops what it runs, then LeaveGroup
    model.begin_round("m1", ["m1", "m2"])
    for _ in range(4):
        model.quiet_pass()
    assert model.now_ms == started
    assert kept <= model.members["m1"].tasks | model.members["m2"].tasks
    model.assert_converged()


def test_a_leaving_worker_dropped_from_the_group_stops_everything_before_it_rejoins() -> None:
    model = ReconcileModel(("m1", "m2"), {"a": 4}, max_delay_ms=DELAY)
    model.settle()
    leaving, staying = model.members["m2"], model.members["m1"]
    assert leaving.tasks and staying.tasks
    model.execute(leaving, leaving.herder.begin_leave())
    actions = leaving.herder.on_rejoin_preparing(False, ProtocolName.SESSIONED, dropped=True)
    stopped = {a.task for a in actions if isinstance(a, StopTask)}
    assert stopped == leaving.tasks
    assert not leaving.herder.owned_tasks and not leaving.herder.owned_connectors
    # A member that is not leaving keeps its work when dropped (Java's cooperative rejoin reports it).
    assert staying.herder.on_rejoin_preparing(False, ProtocolName.SESSIONED, dropped=True) == []


# ------------------------------------------------- a leaving member's learners stay where they are learning


def learners_by_task(topic: Topic) -> dict[TaskId, tuple[str, int]]:
    state = topic.state
    assert state is not None and state.target is not None
    return {x.task: (m.member_id, x.since_ms) for m in state.target.members for x in m.learners}


def test_a_leaving_members_learners_are_not_moved_when_some_of_them_are_promoted() -> None:
    """Five members, 40 tasks; m5 leaves. Its eight tasks are learned by the others at once, two each; as
    each promotion lands, the next target must keep every other learner where it is (same member, same
    since). bench/rolling.py at 5 x 200 (2026-11-29 07:00): the assignor re-levelled the tasks still
    learned over loads that each promotion changed, so learners moved to another member with each target
    (hundreds of preparations discarded in a 20 s hand-over of 80 tasks), few got ready in time, and the
    hand-over ran past ``rebalance.timeout.ms`` three times in five."""
    work = {"a": 40}
    members = {m: member(m) for m in ("m1", "m2", "m3", "m4", "m5")}
    topic, now = Topic(), NOW
    for _ in range(4):
        step(topic, members, now, work)
        for m in members:
            topic.report(m, now + 1)
        now += 10
    assert all(len(s) == 8 for s in topic.shares().values()), topic.shares()
    members["m5"] = member("m5", leaving=True)
    step(topic, members, now, work)
    for m in members:
        topic.report(m, now + 1)
    first = learners_by_task(topic)
    assert set(first) == topic.shares()["m5"]
    assert sorted(m for m, _since in first.values()) == ["m1", "m1", "m2", "m2", "m3", "m3", "m4", "m4"]
    promoted: set[TaskId] = set()
    for task in sorted(first):  # one learner after another gets ready and is promoted
        learner = first[task][0]
        state = topic.state
        assert state is not None and state.target is not None
        entry = next(m for m in state.target.members if m.member_id == learner)
        ready = frozenset(replace(x, ready=x.task == task) for x in entry.learners)
        value = CurrentMemberAssignmentValue(state.target.assignment_epoch, 0, entry.assigned, 2, b"", ready)
        now += 100
        topic.write([(CurrentMemberAssignmentKey(G, learner), value)], now)
        decision = step(topic, members, now + 1, work)
        assert decision.handover is not None and decision.handover.promoted == {task}
        promoted.add(task)
        assert task in topic.shares()[learner]
        assert learners_by_task(topic) == {t: first[t] for t in first if t not in promoted}, (
            "a learner moved to another member"
        )
        for m in members:
            topic.report(m, now + 2)
    shares = topic.shares()
    assert shares["m5"] == set()
    assert all(len(shares[m]) == 10 for m in ("m1", "m2", "m3", "m4")), shares
