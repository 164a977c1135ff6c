"""A JDBC source from PostgreSQL with Confluent's JDBC source keys: bulk copies, and incremental polls by
an incrementing id, a timestamp, or both.

Keys follow ``io.confluent.connect.jdbc.JdbcSourceConnector`` (which the connector answers to):
``connection.url`` / ``.user`` / ``.password``, ``mode``, ``incrementing.column.name``,
``timestamp.column.name``, ``timestamp.delay.interval.ms``, ``query``, ``table.whitelist`` /
``table.blacklist``, ``topic.prefix``, ``poll.interval.ms``, ``batch.max.rows``. One key is kconnect's own:
``bulk.read.partitions``.

How it reads:
- Incremental modes run one short SELECT per poll (``jdbc_query.poll_statement``: rows after the stored
  position, in order, at most ``batch.max.rows``) over psycopg2, and each record carries the position of
  its row as its source offset, so a restarted task continues after the last committed row: no gap, and
  with ``exactly.once.source.support=enabled`` no repeat either (offsets and records commit together).
- Bulk mode reads the whole table with Spark's JDBC reader when the worker has a SparkSession: the table
  is split on its integer key (``incrementing.column.name``, else a one-column integer primary key) into
  ``bulk.read.partitions`` ranges that Spark's executors read in parallel, streamed to the task partition
  by partition (the next one prefetched). Without a SparkSession (a task on an executor) it reads through
  a server-side cursor instead. Bulk records carry no offset: each ``poll.interval.ms`` copies the table
  again, as Confluent's does.

Records have no key (as Confluent's) and a struct value named after the table, with a schema from the
column types (``jdbc_query.column_schema``), so any converter with schemas (JsonConverter with
``schemas.enable=true`` today) carries it. The pure decisions live in ``jdbc_query``.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kconnect.connectors.jdbc import CONNECTION_PASSWORD, CONNECTION_URL, CONNECTION_USER
from kconnect.connectors.jdbc_query import (
    MODES,
    TIMESTAMP_OID,
    ColumnInfo,
    ConnectionTarget,
    JdbcQueryError,
    Position,
    QuerySpec,
    Statement,
    bounds_statement,
    next_position,
    parse_jdbc_url,
    poll_statement,
    position_from_offset,
    qualified,
    row_value,
    select_tables,
    source_partition,
    split_tables,
    topic_for,
    value_schema,
)
from kconnect.runtime import __version__, logs
from kconnect.runtime.dataplane.connect_data import ConnectSchema
from kconnect.runtime.plugins.api import (
    ConnectorError,
    ExactlyOnceSupport,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
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

MODE = "mode"
INCREMENTING_COLUMN = "incrementing.column.name"
TIMESTAMP_COLUMN = "timestamp.column.name"
TIMESTAMP_DELAY = "timestamp.delay.interval.ms"
QUERY = "query"
TABLE_WHITELIST = "table.whitelist"
TABLE_BLACKLIST = "table.blacklist"
TOPIC_PREFIX = "topic.prefix"
POLL_INTERVAL = "poll.interval.ms"
BATCH_MAX_ROWS = "batch.max.rows"
BULK_PARTITIONS = "bulk.read.partitions"
#: The task config key listing the tables of one task (Confluent's task config uses ``tables`` too).
TABLES = "tables"
DRIVER_CLASS = "org.postgresql.Driver"

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
    .define(CONNECTION_USER, Type.STRING, None, None, Importance.HIGH, "Database user.")
    .define(CONNECTION_PASSWORD, Type.PASSWORD, None, None, Importance.HIGH, "Database password.")
    .define(
        MODE,
        Type.STRING,
        NO_DEFAULT,
        ValidString(MODES),
        Importance.HIGH,
        "bulk: the whole table each poll; incrementing: new rows by a strictly increasing id; timestamp: "
        "new and updated rows by a timestamp; timestamp+incrementing: both (no row missed or repeated).",
    )
    .define(
        INCREMENTING_COLUMN,
        Type.STRING,
        "",
        None,
        Importance.MEDIUM,
        "The strictly increasing integer column of the incrementing modes (and the bulk read's split).",
    )
    .define(
        TIMESTAMP_COLUMN,
        Type.LIST,
        "",
        None,
        Importance.MEDIUM,
        "The timestamp column(s) of the timestamp modes; with several, the first non-null (COALESCE).",
    )
    .define(
        TIMESTAMP_DELAY,
        Type.LONG,
        0,
        Range.at_least(0),
        Importance.HIGH,
        "How long after a timestamp a row is first read, so transactions that commit late are not skipped.",
    )
    .define(
        QUERY,
        Type.STRING,
        "",
        None,
        Importance.MEDIUM,
        "A SELECT to copy instead of whole tables; its rows go to the topic named by topic.prefix.",
    )
    .define(
        TABLE_WHITELIST, Type.LIST, "", None, Importance.MEDIUM, "Tables to copy (schema.table or table)."
    )
    .define(TABLE_BLACKLIST, Type.LIST, "", None, Importance.MEDIUM, "Tables not to copy.")
    .define(
        TOPIC_PREFIX,
        Type.STRING,
        NO_DEFAULT,
        None,
        Importance.HIGH,
        "Prefix of the topic per table (prefix + table name), or the whole topic name with query.",
    )
    .define(
        POLL_INTERVAL,
        Type.INT,
        5000,
        Range.at_least(1),
        Importance.HIGH,
        "How often each table is polled for new data once its backlog is read.",
    )
    .define(
        BATCH_MAX_ROWS,
        Type.INT,
        100,
        Range.at_least(1),
        Importance.LOW,
        "Most rows returned by one poll.",
    )
    .define(
        BULK_PARTITIONS,
        Type.INT,
        4,
        Range.at_least(1),
        Importance.LOW,
        "kconnect's own: how many ranges Spark's JDBC reader splits a bulk read into, read in parallel.",
    )
)


@dataclass(frozen=True)
class JdbcSourceConfig:
    """The keys parsed once, at start, into typed fields."""

    url: str
    target: ConnectionTarget
    user: str | None
    password: str | None = field(repr=False)
    mode: str
    incrementing_column: str | None
    timestamp_columns: tuple[str, ...]
    timestamp_delay_ms: int
    query: str | None
    whitelist: tuple[str, ...]
    blacklist: tuple[str, ...]
    topic_prefix: str
    poll_interval_ms: int
    batch_max_rows: int
    bulk_partitions: int

    @classmethod
    def from_props(cls, props: Mapping[str, str | None]) -> JdbcSourceConfig:
        """Parse and cross-check; a ConfigValidationError names the key, its value and what is allowed."""
        values = CONFIG_DEF.parse(props)
        url = values[CONNECTION_URL]
        try:
            target = parse_jdbc_url(url)
        except JdbcQueryError as exc:
            raise ConfigValidationError(CONNECTION_URL, url, str(exc)) from exc
        password = values[CONNECTION_PASSWORD]
        config = cls(
            url=url,
            target=target,
            user=values[CONNECTION_USER],
            password=password.value if isinstance(password, Password) else password,
            mode=values[MODE],
            incrementing_column=values[INCREMENTING_COLUMN] or None,
            timestamp_columns=tuple(values[TIMESTAMP_COLUMN]),
            timestamp_delay_ms=values[TIMESTAMP_DELAY],
            query=values[QUERY] or None,
            whitelist=tuple(values[TABLE_WHITELIST]),
            blacklist=tuple(values[TABLE_BLACKLIST]),
            topic_prefix=values[TOPIC_PREFIX],
            poll_interval_ms=values[POLL_INTERVAL],
            batch_max_rows=values[BATCH_MAX_ROWS],
            bulk_partitions=values[BULK_PARTITIONS],
        )
        for key, message in config.problems().items():
            raise ConfigValidationError(key, props.get(key), message)
        return config

    def problems(self) -> dict[str, str]:
        """Cross-key problems, on the key to blame (also shown by the validate endpoint)."""
        found: dict[str, str] = {}
        if self.mode in ("incrementing", "timestamp+incrementing") and not self.incrementing_column:
            found[INCREMENTING_COLUMN] = f"must name a column when mode={self.mode}"
        if self.mode in ("timestamp", "timestamp+incrementing") and not self.timestamp_columns:
            found[TIMESTAMP_COLUMN] = f"must name a column when mode={self.mode}"
        if self.whitelist and self.blacklist:
            found[TABLE_BLACKLIST] = "cannot be set together with table.whitelist"
        if self.query is not None and (self.whitelist or self.blacklist):
            found[QUERY] = "cannot be set together with table.whitelist or table.blacklist"
        if self.query is not None and not self.topic_prefix:
            found[TOPIC_PREFIX] = "must name the topic when query is set"
        return found

    def spec(self, table: str | None) -> QuerySpec:
        """What one table's (or the query's) polls select."""
        return QuerySpec(
            self.mode,  # type: ignore[arg-type]  # checked by ValidString(MODES)
            table=table,
            query=self.query if table is None else None,
            incrementing_column=self.incrementing_column,
            timestamp_columns=self.timestamp_columns,
        )


def _connect(config: JdbcSourceConfig) -> Any:
    """A psycopg2 connection in UTC (so ``timestamp`` columns read as UTC wall time, as the offsets do);
    a ConnectorError naming the database and the server's own reason (never the password)."""
    import psycopg2

    try:
        connection = psycopg2.connect(
            **config.target.dsn_kwargs(config.user, config.password), options="-c TimeZone=UTC"
        )
    except psycopg2.Error as exc:
        raise ConnectorError(f"connecting to {config.url} failed: {str(exc).strip()}") from exc
    return connection


