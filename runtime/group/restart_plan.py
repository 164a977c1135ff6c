"""What one restart request restarts: Java's ``RestartRequest`` rules over the statuses of the moment.

Why apart from ``herder``: the herder acts on each request once, for what runs here (stop, RESTARTING,
start); which connector and tasks a request selects (``onlyFailed``, ``includeTasks``) is this pure rule,
also what REST's answer to a restart is judged by.
"""

from __future__ import annotations

from dataclasses import dataclass

from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, RestartRequest
from kconnect.runtime.storage.status_log import State, StatusState

__all__ = ["RestartPlan", "restart_plan"]


@dataclass(frozen=True, slots=True)
class RestartPlan:
    """What one restart request restarts, judged against the statuses when it is processed."""

    connector: bool
    tasks: tuple[TaskId, ...]


def restart_plan(
    request: RestartRequest, snapshot: ClusterConfigSnapshot, statuses: StatusState
) -> RestartPlan | None:
    """Java's ``RestartRequest.shouldRestartConnector``/``shouldRestartTask`` over the current statuses.

    The connector restarts unless ``only_failed`` is set and it is not FAILED; a task restarts only with
    ``include_tasks``, and then under the same rule. None when the connector is unknown or has no status
    yet: Java answers "status not found" then, since "only failed" cannot be judged without one.
    """
    name = request.connector
    status = statuses.connector_status(name)
    if not snapshot.contains(name) or status is None:
        return None
    restart_connector = not request.only_failed or status.state is State.FAILED
    tasks: list[TaskId] = []
    if request.include_tasks:
        for task in snapshot.tasks(name):
            task_status = statuses.task_status(task)
            failed = task_status is not None and task_status.state is State.FAILED
            if not request.only_failed or failed:
                tasks.append(task)
    return RestartPlan(restart_connector, tuple(tasks))
