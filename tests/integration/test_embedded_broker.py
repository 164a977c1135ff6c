"""A smoke test of the embedded development broker, which `kconnect broker` and `make demo` run.

The rest of the integration suite meets Apache Kafka; this file keeps the embedded broker honest for what
a newcomer does with it: `kconnect broker` in the foreground, a worker joining it, a connector created over
REST whose task moves lines into a topic that a plain consumer then reads.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port, wait_for_port
from tests.support.cluster import WorkerProcess, stable_view, wait_until, worker_properties

pytestmark = pytest.mark.integration

LINES = 50


def test_kconnect_broker_serves_a_worker_and_its_pipeline(tmp_path: Path) -> None:
    port = free_port()
    broker = subprocess.Popen(
        [sys.executable, "-m", "kconnect.runtime.cli.main", "broker", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    worker: WorkerProcess | None = None
    try:
        assert wait_for_port("127.0.0.1", port, 30), "kconnect broker did not listen"
        bootstrap = f"127.0.0.1:{port}"
        group = f"smoke-{uuid.uuid4().hex[:6]}"
        source = tmp_path / "in.txt"
        source.write_text("".join(f"line {i}\n" for i in range(LINES)))
        topic = f"smoke-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": bootstrap})
        for fut in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            fut.result(30)
        # The product's own worker (not the rebalancing tests' held one), so its source task runs; a
        # FileStream source runs on the worker's thread under a local master, so no JVM starts.
        worker = WorkerProcess(tmp_path, worker_properties(bootstrap, group, free_port()), spark=True).start()
        wait_until(stable_view([worker], 1), 90, "the worker's group on the embedded broker")
        resp = worker.request(
            "POST",
            "/connectors",
            json={
                "name": "smoke-source",
                "config": {
                    "connector.class": "FileStreamSource",
                    "file": str(source),
                    "topic": topic,
                    "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                },
            },
        )
        assert resp.status_code in (201, 409), resp.text

        consumer = Consumer(
            {"bootstrap.servers": bootstrap, "group.id": f"check-{topic}", "auto.offset.reset": "earliest"}
        )
        seen: list[str] = []
        try:
            # assign, not subscribe: a consumer group's first generation waits half its session on this broker
            consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])

            def all_lines() -> bool:
                for msg in consumer.consume(num_messages=100, timeout=0.5):
                    if msg.error() is None and msg.value() is not None:
                        seen.append(msg.value().decode())
                return len(seen) >= LINES

            wait_until(all_lines, 90, f"{LINES} lines in {topic}", interval=0)
        finally:
            consumer.close()
        assert seen[:LINES] == [f"line {i}" for i in range(LINES)]
        status = worker.get("/connectors/smoke-source/status").json()
        assert status["connector"]["state"] == "RUNNING", json.dumps(status)
    finally:
        if worker is not None and worker.alive():
            worker.stop()
        broker.send_signal(signal.SIGTERM)
        broker.wait(15)
