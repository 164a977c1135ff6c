"""The worker process: the imperative shell around the herder.

It owns the threads and the sockets: the internal-topic logs (each consumed on its own thread), the
group member (kafka-python's IO thread), the herder thread that feeds events to the herder and carries
out its actions, and the REST server. Requests from REST that write cluster state go to the config
topic, and only the leader writes it: a follower answers ``NotLeaderError`` and the REST layer forwards.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import queue
import secrets
import threading
import time
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kconnect.config.errors import ConfigError
from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.client_config import WorkerClients, worker_clients
from kconnect.runtime.dataplane.executor import Executor, HeldTasks
from kconnect.runtime.errors import (
    AlreadyExistsError,
    BadRequestError,
    ForbiddenError,
    NotFoundError,
    NotLeaderError,
    RebalanceNeededError,
)
from kconnect.runtime.group import assignor, group_records, leader_memory, protocol
from kconnect.runtime.group.herder import (
    Action,
    CatchUpConfig,
    Herder,
    PublishTaskConfigs,
    ReadyToLeave,
    ReportRestarting,
    RequestRejoin,
    StartConnector,
    StartTask,
    StopConnector,
    StopTask,
    TransitionConnector,
    TransitionTask,
)
from kconnect.runtime.group.member import GroupDescription, MemberError, WorkerMember
from kconnect.runtime.group.protocol import ConnectAssignment, WorkerState
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import (
    Connector,
    ConnectorContext,
    ConnectorError,
    PluginError,
    PluginRegistry,
    connector_type,
)
from kconnect.runtime.plugins.connector_config import ConnectorConfigError, validate_connector_config
from kconnect.runtime.shell import metrics
from kconnect.runtime.storage import config_log, offset_log, status_log, topics
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, Properties
from kconnect.runtime.storage.kafka_log import KafkaLog, KafkaLogError, LogRecord
from kconnect.runtime.storage.offset_log import OffsetState, SourceOffset

log = logs.get(__name__)

SIGNATURE_HEADER = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"


_LOGGER_CLUSTER_KEY = config_log.LOGGER_CLUSTER_PREFIX.encode()


class StartupError(RuntimeError):
    """The worker cannot start; the message is the one line the CLI prints."""


@dataclass
class _RunningConnector:
    instance: Connector
    config: Properties
    #: Whether ``instance.start`` ran (and ``stop`` is owed): not while PAUSED or STOPPED.
    started: bool = False


@dataclass
class _ReconfigureRequest:
    connector: str


@dataclass
class _ConfigMoved:
    pass


@dataclass
class _BeginLeave:
    pass


@dataclass
class _RestartTask:
    """A REST task restart that reached this worker, the task's owner; the herder thread carries it out."""

    task: TaskId


@dataclass
class WorkerMetrics:
    rebalances_completed: int = 0
    rebalance_time_ms_total: float = 0.0
    rebalance_started_at: float | None = None
    last_rebalance_ms: float = 0.0
    scheduled_delay_ms: int = 0
    rebalance_time_ms_max: float = 0.0
    last_rebalance_at: float | None = None
    connector_startup_attempts: int = 0
    connector_startup_successes: int = 0
    connector_startup_failures: int = 0
    task_startup_attempts: int = 0
    task_startup_successes: int = 0
    task_startup_failures: int = 0


@dataclass(frozen=True, slots=True)
class LeaderView:
    """What the leader saw and decided in the last rebalance it led: the source of ``GET /workers``."""

    leader_id: str
    protocol: str
    members: Mapping[str, tuple[int, WorkerState]]
    assignments: Mapping[str, ConnectAssignment]


