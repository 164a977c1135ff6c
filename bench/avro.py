"""Avro vs JSON converter cost: records/s and CPU per record, record by record and on a Spark frame.

What runs: ``--records`` (default 1,000,000) records of one struct schema (int64, string, Decimal,
Timestamp, array of strings, double, boolean, optional string) through

1. **records**: each converter's ``from_connect`` then ``to_connect``, as a source task encodes and a
   consumer-loop sink decodes, in this process (``time.process_time``);
2. **frame**: the encoded values as a raw Kafka frame (``records.RAW_SCHEMA``) through the converter's
   ``to_columns`` into typed columns, as a sink task's Spark batch is converted, written to Spark's
   ``noop`` sink (CPU of this process and everything below it: the Spark JVM and its Python workers).

for io.confluent.connect.avro.AvroConverter and org.apache.kafka.connect.json.JsonConverter
(schemas.enable=true, the envelope Java writes). The Avro converter talks to confluent-kafka's in-memory
registry client (``mock://``): after each schema's first record no record calls a registry, so the
registry is not what is measured.

Why in-process only: this isolates the converters' own cost. The worker pipeline beside Apache Kafka
Connect 4.3.1 (a FileStreamSink through each converter, against a running registry server, Apicurio
Registry 2.0.2.Final) is ``avro_pipeline.py``; until that server could be built from Maven Central
(``tests/support/schema_registry_server.py``) no such pipeline could run here.

    .venv/bin/python bench/avro.py                   # 1,000,000 records; minutes on 2 cores
    .venv/bin/python bench/avro.py --records 100000 --only records
"""

from __future__ import annotations

import argparse
import datetime as dt
import decimal
import os
import platform
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import process_cpu
from confluent_kafka.schema_registry import SchemaRegistryClient

from kconnect.runtime.dataplane.connect_data import (
    TIMESTAMP,
    ConnectField,
    ConnectSchema,
    decimal_schema,
)
from kconnect.runtime.dataplane.converters import Converter, new_converter
from kconnect.runtime.dataplane.schema_registry.base import RegistryConverter

AVRO = "io.confluent.connect.avro.AvroConverter"
JSON = "org.apache.kafka.connect.json.JsonConverter"
SCHEMA = ConnectSchema(
    "struct",
    name="bench.Order",
    fields=(
        ConnectField("id", ConnectSchema("int64")),
        ConnectField("customer", ConnectSchema("string")),
        ConnectField("amount", decimal_schema(2)),
        ConnectField("at", ConnectSchema("int64", name=TIMESTAMP, version=1)),
        ConnectField("tags", ConnectSchema("array", items=ConnectSchema("string"))),
        ConnectField("score", ConnectSchema("double")),
        ConnectField("paid", ConnectSchema("boolean")),
        ConnectField("note", ConnectSchema("string", optional=True)),
    ),
)
_EPOCH = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def record(n: int) -> dict[str, Any]:
    return {
        "id": n,
        "customer": f"customer-{n % 1000}",
        "amount": decimal.Decimal(n % 100000) / 100,
        "at": _EPOCH + dt.timedelta(milliseconds=n),
        "tags": ["a", "b"] if n % 2 else ["c"],
        "score": n / 7,
        "paid": n % 3 == 0,
        "note": None if n % 5 else "five",
    }


def converter(name: str, client: SchemaRegistryClient) -> Converter:
    c = new_converter(name)
    c.configure({"schema.registry.url": "mock://bench"} if name == AVRO else {}, False)
    if isinstance(c, RegistryConverter):
        assert c.registry is not None
        c.registry.use_client(client)
    return c


def timed(fn: Callable[[], Any]) -> tuple[float, float, Any]:
    wall, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return time.perf_counter() - wall, time.process_time() - cpu, out


def run_records(name: str, conv: Converter, values: list[dict[str, Any]]) -> list[str]:
    wall, cpu, encoded = timed(lambda: [conv.from_connect(v, SCHEMA, "orders") for v in values])
    rows = [f"{name:6} encode {len(values) / wall:12,.0f} {cpu / len(values) * 1e6:10.2f}"]
    wall, cpu, _ = timed(lambda: [conv.to_connect(b, "orders") for b in encoded])
    rows.append(f"{name:6} decode {len(values) / wall:12,.0f} {cpu / len(values) * 1e6:10.2f}")
    return rows


def run_frame(spark: Any, name: str, conv: Converter, encoded: list[bytes | None]) -> str:
    from kconnect.runtime.dataplane.records import RAW_SCHEMA

    rows = [("orders", 0, i, 0, None, value, []) for i, value in enumerate(encoded)]
    frame = spark.createDataFrame(rows, RAW_SCHEMA).repartition(2).cache()
    frame.count()
    me = os.getpid()
    before = process_cpu.tree_cpu_seconds(me)
    wall = time.perf_counter()
    conv.to_columns(frame, "value").write.format("noop").mode("overwrite").save()
    wall = time.perf_counter() - wall
    after = process_cpu.tree_cpu_seconds(me)
    frame.unpersist()
    cpu = after - before
    return f"{name:6} frame  {len(encoded) / wall:12,.0f} {cpu / len(encoded) * 1e6:10.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--only", default="records,frame")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    client = SchemaRegistryClient.new_client({"url": "mock://bench"})
    values = [record(n) for n in range(args.records)]
    converters = {"avro": converter(AVRO, client), "json": converter(JSON, client)}
    print(
        f"{dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}; "
        f"{args.records:,} records"
    )
    print(f"{'format':6} {'path':6} {'records/s':>12} {'µs CPU/rec':>10}")
    if "records" in only:
        for name, conv in converters.items():
            for row in run_records(name, conv, values):
                print(row, flush=True)
    if "frame" in only:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        from pyspark.sql import SparkSession

        spark = (
            SparkSession.builder.master("local[2]")
            .appName("bench-avro")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.driver.memory", "2g")
            .getOrCreate()
        )
        try:
            for name, conv in converters.items():
                encoded = [conv.from_connect(v, SCHEMA, "orders") for v in values]
                print(run_frame(spark, name, conv, encoded), flush=True)
        finally:
            spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
