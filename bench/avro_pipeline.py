"""Avro vs JSON through a worker, kconnect beside Apache Kafka Connect 4.3.1 (issue 30 item 6): records/s
and CPU seconds per 1,000 records of a FileStreamSink reading one topic with the converter under test.

Why a pipeline and not ``avro.py`` alone: ``avro.py`` times the converters in-process; what a user pays is
a worker's whole sink path (fetch, decode, convert, ``put``, offset commits) and, for Avro, a registry
server to ask for the schema. A Schema Registry server runs here now (Apicurio Registry 2.0.2.Final,
``tests/support/schema_registry_server.py``, Confluent's API under ``/apis/ccompat/v6``), so both
workers can run the real thing.

What runs, on one Apache Kafka 4.3.1 node and one registry server, each system on a fresh worker of its
own (started and in its group before its clock starts):

1. ``--records`` records of ``avro.py``'s schema (int64, string, Decimal, Timestamp, array of strings,
   double, boolean, optional string; keys null) are produced beforehand, untimed, to two topics of one
   partition: Avro by confluent-kafka's ``AvroSerializer`` against the registry (Confluent's wire format,
   the Avro schema Confluent's AvroData writes for that Connect schema), and the same records as Apache
   Kafka Connect's JsonConverter envelopes (``schemas.enable=true``: schema and payload in each record).
2. Each system's ``FileStreamSink`` (one task; keys with StringConverter) reads one of them into a file:

   - **kconnect, Avro**: ``io.confluent.connect.avro.AvroConverter`` (kconnect's own), ``schema.registry.url``
     the registry's Confluent API;
   - **kconnect, JSON**: ``org.apache.kafka.connect.json.JsonConverter``, ``schemas.enable=true``;
   - **Apache, JSON**: the same, on Apache Kafka Connect 4.3.1 (``connect-distributed.sh``'s JVM options);
   - **Apache, Avro**: Apicurio Registry's ``io.apicurio.registry.utils.converter.AvroConverter``
     2.0.2.Final from Maven Central (Confluent's is not published there) in a ``plugin.path`` folder
     (``tests/support/apicurio_converter.py``), set to read Confluent's wire format (a 4-byte content id
     after the magic byte, no Apicurio headers) from the same records, through the registry's own API.

records/s is the records over the seconds from the connector's creation until the file holds every line
(so with the connector's and task's start and the group's round); "steady" figures run from the first
line written instead. CPU is the worker's process tree's (``process_cpu``: the JVM; kconnect's Python
worker and anything below it) over the same span; the broker's and the registry's CPU are shown beside it,
not in it. Each output is then compared with the other converter's on the same system: the same records
decoded by either converter should print the same lines.

``--direction source`` (or ``sink,source``) runs the other way too: a ``FileStreamSource`` (one task,
``batch.size=2000``) reads a file of ``--records`` lines (each record's fields as JSON text, about 150
bytes) through the same four converters into a topic of its own, timed until the topic's high watermark
holds every line; its first and last records are then read back and decoded with confluent-kafka (Avro by
the schema id in Confluent's wire format: Apicurio's converter registers and writes it too). A
FileStreamSource's values are strings, so this direction measures a converter on a string schema, not on
the struct of the sink direction.

    flock /tmp/kconnect-heavy.lock .venv/bin/python bench/avro_pipeline.py                    # 1,000,000
    flock /tmp/kconnect-heavy.lock .venv/bin/python bench/avro_pipeline.py --records 100000   # a trial
    .venv/bin/python bench/avro_pipeline.py --only kconnect-avro,apache-avro --keep
    flock /tmp/kconnect-heavy.lock .venv/bin/python bench/avro_pipeline.py --direction sink,source

Figures depend on the machine's load: on a shared machine say so next to them.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import hashlib
import json
import os
import platform
import shutil
import signal
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import avro
import density
import httpx
import process_cpu
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from file_pipeline import STRING_CONVERTER, bench_reference_worker, produce_all
from proc_tree import PeakSampler, mib

from kconnect.runtime.cli.broker import free_port
from tests.support.apicurio_converter import (
    APICURIO_CONVERTER_VERSION,
    apicurio_plugin,
    converter_config,
)
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.reference import REFERENCE_4X, ReferenceWorker, reference_available
from tests.support.schema_registry_server import RegistryServer, start_registry
from tests.support.topics import create_topic

SYSTEMS = ("kconnect-avro", "kconnect-json", "apache-json", "apache-avro")
LABELS = {
    "kconnect-avro": "kconnect, Confluent AvroConverter (kconnect's)",
    "kconnect-json": "kconnect, JsonConverter schemas.enable=true",
    "apache-json": f"Apache Connect {REFERENCE_4X}, JsonConverter schemas.enable=true",
    "apache-avro": f"Apache Connect {REFERENCE_4X}, Apicurio AvroConverter {APICURIO_CONVERTER_VERSION}",
}
AVRO_TOPIC = "bench-avro-orders"
JSON_TOPIC = "bench-json-orders"
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
DIRECTIONS = ("sink", "source")

#: The Avro schema Confluent's AvroData writes for ``avro.SCHEMA`` (its connect.* properties let a
#: converter give back the Connect schema, Decimal and Timestamp included). Written out here rather than
#: taken from kconnect's own mapping, so that kconnect's converter reads what a Java producer would write.
_DECIMAL = {
    "type": "bytes",
    "scale": 2,
    "precision": 64,
    "connect.version": 1,
    "connect.parameters": {"scale": "2"},
    "connect.name": "org.apache.kafka.connect.data.Decimal",
    "logicalType": "decimal",
}
_TIMESTAMP = {
    "type": "long",
    "connect.version": 1,
    "connect.name": "org.apache.kafka.connect.data.Timestamp",
    "logicalType": "timestamp-millis",
}
AVRO_SCHEMA = {
    "type": "record",
    "name": "Order",
    "namespace": "bench",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "customer", "type": "string"},
        {"name": "amount", "type": _DECIMAL},
        {"name": "at", "type": _TIMESTAMP},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "score", "type": "double"},
        {"name": "paid", "type": "boolean"},
        {"name": "note", "type": ["null", "string"], "default": None},
    ],
    "connect.name": "bench.Order",
}


def _field(key: str, type_: str, optional: bool = False, **more: Any) -> dict[str, Any]:
    return {"type": type_, "optional": optional, **more, "field": key}


#: The schema half of JsonConverter's envelope for ``avro.SCHEMA``, its keys in the order Apache Kafka
#: Connect writes them (an array's items before its optional).
JSON_SCHEMA = {
    "type": "struct",
    "fields": [
        _field("id", "int64"),
        _field("customer", "string"),
        _field(
            "amount",
            "bytes",
            name="org.apache.kafka.connect.data.Decimal",
            version=1,
            parameters={"scale": "2"},
        ),
        _field("at", "int64", name="org.apache.kafka.connect.data.Timestamp", version=1),
        {"type": "array", "items": {"type": "string", "optional": False}, "optional": False, "field": "tags"},
        _field("score", "double"),
        _field("paid", "boolean"),
        _field("note", "string", optional=True),
    ],
    "optional": False,
    "name": "bench.Order",
}
_JSON_HEAD = '{"schema":' + json.dumps(JSON_SCHEMA, separators=(",", ":")) + ',"payload":'
_EPOCH_MS = int(avro.record(0)["at"].timestamp() * 1000)


def json_envelope(n: int) -> bytes:
    """Record ``n`` of ``avro.record`` as JsonConverter's envelope: a Decimal as the base64 of its unscaled
    value's two's-complement bytes (``decimal.format=BASE64``), a Timestamp as epoch milliseconds."""
    value = avro.record(n)
    unscaled = int(value["amount"].scaleb(2))
    amount = unscaled.to_bytes((unscaled.bit_length() + 8) // 8, "big", signed=True)
    payload = {
        "id": value["id"],
        "customer": value["customer"],
        "amount": base64.b64encode(amount).decode(),
        "at": _EPOCH_MS + n,
        "tags": value["tags"],
        "score": value["score"],
        "paid": value["paid"],
        "note": value["note"],
    }
    return (_JSON_HEAD + json.dumps(payload, separators=(",", ":")) + "}").encode()


def avro_values(registry_url: str, records: int) -> Iterator[bytes]:
    """The records in Confluent's wire format, by confluent-kafka's serializer (its schema registered
    under ``<topic>-value`` on the first)."""
    client = SchemaRegistryClient({"url": registry_url})
    serializer = AvroSerializer(client, json.dumps(AVRO_SCHEMA))
    context = SerializationContext(AVRO_TOPIC, MessageField.VALUE)
    for n in range(records):
        out = serializer(avro.record(n), context)
        assert out is not None
        yield out


def produce(bootstrap: str, topic: str, values: Iterator[bytes]) -> None:
    create_topic(bootstrap, topic)
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "batch.size": 1_000_000, "acks": "all"}
    )
    produce_all(producer, topic, values)
    if producer.flush(600) != 0:
        raise RuntimeError(f"{topic}: records not delivered within 600 s")


# ------------------------------------------------------------------------------------------- workers


class Worker:
    """One system's worker: kconnect's (``kconnect worker``, consumer-loop sinks) or Apache Kafka Connect
    4.3.1's, each with keys and values as StringConverter by default and Apicurio's converter on the
    Apache worker's plugin.path (for both Apache rows, so they differ in the converter alone)."""

    def __init__(self, side: str, bootstrap: str, work: Path) -> None:
        self.side = side
        group = f"bench-avro-{side}-{uuid.uuid4().hex[:6]}"
        self.ref: ReferenceWorker | None = None
        self.kc: WorkerProcess | None = None
        if side == "apache":
            self.ref = bench_reference_worker(
                bootstrap,
                group,
                work / f"{group}.log",
                extra={"plugin.path": str(apicurio_plugin()), "plugin.discovery": "hybrid_warn"},
                version=REFERENCE_4X,
                startup_timeout_s=180,
            ).start()
        else:
            props = worker_properties(bootstrap, group, free_port())
            props.update({"key.converter": STRING_CONVERTER, "value.converter": STRING_CONVERTER})
            kc = WorkerProcess(work, props, name=group, spark=True).start()
            self.kc = kc
            wait_until(lambda: (kc.workers() or {}).get("generation", -1) >= 0, 180, "the kconnect worker")

    @property
    def pid(self) -> int:
        proc = self.ref.process if self.ref is not None else self.kc.proc if self.kc is not None else None
        assert proc is not None
        return proc.pid

    def rest(self, method: str, path: str, **kw: Any) -> Any:
        if self.ref is not None:
            return self.ref.rest(method, path, **kw)
        assert self.kc is not None
        return self.kc.request(method, path, **kw)

    def alive(self) -> bool:
        if self.ref is not None:
            return self.ref.alive
        return self.kc is not None and self.kc.alive()

    def stop(self) -> None:
        if self.ref is not None:
            self.ref.close()
            self.ref = None
        if self.kc is not None:
            with contextlib.suppress(Exception):
                self.kc.stop(60)
            self.kc = None


