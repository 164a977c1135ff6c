"""The coordinator of ``group.protocol=connect`` (the KIP-848 seed's epochs, kept by the leader): ``judge``
as a table of the seed's member-epoch check, then ``coordinate`` scenarios.

Every scenario goes through the real codec: the records a :class:`Decision` lists are encoded, folded back
from bytes with ``group_records.apply`` (offset and timestamp as a worker reads them) and the next
coordination starts from that folded state. What a scenario checks of the records, it checks of the
decoded ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace

import pytest

from kconnect.runtime.group import group_records as gr
from kconnect.runtime.group import leader_memory, protocol
from kconnect.runtime.group.cooperative_assignor import CooperativeState, cooperative_assign
from kconnect.runtime.group.coordinator import (
    CoordinatorInput,
    Decision,
    Verdict,
    coordinate,
    is_reconciled_target,
    judge,
    target_share,
)
from kconnect.runtime.group.group_records import (
    Assigned,
    ConnectorsTasksKey,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    GroupConfigurationKey,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupState,
    MemberMetadataKey,
    RecordKey,
    RecordValue,
    TargetAssignmentKey,
    TargetAssignmentValue,
    TargetMember,
)
from kconnect.runtime.group.handover import WarmupSettings
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.ids import TaskId

G = "connect-cluster"
NOW = 1_700_000_000_000
DELAY = 30_000
TIMEOUT = 60_000
SESSIONED = ProtocolName.SESSIONED

Record = tuple[RecordKey, RecordValue | None]


def T(connector: str, *numbers: int) -> frozenset[TaskId]:
    return frozenset(TaskId(connector, n) for n in numbers)


def A(connectors: Sequence[str] = (), tasks: frozenset[TaskId] = frozenset()) -> Assigned:
    return Assigned(frozenset(connectors), tasks)


def everything(work: Mapping[str, int]) -> Assigned:
    return A(tuple(work), frozenset(TaskId(c, n) for c, count in work.items() for n in range(count)))


# ------------------------------------------------------------------------------------------ judge


def target_of(epoch: int, **shares: Assigned) -> TargetAssignmentValue:
    return TargetAssignmentValue(
        epoch, tuple(TargetMember(m, 0, s, 2, b"") for m, s in sorted(shares.items()))
    )


def acked(epoch: int, held: Assigned) -> CurrentMemberAssignmentValue:
    return CurrentMemberAssignmentValue(epoch, 0, held, 2, b"")


#: The target every row is judged against: epoch 5, m1 gets connector a and its two tasks, m2 gets b.
JUDGED = target_of(5, m1=A(("a",), T("a", 0, 1)), m2=A(("b",), T("b", 0)))

JUDGE_ROWS = [
    # (id, member, its record, target age, expected verdict and member epoch)
    ("at-target-holding-its-share", "m1", acked(5, A(("a",), T("a", 0, 1))), 0, (Verdict.STABLE, 5)),
    ("at-target-holding-a-subset", "m1", acked(5, A((), T("a", 1))), 0, (Verdict.STABLE, 5)),
    ("at-target-holding-nothing", "m1", acked(5, A()), 0, (Verdict.STABLE, 5)),
    # The seed's edge case: the response carrying the new epoch was lost; a subset is safe to move on.
    ("behind-holding-a-subset-lost-ack", "m1", acked(4, A(("a",), T("a", 0))), 10, (Verdict.ACCEPTED, 5)),
    ("far-behind-holding-nothing", "m1", acked(1, A()), TIMEOUT * 9, (Verdict.ACCEPTED, 5)),
    ("behind-holding-revoked-work", "m1", acked(4, A(("a", "b"), T("a", 0))), 1_000, (Verdict.REVOKING, 4)),
    (
        "behind-at-the-timeout-still-revoking",
        "m1",
        acked(4, A((), T("b", 0))),
        TIMEOUT,
        (Verdict.REVOKING, 4),
    ),
    ("behind-past-the-timeout", "m1", acked(4, A((), T("b", 0))), TIMEOUT + 1, (Verdict.FENCED, 4)),
    ("at-target-holding-foreign-work", "m1", acked(5, A(("a",), T("b", 0))), 0, (Verdict.FENCED, 5)),
    ("at-target-holding-an-unconfigured-task", "m1", acked(5, A((), T("a", 7))), 0, (Verdict.FENCED, 5)),
    ("epoch-ahead-of-the-target", "m1", acked(6, A(("a",))), 0, (Verdict.FENCED, 6)),
    ("epoch-ahead-holding-nothing", "m1", acked(9, A()), 0, (Verdict.FENCED, 9)),
    ("no-record-joining", "m1", None, 0, (Verdict.JOINING, 0)),
    ("no-record-not-in-target", "m3", None, TIMEOUT * 2, (Verdict.JOINING, 0)),
    ("not-in-target-holding-nothing", "m3", acked(5, A()), 0, (Verdict.STABLE, 5)),
    ("not-in-target-behind-holding-work", "m3", acked(4, A(("a",))), 0, (Verdict.REVOKING, 4)),
]


@pytest.mark.parametrize(
    ("member", "current", "age", "expected"), [r[1:] for r in JUDGE_ROWS], ids=[r[0] for r in JUDGE_ROWS]
)
def test_judge(
    member: str, current: CurrentMemberAssignmentValue | None, age: int, expected: tuple[Verdict, int]
) -> None:
    assert judge(current, JUDGED, member, target_age_ms=age, rebalance_timeout_ms=TIMEOUT) == expected


# ------------------------------------------------------------------------------------ the topic


def decoded(key: bytes, value: bytes | None) -> Record:
    k = gr.decode_key(key)
    return k, None if value is None else gr.decode_value(k, value)


@dataclass
class Topic:
    """One partition of the group-records topic, folded from bytes as a worker folds it."""

    folded: gr.GroupRecords = field(default_factory=gr.GroupRecords)
    offset: int = 0
    #: Every record written, decoded back from its bytes.
    log: list[Record] = field(default_factory=list)

    @property
    def state(self) -> GroupState | None:
        return self.folded.groups.get(G)

    def write(self, records: Sequence[Record], now: int) -> list[Record]:
        """Encode ``records``, fold them back at ``now`` and return them as decoded from the bytes."""
        out = []
        for key, value in records:
            kb, vb = gr.encode_key(key), None if value is None else gr.encode_value(value)
            self.folded = gr.apply(self.folded, kb, vb, offset=self.offset, timestamp_ms=now)
            self.offset += 1
            out.append(decoded(kb, vb))
        self.log += out
        return out

    def ack(self, member: str, now: int, held: Assigned | None = None) -> None:
        """``member`` acknowledges the current target holding ``held`` (its whole share by default)."""
        state = self.state
        assert state is not None and state.target is not None
        share = target_share(state.target, member)
        assert share is not None
        value = acked(state.target.assignment_epoch, share if held is None else held)
        self.write([(CurrentMemberAssignmentKey(G, member), value)], now)


def worker(
    member: str,
    held: Assigned | None = None,
    *,
    version: int = protocol.V2,
    leaving: bool = False,
    static: Assigned | None = None,
) -> tuple[int, WorkerState]:
    allocation = None
    if held is not None:
        allocation = ConnectAssignment(
            version, 0, "m1", "http://m1:8083/", 10, tuple(held.connectors), tuple(held.tasks)
        )
    return version, WorkerState(
        f"http://{member}:8083/",
        10,
        allocation,
        leaving=leaving,
        worker_id=member if version >= protocol.V3 else None,
        static_connectors=tuple(static.connectors) if static else (),
        static_tasks=tuple(static.tasks) if static else (),
        reconciles=True,
    )


def inputs(
    members: Mapping[str, tuple[int, WorkerState]],
    work: Mapping[str, int],
    *,
    now: int = NOW,
    generation: int = 1,
    selected: ProtocolName = SESSIONED,
    max_delay_ms: int = DELAY,
) -> CoordinatorInput:
    return CoordinatorInput(
        group_id=G,
        generation=generation,
        protocol=selected,
        leader_id="m1",
        leader_url="http://m1:8083/",
        members=members,
        work=work,
        config_offset=10,
        now_ms=now,
        max_delay_ms=max_delay_ms,
        rebalance_timeout_ms=TIMEOUT,
        configuration=(("scheduled.rebalance.max.delay.ms", str(max_delay_ms)),),
    )


def step(topic: Topic, inp: CoordinatorInput) -> tuple[Decision, list[Record]]:
    decision = coordinate(topic.state, inp)
    return decision, topic.write(decision.records, inp.now_ms)


def shares(state: GroupState | None) -> dict[str, Assigned]:
    assert state is not None and state.target is not None
    return {m.member_id: m.assigned for m in state.target.members}


def union(*assigned: Assigned) -> Assigned:
    return A(
        frozenset().union(*(a.connectors for a in assigned)), frozenset().union(*(a.tasks for a in assigned))
    )


def assert_disjoint(target: Mapping[str, Assigned]) -> None:
    seen: dict[object, str] = {}
    for member, share in target.items():
        for item in [*share.connectors, *share.tasks]:
            assert item not in seen, f"{item} is in the shares of {seen[item]} and {member}"
            seen[item] = member


def assert_installed(records: list[Record], epoch: int) -> TargetAssignmentValue:
    """A bump's records: the members, the work, the target, the configuration, the group epoch last."""
    kinds = [type(k) for k, _v in records]
    assert kinds[-4:] == [ConnectorsTasksKey, TargetAssignmentKey, GroupConfigurationKey, GroupMetadataKey]
    assert records[-1][1] == GroupMetadataValue(epoch)
    target = records[-3][1]
    assert isinstance(target, TargetAssignmentValue) and target.assignment_epoch == epoch
    ct = records[-4][1]
    assert isinstance(ct, gr.ConnectorsTasksValue) and ct.epoch == epoch
    return target


