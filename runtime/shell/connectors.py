"""Connector lifecycle on this worker: the connector instances the herder tells it to run.

Why a module of its own: a connector instance (a plugin object) lives here between the herder's actions;
this module starts, stops and transitions it as Java's ``WorkerConnector`` does, reports each state to
the status topic, asks it for task configs and gets those configs to the leader, the config topic's only
writer. Deciding *what* runs stays with the herder (``runtime/group/herder.py``).
"""

from __future__ import annotations

import json
import threading
import traceback
from collections.abc import Callable
from dataclasses import dataclass

from kconnect.config.config_providers import ConfigProviders, reverse_transform
from kconnect.runtime import logs
from kconnect.runtime.plugins.api import Connector, ConnectorContext, ConnectorError, connector_type
from kconnect.runtime.plugins.connector_config import connector_version, plugin_version_names
from kconnect.runtime.plugins.plugin_metrics import PluginMetrics, PluginMetricsRegistry
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.stores import InternalTopics
from kconnect.runtime.shell.writes import ClusterWrites
from kconnect.runtime.storage import status_log
from kconnect.runtime.storage.config_log import Properties, TargetState

log = logs.get(__name__)


def strings(props: Properties) -> dict[str, str]:
    """Plugins see configs without nulls (Java's null config values mean "unset")."""
    return {k: v for k, v in props.items() if v is not None}


@dataclass
class _RunningConnector:
    instance: Connector
    config: Properties
    #: Whether ``instance.start`` ran (and ``stop`` is owed): not while PAUSED or STOPPED.
    started: bool = False
    #: The KIP-877 metrics of the started instance, closed whenever it is stopped.
    metrics: PluginMetrics | None = None
    #: The plugin version running (KIP-891), reported in the connector's status.
    version: str | None = None


