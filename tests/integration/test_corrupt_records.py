"""A corrupt record in an internal topic is skipped with a warning naming it; the worker carries on."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, wait_until, worker_properties

pytestmark = pytest.mark.integration


def test_corrupt_internal_records_are_skipped_with_a_warning(tmp_path: Path, broker: Broker) -> None:
    group = f"corrupt-{uuid.uuid4().hex[:6]}"
    props = worker_properties(broker.bootstrap, group, free_port())
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    compact = {"cleanup.policy": "compact"}
    for topic, partitions in ((props["config.storage.topic"], 1), (props["status.storage.topic"], 3)):
        admin.create_topics([NewTopic(topic, partitions, 1, config=compact)])[topic].result(30)
    good = {"connector.class": "FileStreamSource", "topic": "t", "name": "good", "file": str(tmp_path / "in")}
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    config_topic = props["config.storage.topic"]
    for key, value in (
        (b"connector-broken", b"{not json"),
        (b"connector-wrongshape", b'{"properties": 42}'),
        (b"no-such-record-type", b"{}"),
        (b"connector-good", json.dumps({"properties": good}).encode()),
    ):
        producer.produce(config_topic, key=key, value=value)
        producer.flush(10)
    producer.produce(props["status.storage.topic"], key=b"status-connector-good", value=b"\x00\xff")
    producer.flush(10)

    worker = WorkerProcess(tmp_path, props).start()
    try:
        wait_until(stable_view([worker], 1), 60, "the worker in its group despite the corrupt records")
        assert worker.get("/connectors").json() == ["good"]
        assert worker.alive()
        log = worker.log_text()
        assert "skipping corrupt config record" in log and "connector-broken" in log
        assert "skipping corrupt status record" in log
    finally:
        worker.stop()
