"""DeltaSinkConnector: topics to Delta Lake tables, written by delta-spark, exactly once.

The same shell as the Iceberg sink (``table_sink``: routing, commits by records, bytes or time, tables from
the records' schemas, evolution, upserts) with keys under ``delta.`` instead of ``iceberg.``. A table
``<namespace>.<table>`` is the directory ``<delta.warehouse>/<namespace>/<table>``.

Exactly once through Delta's idempotent writes: each commit writes one partition's rows with
``txnAppId=kconnect.<connector>.<topic>.<partition>`` and ``txnVersion`` = the next offset, so Delta itself
skips a write it has already committed, and ``userMetadata`` carrying the offsets, which a task opening the
partition reads back from the table's history to drop rows the table holds.

The worker's SparkSession needs delta-spark and delta-storage on ``spark.jars`` (or
``spark.jars.packages=io.delta:delta-spark_2.13:4.0.1``), ``spark.sql.extensions`` including
``io.delta.sql.DeltaSparkSessionExtension`` and ``spark.sql.catalog.spark_catalog=
org.apache.spark.sql.delta.catalog.DeltaCatalog``.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kconnect.connectors.lakehouse import config as cfg
from kconnect.connectors.lakehouse.commits import decode_offsets, encode_offsets, offsets_key
from kconnect.connectors.lakehouse.evolution import Evolution, quote_path
from kconnect.connectors.lakehouse.maintenance import OFF, MaintenancePolicy, MaintenanceResult
from kconnect.connectors.lakehouse.routing import table_parts
from kconnect.connectors.lakehouse.table_sink import (
    META,
    OFFSET,
    PARTITION,
    TOPIC,
    TableSinkTask,
    merge_statement,
)
from kconnect.connectors.uniform import UniformTasks
from kconnect.runtime import logs
from kconnect.runtime.plugins.api import ConnectorError, SinkConnector, TopicPartition
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    ConfigDef,
    ConfigValue,
    Importance,
    LambdaValidator,
    NonEmptyString,
)
from kconnect.runtime.plugins.config_def import Type as ConfigType

log = logs.get(__name__)

PREFIX = "delta."
WAREHOUSE_CONFIG = "delta.warehouse"
EXTENSIONS = "io.delta.sql.DeltaSparkSessionExtension"
CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"

CONFIG_DEF = cfg.config_def(
    PREFIX,
    ConfigDef()
    .define(
        WAREHOUSE_CONFIG,
        ConfigType.STRING,
        NO_DEFAULT,
        NonEmptyString(),
        Importance.HIGH,
        "Directory (or URI) the tables live under: <warehouse>/<namespace>/<table>; every worker must "
        "see it.",
    )
    .define(
        "delta.tables.maintenance.vacuum.retention-ms",
        ConfigType.LONG,
        OFF,
        LambdaValidator.with_(cfg.minus_one_or_at_least_zero, "-1 (off) or 0 or more"),
        Importance.LOW,
        "Maintenance VACUUMs files the table stopped referencing longer ago than this (kconnect's; -1, the "
        "default: no VACUUM). Delta refuses less than 7 days unless the worker property "
        "spark.databricks.delta.retentionDurationCheck.enabled=false.",
    ),
)

#: Delta's SQL writes (MERGE) take their commit metadata from session settings, which every task of the
#: worker shares: one merge at a time per worker.
_MERGE_LOCK = threading.Lock()


def partition_problems(props: Mapping[str, str | None]) -> dict[str, str]:
    """Delta partitions by columns only: transforms such as days(ts) are refused, naming the key."""
    out: dict[str, str] = {}
    for key, value in props.items():
        named = key == "delta.tables.default-partition-by" or (
            key.startswith("delta.table.") and key.endswith(".partition-by")
        )
        if value and named and "(" in value:
            out[key] = (
                "Delta tables partition by columns only (no transforms such as days(ts) or bucket(n, c))"
            )
    return out


class DeltaSinkConnector(UniformTasks, SinkConnector):
    """Writes its topics' records to Delta tables; see the module docstring."""

    CONFIG = CONFIG_DEF
    TASK_INDEX_KEY = cfg.TASK_ID_CONFIG

    def check(self, props: Mapping[str, str]) -> None:
        cfg.parse(CONFIG_DEF, props, PREFIX)
        for key, message in partition_problems(props).items():
            raise ConnectorError(f"Invalid value {props.get(key)} for configuration {key}: {message}")

    def validate(self, props: Mapping[str, str | None]) -> list[ConfigValue]:
        values = cfg.validate(CONFIG_DEF, props, PREFIX)
        by_name = {v.name: v for v in values}
        for key, message in partition_problems(props).items():
            if key not in by_name:
                by_name[key] = ConfigValue(key, props.get(key))
                values.append(by_name[key])
            by_name[key].add_error(f"Invalid value {props.get(key)} for configuration {key}: {message}")
        return values

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]) -> bool:
        """Any offsets: the tables' history says what they hold."""
        return True


