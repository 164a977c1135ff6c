"""A JDBC sink to PostgreSQL that writes each micro-batch with Spark's own JDBC writer.

Why Spark's writer: the sink task is a ``FrameSinkTask``, so a batch arrives as a DataFrame and is
written by Spark's executors in parallel, never collected to the worker. Insert mode appends the batch
to the target table. Spark has no upsert, so upsert mode writes the batch to a staging table with
Spark's writer and then, in one transaction over JDBC from the driver, moves the newest row per key
into the target (``INSERT ... ON CONFLICT (pk) DO UPDATE``) and drops the staging table: a batch is
either applied whole or not at all, and re-delivery after a crash is idempotent.

Keys follow Confluent's JDBC sink where they exist (``connection.url``, ``insert.mode``, ``pk.mode``,
``pk.fields``, ``table.name.format``, ``auto.create``, ``batch.size``) and the connector answers to
``io.confluent.connect.jdbc.JdbcSinkConnector``, so existing configs run with few changes.

Type mapping (Connect schema -> PostgreSQL column, for ``auto.create``): int8/int16 SMALLINT, int32
INTEGER, int64 BIGINT, float32 REAL, float64 DOUBLE PRECISION, boolean BOOLEAN, string TEXT, bytes
BYTEA, Decimal NUMERIC, Date DATE, Timestamp TIMESTAMPTZ (Spark holds an instant and the driver sends
it with its offset, so the instant survives whatever the time zones). Connect Time and nested
struct/array/map fields are rejected with the field's name. Values must be structs with a schema
(JsonConverter with ``schemas.enable=true``); records with a null value (tombstones) are skipped.

The driver jar must be on the worker's SparkSession classpath: worker property
``spark.jars=/usr/share/java/postgresql.jar`` (Debian package ``libpostgresql-jdbc-java``).

The pure parts (config, column plan, SQL) are functions over frozen dataclasses; Spark and JDBC calls
are in ``JdbcSinkTask``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal

from kconnect.connectors.uniform import UniformTasks
from kconnect.runtime import __version__, logs
from kconnect.runtime.dataplane.connect_data import DATE, DECIMAL, TIME, TIMESTAMP, ConnectSchema
from kconnect.runtime.plugins.api import (
    ConnectorError,
    FrameBatch,
    FrameSinkTask,
    SinkConnector,
)
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    ConfigDef,
    ConfigValidationError,
    ConfigValue,
    Importance,
    NonEmptyString,
    Password,
    Range,
    Type,
    ValidString,
)

log = logs.get(__name__)

CONNECTION_URL = "connection.url"
CONNECTION_USER = "connection.user"
CONNECTION_PASSWORD = "connection.password"
TABLE_NAME_FORMAT = "table.name.format"
INSERT_MODE = "insert.mode"
PK_MODE = "pk.mode"
PK_FIELDS = "pk.fields"
AUTO_CREATE = "auto.create"
BATCH_SIZE = "batch.size"

INSERT_MODES = ("insert", "upsert")
PK_MODES = ("none", "record_key", "record_value")
URL_PREFIX = "jdbc:postgresql:"
DRIVER_CLASS = "org.postgresql.Driver"
DRIVER_JAR = "/usr/share/java/postgresql.jar"
#: The staging table's extra column: the record's offset, so the newest row per key wins.
OFFSET_COLUMN = "__connect_offset"
#: Added to each task's config by the connector: tasks may share a target table, so each stages its
#: batches in a table of its own, named after this index (stable across restarts, unlike a random name).
TASK_INDEX = "jdbc.task.index"

CONFIG_DEF = (
    ConfigDef()
    .define(
        CONNECTION_URL,
        Type.STRING,
        NO_DEFAULT,
        NonEmptyString(),
        Importance.HIGH,
        "JDBC URL of the PostgreSQL database, jdbc:postgresql://host:port/database.",
    )
    .define(CONNECTION_USER, Type.STRING, None, None, Importance.HIGH, "JDBC connection user.")
    .define(CONNECTION_PASSWORD, Type.PASSWORD, None, None, Importance.HIGH, "JDBC connection password.")
    .define(
        TABLE_NAME_FORMAT,
        Type.STRING,
        "${topic}",
        NonEmptyString(),
        Importance.MEDIUM,
        "Destination table name; ${topic} stands for the record's topic. A dot separates a schema.",
    )
    .define(
        INSERT_MODE,
        Type.STRING,
        "insert",
        ValidString(INSERT_MODES),
        Importance.HIGH,
        "insert: append every record. upsert: one row per primary key, the newest record wins.",
    )
    .define(
        PK_MODE,
        Type.STRING,
        "none",
        ValidString(PK_MODES),
        Importance.HIGH,
        "Where the primary key comes from: none, record_key (the key, primitive or struct) or "
        "record_value (fields of the value).",
    )
    .define(
        PK_FIELDS,
        Type.LIST,
        "",
        None,
        Importance.MEDIUM,
        "Primary key column names. record_key: the fields of a struct key (all if empty) or the one "
        "column name of a primitive key. record_value: fields of the value (all if empty).",
    )
    .define(
        AUTO_CREATE,
        Type.BOOLEAN,
        False,
        None,
        Importance.MEDIUM,
        "Create a missing table from the record schema (CREATE TABLE IF NOT EXISTS).",
    )
    .define(
        BATCH_SIZE,
        Type.INT,
        3000,
        Range.at_least(1),
        Importance.MEDIUM,
        "Rows per JDBC batch insert (Spark's batchsize option).",
    )
)


# ------------------------------------------------------------------------------------------ pure core


@dataclass(frozen=True)
class JdbcSinkConfig:
    """The connector's keys parsed and cross-checked once, at start, into typed fields, so that the per-batch
    code never re-parses strings and the password stays out of ``repr``."""

    url: str
    user: str | None
    password: str | None = field(repr=False)
    table_format: str
    insert_mode: Literal["insert", "upsert"]
    pk_mode: Literal["none", "record_key", "record_value"]
    pk_fields: tuple[str, ...]
    auto_create: bool
    batch_size: int

    @classmethod
    def from_props(cls, props: Mapping[str, str]) -> JdbcSinkConfig:
        """Parse and cross-check; the first problem raises ConfigValidationError naming key and value."""
        parsed = CONFIG_DEF.parse(props)
        problems = cross_key_problems(parsed)
        if problems:
            key, message = next(iter(problems.items()))
            raise ConfigValidationError(key, parsed[key], message)
        password = parsed[CONNECTION_PASSWORD]
        return cls(
            url=parsed[CONNECTION_URL],
            user=parsed[CONNECTION_USER],
            password=password.value if isinstance(password, Password) else password,
            table_format=parsed[TABLE_NAME_FORMAT],
            insert_mode=parsed[INSERT_MODE],
            pk_mode=parsed[PK_MODE],
            pk_fields=tuple(parsed[PK_FIELDS]),
            auto_create=parsed[AUTO_CREATE],
            batch_size=parsed[BATCH_SIZE],
        )


def cross_key_problems(parsed: Mapping[str, Any]) -> dict[str, str]:
    """Rules that span keys, by the key to blame: what one-key validators cannot see."""
    problems: dict[str, str] = {}
    url = parsed.get(CONNECTION_URL)
    if isinstance(url, str) and url and not url.startswith(URL_PREFIX):
        problems[CONNECTION_URL] = (
            f"must be a PostgreSQL JDBC URL ({URL_PREFIX}//host:port/database): this sink writes "
            "PostgreSQL's SQL (ON CONFLICT)"
        )
    if parsed.get(INSERT_MODE) == "upsert" and parsed.get(PK_MODE) == "none":
        problems[PK_MODE] = (
            "insert.mode=upsert needs a primary key: set pk.mode to record_key or record_value"
        )
    if parsed.get(PK_MODE) == "none" and parsed.get(PK_FIELDS):
        problems[PK_FIELDS] = "pk.fields is only used with pk.mode record_key or record_value"
    return problems


def table_name(table_format: str, topic: str) -> str:
    """The target table for a topic: ``${topic}`` replaced, as Confluent's ``table.name.format`` does, so one
    connector can fan topics out to tables of their own."""
    return table_format.replace("${topic}", topic)


def quote_ident(name: str) -> str:
    """A PostgreSQL quoted identifier: case and any character kept (topics often hold '-' or '.')."""
    return '"' + name.replace('"', '""') + '"'


def qualified(table: str) -> str:
    """``schema.table`` quoted part by part; a name without a dot is left to the search path."""
    return ".".join(quote_ident(part) for part in table.split("."))


def staging_table(table: str, connector: str, task: int) -> str:
    """The staging table of one task for one target, in the target's schema; unique per task (tasks
    may share a target) and short enough for PostgreSQL's 63-byte identifiers."""
    schema, _, name = table.rpartition(".")
    digest = hashlib.sha1(f"{table}\0{connector}\0{task}".encode()).hexdigest()[:12]
    # 32 bytes of the name (PostgreSQL counts bytes) + "_kcstage_" + 12 = 53 <= 63.
    prefix = name.encode()[:32].decode(errors="ignore")
    staged = f"{prefix}_kcstage_{digest}"
    return f"{schema}.{staged}" if schema else staged


