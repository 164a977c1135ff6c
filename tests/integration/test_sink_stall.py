"""A sink task whose reading stops is named in /health and read again (issue 29: no silent stall).

One Apache Kafka node whose ``FLAKY`` listener is advertised at a proxy of the test's own
(``tests/support/kafka_proxy.py``); the worker bootstraps through the proxy, so every client of the worker
talks to Kafka through it. A FileStream sink runs as a consumer loop (``sink.task.placement=worker``) on the
worker's shared reader. Once it delivered a first batch, the proxy holds the reader consumer's open
connections (their requests go unanswered, as from a broker that hung): the task stays RUNNING and reads
nothing while the test writes more records. The worker's stall watch (``sink.task.stall.timeout.ms=4000``)
must name the task in ``GET /health`` (``stalled_sink_tasks``) and re-establish its reading (a re-seek
first; then a fresh consumer, whose new connections the proxy lets through), so that every record arrives
while the old connections are still held; ``/metrics`` shows the task's lag and last progress, and the log
says each re-establishment in one line.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import KafkaCluster, broker_kind
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.kafka_proxy import KafkaProxy

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

STALL_MS = 4000
READER = r"kconnect-sink-reader-\d+"


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[KafkaCluster, KafkaProxy]]:
    if broker_kind() != "kafka":
        pytest.skip("the proxied listener is an Apache Kafka listener (KCONNECT_TEST_BROKER=embedded)")
    cluster = KafkaCluster(Path(tmp_path_factory.mktemp("stall")), size=1, listeners={"FLAKY": "PLAINTEXT"})
    node = cluster.nodes[0]
    proxy_port = free_port()
    cluster.broker_config["advertised.listeners"] = (
        f"PLAINTEXT://{node.host}:{node.port},FLAKY://127.0.0.1:{proxy_port}"
    )
    with cluster:
        proxy = KafkaProxy((node.host, node.extra_ports["FLAKY"]), proxy_port)
        try:
            yield cluster, proxy
        finally:
            proxy.close()


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _produce(bootstrap: str, topic: str, values: list[str]) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for value in values:
        producer.produce(topic, value.encode())
    assert producer.flush(30) == 0


def _metric(text: str, name: str) -> float | None:
    for line in text.splitlines():
        if line.startswith(name + "{") and 'connector="out"' in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_a_stalled_sink_task_is_named_in_health_and_reads_again(
    tmp_path: Path, proxied: tuple[KafkaCluster, KafkaProxy]
) -> None:
    cluster, proxy = proxied
    direct = cluster.nodes[0].bootstrap
    topic = f"stall-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": direct})  # held: its futures need it alive
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    props = worker_properties(f"127.0.0.1:{proxy.port}", f"stall-{uuid.uuid4().hex[:6]}", free_port())
    props.update(
        {
            "spark.master": "local[1]",
            "spark.ui.enabled": "false",
            "sink.task.placement": "worker",
            "sink.task.stall.timeout.ms": str(STALL_MS),
            "offset.flush.interval.ms": "1000",
        }
    )
    worker = WorkerProcess(tmp_path, props, name="stall-w0", spark=True).start()
    try:

        def healthy() -> bool:
            try:
                return worker.get("/health").status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, 120, "the worker healthy", interval=0.5)
        out = tmp_path / "out.txt"
        config = {
            "connector.class": "FileStreamSink",
            "topics": topic,
            "file": str(out),
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        }
        resp = worker.request("POST", "/connectors", json={"name": "out", "config": config})
        assert resp.status_code == 201, resp.text
        _produce(direct, topic, [f"a{i}" for i in range(10)])
        wait_until(lambda: len(_lines(out)) >= 10, 120, "the first ten lines delivered", interval=0.5)

        def watched() -> str | None:
            text = worker.get("/metrics").text
            return text if "kconnect_sink_task_stalled{" in text else None

        metrics = wait_until(watched, 30, "the task's watch in /metrics")
        assert _metric(metrics, "kconnect_sink_task_stalled") == 0, metrics
        last_progress = _metric(metrics, "kconnect_sink_task_last_progress_timestamp_seconds")
        assert last_progress is not None and last_progress > time.time() - 120, metrics

        held = proxy.hold(READER)
        assert held >= 1, proxy.client_ids()
        held_at = time.monotonic()
        # The fetch in flight when the hold began was passed already: a long poll the broker would answer
        # with the next records. It returns empty within the consumer's fetch.wait.max.ms; the records
        # written after that can only come through a request the proxy holds.
        time.sleep(2)
        _produce(direct, topic, [f"b{i}" for i in range(10)])

        named: list[dict[str, object]] = []

        def stall_named() -> bool:
            body = worker.get("/health").json()
            named.extend(body.get("stalled_sink_tasks") or [])
            return bool(named) or len(_lines(out)) >= 20

        wait_until(stall_named, 90, "/health naming the stalled sink task", interval=0.3)
        links = [x for x in proxy.links() if "reader" in str(x[0])]
        assert named, f"delivered again before /health named a stall: {_lines(out)[10:]}; links {links}"
        first = named[0]
        assert first["connector"] == "out" and first["task"] == 0, first
        assert first["partitions"] == [f"{topic}-0"], first
        assert isinstance(first["lag"], int) and first["lag"] > 0, first
        assert worker.get("/health").status_code == 200

        wait_until(lambda: len(_lines(out)) >= 20, 90, "delivery resumed on a re-established reading", 0.5)
        resumed_s = time.monotonic() - held_at
        assert proxy.hold(READER) >= 1  # the old connections are still held: the reading moved off them
        assert _lines(out) == [f"a{i}" for i in range(10)] + [f"b{i}" for i in range(10)]
        wait_until(
            lambda: "stalled_sink_tasks" not in worker.get("/health").json(), 30, "/health clear again", 0.5
        )
        metrics = worker.get("/metrics").text
        assert (_metric(metrics, "kconnect_sink_task_reading_reestablished_total") or 0) >= 1, metrics
        assert _metric(metrics, "kconnect_sink_task_lag_records") is not None, metrics
        events = []
        for line in worker.log_text().splitlines():
            if line.startswith("{"):
                data = json.loads(line)
                if str(data.get("event", "")).startswith("sink task's reading stalled; re-established"):
                    events.append(data["event"])
        assert events, worker.log_text()[-3000:]
        print(f"\nSTALL-FIGURES named={first} resumed_after_hold_s={resumed_s:.1f} re_established={events}")
    finally:
        proxy.release()
        worker.stop(60)
