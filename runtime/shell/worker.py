"""The worker process: the imperative shell around the herder, and the assembler of its parts.

It owns the threads and the sockets: the internal topics (``stores``, each log consumed on its own
thread), the group member (its own IO thread), the herder thread that feeds events to the herder and
carries out its actions, and the executor that runs tasks. The parts it assembles, each in a module of its
own: ``stores`` (internal topics), ``leader`` (the leader's round and group records), ``connectors``
(connector lifecycle), ``writes`` (the cluster write API; only the leader writes the config topic, a
follower answers ``NotLeaderError`` and the REST layer forwards), ``session_keys`` (KIP-507) and ``view``
(the read-only views REST reads). Decisions are the herder's (``runtime/group/herder.py``).

The worker's own behaviour lives in its two bases, one concept each: ``herder_loop`` (the herder thread:
events in, membership kept, actions out) and ``actions`` (each action carried out on the part it names).
This module assembles the parts, starts and stops them, and answers REST's reads.
"""

from __future__ import annotations

import queue
import threading
import time

from confluent_kafka.admin import AdminClient

from kconnect.config.config_providers import worker_config_providers
from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.client_config import WorkerClients
from kconnect.runtime.dataplane.executor import Executor, TaskListener, TaskPreparer
from kconnect.runtime.group import group_records
from kconnect.runtime.group import herder as hd
from kconnect.runtime.group.handover import WarmupSettings
from kconnect.runtime.group.herder import Herder
from kconnect.runtime.group.member import GroupDescription, MemberError, WorkerMember
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.plugin_calls import PluginCalls
from kconnect.runtime.plugins.plugin_metrics import PluginMetricsRegistry
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell import metrics, session_keys, view
from kconnect.runtime.shell.auto_restarts import AutoRestarts, worker_policy
from kconnect.runtime.shell.connectors import (
    Connectors,
)
from kconnect.runtime.shell.herder_loop import (
    BEGIN_LEAVE,
    CONFIG_MOVED,
    GROUP_MOVED,
    HerderLoop,
    ReconfigureRequest,
    RestartTask,
    now_ms,
)
from kconnect.runtime.shell.leader import LeaderRound, group_configuration, new_member, reconciles
from kconnect.runtime.shell.stores import InternalTopics, connect, startup_timeout_s
from kconnect.runtime.shell.stores import StartupError as StartupError  # raised here; the CLI imports it
from kconnect.runtime.shell.tasks import Tasks
from kconnect.runtime.shell.view import WorkerMetrics, WorkerView
from kconnect.runtime.shell.writes import ClusterWrites, Forwarder

__all__ = ["StartupError", "Worker"]


