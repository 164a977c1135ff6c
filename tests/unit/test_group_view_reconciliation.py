"""``describe``'s reconciliation section (issue 14): the group and assignment epochs, each member's epoch, the
coordinator's verdict and what the member still has to revoke or receive, computed from the folded records.

Every case goes through the real codec: the records are encoded and folded with ``group_records.apply``,
as a worker and ``kconnect group describe`` read them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import pytest

from kconnect.runtime.cli.group_describe import render_text
from kconnect.runtime.group.group_records import (
    Assigned,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    GroupConfigurationKey,
    GroupConfigurationValue,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupRecords,
    GroupState,
    Learner,
    MemberMetadataKey,
    MemberMetadataValue,
    RecordKey,
    RecordValue,
    TargetAssignmentKey,
    TargetAssignmentValue,
    TargetMember,
    apply,
    encode_key,
    encode_value,
)
from kconnect.runtime.group.group_view import describe, reconciliation, recorded_rebalance_timeout
from kconnect.runtime.group.protocol import V2, ConnectAssignment, encode_assignment
from kconnect.runtime.ids import TaskId

G = "connect-cluster"
W1, W2, W3 = "w1", "w2", "w3"
#: The target record's Kafka timestamp; ages are counted from it.
TARGET_TS = 10_000

Record = tuple[RecordKey, RecordValue | None]


def work(*items: str) -> Assigned:
    """``"c"`` is connector c, ``"c-0"`` task 0 of c."""
    tasks = frozenset(TaskId.parse(i) for i in items if "-" in i)
    return Assigned(frozenset(i for i in items if "-" not in i), tasks)


def entry(*items: str) -> dict[str, list[str]]:
    a = work(*items)
    return {"connectors": sorted(a.connectors), "tasks": [str(t) for t in sorted(a.tasks)]}


NOTHING = entry()


def target(epoch: int, shares: dict[str, Assigned], *, reconcile: bool = True) -> Record:
    members = tuple(
        TargetMember(
            m,
            0,
            a,
            V2,
            encode_assignment(
                ConnectAssignment(
                    V2,
                    0,
                    W1,
                    "http://w1:8083/",
                    7,
                    tuple(sorted(a.connectors)),
                    tuple(sorted(a.tasks)),
                    reconcile=reconcile,
                )
            ),
        )
        for m, a in sorted(shares.items())
    )
    return TargetAssignmentKey(G), TargetAssignmentValue(epoch, members)


def current(member_id: str, epoch: int, held: Assigned) -> Record:
    return CurrentMemberAssignmentKey(G, member_id), CurrentMemberAssignmentValue(epoch, 0, held, V2, b"")


def member(member_id: str, group_epoch: int) -> Record:
    return MemberMetadataKey(G, member_id), MemberMetadataValue(
        group_epoch, member_id, member_id, "/10.0.0.1"
    )


def epoch(value: int) -> Record:
    return GroupMetadataKey(G), GroupMetadataValue(value)


def configuration(**settings: str) -> Record:
    pairs = tuple((k.replace("_", "."), v) for k, v in settings.items())
    return GroupConfigurationKey(G), GroupConfigurationValue(pairs)


def fold(records: Sequence[Record]) -> GroupState:
    """Encode every record and fold it as a reader of the topic does; the target gets ``TARGET_TS``."""
    folded = GroupRecords()
    for offset, (key, value) in enumerate(records):
        folded = apply(
            folded,
            encode_key(key),
            None if value is None else encode_value(value),
            offset=offset,
            timestamp_ms=TARGET_TS if isinstance(key, TargetAssignmentKey) else offset,
        )
    return folded.groups[G]


def by_member(section: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {m["member_id"]: m for m in section["members"]}


# A reconciled group at epoch 6: the target moved c-1 from w1 to w2. w1 still runs it (acknowledged at 5),
# w2 acknowledged at 5 holding a subset of its share, w3 joined and has not acknowledged anything yet.
MOVING: list[Record] = [
    member(W1, 5),
    member(W2, 5),
    member(W3, 6),
    current(W1, 5, work("c", "c-0", "c-1")),
    current(W2, 5, work("d")),
    target(6, {W1: work("c", "c-0"), W2: work("d", "c-1"), W3: work("d-0")}),
    epoch(6),
]


CASES = [
    pytest.param(
        [member(W1, 5), current(W1, 5, work("c", "c-0")), target(5, {W1: work("c", "c-0")}), epoch(5)],
        20_000,
        None,
        {W1: (5, "stable", NOTHING, NOTHING)},
        id="stable member",
    ),
    pytest.param(
        MOVING,
        20_000,
        None,
        {
            W1: (5, "revoking", entry("c-1"), NOTHING),
            W2: (5, "accepted", NOTHING, entry("c-1")),
            W3: (None, "joining", NOTHING, entry("d-0")),
        },
        id="member still revoking, members to receive",
    ),
    pytest.param(
        [*MOVING, configuration(rebalance_timeout_ms="60000")],
        TARGET_TS + 60_001,
        None,
        {
            W1: (5, "fenced", entry("c-1"), NOTHING),
            W2: (5, "accepted", NOTHING, entry("c-1")),
            W3: (None, "joining", NOTHING, entry("d-0")),
        },
        id="revocation past the recorded rebalance timeout",
    ),
    pytest.param(
        [*MOVING, configuration(rebalance_timeout_ms="60000")],
        TARGET_TS + 60_000,
        None,
        {
            W1: (5, "revoking", entry("c-1"), NOTHING),
            W2: (5, "accepted", NOTHING, entry("c-1")),
            W3: (None, "joining", NOTHING, entry("d-0")),
        },
        id="revocation at the recorded rebalance timeout",
    ),
    pytest.param(
        MOVING,
        TARGET_TS + 5_001,
        5_000,
        {
            W1: (5, "fenced", entry("c-1"), NOTHING),
            W2: (5, "accepted", NOTHING, entry("c-1")),
            W3: (None, "joining", NOTHING, entry("d-0")),
        },
        id="revocation past a given rebalance timeout",
    ),
    pytest.param(
        [
            member(W1, 6),
            current(W1, 6, work("c", "c-0", "d")),
            target(6, {W1: work("c", "c-0")}),
            epoch(6),
        ],
        TARGET_TS,
        None,
        {W1: (6, "fenced", entry("d"), NOTHING)},
        id="member claiming work outside its target at the target epoch",
    ),
    pytest.param(
        [
            member(W1, 4),
            member(W2, 4),
            current(W1, 4, work("c", "c-0", "c-1")),
            current(W2, 4, work()),
            target(4, {W1: work("c", "c-0"), W2: work("c-1")}, reconcile=False),
            epoch(4),
        ],
        TARGET_TS + 10**9,
        None,
        {W1: (4, None, entry("c-1"), NOTHING), W2: (4, None, NOTHING, entry("c-1"))},
        id="classic target: no verdict",
    ),
]


@pytest.mark.parametrize(("records", "now_ms", "timeout_ms", "expected"), CASES)
def test_each_members_epoch_verdict_and_what_it_still_has_to_revoke_or_receive(
    records: list[Record],
    now_ms: int,
    timeout_ms: int | None,
    expected: dict[str, tuple[int | None, str | None, dict[str, list[str]], dict[str, list[str]]]],
) -> None:
    state = fold(records)
    section = reconciliation(state, now_ms, timeout_ms)
    got = {
        m: (e["member_epoch"], e["verdict"], e["to_revoke"], e["to_receive"])
        for m, e in by_member(section).items()
    }
    assert got == expected
    assert section["group_epoch"] == state.epoch
    assert state.target is not None and section["assignment_epoch"] == state.target.assignment_epoch
    assert section["reconciled"] is any(verdict is not None for _e, verdict, _r, _g in expected.values())


def test_epochs_and_the_reconciled_flag() -> None:
    section = reconciliation(fold(MOVING), 20_000)
    assert section["group_epoch"] == 6 and section["assignment_epoch"] == 6
    assert section["reconciled"] is True
    assert section["rebalance_timeout_ms"] is None
    assert [m["member_id"] for m in section["members"]] == [W1, W2, W3]
    classic = fold([target(3, {W1: work("c")}, reconcile=False)])
    assert reconciliation(classic, 0)["reconciled"] is False
    assert reconciliation(classic, 0)["group_epoch"] is None


def test_the_rebalance_timeout_is_read_from_the_group_configuration_unless_given() -> None:
    state = fold([*MOVING, configuration(rebalance_timeout_ms="60000", session_timeout_ms="10000")])
    assert recorded_rebalance_timeout(state) == 60_000
    assert reconciliation(state, 0)["rebalance_timeout_ms"] == 60_000
    assert reconciliation(state, 0, 1_000)["rebalance_timeout_ms"] == 1_000
    assert recorded_rebalance_timeout(fold([*MOVING, configuration(rebalance_timeout_ms="soon")])) is None
    assert recorded_rebalance_timeout(fold(MOVING)) is None


def test_without_a_target_there_is_nothing_to_judge_or_compare() -> None:
    state = fold([member(W1, 2), current(W1, 1, work("c")), epoch(2)])
    section = reconciliation(state, 0)
    assert section == {
        "group_epoch": 2,
        "assignment_epoch": None,
        "reconciled": False,
        "rebalance_timeout_ms": None,
        "members": [
            {"member_id": W1, "member_epoch": 1, "verdict": None, "to_revoke": None, "to_receive": None}
        ],
    }
    empty = reconciliation(GroupState(G), 0)
    assert empty["members"] == [] and empty["group_epoch"] is None and empty["assignment_epoch"] is None


def test_a_member_gone_from_the_target_still_holding_work_is_told_to_revoke_it() -> None:
    # w2's record is still there but the target (epoch 7) left it out: all it holds is to revoke.
    state = fold(
        [
            current(W1, 6, work("c")),
            current(W2, 6, work("c-0")),
            target(7, {W1: work("c", "c-0")}),
            epoch(7),
        ]
    )
    got = by_member(reconciliation(state, TARGET_TS))
    assert got[W2]["verdict"] == "revoking" and got[W2]["to_revoke"] == entry("c-0")
    assert got[W2]["to_receive"] == NOTHING
    assert got[W1]["verdict"] == "accepted" and got[W1]["to_receive"] == entry("c-0")


def test_describe_adds_the_section_and_keeps_its_other_keys() -> None:
    state = fold(MOVING)
    view = describe(state, now_ms=20_000)
    assert set(view) == {
        "group",
        "epoch",
        "connectors_tasks",
        "members",
        "target",
        "current",
        "configuration",
        "scheduled_rebalance",
        "vanished",
        "last_offset",
        "reconciliation",
    }
    assert view["reconciliation"] == reconciliation(state, 20_000)
    assert json.loads(json.dumps(view)) == view
    assert describe(GroupState(G), now_ms=0)["reconciliation"]["members"] == []


def test_the_table_has_an_epochs_section() -> None:
    text = render_text(describe(fold(MOVING), now_ms=20_000))
    lines = text.splitlines()
    head = lines.index("epochs: group 6, assignment 6, reconciled (group.protocol=connect):")
    header, w1, w2, w3 = lines[head + 1 : head + 5]
    assert header.split() == ["MEMBER", "MEMBER", "EPOCH", "VERDICT", "TO", "REVOKE", "TO", "RECEIVE"]
    assert w1.split() == [W1, "5", "revoking", "c-1", "-"]
    assert w2.split() == [W2, "5", "accepted", "-", "c-1"]
    assert w3.split() == [W3, "-", "joining", "-", "d-0"]
    classic = render_text(describe(fold([target(3, {W1: work("c")}, reconcile=False)]), now_ms=0))
    assert "epochs: group -, assignment 3, not reconciled (classic rounds):" in classic
    assert "epochs: group -, assignment -, no target:" in render_text(describe(GroupState(G), now_ms=0))


def test_the_table_has_a_learners_section() -> None:
    # The target names w2 the learner of c-1 (not ready yet); w2's own record already reports it ready.
    since = 1_795_000_000_000
    key, value = target(7, {W1: work("c", "c-0", "c-1"), W2: work("d")})
    assert isinstance(value, TargetAssignmentValue)
    learning = frozenset({Learner(TaskId("c", 1), False, since)})
    members = tuple(m if m.member_id != W2 else replace(m, learners=learning) for m in value.members)
    ready = CurrentMemberAssignmentValue(
        7, 0, work("d"), V2, b"", frozenset({Learner(TaskId("c", 1), True, since)})
    )
    records: list[Record] = [
        member(W1, 7),
        member(W2, 7),
        current(W1, 7, work("c", "c-0", "c-1")),
        (CurrentMemberAssignmentKey(G, W2), ready),
        (key, TargetAssignmentValue(7, members)),
        epoch(7),
    ]
    lines = render_text(describe(fold(records), now_ms=20_000)).splitlines()
    head = lines.index("learners (1):")
    assert lines[head + 1].split() == ["MEMBER", "TASK", "TARGET", "REPORTED", "SINCE"]
    assert lines[head + 2].split() == [W2, "c-1", "learning", "ready", "2026-11-18T11:06:40.000Z"]
    assert "learners: none" in render_text(describe(fold(MOVING), now_ms=20_000)).splitlines()
