"""Issue 25 item 5 live: the leader is SIGKILLed while a worker learns tasks, and the new leader carries on
from the group records: learners keep learning (same learner, same ``since_ms``) or are dropped, and no
task is ever active on two workers.

Three real workers (the product's ``kconnect worker``) on the session's Apache Kafka broker, three
pipelines of a slow-preparing FileStream source and sink (a plugin in ``plugin.path``, below) fed a line
every 100 ms each. L starts first and leads; A joins; the pipelines run; then B joins and is given
learners. The plugin's task constructor blocks while a *gate* file exists, but only on the worker's
preparation thread (``prepare-<task>``, ``runtime/shell/tasks.py``), so B's learners cannot get ready
until the test opens the gate, while every cold start (on the herder's thread) stays quick. With B's
preparations stuck in the gate, L is SIGKILLed; once a new leader has written its first target, the gate
opens and the group settles.

Which learners survive the fail-over is the assignor's call, and the model
(``tests/unit/test_warmup_model.py``, ``ReconcileModel``) predicts it; the two tests cover both outcomes:

* ``test_a_new_leader_resumes_warm_ups_from_the_records``: L is a static worker (KIP-987) running one
  sink task. B learns two of A's tasks; L's death only adds L's task to B's share (it moves at once: its
  owner is gone), so the new leader's first target keeps B's two learners exactly as they were, B gets
  them ready once the gate opens, the new leader promotes them, and B starts them from its preparations.
* ``test_a_dead_leaders_share_overtakes_the_warm_ups_and_nothing_runs_twice``: L is a wildcard worker
  running its share. The incremental cooperative assignor gives B the dead leader's share, which balances
  the group: a learner of a task of A's is dropped (A keeps the task), and a learner of a task of L's has
  no owner to hand over from and moves the plain way (cold), whatever its preparation was doing.

Both check, over the group records' whole history, that no target puts a task in two shares or a
learner's task in its own share (and print any task two members' current-assignment records list at once:
the reconciler allows a claim racing another, starting only the first, so that is reported, not failed);
over the status topic's history that no task was RUNNING on two live workers at
once; from the logs that each task A handed over stopped on A before it started on B; that every task
ends RUNNING on exactly one worker; and that no line is lost: a pipeline none of whose tasks ran on L gets
every line once and in order, one with a task on L may repeat lines (at least once: L's last source
offsets or sink commits died with it), which the test counts and prints.
"""

from __future__ import annotations

import contextlib
import datetime
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kconnect.runtime.cli.broker import free_port
from kconnect.runtime.group import group_records, protocol
from tests.integration.test_reconciliation import _overlaps, _status_history
from tests.integration.test_warmup_handover import (
    Feeder,
    _all_running,
    _cold_starts,
    _continuity,
    _events,
    _held_tasks,
    _prepared_starts,
    pipeline_files,
)
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, topic_names, wait_until, worker_properties
from tests.support.plugin_sources import one_task_connector

pytestmark = pytest.mark.integration

PIPELINES = 3
#: How long the plugin's gate holds a preparation at most, should the test die without opening it.
GATE_MAX_S = 90

#: FileStream tasks whose constructor waits while the gate file exists, on a preparation thread only.
SLOW_PLUGIN = r"""
import os
import threading
import time

from kconnect.connectors import file as _file

GATE = {gate!r}
GATE_MAX_S = {gate_max_s!r}


def _gate():
    # Only a learner's preparation (the worker runs it on a thread named prepare-<task>) waits: a cold
    # start instantiates the task on the herder's thread, which must not block.
    name = threading.current_thread().name
    if not name.startswith("prepare-") or not os.path.exists(GATE):
        return
    with open(GATE + ".entered", "a") as out:
        out.write(f"{{os.getpid()}} {{name[len('prepare-'):]}} {{time.time()}}\n")
    deadline = time.monotonic() + GATE_MAX_S
    while os.path.exists(GATE) and time.monotonic() < deadline:
        time.sleep(0.05)


class SlowFileSourceTask(_file.FileStreamSourceTask):
    def __init__(self):
        _gate()
        super().__init__()

    def version(self):
        return "1.0"


class SlowFileSinkTask(_file.FileStreamSinkTask):
    def __init__(self):
        _gate()
        super().__init__()

    def version(self):
        return "1.0"
"""


