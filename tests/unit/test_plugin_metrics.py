"""KIP-877 plugin metrics: names and tags as Java's ``PluginMetricsImpl`` makes them, Java's refusals,
the stats, closing, and the hand-over to connectors', tasks' and converters' code."""

from __future__ import annotations

import math
import threading
from collections.abc import Mapping
from typing import Any, cast

import pytest

from kconnect.runtime.dataplane.task_runner import TaskRunner
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import Monitorable, SourceConnector, SourceRecord, SourceTask, Task
from kconnect.runtime.plugins.config_def import ConfigDef
from kconnect.runtime.plugins.plugin_metrics import (
    GROUP,
    Avg,
    CumulativeCount,
    CumulativeSum,
    Max,
    MetricName,
    PluginMetrics,
    PluginMetricsRegistry,
    Rate,
    Value,
)
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.connectors import Connectors
from kconnect.runtime.storage.config_log import TargetState
from kconnect.runtime.storage.status_log import State
from tests.support.connector_stores import FoldedStores


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def values(registry: PluginMetricsRegistry) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(s.name, s.tags): s.value for s in registry.snapshot()}


def test_names_carry_the_plugins_group_and_the_fixed_tags_before_the_callers() -> None:
    registry = PluginMetricsRegistry()
    task = registry.task("orders", 2)
    name = task.metric_name("rows-written", "Rows the task wrote.", {"table": "t1"})
    assert name == MetricName(
        "rows-written", GROUP, (("connector", "orders"), ("task", "2"), ("table", "t1"))
    )
    assert GROUP == "plugins"
    assert registry.connector("orders").metric_name("x").tags == (("connector", "orders"),)
    converter = registry.converter("orders", 2, "value").metric_name("x")
    assert converter.tags == (("connector", "orders"), ("task", "2"), ("converter", "value"))
    # The description is carried but, as in Java, is not part of the identity.
    assert task.metric_name("rows-written", "other words", {"table": "t1"}) == name


def test_java_refusals_reused_fixed_tag_duplicate_metric_duplicate_sensor_unknown_removals() -> None:
    metrics = PluginMetricsRegistry().task("c", 0)
    with pytest.raises(ValueError, match="Cannot use task as a tag name"):
        metrics.metric_name("m", "", {"task": "7"})
    name = metrics.metric_name("m")
    metrics.add_metric(name, lambda: 1.0)
    with pytest.raises(ValueError, match="already exists"):
        metrics.add_metric(name, lambda: 2.0)
    metrics.add_sensor("s")
    with pytest.raises(ValueError, match="Sensor s already exists"):
        metrics.add_sensor("s")
    with pytest.raises(ValueError, match="Unknown metric"):
        metrics.remove_metric(metrics.metric_name("never-added"))
    with pytest.raises(ValueError, match="Unknown sensor"):
        metrics.remove_sensor("never-added")


def test_a_second_instance_of_the_same_plugin_cannot_take_a_live_name_until_the_first_closes() -> None:
    registry = PluginMetricsRegistry()
    old, new = registry.task("c", 0), registry.task("c", 0)
    old.add_metric(old.metric_name("m"), lambda: 1.0)
    with pytest.raises(ValueError, match="already exists"):
        new.add_metric(new.metric_name("m"), lambda: 2.0)
    old.close()
    new.add_metric(new.metric_name("m"), lambda: 2.0)
    assert values(registry) == {("m", (("connector", "c"), ("task", "0"))): 2.0}


def test_gauges_measurables_and_removal_show_in_the_snapshot() -> None:
    registry = PluginMetricsRegistry()
    metrics = registry.connector("c")
    depth = [3]
    gauge = metrics.metric_name("queue-depth", "Items queued.")
    metrics.add_metric(gauge, lambda: depth[0])
    count = CumulativeCount()
    measurable = metrics.metric_name("calls")
    metrics.add_metric(measurable, count)
    depth[0] = 5
    count.record(1.0, 0.0)
    snap = registry.snapshot()
    assert [(s.name, s.value, s.description) for s in snap] == [
        ("calls", 1.0, ""),
        ("queue-depth", 5.0, "Items queued."),
    ]
    metrics.remove_metric(gauge)
    assert [s.name for s in registry.snapshot()] == ["calls"]


def test_a_gauge_that_raises_or_is_no_number_is_left_out_and_the_rest_still_read() -> None:
    registry = PluginMetricsRegistry()
    metrics = registry.connector("c")

    def broken() -> float:
        raise RuntimeError("the plugin's bug")

    not_a_number: Any = lambda: "many"  # noqa: E731 - a plugin's gauge answering a string
    metrics.add_metric(metrics.metric_name("broken"), broken)
    metrics.add_metric(metrics.metric_name("text"), not_a_number)
    metrics.add_metric(metrics.metric_name("fine"), lambda: 4)
    assert [(s.name, s.value) for s in registry.snapshot()] == [("fine", 4.0)]


