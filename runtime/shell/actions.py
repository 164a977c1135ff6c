"""The herder's actions carried out on the worker's parts (split from :mod:`kconnect.runtime.shell.worker`,
which assembles the parts).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

from kconnect.config.masking import masked_repr
from kconnect.config.worker import WorkerConfig
from kconnect.runtime.group import herder as hd
from kconnect.runtime.group.herder import Action, Herder
from kconnect.runtime.group.learner import ActivatePreparedTask, DiscardPreparedTask, PrepareTask
from kconnect.runtime.group.member import WorkerMember
from kconnect.runtime.plugins.password_keys import config_password_keys
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.connectors import (
    Connectors,
)
from kconnect.runtime.shell.stores import InternalTopics
from kconnect.runtime.shell.stores import StartupError as StartupError  # raised here; the CLI imports it
from kconnect.runtime.shell.tasks import Tasks
from kconnect.runtime.shell.view import WorkerMetrics
from kconnect.runtime.storage.kafka_log import KafkaLogError

__all__ = ["ActionDispatch"]


class ActionDispatch:
    """Carries out the herder's actions on the worker's parts: connectors, tasks, the member, the stores.

    Why a class of its own: the herder decides and returns actions; this is the one place that maps each
    to the part that performs it, and logs a failed one with its secrets masked. It is a base of
    :class:`~kconnect.runtime.shell.worker.Worker`, which assembles the parts declared here.
    """

    config: WorkerConfig
    registry: PluginRegistry
    herder: Herder
    metrics: WorkerMetrics
    connectors: Connectors
    tasks: Tasks
    stores: InternalTopics
    log: Any
    reset_active_topics: Callable[[str], None]
    _lock: threading.RLock
    _events: queue.Queue[object]
    _rejoin_at: float | None
    _ready_to_leave: threading.Event
    _member: WorkerMember | None

    def _execute(self, actions: list[Action]) -> None:
        i = 0
        while i < len(actions):
            stops: list[hd.StopTask] = []
            while i + len(stops) < len(actions):
                nxt = actions[i + len(stops)]
                if not isinstance(nxt, hd.StopTask) or nxt.acknowledge:
                    break  # a background stop (acknowledge) holds nothing up: see _execute_one
                stops.append(nxt)
            if len(stops) > 1:
                # A release stops its tasks together, as Java's Worker.stopAndAwaitTasks: one after
                # another, each waiting task.shutdown.graceful.timeout.ms, held the herder thread past
                # rebalance.timeout.ms and the worker left its group.
                try:
                    self.tasks.stop_all(stops, self.herder.group.generation)
                except Exception as exc:
                    self.log.error("action failed", action=f"stop {len(stops)} tasks", error=str(exc))
                i += len(stops)
                continue
            action = actions[i]
            i += 1
            try:
                self._execute_one(action)
            except Exception as exc:
                self.log.error("action failed", action=self._printable(action), error=str(exc))

    def _printable(self, action: Action) -> str:
        """The action as its log line shows it: configs masked by key name and by the PASSWORD keys of
        the connector's ConfigDefs, which a name such as ``aws.secret.access.key`` does not reveal. A
        task's config is masked with its connector's keys: a connector hands its secrets to its tasks."""
        name = _config_owner(action)
        if name is None:
            return masked_repr(action)
        config = action.config if isinstance(action, hd.StartConnector) else None
        if config is None:
            config = self.herder.snapshot.connector_config(name)
        return masked_repr(action, config_password_keys(self.registry, config or {}))

    def _execute_one(self, action: Action) -> None:
        gen = self.herder.group.generation
        if isinstance(action, hd.StartConnector):
            self.metrics.connector_startup_attempts += 1
            self.connectors.start(action.name, action.config, action.target_state, gen, action.attempt)
        elif isinstance(action, hd.ReportConnector):
            self.connectors.report(action.name, action.state, action.trace, gen)
        elif isinstance(action, hd.RequestTaskConfigs):
            self.connectors.request_task_configs(action.name, action.attempt)
        elif isinstance(action, hd.AbandonConnector):
            self.connectors.abandon(action.name, action.attempt)
        elif isinstance(action, hd.StopConnector):
            self.connectors.stop(action.name, gen)
        elif isinstance(action, hd.StartTask):
            self.tasks.start(action, gen)
        elif isinstance(action, PrepareTask):
            self.tasks.prepare(action, self._events.put)
        elif isinstance(action, ActivatePreparedTask):
            self.tasks.activate(action, gen)
        elif isinstance(action, DiscardPreparedTask):
            self.tasks.discard(action)
        elif isinstance(action, hd.StopTask):
            if action.acknowledge:
                self.tasks.release(action, gen, self._events.put)  # answered with a TaskReleased event
            else:
                self.tasks.stop(action, gen)
        elif isinstance(action, hd.TransitionConnector):
            self.connectors.transition(action.name, action.target_state, gen)
        elif isinstance(action, hd.TransitionTask):
            self.tasks.transition(action, gen)
        elif isinstance(action, hd.ReportRestarting):
            self.tasks.report_restarting(action, gen)
        elif isinstance(action, hd.ReportUnassigned):
            self.tasks.report_unassigned(action)
        elif isinstance(action, hd.PublishTaskConfigs):
            self.connectors.publish_task_configs(action.connector, [dict(c) for c in action.configs])
        elif isinstance(action, hd.RequestRejoin):
            self.log.info("rejoin requested", reason=action.reason, delay_ms=action.delay_ms)
            if action.delay_ms > 0:
                self._rejoin_at = time.monotonic() + action.delay_ms / 1000
            else:
                self._require_member().request_rejoin()
        elif isinstance(action, hd.ReadyToLeave):
            self._ready_to_leave.set()
        elif isinstance(action, hd.ResetActiveTopics):
            if self.config.topic_tracking_enable:
                self.reset_active_topics(action.connector)
        elif isinstance(action, hd.WriteGroupRecords):
            try:
                written = self.stores.write_changed_group_records(action.records)
            except KafkaLogError as exc:
                self.log.warning("could not write group records", error=str(exc))
                with self._lock:
                    self.herder.on_group_write_failed()
                return
            if action.epoch >= 0:
                self.log.info("target installed", group_epoch=action.epoch, written=written)
        elif isinstance(action, hd.CatchUpConfig):
            self.stores.read_config_to_end()
            with self._lock:
                followers = self.herder.on_config_read(self.stores.snapshot())
            self._execute(followers)

    def _require_member(self) -> WorkerMember:
        if self._member is None:
            raise RuntimeError("worker not started")
        return self._member


def _config_owner(action: Action) -> str | None:
    """The connector whose config (or task configs) ``action`` carries; None for an action with none."""
    if isinstance(action, hd.StartConnector):
        return action.name
    if isinstance(action, hd.PublishTaskConfigs):
        return action.connector
    if isinstance(action, hd.StartTask | PrepareTask | ActivatePreparedTask):
        return action.task.connector
    return None