def _plugin(gate: Path) -> str:
    return (
        SLOW_PLUGIN.format(gate=str(gate), gate_max_s=GATE_MAX_S)
        + one_task_connector("Source", "SlowFileSourceTask", "SlowFileSourceConnector")
        + one_task_connector("Sink", "SlowFileSinkTask", "SlowFileSinkConnector")
    )


# ----------------------------------------------------------------------------- the group records


@dataclass(frozen=True)
class Target:
    """One target-assignment record as the checks need it."""

    offset: int
    epoch: int
    #: The member id of the leader that wrote it (every member's Connect assignment names it).
    leader: str | None
    shares: dict[str, frozenset[str]]
    #: member -> task -> since_ms
    learners: dict[str, dict[str, int]]


@dataclass
class History:
    targets: list[Target] = field(default_factory=list)
    #: Problems found while folding the members' current-assignment records in order.
    current_overlaps: list[str] = field(default_factory=list)
    #: task -> members whose record said the learner was ready
    ready: dict[str, set[str]] = field(default_factory=dict)


def _group_history(bootstrap: str, topic: str, group: str) -> History:
    """Read the group-records topic from its start, in order (a group's records share one partition)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"h-{uuid.uuid4().hex}"})
    history = History()
    current: dict[str, frozenset[str]] = {}
    try:
        partition = group_records.partition_for(
            group, len(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        )
        end = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)[1]
        consumer.assign([TopicPartition(topic, partition, 0)])
        seen = 0
        deadline = time.monotonic() + 30
        while seen < end and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() or msg.key() is None:
                continue
            seen = msg.offset() + 1
            key = group_records.decode_key(msg.key())
            if getattr(key, "group_id", None) != group:
                continue
            raw = msg.value()
            if isinstance(key, group_records.CurrentMemberAssignmentKey):
                if raw is None:
                    current.pop(key.member_id, None)
                    continue
                value = group_records.decode_value(key, raw)
                assert isinstance(value, group_records.CurrentMemberAssignmentValue)
                current[key.member_id] = frozenset(str(t) for t in value.assigned.tasks)
                for x in value.learners:
                    if x.ready:
                        history.ready.setdefault(str(x.task), set()).add(key.member_id)
                owners: dict[str, str] = {}
                for member, tasks in sorted(current.items()):
                    for task in tasks:
                        if task in owners:
                            history.current_overlaps.append(
                                f"offset {msg.offset()}: {task} in the records of {owners[task]} and {member}"
                            )
                        owners[task] = member
            elif isinstance(key, group_records.TargetAssignmentKey) and raw is not None:
                value = group_records.decode_value(key, raw)
                assert isinstance(value, group_records.TargetAssignmentValue)
                leaders = {protocol.decode_assignment(m.metadata).leader for m in value.members if m.metadata}
                history.targets.append(
                    Target(
                        offset=msg.offset(),
                        epoch=value.assignment_epoch,
                        leader=next(iter(leaders)) if len(leaders) == 1 else None,
                        shares={
                            m.member_id: frozenset(str(t) for t in m.assigned.tasks) for m in value.members
                        },
                        learners={
                            m.member_id: {str(x.task): x.since_ms for x in m.learners} for m in value.members
                        },
                    )
                )
        assert seen >= end, f"read {seen} of {end} group records"
    finally:
        consumer.close()
    return history


def _target_problems(targets: list[Target]) -> list[str]:
    """A task in two shares, or a learner's task not in exactly one *other* member's share."""
    found = []
    for t in targets:
        owners: dict[str, list[str]] = {}
        for member, tasks in t.shares.items():
            for task in tasks:
                owners.setdefault(task, []).append(member)
        found += [f"epoch {t.epoch}: {task} in {who}" for task, who in owners.items() if len(who) > 1]
        for member, learning in t.learners.items():
            for task in learning:
                if owners.get(task, []) == [member] or len(owners.get(task, [])) != 1:
                    found.append(f"epoch {t.epoch}: {member} learns {task}, owned by {owners.get(task)}")
    return found


# ----------------------------------------------------------------------------- the scenario


def _timestamp(event: dict[str, Any]) -> float:
    return datetime.datetime.fromisoformat(event["timestamp"]).timestamp()


def _entered(gate: Path, pid: int) -> set[str]:
    """The tasks whose preparation process ``pid`` holds in the gate (or held)."""
    marker = gate.parent / (gate.name + ".entered")
    if not marker.exists():
        return set()
    out = set()
    for line in marker.read_text().splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[0] == str(pid):
            out.add(parts[1])
    return out


def _view_learners(worker: WorkerProcess, member: str) -> dict[str, tuple[int, bool]]:
    """``GET /group``: the learners the target asks ``member`` for (task -> since_ms, ready in its record)."""
    with contextlib.suppress(Exception):
        body = worker.get("/group").json()
        ready = {
            x["task"]
            for c in body.get("current") or []
            if c["member_id"] == member
            for x in c["learners"]
            if x["is_ready"]
        }
        for m in (body.get("target") or {}).get("members", []):
            if m["member_id"] == member:
                return {x["task"]: (x["since_ms"], x["task"] in ready) for x in m["learners"]}
    return {}


def _target_shares(worker: WorkerProcess) -> dict[str, set[str]] | None:
    """``GET /group``: each member's share of the target (tasks); None while the target has learners."""
    with contextlib.suppress(Exception):
        members = worker.get("/group").json()["target"]["members"]
        if not any(m["learners"] for m in members):
            return {m["member_id"]: set(m["tasks"]) for m in members}
    return None