class Worker(HerderLoop):
    """One Connect worker: joins the group, runs what the herder decides, and serves REST's calls.

    ``executor`` runs the tasks (dependency injection: tests pass one that starts no Spark); by default
    the Spark data plane (``dataplane/spark_executor.py``).
    """

    def __init__(
        self, config: WorkerConfig, registry: PluginRegistry | None = None, executor: Executor | None = None
    ) -> None:
        self.config = config
        self.url = config.rest_url
        self.worker_id = config.worker_id or _host_port(self.url)
        self.registry = registry or PluginRegistry.discover(
            config.plugin_path, file_connectors=config.file_connectors_enable
        )
        self.metrics = WorkerMetrics()
        #: KIP-877: the metrics this worker's connectors, tasks and converters register (``GET /metrics``).
        self.plugin_metrics = PluginMetricsRegistry()
        #: Plugin calls in flight and their bounds (``connector.method.timeout.ms``,
        #: ``task.method.timeout.ms``); the abandoned ones are what ``GET /health`` lists as blocked.
        self.plugin_calls = PluginCalls()
        self._lock = threading.RLock()  # guards the herder and the states folded from the internal topics
        self._events: queue.Queue[object] = queue.Queue()
        self._rejoin_at: float | None = None
        #: The group records could not be read to their end after a join (a broker fail-over outlasting
        #: ``worker.sync.timeout.ms``): reconciling waits until a later read gets there.
        self._records_behind = False
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
        self._member: WorkerMember | None = None
        self.log = logs.get("kconnect.worker", worker=self.worker_id)
        wid, lock, events = self.worker_id, self._lock, self._events
        self.stores = InternalTopics(
            config, wid, lock, lambda: events.put(CONFIG_MOVED), lambda: events.put(GROUP_MOVED)
        )
        self.herder = Herder(wid, self.stores.snapshot())
        self.herder.coordinator_settings = hd.CoordinatorSettings(
            group_id=config.group_id,
            max_delay_ms=config.scheduled_rebalance_max_delay_ms,
            rebalance_timeout_ms=config.rebalance_timeout_ms,
            configuration=tuple(group_configuration(config)),
            warmup=WarmupSettings(
                config.max_warmup_tasks,
                config.task_warmup_timeout_ms,
                config.task_shutdown_graceful_timeout_ms,
            ),
        )
        self.leader = LeaderRound(config, wid, self.stores, self.herder, lock, self._member_generation)
        self.writes = ClusterWrites(
            config, self.registry, self.stores, self.herder, lock, self._still_member, lambda: self.clients
        )
        self.writes.plugin_calls = self.plugin_calls
        #: ``config.providers`` (checked at load): resolved where connectors and tasks start, nowhere else.
        providers = worker_config_providers(config)
        self.connectors = Connectors(
            self.registry,
            self.stores,
            self.writes,
            wid,
            self.url,
            generation=lambda: self.herder.group.generation,
            request_reconfigure=lambda name: events.put(ReconfigureRequest(name)),
            stopping=self._stopping,
            plugin_metrics=self.plugin_metrics,
            config_providers=providers,
            post=events.put,
            plugin_calls=self.plugin_calls,
            method_timeout_s=config.connector_method_timeout_ms / 1000,
        )
        self.executor: Executor = executor or self._spark_executor()
        # Warm-up hand-over (issue 25): this worker learns the tasks moving to it, and says so in its
        # metadata, when the group reconciles, warm-up is on, and its executor can prepare a task.
        self.herder.learns = (
            reconciles(config) and config.max_warmup_tasks > 0 and isinstance(self.executor, TaskPreparer)
        )
        self.tasks = Tasks(config, wid, self.executor, self.stores, self.metrics, providers)
        self.session_keys = session_keys.KeyRotation(self.stores, config)
        #: Self-healing (``auto.restart.*``): told of every status this worker reports.
        self.auto_restarts = AutoRestarts(worker_policy(config), self.stores, wid)
        self.stores.on_status_put = lambda status: self.auto_restarts.observe(status, now_ms())
        self.executor.set_listener(
            TaskListener(
                failed=lambda task, trace: self.tasks.failed(task, trace, self.herder),
                running=lambda task: self.tasks.running(task, self.herder),
            )
        )
        # What REST's ConnectorOperations calls on the worker; the routes call ``writes`` and ``view()``.
        self.snapshot = self.stores.snapshot
        self.status_state = self.stores.status_state
        self.source_offsets = self.stores.source_offsets
        self.write_source_offsets = self.stores.write_source_offsets
        self.write_status = self.stores.write_status
        self.reset_active_topics = self.stores.reset_active_topics
        self.require_leader = self.writes.require_leader
        self.put_connector_config = self.writes.put_connector_config
        self.write_task_configs = self.writes.write_task_configs
        self.append_config = self.writes.append_config

    def _spark_executor(self) -> Executor:
        """The default data plane: tasks run in this worker's SparkSession (imported only when used)."""
        from kconnect.runtime.dataplane.spark_executor import SparkExecutor

        return SparkExecutor(
            self.config,
            self.registry,
            read_offsets=self.stores.offset_state,
            write_offsets=self.stores.write_source_offsets,
            task_count=lambda connector: self.stores.snapshot().task_count(connector),
            sync_offsets=self.stores.source_offsets,
            fence=self.writes.ensure_fenced,
            topic_status=(self._topic_known, self.stores.write_status)
            if self.config.topic_tracking_enable
            else None,
            plugin_metrics=self.plugin_metrics,
            plugin_calls=self.plugin_calls,
        )

    def _topic_known(self, connector: str, topic: str) -> bool:
        return self.stores.status_state().topic_status(connector, topic) is not None

    # =========================================================================================== startup

    def start(self) -> None:
        """Reach the cluster, create and verify the internal topics, read them, then join the group."""
        cfg = self.config
        self.clients, self._admin, self.kafka_cluster_id = connect(cfg, self.worker_id)
        self.stores.open(self._admin, self.clients.internal)
        self.plugin_calls.start_watchdog(self._stopping)
        with self._lock:
            self.herder.on_startup_config(self.stores.snapshot())
        self._member = new_member(cfg, self.url, self.leader, self.clients.member)
        try:
            self._member.connect(timeout_ms=int(startup_timeout_s(cfg) * 1000))
        except MemberError as exc:
            raise StartupError(str(exc)) from exc
        self._thread = threading.Thread(target=self._run, name="herder", daemon=True)
        self._thread.start()
        self.log.info("worker started", url=self.url, group=cfg.group_id, protocol=cfg.connect_protocol)

    # ====================================================================================== reads (REST)

    def view(self) -> WorkerView:
        """One consistent reading of this worker's group state: what REST reads, never the herder."""
        counters = self.executor.counters()
        with self._lock:
            return view.read(
                self.worker_id,
                self.url,
                self.herder,
                self.metrics,
                self.leader.leader_view,
                counters,
                group_records=self.stores.group_state(self.config.group_id),
                group_protocol=self.config.group_protocol,
            )

    def figures(self) -> metrics.WorkerFigures:
        """What ``GET /metrics`` reports: one consistent reading of this worker's figures."""
        running, plugins = self.executor.task_figures(), self.plugin_metrics.snapshot()
        return view.figures(
            self.view(),
            self.metrics,
            self.stores.status_state(),
            running,
            self.config.connect_protocol,
            plugins,
        )

    def group_state(self) -> group_records.GroupState | None:
        """This worker's group as the group records describe it (any worker can tell; they all read them)."""
        return self.stores.group_state(self.config.group_id)

    def health(self) -> tuple[int, dict[str, object]]:
        """KIP-1017's ``GET /health`` (``view.health``): starting, healthy, or stuck/failed; with the
        plugin calls abandoned past their bound and still not returned."""
        stalled_s = time.monotonic() - self.last_tick
        return view.health(
            self.startup_error,
            self.started.is_set(),
            stalled_s,
            self._stopping.is_set(),
            self.plugin_calls.blocked(),
            view.stalled_sink_tasks(self.executor.task_figures()),
        )

    def owns_running_task(self, task: TaskId) -> bool:
        """Whether the task runs here now (a task restart is then carried out here, not forwarded)."""
        with self._lock:
            return task in self.herder.running_tasks

    def request_task_restart(self, task: TaskId) -> None:
        """Restart a task held here on the herder thread (stop, RESTARTING, start)."""
        self._events.put(RestartTask(task))

    def describe_group(self) -> GroupDescription:
        """The group as its coordinator describes it (``GET /workers`` when the leader cannot answer)."""
        return self._require_member().describe()

    def set_forwarder(self, forwarder: Forwarder) -> None:
        """How this worker's requests reach other workers (the REST layer's HTTP client)."""
        self.writes.forwarder = forwarder

    def admin(self) -> AdminClient:
        """The worker's admin client (offsets of sink connectors' consumer groups)."""
        if self._admin is None:
            raise RuntimeError("worker not started")
        return self._admin

    # ===================================================================================== shutdown

    def stop(self, graceful: bool = True) -> None:
        """Hand work over (cooperative protocols), leave the group so that others rebalance at once,
        close the logs. The hand-over is bounded by ``rebalance.timeout.ms``: past it the worker
        releases what it still holds and leaves anyway."""
        if self._stopping.is_set():
            return
        started = time.monotonic()
        if graceful and self._thread is not None and self._thread.is_alive():
            self._events.put(BEGIN_LEAVE)
            if self._ready_to_leave.wait(self.config.rebalance_timeout_ms / 1000):
                self.log.info("work handed over", seconds=round(time.monotonic() - started, 2))
            else:
                self.log.warning("hand-over did not finish in rebalance.timeout.ms; leaving anyway")
        self._stopping.set()
        if self._thread is not None:
            self._stopped.wait(30)
        # Still a member while what it runs stops: the herder's loop no longer polls, and the member's own
        # poll timeout (rebalance.timeout.ms) would send LeaveGroup before the stops end. A leaving
        # worker's departure hands its remaining work out at once (``coordinator.departed_leaving``), so
        # LeaveGroup must come after its last stop, below.
        self._poll_member()
        self.tasks.await_releases()  # a hand-over cut short may leave background stops under way
        self._poll_member()
        with self._lock:
            actions = self.herder.on_rejoin_preparing(True, None)
        self._execute(actions)
        self._poll_member()
        self.connectors.close(self.config.task_shutdown_graceful_timeout_ms / 1000)
        self.executor.close(self.config.task_shutdown_graceful_timeout_ms / 1000)
        if self._member is not None:
            self._member.leave(timeout_ms=5000)
            self._member.close()
        self.stores.stop()
        self.log.info("worker stopped", seconds=round(time.monotonic() - started, 2))

    # ======================================================================================= helpers

    def _poll_member(self) -> None:
        """Tell the member the worker is alive (as the herder's loop does each tick) while it stops."""
        if self._member is None:
            return
        try:
            self._member.poll_heartbeat()
        except Exception as exc:  # a member already closed or never connected: nothing to keep alive
            self.log.info("could not poll the group member while stopping", error=str(exc))

    def _member_generation(self) -> int:
        return self._require_member().generation()[0]

    def _still_member(self) -> bool:
        member = self._member
        return member is not None and member.generation()[0] >= 0


def _host_port(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.rstrip("/")
