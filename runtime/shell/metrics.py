"""Prometheus metrics named after Apache Kafka Connect's JMX metrics.

Java exposes ``kafka.connect:type=connect-worker-rebalance-metrics`` attributes such as
``completed-rebalances-total``; a Prometheus JMX exporter turns those into
``connect_worker_rebalance_completed_rebalances_total``. kconnect serves the same names directly, so
dashboards built for Apache Kafka Connect find them: ``<group without -metrics>_<attribute>`` with dashes
as underscores, and the worker, connector and task as labels. Pure: the worker shell gathers a
:class:`WorkerFigures`, this module renders it in Prometheus' text exposition format (version 0.0.4).

KIP-877 plugin metrics (``runtime/plugins/plugin_metrics.py``) follow the same rule: Java registers them
as ``kafka.connect:type=plugins,<tags>`` with the metric's name as the attribute, so a metric ``records``
of task 0 of connector ``c`` is ``plugins_records{worker=...,connector="c",task="0"}``, every tag a label
(the worker's first). Names and label names keep ``[a-zA-Z0-9_]`` and turn anything else into ``_``; a
label name that would repeat an earlier one (``worker``, or two tags that read alike once sanitised) gets a
``tag_`` prefix. Their type is ``gauge``: a plugin metric does not say whether it only grows.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from kconnect.config.worker_keys import ConnectProtocol, GroupProtocol
from kconnect.runtime.group.protocol import ProtocolName
from kconnect.runtime.plugins.plugin_metrics import GROUP, PluginSample
from kconnect.runtime.storage.status_log import State

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Java's task states that its per-connector task counts distinguish (ConnectMetricsRegistry).
TASK_STATES = ("running", "paused", "failed", "unassigned", "destroyed", "restarting")


@dataclass(frozen=True, slots=True)
class Sample:
    """One line of the exposition: a metric name, its labels (ordered, so the output is
    stable) and its value."""

    name: str
    value: float
    labels: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class Family:
    """The samples of one metric name with the HELP and TYPE lines Prometheus expects once per name."""

    name: str
    kind: str  # "gauge" or "counter"
    help: str
    samples: tuple[Sample, ...]


@dataclass(frozen=True, slots=True)
class TaskFigures:
    """One task this worker owns as the task metrics need it: its state from the status topic and its
    counters from the executor, copied as plain values so that rendering is pure."""

    connector: str
    task: int
    state: State
    source_record_poll_total: int = 0
    sink_record_read_total: int = 0
    offset_commit_avg_time_ms: float = 0.0
    #: Where its records are handled (``executor.TaskCounters.placement``); empty while not running here.
    placement: str = ""
    #: A worker-read sink task's stall watch (``dataplane.stall_watch``): records behind the end of its
    #: partitions (-1: not known yet, or not such a task), the wall-clock time of its last progress (0.0:
    #: none), whether it is stalled now, and how often its reading was re-established.
    sink_lag: int = -1
    last_progress_at: float = 0.0
    stalled: bool = False
    reestablished: int = 0


@dataclass(frozen=True, slots=True)
class WorkerFigures:
    """A snapshot of the worker's rebalance, connector and task figures taken by the shell, so that
    :func:`worker_families` is a pure function of it."""

    worker: str
    #: The protocol the group selected, or before the first rebalance the worker's ``connect.protocol``.
    protocol: ProtocolName | ConnectProtocol
    epoch: int
    leader: str
    rebalancing: bool
    completed_rebalances: int
    rebalance_time_ms_total: float
    rebalance_time_ms_max: float
    time_since_last_rebalance_ms: float | None
    connectors: Mapping[str, State] = field(
        default_factory=dict
    )  # connector -> state, those this worker runs
    tasks: Sequence[TaskFigures] = ()
    connector_startup_attempts: int = 0
    connector_startup_successes: int = 0
    connector_startup_failures: int = 0
    task_startup_attempts: int = 0
    task_startup_successes: int = 0
    task_startup_failures: int = 0
    scheduled_delay_ms: int = 0
    #: ``group.protocol=connect`` (KIP-848 seed): the worker's setting, whether its generation runs by
    #: reconciliation, the group and assignment epochs in the group records (-1: none), the target epoch
    #: this worker last reconciled to (-1: none) and what its target share still has to give it.
    group_protocol: GroupProtocol = GroupProtocol.CLASSIC
    reconciling: bool = False
    group_epoch: int = -1
    assignment_epoch: int = -1
    member_epoch: int = -1
    connectors_to_receive: int = 0
    tasks_to_receive: int = 0
    #: KIP-877: the metrics this worker's plugins registered, as read now.
    plugins: Sequence[PluginSample] = ()


def _escape_help(value: str) -> str:
    # HELP text escapes backslash and line feed only; label values also escape the double quote.
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def _escape(value: str) -> str:
    return _escape_help(value).replace('"', '\\"')


def _number(value: float) -> str:
    if value != value:  # NaN, as Java reports an average over no samples
        return "NaN"
    if float(value).is_integer():
        return str(int(value))
    return repr(float(value))


def render(families: Iterable[Family]) -> str:
    """The text exposition format: HELP and TYPE once per family, then its samples."""
    lines: list[str] = []
    for family in families:
        lines.append(f"# HELP {family.name} {_escape_help(family.help)}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for s in family.samples:
            labels = ",".join(f'{k}="{_escape(v)}"' for k, v in s.labels)
            lines.append(
                f"{s.name}{{{labels}}} {_number(s.value)}" if labels else f"{s.name} {_number(s.value)}"
            )
    return "\n".join(lines) + "\n"


_INVALID = re.compile(r"[^a-zA-Z0-9_]")


def prometheus_name(group: str, name: str) -> str:
    """``<group without -metrics>_<attribute>``, with every character Prometheus does not allow as ``_``."""
    return _INVALID.sub("_", f"{group.removesuffix('-metrics')}_{name}")


def _label_name(tag: str, taken: set[str]) -> str:
    label = _INVALID.sub("_", tag) or "_"
    if label[0].isdigit() or label.startswith("__"):  # Prometheus reserves the double underscore
        label = "tag_" + label
    while label in taken:
        label = "tag_" + label
    taken.add(label)
    return label


def plugin_families(worker: str, samples: Iterable[PluginSample]) -> list[Family]:
    """The KIP-877 plugin metrics (see the module docstring), one family per Prometheus name; a second
    sample with the same name and labels (names that read alike once sanitised) is dropped, as Prometheus
    refuses a repeated series."""
    by_name: dict[str, tuple[str, list[Sample]]] = {}
    seen: set[tuple[str, tuple[tuple[str, str], ...]]] = set()
    for s in samples:
        name = prometheus_name(s.group or GROUP, s.name)
        taken = {"worker"}
        labels = (("worker", worker), *((_label_name(k, taken), v) for k, v in s.tags))
        if (name, labels) in seen:
            continue
        seen.add((name, labels))
        text = s.description or f"Plugin metric {s.name}."
        by_name.setdefault(name, (text, []))[1].append(Sample(name, s.value, labels))
    return [Family(name, "gauge", text, tuple(found)) for name, (text, found) in sorted(by_name.items())]


def worker_families(f: WorkerFigures) -> list[Family]:
    """Every metric family of one worker under Java's JMX-exporter names, so dashboards built for Apache Kafka
    Connect read kconnect unchanged. Task counts per connector and state always list every state (zeros too),
    as Java's registry does."""
    w = (("worker", f.worker),)
    rb = "connect_worker_rebalance_"
    wk = "connect_worker_"

    def one(name: str, kind: str, text: str, value: float, labels: tuple[tuple[str, str], ...] = w) -> Family:
        return Family(name, kind, text, (Sample(name, value, labels),))

    avg = f.rebalance_time_ms_total / f.completed_rebalances if f.completed_rebalances else float("nan")
    families = [
        one(
            rb + "completed_rebalances_total",
            "counter",
            "Rebalances this worker completed.",
            f.completed_rebalances,
        ),
        one(rb + "rebalance_avg_time_ms", "gauge", "Average time of this worker's rebalances.", avg),
        one(
            rb + "rebalance_max_time_ms",
            "gauge",
            "Longest rebalance of this worker.",
            f.rebalance_time_ms_max,
        ),
        one(rb + "rebalancing", "gauge", "1 while this worker is rebalancing.", 1 if f.rebalancing else 0),
        one(rb + "epoch", "gauge", "The group generation this worker is in.", f.epoch),
        one(
            rb + "time_since_last_rebalance_ms",
            "gauge",
            "Time since this worker's last completed rebalance.",
            -1 if f.time_since_last_rebalance_ms is None else f.time_since_last_rebalance_ms,
        ),
        one(
            rb + "scheduled_delay_ms",
            "gauge",
            "kconnect: the scheduled rebalance delay of the last assignment (0: none).",
            f.scheduled_delay_ms,
        ),
        Family(
            rb + "connect_protocol",
            "gauge",
            "The Connect protocol of the group (label).",
            (Sample(rb + "connect_protocol", 1, (*w, ("protocol", f.protocol))),),
        ),
        Family(
            rb + "group_protocol",
            "gauge",
            "kconnect: the worker's group.protocol, classic or connect (label).",
            (Sample(rb + "group_protocol", 1, (*w, ("protocol", f.group_protocol))),),
        ),
        one(
            rb + "reconciling",
            "gauge",
            "kconnect: 1 while this worker's generation runs by reconciliation (group.protocol=connect).",
            1 if f.reconciling else 0,
        ),
        one(
            rb + "group_epoch",
            "gauge",
            "kconnect: the group epoch in the group records (-1: none).",
            f.group_epoch,
        ),
        one(
            rb + "assignment_epoch",
            "gauge",
            "kconnect: the target assignment's epoch in the group records (-1: none).",
            f.assignment_epoch,
        ),
        one(
            rb + "member_epoch",
            "gauge",
            "kconnect: the target epoch this worker last reconciled to (-1: none).",
            f.member_epoch,
        ),
        one(
            rb + "connectors_to_receive",
            "gauge",
            "kconnect: connectors this worker's target share still has to give it.",
            f.connectors_to_receive,
        ),
        one(
            rb + "tasks_to_receive",
            "gauge",
            "kconnect: tasks this worker's target share still has to give it.",
            f.tasks_to_receive,
        ),
        Family(
            rb + "leader_name",
            "gauge",
            "The group leader (label).",
            (Sample(rb + "leader_name", 1, (*w, ("leader", f.leader))),),
        ),
        one(wk + "connector_count", "gauge", "Connectors this worker runs.", len(f.connectors)),
        one(wk + "task_count", "gauge", "Tasks this worker runs.", len(f.tasks)),
        one(
            wk + "connector_startup_attempts_total",
            "counter",
            "Connector starts attempted.",
            f.connector_startup_attempts,
        ),
        one(
            wk + "connector_startup_success_total",
            "counter",
            "Connector starts that succeeded.",
            f.connector_startup_successes,
        ),
        one(
            wk + "connector_startup_failure_total",
            "counter",
            "Connector starts that failed.",
            f.connector_startup_failures,
        ),
        one(wk + "task_startup_attempts_total", "counter", "Task starts attempted.", f.task_startup_attempts),
        one(
            wk + "task_startup_success_total",
            "counter",
            "Task starts that succeeded.",
            f.task_startup_successes,
        ),
        one(
            wk + "task_startup_failure_total", "counter", "Task starts that failed.", f.task_startup_failures
        ),
    ]
    by_connector: dict[str, Counter[str]] = {}
    for t in f.tasks:
        by_connector.setdefault(t.connector, Counter())[t.state.lower()] += 1
    for name in f.connectors:
        by_connector.setdefault(name, Counter())
    total = [
        Sample(wk + "connector_total_task_count", sum(c.values()), (*w, ("connector", n)))
        for n, c in sorted(by_connector.items())
    ]
    families.append(
        Family(
            wk + "connector_total_task_count", "gauge", "Tasks of the connector on this worker.", tuple(total)
        )
    )
    for state in TASK_STATES:
        name = f"{wk}connector_{state}_task_count"
        samples = tuple(
            Sample(name, c[state], (*w, ("connector", n))) for n, c in sorted(by_connector.items())
        )
        families.append(
            Family(name, "gauge", f"Tasks of the connector on this worker that are {state}.", samples)
        )

    def per_task(name: str, kind: str, text: str, attr: str, group: str) -> Family:
        full = f"{group}{name}"
        return Family(
            full,
            kind,
            text,
            tuple(
                Sample(full, getattr(t, attr), (*w, ("connector", t.connector), ("task", str(t.task))))
                for t in f.tasks
            ),
        )

    families.append(
        per_task(
            "source_record_poll_total",
            "counter",
            "Records the source task polled.",
            "source_record_poll_total",
            "connect_source_task_",
        )
    )
    families.append(
        per_task(
            "sink_record_read_total",
            "counter",
            "Records the sink task read.",
            "sink_record_read_total",
            "connect_sink_task_",
        )
    )
    families.append(
        per_task(
            "offset_commit_avg_time_ms",
            "gauge",
            "Average offset commit latency.",
            "offset_commit_avg_time_ms",
            "connect_worker_task_",
        )
    )
    placed = tuple(
        Sample(
            "kconnect_task_placement",
            1,
            (*w, ("connector", t.connector), ("task", str(t.task)), ("placement", t.placement)),
        )
        for t in f.tasks
        if t.placement
    )
    families.append(
        Family(
            "kconnect_task_placement",
            "gauge",
            "Where the task's records are handled: worker (a thread of this worker), query (a Structured "
            "Streaming query) or executor (a thread of a source host: a long-running Spark job on an "
            "executor).",
            placed,
        )
    )
    watched = [t for t in f.tasks if t.last_progress_at > 0]

    def watch_family(name: str, kind: str, text: str, value: Callable[[TaskFigures], float]) -> Family:
        return Family(
            name,
            kind,
            text,
            tuple(
                Sample(name, value(t), (*w, ("connector", t.connector), ("task", str(t.task))))
                for t in watched
            ),
        )

    families.append(
        watch_family(
            "kconnect_sink_task_lag_records",
            "gauge",
            "Records past the sink task's position in its partitions (from ListOffsets, the last stable "
            "offset under read_committed), as its stall watch last looked; worker-read sink tasks.",
            lambda t: t.sink_lag,
        )
    )
    families.append(
        watch_family(
            "kconnect_sink_task_last_progress_timestamp_seconds",
            "gauge",
            "When the sink task's position last moved (or its watch started), seconds since the epoch.",
            lambda t: t.last_progress_at,
        )
    )
    families.append(
        watch_family(
            "kconnect_sink_task_stalled",
            "gauge",
            "1 while the sink task is behind and has not moved for sink.task.stall.timeout.ms.",
            lambda t: 1 if t.stalled else 0,
        )
    )
    families.append(
        watch_family(
            "kconnect_sink_task_reading_reestablished_total",
            "counter",
            "Times the worker re-established the sink task's stalled reading.",
            lambda t: t.reestablished,
        )
    )
    families.extend(plugin_families(f.worker, f.plugins))
    return families
