"""The end of ``kconnect demo``'s pipeline: an Apache Iceberg table written by Spark, queried with Spark SQL.

The demo's FileStream lines also go to ``IcebergSinkConnector``, which writes them with the worker's
SparkSession (Spark's Iceberg runtime, ``spark.jars``) into a Hadoop catalog on the demo's own warehouse
directory; the demo then reads the table back in a SparkSession of its own, as any Spark user would. The
runtime jar is not bundled with kconnect: ``make demo`` (through ``make lakehouse``) fetches it from Maven
Central into ``~/.cache/kconnect/lakehouse-<iceberg>-<delta>/libs``, where :func:`find_iceberg_jar` looks;
``--iceberg-jar`` names another. Without one the demo says so and runs the FileStream pipeline alone.

The lines are strings, and a table sink writes struct records, so the sink's transforms wrap each line in
a struct (``HoistField$Value``) and add where it came from (``InsertField$Value``): the table's columns are
``line``, ``kafka_partition`` and ``kafka_offset``.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kconnect.runtime.cli.cache_dir import kconnect_cache_dir

#: The namespace and table the demo writes, and the catalog name its reader registers the warehouse under.
TABLE = "demo.lines"
READER_CATALOG = "lake"
#: The query the demo prints: one line that a reader (and the demo's test) can check the whole table by.
SUMMARY_SQL = (
    f"SELECT count(*) AS rows, count(DISTINCT line) AS distinct_lines, "
    f"min(CAST(split(line, ' ')[1] AS INT)) AS first, max(CAST(split(line, ' ')[1] AS INT)) AS last "
    f"FROM {READER_CATALOG}.{TABLE}"
)
SAMPLE_SQL = (
    f"SELECT line, kafka_partition, kafka_offset FROM {READER_CATALOG}.{TABLE} "
    f"ORDER BY CAST(split(line, ' ')[1] AS INT) LIMIT 3"
)
#: Spark settings both JVMs share: loopback only, no UI, one shuffle partition (100 rows on a small machine).
_SPARK_COMMON = {
    "spark.ui.enabled": "false",
    "spark.sql.shuffle.partitions": "1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
}


def find_iceberg_jar(environ: Mapping[str, str], home: Path) -> Path | None:
    """Spark's Iceberg runtime as ``make lakehouse`` leaves it (a complete copy: its marker is written last),
    newest version first; None when it was never fetched."""
    cache = kconnect_cache_dir(environ, home)
    found = [
        jar
        for copy in cache.glob("lakehouse-*")
        if (copy / "complete").is_file()
        for jar in (copy / "libs").glob("iceberg-spark-runtime-*.jar")
    ]
    return max(found, key=lambda p: p.name) if found else None


def worker_properties(jar: Path) -> list[str]:
    """Lines for each demo worker's properties: whichever worker runs the sink's task starts a local
    SparkSession that can write Iceberg (the others never start Spark).

    ``producer.batch.num.messages=1``: the demo's broker is the embedded one, which reports a partition's
    end as its last batch's base offset + 1 (DESIGN.md, test broker quirk 2; docs/spark.md "High
    watermark"), and the Iceberg sink's micro-batches read up to that end, as Spark's Kafka source does:
    the rest of a multi-record batch would wait for a next batch that a 100-line demo never sends. One
    record per batch (what the tests do there too) costs nothing at 100 lines; on Apache Kafka it is not
    needed.
    """
    props = {
        "spark.master": "local[2]",
        "spark.jars": str(jar),
        **_SPARK_COMMON,
        "producer.batch.num.messages": "1",
    }
    return [f"{key}={value}" for key, value in props.items()]


def sink_config(warehouse: Path, topic: str) -> dict[str, str]:
    """The Iceberg sink's connector config, in Apache Iceberg's sink's keys: a commit every 2 s (its default
    is 5 min) or at 100 records, the table created from the records' schema."""
    return {
        "connector.class": "IcebergSinkConnector",
        "topics": topic,
        "tasks.max": "1",
        "transforms": "hoist,source",
        "transforms.hoist.type": "org.apache.kafka.connect.transforms.HoistField$Value",
        "transforms.hoist.field": "line",
        "transforms.source.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.source.partition.field": "kafka_partition",
        "transforms.source.offset.field": "kafka_offset",
        "iceberg.tables": TABLE,
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": "2000",
        "iceberg.control.commit.max-records": "100",
        "iceberg.catalog.type": "hadoop",
        "iceberg.catalog.warehouse": str(warehouse),
    }


