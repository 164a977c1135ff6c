"""Prometheus rendering of the worker figures under Apache Kafka Connect's metric names."""

from __future__ import annotations

import math
import re
from dataclasses import replace

from kconnect.config.worker_keys import ConnectProtocol, GroupProtocol
from kconnect.runtime.group.group_records import (
    Assigned,
    GroupState,
    TargetAssignmentValue,
    TargetMember,
)
from kconnect.runtime.group.herder import GroupView, Herder
from kconnect.runtime.group.protocol import ProtocolName
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.plugin_metrics import PluginMetricsRegistry, PluginSample
from kconnect.runtime.shell import view
from kconnect.runtime.shell.metrics import Family, Sample, TaskFigures, WorkerFigures, render, worker_families
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot
from kconnect.runtime.storage.status_log import State, StatusState

FIGURES = WorkerFigures(
    worker="127.0.0.1:8083",
    protocol=ProtocolName.SESSIONED,
    epoch=7,
    leader="http://127.0.0.1:8083/",
    rebalancing=False,
    completed_rebalances=4,
    rebalance_time_ms_total=400.0,
    rebalance_time_ms_max=250.5,
    time_since_last_rebalance_ms=1200.0,
    connectors={"sink": State.RUNNING},
    tasks=(
        TaskFigures("sink", 0, State.RUNNING, sink_record_read_total=12, placement="worker"),
        TaskFigures("sink", 1, State.PAUSED, placement="query"),
        TaskFigures("src", 0, State.FAILED, source_record_poll_total=3, offset_commit_avg_time_ms=2.5),
    ),
    connector_startup_attempts=2,
    connector_startup_successes=1,
    connector_startup_failures=1,
)

#: Prometheus' grammar for a sample line: metric and label names, then the value.
LINE = re.compile(r'^[a-zA-Z_:][a-zA-Z0-9_:]*(\{([a-zA-Z_][a-zA-Z0-9_]*="[^"]*",?)*\})? (-?[0-9.e+]+|NaN)$')


