"""Converters, transforms and errors.* on the Spark data plane: one worker, the suite's broker, local Spark.

A FileStream source writes lines through the worker's JsonConverter to a topic; a FileStream sink reads
them with a RegexRouter followed by a Filter that drops every record whose topic is NOT the routed name,
so lines reach the file only if the router ran. A second sink applies InsertField to schemaless JSON and
the inserted field shows in what it writes. A topic holding a few malformed records is read with
errors.tolerance=all and a dead letter queue: the good records reach the sink, the bad ones land in the
DLQ with Java's __connect.errors.* headers, the task stays RUNNING; with tolerance none it FAILS.

The worker runs every sink task as a Structured Streaming query (``sink.task.placement=query``): this file
holds the query's conversion and error paths to Java's behaviour. Under a local master an untransformed
sink would otherwise run as a consumer loop, whose own error paths ``test_sink_placement.py`` tests.
A query plans up to the high watermark, which the embedded broker reports short of a multi-record batch's
tail: under ``KCONNECT_TEST_BROKER=embedded`` every producer here sends one record per batch
(``one_record_batches``); Apache Kafka needs nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker, one_record_batches
from tests.support.cluster import WorkerProcess, wait_until, worker_properties

pytestmark = pytest.mark.integration


class Bench:
    def __init__(self, worker: WorkerProcess, workdir: Path, bootstrap: str) -> None:
        self.worker = worker
        self.workdir = workdir
        self.bootstrap = bootstrap

    def task_state(self, name: str) -> dict[str, Any] | None:
        resp = self.worker.get(f"/connectors/{name}/status")
        if resp.status_code != 200 or not resp.json().get("tasks"):
            return None
        task: dict[str, Any] = resp.json()["tasks"][0]
        return task

    def create(self, name: str, config: dict[str, str]) -> None:
        resp = self.worker.request("POST", "/connectors", json={"name": name, "config": config})
        assert resp.status_code == 201, resp.text

    def topic(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
            future.result(15)
        return name

    def produce(self, topic: str, values: list[bytes]) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, **one_record_batches()})
        for value in values:
            producer.produce(topic, value=value)
        assert producer.flush(10) == 0

    def consume(self, topic: str, count: int, timeout_s: float = 60) -> list[Any]:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"check-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        consumer.subscribe([topic])
        out: list[Any] = []
        try:

            def enough() -> bool:
                message = consumer.poll(1.0)
                if message is not None and message.error() is None:
                    out.append(message)
                return len(out) >= count

            wait_until(enough, timeout_s, f"{count} records in {topic}")
        finally:
            consumer.close()
        return out


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Bench]:
    workdir = tmp_path_factory.mktemp("dataplane-errors")
    props = worker_properties(broker.bootstrap, f"dpe-{uuid.uuid4().hex[:8]}", free_port())
    props.update(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "offset.flush.interval.ms": "1000",
            "sink.task.placement": "query",
            **one_record_batches("producer."),  # the FileStream sources' records (module docstring)
        }
    )
    worker = WorkerProcess(workdir, props, name="dpe-w0", spark=True).start()
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        yield Bench(worker, workdir, broker.bootstrap)
    finally:
        worker.stop(60)
        print(worker.log_text()[-3000:])


GOOD = [json.dumps({"id": n, "name": f"n{n}"}).encode() for n in range(3)]
BAD = [b"{this is not json", b"[1, 2"]


def test_source_json_to_sink_with_transforms(bench: Bench) -> None:
    topic = bench.topic("lines")
    source_file = bench.workdir / "in.txt"
    source_file.write_text("".join(f"line {n}\n" for n in range(20)))
    bench.create(
        "src",
        {"connector.class": "FileStreamSource", "file": str(source_file), "topic": topic, "tasks.max": "1"},
    )
    # The source's converter is the worker's JsonConverter with schemas: Java's envelope on the topic.
    [first] = bench.consume(topic, 1)
    assert json.loads(first.value()) == {"schema": {"type": "string", "optional": False}, "payload": "line 0"}
    sink_file = bench.workdir / "routed.txt"
    bench.create(
        "routed",
        {
            "connector.class": "FileStreamSink",
            "file": str(sink_file),
            "topics": topic,
            "tasks.max": "1",
            "transforms": "route,keep",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "lines-(.*)",
            "transforms.route.replacement": "routed-$1",
            # Filter with a predicate on the ROUTED name: only if the router ran does anything get through.
            "transforms.keep.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.keep.predicate": "routed",
            "transforms.keep.negate": "true",
            "predicates": "routed",
            "predicates.routed.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
            "predicates.routed.pattern": "routed-.*",
        },
    )
    wait_until(lambda: len(lines(sink_file)) >= 20, 120, "20 lines in the routed sink")
    assert lines(sink_file) == [f"line {n}" for n in range(20)]

    # InsertField on schemaless JSON objects: the inserted field shows in what the sink writes.
    objects = bench.topic("objects")
    bench.produce(objects, GOOD)
    inserted_file = bench.workdir / "inserted.txt"
    bench.create(
        "inserted",
        {
            "connector.class": "FileStreamSink",
            "file": str(inserted_file),
            "topics": objects,
            "tasks.max": "1",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "transforms": "insert",
            "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.insert.static.field": "origin",
            "transforms.insert.static.value": "kconnect",
        },
    )
    wait_until(lambda: len(lines(inserted_file)) >= 3, 120, "3 lines in the InsertField sink")
    print("\nInsertField sink wrote:", lines(inserted_file))
    assert all("origin" in line and "kconnect" in line for line in lines(inserted_file)), lines(inserted_file)

    # KIP-1054: bare JSON records read with the schema the converter is given (schema.content); without
    # it, schemas.enable=true would fail the task on the first record that is no envelope.
    typed_file = bench.workdir / "typed.txt"
    schema = {
        "type": "struct",
        "optional": False,
        "fields": [
            {"field": "id", "type": "int64", "optional": False},
            {"field": "name", "type": "string", "optional": True},
        ],
    }
    bench.create(
        "typed",
        {
            "connector.class": "FileStreamSink",
            "file": str(typed_file),
            "topics": objects,
            "tasks.max": "1",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true",
            "value.converter.schema.content": json.dumps(schema),
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        },
    )
    wait_until(lambda: len(lines(typed_file)) >= 3, 120, "3 lines in the schema.content sink")
    # kconnect's SinkRecord carries no schema, so the file shows the struct as Java prints a map.
    assert lines(typed_file) == [f"{{id={n}, name=n{n}}}" for n in range(3)], lines(typed_file)
    for name in ("src", "routed", "inserted", "typed"):
        state = bench.task_state(name)
        assert state is not None and state["state"] == "RUNNING", state


def started_on_stream(worker: WorkerProcess, connector: str) -> bool | None:
    """Whether the connector's sink query started with its batches prepared on the stream, from the
    worker's "sink query started" log line (None if there is none)."""
    for line in worker.log_text().splitlines():
        if '"event": "sink query started"' in line and f'"{connector}-0"' in line:
            found: bool = json.loads(line)["prepared_on_stream"]
            return found
    return None


