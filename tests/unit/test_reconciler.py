"""A member's reconciliation under ``group.protocol=connect`` (``reconciler.reconcile``) as a table: the
seed's three phases (revoke, acknowledge, receive) over the group records as a member has read them.

Notation: the target is at epoch 5 and gives ``m1`` connector ``a`` with tasks a-0 and a-1, ``m2``
connector ``b`` with task b-0. ``current`` is the type-7 record of each member as read so far; ``held`` what
``m1`` runs; ``written`` the last record ``m1`` wrote (read back or not).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest

from kconnect.runtime.group.group_records import (
    Assigned,
    CurrentMemberAssignmentValue,
    GroupState,
    TargetAssignmentValue,
    TargetMember,
)
from kconnect.runtime.group.reconciler import Step, reconcile
from kconnect.runtime.ids import TaskId

EPOCH = 5


def parse(text: str) -> Assigned:
    """``"a a-0 a-1"``: connectors by name, tasks as ``<connector>-<n>``."""
    connectors, tasks = set(), set()
    for item in text.split():
        if "-" in item:
            tasks.add(TaskId.parse(item))
        else:
            connectors.add(item)
    return Assigned(frozenset(connectors), frozenset(tasks))


def rec(epoch: int, text: str) -> CurrentMemberAssignmentValue:
    return CurrentMemberAssignmentValue(epoch, 0, parse(text), 2, b"")


TARGET = {"m1": "a a-0 a-1", "m2": "b b-0"}


def group(
    current: Mapping[str, CurrentMemberAssignmentValue],
    target: Mapping[str, str] | None = TARGET,
    epoch: int = EPOCH,
) -> GroupState:
    value = None
    if target is not None:
        value = TargetAssignmentValue(
            epoch, tuple(TargetMember(m, 0, parse(s), 2, b"") for m, s in sorted(target.items()))
        )
    return GroupState("connect-cluster", epoch=epoch, target=value, current=dict(current))


@dataclass(frozen=True)
class Row:
    id: str
    current: Mapping[str, CurrentMemberAssignmentValue]
    held: str
    written: CurrentMemberAssignmentValue | None
    acknowledged: bool
    expected: Step
    target: Mapping[str, str] | None = field(default_factory=lambda: TARGET)
    member: str = "m1"


def step(
    revoke: str = "", record: CurrentMemberAssignmentValue | None = None, start: str = "", pending: str = ""
) -> Step:
    return Step(epoch=EPOCH, revoke=parse(revoke), record=record, start=parse(start), pending=parse(pending))


ROWS = [
    # -- nothing to reconcile to
    Row("no-target", {}, "a a-0", None, False, Step(), target=None),
    Row(
        "no-target-holding-work-keeps-it", {"m1": rec(3, "a")}, "a b", rec(3, "a"), True, Step(), target=None
    ),
    Row("not-in-the-target", {"m2": rec(EPOCH, "b b-0")}, "", None, False, Step(), member="m3"),
    Row("not-in-the-target-holding-classic-work", {}, "c c-0", None, False, Step(), member="m3"),
    # -- phase 1 and 2: revoke first, then acknowledge at the target epoch what is kept (plus claims)
    Row(
        "revokes-what-the-target-moved-away-and-acks",
        {"m1": rec(4, "a a-0 b-0"), "m2": rec(4, "")},
        "a a-0 b-0",
        rec(4, "a a-0 b-0"),
        True,
        # a-1 is nobody's: claimed in the same record.
        step(revoke="b-0", record=rec(EPOCH, "a a-0 a-1"), pending="a-1"),
    ),
    Row(
        "revokes-everything-when-the-share-is-empty",
        {"m1": rec(4, "a a-0 a-1")},
        "a a-0 a-1",
        rec(4, "a a-0 a-1"),
        True,
        Step(epoch=EPOCH, revoke=parse("a a-0 a-1"), record=rec(EPOCH, "")),
        target={"m1": "", "m2": "a a-0 a-1 b b-0"},
    ),
    # -- phase 3: claims of work nobody lists, started only once read back
    Row(
        "claims-its-whole-share-when-nobody-lists-it",
        {},
        "",
        None,
        False,
        step(record=rec(EPOCH, "a a-0 a-1"), pending="a a-0 a-1"),
    ),
    Row(
        "does-not-claim-what-another-member-lists",
        {"m2": rec(4, "b b-0 a-1")},
        "",
        None,
        False,
        step(record=rec(EPOCH, "a a-0"), pending="a a-0 a-1"),
    ),
    Row(
        "no-start-before-its-claim-is-read-back",
        {"m1": rec(4, "")},
        "",
        rec(EPOCH, "a a-0 a-1"),
        True,
        step(pending="a a-0 a-1"),
    ),
    Row(
        "starts-once-read-back-and-nobody-else-lists-it",
        {"m1": rec(EPOCH, "a a-0 a-1"), "m2": rec(EPOCH, "b b-0")},
        "",
        rec(EPOCH, "a a-0 a-1"),
        True,
        step(start="a a-0 a-1"),
    ),
    Row(
        "starts-only-the-new-part-keeping-what-runs",
        {"m1": rec(EPOCH, "a a-0 a-1")},
        "a a-0",
        rec(EPOCH, "a a-0 a-1"),
        True,
        step(start="a-1"),
    ),
    Row(
        "a-claim-read-back-at-an-older-epoch-starts-nothing",
        {"m1": rec(4, "a a-0 a-1")},
        "",
        rec(4, "a a-0 a-1"),
        True,
        step(record=rec(EPOCH, "a a-0 a-1"), pending="a a-0 a-1"),
    ),
    Row(
        "waits-while-another-record-still-lists-it-and-withdraws-the-claim",
        {"m1": rec(EPOCH, "a a-0 a-1"), "m2": rec(4, "b b-0 a-1")},
        "",
        rec(EPOCH, "a a-0 a-1"),
        True,
        step(record=rec(EPOCH, "a a-0"), start="a a-0", pending="a-1"),
    ),
    Row(
        "waits-without-rewriting-a-withdrawn-claim",
        {"m1": rec(EPOCH, "a a-0"), "m2": rec(4, "b b-0 a-1")},
        "a a-0",
        rec(EPOCH, "a a-0"),
        True,
        step(pending="a-1"),
    ),
    Row(
        "claims-what-the-other-member-released",
        {"m1": rec(EPOCH, "a a-0"), "m2": rec(EPOCH, "b b-0")},
        "a a-0",
        rec(EPOCH, "a a-0"),
        True,
        step(record=rec(EPOCH, "a a-0 a-1"), pending="a-1"),
    ),
    # -- fenced: the leader deleted the record this member had acknowledged
    Row(
        "fenced-when-its-acknowledged-record-vanished",
        {"m2": rec(EPOCH, "b b-0")},
        "a a-0 a-1",
        rec(EPOCH, "a a-0 a-1"),
        True,
        Step(fenced=True, revoke=parse("a a-0 a-1")),
    ),
    Row(
        "fenced-even-without-a-target",
        {},
        "a",
        rec(3, "a"),
        True,
        Step(fenced=True, revoke=parse("a")),
        target=None,
    ),
    Row(
        "not-fenced-before-its-record-was-ever-read-back",
        {"m2": rec(EPOCH, "b b-0")},
        "",
        rec(EPOCH, "a a-0 a-1"),
        False,
        step(pending="a a-0 a-1"),
    ),
    # -- nothing new to say
    Row(
        "written-equals-desired-writes-nothing",
        {"m1": rec(EPOCH, "a a-0 a-1"), "m2": rec(EPOCH, "b b-0")},
        "a a-0 a-1",
        rec(EPOCH, "a a-0 a-1"),
        True,
        step(),
    ),
    Row(
        "written-equals-desired-before-read-back-writes-nothing",
        {"m1": rec(4, "a")},
        "a",
        rec(EPOCH, "a a-0 a-1"),
        True,
        step(pending="a-0 a-1"),
    ),
]


@pytest.mark.parametrize("row", ROWS, ids=[r.id for r in ROWS])
def test_reconcile(row: Row) -> None:
    got = reconcile(
        group(row.current, row.target),
        row.member,
        parse(row.held),
        row.written,
        acknowledged=row.acknowledged,
    )
    assert got == row.expected


def test_no_group_records_at_all() -> None:
    assert reconcile(None, "m1", parse("a a-0"), None, acknowledged=True) == Step()


def test_an_acknowledgement_lists_only_what_keeps_running_and_its_claims() -> None:
    # Whatever the member runs outside its share is revoked and absent from the record: the record is
    # what another member reads as "released".
    got = reconcile(
        group({"m1": rec(4, "a a-0 b b-0")}),
        "m1",
        parse("a a-0 b b-0"),
        rec(4, "a a-0 b b-0"),
        acknowledged=True,
    )
    assert got.revoke == parse("b b-0")
    assert got.record is not None
    assert not (got.record.assigned.connectors & got.revoke.connectors)
    assert not (got.record.assigned.tasks & got.revoke.tasks)
