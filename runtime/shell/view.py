"""Read-only views of a worker: what REST and ``GET /metrics`` read, never the worker's lock or herder.

Why: the herder and the states folded from the internal topics change on the herder thread and the log
threads; a REST handler that read them field by field could see half of a rebalance. The worker takes one
consistent reading under its lock (``Worker.view``) and hands out these frozen values instead.

REST reads the worker through this module alone: the plain types the view hands out (a member's
``WorkerState``, its ``ConnectAssignment``, the ``ProtocolName`` selected; a connector's ``TargetState``)
are named here for it, with the readings of the group records ``GET /group`` answers with
(:func:`describe_group`) and what a worker's group metadata can carry (:func:`metadata_string_problem`,
:data:`MAX_TASK_NUMBER`), so that ``rest/`` never imports the group layer or storage, whose internals can
then move without touching it (``tests/unit/test_architecture.py`` keeps it so).
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kconnect.config.worker_keys import ConnectProtocol, GroupProtocol
from kconnect.runtime.dataplane.executor import TaskCounters
from kconnect.runtime.dataplane.stall_watch import Reading
from kconnect.runtime.group import group_view, leader_memory
from kconnect.runtime.group.group_records import GroupState
from kconnect.runtime.group.herder import Herder
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.plugin_metrics import PluginSample
from kconnect.runtime.shell import metrics
from kconnect.runtime.storage import status_log, wire
from kconnect.runtime.storage.config_log import INT32_MAX, TargetState

__all__ = [
    "MAX_TASK_NUMBER",
    "UNHEALTHY_AFTER_S",
    "ConnectAssignment",
    "LeaderView",
    "ProtocolName",
    "TargetState",
    "WorkerMetrics",
    "WorkerState",
    "WorkerView",
    "describe_group",
    "figures",
    "health",
    "member_holds",
    "metadata_string_problem",
    "read",
    "stalled_sink_tasks",
]

#: The largest task number a worker's group metadata (an INT32) and the config topic's records carry.
MAX_TASK_NUMBER = INT32_MAX


def metadata_string_problem(value: str, what: str) -> str | None:
    """Why a worker's group metadata could not carry ``value`` as a Kafka STRING (``what`` names it in the
    message), or None when it can. REST refuses a static assignment naming such a value: accepted, it would
    fail every rebalance of the worker it names."""
    try:
        wire.string(value, what)
    except wire.WireError as exc:
        return str(exc)
    return None


def describe_group(state: GroupState, now_ms: int) -> dict[str, Any]:
    """``GET /group``'s body: the group records as people read them (``group_view.describe``: epochs,
    members, target and current assignments, any delay running, reconciliation) and the work the leader's
    memory holds back for vanished members (``leader_memory.held_back``). Pure: the folded records in."""
    body = group_view.describe(state, now_ms=now_ms)
    held = leader_memory.held_back(state)
    body["held_back"] = {
        "connectors": sorted(held.connectors),
        "tasks": sorted(str(t) for t in held.tasks),
    }
    return body


@dataclass
class WorkerMetrics:
    """This worker's rebalance and start-up counters (Java's connect-worker(-rebalance)-metrics).

    Mutable and written by the herder thread only; readers take copies through :class:`WorkerView` or
    :func:`figures`.
    """

    rebalances_completed: int = 0
    rebalance_time_ms_total: float = 0.0
    rebalance_started_at: float | None = None
    last_rebalance_ms: float = 0.0
    scheduled_delay_ms: int = 0
    rebalance_time_ms_max: float = 0.0
    last_rebalance_at: float | None = None
    connector_startup_attempts: int = 0
    connector_startup_successes: int = 0
    connector_startup_failures: int = 0
    task_startup_attempts: int = 0
    task_startup_successes: int = 0
    task_startup_failures: int = 0

    def rebalance_completed(self, delay_ms: int, succeeded: bool) -> None:
        """A rebalance completed: time it (from when this worker began to rejoin) if it succeeded."""
        started = self.rebalance_started_at
        if started is not None and succeeded:
            elapsed = (time.monotonic() - started) * 1000
            self.rebalances_completed += 1
            self.rebalance_time_ms_total += elapsed
            self.last_rebalance_ms = elapsed
            self.rebalance_time_ms_max = max(self.rebalance_time_ms_max, elapsed)
            self.last_rebalance_at = time.monotonic()
            self.rebalance_started_at = None
        self.scheduled_delay_ms = delay_ms


@dataclass(frozen=True, slots=True)
class LeaderView:
    """What the leader saw and decided in the last rebalance it led: the source of ``GET /workers``."""

    leader_id: str
    protocol: ProtocolName
    members: Mapping[str, tuple[int, WorkerState]]
    assignments: Mapping[str, ConnectAssignment]


def member_holds(
    member_id: str,
    state: WorkerState | None,
    assignment: ConnectAssignment | None,
    records: GroupState | None,
) -> tuple[set[str], set[TaskId]]:
    """What a member runs after the leader's last round: under the cooperative protocols what it reported
    (its allocation) minus what was revoked plus what was assigned; in a round that reconciles
    (``group.protocol=connect``) the round moved nothing and its current-assignment record says."""
    connectors: set[str] = set()
    tasks: set[TaskId] = set()
    if state is not None and state.allocation is not None and (assignment is None or assignment.version):
        connectors |= set(state.allocation.connectors)
        tasks |= set(state.allocation.tasks)
    if assignment is not None:
        connectors = (connectors - set(assignment.revoked_connectors)) | set(assignment.connectors)
        tasks = (tasks - set(assignment.revoked_tasks)) | set(assignment.tasks)
        current = records.current.get(member_id) if records is not None and assignment.reconcile else None
        if current is not None:
            connectors, tasks = set(current.assigned.connectors), set(current.assigned.tasks)
    return connectors, tasks


@dataclass(frozen=True, slots=True)
class WorkerView:
    """One consistent reading of this worker's place in the group, taken under the worker's lock.

    Why frozen: REST answers (``GET /workers``) are built from it after the lock is released, so nothing
    a rebalance changes meanwhile can make one answer contradict itself.
    """

    worker_id: str
    url: str
    member_id: str
    generation: int
    protocol: ProtocolName | None
    leader_id: str
    leader_url: str
    #: This worker completed a rebalance (it knows the group's generation and leader).
    group_known: bool
    rebalancing: bool
    is_leader: bool
    owned_connectors: tuple[str, ...]
    owned_tasks: tuple[TaskId, ...]
    #: What this worker decided when it last led a round (None if it never led one).
    leader_view: LeaderView | None
    rebalances_completed: int
    rebalance_time_ms_total: float
    last_rebalance_ms: float
    scheduled_delay_ms: int
    #: The executor's counters (``Executor.counters``), e.g. how many tasks it holds.
    executor_counters: Mapping[str, int] = field(default_factory=dict)
    #: ``group.protocol=connect``: the worker's setting and whether its generation reconciles.
    group_protocol: GroupProtocol = GroupProtocol.CLASSIC
    reconciling: bool = False
    #: The group and assignment epochs in the group records as read now (-1: none).
    group_epoch: int = -1
    assignment_epoch: int = -1
    #: The target epoch this member last reconciled to (-1: none) and what its share still has to give it.
    member_epoch: int = -1
    connectors_to_receive: int = 0
    tasks_to_receive: int = 0


def read(
    worker_id: str,
    url: str,
    herder: Herder,
    m: WorkerMetrics,
    leader_view: LeaderView | None,
    executor_counters: Mapping[str, int],
    *,
    group_records: GroupState | None = None,
    group_protocol: GroupProtocol = GroupProtocol.CLASSIC,
) -> WorkerView:
    """Copy what a REST answer needs out of the herder; the caller holds the worker's lock.

    ``group_records`` is this worker's group as its group records describe it (read under the same lock),
    ``group_protocol`` the worker's ``group.protocol``."""
    group = herder.group
    target = group_records.target if group_records is not None else None
    return WorkerView(
        worker_id=worker_id,
        url=url,
        member_id=group.member_id,
        generation=group.generation,
        protocol=group.protocol,
        leader_id=group.leader_id,
        leader_url=group.leader_url,
        group_known=group.known,
        rebalancing=herder.rebalancing,
        is_leader=herder.is_leader,
        owned_connectors=tuple(sorted(herder.owned_connectors)),
        owned_tasks=tuple(sorted(herder.owned_tasks)),
        leader_view=leader_view,
        rebalances_completed=m.rebalances_completed,
        rebalance_time_ms_total=m.rebalance_time_ms_total,
        last_rebalance_ms=m.last_rebalance_ms,
        scheduled_delay_ms=m.scheduled_delay_ms,
        executor_counters=dict(executor_counters),
        group_protocol=group_protocol,
        reconciling=group.reconciling,
        group_epoch=-1 if group_records is None or group_records.epoch is None else group_records.epoch,
        assignment_epoch=-1 if target is None else target.assignment_epoch,
        member_epoch=herder.member_epoch,
        connectors_to_receive=len(herder.pending.connectors),
        tasks_to_receive=len(herder.pending.tasks),
    )