def test_malformed_records_go_to_the_dlq_with_tolerance_all(bench: Bench) -> None:
    """String keys and schemaless JSON values read no batch, so this query's batches arrive converted
    (``prepared_on_stream``) and its failed rows are split off them; the tolerance-none test below keeps
    the worker's JSON keys, whose envelopes make each batch be prepared by itself."""
    topic = bench.topic("mixed")
    dlq = f"dlq-{uuid.uuid4().hex[:6]}"  # does not exist yet: the task creates it
    bench.produce(topic, [GOOD[0], BAD[0], GOOD[1], BAD[1], GOOD[2]])
    sink_file = bench.workdir / "tolerant.txt"
    bench.create(
        "tolerant",
        {
            "connector.class": "FileStreamSink",
            "file": str(sink_file),
            "topics": topic,
            "tasks.max": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "all",
            "errors.log.enable": "true",
            "errors.log.include.messages": "true",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
        },
    )
    wait_until(lambda: len(lines(sink_file)) >= 3, 120, "the 3 good records in the sink")
    assert started_on_stream(bench.worker, "tolerant") is True
    letters = bench.consume(dlq, 2)
    assert sorted(m.value() for m in letters) == sorted(BAD)
    for message in letters:
        headers = {k: (v or b"").decode() for k, v in message.headers() or []}
        assert headers["__connect.errors.topic"] == topic
        assert headers["__connect.errors.connector.name"] == "tolerant"
        assert headers["__connect.errors.task.id"] == "0"
        assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
        assert headers["__connect.errors.class.name"] == "org.apache.kafka.connect.json.JsonConverter"
        assert (
            headers["__connect.errors.exception.class.name"]
            == "org.apache.kafka.connect.errors.DataException"
        )
        assert headers["__connect.errors.offset"] in ("1", "3")
    state = bench.task_state("tolerant")
    assert state is not None and state["state"] == "RUNNING", state
    assert len(lines(sink_file)) == 3  # only the good ones
    # errors.log.enable with include.messages: each skipped record logged with its stage and raw value.
    logged = [
        line
        for line in bench.worker.log_text().splitlines()
        if "error handling a record" in line and topic in line
    ]
    assert len(logged) == 2 and "VALUE_CONVERTER" in logged[0] and "{this is not json" in logged[0], logged

    # Offsets moved past the bad records too: the group committed the end of the topic.
    def committed() -> Any:
        offsets = bench.worker.get("/connectors/tolerant/offsets").json().get("offsets") or []
        return offsets and offsets[0]["offset"]["kafka_offset"] == 5 and offsets

    wait_until(committed, 30, "the tolerant sink's committed offset at 5")