def connect_assignments(target: TargetAssignmentValue) -> dict[str, ConnectAssignment]:
    return {m.member_id: protocol.decode_assignment(m.metadata) for m in target.members}


def settled(members: Sequence[str], work: Mapping[str, int], *, max_delay_ms: int = DELAY) -> Topic:
    """A reconciled group: a first target installed and acknowledged by every member."""
    topic = Topic()
    decision, _ = step(topic, inputs({m: worker(m) for m in members}, work, max_delay_ms=max_delay_ms))
    assert decision.bumped
    for m in members:
        topic.ack(m, NOW)
    return topic


# ------------------------------------------------------------------------------------ coordinate


WORK = {"a": 2, "b": 3}


def test_first_coordination_after_classic_rounds_installs_a_reconciled_target() -> None:
    # Generation 7 ran a classic cooperative round; its leader recorded it (leader_memory), each member
    # its current assignment.
    topic = Topic()
    members = {m: (protocol.V2, WorkerState(f"http://{m}:8083/", 10)) for m in ("m1", "m2")}
    states = {m: s for m, (_v, s) in members.items()}
    result, memory = cooperative_assign(
        CooperativeState(previous_version=protocol.V2),
        leader_id="m1",
        members=states,
        leader_config_offset=10,
        connectors=WORK,
        version=protocol.V2,
        now_ms=NOW - 5_000,
        max_delay_ms=DELAY,
        generation=7,
    )
    classic = leader_memory.round_records(
        G,
        generation=7,
        protocol_name=SESSIONED,
        members=members,
        assignments=result,
        state=memory,
        configuration=(),
        previous=None,
    )
    held = {m: A(a.connectors, frozenset(a.tasks)) for m, a in result.items()}
    classic += [leader_memory.current_assignment_record(G, m, 7, a, held[m]) for m, a in result.items()]
    topic.write(classic, NOW - 5_000)
    assert topic.state is not None and not is_reconciled_target(topic.state.target)

    # Generation 8 is the reconciling round: the members report what they run.
    decision, records = step(
        topic, inputs({m: worker(m, held[m]) for m in held}, WORK, generation=8, now=NOW)
    )
    assert decision.bumped and decision.group_epoch == decision.assignment_epoch == 8
    target = assert_installed(records, 8)
    assert all(a.reconcile for a in connect_assignments(target).values())
    assert is_reconciled_target(topic.state.target)
    # Declarative and sticky: the classic round's shares are the target, so nothing has to move.
    assert shares(topic.state) == held
    assert union(*held.values()) == everything(WORK)
    # Both classic acknowledgements hold a subset of the new target: accepted at its epoch.
    assert decision.verdicts == {"m1": (Verdict.ACCEPTED, 8), "m2": (Verdict.ACCEPTED, 8)}
    assert decision.fenced == frozenset() and decision.wake_at_ms is None
    # The member metadata records carry the new group epoch, without the allocation.
    metadata = {k.member_id: v for k, v in records if isinstance(k, MemberMetadataKey)}
    assert sorted(metadata) == ["m1", "m2"]
    for value in metadata.values():
        assert value is not None and value.group_epoch == 8
        _version, state = protocol.decode_metadata(value.assignors[0].metadata)
        assert state.allocation is None and state.reconciles


