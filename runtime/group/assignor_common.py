"""What every assignor shares: Java's string order, and the frame of one generation's assignments.

Why a module of its own: the eager, revoking, cooperative and static assignors (one module each) and the
leader's dispatch (:mod:`kconnect.runtime.group.assignor`) all deal members and connectors out in the
order Java's ``String.compareTo`` gives (UTF-16 code units), so a kconnect leader and a Java leader deal
the same cluster out identically, even for names outside the BMP; and all of them answer CONFIG_MISMATCH
the same way when the leader is behind the group's config offset.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from kconnect.runtime.group.protocol import CONFIG_MISMATCH, ConnectAssignment, WorkerState
from kconnect.runtime.ids import TaskId

__all__ = ["Frame", "checked_names", "frame_of", "java_order", "mismatch_assignments", "running_work"]


def java_order(s: str) -> bytes:
    """The sort key that orders strings as Java's ``String.compareTo`` does, so that members and
    connectors are dealt out as a Java leader deals them."""
    # Big-endian UTF-16 bytes compare exactly like Java compares strings: code unit by code unit, with a
    # prefix first. Python's own order (code points) differs once supplementary characters are involved.
    return s.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True, slots=True)
class Frame:
    """What every member's assignment shares in one generation."""

    leader: str
    leader_url: str
    config_offset: int
    mismatch: bool


def frame_of(leader_id: str, members: Mapping[str, WorkerState], leader_config_offset: int) -> Frame:
    """The generation's frame: the leader, and the config offset every member must read to, which is the
    highest any member has read; ``mismatch`` when the leader is behind it."""
    if leader_id not in members:
        raise ValueError(f"the leader {leader_id!r} is not among the group's members")
    # Java assigns at the highest offset any member has read. A leader behind it cannot know the configs
    # the others act on, so it assigns nothing and tells everyone to resync (CONFIG_MISMATCH).
    max_offset = max(state.config_offset for state in members.values())
    return Frame(leader_id, members[leader_id].url, max_offset, leader_config_offset < max_offset)


def mismatch_assignments(
    frame: Frame, members: Mapping[str, WorkerState], version: int
) -> dict[str, ConnectAssignment]:
    """Every member's answer when the leader is behind (``frame.mismatch``): CONFIG_MISMATCH and nothing
    assigned, so that each member reads the config topic further and rejoins."""
    return {
        member: ConnectAssignment(
            version, CONFIG_MISMATCH, frame.leader, frame.leader_url, frame.config_offset, (), ()
        )
        for member in members
    }


def checked_names(connectors: Mapping[str, int]) -> list[str]:
    """The connectors in Java order; a negative task count (a corrupt snapshot) raises ValueError, so no
    assignor deals out work it cannot count."""
    names = sorted(connectors, key=java_order)
    for name in names:
        if connectors[name] < 0:
            raise ValueError(f"connector {name!r} has a negative task count {connectors[name]}")
    return names


def running_work(members: Mapping[str, WorkerState]) -> tuple[set[str], set[TaskId]]:
    """The connectors and tasks any member reports running: an item among them is given to its new
    owner only in a later round, after its old owner released it, so nothing ever runs twice."""
    connectors: set[str] = set()
    tasks: set[TaskId] = set()
    for state in members.values():
        if state.allocation is not None:
            connectors.update(state.allocation.connectors)
            tasks.update(state.allocation.tasks)
    return connectors, tasks
