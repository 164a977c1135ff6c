"""The Spark data plane on one real kconnect worker, the embedded broker and a real local SparkSession.

FileStream source -> topic -> FileStream sink end to end; a restarted sink task resumes from the offsets
it committed to its consumer group; a task that fails on bad data is FAILED with its trace while the
other pipeline keeps running; a task is UNASSIGNED until its start returned and its query is active, then
RUNNING. One worker for the module: the SparkSession takes seconds to start.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties

pytestmark = pytest.mark.integration

LINES = 2000

#: What both sink plugins below share, in a module beside them in plugin.path: a connector with one task
#: that gets the connector's config. Abstract (no ``task_class``), so the registry does not list it.
ONE_TASK_SINK = r"""
from kconnect.runtime.plugins.api import SinkConnector
from kconnect.runtime.plugins.config_def import ConfigDef


class OneTaskSinkConnector(SinkConnector):
    def version(self):
        return "1.0"

    def config_def(self):
        return ConfigDef()

    def start(self, props):
        self.props = dict(props)

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass
"""

#: A sink plugin (installed through plugin.path) that uses SinkTaskContext as Java sinks do: ``offset`` in
#: ``open`` to start where its own bookkeeping says (here: skip the first 5 records), a RetriableError
#: from its first ``put`` with ``timeout`` set, and one rewind (``offset``) from ``put`` once it has seen
#: offset 15. It writes "<offset> <value>" per record and the first offset of every put call.
CONTEXT_SINK = r"""
from kconnect.runtime.plugins.api import RetriableError, SinkTask
from one_task_sink import OneTaskSinkConnector


class ContextSinkConnector(OneTaskSinkConnector):
    def task_class(self):
        return ContextSinkTask


class ContextSinkTask(SinkTask):
    def version(self):
        return "1.0"

    def start(self, props):
        self.out = open(props["file"], "a")
        self.calls = open(props["file"] + ".puts", "a")
        self.raised = False
        self.rewound = False

    def open(self, partitions):
        self.context.offset({tp: 5 for tp in partitions})

    def put(self, records):
        if not records:
            return
        self.calls.write(f"{records[0].offset}\n")
        self.calls.flush()
        if not self.raised:
            self.raised = True
            self.context.timeout(200)
            raise RetriableError("the target is busy")
        for r in records:
            self.out.write(f"{r.offset} {r.value}\n")
        self.out.flush()
        if not self.rewound and any(r.offset >= 15 for r in records):
            self.rewound = True
            self.context.offset({r.topic_partition: 10 for r in records[:1]})

    def stop(self):
        self.out.close()
        self.calls.close()
"""

#: A sink plugin whose task's ``start`` waits for a gate file (it marks that it entered first): while it
#: waits the task is not RUNNING, as a Java task is not before its start returned.
GATED_START_SINK = r"""
import os
import time

from kconnect.runtime.plugins.api import SinkTask
from one_task_sink import OneTaskSinkConnector


class GatedStartSinkConnector(OneTaskSinkConnector):
    def task_class(self):
        return GatedStartSinkTask


class GatedStartSinkTask(SinkTask):
    def version(self):
        return "1.0"

    def start(self, props):
        gate = props["gate"]
        open(gate + ".entered", "w").close()
        deadline = time.monotonic() + 120
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.05)

    def put(self, records):
        pass

    def stop(self):
        pass
