"""Upserts into an Iceberg table: MERGE INTO by id columns whose snapshot carries the Kafka offsets.

Why a module of its own: Spark's ``MERGE INTO`` takes no snapshot properties, so the statement runs inside
Iceberg's ``CommitMetadata.withCommitProperties`` (a Java ``Callable`` calling back into Python through
py4j's callback server); this is the only place the Iceberg sink needs that machinery.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from kconnect.connectors.lakehouse.table_sink import META, OFFSET, PARTITION, TOPIC, merge_statement
from kconnect.runtime.plugins.api import ConnectorError

_CALLBACK_LOCK = threading.Lock()


def merge_rows(
    spark: Any,
    target: str,
    table: str,
    view: str,
    rows: Any,
    columns: list[str],
    ids: tuple[str, ...],
    summary: Mapping[str, str],
) -> None:
    """MERGE INTO ``target`` (the table's identifier in the session; ``table``: its name, for errors) by
    ``ids`` from ``rows`` (META columns kept), newest record per id (the highest offset), through the
    temporary view ``view``, inside ``CommitMetadata.withCommitProperties`` so that the MERGE's snapshot
    carries ``summary`` (the offsets)."""
    from pyspark.java_gateway import ensure_callback_server_started
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    missing = [i for i in ids if i not in columns]
    if missing:
        raise ConnectorError(
            f"table {table}: id column(s) {', '.join(missing)} are not fields of the records"
        )
    newest = Window.partitionBy(*[F.col(f"`{i}`") for i in ids]).orderBy(
        F.col(TOPIC).desc(), F.col(PARTITION).desc(), F.col(OFFSET).desc()
    )
    source = rows.withColumn("_kc_rank", F.row_number().over(newest)).where("_kc_rank = 1").drop("_kc_rank")
    source.drop(*META).createOrReplaceTempView(view)

    statement = merge_statement(target, view, columns, ids)

    class _Merge:
        def call(self) -> None:
            spark.sql(statement)

        class Java:
            implements = ["java.util.concurrent.Callable"]

    jvm = spark._jvm
    properties = jvm.java.util.HashMap()
    for k, v in summary.items():
        properties.put(k, v)
    try:
        with _CALLBACK_LOCK:
            ensure_callback_server_started(spark.sparkContext._gateway)  # type: ignore[no-untyped-call]
        jvm.org.apache.iceberg.spark.CommitMetadata.withCommitProperties(
            properties, _Merge(), jvm.java.lang.Class.forName("java.lang.RuntimeException")
        )
    finally:
        spark.catalog.dropTempView(view)
