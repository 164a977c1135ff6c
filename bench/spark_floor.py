"""Spark's own floor for bench/lakehouse.py's big topic: what a record costs when Spark alone moves it, with
no Python per record and no Connect runtime: Spark's Kafka source (the JVM's Kafka client), ``from_json``
of the envelope's payload, an Iceberg table created and written (Hadoop catalog), one batch job a topic.

Why: goal 1 of issue 31 asks kconnect's Iceberg sink for a third of the CPU per record of Apache Iceberg's
sink on Apache Kafka Connect. This bench says how low a Spark pipeline of that shape can go on the machine
at all, cold (the first job: class loading, code generation, JIT) and warm (the same job on fresh topics),
so the goal can be read against it. Its figures are the Spark JVM's CPU (``process_cpu``), beside the
SparkSession's start.

    .venv/bin/python bench/spark_floor.py                   # 500,000 records a topic, 3 topics
    .venv/bin/python bench/spark_floor.py --records 200000 --topics 2

The jars of Spark's Kafka source come from Maven Central on first use (tests/spark-kafka/pom.xml;
``make lakehouse`` fetches them too).
Figures depend on the machine's load: on a shared machine say so next to them.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import density
import process_cpu
from lakehouse import PARTITIONS, create_topics, produce_big
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import LongType, StringType, StructField, StructType

from tests.support.lakehouse_jars import lakehouse_jars, spark_kafka_jars

#: The payload of bench/lakehouse.py's records (lakehouse.SCHEMA) as Spark reads it.
PAYLOAD = StructType(
    [
        StructField("id", LongType()),
        StructField("tbl", StringType()),
        StructField("payload", StringType()),
        StructField("produced_ms", LongType()),
    ]
)


def spark_jvm() -> int:
    """The Spark JVM this Python process started (its child running SparkSubmit; the broker is one too)."""
    me = os.getpid()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == me and b"SparkSubmit" in (stat.parent / "cmdline").read_bytes():
                return int(stat.parent.name)
        except OSError:
            continue
    raise RuntimeError("no Spark JVM under this process")


def cpu_s(pid: int) -> float:
    return process_cpu.cpu_ticks(pid)[0] / process_cpu.TICK


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=500_000, help="records a topic")
    parser.add_argument("--topics", type=int, default=3, help="topics, one job each (the first is cold)")
    args = parser.parse_args()
    jars = [*map(str, lakehouse_jars()), *map(str, spark_kafka_jars())]
    work = Path(tempfile.mkdtemp(prefix="kconnect-bench-spark-floor-"))
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; nproc {os.cpu_count()}; load "
        f"{os.getloadavg()[0]:.1f}; {args.records:,} records a topic (bench/lakehouse.py's), local[2]"
    )
    with density.broker_running("kafka", work, 1, None) as (bootstrap, _):
        topics = [f"floor-{i}" for i in range(args.topics)]
        create_topics(bootstrap, {t: PARTITIONS for t in topics})
        for t in topics:
            produce_big(bootstrap, t, 0, args.records)
        started = time.monotonic()
        spark = (
            SparkSession.builder.master("local[2]")
            .config("spark.ui.enabled", "false")
            .config("spark.ui.showConsoleProgress", "false")
            .config("spark.jars", ",".join(jars))
            .config(
                "spark.sql.extensions", "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
            )
            .config("spark.sql.catalog.h", "org.apache.iceberg.spark.SparkCatalog")
            .config("spark.sql.catalog.h.type", "hadoop")
            .config("spark.sql.catalog.h.warehouse", str(work / "warehouse"))
            .getOrCreate()
        )
        spark.sparkContext.setLogLevel("ERROR")
        jvm = spark_jvm()
        print(f"SparkSession started in {time.monotonic() - started:.1f} s, JVM CPU {cpu_s(jvm):.1f} s")
        print(f"{'job':>4} {'rows':>9} {'wall s':>7} {'rows/s':>8} {'JVM CPU s':>9} {'CPU s/1k':>8}")
        envelope = StructType([StructField("payload", PAYLOAD)])
        for n, topic in enumerate(topics, 1):
            cpu0, wall0 = cpu_s(jvm), time.monotonic()
            read = (
                spark.read.format("kafka")
                .option("kafka.bootstrap.servers", bootstrap)
                .option("subscribe", topic)
                .option("startingOffsets", "earliest")
                .option("endingOffsets", "latest")
                .load()
            )
            rows = read.select(F.from_json(F.col("value").cast("string"), envelope)["payload"].alias("p"))
            rows.select("p.*").writeTo(f"h.bench.t{n}").using("iceberg").create()
            wall, cpu = time.monotonic() - wall0, cpu_s(jvm) - cpu0
            count = spark.table(f"h.bench.t{n}").count()
            print(
                f"{n:>4} {count:>9,} {wall:>7.1f} {count / wall:>8,.0f} {cpu:>9.1f} "
                f"{cpu / count * 1000:>8.4f}"
            )
        spark.stop()


if __name__ == "__main__":
    main()
