"""The sink data plane's per-record cost of a JSON batch, without Kafka: one frame-sink micro-batch of
``--records`` JsonConverter envelopes (schemas.enable, bench/lakehouse.py's records; keys null, as there)
taken through what ``sink_runner._frame_batch`` does before ``put_frame`` — ``sink_batch.prepare``
(sampling the key and value schemas, converting), the prepared frame persisted, its failed rows fetched —
then the good rows' fields written to Spark's ``noop`` sink. Round 1 is a cold JVM (the figure a first big
batch pays); later rounds are warm.

Why a bench of its own: bench/lakehouse.py measures the whole pipeline (Kafka, the Python data source, the
Iceberg commit, a worker's start) and takes ten minutes; this isolates the JSON conversion that its Spark
event log showed as the largest cost, in a minute, with a local Spark of two cores and no broker.

    .venv/bin/python bench/sink_json.py                 # 100,000 records, 5 rounds
    PYTHONPATH=<tree of another commit> .venv/bin/python bench/sink_json.py   # a before/after

Figures depend on the machine's load: on a shared machine say so next to them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import process_cpu
from lakehouse import SCHEMA  # the records bench/lakehouse.py produces
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from kconnect.runtime.dataplane.errors_policy import split
from kconnect.runtime.dataplane.sink_batch import FAILURE_COLUMNS, RECORD_COLUMNS, prepare, sink_plan

CONVERTERS = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "true",
}


def jvm_pid() -> int:
    """The Spark JVM this Python process started (its child)."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == me:
            return int(stat.parent.name)
    raise RuntimeError("no Spark JVM under this process")


def cpu_s(pid: int) -> float:
    """The JVM's own CPU seconds so far (``process_cpu``'s reading)."""
    return process_cpu.cpu_ticks(pid)[0] / process_cpu.TICK


def raw_batch(spark: SparkSession, records: int) -> Any:
    """``records.RAW_SCHEMA`` rows of JSON envelopes, built and cached in the JVM (no producer)."""
    head = '{"schema":' + json.dumps(SCHEMA, separators=(",", ":")) + ',"payload":{"id":'
    tail = ',"tbl":"bench.big","payload":"' + "x" * 100 + '","produced_ms":1}}'
    frame = spark.range(records, numPartitions=4).select(
        F.lit("lh-big").alias("topic"),
        (F.col("id") % 4).cast("int").alias("partition"),
        F.col("id").alias("offset"),
        F.lit(0).cast("long").alias("timestamp"),
        F.lit(None).cast("binary").alias("key"),
        F.concat(F.lit(head), F.col("id").cast("string"), F.lit(tail)).cast("binary").alias("value"),
        F.lit(None).cast("array<struct<key:string,value:binary>>").alias("headers"),
    )
    frame = frame.persist()
    frame.count()
    return frame


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--payload-only",
        choices=("auto", "always", "never"),
        default="auto",
        help="read envelopes by their payload alone: as the runner does (auto: batches of at least "
        "sink_batch.FAST_PATH_MIN_RECORDS records), always, or never",
    )
    args = parser.parse_args()
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    jvm = jvm_pid()
    raw = raw_batch(spark, args.records)
    plan = sink_plan(CONVERTERS, {}, "bench", 0)
    print(
        f"sink JSON conversion, {args.records:,} records a batch, payload-only reading {args.payload_only}, "
        f"local[2], load {os.getloadavg()[0]:.1f}"
    )
    print(f"{'round':>5} {'wall s':>7} {'JVM CPU s':>9} {'CPU s/1k':>8} {'failed':>6}")
    for n in range(1, args.rounds + 1):
        cpu0, wall0 = cpu_s(jvm), time.monotonic()
        known = {"auto": args.records, "always": None, "never": 0}[args.payload_only]
        prepared = prepare(plan, raw, records=known).persist()
        good, failed = split(prepared)
        bad = failed.select(*RECORD_COLUMNS, *FAILURE_COLUMNS).collect()
        good.select("value.*").write.format("noop").mode("overwrite").save()
        wall, cpu = time.monotonic() - wall0, cpu_s(jvm) - cpu0
        prepared.unpersist()
        print(f"{n:>5} {wall:7.2f} {cpu:9.2f} {cpu / args.records * 1000:8.3f} {len(bad):>6}", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