def list_tables(connection: Any) -> list[str]:
    """Every ordinary and partitioned table the user can see, as ``schema.table``."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT table_schema || '.' || table_name FROM information_schema.tables "
            "WHERE table_type = 'BASE TABLE' AND table_schema NOT IN ('pg_catalog', 'information_schema') "
            "ORDER BY 1"
        )
        rows = [str(r[0]) for r in cursor.fetchall()]
    connection.rollback()
    return rows


class JdbcSourceConnector(SourceConnector):
    """Finds the tables to copy and spreads them over the tasks; a query is one task's work."""

    class_aliases: ClassVar[tuple[str, ...]] = ("io.confluent.connect.jdbc.JdbcSourceConnector",)

    def __init__(self) -> None:
        self._props: dict[str, str] = {}
        self._tables: list[str] = []
        self._config: JdbcSourceConfig | None = None

    def version(self) -> str:
        """kconnect's version: the connector ships with the runtime."""
        return __version__

    def config_def(self) -> ConfigDef:
        """The keys above, Confluent's names and defaults."""
        return CONFIG_DEF

    def validate(self, props: Mapping[str, str | None]) -> list[ConfigValue]:
        """The ConfigDef's answer plus the cross-key problems on the key to blame."""
        values = CONFIG_DEF.validate_all(props)
        if all(not v.errors for v in values.values()):
            try:
                JdbcSourceConfig.from_props(props)  # raises the first cross-key problem, on its key
            except ConfigValidationError as exc:
                values[exc.name or CONNECTION_URL].add_error(str(exc))
        return list(values.values())

    def start(self, props: dict[str, str]) -> None:
        """Parse the config and, for tables, list them once: a bad URL, wrong credentials or a whitelisted
        table that does not exist fail the connector here, naming the cause."""
        self._config = JdbcSourceConfig.from_props(props)
        self._props = dict(props)
        if self._config.query is not None:
            self._tables = []
            return
        connection = _connect(self._config)
        try:
            available = list_tables(connection)
        finally:
            connection.close()
        try:
            self._tables = select_tables(available, self._config.whitelist, self._config.blacklist)
        except JdbcQueryError as exc:
            raise ConnectorError(str(exc)) from exc
        if not self._tables:
            raise ConnectorError(f"no tables to copy in {self._config.url} (check table.whitelist/blacklist)")
        log.info("JDBC source copies tables", tables=self._tables)

    def task_class(self) -> type[Task]:
        """JdbcSourceTask."""
        return JdbcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """One task for a query; otherwise the tables round-robin over at most ``max_tasks`` tasks."""
        if self._config is None or self._config.query is not None:
            return [dict(self._props)]
        return [{**self._props, TABLES: ",".join(group)} for group in split_tables(self._tables, max_tasks)]

    def stop(self) -> None:
        """Nothing runs in the background."""

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """SUPPORTED for the incremental modes, whose offsets name the exact row to continue after;
        UNSUPPORTED for bulk, which copies everything again by design."""
        return ExactlyOnceSupport.UNSUPPORTED if props.get(MODE) == "bulk" else ExactlyOnceSupport.SUPPORTED


