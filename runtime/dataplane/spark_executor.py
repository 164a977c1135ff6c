"""The Spark data plane: runs a worker's tasks, sink tasks as Structured Streaming queries in one
SparkSession per worker.

Why lazily: a local SparkSession takes about 8 s to start and holds a JVM, so it is created when the
first sink task needs it (on that task's own thread, never on the herder's, which must keep heartbeating),
not at worker start; workers that only take part in the group stay light. The session uses
``spark.scheduler.mode=FAIR`` with two configured pools (``scheduler_pools``: the source hosts', and the
sinks', FAIR inside, so that no sink task's micro-batch waits behind another's). Every ``spark.*``
worker property is passed to it.

``start_task`` does only quick work on the herder's thread (instantiate the plugin task, start its
thread) and answers UNASSIGNED (PAUSED for a paused connector, FAILED with the trace for a task that
cannot even be made). The task's thread starts the plugin task and its loop; once the loop runs (a
source's poll loop, a sink's active streaming query) it tells the task listener, and the worker writes
RUNNING, as Java reports RUNNING once a task's start returned. A task that fails on its thread is
reported the same way, and the worker writes FAILED. A failing task never affects another: each has its
own thread, query and Kafka clients.

The session itself (its settings, its lazy start) is ``spark_session``; whether the master is local or a
cluster, and what follows for placement and the RPC, is ``spark_cluster``.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kconnect.config.worker import (
    ExactlyOnceSourceSupport,
    SinkTaskPlacement,
    SourceTaskPlacement,
    WorkerConfig,
)
from kconnect.runtime import logs
from kconnect.runtime.client_config import Role, task_props
from kconnect.runtime.dataplane.active_topics import ActiveTopics
from kconnect.runtime.dataplane.converters import converter_config
from kconnect.runtime.dataplane.exactly_once import ExactlyOnce, exactly_once
from kconnect.runtime.dataplane.executor import TaskCounters, TaskListener, TaskState
from kconnect.runtime.dataplane.producer_pool import ProducerPool
from kconnect.runtime.dataplane.sink_batch import SinkPlan, sink_plan
from kconnect.runtime.dataplane.sink_loop import (
    QUERY_RECORDS_PER_S,
    REVIEW_S,
    WorkerSinkTaskRunner,
    sink_placement,
)
from kconnect.runtime.dataplane.sink_reader import SinkReaders
from kconnect.runtime.dataplane.sink_runner import SinkTaskRunner
from kconnect.runtime.dataplane.source_hosts import SourceHosts, application_slots
from kconnect.runtime.dataplane.source_runner import SourceTaskRunner
from kconnect.runtime.dataplane.spark_cluster import (
    channel_hosts,
    is_local_master,
    source_placement,
    unprotected_spark_rpc,
)
from kconnect.runtime.dataplane.spark_session import (
    SparkSessionHolder,
    python_workers_executable,
    spark_settings,
)
from kconnect.runtime.dataplane.spark_source import SourceJob, SparkSourceRunner, connection_settings
from kconnect.runtime.dataplane.task_channel import ChannelAddress, ChannelServer
from kconnect.runtime.dataplane.task_runner import (
    TaskRunner,
    client_settings,
    instantiate_task,
    plugin_version,
)
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import ConnectorError, SinkTask, SourceTask
from kconnect.runtime.plugins.override_policy import ConnectorKind, OverridePolicy, refused_overrides
from kconnect.runtime.plugins.plugin_calls import PluginCalls
from kconnect.runtime.plugins.plugin_metrics import PluginMetricsRegistry
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.storage.offset_log import OffsetState, SourceOffset
from kconnect.runtime.storage.status_log import TopicStatus

#: The settings and placement helpers that lived here before their modules were split off, still
#: importable from here.
__all__ = [
    "SparkExecutor",
    "SparkSessionHolder",
    "python_workers_executable",
    "source_placement",
    "spark_settings",
    "unprotected_spark_rpc",
]

log = logs.get(__name__)


#: The driver JVM's default options (``spark.driver.defaultJavaOptions``; a worker's ``spark.*`` keys
#: override it, and ``spark.driver.extraJavaOptions`` come after it): the client compiler (C1) alone and


@dataclass
class _Preparation:
    """One learner's preparation (``SparkExecutor.prepare_task``): its runner once made and warmed."""

    attempt: int
    config: dict[str, str]
    runner: TaskRunner | None = None
    version: str | None = None


