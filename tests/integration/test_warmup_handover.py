"""The warm-up hand-over live (issue 25): tasks that move under ``group.protocol=connect`` are learned by
their new worker first, and handed over once it is ready, with data flowing through them.

Two real workers (the product's ``kconnect worker``, FileStream pipelines: no SparkSession, sink tasks
are consumer loops) on the session's Apache Kafka broker. Worker A runs two pipelines (a source and a sink
connector each, one task each) fed a line every 100 ms each; then:

1. **scale-out**: worker B joins. The two tasks that move to it pass through learners: ``GET /group``
   shows them in the target, then ready in B's record, and B starts them from their preparation (its log
   says ``prepared``), while A keeps running them until then;
2. **graceful scale-down**: A gets SIGTERM. Its two tasks are learned by B (learners, ready, started from
   the preparation) before A leaves.

Throughout, every line written into a source file reaches its sink file exactly once and in order.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from kconnect.runtime.group import group_records
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, topic_names, wait_until, worker_properties

pytestmark = pytest.mark.integration

PIPELINES = 2
LINE_EVERY_S = 0.1


class Feeder(threading.Thread):
    """Appends a numbered line to every source file every ``LINE_EVERY_S``."""

    def __init__(self, sources: list[Path]) -> None:
        super().__init__(daemon=True, name="feeder")
        self.sources = sources
        self.written = 0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(LINE_EVERY_S):
            for i, path in enumerate(self.sources):
                with path.open("a") as out:
                    out.write(f"p{i}-{self.written}\n")
            self.written += 1

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


@dataclass
class LearnerHistory:
    """Every learner the group records ever listed: in a target (asked for), and ready in a member's
    current-assignment record, with the member that learned it."""

    targeted: dict[str, set[str]] = field(default_factory=dict)  # task -> members asked to learn it
    ready: dict[str, set[str]] = field(default_factory=dict)  # task -> members that said it was ready


def _learner_history(bootstrap: str, topic: str, group: str) -> LearnerHistory:
    """Read the group-records topic from its start (learners come and go within a fraction of a second:
    ``GET /group``, which shows the latest state, rarely catches one; the records' history keeps them)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"h-{uuid.uuid4().hex}"})
    history = LearnerHistory()
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        seen = dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + 30
        while any(seen[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error() or msg.key() is None:
                continue
            seen[msg.partition()] = msg.offset() + 1
            key = group_records.decode_key(msg.key())
            if getattr(key, "group_id", None) != group or msg.value() is None:
                continue
            value = group_records.decode_value(key, msg.value())
            if isinstance(value, group_records.TargetAssignmentValue):
                for member in value.members:
                    for x in member.learners:
                        history.targeted.setdefault(str(x.task), set()).add(member.member_id)
            elif isinstance(value, group_records.CurrentMemberAssignmentValue):
                assert isinstance(key, group_records.CurrentMemberAssignmentKey)
                for x in value.learners:
                    if x.ready:
                        history.ready.setdefault(str(x.task), set()).add(key.member_id)
    finally:
        consumer.close()
    return history


def _events(worker: WorkerProcess, event: str) -> list[dict[str, Any]]:
    out = []
    for line in worker.log_text().splitlines():
        if f'"event": "{event}"' in line:
            try:
                out.append(json.loads(line[line.index("{") :]))
            except ValueError:
                continue
    return out


def _prepared_starts(worker: WorkerProcess) -> set[str]:
    """The tasks ``worker`` started from a preparation."""
    return {
        f"{e['connector']}-{e['task']}" for e in _events(worker, "task started") if e.get("prepared") is True
    }


def _cold_starts(worker: WorkerProcess) -> set[str]:
    return {
        f"{e['connector']}-{e['task']}" for e in _events(worker, "task started") if e.get("prepared") is False
    }


def _held_tasks(worker: WorkerProcess) -> set[str] | None:
    view = worker.workers()
    if view is None or view["this_worker"]["rebalancing"]:
        return None
    return set(view["this_worker"]["assignment"]["tasks"])


def _all_running(worker: WorkerProcess, names: set[str]) -> bool:
    resp = worker.get("/connectors?expand=status")
    if resp.status_code != 200 or set(resp.json()) != names:
        return False
    for entry in resp.json().values():
        status = entry["status"]
        if status["connector"]["state"] != "RUNNING" or not status["tasks"]:
            return False
        if any(t["state"] != "RUNNING" for t in status["tasks"]):
            return False
    return True


def _assert_learned(
    tasks: set[str], member: str, history: LearnerHistory, old: WorkerProcess, new: WorkerProcess
) -> None:
    """Each of ``tasks`` was a learner of ``member`` (the new worker) alone, which said it was ready, and
    the new worker had prepared it before the old worker stopped it (one clock: both run here)."""
    prepared = {e["task"]: e["timestamp"] for e in _events(new, "task prepared")}
    stopped = {f"{e['connector']}-{e['task']}": e["timestamp"] for e in _events(old, "task stopped")}
    for task in tasks:
        assert history.targeted.get(task) == {member} == history.ready.get(task), (task, history)
        assert prepared[task] < stopped[task], (task, prepared[task], stopped[task])


def _continuity(lines: list[str], expected: list[str]) -> str:
    """What is wrong with a sink file's lines against what was written: "" when they are the same."""
    if lines == expected:
        return ""
    seen = set(lines)
    missing = [x for x in expected if x not in seen]
    repeated = len(lines) - len(seen)
    extra = sorted(seen - set(expected))
    return (
        f"{len(missing)} missing (first {missing[:5]}), {repeated} repeated, {len(extra)} unexpected "
        f"{extra[:5]}" + ("; out of order" if not missing and not repeated and not extra else "")
    )


def pipeline_files(
    workdir: Path, bootstrap: str, prefix: str, count: int
) -> tuple[str, list[str], list[Path], list[Path]]:
    """A fresh group name, ``count`` one-partition topics, and empty source files with their sink paths."""
    tag = uuid.uuid4().hex[:6]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    topics = [f"{prefix}-{tag}-{i}" for i in range(count)]
    for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics]).values():
        future.result(30)
    sources = [workdir / f"in-{i}.txt" for i in range(count)]
    for path in sources:
        path.write_text("")
    return f"{prefix}-{tag}", topics, sources, [workdir / f"out-{i}.txt" for i in range(count)]


def test_moving_tasks_are_learned_first_and_no_line_is_lost_or_repeated(
    tmp_path: Path, broker: Broker
) -> None:
    workdir = tmp_path
    group, topics, sources, sinks = pipeline_files(workdir, broker.bootstrap, "warm", PIPELINES)

    def props() -> dict[str, str]:
        return worker_properties(
            broker.bootstrap,
            group,
            free_port(),
            group_protocol="connect",
            key_converter="org.apache.kafka.connect.storage.StringConverter",
            value_converter="org.apache.kafka.connect.storage.StringConverter",
            offset_flush_interval_ms=1000,
            spark_master="local[2]",
            # Room for a learner on a loaded 2-core machine: a leaving worker's learners must be ready
            # within it, or their tasks move the plain way.
            task_shutdown_graceful_timeout_ms=15000,
        )

    a = WorkerProcess(workdir, props(), name="warm-a", spark=True).start()
    b: WorkerProcess | None = None
    feeder = Feeder(sources)
    records = topic_names(group)["group.records.storage.topic"]
    try:
        wait_until(lambda: (a.workers() or {}).get("generation", -1) >= 0, 60, "worker A to join")
        names: set[str] = set()
        for i in range(PIPELINES):
            for name, config in (
                (
                    f"src-{i}",
                    {"connector.class": "FileStreamSource", "file": str(sources[i]), "topic": topics[i]},
                ),
                (
                    f"sink-{i}",
                    {"connector.class": "FileStreamSink", "file": str(sinks[i]), "topics": topics[i]},
                ),
            ):
                resp = a.request("POST", "/connectors", json={"name": name, "config": config})
                assert resp.status_code == 201, resp.text
                names.add(name)
        wait_until(lambda: _all_running(a, names), 60, "every task RUNNING on A")
        feeder.start()
        wait_until(
            lambda: all(p.exists() and p.read_text().count("\n") >= 10 for p in sinks), 30, "lines flowing"
        )

        # 1. scale-out: B joins; what moves to it is learned first.
        b = WorkerProcess(workdir, props(), name="warm-b", spark=True).start()
        wait_until(lambda: b.workers() is not None, 60, "worker B's REST")
        b_tasks = wait_until(
            lambda: (held := _held_tasks(b)) and len(held) == PIPELINES and held, 60, "B's share"
        )
        wait_until(lambda: _prepared_starts(b) >= b_tasks, 30, "B to start its share from preparations")
        assert _cold_starts(b) == set(), "a task moved to B started cold"
        b_member = (b.workers() or {})["this_worker"]["member_id"]
        _assert_learned(b_tasks, b_member, _learner_history(broker.bootstrap, records, group), a, b)
        a_tasks = _held_tasks(a)
        assert a_tasks is not None and not a_tasks & b_tasks and len(a_tasks) == PIPELINES
        wait_until(lambda: _all_running(b, names), 30, "every task RUNNING after the scale-out")
        time.sleep(2)  # lines flowing through both workers

        # 2. graceful scale-down: A's tasks are learned by B before A leaves.
        assert a.stop(60) == 0
        assert "work handed over" in a.log_text()
        assert b_tasks | a_tasks <= _prepared_starts(b)
        assert _cold_starts(b) == set(), "a task A handed over started cold on B"
        _assert_learned(a_tasks, b_member, _learner_history(broker.bootstrap, records, group), a, b)
        wait_until(lambda: _held_tasks(b) == a_tasks | b_tasks, 30, "B holding every task")
        wait_until(lambda: _all_running(b, names), 30, "every task RUNNING on B")
        time.sleep(2)
        feeder.stop()

        # Every line, once, in order.
        for i, sink in enumerate(sinks):
            expected = [f"p{i}-{n}" for n in range(feeder.written)]
            deadline = time.monotonic() + 30
            while len(sink.read_text().splitlines()) < len(expected) and time.monotonic() < deadline:
                time.sleep(0.25)
            problem = _continuity(sink.read_text().splitlines(), expected)
            assert not problem, f"{sink.name}: {problem}"
    finally:
        feeder.stop()
        for w in (a, b):
            if w is not None and w.alive():
                w.stop(60)