def test_first_coordination_of_a_new_group_starts_at_the_generation() -> None:
    topic = Topic()
    decision, records = step(topic, inputs({"m1": worker("m1"), "m2": worker("m2")}, WORK, generation=3))
    target = assert_installed(records, 3)
    assert decision.verdicts == {"m1": (Verdict.JOINING, 0), "m2": (Verdict.JOINING, 0)}
    got = {m.member_id: m.assigned for m in target.members}
    assert_disjoint(got)
    assert union(*got.values()) == everything(WORK)
    assert all(got.values()), "both members get a share"


def test_nothing_changed_writes_nothing_and_keeps_the_epoch() -> None:
    topic = settled(["m1", "m2"], WORK)
    before = topic.state
    assert before is not None
    decision, records = step(topic, inputs({"m1": worker("m1"), "m2": worker("m2")}, WORK, now=NOW + 1))
    assert records == [] and not decision.bumped
    assert decision.group_epoch == decision.assignment_epoch == before.epoch
    assert decision.verdicts == {"m1": (Verdict.STABLE, 1), "m2": (Verdict.STABLE, 1)}
    # A member's allocation in JoinGroup is not group metadata: reporting one changes nothing either.
    busy = {m: worker(m, shares(before)[m]) for m in ("m1", "m2")}
    decision, records = step(topic, inputs(busy, WORK, now=NOW + 2))
    assert records == [] and not decision.bumped


