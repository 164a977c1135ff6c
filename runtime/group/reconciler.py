"""A member's reconciliation under ``group.protocol=connect``: from the group records to what it stops,
acknowledges, claims and starts.

The seed's three phases, as a member carries them out from the records it reads (``coordinator`` is the
leader's side):

1. **Revoke**: what the member runs that its target share no longer holds is stopped first.
2. **Acknowledge**: the member writes its current-assignment record (type 7) at the target's epoch,
   listing what it still runs plus what it claims next. Writing it only after the stops is what makes it
   an acknowledgement: another member reading it knows the work is released.
3. **Receive**: work of its share that no other member's record lists is claimed in that same record, and
   started once the member has read its own claim back and still no other member's record lists it.

Why that is safe without a coordinator granting each item: every member reads the group records in one
total order, a member lists a job in its record from before it starts the job until after it stopped it,
and starts it only when its own listing is the only one at the point it has read to. Of two members that
both claim a job, the later claim sees the earlier one (the earlier claimant then either runs it or
withdraws in a later record) and waits; so no job runs on two members, whatever the order of targets and
claims. The leader's fencing tombstone (``coordinator.judge``) is the one exception, as in the seed: a
member that did not revoke within ``rebalance.timeout.ms`` loses its claim.

**Released one by one.** A member that stops revoked tasks without waiting for all of them (the herder
does, so that one task slow to stop holds back no other) keeps listing each task in its record until that
task has stopped (``stopping``), and writes those records at the epoch it last acknowledged, not the
target's: the coordinator fences a record at the target's epoch that holds work outside the share
(``target_assignment.judge``), and one behind it is still revoking, as it is. Each record without a
stopped task is that task's release: its new owner may start it from then on. The record at the target's
epoch comes once nothing is stopping, and with it the member's own starts.

Learners (warm-up hand-over, ``handover`` and ``learner``) ride along in the same record: the member lists
the learners its target asks for, each ready or not, apart from what it runs and claims. They are never
claimed and never started here, so they change nothing of the above; the record is just how a learner's
readiness reaches the coordinator.

Pure: the folded :class:`~kconnect.runtime.group.group_records.GroupState`, the member's id, what it runs
and what it last wrote in; a :class:`Step` out.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kconnect.runtime.group import protocol
from kconnect.runtime.group.group_records import Assigned, CurrentMemberAssignmentValue, GroupState, Learner
from kconnect.runtime.group.target_assignment import target_member
from kconnect.runtime.ids import TaskId

__all__ = ["Step", "reconcile"]


@dataclass(frozen=True, slots=True)
class Step:
    """What a member does next, in this order: stop ``revoke``, write ``record``, start ``start``."""

    #: The target epoch the member reconciles to; -1 while no target includes it.
    epoch: int = -1
    revoke: Assigned = field(default_factory=Assigned)
    #: The current-assignment record to write (acknowledgement and claims); None: nothing new to say.
    record: CurrentMemberAssignmentValue | None = None
    start: Assigned = field(default_factory=Assigned)
    #: The leader deleted this member's record (FENCED_MEMBER_EPOCH): stop everything and rejoin.
    fenced: bool = False
    #: What the target still has to give this member (claimed or waiting for another member).
    pending: Assigned = field(default_factory=Assigned)


def _others(group: GroupState, member_id: str) -> Assigned:
    """Everything another member's record lists (runs, or has claimed)."""
    others = Assigned()
    for other, current in group.current.items():
        if other != member_id:
            others |= current.assigned
    return others


def _record(
    epoch: int, assigned: Assigned, version: int, learners: frozenset[Learner] = frozenset()
) -> CurrentMemberAssignmentValue:
    return CurrentMemberAssignmentValue(
        member_epoch=epoch,
        error=protocol.NO_ERROR,
        assigned=assigned,
        version=version,
        metadata=b"",
        learners=learners,
    )


def reconcile(
    group: GroupState | None,
    member_id: str,
    held: Assigned,
    written: CurrentMemberAssignmentValue | None,
    *,
    acknowledged: bool,
    learners: frozenset[Learner] = frozenset(),
    stopping: frozenset[TaskId] = frozenset(),
) -> Step:
    """The member's next step toward its target share.

    ``held`` is what the member runs (or owns) now; ``written`` the last record it wrote (read back or
    not), so a record is not written twice; ``acknowledged`` whether its own record has been read back
    since it joined, so that a missing record means the leader deleted it (fenced), not that it was never
    written. ``learners`` are the target's learners for this member as it reports them (``learner.reported``:
    each ready or not); only those the target still asks for are written. ``stopping`` are tasks the member
    no longer holds but has not finished stopping: they stay listed, at the epoch of the member's last
    record, and nothing starts until none is left (see the module docstring).
    """
    if group is None:
        return Step()
    mine = group.current.get(member_id)
    if acknowledged and mine is None:
        return Step(fenced=True, revoke=held)
    target = group.target
    entry = target_member(target, member_id)
    if target is None or entry is None:
        return Step()
    epoch, share = target.assignment_epoch, entry.assigned
    revoke, kept = held - share, held & share
    others = _others(group, member_id)
    # Claimed and read back at this epoch, and nobody else lists it: start it.
    start = Assigned()
    if mine is not None and mine.member_epoch == epoch:
        start = (mine.assigned & share) - kept - others
    # The record lists what keeps running and everything of the share nobody else lists (claims).
    asked = {x.task: x.since_ms for x in entry.learners}
    reporting = frozenset(x for x in learners if asked.get(x.task) == x.since_ms)
    if stopping:
        # Still releasing: say what is stopping, at the epoch last acknowledged; start nothing yet.
        prior = written.member_epoch if written is not None else mine.member_epoch if mine is not None else 0
        prior = min(prior, epoch)
        listed = kept | Assigned(frozenset(), stopping) | (share - others)
        desired = _record(prior, listed, entry.version, reporting)
        record = None if written == desired else desired
        return Step(epoch=prior, revoke=revoke, record=record, pending=share - kept)
    desired = _record(epoch, kept | (share - others), entry.version, reporting)
    record = None if written == desired else desired
    pending = share - kept - start
    return Step(epoch=epoch, revoke=revoke, record=record, start=start, pending=pending)
