"""The worker process: the imperative shell around the herder, and the assembler of its parts.

It owns the threads and the sockets: the internal topics (``stores``, each log consumed on its own
thread), the group member (its own IO thread), the herder thread that feeds events to the herder and
carries out its actions, and the executor that runs tasks. The parts it assembles, each in a module of its
own: ``stores`` (internal topics), ``leader`` (the leader's round and group records), ``connectors``
(connector lifecycle), ``writes`` (the cluster write API; only the leader writes the config topic, a
follower answers ``NotLeaderError`` and the REST layer forwards), ``session_keys`` (KIP-507) and ``view``
(the read-only views REST reads). Decisions are the herder's (``runtime/group/herder.py``).
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from dataclasses import dataclass

from confluent_kafka.admin import AdminClient

from kconnect.config.config_providers import worker_config_providers
from kconnect.config.masking import masked_repr
from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.client_config import WorkerClients
from kconnect.runtime.dataplane.executor import Executor, TaskListener, TaskPreparer
from kconnect.runtime.group import group_records, protocol
from kconnect.runtime.group import herder as hd
from kconnect.runtime.group.handover import WarmupSettings
from kconnect.runtime.group.herder import Action, Herder
from kconnect.runtime.group.learner import ActivatePreparedTask, DiscardPreparedTask, PrepareTask
from kconnect.runtime.group.member import GroupDescription, Joined, MemberError, WorkerMember
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.password_keys import config_password_keys
from kconnect.runtime.plugins.plugin_calls import PluginCalls
from kconnect.runtime.plugins.plugin_metrics import PluginMetricsRegistry
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell import metrics, session_keys, view
from kconnect.runtime.shell.auto_restarts import AutoRestarts, worker_policy
from kconnect.runtime.shell.connectors import (
    ConnectorCallDone,
    ConnectorCallTimedOut,
    Connectors,
    ConnectorTaskConfigs,
)
from kconnect.runtime.shell.leader import LeaderRound, group_configuration, new_member, reconciles
from kconnect.runtime.shell.stores import InternalTopics, connect, startup_timeout_s
from kconnect.runtime.shell.stores import StartupError as StartupError  # raised here; the CLI imports it
from kconnect.runtime.shell.tasks import TaskPrepared, Tasks
from kconnect.runtime.shell.view import WorkerMetrics, WorkerView
from kconnect.runtime.shell.writes import ClusterWrites, Forwarder
from kconnect.runtime.storage.config_log import TargetState
from kconnect.runtime.storage.kafka_log import KafkaLogError

#: Events the herder thread handles: the config topic or the group records moved on; the worker leaves.
_CONFIG_MOVED, _GROUP_MOVED, _BEGIN_LEAVE = object(), object(), object()


@dataclass
class _ReconfigureRequest:
    connector: str


@dataclass
class _RestartTask:
    """A REST task restart that reached this worker, the task's owner; the herder thread carries it out."""

    task: TaskId


