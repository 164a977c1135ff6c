"""Self-healing on this worker: the statuses it reports fed to the pure rules of ``group/auto_restart.py``.

Why here: whether a FAILED connector or task is restarted is decided by pure functions; this module owns
their state between decisions (one :class:`~kconnect.runtime.group.auto_restart.Entry` per connector or
task this worker reported a status for), learns of failures and restarts from every status the worker
reports (``InternalTopics.on_status_put``, on whichever thread reports it, so no read of the status topic
lags behind), and writes the FAILED status again with ``auto_restart`` (attempts, next attempt) when it
schedules, cancels or gives up a restart, so that every worker's ``GET /connectors/{name}/status`` shows
it. The restarts themselves are the worker's to carry out, through the herder's restart path
(:meth:`AutoRestarts.step` returns them).
"""

from __future__ import annotations

import threading
from collections.abc import Collection
from dataclasses import replace

from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.group import auto_restart
from kconnect.runtime.group.auto_restart import Entry, Policy, Verdict
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.stores import InternalTopics
from kconnect.runtime.storage import status_log
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, TargetState

log = logs.get(__name__)

#: A connector (its name) or one of its tasks.
Key = str | TaskId
Status = status_log.ConnectorStatus | status_log.TaskStatus


def worker_policy(config: WorkerConfig) -> Policy:
    """The worker's ``auto.restart.*`` keys as a policy (connector configs may override each)."""
    return Policy(
        enabled=config.auto_restart_enable,
        max_attempts=config.auto_restart_max_attempts,
        backoff_initial_ms=config.auto_restart_backoff_initial_ms,
        backoff_max_ms=config.auto_restart_backoff_max_ms,
    )


def _key(status: Status) -> Key:
    return status.connector if isinstance(status, status_log.ConnectorStatus) else status.task


class AutoRestarts:
    """The self-healing state of one worker; :meth:`observe` from any thread, :meth:`step` from the
    herder's thread."""

    def __init__(self, policy: Policy, stores: InternalTopics, worker_id: str) -> None:
        self.policy = policy
        self.stores = stores
        self.worker_id = worker_id
        # Re-entrant: the reports written under it pass through observe() on the same thread.
        self._lock = threading.RLock()
        self._entries: dict[Key, Entry] = {}
        #: The last FAILED status reported for each entry: what is written again, trace and all.
        self._failed: dict[Key, Status] = {}

    def observe(self, status: Status, now_ms: int) -> None:
        """The worker reported ``status``; its own annotated reports (``auto_restart`` set) change nothing."""
        if status.auto_restart is not None or status.worker_id != self.worker_id:
            return
        key = _key(status)
        with self._lock:
            self._entries[key] = auto_restart.observe(self._entries.get(key, Entry()), status.state, now_ms)
            if status.state is status_log.State.FAILED:
                self._failed[key] = status

    def entry(self, key: Key) -> Entry | None:
        """What is known of a connector or task (for tests and inspection)."""
        with self._lock:
            return self._entries.get(key)

    def step(
        self,
        running_connectors: Collection[str],
        running_tasks: Collection[TaskId],
        snapshot: ClusterConfigSnapshot,
        now_ms: int,
    ) -> list[Key]:
        """Decide for every entry; write the reports the decisions call for and return what to restart now.

        ``running_*`` is what the herder runs here: only those are restarted.
        """
        restarts: list[Key] = []

        def runs(key: Key) -> bool:
            return key in running_connectors if isinstance(key, str) else key in running_tasks

        with self._lock:
            busy = [k for k, e in self._entries.items() if not (auto_restart.at_rest(e) and runs(k))]
            for key in sorted(busy, key=str):
                connector = key if isinstance(key, str) else key.connector
                policy = auto_restart.policy_for(self.policy, snapshot.connector_config(connector))
                target = snapshot.target_state(connector) or TargetState.STARTED
                decision = auto_restart.decide(self._entries[key], policy, target, runs(key), now_ms)
                if decision.entry is None:
                    del self._entries[key]
                    self._failed.pop(key, None)
                    continue
                self._entries[key] = decision.entry
                if decision.verdict is Verdict.RESTART:
                    restarts.append(key)
                elif decision.verdict in (Verdict.SCHEDULE, Verdict.CANCEL, Verdict.GIVE_UP):
                    self._report(key, decision.entry, decision.verdict)
        return restarts

    def _report(self, key: Key, entry: Entry, verdict: Verdict) -> None:
        """The last FAILED status again, trace and all, with the attempts and the next one (or none)."""
        failed = self._failed.get(key)
        info = status_log.AutoRestartInfo(entry.attempts, entry.next_attempt_ms)
        event = {"schedule": "scheduled", "cancel": "cancelled", "give_up": "given up"}[verdict.value]
        emit = log.warning if verdict is Verdict.GIVE_UP else log.info
        emit(
            f"auto restart {event}",
            entry=str(key),
            attempts=entry.attempts,
            next_attempt_ms=entry.next_attempt_ms,
        )
        if failed is None:
            return
        self.stores.put_status(replace(failed, auto_restart=info))
