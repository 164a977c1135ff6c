"""The Parquet sink on a real kconnect worker, the suite's broker and a real local SparkSession.

FileStream source -> topic (2 partitions) -> FileStream sink and Parquet sink (``partition.field.name``,
small ``flush.size``, ``rotate.interval.ms``); read back with pyarrow: every record exactly once, Hive
directories, files no larger than ``flush.size``, a partial file published by time. Then the sink
connector restarts mid-stream and the worker is killed (SIGKILL) mid-stream and replaced: still every
record exactly once, and no file twice. One test, one story: each step builds on the files already there.

A Parquet sink task is a Structured Streaming query, which plans up to the high watermark: under
``KCONNECT_TEST_BROKER=embedded`` every record is produced one per batch (``one_record_batches``), as that
broker reports the watermark short of a multi-record batch's tail (DESIGN.md, test broker quirk 2).
"""

from __future__ import annotations

import json
import os
import re
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow.dataset as pads
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.connectors.parquet import parse_file_name
from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker, one_record_batches
from tests.support.cluster import WorkerProcess, wait_nudging, wait_until, worker_properties

pytestmark = pytest.mark.integration

FLUSH_SIZE = 40
#: Key order as Java's JsonConverter writes it (the order Java users would see in the topic).
VALUE_SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "int64", "optional": False, "field": "id"},
        {"type": "string", "optional": False, "field": "grp"},
    ],
    "optional": False,
}


def envelope(n: int) -> str:
    """One record value as JSON with schemas: a struct {id, grp}."""
    return json.dumps({"schema": VALUE_SCHEMA, "payload": {"id": n, "grp": "abc"[n % 3]}})


def published_files(out: Path, topic: str) -> list[Path]:
    root = out / topic
    return sorted(Path(d) / f for d, _, files in os.walk(root) for f in files) if root.is_dir() else []


def published_ids(out: Path, topic: str) -> list[int]:
    if not published_files(out, topic):
        return []
    table = pads.dataset(str(out / topic), format="parquet", partitioning="hive").to_table(columns=["id"])
    return sorted(table.column("id").to_pylist())