@dataclass
class TableReader:
    """A SparkSession of the demo's own, with the warehouse as catalog ``lake``, started on a thread as soon
    as the demo begins so its JVM's start-up overlaps the workers' (a cold Spark takes seconds)."""

    jar: Path
    warehouse: Path
    log_path: Path
    _session: Any = None
    _error: BaseException | None = None
    _ready: threading.Event = field(default_factory=threading.Event)

    def start(self) -> TableReader:
        threading.Thread(target=self._create, name="demo-table-reader", daemon=True).start()
        return self

    def _create(self) -> None:
        try:
            # The SparkContext reads the Python its workers run from this variable alone.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            from pyspark.sql import SparkSession

            builder = SparkSession.builder.master("local[1]").appName("kconnect-demo-reader")
            settings = {
                "spark.jars": str(self.jar),
                **_SPARK_COMMON,
                f"spark.sql.catalog.{READER_CATALOG}": "org.apache.iceberg.spark.SparkCatalog",
                f"spark.sql.catalog.{READER_CATALOG}.type": "hadoop",
                f"spark.sql.catalog.{READER_CATALOG}.warehouse": str(self.warehouse),
                # Each query reads the table's newest snapshot, not the one the first query saw.
                f"spark.sql.catalog.{READER_CATALOG}.cache-enabled": "false",
                "spark.ui.showConsoleProgress": "false",  # no progress bars among the demo's lines
            }
            for key, value in settings.items():
                builder = builder.config(key, value)
            # The JVM inherits this process's stderr when it is launched, and writes its start-up warnings
            # there: they go to the demo's log directory instead of among the demo's lines. Only the demo's
            # own error lines use stderr, and none is written while the pipeline starts.
            saved = os.dup(2)
            try:
                with open(self.log_path, "ab") as log:
                    os.dup2(log.fileno(), 2)
                    self._session = builder.getOrCreate()
            finally:
                os.dup2(saved, 2)
                os.close(saved)
            self._session.sparkContext.setLogLevel("ERROR")
        except BaseException as exc:  # handed to the caller of query(), which reports it
            self._error = exc
        finally:
            self._ready.set()

    def query(self, sql: str, timeout: float) -> list[dict[str, Any]]:
        """The rows of ``sql`` as dicts; raises what starting Spark raised, or TimeoutError."""
        if not self._ready.wait(timeout):
            raise TimeoutError(f"the demo's SparkSession did not start within {timeout:.0f} s")
        if self._error is not None:
            raise RuntimeError(f"the demo's SparkSession did not start: {self._error}") from self._error
        return [row.asDict() for row in self._session.sql(sql).collect()]

    def table_exists(self) -> bool:
        """Whether the sink's first commit created the table yet (its metadata is on disk)."""
        namespace, name = TABLE.split(".")
        return any((self.warehouse / namespace / name / "metadata").glob("v*.metadata.json"))

    def stop(self) -> None:
        self._ready.wait(120)
        if self._session is not None:
            self._session.stop()
            self._session = None


def summary_line(row: Mapping[str, Any]) -> str:
    """The summary query's one row, as the demo prints it."""
    return (
        f"{row.get('rows')} rows, {row.get('distinct_lines')} distinct lines, "
        f"line {row.get('first')} .. line {row.get('last')}"
    )
