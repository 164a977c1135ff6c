"""The eager assignor (protocol "default", v0): Apache Kafka Connect's EagerAssignor.

Why it is this simple: under the eager protocol every member stopped everything before joining, so the
whole cluster is dealt out again, round-robin, every generation. Pure functions of the members' metadata
and the leader's config snapshot; :func:`kconnect.runtime.group.assignor.leader_assign` calls it for
"default" (after KIP-415's downgrade round, when the group comes from a cooperative protocol).
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet

from kconnect.runtime.group.assignor_common import checked_names, frame_of, java_order, mismatch_assignments
from kconnect.runtime.group.protocol import NO_ERROR, V0, ConnectAssignment, WorkerState
from kconnect.runtime.ids import TaskId

__all__ = ["eager_assign", "round_robin"]


def round_robin(
    members: Mapping[str, WorkerState], connectors: Mapping[str, int]
) -> dict[str, tuple[list[str], list[TaskId]]]:
    """EagerAssignor's deal: all connectors, then all tasks, from one circular iterator over the members.

    Connectors go first so that a cluster of one-task connectors does not put every connector on even
    members and every task on odd ones. Item k of the deal goes to member k mod M, which lets each
    member's share be taken as one stride slice: O(connectors + tasks), no per-item bookkeeping.
    """
    member_ids = sorted(members, key=java_order)
    names = checked_names(connectors)
    tasks: list[TaskId] = []
    for name in names:
        tasks.extend(TaskId(name, n) for n in range(connectors[name]))
    m = len(member_ids)
    first_task_turn = len(names) % m  # the member the circular iterator reaches after the connectors
    return {
        member: (names[i::m], tasks[(i - first_task_turn) % m :: m]) for i, member in enumerate(member_ids)
    }


def eager_assign(
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    *,
    leaving: AbstractSet[str] = frozenset(),
) -> dict[str, ConnectAssignment]:
    """The eager ("default" protocol, v0) assignment of every member, as Apache's EagerAssignor makes it.

    ``connectors`` maps each connector in the leader's config snapshot to its committed task count. The
    assignments carry the highest config offset any member reported; if the leader is behind it, every
    member gets CONFIG_MISMATCH instead. No members, no assignments.

    ``leaving`` (kconnect's graceful hand-over, beyond Java) names members that announced a planned
    departure: they get an empty assignment and the others share the work.
    """
    if not members:
        return {}
    frame = frame_of(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return mismatch_assignments(frame, members, V0)
    staying = {m: s for m, s in members.items() if m not in leaving} if leaving else members
    deal = round_robin(staying, connectors) if staying else {}
    return {
        member: ConnectAssignment(
            V0, NO_ERROR, frame.leader, frame.leader_url, frame.config_offset, tuple(names), tuple(tasks)
        )
        for member, (names, tasks) in ((m, deal.get(m, ([], []))) for m in members)
    }
