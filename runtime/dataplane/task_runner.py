"""What every task runner shares: the thread, the target state and the way to stop a task, how a task
object is made from its config, its clients' settings, and producing one record to Kafka.

Why a module of its own: the executor (``spark_executor``) holds every task as a :class:`TaskRunner`,
whatever its kind, and the two kinds of loop live in modules of their own:
:mod:`kconnect.runtime.dataplane.sink_runner` (a sink task as a Structured Streaming query) and
:mod:`kconnect.runtime.dataplane.source_runner` (a source task as a poll loop). Each runs on a thread of
its own so a slow or failing task never holds the herder or another task.
"""

from __future__ import annotations

import importlib
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kconnect.runtime import logs
from kconnect.runtime.client_config import Role, task_clients
from kconnect.runtime.dataplane.active_topics import ActiveTopics
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import ConnectorError, Monitorable, Task
from kconnect.runtime.plugins.connector_config import connector_version
from kconnect.runtime.plugins.plugin_calls import PluginCall, PluginCalls
from kconnect.runtime.plugins.plugin_metrics import PluginMetrics, PluginMetricsRegistry
from kconnect.runtime.plugins.registry import PluginError, PluginRegistry

log = logs.get(__name__)


#: The task methods that run bounded by ``task.method.timeout.ms`` (``TaskRunner.bound_calls``): the ones
#: that may block on a system outside the worker. ``stop`` is bounded but never fenced, so that a task
#: whose call returned late still releases what it holds.
BOUNDED_TASK_METHODS = ("start", "poll", "put", "flush", "pre_commit", "commit", "stop")


class TaskFenced(Exception):
    """Raised into a task's thread when a call returns after the task was fenced (past its bound, or
    abandoned by a stop that timed out): what the call returned must not be produced or committed."""


def client_settings(
    kind: Role, security_protocol: str, worker_passthrough: Mapping[str, str], task_config: Mapping[str, str]
) -> dict[str, str]:
    """librdkafka settings for one of a task's clients: worker ``<kind>.*`` then the connector's
    ``<kind>.override.*`` (Java's rule; the override policy was checked when the config was validated), and
    for ``admin`` the worker's top-level settings first, as Java's connector admin clients. Java names are
    translated (:mod:`kconnect.runtime.client_config`); a connector override no client has is ignored
    with a warning, one that cannot be translated fails the task naming the key."""
    translated = task_clients(kind, security_protocol, worker_passthrough, task_config)
    overridden = {k[len(f"{kind}.override.") :] for k in task_config if k.startswith(f"{kind}.override.")}
    ignored = [f"{kind}.override.{k}" for k in translated.ignored if k in overridden]
    if ignored:
        log.warning("connector client overrides no kconnect client has (ignored)", keys=ignored)
    return translated.settings


def produce(
    producer: Any, topic: str, key: bytes | None, value: bytes | None, kwargs: dict[str, Any]
) -> None:
    """Produce one record, letting deliveries drain the local queue while it is full.

    Why a loop: librdkafka's local queue is bounded and ``produce`` raises BufferError when it is full
    instead of blocking; serving delivery reports (``poll``) empties it. Source records and a sink's
    dead letters go out this way."""
    while True:
        try:
            producer.produce(topic, value=value, key=key, **kwargs)
            return
        except BufferError:
            producer.poll(0.1)


@dataclass
class RunnerCounters:
    """A task's figures for the worker's metrics (``spark_executor`` reads them into ``TaskCounters``):
    records handled, and how many offset commits there were and how long they took in all."""

    records: int = 0
    offset_commits: int = 0
    offset_commit_ms_total: float = 0.0

    def count_offset_commit(self, started: float) -> None:
        """One offset commit done, begun at ``started`` (``time.monotonic()``): every kind of runner
        counts its commits the same way."""
        self.offset_commits += 1
        self.offset_commit_ms_total += (time.monotonic() - started) * 1000


def plugin_version(registry: PluginRegistry, config: Mapping[str, str]) -> str | None:
    """The version of the connector plugin a task config runs (KIP-891), None if it names none the
    registry has: the task's status reports it."""
    try:
        return registry.find(config.get("connector.class") or "", connector_version(config)).version
    except (PluginError, ValueError):
        return None