#: A herder loop that has not come round for this long is reported unhealthy (Java waits 10 s for
#: a no-op herder request; our loop may block a little longer inside a join or a config catch-up).
UNHEALTHY_AFTER_S = 15.0


def health(
    startup_error: str | None,
    started: bool,
    stalled_s: float,
    stopping: bool,
    blocked: Sequence[Mapping[str, object]] = (),
    stalled: Sequence[Mapping[str, object]] = (),
) -> tuple[int, dict[str, object]]:
    """KIP-1017's ``GET /health``: 503 while starting, 200 once joined, 500 when the loop is stuck
    (``stalled_s`` since the herder loop last came round) or the worker failed to start.

    ``blocked``: plugin calls abandoned past their bound and not returned yet. They leave the worker
    healthy (they hold up nothing but their own connector or task, which is FAILED, or only fenced for a
    stuck ``stop()``), so the answer stays
    200, but its body lists them: a probe that restarts unhealthy workers would lose every other
    connector's work for a plugin's bug, while an operator reading the body learns what is stuck.

    ``stalled``: sink tasks whose reading is behind and has not moved for ``sink.task.stall.timeout.ms``
    (``stalled_sink_tasks``). The same reasoning keeps the answer 200: the worker re-establishes their
    reading itself, and a restarted worker would only stall the others."""
    if startup_error is not None:
        return 500, {"status": "unhealthy", "message": f"Worker failed to start: {startup_error}"}
    if not started:
        return 503, {"status": "starting", "message": "Worker is still starting up."}
    if stalled_s > UNHEALTHY_AFTER_S and not stopping:
        return 500, {
            "status": "unhealthy",
            "message": f"Worker's herder loop has not completed a tick in {stalled_s:.0f} s.",
        }
    body: dict[str, object] = {
        "status": "healthy",
        "message": "Worker has completed startup and is ready to handle requests.",
    }
    if blocked:
        body["message"] = (
            f"Worker has completed startup and is ready to handle requests; {len(blocked)} plugin "
            "call(s) are blocked past their time bound and abandoned (see blocked_plugin_calls)."
        )
        body["blocked_plugin_calls"] = [dict(b) for b in blocked]
    if stalled:
        body["message"] = (
            f"{body['message']} {len(stalled)} sink task(s) have read nothing for longer than "
            "sink.task.stall.timeout.ms while their partitions hold records past their position, or could "
            "not read their partitions' offsets at all (a cause given); their reading is being "
            "re-established (see stalled_sink_tasks)."
        )
        body["stalled_sink_tasks"] = [dict(t) for t in stalled]
    return 200, body


