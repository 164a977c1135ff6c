"""The JDBC source's pure core: which SQL a poll runs, which offset a row leaves behind, which Connect
schema a PostgreSQL column becomes, and how a JDBC URL becomes a libpq connection.

Why pure: "no gap and no repeat after a restart" is decided entirely here, by the WHERE clause a poll
builds from the last stored offset and by the offset each row leaves; both are table-tested
(tests/unit/test_jdbc_query.py) without a database. The shell (``jdbc_source``) runs the SQL.

Offsets follow Confluent's JDBC source so existing tooling reads them: the source partition is
``{"protocol": "1", "table": "<database>.<schema>.<table>"}`` for a table, ``{"query": "<query>"}`` for a
query; the offset holds ``incrementing`` (the last id) and/or ``timestamp`` (epoch milliseconds) with
``timestamp_nanos`` (the nanoseconds within that second, as ``java.sql.Timestamp.getNanos()``). Bulk mode
stores no offset (None): every poll copies the whole table again.

The conditions are Confluent's: incrementing ``id > ?``; timestamp ``ts > ? AND ts < now``;
timestamp+incrementing ``ts < now AND ((ts = ? AND id > ?) OR ts > ?)``, ordered by the timestamp, then the
id. ``now`` is the database's clock minus ``timestamp.delay.interval.ms``, so a transaction that commits
late with an earlier timestamp gets that long to land before the window passes it.
"""

from __future__ import annotations

import datetime as dt
import decimal
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal
from urllib.parse import parse_qsl, unquote, urlsplit

from kconnect.runtime.dataplane.connect_data import DATE, TIME, TIMESTAMP, ConnectField, ConnectSchema
from kconnect.runtime.dataplane.connect_data import decimal_schema as connect_decimal_schema

Mode = Literal["bulk", "incrementing", "timestamp", "timestamp+incrementing"]
MODES: Final[tuple[str, ...]] = ("bulk", "incrementing", "timestamp", "timestamp+incrementing")

INCREMENTING_FIELD: Final = "incrementing"
TIMESTAMP_FIELD: Final = "timestamp"
TIMESTAMP_NANOS_FIELD: Final = "timestamp_nanos"
PROTOCOL_FIELD: Final = "protocol"
TABLE_FIELD: Final = "table"
QUERY_FIELD: Final = "query"
#: The alias a configured query is wrapped under, so a WHERE can follow any query (Confluent appends to the
#: query's text instead, which breaks on queries that end in their own WHERE or ORDER BY).
QUERY_ALIAS: Final = "kc_query"


class JdbcQueryError(ValueError):
    """A configuration or a stored offset the source cannot build a query from; says which and why."""


def quote_ident(name: str) -> str:
    """A PostgreSQL identifier, quoted so that case and odd characters survive."""
    return '"' + name.replace('"', '""') + '"'


def qualified(table: str) -> str:
    """``schema.table`` or ``table`` as quoted identifiers (a dot separates the schema)."""
    return ".".join(quote_ident(part) for part in table.split(".", 1))


# ------------------------------------------------------------------------------------------ the JDBC URL


#: The JDBC driver's URL parameters that have a libpq counterpart; others are the JVM driver's own.
_LIBPQ_PARAMS: Final = {
    "user": "user",
    "password": "password",
    "sslmode": "sslmode",
    "connectTimeout": "connect_timeout",
    "ApplicationName": "application_name",
}


@dataclass(frozen=True)
class ConnectionTarget:
    """Where a ``jdbc:postgresql://host:port/database?params`` URL points, as libpq keywords."""

    host: str
    port: int
    database: str
    params: tuple[tuple[str, str], ...] = ()

    def dsn_kwargs(self, user: str | None, password: str | None) -> dict[str, str]:
        """Keyword arguments for ``psycopg2.connect``; user/password from the connector keys win over the
        URL's own ``user``/``password`` parameters, as with the JDBC driver."""
        kwargs = {"host": self.host, "port": str(self.port), "dbname": self.database}
        for key, value in self.params:
            libpq = _LIBPQ_PARAMS.get(key)
            if libpq is not None:
                kwargs[libpq] = value
        if user is not None:
            kwargs["user"] = user
        if password is not None:
            kwargs["password"] = password
        return kwargs


