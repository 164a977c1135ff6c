"""A group as people and the leader read it: the view of ``GET /group`` and ``kconnect group describe``.

Why apart from ``group_records``: that module is the records' format and the fold over the topic (bytes in,
frozen state out); this one reads the folded :class:`~kconnect.runtime.group.group_records.GroupState`,
opening the Connect metadata and assignments nested in its records (``protocol``), and says when the last
target assignment's scheduled rebalance falls due. Pure, like the fold.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kconnect.runtime.group import protocol
from kconnect.runtime.group.group_records import Assigned, GroupState
from kconnect.runtime.ids import TaskId

__all__ = ["describe", "scheduled_rebalance"]


def _assigned_json(assigned: Assigned) -> dict[str, list[str]]:
    return {
        "connectors": sorted(assigned.connectors),
        "tasks": [str(t) for t in sorted(assigned.tasks)],
    }


def _tasks(items: Iterable[TaskId]) -> list[str]:
    return [str(t) for t in sorted(items)]


def _worker_metadata(data: bytes) -> dict[str, Any] | None:
    """Connect's worker metadata inside an assignor entry, when it decodes as such."""
    if not data:
        return None
    try:
        version, state = protocol.decode_metadata(data)
    except ValueError:
        return None
    allocation = state.allocation
    return {
        "version": version,
        "url": state.url,
        "config_offset": state.config_offset,
        "leaving": state.leaving,
        "worker_id": state.worker_id,
        "static_connectors": list(state.static_connectors),
        "static_tasks": _tasks(state.static_tasks),
        "allocation": None
        if allocation is None
        else {"connectors": list(allocation.connectors), "tasks": _tasks(allocation.tasks)},
    }


def _connect_assignment(data: bytes) -> dict[str, Any] | None:
    """Connect's assignment inside a target member's Metadata, when it decodes as such."""
    if not data:
        return None
    try:
        a = protocol.decode_assignment(data)
    except ValueError:
        return None
    return {
        "version": a.version,
        "error": a.error,
        "leader": a.leader,
        "leader_url": a.leader_url,
        "config_offset": a.config_offset,
        "connectors": list(a.connectors),
        "tasks": _tasks(a.tasks),
        "revoked": {"connectors": list(a.revoked_connectors), "tasks": _tasks(a.revoked_tasks)},
        "delay_ms": a.delay_ms,
    }


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
            delay = max(delay, protocol.decode_assignment(member.metadata).delay_ms)
        except ValueError:
            continue  # a member entry we cannot read tells nothing about the delay
    if delay <= 0:
        return None
    return state.target_timestamp_ms + delay, delay


def describe(state: GroupState, *, now_ms: int) -> dict[str, Any]:
    """The group as JSON-ready data, shared by ``GET /group`` and ``kconnect group describe --json``.

    ``scheduled_rebalance`` says when the work of vanished members will be spread if they do not come
    back: the target record's timestamp plus the longest delay in its members' Connect assignments.
    """
    ct = state.connectors_tasks
    members = [
        {
            "member_id": member_id,
            "group_epoch": m.group_epoch,
            "instance_id": m.instance_id,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "subscribed_topic_names": list(m.subscribed_topic_names),
            "subscribed_topic_regex": m.subscribed_topic_regex,
            "assignors": [
                {
                    "name": a.name,
                    "version": a.version,
                    "minimum_version": a.minimum_version,
                    "maximum_version": a.maximum_version,
                    "reason": a.reason,
                    "metadata": _worker_metadata(a.metadata),
                }
                for a in m.assignors
            ],
        }
        for member_id, m in sorted(state.members.items())
    ]
    target: dict[str, Any] | None = None
    vanished: list[str] = []
    if state.target is not None:
        target_members = []
        for tm in sorted(state.target.members, key=lambda t: t.member_id):
            assignment = _connect_assignment(tm.metadata)
            target_members.append(
                {
                    "member_id": tm.member_id,
                    **_assigned_json(tm.assigned),
                    "error": tm.error,
                    "version": tm.version,
                    "assignment": assignment,
                }
            )
            if tm.member_id not in state.members:
                vanished.append(tm.member_id)
        target = {"assignment_epoch": state.target.assignment_epoch, "members": target_members}
    scheduled: dict[str, int] | None = None
    if (due := scheduled_rebalance(state)) is not None:
        scheduled = {"due_ms": due[0], "remaining_ms": max(0, due[0] - now_ms)}
    return {
        "group": state.group_id,
        "epoch": state.epoch,
        "connectors_tasks": None if ct is None else {"epoch": ct.epoch, **_assigned_json(ct.assigned)},
        "members": members,
        "target": target,
        "current": [
            {
                "member_id": member_id,
                "member_epoch": c.member_epoch,
                **_assigned_json(c.assigned),
                "error": c.error,
            }
            for member_id, c in sorted(state.current.items())
        ],
        "configuration": None if state.configuration is None else dict(state.configuration.configurations),
        "scheduled_rebalance": scheduled,
        "vanished": sorted(vanished),
        "last_offset": state.last_offset,
    }
