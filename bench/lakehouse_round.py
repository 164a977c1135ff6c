"""One Iceberg sink task's commit round over many tables, in-process, no Kafka: where a trickle's round goes.

``bench/lakehouse.py``'s trickle (50 topics at 1 record/s, a table each) waits on its task's commit rounds;
this runs only the round: an ``IcebergSinkTask`` in a local[2] SparkSession with Iceberg's runtime (the
jars ``make lakehouse`` fetched), a Hadoop catalog in a temporary warehouse, ``--tables`` tables routed by
a field (``iceberg.tables.dynamic-enabled``), and ``--rounds`` commits of ``--rows`` rows per table, each
given to the task as a batch that is due on its own (the direct commit). It prints each round's seconds
and the task's own log lines (``tables written together``: the one job's seconds). ``--one-by-one`` turns
off the one-job path (each table its own Spark append, as before issue 31's s31w session), so the two can
be compared on the same machine one after the other; ``--no-helper`` leaves the Iceberg helper jar
(``kconnect.lakehouse.IcebergAppends``: the round's appends in one JVM call) off the classpath. Round 0
creates the tables; the rest are the steady state. Heavy (a Spark JVM): run it under the heavy-bench lock.

    flock /tmp/kconnect-heavy.lock .venv/bin/python bench/lakehouse_round.py
    flock /tmp/kconnect-heavy.lock .venv/bin/python bench/lakehouse_round.py --one-by-one
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kconnect.connectors.lakehouse.iceberg import IcebergSinkTask
from kconnect.connectors.lakehouse.table_sink import TableSinkTask
from kconnect.runtime.plugins.api import TopicPartition
from tests.support.lakehouse_jars import spark_properties

SCHEMA = (
    "_kc_topic string, _kc_partition int, _kc_offset long, "
    "value struct<id:long,tbl:string,payload:string,produced_ms:long>"
)


def batch(
    spark: Any, tables: int, rows: int, round_: int
) -> tuple[Any, dict[TopicPartition, tuple[int, int]]]:
    """``rows`` rows for each of ``tables`` topics (one partition each), as the task stages them."""
    data = []
    for i in range(tables):
        for k in range(rows):
            offset = round_ * rows + k
            data.append(
                (f"t{i:02d}", 0, offset, (offset, f"bench.t{i:02d}", "x" * 100, int(time.time() * 1000)))
            )
    ranges = {
        TopicPartition(f"t{i:02d}", 0): (round_ * rows, round_ * rows + rows - 1) for i in range(tables)
    }
    return spark.createDataFrame(data, SCHEMA).persist(), ranges


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tables", type=int, default=50)
    parser.add_argument("--rows", type=int, default=10, help="rows per table per round")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--one-by-one", action="store_true", help="each table its own Spark append")
    parser.add_argument(
        "--no-helper",
        action="store_true",
        help="leave the Iceberg helper jar off the classpath (each table appended through py4j)",
    )
    parser.add_argument(
        "--java-options",
        default="",
        help="the driver JVM's extra options, e.g. a Flight Recorder profile: "
        "-XX:StartFlightRecording=filename=/tmp/round.jfr",
    )
    args = parser.parse_args()

    from pyspark.sql import SparkSession

    if args.one_by_one:
        IcebergSinkTask._write_together = TableSinkTask._write_together  # type: ignore[method-assign]
    builder = SparkSession.builder.master("local[2]").appName("lakehouse-round")
    settings = {
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "1",
        **spark_properties(),
    }
    if args.java_options:
        settings["spark.driver.extraJavaOptions"] = args.java_options
    if args.no_helper:
        settings["spark.jars"] = ",".join(j for j in settings["spark.jars"].split(",") if "helper" not in j)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    warehouse = tempfile.mkdtemp(prefix="kconnect-bench-round-")
    task = IcebergSinkTask()
    task.start(
        {
            "name": "round",
            "connector.class": "IcebergSinkConnector",
            "topics": ",".join(f"t{i:02d}" for i in range(args.tables)),
            "iceberg.tables.dynamic-enabled": "true",
            "iceberg.tables.route-field": "tbl",
            "iceberg.tables.auto-create-enabled": "true",
            "iceberg.catalog.warehouse": warehouse,
            "task.id": "0",
        }
    )
    task._spark = spark
    task._prepare(spark)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.tables} tables x {args.rows} rows; "
        f"{'one by one' if args.one_by_one else 'together'}"
        f"{'; no helper' if args.no_helper else ''}",
        flush=True,
    )
    try:
        for round_ in range(args.rounds):
            frame, ranges = batch(spark, args.tables, args.rows, round_)
            started = time.monotonic()
            task._commit("bench", (frame, ranges, time.time()), defer=False)  # the whole round, timed
            print(f"round {round_}: {time.monotonic() - started:.2f} s", flush=True)
            frame.unpersist()
    finally:
        task.stop()
        spark.stop()
        shutil.rmtree(warehouse, ignore_errors=True)
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
