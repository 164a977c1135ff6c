"""Leader-side assignors: who runs which connector and task in the next generation.

Pure functions of the members' metadata and the leader's view of the config topic, so every rule is a
table test. The leader calls one of them in onLeaderElected and encodes the result with
:mod:`kconnect.runtime.protocol`.

* :func:`eager_assign` is Apache Kafka Connect's EagerAssignor (protocol "default"): every member stopped
  everything before joining, so the whole cluster is dealt out again round-robin.
* :func:`revoking_assign` serves "compatible"/"sessioned" until the KIP-415 incremental cooperative
  assignor lands: same target as eager, but members keep running what stays with them, and nothing starts
  on one member while another still reports it.

Both sort members and connector names the way Java's ``String.compareTo`` does (UTF-16 code units), so a
kconnect leader and a Java leader deal the same cluster out identically, even for names outside the BMP.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kconnect.runtime.ids import TaskId
from kconnect.runtime.protocol import (
    CONFIG_MISMATCH,
    NO_ERROR,
    V0,
    ConnectAssignment,
    WorkerState,
)

__all__ = ["eager_assign", "revoking_assign"]


def _java_order(s: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like Java compares strings: code unit by code unit, with a
    # prefix first. Python's own order (code points) differs once supplementary characters are involved.
    return s.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True, slots=True)
class _Frame:
    """What every member's assignment shares in one generation."""

    leader: str
    leader_url: str
    config_offset: int
    mismatch: bool


def _frame(leader_id: str, members: Mapping[str, WorkerState], leader_config_offset: int) -> _Frame:
    if leader_id not in members:
        raise ValueError(f"the leader {leader_id!r} is not among the group's members")
    # Java assigns at the highest offset any member has read. A leader behind it cannot know the configs
    # the others act on, so it assigns nothing and tells everyone to resync (CONFIG_MISMATCH).
    max_offset = max(state.config_offset for state in members.values())
    return _Frame(leader_id, members[leader_id].url, max_offset, leader_config_offset < max_offset)


def _round_robin(
    members: Mapping[str, WorkerState], connectors: Mapping[str, int]
) -> dict[str, tuple[list[str], list[TaskId]]]:
    """EagerAssignor's deal: all connectors, then all tasks, from one circular iterator over the members.

    Connectors go first so that a cluster of one-task connectors does not put every connector on even
    members and every task on odd ones. Item k of the deal goes to member k mod M, which lets each
    member's share be taken as one stride slice: O(connectors + tasks), no per-item bookkeeping.
    """
    member_ids = sorted(members, key=_java_order)
    names = sorted(connectors, key=_java_order)
    tasks: list[TaskId] = []
    for name in names:
        count = connectors[name]
        if count < 0:
            raise ValueError(f"connector {name!r} has a negative task count {count}")
        tasks.extend(TaskId(name, n) for n in range(count))
    m = len(member_ids)
    first_task_turn = len(names) % m  # the member the circular iterator reaches after the connectors
    return {
        member: (names[i::m], tasks[(i - first_task_turn) % m :: m]) for i, member in enumerate(member_ids)
    }


def _mismatch(
    frame: _Frame, members: Mapping[str, WorkerState], version: int
) -> dict[str, ConnectAssignment]:
    return {
        member: ConnectAssignment(
            version, CONFIG_MISMATCH, frame.leader, frame.leader_url, frame.config_offset, (), ()
        )
        for member in members
    }


def eager_assign(
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
) -> dict[str, ConnectAssignment]:
    """The eager ("default" protocol, v0) assignment of every member, as Apache's EagerAssignor makes it.

    ``connectors`` maps each connector in the leader's config snapshot to its committed task count. The
    assignments carry the highest config offset any member reported; if the leader is behind it, every
    member gets CONFIG_MISMATCH instead. No members, no assignments.
    """
    if not members:
        return {}
    frame = _frame(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return _mismatch(frame, members, V0)
    return {
        member: ConnectAssignment(
            V0, NO_ERROR, frame.leader, frame.leader_url, frame.config_offset, tuple(names), tuple(tasks)
        )
        for member, (names, tasks) in _round_robin(members, connectors).items()
    }


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
    happen. Same CONFIG_MISMATCH rule as :func:`eager_assign`.
    """
    if version <= V0:
        raise ValueError(
            f"revoking_assign serves the cooperative protocols (version >= 1), not version {version}"
        )
    if not members:
        return {}
    frame = _frame(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return _mismatch(frame, members, version)
    target = _round_robin(members, connectors)

    # Who gets each item in the target; the items anyone still runs.
    target_connector: dict[str, str] = {}
    target_task: dict[TaskId, str] = {}
    for member, (names, tasks) in target.items():
        target_connector.update(dict.fromkeys(names, member))
        target_task.update(dict.fromkeys(tasks, member))
    running_connectors: set[str] = set()
    running_tasks: set[TaskId] = set()
    for state in members.values():
        if state.allocation is not None:
            running_connectors.update(state.allocation.connectors)
            running_tasks.update(state.allocation.tasks)

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
