"""Source tasks as Spark jobs (``source.task.placement=executor``, ``runtime/dataplane/spark_source.py``).

One worker on a local master with three Spark task slots, a FileStream source whose task polls and
produces inside a Spark task (a thread of a source host, ``source_hosts``), and a FileStream sink reading
what it wrote. What a user sees must not change with the placement: every line arrives, the task is
RUNNING once its loop runs in the Spark task, its source offset (a byte position) reaches the offsets
topic after the records did, pause stops its records and resume brings them back, a restart resumes from
the committed offset, and a stop calls the task's ``stop()`` where it runs and ends its attempt there. A
task whose code fails there is FAILED with the trace from the Python worker it ran in. The two-executor
version (an executor killed under the task) is in ``test_spark_standalone.py``.
"""

from __future__ import annotations

import time
import uuid
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.integration.test_exactly_once_source import read_committed, verifiable_eos_config
from tests.integration.test_plugin_metrics import COUNTING_SOURCE, plugin_samples
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, start_cluster, wait_until, worker_properties
from tests.support.plugin_sources import one_task_connector

pytestmark = pytest.mark.integration

#: A source plugin (plugin.path) whose poll fails after its first records, naming where it ran.
FAILING_SOURCE = r"""
import os

from kconnect.runtime.plugins.api import SourceRecord, SourceTask


class FailingSourceTask(SourceTask):
    def version(self):
        return "1.0"

    def start(self, props):
        self.topic = props["topic"]
        self.polls = 0

    def poll(self):
        self.polls += 1
        if self.polls > 3:
            raise RuntimeError(f"poll failed in process {os.getpid()}")
        return [SourceRecord(None, None, self.topic, value=f"poll {self.polls}")]

    def stop(self):
        pass

""" + one_task_connector("Source", "FailingSourceTask", "FailingSourceConnector")