def samples(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines():
        if line.startswith("#"):
            continue
        assert LINE.match(line), line
        name, value = line.rsplit(" ", 1)
        out[name] = float(value)
    return out


def test_names_follow_apache_kafka_connect_and_values_are_the_figures() -> None:
    got = samples(render(worker_families(FIGURES)))
    w = 'worker="127.0.0.1:8083"'
    assert got[f"connect_worker_rebalance_completed_rebalances_total{{{w}}}"] == 4
    assert got[f"connect_worker_rebalance_rebalance_avg_time_ms{{{w}}}"] == 100
    assert got[f"connect_worker_rebalance_rebalance_max_time_ms{{{w}}}"] == 250.5
    assert got[f"connect_worker_rebalance_epoch{{{w}}}"] == 7
    assert got[f"connect_worker_rebalance_rebalancing{{{w}}}"] == 0
    assert got[f'connect_worker_rebalance_connect_protocol{{{w},protocol="sessioned"}}'] == 1
    assert got[f"connect_worker_connector_count{{{w}}}"] == 1
    assert got[f"connect_worker_task_count{{{w}}}"] == 3
    assert got[f"connect_worker_connector_startup_failure_total{{{w}}}"] == 1
    assert got[f'connect_worker_connector_running_task_count{{{w},connector="sink"}}'] == 1
    assert got[f'connect_worker_connector_paused_task_count{{{w},connector="sink"}}'] == 1
    assert got[f'connect_worker_connector_failed_task_count{{{w},connector="src"}}'] == 1
    assert got[f'connect_worker_connector_total_task_count{{{w},connector="sink"}}'] == 2
    assert got[f'connect_sink_task_sink_record_read_total{{{w},connector="sink",task="0"}}'] == 12
    assert got[f'connect_source_task_source_record_poll_total{{{w},connector="src",task="0"}}'] == 3
    assert got[f'connect_worker_task_offset_commit_avg_time_ms{{{w},connector="src",task="0"}}'] == 2.5
    # Where each task's records are handled (issue 22); a task not running here has no placement.
    assert got[f'kconnect_task_placement{{{w},connector="sink",task="0",placement="worker"}}'] == 1
    assert got[f'kconnect_task_placement{{{w},connector="sink",task="1",placement="query"}}'] == 1
    assert not any(k.startswith("kconnect_task_placement") and 'connector="src"' in k for k in got)


def test_every_family_has_help_and_type_once() -> None:
    text = render(worker_families(FIGURES))
    helps = re.findall(r"^# HELP (\S+)", text, re.M)
    types = re.findall(r"^# TYPE (\S+) (counter|gauge)$", text, re.M)
    assert len(helps) == len(set(helps)) == len(types)
    assert [t[0] for t in types] == helps


def test_no_rebalance_yet_reports_nan_average_and_negative_time_since() -> None:
    fresh = WorkerFigures("w", ConnectProtocol.STATIC, -1, "", True, 0, 0.0, 0.0, None)
    got = samples(render(worker_families(fresh)))
    assert math.isnan(got['connect_worker_rebalance_rebalance_avg_time_ms{worker="w"}'])
    assert got['connect_worker_rebalance_time_since_last_rebalance_ms{worker="w"}'] == -1
    assert got['connect_worker_rebalance_rebalancing{worker="w"}'] == 1


def test_group_protocol_epochs_and_work_still_to_receive() -> None:
    figures = replace(
        FIGURES,
        group_protocol=GroupProtocol.CONNECT,
        reconciling=True,
        group_epoch=9,
        assignment_epoch=9,
        member_epoch=8,
        connectors_to_receive=1,
        tasks_to_receive=3,
    )
    got = samples(render(worker_families(figures)))
    w = 'worker="127.0.0.1:8083"'
    assert got[f'connect_worker_rebalance_group_protocol{{{w},protocol="connect"}}'] == 1
    assert got[f"connect_worker_rebalance_reconciling{{{w}}}"] == 1
    assert got[f"connect_worker_rebalance_group_epoch{{{w}}}"] == 9
    assert got[f"connect_worker_rebalance_assignment_epoch{{{w}}}"] == 9
    assert got[f"connect_worker_rebalance_member_epoch{{{w}}}"] == 8
    assert got[f"connect_worker_rebalance_connectors_to_receive{{{w}}}"] == 1
    assert got[f"connect_worker_rebalance_tasks_to_receive{{{w}}}"] == 3


def test_classic_worker_reports_no_epochs_and_nothing_to_receive() -> None:
    got = samples(render(worker_families(FIGURES)))
    w = 'worker="127.0.0.1:8083"'
    assert got[f'connect_worker_rebalance_group_protocol{{{w},protocol="classic"}}'] == 1
    assert got[f"connect_worker_rebalance_reconciling{{{w}}}"] == 0
    for name in ("group_epoch", "assignment_epoch", "member_epoch"):
        assert got[f"connect_worker_rebalance_{name}{{{w}}}"] == -1
    assert got[f"connect_worker_rebalance_connectors_to_receive{{{w}}}"] == 0
    assert got[f"connect_worker_rebalance_tasks_to_receive{{{w}}}"] == 0


def test_the_worker_view_reads_the_epochs_from_the_records_and_the_herder() -> None:
    herder = Herder("w1", ClusterConfigSnapshot())
    herder.group = GroupView(generation=3, member_id="m1", leader_id="m1", reconciling=True)
    herder.member_epoch = 7
    herder.pending = Assigned(frozenset({"c"}), frozenset({TaskId("c", 0), TaskId("c", 1)}))
    records = GroupState(
        "g", epoch=8, target=TargetAssignmentValue(7, (TargetMember("m1", 0, Assigned(), 2, b""),))
    )

    def figures(group: GroupState | None, protocol: GroupProtocol) -> WorkerFigures:
        v = view.read(
            "w1",
            "http://w1/",
            herder,
            view.WorkerMetrics(),
            None,
            {},
            group_records=group,
            group_protocol=protocol,
        )
        return view.figures(v, view.WorkerMetrics(), StatusState(), {}, ConnectProtocol.SESSIONED)

    f = figures(records, GroupProtocol.CONNECT)
    assert (f.group_protocol, f.reconciling) == (GroupProtocol.CONNECT, True)
    assert (f.group_epoch, f.assignment_epoch, f.member_epoch) == (8, 7, 7)
    assert (f.connectors_to_receive, f.tasks_to_receive) == (1, 2)
    none = figures(None, GroupProtocol.CLASSIC)
    assert (none.group_protocol, none.group_epoch, none.assignment_epoch) == (GroupProtocol.CLASSIC, -1, -1)
    no_target = figures(GroupState("g", epoch=2), GroupProtocol.CONNECT)
    assert (no_target.group_epoch, no_target.assignment_epoch) == (2, -1)


def test_label_values_are_escaped() -> None:
    text = render([Family("x", "gauge", 'a "b"\nc', (Sample("x", 1, (("l", 'q"\\\n'),)),))])
    assert 'x{l="q\\"\\\\\\n"} 1' in text
    assert '# HELP x a "b"\\nc' in text


def test_plugin_metrics_are_named_after_javas_plugins_group_with_every_tag_a_label() -> None:
    registry = PluginMetricsRegistry()
    task = registry.task("orders", 0)
    task.add_metric(task.metric_name("rows-written", "Rows written.", {"table.name": "t1"}), lambda: 12)
    other = registry.task("orders", 1)
    other.add_metric(other.metric_name("rows-written", "Rows written.", {"table.name": "t2"}), lambda: 3)
    connector = registry.connector("orders")
    connector.add_metric(connector.metric_name("tables", "", {"worker": "w9", "2nd": "x"}), lambda: 2.5)
    figures = replace(FIGURES, plugins=registry.snapshot())
    families = {f.name: f for f in worker_families(figures)}
    rows = families["plugins_rows_written"]
    assert (rows.kind, rows.help) == ("gauge", "Rows written.")
    assert len(rows.samples) == 2  # one family, one HELP/TYPE, a sample per task
    text = render(worker_families(figures))
    got = samples(text)
    w = 'worker="127.0.0.1:8083"'
    assert got[f'plugins_rows_written{{{w},connector="orders",task="0",table_name="t1"}}'] == 12
    assert got[f'plugins_rows_written{{{w},connector="orders",task="1",table_name="t2"}}'] == 3
    # A tag named like the worker label, or not a valid label name, still shows, renamed.
    assert got[f'plugins_tables{{{w},connector="orders",tag_worker="w9",tag_2nd="x"}}'] == 2.5
    assert "# HELP plugins_tables Plugin metric tables." in text
    assert text.count("# TYPE plugins_rows_written gauge") == 1


def test_plugin_metric_names_that_read_alike_once_sanitised_give_one_series() -> None:
    figures = replace(
        FIGURES,
        plugins=(
            PluginSample("a-b", "plugins", "first", (("connector", "c"),), 1.0),
            PluginSample("a.b", "plugins", "second", (("connector", "c"),), 2.0),
        ),
    )
    (family,) = [f for f in worker_families(figures) if f.name == "plugins_a_b"]
    assert [s.value for s in family.samples] == [1.0]


def test_no_plugin_metrics_no_plugin_families() -> None:
    assert not [f for f in worker_families(FIGURES) if f.name.startswith("plugins_")]


def test_a_watched_sink_task_reports_its_lag_last_progress_and_stall() -> None:
    watched = replace(
        FIGURES,
        tasks=(
            TaskFigures(
                "sink",
                0,
                State.RUNNING,
                placement="worker",
                sink_lag=42,
                last_progress_at=1_795_000_000.5,
                stalled=True,
                reestablished=2,
            ),
            TaskFigures("sink", 1, State.RUNNING, placement="query"),  # not watched: no series
        ),
    )
    got = samples(render(worker_families(watched)))
    t0 = 'worker="127.0.0.1:8083",connector="sink",task="0"'
    assert got[f"kconnect_sink_task_lag_records{{{t0}}}"] == 42
    assert got[f"kconnect_sink_task_last_progress_timestamp_seconds{{{t0}}}"] == 1_795_000_000.5
    assert got[f"kconnect_sink_task_stalled{{{t0}}}"] == 1
    assert got[f"kconnect_sink_task_reading_reestablished_total{{{t0}}}"] == 2
    assert not any(k.startswith("kconnect_sink_task_") and 'task="1"' in k for k in got)


def test_health_names_stalled_sink_tasks_and_stays_200() -> None:
    from kconnect.runtime.dataplane.executor import TaskCounters
    from kconnect.runtime.dataplane.stall_watch import Reading

    running = {
        TaskId("out", 0): TaskCounters(reading=Reading(10, 1.0, True, 8.04, ("t-0",), 1)),
        TaskId("out", 1): TaskCounters(reading=Reading(0, 1.0, False, 0.0, (), 0)),
        TaskId("out", 2): TaskCounters(
            reading=Reading(stalled=True, stalled_s=61.0, cause="NOT_COORDINATOR")
        ),
        TaskId("src", 0): TaskCounters(kind="source"),
    }
    stalled = view.stalled_sink_tasks(running)
    assert stalled == [
        {
            "connector": "out",
            "task": 0,
            "stalled_s": 8.0,
            "lag": 10,
            "partitions": ["t-0"],
            "reestablished": 1,
        },
        {
            "connector": "out",
            "task": 2,
            "stalled_s": 61.0,
            "lag": -1,
            "partitions": [],
            "reestablished": 0,
            "cause": "NOT_COORDINATOR",
        },
    ]
    status, body = view.health(None, True, 0.0, False, (), stalled)
    assert status == 200 and body["status"] == "healthy"
    assert body["stalled_sink_tasks"] == stalled
    assert "2 sink task(s) have read nothing" in str(body["message"])
    assert "stalled_sink_tasks" not in view.health(None, True, 0.0, False, (), [])[1]