class Worker:
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
            config, wid, lock, lambda: events.put(_CONFIG_MOVED), lambda: events.put(_GROUP_MOVED)
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
            request_reconfigure=lambda name: events.put(_ReconfigureRequest(name)),
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
        self.stores.on_status_put = lambda status: self.auto_restarts.observe(status, _now_ms())
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
        if self._rejoin_at is not None and time.monotonic() >= self._rejoin_at:
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
        self._rotate_session_key()
        self._auto_restart()
        member.poll_heartbeat()
        try:
            event = self._events.get(timeout=0.1)
            self._events.put(event)  # handled by the next _drain_events
        except queue.Empty:
            pass

    def _drain_events(self) -> None:
        config_moved = group_moved = False
        reconfigure: set[str] = set()
        prepared: list[TaskPrepared] = []
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                break
            if event is _CONFIG_MOVED:
                config_moved = True
            elif event is _GROUP_MOVED:
                group_moved = True
            elif isinstance(event, _ReconfigureRequest):
                reconfigure.add(event.connector)
            elif event is _BEGIN_LEAVE:
                with self._lock:
                    actions = self.herder.begin_leave()
                self.log.info("leaving the group: handing work over first")
                self._execute(actions)
            elif isinstance(event, _RestartTask):
                with self._lock:
                    actions = self.herder.on_restart_task(event.task)
                self._execute(actions)
            elif isinstance(event, ConnectorCallDone | ConnectorTaskConfigs | ConnectorCallTimedOut):
                self._on_connector_answer(event)
            elif isinstance(event, TaskPrepared):
                prepared.append(event)
        if config_moved:
            with self._lock:
                snapshot = self.stores.snapshot()
                fresh = snapshot is not self.herder.snapshot
                actions = self.herder.on_config(snapshot, self.stores.status_state()) if fresh else []
            self._execute(actions)
        wake = self.herder.wake_at_ms
        if config_moved or group_moved or (wake is not None and _now_ms() >= wake):
            self._reconcile()
        for done in prepared:
            self._on_task_prepared(done)
        for name in sorted(reconfigure):
            self.connectors.request_task_configs(name)  # answered as a ConnectorTaskConfigs event

    def _on_connector_answer(
        self, event: ConnectorCallDone | ConnectorTaskConfigs | ConnectorCallTimedOut
    ) -> None:
        """What a connector instance's own thread answered (or the watchdog said of it), to the herder."""
        with self._lock:
            if isinstance(event, ConnectorTaskConfigs):
                actions = self.herder.on_task_configs(event.name, event.configs, event.attempt)
            elif isinstance(event, ConnectorCallTimedOut):
                actions = self.herder.on_connector_call_timed_out(
                    event.name, event.attempt, event.method, event.elapsed_s, event.stack
                )
                if event.method == "start":
                    self.metrics.connector_startup_failures += 1
            else:
                actions = self.herder.on_connector_call_done(
                    event.name, event.attempt, event.method, event.target_state, event.trace
                )
                if event.method == "start" and actions and event.target_state == TargetState.STARTED:
                    if event.trace is None:
                        self.metrics.connector_startup_successes += 1
                    else:
                        self.metrics.connector_startup_failures += 1
        self._execute(actions)

    def _reconcile(self) -> None:
        """``group.protocol=connect``: the herder coordinates (leader) and reconciles from the records."""
        if self._records_behind and not self._catch_up_group_records():
            return
        with self._lock:
            if not self.herder.group.reconciling:
                return
            actions = self.herder.on_group_records(self.stores.group_state(self.config.group_id), _now_ms())
        self._execute(actions)

    def _on_task_prepared(self, event: TaskPrepared) -> None:
        """A learner's preparation ended (on its own thread): tell the herder, which says the learner is
        ready in this member's record (from the records read to their end: a ready learner is written into
        the current record, never an older one) or releases a failed preparation."""
        if event.trace is None and self._records_behind and not self._catch_up_group_records():
            self._events.put(event)  # the next tick tries again
            return
        with self._lock:
            if event.trace is None:
                group = self.stores.group_state(self.config.group_id)
                actions = self.herder.on_task_prepared(event.task, event.attempt, group)
            else:
                actions = self.herder.on_task_preparation_failed(event.task, event.attempt)
        self._execute(actions)

    def _on_joined(self, joined: Joined) -> None:
        assignment = joined.assignment
        with self._lock:
            catch_up = self.herder.on_assignment_received(assignment, self.stores.config_offset())
        self._execute(catch_up)
        with self._lock:
            actions = self.herder.on_rebalanced(
                joined.generation, joined.member_id, joined.protocol, assignment, self.stores.status_state()
            )
            group = self.herder.group
        self.metrics.rebalance_completed(assignment.delay_ms, assignment.error == protocol.NO_ERROR)
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
        self.leader.write_group_records(joined.generation, joined.member_id, assignment)
        if assignment.reconcile:
            # A leader new to the role resumes from every record the last one wrote, and from the config as
            # read (the next drain hands the herder the newest config first, then reconciles). Should the
            # records not be readable now, the reconcile that this event starts reads them first.
            self._records_behind = True
            self._catch_up_group_records()
            self._events.put(_CONFIG_MOVED)
        self._rotate_session_key()
        self.started.set()

    def _auto_restart(self) -> None:
        """Self-healing, on every tick: restart the FAILED connectors and tasks run here whose restart is
        due (``auto_restarts``), through the herder's restart path, as a user's restart of them would."""
        with self._lock:
            connectors, tasks = set(self.herder.running_connectors), set(self.herder.running_tasks)
            snapshot = self.herder.snapshot
        for key in self.auto_restarts.step(connectors, tasks, snapshot, _now_ms()):
            with self._lock:
                if isinstance(key, str):
                    actions = self.herder.on_restart_connector(key)
                else:
                    actions = self.herder.on_restart_task(key)
            self.log.info(
                "auto restart",
                entry=str(key),
                attempts=getattr(self.auto_restarts.entry(key), "attempts", None),
            )
            self._execute(actions)

    def _rotate_session_key(self) -> None:
        """KIP-507, on every tick as Java's herder does: a leader writes a new session key when there is
        none or it expired. Not only after a round: under ``group.protocol=connect`` a stable group has
        none, and ``inter.worker.key.ttl.ms`` must still hold."""
        with self._lock:
            leader, group_protocol = self.herder.is_leader, self.herder.group.protocol
        self.session_keys.tick(leader, group_protocol)

    def _catch_up_group_records(self) -> bool:
        """Read the group records to their end before the herder acts on them; True once done.

        A failure (the records topic's leader moving after a broker died, longer than the read waits) must
        not lose the reconcile that should follow a join: the worker would sit with no work until the next
        generation. The read is retried with the next group event, which this queues.
        """
        try:
            self.stores.read_group_records_to_end()
        except KafkaLogError as exc:
            self.log.warning(
                "group records not read to their end; reconciling waits for them", error=str(exc)
            )
            time.sleep(0.5)
            self._events.put(_GROUP_MOVED)
            return False
        self._records_behind = False
        return True

    # ================================================================================= action dispatch

    def _execute(self, actions: list[Action]) -> None:
        for action in actions:
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
        self._events.put(_RestartTask(task))

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
            self._events.put(_BEGIN_LEAVE)
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
        self.connectors.close(self.config.task_shutdown_graceful_timeout_ms / 1000)
        self.executor.close(self.config.task_shutdown_graceful_timeout_ms / 1000)
        if self._member is not None:
            self._member.leave(timeout_ms=5000)
            self._member.close()
        self.stores.stop()
        self.log.info("worker stopped", seconds=round(time.monotonic() - started, 2))

    # ======================================================================================= helpers

    def _member_generation(self) -> int:
        return self._require_member().generation()[0]

    def _still_member(self) -> bool:
        member = self._member
        return member is not None and member.generation()[0] >= 0

    def _require_member(self) -> WorkerMember:
        if self._member is None:
            raise RuntimeError("worker not started")
        return self._member


def _now_ms() -> int:
    # Wall-clock time: the next leader reads a scheduled rebalance from the group records' timestamps.
    return int(time.time() * 1000)


def _host_port(url: str) -> str:
    rest = url.split("://", 1)[-1]
    return rest.rstrip("/")


def _config_owner(action: Action) -> str | None:
    """The connector whose config (or task configs) ``action`` carries; None for an action with none."""
    if isinstance(action, hd.StartConnector):
        return action.name
    if isinstance(action, hd.PublishTaskConfigs):
        return action.connector
    if isinstance(action, hd.StartTask | PrepareTask | ActivatePreparedTask):
        return action.task.connector
    return None