"""


class Pipeline:
    def __init__(self, worker: WorkerProcess, workdir: Path, bootstrap: str) -> None:
        self.worker = worker
        self.workdir = workdir
        self.bootstrap = bootstrap
        self.topic = f"lines-{uuid.uuid4().hex[:6]}"
        self.source_file = workdir / "in.txt"
        self.sink_file = workdir / "out.txt"

    def sink_lines(self) -> list[str]:
        if not self.sink_file.exists():
            return []
        return self.sink_file.read_text().splitlines()

    def task_state(self, name: str) -> dict[str, Any] | None:
        resp = self.worker.get(f"/connectors/{name}/status")
        if resp.status_code != 200 or not resp.json().get("tasks"):
            return None
        task: dict[str, Any] = resp.json()["tasks"][0]
        return task

    def create(self, name: str, config: dict[str, str]) -> None:
        resp = self.worker.request("POST", "/connectors", json={"name": name, "config": config})
        assert resp.status_code == 201, resp.text


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)


@pytest.fixture(scope="module")
def pipeline(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Pipeline]:
    workdir = tmp_path_factory.mktemp("dataplane")
    plugins = workdir / "plugins"
    plugins.mkdir()
    (plugins / "one_task_sink.py").write_text(ONE_TASK_SINK)
    (plugins / "context_sink.py").write_text(CONTEXT_SINK)
    (plugins / "gated_sink.py").write_text(GATED_START_SINK)
    props = worker_properties(
        broker.bootstrap,
        f"dp-{uuid.uuid4().hex[:8]}",
        free_port(),
        plugin_path=str(plugins),
    )
    props.update(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "offset.flush.interval.ms": "1000",
            # Client settings as an Apache Kafka Connect worker file names them: librdkafka refuses the
            # Java-only names, so these run only because the worker translates them (client_config).
            "consumer.fetch.max.wait.ms": "100",
            "consumer.max.poll.records": "500",
            "consumer.key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer",
            "producer.buffer.memory": "33554432",
            "producer.key.serializer": "org.apache.kafka.common.serialization.ByteArraySerializer",
        }
    )
    worker = WorkerProcess(workdir, props, name="dp-w0", spark=True).start()
    p = Pipeline(worker, workdir, broker.bootstrap)
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        create_topic(broker.bootstrap, p.topic)
        yield p
    finally:
        worker.stop(60)
        print(worker.log_text()[-3000:])


def test_file_source_to_file_sink_end_to_end(pipeline: Pipeline) -> None:
    p = pipeline
    p.source_file.write_text("".join(f"line {n}\n" for n in range(LINES)))
    started = time.monotonic()
    p.create(
        "src",
        {
            "connector.class": "FileStreamSource",
            "file": str(p.source_file),
            "topic": p.topic,
            "tasks.max": "1",
            "producer.override.max.request.size": "2097152",  # Java's name; librdkafka's message.max.bytes
        },
    )
    p.create(
        "sink",
        {
            "connector.class": "FileStreamSink",
            "file": str(p.sink_file),
            "topics": p.topic,
            "tasks.max": "1",
            "consumer.override.fetch.max.wait.ms": "50",  # Java name of fetch.wait.max.ms
        },
    )
    wait_until(lambda: len(p.sink_lines()) >= LINES, 120, f"{LINES} lines in the sink file")
    # The Java-only names that have no librdkafka counterpart were ignored with one warning naming them.
    warned = [
        line for line in p.worker.log_text().splitlines() if "client settings with no counterpart" in line
    ]
    assert warned and all(
        key in warned[0]
        for key in ("consumer.max.poll.records", "consumer.key.deserializer", "producer.key.serializer")
    ), warned
    elapsed = time.monotonic() - started
    assert p.sink_lines() == [f"line {n}" for n in range(LINES)]
    print(f"\nend to end: {LINES} lines in {elapsed:.1f} s, Spark start included: {LINES / elapsed:.0f}/s")
    for name in ("src", "sink"):
        state = p.task_state(name)
        assert state is not None and state["state"] == "RUNNING", state
    # The source offset (a byte position) reached the offsets topic once the producer acknowledged.
    size = p.source_file.stat().st_size

    def source_offset() -> Any:
        body = p.worker.get("/connectors/src/offsets").json()
        offsets = body.get("offsets") or []
        return offsets and offsets[0]["offset"]["position"] == size and offsets

    wait_until(source_offset, 30, "the source offset at the end of the file")

    # The sink's consumer group committed the end of the topic after the lines were flushed.
    def sink_offset() -> Any:
        body = p.worker.get("/connectors/sink/offsets").json()
        offsets = body.get("offsets") or []
        return offsets and offsets[0]["offset"]["kafka_offset"] == LINES and offsets

    wait_until(sink_offset, 30, f"the sink group's committed offset at {LINES}")

    # Steady state, the query already running: printed for the report, not asserted.
    steady = 5000
    with p.source_file.open("a") as out:
        out.write("".join(f"line {n}\n" for n in range(LINES, LINES + steady)))
    started = time.monotonic()
    wait_until(lambda: len(p.sink_lines()) >= LINES + steady, 120, f"{steady} more lines")
    elapsed = time.monotonic() - started
    assert p.sink_lines() == [f"line {n}" for n in range(LINES + steady)]
    print(f"steady state: {steady} lines in {elapsed:.1f} s: {steady / elapsed:.0f}/s")
    # Per-task figures in GET /metrics: records read by the sink, polled by the source.
    text = p.worker.get("/metrics").text

    def figure(name: str, connector: str) -> float:
        prefix = f"{name}{{"
        label = f'connector="{connector}"'
        [line] = [x for x in text.splitlines() if x.startswith(prefix) and label in x]
        return float(line.rsplit(" ", 1)[1])

    total = LINES + steady
    assert figure("connect_sink_task_sink_record_read_total", "sink") >= total  # at-least-once
    assert figure("connect_source_task_source_record_poll_total", "src") == total
    assert figure("connect_worker_task_offset_commit_avg_time_ms", "sink") > 0


def test_restarted_tasks_resume_from_committed_offsets(pipeline: Pipeline) -> None:
    p = pipeline
    before = len(p.sink_lines())
    assert before >= LINES
    # Both tasks restart: the source from its offset in the offsets topic, the sink from its group's.
    for name in ("src", "sink"):
        resp = p.worker.request("POST", f"/connectors/{name}/tasks/0/restart")
        assert resp.status_code == 204, resp.text
    first = len(set(p.sink_lines()))  # every line of the file so far, each written at least once
    more = 500
    with p.source_file.open("a") as out:
        out.write("".join(f"line {n}\n" for n in range(first, first + more)))
    expected = [f"line {n}" for n in range(first + more)]
    wait_until(lambda: set(expected) <= set(p.sink_lines()), 120, "every line after the restart")
    lines = p.sink_lines()
    duplicates = len(lines) - len(set(lines))
    print(f"\nafter the task restarts: {len(lines)} lines written, {duplicates} duplicates")
    # At-least-once from the committed offsets: nothing lost, and the first copies keep the file's order.
    first_seen = list(dict.fromkeys(lines))
    assert first_seen == expected
    # Resumed from the committed offset, not from the start of the topic.
    assert duplicates < LINES

    # Paused, the task keeps its place: lines written meanwhile arrive after the resume, none lost.
    assert p.worker.request("PUT", "/connectors/sink/pause").status_code == 202
    wait_until(lambda: (p.task_state("sink") or {}).get("state") == "PAUSED", 30, "the sink task PAUSED")
    with p.source_file.open("a") as out:
        out.write("".join(f"line {n}\n" for n in range(first + more, first + more + 100)))
    assert p.worker.request("PUT", "/connectors/sink/resume").status_code == 202
    wait_until(lambda: (p.task_state("sink") or {}).get("state") == "RUNNING", 30, "the sink task RUNNING")
    expected = [f"line {n}" for n in range(first + more + 100)]
    wait_until(lambda: set(expected) <= set(p.sink_lines()), 120, "every line after the resume")
    assert list(dict.fromkeys(p.sink_lines())) == expected


def test_failing_task_is_failed_with_trace_while_others_run(pipeline: Pipeline) -> None:
    p = pipeline
    bad_topic = f"bad-{uuid.uuid4().hex[:6]}"
    create_topic(p.bootstrap, bad_topic)
    producer = Producer({"bootstrap.servers": p.bootstrap})
    producer.produce(bad_topic, value=b"this is not JSON")
    producer.flush(10)
    p.create(
        "bad",
        {
            "connector.class": "FileStreamSink",
            "file": str(p.workdir / "bad.txt"),
            "topics": bad_topic,
            "tasks.max": "1",
        },
    )

    def failed() -> Any:
        state = p.task_state("bad")
        return state is not None and state["state"] == "FAILED" and state

    state = wait_until(failed, 90, "the bad sink task FAILED")
    assert "Tolerance exceeded in error handler" in state["trace"], state["trace"]
    assert "Converting byte[] to Kafka Connect data failed" in state["trace"], state["trace"]
    # The other pipeline still runs.
    with p.source_file.open("a") as out:
        out.write("after the failure\n")
    wait_until(lambda: "after the failure" in p.sink_lines(), 60, "a line after the failure")
    for name in ("src", "sink"):
        state = p.task_state(name)
        assert state is not None and state["state"] == "RUNNING", state


def test_sink_with_topics_regex_reads_matching_topics_and_ones_created_later(pipeline: Pipeline) -> None:
    """``topics.regex``: every topic whose whole name matches, including one created while the task runs
    (it joins at a later micro-batch and is read from its start); topics that do not match are not read."""
    p = pipeline
    prefix = f"rx{uuid.uuid4().hex[:6]}"
    producer = Producer({"bootstrap.servers": p.bootstrap})

    def write(topic: str, count: int) -> set[str]:
        lines = {f"{topic} {n}" for n in range(count)}
        for line in sorted(lines):
            producer.produce(topic, value=line.encode())
        assert producer.flush(15) == 0
        return lines

    for topic in (f"{prefix}-a", f"{prefix}-b", f"{prefix}-a-not", f"x{prefix}-a"):
        create_topic(p.bootstrap, topic)
    expected = write(f"{prefix}-a", 20) | write(f"{prefix}-b", 20)
    unmatched = write(f"{prefix}-a-not", 5) | write(f"x{prefix}-a", 5)  # the pattern matches a part only
    out = p.workdir / "regex.txt"
    p.create(
        "regex",
        {
            "connector.class": "FileStreamSink",
            "file": str(out),
            "topics.regex": f"{prefix}-[a-z]",
            "tasks.max": "1",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        },
    )

    def seen() -> set[str]:
        return set(out.read_text().splitlines()) if out.exists() else set()

    wait_until(lambda: expected <= seen(), 120, "the two matching topics in the regex sink's file")
    create_topic(p.bootstrap, f"{prefix}-c")
    expected |= write(f"{prefix}-c", 20)
    wait_until(lambda: expected <= seen(), 120, "the topic created later in the regex sink's file")
    assert not seen() & unmatched
    state = p.task_state("regex")
    assert state is not None and state["state"] == "RUNNING", state


def test_sink_task_context_offset_and_a_retriable_put(pipeline: Pipeline) -> None:
    """SinkTaskContext as Java sinks use it: ``offset`` in ``open`` moves the start (records 0-4 never
    delivered), a ``put`` that raises RetriableError gets the same records again after ``timeout``, and
    ``offset`` from ``put`` rewinds (records from 10 delivered twice); the group ends committed at the end."""
    p = pipeline
    topic = f"ctx-{uuid.uuid4().hex[:6]}"
    create_topic(p.bootstrap, topic)
    producer = Producer({"bootstrap.servers": p.bootstrap})
    for n in range(30):
        producer.produce(topic, value=f"v{n}".encode())
    assert producer.flush(15) == 0
    out = p.workdir / "context.txt"
    p.create(
        "context",
        {
            "connector.class": "context_sink.ContextSinkConnector",
            "file": str(out),
            "topics": topic,
            "tasks.max": "1",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        },
    )

    def delivered() -> list[int]:
        return [int(line.split()[0]) for line in out.read_text().splitlines()] if out.exists() else []

    def committed() -> Any:
        offsets = p.worker.get("/connectors/context/offsets").json().get("offsets") or []
        return offsets and offsets[0]["offset"]["kafka_offset"] == 30 and delivered().count(10) >= 2

    wait_until(committed, 240, "the context sink's rewound records and its group committed at 30")
    seen = delivered()
    assert min(seen) == 5 and set(seen) == set(range(5, 30)), seen  # open() skipped 0-4; nothing lost
    assert all(seen.count(n) >= 2 for n in range(10, 16)), seen  # the rewind to 10 re-delivered them
    puts = [int(x) for x in (p.workdir / "context.txt.puts").read_text().split()]
    assert puts[:2] == [5, 5], puts  # the retriable put got the same records again
    assert "put failed with a retriable error" in p.worker.log_text()


def status_records(bootstrap: str, topic: str, key_prefix: str) -> list[tuple[str, Any]]:
    """The status topic's records whose key starts with ``key_prefix``, read until quiet for 3 s."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    partitions = consumer.list_topics(topic, timeout=15).topics[topic].partitions
    # Assigned, not subscribed: no group round to wait for before the first record.
    consumer.assign([TopicPartition(topic, n, OFFSET_BEGINNING) for n in partitions])
    out: list[tuple[str, Any]] = []
    quiet_since = time.monotonic()
    try:
        while time.monotonic() - quiet_since < 3:
            message = consumer.poll(0.5)
            if message is None or message.error() is not None:
                continue
            quiet_since = time.monotonic()
            key = (message.key() or b"").decode()
            if key.startswith(key_prefix):
                value = message.value()
                out.append((key, json.loads(value) if value is not None else None))
    finally:
        consumer.close()
    return out