def sql_type(schema: ConnectSchema, column: str) -> str:
    """The PostgreSQL column type for a Connect schema (see the module docstring)."""
    if schema.name == DECIMAL:
        return "NUMERIC"
    if schema.name == DATE:
        return "DATE"
    if schema.name == TIMESTAMP:
        return "TIMESTAMPTZ"
    if schema.name == TIME:
        raise ConnectorError(f"field {column!r}: Connect Time values are not supported by the JDBC sink yet")
    simple = {
        "int8": "SMALLINT",
        "int16": "SMALLINT",
        "int32": "INTEGER",
        "int64": "BIGINT",
        "float": "REAL",
        "double": "DOUBLE PRECISION",
        "boolean": "BOOLEAN",
        "string": "TEXT",
        "bytes": "BYTEA",
    }
    if schema.type in simple:
        return simple[schema.type]
    raise ConnectorError(
        f"field {column!r} has type {schema.type}: the JDBC sink writes primitive and logical types only "
        "(flatten nested values first, for example with the Flatten transform)"
    )


@dataclass(frozen=True)
class Column:
    """One table column and where its value comes from: a field of the key or value struct, or the
    whole key (``field`` None) when the key is primitive."""

    name: str
    sql_type: str
    nullable: bool
    source: Literal["key", "value"]
    field: str | None


