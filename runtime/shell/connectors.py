"""Connector lifecycle on this worker: the connector instances the herder tells it to run.

Why a module of its own: a connector instance (a plugin object) lives here between the herder's actions;
this module starts, stops and transitions it as Java's ``WorkerConnector`` does, reports each state to
the status topic, asks it for task configs and gets those configs to the leader, the config topic's only
writer. Deciding *what* runs stays with the herder (``runtime/group/herder.py``).
"""

from __future__ import annotations

import json
import queue
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from kconnect.config.config_providers import ConfigProviders, reverse_transform
from kconnect.runtime import logs
from kconnect.runtime.plugins.api import Connector, ConnectorContext, ConnectorError, connector_type
from kconnect.runtime.plugins.connector_config import connector_version, plugin_version_names
from kconnect.runtime.plugins.plugin_calls import PluginCall, PluginCalls
from kconnect.runtime.plugins.plugin_metrics import PluginMetrics, PluginMetricsRegistry
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.stores import InternalTopics, put_status_safe
from kconnect.runtime.shell.writes import ClusterWrites
from kconnect.runtime.storage import status_log
from kconnect.runtime.storage.config_log import Properties, TargetState

log = logs.get(__name__)


def strings(props: Properties) -> dict[str, str]:
    """Plugins see configs without nulls (Java's null config values mean "unset")."""
    return {k: v for k, v in props.items() if v is not None}


@dataclass(frozen=True, slots=True)
class ConnectorCallDone:
    """Event: a connector instance's ``start`` or ``stop`` (start-up, transition) returned or raised."""

    name: str
    attempt: int
    method: str
    target_state: TargetState
    trace: str | None = None


@dataclass(frozen=True, slots=True)
class ConnectorTaskConfigs:
    """Event: a connector instance computed its task configs."""

    name: str
    attempt: int
    configs: list[dict[str, str]]


@dataclass(frozen=True, slots=True)
class ConnectorCallTimedOut:
    """Event: a call of a connector instance ran past ``connector.method.timeout.ms``."""

    name: str
    attempt: int
    method: str
    elapsed_s: float
    stack: str