def test_sensor_stats_count_total_last_avg_max_and_rate_over_java_default_window() -> None:
    clock = Clock()
    registry = PluginMetricsRegistry(clock)
    metrics = registry.task("c", 0)
    sensor = metrics.add_sensor("batch-size")
    stats = {
        "count": CumulativeCount(),
        "total": CumulativeSum(),
        "last": Value(),
        "avg": Avg(),
        "max": Max(),
        "rate": Rate(),
    }
    for name, stat in stats.items():
        sensor.add(metrics.metric_name(name), stat)
    before = {s.name: s.value for s in registry.snapshot()}
    assert before["count"] == 0 and before["total"] == 0 and before["rate"] == 0
    assert math.isnan(before["avg"]) and math.isnan(before["max"]) and math.isnan(before["last"])
    for value in (10.0, 20.0, 60.0):
        sensor.record(value)
        clock.now += 5
    got = {s.name: s.value for s in registry.snapshot()}
    # Rate: 90 recorded over at least one 30 s window (Java's floor while the window is young).
    assert got == {"count": 3, "total": 90, "last": 60, "avg": 30, "max": 60, "rate": 3.0}
    clock.now += 120  # every sample aged out of the two 30 s windows
    aged = {s.name: s.value for s in registry.snapshot()}
    assert aged["count"] == 3 and aged["total"] == 90 and aged["rate"] == 0
    assert math.isnan(aged["avg"]) and math.isnan(aged["max"])


def test_rate_counts_events_per_second_across_both_windows() -> None:
    clock = Clock()
    registry = PluginMetricsRegistry(clock)
    metrics = registry.task("c", 0)
    sensor = metrics.add_sensor("records")
    sensor.add(metrics.metric_name("record-rate"), Rate())
    for _ in range(50):  # 10 events a second for 50 s
        for _ in range(10):
            sensor.record()
        clock.now += 1
    (sample,) = registry.snapshot()
    # The samples kept cover the last 50 s at most (two windows of 30 s): 10 per second.
    assert sample.value == pytest.approx(10.0, rel=0.05)


def test_removing_a_sensor_removes_its_metrics_and_closing_removes_everything_for_good() -> None:
    registry = PluginMetricsRegistry()
    metrics = registry.task("c", 1)
    sensor = metrics.add_sensor("s")
    sensor.add(metrics.metric_name("s-total"), CumulativeSum())
    metrics.add_metric(metrics.metric_name("g"), lambda: 1.0)
    metrics.remove_sensor("s")
    assert [s.name for s in registry.snapshot()] == ["g"]
    metrics.close()
    metrics.close()  # idempotent
    assert registry.snapshot() == ()
    with pytest.raises(RuntimeError, match="closed"):
        metrics.add_metric(MetricName("late", GROUP, ()), lambda: 1.0)
    with pytest.raises(RuntimeError, match="closed"):
        metrics.metric_name("late")