def test_active_topics_recorded_once_reset_and_forgotten_with_the_connector(pipeline: Pipeline) -> None:
    """KIP-558 with real tasks: each task records the topic it produced to or consumed from once, as
    Java's ``status-topic-<topic>:connector-<name>`` records; a reset empties the list until the topic is
    used again; deleting a connector forgets its topics."""
    p = pipeline
    topic = f"active-{uuid.uuid4().hex[:6]}"
    create_topic(p.bootstrap, topic)
    source_file, sink_file = p.workdir / "active-in.txt", p.workdir / "active-out.txt"
    source_file.write_text("".join(f"a{n}\n" for n in range(50)))
    common = {"tasks.max": "1", "connector.class": "FileStreamSource", "file": str(source_file)}
    p.create("at-src", {**common, "topic": topic})
    p.create(
        "at-sink",
        {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic, "tasks.max": "1"},
    )

    def lines() -> int:
        return len(sink_file.read_text().splitlines()) if sink_file.exists() else 0

    def topics(name: str) -> Any:
        resp = p.worker.get(f"/connectors/{name}/topics")
        assert resp.status_code == 200, resp.text
        return resp.json()

    wait_until(lambda: lines() >= 50, 120, "50 lines through the active-topics pipeline")
    for name in ("at-src", "at-sink"):
        wait_until(lambda n=name: topics(n) == {n: {"topics": [topic]}}, 30, f"{name}'s active topic")
    with source_file.open("a") as out:
        out.write("".join(f"b{n}\n" for n in range(50)))
    wait_until(lambda: lines() >= 100, 60, "50 more lines")

    status_topic = p.worker.props["status.storage.topic"]
    records = status_records(p.bootstrap, status_topic, f"status-topic-{topic}:")
    by_key = sorted(key for key, _v in records)
    # Once per topic per connector, however many records and batches went through.
    assert by_key == [f"status-topic-{topic}:connector-at-sink", f"status-topic-{topic}:connector-at-src"]
    for key, value in records:
        recorded = value["topic"]
        assert recorded["name"] == topic and key.endswith(f":connector-{recorded['connector']}")
        assert recorded["task"] == 0 and recorded["discoverTimestamp"] > 0

    resp = p.worker.request("PUT", "/connectors/at-src/topics/reset")
    assert resp.status_code == 202, resp.text
    wait_until(lambda: topics("at-src") == {"at-src": {"topics": []}}, 30, "the source's topics reset")
    with source_file.open("a") as out:
        out.write("c0\n")
    wait_until(lambda: topics("at-src") == {"at-src": {"topics": [topic]}}, 60, "the topic recorded anew")

    assert p.worker.request("DELETE", "/connectors/at-sink").status_code == 204
    wait_until(lambda: topics("at-sink") == {"at-sink": {"topics": []}}, 60, "the deleted sink's topics gone")
    assert topics("at-src") == {"at-src": {"topics": [topic]}}
    assert p.worker.request("DELETE", "/connectors/at-src").status_code == 204