def test_a_connector_added_bumps_and_installs_a_target_with_it() -> None:
    topic = settled(["m1", "m2"], WORK)
    before = shares(topic.state)
    work = {**WORK, "c": 2}
    decision, records = step(topic, inputs({"m1": worker("m1"), "m2": worker("m2")}, work, now=NOW + 10))
    assert decision.bumped and decision.group_epoch == 2 and decision.assignment_epoch == 2
    target = assert_installed(records, 2)
    ct = records[-4][1]
    assert isinstance(ct, gr.ConnectorsTasksValue) and ct.assigned == everything(work)
    after = {m.member_id: m.assigned for m in target.members}
    assert_disjoint(after)
    assert union(*after.values()) == everything(work)
    # Only the new work moves; nobody gives anything up for it.
    for m in before:
        assert before[m].connectors <= after[m].connectors and before[m].tasks <= after[m].tasks
    assert all(a.reconcile and a.config_offset == 10 for a in connect_assignments(target).values())
    # Acknowledged at epoch 1, each holding a subset of the new target: accepted at epoch 2.
    assert decision.verdicts == {"m1": (Verdict.ACCEPTED, 2), "m2": (Verdict.ACCEPTED, 2)}


@pytest.mark.parametrize(
    ("work", "gone"),
    [
        ({"a": 4, "b": 3}, frozenset()),
        ({"a": 1, "b": 3}, T("a", 1)),
        ({"a": 2, "b": 0}, T("b", 0, 1, 2)),
    ],
    ids=["more-tasks", "fewer-tasks", "no-tasks"],
)
def test_a_task_count_change_bumps(work: dict[str, int], gone: frozenset[TaskId]) -> None:
    topic = settled(["m1", "m2"], WORK)
    _decision, records = step(topic, inputs({"m1": worker("m1"), "m2": worker("m2")}, work, now=NOW + 10))
    target = assert_installed(records, 2)
    after = {m.member_id: m.assigned for m in target.members}
    assert_disjoint(after)
    assert union(*after.values()) == everything(work)
    assert not any(share.tasks & gone for share in after.values())


def test_a_connector_deleted_leaves_every_share_and_the_accounted_work() -> None:
    topic = settled(["m1", "m2"], WORK)
    holder = next(m for m, s in shares(topic.state).items() if "b" in s.connectors)
    decision, records = step(topic, inputs({"m1": worker("m1"), "m2": worker("m2")}, {"a": 2}, now=NOW + 10))
    target = assert_installed(records, 2)
    ct = records[-4][1]
    assert isinstance(ct, gr.ConnectorsTasksValue) and ct.assigned == everything({"a": 2})
    after = {m.member_id: m.assigned for m in target.members}
    assert union(*after.values()) == everything({"a": 2})
    # The member that ran b acknowledged epoch 1 holding it: it must revoke before it reaches epoch 2.
    assert decision.verdicts[holder] == (Verdict.REVOKING, 1)
    assert decision.wake_at_ms == NOW + 10 + TIMEOUT + 1


def test_a_member_joining_gets_a_share_and_the_others_keep_most_of_theirs() -> None:
    work = {"a": 4, "b": 4}
    topic = settled(["m1", "m2"], work)
    before = shares(topic.state)
    members = {m: worker(m) for m in ("m1", "m2", "m3")}
    decision, records = step(topic, inputs(members, work, now=NOW + 10))
    target = assert_installed(records, 2)
    after = {m.member_id: m.assigned for m in target.members}
    assert sorted(after) == ["m1", "m2", "m3"]
    assert_disjoint(after)
    assert union(*after.values()) == everything(work)
    # The fixed point of the cooperative assignor in one target: balanced, and sticky.
    loads = [len(s.connectors) + len(s.tasks) for s in after.values()]
    assert max(loads) - min(loads) <= 2 and len(after["m3"].tasks) >= 2
    # Sticky: m1 and m2 only give up work, and only what m3 takes (nothing moves between them).
    for m in ("m1", "m2"):
        assert after[m].connectors <= before[m].connectors and after[m].tasks <= before[m].tasks
    moved = sum(
        len(before[m].tasks - after[m].tasks) + len(before[m].connectors - after[m].connectors)
        for m in ("m1", "m2")
    )
    assert moved == len(after["m3"].tasks) + len(after["m3"].connectors) <= 4
    metadata = [k.member_id for k, v in records if isinstance(k, MemberMetadataKey) and v is not None]
    assert "m3" in metadata
    assert decision.verdicts["m3"] == (Verdict.JOINING, 0)