def _state_of(runner: TaskRunner, version: str | None) -> TaskState:
    """A runner's state as a status to write, the trace with FAILED only (read after the state, since a
    runner's failure is set once, on its own thread, and never cleared)."""
    state = runner.state()
    return TaskState(state, runner.failed if state == "FAILED" else None, version)


class SparkExecutor:
    """The ``Executor`` that runs tasks (see the module docstring)."""

    def __init__(
        self,
        config: WorkerConfig,
        registry: PluginRegistry,
        read_offsets: Callable[[], OffsetState],
        write_offsets: Callable[[list[SourceOffset]], None],
        task_count: Callable[[str], int] | None = None,
        sync_offsets: Callable[[], OffsetState] | None = None,
        fence: Callable[[str], None] | None = None,
        topic_status: tuple[Callable[[str, str], bool], Callable[[TopicStatus], None]] | None = None,
        plugin_metrics: PluginMetricsRegistry | None = None,
        plugin_calls: PluginCalls | None = None,
    ) -> None:
        self.config = config
        #: Where tasks' plugin calls are bounded by ``task.method.timeout.ms`` (the worker's watchdog).
        self.plugin_calls = plugin_calls or PluginCalls()
        #: The worker's KIP-877 registry, where tasks and their converters register their own metrics.
        self.plugin_metrics = plugin_metrics
        #: KIP-558: whether the status topic has a connector's topic record, and how to write one (None:
        #: ``topic.tracking.enable=false``).
        self._topic_status = topic_status
        #: Waits until a connector's task generation is fenced (zombie fencing, exactly-once sources).
        self._fence = fence
        #: The offsets topic read to its end (an exactly-once task reads it after fencing, before start).
        self._sync_offsets = sync_offsets
        #: How many tasks a connector has now (the config topic's task commit); a sink task reads its
        #: share of the partitions, so it must know how many shares there are.
        self._task_count = task_count
        self.registry = registry
        self._read_offsets = read_offsets
        self._write_offsets = write_offsets
        settings = spark_settings(config)
        self.spark = SparkSessionHolder(settings)
        #: Where source tasks run as Spark jobs report to: its TLS key is made now, it listens from the
        #: first such task on.
        self.channel = ChannelServer(*channel_hosts(settings))
        #: The long-running Spark jobs that run executor-placed source tasks, many per job (issue 32).
        self.source_hosts = SourceHosts(
            self.spark.get,
            self.channel,
            lambda: application_slots(settings, int(self.spark.get().sparkContext.defaultParallelism)),
            logging.getLevelName(logging.getLogger(logs.ROOT_NAMESPACE).getEffectiveLevel()),
        )
        unprotected = unprotected_spark_rpc(settings)
        if unprotected:
            log.warning(
                "spark.master is a cluster master and Spark's RPC is not both authenticated and encrypted: "
                "the jobs of executor-run tasks (their channel secret, their Kafka client settings) cross "
                "it readable; set spark.authenticate=true, spark.authenticate.secret and "
                "spark.network.crypto.enabled=true on the worker and the cluster",
                spark_master=settings.get("spark.master"),
                not_enabled=unprotected,
            )
        self._lock = threading.Lock()
        #: The producers the driver-run, non-transactional source tasks share, one per distinct settings:
        #: a producer per task would hit the process's ~1,000 client limit (``producer_pool``).
        self._producers = ProducerPool()
        #: The shared consumers of worker-placed sink tasks (``sink_reader``).
        self._readers = SinkReaders()
        self._runners: dict[TaskId, TaskRunner] = {}
        #: Learners' preparations (``TaskPreparer``): task -> the latest, held until started or discarded;
        #: and per task the highest attempt discarded, so that a preparation discarded before its thread
        #: began never begins.
        self._prepared: dict[TaskId, _Preparation] = {}
        self._discarded: dict[TaskId, int] = {}
        #: The plugin version each held task runs (KIP-891), for the statuses its transitions report.
        self._versions: dict[TaskId, str | None] = {}
        self._listener: TaskListener | None = None
        #: The review of consumer-loop sinks' rates on a cluster master (started with the first such task).
        self._review: threading.Thread | None = None
        self._closing = threading.Event()
        self.starts: Counter[TaskId] = Counter()
        self.stops: Counter[TaskId] = Counter()
        self._worker_converters = {
            "key.converter": config.key_converter,
            "value.converter": config.value_converter,
            **{
                k: v
                for k, v in config.passthrough.items()
                if k.startswith(("key.converter.", "value.converter."))
            },
        }

    # ------------------------------------------------------------------------- Executor protocol

    def set_listener(self, listener: TaskListener) -> None:
        """Where to report a task whose loop got running, or that failed, on its own thread after
        ``start_task`` answered: the worker sets it to write the status, which only the worker can write."""
        self._listener = listener

    def _failed(self, task: TaskId, trace: str) -> None:
        listener = self._listener
        if listener is not None:
            listener.failed(task, trace)

    def _loop_began(self, task: TaskId) -> None:
        """A runner's loop runs: tell the worker, unless the task was stopped meanwhile (the worker asks
        ``task_state`` before it writes anything, so a runner replaced since cannot report the new one's
        state wrongly either)."""
        with self._lock:
            held = task in self._runners
        listener = self._listener
        if held and listener is not None:
            listener.running(task)

    def start_task(self, task: TaskId, config: Mapping[str, str], target_state: str) -> TaskState:
        """Instantiate the plugin task on the herder's thread and start its runner's thread, which starts
        it; answer UNASSIGNED (RUNNING comes from that thread once its loop runs), PAUSED, or FAILED with
        the trace for a task that cannot be made.

        A task already held here is stopped first: a restart without a stop must never run one task twice.
        The runner is held before its thread starts, so that the thread's first report finds it.
        """
        with self._lock:
            self.starts[task] += 1
            previous = self._runners.pop(task, None)
        if previous is not None:  # a restart without a stop: never run one task twice
            previous.stop(self.config.task_shutdown_graceful_timeout_ms / 1000)
        try:
            runner = self._made_runner(task, config)
        except Exception:
            trace = traceback.format_exc()
            log.error("task failed to start", task=str(task), trace=trace)
            return TaskState("FAILED", trace)
        return self._hold_and_start(task, runner, plugin_version(self.registry, config), target_state)

    def _made_runner(
        self, task: TaskId, config: Mapping[str, str], sink_rate: float | None = None
    ) -> TaskRunner:
        """The task's runner, its plugin calls bounded and its topics tracked."""
        runner = self._runner(task, config, sink_rate)
        runner.bound_calls(self.plugin_calls, self.config.task_method_timeout_ms / 1000)
        if self._topic_status is not None:
            runner.active_topics = ActiveTopics(task, *self._topic_status)
        return runner

    def _hold_and_start(
        self, task: TaskId, runner: TaskRunner, version: str | None, target_state: str
    ) -> TaskState:
        """Hold ``runner`` as ``task``'s, then start its thread (a cold start's and an activation's end)."""
        paused = target_state != "STARTED"
        with self._lock:
            self._runners[task] = runner
            self._versions[task] = version
        try:
            runner.start(paused)
        except Exception:  # no thread could be started for it
            trace = traceback.format_exc()
            log.error("task failed to start", task=str(task), trace=trace)
            with self._lock:
                if self._runners.get(task) is runner:
                    del self._runners[task]
                    self._versions.pop(task, None)
            runner.close_plugin_metrics()
            return TaskState("FAILED", trace)
        return _state_of(runner, version)

    # ------------------------------------------------------------------------- TaskPreparer protocol

    def prepare_task(self, task: TaskId, config: Mapping[str, str], attempt: int) -> bool:
        """Make the task's runner and warm it up (``TaskRunner.prepare``: its clients connected, the
        SparkSession up where it needs one), on the caller's thread; hold it for :meth:`start_prepared`.
        Nothing of the task runs: its thread is not started and the plugin task's ``start`` not called.

        False when this attempt was discarded before or while it was prepared (whatever it made is
        released); raises when the preparation fails.
        """
        entry = _Preparation(attempt, dict(config))
        with self._lock:
            if attempt <= self._discarded.get(task, 0):
                return False  # discarded before its thread got here
            replaced = self._prepared.get(task)
            self._prepared[task] = entry
        if replaced is not None and replaced.runner is not None:
            replaced.runner.release_prepared()
        runner: TaskRunner | None = None
        try:
            runner = self._made_runner(task, config)
            runner.prepare()
        except BaseException:
            if runner is not None:
                runner.release_prepared()
            with self._lock:
                if self._prepared.get(task) is entry:
                    del self._prepared[task]
            raise
        with self._lock:
            current = self._prepared.get(task) is entry
            if current:
                entry.runner = runner
                entry.version = plugin_version(self.registry, config)
        if not current:
            runner.release_prepared()
            log.info("task preparation discarded while it ran", task=str(task), attempt=attempt)
        return current

    def start_prepared(
        self, task: TaskId, attempt: int, config: Mapping[str, str], target_state: str
    ) -> TaskState | None:
        """Start the runner preparation ``attempt`` made, as :meth:`start_task` starts a new one (its
        thread starts the plugin task; RUNNING comes from there); None when no ready preparation of this
        attempt and config is held, after releasing any other preparation of the task."""
        previous: TaskRunner | None = None
        with self._lock:
            entry = self._prepared.pop(task, None)
            usable = (
                entry is not None
                and entry.runner is not None
                and entry.attempt == attempt
                and entry.config == dict(config)
            )
            if entry is not None and entry.runner is None:
                self._prepared[task] = entry  # still being prepared: discard_prepared releases it
            if usable:
                self.starts[task] += 1
                previous = self._runners.pop(task, None)
        if not usable:
            if entry is not None and entry.runner is not None:
                entry.runner.release_prepared()
            return None
        assert entry is not None and entry.runner is not None
        if previous is not None:  # never run one task twice
            previous.stop(self.config.task_shutdown_graceful_timeout_ms / 1000)
        runner = entry.runner
        runner.handed_over = True
        log.info("prepared task started", task=str(task), attempt=attempt)
        return self._hold_and_start(task, runner, entry.version, target_state)

    def discard_prepared(self, task: TaskId, attempt: int) -> None:
        """Release preparation ``attempt`` of ``task`` if held; one still being prepared is released by
        its own thread when it finishes, and one not begun yet never begins."""
        with self._lock:
            self._discarded[task] = max(attempt, self._discarded.get(task, 0))
            entry = self._prepared.get(task)
            if entry is None or entry.attempt > attempt:
                return
            del self._prepared[task]
        if entry.runner is not None:
            entry.runner.release_prepared()
            log.info("task preparation discarded", task=str(task), attempt=attempt)

    def prepared(self) -> set[TaskId]:
        """The tasks whose preparation is held ready here (none of them runs)."""
        with self._lock:
            return {task for task, entry in self._prepared.items() if entry.runner is not None}

    def _client_settings(self, kind: Role, config: Mapping[str, str]) -> dict[str, str]:
        return client_settings(kind, self.config.security_protocol, self.config.passthrough, config)

    def _runner(
        self, task_id: TaskId, config: Mapping[str, str], sink_rate: float | None = None
    ) -> TaskRunner:
        """The task's runner; ``sink_rate``: a consumer-loop sink's measured records per second, when the
        review (:meth:`_review_sinks`) makes it again."""
        task = instantiate_task(self.registry, config)
        # Checked again where the clients are made, as Java's Worker does: the worker's policy may have
        # changed since the config was validated (a restart with a stricter one).
        kind: ConnectorKind = "sink" if isinstance(task, SinkTask) else "source"
        refused = refused_overrides(OverridePolicy.of_worker(self.config), kind, config)
        if refused:
            raise ConnectorError(
                "Client Config Overrides not allowed: " + "; ".join(f"{key}: {why}" for key, why in refused)
            )
        bootstrap = ",".join(self.config.bootstrap_servers)
        converters = converter_config(self._worker_converters, config)
        if isinstance(task, SinkTask):
            count = self._task_count(task_id.connector) if self._task_count is not None else 0
            if count <= 0:
                count = int(config.get("tasks.max", "1"))
            plan = sink_plan(converters, config, task_id.connector, task_id.task)
            on_worker = self._sink_placement(task_id, task, plan, sink_rate) == SinkTaskPlacement.WORKER
            extra: dict[str, Any] = (
                {"readers": self._readers, "stall_timeout_s": self.config.sink_task_stall_timeout_ms / 1000}
                if on_worker
                else {}
            )
            runner_class = WorkerSinkTaskRunner if on_worker else SinkTaskRunner
            return runner_class(
                task_id,
                task,
                config,
                self._failed,
                spark=self.spark.get,
                task_count=count,
                bootstrap=bootstrap,
                converters=converters,
                consumer_settings=self._client_settings("consumer", config),
                consumer_props=task_props("consumer", self.config.passthrough, config),
                producer_settings=self._client_settings("producer", config),
                admin_settings=self._client_settings("admin", config),
                plugin_metrics=self.plugin_metrics,
                on_running=self._loop_began,
                plan=plan,
                **extra,
            )
        if isinstance(task, SourceTask):
            eos = None
            if self.config.exactly_once_source_support == ExactlyOnceSourceSupport.ENABLED:
                eos = exactly_once(
                    self.config.group_id,
                    task_id.connector,
                    task_id.task,
                    config,
                    self.config.offset_flush_interval_ms,
                    self.config.offset_storage_topic,
                )
            producer = self._client_settings("producer", config)
            if self._on_executor(task_id, config):
                return SparkSourceRunner(
                    task_id,
                    task,
                    config,
                    self._failed,
                    job=self._source_job(task_id, config, converters, producer, eos),
                    channel=self.channel,
                    spark=self.spark.get,
                    hosts=self.source_hosts,
                    fence=self._fence if eos is not None else None,
                    plugin_metrics=self.plugin_metrics,
                    on_running=self._loop_began,
                )
            return SourceTaskRunner(
                task_id,
                task,
                config,
                self._failed,
                bootstrap=bootstrap,
                converters=converters,
                producer_settings=producer,
                read_offsets=self._read_offsets,
                write_offsets=self._write_offsets,
                flush_interval_ms=self.config.offset_flush_interval_ms,
                flush_timeout_ms=self.config.offset_flush_timeout_ms,
                exactly_once=eos,
                sync_offsets=self._sync_offsets,
                fence=self._fence,
                spark=self.spark.get,
                plugin_metrics=self.plugin_metrics,
                on_running=self._loop_began,
                producers=self._producers if eos is None else None,
            )
        raise ConnectorError(f"{type(task).__name__} is neither a SourceTask nor a SinkTask")

    def _sink_placement(
        self, task_id: TaskId, task: SinkTask, plan: SinkPlan, rate: float | None = None
    ) -> SinkTaskPlacement:
        """A sink task's placement (``sink.task.placement``, see ``sink_loop``)."""
        local = is_local_master(self.config.spark_master)
        placement, reason = sink_placement(self.config.sink_task_placement, local, task, plan, rate)
        if placement == SinkTaskPlacement.WORKER and not local:
            self._start_review()
        say = log.info if self.config.sink_task_placement not in (placement, "auto") else log.debug
        say("sink task placement", task=str(task_id), placement=placement.value, reason=reason)
        return placement

    def _start_review(self) -> None:
        """Start the review of consumer-loop sinks' rates, once (a cluster master's ``auto``)."""
        with self._lock:
            if self._review is not None or self.config.sink_task_placement != SinkTaskPlacement.AUTO:
                return
            self._review = threading.Thread(target=self._review_sinks, name="sink-review", daemon=True)
        self._review.start()

    def _review_sinks(self) -> None:
        """Every ``REVIEW_S``: a consumer-loop sink task whose records came at ``QUERY_RECORDS_PER_S`` or
        more since the last review is made again as a query of its own (``sink_loop.sink_placement``)."""
        marks: dict[TaskId, tuple[TaskRunner, float, int]] = {}
        while not self._closing.wait(REVIEW_S):
            now = time.monotonic()
            with self._lock:
                loops = {t: r for t, r in self._runners.items() if isinstance(r, WorkerSinkTaskRunner)}
            for task, runner in loops.items():
                mark = marks.get(task)
                marks[task] = (runner, now, runner.counters.records)
                if mark is None or mark[0] is not runner or runner.failed is not None:
                    continue
                rate = (runner.counters.records - mark[2]) / max(1e-3, now - mark[1])
                if rate >= QUERY_RECORDS_PER_S:
                    self._replace_loop(task, runner, rate)
            for task in set(marks) - set(loops):
                del marks[task]

    def _replace_loop(self, task: TaskId, loop: TaskRunner, rate: float) -> None:
        """Stop a busy consumer-loop sink task (its offsets committed) and start it again as a query, unless
        the herder stopped or replaced it meanwhile."""
        try:
            runner = self._made_runner(task, loop.config, sink_rate=rate)
        except Exception as exc:
            log.warning("a busy sink task could not be made a query", task=str(task), error=str(exc))
            return
        if runner.placement == loop.placement:
            runner.release_prepared()
            return
        log.info(
            "sink task's records are many: it becomes a query", task=str(task), records_per_s=round(rate)
        )
        loop.stop(self.config.task_shutdown_graceful_timeout_ms / 1000)
        with self._lock:
            current = self._runners.get(task) is loop
            version = self._versions.get(task)
            if current:
                del self._runners[task]
        if not current:
            runner.release_prepared()
            return
        self._hold_and_start(task, runner, version, "PAUSED" if loop.state() == "PAUSED" else "STARTED")

    def _on_executor(self, task_id: TaskId, config: Mapping[str, str]) -> bool:
        configured = self.config.source_task_placement
        placement, reason = source_placement(configured, self.config.spark_master, config)
        # Said out loud only where the worker's own setting is overridden; auto's choice at debug level.
        say = log.warning if configured == SourceTaskPlacement.EXECUTOR != placement else log.debug
        say("source task placement", task=str(task_id), placement=placement.value, reason=reason)
        return placement == SourceTaskPlacement.EXECUTOR

    def _source_job(
        self,
        task_id: TaskId,
        config: Mapping[str, str],
        converters: Mapping[str, str],
        producer: Mapping[str, str],
        eos: ExactlyOnce | None,
    ) -> Callable[[ChannelAddress], SourceJob]:
        """The task's job given its channel address (the runner registers with the channel when its
        thread starts, and each start gets a fresh token)."""
        cfg = self.config
        make = functools.partial(
            SourceJob,
            connector=task_id.connector,
            task=task_id.task,
            config=dict(config),
            bootstrap=",".join(cfg.bootstrap_servers),
            converters=dict(converters),
            producer_settings=dict(producer),
            offsets_settings=connection_settings(producer),
            offsets_topic=cfg.offset_storage_topic,
            flush_interval_ms=cfg.offset_flush_interval_ms,
            flush_timeout_ms=cfg.offset_flush_timeout_ms,
            sync_timeout_ms=cfg.worker_sync_timeout_ms,
            plugin_path=tuple(cfg.plugin_path),
            file_connectors=cfg.file_connectors_enable,
            log_level=logging.getLevelName(logging.getLogger(logs.ROOT_NAMESPACE).getEffectiveLevel()),
            exactly_once=eos,
        )
        return lambda address: make(channel=address)

    def stop_task(self, task: TaskId, timeout_s: float) -> None:
        """Stop and forget ``task``; a runner still running after ``timeout_s`` is abandoned with a
        warning, as Java gives up on a task past ``task.shutdown.graceful.timeout.ms``, so that one stuck
        task cannot stall a rebalance."""
        with self._lock:
            runner = self._runners.pop(task, None)
            if runner is not None:
                self.stops[task] += 1
        if runner is not None and not runner.stop(timeout_s):
            log.warning(
                "task did not stop within task.shutdown.graceful.timeout.ms; abandoning its thread",
                task=str(task),
                timeout_s=timeout_s,
            )

    def transition_task(self, task: TaskId, target_state: str) -> TaskState:
        """Pause or resume a held task in place, keeping its thread, query and position.

        Answers UNASSIGNED for a task not held here, FAILED with the trace for one that already failed,
        and for a resumed task RUNNING only if its loop ever ran (UNASSIGNED until it does: its thread
        reports RUNNING then), so the status written is what the task is, not what it was asked to be.
        """
        with self._lock:
            runner = self._runners.get(task)
        if runner is None:
            return TaskState("UNASSIGNED", None)
        if runner.failed is not None:
            return TaskState("FAILED", runner.failed)
        runner.set_paused(target_state != "STARTED")
        return _state_of(runner, self._versions.get(task))

    def task_state(self, task: TaskId) -> TaskState | None:
        """What a held runner is now (see ``TaskRunner.state``), None for a task not held here."""
        with self._lock:
            runner = self._runners.get(task)
            version = self._versions.get(task)
        if runner is None:
            return None
        return _state_of(runner, version)

    def held(self) -> set[TaskId]:
        """The tasks whose runners are held here: started and not yet stopped."""
        with self._lock:
            return set(self._runners)

    def counters(self) -> dict[str, int]:
        """Task starts and stops since this worker started, summed over tasks; ``GET /workers`` shows them
        so that what a rebalance cost in restarts is measured, not inferred."""
        with self._lock:
            return {"task_starts": sum(self.starts.values()), "task_stops": sum(self.stops.values())}

    def task_figures(self) -> Mapping[TaskId, TaskCounters]:
        """Each held runner's counters, for the worker's per-task metrics; a stopped task drops out, as
        Java removes a task's metrics when the task stops."""
        with self._lock:
            runners = dict(self._runners)
        return {
            task: TaskCounters(
                "source" if isinstance(r, SourceTaskRunner) else "sink",
                r.counters.records,
                r.counters.offset_commits,
                r.counters.offset_commit_ms_total,
                r.placement,
                r.reading if isinstance(r, WorkerSinkTaskRunner) else None,
            )
            for task, r in runners.items()
        }

    def close(self, timeout_s: float) -> None:
        """Stop every held task, in a stable order, and release every preparation, then the SparkSession,
        which goes last because the sink tasks' queries run in it."""
        self._closing.set()
        for task in sorted(self.held()):
            self.stop_task(task, timeout_s)
        with self._lock:
            preparations = list(self._prepared.items())
        for task, entry in preparations:
            self.discard_prepared(task, entry.attempt)
        self.source_hosts.close()
        self.channel.close()
        self.spark.stop()