@dataclass(frozen=True)
class TablePlan:
    """The columns a batch is written as and its primary key, derived from the batch's schemas, so table
    creation, the insert and the upsert all agree on one layout."""

    columns: tuple[Column, ...]
    pk: tuple[str, ...]

    @property
    def names(self) -> tuple[str, ...]:
        """The column names in write order: the order the INSERT and SELECT lists must share."""
        return tuple(c.name for c in self.columns)


def _struct_columns(
    schema: ConnectSchema, names: tuple[str, ...], source: Literal["key", "value"]
) -> list[Column]:
    columns = []
    for name in names:
        found = schema.field(name)
        if found is None:
            available = ", ".join(f.name for f in schema.fields)
            raise ConnectorError(
                f"pk.fields names {name!r}, which the record {source} has no field of; fields: {available}"
            )
        columns.append(Column(name, sql_type(found.schema, name), found.schema.optional, source, name))
    return columns


def plan_table(
    config: JdbcSinkConfig, key_schema: ConnectSchema | None, value_schema: ConnectSchema | None
) -> TablePlan:
    """The columns and primary key a batch with these schemas is written as; a clear ConnectorError
    when the schemas and the pk.* keys do not fit together."""
    if value_schema is None or value_schema.type != "struct":
        kind = "schemaless JSON" if value_schema is None else f"a {value_schema.type}"
        raise ConnectorError(
            f"the JDBC sink needs record values that are structs with a schema, got {kind}: use "
            "value.converter=org.apache.kafka.connect.json.JsonConverter with "
            "value.converter.schemas.enable=true (or another converter with schemas)"
        )
    key_columns: list[Column] = []
    if config.pk_mode == "record_key":
        if key_schema is None:
            raise ConnectorError(
                "pk.mode=record_key needs record keys with a schema (a primitive or a struct); got "
                "schemaless keys: use a key.converter with schemas"
            )
        if key_schema.type == "struct":
            names = config.pk_fields or tuple(f.name for f in key_schema.fields)
            key_columns = _struct_columns(key_schema, names, "key")
        else:
            if len(config.pk_fields) != 1:
                raise ConnectorError(
                    f"pk.mode=record_key with a primitive ({key_schema.type}) key needs exactly one name "
                    f"in pk.fields for its column, got {list(config.pk_fields)}"
                )
            name = config.pk_fields[0]
            key_columns = [Column(name, sql_type(key_schema, name), False, "key", None)]
    value_names = tuple(f.name for f in value_schema.fields)
    clash = sorted({c.name for c in key_columns} & set(value_names))
    if clash:
        raise ConnectorError(
            f"key column(s) {clash} are also fields of the record value: rename one side (for example "
            "with the ReplaceField transform) or take the key from the value (pk.mode=record_value)"
        )
    value_columns = _struct_columns(value_schema, value_names, "value")
    if config.pk_mode == "record_value":
        pk = config.pk_fields or value_names
        missing = [n for n in pk if n not in value_names]
        if missing:
            raise ConnectorError(
                f"pk.fields names {missing}, which the record value has no field of; "
                f"fields: {', '.join(value_names)}"
            )
    else:
        pk = tuple(c.name for c in key_columns)
    if not value_columns and not key_columns:
        raise ConnectorError("the record value struct has no fields: nothing to write")
    return TablePlan(tuple(key_columns + value_columns), tuple(pk))