def test_a_member_leaving_is_tombstoned_and_its_work_held_back_until_the_delay_is_due() -> None:
    work = {"a": 2, "b": 2}
    topic = settled(["m1", "m2"], work)
    lost = shares(topic.state)["m2"]
    assert lost.connectors or lost.tasks
    left = NOW + 100
    decision, records = step(topic, inputs({"m1": worker("m1")}, work, now=left))
    target = assert_installed(records, 2)
    assert (MemberMetadataKey(G, "m2"), None) in records
    assert (CurrentMemberAssignmentKey(G, "m2"), None) in records
    assert [m.member_id for m in target.members] == ["m1"]
    # Held back: in no share, still accounted for, and the leader wakes when the delay is due.
    assert not (target.members[0].assigned.tasks & lost.tasks)
    assert not (target.members[0].assigned.connectors & lost.connectors)
    ct = records[-4][1]
    assert isinstance(ct, gr.ConnectorsTasksValue) and ct.assigned == everything(work)
    assert decision.wake_at_ms == left + DELAY
    assert connect_assignments(target)["m1"].delay_ms == DELAY
    state = topic.state
    assert state is not None and "m2" not in state.members and "m2" not in state.current

    # Before it is due: nothing to write, and the same wake-up.
    decision, records = step(topic, inputs({"m1": worker("m1")}, work, now=left + DELAY - 1))
    assert records == [] and not decision.bumped and decision.wake_at_ms == left + DELAY

    # Due: a new epoch gives the lost work to the member left.
    decision, records = step(topic, inputs({"m1": worker("m1")}, work, now=left + DELAY))
    target = assert_installed(records, 3)
    assert shares(topic.state) == {"m1": everything(work)}
    assert decision.wake_at_ms is None
    assert connect_assignments(target)["m1"].delay_ms == 0


def test_a_member_coming_back_within_the_delay_gets_its_work_back_when_due() -> None:
    work = {"a": 2, "b": 2}
    topic = settled(["m1", "m2"], work)
    lost = shares(topic.state)["m2"]
    step(topic, inputs({"m1": worker("m1")}, work, now=NOW + 100))
    # m3 replaces m2 before the delay ends: it joins empty, and the held-back work waits for the delay.
    decision, records = step(topic, inputs({"m1": worker("m1"), "m3": worker("m3")}, work, now=NOW + 200))
    target = assert_installed(records, 3)
    assert decision.wake_at_ms == NOW + 100 + DELAY, "the delay still counts from m2's departure"
    during = {m.member_id: m.assigned for m in target.members}
    assert not (union(*during.values()).tasks & lost.tasks)
    _decision, records = step(
        topic, inputs({"m1": worker("m1"), "m3": worker("m3")}, work, now=NOW + 100 + DELAY)
    )
    assert_installed(records, 4)
    after = shares(topic.state)
    assert_disjoint(after)
    assert union(*after.values()) == everything(work)
    assert lost.tasks <= after["m3"].tasks


def test_a_member_dropped_by_the_coordinator_keeps_what_it_runs_under_its_new_member_id() -> None:
    """A coordinator failover answered m2 "unknown member id": it rejoined as m2b, still running its
    share (as Java's worker does under the cooperative protocols) and reporting it in JoinGroup. The work
    is not lost with the old id: the next target gives it to m2b at once, with no delay held."""
    work = {"a": 2, "b": 2}
    topic = settled(["m1", "m2"], work)
    running = shares(topic.state)["m2"]
    assert running.connectors or running.tasks
    members = {"m1": worker("m1"), "m2b": worker("m2b", running)}
    decision, records = step(topic, inputs(members, work, now=NOW + 100))
    target = assert_installed(records, 2)
    after = shares(topic.state)
    assert after["m2b"] == running and "m2" not in after
    assert union(*after.values()) == everything(work)
    assert decision.wake_at_ms is None and connect_assignments(target)["m2b"].delay_ms == 0


def test_a_group_whose_every_member_was_dropped_at_once_gets_its_work_assigned_at_once() -> None:
    """bench/brokers_random.py (issue 29): both workers' coordinator died, both stopped everything (the
    KAFKA-9184 rule), were answered "unknown member id" and rejoined under new ids a second apart. The
    first leads alone and no member of the last target is live: as after a whole-cluster restart, the
    target is history; everything is assigned at once, with no delay held for members that are gone."""
    work = {"a": 2, "b": 2}
    topic = settled(["m1", "m2"], work)
    led_by_m1b = {"leader_id": "m1b", "leader_url": "http://m1b:8083/"}
    inp = replace(inputs({"m1b": worker("m1b", A())}, work, now=NOW + 100), **led_by_m1b)
    decision, records = step(topic, inp)
    target = assert_installed(records, 2)
    assert shares(topic.state) == {"m1b": everything(work)}
    assert decision.wake_at_ms is None and connect_assignments(target)["m1b"].delay_ms == 0
    topic.ack("m1b", NOW + 200)
    members = {"m1b": worker("m1b"), "m2b": worker("m2b", A())}
    decision, records = step(topic, replace(inputs(members, work, now=NOW + 1100), **led_by_m1b))
    target = assert_installed(records, 3)
    after = shares(topic.state)
    assert_disjoint(after)
    assert union(*after.values()) == everything(work)
    assert after["m2b"].tasks, "the second one back gets a share by balancing, not after a delay"
    assert connect_assignments(target)["m2b"].delay_ms == 0