@dataclass
class Cluster:
    worker: WorkerProcess
    topic: str
    source_file: Path
    sink_file: Path
    bootstrap: str

    def sink_lines(self) -> list[str]:
        return self.sink_file.read_text().splitlines() if self.sink_file.exists() else []

    def task(self, name: str) -> dict[str, Any] | None:
        tasks = self.worker.get(f"/connectors/{name}/status").json().get("tasks") or []
        return tasks[0] if tasks else None

    def state(self, name: str) -> str | None:
        task = self.task(name)
        return task["state"] if task else None

    def committed(self, name: str, field: str) -> Any:
        """``field`` of connector ``name``'s first committed offset (``GET /connectors/{name}/offsets``),
        None before its first commit."""
        offsets = self.worker.get(f"/connectors/{name}/offsets").json().get("offsets") or []
        return offsets[0]["offset"][field] if offsets else None

    def end_offset(self, topic: str) -> int:
        """The end offset the broker reports for partition 0 of ``topic``."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"end-{uuid.uuid4().hex[:6]}"})
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1])
        finally:
            consumer.close()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Cluster]:
    workdir = tmp_path_factory.mktemp("spark-source")
    plugins = workdir / "plugins"
    plugins.mkdir()
    (plugins / "failing_source.py").write_text(FAILING_SOURCE)
    (plugins / "counting_source.py").write_text(COUNTING_SOURCE)
    props = worker_properties(
        broker.bootstrap, f"ss-{uuid.uuid4().hex[:8]}", free_port(), plugin_path=str(plugins)
    )
    props.update(
        {
            "source.task.placement": "executor",
            # Source tasks share a host (one Spark task slot); the other two are the sink's.
            "spark.master": "local[3]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "offset.flush.interval.ms": "1000",
        }
    )
    worker = WorkerProcess(workdir, props, name="ss-w0", spark=True).start()
    topic = f"lines-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        yield Cluster(worker, topic, workdir / "in.txt", workdir / "out.txt", broker.bootstrap)
    finally:
        worker.stop(60)
        print(worker.log_text()[-4000:])


def _lines(start: int, end: int) -> str:
    return "".join(f"line {n}\n" for n in range(start, end))


@pytest.mark.timeout(400)
def test_a_source_task_polls_and_produces_in_a_spark_task(cluster: Cluster) -> None:
    c = cluster
    c.source_file.write_text(_lines(0, 500))
    for name, config in (
        ("src", {"connector.class": "FileStreamSource", "file": str(c.source_file), "topic": c.topic}),
        ("sink", {"connector.class": "FileStreamSink", "file": str(c.sink_file), "topics": c.topic}),
    ):
        resp = c.worker.request("POST", "/connectors", json={"name": name, "config": config})
        assert resp.status_code == 201, resp.text
    wait_until(lambda: len(c.sink_lines()) >= 500, 180, "500 lines in the sink file")
    assert c.sink_lines() == [f"line {n}" for n in range(500)]
    wait_until(lambda: c.state("src") == "RUNNING", 30, "the source task RUNNING")
    # The poll loop ran in a Spark task: its executor side said so in the worker's log (a local master's
    # Python workers write to the worker's stderr), on a source host the worker submitted (issue 32).
    text = c.worker.log_text()
    assert "source task running in a Spark task" in text and "source host running in a Spark task" in text
    assert "source task placed on a host" in text

    size = c.source_file.stat().st_size

    def source_offset() -> Any:
        offsets = c.worker.get("/connectors/src/offsets").json().get("offsets") or []
        return offsets and offsets[0]["offset"]["position"] == size and offsets

    wait_until(source_offset, 30, "the source offset at the end of the file")
    # The worker's metrics count what the executor side moved.
    metrics = c.worker.get("/metrics").text
    assert 'connector="src"' in metrics

    # Pause: nothing more is produced; resume: it comes. "Nothing" is judged against a twin that is not
    # paused: a second FileStream source reading the same file into a topic of its own. Once the twin has
    # produced the lines appended during the pause (its committed position at the file's new end, which
    # it commits only after Kafka acknowledged them), an unpaused task has had its chance to produce them;
    # the paused one has produced none: its topic's end and its committed position did not move.
    assert c.worker.request("PUT", "/connectors/src/pause").status_code == 202
    wait_until(lambda: c.state("src") == "PAUSED", 30, "the source task PAUSED")
    end_at_pause = c.end_offset(c.topic)
    with c.source_file.open("a") as out:
        out.write(_lines(500, 600))
    grown = c.source_file.stat().st_size
    twin_topic = f"{c.topic}-twin"
    admin = AdminClient({"bootstrap.servers": c.bootstrap})
    for future in admin.create_topics([NewTopic(twin_topic, 1, 1)]).values():
        future.result(15)
    twin = {"connector.class": "FileStreamSource", "file": str(c.source_file), "topic": twin_topic}
    resp = c.worker.request("POST", "/connectors", json={"name": "twin", "config": twin})
    assert resp.status_code == 201, resp.text
    wait_until(lambda: c.committed("twin", "position") == grown, 120, "the unpaused twin at the file's end")
    assert c.state("src") == "PAUSED"
    assert c.end_offset(c.topic) == end_at_pause, "records produced while paused"
    assert c.committed("src", "position") == size, "the paused source committed a new position"
    assert len(c.sink_lines()) == 500, "records produced while paused"
    assert c.worker.request("DELETE", "/connectors/twin").status_code == 204  # its thread on the host
    assert c.worker.request("PUT", "/connectors/src/resume").status_code == 202
    wait_until(lambda: len(c.sink_lines()) >= 600, 60, "600 lines after resume")

    # Restart: a new job, from the committed position; nothing is read twice from the file.
    resp = c.worker.request("POST", "/connectors/src/restart?includeTasks=true")
    assert resp.status_code in (200, 202, 204), resp.text
    wait_until(lambda: c.state("src") == "RUNNING", 60, "the restarted source task RUNNING")
    with c.source_file.open("a") as out:
        out.write(_lines(600, 700))
    # Everything the restarted task produced is in Kafka once its position is at the file's end, and the
    # sink has written everything the topic holds once its committed offset reaches the topic's end
    # (the embedded broker reports a last batch's base offset + 1 there, never more than the true end):
    # a line read twice from the file would then be in the sink's file twice.
    wait_until(lambda: len(c.sink_lines()) >= 700, 60, "700 lines after the restart")
    end = c.source_file.stat().st_size
    wait_until(lambda: c.committed("src", "position") == end, 60, "the restarted source at the file's end")
    wait_until(
        lambda: (c.committed("sink", "kafka_offset") or 0) >= c.end_offset(c.topic),
        60,
        "the sink's committed offset at the topic's end",
    )
    assert c.sink_lines() == [f"line {n}" for n in range(700)]

    # Stop: the task's stop() runs on its host, its attempt ends there, and the worker says so.
    started = time.monotonic()
    assert c.worker.request("PUT", "/connectors/src/stop").status_code in (202, 204)
    wait_until(
        lambda: c.worker.log_text().count("source task ended on its host") >= 2, 60, "the source task ended"
    )
    print(f"\nsource task ended on its host {time.monotonic() - started:.1f} s after the stop request")


@pytest.mark.timeout(300)
def test_a_source_task_failing_in_its_spark_task_is_failed_with_that_trace(cluster: Cluster) -> None:
    c = cluster
    config = {"connector.class": "FailingSourceConnector", "topic": c.topic}
    resp = c.worker.request("POST", "/connectors", json={"name": "failing", "config": config})
    assert resp.status_code == 201, resp.text

    def trace() -> str | None:
        task = c.task("failing")
        return task.get("trace") if task and task["state"] == "FAILED" else None

    text = wait_until(trace, 120, "the failing source task FAILED")
    assert "RuntimeError: poll failed in process" in text, text
    assert "failing_source.py" in text and "in poll" in text, text
    worker_pid = c.worker.proc.pid if c.worker.proc is not None else None
    assert f"in process {worker_pid}\n" not in text + "\n", "the task ran in the worker process"


@pytest.mark.timeout(300)
def test_a_source_tasks_plugin_metrics_registered_in_its_spark_task_show_in_the_workers_metrics(
    cluster: Cluster,
) -> None:
    """KIP-877: the task registers a sensor in its Spark task; the worker's ``/metrics`` shows it (sent
    with the task's figures), and it goes when the connector is deleted."""
    c = cluster
    config = {"connector.class": "CountingSourceConnector", "topic": c.topic, "count": "40"}
    assert (
        c.worker.request("POST", "/connectors", json={"name": "counted", "config": config}).status_code == 201
    )
    w = f'worker="{c.worker.url.split("://", 1)[1]}"'
    total = f'plugins_records_polled_total{{{w},connector="counted",task="0",topic="{c.topic}"}}'
    wait_until(
        lambda: plugin_samples(c.worker).get(total) == 40, 90, "the task's own count at 40 in /metrics"
    )
    assert c.worker.request("DELETE", "/connectors/counted").status_code == 204
    wait_until(lambda: total not in plugin_samples(c.worker), 60, "the task's metrics gone")


