"""The Schema Registry converters in a live worker on Apache Kafka, where no registry server is needed.

A worker whose connect-distributed.properties names Confluent's AvroConverter (with a registry URL) starts
and joins. Its sinks read a topic holding records that no registry can resolve: bytes without the magic
byte, and framed records while the registry at the URL is down (nothing listens there). With
errors.tolerance=all every such record lands in the dead letter queue with the reason in Java's
``__connect.errors.*`` headers and the task stays RUNNING; with tolerance none the task FAILS naming the
topic, partition, offset and cause.

The interop with a running registry server (Apicurio Registry) is test_schema_registry_live.py's; the bytes
of confluent-kafka's serializers are tested in tests/unit.
"""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from kconnect.runtime.cli.broker import free_port
from kconnect.runtime.dataplane.schema_registry.wire import frame
from tests.integration.test_dataplane_errors import Bench, lines
from tests.support.apache_kafka import Broker, one_record_batches
from tests.support.cluster import WorkerProcess, wait_until, worker_properties

pytestmark = pytest.mark.integration

AVRO = "io.confluent.connect.avro.AvroConverter"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Bench]:
    workdir = tmp_path_factory.mktemp("schema-registry")
    registry_url = f"http://127.0.0.1:{_closed_port()}"
    props = worker_properties(broker.bootstrap, f"sr-{uuid.uuid4().hex[:8]}", free_port())
    props.update(
        {
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            # What a user's connect-distributed.properties says for Avro values.
            "value.converter": AVRO,
            "value.converter.schema.registry.url": registry_url,
            "value.converter.basic.auth.credentials.source": "USER_INFO",
            "value.converter.basic.auth.user.info": "reader:s3cret-info",
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "offset.flush.interval.ms": "1000",
            "sink.task.placement": "query",
            **one_record_batches("producer."),
        }
    )
    worker = WorkerProcess(workdir, props, name="sr-w0", spark=True).start()
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        yield Bench(worker, workdir, broker.bootstrap)
    finally:
        worker.stop(60)
        print(worker.log_text()[-3000:])


def _sink(bench: Bench, name: str, topic: str, **extra: str) -> None:
    bench.create(
        name,
        {
            "connector.class": "FileStreamSink",
            "file": str(bench.workdir / f"{name}.txt"),
            "topics": topic,
            "tasks.max": "1",
            **extra,
        },
    )


def test_unresolvable_records_go_to_the_dlq_with_the_reason(bench: Bench) -> None:
    topic = bench.topic("avro-bad")
    dlq = f"dlq-{uuid.uuid4().hex[:6]}"
    no_magic = b'{"id": 1}'
    framed = frame(7, b"\x02")  # well framed, but the registry that would resolve id 7 is down
    bench.produce(topic, [no_magic, framed])
    _sink(
        bench,
        "avro-tolerant",
        topic,
        **{
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": dlq,
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
        },
    )
    letters = bench.consume(dlq, 2, timeout_s=180)
    by_offset: dict[str, dict[str, str]] = {}
    for message in letters:
        headers = {k: (v or b"").decode() for k, v in message.headers() or []}
        by_offset[headers["__connect.errors.offset"]] = headers
        assert headers["__connect.errors.topic"] == topic
        assert headers["__connect.errors.stage"] == "VALUE_CONVERTER"
        assert headers["__connect.errors.class.name"] == AVRO
    assert sorted(m.value() for m in letters) == sorted([no_magic, framed])
    assert "Unknown magic byte" in by_offset["0"]["__connect.errors.exception.message"]
    assert "unreachable" in by_offset["1"]["__connect.errors.exception.message"]
    state = bench.task_state("avro-tolerant")
    assert state is not None and state["state"] == "RUNNING", state
    assert lines(bench.workdir / "avro-tolerant.txt") == []
    # The converter's credentials are masked where the worker logs its settings.
    assert "s3cret-info" not in bench.worker.log_text()


def test_without_tolerance_the_task_fails_naming_the_record_and_cause(bench: Bench) -> None:
    topic = bench.topic("avro-strict")
    bench.produce(topic, [b"plain text, no magic byte"])
    _sink(bench, "avro-strict", topic, **{"errors.tolerance": "none"})

    def failed() -> Any:
        state = bench.task_state("avro-strict")
        return state is not None and state["state"] == "FAILED" and state

    state = wait_until(failed, 180, "the strict Avro sink task FAILED")
    trace = state["trace"]
    assert "Tolerance exceeded in error handler" in trace, trace
    assert topic in trace and "VALUE_CONVERTER" in trace and "Unknown magic byte" in trace, trace
    assert f"{topic}-0@0" in trace or ("partition" in trace and "offset" in trace), trace