def test_a_group_with_one_member_of_the_target_live_still_holds_the_others_work() -> None:
    """The rule above needs every member gone: one of the last target still live keeps KIP-415's delay for
    the work of those that left, even when the others rejoined under new ids."""
    work = {"a": 2, "b": 2}
    topic = settled(["m1", "m2"], work)
    lost = shares(topic.state)["m2"]
    decision, records = step(
        topic, inputs({"m1": worker("m1"), "m2b": worker("m2b", A())}, work, now=NOW + 100)
    )
    assert_installed(records, 2)
    assert not (union(*shares(topic.state).values()).tasks & lost.tasks)
    assert decision.wake_at_ms == NOW + 100 + DELAY


def test_a_new_member_id_claims_only_work_no_named_member_is_heading_to() -> None:
    """What a member the target does not name reports counts only where no live member's share has it."""
    work = {"a": 2, "b": 2}
    topic = settled(["m1", "m2"], work)
    before = shares(topic.state)
    members = {"m1": worker("m1"), "m2": worker("m2"), "m3": worker("m3", everything(work))}
    step(topic, inputs(members, work, now=NOW + 100))
    after = shares(topic.state)
    assert_disjoint(after)
    assert union(*after.values()) == everything(work)
    assert not (after["m3"].tasks & before["m1"].tasks & after["m1"].tasks)


def test_without_a_delay_lost_work_is_reassigned_at_once() -> None:
    work = {"a": 2, "b": 2}
    topic = settled(["m1", "m2"], work, max_delay_ms=0)
    decision, records = step(topic, inputs({"m1": worker("m1")}, work, now=NOW + 100, max_delay_ms=0))
    assert_installed(records, 2)
    assert shares(topic.state) == {"m1": everything(work)}
    assert decision.wake_at_ms is None


def test_a_leaving_member_gets_an_empty_share_and_its_work_moves_at_once() -> None:
    work = {"a": 2, "b": 2}
    topic = settled(["m1", "m2"], work)
    members = {"m1": worker("m1"), "m2": worker("m2", leaving=True)}
    decision, records = step(topic, inputs(members, work, now=NOW + 100))
    assert_installed(records, 2)
    after = shares(topic.state)
    assert after["m2"] == A()
    assert after["m1"] == everything(work)
    assert decision.wake_at_ms == NOW + 100 + TIMEOUT + 1  # m2 still has to revoke


def test_static_work_goes_to_the_worker_that_lists_it() -> None:
    work = {"a": 2, "s": 2}
    static = A(("s",), T("s", 0, 1))
    members = {
        "m1": worker("m1", version=protocol.V3),
        "m2": worker("m2", version=protocol.V3, static=static),
        "m3": worker("m3", version=protocol.V3),
    }
    topic = Topic()
    decision, records = step(topic, inputs(members, work, selected=ProtocolName.STATIC))
    target = assert_installed(records, 1)
    after = shares(topic.state)
    assert after["m2"] == static
    assert union(after["m1"], after["m3"]) == everything({"a": 2})
    assert all(m.version == protocol.V3 for m in target.members)
    assert decision.unassigned_connectors == frozenset() and decision.unassigned_tasks == frozenset()

    # The static worker leaves: nobody else may run its static work (KIP-987), as the decision reports.
    for m in after:
        topic.ack(m, NOW)
    decision, records = step(
        topic, inputs({m: members[m] for m in ("m1", "m3")}, work, selected=ProtocolName.STATIC, now=NOW + 1)
    )
    assert_installed(records, 2)
    assert not (union(*shares(topic.state).values()).tasks & static.tasks)


def test_an_invalid_acknowledgement_is_tombstoned_and_fenced() -> None:
    topic = settled(["m1", "m2"], WORK)
    m1_share = shares(topic.state)["m1"]
    # m2 claims, at the target epoch, work of m1's share.
    topic.ack("m2", NOW + 5, union(shares(topic.state)["m2"], A((), m1_share.tasks)))
    decision, records = step(topic, inputs({"m1": worker("m1"), "m2": worker("m2")}, WORK, now=NOW + 10))
    assert not decision.bumped
    assert records == [(CurrentMemberAssignmentKey(G, "m2"), None)]
    assert decision.fenced == frozenset({"m2"})
    assert decision.verdicts["m2"] == (Verdict.FENCED, 1)
    state = topic.state
    assert state is not None and "m2" not in state.current and "m1" in state.current
    # Fenced once: its record is gone, so it is joining again, and nothing more is written.
    decision, records = step(topic, inputs({"m1": worker("m1"), "m2": worker("m2")}, WORK, now=NOW + 20))
    assert records == [] and decision.fenced == frozenset()
    assert decision.verdicts["m2"] == (Verdict.JOINING, 0)