def _both_held(x: WorkerProcess, y: WorkerProcess) -> tuple[set[str], set[str]] | None:
    held_x, held_y = _held_tasks(x), _held_tasks(y)
    return None if held_x is None or held_y is None else (held_x, held_y)


@dataclass
class Outcome:
    """What happened, for the assertions of each test and the printed summary."""

    before: dict[str, int]  # B's learners when L was killed: task -> since_ms
    after: dict[str, int]  # B's learners in the new leader's first target
    on_l: set[str]  # the tasks L ran when it was killed
    on_a: set[str]
    resumed: set[str]
    dropped: set[str]
    b_prepared: set[str]  # tasks B started from a preparation
    b_cold: set[str]
    b_final: set[str]
    a_final: set[str]
    timings: dict[str, float]
    repeats: dict[str, int]
    #: Tasks listed in two members' current-assignment records at once (a claim racing another is allowed
    #: by the reconciler, which starts only the one listed first; reported, not asserted).
    record_overlaps: list[str]


def _scenario(tmp_path: Path, broker: Broker, *, static_leader: bool) -> Outcome:
    group, topics, sources, sinks = pipeline_files(tmp_path, broker.bootstrap, "warmfo", PIPELINES)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    gate = tmp_path / "gate"
    (plugins / "slow_file.py").write_text(_plugin(gate))

    def props(**extra: Any) -> dict[str, str]:
        return worker_properties(
            broker.bootstrap,
            group,
            free_port(),
            group_protocol="connect",
            key_converter="org.apache.kafka.connect.storage.StringConverter",
            value_converter="org.apache.kafka.connect.storage.StringConverter",
            offset_flush_interval_ms=1000,
            spark_master="local[2]",
            plugin_path=str(plugins),
            # The dead leader's work is given out at once: the new leader's first target decides every
            # learner's fate (with a delay, that target would hold the lost work back and move nothing).
            scheduled_rebalance_max_delay_ms=0,
            max_warmup_tasks=2,
            # Well past the time the gate holds B's preparations: no learner is dropped for being slow.
            task_warmup_timeout_ms=60000,
            **extra,
        )

    leader_props = props(static_tasks="sink-0-0") if static_leader else props()
    lw = WorkerProcess(tmp_path, leader_props, name="warmfo-l", spark=True).start()
    a: WorkerProcess | None = None
    b: WorkerProcess | None = None
    feeder = Feeder(sources)
    records = topic_names(group)["group.records.storage.topic"]
    status = topic_names(group)["status.storage.topic"]
    timings: dict[str, float] = {}
    began = time.monotonic()
    try:
        wait_until(lambda: (lw.workers() or {}).get("generation", -1) >= 0, 60, "worker L to join")
        a = aw = WorkerProcess(tmp_path, props(), name="warmfo-a", spark=True).start()
        view = wait_until(stable_view([lw, a], 2), 90, "L and A in one group")
        l_self = (lw.workers() or {})["this_worker"]
        assert view["leader"] == l_self["member_id"], f"L started first but does not lead: {view}"
        names: set[str] = set()
        for i in range(PIPELINES):
            for name, config in (
                (f"src-{i}", {"connector.class": "SlowFileSourceConnector", "topic": topics[i]}),
                (f"sink-{i}", {"connector.class": "SlowFileSinkConnector", "topics": topics[i]}),
            ):
                config["file"] = str(sources[i] if name.startswith("src") else sinks[i])
                resp = lw.request("POST", "/connectors", json={"name": name, "config": config})
                assert resp.status_code == 201, resp.text
                names.add(name)
        wait_until(lambda: _all_running(lw, names), 60, "every task RUNNING on L and A")
        if static_leader:
            assert _held_tasks(lw) == {"sink-0-0"}, "the static leader runs its one task"
        feeder.start()
        wait_until(
            lambda: all(p.exists() and p.read_text().count("\n") >= 10 for p in sinks), 30, "lines flowing"
        )
        timings["pipelines running"] = time.monotonic() - began

        # B joins with the gate closed: what it learns stays unready.
        gate.write_text("closed\n")
        b = bw = WorkerProcess(tmp_path, props(), name="warmfo-b", spark=True).start()
        assert bw.proc is not None
        b_pid = bw.proc.pid
        b_member = wait_until(
            lambda: ((bw.workers() or {}).get("this_worker") or {}).get("member_id"), 60, "B's member id"
        )

        def learning() -> dict[str, int] | None:
            asked = _view_learners(lw, b_member)
            if not asked or any(ready for _since, ready in asked.values()):
                return None
            if not set(asked) <= _entered(gate, b_pid):
                return None
            return {task: since for task, (since, _ready) in asked.items()}

        before = wait_until(learning, 60, "B's learners, their preparations held in the gate")
        on_l, on_a = wait_until(lambda: _both_held(lw, aw), 30, "what L and A run")
        a_member = ((aw.workers() or {}).get("this_worker") or {})["member_id"]
        assert not on_l & on_a
        assert not set(before) & (_held_tasks(bw) or set()), "B runs a task it learns"
        timings["B learning"] = time.monotonic() - began

        # The leader dies mid-warm-up.
        killed_at = time.time()
        lw.kill()
        dead = {l_self["id"]}
        survivors = [aw, bw]
        view = wait_until(stable_view(survivors, 2), 90, "A and B in one group")
        new_leader = view["leader"]
        timings["new leader"] = time.monotonic() - began

        def first_target() -> Target | None:
            for t in _group_history(broker.bootstrap, records, group).targets:
                if t.leader == new_leader:
                    return t
            return None

        first = wait_until(first_target, 60, "the new leader's first target", interval=1)
        after = first.learners.get(b_member, {})
        timings["new leader's target"] = time.monotonic() - began
        # Before the gate opens: nothing B learns may run anywhere but on its old owner.
        assert not set(after) & (_held_tasks(bw) or set()), "B runs a task it still learns"

        gate.unlink()
        opened = time.monotonic()

        def settled() -> tuple[set[str], set[str]] | None:
            """A target without learners that A and B both run exactly, every task in it, all RUNNING."""
            shares = _target_shares(aw)
            held = _both_held(aw, bw)
            if shares is None or held is None or set(shares) != {a_member, b_member}:
                return None
            if held != (shares[a_member], shares[b_member]) or held[0] & held[1]:
                return None
            if held[0] | held[1] != {f"{n}-0" for n in names}:
                return None
            return held if _all_running(aw, names) else None

        a_final, b_final = wait_until(settled, 90, "every task RUNNING on A or B, no learner left")
        timings["settled"] = time.monotonic() - began
        timings["gate open to settled"] = time.monotonic() - opened
        time.sleep(2)  # lines flowing through the survivors
        feeder.stop()

        # -- the group records, the status topic and the logs: never two active owners --------------
        history = _group_history(broker.bootstrap, records, group)
        assert not _target_problems(history.targets), _target_problems(history.targets)
        assert not _overlaps(_status_history(broker.bootstrap, status), dead)

        resumed = {t for t, since in before.items() if after.get(t) == since}
        dropped = set(before) - set(after)
        assert set(after) <= set(before), f"the new leader asked B to learn anew: {before} -> {after}"
        assert resumed | dropped == set(before), f"a learner changed its since_ms: {before} -> {after}"
        for t in dropped:
            assert sum(t in share for share in first.shares.values()) == 1, (t, first.shares)

        b_prepared, b_cold = _prepared_starts(bw), _cold_starts(bw)
        assert resumed <= b_prepared, "a resumed learner was not started from its preparation"
        assert not b_prepared & b_cold
        assert b_prepared <= resumed, "B activated a preparation of a learner the new leader dropped"
        assert "it starts cold" not in bw.log_text(), "an activation found no preparation held"
        assert resumed <= history.ready.keys() and all(history.ready[t] == {b_member} for t in resumed)

        started_on_b = {f"{e['connector']}-{e['task']}": _timestamp(e) for e in _events(bw, "task started")}
        stopped_on_a: dict[str, float] = {}
        for e in _events(aw, "task stopped"):
            stopped_on_a[f"{e['connector']}-{e['task']}"] = _timestamp(e)
        for task, started in started_on_b.items():
            if task in on_a:
                assert stopped_on_a.get(task, started) < started, (task, stopped_on_a.get(task), started)
            else:
                assert task in on_l and started > killed_at, (task, started, killed_at)

        # -- the data: nothing lost; repeats only where L ran a task ----------------------------------
        repeats: dict[str, int] = {}
        for i, sink in enumerate(sinks):
            expected = [f"p{i}-{n}" for n in range(feeder.written)]
            wait_until(
                lambda sink=sink, expected=expected: set(expected) <= set(sink.read_text().splitlines()),
                30,
                f"every line in {sink.name}",
            )
            lines = sink.read_text().splitlines()
            repeats[sink.name] = len(lines) - len(set(lines))
            if {f"src-{i}-0", f"sink-{i}-0"} & on_l:  # at least once: each line, first seen in order
                first_seen = list(dict.fromkeys(lines))
                assert first_seen == expected, f"{sink.name}: {_continuity(first_seen, expected)}"
            else:
                problem = _continuity(lines, expected)
                assert not problem, f"{sink.name} (no task on L): {problem}"
        return Outcome(
            before=before,
            after=after,
            on_l=on_l,
            on_a=on_a,
            resumed=resumed,
            dropped=dropped,
            b_prepared=b_prepared,
            b_cold=b_cold,
            b_final=b_final,
            a_final=a_final,
            timings={k: round(v, 1) for k, v in timings.items()},
            repeats=repeats,
            record_overlaps=history.current_overlaps,
        )
    finally:
        feeder.stop()
        with contextlib.suppress(FileNotFoundError):
            gate.unlink()
        for w in (lw, a, b):
            if w is not None and w.alive():
                w.kill()


