"""The leader's memory across leader changes, kept in the group records (issue 7, KIP-848 seed's model).

KIP-415 admits a weakness: a new leader "has no way of deciding whether unaccounted tasks are new or
lost". Java's new leader assigns everything unaccounted at once, so when the old leader vanishes with its
work (or while a scheduled rebalance is running) that work moves immediately instead of waiting
``scheduled.rebalance.max.delay.ms`` for its owner to return.

kconnect's leader writes, after each assignment it computes, the records of the seed's data model:

* the group epoch (the generation) and the connectors and tasks the group accounts for at that epoch
  (what is assigned plus lost work still held back: exactly the assignor's memory of "previous work");
* one member-metadata record per member (tombstoned when it leaves);
* the target assignment: each member's whole intended share, with the wire assignment it was sent
  (whose ``delay`` and the record's timestamp give the absolute time a scheduled rebalance is due);
* the group's configuration (the settings the assignment depends on).

Each member then writes its current assignment when it has applied one. A new leader reads the topic and
rebuilds the assignor's state with :func:`remember`: work the previous epoch accounted for that no member
reports is lost (held for the delay), work it never knew is new, and a delay in progress continues with
the time it has left. Everything here is pure; the worker does the reading and writing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from kconnect.runtime.group import protocol
from kconnect.runtime.group.assignor import CooperativeState
from kconnect.runtime.group.group_records import (
    Assigned,
    Assignor,
    ConnectorsTasksKey,
    ConnectorsTasksValue,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    GroupConfigurationKey,
    GroupConfigurationValue,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupState,
    MemberMetadataKey,
    MemberMetadataValue,
    RecordKey,
    RecordValue,
    TargetAssignmentKey,
    TargetAssignmentValue,
    TargetMember,
)
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.group.target_assignment import scheduled_rebalance
from kconnect.runtime.ids import TaskId

Record = tuple[RecordKey, RecordValue | None]


def whole_share(state: WorkerState | None, assignment: ConnectAssignment) -> Assigned:
    """What a member runs once it has applied ``assignment``: the wire assignment is incremental under
    the cooperative protocols (v1+: what it ran, minus revocations, plus additions) and whole under eager.
    """
    if assignment.version == protocol.V0 or state is None or state.allocation is None:
        return Assigned(frozenset(assignment.connectors), frozenset(assignment.tasks))
    connectors = set(state.allocation.connectors) - set(assignment.revoked_connectors)
    tasks = set(state.allocation.tasks) - set(assignment.revoked_tasks)
    return Assigned(
        frozenset(connectors.union(assignment.connectors)), frozenset(tasks.union(assignment.tasks))
    )


def _host(url: str) -> str:
    try:
        return urlsplit(url).hostname or ""
    except ValueError:
        return ""


def member_metadata(
    group_epoch: int, protocol_name: ProtocolName, version: int, worker: WorkerState
) -> MemberMetadataValue:
    """One member's record (type 5): its worker metadata as the one assignor entry of the selected
    protocol, and its worker id and host as instance, client and host."""
    return MemberMetadataValue(
        group_epoch=group_epoch,
        instance_id=worker.worker_id or "",
        client_id=worker.worker_id or "",
        client_host=_host(worker.url),
        assignors=(
            Assignor(
                name=protocol_name,
                minimum_version=version,
                maximum_version=version,
                reason=0,
                version=version,
                metadata=protocol.encode_metadata(worker, version),
            ),
        ),
    )


def round_records(
    group_id: str,
    *,
    generation: int,
    protocol_name: ProtocolName,
    members: Mapping[str, tuple[int, WorkerState]],
    assignments: Mapping[str, ConnectAssignment],
    state: CooperativeState,
    configuration: Sequence[tuple[str, str]],
    previous: GroupState | None,
) -> list[Record]:
    """The records a leader writes for the round it computed (``state`` is the assignor's next state).

    Members that were recorded but are no longer in the group get tombstones for their member metadata
    and current assignment. The caller drops records that did not change before writing.
    """
    records: list[Record] = [
        (MemberMetadataKey(group_id, member_id), member_metadata(generation, protocol_name, version, worker))
        for member_id, (version, worker) in sorted(members.items())
    ]
    if previous is not None:
        gone = (set(previous.members) | set(previous.current)) - set(members)
        for member_id in sorted(gone):
            if member_id in previous.members:
                records.append((MemberMetadataKey(group_id, member_id), None))
            if member_id in previous.current:
                records.append((CurrentMemberAssignmentKey(group_id, member_id), None))
    target = tuple(
        TargetMember(
            member_id=member_id,
            error=assignment.error,
            assigned=whole_share(members[member_id][1] if member_id in members else None, assignment),
            version=assignment.version,
            metadata=protocol.encode_assignment(assignment),
        )
        for member_id, assignment in sorted(assignments.items())
    )
    accounted = Assigned(state.previous_connectors, state.previous_tasks)
    records.append((ConnectorsTasksKey(group_id), ConnectorsTasksValue(generation, accounted)))
    records.append((TargetAssignmentKey(group_id), TargetAssignmentValue(generation, target, state.homes)))
    records.append((GroupConfigurationKey(group_id), GroupConfigurationValue(tuple(configuration))))
    # The group epoch last: a reader that sees it knows the records of that epoch precede it.
    records.append((GroupMetadataKey(group_id), GroupMetadataValue(generation)))
    return records


def current_assignment_record(
    group_id: str, member_id: str, generation: int, assignment: ConnectAssignment, running: Assigned
) -> Record:
    """A member's record of what it runs after applying the assignment of ``generation``."""
    return (
        CurrentMemberAssignmentKey(group_id, member_id),
        CurrentMemberAssignmentValue(
            member_epoch=generation,
            error=assignment.error,
            assigned=running,
            version=assignment.version,
            metadata=protocol.encode_assignment(assignment),
        ),
    )


def _decoded_targets(target: TargetAssignmentValue) -> list[ConnectAssignment]:
    out = []
    for member in target.members:
        if not member.metadata:
            continue
        try:
            out.append(protocol.decode_assignment(member.metadata))
        except protocol.ProtocolError:
            continue  # a member entry we cannot read tells nothing about delays or revocations
    return out


def remember(
    group: GroupState | None,
    *,
    completed: int,
    now_ms: int,
    previous_version: int | None = None,
) -> CooperativeState | None:
    """The assignor state a new leader starts from, rebuilt from the group's records; None when there
    is nothing to remember (no target assignment was ever written for this group).

    ``completed`` is the last generation the new leader completed: the records are used only when their
    target assignment is of that very generation, and the rebuilt state then claims it as its previous
    generation so the assignor uses it instead of starting afresh. ``now_ms`` is wall-clock
    time, the clock of the records' timestamps.
    """
    if group is None or group.target is None or group.connectors_tasks is None:
        return None
    target = group.target
    if target.assignment_epoch != completed:
        # The records describe a generation this leader did not complete (it missed it, or the old
        # leader wrote a round that never completed): members report allocations of another epoch, and
        # matching them against this target would call work lost that was only never handed out.
        return None
    decoded = _decoded_targets(target)
    revoked_c = frozenset(c for a in decoded for c in a.revoked_connectors)
    revoked_t = frozenset(t for a in decoded for t in a.revoked_tasks)
    accounted = group.connectors_tasks.assigned
    scheduled_ms, delay_ms = 0, 0
    candidates: tuple[str, ...] = ()
    due = scheduled_rebalance(group)  # the group records' own reading of the delay
    if due is not None:
        scheduled_ms = due[0]
        delay_ms = max(0, due[0] - now_ms)
        # Members that were empty while the delay ran get the lost work when it ends.
        candidates = tuple(
            m.member_id for m in target.members if not m.assigned.connectors and not m.assigned.tasks
        )
    return CooperativeState(
        previous_generation=completed,
        previous_members=frozenset(m.member_id for m in target.members),
        previous_connectors=frozenset(accounted.connectors),
        previous_tasks=frozenset(accounted.tasks),
        revoked_connectors=revoked_c,
        revoked_tasks=revoked_t,
        revoked_in_previous=bool(revoked_c or revoked_t),
        scheduled_rebalance_ms=scheduled_ms,
        delay_ms=delay_ms,
        candidates=candidates,
        previous_version=previous_version,
        homes=target.homes,
    )


def held_back(group: GroupState) -> Assigned:
    """Work the group accounts for that no member's target holds: lost work waiting for its owner."""
    if group.connectors_tasks is None or group.target is None:
        return Assigned(frozenset(), frozenset())
    held_c = set(group.connectors_tasks.assigned.connectors)
    held_t: set[TaskId] = set(group.connectors_tasks.assigned.tasks)
    for member in group.target.members:
        held_c -= member.assigned.connectors
        held_t -= member.assigned.tasks
    return Assigned(frozenset(held_c), frozenset(held_t))