@pytest.mark.timeout(300)
def test_an_exactly_once_source_task_commits_transactions_from_its_spark_task(
    tmp_path: Path, broker: Broker
) -> None:
    """With exactly-once support the worker waits for the leader's zombie fencing, then the Spark task's
    transactional producer carries records and offsets together; a restarted task (a new job, whose
    producer fences the old instance's transactional id) resumes after the last committed offset, so a
    read_committed reader sees every seqno once."""
    [worker] = start_cluster(
        tmp_path,
        broker.bootstrap,
        1,
        spark=True,
        spark_master="local[2]",
        spark_ui_enabled="false",
        exactly_once_source_support="enabled",
        source_task_placement="executor",
    )
    topic = f"eos-{uuid.uuid4().hex[:6]}"
    config = verifiable_eos_config(topic, throughput=100, tasks=1)

    def state() -> str | None:
        tasks = worker.get("/connectors/eos/status").json().get("tasks") or []
        return tasks[0]["state"] if tasks else None

    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(15)
        assert (
            worker.request("POST", "/connectors", json={"name": "eos", "config": config}).status_code == 201
        )
        wait_until(lambda: state() == "RUNNING", 120, "the task RUNNING")
        wait_until(lambda: len(read_committed(broker.bootstrap, topic)) >= 100, 60, "100 committed records")
        resp = worker.request("POST", "/connectors/eos/restart?includeTasks=true&onlyFailed=false")
        assert resp.status_code in (200, 202, 204), resp.text
        before = len(read_committed(broker.bootstrap, topic))
        wait_until(
            lambda: len(read_committed(broker.bootstrap, topic)) >= before + 100, 90, "100 more after restart"
        )
        assert worker.request("PUT", "/connectors/eos/stop").status_code in (202, 204)
        ended = "source task ended on its host"
        wait_until(lambda: worker.log_text().count(ended) >= 2, 60, "both attempts ended")

        seqnos = Counter(seqno for _task, seqno in read_committed(broker.bootstrap, topic, quiet_s=5.0))
        duplicates = sorted(s for s, n in seqnos.items() if n > 1)
        missing = sorted(set(range(max(seqnos) + 1)) - set(seqnos))
        print(f"\n{sum(seqnos.values())} committed records, seqnos 0..{max(seqnos)}")
        assert not duplicates, f"duplicated seqnos: {duplicates[:20]}"
        assert not missing, f"lost seqnos: {missing[:20]}"
        text = worker.log_text()
        assert text.count("transactional producer ready") >= 2  # one per job, in its Spark task
        assert text.count("source task running in a Spark task") >= 2
    finally:
        worker.stop(60)
        print("\n".join(line for line in worker.log_text().splitlines() if '"seqno"' not in line)[-6000:])