def _report(outcome: Outcome, say: Callable[[str], None] = print) -> None:
    say(
        f"learners before the kill {outcome.before}, in the new leader's first target {outcome.after}; "
        f"resumed {sorted(outcome.resumed)}, dropped {sorted(outcome.dropped)}; "
        f"L ran {sorted(outcome.on_l)}, A ran {sorted(outcome.on_a)}; "
        f"B started prepared {sorted(outcome.b_prepared)}, cold {sorted(outcome.b_cold)}; "
        f"final A {sorted(outcome.a_final)} B {sorted(outcome.b_final)}; "
        f"repeated lines {outcome.repeats}; tasks in two current records {outcome.record_overlaps}; "
        f"timings (s from start) {outcome.timings}"
    )


def test_a_new_leader_resumes_warm_ups_from_the_records(tmp_path: Path, broker: Broker) -> None:
    outcome = _scenario(tmp_path, broker, static_leader=True)
    _report(outcome)
    assert len(outcome.before) == 2 and outcome.before.keys() <= outcome.on_a, "B learns two of A's tasks"
    assert outcome.resumed == set(outcome.before), "the new leader kept B's learners as they were"
    assert outcome.b_prepared == outcome.resumed
    assert outcome.b_cold == {"sink-0-0"}, "the dead leader's task moved to B at once, cold"
    assert outcome.b_final == outcome.resumed | {"sink-0-0"}
    assert all(outcome.repeats[f"out-{i}.txt"] == 0 for i in range(1, PIPELINES))


def test_a_dead_leaders_share_overtakes_the_warm_ups_and_nothing_runs_twice(
    tmp_path: Path, broker: Broker
) -> None:
    outcome = _scenario(tmp_path, broker, static_leader=False)
    _report(outcome)
    assert len(outcome.before) == 2, "B learns two tasks"
    # The dead leader's tasks have no owner to hand over from: none of them is still learned.
    assert not set(outcome.after) & outcome.on_l
    # B takes the dead leader's share (cold), which balances the group: A keeps what B was learning.
    assert outcome.dropped == set(outcome.before), "the model's prediction (ReconcileModel)"
    assert outcome.b_cold == outcome.on_l == outcome.b_final and not outcome.b_prepared
