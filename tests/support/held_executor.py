"""An executor for tests that place tasks but must not run them: no SparkSession, no JVM per worker.

Rebalancing, REST and group tests count and place tasks; running them would start a Spark driver in
every worker process for nothing. This executor lives with the tests, not in the product: a worker
uses it only when a test injects it (``Worker(config, executor=HeldTasks())``, which
:mod:`tests.support.held_worker` does for worker processes), never through a worker property.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Mapping

from kconnect.runtime.dataplane.executor import TaskCounters, TaskListener, TaskState
from kconnect.runtime.ids import TaskId


class HeldTasks:
    """Holds tasks for the herder without running them, and counts how often each was started and stopped.

    The counts are what the rebalancing tests judge a hand-over by (``GET /workers``' ``task_starts`` and
    ``task_stops``). A held task reports UNASSIGNED, because nothing processes its records (as a Spark
    task does until its loop runs, and a held task's never does), or PAUSED while its connector's target
    state is PAUSED or STOPPED.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[TaskId, Mapping[str, str]] = {}
        self._targets: dict[TaskId, str] = {}  # each held task's target state, for ``task_state``
        self.starts: Counter[TaskId] = Counter()
        self.stops: Counter[TaskId] = Counter()

    def start_task(self, task: TaskId, config: Mapping[str, str], target_state: str) -> TaskState:
        """Hold the task (no thread, no query) and count the start."""
        with self._lock:
            self._held[task] = dict(config)
            self._targets[task] = target_state
            self.starts[task] += 1
        return self._state(target_state)

    def transition_task(self, task: TaskId, target_state: str) -> TaskState:
        """Nothing runs, so a pause or resume only changes the state reported."""
        with self._lock:
            if task in self._held:
                self._targets[task] = target_state
        return self._state(target_state)

    def task_state(self, task: TaskId) -> TaskState | None:
        """What a held task is: never RUNNING, since its loop never runs (a Spark task is UNASSIGNED
        until its loop runs as well), and None once released."""
        with self._lock:
            target = self._targets.get(task) if task in self._held else None
        return None if target is None else self._state(target)

    @staticmethod
    def _state(target_state: str) -> TaskState:
        # A paused task reports PAUSED as Java's does; a started one is held, not run: UNASSIGNED.
        return TaskState("UNASSIGNED" if target_state == "STARTED" else "PAUSED", None)

    def stop_task(self, task: TaskId, timeout_s: float) -> None:
        """Release the task and count the stop (a task not held here is not counted)."""
        with self._lock:
            self._targets.pop(task, None)
            if self._held.pop(task, None) is not None:
                self.stops[task] += 1

    def held(self) -> set[TaskId]:
        """The tasks this worker holds now."""
        with self._lock:
            return set(self._held)

    def counters(self) -> dict[str, int]:
        """Starts and stops since the worker began: what its rebalances cost it."""
        with self._lock:
            return {"task_starts": sum(self.starts.values()), "task_stops": sum(self.stops.values())}

    def close(self, timeout_s: float) -> None:
        """Release every task, counting each as stopped, as a worker's shutdown does."""
        for task in self.held():
            self.stop_task(task, timeout_s)

    def set_listener(self, listener: TaskListener) -> None:
        """Held tasks never run, so they never get running nor fail."""

    def task_figures(self) -> Mapping[TaskId, TaskCounters]:
        """No task runs here, so none has records or commits to report."""
        return {}
