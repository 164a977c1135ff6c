"""A source task run by an executor: its poll, conversion and produce run in a Python worker there.

With ``source.task.placement=executor`` (or ``auto`` and a cluster master) a source task runs on a source
host (``source_hosts``: a long-running Spark job of one Spark task running many source tasks, each on a
thread). The executor side (:func:`run_source_job`, one attempt) makes the plugin task, reads the offsets
topic, and runs the same loop as on the worker (``source_runner.SourceTaskRunner``: poll, convert, produce
with an idempotent producer, source offsets written to the offsets topic only once Kafka acknowledged every
record before them, on ``offset.flush.interval.ms``), with Kafka clients of the host's process: the task's
client settings only, the offsets topic included (:func:`connection_settings`), so that no job carries the
worker's own credentials; the offsets view and the non-transactional producers are shared by a host's
tasks with the same settings. The worker side (:class:`SparkSourceRunner`) hands the task to the hosts,
serves the task's connection (``task_channel``: RUNNING when the executor says its loop runs, FAILED with
the executor's trace, its figures, KIP-877 plugin metrics and active topics, pause and resume) and stops
it: a stop goes to the executor, where the task's ``stop()`` is called and its offsets flushed; a task
still running after ``task.shutdown.graceful.timeout.ms`` is abandoned.

Why this gives "restart elsewhere": an executor that dies takes its host's connection with it, the hosts
start its tasks again on a live host (Spark also runs the host again on another executor), and each new
attempt starts from the offsets in Kafka, as a task moved to another worker does; records produced after
the last committed offset are produced again (at-least-once, as in Connect).

With exactly-once support the worker waits for the leader's round of zombie fencing before it hands the
task to the hosts, and the executor's transactional producer (the task's stable ``transactional.id``)
fences every older instance of the task when it initializes, an attempt started again after an executor
died included. What stays on the worker (a warning says so): tasks whose connector has transforms (the
chain is a Spark plan, and an executor has no SparkSession to run one).
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from kconnect.runtime import logs
from kconnect.runtime.dataplane.active_topics import ActiveTopics
from kconnect.runtime.dataplane.exactly_once import ExactlyOnce
from kconnect.runtime.dataplane.producer_pool import ProducerPool
from kconnect.runtime.dataplane.source_runner import SourceTaskRunner
from kconnect.runtime.dataplane.task_channel import (
    ChannelAddress,
    ChannelClient,
    ChannelServer,
    Connection,
    Message,
    TaskHandler,
)
from kconnect.runtime.dataplane.task_runner import TaskRunner, instantiate_task
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import ConnectorError, SourceTask
from kconnect.runtime.plugins.plugin_metrics import GROUP, MetricName, PluginMetrics, PluginMetricsRegistry
from kconnect.runtime.storage import offset_log
from kconnect.runtime.storage.offset_log import OffsetState, SourceOffset

log = logs.get(__name__)


class Hosts(Protocol):
    """Where a runner's attempts run: the worker's source hosts (``source_hosts.SourceHosts``).

    A protocol rather than an import because the hosts' executor side runs this module's jobs
    (``run_source_job``): each module would otherwise import the other.
    """

    def run(
        self,
        address: ChannelAddress,
        job: Any,
        load: Callable[[], float],
        stop_attempt: Callable[[], None],
        stopping: threading.Event,
    ) -> list[str]:
        """Run the task whose job is ``job`` on a host until it ends; how it ended."""
        ...


#: The longest the executor side waits for its first read of the offsets topic to its end.
STARTUP_READ_S = 60.0
#: How often the executor side sends the task's figures (records, offset commits) to the worker.
FIGURES_S = 2.0


@dataclass(frozen=True)
class SourceJob:
    """Everything the executor side needs, as plain data: Spark pickles it into the job."""

    connector: str
    task: int
    config: dict[str, str]
    channel: ChannelAddress
    bootstrap: str
    converters: dict[str, str]
    producer_settings: dict[str, str]
    #: How the offsets topic is read and written: the task's own producer's identity and connection
    #: (:func:`connection_settings`), never the worker's own credentials (issue 23).
    offsets_settings: dict[str, str]
    offsets_topic: str
    flush_interval_ms: int
    flush_timeout_ms: int
    sync_timeout_ms: int
    plugin_path: tuple[str, ...]
    log_level: str
    #: The worker's ``file.connectors.enable``: the executor offers the FileStream connectors only then.
    file_connectors: bool = False
    #: Set with ``exactly.once.source.support=enabled``: records and offsets in one transaction per
    #: boundary, from the executor (the worker has already had the task generation fenced).
    exactly_once: ExactlyOnce | None = None

    @property
    def task_id(self) -> TaskId:
        return TaskId(self.connector, self.task)


#: The librdkafka settings that say who a client is and how it reaches the brokers.
_CONNECTION_KEYS = ("security.protocol", "enable.ssl.certificate.verification")
_CONNECTION_PREFIXES = ("ssl.", "sasl.")


def connection_settings(client: Mapping[str, str]) -> dict[str, str]:
    """The identity and connection part (``security.protocol``, ``ssl.*``, ``sasl.*``) of one of the task's
    clients' librdkafka settings: what the executor side reads and writes the offsets topic with.

    Why the task's and not the worker's: a job crosses Spark's RPC and is held by executors, which need
    not be trusted with the worker's own credentials (those of the config, status and offsets topics and
    the group). The task's producer is what an exactly-once task writes its offsets with anyway (inside its
    transactions, as in Java), so its principal needs the offsets topic either way. Tuning keys (``acks``,
    ``linger.ms``, compression) stay out: the offsets writer keeps its own.
    """
    return {k: v for k, v in client.items() if k in _CONNECTION_KEYS or k.startswith(_CONNECTION_PREFIXES)}


# --------------------------------------------------------------------------------------- executor side


_registries: dict[tuple[tuple[str, ...], bool], Any] = {}
_logs_configured = False
_registry_lock = threading.Lock()


def _registry(plugin_path: tuple[str, ...], file_connectors: bool) -> Any:
    """The plugins of ``plugin.path``, discovered once per Python worker process (workers are reused),
    the FileStream connectors only when the worker enabled them."""
    from kconnect.runtime.plugins.registry import PluginRegistry

    key = (plugin_path, file_connectors)
    with _registry_lock:  # a host's tasks start on threads of their own
        if key not in _registries:
            _registries[key] = PluginRegistry.discover(list(plugin_path), file_connectors=file_connectors)
        return _registries[key]


class OffsetsTopicView:
    """The offsets topic as the executor side sees it: read to its end at start, kept up to date by a
    consuming thread, and written through (each write read back, as the worker's own store does)."""

    def __init__(self, job: SourceJob) -> None:
        from kconnect.runtime.storage.kafka_log import KafkaLog, LogRecord

        self._lock = threading.Lock()
        # Folded in place, frozen when asked for: a topic of N offsets reads in O(N), not O(N²).
        self._fold = offset_log.OffsetFold()
        self._sync_s = job.sync_timeout_ms / 1000

        def on_record(record: LogRecord) -> None:
            try:
                decoded = offset_log.decode(record.key, record.value)
            except offset_log.CorruptRecord as exc:
                log.warning("skipping corrupt offset record", offset=record.offset, error=str(exc))
                return
            with self._lock:
                self._fold.add(decoded)

        self._log = KafkaLog(
            job.offsets_topic,
            job.bootstrap,
            on_record,
            client_id="connector-offsets-host",
            client_settings=job.offsets_settings,
        )
        # The first read waits as long as a worker's start-up does: a new consumer has to connect first.
        first_s = max(self._sync_s, STARTUP_READ_S)
        self._log.start(first_s)
        if not self._log.read_to_end(first_s):
            self._log.stop()
            raise ConnectorError(f"could not read the offsets topic '{job.offsets_topic}' to its end")

    def state(self) -> OffsetState:
        with self._lock:
            return self._fold.freeze()

    def sync(self) -> OffsetState:
        """The topic read to its end first (an exactly-once task, after its producer fenced older ones)."""
        if not self._log.read_to_end(self._sync_s):
            raise ConnectorError("could not read the offsets topic to its end")
        return self.state()

    def write(self, offsets: list[SourceOffset]) -> None:
        for record in offsets:
            self._log.send(*offset_log.encode(record))
        self._log.read_to_end(self._sync_s)

    def close(self) -> None:
        self._log.stop()


#: What the source tasks of one Python worker (a host) share, as a worker's driver-run tasks do: the
#: offsets topic's view, one per way of reading it, counted by its users; and the non-transactional
#: producers (``producer_pool``): a hundred tasks on a host are then one consumer and one producer, not
#: two hundred clients each with its threads.
_shared_lock = threading.Lock()
_offset_views: dict[tuple[Any, ...], tuple[OffsetsTopicView, int]] = {}
_host_producers: ProducerPool | None = None


def _offsets_key(job: SourceJob) -> tuple[Any, ...]:
    return (
        job.bootstrap,
        job.offsets_topic,
        tuple(sorted(job.offsets_settings.items())),
        job.sync_timeout_ms,
    )


def acquire_offsets(job: SourceJob) -> OffsetsTopicView:
    """The process's view of the job's offsets topic, made (and read to its end) by its first user."""
    key = _offsets_key(job)
    with _shared_lock:
        view, users = _offset_views.get(key) or (None, 0)
        if view is None:
            view = OffsetsTopicView(job)
        _offset_views[key] = (view, users + 1)
        return view


def release_offsets(job: SourceJob) -> None:
    """One user fewer; the last one closes the view."""
    key = _offsets_key(job)
    with _shared_lock:
        view, users = _offset_views.get(key) or (None, 0)
        if view is None:
            return
        if users <= 1:
            del _offset_views[key]
            view.close()
        else:
            _offset_views[key] = (view, users - 1)


def host_producers() -> ProducerPool:
    """The process's pool of non-transactional producers."""
    global _host_producers
    with _shared_lock:
        if _host_producers is None:
            _host_producers = ProducerPool()
        return _host_producers


def configure_logs(level: str) -> None:
    """Configure logging once per Python worker process (workers are reused, hosts run many tasks)."""
    global _logs_configured
    with _registry_lock:
        if not _logs_configured:
            logs.configure(level)
            _logs_configured = True


def run_source_job(jobs: Iterator[SourceJob]) -> Iterator[str]:
    """One attempt of the task (a source host runs it on a thread of its own, ``source_hosts``): runs
    the source task until the worker says stop, or the task fails, or the worker's end of the channel goes
    away; yields one JSON line of how it ended."""
    for job in jobs:
        configure_logs(job.log_level)
        logs.bind(task=str(job.task_id))
        client = ChannelClient(job.channel)
        try:
            yield json.dumps(_run_attempt(job, client))
        finally:
            client.close()


def _first_command(client: ChannelClient, timeout_s: float = 60.0) -> Message | None:
    """The worker's first word to a new attempt (its state, or stop); None if none came."""
    try:
        return client.commands.get(timeout=timeout_s)
    except queue.Empty:
        return None


def _run_attempt(job: SourceJob, client: ChannelClient) -> dict[str, Any]:
    first = _first_command(client)
    if first is None or first.get("command") != "state":
        return {"ended": "stopped before start"}
    task_id = job.task_id
    try:
        task = instantiate_task(_registry(job.plugin_path, job.file_connectors), job.config)
        if not isinstance(task, SourceTask):
            raise ConnectorError(f"{type(task).__name__} is no SourceTask")
        offsets = acquire_offsets(job)
    except Exception:
        client.send({"event": "failed", "trace": traceback.format_exc()})
        return {"ended": "failed"}

    def failed(_task: TaskId, trace: str) -> None:
        client.send({"event": "failed", "trace": trace})

    def running(_task: TaskId) -> None:
        client.send({"event": "running"})

    def topics(status: Any) -> None:
        client.send({"event": "topics", "topics": [status.topic]})

    metrics = PluginMetricsRegistry()
    try:
        runner = SourceTaskRunner(
            task_id,
            task,
            job.config,
            failed,
            bootstrap=job.bootstrap,
            converters=job.converters,
            producer_settings=job.producer_settings,
            read_offsets=offsets.state,
            write_offsets=offsets.write,
            flush_interval_ms=job.flush_interval_ms,
            flush_timeout_ms=job.flush_timeout_ms,
            exactly_once=job.exactly_once,
            sync_offsets=offsets.sync,
            plugin_metrics=metrics,
            on_running=running,
            producers=host_producers() if job.exactly_once is None else None,
        )
    except Exception:
        release_offsets(job)
        client.send({"event": "failed", "trace": traceback.format_exc()})
        return {"ended": "failed"}
    # The worker owns the status topic and decides what is recorded: every topic goes to it (once per
    # RETRY_S), and its own ActiveTopics writes what the status topic lacks.
    runner.active_topics = ActiveTopics(task_id, lambda _c, _t: False, topics)
    log.info("source task running in a Spark task", executor=executor_id())
    runner.start(paused=bool(first.get("paused")))
    ended = "returned"
    try:
        next_figures = time.monotonic() + FIGURES_S
        while runner.is_alive():
            try:
                command = client.commands.get(timeout=0.5)
            except queue.Empty:
                command = {}
            if command is None:  # the worker is gone: stop as it would have asked
                runner.stop(job.flush_timeout_ms / 1000)
                ended = "worker gone"
                break
            if command.get("command") == "state":
                runner.set_paused(bool(command.get("paused")))
            elif command.get("command") == "stop":
                runner.stop(float(command.get("timeout_s", 5.0)))
                ended = "stopped"
                break
            if time.monotonic() >= next_figures:
                _send_figures(client, runner, metrics)
                next_figures = time.monotonic() + FIGURES_S
    finally:
        _send_figures(client, runner, metrics)
        release_offsets(job)
    return {"ended": "failed" if runner.failed is not None else ended}


def _send_figures(client: ChannelClient, runner: TaskRunner, metrics: PluginMetricsRegistry) -> None:
    """The task's counters, and the KIP-877 metrics its plugin and converters registered here (their
    values now: the worker shows them in ``/metrics`` as if they were its own)."""
    counters = runner.counters
    client.send(
        {
            "event": "figures",
            "records": counters.records,
            "offset_commits": counters.offset_commits,
            "offset_commit_ms_total": counters.offset_commit_ms_total,
            "plugin_metrics": [[m.name, m.description, list(m.tags), m.value] for m in metrics.snapshot()],
        }
    )


def executor_id() -> str | None:
    """The Spark executor this runs in (``driver`` in a local master), for the log line."""
    try:
        from pyspark import TaskContext

        context = TaskContext.get()
        return context.getLocalProperty("spark.executor.id") if context is not None else None
    except Exception:
        return None


# ----------------------------------------------------------------------------------------- worker side


class SparkSourceRunner(TaskRunner, TaskHandler):
    """A source task held by the worker and run by an executor (see the module docstring).

    The plugin task object the worker made (to learn the task's kind) is never started here; the executor
    makes and starts its own.
    """

    placement = "executor"

    run_starts_task = True

    def __init__(
        self,
        task_id: TaskId,
        task: SourceTask,
        config: Mapping[str, str],
        on_failure: Callable[[TaskId, str], None],
        *,
        job: Callable[[ChannelAddress], SourceJob],
        channel: ChannelServer,
        spark: Callable[[], Any],
        hosts: Hosts,
        fence: Callable[[str], None] | None = None,
        plugin_metrics: PluginMetricsRegistry | None = None,
        on_running: Callable[[TaskId], None] | None = None,
    ) -> None:
        super().__init__(task_id, task, config, on_failure, plugin_metrics, on_running)
        #: Exactly-once: the leader's round of zombie fencing for the task's generation, waited for here
        #: before the job is submitted (the executor's producer then fences this task's older instances).
        self._fence = fence
        self._make_job = job
        self._channel = channel
        self._spark = spark
        #: Where the task's attempts run (``source_hosts``): a host's thread, not a Spark job of its own.
        self._hosts = hosts
        #: Records per second over the last figures, the task's load when hosts are balanced.
        self._rate = 0.0
        self._rate_mark = (time.monotonic(), 0.0)
        self._connection: Connection | None = None
        self._connection_lock = threading.Lock()
        #: The executor's trace when the task failed there.
        self._remote_failure: str | None = None
        #: The executor's KIP-877 metrics as last reported, registered in the worker's registry under their
        #: own names and tags (closed with the task's other metrics).
        self._mirror: PluginMetrics = self._metrics_registry.plugin({})
        self._all_metrics.append(self._mirror)
        self._mirrored: dict[MetricName, float] = {}
        #: Figures of earlier attempts (an executor died), added to the current attempt's: records,
        #: offset commits, their milliseconds.
        self._earlier = [0.0, 0.0, 0.0]
        self._current = [0.0, 0.0, 0.0]

    def prepare(self) -> None:
        """A learner's preparation: the worker's SparkSession started (the job is submitted when the task
        starts; a submitted job runs the task)."""
        self._spark()
        self.log.info("source task prepared", placement=self.placement)

    # --- the channel (TaskHandler)

    def attached(self, connection: Connection) -> None:
        """A new attempt is the task from now on: one still connected before it (an executor that is
        not yet known to be dead, or a speculative copy) is told to stop, so two never run for long."""
        with self._connection_lock:
            previous, self._connection = self._connection, connection
        if previous is not None:
            self.log.warning("a newer attempt of the source task connected; the older one is told to stop")
            previous.send({"command": "stop", "timeout_s": 0})
        if self._stopping.is_set():
            connection.send({"command": "stop", "timeout_s": 0})
        else:
            connection.send({"command": "state", "paused": not self._running.is_set()})

    def message(self, connection: Connection, message: Message) -> None:
        event = message.get("event")
        if event == "running":
            self.loop_began()
        elif event == "failed":
            self._remote_failure = str(message.get("trace") or "the task failed on its executor")
        elif event == "figures":
            self._current = [
                float(message.get(k) or 0) for k in ("records", "offset_commits", "offset_commit_ms_total")
            ]
            self._measure(self._earlier[0] + self._current[0])
            records, commits, commit_ms = (a + b for a, b in zip(self._earlier, self._current, strict=True))
            self.counters.records = int(records)
            self.counters.offset_commits = int(commits)
            self.counters.offset_commit_ms_total = commit_ms
            self._mirror_metrics(message.get("plugin_metrics") or [])
        elif event == "topics":
            self.track_topics(str(t) for t in message.get("topics") or [])

    def _measure(self, records: float) -> None:
        """Records per second since the last mark at least a figures' interval ago (the task's load)."""
        now = time.monotonic()
        then, before = self._rate_mark
        if now - then >= FIGURES_S:
            self._rate = max(0.0, records - before) / (now - then)
            self._rate_mark = (now, records)

    def records_per_s(self) -> float:
        """The task's recent records per second (``source_host_plan.task_load``)."""
        return self._rate

    def _mirror_metrics(self, samples: list[Any]) -> None:
        """Show the executor's plugin metrics as reported: new ones registered, gone ones removed, values
        updated. A malformed sample is skipped; a name the worker already has (another instance) too."""
        seen: dict[MetricName, float] = {}
        for sample in samples:
            try:
                name, description, tags, value = sample
                metric = MetricName(
                    str(name), GROUP, tuple((str(k), str(v)) for k, v in tags), str(description)
                )
                seen[metric] = float(value)
            except (TypeError, ValueError):
                continue
        for metric in set(self._mirrored) - set(seen):
            with contextlib.suppress(ValueError, RuntimeError):
                self._mirror.remove_metric(metric)
            del self._mirrored[metric]
        for metric, value in seen.items():
            if metric not in self._mirrored:
                try:
                    self._mirror.add_metric(metric, self._gauge(metric))
                except (ValueError, RuntimeError) as exc:
                    self.log.warning("executor plugin metric not shown", metric=metric.name, error=str(exc))
                    continue
            self._mirrored[metric] = value

    def _gauge(self, metric: MetricName) -> Callable[[], float]:
        return lambda: self._mirrored.get(metric, 0.0)

    def detached(self, connection: Connection) -> None:
        with self._connection_lock:
            if self._connection is connection:
                self._connection = None
        self._earlier = [a + b for a, b in zip(self._earlier, self._current, strict=True)]
        self._current = [0.0, 0.0, 0.0]

    def _send(self, message: Message) -> None:
        with self._connection_lock:
            connection = self._connection
        if connection is not None:
            connection.send(message)

    # --- lifecycle

    def _wake(self) -> None:
        if self._stopping.is_set():
            self._send({"command": "stop", "timeout_s": self._stop_timeout_s})
        else:
            self._send({"command": "state", "paused": not self._running.is_set()})

    _stop_timeout_s = 5.0

    def stop(self, timeout_s: float) -> bool:
        """Ask the executor to stop the task (its ``stop()`` runs there, its offsets are flushed) and wait
        ``timeout_s``; past that the task's thread on its host is abandoned, as Java abandons a task past
        ``task.shutdown.graceful.timeout.ms`` (its channel is unregistered: nothing it says counts)."""
        self._stop_timeout_s = max(0.0, timeout_s - 1.0)  # the executor's part, within the worker's wait
        stopped = super().stop(timeout_s)
        if not stopped:
            self.log.warning("source task still running on its host past the graceful timeout; abandoned")
        return stopped

    def _stop_attempt(self) -> None:
        """Stop the current attempt only (the hosts move the task): its offsets are flushed as in a stop."""
        self._send({"command": "stop", "timeout_s": self._stop_timeout_s})

    def _main(self) -> None:
        logs.bind(task=str(self.task_id))
        if self._stopping.is_set():
            self.close_plugin_metrics()
            return
        address = self._channel.register(self)
        try:
            if self._fence is not None:
                self._fence(self.task_id.connector)
            ended = self.run_job(address)
            if not self._stopping.is_set():
                # Nothing but a stop ends a source task's job without a failure: say what ended it.
                unexpected = f"the Spark job of source task {self.task_id} ended: {ended}"
                self.fail(self._remote_failure or unexpected)
        except BaseException:
            trace = traceback.format_exc()
            if self._stopping.is_set():
                self.log.warning("source task job ended with an error while stopping", trace=trace)
            else:
                self.fail(self._remote_failure or trace)
        finally:
            self._channel.unregister(address)
            self.close_plugin_metrics()

    def run_job(self, address: ChannelAddress) -> list[str]:
        """Run the task on a source host until it stops or fails (``source_hosts``: placed by load, started
        again on another host when its host is lost); how its last attempt ended."""
        job = self._make_job(address)
        self.log.info("source task handed to the source hosts")
        ended = self._hosts.run(address, job, self.records_per_s, self._stop_attempt, self._stopping)
        self.log.info("source task ended on its host", ended=ended)
        return ended

    def run(self) -> None:  # pragma: no cover - the job replaces the loop (_main)
        raise NotImplementedError