def connector_config(system: str, topic: str, out: Path, registry: RegistryServer) -> dict[str, str]:
    config = {
        "connector.class": "FileStreamSink",
        "tasks.max": "1",
        "topics": topic,
        "file": str(out),
        "key.converter": STRING_CONVERTER,
    }
    if system.endswith("-json"):
        return {**config, "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "true"}
    if system == "kconnect-avro":
        return {
            **config,
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url,
        }
    return {**config, **converter_config(registry.url.rsplit("/apis/", 1)[0])}


class Lines:
    """The lines written to a file so far, counted from where the last look ended (a re-read of the
    whole output every poll would take CPU from the worker under test on a 2-core machine)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.offset = 0
        self.count = 0

    def poll(self) -> int:
        with contextlib.suppress(FileNotFoundError), open(self.path, "rb") as f:
            f.seek(self.offset)
            while chunk := f.read(1 << 24):
                self.offset += len(chunk)
                self.count += chunk.count(b"\n")
        return self.count


class Failed:
    """Raises once the worker is gone or its task FAILED (asked every 2 s), with the task's trace."""

    def __init__(self, worker: Worker, name: str) -> None:
        self.worker, self.name, self.next = worker, name, 0.0

    def check(self) -> None:
        if not self.worker.alive():
            raise RuntimeError("the worker exited")
        if time.monotonic() < self.next:
            return
        self.next = time.monotonic() + 2
        try:
            body = self.worker.rest("GET", f"/connectors/{self.name}/status").json()
        except (httpx.HTTPError, ValueError):  # not now (a rebalance, a slow answer): asked again later
            return
        for task in body.get("tasks", []) if isinstance(body, dict) else []:
            if task.get("state") == "FAILED":
                raise RuntimeError(f"{self.name}: task FAILED: {task.get('trace', '')[-2000:]}")


# --------------------------------------------------------------------------------------------- rows


@dataclass
class Row:
    system: str
    direction: str = "sink"
    records: int = 0
    seconds: float = 0.0
    steady_seconds: float = 0.0
    cpu_s: float = 0.0
    steady_cpu_s: float = 0.0
    broker_cpu_s: float = 0.0
    registry_cpu_s: float = 0.0
    peak_rss_kib: int = 0
    #: Peak RSS of JVMs below the worker (a Spark JVM under kconnect's worker; none under Apache's).
    peak_jvm_below_kib: int = 0
    out: Path | None = None
    first_line: str = ""
    note: str = ""

    @property
    def label(self) -> str:
        return LABELS[self.system] + (" (source)" if self.direction == "source" else "")

    def rate(self, steady: bool = False) -> float:
        seconds = self.steady_seconds if steady else self.seconds
        return self.records / seconds if seconds else float("nan")

    def per_1k(self, cpu: float) -> float:
        return cpu / self.records * 1000 if self.records else float("nan")


def cpu_of(pid: int | None) -> float:
    return sum(process_cpu.cpu_ticks(pid)) / process_cpu.TICK if pid else 0.0


def timed_connector(
    worker: Worker,
    name: str,
    config: dict[str, str],
    progress: Callable[[], int],
    row: Row,
    args: argparse.Namespace,
    ctx: dict[str, Any],
) -> None:
    """Create the connector and wait until ``progress()`` (records through so far) reaches
    ``--records``; fill ``row``'s seconds and CPU from the creation and from the first record through."""
    failed = Failed(worker, name)
    broker_pid, registry_pid = ctx["broker_pid"], ctx["registry"].proc.pid
    with PeakSampler(worker.pid) as sampler:
        cpu0 = process_cpu.tree_cpu_seconds(worker.pid)
        broker0, registry0 = cpu_of(broker_pid), cpu_of(registry_pid)
        started = time.monotonic()
        resp = worker.rest("POST", "/connectors", json={"name": name, "config": config})
        if resp.status_code != 201:
            raise RuntimeError(f"creating {name}: {resp.status_code} {resp.text}")
        first_at, first_cpu = 0.0, 0.0
        deadline = started + args.timeout
        while (count := progress()) < args.records:
            if not first_at and count:
                first_at, first_cpu = time.monotonic(), process_cpu.tree_cpu_seconds(worker.pid)
            if time.monotonic() > deadline:
                raise TimeoutError(f"{name}: {count} of {args.records} records after {args.timeout:.0f} s")
            failed.check()
            time.sleep(0.2)
        done = time.monotonic()
        cpu1 = process_cpu.tree_cpu_seconds(worker.pid)
        row.broker_cpu_s, row.registry_cpu_s = cpu_of(broker_pid) - broker0, cpu_of(registry_pid) - registry0
    if not first_at:  # every record came within one poll
        first_at, first_cpu = started, cpu0
    row.records, row.seconds, row.cpu_s = count, done - started, cpu1 - cpu0
    row.steady_seconds, row.steady_cpu_s = done - first_at, cpu1 - first_cpu
    row.peak_rss_kib = sampler.peak["total"]
    row.peak_jvm_below_kib = sampler.peak["jvm"]
    if count != args.records:
        row.note = f"{count} records, not {args.records}"
    worker.rest("DELETE", f"/connectors/{name}")


def measure_sink(
    system: str, worker: Worker, row: Row, args: argparse.Namespace, work: Path, ctx: dict[str, Any]
) -> None:
    topic = AVRO_TOPIC if system.endswith("-avro") else JSON_TOPIC
    out = work / f"{system}.txt"
    name = f"bench-{system}"
    config = connector_config(system, topic, out, ctx["registry"])
    timed_connector(worker, name, config, Lines(out).poll, row, args, ctx)
    row.out = out
    with open(out, "rb") as f:
        row.first_line = f.readline().decode(errors="replace").rstrip("\n")


def source_line(n: int) -> str:
    """Line ``n`` of the source direction's input: record ``n``'s fields as JSON text, a string to
    FileStreamSource (about 150 bytes)."""
    value = avro.record(n)
    value["amount"], value["at"] = str(value["amount"]), _EPOCH_MS + n
    return json.dumps(value, separators=(",", ":"))


def write_source_input(path: Path, records: int) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for start in range(0, records, 10000):
            f.write("".join(source_line(n) + "\n" for n in range(start, min(records, start + 10000))))


def source_config(system: str, topic: str, source: Path, registry: RegistryServer) -> dict[str, str]:
    config = {
        "connector.class": "FileStreamSource",
        "tasks.max": "1",
        "topic": topic,
        "file": str(source),
        "batch.size": "2000",
        "key.converter": STRING_CONVERTER,
    }
    if system.endswith("-json"):
        return {**config, "value.converter": JSON_CONVERTER, "value.converter.schemas.enable": "true"}
    if system == "kconnect-avro":
        return {
            **config,
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": registry.url,
        }
    return {**config, **converter_config(registry.url.rsplit("/apis/", 1)[0])}


def record_at(bootstrap: str, topic: str, offset: int) -> bytes:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-check-{uuid.uuid4().hex[:6]}"})
    try:
        consumer.assign([TopicPartition(topic, 0, offset)])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            msg = consumer.poll(1.0)
            if msg is not None and msg.error() is None:
                return msg.value() or b""
        raise TimeoutError(f"{topic}: no record at offset {offset} within 60 s")
    finally:
        consumer.close()


def decoded(system: str, value: bytes, topic: str, registry: RegistryServer) -> str:
    """A source record's value as the line it came from: Avro by confluent-kafka's deserializer (the
    schema by the id in Confluent's wire format), JSON by the envelope's payload."""
    if system.endswith("-json"):
        return str(json.loads(value)["payload"])
    deserializer = AvroDeserializer(SchemaRegistryClient({"url": registry.url}))
    return str(deserializer(value, SerializationContext(topic, MessageField.VALUE)))


def measure_source(
    system: str, worker: Worker, row: Row, args: argparse.Namespace, work: Path, ctx: dict[str, Any]
) -> None:
    """FileStreamSource -> the converter -> a topic of its own, until the topic holds every line; then
    the first and last records are read back and decoded."""
    topic, name = f"bench-source-{system}", f"bench-source-{system}"
    create_topic(ctx["bootstrap"], topic)
    watcher = Consumer({"bootstrap.servers": ctx["bootstrap"], "group.id": "bench-watermarks"})
    partition = TopicPartition(topic, 0)

    def high() -> int:
        return int(watcher.get_watermark_offsets(partition, timeout=10, cached=False)[1])

    try:
        config = source_config(system, topic, ctx["source"], ctx["registry"])
        timed_connector(worker, name, config, high, row, args, ctx)
    finally:
        watcher.close()
    checks = []
    for n in (0, args.records - 1):
        got = decoded(system, record_at(ctx["bootstrap"], topic, n), topic, ctx["registry"])
        checks.append(got == source_line(n))
    row.first_line = "first and last records decode to their lines" if all(checks) else "RECORDS DIFFER"
    if not all(checks):
        row.note = row.note or "a record read back is not its line"


def run_one(system: str, direction: str, args: argparse.Namespace, work: Path, ctx: dict[str, Any]) -> Row:
    """One system in one direction, on a worker of its own."""
    row = Row(system, direction)
    worker: Worker | None = None
    try:
        worker = Worker(system.split("-")[0], ctx["bootstrap"], work)
        (measure_sink if direction == "sink" else measure_source)(system, worker, row, args, work, ctx)
        print(
            f"{row.label}: {row.records:,} records in {row.seconds:.1f} s, CPU {row.cpu_s:.1f} s", flush=True
        )
    except Exception as exc:  # one system failing still prints the others' figures
        row.note = f"{type(exc).__name__}: {exc}"[:600]
        print(f"{row.label}: {row.note}", flush=True)
    finally:
        if worker is not None:
            worker.stop()
    return row


def digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 24):
            h.update(chunk)
    return h.hexdigest()