def parse_jdbc_url(url: str) -> ConnectionTarget:
    """The host, port, database and parameters of a PostgreSQL JDBC URL; JdbcQueryError otherwise."""
    prefix = "jdbc:postgresql:"
    if not url.startswith(prefix):
        raise JdbcQueryError(f"must be a PostgreSQL JDBC URL starting with {prefix}//, got {url!r}")
    rest = url[len(prefix) :]
    if not rest.startswith("//"):
        # jdbc:postgresql:database means localhost:5432, as the driver reads it.
        name, _, query = rest.partition("?")
        if not name:
            raise JdbcQueryError(f"names no database: {url!r}")
        return ConnectionTarget("localhost", 5432, unquote(name), tuple(parse_qsl(query)))
    parts = urlsplit(rest)
    host = parts.hostname or "localhost"
    try:
        port = parts.port or 5432
    except ValueError as exc:
        raise JdbcQueryError(f"has an invalid port: {url!r}") from exc
    database = unquote(parts.path.lstrip("/"))
    if not database:
        raise JdbcQueryError(f"names no database (jdbc:postgresql://host:port/database): {url!r}")
    return ConnectionTarget(host, port, database, tuple(parse_qsl(parts.query)))


# ------------------------------------------------------------------------------------------ offsets


@dataclass(frozen=True, order=True)
class Position:
    """Where a table's copy stands: the last timestamp (as epoch nanoseconds, to keep microseconds and
    order exact) and/or the last incrementing id; None for what the mode does not track."""

    timestamp_ns: int | None = None
    incrementing: int | None = None

    def to_offset(self) -> dict[str, Any]:
        """The stored offset map, Confluent's shape: epoch millis plus the nanoseconds within the second."""
        offset: dict[str, Any] = {}
        if self.incrementing is not None:
            offset[INCREMENTING_FIELD] = self.incrementing
        if self.timestamp_ns is not None:
            seconds, nanos = divmod(self.timestamp_ns, 1_000_000_000)
            offset[TIMESTAMP_FIELD] = seconds * 1000 + nanos // 1_000_000
            offset[TIMESTAMP_NANOS_FIELD] = nanos
        return offset