class Worker:
    def __init__(
        self,
        config: WorkerConfig,
        registry: PluginRegistry | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.config = config
        self.url = config.rest_url
        self.worker_id = config.worker_id or _host_port(self.url)
        self.registry = registry or PluginRegistry.discover(config.plugin_path)
        self.executor: Executor = executor or self._default_executor()
        self.executor.set_failure_listener(self._task_failed)
        self.metrics = WorkerMetrics()
        self.leader_view: LeaderView | None = None
        self._leader_state = assignor.CooperativeState()  # the leader's memory between rebalances
        self._rejoin_after_join = False
        self._unassigned: tuple[frozenset[str], frozenset[TaskId]] = (frozenset(), frozenset())
        self._lock = threading.RLock()  # guards herder, config state, status state
        self._fence_lock = threading.Lock()  # one zombie-fencing round at a time (fence_zombies)
        self._config_state = config_log.ConfigState()
        self._status_state = status_log.StatusState()
        self._offset_state = OffsetState()
        self.herder = Herder(self.worker_id, self._config_state.snapshot())
        self._events: queue.Queue[object] = queue.Queue()
        self._connectors: dict[str, _RunningConnector] = {}
        self._rejoin_at: float | None = None
        self._stopping = threading.Event()
        self._ready_to_leave = threading.Event()
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        self.kafka_cluster_id: str = ""
        self.started = threading.Event()  # joined the group and read the config topic: healthy
        self.last_tick = time.monotonic()
        self.startup_error: str | None = None
        self._admin: AdminClient | None = None
        #: The worker's Kafka client settings, translated at start (``worker_clients``).
        self.clients = WorkerClients({}, {}, {}, ())
        self._config_log: KafkaLog | None = None
        # Cluster-scoped log levels written before this worker read the config topic to its end are old
        # news and not applied (Java's KafkaConfigBackingStore does the same).
        self._config_caught_up = False
        self._status_log: KafkaLog | None = None
        self._offset_log: KafkaLog | None = None
        self._records_log: KafkaLog | None = None
        self._group_records = group_records.GroupRecords()
        #: what the leader's last assignment asks to record; written once the round has completed
        self._pending_records: list[leader_memory.Record] = []
        self._member: WorkerMember | None = None
        self._forwarder: Callable[[str, str, str, Any, dict[str, str]], None] | None = None
        self.log = logs.get("kconnect.worker", worker=self.worker_id)

    def _default_executor(self) -> Executor:
        """``kconnect.executor``: the Spark data plane, or tasks only held (rebalancing-only clusters)."""
        if self.config.kconnect_executor == "held":
            return HeldTasks()
        from kconnect.runtime.dataplane.spark_executor import SparkExecutor

        return SparkExecutor(
            self.config,
            self.registry,
            read_offsets=self._current_offsets,
            write_offsets=self.write_source_offsets,
            task_count=lambda connector: self.snapshot().task_count(connector),
            sync_offsets=self.source_offsets,
            fence=self.ensure_fenced,
        )

    def _current_offsets(self) -> OffsetState:
        with self._lock:
            return self._offset_state

    def _task_failed(self, task: TaskId, trace: str) -> None:
        """A task failed on its own thread after it started: report it FAILED, as Java's WorkerTask does."""
        self.log.error("task failed", connector=task.connector, task=task.task)
        try:
            self._put_status(
                status_log.TaskStatus(
                    task, status_log.State.FAILED, trace, self.worker_id, self.herder.group.generation
                )
            )
        except Exception as exc:
            self.log.warning("could not write a task's FAILED status", task=str(task), error=str(exc))

    # =========================================================================================== startup

    def start(self) -> None:
        """Reach the cluster, create and verify the internal topics, read them, then join the group."""
        cfg = self.config
        bootstrap = ",".join(cfg.bootstrap_servers)
        try:
            self.clients = worker_clients(cfg.security_protocol, cfg.passthrough)
        except ConfigError as exc:
            raise StartupError(str(exc)) from exc
        if self.clients.ignored:
            # Java's clients warn the same way ("supplied but isn't a known config").
            self.log.warning(
                "worker Kafka client settings with no counterpart in kconnect's clients (ignored)",
                keys=list(self.clients.ignored),
            )
        # The metadata call below only says "transport failure"; the client's own error (a failed SASL
        # login, a TLS handshake) is the reason the user needs.
        client_errors: list[str] = []
        admin_conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            **self.clients.admin,
            "client.id": f"{self.worker_id}-admin",
            "error_cb": lambda error: client_errors.append(str(error.str())),
        }
        try:
            self._admin = AdminClient(admin_conf)
        except KafkaException as exc:  # a setting librdkafka refuses (an unknown ssl.* key, GSSAPI)
            raise StartupError(f"the worker's Kafka client settings: {exc.args[0].str()}") from exc
        timeout_s = max(5.0, cfg.request_timeout_ms / 1000 / 4)
        try:
            md = self._admin.list_topics(timeout=timeout_s)
        except KafkaException as exc:
            self._admin.poll(0)  # serves the error callbacks queued meanwhile
            reason = client_errors[-1] if client_errors else (exc.args[0] if exc.args else exc)
            raise StartupError(
                f"could not reach the Kafka cluster at bootstrap.servers={bootstrap} within {timeout_s:.0f} s"
                f" ({reason})"
            ) from exc
        self.kafka_cluster_id = md.cluster_id or ""
        specs = [
            topics.TopicSpec(
                cfg.config_storage_topic,
                "config.storage.topic",
                1,
                cfg.config_storage_replication_factor,
                True,
            ),
            topics.TopicSpec(
                cfg.offset_storage_topic,
                "offset.storage.topic",
                cfg.offset_storage_partitions,
                cfg.offset_storage_replication_factor,
            ),
            topics.TopicSpec(
                cfg.status_storage_topic,
                "status.storage.topic",
                cfg.status_storage_partitions,
                cfg.status_storage_replication_factor,
            ),
            topics.TopicSpec(
                cfg.group_records_storage_topic,
                "group.records.storage.topic",
                cfg.group_records_storage_partitions,
                cfg.group_records_storage_replication_factor,
            ),
        ]
        try:
            topics.ensure_topics(self._admin, specs, timeout_s=timeout_s)
        except topics.TopicError as exc:
            raise StartupError(str(exc)) from exc

        self._config_log = KafkaLog(
            cfg.config_storage_topic,
            bootstrap,
            self._on_config_record,
            self.worker_id,
            client_settings=self.clients.internal,
        )
        self._status_log = KafkaLog(
            cfg.status_storage_topic,
            bootstrap,
            self._on_status_record,
            self.worker_id,
            client_settings=self.clients.internal,
        )
        self._offset_log = KafkaLog(
            cfg.offset_storage_topic,
            bootstrap,
            self._on_offset_record,
            self.worker_id,
            client_settings=self.clients.internal,
        )
        self._records_log = KafkaLog(
            cfg.group_records_storage_topic,
            bootstrap,
            self._on_group_record,
            self.worker_id,
            client_settings=self.clients.internal,
        )
        sync_s = cfg.worker_sync_timeout_ms / 1000
        try:
            for klog in self._logs():
                klog.start(timeout_s)
            for klog in self._logs():
                if not klog.read_to_end(max(sync_s, timeout_s)):
                    raise StartupError(f"could not read internal topic '{klog.topic}' to its end")
        except KafkaLogError as exc:
            raise StartupError(str(exc)) from exc
        self._config_caught_up = True
        with self._lock:
            self.herder.on_startup_config(self._config_state.snapshot())

        self._member = WorkerMember(
            bootstrap_servers=bootstrap,
            group_id=cfg.group_id,
            client_id=self.worker_id,
            connect_protocol=cfg.connect_protocol,
            session_timeout_ms=cfg.session_timeout_ms,
            heartbeat_interval_ms=cfg.heartbeat_interval_ms,
            rebalance_timeout_ms=cfg.rebalance_timeout_ms,
            request_timeout_ms=cfg.request_timeout_ms,
            retry_backoff_ms=cfg.retry_backoff_ms,
            metadata=self._metadata,
            assign=self._assign,
            client_settings=self.clients.member,
        )
        try:
            self._member.connect(timeout_ms=int(timeout_s * 1000))
        except MemberError as exc:
            raise StartupError(str(exc)) from exc
        self._thread = threading.Thread(target=self._run, name="herder", daemon=True)
        self._thread.start()
        self.log.info("worker started", url=self.url, group=cfg.group_id, protocol=cfg.connect_protocol)

    # ======================================================================================= the loop

    def _run(self) -> None:
        logs.bind(worker=self.worker_id)
        member = self._require_member()
        while not self._stopping.is_set():
            try:
                self._tick(member)
            except Exception as exc:  # the loop must survive anything a single tick hits
                self.log.error("herder tick failed", error=str(exc), trace=traceback.format_exc())
                time.sleep(0.5)
        self._stopped.set()

    def _tick(self, member: WorkerMember) -> None:
        self.last_tick = time.monotonic()
        self._drain_events()
        due = self._rejoin_at is not None and time.monotonic() >= self._rejoin_at
        if due:
            self._rejoin_at = None
            member.request_rejoin()
        if member.need_rejoin():
            gen, _ = member.generation()
            with self._lock:
                lost = gen < 0 and self.herder.group.known
                if not self.herder.rebalancing:
                    self.metrics.rebalance_started_at = time.monotonic()
                actions = self.herder.on_rejoin_preparing(lost, member.last_protocol)
            self._execute(actions)
            if self.metrics.rebalance_started_at is None:
                self.metrics.rebalance_started_at = time.monotonic()
            joined = member.ensure_active(timeout_ms=1000)
        else:
            joined = member.poll_joined()
        if joined is not None:
            self._on_joined(joined)
        member.poll_heartbeat()
        try:
            event = self._events.get(timeout=0.1)
            self._events.put(event)  # handled by the next _drain_events
        except queue.Empty:
            pass

    def _drain_events(self) -> None:
        config_moved = False
        reconfigure: set[str] = set()
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                break
            if isinstance(event, _ConfigMoved):
                config_moved = True
            elif isinstance(event, _ReconfigureRequest):
                reconfigure.add(event.connector)
            elif isinstance(event, _BeginLeave):
                with self._lock:
                    actions = self.herder.begin_leave()
                self.log.info("leaving the group: handing work over first")
                self._execute(actions)
            elif isinstance(event, _RestartTask):
                with self._lock:
                    actions = self.herder.on_restart_task(event.task)
                self._execute(actions)
        if config_moved:
            with self._lock:
                snapshot = self._config_state.snapshot()
                old_static = self.herder.snapshot.static_overrides.get(self.worker_id)
                actions = (
                    self.herder.on_config(snapshot, self._status_state)
                    if snapshot is not self.herder.snapshot
                    else []
                )
            if snapshot.static_overrides.get(self.worker_id) != old_static:
                # This worker's static assignment changed over REST: it takes effect at a rebalance.
                self.log.info("static assignment override changed; rejoining")
                actions.append(RequestRejoin("static assignment changed"))
            self._execute(actions)
        for name in sorted(reconfigure):
            self._reconfigure(name)

    def _on_joined(self, joined: Any) -> None:
        assignment: ConnectAssignment = joined.assignment
        if assignment.error == protocol.NO_ERROR and assignment.config_offset > self._config_offset():
            # The leader assigned from a newer config than we have read: read up to it first.
            self._require(self._config_log).read_to_end(self.config.worker_sync_timeout_ms / 1000)
            with self._lock:
                self.herder.snapshot = self._config_state.snapshot()
        with self._lock:
            actions = self.herder.on_rebalanced(
                joined.generation, joined.member_id, joined.protocol, assignment, self._status_state
            )
            group = self.herder.group
        started = self.metrics.rebalance_started_at
        if started is not None and assignment.error == protocol.NO_ERROR:
            elapsed = (time.monotonic() - started) * 1000
            self.metrics.rebalances_completed += 1
            self.metrics.rebalance_time_ms_total += elapsed
            self.metrics.last_rebalance_ms = elapsed
            self.metrics.rebalance_time_ms_max = max(self.metrics.rebalance_time_ms_max, elapsed)
            self.metrics.last_rebalance_at = time.monotonic()
            self.metrics.rebalance_started_at = None
        self.metrics.scheduled_delay_ms = assignment.delay_ms
        logs.bind(generation=joined.generation)
        self.log.info(
            "rebalance completed",
            generation=joined.generation,
            protocol=joined.protocol,
            leader=group.leader_id,
            leader_url=group.leader_url,
            connectors=sorted(assignment.connectors),
            tasks=[str(t) for t in assignment.tasks],
            revoked_connectors=sorted(assignment.revoked_connectors),
            revoked_tasks=[str(t) for t in assignment.revoked_tasks],
            delay_ms=assignment.delay_ms,
            error=assignment.error,
            rebalance_ms=round(self.metrics.last_rebalance_ms, 1),
            rebalances_completed=self.metrics.rebalances_completed,
        )
        self._execute(actions)
        self._report_unassigned(joined.generation)
        self._write_group_records(joined.generation, joined.member_id, assignment)
        if self._rejoin_after_join:
            self._rejoin_after_join = False
            self._require_member().request_rejoin()
        if self.herder.is_leader and protocol.version_for_protocol(joined.protocol) >= 2:
            self._ensure_session_key()
        self.started.set()

    # ================================================================================= action dispatch

    def _execute(self, actions: list[Action]) -> None:
        for action in actions:
            try:
                self._execute_one(action)
            except Exception as exc:
                self.log.error("action failed", action=repr(action), error=str(exc))

    def _execute_one(self, action: Action) -> None:
        gen = self.herder.group.generation
        if isinstance(action, StartConnector):
            self._start_connector(action.name, action.config, action.target_state, gen)
        elif isinstance(action, StopConnector):
            self._stop_connector(action.name, gen)
        elif isinstance(action, StartTask):
            self.metrics.task_startup_attempts += 1
            state = self.executor.start_task(action.task, _strings(action.config), action.target_state)
            if state.state == "FAILED":
                self.metrics.task_startup_failures += 1
            else:
                self.metrics.task_startup_successes += 1
            self._put_status(
                status_log.TaskStatus(
                    action.task, status_log.State(state.state), state.trace, self.worker_id, gen
                )
            )
            self.log.info("task started", connector=action.task.connector, task=action.task.task)
        elif isinstance(action, StopTask):
            self.executor.stop_task(action.task, self.config.task_shutdown_graceful_timeout_ms / 1000)
            self.log.info("task stopped", connector=action.task.connector, task=action.task.task)
        elif isinstance(action, TransitionConnector):
            self._transition_connector(action.name, action.target_state, gen)
        elif isinstance(action, TransitionTask):
            state = self.executor.transition_task(action.task, action.target_state)
            self._put_status(
                status_log.TaskStatus(
                    action.task, status_log.State(state.state), state.trace, self.worker_id, gen
                )
            )
            self.log.info("task transitioned", task=str(action.task), target_state=action.target_state)
        elif isinstance(action, ReportRestarting):
            restarting = status_log.State.RESTARTING
            self._put_status(
                status_log.ConnectorStatus(action.connector, restarting, None, self.worker_id, gen)
                if action.task is None
                else status_log.TaskStatus(action.task, restarting, None, self.worker_id, gen)
            )
        elif isinstance(action, PublishTaskConfigs):
            self._publish_task_configs(action.connector, [dict(c) for c in action.configs])
        elif isinstance(action, RequestRejoin):
            if action.delay_ms > 0:
                self._rejoin_at = time.monotonic() + action.delay_ms / 1000
            else:
                self._require_member().request_rejoin()
        elif isinstance(action, ReadyToLeave):
            self._ready_to_leave.set()
        elif isinstance(action, CatchUpConfig):
            self._require(self._config_log).read_to_end(self.config.worker_sync_timeout_ms / 1000)
            with self._lock:
                self.herder.snapshot = self._config_state.snapshot()

    def _start_connector(self, name: str, config: Properties, target_state: str, gen: int) -> None:
        clog = log.bind(connector=name)
        self.metrics.connector_startup_attempts += 1
        try:
            desc = self.registry.find(config.get("connector.class") or "")
            instance = desc.cls()
            if target_state == "STARTED":
                instance.initialize(_Context(self, name))
                instance.start(_strings(config))
                state = "RUNNING"
            else:
                state = "PAUSED" if target_state == "PAUSED" else "STOPPED"
            self._connectors[name] = _RunningConnector(instance, config, started=target_state == "STARTED")
            self._put_status(
                status_log.ConnectorStatus(name, status_log.State(state), None, self.worker_id, gen)
            )
            clog.info("connector started", state=state)
            self.metrics.connector_startup_successes += 1
            if target_state == "STARTED":
                self._events.put(_ReconfigureRequest(name))
        except Exception as exc:
            clog.error("connector failed to start", error=str(exc))
            self.metrics.connector_startup_failures += 1
            self._put_status(
                status_log.ConnectorStatus(
                    name, status_log.State.FAILED, traceback.format_exc(), self.worker_id, gen
                )
            )

    def _stop_connector(self, name: str, gen: int) -> None:
        running = self._connectors.pop(name, None)
        if running is None:
            return
        try:
            if running.started:
                running.instance.stop()
        except Exception as exc:
            log.warning("connector stop raised", connector=name, error=str(exc))
        with self._lock:
            still_exists = self._config_state.snapshot().contains(name)
        if still_exists:
            self._put_status(
                status_log.ConnectorStatus(name, status_log.State.UNASSIGNED, None, self.worker_id, gen)
            )
        log.info("connector stopped", connector=name)

    def _transition_connector(self, name: str, target_state: str, gen: int) -> None:
        """Java's WorkerConnector transitions: STARTED starts the instance (and asks it for task configs);
        PAUSED and STOPPED stop it but keep it, so resuming needs no rebalance."""
        running = self._connectors.get(name)
        if running is None:
            return
        clog = log.bind(connector=name)
        try:
            if target_state == "STARTED":
                if not running.started:
                    running.instance.initialize(_Context(self, name))
                    running.instance.start(_strings(running.config))
                    running.started = True
                state = status_log.State.RUNNING
            else:
                if running.started:
                    running.started = False
                    running.instance.stop()
                state = status_log.State.PAUSED if target_state == "PAUSED" else status_log.State.STOPPED
        except Exception as exc:
            clog.error("connector failed in a state transition", target_state=target_state, error=str(exc))
            self._put_status(
                status_log.ConnectorStatus(
                    name, status_log.State.FAILED, traceback.format_exc(), self.worker_id, gen
                )
            )
            return
        self._put_status(status_log.ConnectorStatus(name, state, None, self.worker_id, gen))
        clog.info("connector transitioned", state=state.value)
        if target_state == "STARTED":
            self._events.put(_ReconfigureRequest(name))

    def _reconfigure(self, name: str) -> None:
        running = self._connectors.get(name)
        if running is None:
            return
        with self._lock:
            snap = self._config_state.snapshot()
        if not snap.contains(name) or snap.target_state(name) != "STARTED":
            return
        try:
            max_tasks = int(running.config.get("tasks.max") or "1")
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
        except Exception as exc:
            log.error("connector failed to compute task configs", connector=name, error=str(exc))
            self._put_status(
                status_log.ConnectorStatus(
                    name,
                    status_log.State.FAILED,
                    traceback.format_exc(),
                    self.worker_id,
                    self.herder.group.generation,
                )
            )
            return
        with self._lock:
            actions = self.herder.on_task_configs(name, configs)
        self._execute(actions)

    def _publish_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Only the leader writes task configs; a follower sends them to the leader, signed if sessioned.

        The herder thread never waits on that request: it also heartbeats and completes rebalances, and a
        leader that is itself mid-rebalance answers only once the rebalance is over, so a synchronous
        forward could hold the very rebalance it waits for (Java forwards on an executor of its own too).
        While no other worker leads (no leader known, or this worker about to lead again) the configs are
        recomputed a moment later instead.
        """
        with self._lock:
            is_leader = self.herder.is_leader
            leader_url = self.herder.group.leader_url
        if is_leader:
            self.write_task_configs(name, configs)
            return
        if self._forwarder is None:
            log.warning("no REST forwarder to send task configs to the leader", connector=name)
            return
        if not leader_url or leader_url.rstrip("/") == self.url.rstrip("/"):
            self._retry_reconfigure(name)
            return
        import json

        body = json.dumps(configs).encode()
        headers = self.sign(body)
        forwarder = self._forwarder

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
        timer = threading.Timer(delay_s, lambda: self._events.put(_ReconfigureRequest(name)))
        timer.daemon = True
        timer.start()

    # ================================================================================= config records

    def _on_config_record(self, record: LogRecord) -> None:
        with self._lock:
            self._config_state, corrupt = config_log.apply_raw(
                self._config_state, record.key, record.value, record.offset
            )
        if corrupt is not None:
            log.warning(
                "skipping corrupt config record", topic=record.topic, offset=record.offset, error=str(corrupt)
            )
        elif self._config_caught_up and (record.key or b"").startswith(_LOGGER_CLUSTER_KEY):
            self._apply_cluster_log_level(record)
        self._events.put(_ConfigMoved())

    def _apply_cluster_log_level(self, record: LogRecord) -> None:
        """A ``logger-cluster-<namespace>`` record: every worker sets the level when it reads it."""
        from kconnect.runtime.shell.log_levels import LEVELS

        try:
            decoded = config_log.decode(record.key, record.value)
        except config_log.CorruptRecord:
            return  # already reported by apply_raw
        if not isinstance(decoded, config_log.LoggerLevel):
            return
        try:
            changed = LEVELS.set(decoded.namespace, decoded.level)
        except ValueError as exc:
            log.warning("ignoring cluster log level", namespace=decoded.namespace, error=str(exc))
            return
        log.info(
            "cluster log level applied", namespace=decoded.namespace, level=decoded.level, changed=changed
        )

    def put_logger_level(self, namespace: str, level: str) -> None:
        """Cluster scope: write the level to the config topic; every worker (this one too) applies it."""
        key, value = config_log.encode(config_log.LoggerLevel(namespace, level))
        self._require(self._config_log).send(key, value)

    def _on_status_record(self, record: LogRecord) -> None:
        try:
            decoded = status_log.decode(record.key, record.value)
        except status_log.CorruptRecord as exc:
            log.warning(
                "skipping corrupt status record", topic=record.topic, offset=record.offset, error=str(exc)
            )
            return
        if decoded is None:
            return
        with self._lock:
            self._status_state = status_log.apply(self._status_state, decoded)

    def _on_offset_record(self, record: LogRecord) -> None:
        try:
            decoded = offset_log.decode(record.key, record.value)
        except offset_log.CorruptRecord as exc:
            log.warning(
                "skipping corrupt offset record", topic=record.topic, offset=record.offset, error=str(exc)
            )
            return
        with self._lock:
            self._offset_state = offset_log.apply(self._offset_state, decoded)

    def _on_group_record(self, record: LogRecord) -> None:
        with self._lock:
            self._group_records = group_records.apply(
                self._group_records,
                record.key,
                record.value,
                offset=record.offset,
                timestamp_ms=record.timestamp_ms,
            )

    def figures(self) -> metrics.WorkerFigures:
        """What ``GET /metrics`` reports: one consistent reading of this worker's figures."""
        m = self.metrics
        with self._lock:
            group = self.herder.group
            connectors = sorted(self.herder.owned_connectors)
            tasks = sorted(self.herder.owned_tasks)
            status = self._status_state
            rebalancing = self.herder.rebalancing
        connector_states = {}
        for name in connectors:
            cs = status.connector_status(name)
            connector_states[name] = cs.state.value if cs is not None else "UNASSIGNED"
        task_figures = []
        running = self.executor.task_figures()
        for task in tasks:
            ts = status.task_status(task)
            counts = running.get(task)
            is_source = counts is not None and counts.kind == "source"
            task_figures.append(
                metrics.TaskFigures(
                    task.connector,
                    task.task,
                    ts.state.value if ts is not None else "UNASSIGNED",
                    source_record_poll_total=counts.records if counts is not None and is_source else 0,
                    sink_record_read_total=counts.records if counts is not None and not is_source else 0,
                    offset_commit_avg_time_ms=counts.offset_commit_avg_ms if counts is not None else 0.0,
                )
            )
        since = None if m.last_rebalance_at is None else (time.monotonic() - m.last_rebalance_at) * 1000
        return metrics.WorkerFigures(
            worker=self.worker_id,
            protocol=group.protocol or self.config.connect_protocol,
            epoch=group.generation,
            leader=group.leader_url or "",
            rebalancing=rebalancing,
            completed_rebalances=m.rebalances_completed,
            rebalance_time_ms_total=m.rebalance_time_ms_total,
            rebalance_time_ms_max=m.rebalance_time_ms_max,
            time_since_last_rebalance_ms=since,
            connectors=connector_states,
            tasks=task_figures,
            connector_startup_attempts=m.connector_startup_attempts,
            connector_startup_successes=m.connector_startup_successes,
            connector_startup_failures=m.connector_startup_failures,
            task_startup_attempts=m.task_startup_attempts,
            task_startup_successes=m.task_startup_successes,
            task_startup_failures=m.task_startup_failures,
            scheduled_delay_ms=m.scheduled_delay_ms,
        )

    def group_state(self) -> group_records.GroupState | None:
        """This worker's group as the group records describe it (any worker can tell; they all read them)."""
        with self._lock:
            return self._group_records.groups.get(self.config.group_id)

    def _write_group_records(self, generation: int, member_id: str, assignment: ConnectAssignment) -> None:
        """The leader's records of the round it computed, then this member's current assignment.

        Written after the round completed, from the herder thread, so that SyncGroup never waits on them;
        records equal to what the topic already holds are not rewritten.
        """
        pending, self._pending_records = self._pending_records, []
        with self._lock:
            running = group_records.Assigned(
                frozenset(self.herder.owned_connectors), frozenset(self.herder.owned_tasks)
            )
        wanted = [*pending]
        if assignment.error == protocol.NO_ERROR:
            wanted.append(
                leader_memory.current_assignment_record(
                    self.config.group_id, member_id, generation, assignment, running
                )
            )
        records_log = self._require(self._records_log)
        records = group_records.changed_records(self.group_state(), wanted)
        if not records:
            return
        partition = group_records.partition_for(self.config.group_id, records_log.partition_count)
        try:
            for key, value in records:
                records_log.send(key, value, partition=partition)
        except KafkaLogError as exc:
            self.log.warning("could not write the group records", generation=generation, error=str(exc))

    def _config_offset(self) -> int:
        with self._lock:
            return self._config_state.snapshot().offset

    # ================================================================================ member callbacks

    def static_assignment(self, worker_id: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...], str]:
        """A worker's static connectors and tasks and where they come from: an override written over
        REST wins while it exists; otherwise this worker's own properties (other workers' properties
        are only known from their metadata, which ``GET /workers`` shows)."""
        worker_id = worker_id or self.worker_id
        override = self.snapshot().static_overrides.get(worker_id)
        if override is not None:
            return override.connectors, override.tasks, "override"
        if worker_id == self.worker_id:
            return tuple(self.config.static_connectors), tuple(self.config.static_tasks), "properties"
        return (), (), "properties"

    def _metadata(self) -> WorkerState:
        connectors, tasks, _source = self.static_assignment()
        static_tasks = []
        for text in tasks:
            try:
                static_tasks.append(TaskId.parse(text))
            except ValueError:
                log.warning("ignoring a malformed static task id", task=text)
        with self._lock:
            return WorkerState(
                url=self.url,
                config_offset=self._config_state.snapshot().offset,
                allocation=self.herder.current_allocation(),
                leaving=self.herder.leaving,
                worker_id=self.worker_id,
                static_connectors=tuple(connectors),
                static_tasks=tuple(static_tasks),
            )

    def _assign(
        self, leader_id: str, protocol_name: str, members: Mapping[str, tuple[int, WorkerState]]
    ) -> dict[str, ConnectAssignment]:
        states = {mid: state for mid, (_v, state) in members.items()}
        max_offset = max(s.config_offset for s in states.values())
        if self._config_offset() < max_offset:
            self._require(self._config_log).read_to_end(self.config.worker_sync_timeout_ms / 1000)
        with self._lock:
            snap = self._config_state.snapshot()
        counts = snap.task_counts()
        with self._lock:
            last_generation = self.herder.group.generation
            last_protocol = self.herder.group.protocol
        generation = self._require_member().generation()[0]
        # Wall-clock time: a scheduled rebalance must mean the same instant to the next leader, which
        # reads it from the group records' timestamps.
        now_ms = int(time.time() * 1000)
        # Only a leader that completed a generation itself can tell whose work of that generation is
        # missing; a freshly started one (a whole cluster restarting) assigns everything, as Java does.
        if last_generation >= 0 and self._leader_state.previous_generation != last_generation:
            self._remember_from_records(last_generation, now_ms)
        result, self._leader_state = assignor.leader_assign(
            self._leader_state,
            selected_protocol=protocol_name,
            leader_id=leader_id,
            members=states,
            leader_config_offset=snap.offset,
            connectors=counts,
            now_ms=now_ms,
            max_delay_ms=self.config.scheduled_rebalance_max_delay_ms,
            generation=generation,
            leaving=frozenset(mid for mid, st in states.items() if st.leaving),
            last_completed_generation=last_generation if last_generation >= 0 else None,
            last_protocol=last_protocol,
        )
        self._pending_records = leader_memory.round_records(
            self.config.group_id,
            generation=generation,
            protocol_name=protocol_name,
            members=members,
            assignments=result,
            state=self._leader_state,
            configuration=self._group_configuration(),
            previous=self.group_state(),
        )
        # After KIP-415's empty downgrade round the leader itself asks for the real eager round.
        self._rejoin_after_join = self._leader_state.downgrade_round
        # Static jobs no live worker lists (KIP-987): reported UNASSIGNED, with the reason, once joined.
        self._unassigned = (self._leader_state.unassigned_connectors, self._leader_state.unassigned_tasks)
        self.log.info(
            "leader computed assignments",
            members=len(states),
            protocol=protocol_name,
            config_offset=snap.offset,
        )
        self.leader_view = LeaderView(leader_id, protocol_name, dict(members), result)
        return result

    def _remember_from_records(self, completed: int, now_ms: int) -> None:
        """A leader that did not lead the last generation rebuilds the assignor's memory from the group
        records (KIP-415's "new or lost?" question, answered by the last target assignment)."""
        records_log = self._require(self._records_log)
        if not records_log.read_to_end(max(1.0, self.config.worker_sync_timeout_ms / 1000)):
            self.log.warning("could not read the group records to their end; assigning without them")
            return
        remembered = leader_memory.remember(
            self.group_state(),
            completed=completed,
            now_ms=now_ms,
            previous_version=self._leader_state.previous_version,
        )
        if remembered is None:
            return
        self._leader_state = remembered
        self.log.info(
            "leader remembered the previous assignment from the group records",
            completed_generation=completed,
            connectors=len(remembered.previous_connectors),
            tasks=len(remembered.previous_tasks),
            scheduled_delay_ms=remembered.delay_ms,
        )

    def _group_configuration(self) -> list[tuple[str, str]]:
        cfg = self.config
        return [
            ("connect.protocol", cfg.connect_protocol),
            ("scheduled.rebalance.max.delay.ms", str(cfg.scheduled_rebalance_max_delay_ms)),
            ("session.timeout.ms", str(cfg.session_timeout_ms)),
            ("heartbeat.interval.ms", str(cfg.heartbeat_interval_ms)),
            ("rebalance.timeout.ms", str(cfg.rebalance_timeout_ms)),
        ]

    # ======================================================================================= statuses

    def _report_unassigned(self, generation: int) -> None:
        connectors, tasks = self._unassigned
        self._unassigned = (frozenset(), frozenset())
        reason = assignor.STATIC_UNASSIGNED_REASON
        for name in sorted(connectors):
            self._put_status(
                status_log.ConnectorStatus(
                    name, status_log.State.UNASSIGNED, reason, self.worker_id, generation
                )
            )
        for task in sorted(tasks):
            self._put_status(
                status_log.TaskStatus(task, status_log.State.UNASSIGNED, reason, self.worker_id, generation)
            )

    def _put_status(self, status: status_log.ConnectorStatus | status_log.TaskStatus) -> None:
        key, value = status_log.encode(status)
        try:
            self._require(self._status_log).send(key, value)
        except KafkaLogError as exc:
            log.warning("could not write a status record", error=str(exc))

    # ================================================================================== session key

    def _ensure_session_key(self) -> None:
        with self._lock:
            current = self._config_state.snapshot().session_key
        ttl = self.config.inter_worker_key_ttl_ms
        now_ms = int(time.time() * 1000)
        if current is not None and current.creation_timestamp + ttl > now_ms:
            return
        size = (self.config.inter_worker_key_size or 256) // 8
        record = config_log.SessionKeyRecord(
            key=base64.b64encode(secrets.token_bytes(size)).decode(),
            algorithm=self.config.inter_worker_key_generation_algorithm,
            creation_timestamp=now_ms,
        )
        key, value = config_log.encode(record)
        self._require(self._config_log).send(key, value)
        log.info("leader wrote a new session key")

    def sign(self, body: bytes) -> dict[str, str]:
        with self._lock:
            session = self._config_state.snapshot().session_key
        if session is None:
            return {}
        digest = hmac.new(base64.b64decode(session.key), body, hashlib.sha256).digest()
        return {SIGNATURE_HEADER: base64.b64encode(digest).decode(), SIGNATURE_ALGORITHM_HEADER: "HmacSHA256"}

    def verify(self, body: bytes, headers: Mapping[str, str]) -> None:
        """Internal requests under ``sessioned`` must carry a signature made with the current session key."""
        group_protocol = self.herder.group.protocol
        if group_protocol is None or protocol.version_for_protocol(group_protocol) < 2:
            return
        signature = headers.get(SIGNATURE_HEADER.lower()) or headers.get(SIGNATURE_HEADER)
        if not signature:
            raise BadRequestError("Internal request missing required signature")
        expected = self.sign(body).get(SIGNATURE_HEADER)
        if expected is None or not hmac.compare_digest(expected, signature):
            raise ForbiddenError("Internal request contained invalid signature.")

    # ==================================================================================== REST facade

    #: A herder loop that has not come round for this long is reported unhealthy (Java waits 10 s for
    #: a no-op herder request; our loop may block a little longer inside a join or a config catch-up).
    UNHEALTHY_AFTER_S = 15.0

    def health(self) -> tuple[int, dict[str, str]]:
        """KIP-1017's ``GET /health``: 503 while starting, 200 once joined, 500 when the loop is stuck."""
        if self.startup_error is not None:
            return 500, {"status": "unhealthy", "message": f"Worker failed to start: {self.startup_error}"}
        if not self.started.is_set():
            return 503, {"status": "starting", "message": "Worker is still starting up."}
        stalled = time.monotonic() - self.last_tick
        if stalled > self.UNHEALTHY_AFTER_S and not self._stopping.is_set():
            return 500, {
                "status": "unhealthy",
                "message": f"Worker's herder loop has not completed a tick in {stalled:.0f} s.",
            }
        return 200, {
            "status": "healthy",
            "message": "Worker has completed startup and is ready to handle requests.",
        }

    def snapshot(self) -> ClusterConfigSnapshot:
        with self._lock:
            return self._config_state.snapshot()

    def status_state(self) -> status_log.StatusState:
        with self._lock:
            return self._status_state

    def _still_member(self) -> bool:
        member = self._member
        return member is not None and member.generation()[0] >= 0

    def require_leader(self, settle_timeout_s: float = 30.0, while_rebalancing: bool = False) -> None:
        """Writes need a settled group: wait out a rebalance in progress (as Java's herder queues the
        request until its next tick), then either proceed as leader or name the leader to forward to.

        ``while_rebalancing``: a connector config may be written by the leader of the last generation
        while a rebalance is under way, as long as this member is still in the group (its generation
        was not reset by a lost session). Why: creating connectors one after another otherwise costs a
        whole rebalance per connector, each waiting for the round the previous one started. Nothing is
        lost if leadership moves in that round: the config topic is the truth, the leader reads it to
        its end when it assigns, and a config read after that starts one more round, as any does.
        """
        deadline = time.monotonic() + settle_timeout_s
        while True:
            with self._lock:
                group = self.herder.group
                rebalancing = self.herder.rebalancing
                is_leader = self.herder.is_leader
                led_last = self.herder.led_last_generation
            if is_leader:
                return
            if while_rebalancing and rebalancing and led_last and self._still_member():
                return
            if not rebalancing and group.known and group.leader_url:
                raise NotLeaderError(group.leader_url)
            if time.monotonic() >= deadline:
                break
            time.sleep(0.05)
        if not group.known or not group.leader_url:
            raise RebalanceNeededError(
                "Cannot complete request momentarily due to no known leader URL, "
                "likely because a rebalance was underway."
            )
        raise RebalanceNeededError("Request cannot be completed because a rebalance is expected")

    def validate(self, config: Mapping[str, str]) -> None:
        try:
            infos = validate_connector_config(
                self.registry,
                dict(config),
                exactly_once_source_enabled=self.config.exactly_once_source_support == "enabled",
                worker_passthrough=self.config.passthrough,
                worker_security_protocol=self.config.security_protocol,
            )
        except (ConnectorConfigError, PluginError) as exc:
            # No connector.class, or one no plugin answers to: the request is at fault (400), as in Java.
            raise BadRequestError(str(exc.args[0]) if exc.args else str(exc)) from exc
        if infos.error_count:
            raise BadRequestError(infos.invalid_config_message())

    def put_connector_config(
        self, name: str, config: Mapping[str, str], allow_replace: bool, initial_state: str | None = None
    ) -> bool:
        """Create or replace a connector's config; returns True when it was created."""
        self.require_leader(while_rebalancing=True)
        exists = self.snapshot().contains(name)
        if exists and not allow_replace:
            raise AlreadyExistsError(f"Connector {name} already exists")
        full = dict(config)
        full["name"] = name
        self.validate(full)
        clog = self._require(self._config_log)
        if not exists and initial_state is not None:
            key, value = config_log.encode(
                config_log.TargetStateRecord(name, config_log.TargetState(initial_state))
            )
            clog.send(key, value)
        key, value = config_log.encode(config_log.ConnectorConfig(name, full))
        offset = clog.send(key, value)
        self._await_config(offset)
        return not exists

    def delete_connector(self, name: str) -> None:
        self.require_leader()
        if not self.snapshot().contains(name):
            raise NotFoundError(f"Connector {name} not found")
        clog = self._require(self._config_log)
        key, value = config_log.encode(config_log.ConnectorDeletion(name))
        clog.send(key, value)
        key, value = config_log.encode(config_log.TargetStateDeletion(name))
        offset = clog.send(key, value)
        self._await_config(offset)
        tombstones = [status_log.ConnectorStatusDeletion(name)] + [
            status_log.TaskStatusDeletion(t.task) for t in self.status_state().task_statuses(name)
        ]
        for record in tombstones:
            try:
                skey, svalue = status_log.encode(record)
                self._require(self._status_log).send(skey, svalue)
            except KafkaLogError as exc:
                log.warning("could not remove a status record", error=str(exc))

    def put_static_assignment(
        self, worker_id: str, connectors: tuple[str, ...], tasks: tuple[str, ...]
    ) -> None:
        """Leader only: store an operator's override; the worker rejoins with it when it reads it."""
        self.require_leader()
        key, value = config_log.encode(config_log.StaticAssignmentRecord(worker_id, connectors, tasks))
        self._await_config(self._require(self._config_log).send(key, value))

    def delete_static_assignment(self, worker_id: str) -> None:
        self.require_leader()
        key, value = config_log.encode(config_log.StaticAssignmentDeletion(worker_id))
        self._await_config(self._require(self._config_log).send(key, value))

    def write_task_configs(self, name: str, configs: list[dict[str, str]]) -> None:
        """Leader only: task records first, then the commit that makes them visible together."""
        self.require_leader()
        if not self.snapshot().contains(name):
            raise NotFoundError(f"Connector {name} not found")
        clog = self._require(self._config_log)
        for i, tc in enumerate(configs):
            key, value = config_log.encode(config_log.TaskConfig(TaskId(name, i), tc))
            clog.send(key, value)
        key, value = config_log.encode(config_log.TaskCommit(name, len(configs)))
        offset = clog.send(key, value)
        self._await_config(offset)
        log.info("task configs written", connector=name, tasks=len(configs))

    def fence_zombies(self, name: str) -> None:
        """Leader only (``PUT /connectors/{name}/fence``): fence the previous generation of an exactly-once
        source connector's tasks, then write its ``tasks-fencing-<name>`` record with the new task count.

        Serialised: two tasks of one connector may ask at once (from different workers), and a second
        round run after the first task has started would fence that task too.
        """
        from kconnect.config.worker import ExactlyOnceSourceSupport
        from kconnect.runtime.dataplane.exactly_once import zombie_ids
        from kconnect.runtime.dataplane.fencing import fence_producers

        self.require_leader()
        if self.config.exactly_once_source_support != ExactlyOnceSourceSupport.ENABLED:
            raise BadRequestError(
                "Zombie fencing needs exactly.once.source.support=enabled on the leader; it is "
                f"{self.config.exactly_once_source_support.value}"
            )
        with self._fence_lock:
            snap = self.snapshot()
            if not snap.contains(name):
                raise NotFoundError(f"Connector {name} not found")
            if not snap.is_pending_fencing(name):
                return
            previous = snap.task_count_record(name)
            ids = zombie_ids(self.config.group_id, name, previous)
            fenced = fence_producers(
                ",".join(self.config.bootstrap_servers), ids, client_settings=self.clients.internal
            )
            count = snap.task_count(name)
            key, value = config_log.encode(config_log.TaskCountRecord(name, count))
            self._await_config(self._require(self._config_log).send(key, value))
            log.info("zombie fencing done", connector=name, fenced=fenced, task_count=count)

    def ensure_fenced(self, name: str, timeout_s: float = 60.0) -> None:
        """Before an exactly-once source task starts: wait until its connector's current task configs have
        been fenced for, asking the leader (``PUT /connectors/{name}/fence``, signed) while they have not.

        Runs on the task's own thread, never the herder's: it blocks on the leader.
        """
        deadline = time.monotonic() + timeout_s
        asked = 0.0
        last_error = "no answer"
        while time.monotonic() < deadline:
            if not self.snapshot().is_pending_fencing(name):
                return
            if time.monotonic() - asked >= 5.0:
                asked = time.monotonic()
                with self._lock:
                    is_leader = self.herder.is_leader
                    leader_url = self.herder.group.leader_url
                try:
                    if is_leader:
                        self.fence_zombies(name)
                    elif leader_url and self._forwarder is not None:
                        self._forwarder("PUT", leader_url, f"/connectors/{name}/fence", b"", self.sign(b""))
                except Exception as exc:  # retried until the deadline; the last error is reported
                    last_error = str(exc)
                    log.warning("zombie fencing request failed; will retry", connector=name, error=last_error)
            time.sleep(0.2)
        raise ConnectorError(
            f"Zombie fencing for connector {name} did not complete within {timeout_s:.0f} s ({last_error}); "
            "its exactly-once source tasks cannot start before the previous generation is fenced"
        )

    def _await_config(self, offset: int, timeout_s: float = 30.0) -> None:
        """Wait until the record written at ``offset`` is in our snapshot (its offset is the next one)."""
        deadline = time.monotonic() + timeout_s
        while self._config_offset() <= offset and time.monotonic() < deadline:
            time.sleep(0.01)

    # ------------------------------------------------------ support for connector operations (operations.py)

    def append_config(self, *records: config_log.ConfigRecord) -> None:
        """Leader only: write config records in order, then wait until this worker has read them back,
        so the answer to the REST request already reflects them."""
        self.require_leader()
        clog = self._require(self._config_log)
        offset = -1
        for record in records:
            key, value = config_log.encode(record)
            offset = clog.send(key, value)
        if offset >= 0:
            self._await_config(offset)

    def write_status(self, record: status_log.StatusRecord) -> None:
        """Write one status-topic record (any worker may, as in Java)."""
        key, value = status_log.encode(record)
        self._require(self._status_log).send(key, value)

    def source_offsets(self) -> OffsetState:
        """The offsets topic read to its end: what ``GET /connectors/{name}/offsets`` answers for sources."""
        self._require(self._offset_log).read_to_end(self.config.worker_sync_timeout_ms / 1000)
        with self._lock:
            return self._offset_state

    def write_source_offsets(self, records: list[SourceOffset]) -> None:
        """Write offsets-topic records (tombstones for None offsets) and read them back."""
        olog = self._require(self._offset_log)
        for record in records:
            key, value = offset_log.encode(record)
            olog.send(key, value)
        olog.read_to_end(self.config.worker_sync_timeout_ms / 1000)

    def admin(self) -> AdminClient:
        if self._admin is None:
            raise RuntimeError("worker not started")
        return self._admin

    def owns_running_task(self, task: TaskId) -> bool:
        with self._lock:
            return task in self.herder.running_tasks

    def request_task_restart(self, task: TaskId) -> None:
        """Restart a task held here on the herder thread (stop, RESTARTING, start)."""
        self._events.put(_RestartTask(task))

    def describe_group(self) -> GroupDescription:
        return self._require_member().describe()

    def set_forwarder(self, forwarder: Callable[[str, str, str, Any, dict[str, str]], None]) -> None:
        self._forwarder = forwarder

    # ===================================================================================== shutdown

    def stop(self, graceful: bool = True) -> None:
        """Hand work over (cooperative protocols), leave the group so that others rebalance at once,
        close the logs. The hand-over is bounded by ``rebalance.timeout.ms``: past it the worker
        releases what it still holds and leaves anyway."""
        if self._stopping.is_set():
            return
        started = time.monotonic()
        if graceful and self._thread is not None and self._thread.is_alive():
            self._events.put(_BeginLeave())
            if self._ready_to_leave.wait(self.config.rebalance_timeout_ms / 1000):
                self.log.info("work handed over", seconds=round(time.monotonic() - started, 2))
            else:
                self.log.warning("hand-over did not finish in rebalance.timeout.ms; leaving anyway")
        self._stopping.set()
        if self._thread is not None:
            self._stopped.wait(30)
        with self._lock:
            actions = self.herder.on_rejoin_preparing(True, None)
        self._execute(actions)
        self.executor.close(self.config.task_shutdown_graceful_timeout_ms / 1000)
        if self._member is not None:
            self._member.leave(timeout_ms=5000)
            self._member.close()
        for klog in self._logs():
            if klog is not None:
                try:
                    klog.stop()
                except Exception as exc:  # pragma: no cover - shutting down
                    log.warning("closing an internal log failed", error=str(exc))
        self.log.info("worker stopped", seconds=round(time.monotonic() - started, 2))

    # ======================================================================================= helpers

    def _logs(self) -> list[KafkaLog]:
        return [
            klog
            for klog in (self._config_log, self._status_log, self._offset_log, self._records_log)
            if klog is not None
        ]

    def _require_member(self) -> WorkerMember:
        if self._member is None:
            raise RuntimeError("worker not started")
        return self._member

    @staticmethod
    def _require(klog: KafkaLog | None) -> KafkaLog:
        if klog is None:
            raise RuntimeError("worker not started")
        return klog


class _Context(ConnectorContext):
    def __init__(self, worker: Worker, name: str) -> None:
        self._worker = worker
        self._name = name

    def request_task_reconfiguration(self) -> None:
        self._worker._events.put(_ReconfigureRequest(self._name))

    def raise_error(self, exc: BaseException) -> None:
        self._worker._put_status(
            status_log.ConnectorStatus(
                self._name,
                status_log.State.FAILED,
                "".join(traceback.format_exception(exc)),
                self._worker.worker_id,
                self._worker.herder.group.generation,
            )
        )


def _strings(props: Properties) -> dict[str, str]:
    """Plugins see configs without nulls (Java's null config values mean "unset")."""
    return {k: v for k, v in props.items() if v is not None}


def _host_port(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.rstrip("/")