class Connectors:
    """The connector instances running on this worker.

    Called from the herder thread only. ``generation`` gives the group generation statuses are written
    with; ``request_reconfigure`` asks the herder thread to recompute a connector's task configs soon (a
    connector's own request, or a retry); ``stopping`` is set once the worker shuts down; ``plugin_metrics``
    is the worker's registry of KIP-877 metrics (a private one when not given).
    """

    def __init__(
        self,
        registry: PluginRegistry,
        stores: InternalTopics,
        writes: ClusterWrites,
        worker_id: str,
        url: str,
        generation: Callable[[], int],
        request_reconfigure: Callable[[str], None],
        stopping: threading.Event,
        plugin_metrics: PluginMetricsRegistry | None = None,
        config_providers: ConfigProviders | None = None,
    ) -> None:
        self.registry = registry
        #: The worker's ``config.providers``: references in a config are resolved only for the instance.
        self.config_providers = config_providers or ConfigProviders()
        self.plugin_metrics = plugin_metrics or PluginMetricsRegistry()
        self.stores = stores
        self.writes = writes
        self.worker_id = worker_id
        self.url = url
        self._generation = generation
        self._request_reconfigure = request_reconfigure
        self._stopping = stopping
        self._running: dict[str, _RunningConnector] = {}

    def _status(
        self, name: str, state: status_log.State, trace: str | None, gen: int, version: str | None = None
    ) -> None:
        self.stores.put_status(status_log.ConnectorStatus(name, state, trace, self.worker_id, gen, version))

    def start(self, name: str, config: Properties, target_state: TargetState, gen: int) -> bool:
        """Create the instance; start it only if its target state is STARTED, then ask for task configs.

        False when it failed (reported FAILED with the trace): the worker counts start-up failures.
        """
        clog = log.bind(connector=name)
        metrics = None
        try:
            desc = self.registry.find(
                config.get("connector.class") or "",
                # A deprecated *.version key is read, with a warning, as its 4.x name.
                connector_version(plugin_version_names(config, warn=True)),
            )
            instance = desc.cls()
            started = target_state == TargetState.STARTED
            if started:
                metrics = self.plugin_metrics.connector(name)
                instance.initialize(_Context(self, name, metrics))
                instance.start(self._resolved(config))
                state = status_log.State.RUNNING
            else:
                state = (
                    status_log.State.PAUSED
                    if target_state == TargetState.PAUSED
                    else status_log.State.STOPPED
                )
            self._running[name] = _RunningConnector(
                instance, config, started=started, metrics=metrics, version=desc.version
            )
            self._status(name, state, None, gen, desc.version)
            clog.info("connector started", state=state.value)
        except Exception as exc:
            if metrics is not None:
                metrics.close()
            clog.error("connector failed to start", error=str(exc))
            self._status(name, status_log.State.FAILED, traceback.format_exc(), gen)
            return False
        if started:
            self._request_reconfigure(name)
        return True

    def _resolved(self, config: Properties) -> dict[str, str]:
        """The config the instance gets: ``${provider:...}`` references resolved (the stored config keeps
        them). A reference that cannot be resolved fails the start, naming the key and the reason."""
        resolution = self.config_providers.resolve(strings(config))
        problem = resolution.first_problem()
        if problem is not None:
            raise ConnectorError(f"a config provider reference cannot be resolved: {problem}")
        return resolution.values

    def stop(self, name: str, gen: int) -> None:
        """Stop the instance (if started) and forget it; UNASSIGNED unless the connector was deleted."""
        running = self._running.pop(name, None)
        if running is None:
            return
        try:
            if running.started:
                running.instance.stop()
        except Exception as exc:
            log.warning("connector stop raised", connector=name, error=str(exc))
        finally:
            _close_metrics(running)
        if self.stores.snapshot().contains(name):
            self._status(name, status_log.State.UNASSIGNED, None, gen)
        log.info("connector stopped", connector=name)

    def transition(self, name: str, target_state: TargetState, gen: int) -> None:
        """Java's WorkerConnector transitions: STARTED starts the instance (and asks it for task configs);
        PAUSED and STOPPED stop it but keep it, so resuming needs no rebalance."""
        running = self._running.get(name)
        if running is None:
            return
        clog = log.bind(connector=name)
        try:
            if target_state == TargetState.STARTED:
                if not running.started:
                    _close_metrics(running)  # a start that failed before may have left some
                    running.metrics = self.plugin_metrics.connector(name)
                    running.instance.initialize(_Context(self, name, running.metrics))
                    running.instance.start(self._resolved(running.config))
                    running.started = True
                state = status_log.State.RUNNING
            else:
                if running.started:
                    running.started = False
                    try:
                        running.instance.stop()
                    finally:
                        _close_metrics(running)
                state = (
                    status_log.State.PAUSED
                    if target_state == TargetState.PAUSED
                    else status_log.State.STOPPED
                )
        except Exception as exc:
            clog.error("connector failed in a state transition", target_state=target_state, error=str(exc))
            self._status(name, status_log.State.FAILED, traceback.format_exc(), gen)
            return
        self._status(name, state, None, gen, running.version)
        clog.info("connector transitioned", state=state.value)
        if target_state == TargetState.STARTED:
            self._request_reconfigure(name)

    def task_configs(self, name: str) -> list[dict[str, str]] | None:
        """Ask a started connector for its task configs (None: not running here, not STARTED, or failed).

        Each config names the task class; a sink's tasks also get the connector's topics, as Java adds.
        """
        running = self._running.get(name)
        if running is None:
            return None
        snap = self.stores.snapshot()
        if not snap.contains(name) or snap.target_state(name) != TargetState.STARTED:
            return None
        try:
            resolved = self._resolved(running.config)
            max_tasks = int(resolved.get("tasks.max") or "1")
            raw = running.instance.task_configs(max_tasks)
            task_class = running.instance.task_class()
            configs = []
            for tc in raw:
                full = dict(tc)
                full["task.class"] = f"{task_class.__module__}.{task_class.__qualname__}"
                if connector_type(type(running.instance)) == "sink":
                    for key in ("topics", "topics.regex"):
                        value = running.config.get(key)
                        if value is not None:
                            full[key] = value
                configs.append(full)
            # Computed from resolved values: references go back in before the configs leave the worker.
            configs = reverse_transform(running.config, resolved, configs)
        except Exception as exc:
            log.error("connector failed to compute task configs", connector=name, error=str(exc))
            self._status(name, status_log.State.FAILED, traceback.format_exc(), self._generation())
            return None
        return configs

    def publish_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Only the leader writes task configs; a follower sends them to the leader, signed if sessioned.

        The herder thread never waits on that request: it also heartbeats and completes rebalances, and a
        leader that is itself mid-rebalance answers only once the rebalance is over, so a synchronous
        forward could hold the very rebalance it waits for (Java forwards on an executor of its own too).
        While no other worker leads (no leader known, or this worker about to lead again) the configs are
        recomputed a moment later instead.
        """
        is_leader, leader_url = self.writes.leader()
        if is_leader:
            self.writes.write_task_configs(name, configs)
            return
        forwarder = self.writes.forwarder
        if forwarder is None:
            log.warning("no REST forwarder to send task configs to the leader", connector=name)
            return
        if not leader_url or leader_url.rstrip("/") == self.url.rstrip("/"):
            self._retry_reconfigure(name)
            return
        body = json.dumps(configs).encode()
        headers = self.writes.sign(body)

        def send() -> None:
            try:
                forwarder("POST", leader_url, f"/connectors/{name}/tasks", body, headers)
            except Exception as exc:
                log.warning(
                    "sending task configs to the leader failed; will retry", connector=name, error=str(exc)
                )
                self._retry_reconfigure(name)

        threading.Thread(target=send, name=f"forward-task-configs-{name}", daemon=True).start()

    def _retry_reconfigure(self, name: str, delay_s: float = 1.0) -> None:
        if self._stopping.is_set():
            return
        timer = threading.Timer(delay_s, lambda: self._request_reconfigure(name))
        timer.daemon = True
        timer.start()

    def raise_error(self, name: str, exc: BaseException) -> None:
        """A connector reported a failure of its own (``ConnectorContext.raise_error``): FAILED, with it."""
        trace = "".join(traceback.format_exception(exc))
        self._status(name, status_log.State.FAILED, trace, self._generation())


def _close_metrics(running: _RunningConnector) -> None:
    """A stopped instance's KIP-877 metrics go with it (Java closes them with the connector), so a
    resumed or restarted instance registers its metrics again without colliding with its own."""
    if running.metrics is not None:
        running.metrics.close()
        running.metrics = None


class _Context(ConnectorContext):
    """What a connector instance may ask of the runtime: new task configs, to be reported failed, or where
    to register its own metrics."""

    def __init__(self, connectors: Connectors, name: str, metrics: PluginMetrics) -> None:
        self._connectors = connectors
        self._name = name
        self._metrics = metrics

    def request_task_reconfiguration(self) -> None:
        self._connectors._request_reconfigure(self._name)

    def raise_error(self, exc: BaseException) -> None:
        self._connectors.raise_error(self._name, exc)

    def plugin_metrics(self) -> PluginMetrics:
        return self._metrics