def position_from_offset(offset: Mapping[str, Any] | None) -> Position:
    """The position a stored offset describes (nothing stored: from the start); JdbcQueryError for an
    offset of the wrong shape, naming it, rather than a silent restart from the beginning."""
    if not offset:
        return Position()
    incrementing = offset.get(INCREMENTING_FIELD)
    if incrementing is not None and (not isinstance(incrementing, int) or isinstance(incrementing, bool)):
        raise JdbcQueryError(f"stored offset {dict(offset)} has a non-integer {INCREMENTING_FIELD!r}")
    millis = offset.get(TIMESTAMP_FIELD)
    timestamp_ns: int | None = None
    if millis is not None:
        if not isinstance(millis, int) or isinstance(millis, bool):
            raise JdbcQueryError(f"stored offset {dict(offset)} has a non-integer {TIMESTAMP_FIELD!r}")
        nanos = offset.get(TIMESTAMP_NANOS_FIELD)
        if nanos is None:
            timestamp_ns = millis * 1_000_000
        else:
            if not isinstance(nanos, int) or not 0 <= nanos < 1_000_000_000:
                raise JdbcQueryError(f"stored offset {dict(offset)} has an invalid {TIMESTAMP_NANOS_FIELD!r}")
            timestamp_ns = (millis // 1000) * 1_000_000_000 + nanos
    return Position(timestamp_ns, incrementing)


_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def epoch_ns(value: dt.datetime) -> int:
    """A timestamp as epoch nanoseconds; a naive one (PostgreSQL ``timestamp``) is read as UTC."""
    if value.tzinfo is None:
        value = value.replace(tzinfo=dt.UTC)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000_000 + delta.microseconds * 1000


def from_epoch_ns(ns: int) -> dt.datetime:
    """The aware UTC datetime for epoch nanoseconds (PostgreSQL keeps microseconds: nothing is lost)."""
    return _EPOCH + dt.timedelta(microseconds=ns // 1000)


def source_partition(table: str | None, query: str | None, database: str) -> dict[str, str]:
    """The offsets-topic partition of one table (``schema.table``, ``public`` when unqualified) or query."""
    if query is not None:
        return {QUERY_FIELD: query}
    if table is None:
        raise JdbcQueryError("a source partition needs a table or a query")
    schema, _, name = table.rpartition(".")
    return {PROTOCOL_FIELD: "1", TABLE_FIELD: f"{database}.{schema or 'public'}.{name}"}


# ------------------------------------------------------------------------------------------ the query


@dataclass(frozen=True)
class QuerySpec:
    """What one table's (or the query's) polls select: the mode and its columns."""

    mode: Mode
    table: str | None = None
    query: str | None = None
    incrementing_column: str | None = None
    timestamp_columns: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.table is None) == (self.query is None):
            raise JdbcQueryError("exactly one of a table and a query is selected from")
        if self.mode in ("incrementing", "timestamp+incrementing") and not self.incrementing_column:
            raise JdbcQueryError(f"mode={self.mode} needs incrementing.column.name")
        if self.mode in ("timestamp", "timestamp+incrementing") and not self.timestamp_columns:
            raise JdbcQueryError(f"mode={self.mode} needs timestamp.column.name")

    @property
    def source(self) -> str:
        """What the SELECT reads from: the quoted table, or the query as a subselect."""
        if self.query is not None:
            return f"({self.query}) AS {QUERY_ALIAS}"
        assert self.table is not None
        return qualified(self.table)

    @property
    def timestamp_expr(self) -> str:
        """The timestamp column, or COALESCE of several (the first non-null wins), as Confluent does."""
        quoted = [quote_ident(c) for c in self.timestamp_columns]
        return quoted[0] if len(quoted) == 1 else f"COALESCE({', '.join(quoted)})"

    @property
    def tracks_timestamp(self) -> bool:
        return self.mode in ("timestamp", "timestamp+incrementing")

    @property
    def tracks_incrementing(self) -> bool:
        return self.mode in ("incrementing", "timestamp+incrementing")


@dataclass(frozen=True)
class Statement:
    """SQL with ``%s`` placeholders (psycopg2's) and the values that fill them, in order."""

    sql: str
    params: tuple[Any, ...] = ()


#: The extra column a timestamp-mode SELECT adds: the timestamp expression as an instant, so a COALESCE of
#: several columns and a ``timestamp`` column (read as UTC) yield one comparable value for the offset.
TS_ALIAS: Final = "__kc_ts"


def poll_statement(spec: QuerySpec, position: Position, limit: int, delay_ms: int) -> Statement:
    """The SELECT of one poll: rows after ``position`` in the mode's order, at most ``limit`` of them.

    Why a LIMIT and not a cursor kept open between polls: each poll is its own short transaction, so a
    task holds no snapshot open for long (which would keep PostgreSQL from vacuuming); the next poll
    continues from the last row's position, which the ORDER BY makes exact. In timestamp+incrementing
    mode, rows with the same timestamp are continued by id, so a limit that cuts through a run of equal
    timestamps neither skips nor repeats one. Timestamp-only mode is Confluent's: rows sharing the last
    timestamp of a batch that the limit cut are only safe when timestamps are unique.
    """
    if limit < 1:
        raise JdbcQueryError(f"batch.max.rows must be at least 1, got {limit}")
    select = f"SELECT * FROM {spec.source}"
    if spec.mode == "bulk":
        return Statement(select)
    inc = quote_ident(spec.incrementing_column) if spec.incrementing_column else ""
    if spec.mode == "incrementing":
        last = position.incrementing if position.incrementing is not None else -1
        return Statement(f"{select} WHERE {inc} > %s ORDER BY {inc} ASC LIMIT {limit}", (last,))
    ts = spec.timestamp_expr
    select = f"SELECT *, ({ts})::timestamptz AS {TS_ALIAS} FROM {spec.source}"
    upper = f"{ts} < (now() - %s::interval)"
    since = from_epoch_ns(position.timestamp_ns if position.timestamp_ns is not None else 0)
    delay = f"{delay_ms} milliseconds"
    if spec.mode == "timestamp":
        return Statement(
            f"{select} WHERE {ts} > %s AND {upper} ORDER BY {ts} ASC LIMIT {limit}",
            (since, delay),
        )
    last = position.incrementing if position.incrementing is not None else -1
    return Statement(
        f"{select} WHERE {upper} AND (({ts} = %s AND {inc} > %s) OR {ts} > %s) "
        f"ORDER BY {ts} ASC, {inc} ASC LIMIT {limit}",
        (delay, since, last, since),
    )


def bounds_statement(spec: QuerySpec, column: str) -> Statement:
    """``min`` and ``max`` of the column a bulk read splits its Spark partitions on."""
    return Statement(f"SELECT min({quote_ident(column)}), max({quote_ident(column)}) FROM {spec.source}")


def next_position(spec: QuerySpec, position: Position, row: Mapping[str, Any]) -> Position:
    """The position after one row (rows arrive in the poll's order); JdbcQueryError when a tracked column
    is null or not what its mode needs, since a null id or timestamp cannot be continued from."""
    timestamp_ns = position.timestamp_ns
    incrementing = position.incrementing
    if spec.tracks_incrementing:
        assert spec.incrementing_column is not None
        value = row.get(spec.incrementing_column)
        if isinstance(value, decimal.Decimal) and value == value.to_integral_value():
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool):
            raise JdbcQueryError(
                f"incrementing column {spec.incrementing_column!r} must be a non-null integer, got {value!r}"
            )
        incrementing = value
    if spec.tracks_timestamp:
        stamp = row.get(TS_ALIAS)
        if not isinstance(stamp, dt.datetime):
            raise JdbcQueryError(
                f"timestamp column(s) {', '.join(spec.timestamp_columns)} must be a non-null timestamp, "
                f"got {stamp!r}"
            )
        timestamp_ns = epoch_ns(stamp)
    return Position(timestamp_ns, incrementing)