def report(rows: list[Row]) -> None:
    print()
    print(
        f"{'system':<67} {'records':>9} {'s':>7} {'records/s':>9} {'CPU s/1k':>8} "
        f"{'steady r/s':>10} {'steady CPU s/1k':>15} {'broker s/1k':>11} {'registry s':>10} {'peak RSS':>9} "
        f"{'JVM below':>9}"
    )
    for r in rows:
        if not r.records:
            print(f"{r.label:<67} {'-':>9}  {r.note}")
            continue
        print(
            f"{r.label:<67} {r.records:>9,} {r.seconds:>7.1f} {r.rate():>9,.0f} "
            f"{r.per_1k(r.cpu_s):>8.3f} {r.rate(steady=True):>10,.0f} {r.per_1k(r.steady_cpu_s):>15.3f} "
            f"{r.per_1k(r.broker_cpu_s):>11.3f} {r.registry_cpu_s:>10.2f} {mib(r.peak_rss_kib):>9} "
            f"{mib(r.peak_jvm_below_kib):>9}"
        )
    by = {(r.direction, r.system): r for r in rows if r.records}
    for direction in DIRECTIONS:
        for side in ("kconnect", "apache"):
            a, j = by.get((direction, f"{side}-avro")), by.get((direction, f"{side}-json"))
            if a is None or j is None:
                continue
            same = ""
            if a.out is not None and j.out is not None:
                same = "; Avro and JSON outputs: " + (
                    "the same lines" if digest(a.out) == digest(j.out) else "OUTPUT DIFFERS"
                )
            print(
                f"{direction}, {side}: Avro {a.rate() / j.rate():.2f}x JSON's records/s, "
                f"{a.per_1k(a.cpu_s) / j.per_1k(j.cpu_s):.2f}x its CPU per record "
                f"(target: >= 1x, <= 1x){same}"
            )
        for fmt in ("avro", "json"):
            k, a = by.get((direction, f"kconnect-{fmt}")), by.get((direction, f"apache-{fmt}"))
            if k is not None and a is not None:
                print(
                    f"{direction}, {fmt}: kconnect {k.rate() / a.rate():.2f}x Apache's records/s, "
                    f"{k.per_1k(k.cpu_s) / a.per_1k(a.cpu_s):.2f}x its CPU per record"
                )
    for r in rows:
        if r.first_line:
            print(f"{r.direction} {r.system}: {r.first_line[:160]}")
    for r in rows:
        if r.note and r.records:
            print(f"{r.label}: {r.note}")


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def timed(what: str, fn: Callable[[], None]) -> None:
    started = time.monotonic()
    fn()
    print(f"{what} in {time.monotonic() - started:.1f} s", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--only", default=",".join(SYSTEMS), help=f"of {', '.join(SYSTEMS)}, in order")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds one system may take")
    parser.add_argument(
        "--direction",
        default="sink",
        help="sink (topic -> converter -> file, the default), source (file -> converter -> topic) or both, "
        "comma-separated",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, outputs)")
    args = parser.parse_args(argv)
    systems = [s for s in args.only.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    directions = [d for d in args.direction.split(",") if d]
    if not directions or set(directions) - set(DIRECTIONS):
        parser.error(f"--direction takes {' and/or '.join(DIRECTIONS)}, not {args.direction!r}")
    if any(s.startswith("apache") for s in systems):
        ok, why = reference_available(REFERENCE_4X)
        if not ok:
            print(f"Apache Kafka Connect {REFERENCE_4X} is not available ({why}): kconnect alone", flush=True)
            systems = [s for s in systems if not s.startswith("apache")]
    signal.signal(signal.SIGTERM, _terminate)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; {platform.platform()}, nproc "
        f"{os.cpu_count()}; Python {platform.python_version()}; load average {density.load_average()}; "
        f"{args.records:,} records",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix="kconnect-bench-avro-pipeline-"))
    rows: list[Row] = []
    registry: RegistryServer | None = None
    try:
        with density.broker_running("kafka", work) as (bootstrap, broker_pid):
            registry = start_registry(work)
            ctx = {"bootstrap": bootstrap, "broker_pid": broker_pid, "registry": registry}
            sink = "sink" in directions
            if sink and any(s.endswith("-avro") for s in systems):
                timed(
                    f"{AVRO_TOPIC}: {args.records:,} Avro records produced",
                    lambda: produce(bootstrap, AVRO_TOPIC, avro_values(registry.url, args.records)),
                )  # type: ignore[union-attr]
            if sink and any(s.endswith("-json") for s in systems):
                timed(
                    f"{JSON_TOPIC}: {args.records:,} JSON envelopes produced",
                    lambda: produce(bootstrap, JSON_TOPIC, (json_envelope(n) for n in range(args.records))),
                )
            if "source" in directions:
                ctx["source"] = work / "source-input.txt"
                timed(
                    f"{args.records:,} source lines written",
                    lambda: write_source_input(ctx["source"], args.records),
                )
            print(f"load average {density.load_average()} before the first system", flush=True)
            for direction in directions:
                for system in systems:
                    rows.append(run_one(system, direction, args, work, ctx))
        report(rows)  # while the outputs are there to compare
    except KeyboardInterrupt:
        print("\ninterrupted; everything started was stopped", file=sys.stderr)
        report(rows)
        return 1
    finally:
        if registry is not None:
            registry.stop()
        if args.keep:
            print(f"\nkept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    print(f"load average {density.load_average()} at the end", flush=True)
    return 0 if all(r.records == args.records and not r.note for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