class DeltaSinkTask(TableSinkTask):
    """Delta's side of the table shell: path tables, one idempotent commit per partition."""

    PREFIX = PREFIX
    CONFIG = CONFIG_DEF

    def _path(self, table: str) -> str:
        root = self._config().props[WAREHOUSE_CONFIG].rstrip("/")
        return "/".join([root, *table_parts(table)])

    def _ident(self, table: str) -> str:
        return "delta.`" + self._path(table).replace("`", "``") + "`"

    def _prepare(self, spark: Any) -> None:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
        catalog = spark.conf.get("spark.sql.catalog.spark_catalog", "") or ""
        if EXTENSIONS not in extensions or catalog != CATALOG:
            raise ConnectorError(
                "the worker's SparkSession is not set up for Delta Lake: worker properties need delta-spark "
                "and "
                f"delta-storage on spark.jars, spark.sql.extensions including {EXTENSIONS} and "
                f"spark.sql.catalog.spark_catalog={CATALOG}"
            )

    def _table_schema(self, spark: Any, table: str) -> Any:
        path = self._path(table)
        if "://" not in path and not (Path(path) / "_delta_log").is_dir():
            return None
        try:
            return spark.read.format("delta").load(path).schema
        except Exception as exc:
            # DELTA_TABLE_NOT_FOUND: a _delta_log with no commit in it, as a first write cancelled half-way
            # (its query restarted) leaves; the table is then created as if the folder were not there.
            if any(
                m in str(exc)
                for m in ("DELTA_MISSING_DELTA_TABLE", "DELTA_TABLE_NOT_FOUND", "is not a Delta table")
            ):
                return None
            raise

    def _create_table(self, spark: Any, table: str, schema: Any) -> None:
        ddl = spark._jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json()).toDDL()
        partitioning = self._config().partitioning(table)
        partitioned = f" PARTITIONED BY ({', '.join(partitioning)})" if partitioning else ""
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {self._ident(table)} ({ddl}) USING delta{partitioned} "
            "TBLPROPERTIES ('delta.enableTypeWidening'='true')"
        )

    def _evolve_table(self, spark: Any, table: str, change: Evolution) -> None:
        ident = self._ident(table)
        for path, data_type in change.add:
            spark.sql(f"ALTER TABLE {ident} ADD COLUMNS ({quote_path(path)} {data_type.simpleString()})")
        for path, data_type in change.widen:
            spark.sql(f"ALTER TABLE {ident} ALTER COLUMN {quote_path(path)} TYPE {data_type.simpleString()}")
        for path in change.make_optional:
            spark.sql(f"ALTER TABLE {ident} ALTER COLUMN {quote_path(path)} DROP NOT NULL")

    def _held_offsets(self, spark: Any, table: str) -> dict[TopicPartition, int]:
        key = offsets_key(self._config().connector)
        rows = spark.sql(f"DESCRIBE HISTORY {self._ident(table)}").select("version", "userMetadata").collect()
        out: dict[TopicPartition, int] = {}
        for row in sorted(rows, key=lambda r: r[0]):
            try:
                meta = json.loads(row[1]) if row[1] else None
            except ValueError:
                continue
            if isinstance(meta, dict) and isinstance(meta.get(key), str):
                out.update(decode_offsets(meta[key]))
        return out

    def _maintain_table(self, spark: Any, table: str, policy: MaintenancePolicy) -> MaintenanceResult:
        """``OPTIMIZE`` when the table has at least ``min-input-files`` files, then ``VACUUM``. Both commit
        with no ``userMetadata`` (the resume reads past them) and never touch the history the offsets live
        in. Held under the merge lock: Delta takes commit metadata and file sizes from session settings
        that the worker's tasks share."""
        ident = self._ident(table)
        rewritten = added = deleted = 0
        skipped: str | None = None
        with _MERGE_LOCK:
            if policy.compacts:
                files = int(spark.sql(f"DESCRIBE DETAIL {ident}").select("numFiles").collect()[0][0])
                if files < policy.min_input_files:
                    skipped = f"{files} files, fewer than min-input-files {policy.min_input_files}"
                else:
                    size_key = "spark.databricks.delta.optimize.maxFileSize"
                    if policy.target_file_size_bytes > 0:
                        spark.conf.set(size_key, str(policy.target_file_size_bytes))
                    try:
                        metrics = spark.sql(f"OPTIMIZE {ident}").collect()[0]["metrics"]
                    finally:
                        if policy.target_file_size_bytes > 0:
                            spark.conf.unset(size_key)
                    rewritten, added = int(metrics["numFilesRemoved"]), int(metrics["numFilesAdded"])
            if policy.vacuum_retention_ms >= 0:
                deleted = self._vacuum(spark, ident, policy.vacuum_retention_ms)
        return MaintenanceResult(
            files_rewritten=rewritten, files_added=added, files_deleted=deleted, skipped=skipped
        )

    @staticmethod
    def _vacuum(spark: Any, ident: str, retention_ms: int) -> int:
        """VACUUM, its listing spread over the session's cores rather than Spark's default of 10,000
        listing tasks (minutes for a small table on two cores); the files it deleted, from the VACUUM END
        entry Delta writes to the history (0 where Delta does not log VACUUM)."""
        hours = f"{retention_ms / 3_600_000:.6f}"
        listing = "spark.sql.sources.parallelPartitionDiscovery.parallelism"
        before = spark.conf.get(listing, None)
        spark.conf.set(listing, str(max(1, spark.sparkContext.defaultParallelism)))
        try:
            spark.sql(f"VACUUM {ident} RETAIN {hours} HOURS").collect()
        finally:
            if before is None:
                spark.conf.unset(listing)
            else:
                spark.conf.set(listing, before)
        last = (
            spark.sql(f"DESCRIBE HISTORY {ident} LIMIT 1").select("operation", "operationMetrics").collect()
        )
        if last and last[0][0] == "VACUUM END" and last[0][1]:
            return int(last[0][1].get("numDeletedFiles", 0))
        return 0

    def _write(
        self, spark: Any, table: str, rows: Any, covered: Mapping[TopicPartition, int], ids: tuple[str, ...]
    ) -> None:
        from pyspark.sql import functions as F

        key = offsets_key(self._config().connector)
        columns = spark.read.format("delta").load(self._path(table)).schema
        present = set(rows.columns)
        for tp, offset in sorted(covered.items(), key=lambda i: str(i[0])):
            part = rows.where((F.col(TOPIC) == tp.topic) & (F.col(PARTITION) == tp.partition))
            meta = json.dumps({key: encode_offsets({tp: offset})})
            app_id = f"kconnect.{self._config().connector}.{tp.topic}.{tp.partition}"
            if ids:
                self._merge(
                    spark,
                    table,
                    part,
                    [c.name for c in columns.fields if c.name in present],
                    ids,
                    meta,
                    app_id,
                    offset,
                )
                continue
            aligned = part.select(
                *[
                    F.col(f"`{c.name}`") if c.name in present else F.lit(None).cast(c.dataType).alias(c.name)
                    for c in columns.fields
                ]
            )
            (
                aligned.write.format("delta")
                .mode("append")
                .option("txnAppId", app_id)
                .option("txnVersion", str(offset))
                .option("userMetadata", meta)
                .save(self._path(table))
            )

    def _merge(
        self,
        spark: Any,
        table: str,
        rows: Any,
        columns: list[str],
        ids: tuple[str, ...],
        meta: str,
        app_id: str,
        version: int,
    ) -> None:
        """MERGE INTO by ``ids`` (newest record per id), its commit carrying ``meta`` and the partition's
        transaction version through Delta's session settings (held under a lock: the session is shared)."""
        from pyspark.sql import Window
        from pyspark.sql import functions as F

        missing = [i for i in ids if i not in columns]
        if missing:
            raise ConnectorError(
                f"table {table}: id column(s) {', '.join(missing)} are not fields of the records"
            )
        newest = Window.partitionBy(*[F.col(f"`{i}`") for i in ids]).orderBy(F.col(OFFSET).desc())
        source = (
            rows.withColumn("_kc_rank", F.row_number().over(newest))
            .where("_kc_rank = 1")
            .drop("_kc_rank", *META)
        )
        view = f"kc_delta_merge_{abs(hash((table, id(self))))}"

        statement = merge_statement(self._ident(table), view, columns, ids)
        settings = {
            "spark.databricks.delta.commitInfo.userMetadata": meta,
            "spark.databricks.delta.write.txnAppId": app_id,
            "spark.databricks.delta.write.txnVersion": str(version),
        }
        with _MERGE_LOCK:
            source.createOrReplaceTempView(view)
            try:
                for k, v in settings.items():
                    spark.conf.set(k, v)
                spark.sql(statement)
            finally:
                for k in settings:
                    spark.conf.unset(k)
                spark.catalog.dropTempView(view)


DeltaSinkConnector.TASK = DeltaSinkTask