def instantiate_task(registry: PluginRegistry, config: Mapping[str, str]) -> Task:
    """The task object for a task config: the task class of the connector plugin at the version
    ``connector.plugin.version`` selects (KIP-891: two versions of a plugin share their task's class
    name, so a name alone may import the other one) when ``task.class`` names it or nothing; else the
    class ``task.class`` names, falling back on the connector's."""
    name = config.get("task.class")
    connector_class = config.get("connector.class")
    task_class: type[Task] | None = None
    if connector_class:
        try:
            task_class = registry.new_connector(connector_class, connector_version(config)).task_class()
        except PluginError:
            if not name:
                raise
        named = name == f"{task_class.__module__}.{task_class.__qualname__}" if task_class else False
        if task_class is not None and (not name or named):
            return task_class()
    if not name:
        raise ConnectorError("the task config names neither task.class nor connector.class")
    module, _, qualname = name.rpartition(".")
    try:
        obj: Any = importlib.import_module(module)
        for part in qualname.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError, ValueError):
        obj = task_class
    if isinstance(obj, type) and issubclass(obj, Task):
        return obj()
    raise ConnectorError(f"task.class {name} is no Task class this worker can import")


class TaskRunner:
    """What the executor holds per task: a thread, a target state, counters and the way to stop.

    ``plugin_metrics`` is the worker's registry of KIP-877 metrics (a private one when not given): the
    task's context hands out :attr:`plugin_metrics`, and ``Monitorable`` converters get their own
    (:meth:`monitor_converters`). All of them are closed when the task's thread ends or the task is
    stopped, so a restarted task registers its metrics again without colliding with the old instance's.
    """

    #: Where the task's records are handled (``TaskCounters.placement``): a thread of the worker unless a
    #: runner says otherwise.
    placement = "worker"

    def __init__(
        self,
        task_id: TaskId,
        task: Task,
        config: Mapping[str, str],
        on_failure: Callable[[TaskId, str], None],
        plugin_metrics: PluginMetricsRegistry | None = None,
        on_running: Callable[[TaskId], None] | None = None,
    ) -> None:
        self.task_id = task_id
        self.task = task
        self.config = dict(config)
        self.counters = RunnerCounters()
        self._on_failure = on_failure
        self._on_running = on_running
        self._stopping = threading.Event()
        self._running = threading.Event()  # set while the target state is STARTED
        #: Set once the plugin task's start returned and its loop ran (``loop_began``); never cleared, so
        #: that a resume of a task whose loop once ran is RUNNING at once.
        self._began = threading.Event()
        self._thread: threading.Thread | None = None
        self.failed: str | None = None
        self.log = logs.get("kconnect.task", task=str(task_id))
        #: KIP-558 topic tracking (``topic.tracking.enable``); None when the worker disables it.
        self.active_topics: ActiveTopics | None = None
        self._metrics_registry = plugin_metrics or PluginMetricsRegistry()
        #: What the task's context gives the task (``plugin_metrics()``).
        self.plugin_metrics = self._metrics_registry.task(task_id.connector, task_id.task)
        self._all_metrics: list[PluginMetrics] = [self.plugin_metrics]
        #: Set once the task's thread is abandoned (a call past ``task.method.timeout.ms``, or a stop that
        #: timed out): from then on every bounded call raises :class:`TaskFenced` instead of returning.
        self._fenced = threading.Event()

    # --- bounded plugin calls (issue 24 item 2)

    def bound_calls(self, calls: PluginCalls, timeout_s: float) -> None:
        """Run the plugin task's blocking methods bounded by ``timeout_s`` through ``calls``, whose
        watchdog fails and fences the task when one runs past it.

        Why by wrapping the task object's methods: the runners' loops (source, sink, exactly-once) call
        them in many places, and each must be bounded and fenced the same way; an instance attribute
        shadows the class's method, so the object keeps its class (``isinstance`` checks still hold).
        """
        subject = f"task {self.task_id}"
        for method in BOUNDED_TASK_METHODS:
            original = getattr(self.task, method, None)
            if callable(original):
                setattr(self.task, method, self._bounded(calls, subject, method, timeout_s, original))

    def _bounded(
        self, calls: PluginCalls, subject: str, method: str, timeout_s: float, original: Callable[..., Any]
    ) -> Callable[..., Any]:
        fences = method != "stop"
        context = {"connector": self.task_id.connector, "task": str(self.task_id)}

        def call(*args: Any, **kwargs: Any) -> Any:
            if fences and self._fenced.is_set():
                raise TaskFenced(f"task {self.task_id} is fenced; {method}() not called")
            with calls.bounded(subject, method, timeout_s, self._timed_out, **context):
                result = original(*args, **kwargs)
            if fences and self._fenced.is_set():
                raise TaskFenced(f"{method}() of task {self.task_id} returned after the task was fenced")
            return result

        return call

    def _timed_out(self, call: PluginCall, elapsed_s: float) -> None:
        """The watchdog found a call past its bound (on its own thread): FAILED with a trace naming the
        method and how long it has been stuck, then fenced. A task being stopped is only fenced."""
        stack = call.stack()
        trace = (
            f"{call.describe(elapsed_s)} (task.method.timeout.ms); the task is fenced: nothing it returns "
            "later is produced or committed. Restart the task to start a new instance."
        )
        if stack:
            trace += "\nWhere it was blocked:\n" + stack
        if not self._stopping.is_set() and self.failed is None:
            self.fail(trace)
        self.fence()

    def fence(self) -> None:
        """Abandon the task's thread for good: whatever a call returns later raises :class:`TaskFenced`, and
        no final offset commit runs (``failed`` is set: the runners skip it for a failed task)."""
        if self.failed is None:
            self.failed = "fenced: the task's thread was abandoned"
        self._fenced.set()
        self._stopping.set()
        self._running.set()
        self._wake()

    @property
    def fenced(self) -> bool:
        """Whether the task's thread was abandoned (see :meth:`fence`)."""
        return self._fenced.is_set()

    def monitor_converters(self, key: object, value: object) -> None:
        """Offer the task's key and value converters their metrics if they are ``Monitorable`` (Java does
        after configuring them), tagged ``converter=key``/``value``."""
        for role, converter in (("key", key), ("value", value)):
            if isinstance(converter, Monitorable):
                metrics = self._metrics_registry.converter(self.task_id.connector, self.task_id.task, role)
                self._all_metrics.append(metrics)
                converter.with_plugin_metrics(metrics)

    def close_plugin_metrics(self) -> None:
        """Remove every metric the task and its converters registered (idempotent)."""
        for metrics in self._all_metrics:
            metrics.close()

    # --- lifecycle, called by the executor

    #: Whether ``run`` starts the plugin task itself instead of the thread doing it before ``run``: an
    #: exactly-once source task must first fence older instances and read offsets to the end.
    run_starts_task = False

    #: Set by the executor when this runner starts from a preparation (the warm-up hand-over): the task
    #: was active on another worker until just now.
    handed_over = False

    def prepare(self) -> None:
        """Warm the task up before it is this worker's (a learner's preparation, issue 25), on the
        caller's thread: make the clients and connections its loop will need, so that starting it later
        repeats none of that. Never touches the task's records: nothing is consumed, produced or committed,
        and the plugin task's ``start`` is not called, since the task's owner elsewhere still runs it
        (``start`` is where a task takes its resources and reads where to resume). Runners that have
        nothing to warm keep this default: the plugin task was made and initialized with the runner."""

    def release_prepared(self) -> None:
        """Release a preparation that will never start (discarded): what :meth:`prepare` made and the
        metrics registered. The plugin task never started, so its ``stop`` is not called."""
        try:
            self._release_warm()
        except Exception as exc:  # releasing must not fail the caller (the herder's thread)
            self.log.warning("releasing a discarded preparation failed", error=str(exc))
        finally:
            self.close_plugin_metrics()

    def _release_warm(self) -> None:
        """Close what :meth:`prepare` made and the loop has not taken over (subclasses that warm something
        override; idempotent: called again when the task's thread ends)."""

    def _before_start(self) -> None:
        """On the task's thread, just before the plugin task's ``start`` (subclasses override)."""

    def start(self, paused: bool) -> None:
        """Start the task's thread, which starts the plugin task and then its loop.

        Why the plugin task starts on that thread and not the caller's: ``start`` may take long (a
        database to reach), and the caller is the herder's thread, which must keep heartbeating; Java
        also starts a task on its own thread, where a failing start fails the task.
        """
        if not paused:
            self._running.set()
        self._thread = threading.Thread(target=self._main, name=f"task-{self.task_id}", daemon=True)
        self._thread.start()

    def is_alive(self) -> bool:
        """Whether the task's thread runs (started and not yet ended)."""
        thread = self._thread
        return thread is not None and thread.is_alive()

    def state(self) -> str:
        """The task state to report now, in Connect's terms: FAILED once it failed, PAUSED while its
        target state is not STARTED, RUNNING once its loop ran, UNASSIGNED before (Java's task is
        UNASSIGNED until its start returned)."""
        if self.failed is not None:
            return "FAILED"
        if not self._running.is_set():
            return "PAUSED"
        return "RUNNING" if self._began.is_set() else "UNASSIGNED"

    def loop_began(self) -> None:
        """Called by ``run`` on the task's thread once the plugin task's start returned and its loop runs
        (a source's poll loop, a sink's active streaming query): the moment Java reports RUNNING. Only the
        first call reports; later ones (a query restarted after a pause) change nothing."""
        if self._began.is_set():
            return
        self._began.set()
        self.log.info("task loop running")
        if self._on_running is not None and not self._stopping.is_set():
            self._on_running(self.task_id)

    def set_paused(self, paused: bool) -> None:
        """Follow the connector's target state: a paused task keeps its plugin task and clients but its
        loop does no work, so resuming is quick."""
        if paused:
            self._running.clear()
        else:
            self._running.set()
        self._wake()

    def stop(self, timeout_s: float) -> bool:
        """Ask the loop to end and wait at most ``timeout_s``; False if it did not end in time."""
        self._stopping.set()
        self._running.set()
        self._wake()
        thread = self._thread
        try:
            if thread is not None:
                # A fenced task's thread is stuck in a plugin call already: waiting for it cannot help.
                thread.join(0 if self._fenced.is_set() else timeout_s)
                if thread.is_alive():
                    self.fence()  # abandoned: nothing it returns later may reach Kafka
                return not thread.is_alive()
            return True
        finally:
            # Even for a thread abandoned past the timeout: the task is gone for the worker.
            self.close_plugin_metrics()

    # --- the loop

    def _main(self) -> None:
        logs.bind(task=str(self.task_id))
        if self._stopping.is_set():  # stopped before its thread ran: the plugin task never started
            self.release_prepared()
            return
        try:
            if not self.run_starts_task:
                self._before_start()
                self.task.start(dict(self.config))
            self.run()
        except TaskFenced as exc:
            self.log.warning("fenced task's call returned; its result is dropped", reason=str(exc))
        except BaseException:
            trace = traceback.format_exc()
            if self._fenced.is_set():
                self.log.warning("fenced task raised; not reported", trace=trace)
                return
            if self._stopping.is_set():
                # Torn down under its feet while stopping: not a failure to report, as the task is gone.
                self.log.warning("task raised while stopping", trace=trace)
                return
            self.fail(trace)
        finally:
            try:
                self.task.stop()
            except Exception as exc:
                self.log.warning("task stop failed", error=str(exc))
            self.release_prepared()  # what a preparation warmed and the loop never took (a failed start)

    def fail(self, trace: str) -> None:
        """The task failed with ``trace``: keep it (its status is FAILED from now on), tell the worker.
        Not once fenced: the status says why it was (its bound), and an abandoned thread reports nothing."""
        if self._fenced.is_set():
            self.log.warning("fenced task failed; not reported", trace=trace)
            return
        self.failed = trace
        self.log.error("task failed", trace=trace)
        self._on_failure(self.task_id, trace)

    def track_topics(self, topics: Iterable[str]) -> None:
        """Record the topics a batch used as the connector's active topics (when tracking is on)."""
        if self.active_topics is not None:
            self.active_topics.record(topics)

    def run(self) -> None:
        """The task's loop, on its own thread, until ``stop`` (each kind of runner has its own); what it
        raises fails the task."""
        raise NotImplementedError

    def _wake(self) -> None:
        """Cut a wait in the loop short (subclasses override)."""
