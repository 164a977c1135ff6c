"""KIP-877 plugin metrics: what connectors, tasks and converters register through ``plugin_metrics()``.

Why: a plugin's own figures (rows written, API calls, a queue's depth) belong next to the worker's, under
tags that say which connector and task they are about, without the plugin building a metrics system of
its own. Apache Kafka 4.1 gives connectors and tasks a ``PluginMetrics`` through their contexts
(``ConnectorContext.pluginMetrics()``, ``SourceTaskContext``/``SinkTaskContext.pluginMetrics()``) and
calls ``Monitorable.withPluginMetrics`` on converters, header converters, transformations and predicates.
Each instance's metric names get the group ``plugins`` and fixed tags that identify the plugin, before the
caller's own tags (Java's ``ConnectMetrics``): ``connector`` for a connector; ``connector``, ``task`` for a
task; those and ``converter`` = ``key``/``value``/``header`` for a converter, ``transformation`` or
``predicate`` = the alias for those. A caller tag that reuses a fixed tag's name is refused, as is a metric
or sensor name registered twice, and everything is refused once the instance is closed; closing removes
all of the instance's metrics, which the runtime does when the plugin stops, so a restart starts clean.
JMX shows them as ``kafka.connect:type=plugins,connector=...,task=...``; ``GET /metrics`` (see
``shell/metrics.py``) as ``plugins_<name>`` with the tags as labels.

kconnect honours the connector and task contexts and ``Monitorable`` key and value converters (made per
task, in the worker process; none of the built-in converters is one, and converters cannot be plugged in
yet, so that hook waits for them). It has no header converter instances (headers pass as bytes), and its
transformations and predicates are shared specifications that build Spark column expressions run in the
JVM, not per-task Python objects, so nothing exists to hand a ``PluginMetrics`` to: those two kinds are not
offered one.

The registry lives in the worker process and is read there. Connectors run on the herder thread, source
tasks on worker threads and sink tasks' ``put`` on the Spark driver, which is the worker process; a task
moved to a Spark executor would need its metrics shipped back to the driver.

Of Java's metrics API this keeps metric names, gauges (a callable returning a number), measurables, and
sensors with a few stats (:class:`CumulativeCount`, :class:`CumulativeSum`, :class:`Value`, and over
Java's default window of two 30 s samples :class:`Avg`, :class:`Max`, :class:`Rate` per second). Left out:
compound stats (Percentiles, Meter, Frequencies), a sensor's parents, recording levels, quotas, sensor
expiry, per-metric ``MetricConfig``, ``record`` at a caller's time, and metric reporters.
"""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from kconnect.runtime import logs

log = logs.get(__name__)

#: The group of every plugin metric (Java's ``PluginMetricsImpl``); the JMX ``type`` of its MBean.
GROUP = "plugins"

Tags = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class MetricName:
    """A plugin metric's identity: its name, group and tags (ordered: fixed ones first). The description
    is carried along but, as in Java, not part of equality."""

    name: str
    group: str
    tags: Tags
    description: str = field(default="", compare=False)


@runtime_checkable
class Measurable(Protocol):
    """A value computed when the metrics are read, at time ``now`` (seconds, monotonic clock)."""

    def measure(self, now: float) -> float:
        """The current value."""
        ...


#: A gauge (a callable returning a number) or a measurable, as ``add_metric`` takes them.
MetricValueProvider = Callable[[], float] | Measurable


class Stat(Measurable, Protocol):
    """A measurable a :class:`Sensor` feeds with each recorded value."""

    def record(self, value: float, now: float) -> None:
        """Account for one recorded value."""
        ...


class CumulativeCount:
    """How many values were recorded since the stat was made."""

    def __init__(self) -> None:
        self._count = 0

    def record(self, value: float, now: float) -> None:
        self._count += 1

    def measure(self, now: float) -> float:
        return float(self._count)


class CumulativeSum:
    """The sum of every value recorded (Java's ``CumulativeSum``; a total)."""

    def __init__(self) -> None:
        self._sum = 0.0

    def record(self, value: float, now: float) -> None:
        self._sum += value

    def measure(self, now: float) -> float:
        return self._sum


class Value:
    """The last value recorded (NaN before any)."""

    def __init__(self) -> None:
        self._value = math.nan

    def record(self, value: float, now: float) -> None:
        self._value = value

    def measure(self, now: float) -> float:
        return self._value


