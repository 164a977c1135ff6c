"""Many small pipelines on one worker (issue 22): a task's cost follows its records, not Spark's clock.

One real worker (``local[2]``, Spark's UI on so that its own job count can be read) on an Apache Kafka
broker. Under a local master an untransformed sink task runs as a consumer loop on a worker thread
(``sink.task.placement=auto``): 30 FileStream pipelines deliver every line with no SparkSession at all
(no JVM in the worker's process tree), and /metrics says where each task runs. A transformed sink is a
Structured Streaming query; while it receives no record it runs no Spark job over a quiet minute, counted
by Spark's status API, as the 30 pipelines go on delivering beside it; one record later its count moves.
The consumer loop's own ``errors.tolerance`` paths are here too (the query's are in
``test_dataplane_errors.py``).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.processes import command_name, descendants

pytestmark = pytest.mark.integration

PIPELINES = 30
LINES = 20
#: The quiet stretch over which an idle query must run no Spark job (the issue's "quiet minute").
QUIET_S = 60


@dataclass
class Node:
    worker: WorkerProcess
    workdir: Path
    bootstrap: str
    ui_port: int

    def create(self, name: str, config: dict[str, str]) -> None:
        resp = self.worker.request("POST", "/connectors", json={"name": name, "config": config})
        assert resp.status_code == 201, resp.text

    def task(self, name: str) -> dict[str, Any] | None:
        resp = self.worker.get(f"/connectors/{name}/status")
        tasks = resp.json().get("tasks") if resp.status_code == 200 else None
        return tasks[0] if tasks else None

    def placements(self) -> dict[str, str]:
        """connector -> placement of its task 0, from /metrics."""
        out = {}
        for line in self.worker.get("/metrics").text.splitlines():
            if line.startswith("kconnect_task_placement{"):
                labels = dict(
                    part.split("=", 1) for part in line[line.index("{") + 1 : line.index("}")].split(",")
                )
                out[labels["connector"].strip('"')] = labels["placement"].strip('"')
        return out

    def spark_jobs(self) -> int | None:
        """How many jobs the worker's SparkSession has run, from Spark's own status API (None before it
        started)."""
        base = f"http://127.0.0.1:{self.ui_port}/api/v1/applications"
        try:
            app = httpx.get(base, timeout=10).json()[0]["id"]
            return len(httpx.get(f"{base}/{app}/jobs", timeout=30).json())
        except (httpx.HTTPError, ValueError, KeyError, IndexError):
            return None

    def jvms(self) -> list[int]:
        assert self.worker.proc is not None
        return [p for p in descendants(self.worker.proc.pid) if command_name(p) == "java"]


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Node]:
    workdir = tmp_path_factory.mktemp("placement")
    ui_port = free_port()
    props = worker_properties(broker.bootstrap, f"pl-{uuid.uuid4().hex[:8]}", free_port())
    props.update(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "true",
            "spark.ui.port": str(ui_port),
            "spark.sql.shuffle.partitions": "1",
            "offset.flush.interval.ms": "1000",
        }
    )
    worker = WorkerProcess(workdir, props, name="pl-w0", spark=True).start()
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        yield Node(worker, workdir, broker.bootstrap, ui_port)
    finally:
        worker.stop(60)


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _append(path: Path, lines: list[str]) -> None:
    with path.open("a") as out:
        out.write("".join(f"{line}\n" for line in lines))


def _create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)


def _produce(bootstrap: str, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(30) == 0


def _pipelines(node: Node) -> list[tuple[Path, Path]]:
    return [(node.workdir / f"in-{i}.txt", node.workdir / f"out-{i}.txt") for i in range(PIPELINES)]


def test_thirty_pipelines_deliver_every_line_on_worker_threads_with_no_spark(node: Node) -> None:
    files = _pipelines(node)
    for i, (src, sink) in enumerate(files):
        _append(src, [f"p{i}-l{n}" for n in range(LINES)])
        topic = f"pl-lines-{i}"
        node.create(f"src-{i}", {"connector.class": "FileStreamSource", "file": str(src), "topic": topic})
        node.create(f"sink-{i}", {"connector.class": "FileStreamSink", "file": str(sink), "topics": topic})

    def delivered() -> bool:
        return all(len(_lines(sink)) >= LINES for _, sink in files)

    wait_until(delivered, 180, f"{PIPELINES} pipelines to deliver {LINES} lines each", interval=1)
    for i, (_, sink) in enumerate(files):
        assert _lines(sink) == [f"p{i}-l{n}" for n in range(LINES)], sink

    placements = wait_until(
        lambda: (p := node.placements()) and len(p) == 2 * PIPELINES and p,
        60,
        "every task's placement in /metrics",
    )
    assert set(placements.values()) == {"worker"}, placements
    for i in range(PIPELINES):
        assert (node.task(f"sink-{i}") or {}).get("state") == "RUNNING"
    # No sink needed Spark: the worker never started its SparkSession, so no JVM runs under it.
    assert node.jvms() == []
    assert node.spark_jobs() is None


def test_an_idle_query_runs_no_spark_job_over_a_quiet_minute_while_the_threads_deliver(node: Node) -> None:
    topic = f"pl-quiet-{uuid.uuid4().hex[:6]}"
    _create_topic(node.bootstrap, topic)
    quiet_out = node.workdir / "quiet.txt"
    node.create(
        "quiet",
        {
            "connector.class": "FileStreamSink",
            "file": str(quiet_out),
            "topics": topic,
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            # A transform is a Spark plan: this sink is a Structured Streaming query.
            "transforms": "route",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "(.*)",
            "transforms.route.replacement": "$1-routed",
        },
    )
    wait_until(lambda: (node.task("quiet") or {}).get("state") == "RUNNING", 180, "the query RUNNING")
    assert wait_until(lambda: node.placements().get("quiet"), 60, "its placement") == "query"
    assert node.jvms(), "a query runs in the worker's SparkSession"
    # A new query runs its batch 0 (a few jobs, even on an empty topic) just after it is active: the
    # quiet minute starts once the count has settled. 10 s without a new job: a loaded rehearsal counted one
    # job in the quiet minute after a 3 s window, most likely batch 0's last one coming late.
    wait_until(lambda: (node.spark_jobs() or 0) > 0, 60, "the query's first batch")

    def settled() -> int | None:
        first = node.spark_jobs()
        time.sleep(10)
        return first if first is not None and node.spark_jobs() == first else None

    before = wait_until(settled, 60, "the Spark job count to settle")

    # The quiet minute: the pipelines on worker threads keep delivering beside the idle query.
    files = _pipelines(node)
    started = time.monotonic()
    round_ = 0
    while time.monotonic() - started < QUIET_S:
        for i, (src, _) in enumerate(files):
            _append(src, [f"p{i}-q{round_}"])
        round_ += 1
        time.sleep(5)
    quiet_jobs = node.spark_jobs()
    assert quiet_jobs is not None
    wait_until(
        lambda: all(len(_lines(sink)) == LINES + round_ for _, sink in files),
        60,
        "the pipelines' lines of the quiet minute",
        interval=1,
    )
    assert quiet_jobs == before, f"the idle query ran {quiet_jobs - before} Spark jobs in {QUIET_S} s"

    # One record and the count moves: the counter above could have seen a job.
    _produce(node.bootstrap, topic, [b"wake"])
    wait_until(lambda: _lines(quiet_out) == ["wake"], 60, "the query to deliver its record")
    assert (node.spark_jobs() or 0) > before


def test_the_consumer_loop_fails_or_skips_records_that_fail_conversion(node: Node) -> None:
    topic = f"pl-bad-{uuid.uuid4().hex[:6]}"
    _create_topic(node.bootstrap, topic)
    _produce(node.bootstrap, topic, [b'{"n": 1}', b"{broken", b'{"n": 2}'])
    json_value = {
        "connector.class": "FileStreamSink",
        "topics": topic,
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }
    node.create("strict", {**json_value, "file": str(node.workdir / "strict.txt")})
    node.create(
        "tolerant",
        {
            **json_value,
            "file": str(node.workdir / "tolerant.txt"),
            "errors.tolerance": "all",
            "errors.log.enable": "true",
        },
    )
    failed = wait_until(
        lambda: (t := node.task("strict")) and t["state"] == "FAILED" and t, 90, "the strict task FAILED"
    )
    assert "Tolerance exceeded in error handler" in failed["trace"], failed["trace"]
    assert "VALUE_CONVERTER" in failed["trace"] and f"{topic}-0@1" in failed["trace"], failed["trace"]

    wait_until(lambda: len(_lines(node.workdir / "tolerant.txt")) == 2, 60, "the tolerant sink's two lines")
    assert _lines(node.workdir / "tolerant.txt") == ["{n=1}", "{n=2}"]
    assert (node.task("tolerant") or {}).get("state") == "RUNNING"

    def committed() -> Any:
        # This topic's partition only: the group connect-tolerant may hold offsets of another test's
        # "tolerant" connector (test_dataplane_errors.py) where both files share a broker under xdist.
        offsets = node.worker.get("/connectors/tolerant/offsets").json().get("offsets") or []
        mine = [o for o in offsets if o["partition"]["kafka_topic"] == topic]
        return mine and mine[0]["offset"]["kafka_offset"] == 3

    wait_until(committed, 30, "the tolerant sink committed past the bad record")
    logged = [
        json.loads(line)
        for line in node.worker.log_text().splitlines()
        if "error handling a record; skipped" in line and '"tolerant-0"' in line
    ]
    assert [(e["stage"], e["offset"]) for e in logged] == [("VALUE_CONVERTER", 1)]
    assert node.placements().get("tolerant") == "worker"
