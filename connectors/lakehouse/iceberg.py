"""IcebergSinkConnector: topics to Apache Iceberg tables, written by Spark's Iceberg runtime, exactly once.

It takes Apache Iceberg's Kafka Connect sink's keys (``iceberg.tables``, ``iceberg.tables.*``,
``iceberg.control.commit.interval-ms``, ``iceberg.catalog.*``; see ``config``), so a config moves over,
and does what that sink does not: no coordinator task or control topic (each task commits its own
snapshots, which carry the Kafka offsets they cover: ``table_sink``), commits by records and bytes as well
as time, tables named by topic (``analytics.${topic}``), upserts and deletes by id columns with MERGE INTO.

The worker's SparkSession needs Iceberg's runtime jar and, for MERGE INTO, its SQL extensions: worker
properties ``spark.jars`` (or ``spark.jars.packages=``
``org.apache.iceberg:iceberg-spark-runtime-4.0_2.13:1.10.2``)
and ``spark.sql.extensions=org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions``. The
connector registers its catalog in the session under a name of its own (``kc_<hash of iceberg.catalog.*>``)
with table caching off, so a table another worker committed to is read fresh.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kconnect.connectors.lakehouse import config as cfg
from kconnect.connectors.lakehouse.commits import encode_offsets, offsets_key, resume_offsets
from kconnect.connectors.lakehouse.evolution import Evolution, quote_path
from kconnect.connectors.lakehouse.iceberg_catalog import (
    catalog_name,
    catalog_problems,
    catalog_properties,
)
from kconnect.connectors.lakehouse.iceberg_files import (
    DRIVER_ROWS,
    HELPER_CLASS,
    HELPER_VERSION,
    TABLE_INDEX,
    Columns,
    Described,
    appended,
    described,
    local_path,
    picked_together,
    together_key,
    writable_alone,
)
from kconnect.connectors.lakehouse.iceberg_merge import merge_rows
from kconnect.connectors.lakehouse.iceberg_round import files_in_one_job, files_on_driver
from kconnect.connectors.lakehouse.maintenance import (
    OFF,
    MaintenancePolicy,
    MaintenanceResult,
    Snapshot,
    snapshots_to_expire,
)
from kconnect.connectors.lakehouse.routing import table_parts
from kconnect.connectors.lakehouse.table_sink import (
    COMMIT_THREADS,
    Pending,
    Route,
    TableSinkTask,
)
from kconnect.connectors.uniform import UniformTasks
from kconnect.runtime import logs
from kconnect.runtime.plugins.api import ConnectorError, SinkConnector, TopicPartition
from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValue, Importance, LambdaValidator, Range
from kconnect.runtime.plugins.config_def import Type as ConfigType

log = logs.get(__name__)

PREFIX = "iceberg."
EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
JDBC_PASSWORD = "iceberg.catalog.jdbc.password"

CONFIG_DEF = cfg.config_def(
    PREFIX,
    ConfigDef()
    .define(
        "iceberg.catalog",
        ConfigType.STRING,
        "iceberg",
        None,
        Importance.LOW,
        "The catalog's name: a jdbc catalog is registered in Spark under it (its tables are kept under "
        "the catalog's name); other catalogs under a name of kconnect's own.",
    )
    .define(
        "iceberg.catalog.type",
        ConfigType.STRING,
        None,
        None,
        Importance.HIGH,
        "hadoop (a warehouse directory; the default), jdbc, rest or hive; or set "
        "iceberg.catalog.catalog-impl. "
        "Every iceberg.catalog.<key> goes to Spark's Iceberg catalog as <key>.",
    )
    .define(
        "iceberg.catalog.warehouse",
        ConfigType.STRING,
        None,
        None,
        Importance.HIGH,
        "The warehouse location (a directory every worker sees, for the hadoop catalog).",
    )
    .define(
        "iceberg.catalog.uri",
        ConfigType.STRING,
        None,
        None,
        Importance.HIGH,
        "The catalog's address: jdbc:postgresql://host:port/db for the jdbc catalog (the PostgreSQL driver "
        "on the worker's spark.jars), http(s)://... for a rest catalog.",
    )
    .define(
        "iceberg.catalog.jdbc.user",
        ConfigType.STRING,
        None,
        None,
        Importance.MEDIUM,
        "The jdbc catalog's database user.",
    )
    .define(
        JDBC_PASSWORD,
        ConfigType.PASSWORD,
        None,
        None,
        Importance.MEDIUM,
        "The jdbc catalog's database password: a secret, shown as [hidden] in validation answers and logs "
        "(use a config provider, ${file:...}, to keep it out of the config topic).",
    )
    .define(
        "iceberg.tables.maintenance.expire-snapshots.older-than-ms",
        ConfigType.LONG,
        OFF,
        LambdaValidator.with_(cfg.minus_one_or_at_least_zero, "-1 (off) or 0 or more"),
        Importance.LOW,
        "Maintenance expires snapshots older than this (kconnect's; -1, the default: no expiry). The newest "
        "snapshot carrying each partition's Kafka offsets is always kept: the task resumes from it.",
    )
    .define(
        "iceberg.tables.maintenance.expire-snapshots.retain-last",
        ConfigType.INT,
        1,
        Range.at_least(1),
        Importance.LOW,
        "Expiry always keeps this many newest snapshots.",
    )
    .define(
        "iceberg.control.topic",
        ConfigType.STRING,
        "control-iceberg",
        None,
        Importance.LOW,
        "Accepted; unused (no coordinator).",
    )
    .define(
        "iceberg.control.commit.timeout-ms",
        ConfigType.LONG,
        30_000,
        None,
        Importance.LOW,
        "Accepted; unused (no coordinator).",
    )
    .define("iceberg.control.commit.threads", ConfigType.INT, 1, None, Importance.LOW, "Accepted; unused.")
    .define(
        "iceberg.control.group-id-prefix",
        ConfigType.STRING,
        "cg-control",
        None,
        Importance.LOW,
        "Accepted; unused.",
    ),
)


_NAMESPACE_LOCK = threading.Lock()


class IcebergSinkConnector(UniformTasks, SinkConnector):
    """Writes its topics' records to Iceberg tables; see the module docstring."""

    CONFIG = CONFIG_DEF
    TASK_INDEX_KEY = cfg.TASK_ID_CONFIG

    def check(self, props: Mapping[str, str]) -> None:
        cfg.parse(CONFIG_DEF, props, PREFIX)
        for key, message in catalog_problems(props).items():
            raise ConnectorError(f"Invalid value {props.get(key)} for configuration {key}: {message}")

    def validate(self, props: Mapping[str, str | None]) -> list[ConfigValue]:
        values = cfg.validate(CONFIG_DEF, props, PREFIX)
        by_name = {v.name: v for v in values}
        for key, message in catalog_problems(props).items():
            by_name[key].add_error(f"Invalid value {props.get(key)} for configuration {key}: {message}")
        return values

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]) -> bool:
        """Any offsets: rewinding cannot duplicate rows, the tables' snapshots say what they hold."""
        return True


