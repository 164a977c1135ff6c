"""The narrow interface through which the herder starts and stops tasks.

The herder only needs to start a task with its config, stop it within a bound, and learn its state;
what happens later on a task's own thread (its loop got running, or it failed) is reported through the
task listener, since only the worker writes statuses. The data
plane (``spark_executor.SparkExecutor``) runs tasks; it is the worker's executor unless whoever builds
the worker passes another one (the tests pass one that only holds tasks, ``tests/support/held_executor.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from kconnect.runtime.dataplane.stall_watch import Reading
from kconnect.runtime.ids import TaskId


@dataclass(frozen=True, slots=True)
class TaskState:
    """What starting or transitioning a task came to, in the terms the status topic records.

    The worker writes it as the task's status as it is, so ``state`` is one of Connect's task states and
    ``trace`` is the stack trace that a FAILED status carries (None otherwise).
    """

    state: str  # Apache Kafka Connect's task states: UNASSIGNED, RUNNING, PAUSED, FAILED, RESTARTING
    trace: str | None = None
    #: The version of the plugin the task runs (KIP-891), for its status; None when not known.
    version: str | None = None


@dataclass(frozen=True, slots=True)
class TaskCounters:
    """Per-task figures for ``GET /metrics``: records polled (source) or read (sink), offset commits."""

    kind: str = "sink"  # "source" (records polled) or "sink" (records read)
    records: int = 0
    offset_commits: int = 0
    offset_commit_ms_total: float = 0.0
    #: Where the task's records are handled: ``worker`` (a thread of the worker: a source's poll loop, a
    #: sink's consumer loop), ``query`` (a sink's Structured Streaming query) or ``executor`` (a source as a
    #: long-running Spark job).
    placement: str = "worker"
    #: A worker-read sink task's reading (lag, last progress, stalled), from its stall watch; None for
    #: other tasks.
    reading: Reading | None = None

    @property
    def offset_commit_avg_ms(self) -> float:
        """Java's ``offset-commit-avg-time-ms`` task metric, derived here so that a task thread only ever
        adds to plain totals; 0.0 before the first commit."""
        return self.offset_commit_ms_total / self.offset_commits if self.offset_commits else 0.0


@dataclass(frozen=True, slots=True)
class TaskListener:
    """Where an executor reports what a task's own thread learns after ``start_task`` answered.

    Why both: a task is RUNNING only once its start has returned and its loop runs (Java's WorkerTask
    reports onStartup then), which takes seconds to a minute for a sink task's streaming query, far too
    long for the herder's thread to wait; and a task can fail at any time. The worker writes the statuses.
    """

    #: A task failed, with its trace.
    failed: Callable[[TaskId, str], None]
    #: A task's loop runs now (its start returned); the listener asks ``task_state`` what to report.
    running: Callable[[TaskId], None]


class Executor(Protocol):
    """What the worker needs from whatever runs its tasks (see the module docstring).

    A Protocol rather than a base class, so that the Spark data plane and the tests' held-task executor
    need share nothing but these methods.
    """

    def start_task(self, task: TaskId, config: Mapping[str, str], target_state: str) -> TaskState:
        """Start ``task`` in ``target_state`` and answer at once with the state to report.

        Called on the herder's thread, which must keep heartbeating: only quick work belongs here. A task
        started STARTED is UNASSIGNED until its loop runs, then the task listener hears ``running``; one
        that fails later reports through the listener's ``failed``.
        """
        ...

    def stop_task(self, task: TaskId, timeout_s: float) -> None:
        """Stop ``task`` and forget it, waiting at most ``timeout_s``.

        The bound is the worker's ``task.shutdown.graceful.timeout.ms``: a task that does not stop in time
        is abandoned, not waited for, so that one stuck task cannot stall a rebalance.
        """
        ...

    def transition_task(self, task: TaskId, target_state: str) -> TaskState:
        """Pause (PAUSED or STOPPED) or resume (STARTED) a task held here, keeping it assigned.

        Returns the state to report, as ``start_task`` does. Pausing must not lose the task's place:
        a resumed task continues from its committed offsets, as in Java.
        """
        ...

    def task_state(self, task: TaskId) -> TaskState | None:
        """The state to report for a held task now, None for one not held (stopped, or never started).

        Why the worker asks rather than trusts an event: a task's thread and the herder's both report, and
        whichever writes last must write what the task is at that moment, not what it was when the event
        was raised (a task stopped or paused meanwhile is not RUNNING).
        """
        ...

    def held(self) -> set[TaskId]:
        """The tasks started here and not stopped since: this executor's own view of its assignment, which
        ``close`` stops and the tests compare with the herder's."""
        ...

    def counters(self) -> dict[str, int]:
        """Totals since start (``task_starts``, ``task_stops``): what a rebalance cost this worker."""
        ...

    def close(self, timeout_s: float) -> None:
        """Stop every held task (each within ``timeout_s``) and release what the executor holds.

        The worker calls it once, at shutdown, after the herder has revoked everything it owned.
        """
        ...

    def set_listener(self, listener: TaskListener) -> None:
        """Where to report a task whose loop got running or that failed on its own thread; the worker
        writes its RUNNING or FAILED status."""
        ...

    def task_figures(self) -> Mapping[TaskId, TaskCounters]:
        """Counters of the tasks running here (none for tasks that are only held)."""
        ...


@runtime_checkable
class TaskPreparer(Protocol):
    """An executor that can warm a task up before it owns it (the warm-up hand-over under
    ``group.protocol=connect``, issue 25): the herder's ``PrepareTask``, ``ActivatePreparedTask`` and
    ``DiscardPreparedTask``. Optional: a worker whose executor is no ``TaskPreparer`` never says it can
    learn (``WorkerState.learns``), so the coordinator gives it no learners and its tasks start cold.

    A preparation touches none of the task's records: it consumes, produces and commits nothing, and the
    plugin task's ``start`` is not called (the task's active owner elsewhere still runs it). Each is
    numbered (``attempt``, the herder's) so that a late call for one discarded since changes nothing.
    """

    def prepare_task(self, task: TaskId, config: Mapping[str, str], attempt: int) -> bool:
        """Prepare ``task`` with ``config`` and hold the preparation; blocking (the caller runs it on a
        thread of its own, never the herder's). True once held ready; False when preparation ``attempt``
        was discarded (or replaced by a newer one) before it finished, and nothing is held for it. Raises
        when the preparation fails; nothing is held then either."""
        ...

    def start_prepared(
        self, task: TaskId, attempt: int, config: Mapping[str, str], target_state: str
    ) -> TaskState | None:
        """Start preparation ``attempt`` of ``task`` as ``start_task`` would start the task, and answer
        the same way; None when no such preparation is held ready for this very ``config`` (any other
        preparation of the task is released): the caller then starts the task cold."""
        ...

    def discard_prepared(self, task: TaskId, attempt: int) -> None:
        """Release preparation ``attempt`` of ``task``: now if it is held, else as soon as
        ``prepare_task`` for it returns. Quick: called on the herder's thread."""
        ...
