"""The lakehouse tests' own SparkSession, reading back the tables a kconnect worker's sinks wrote.

Why one home: the Iceberg/Delta sink modules (tests/integration/test_lakehouse_sinks.py,
test_lakehouse_maintenance.py, test_cdc_lakehouse.py) each read their tables with Spark SQL, the way a
Spark user would, through a session with the lakehouse jars and an Iceberg Hadoop catalog named ``chk`` on
the sinks' warehouse; the builder stood in two modules and a third imported a fixture from another test
module. The ``reader`` fixture (tests/integration/conftest.py) is built here, and a module that needs more
catalogs (the maintenance module's jdbc catalog) passes them as ``extra``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pyspark.sql import SparkSession

from tests.support.lakehouse_jars import spark_properties

#: The Iceberg catalog, on the sinks' Hadoop warehouse, that the tests read tables through (``chk.kc.t``).
READER_CATALOG = "chk"


def fresh_spark_jvm() -> None:
    """Stop this process's SparkSession and its JVM, if another test made them: jars join the driver's
    class path only when its JVM starts, so a session built on a JVM started without Iceberg and Delta
    cannot load their catalogs (under pytest-xdist a worker process runs many test files)."""
    from pyspark import SparkContext

    existing = SparkSession.getActiveSession()
    if existing is not None:
        existing.stop()
    if SparkContext._active_spark_context is not None:
        SparkContext._active_spark_context.stop()
    gateway = SparkContext._gateway
    if gateway is not None:
        proc = getattr(gateway, "proc", None)
        gateway.shutdown()
        if proc is not None:
            proc.kill()
            proc.wait(30)
        SparkContext._gateway = None
        SparkContext._jvm = None


def reader_session(
    app_name: str, iceberg_warehouse: Path, extra: dict[str, str] | None = None
) -> SparkSession:
    """A local SparkSession on a fresh JVM with Iceberg and Delta loaded (:func:`spark_properties`) and the
    ``chk`` catalog on ``iceberg_warehouse`` (uncached, so each query sees the newest commit); ``extra``
    settings are added last and win (another ``spark.jars`` list, more catalogs)."""
    fresh_spark_jvm()
    builder = SparkSession.builder.master("local[1]").appName(app_name)
    catalog = f"spark.sql.catalog.{READER_CATALOG}"
    for key, value in {
        **spark_properties(),
        "spark.ui.enabled": "false",
        "spark.sql.shuffle.partitions": "1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        catalog: "org.apache.iceberg.spark.SparkCatalog",
        f"{catalog}.type": "hadoop",
        f"{catalog}.warehouse": str(iceberg_warehouse),
        f"{catalog}.cache-enabled": "false",
        **(extra or {}),
    }.items():
        builder = builder.config(key, value)
    return builder.getOrCreate()


def rows_unless_evolved_meanwhile(spark: SparkSession, query: str) -> list[tuple[Any, ...]] | None:
    """The query's rows, or None when a table it reads changed its schema while it ran; a poll then asks
    again. Why it happens: with the catalog uncached, Iceberg's Spark table refreshes itself when the scan
    is built (``refreshEagerly``), after the query was analysed against the schema before: a column a sink
    just widened (int to long) then reads as "Cannot project long to incompatible type"."""
    from pyspark.errors import IllegalArgumentException

    try:
        return [tuple(r) for r in spark.sql(query).collect()]
    except IllegalArgumentException as exc:
        if "Cannot project" not in str(exc):
            raise
        return None
