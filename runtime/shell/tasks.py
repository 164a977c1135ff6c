"""The task lifecycle on this worker: the herder's task actions carried out, and the statuses they report.

Why a module of its own (``connectors.py`` is the same for connectors): every start, stop and transition
of a task writes the status Apache Kafka Connect writes for it (UNASSIGNED, PAUSED or FAILED from the
executor when it starts; RUNNING once its loop runs, reported from the task's own thread, as Java's
WorkerTask reports RUNNING once its start returned; UNASSIGNED when the task stops, as Java's WorkerTask
reports on shutdown; RESTARTING between a restart's stop and start), so that the status topic's history
shows every hand-over: a task stopped here before it started elsewhere.

The herder's thread and the tasks' own threads both write a task's status, so every write is made under
one lock and says what the executor holds the task to be at that moment (``Executor.task_state``), not
what it was when the write was decided: the last write is then always the task's state, whatever order
the two threads came in.
"""

from __future__ import annotations

import threading

from kconnect.config.config_providers import ConfigProviders
from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.dataplane.executor import Executor, TaskState
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
        config_providers: ConfigProviders | None = None,
    ) -> None:
        self.config = config
        #: The worker's ``config.providers``: a task gets its references resolved, the stores never do.
        self.config_providers = config_providers or ConfigProviders()
        self.worker_id = worker_id
        self.executor = executor
        self.stores = stores
        self.metrics = metrics
        self.log = logs.get("kconnect.worker", worker=worker_id)
        #: Orders the status writes of the herder's thread and of the tasks' threads (module docstring).
        self._lock = threading.Lock()

    def _report(self, status: status_log.ConnectorStatus | status_log.TaskStatus) -> None:
        self.stores.put_status(status)

    def _report_current(self, task: TaskId, answered: TaskState, generation: int) -> None:
        """Write the task's state now, or ``answered`` for a task the executor does not hold (one that
        failed before it could be held). Called under the lock."""
        state = self.executor.task_state(task) or answered
        self._report(
            status_log.TaskStatus(
                task, State(state.state), state.trace, self.worker_id, generation, state.version
            )
        )

    def start(self, action: hd.StartTask, generation: int) -> None:
        """Start a task and report the state the executor answers (UNASSIGNED until its loop runs, PAUSED
        or FAILED); its thread may have reported meanwhile, so what is written is its state by then."""
        self.metrics.task_startup_attempts += 1
        resolution = self.config_providers.resolve(strings(action.config))
        problem = resolution.first_problem()
        if problem is not None:
            # Fails like a task whose start raised: FAILED with the reason, which names key and path only.
            self.metrics.task_startup_failures += 1
            trace = f"a config provider reference cannot be resolved: {problem}"
            with self._lock:
                self._report(
                    status_log.TaskStatus(action.task, State.FAILED, trace, self.worker_id, generation)
                )
            self.log.error("task failed to start", task=str(action.task), error=trace)
            return
        state = self.executor.start_task(action.task, resolution.values, action.target_state)
        if state.state == "FAILED":
            self.metrics.task_startup_failures += 1
        else:
            self.metrics.task_startup_successes += 1
        with self._lock:
            self._report_current(action.task, state, generation)
        self.log.info("task started", connector=action.task.connector, task=action.task.task)

    def stop(self, action: hd.StopTask, generation: int) -> None:
        """Stop a task, then report it UNASSIGNED unless its connector was deleted (whose statuses stay
        deleted)."""
        self.executor.stop_task(action.task, self.config.task_shutdown_graceful_timeout_ms / 1000)
        self.log.info("task stopped", connector=action.task.connector, task=action.task.task)
        if self.stores.snapshot().contains(action.task.connector):
            with self._lock:
                self._report(
                    status_log.TaskStatus(action.task, State.UNASSIGNED, None, self.worker_id, generation)
                )

    def running(self, task: TaskId, herder: hd.Herder) -> None:
        """A task's loop runs now (its start returned): report it RUNNING with the worker's current
        generation, as Java's WorkerTask does then.

        Only while the executor still holds it RUNNING: a task stopped, paused or failed since must not be
        reported RUNNING after the status that says so. Nor over a newer generation's status another
        worker wrote (Java's ``putSafe`` rule): a task's loop can take a minute to get running, and a
        rebalance may have given the task to someone else meanwhile.
        """
        with self._lock:
            state = self.executor.task_state(task)
            if state is None or state.state != "RUNNING":
                self.log.info("task loop running, not reported", task=str(task), state=state and state.state)
                return
            status = status_log.TaskStatus(
                task, State.RUNNING, None, self.worker_id, herder.group.generation, state.version
            )
            if not self.stores.status_state().can_write_safely(status):
                self.log.warning("task running, but a newer generation's status stands", task=str(task))
                return
            self._report(status)  # put_status logs a write that fails; it never raises into the executor
        self.log.info("task running", connector=task.connector, task=task.task)

    def failed(self, task: TaskId, trace: str, herder: hd.Herder) -> None:
        """A task failed on its own thread after it started: report it FAILED, as Java's WorkerTask does."""
        self.log.error("task failed", connector=task.connector, task=task.task)
        status = status_log.TaskStatus(task, State.FAILED, trace, self.worker_id, herder.group.generation)
        with self._lock:
            self._report(status)  # put_status logs a write that fails; it never raises into the executor

    def transition(self, action: hd.TransitionTask, generation: int) -> None:
        """Move a running task to a new target state and report the state that results (a resumed task
        whose loop never ran yet stays UNASSIGNED; its thread reports RUNNING)."""
        state = self.executor.transition_task(action.task, action.target_state)
        with self._lock:
            self._report_current(action.task, state, generation)
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