class _PluginThread:
    """The one thread a connector instance's plugin code runs on, fed a queue of calls in order.

    Why a thread per instance: a call that hangs then holds up only its own instance. Once abandoned it
    is never given work again; the calls queued behind the stuck one are dropped.
    """

    def __init__(self, name: str, attempt: int) -> None:
        self._jobs: queue.Queue[Callable[[], None] | None] = queue.Queue()
        self.abandoned = threading.Event()
        self._idle = threading.Event()
        self._idle.set()
        self._pending = 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(
            target=self._main, name=f"connector-{name}-{attempt}", daemon=True, args=(name,)
        )
        self._thread.start()

    def submit(self, job: Callable[[], None]) -> None:
        if self.abandoned.is_set():
            return
        with self._lock:
            self._pending += 1
            self._idle.clear()
        self._jobs.put(job)

    def finish(self) -> None:
        """No more calls: the thread ends after the queued ones."""
        self._jobs.put(None)

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait for the queued calls to run (shutdown and tests); False if they did not in time."""
        return self._idle.wait(timeout_s)

    def _main(self, name: str) -> None:
        logs.bind(connector=name)
        while True:
            job = self._jobs.get()
            if job is None or self.abandoned.is_set():
                self._idle.set()
                return
            try:
                job()
            except Exception as exc:  # each job reports its own failures; this is a last resort
                log.error("connector call failed unexpectedly", connector=name, error=str(exc))
            finally:
                with self._lock:
                    self._pending -= 1
                    if self._pending == 0:
                        self._idle.set()


@dataclass
class _RunningConnector:
    config: Properties
    attempt: int
    thread: _PluginThread
    #: Created on the instance's thread (its constructor is plugin code too); None until then.
    instance: Connector | None = None
    #: Whether ``instance.start`` ran (and ``stop`` is owed): not while PAUSED or STOPPED.
    started: bool = False
    #: The KIP-877 metrics of the started instance, closed whenever it is stopped.
    metrics: PluginMetrics | None = None
    #: The plugin version running (KIP-891), reported in the connector's status.
    version: str | None = None


class Connectors:
    """The connector instances running on this worker.

    Called from the herder thread only, which never runs plugin code: each instance's ``start``,
    ``stop`` and ``task_configs`` run on the instance's own thread (:class:`_PluginThread`), bounded by
    ``connector.method.timeout.ms`` through ``plugin_calls``, and their outcomes come back to the herder
    as events through ``post`` (:class:`ConnectorCallDone`, :class:`ConnectorTaskConfigs`,
    :class:`ConnectorCallTimedOut`). ``generation`` gives the group generation statuses are written with;
    ``request_reconfigure`` asks the herder thread to recompute a connector's task configs soon (a
    connector's own request, or a retry); ``stopping`` is set once the worker shuts down;
    ``plugin_metrics`` is the worker's registry of KIP-877 metrics (a private one when not given).
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
        post: Callable[[object], None] | None = None,
        plugin_calls: PluginCalls | None = None,
        method_timeout_s: float = 30.0,
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
        self._post = post or (lambda event: None)
        self.plugin_calls = plugin_calls or PluginCalls()
        self.method_timeout_s = method_timeout_s
        #: Threads of stopped instances still running their last calls (shutdown waits for them).
        self._retiring: list[_PluginThread] = []

    def _status(
        self, name: str, state: status_log.State, trace: str | None, gen: int, version: str | None = None
    ) -> None:
        self.stores.put_status(status_log.ConnectorStatus(name, state, trace, self.worker_id, gen, version))

    def report(self, name: str, state: status_log.State, trace: str | None, gen: int) -> None:
        """Write the status the herder decided from an instance's answer, with the instance's version."""
        running = self._running.get(name)
        version = running.version if running is not None and state is not status_log.State.FAILED else None
        self._status(name, state, trace, gen, version)
        log.info("connector state reported", connector=name, state=state.value)

    def _call(self, running: _RunningConnector, name: str, method: str, fn: Callable[[], None]) -> None:
        """Run ``fn`` (which calls the plugin's ``method``) bounded, on the instance's thread."""

        def timed_out(call: PluginCall, elapsed: float) -> None:
            running.thread.abandoned.set()
            self._post(ConnectorCallTimedOut(name, running.attempt, method, elapsed, call.stack()))

        with self.plugin_calls.bounded(
            f"connector {name}", method, self.method_timeout_s, timed_out, connector=name
        ):
            fn()

    def _answer(self, running: _RunningConnector, event: object) -> None:
        """Post an instance's answer to the herder, unless the instance was abandoned: a call that
        returns past its bound must change nothing."""
        if not running.thread.abandoned.is_set():
            self._post(event)

    def start(
        self, name: str, config: Properties, target_state: TargetState, gen: int, attempt: int = 0
    ) -> None:
        """Create the instance and start it if its target state is STARTED, on a thread of its own; the
        outcome comes back as a :class:`ConnectorCallDone` (the herder asks for task configs then)."""
        thread = _PluginThread(name, attempt)
        running = _RunningConnector(config, attempt, thread)
        self._running[name] = running
        thread.submit(lambda: self._start_job(name, running, target_state))

    def _start_job(self, name: str, running: _RunningConnector, target_state: TargetState) -> None:
        clog = log.bind(connector=name)
        metrics = None
        try:
            desc = self.registry.find(
                running.config.get("connector.class") or "",
                # A deprecated *.version key is read, with a warning, as its 4.x name.
                connector_version(plugin_version_names(running.config, warn=True)),
            )
            running.version = desc.version
            started = target_state == TargetState.STARTED

            def make_and_start() -> None:
                nonlocal metrics
                running.instance = desc.cls()
                if started:
                    metrics = self.plugin_metrics.connector(name)
                    running.instance.initialize(_Context(self, name, metrics))
                    running.instance.start(self._resolved(running.config))

            self._call(running, name, "start", make_and_start)
            running.started, running.metrics = started, metrics
        except Exception as exc:
            if metrics is not None:
                metrics.close()
            clog.error("connector failed to start", error=str(exc))
            self._answer(
                running,
                ConnectorCallDone(name, running.attempt, "start", target_state, traceback.format_exc()),
            )
            return
        clog.info("connector started", target_state=target_state.value)
        self._answer(running, ConnectorCallDone(name, running.attempt, "start", target_state))

    def _resolved(self, config: Properties) -> dict[str, str]:
        """The config the instance gets: ``${provider:...}`` references resolved (the stored config keeps
        them). A reference that cannot be resolved fails the start, naming the key and the reason."""
        resolution = self.config_providers.resolve(strings(config))
        problem = resolution.first_problem()
        if problem is not None:
            raise ConnectorError(f"a config provider reference cannot be resolved: {problem}")
        return resolution.values

    def stop(self, name: str, gen: int) -> None:
        """Forget the instance and stop it (if started) on its thread; UNASSIGNED now unless the connector
        was deleted or another worker reported it under a newer generation. The herder does not wait: a
        ``stop()`` that hangs is bounded like any call."""
        running = self._running.pop(name, None)
        if running is None:
            return

        def stop_job() -> None:
            try:
                if running.started and running.instance is not None:
                    running.started = False
                    self._call(running, name, "stop", running.instance.stop)
            except Exception as exc:
                log.warning("connector stop raised", connector=name, error=str(exc))
            finally:
                _close_metrics(running)
            log.info("connector stopped", connector=name)

        running.thread.submit(stop_job)
        running.thread.finish()
        self._retiring = [t for t in self._retiring if not t.wait_idle(0)] + [running.thread]
        if self.stores.snapshot().contains(name):
            status = status_log.ConnectorStatus(name, status_log.State.UNASSIGNED, None, self.worker_id, gen)
            if not put_status_safe(self.stores, status):
                log.info("connector stopped, a newer generation's status stands", connector=name)

    def abandon(self, name: str, attempt: int) -> None:
        """A call of instance ``attempt`` passed its bound: its thread gets no more work."""
        running = self._running.get(name)
        if running is not None and running.attempt == attempt:
            running.thread.abandoned.set()

    def transition(self, name: str, target_state: TargetState, gen: int) -> None:
        """Java's WorkerConnector transitions, on the instance's thread: STARTED starts the instance (and
        asks it for task configs); PAUSED and STOPPED stop it but keep it, so resuming needs no rebalance.
        The outcome comes back as a :class:`ConnectorCallDone`."""
        running = self._running.get(name)
        if running is None:
            return
        method = "start" if target_state == TargetState.STARTED else "stop"

        def transition_job() -> None:
            instance = running.instance
            if instance is None:  # its start failed: nothing to move
                return
            try:
                if target_state == TargetState.STARTED:
                    if not running.started:
                        _close_metrics(running)  # a start that failed before may have left some
                        running.metrics = self.plugin_metrics.connector(name)
                        instance.initialize(_Context(self, name, running.metrics))
                        self._call(
                            running, name, "start", lambda: instance.start(self._resolved(running.config))
                        )
                        running.started = True
                elif running.started:
                    running.started = False
                    try:
                        self._call(running, name, "stop", instance.stop)
                    finally:
                        _close_metrics(running)
            except Exception as exc:
                log.error(
                    "connector failed in a state transition",
                    connector=name,
                    target_state=target_state,
                    error=str(exc),
                )
                self._answer(
                    running,
                    ConnectorCallDone(name, running.attempt, method, target_state, traceback.format_exc()),
                )
                return
            self._answer(running, ConnectorCallDone(name, running.attempt, method, target_state))

        running.thread.submit(transition_job)

    def request_task_configs(self, name: str, attempt: int | None = None) -> None:
        """Ask a started connector for its task configs on its thread; they come back as a
        :class:`ConnectorTaskConfigs`. Nothing when it is not running here (or not instance ``attempt``)."""
        running = self._running.get(name)
        if running is None or (attempt is not None and running.attempt != attempt):
            return
        running.thread.submit(lambda: self._task_configs_job(name, running))

    def _task_configs_job(self, name: str, running: _RunningConnector) -> None:
        configs = self.task_configs(name, running)
        if configs is not None:
            self._answer(running, ConnectorTaskConfigs(name, running.attempt, configs))

    def task_configs(
        self, name: str, running: _RunningConnector | None = None
    ) -> list[dict[str, str]] | None:
        """Ask a started connector for its task configs (None: not running here, not STARTED, or failed).
        Runs on the instance's thread.

        Each config names the task class; a sink's tasks also get the connector's topics, as Java adds.
        """
        running = running or self._running.get(name)
        if running is None or running.instance is None or not running.started:
            return None
        instance = running.instance
        snap = self.stores.snapshot()
        if not snap.contains(name) or snap.target_state(name) != TargetState.STARTED:
            return None
        try:
            resolved = self._resolved(running.config)
            max_tasks = int(resolved.get("tasks.max") or "1")
            raw: list[Mapping[str, str]] = []
            self._call(running, name, "task_configs", lambda: raw.extend(instance.task_configs(max_tasks)))
            task_class = instance.task_class()
            configs = []
            for tc in raw:
                full = dict(tc)
                full["task.class"] = f"{task_class.__module__}.{task_class.__qualname__}"
                if connector_type(type(instance)) == "sink":
                    for key in ("topics", "topics.regex"):
                        value = running.config.get(key)
                        if value is not None:
                            full[key] = value
                configs.append(full)
            # Computed from resolved values: references go back in before the configs leave the worker.
            configs = reverse_transform(running.config, resolved, configs)
        except Exception as exc:
            log.error("connector failed to compute task configs", connector=name, error=str(exc))
            self._answer(
                running,
                ConnectorCallDone(
                    name, running.attempt, "task_configs", TargetState.STARTED, traceback.format_exc()
                ),
            )
            return None
        return configs

    def close(self, timeout_s: float) -> None:
        """At shutdown, after the herder stopped every instance: wait at most ``timeout_s`` in all for their
        last calls (``stop()``), as Java waits for its connectors; a thread still busy then is left."""
        deadline = time.monotonic() + timeout_s
        for thread in self._retiring:
            if not thread.wait_idle(max(0.0, deadline - time.monotonic())):
                log.warning("a connector did not stop in time; leaving its thread")

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