def test_a_sink_task_is_unassigned_until_its_start_returned_and_its_query_is_active(
    pipeline: Pipeline,
) -> None:
    """Issue 15: RUNNING only once the task's loop runs. While the task's ``start`` waits (on the task's
    own thread) the status is UNASSIGNED, as Java's is before its start returns; once it returned and its
    loop runs (a consumer loop under this local master, ``sink.task.placement=auto``) it is RUNNING,
    without a record on the topic."""
    p = pipeline
    topic = f"gate-topic-{uuid.uuid4().hex[:6]}"
    create_topic(p.bootstrap, topic)
    gate = p.workdir / "gate"
    p.create(
        "gated-sink",
        {"connector.class": "gated_sink.GatedStartSinkConnector", "topics": topic, "gate": str(gate)},
    )

    def waiting_unassigned() -> Any:
        state = p.task_state("gated-sink")
        return (
            Path(f"{gate}.entered").exists()
            and state is not None
            and state["state"] == "UNASSIGNED"
            and state
        )

    wait_until(waiting_unassigned, 60, "the gated task's start entered while it is UNASSIGNED")
    # The herder answered at once, though the task's start still waits: the worker is not held up.
    assert p.worker.get("/connectors/gated-sink/status").json()["connector"]["state"] == "RUNNING"
    gate.touch()
    wait_until(
        lambda: (p.task_state("gated-sink") or {}).get("state") == "RUNNING", 120, "the gated task RUNNING"
    )
    started = [
        line
        for line in p.worker.log_text().splitlines()
        if "sink consumer loop started" in line and "gated-sink-0" in line
    ]
    assert started, "RUNNING was reported before the task's consumer loop started"
    assert p.worker.request("DELETE", "/connectors/gated-sink").status_code == 204