def create_table_sql(table: str, plan: TablePlan) -> str:
    """CREATE TABLE IF NOT EXISTS with NOT NULL for required fields and every primary key column."""
    lines = [
        f"{quote_ident(c.name)} {c.sql_type}" + ("" if c.nullable and c.name not in plan.pk else " NOT NULL")
        for c in plan.columns
    ]
    if plan.pk:
        lines.append(f"PRIMARY KEY ({', '.join(quote_ident(n) for n in plan.pk)})")
    return f"CREATE TABLE IF NOT EXISTS {qualified(table)} ({', '.join(lines)})"


def upsert_sql(table: str, staging: str, plan: TablePlan) -> str:
    """Move the staged batch into the target: per key only the row of the highest offset (a batch may
    hold one key several times, which ON CONFLICT DO UPDATE refuses), inserted or updated in place."""
    if not plan.pk:
        raise ConnectorError("upsert needs a primary key (pk.mode record_key or record_value)")
    cols = ", ".join(quote_ident(n) for n in plan.names)
    pk = ", ".join(quote_ident(n) for n in plan.pk)
    others = [n for n in plan.names if n not in plan.pk]
    action = (
        "DO UPDATE SET " + ", ".join(f"{quote_ident(n)} = EXCLUDED.{quote_ident(n)}" for n in others)
        if others
        else "DO NOTHING"
    )
    return (
        f"INSERT INTO {qualified(table)} ({cols}) "
        f"SELECT {cols} FROM (SELECT DISTINCT ON ({pk}) {cols} FROM {qualified(staging)} "
        f"ORDER BY {pk}, {quote_ident(OFFSET_COLUMN)} DESC) AS latest "
        f"ON CONFLICT ({pk}) {action}"
    )


def drop_table_sql(table: str) -> str:
    """Drops a task's staging table in the upsert's own transaction, so a failed batch leaves neither a
    half-applied target nor a stale staging table behind."""
    return f"DROP TABLE IF EXISTS {qualified(table)}"


