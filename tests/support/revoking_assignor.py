"""A test model: the simpler cooperative (v1/v2) assignor that served before KIP-415's landed.

Why it is kept, in tests/support and not in the product: it reaches the eager target in at most two rounds
with no delay, which makes it the baseline the herder's and the group model's tests replay rebalances
with. The leader does not use it:
:func:`kconnect.runtime.group.assignor.leader_assign` picks
:func:`kconnect.runtime.group.cooperative_assignor.cooperative_assign` for the cooperative protocols.
"""

from __future__ import annotations

from collections.abc import Mapping

from kconnect.runtime.group.assignor_common import frame_of, mismatch_assignments, running_work
from kconnect.runtime.group.eager_assignor import round_robin
from kconnect.runtime.group.protocol import NO_ERROR, V0, ConnectAssignment, WorkerState
from kconnect.runtime.ids import TaskId

__all__ = ["revoking_assign"]


def revoking_assign(
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    version: int,
) -> dict[str, ConnectAssignment]:
    """A cooperative (v1/v2) assignment that converges on the eager target in at most two rounds.

    Members report everything they run in their metadata allocation (Java's coordinator folds each
    incremental assignment into it). Against the eager target:

    * revoked: what a member runs that its target does not hold (this includes deleted connectors and
      tasks, and every copy of an item reported twice except the one its target member runs);
    * assigned: what its target holds and it does not run, unless another member still reports it. That
      item is being revoked in this round and is handed out in the next one, after its old owner stopped
      it and rejoined, so a task never runs on two workers at once.

    The caller must rejoin after applying revocations, as Java's herder does, for the second round to
    happen. Same CONFIG_MISMATCH rule as
    :func:`~kconnect.runtime.group.eager_assignor.eager_assign`.
    """
    if version <= V0:
        raise ValueError(
            f"revoking_assign serves the cooperative protocols (version >= 1), not version {version}"
        )
    if not members:
        return {}
    frame = frame_of(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return mismatch_assignments(frame, members, version)
    target = round_robin(members, connectors)

    # Who gets each item in the target; the items anyone still runs.
    target_connector: dict[str, str] = {}
    target_task: dict[TaskId, str] = {}
    for member, (names, tasks) in target.items():
        target_connector.update(dict.fromkeys(names, member))
        target_task.update(dict.fromkeys(tasks, member))
    running_connectors, running_tasks = running_work(members)

    out: dict[str, ConnectAssignment] = {}
    for member, (names, tasks) in target.items():
        owned = members[member].allocation
        revoked_connectors: tuple[str, ...] = ()
        revoked_tasks: tuple[TaskId, ...] = ()
        if owned is not None:
            revoked_connectors = tuple(c for c in owned.connectors if target_connector.get(c) != member)
            revoked_tasks = tuple(t for t in owned.tasks if target_task.get(t) != member)
        out[member] = ConnectAssignment(
            version,
            NO_ERROR,
            frame.leader,
            frame.leader_url,
            frame.config_offset,
            tuple(c for c in names if c not in running_connectors),
            tuple(t for t in tasks if t not in running_tasks),
            revoked_connectors,
            revoked_tasks,
            0,
        )
    return out
