"""The task lifecycle on this worker: the herder's task actions carried out, and the statuses they report.

Why a module of its own (``connectors.py`` is the same for connectors): every start, stop and transition
of a task writes the status Apache Kafka Connect writes for it (RUNNING, PAUSED or FAILED from the executor;
UNASSIGNED when the task stops, as Java's WorkerTask reports on shutdown; RESTARTING between a restart's
stop and start), so that the status topic's history shows every hand-over: a task stopped here before it
started elsewhere.
"""

from __future__ import annotations

from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.dataplane.executor import Executor
from kconnect.runtime.group import herder as hd
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.connectors import strings
from kconnect.runtime.shell.stores import InternalTopics
from kconnect.runtime.shell.view import WorkerMetrics
from kconnect.runtime.storage import status_log

State = status_log.State


class Tasks:
    """Carries out the herder's task actions through the executor and reports each outcome."""

    def __init__(
        self,
        config: WorkerConfig,
        worker_id: str,
        executor: Executor,
        stores: InternalTopics,
        metrics: WorkerMetrics,
    ) -> None:
        self.config = config
        self.worker_id = worker_id
        self.executor = executor
        self.stores = stores
        self.metrics = metrics
        self.log = logs.get("kconnect.worker", worker=worker_id)

    def _report(self, status: status_log.ConnectorStatus | status_log.TaskStatus) -> None:
        self.stores.put_status(status)

    def start(self, action: hd.StartTask, generation: int) -> None:
        """Start a task and report the state the executor answers (RUNNING, PAUSED or FAILED)."""
        self.metrics.task_startup_attempts += 1
        state = self.executor.start_task(action.task, strings(action.config), action.target_state)
        if state.state == "FAILED":
            self.metrics.task_startup_failures += 1
        else:
            self.metrics.task_startup_successes += 1
        self._report(
            status_log.TaskStatus(
                action.task, State(state.state), state.trace, self.worker_id, generation, state.version
            )
        )
        self.log.info("task started", connector=action.task.connector, task=action.task.task)

    def stop(self, action: hd.StopTask, generation: int) -> None:
        """Stop a task, then report it UNASSIGNED unless its connector was deleted (whose statuses stay
        deleted)."""
        self.executor.stop_task(action.task, self.config.task_shutdown_graceful_timeout_ms / 1000)
        self.log.info("task stopped", connector=action.task.connector, task=action.task.task)
        if self.stores.snapshot().contains(action.task.connector):
            self._report(
                status_log.TaskStatus(action.task, State.UNASSIGNED, None, self.worker_id, generation)
            )

    def failed(self, task: TaskId, trace: str, herder: hd.Herder) -> None:
        """A task failed on its own thread after it started: report it FAILED, as Java's WorkerTask does."""
        self.log.error("task failed", connector=task.connector, task=task.task)
        status = status_log.TaskStatus(task, State.FAILED, trace, self.worker_id, herder.group.generation)
        self._report(status)  # put_status logs a write that fails; it never raises into the executor

    def transition(self, action: hd.TransitionTask, generation: int) -> None:
        """Move a running task to a new target state and report the state that results."""
        state = self.executor.transition_task(action.task, action.target_state)
        self._report(
            status_log.TaskStatus(
                action.task, State(state.state), state.trace, self.worker_id, generation, state.version
            )
        )
        self.log.info("task transitioned", task=str(action.task), target_state=action.target_state)

    def report_restarting(self, action: hd.ReportRestarting, generation: int) -> None:
        """RESTARTING for a connector or task between its stop and its start (a restart request)."""
        self._report(
            status_log.ConnectorStatus(action.connector, State.RESTARTING, None, self.worker_id, generation)
            if action.task is None
            else status_log.TaskStatus(action.task, State.RESTARTING, None, self.worker_id, generation)
        )

    def report_unassigned(self, action: hd.ReportUnassigned) -> None:
        """UNASSIGNED, with the reason, for static work no live worker may run (KIP-987)."""
        why, at = action.reason, action.generation
        for name in sorted(action.connectors):
            self._report(status_log.ConnectorStatus(name, State.UNASSIGNED, why, self.worker_id, at))
        for task in sorted(action.tasks):
            self._report(status_log.TaskStatus(task, State.UNASSIGNED, why, self.worker_id, at))