class IcebergSinkTask(TableSinkTask):
    """Iceberg's side of the table shell: a catalog in the session, snapshots carrying the offsets."""

    PREFIX = PREFIX
    CONFIG = CONFIG_DEF

    def __init__(self) -> None:
        super().__init__()
        self._catalog = ""
        #: Per table: the schema and current snapshot id its last load saw (consumed by the next write
        #: and held-offsets read), and the snapshot this task last committed with the offsets the table
        #: held then: while that snapshot is still the table's current one, nobody else has committed to
        #: it since, and those offsets need no read of the table's snapshots (a Spark job).
        self._schemas: dict[str, Any] = {}
        #: Per table: the catalog's load (Spark's ``SparkTable``) that read ``_schemas``'s entry.
        self._loaded: dict[str, Any] = {}
        self._classes: dict[str, Any] = {}
        #: The session the catalog below was looked up in, and the catalog (JVM).
        self._catalog_of: tuple[Any, Any] | None = None
        self._seen: dict[str, int | None] = {}
        self._known: dict[str, tuple[int, dict[TopicPartition, int]]] = {}
        #: The snapshot id seen and what the table held then, read just before the write being made
        #: (None and {} when this task created it).
        self._held_before: dict[str, tuple[int | None, dict[TopicPartition, int]]] = {}
        #: The session's JVM the helper was looked for in, and the helper (None: absent, see _helper).
        self._helper_of: tuple[Any, Any] | None = None
        #: A commit round's tables as the helper read them at its start, each consumed by the table's
        #: first schema read (None: missing); and the together keys of those read so (``_write_together``).
        self._described: dict[str, Described | None] = {}
        self._keys: dict[str, Columns | None] = {}
        #: The session whose Iceberg catalog (``SparkCatalog.icebergCatalog``) is held, and that catalog.
        self._iceberg_of: tuple[Any, Any] | None = None

    def _ident(self, table: str) -> str:
        return self._catalog + "." + ".".join(f"`{p}`" for p in table_parts(table))

    def _prepare(self, spark: Any) -> None:
        config = self._config()
        self._catalog = catalog_name(config.props)
        options = catalog_properties(config.props)
        for key, value in options.items():
            # A named (jdbc) catalog another connector registered differently: Spark keeps the first one
            # it loaded, so this connector would write through that one. Name the key, never the value.
            held = spark.conf.get(f"spark.sql.catalog.{self._catalog}.{key}", None)
            if held is not None and held != value:
                raise ConnectorError(
                    f"the worker's SparkSession already has an Iceberg catalog named {self._catalog} with "
                    f"another iceberg.catalog.{key}: give this connector's catalog another name "
                    "(iceberg.catalog)"
                )
        spark.conf.set(f"spark.sql.catalog.{self._catalog}", "org.apache.iceberg.spark.SparkCatalog")
        for key, value in options.items():
            spark.conf.set(f"spark.sql.catalog.{self._catalog}.{key}", value)
        jvm = spark._jvm
        try:
            loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
            jvm.java.lang.Class.forName("org.apache.iceberg.spark.SparkCatalog", True, loader)
        except Exception as exc:
            raise ConnectorError(
                "the worker's SparkSession cannot load Apache Iceberg's Spark catalog: put "
                "iceberg-spark-runtime-4.0_2.13 on the worker's spark.jars (or spark.jars.packages) "
                f"({str(exc).splitlines()[0]})"
            ) from exc
        if config.upsert and EXTENSIONS not in (spark.conf.get("spark.sql.extensions", "") or ""):
            raise ConnectorError(
                "upsert mode runs MERGE INTO, which needs the worker property "
                f"spark.sql.extensions={EXTENSIONS}"
            )

    def _jclass(self, spark: Any, name: str) -> Any:
        """A JVM class by its full name, looked up once: py4j walks ``jvm.a.b.C`` one gateway round trip
        per dot, which for a 50-table commit round was thousands of round trips."""
        found = self._classes.get(name)
        if found is None:
            found = self._classes[name] = getattr(spark._jvm, name)
        return found

    def _spark_catalog(self, spark: Any) -> Any:
        """The connector's catalog as the session's catalog manager made it, looked up once per session.
        The manager reads the catalog's settings from the thread's active session (as spark.sql does, it
        is made active for the call): a streaming batch's session is a clone."""
        session = spark._jsparkSession
        held = self._catalog_of
        if held is not None and held[0] is session:
            return held[1]
        sessions = self._jclass(spark, "org.apache.spark.sql.classic.SparkSession")
        before = sessions.getActiveSession()
        sessions.setActiveSession(session)
        try:
            catalog = session.sessionState().catalogManager().catalog(self._catalog)
        finally:
            if before.isDefined():
                sessions.setActiveSession(before.get())
            else:
                sessions.clearActiveSession()
        self._catalog_of = (session, catalog)
        return catalog

    def _load(self, spark: Any, table: str) -> Any:
        """The table as the catalog loads it now (Spark's ``SparkTable``, in the JVM), or None if missing:
        one catalog round trip, no query planned."""
        parts = table_parts(table)
        namespace = spark.sparkContext._gateway.new_array(
            self._jclass(spark, "java.lang.String"), len(parts) - 1
        )
        for i, part in enumerate(parts[:-1]):
            namespace[i] = part
        ident = self._jclass(spark, "org.apache.spark.sql.connector.catalog.Identifier").of(
            namespace, parts[-1]
        )
        try:
            return self._spark_catalog(spark).loadTable(ident)
        except Exception as exc:
            text = str(exc)
            # A jdbc catalog on Iceberg's first schema version answers a missing table by refusing the
            # view lookup Spark tries next ("initialized without view support"): the table is missing.
            if any(m in text for m in ("TABLE_OR_VIEW_NOT_FOUND", "NoSuchTable", "without view support")):
                return None
            raise

    def _table_schema(self, spark: Any, table: str) -> Any:
        from pyspark.sql.types import StructType

        if table in self._described:  # the round's helper read it: no py4j calls of its own
            found = self._described.pop(table)
            if found is None:
                self._schemas.pop(table, None)
                self._seen.pop(table, None)
                return None
            snapshot, schema_json, key = found
            schema = StructType.fromJson(json.loads(schema_json))
            self._schemas[table], self._keys[table], self._seen[table] = schema, key, snapshot
            self._loaded.pop(table, None)
            return schema
        loaded = self._load(spark, table)
        if loaded is None:
            self._schemas.pop(table, None)
            self._seen.pop(table, None)
            return None
        schema = StructType.fromJson(json.loads(loaded.schema().json()))
        snapshot = loaded.table().currentSnapshot()
        self._schemas[table] = schema
        self._loaded[table] = loaded
        self._seen[table] = None if snapshot is None else int(snapshot.snapshotId())
        return schema

    def _create_table(self, spark: Any, table: str, schema: Any) -> None:
        config = self._config()
        parts = table_parts(table)
        namespace = self._catalog + "." + ".".join(f"`{p}`" for p in parts[:-1])
        with _NAMESPACE_LOCK:  # tables of one commit are created at once; their namespace once
            spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {namespace}")
        ddl = spark._jvm.org.apache.spark.sql.types.DataType.fromJson(schema.json()).toDDL()
        partitioning = config.partitioning(table)
        partitioned = f" PARTITIONED BY ({', '.join(partitioning)})" if partitioning else ""
        spark.sql(
            f"CREATE TABLE IF NOT EXISTS {self._ident(table)} ({ddl}) USING iceberg{partitioned} "
            "TBLPROPERTIES ('format-version'='2')"
        )
        self._schemas.pop(table, None)
        self._held_before[table] = (None, {})  # if another task created it first: see _remember

    def _evolve_table(self, spark: Any, table: str, change: Evolution) -> None:
        ident = self._ident(table)
        self._schemas.pop(table, None)
        for path, data_type in change.add:
            spark.sql(f"ALTER TABLE {ident} ADD COLUMN {quote_path(path)} {data_type.simpleString()}")
        for path, data_type in change.widen:
            spark.sql(f"ALTER TABLE {ident} ALTER COLUMN {quote_path(path)} TYPE {data_type.simpleString()}")
        for path in change.make_optional:
            spark.sql(f"ALTER TABLE {ident} ALTER COLUMN {quote_path(path)} DROP NOT NULL")

    def _held_offsets(self, spark: Any, table: str) -> dict[TopicPartition, int]:
        seen, known = self._seen.pop(table, None), self._known.get(table)
        if seen is not None and known is not None and known[0] == seen:
            held = dict(known[1])
        else:
            key = offsets_key(self._config().connector).replace("'", "\\'")
            rows = spark.sql(
                f"SELECT summary['{key}'] FROM {self._ident(table)}.snapshots "
                "ORDER BY committed_at, snapshot_id"
            ).collect()
            held = resume_offsets(r[0] for r in rows)
        self._held_before[table] = (seen, dict(held))
        return held

    def _maintain_table(self, spark: Any, table: str, policy: MaintenancePolicy) -> MaintenanceResult:
        """``rewrite_data_files`` (bin-pack; its snapshot carries no offsets, which the resume reads past),
        then ``expire_snapshots`` of exactly the ids :func:`snapshots_to_expire` picks: the procedure's own
        ``older_than``/``retain_last`` could expire the newest snapshot naming a partition's offsets."""
        name = ".".join(f"`{p}`" for p in table_parts(table)).replace("'", "\\'")
        rewritten = added = 0
        if policy.compacts:
            options = {"min-input-files": str(policy.min_input_files)}
            if policy.target_file_size_bytes > 0:
                options["target-file-size-bytes"] = str(policy.target_file_size_bytes)
            pairs = ", ".join(f"'{k}', '{v}'" for k, v in options.items())
            row = spark.sql(
                f"CALL {self._catalog}.system.rewrite_data_files(table => '{name}', options => map({pairs}))"
            ).collect()[0]
            rewritten, added = int(row["rewritten_data_files_count"]), int(row["added_data_files_count"])
        expired = deleted = 0
        if policy.expire_older_than_ms >= 0:
            snapshots = [
                Snapshot(int(r[0]), int(r[1]), dict(r[2] or {}))
                for r in spark.sql(
                    "SELECT snapshot_id, unix_millis(committed_at), summary "
                    f"FROM {self._ident(table)}.snapshots"
                ).collect()
            ]
            ids = snapshots_to_expire(
                snapshots, int(time.time() * 1000), policy.expire_older_than_ms, policy.retain_last
            )
            if ids:
                # older_than long past: nothing expires by age, only the ids named.
                row = spark.sql(
                    f"CALL {self._catalog}.system.expire_snapshots(table => '{name}', "
                    "older_than => TIMESTAMP '1971-01-01 00:00:00', "
                    f"snapshot_ids => array({', '.join(map(str, ids))}))"
                ).collect()[0]
                expired = len(ids)
                deleted = int(row["deleted_data_files_count"])
        return MaintenanceResult(
            files_rewritten=rewritten, files_added=added, snapshots_expired=expired, files_deleted=deleted
        )

    def _write(
        self, spark: Any, table: str, rows: Any, covered: Mapping[TopicPartition, int], ids: tuple[str, ...]
    ) -> None:
        from pyspark.sql import functions as F

        key = offsets_key(self._config().connector)
        encoded = encode_offsets(covered)
        columns = self._schemas.pop(table, None) or self._table_schema(spark, table)
        present = set(rows.columns)
        if not ids:
            aligned = rows.select(
                *[
                    F.col(f"`{c.name}`") if c.name in present else F.lit(None).cast(c.dataType).alias(c.name)
                    for c in columns.fields
                ]
            )
            aligned.writeTo(self._ident(table)).option("snapshot-property." + key, encoded).append()
        else:
            merge_rows(
                spark,
                self._ident(table),
                table,
                f"kc_merge_{self._catalog}_{abs(hash((table, id(self))))}",
                rows,
                [c.name for c in columns.fields if c.name in present],
                ids,
                {key: encoded},
            )
        self._remember(spark, table, key, encoded, covered)

    def _remember(
        self,
        spark: Any,
        table: str,
        key: str,
        encoded: str,
        covered: Mapping[TopicPartition, int],
        committed: Any = None,
    ) -> None:
        """After a commit: if the table's current snapshot is the one just made (its summary carries these
        offsets) and its parent is the snapshot whose offsets were read before the write (nobody committed
        in between), note it with what the table now holds (those offsets, the newest winning), so the
        next commit needs no snapshots read. Otherwise the next commit reads them. ``committed``: the Iceberg
        table the commit was made through (its current snapshot is then read without a catalog load)."""
        self._known.pop(table, None)
        before = self._held_before.pop(table, None)
        if before is None:
            return
        if committed is None:
            loaded = self._load(spark, table)
            committed = None if loaded is None else loaded.table()
        snapshot = None if committed is None else committed.currentSnapshot()
        if snapshot is None or snapshot.summary().get(key) != encoded:
            return
        parent = None if snapshot.parentId() is None else int(snapshot.parentId())
        self._note(table, before, int(snapshot.snapshotId()), parent, covered)

    def _note(
        self,
        table: str,
        before: tuple[int | None, dict[TopicPartition, int]],
        snapshot: int,
        parent: int | None,
        covered: Mapping[TopicPartition, int],
    ) -> None:
        """Note the table's new snapshot (made by this task, carrying ``covered``) with what the table holds
        now, if its parent is the snapshot whose offsets were read before the write (``before``)."""
        if parent == before[0]:
            self._known[table] = (snapshot, {**before[1], **covered})

    # --- many tables' data files in one job (iceberg_files)

    def _write_tables(self, routes: list[Route], lows: Mapping[TopicPartition, int]) -> None:
        """With the helper, a round of several tables reads them all in one JVM call first (what each
        table's preparation would read through py4j: ``_table_schema``), then goes on as without it."""
        spark = self._spark
        helper = self._helper(spark) if len(routes) >= 2 else None
        try:
            if helper is not None:
                self._described = self._describe(spark, helper, [r[0] for r in routes])
            super()._write_tables(routes, lows)
        finally:
            self._described, self._keys = {}, {}

    def _describe(self, spark: Any, helper: Any, tables: list[str]) -> dict[str, Described | None]:
        """The tables as the helper reads them from the catalog, in one call (a table it could not read
        is left out: it is read the other way)."""
        names = "\n".join("\x1f".join(table_parts(t)) for t in tables)
        answer = helper.describeAll(self._iceberg_catalog(spark), names, COMMIT_THREADS)
        return {
            t: found
            for t, found in zip(tables, described(str(answer), len(tables)), strict=True)
            if not isinstance(found, str)
        }

    def _iceberg_catalog(self, spark: Any) -> Any:
        """The connector's Iceberg catalog (Java) under its Spark catalog, looked up once per session."""
        session = spark._jsparkSession
        held = self._iceberg_of
        if held is None or held[0] is not session:
            held = self._iceberg_of = (session, self._spark_catalog(spark).icebergCatalog())
        return held[1]

    def _write_together(
        self, spark: Any, pending: list[Pending]
    ) -> tuple[list[Pending], list[BaseException]]:
        """Tables of the same flat columns, two or more, get their data files from one Spark job and a
        commit each through Iceberg's API (``iceberg_files``); the rest are left to :meth:`_write` (a
        table whose load failed too: its own write says why)."""
        appends = [p for p in pending if not p.ids]
        if len(appends) < 2 or spark.conf.get("spark.sql.parquet.fieldId.write.enabled", "true") != "true":
            return pending, []
        loaded = (
            self._described_tables(spark, appends)
            if self._helper(spark) is not None
            else self._each(lambda p: (p, self._loaded_table(spark, p.table)), appends)[0]
        )
        groups: dict[Columns, list[tuple[Pending, Any]]] = {}
        for p, (itable, key) in loaded:
            nullable = {f.name: f.nullable for f in p.fields()}
            if key is not None and writable_alone(key, nullable):
                groups.setdefault(key, []).append((p, itable))
        together = [m for members in groups.values() if len(members) >= 2 for m in members]
        done = {id(p) for p, _ in together}
        rest = [p for p in pending if id(p) not in done]
        errors: list[BaseException] = []
        for columns, members in groups.items():
            if len(members) >= 2:
                try:
                    self._write_group(spark, columns, members)
                except Exception as exc:
                    errors.append(exc)
        return rest, errors

    def _described_tables(
        self, spark: Any, appends: list[Pending]
    ) -> list[tuple[Pending, tuple[Any, Columns | None]]]:
        """With the helper: each table's Spark schema and together key as the round's start read them
        (or, for a table created or evolved since, as one more helper call reads it now)."""
        again = [p.table for p in appends if p.table not in self._schemas or p.table not in self._keys]
        fresh = self._describe(spark, self._helper(spark), again) if again else {}
        out = []
        for p in appends:
            if p.table in fresh:
                found = fresh[p.table]
                if found is None:
                    continue
                from pyspark.sql.types import StructType

                schema, key = StructType.fromJson(json.loads(found[1])), found[2]
            elif p.table in self._keys and p.table in self._schemas:
                schema, key = self._schemas[p.table], self._keys.pop(p.table)
            else:
                continue  # the helper could not read it: its own write says why
            out.append((p, (schema, key)))
        return out

    def _loaded_table(self, spark: Any, table: str) -> tuple[Any, Columns | None]:
        """The Iceberg table (Java) as the commit's preparation loaded it (or loaded now, when it was
        created or evolved since), and its :func:`together_key`."""
        loaded = self._loaded.pop(table, None) if table in self._schemas else None
        if loaded is None:
            loaded = self._load(spark, table)
        if loaded is None:
            return None, None
        itable = loaded.table()
        schema_json = self._jclass(spark, "org.apache.iceberg.SchemaParser").toJson(itable.schema())
        return itable, together_key(schema_json, str(itable.location()), not itable.spec().isUnpartitioned())

    def _write_group(self, spark: Any, columns: Columns, members: list[tuple[Pending, Any]]) -> None:
        """The members' rows become Parquet files with the tables' field ids, one directory per table (on
        the driver when the round is small and picked from one frame, else one Spark job); then each
        table's files are moved into it and committed with the offsets, up to COMMIT_THREADS at once.
        Every table is attempted; the first failure is raised once all are done.

        With the helper, the appends (one JVM call, most of a trickle's round) are left to run beside the
        next batch when the commit defers (``_deferred``): the files are written and nothing the appends
        need is read from the batch's frames any more."""
        started = time.monotonic()
        files = self._dir() / "together" / f"{int(time.time() * 1000)}-{id(members)}"
        pick = picked_together([p for p, _ in members])
        handed = False  # True once the appends below own the files (they remove them)
        try:
            if pick is not None:
                files_on_driver(columns, members, pick, files)
            else:
                types = {
                    f.name: f.dataType.simpleString() for f in self._schema_of(spark, members[0][1]).fields
                }
                files_in_one_job(spark, types, columns, [p for p, _ in members], files)
            written = time.monotonic() - started
            helper = self._helper(spark)
            shape = {
                "tables": len(members),
                "columns": len(columns),
                "on_driver": pick is not None,
                "one_call": helper is not None,
            }

            def appends() -> list[BaseException]:
                try:
                    if helper is not None:
                        return self._append_round(spark, helper, members, files)
                    return self._each(
                        lambda m: self._append_files(
                            spark, m[1][0].table, m[1][1], m[1][0].covered, files / f"{TABLE_INDEX}={m[0]}"
                        ),
                        list(enumerate(members)),
                    )[1]
                finally:
                    shutil.rmtree(files, ignore_errors=True)

            handed = True
            if helper is not None and self._deferred is not None:
                self._deferred.append(lambda: self._written(appends, shape, started, written, deferred=True))
                return
            errors = self._written(appends, shape, started, written, deferred=False)
        finally:
            if not handed:
                shutil.rmtree(files, ignore_errors=True)
        if errors:
            raise errors[0]

    def _written(
        self,
        appends: Callable[[], list[BaseException]],
        shape: dict[str, Any],
        started: float,
        written: float,
        deferred: bool,
    ) -> list[BaseException]:
        """Run a group's appends and log the group's line (``tables written together``: the files' seconds
        and the whole group's); answer the errors."""
        appended_at = time.monotonic()
        errors = appends()
        log.info(
            "tables written together",
            **shape,
            job_seconds=round(written, 2),
            append_seconds=round(time.monotonic() - appended_at, 2),
            seconds=round(time.monotonic() - started, 2),
            beside_next_batch=deferred,
            failed=len(errors),
            connector=self._config().connector,
        )
        return errors

    def _collect_small(self, rows: Any, bound: int) -> Any:
        """A commit of at most ``DRIVER_ROWS`` appended records comes to the driver once, as Arrow: its
        tables' files are written there (``_files_on_driver``) and its routes read from it."""
        if bound > DRIVER_ROWS or self._config().upsert:
            return None
        try:
            return rows.toArrow()
        except Exception as exc:  # a type Arrow cannot hold: routed and written the Spark way
            log.info("rows not collected as Arrow; routed by a Spark job", reason=str(exc).splitlines()[0])
            return None

    def _helper(self, spark: Any) -> Any:
        """The JVM helper appending a round's tables in one call (``iceberg_files.HELPER_CLASS``), looked
        up once per session's JVM; None when it is not on Spark's classpath or speaks another version:
        then each table is appended through py4j (:meth:`_append_files`), as the helper would."""
        held = self._helper_of
        if held is not None and held[0] is spark._jvm:
            return held[1]
        helper = None
        try:
            loader = self._jclass(spark, "org.apache.spark.util.Utils").getContextOrSparkClassLoader()
            self._jclass(spark, "java.lang.Class").forName(HELPER_CLASS, True, loader)
            found = self._jclass(spark, HELPER_CLASS)
            if int(found.version()) == HELPER_VERSION:
                helper = found
        except Exception as exc:
            log.info(
                "the Iceberg helper is not on the classpath; tables are appended one by one",
                reason=str(exc).splitlines()[0] if str(exc) else type(exc).__name__,
            )
        self._helper_of = (spark._jvm, helper)
        return helper

    def _append_round(
        self, spark: Any, helper: Any, members: list[tuple[Pending, Any]], target: Any
    ) -> list[BaseException]:
        """Every member's files (``target/<TABLE_INDEX>=<index>``) appended and committed with its offsets
        by the helper in one py4j call, as :meth:`_append_files` does each; the errors of those that
        failed."""
        key = offsets_key(self._config().connector)
        answer = helper.appendAll(
            self._iceberg_catalog(spark),
            "\n".join("\x1f".join(table_parts(p.table)) for p, _ in members),
            "\n".join(str(target / f"{TABLE_INDEX}={i}") for i in range(len(members))),
            key,
            "\n".join(encode_offsets(p.covered) for p, _ in members),
            COMMIT_THREADS,
        )
        errors: list[BaseException] = []
        for (p, _), outcome in zip(members, appended(str(answer), len(members)), strict=True):
            self._known.pop(p.table, None)
            before = self._held_before.pop(p.table, None)
            if isinstance(outcome, str):
                errors.append(ConnectorError(f"table {p.table}: the append failed: {outcome}"))
            elif outcome[2] and before is not None:
                self._note(p.table, before, outcome[0], outcome[1], p.covered)
        return errors

    def _schema_of(self, spark: Any, itable: Any) -> Any:
        """The Spark schema of an Iceberg table (Java), or the one given (the helper read it)."""
        from pyspark.sql.types import StructType

        if isinstance(itable, StructType):
            return itable
        spark_schema = self._jclass(spark, "org.apache.iceberg.spark.SparkSchemaUtil").convert(
            itable.schema()
        )
        return StructType.fromJson(json.loads(spark_schema.json()))

    def _append_files(
        self, spark: Any, table: str, itable: Any, covered: Mapping[TopicPartition, int], source: Any
    ) -> None:
        """Move the Parquet files under ``source`` into the table's data location and append them in one
        commit whose snapshot summary carries ``covered`` (none: a snapshot with no files, carrying the
        offsets, as Spark's append of no rows makes)."""
        key = offsets_key(self._config().connector)
        encoded = encode_offsets(covered)
        metrics_config = self._jclass(spark, "org.apache.iceberg.MetricsConfig").forTable(itable)
        files = sorted(source.glob("*.parquet")) if source.is_dir() else []
        append = itable.newAppend()
        for file in files:
            location = str(itable.locationProvider().newDataLocation(file.name))
            path = local_path(location)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            size = file.stat().st_size
            shutil.move(str(file), path)
            metrics = self._jclass(spark, "org.apache.iceberg.parquet.ParquetUtil").fileMetrics(
                itable.io().newInputFile(location), metrics_config
            )
            append.appendFile(
                self._jclass(spark, "org.apache.iceberg.DataFiles")
                .builder(itable.spec())
                .withPath(location)
                .withFileSizeInBytes(size)
                .withFormat("PARQUET")
                .withMetrics(metrics)
                .build()
            )
        append.set(key, encoded)
        append.commit()
        self._remember(spark, table, key, encoded, covered, itable)


IcebergSinkConnector.TASK = IcebergSinkTask
