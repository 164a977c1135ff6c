"""Reading the recorded target assignment (group record type 6): what coordinator and view both need.

Why a module of its own: the coordinator (``coordinator``) computes targets and fences members by these
readings, and the group's view (``group_view``, ``GET /group``) and the leader's memory
(``leader_memory``) report the same readings to people; each used to import them from the other, a circle
that only a lazy import kept from breaking at start-up. Here they sit below all three: each member's share
of a target, whether a coordinator wrote it (``group.protocol=connect``), the config offset it was computed
from, when the rebalance it scheduled falls due, the revocation deadline the leader recorded, and the
seed's heartbeat check of one member's acknowledgement (:func:`judge`). Pure: the folded records in,
readings out.
"""

from __future__ import annotations

from enum import StrEnum
from functools import lru_cache

from kconnect.runtime.group import protocol
from kconnect.runtime.group.group_records import (
    Assigned,
    CurrentMemberAssignmentValue,
    GroupState,
    TargetAssignmentValue,
    TargetMember,
)

__all__ = [
    "REBALANCE_TIMEOUT_KEY",
    "Verdict",
    "is_reconciled_target",
    "judge",
    "recorded_rebalance_timeout",
    "scheduled_rebalance",
    "target_config_offset",
    "target_member",
    "target_share",
]

#: The group configuration entry (record type 8) the coordinator's revocation deadline is read from.
REBALANCE_TIMEOUT_KEY = "rebalance.timeout.ms"


class Verdict(StrEnum):
    """The seed's heartbeat check of one member's acknowledgement against the current target."""

    #: At the target's epoch, holding only its own target share.
    STABLE = "stable"
    #: Behind the target and still holding work the target moved away: phase 1 (revocation) pending.
    REVOKING = "revoking"
    #: Behind the target but holding a subset of it: the seed's edge case, taken as at the target epoch.
    ACCEPTED = "accepted"
    #: No acknowledgement yet (a member joining at epoch 0).
    JOINING = "joining"
    #: FENCED_MEMBER_EPOCH: its record is deleted and it must stop everything and rejoin at epoch 0.
    FENCED = "fenced"


@lru_cache(maxsize=256)
def _assignment(metadata: bytes) -> protocol.ConnectAssignment:
    """A target member's Connect assignment, decoded once per distinct value: the readings below run on
    every coordination step and every reconcile, over the same few targets, and decoding every member's
    assignment each time was most of a step's cost at 400 tasks (issue 34: the leader's target cadence).
    Raises ValueError as ``protocol.decode_assignment`` does (not cached)."""
    return protocol.decode_assignment(metadata)


def target_member(target: TargetAssignmentValue | None, member_id: str) -> TargetMember | None:
    """``member_id``'s entry in ``target``; None when it has none."""
    for member in target.members if target is not None else ():
        if member.member_id == member_id:
            return member
    return None


def target_share(target: TargetAssignmentValue | None, member_id: str) -> Assigned | None:
    """What ``target`` gives ``member_id``; None when the member has no entry in it."""
    member = target_member(target, member_id)
    return None if member is None else member.assigned


def is_reconciled_target(target: TargetAssignmentValue | None) -> bool:
    """Whether ``target`` was written by a coordinator (``group.protocol=connect``) rather than recorded
    after a classic round: its members' Connect assignments carry the reconcile flag."""
    if target is None or not target.members:
        return False
    for member in target.members:
        try:
            if not _assignment(member.metadata).reconcile:
                return False
        except ValueError:
            return False
    return True


def target_config_offset(target: TargetAssignmentValue | None) -> int:
    """The config offset the target was computed from (-1 when unknown): a leader that has read less of
    the config topic must catch up before it computes again, or it would undo the newer target."""
    offset = -1
    for member in target.members if target is not None else ():
        try:
            offset = max(offset, _assignment(member.metadata).config_offset)
        except ValueError:
            continue
    return offset


def judge(
    current: CurrentMemberAssignmentValue | None,
    target: TargetAssignmentValue,
    member_id: str,
    *,
    target_age_ms: int,
    rebalance_timeout_ms: int,
) -> tuple[Verdict, int]:
    """The seed's check of a member's epoch (request handling step 3), and the member epoch it implies.

    ``target_age_ms`` is how long the target has been installed: a member that has not revoked within
    ``rebalance_timeout_ms`` of it is fenced, as the seed repurposes ``rebalance.timeout.ms``.
    """
    epoch = target.assignment_epoch
    share = target_share(target, member_id) or Assigned()
    if current is None:
        return Verdict.JOINING, 0
    if current.member_epoch > epoch:
        return Verdict.FENCED, current.member_epoch
    if current.assigned <= share:
        if current.member_epoch == epoch:
            return Verdict.STABLE, epoch
        return Verdict.ACCEPTED, epoch
    if current.member_epoch == epoch:
        # It says it reconciled to this epoch yet holds work that is not its own.
        return Verdict.FENCED, current.member_epoch
    if target_age_ms > rebalance_timeout_ms:
        return Verdict.FENCED, current.member_epoch
    return Verdict.REVOKING, current.member_epoch


def scheduled_rebalance(state: GroupState) -> tuple[int, int] | None:
    """(due time in ms since the epoch, the delay the target assignment sent) when the last target
    assignment scheduled a rebalance: the target record's timestamp plus the longest delay in its
    members' Connect assignments. None when no delay runs (or no member's metadata decodes)."""
    if state.target is None or state.target_timestamp_ms is None:
        return None
    delay = 0
    for member in state.target.members:
        if not member.metadata:
            continue
        try:
            delay = max(delay, _assignment(member.metadata).delay_ms)
        except ValueError:
            continue  # a member entry we cannot read tells nothing about the delay
    if delay <= 0:
        return None
    return state.target_timestamp_ms + delay, delay


def recorded_rebalance_timeout(state: GroupState) -> int | None:
    """``rebalance.timeout.ms`` as the leader recorded it in the group configuration (record type 8): the
    deadline its coordinator fences a member that has not revoked by. None when not recorded or unreadable."""
    if state.configuration is None:
        return None
    for name, value in state.configuration.configurations:
        if name == REBALANCE_TIMEOUT_KEY:
            try:
                timeout = int(value)
            except ValueError:
                return None
            return timeout if timeout >= 0 else None
    return None