def select_tables(available: Sequence[str], whitelist: Sequence[str], blacklist: Sequence[str]) -> list[str]:
    """The tables to copy: the whitelist (each must exist, as ``table`` or ``schema.table``), or every
    available table not in the blacklist. ``available`` holds ``schema.table`` names."""
    if whitelist and blacklist:
        raise JdbcQueryError("table.whitelist and table.blacklist cannot both be set")

    def matches(name: str, entry: str) -> bool:
        return name == entry or ("." not in entry and name == f"public.{entry}")

    if whitelist:
        chosen: list[str] = []
        for entry in whitelist:
            found = [name for name in available if matches(name, entry)]
            if not found:
                raise JdbcQueryError(f"table.whitelist names {entry!r}, which is not a table in the database")
            chosen.extend(n for n in found if n not in chosen)
        return chosen
    return sorted(n for n in available if not any(matches(n, entry) for entry in blacklist))


def split_tables(tables: Sequence[str], max_tasks: int) -> list[list[str]]:
    """Tables spread over at most ``max_tasks`` tasks, round-robin, none empty."""
    count = max(1, min(max_tasks, len(tables)))
    groups: list[list[str]] = [[] for _ in range(count)]
    for index, table in enumerate(tables):
        groups[index % count].append(table)
    return [g for g in groups if g]


