"""Debezium's PostgreSQL record format as pure functions: column schemas with Debezium's logical names,
pgoutput's text values converted to them, and the change event's key, envelope and source block.

Why Debezium's shapes: a consumer written for Debezium's output (sink connectors, ``ExtractNewRecordState``
users, stream jobs) must read kconnect's records unchanged. The shapes are Debezium 3.6's (compared
field by field with Debezium 3.6.1.Final's own records in tests/integration/test_postgres_cdc_debezium.py),
with its defaults (``decimal.handling.mode=precise``, ``time.precision.mode=adaptive``,
``binary.handling.mode=bytes``): key ``<prefix>.<schema>.<table>.Key`` (the primary key columns), value
``<prefix>.<schema>.<table>.Envelope`` version 2 with ``before``/``after`` (``...Value``), ``source``
(``io.debezium.connector.postgresql.Source``), ``transaction``, ``op``, ``ts_ms``/``ts_us``/``ts_ns``.

Types (pg type -> Connect schema): int2/int4/int8 -> int16/int32/int64; float4/float8 -> float/double;
bool -> boolean; numeric(p,s) -> Decimal (``scale``, ``connect.decimal.precision``); numeric without a
scale -> ``io.debezium.data.VariableScaleDecimal``; text/varchar/char -> string; bytea -> bytes; date ->
``io.debezium.time.Date`` (days); time(p<=3) -> ``io.debezium.time.Time`` (ms), time -> ``MicroTime``
(us); timestamp(p<=3) -> ``io.debezium.time.Timestamp`` (ms), timestamp -> ``MicroTimestamp`` (us);
timestamptz -> ``ZonedTimestamp`` (ISO-8601 in UTC); timetz -> ``ZonedTime``; uuid ->
``io.debezium.data.Uuid``; json/jsonb -> ``io.debezium.data.Json``; enums -> ``io.debezium.data.Enum``
(``allowed``); one-dimensional arrays of these -> arrays; anything else -> its text.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from kconnect.runtime.dataplane.connect_data import DECIMAL, ConnectField, ConnectSchema

CONNECTOR: Final = "postgresql"
SOURCE_SCHEMA_NAME: Final = "io.debezium.connector.postgresql.Source"
ENVELOPE_VERSION: Final = 2
SNAPSHOT_ALLOWED: Final = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"

# pg_type OIDs
BOOL, BYTEA, INT8, INT2, INT4, TEXT, OID = 16, 17, 20, 21, 23, 25, 26
JSON, FLOAT4, FLOAT8, BPCHAR, VARCHAR = 114, 700, 701, 1042, 1043
DATE_OID, TIME_OID, TIMESTAMP_OID, TIMESTAMPTZ_OID, TIMETZ_OID = 1082, 1083, 1114, 1184, 1266
NUMERIC_OID, UUID_OID, JSONB_OID = 1700, 2950, 3802

_EPOCH_DATE: Final = dt.date(1970, 1, 1)
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class DebeziumFormatError(ValueError):
    """A value that does not parse as its column's type; names the column's type and the text."""


@dataclass(frozen=True)
class PgType:
    """What a column's values are: the type's OID and modifier (pgoutput's Relation gives both), its name,
    and, for arrays, the element type; for enums, their labels in order."""

    oid: int
    modifier: int = -1
    name: str = ""
    element: PgType | None = None
    enum_labels: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PgColumn:
    name: str
    type: PgType
    nullable: bool = True
    key: bool = False


def _named(kind: str, name: str, optional: bool, **extra: Any) -> ConnectSchema:
    return ConnectSchema(kind, optional, name=name, version=1, **extra)


def _precision(modifier: int) -> int:
    """The fractional-second digits of a time/timestamp modifier; -1 (unspecified) means 6."""
    return 6 if modifier < 0 else modifier


def type_schema(pg: PgType, optional: bool) -> ConnectSchema:
    """The Connect schema of one column type, Debezium's default mapping."""
    oid = pg.oid
    if pg.enum_labels is not None:
        return _named(
            "string", "io.debezium.data.Enum", optional, parameters=(("allowed", ",".join(pg.enum_labels)),)
        )
    if pg.element is not None:
        return ConnectSchema("array", optional, items=type_schema(pg.element, True))
    simple = {BOOL: "boolean", INT2: "int16", INT4: "int32", INT8: "int64", OID: "int64", FLOAT4: "float"}
    if oid in simple:
        return ConnectSchema(simple[oid], optional)
    if oid == FLOAT8:
        return ConnectSchema("double", optional)
    if oid == BYTEA:
        return ConnectSchema("bytes", optional)
    if oid == NUMERIC_OID:
        if pg.modifier < 0:
            return _named(
                "struct",
                "io.debezium.data.VariableScaleDecimal",
                optional,
                doc="Variable scaled decimal",
                fields=(
                    ConnectField("scale", ConnectSchema("int32")),
                    ConnectField("value", ConnectSchema("bytes")),
                ),
            )
        precision, scale = ((pg.modifier - 4) >> 16) & 0xFFFF, (pg.modifier - 4) & 0xFFFF
        return ConnectSchema(
            "bytes",
            optional,
            name=DECIMAL,
            version=1,
            parameters=(("scale", str(scale)), ("connect.decimal.precision", str(precision))),
        )
    if oid == DATE_OID:
        return _named("int32", "io.debezium.time.Date", optional)
    if oid == TIME_OID:
        if _precision(pg.modifier) <= 3:
            return _named("int32", "io.debezium.time.Time", optional)
        return _named("int64", "io.debezium.time.MicroTime", optional)
    if oid == TIMESTAMP_OID:
        if _precision(pg.modifier) <= 3:
            return _named("int64", "io.debezium.time.Timestamp", optional)
        return _named("int64", "io.debezium.time.MicroTimestamp", optional)
    if oid == TIMESTAMPTZ_OID:
        return _named("string", "io.debezium.time.ZonedTimestamp", optional)
    if oid == TIMETZ_OID:
        return _named("string", "io.debezium.time.ZonedTime", optional)
    if oid == UUID_OID:
        return _named("string", "io.debezium.data.Uuid", optional)
    if oid in (JSON, JSONB_OID):
        return _named("string", "io.debezium.data.Json", optional)
    return ConnectSchema("string", optional)


# ------------------------------------------------------------------------------------------ values


def _time_us(text: str) -> int:
    hours, minutes, rest = text.split(":")
    seconds, _, fraction = rest.partition(".")
    micros = int((fraction + "000000")[:6]) if fraction else 0
    return ((int(hours) * 60 + int(minutes)) * 60 + int(seconds)) * 1_000_000 + micros


_TZ = re.compile(r"([+-])(\d\d)(?::?(\d\d))?(?::?(\d\d))?$")


def _split_zone(text: str) -> tuple[str, dt.timezone]:
    match = _TZ.search(text)
    if match is None:
        raise ValueError(f"no time zone in {text!r}")
    sign = -1 if match.group(1) == "-" else 1
    offset = dt.timedelta(
        hours=int(match.group(2)), minutes=int(match.group(3) or 0), seconds=int(match.group(4) or 0)
    )
    return text[: match.start()], dt.timezone(sign * offset)


def _timestamp(text: str) -> tuple[dt.datetime, int]:
    """A timestamp's text (without zone) as a naive datetime and its microseconds (PostgreSQL keeps
    microseconds; ``datetime`` does too)."""
    day, _, clock = text.partition(" ")
    year, month, mday = (int(p) for p in day.split("-"))
    micros = _time_us(clock)
    seconds, micro = divmod(micros, 1_000_000)
    base = dt.datetime(year, month, mday) + dt.timedelta(seconds=seconds, microseconds=micro)
    return base, micro


def _zoned_iso(moment: dt.datetime, digits: int) -> str:
    """ISO-8601 in UTC with ``digits`` fractional digits (the column's precision), as Debezium writes a
    ZonedTimestamp; no fraction for precision 0."""
    utc = moment.astimezone(dt.UTC)
    text = utc.strftime("%Y-%m-%dT%H:%M:%S")
    if digits > 0:
        text += "." + f"{utc.microsecond:06d}"[:digits]
    return text + "Z"


def _utc_zoned(text: str, digits: int) -> str | None:
    """The ZonedTimestamp of a timestamptz text already in UTC (``+00``: the CDC source's sessions run in
    UTC, so nearly every value) by rewriting the text, without parsing it; None for any other shape
    (another zone, a five-digit or BC year, infinity), which takes the general path. PostgreSQL rounds
    the fraction to the column's precision, so padding it to ``digits`` is what ``_zoned_iso`` writes."""
    if len(text) < 22 or not text.endswith("+00") or text[10] != " " or text[4] != "-":
        return None
    clock, _, fraction = text[11:-3].partition(".")
    if len(clock) != 8:
        return None
    if digits <= 0:
        return f"{text[:10]}T{clock}Z"
    return f"{text[:10]}T{clock}.{(fraction + '000000')[:digits]}Z"


def _unscaled(value: decimal.Decimal, scale: int) -> bytes:
    unscaled = int(value.scaleb(scale).to_integral_value())
    length = max(1, (unscaled.bit_length() + 8) // 8)
    return unscaled.to_bytes(length, "big", signed=True)


def parse_array(text: str) -> list[str | None]:
    """A one-dimensional array literal (``{1,2}``, ``{"a b",NULL}``) as its elements' texts."""
    if not (text.startswith("{") and text.endswith("}")):
        raise ValueError(f"not an array literal: {text!r}")
    body = text[1:-1]
    items: list[str | None] = []
    if not body:
        return items
    i = 0
    while i <= len(body):
        if i < len(body) and body[i] == '"':
            i += 1
            chars = []
            while body[i] != '"':
                if body[i] == "\\":
                    i += 1
                chars.append(body[i])
                i += 1
            items.append("".join(chars))
            i += 1
        else:
            end = body.find(",", i)
            end = len(body) if end < 0 else end
            raw = body[i:end]
            if raw.startswith("{"):
                raise ValueError("multi-dimensional arrays are not supported")
            items.append(None if raw == "NULL" else raw)
            i = end
        i += 1  # the comma
    return items


def text_value(pg: PgType, text: str | None) -> Any:
    """pgoutput's text of one column as the Python value of ``type_schema(pg)`` (connect_data's
    conventions: int, float, bool, str, bytes, list, dict for structs); None stays None."""
    if text is None:
        return None
    oid = pg.oid
    try:
        if pg.enum_labels is not None:
            return text
        if pg.element is not None:
            return [text_value(pg.element, item) for item in parse_array(text)]
        if oid in (INT2, INT4, INT8, OID):
            return int(text)
        if oid in (FLOAT4, FLOAT8):
            return float(text)
        if oid == BOOL:
            return text in ("t", "true")  # pgoutput sends t/f, a snapshot's ::text true/false
        if oid == BYTEA:
            if not text.startswith("\\x"):
                raise ValueError("bytea not in hex format")
            return bytes.fromhex(text[2:])
        if oid == NUMERIC_OID:
            number = decimal.Decimal(text)
            if pg.modifier < 0:
                exponent = number.as_tuple().exponent
                scale = max(0, -exponent) if isinstance(exponent, int) else 0
                return {"scale": scale, "value": _unscaled(number, scale)}
            return number
        if oid == DATE_OID:
            year, month, mday = (int(p) for p in text.split("-"))
            return (dt.date(year, month, mday) - _EPOCH_DATE).days
        if oid == TIME_OID:
            micros = _time_us(text)
            return micros // 1000 if _precision(pg.modifier) <= 3 else micros
        if oid == TIMESTAMP_OID:
            naive, _ = _timestamp(text)
            delta = naive.replace(tzinfo=dt.UTC) - _EPOCH
            micros = (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
            return micros // 1000 if _precision(pg.modifier) <= 3 else micros
        if oid == TIMESTAMPTZ_OID:
            utc = _utc_zoned(text, _precision(pg.modifier))
            if utc is not None:
                return utc
            clock, zone = _split_zone(text)
            naive, _ = _timestamp(clock)
            return _zoned_iso(naive.replace(tzinfo=zone), _precision(pg.modifier))
        if oid == TIMETZ_OID:
            clock, zone = _split_zone(text)
            micros = _time_us(clock)
            offset = zone.utcoffset(None)
            utc_us = (micros - int(offset.total_seconds() * 1_000_000)) % 86_400_000_000
            seconds, micro = divmod(utc_us, 1_000_000)
            base = f"{seconds // 3600:02d}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
            digits = _precision(pg.modifier)
            return base + ("." + f"{micro:06d}"[:digits] if digits else "") + "Z"
        return text
    except (ValueError, IndexError, decimal.InvalidOperation) as exc:
        raise DebeziumFormatError(f"a {pg.name or pg.oid} value {text!r} does not parse: {exc}") from exc


def fallback(schema: ConnectSchema) -> Any:
    """The value Debezium writes for a required column whose value the server did not send (a delete's
    non-key columns under the default replica identity): the type's zero, since null would not fit."""
    if schema.optional:
        return None
    if schema.name == DECIMAL:
        return decimal.Decimal(0).scaleb(-int(schema.params.get("scale", "0")))
    zero: dict[str, Any] = {
        "int8": 0,
        "int16": 0,
        "int32": 0,
        "int64": 0,
        "float": 0.0,
        "double": 0.0,
        "boolean": False,
        "string": "",
        "bytes": b"",
        "array": [],
    }
    if schema.type == "struct":
        return {f.name: fallback(f.schema) for f in schema.fields}
    return zero.get(schema.type)


# ------------------------------------------------------------------------------------------ the event


def source_schema() -> ConnectSchema:
    """Debezium's ``io.debezium.connector.postgresql.Source`` block."""

    def f(name: str, kind: str, optional: bool = False) -> ConnectField:
        return ConnectField(name, ConnectSchema(kind, optional))

    snapshot = ConnectSchema(
        "string",
        True,
        default="false",
        name="io.debezium.data.Enum",
        version=1,
        parameters=(("allowed", SNAPSHOT_ALLOWED),),
    )
    return ConnectSchema(
        "struct",
        False,
        name=SOURCE_SCHEMA_NAME,
        version=1,
        fields=(
            f("version", "string"),
            f("connector", "string"),
            f("name", "string"),
            f("ts_ms", "int64"),
            ConnectField("snapshot", snapshot),
            f("db", "string"),
            f("sequence", "string", True),
            f("ts_us", "int64", True),
            f("ts_ns", "int64", True),
            f("schema", "string"),
            f("table", "string"),
            f("txId", "int64", True),
            f("lsn", "int64", True),
            f("xmin", "int64", True),
            f("origin", "string", True),
            f("origin_lsn", "int64", True),
        ),
    )


def _transaction_schema() -> ConnectSchema:
    return ConnectSchema(
        "struct",
        True,
        name="event.block",
        version=1,
        fields=(
            ConnectField("id", ConnectSchema("string")),
            ConnectField("total_order", ConnectSchema("int64")),
            ConnectField("data_collection_order", ConnectSchema("int64")),
        ),
    )


@dataclass(frozen=True)
class TableSchemas:
    """One table's key, row and envelope schemas, built once per table (and again when its columns change)."""

    key: ConnectSchema | None
    row: ConnectSchema
    envelope: ConnectSchema
    columns: tuple[PgColumn, ...]


def table_schemas(prefix: str, schema: str, table: str, columns: Sequence[PgColumn]) -> TableSchemas:
    """The schemas of one table's events; no key schema for a table without a primary key (its records
    then have null keys, as Debezium's)."""
    base = f"{prefix}.{schema}.{table}"
    row = ConnectSchema(
        "struct",
        True,
        name=f"{base}.Value",
        fields=tuple(ConnectField(c.name, type_schema(c.type, c.nullable and not c.key)) for c in columns),
    )
    keys = [c for c in columns if c.key]
    key = (
        ConnectSchema(
            "struct",
            False,
            name=f"{base}.Key",
            fields=tuple(ConnectField(c.name, type_schema(c.type, False)) for c in keys),
        )
        if keys
        else None
    )

    def f(name: str, kind: str, optional: bool = False) -> ConnectField:
        return ConnectField(name, ConnectSchema(kind, optional))

    envelope = ConnectSchema(
        "struct",
        False,
        name=f"{base}.Envelope",
        version=ENVELOPE_VERSION,
        fields=(
            ConnectField("before", row),
            ConnectField("after", row),
            ConnectField("source", source_schema()),
            ConnectField("transaction", _transaction_schema()),
            f("op", "string"),
            f("ts_ms", "int64", True),
            f("ts_us", "int64", True),
            f("ts_ns", "int64", True),
        ),
    )
    return TableSchemas(key, row, envelope, tuple(columns))


def row_values(columns: Sequence[PgColumn], texts: Sequence[Any]) -> dict[str, Any]:
    """A row's struct value from its columns' texts (None for null)."""
    if len(texts) != len(columns):
        raise DebeziumFormatError(f"a row has {len(texts)} values for {len(columns)} columns")
    return {c.name: text_value(c.type, t) for c, t in zip(columns, texts, strict=True)}


def key_value(columns: Sequence[PgColumn], row: Mapping[str, Any]) -> dict[str, Any]:
    """The key struct: the primary key columns of a row."""
    return {c.name: row[c.name] for c in columns if c.key}


@dataclass(frozen=True)
class SourceInfo:
    """Where one event comes from: what Debezium's ``source`` block carries."""

    version: str
    server: str  # topic.prefix
    database: str
    schema: str
    table: str
    commit_time_us: int
    snapshot: str  # "false", "true", "last"
    tx_id: int | None
    lsn: int | None
    last_commit_lsn: int | None


def source_value(info: SourceInfo) -> dict[str, Any]:
    """The ``source`` struct, with Debezium's ``sequence``: the JSON text of [the end LSN of the last
    transaction streamed before this one, LSN], each as a string (null when unknown)."""
    sequence = json.dumps(
        [
            None if info.last_commit_lsn is None else str(info.last_commit_lsn),
            None if info.lsn is None else str(info.lsn),
        ],
        separators=(",", ":"),
    )
    return {
        "version": info.version,
        "connector": CONNECTOR,
        "name": info.server,
        "ts_ms": info.commit_time_us // 1000,
        "snapshot": info.snapshot,
        "db": info.database,
        "sequence": sequence,
        "ts_us": info.commit_time_us,
        "ts_ns": info.commit_time_us * 1000,
        "schema": info.schema,
        "table": info.table,
        "txId": info.tx_id,
        "lsn": info.lsn,
        "xmin": None,
        "origin": None,
        "origin_lsn": None,
    }


def envelope_value(
    op: str, before: dict[str, Any] | None, after: dict[str, Any] | None, info: SourceInfo, now_us: int
) -> dict[str, Any]:
    """One change event: ``op`` is c (insert), u (update), d (delete) or r (a snapshot read)."""
    return {
        "before": before,
        "after": after,
        "source": source_value(info),
        "transaction": None,
        "op": op,
        "ts_ms": now_us // 1000,
        "ts_us": now_us,
        "ts_ns": now_us * 1000,
    }


def topic_name(prefix: str, schema: str, table: str) -> str:
    """Debezium's topic per table."""
    return f"{prefix}.{schema}.{table}"