def _watch_figures(r: Reading | None) -> dict[str, Any]:
    """A sink task's stall watch as ``metrics.TaskFigures`` fields (none for other tasks)."""
    if r is None:
        return {}
    return {
        "sink_lag": r.lag,
        "last_progress_at": r.last_progress_at,
        "stalled": r.stalled,
        "reestablished": r.reestablished,
    }


def stalled_sink_tasks(running: Mapping[TaskId, TaskCounters]) -> list[dict[str, object]]:
    """The sink tasks whose reading is stalled now, as ``GET /health`` lists them (``stall_watch``)."""
    out: list[dict[str, object]] = []
    for task, counts in sorted(running.items(), key=lambda i: (i[0].connector, i[0].task)):
        r = counts.reading
        if r is None or not r.stalled:
            continue
        out.append(
            {
                "connector": task.connector,
                "task": task.task,
                "stalled_s": round(r.stalled_s, 1),
                "lag": r.lag,
                "partitions": list(r.partitions),
                "reestablished": r.reestablished,
                **({"cause": r.cause} if r.cause else {}),
            }
        )
    return out


def figures(
    view: WorkerView,
    m: WorkerMetrics,
    status: status_log.StatusState,
    running: Mapping[TaskId, TaskCounters],
    default_protocol: ConnectProtocol,
    plugins: Sequence[PluginSample] = (),
) -> metrics.WorkerFigures:
    """What ``GET /metrics`` reports, from one reading of the worker (``view``) and its statuses.

    Pure, so the mapping from the worker's state to Java's metric names is checked without a worker.
    ``default_protocol`` (the worker's ``connect.protocol``) is the protocol shown before the first
    rebalance selects one; ``plugins`` the KIP-877 metrics read from the worker's registry.
    """
    connector_states: dict[str, status_log.State] = {}
    for name in view.owned_connectors:
        cs = status.connector_status(name)
        connector_states[name] = cs.state if cs is not None else status_log.State.UNASSIGNED
    task_figures = []
    for task in view.owned_tasks:
        ts = status.task_status(task)
        counts = running.get(task)
        is_source = counts is not None and counts.kind == "source"
        task_figures.append(
            metrics.TaskFigures(
                task.connector,
                task.task,
                ts.state if ts is not None else status_log.State.UNASSIGNED,
                source_record_poll_total=counts.records if counts is not None and is_source else 0,
                sink_record_read_total=counts.records if counts is not None and not is_source else 0,
                offset_commit_avg_time_ms=counts.offset_commit_avg_ms if counts is not None else 0.0,
                placement=counts.placement if counts is not None else "",
                **_watch_figures(counts.reading if counts is not None else None),
            )
        )
    since = None if m.last_rebalance_at is None else (time.monotonic() - m.last_rebalance_at) * 1000
    return metrics.WorkerFigures(
        worker=view.worker_id,
        protocol=view.protocol or default_protocol,
        epoch=view.generation,
        leader=view.leader_url or "",
        rebalancing=view.rebalancing,
        completed_rebalances=m.rebalances_completed,
        rebalance_time_ms_total=m.rebalance_time_ms_total,
        rebalance_time_ms_max=m.rebalance_time_ms_max,
        time_since_last_rebalance_ms=since,
        connectors=connector_states,
        tasks=task_figures,
        connector_startup_attempts=m.connector_startup_attempts,
        connector_startup_successes=m.connector_startup_successes,
        connector_startup_failures=m.connector_startup_failures,
        task_startup_attempts=m.task_startup_attempts,
        task_startup_successes=m.task_startup_successes,
        task_startup_failures=m.task_startup_failures,
        scheduled_delay_ms=m.scheduled_delay_ms,
        group_protocol=view.group_protocol,
        reconciling=view.reconciling,
        group_epoch=view.group_epoch,
        assignment_epoch=view.assignment_epoch,
        member_epoch=view.member_epoch,
        connectors_to_receive=view.connectors_to_receive,
        tasks_to_receive=view.tasks_to_receive,
        plugins=tuple(plugins),
    )