def test_recording_from_many_threads_while_reading_loses_nothing() -> None:
    registry = PluginMetricsRegistry()
    metrics = registry.task("c", 0)
    sensor = metrics.add_sensor("s")
    sensor.add(metrics.metric_name("n"), CumulativeCount())
    sensor.add(metrics.metric_name("sum"), CumulativeSum())
    stop = threading.Event()

    def read() -> None:
        while not stop.is_set():
            registry.snapshot()

    reader = threading.Thread(target=read)
    reader.start()
    writers = [threading.Thread(target=lambda: [sensor.record(2.0) for _ in range(5000)]) for _ in range(4)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    stop.set()
    reader.join()
    assert {s.name: s.value for s in registry.snapshot()} == {"n": 20000, "sum": 40000}


# --- the hand-over to a task and its converters


class CountingTask(SourceTask):
    """A task registering a per-record counter, as a Java task does in ``start`` through its context."""

    def version(self) -> str:
        return "1"

    def start(self, props: dict[str, str]) -> None:
        assert self.context is not None
        metrics = self.context.plugin_metrics()
        self.polled = metrics.add_sensor("polled")
        self.polled.add(metrics.metric_name("records-polled-total", "Records polled."), CumulativeCount())

    def poll(self) -> list[SourceRecord] | None:
        return None

    def stop(self) -> None:
        pass


class MonitorableConverter:
    def __init__(self) -> None:
        self.metrics: PluginMetrics | None = None

    def with_plugin_metrics(self, metrics: PluginMetrics) -> None:
        self.metrics = metrics
        metrics.add_metric(metrics.metric_name("conversions"), lambda: 7)


class _Context:
    def __init__(self, runner: TaskRunner) -> None:
        self._runner = runner

    def configs(self) -> Mapping[str, str]:
        return self._runner.config

    @property
    def offset_storage_reader(self) -> Any:
        return None

    def plugin_metrics(self) -> PluginMetrics:
        return self._runner.plugin_metrics


def test_a_task_and_its_monitorable_converter_register_and_are_closed_when_the_task_stops() -> None:
    registry = PluginMetricsRegistry()
    task = CountingTask()
    runner = TaskRunner(TaskId("orders", 3), task, {}, lambda task, trace: None, registry)
    key, value = MonitorableConverter(), object()  # only the Monitorable one is offered metrics
    assert isinstance(key, Monitorable) and not isinstance(value, Monitorable)
    runner.monitor_converters(key, value)
    task.initialize(_Context(runner))
    task.start({})
    task.polled.record()
    assert values(registry) == {
        ("conversions", (("connector", "orders"), ("task", "3"), ("converter", "key"))): 7.0,
        ("records-polled-total", (("connector", "orders"), ("task", "3"))): 1.0,
    }
    assert runner.stop(1.0)
    assert registry.snapshot() == ()
    # A restarted task registers the same names again without colliding.
    again = CountingTask()
    second = TaskRunner(TaskId("orders", 3), again, {}, lambda task, trace: None, registry)
    again.initialize(_Context(second))
    again.start({})
    assert [s.name for s in registry.snapshot()] == ["records-polled-total"]


class FailingStart(CountingTask):
    def start(self, props: dict[str, str]) -> None:
        super().start(props)
        raise RuntimeError("cannot reach the source")


def test_a_task_that_fails_to_start_leaves_no_metrics_behind() -> None:
    registry = PluginMetricsRegistry()
    task = FailingStart()
    failures: list[str] = []
    runner = TaskRunner(TaskId("c", 0), task, {}, lambda task, trace: failures.append(trace), registry)
    task.initialize(_Context(runner))
    runner.start(paused=True)  # the plugin task starts on the runner's thread, where it fails the task
    assert runner._thread is not None
    runner._thread.join(30)
    assert not runner._thread.is_alive()
    assert len(failures) == 1 and "cannot reach the source" in failures[0]
    assert registry.snapshot() == ()


# --- a connector's context


class GaugedSource(SourceConnector):
    """A connector registering a gauge in ``start``, as a Java connector does through its context."""

    def version(self) -> str:
        return "1"

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: dict[str, str]) -> None:
        metrics = self.context.plugin_metrics()
        metrics.add_metric(metrics.metric_name("tables-watched", "Tables the connector watches."), lambda: 4)

    def task_class(self) -> type[Task]:
        return CountingTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]

    def stop(self) -> None:
        pass


def test_a_connector_registers_through_its_context_and_pausing_or_stopping_closes_its_metrics() -> None:
    plugins = PluginRegistry()
    plugins.register(GaugedSource)
    registry = PluginMetricsRegistry()
    stores = FoldedStores()
    answers: list[object] = []
    connectors = Connectors(
        plugins,
        cast(Any, stores),
        cast(Any, None),
        "w1",
        "http://w1",
        generation=lambda: 1,
        request_reconfigure=lambda name: None,
        stopping=threading.Event(),
        plugin_metrics=registry,
        post=answers.append,
    )
    config: dict[str, str | None] = {"connector.class": "GaugedSource"}

    def settle() -> None:  # the instance's calls run on its own thread
        thread = connectors._running["src"].thread
        assert thread.wait_idle(10)

    connectors.start("src", config, TargetState.STARTED, 1, attempt=7)
    settle()
    assert values(registry) == {("tables-watched", (("connector", "src"),)): 4.0}
    connectors.transition("src", TargetState.PAUSED, 1)
    settle()
    assert registry.snapshot() == ()
    connectors.transition("src", TargetState.STARTED, 1)  # start() registers again, no collision
    settle()
    assert [s.name for s in registry.snapshot()] == ["tables-watched"]
    connectors.close(0)
    connectors.stop("src", 1)
    connectors.close(10)
    assert registry.snapshot() == ()
    assert [(a.method, a.target_state, a.trace) for a in cast(Any, answers)] == [
        ("start", TargetState.STARTED, None),
        ("stop", TargetState.PAUSED, None),
        ("start", TargetState.STARTED, None),
    ]
    assert {cast(Any, a).attempt for a in answers} == {7}
    assert [s.state for s in stores.written] == [State.UNASSIGNED]