@dataclass(slots=True)
class _Sample:
    start: float
    count: int = 0
    total: float = 0.0
    max: float = -math.inf


class _Sampled:
    """Values kept in ``samples`` windows of ``window_s`` seconds, as Java's ``SampledStat`` keeps them
    (defaults: two of 30 s): memory stays constant however often a plugin records."""

    def __init__(self, window_s: float = 30.0, samples: int = 2) -> None:
        if window_s <= 0 or samples < 1:
            raise ValueError("a sampled stat needs a positive window and at least one sample")
        self.window_s = window_s
        self.samples = samples
        self._kept: deque[_Sample] = deque()

    def record(self, value: float, now: float) -> None:
        if not self._kept or now - self._kept[-1].start >= self.window_s:
            self._kept.append(_Sample(now))
            while len(self._kept) > self.samples:
                self._kept.popleft()
        current = self._kept[-1]
        current.count += 1
        current.total += value
        current.max = max(current.max, value)

    def _live(self, now: float) -> list[_Sample]:
        horizon = self.window_s * self.samples
        return [s for s in self._kept if now - s.start < horizon]


class Avg(_Sampled):
    """The average of the values recorded in the window (NaN without any, as Java reports it)."""

    def measure(self, now: float) -> float:
        live = self._live(now)
        count = sum(s.count for s in live)
        return sum(s.total for s in live) / count if count else math.nan


class Max(_Sampled):
    """The largest value recorded in the window (NaN without any)."""

    def measure(self, now: float) -> float:
        live = [s.max for s in self._live(now) if s.count]
        return max(live) if live else math.nan


class Rate(_Sampled):
    """Per second: the sum of the values recorded in the window over the time the window covers, at least
    ``samples - 1`` windows (Java's rule, so the first records do not show a huge rate). Record 1 per
    event for an event rate."""

    def measure(self, now: float) -> float:
        live = self._live(now)
        if not live:
            return 0.0
        elapsed = max(now - live[0].start, self.window_s * (self.samples - 1), 1e-9)
        return sum(s.total for s in live) / elapsed


@dataclass(frozen=True, slots=True)
class PluginSample:
    """One plugin metric as read for ``GET /metrics``: a plain value, so rendering stays pure."""

    name: str
    group: str
    description: str
    tags: Tags
    value: float


class Sensor:
    """Records values into its stats, each stat a metric of the plugin (``PluginMetrics.add_sensor``)."""

    def __init__(self, name: str, owner: PluginMetrics) -> None:
        self.name = name
        self._owner = owner
        self._lock = threading.Lock()
        self._stats: list[Stat] = []
        self.metric_names: list[MetricName] = []

    def add(self, metric_name: MetricName, stat: Stat) -> None:
        """Expose ``stat`` as ``metric_name`` and feed it every value this sensor records."""
        self._owner.add_metric(metric_name, _Locked(stat, self._lock))
        with self._lock:
            self._stats.append(stat)
            self.metric_names.append(metric_name)

    def record(self, value: float = 1.0) -> None:
        """Record one value (1 by default: an event) into every stat, at the registry's clock."""
        now = self._owner.registry.clock()
        with self._lock:
            for stat in self._stats:
                stat.record(value, now)


class _Locked:
    """A sensor's stat read under the sensor's lock, so a scrape never sees half of a ``record``."""

    def __init__(self, stat: Stat, lock: threading.Lock) -> None:
        self._stat = stat
        self._lock = lock

    def measure(self, now: float) -> float:
        with self._lock:
            return self._stat.measure(now)