def sink_committed(bootstrap: str, topic: str) -> dict[int, int]:
    """The Parquet sink's committed offset per partition (consumer group ``connect-pq``), 0 if none."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "connect-pq", "enable.auto.commit": False}
    )
    try:
        tps = consumer.committed([TopicPartition(topic, p) for p in range(2)], timeout=10)
    finally:
        consumer.close()
    return {tp.partition: max(tp.offset, 0) for tp in tps}


def test_parquet_sink_exactly_once_across_restart_and_kill(tmp_path: Path, broker: Broker) -> None:
    props = worker_properties(
        broker.bootstrap,
        f"pq-{uuid.uuid4().hex[:8]}",
        free_port(),
        scheduled_rebalance_max_delay_ms=0,
    )
    props.update(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "offset.flush.interval.ms": "1000",
            **one_record_batches("producer."),  # the FileStream source's records (module docstring)
        }
    )
    topic = f"orders-{uuid.uuid4().hex[:6]}"
    out = tmp_path / "parquet"
    source_file = tmp_path / "in.jsonl"
    sink_file = tmp_path / "out.txt"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held: futures need it alive
    for future in admin.create_topics([NewTopic(topic, 2, 1)]).values():
        future.result(15)
    parquet_config = {
        "connector.class": "ParquetSinkConnector",
        "topics": topic,
        "tasks.max": "1",
        "path": str(out),
        "flush.size": str(FLUSH_SIZE),
        "rotate.interval.ms": "2000",
        "partition.field.name": "grp",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
    }
    worker = WorkerProcess(tmp_path, props, name="pq-w0", spark=True).start()
    replacement: WorkerProcess | None = None
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")

        # 1. File source -> topic -> FileStream sink and Parquet sink.
        first = 300
        source_file.write_text("".join(envelope(n) + "\n" for n in range(first)))
        started = time.monotonic()
        source = {
            "connector.class": "FileStreamSource",
            "file": str(source_file),
            "topic": topic,
            "tasks.max": "1",
            # Lines are already JSON with schemas: written as they are.
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            # Null keys: spread records over both partitions record by record, not in sticky runs.
            "producer.override.sticky.partitioning.linger.ms": "0",
        }
        for name, config in (
            ("src", source),
            ("pq", parquet_config),
            ("lines", {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic}),
        ):
            resp = worker.request("POST", "/connectors", json={"name": name, "config": config})
            assert resp.status_code == 201, resp.text
        wait_until(
            lambda: published_ids(out, topic) == list(range(first)), 180, f"{first} records in Parquet"
        )
        elapsed = time.monotonic() - started
        print(f"\nfile source -> Parquet: {first} records in {elapsed:.1f} s, Spark start included")
        wait_until(
            lambda: sink_file.exists() and len(sink_file.read_text().splitlines()) >= first,
            60,
            "the file sink's lines",
        )
        lines = sink_file.read_text().splitlines()
        assert {int(m.group(1)) for m in (re.search(r"\bid=(\d+)", x) for x in lines) if m} == set(
            range(first)
        )
        # The file sink has shown the same records reach both sinks; it would only compete for the two cores.
        assert worker.request("DELETE", "/connectors/lines").status_code == 204
        files = published_files(out, topic)
        names = [parse_file_name(f.name) for f in files]
        assert all(n is not None and n.topic == topic for n in names), files
        assert {f.parent.name for f in files} == {"grp=a", "grp=b", "grp=c"}
        assert {n.partition for n in names if n} == {0, 1}, "the records went to one partition only"
        assert all(pq.ParquetFile(f).metadata.num_rows <= FLUSH_SIZE for f in files)
        # A partition's last records fill no window of flush.size: only rotate.interval.ms published them.
        assert any(n.end - n.start + 1 < FLUSH_SIZE for n in names if n), names
        grp_a = pads.dataset(str(out / topic / "grp=a"), format="parquet").to_table()
        assert grp_a.column_names == ["id"] and all(i % 3 == 0 for i in grp_a.column("id").to_pylist())

        # 2. The sink connector restarts while records arrive: staged records are read again, published
        # ones skipped by the files' names.
        second = first + 300
        with source_file.open("a") as stream:
            stream.write("".join(envelope(n) + "\n" for n in range(first, second)))
        resp = worker.request("POST", "/connectors/pq/restart", params={"includeTasks": "true"})
        assert resp.status_code in (202, 204), resp.text
        wait_until(lambda: published_ids(out, topic) == list(range(second)), 180, f"{second} records")

        # 3. The worker is killed mid-stream and replaced: records arrive before the kill (the sink has
        # published some of them when it comes) and after it (only the replacement can publish those).
        # The source is removed first, once its offsets are committed: a source re-sending lines after a
        # kill would duplicate them in Kafka itself.
        size = source_file.stat().st_size

        def source_done() -> bool:
            body = worker.get("/connectors/src/offsets").json()
            offsets = body.get("offsets") or []
            return bool(offsets) and offsets[0]["offset"]["position"] == size

        wait_until(source_done, 60, "the source offset at the end of the file")
        assert worker.request("DELETE", "/connectors/src").status_code == 204
        before_kill, third = second + 600, second + 1200
        producer = Producer({"bootstrap.servers": broker.bootstrap, **one_record_batches()})

        def produce(ids: range) -> None:
            for n in ids:
                producer.produce(topic, value=envelope(n).encode(), partition=n % 2)
            assert producer.flush(30) == 0

        produce(range(second, before_kill))
        wait_until(lambda: len(published_ids(out, topic)) > second, 120, "the sink to publish some")
        worker.kill()
        # What the killed worker left: its published files (and its committed offsets, printed). Some of
        # the records sent since step 2 are published; the rest of the stream only comes now, so the kill
        # lands mid-stream whatever the sink had done with the first part.
        at_kill = published_ids(out, topic)
        committed = sink_committed(broker.bootstrap, topic)
        print(
            f"killed with {len(at_kill)} of {before_kill} records published, offsets committed: {committed}"
        )
        assert second < len(at_kill) <= before_kill, "the kill did not land while the sink was publishing"
        assert at_kill == sorted(set(at_kill)), "a record published twice before the kill"
        produce(range(before_kill, third))
        replacement = WorkerProcess(tmp_path, props, name="pq-w1", spark=True).start()
        wait_nudging(
            lambda: published_ids(out, topic) == list(range(third)),
            lambda: replacement.request("PUT", "/connectors/pq/config", json=parquet_config),
            240,
            f"{third} records in Parquet after the kill",
            every=15,
        )
        files = published_files(out, topic)
        assert [f for f in files if not f.name.endswith(".parquet")] == []
        rows = Counter[Any]()
        for f in files:
            name = parse_file_name(f.name)
            assert name is not None
            rows[(f.parent.name, name)] += 1
        assert max(rows.values()) == 1
        assert all(pq.ParquetFile(f).metadata.num_rows <= FLUSH_SIZE for f in files)
        ids = published_ids(out, topic)
        assert len(ids) == len(set(ids)) == third
    finally:
        for w in (worker, replacement):
            if w is not None and w.alive():
                w.stop(60)
        print((replacement or worker).log_text()[-3000:])
