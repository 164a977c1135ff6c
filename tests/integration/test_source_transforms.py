"""Transforms and predicates on source records: Filter (with a predicate), InsertField$Value and RegexRouter.

A source runner in this process, a real broker and a local SparkSession: a poll batch becomes one frame,
the chain applies, and what survives is produced. Records the chain drops are still acknowledged
(``commit_record(record, None)``) and their offsets committed.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.dataplane.source_runner import SourceTaskRunner
from kconnect.runtime.dataplane.spark_executor import SparkSessionHolder
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import SourceRecord, SourceTask
from kconnect.runtime.storage.offset_log import OffsetState, SourceOffset
from tests.support.apache_kafka import Broker
from tests.support.cluster import wait_until

pytestmark = pytest.mark.integration

COUNT = 40


class _Numbers(SourceTask):
    """Records n = 0..COUNT-1 in two polls: a map {"n": n} for even n, a tombstone for odd n."""

    def __init__(self) -> None:
        self.next = 0
        self.acks: list[tuple[int, bool]] = []  # (n, reached Kafka)
        self.lock = threading.Lock()

    def version(self) -> str:
        return "test"

    def start(self, props: dict[str, str]) -> None:
        self.topic = props["topic"]

    def poll(self) -> list[SourceRecord] | None:
        if self.next >= COUNT:
            time.sleep(0.1)
            return None
        batch = range(self.next, min(self.next + COUNT // 2, COUNT))
        self.next = batch.stop
        return [
            SourceRecord({"p": 0}, {"n": n}, self.topic, value=None if n % 2 else {"n": n}) for n in batch
        ]

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        assert record.source_offset is not None
        with self.lock:
            self.acks.append((int(record.source_offset["n"]), metadata is not None))

    def stop(self) -> None:
        """Nothing to release."""


def test_filter_insert_field_and_router_apply_to_source_records(broker: Broker) -> None:
    topic = f"src-{uuid.uuid4().hex[:6]}"
    routed = f"{topic}-routed"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(routed, 1, 1)]).values():
        future.result(15)
    written: list[SourceOffset] = []
    config = {
        "name": "src",
        "topic": topic,
        "transforms": "drop,insert,route",
        "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
        "transforms.drop.predicate": "tomb",
        "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.insert.static.field": "origin",
        "transforms.insert.static.value": "kconnect",
        "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "$1-routed",
        "predicates": "tomb",
        "predicates.tomb.type": "org.apache.kafka.connect.transforms.predicates.RecordIsTombstone",
    }
    converters = {
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "key.converter.schemas.enable": "false",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }
    spark = SparkSessionHolder(
        {"spark.master": "local[1]", "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    )
    task = _Numbers()
    failures: list[str] = []
    runner = SourceTaskRunner(
        TaskId("src", 0),
        task,
        config,
        lambda _task, trace: failures.append(trace),
        bootstrap=broker.bootstrap,
        converters=converters,
        producer_settings={},
        read_offsets=OffsetState,
        write_offsets=written.extend,
        flush_interval_ms=500,
        flush_timeout_ms=10_000,
        spark=spark.get,
    )
    try:
        runner.start(paused=False)
        wait_until(lambda: len(task.acks) >= COUNT or failures, 180, "every record acknowledged")
        assert not failures, failures[0]
        wait_until(lambda: written, 30, "offsets committed")
    finally:
        runner.stop(15)
        spark.stop()
    assert sorted(task.acks) == [(n, n % 2 == 0) for n in range(COUNT)]
    assert written[-1].offset == {"n": COUNT - 1}, "dropped records' offsets are committed too"

    consumer = Consumer(
        {"bootstrap.servers": broker.bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    consumer.assign([TopicPartition(routed, 0, OFFSET_BEGINNING)])
    values: list[Any] = []
    deadline = time.monotonic() + 30
    while len(values) < COUNT // 2 and time.monotonic() < deadline:
        values += [json.loads(m.value()) for m in consumer.consume(100, 0.5) if m.error() is None]
    consumer.close()
    print(f"\n{len(values)} records on {routed}, first {values[:2]}")
    assert values == [{"n": n, "origin": "kconnect"} for n in range(0, COUNT, 2)]