def missing_driver_message(url: str) -> str:
    """The error for a driver jar missing from Spark's classpath, saying which worker property fixes it,
    because Spark's own ClassNotFoundException does not."""
    return (
        f"the PostgreSQL JDBC driver ({DRIVER_CLASS}) for {url} is not on the worker's Spark classpath: "
        f"set the worker property spark.jars={DRIVER_JAR} (Debian package libpostgresql-jdbc-java) "
        "and restart the worker"
    )


# ------------------------------------------------------------------------------------------ the shell


class JdbcSinkTask(FrameSinkTask):
    """Writes each batch with Spark's JDBC writer (see the module docstring); synchronous, so the
    default ``pre_commit`` (commit all consumed offsets) is right: at least once delivery."""

    def __init__(self) -> None:
        self._config: JdbcSinkConfig | None = None
        self._props: dict[str, str] = {}
        self._ready: set[str] = set()  # tables known to exist
        self._driver_checked = False

    def version(self) -> str:
        """kconnect's version: the connector ships with the runtime."""
        return __version__

    def start(self, props: dict[str, str]) -> None:
        """Parse the config and forget which tables are known to exist; no connection is opened yet, since
        connections are made per batch on the driver."""
        self._config = JdbcSinkConfig.from_props(props)
        self._props = dict(props)
        self._ready = set()

    def stop(self) -> None:
        """Connections are per batch: nothing is held between batches."""

    @property
    def config(self) -> JdbcSinkConfig:
        """The parsed config, or a ConnectorError when a batch arrives before ``start`` (a runtime bug, named
        rather than an AttributeError)."""
        if self._config is None:
            raise ConnectorError("JdbcSinkTask used before start()")
        return self._config

    # --- JDBC from the driver, through the JVM's own PostgreSQL driver (the jar Spark's writer uses)

    def _connect(self, spark: Any) -> Any:
        jvm = spark.sparkContext._jvm
        try:
            driver_class = jvm.org.apache.spark.util.Utils.classForName(DRIVER_CLASS, True, False)
        except Exception as exc:
            raise ConnectorError(missing_driver_message(self.config.url)) from exc
        self._driver_checked = True
        props = jvm.java.util.Properties()
        if self.config.user is not None:
            props.setProperty("user", self.config.user)
        if self.config.password is not None:
            props.setProperty("password", self.config.password)
        try:
            connection = driver_class.newInstance().connect(self.config.url, props)
        except Exception as exc:
            raise ConnectorError(f"connecting to {self.config.url} failed: {_java_message(exc)}") from exc
        if connection is None:
            raise ConnectorError(f"the PostgreSQL driver does not accept the URL {self.config.url}")
        return connection

    def _transaction(self, spark: Any, statements: list[str]) -> None:
        """Run statements in one transaction; roll back and fail with the database's message."""
        connection = self._connect(spark)
        try:
            connection.setAutoCommit(False)
            statement = connection.createStatement()
            try:
                for sql in statements:
                    statement.execute(sql)
                connection.commit()
            except Exception as exc:
                connection.rollback()
                raise ConnectorError(f"{_java_message(exc)} (statement: {sql})") from exc
            finally:
                statement.close()
        finally:
            connection.close()

    def _table_exists(self, spark: Any, table: str) -> bool:
        connection = self._connect(spark)
        try:
            statement = connection.prepareStatement("SELECT to_regclass(?) IS NOT NULL")
            statement.setString(1, qualified(table))
            result = statement.executeQuery()
            result.next()
            exists = bool(result.getBoolean(1))
            statement.close()
            return exists
        except Exception as exc:
            raise ConnectorError(f"checking for table {table} failed: {_java_message(exc)}") from exc
        finally:
            connection.close()

    def _ensure_table(self, spark: Any, table: str, plan: TablePlan) -> None:
        if table in self._ready:
            return
        if self.config.auto_create:
            self._transaction(spark, [create_table_sql(table, plan)])
        elif not self._table_exists(spark, table):
            raise ConnectorError(
                f"Table {table} is missing and auto-creation is disabled (set auto.create=true to create "
                "it from the record schema)"
            )
        self._ready.add(table)

    def _write(self, frame: Any, table: str, mode: str) -> None:
        writer = (
            frame.write.format("jdbc")
            .option("url", self.config.url)
            .option("dbtable", qualified(table))
            .option("driver", DRIVER_CLASS)
            .option("batchsize", str(self.config.batch_size))
        )
        if self.config.user is not None:
            writer = writer.option("user", self.config.user)
        if self.config.password is not None:
            writer = writer.option("password", self.config.password)
        writer.mode(mode).save()

    # --- the batch

    def _topics(self, batch: FrameBatch) -> list[str]:
        """The topics in the batch: from its offsets, unless transforms may have renamed them."""
        if self._props.get("transforms", "").strip():
            return sorted(str(r[0]) for r in batch.frame.select("topic").distinct().collect())
        return sorted({tp.topic for tp in batch.offsets})

    def put_frame(self, batch: FrameBatch) -> int | None:
        """Write one micro-batch, per target table: insert appends with Spark's writer; upsert stages the
        batch and merges it in one transaction. Tombstones are skipped. Returns None, since counting rows
        would cost another Spark job."""
        from pyspark.sql import functions as F

        config = self.config
        plan = plan_table(config, batch.key_schema, batch.value_schema)
        frame = batch.frame.where(F.col("value").isNotNull())
        spark = frame.sparkSession
        if not self._driver_checked:
            self._connect(spark).close()  # a missing driver or a bad URL fails here, clearly
        columns = [
            (F.col(c.source) if c.field is None else F.col(c.source).getField(c.field)).alias(c.name)
            for c in plan.columns
        ]
        per_table = "${topic}" in config.table_format
        topics = self._topics(batch) if per_table else [""]
        task = int(self._props.get(TASK_INDEX, "0"))
        for topic in topics:
            table = table_name(config.table_format, topic)
            rows = frame.where(F.col("topic") == topic) if per_table and len(topics) > 1 else frame
            self._ensure_table(spark, table, plan)
            if config.insert_mode == "insert":
                self._write(rows.select(*columns), table, "append")
                continue
            staging = staging_table(table, self._props.get("name", "jdbc"), task)
            self._write(rows.select(*columns, F.col("offset").alias(OFFSET_COLUMN)), staging, "overwrite")
            self._transaction(spark, [upsert_sql(table, staging, plan), drop_table_sql(staging)])
        return None