class PluginMetrics:
    """One plugin instance's metrics (Java's ``PluginMetrics``): names carry the instance's fixed tags,
    and everything registered through it goes when it is closed. Safe to use from any thread."""

    def __init__(self, registry: PluginMetricsRegistry, tags: Mapping[str, str]) -> None:
        self.registry = registry
        self.tags: Tags = tuple(tags.items())
        self._lock = threading.Lock()
        self._names: set[MetricName] = set()
        self._sensors: dict[str, Sensor] = {}
        self._closed = False

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("This PluginMetrics instance is closed")

    def metric_name(
        self, name: str, description: str = "", tags: Mapping[str, str] | None = None
    ) -> MetricName:
        """A name in the ``plugins`` group with this plugin's tags, then ``tags``; a tag this plugin's
        fixed tags already use is refused (it would hide which plugin the metric is about)."""
        self._check_open()
        fixed = dict(self.tags)
        extra = dict(tags or {})
        for key in extra:
            if key in fixed:
                raise ValueError(f"Cannot use {key} as a tag name")
        return MetricName(name, GROUP, (*self.tags, *extra.items()), description)

    def add_metric(self, metric_name: MetricName, provider: MetricValueProvider) -> None:
        """Expose a gauge (a callable returning a number) or a measurable under ``metric_name``."""
        with self._lock:
            self._check_open()
            if metric_name in self._names:
                raise ValueError(f"Metric {metric_name} already exists")
            self.registry._add(metric_name, provider)
            self._names.add(metric_name)

    def remove_metric(self, metric_name: MetricName) -> None:
        """Stop exposing a metric this instance added; another one's is refused."""
        with self._lock:
            self._check_open()
            if metric_name not in self._names:
                raise ValueError(f"Unknown metric {metric_name}")
            self._names.discard(metric_name)
            self.registry._remove((metric_name,))

    def add_sensor(self, name: str) -> Sensor:
        """A new sensor; add stats to it with ``Sensor.add``."""
        with self._lock:
            self._check_open()
            if name in self._sensors:
                raise ValueError(f"Sensor {name} already exists")
            sensor = self._sensors[name] = Sensor(name, self)
            return sensor

    def remove_sensor(self, name: str) -> None:
        """Remove a sensor and the metrics of its stats."""
        with self._lock:
            self._check_open()
            sensor = self._sensors.pop(name, None)
            if sensor is None:
                raise ValueError(f"Unknown sensor {name}")
            self._names.difference_update(sensor.metric_names)
            self.registry._remove(sensor.metric_names)

    def close(self) -> None:
        """Remove everything this instance registered; later calls are refused. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            names, self._names = self._names, set()
            self._sensors.clear()
        self.registry._remove(names)
        if names:
            log.debug("plugin metrics closed", tags=dict(self.tags), metrics=len(names))


class PluginMetricsRegistry:
    """Every plugin metric registered in this worker, read by ``GET /metrics`` (:meth:`snapshot`).

    A metric name is registered at most once across plugin instances, as in Java's ``Metrics``: a task
    restarted before its previous instance closed its metrics gets a clear error, not two series.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self.clock = clock
        self._lock = threading.Lock()
        self._metrics: dict[MetricName, MetricValueProvider] = {}

    def plugin(self, tags: Mapping[str, str]) -> PluginMetrics:
        """A ``PluginMetrics`` for an instance identified by ``tags``."""
        return PluginMetrics(self, tags)

    def connector(self, connector: str) -> PluginMetrics:
        """For a connector instance (``ConnectorContext.plugin_metrics()``)."""
        return self.plugin({"connector": connector})

    def task(self, connector: str, task: int) -> PluginMetrics:
        """For a task instance (``SourceTaskContext``/``SinkTaskContext.plugin_metrics()``)."""
        return self.plugin({"connector": connector, "task": str(task)})

    def converter(self, connector: str, task: int, role: str) -> PluginMetrics:
        """For a task's ``Monitorable`` converter; ``role`` is ``key``, ``value`` or ``header``."""
        return self.plugin({"connector": connector, "task": str(task), "converter": role})

    def _add(self, name: MetricName, provider: MetricValueProvider) -> None:
        with self._lock:
            if name in self._metrics:
                raise ValueError(f"Metric {name} already exists")
            self._metrics[name] = provider

    def _remove(self, names: Iterable[MetricName]) -> None:
        with self._lock:
            for name in names:
                self._metrics.pop(name, None)

    def snapshot(self) -> tuple[PluginSample, ...]:
        """Every metric's current value, sorted by name and tags. Gauges are plugin code, so they run
        outside the registry's lock; one that raises or answers no number is left out (and logged), as a
        JMX reader gets an error for that attribute alone."""
        with self._lock:
            metrics = list(self._metrics.items())
        now = self.clock()
        out = []
        for name, provider in metrics:
            try:
                raw = provider.measure(now) if isinstance(provider, Measurable) else provider()
                value = float(raw)
            except Exception as exc:
                log.warning(
                    "plugin metric could not be read", metric=name.name, tags=dict(name.tags), error=str(exc)
                )
                continue
            out.append(PluginSample(name.name, name.group, name.description, name.tags, value))
        return tuple(sorted(out, key=lambda s: (s.name, s.tags)))