def test_an_acknowledgement_ahead_of_the_target_is_fenced() -> None:
    topic = settled(["m1", "m2"], WORK)
    topic.write([(CurrentMemberAssignmentKey(G, "m2"), acked(7, A()))], NOW + 5)
    decision, records = step(topic, inputs({"m1": worker("m1"), "m2": worker("m2")}, WORK, now=NOW + 10))
    assert records == [(CurrentMemberAssignmentKey(G, "m2"), None)]
    assert decision.fenced == frozenset({"m2"})


def test_the_leader_never_fences_itself() -> None:
    """The leader (m1 here) knows what it runs better than its own record as it last read it."""
    topic = settled(["m1", "m2"], WORK)
    topic.write([(CurrentMemberAssignmentKey(G, "m1"), acked(7, A()))], NOW + 5)
    decision, records = step(topic, inputs({"m1": worker("m1"), "m2": worker("m2")}, WORK, now=NOW + 10))
    assert records == [] and decision.fenced == frozenset()
    assert decision.verdicts["m1"][0] is Verdict.FENCED


def test_a_member_that_does_not_revoke_in_time_is_fenced() -> None:
    topic = settled(["m1", "m2"], WORK)
    # Deleting b revokes it from everyone running a part of it.
    holders = sorted(
        m
        for m, s in shares(topic.state).items()
        if "b" in s.connectors or any(t.connector == "b" for t in s.tasks)
    )
    assert holders
    members = {"m1": worker("m1"), "m2": worker("m2")}
    changed = NOW + 10
    decision, _ = step(topic, inputs(members, {"a": 2}, now=changed))
    assert all(decision.verdicts[m] == (Verdict.REVOKING, 1) for m in holders)
    deadline = decision.wake_at_ms
    assert deadline == changed + TIMEOUT + 1
    decision, records = step(topic, inputs(members, {"a": 2}, now=deadline - 1))
    assert records == [] and all(decision.verdicts[m] == (Verdict.REVOKING, 1) for m in holders)
    decision, records = step(topic, inputs(members, {"a": 2}, now=deadline))
    fenced = [m for m in holders if m != "m1"]  # the leader (m1) never fences itself
    assert records == [(CurrentMemberAssignmentKey(G, m), None) for m in fenced]
    assert decision.fenced == frozenset(fenced) and not decision.bumped


def test_a_member_that_revoked_in_time_is_not_fenced() -> None:
    topic = settled(["m1", "m2"], WORK)
    members = {"m1": worker("m1"), "m2": worker("m2")}
    decision, _ = step(topic, inputs(members, {"a": 2}, now=NOW + 10))
    for m in ("m1", "m2"):
        topic.ack(m, NOW + 20)
    decision, records = step(topic, inputs(members, {"a": 2}, now=NOW + 10 + TIMEOUT * 2))
    assert records == [] and decision.fenced == frozenset()
    assert decision.verdicts == {"m1": (Verdict.STABLE, 2), "m2": (Verdict.STABLE, 2)}
    assert decision.wake_at_ms is None


def test_a_rolling_restart_moves_each_task_of_the_restarted_worker_away_and_back_and_nothing_else() -> None:
    """Issue 34: each worker in turn leaves gracefully, is gone, and comes back under a new member id with
    the same URL. Its work goes back to it (the homes travel in the target record, so each step here reads
    them back from the bytes, as a new leader would), and no task of another worker moves."""
    work = {f"p{n:02d}": 2 for n in range(30)}  # 60 tasks, 30 connectors over 4 workers
    names = ["m1", "m2", "m3", "m4"]
    topic = settled(names, work)
    now = NOW
    live = {m: worker(m) for m in names}

    def by_url() -> dict[str, Assigned]:
        s = shares(topic.state)
        return {live[m][1].url: s[m] for m in live}

    def settle(members: Mapping[str, tuple[int, WorkerState]]) -> None:
        nonlocal now
        now += 1_000
        step(topic, inputs(members, work, now=now))
        for m in members:
            topic.ack(m, now)
        assert_disjoint(shares(topic.state))

    for turn, name in enumerate(names[1:], start=2):
        before = by_url()
        url = live[name][1].url
        settle({**live, name: worker(name, leaving=True)})  # SIGTERM: the graceful hand-over
        assert shares(topic.state)[name] == A()
        assert topic.state is not None and topic.state.target is not None
        assert url in [h.identity for h in topic.state.target.homes]
        del live[name]
        settle(live)  # gone
        live[f"{name}-{turn}"] = worker(name)  # back: a new member id, the same URL
        live = dict(sorted(live.items()))
        settle(live)
        after = by_url()
        owner_before = {x: u for u, a in before.items() for x in (*a.connectors, *a.tasks)}
        owner_after = {x: u for u, a in after.items() for x in (*a.connectors, *a.tasks)}
        moved = {x for x, u in owner_after.items() if owner_before[x] != u}
        assert {owner_before[x] for x in moved} <= {url}, (
            f"another worker's work moved while {name} restarted"
        )
        # What came back is its balanced share (30 connectors over 4: 7; 60 tasks: 15); a connector past
        # that stays where it went.
        assert after[url] <= before[url]
        assert (len(after[url].connectors), len(after[url].tasks)) == (7, 15)


