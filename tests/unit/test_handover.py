"""The coordinator's warm-up hand-over (issue 25; ``runtime/group/handover.py``): ``plan`` as a table of the
rules, ``due_learners`` (when a learner calls for a new target), then ``coordinate`` with warm-up on, through
the real codec: the learners a target carries are what the next coordinator (the same leader, or a new
one) reads back.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pytest

from kconnect.runtime.group import group_records as gr
from kconnect.runtime.group import protocol
from kconnect.runtime.group.coordinator import CoordinatorInput, coordinate
from kconnect.runtime.group.group_records import (
    Assigned,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    GroupState,
    Learner,
    RecordKey,
    RecordValue,
    TargetAssignmentValue,
    TargetMember,
)
from kconnect.runtime.group.handover import (
    Candidate,
    HandOver,
    WarmupSettings,
    due_learners,
    learner_deadline,
    plan,
)
from kconnect.runtime.group.protocol import ProtocolName, WorkerState
from kconnect.runtime.ids import TaskId

NOW = 1_700_000_000_000
WARMUP = WarmupSettings(max_warmup_tasks=2, warmup_timeout_ms=60_000, graceful_timeout_ms=5_000)
OFF = WarmupSettings()


def t(n: int, connector: str = "a") -> TaskId:
    return TaskId(connector, n)


def A(*tasks: TaskId, connectors: Sequence[str] = ()) -> Assigned:
    return Assigned(frozenset(connectors), frozenset(tasks))


def target(**members: tuple[Assigned, frozenset[Learner]]) -> TargetAssignmentValue:
    return TargetAssignmentValue(
        4,
        tuple(
            TargetMember(m, 0, share, 2, b"", learners) for m, (share, learners) in sorted(members.items())
        ),
    )


def record(held: Assigned, *learners: Learner) -> CurrentMemberAssignmentValue:
    return CurrentMemberAssignmentValue(4, 0, held, 2, b"", frozenset(learners))


def L(task: TaskId, since_ms: int = NOW, ready: bool = False) -> Learner:
    return Learner(task, ready, since_ms)


NONE: frozenset[Learner] = frozenset()
#: m1 runs a-0..a-3; m2 joined. The assignor wants a-2 and a-3 on m2.
BEFORE = target(m1=(A(t(0), t(1), t(2), t(3)), NONE), m2=(A(), NONE))
RUNS = {"m1": record(A(t(0), t(1), t(2), t(3))), "m2": record(A())}
DESIRED = {"m1": A(t(0), t(1)), "m2": A(t(2), t(3))}
BOTH_LEARN = {"m1": Candidate(learns=True), "m2": Candidate(learns=True)}


@dataclass(frozen=True)
class Row:
    """One situation: what the assignor wants, the target in force, the records, who can learn; and the
    shares and learners of the next target the hand-over must produce."""

    desired: Mapping[str, Assigned]
    shares: Mapping[str, Assigned]
    learners: Mapping[str, frozenset[Learner]]
    previous: TargetAssignmentValue = BEFORE
    current: Mapping[str, CurrentMemberAssignmentValue] = field(default_factory=lambda: RUNS)
    candidates: Mapping[str, Candidate] = field(default_factory=lambda: BOTH_LEARN)
    settings: WarmupSettings = WARMUP
    now_ms: int = NOW
    promoted: frozenset[TaskId] = frozenset()
    expired: frozenset[TaskId] = frozenset()
    waiting: frozenset[TaskId] = frozenset()


ROWS: dict[str, Row] = {
    "off-moves-plainly": Row(DESIRED, DESIRED, {"m1": NONE, "m2": NONE}, settings=OFF),
    "scale-out-learners-first": Row(
        DESIRED,
        {"m1": A(t(0), t(1), t(2), t(3)), "m2": A()},
        {"m1": NONE, "m2": frozenset({L(t(2)), L(t(3))})},
    ),
    "a-member-that-cannot-learn-gets-it-plainly": Row(
        DESIRED,
        DESIRED,
        {"m1": NONE, "m2": NONE},
        candidates={"m1": Candidate(learns=True), "m2": Candidate(learns=False)},
    ),
    "cap-one-learner-the-other-move-waits-with-its-owner": Row(
        DESIRED,
        {"m1": A(t(0), t(1), t(2), t(3)), "m2": A()},
        {"m1": NONE, "m2": frozenset({L(t(2))})},
        settings=replace(WARMUP, max_warmup_tasks=1),
        waiting=frozenset({t(3)}),
    ),
    "learning-goes-on-with-its-first-since": Row(
        DESIRED,
        {"m1": A(t(0), t(1), t(2), t(3)), "m2": A()},
        {"m1": NONE, "m2": frozenset({L(t(2), NOW - 1_000), L(t(3), NOW - 1_000)})},
        previous=target(
            m1=(A(t(0), t(1), t(2), t(3)), NONE),
            m2=(A(), frozenset({L(t(2), NOW - 1_000), L(t(3), NOW - 1_000)})),
        ),
    ),
    "ready-is-promoted-the-other-keeps-learning": Row(
        DESIRED,
        {"m1": A(t(0), t(1), t(3)), "m2": A(t(2))},
        {"m1": NONE, "m2": frozenset({L(t(3), NOW - 1_000)})},
        previous=target(
            m1=(A(t(0), t(1), t(2), t(3)), NONE),
            m2=(A(), frozenset({L(t(2), NOW - 1_000), L(t(3), NOW - 1_000)})),
        ),
        current={
            "m1": RUNS["m1"],
            "m2": record(A(), L(t(2), NOW - 1_000, ready=True), L(t(3), NOW - 1_000)),
        },
        promoted=frozenset({t(2)}),
    ),
    "ready-for-an-older-learner-does-not-count": Row(
        DESIRED,
        {"m1": A(t(0), t(1), t(2), t(3)), "m2": A()},
        {"m1": NONE, "m2": frozenset({L(t(2), NOW - 1_000), L(t(3), NOW - 1_000)})},
        previous=target(
            m1=(A(t(0), t(1), t(2), t(3)), NONE),
            m2=(A(), frozenset({L(t(2), NOW - 1_000), L(t(3), NOW - 1_000)})),
        ),
        current={"m1": RUNS["m1"], "m2": record(A(), L(t(2), NOW - 90_000, ready=True))},
    ),
    "past-its-deadline-dropped-and-moved-plainly": Row(
        DESIRED,
        {"m1": A(t(0), t(1), t(3)), "m2": A(t(2))},
        {"m1": NONE, "m2": frozenset({L(t(3), NOW - 1_000)})},
        previous=target(
            m1=(A(t(0), t(1), t(2), t(3)), NONE),
            m2=(A(), frozenset({L(t(2), NOW - 60_000), L(t(3), NOW - 1_000)})),
        ),
        expired=frozenset({t(2)}),
    ),
    "leaving-owner-bounded-by-the-graceful-timeout": Row(
        {"m1": A(), "m2": A(t(0), t(1), t(2), t(3))},
        {"m1": A(t(0), t(1), t(2)), "m2": A(t(3))},
        {"m1": NONE, "m2": frozenset({L(t(0), NOW - 4_000), L(t(1), NOW - 4_000), L(t(2))})},
        previous=target(
            m1=(A(t(0), t(1), t(2), t(3)), NONE),
            m2=(A(), frozenset({L(t(0), NOW - 4_000), L(t(1), NOW - 4_000), L(t(3), NOW - 5_000)})),
        ),
        candidates={"m1": Candidate(learns=True, leaving=True), "m2": Candidate(learns=True)},
        # a-3 is past 5 s (graceful), far from 60 s (warm-up): dropped, it moves plainly; a-0 and a-1 go on
        # learning; a-2, new, is learned too although m2 is past max.warmup.tasks: its owner is leaving.
        expired=frozenset({t(3)}),
    ),
    "leaving-owner-all-learned-at-once-past-the-cap": Row(
        {"m1": A(), "m2": A(t(0), t(1), t(2), t(3))},
        {"m1": A(t(0), t(1), t(2), t(3)), "m2": A()},
        {"m1": NONE, "m2": frozenset({L(t(0)), L(t(1)), L(t(2)), L(t(3))})},
        candidates={"m1": Candidate(learns=True, leaving=True), "m2": Candidate(learns=True)},
    ),
    "a-leaving-owners-learners-fill-the-slots-other-moves-wait": Row(
        # m1 leaves with a-0, a-1; m3 (staying) gives a-2 to m2 for balance: m2 learns m1's two, and a-2,
        # finding no free slot (cap 1), waits with m3.
        {"m1": A(), "m2": A(t(0), t(1), t(2)), "m3": A(t(3))},
        {"m1": A(t(0), t(1)), "m2": A(), "m3": A(t(2), t(3))},
        {"m1": NONE, "m2": frozenset({L(t(0)), L(t(1))}), "m3": NONE},
        previous=target(m1=(A(t(0), t(1)), NONE), m2=(A(), NONE), m3=(A(t(2), t(3)), NONE)),
        current={"m1": record(A(t(0), t(1))), "m2": record(A()), "m3": record(A(t(2), t(3)))},
        candidates={
            "m1": Candidate(learns=True, leaving=True),
            "m2": Candidate(learns=True),
            "m3": Candidate(learns=True),
        },
        settings=replace(WARMUP, max_warmup_tasks=1),
        waiting=frozenset({t(2)}),
    ),
    "a-leaving-member-learns-nothing": Row(
        # Not an assignor's output (it gives a leaving member nothing), to show both directions: what moves
        # to the leaving m1 goes plainly; what moves off it to m2 is learned there first.
        {"m1": A(t(2), t(3)), "m2": A(t(0), t(1))},
        {"m1": A(t(0), t(1), t(2), t(3)), "m2": A()},
        {"m1": NONE, "m2": frozenset({L(t(0)), L(t(1))})},
        previous=target(m1=(A(t(0), t(1)), NONE), m2=(A(t(2), t(3)), NONE)),
        current={"m1": record(A(t(0), t(1))), "m2": record(A(t(2), t(3)))},
        candidates={"m1": Candidate(learns=True, leaving=True), "m2": Candidate(learns=True)},
    ),
    "owner-gone-nothing-to-hand-over": Row(
        {"m2": A(t(0), t(1), t(2), t(3))},
        {"m2": A(t(0), t(1), t(2), t(3))},
        {"m2": NONE},
        previous=target(m1=(A(t(0), t(1), t(2), t(3)), NONE), m2=(A(), frozenset({L(t(2)), L(t(3))}))),
        candidates={"m2": Candidate(learns=True)},
    ),
    "owner-not-running-it-yet-moves-plainly": Row(
        DESIRED, DESIRED, {"m1": NONE, "m2": NONE}, current={"m1": record(A(t(0), t(1))), "m2": record(A())}
    ),
    "a-connector-always-moves-plainly": Row(
        {"m1": A(), "m2": A(connectors=("a",))},
        {"m1": A(), "m2": A(connectors=("a",))},
        {"m1": NONE, "m2": NONE},
        previous=target(m1=(A(connectors=("a",)), NONE), m2=(A(), NONE)),
        current={"m1": record(A(connectors=("a",))), "m2": record(A())},
    ),
    "a-learner-whose-move-went-away-is-dropped": Row(
        {"m1": A(t(0), t(1), t(2), t(3)), "m2": A()},
        {"m1": A(t(0), t(1), t(2), t(3)), "m2": A()},
        {"m1": NONE, "m2": NONE},
        previous=target(m1=(A(t(0), t(1), t(2), t(3)), NONE), m2=(A(), frozenset({L(t(2)), L(t(3))}))),
    ),
}


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
def test_plan(row: Row) -> None:
    out = plan(row.desired, row.previous, row.current, row.candidates, row.settings, row.now_ms)
    assert dict(out.shares) == dict(row.shares)
    assert dict(out.learners) == dict(row.learners)
    assert (out.promoted, out.expired, out.waiting) == (row.promoted, row.expired, row.waiting)
    leaving = {m for m, c in row.candidates.items() if c.leaving}
    _assert_sound(out, row.desired, row.settings, leaving)


def _assert_sound(
    out: HandOver, desired: Mapping[str, Assigned], settings: WarmupSettings, leaving: set[str]
) -> None:
    """Whatever the row: one owner per task, every desired task in some share, learners never owners, and
    no member past ``max.warmup.tasks`` but for tasks of leaving members."""
    owners: dict[TaskId, str] = {}
    for member, share in out.shares.items():
        for task in share.tasks:
            assert task not in owners, f"{task} in the shares of {owners[task]} and {member}"
            owners[task] = member
    assert {x for s in desired.values() for x in s.tasks} == set(owners)
    for member, learners in out.learners.items():
        assert len([x for x in learners if owners[x.task] not in leaving]) <= settings.max_warmup_tasks
        for learner in learners:
            assert owners[learner.task] != member


def test_deadlines() -> None:
    learner = L(t(0), 1_000)
    assert learner_deadline(learner, WARMUP, owner_leaving=False) == 61_000
    assert learner_deadline(learner, WARMUP, owner_leaving=True) == 6_000
    short = replace(WARMUP, warmup_timeout_ms=2_000)
    assert learner_deadline(learner, short, owner_leaving=True) == 3_000


def test_settings_refuse_negative_bounds() -> None:
    with pytest.raises(ValueError, match="max_warmup_tasks must not be negative, got -1"):
        WarmupSettings(max_warmup_tasks=-1)
    assert not WarmupSettings().enabled and WARMUP.enabled


@pytest.mark.parametrize(
    ("current", "now", "expected"),
    [
        ({"m2": record(A(), L(t(2), NOW))}, NOW + 1_000, (False, NOW + 60_000)),
        ({"m2": record(A(), L(t(2), NOW, ready=True))}, NOW + 1_000, (True, None)),
        ({"m2": record(A(), L(t(2), NOW - 5, ready=True))}, NOW + 1_000, (False, NOW + 60_000)),
        ({}, NOW + 60_000, (True, None)),
        ({}, NOW + 59_999, (False, NOW + 60_000)),
    ],
    ids=["learning", "ready", "ready-for-another-learner", "at-the-deadline", "just-before"],
)
def test_due_learners(
    current: Mapping[str, CurrentMemberAssignmentValue], now: int, expected: tuple[bool, int | None]
) -> None:
    previous = target(m1=(A(t(0), t(2)), NONE), m2=(A(), frozenset({L(t(2), NOW)})))
    assert due_learners(previous, current, BOTH_LEARN, WARMUP, now) == expected


def test_due_learners_of_a_leaving_owner_keep_the_graceful_deadline() -> None:
    previous = target(m1=(A(t(0), t(2)), NONE), m2=(A(), frozenset({L(t(2), NOW)})))
    leaving = {"m1": Candidate(learns=True, leaving=True), "m2": Candidate(learns=True)}
    assert due_learners(previous, {}, leaving, WARMUP, NOW) == (False, NOW + 5_000)
    assert due_learners(previous, {}, leaving, WARMUP, NOW + 5_000) == (True, None)


# ------------------------------------------------------------------------------------ coordinate

G = "connect-cluster"
Record = tuple[RecordKey, RecordValue | None]


@dataclass
class Topic:
    """The group-records partition, folded back from bytes as a worker folds it."""

    folded: gr.GroupRecords = field(default_factory=gr.GroupRecords)
    offset: int = 0

    @property
    def state(self) -> GroupState | None:
        return self.folded.groups.get(G)

    def write(self, records: Sequence[Record], now: int) -> None:
        for key, value in records:
            kb, vb = gr.encode_key(key), None if value is None else gr.encode_value(value)
            self.folded = gr.apply(self.folded, kb, vb, offset=self.offset, timestamp_ms=now)
            self.offset += 1

    def report(self, member: str, now: int, *, ready: bool = False) -> None:
        """``member`` acknowledges the target in force (its whole share) with its learners."""
        state = self.state
        assert state is not None and state.target is not None
        entry = next(m for m in state.target.members if m.member_id == member)
        learners = frozenset(replace(x, ready=ready) for x in entry.learners)
        value = CurrentMemberAssignmentValue(
            state.target.assignment_epoch, 0, entry.assigned, 2, b"", learners
        )
        self.write([(CurrentMemberAssignmentKey(G, member), value)], now)


def member(name: str, *, learns: bool = True, leaving: bool = False) -> tuple[int, WorkerState]:
    return protocol.V2, WorkerState(
        f"http://{name}:8083/", 10, None, leaving=leaving, reconciles=True, learns=learns
    )


def inputs(
    members: Mapping[str, tuple[int, WorkerState]],
    now: int,
    *,
    leader: str = "m1",
    warmup: WarmupSettings = WARMUP,
    fresh: bool = False,
) -> CoordinatorInput:
    return CoordinatorInput(
        group_id=G,
        generation=1,
        protocol=ProtocolName.SESSIONED,
        leader_id=leader,
        leader_url=f"http://{leader}:8083/",
        members=members,
        work={"a": 4},
        config_offset=10,
        now_ms=now,
        max_delay_ms=0,
        rebalance_timeout_ms=600_000,
        warmup=warmup,
        fresh=fresh,
    )


def learners_of(topic: Topic) -> dict[str, set[TaskId]]:
    state = topic.state
    assert state is not None and state.target is not None
    return {m.member_id: {x.task for x in m.learners} for m in state.target.members}


def shares_of(topic: Topic) -> dict[str, set[TaskId]]:
    state = topic.state
    assert state is not None and state.target is not None
    return {m.member_id: set(m.assigned.tasks) for m in state.target.members}


def one_member_running_everything(warmup: WarmupSettings = WARMUP) -> Topic:
    topic = Topic()
    decision = coordinate(topic.state, inputs({"m1": member("m1")}, NOW, warmup=warmup))
    topic.write(decision.records, NOW)
    topic.report("m1", NOW)
    return topic


def test_a_joining_member_learns_first_and_is_promoted_once_ready() -> None:
    topic = one_member_running_everything()
    two = {"m1": member("m1"), "m2": member("m2")}
    decision = coordinate(topic.state, inputs(two, NOW + 10))
    topic.write(decision.records, NOW + 10)
    assert decision.bumped and decision.handover is not None
    assert shares_of(topic) == {"m1": {t(0), t(1), t(2), t(3)}, "m2": set()}
    assert learners_of(topic) == {"m1": set(), "m2": {t(2), t(3)}}
    assert decision.wake_at_ms == NOW + 10 + 60_000  # the learners' deadline
    topic.report("m1", NOW + 20)
    topic.report("m2", NOW + 20)  # acknowledged, not ready: nothing to do
    quiet = coordinate(topic.state, inputs(two, NOW + 30))
    assert not quiet.bumped and quiet.records == () and quiet.wake_at_ms == NOW + 10 + 60_000
    topic.report("m2", NOW + 40, ready=True)
    promoted = coordinate(topic.state, inputs(two, NOW + 50))
    topic.write(promoted.records, NOW + 50)
    assert promoted.bumped and promoted.handover is not None and promoted.handover.promoted == {t(2), t(3)}
    assert shares_of(topic) == {"m1": {t(0), t(1)}, "m2": {t(2), t(3)}}
    assert learners_of(topic) == {"m1": set(), "m2": set()}


def test_a_learner_not_ready_in_time_is_dropped_and_its_task_moves_plainly() -> None:
    topic = one_member_running_everything()
    two = {"m1": member("m1"), "m2": member("m2")}
    first = coordinate(topic.state, inputs(two, NOW + 10))
    topic.write(first.records, NOW + 10)
    topic.report("m1", NOW + 20)
    topic.report("m2", NOW + 20)
    assert not coordinate(topic.state, inputs(two, NOW + 10 + 59_999)).bumped
    dropped = coordinate(topic.state, inputs(two, NOW + 10 + 60_000))
    topic.write(dropped.records, NOW + 10 + 60_000)
    assert dropped.handover is not None and dropped.handover.expired == {t(2), t(3)}
    assert shares_of(topic) == {"m1": {t(0), t(1)}, "m2": {t(2), t(3)}}
    assert learners_of(topic) == {"m1": set(), "m2": set()}


def test_a_new_coordinator_resumes_the_warm_up_from_the_records() -> None:
    topic = one_member_running_everything()
    two = {"m1": member("m1"), "m2": member("m2")}
    first = coordinate(topic.state, inputs(two, NOW + 10))
    topic.write(first.records, NOW + 10)
    topic.report("m1", NOW + 20)
    topic.report("m2", NOW + 20)
    # m2 now leads (m1 still runs its share): same learners, same deadline, nothing new to write.
    resumed = coordinate(topic.state, inputs(two, NOW + 30, leader="m2"))
    assert not resumed.bumped and resumed.wake_at_ms == NOW + 10 + 60_000
    topic.report("m2", NOW + 40, ready=True)
    promoted = coordinate(topic.state, inputs(two, NOW + 50, leader="m2"))
    topic.write(promoted.records, NOW + 50)
    assert shares_of(topic) == {"m1": {t(0), t(1)}, "m2": {t(2), t(3)}}


def test_warm_up_off_moves_plainly_and_a_fresh_leader_still_hands_over() -> None:
    two = {"m1": member("m1"), "m2": member("m2")}
    topic = one_member_running_everything(OFF)
    decision = coordinate(topic.state, inputs(two, NOW + 10, warmup=OFF))
    topic.write(decision.records, NOW + 10)
    assert learners_of(topic) == {"m1": set(), "m2": set()}
    assert shares_of(topic)["m2"], "the new member gets its share at once"
    # A leader new to the group computes without the assignor's memory, but the records still say m1 runs
    # everything: what moves is learned first.
    topic = one_member_running_everything()
    decision = coordinate(topic.state, inputs(two, NOW + 10, leader="m2", fresh=True))
    topic.write(decision.records, NOW + 10)
    assert learners_of(topic)["m2"] and not shares_of(topic)["m2"]


def test_warm_up_off_writes_the_very_records_it_wrote_before() -> None:
    # Off, or no member able to learn: the same records, byte for byte, as a coordinator without warm-up.
    two_plain = {"m1": member("m1", learns=False), "m2": member("m2", learns=False)}
    for warmup in (OFF, WARMUP):
        topic = one_member_running_everything(warmup)
        with_warmup = coordinate(topic.state, inputs(two_plain, NOW + 10, warmup=warmup))
        without = coordinate(topic.state, replace(inputs(two_plain, NOW + 10), warmup=OFF))
        assert [gr.encode_value(v) for _k, v in with_warmup.records if v is not None] == [
            gr.encode_value(v) for _k, v in without.records if v is not None
        ]
