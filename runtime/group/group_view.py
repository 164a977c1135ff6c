"""A group as people and the leader read it: the view of ``GET /group`` and ``kconnect group describe``.

Why apart from ``group_records``: that module is the records' format and the fold over the topic (bytes in,
frozen state out); this one reads the folded :class:`~kconnect.runtime.group.group_records.GroupState`,
opening the Connect metadata and assignments nested in its records (``protocol``), says when the last
target assignment's scheduled rebalance falls due, and how far each member is from its target share
(:func:`reconciliation`). Pure, like the fold: computed from the records alone, so every worker and the
CLI tell the same.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kconnect.runtime.group import protocol
from kconnect.runtime.group.group_records import Assigned, GroupState, Learner
from kconnect.runtime.group.target_assignment import (
    REBALANCE_TIMEOUT_KEY,
    is_reconciled_target,
    judge,
    recorded_rebalance_timeout,
    scheduled_rebalance,
    target_share,
)
from kconnect.runtime.ids import TaskId

# ``REBALANCE_TIMEOUT_KEY``, ``recorded_rebalance_timeout`` and ``scheduled_rebalance`` live in
# ``target_assignment`` (the coordinator reads them too) and are named here for the callers of old.
__all__ = [
    "REBALANCE_TIMEOUT_KEY",
    "describe",
    "reconciliation",
    "recorded_rebalance_timeout",
    "scheduled_rebalance",
]


def _assigned_json(assigned: Assigned) -> dict[str, list[str]]:
    return {
        "connectors": sorted(assigned.connectors),
        "tasks": [str(t) for t in sorted(assigned.tasks)],
    }


def _learners_json(learners: frozenset[Learner]) -> list[dict[str, Any]]:
    """Learners (warm-up hand-over) as the seed tags them; sorted by task."""
    return [
        {"task": str(x.task), "is_learner": True, "is_ready": x.ready, "since_ms": x.since_ms}
        for x in sorted(learners, key=lambda x: (x.task, x.since_ms))
    ]


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


def reconciliation(state: GroupState, now_ms: int, rebalance_timeout_ms: int | None = None) -> dict[str, Any]:
    """The epochs and how far each member is from its target share, as JSON-ready data.

    One entry per member any record names (member metadata, the target, a current assignment), with its
    member epoch (its current-assignment record's; None without one), what that record lists beyond its
    target share (``to_revoke``) and what its share holds that the record does not list yet
    (``to_receive``); both None while there is no target. ``verdict`` is the coordinator's own check
    (``target_assignment.judge``) of the member's record against a reconciled target
    (``group.protocol=connect``), with the target's age taken from the target record's timestamp; None
    for a target recorded after a classic round, which no coordinator judges. The revocation deadline is
    ``rebalance_timeout_ms`` when given, else the one the leader recorded in the group configuration;
    when neither is known no member is taken as past it.
    """
    target = state.target
    reconciled = is_reconciled_target(target)
    timeout = rebalance_timeout_ms if rebalance_timeout_ms is not None else recorded_rebalance_timeout(state)
    age = 0
    if target is not None and state.target_timestamp_ms is not None:
        age = max(0, now_ms - state.target_timestamp_ms)
    member_ids = set(state.members) | set(state.current)
    if target is not None:
        member_ids |= {m.member_id for m in target.members}
    members: list[dict[str, Any]] = []
    for member_id in sorted(member_ids):
        current = state.current.get(member_id)
        entry: dict[str, Any] = {
            "member_id": member_id,
            "member_epoch": None if current is None else current.member_epoch,
            "verdict": None,
            "to_revoke": None,
            "to_receive": None,
        }
        if target is not None:
            held = Assigned() if current is None else current.assigned
            share = target_share(target, member_id) or Assigned()
            entry["to_revoke"] = _assigned_json(held - share)
            entry["to_receive"] = _assigned_json(share - held)
            if reconciled:
                verdict, _epoch = judge(
                    current,
                    target,
                    member_id,
                    target_age_ms=age,
                    # Unknown deadline: never past it.
                    rebalance_timeout_ms=age if timeout is None else timeout,
                )
                entry["verdict"] = verdict.value
        members.append(entry)
    return {
        "group_epoch": state.epoch,
        "assignment_epoch": None if target is None else target.assignment_epoch,
        "reconciled": reconciled,
        "rebalance_timeout_ms": timeout,
        "members": members,
    }


def describe(state: GroupState, *, now_ms: int) -> dict[str, Any]:
    """The group as JSON-ready data, shared by ``GET /group`` and ``kconnect group describe --json``.

    ``scheduled_rebalance`` says when the work of vanished members will be spread if they do not come
    back: the target record's timestamp plus the longest delay in its members' Connect assignments.
    ``reconciliation`` gives the epochs and how far each member is from its target share.
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
                    "learners": _learners_json(tm.learners),
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
                "learners": _learners_json(c.learners),
                "error": c.error,
            }
            for member_id, c in sorted(state.current.items())
        ],
        "configuration": None if state.configuration is None else dict(state.configuration.configurations),
        "scheduled_rebalance": scheduled,
        "vanished": sorted(vanished),
        "last_offset": state.last_offset,
        "reconciliation": reconciliation(state, now_ms),
    }