@dataclass
class WarmGroup:
    """Four members' group under warm-up (v3 metadata, two learners at a time, learners never ready so
    each times out and moves plainly), stepped through the coordinator with acknowledgements."""

    work: dict[str, int] = field(default_factory=lambda: {f"p{n:02d}": 2 for n in range(30)})
    warmup: WarmupSettings = field(
        default_factory=lambda: WarmupSettings(
            max_warmup_tasks=2, warmup_timeout_ms=10_000, graceful_timeout_ms=5_000
        )
    )
    topic: Topic = field(default_factory=Topic)
    now: int = NOW

    @staticmethod
    def member(name: str, leaving: bool = False) -> tuple[int, WorkerState]:
        version, state = worker(name, version=protocol.V3, leaving=leaving)
        return version, replace(state, learns=True)

    def inputs(self, members: Mapping[str, tuple[int, WorkerState]]) -> CoordinatorInput:
        return replace(
            inputs(members, self.work, now=self.now, selected=ProtocolName.STATIC), warmup=self.warmup
        )

    def run(self, members: Mapping[str, tuple[int, WorkerState]]) -> None:
        """Steps 6 s apart until four in a row bump nothing; no task is ever in two shares."""
        quiet = 0
        for _ in range(80):
            self.now += 6_000
            decision, _ = step(self.topic, self.inputs(members))
            for m in members:
                self.topic.ack(m, self.now)
            assert_disjoint(shares(self.topic.state))
            quiet = 0 if decision.bumped else quiet + 1
            if quiet > 3:
                return
        raise AssertionError("the group did not settle")


def test_a_rolling_restart_with_warm_up_brings_the_work_home_a_few_tasks_at_a_time() -> None:
    """The same roll as above under warm-up (:class:`WarmGroup`): the departure and the return each take
    many targets, computed while most of the work is still on its way, and every one of them must still
    know the homes."""
    g = WarmGroup()
    names = ["m1", "m2", "m3", "m4"]
    live = {m: g.member(m) for m in names}
    g.run(live)
    for turn, name in enumerate(names[1:], start=2):
        before = {live[m][1].worker_id: a.tasks for m, a in shares(g.topic.state).items()}
        g.run({**live, name: g.member(name, leaving=True)})
        del live[name]
        g.run(live)
        live[f"{name}-{turn}"] = g.member(name)
        g.run(live)
        after = {live[m][1].worker_id: a.tasks for m, a in shares(g.topic.state).items()}
        assert after == before, f"{name}'s restart moved other work, or its own did not come back"


def test_a_returning_worker_learns_its_home_work_all_at_once_past_max_warmup_tasks() -> None:
    """Issue 34: a worker back from a graceful restart is short of exactly the work it ran; the first
    target after its return has it learn all of that at once (two at a time, the rest went on moving home
    into the next worker's turn of a rolling restart), while its old owners keep running it."""
    g = WarmGroup()  # 60 tasks over 4 workers: 15 each
    live = {m: g.member(m) for m in ["m1", "m2", "m3", "m4"]}
    g.run(live)
    home = shares(g.topic.state)["m2"].tasks
    assert len(home) == 15
    g.run({**live, "m2": g.member("m2", leaving=True)})
    del live["m2"]
    g.run(live)
    live["m2-2"] = g.member("m2")  # back: a new member id, the same identity
    g.now += 1_000
    step(g.topic, g.inputs(live))
    state = g.topic.state
    assert state is not None and state.target is not None
    entry = {m.member_id: m for m in state.target.members}
    assert {x.task for x in entry["m2-2"].learners} == home
    assert entry["m2-2"].assigned.tasks == frozenset(), "its old owners run it until it is ready"
    others = [m for m in entry if m != "m2-2"]
    assert all(not entry[m].learners for m in others)