@dataclass
class _Table:
    """One table's (or the query's) copy: where it stands and when it is polled next."""

    spec: QuerySpec
    partition: dict[str, str]
    topic: str
    position: Position
    due: float = 0.0
    schema: ConnectSchema | None = None
    columns: tuple[ColumnInfo, ...] = ()
    bulk: Iterator[Mapping[str, Any]] | None = field(default=None, repr=False)


class JdbcSourceTask(SourceTask):
    """Polls its tables in turn (the one due soonest first) and returns at most ``batch.max.rows`` rows."""

    #: The longest ``poll`` waits for a table to come due, so ``stop`` is heard promptly.
    max_wait_s: ClassVar[float] = 0.5

    def __init__(self) -> None:
        self._config: JdbcSourceConfig | None = None
        self._connection: Any = None
        self._tables: list[_Table] = []
        self._stopping = threading.Event()
        self._nullable: dict[tuple[int, int], bool] = {}

    def version(self) -> str:
        """kconnect's version: the task ships with the runtime."""
        return __version__

    @property
    def config(self) -> JdbcSourceConfig:
        if self._config is None:
            raise ConnectorError("JdbcSourceTask used before start()")
        return self._config

    def start(self, props: dict[str, str]) -> None:
        """Connect, and read where each table stands from the committed offsets."""
        self._config = config = JdbcSourceConfig.from_props(props)
        self._connection = _connect(config)
        names: list[str | None] = (
            [None] if config.query is not None else [t for t in props.get(TABLES, "").split(",") if t]
        )
        if not names:
            raise ConnectorError("the JDBC source task was given no tables")
        reader = self.context.offset_storage_reader if self.context is not None else None
        for name in names:
            spec = config.spec(name)
            partition = source_partition(name, config.query, config.target.database)
            stored = reader.offset(partition) if reader is not None and config.mode != "bulk" else None
            try:
                position = position_from_offset(stored)
            except JdbcQueryError as exc:
                raise ConnectorError(f"{name or 'query'}: {exc}") from exc
            self._tables.append(_Table(spec, partition, topic_for(config.topic_prefix, name), position))
            log.info("JDBC source table starts", table=name or "query", offset=stored)

    def stop(self) -> None:
        """Make ``poll`` return; the connection is closed by the poll thread (psycopg2 connections are not
        to be used from two threads at once)."""
        self._stopping.set()

    def poll(self) -> list[SourceRecord] | None:
        """The next rows of the table due soonest, or None after a short wait when none is due."""
        if self._stopping.is_set():
            self._close()
            return None
        table = min(self._tables, key=lambda t: t.due)
        wait = table.due - time.monotonic()
        if wait > 0:
            self._stopping.wait(min(wait, self.max_wait_s))
            return None
        try:
            if table.spec.mode == "bulk":
                return self._poll_bulk(table)
            return self._poll_incremental(table)
        except JdbcQueryError as exc:
            raise ConnectorError(f"{table.spec.table or 'query'}: {exc}") from exc

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close()
            self._connection = None

    # --- incremental

    def _poll_incremental(self, table: _Table) -> list[SourceRecord]:
        import psycopg2

        config = self.config
        statement = poll_statement(
            table.spec, table.position, config.batch_max_rows, config.timestamp_delay_ms
        )
        try:
            rows, columns = self._run(statement)
        except psycopg2.Error as exc:
            self._connection.rollback()
            raise ConnectorError(
                f"polling {table.spec.table or 'the query'} failed: {str(exc).strip()} (statement: "
                f"{statement.sql})"
            ) from exc
        schema = self._schema(table, columns)
        records = []
        position = table.position
        for row in rows:
            position = next_position(table.spec, position, row)
            records.append(
                SourceRecord(
                    table.partition,
                    position.to_offset(),
                    table.topic,
                    value=row_value(schema, row),
                    value_schema=schema,
                )
            )
        table.position = position
        # A full batch means more may be waiting: poll the table again at once.
        table.due = time.monotonic() + (
            0 if len(rows) >= config.batch_max_rows else config.poll_interval_ms / 1000
        )
        return records

    def _run(self, statement: Statement) -> tuple[list[dict[str, Any]], tuple[ColumnInfo, ...]]:
        """Rows as dicts and their columns, in one short read-only transaction."""
        with self._connection.cursor() as cursor:
            cursor.execute(statement.sql, statement.params)
            columns = self._columns(cursor.description)
            names = [c.name for c in columns]
            rows = [dict(zip(names, r, strict=True)) for r in cursor.fetchall()]
        self._connection.rollback()
        return rows, columns

    def _columns(self, description: Any) -> tuple[ColumnInfo, ...]:
        """The result's columns with the nullability of the table columns they come from."""
        missing = {
            (int(d.table_oid), int(d.table_column))
            for d in description
            if d.table_oid and (int(d.table_oid), int(d.table_column)) not in self._nullable
        }
        if missing:
            with self._connection.cursor() as cursor:
                cursor.execute(
                    "SELECT attrelid::int, attnum::int, NOT attnotnull FROM pg_attribute "
                    "WHERE (attrelid::int, attnum::int) IN %s",
                    (tuple(missing),),
                )
                for oid, num, nullable in cursor.fetchall():
                    self._nullable[(oid, num)] = bool(nullable)
        return tuple(
            ColumnInfo(
                d.name,
                int(d.type_code),
                d.scale if d.scale is not None and d.precision is not None else None,
                self._nullable.get((int(d.table_oid or 0), int(d.table_column or 0)), True),
            )
            for d in description
        )

    def _schema(self, table: _Table, columns: tuple[ColumnInfo, ...]) -> ConnectSchema:
        """The table's value schema, rebuilt only when its columns change (a column added while running)."""
        if table.schema is None or table.columns != columns:
            name = (table.spec.table or table.topic).rpartition(".")[2]
            table.schema = value_schema(name, columns)
            table.columns = columns
        return table.schema

    # --- bulk

    def _poll_bulk(self, table: _Table) -> list[SourceRecord]:
        config = self.config
        if table.bulk is None:
            table.bulk = self._bulk_rows(table)
        assert table.schema is not None
        records = []
        for row in table.bulk:
            records.append(
                SourceRecord(
                    table.partition,
                    None,
                    table.topic,
                    value=row_value(table.schema, row),
                    value_schema=table.schema,
                )
            )
            if len(records) >= config.batch_max_rows:
                return records
        table.bulk = None
        table.due = time.monotonic() + config.poll_interval_ms / 1000
        return records

    def _bulk_rows(self, table: _Table) -> Iterator[Mapping[str, Any]]:
        """The table's rows: through Spark's JDBC reader in parallel ranges when the worker has a
        SparkSession, else through a server-side cursor. Sets the table's schema first."""
        _, columns = self._run(Statement(f"SELECT * FROM {table.spec.source} LIMIT 0"))
        self._schema(table, columns)
        spark = self._spark()
        if spark is None:
            return self._cursor_rows(table)
        return self._spark_rows(spark, table, columns)

    def _spark(self) -> Any:
        getter = getattr(self.context, "spark_session", None)
        if getter is None:
            return None
        try:
            return getter()
        except ConnectorError:
            return None

    def _cursor_rows(self, table: _Table) -> Iterator[Mapping[str, Any]]:
        with self._connection.cursor(name=f"kc_bulk_{id(table)}") as cursor:
            cursor.itersize = self.config.batch_max_rows
            cursor.execute(f"SELECT * FROM {table.spec.source}")
            names: list[str] | None = None
            for row in cursor:
                if names is None:
                    names = [d.name for d in cursor.description]
                yield dict(zip(names, row, strict=True))
        self._connection.rollback()

    def _split_column(self, table: _Table) -> str | None:
        """The integer column a bulk read splits on: incrementing.column.name, else a one-column integer
        primary key; None reads in one partition."""
        if self.config.incrementing_column:
            return self.config.incrementing_column
        if table.spec.table is None:
            return None
        with self._connection.cursor() as cursor:
            cursor.execute(
                "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid "
                "AND a.attnum = ANY(i.indkey) WHERE i.indrelid = %s::regclass AND i.indisprimary "
                "AND a.atttypid IN (20, 21, 23)",
                (qualified(table.spec.table),),
            )
            rows = cursor.fetchall()
        self._connection.rollback()
        return str(rows[0][0]) if len(rows) == 1 else None

    def _spark_rows(
        self, spark: Any, table: _Table, columns: tuple[ColumnInfo, ...]
    ) -> Iterator[Mapping[str, Any]]:
        config = self.config
        reader = spark.read.format("jdbc").option("url", config.url).option("driver", DRIVER_CLASS)
        if config.user is not None:
            reader = reader.option("user", config.user)
        if config.password is not None:
            reader = reader.option("password", config.password)
        reader = reader.option("fetchsize", str(max(config.batch_max_rows, 1000)))
        column = self._split_column(table) if config.bulk_partitions > 1 else None
        bounds: tuple[Any, Any] = (None, None)
        if column is not None:
            rows, _ = self._run(bounds_statement(table.spec, column))
            bounds = tuple(rows[0].values())
        if column is not None and bounds[0] is not None and bounds[1] is not None and bounds[0] < bounds[1]:
            reader = (
                reader.option("dbtable", table.spec.source)
                .option("partitionColumn", column)
                .option("lowerBound", str(bounds[0]))
                .option("upperBound", str(bounds[1]))
                .option("numPartitions", str(config.bulk_partitions))
            )
        else:
            reader = reader.option("dbtable", table.spec.source)
        frame = reader.load()
        log.info(
            "bulk read through Spark",
            table=table.spec.table or "query",
            partitions=frame.rdd.getNumPartitions(),
        )
        kinds = {c.name: c.type_oid for c in columns}
        for row in frame.toLocalIterator(prefetchPartitions=True):
            values = row.asDict()
            for name, value in values.items():
                if isinstance(value, dt.datetime) and value.tzinfo is None:
                    # Spark hands timestamps over as naive local time. A ``timestamptz`` is that instant;
                    # a ``timestamp`` is its wall time, read as UTC as the psycopg2 path reads it.
                    if kinds.get(name) == TIMESTAMP_OID:
                        values[name] = value.replace(tzinfo=dt.UTC)
                    else:
                        values[name] = value.astimezone(dt.UTC)
            yield values