def topic_for(prefix: str, table: str | None) -> str:
    """Confluent's topic naming: prefix + table name (no schema) for tables, the prefix alone for a query."""
    if table is None:
        return prefix
    return prefix + table.rpartition(".")[2]


# ------------------------------------------------------------------------------------------ schemas

#: PostgreSQL type OIDs (pg_type) and the Connect schema type each maps to.
_PRIMITIVES: Final[dict[int, str]] = {
    16: "boolean",  # bool
    20: "int64",  # int8
    21: "int16",  # int2
    23: "int32",  # int4
    26: "int64",  # oid
    700: "float",  # float4
    701: "double",  # float8
    17: "bytes",  # bytea
    25: "string",  # text
    1042: "string",  # bpchar
    1043: "string",  # varchar
    19: "string",  # name
}
NUMERIC_OID: Final = 1700
DATE_OID: Final = 1082
TIME_OID: Final = 1083
TIMESTAMP_OID: Final = 1114
TIMESTAMPTZ_OID: Final = 1184


@dataclass(frozen=True)
class ColumnInfo:
    """One result column as the driver describes it: name, type OID, numeric scale (None if unknown) and
    whether the table's column may be null (True when it is not a table column)."""

    name: str
    type_oid: int
    scale: int | None
    nullable: bool


def column_schema(column: ColumnInfo) -> ConnectSchema:
    """Confluent's mapping (numeric.mapping=none): numeric -> Decimal with its scale, dates and times to
    Connect's logical types; types without a Connect counterpart (json, uuid, arrays...) as their text."""
    optional = column.nullable
    if column.type_oid == NUMERIC_OID:
        # A numeric without a declared scale has none fixed; Confluent then uses scale 0 and rounds.
        # Here its values keep their digits: such columns are carried as text instead.
        if column.scale is None or column.scale < 0:
            return ConnectSchema("string", optional)
        return connect_decimal_schema(column.scale, optional)
    if column.type_oid == DATE_OID:
        return ConnectSchema("int32", optional, name=DATE, version=1)
    if column.type_oid == TIME_OID:
        return ConnectSchema("int32", optional, name=TIME, version=1)
    if column.type_oid in (TIMESTAMP_OID, TIMESTAMPTZ_OID):
        return ConnectSchema("int64", optional, name=TIMESTAMP, version=1)
    return ConnectSchema(_PRIMITIVES.get(column.type_oid, "string"), optional)


def value_schema(name: str, columns: Sequence[ColumnInfo]) -> ConnectSchema:
    """The record value's struct, named after the table (Confluent does too), without the poll's own
    timestamp column."""
    return ConnectSchema(
        "struct",
        False,
        name=name,
        fields=tuple(ConnectField(c.name, column_schema(c)) for c in columns if c.name != TS_ALIAS),
    )


def connect_value(schema: ConnectSchema, value: Any) -> Any:
    """A database value as the Python value its Connect schema expects (connect_data's conventions)."""
    if value is None:
        return None
    if schema.name == TIMESTAMP:
        if isinstance(value, dt.datetime):
            return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
        raise JdbcQueryError(f"expected a timestamp, got {value!r}")
    if schema.name in (DATE, TIME):
        return value
    if schema.type == "string" and not isinstance(value, str):
        if isinstance(value, memoryview | bytes):
            return bytes(value).decode("utf-8", "replace")
        return str(value) if not isinstance(value, dict | list) else _json_text(value)
    if schema.type == "bytes" and isinstance(value, memoryview):
        return bytes(value)
    if schema.type in ("float", "double") and isinstance(value, decimal.Decimal):
        return float(value)
    return value


def _json_text(value: Any) -> str:
    import json

    return json.dumps(value, separators=(",", ":"))


def row_value(schema: ConnectSchema, row: Mapping[str, Any]) -> dict[str, Any]:
    """The struct value of one row: the schema's fields in order."""
    return {f.name: connect_value(f.schema, row.get(f.name)) for f in schema.fields}