def test_malformed_records_fail_the_task_with_tolerance_none(bench: Bench) -> None:
    topic = bench.topic("strict")
    bench.produce(topic, [GOOD[0], BAD[0]])
    bench.create(
        "strict",
        {
            "connector.class": "FileStreamSink",
            "file": str(bench.workdir / "strict.txt"),
            "topics": topic,
            "tasks.max": "1",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
            "errors.tolerance": "none",
        },
    )

    def failed() -> Any:
        state = bench.task_state("strict")
        return state is not None and state["state"] == "FAILED" and state

    state = wait_until(failed, 90, "the strict sink task FAILED")
    assert "Tolerance exceeded in error handler" in state["trace"], state["trace"]
    assert "VALUE_CONVERTER" in state["trace"] and "strict" in state["trace"], state["trace"]
    assert started_on_stream(bench.worker, "strict") is False  # JSON envelope keys: prepared per batch


def test_records_a_filter_drops_are_consumed_and_committed_past(bench: Bench) -> None:
    """A sink with a Filter commits its group's offsets past every record it read, the dropped ones too
    (a dropped tail included): the consumed offsets come from the rows as read, not as transformed.
    String converters read no batch, so this query's batches arrive converted and transformed
    (``prepared_on_stream``); the JSON sink above prepares each batch itself."""
    topic = bench.topic("filtered")
    producer = Producer({"bootstrap.servers": bench.bootstrap, **one_record_batches()})
    for n in range(10):
        # Every third record, and the last two, carry the header the Filter drops on.
        skip = n % 3 == 0 or n >= 8
        producer.produce(topic, value=f"record {n}".encode(), headers=[("skip", b"1")] if skip else None)
    assert producer.flush(10) == 0
    out = bench.workdir / "filtered.txt"
    bench.create(
        "filtered",
        {
            "connector.class": "FileStreamSink",
            "file": str(out),
            "topics": topic,
            "tasks.max": "1",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "transforms": "route,drop",
            "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
            "transforms.route.regex": "filtered-(.*)",
            "transforms.route.replacement": "elsewhere-$1",
            "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
            "transforms.drop.predicate": "skip",
            "predicates": "skip",
            "predicates.skip.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
            "predicates.skip.name": "skip",
        },
    )
    kept = [f"record {n}" for n in (1, 2, 4, 5, 7)]
    wait_until(lambda: lines(out) == kept, 120, "the records the Filter keeps")
    assert started_on_stream(bench.worker, "filtered") is True
    consumer = Consumer({"bootstrap.servers": bench.bootstrap, "group.id": "connect-filtered"})
    try:

        def committed() -> int:
            [tp] = consumer.committed([TopicPartition(topic, 0)], timeout=10)
            return int(tp.offset)

        wait_until(lambda: committed() == 10, 60, "the group's offset past the dropped tail")
    finally:
        consumer.close()
    assert lines(out) == kept
    state = bench.task_state("filtered")
    assert state is not None and state["state"] == "RUNNING", state
