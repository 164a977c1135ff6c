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

import contextvars
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kconnect.config.config_providers import ConfigProviders
from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.dataplane.executor import Executor, TaskPreparer, TaskState
from kconnect.runtime.group import herder as hd
from kconnect.runtime.group.learner import ActivatePreparedTask, DiscardPreparedTask, PrepareTask
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.connectors import strings
from kconnect.runtime.shell.stores import InternalTopics, put_status_safe
from kconnect.runtime.shell.view import WorkerMetrics
from kconnect.runtime.storage import status_log
from kconnect.runtime.storage.config_log import Properties

State = status_log.State


@dataclass(frozen=True, slots=True)
class TaskPrepared:
    """How preparation ``attempt`` of a learned task ended: ``trace`` says why it failed (None: held
    ready). Posted from the preparation's thread to the herder's."""

    task: TaskId
    attempt: int
    trace: str | None = None


@dataclass(frozen=True, slots=True)
class TaskReleased:
    """A task stopped in the background (``StopTask.acknowledge``) has stopped (or was abandoned past
    ``task.shutdown.graceful.timeout.ms``). Posted from its stop's thread to the herder's."""

    task: TaskId


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
        #: The threads of background stops under way (:meth:`release`), by task.
        self._releasing: dict[TaskId, threading.Thread] = {}

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
        resolved = self._resolved(action.task, action.config, generation)
        if resolved is None:
            return
        state = self.executor.start_task(action.task, resolved, action.target_state)
        self._started(action.task, state, generation, prepared=False)

    def _resolved(self, task: TaskId, config: Properties, generation: int) -> dict[str, str] | None:
        """The task's config with its ``config.providers`` references resolved; None (the task reported
        FAILED) when one cannot be."""
        resolution = self.config_providers.resolve(strings(config))
        problem = resolution.first_problem()
        if problem is None:
            return resolution.values
        # Fails like a task whose start raised: FAILED with the reason, which names key and path only.
        self.metrics.task_startup_failures += 1
        trace = f"a config provider reference cannot be resolved: {problem}"
        with self._lock:
            self._report(status_log.TaskStatus(task, State.FAILED, trace, self.worker_id, generation))
        self.log.error("task failed to start", task=str(task), error=trace)
        return None

    def _started(self, task: TaskId, state: TaskState, generation: int, *, prepared: bool) -> None:
        if state.state == "FAILED":
            self.metrics.task_startup_failures += 1
        else:
            self.metrics.task_startup_successes += 1
        with self._lock:
            self._report_current(task, state, generation)
        self.log.info("task started", connector=task.connector, task=task.task, prepared=prepared)

    # -- the warm-up hand-over (issue 25): a learner's preparation, its activation, its release --------

    def prepare(self, action: PrepareTask, done: Callable[[TaskPrepared], None]) -> None:
        """Prepare a task this worker learns (``TaskPreparer.prepare_task``) on a thread of its own, since
        connecting clients and starting Spark take long and the herder's thread must keep heartbeating;
        ``done`` hears how it ended (on that thread). Nothing is reported in the status topic: the task's
        owner elsewhere runs it, and its status is that owner's."""
        thread = threading.Thread(
            target=self._prepare, args=(action, done), name=f"prepare-{action.task}", daemon=True
        )
        thread.start()

    def _prepare(self, action: PrepareTask, done: Callable[[TaskPrepared], None]) -> None:
        logs.bind(task=str(action.task))
        task, attempt = action.task, action.attempt
        started = time.monotonic()
        executor = self.executor
        if not isinstance(executor, TaskPreparer):
            done(TaskPrepared(task, attempt, "this worker's executor cannot prepare tasks"))
            return
        resolution = self.config_providers.resolve(strings(action.config))
        problem = resolution.first_problem()
        if problem is not None:
            done(TaskPrepared(task, attempt, f"a config provider reference cannot be resolved: {problem}"))
            return
        try:
            held = executor.prepare_task(task, resolution.values, attempt)
        except Exception:
            trace = traceback.format_exc()
            self.log.warning("task preparation failed", task=str(task), attempt=attempt, trace=trace)
            done(TaskPrepared(task, attempt, trace))
            return
        if held:
            seconds = round(time.monotonic() - started, 3)
            self.log.info("task prepared", task=str(task), attempt=attempt, seconds=seconds)
            done(TaskPrepared(task, attempt))

    def activate(self, action: ActivatePreparedTask, generation: int) -> None:
        """Start a task from its preparation (the learner was promoted: the task is this worker's now),
        reporting as :meth:`start` does; cold, as a ``StartTask``, when the executor holds no preparation
        for it with this config (its references resolved now, as a cold start resolves them)."""
        self.metrics.task_startup_attempts += 1
        resolved = self._resolved(action.task, action.config, generation)
        executor = self.executor
        if resolved is None:
            if isinstance(executor, TaskPreparer):
                executor.discard_prepared(action.task, action.attempt)
            return
        state = None
        if isinstance(executor, TaskPreparer):
            state = executor.start_prepared(action.task, action.attempt, resolved, action.target_state)
        if state is None:
            self.log.warning("no preparation held for the task; it starts cold", task=str(action.task))
            state = executor.start_task(action.task, resolved, action.target_state)
        self._started(action.task, state, generation, prepared=True)

    def discard(self, action: DiscardPreparedTask) -> None:
        """Release a preparation (the learner was dropped, or the task starts cold after all)."""
        executor = self.executor
        if isinstance(executor, TaskPreparer):
            executor.discard_prepared(action.task, action.attempt)

    def stop(self, action: hd.StopTask, generation: int) -> None:
        """Stop a task, then report it UNASSIGNED unless its connector was deleted (whose statuses stay
        deleted)."""
        self.executor.stop_task(action.task, self.config.task_shutdown_graceful_timeout_ms / 1000)
        self._stopped(action, generation)

    def stop_all(self, actions: Sequence[hd.StopTask], generation: int) -> None:
        """Stop tasks together, so that the wait is one ``task.shutdown.graceful.timeout.ms`` in all and
        not one per task (Java's ``Worker.stopAndAwaitTasks``), then report each as :meth:`stop` does."""
        timeout_s = self.config.task_shutdown_graceful_timeout_ms / 1000
        threads = [
            threading.Thread(
                target=contextvars.copy_context().run,  # the worker's log context, one copy per thread
                args=(self.executor.stop_task, a.task, timeout_s),
                name=f"stop-{a.task}",
                daemon=True,
            )
            for a in actions
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()  # each is bounded by the graceful timeout: a runner past it is abandoned
        for action in actions:
            self._stopped(action, generation)

    def release(self, action: hd.StopTask, generation: int, done: Callable[[object], None]) -> None:
        """Stop a task on a thread of its own, report it as :meth:`stop` does, then post
        :class:`TaskReleased` through ``done``: the herder's thread goes on meanwhile, so one task slow to
        stop (a source whose records the broker has not acknowledged) holds back neither the release of
        the others nor anything else the herder does."""
        timeout_s = self.config.task_shutdown_graceful_timeout_ms / 1000
        task = action.task

        def run() -> None:
            started = time.monotonic()
            try:
                self.executor.stop_task(task, timeout_s)  # bounded: a runner past it is abandoned
                self._stopped(action, generation)
            except Exception as exc:  # the herder must hear of it in any case, or it would list it forever
                self.log.error("task stop failed", task=str(task), error=str(exc))
            finally:
                with self._lock:
                    self._releasing.pop(task, None)
                seconds = round(time.monotonic() - started, 3)
                self.log.info("task released", task=str(task), seconds=seconds)
                done(TaskReleased(task))

        thread = threading.Thread(
            target=contextvars.copy_context().run,  # the worker's log context
            args=(run,),
            name=f"release-{task}",
            daemon=True,
        )
        with self._lock:
            self._releasing[task] = thread
        thread.start()

    def releasing(self) -> int:
        """How many background stops are under way."""
        with self._lock:
            return len(self._releasing)

    def await_releases(self) -> set[TaskId]:
        """Wait for the background stops under way (each bounded by the graceful timeout); the tasks they
        stopped. Before a rejoin: a classic round must not see work as released that still runs."""
        with self._lock:
            pending = dict(self._releasing)
        for thread in pending.values():
            thread.join()
        return set(pending)

    def _stopped(self, action: hd.StopTask, generation: int) -> None:
        """Report a stopped task UNASSIGNED, unless a newer generation's status of another worker stands
        (Java's ``putSafe`` on a task's shutdown): the write is not awaited, and a revoked task's new owner
        may already have reported it RUNNING."""
        self.log.info("task stopped", connector=action.task.connector, task=action.task.task)
        if self.stores.snapshot().contains(action.task.connector):
            status = status_log.TaskStatus(action.task, State.UNASSIGNED, None, self.worker_id, generation)
            with self._lock:
                if not put_status_safe(self.stores, status):
                    self.log.info("task stopped, a newer generation's status stands", task=str(action.task))

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
            # put_status logs a write that fails; it never raises into the executor
            if not put_status_safe(self.stores, status):
                self.log.warning("task running, but a newer generation's status stands", task=str(task))
                return
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