def _java_message(exc: BaseException) -> str:
    """A Java exception's own message (Py4JJavaError carries it as ``java_exception``)."""
    java = getattr(exc, "java_exception", None)
    if java is not None:
        try:
            return str(java.toString())
        except Exception:
            pass
    return str(exc)


class JdbcSinkConnector(UniformTasks, SinkConnector):
    """Configures JDBC sink tasks; every task gets the same config and Kafka spreads the partitions."""

    class_aliases: ClassVar[tuple[str, ...]] = ("io.confluent.connect.jdbc.JdbcSinkConnector",)
    CONFIG = CONFIG_DEF
    TASK = JdbcSinkTask
    TASK_INDEX_KEY = TASK_INDEX

    def check(self, props: Mapping[str, str]) -> None:
        """Refuse at start what the task would refuse: one-key rules and the cross-key ones (PostgreSQL URL,
        upsert needs a key)."""
        JdbcSinkConfig.from_props(props)

    def validate(self, props: Mapping[str, str | None]) -> list[ConfigValue]:
        """``PUT /connector-plugins/.../config/validate``: the ConfigDef's answer plus the cross-key problems
        on the key to blame, so a UI shows them next to the right field before the connector is created."""
        values = CONFIG_DEF.validate_all(props)
        parsed = {name: value.value for name, value in values.items()}
        for key, message in cross_key_problems(parsed).items():
            values[key].add_error(str(ConfigValidationError(key, parsed[key], message)))
        return list(values.values())
