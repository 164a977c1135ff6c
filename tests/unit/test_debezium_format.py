"""Debezium's PostgreSQL record format (connectors/debezium_format.py): type schemas, pgoutput texts to
values, and the envelope's JSON with schemas, checked against the shapes Debezium 3.6.1.Final writes (as
tests/integration/test_postgres_cdc_debezium.py read them from Debezium itself)."""

from __future__ import annotations

import decimal
import json
from typing import Any

import pytest

from kconnect.connectors.debezium_format import (
    BOOL,
    BYTEA,
    DATE_OID,
    FLOAT8,
    INT2,
    INT4,
    INT8,
    JSONB_OID,
    NUMERIC_OID,
    TEXT,
    TIME_OID,
    TIMESTAMP_OID,
    TIMESTAMPTZ_OID,
    TIMETZ_OID,
    UUID_OID,
    DebeziumFormatError,
    PgColumn,
    PgType,
    SourceInfo,
    envelope_value,
    key_value,
    parse_array,
    row_values,
    table_schemas,
    text_value,
    type_schema,
)
from kconnect.runtime.dataplane.connect_data import schema_to_json, to_json_value


def numeric(precision: int, scale: int) -> PgType:
    return PgType(NUMERIC_OID, ((precision << 16) | scale) + 4, "numeric")


@pytest.mark.parametrize(
    ("pg", "schema"),
    [
        (PgType(INT2), {"type": "int16", "optional": True}),
        (PgType(INT8), {"type": "int64", "optional": True}),
        (PgType(FLOAT8), {"type": "double", "optional": True}),
        (PgType(BOOL), {"type": "boolean", "optional": True}),
        (PgType(BYTEA), {"type": "bytes", "optional": True}),
        (
            numeric(10, 2),
            {
                "type": "bytes",
                "optional": True,
                "name": "org.apache.kafka.connect.data.Decimal",
                "version": 1,
                "parameters": {"scale": "2", "connect.decimal.precision": "10"},
            },
        ),
        (
            PgType(NUMERIC_OID),
            {
                "type": "struct",
                "fields": [
                    {"type": "int32", "optional": False, "field": "scale"},
                    {"type": "bytes", "optional": False, "field": "value"},
                ],
                "optional": True,
                "name": "io.debezium.data.VariableScaleDecimal",
                "version": 1,
                "doc": "Variable scaled decimal",
            },
        ),
        (
            PgType(DATE_OID),
            {"type": "int32", "optional": True, "name": "io.debezium.time.Date", "version": 1},
        ),
        (
            PgType(TIME_OID),
            {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTime", "version": 1},
        ),
        (
            PgType(TIME_OID, 3),
            {"type": "int32", "optional": True, "name": "io.debezium.time.Time", "version": 1},
        ),
        (
            PgType(TIMESTAMP_OID),
            {"type": "int64", "optional": True, "name": "io.debezium.time.MicroTimestamp", "version": 1},
        ),
        (
            PgType(TIMESTAMP_OID, 0),
            {"type": "int64", "optional": True, "name": "io.debezium.time.Timestamp", "version": 1},
        ),
        (
            PgType(TIMESTAMPTZ_OID),
            {"type": "string", "optional": True, "name": "io.debezium.time.ZonedTimestamp", "version": 1},
        ),
        (
            PgType(UUID_OID),
            {"type": "string", "optional": True, "name": "io.debezium.data.Uuid", "version": 1},
        ),
        (
            PgType(JSONB_OID),
            {"type": "string", "optional": True, "name": "io.debezium.data.Json", "version": 1},
        ),
        (
            PgType(70000, name="mood", enum_labels=("sad", "ok", "happy")),
            {
                "type": "string",
                "optional": True,
                "name": "io.debezium.data.Enum",
                "version": 1,
                "parameters": {"allowed": "sad,ok,happy"},
            },
        ),
        (
            PgType(1007, element=PgType(INT4)),
            {"type": "array", "items": {"type": "int32", "optional": True}, "optional": True},
        ),
        (PgType(600, name="point"), {"type": "string", "optional": True}),
    ],
)
def test_type_schemas_are_debeziums(pg: PgType, schema: dict[str, Any]) -> None:
    assert schema_to_json(type_schema(pg, True)) == schema


@pytest.mark.parametrize(
    ("pg", "text", "value"),
    [
        (PgType(INT4), "-7", -7),
        (PgType(FLOAT8), "NaN", "nan"),
        (PgType(BOOL), "t", True),
        (PgType(BYTEA), "\\x00ff", b"\x00\xff"),
        (numeric(10, 2), "12.50", decimal.Decimal("12.50")),
        (PgType(NUMERIC_OID), "-1.250", {"scale": 3, "value": (-1250).to_bytes(2, "big", signed=True)}),
        (PgType(DATE_OID), "2026-11-28", 20785),
        (PgType(DATE_OID), "1969-12-31", -1),
        (PgType(TIME_OID), "08:30:00.000123", 30_600_000_123),
        (PgType(TIME_OID, 3), "08:30:00.123", 30_600_123),
        (PgType(TIMESTAMP_OID), "2026-11-28 08:00:00.5", 1_795_852_800_500_000),
        (PgType(TIMESTAMP_OID, 3), "2026-11-28 08:00:00.5", 1_795_852_800_500),
        (PgType(TIMESTAMPTZ_OID), "2026-11-28 09:00:00.51736+01", "2026-11-28T08:00:00.517360Z"),
        (PgType(TIMESTAMPTZ_OID, 0), "2026-11-28 08:00:00+00", "2026-11-28T08:00:00Z"),
        (PgType(TIMESTAMPTZ_OID), "2026-11-28 02:30:00-05:30", "2026-11-28T08:00:00.000000Z"),
        (PgType(TIMETZ_OID), "10:00:00+02", "08:00:00.000000Z"),
        (PgType(UUID_OID), "ef9b5beb-9c21-4d66-a769-47207c205bbe", "ef9b5beb-9c21-4d66-a769-47207c205bbe"),
        (PgType(JSONB_OID), '{"a": [1, 2]}', '{"a": [1, 2]}'),
        (PgType(1009, element=PgType(TEXT)), '{a,"b c",NULL,"d\\"e"}', ["a", "b c", None, 'd"e']),
        (PgType(1007, element=PgType(INT4)), "{}", []),
        (PgType(INT4), None, None),
    ],
)
def test_text_values(pg: PgType, text: str | None, value: Any) -> None:
    got = text_value(pg, text)
    if value == "nan":
        assert got != got
    else:
        assert got == value


@pytest.mark.parametrize(
    ("pg", "text"),
    [
        (PgType(INT4, name="int4"), "x"),
        (PgType(BYTEA, name="bytea"), "abc"),
        (PgType(DATE_OID, name="date"), "2026"),
    ],
)
def test_a_value_that_does_not_parse_names_its_type(pg: PgType, text: str) -> None:
    with pytest.raises(DebeziumFormatError, match=f"a {pg.name} value"):
        text_value(pg, text)


def test_nested_arrays_are_refused() -> None:
    with pytest.raises(ValueError, match="multi-dimensional"):
        parse_array("{{1,2},{3,4}}")


#: Debezium 3.6.1.Final's snapshot markers and source block.
SNAPSHOT_ALLOWED = "true,first,first_in_data_collection,last_in_data_collection,last,false,incremental"
DEBEZIUM_SOURCE_SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "string", "optional": False, "field": "version"},
        {"type": "string", "optional": False, "field": "connector"},
        {"type": "string", "optional": False, "field": "name"},
        {"type": "int64", "optional": False, "field": "ts_ms"},
        {
            "type": "string",
            "optional": True,
            "name": "io.debezium.data.Enum",
            "version": 1,
            "parameters": {"allowed": SNAPSHOT_ALLOWED},
            "default": "false",
            "field": "snapshot",
        },
        {"type": "string", "optional": False, "field": "db"},
        {"type": "string", "optional": True, "field": "sequence"},
        {"type": "int64", "optional": True, "field": "ts_us"},
        {"type": "int64", "optional": True, "field": "ts_ns"},
        {"type": "string", "optional": False, "field": "schema"},
        {"type": "string", "optional": False, "field": "table"},
        {"type": "int64", "optional": True, "field": "txId"},
        {"type": "int64", "optional": True, "field": "lsn"},
        {"type": "int64", "optional": True, "field": "xmin"},
        {"type": "string", "optional": True, "field": "origin"},
        {"type": "int64", "optional": True, "field": "origin_lsn"},
    ],
    "optional": False,
    "name": "io.debezium.connector.postgresql.Source",
    "version": 1,
    "field": "source",
}

COLUMNS = (
    PgColumn("id", PgType(UUID_OID), nullable=False, key=True),
    PgColumn("created", PgType(TIMESTAMPTZ_OID), nullable=False),
    PgColumn("state", PgType(TEXT), nullable=False),
    PgColumn("note", PgType(TEXT)),
)


def test_the_envelope_schema_is_debeziums() -> None:
    schemas = table_schemas("store", "public", "orders", COLUMNS)
    envelope = schema_to_json(schemas.envelope)
    assert envelope["name"] == "store.public.orders.Envelope" and envelope["version"] == 2
    assert [f["field"] for f in envelope["fields"]] == [
        "before",
        "after",
        "source",
        "transaction",
        "op",
        "ts_ms",
        "ts_us",
        "ts_ns",
    ]
    assert envelope["fields"][2] == DEBEZIUM_SOURCE_SCHEMA
    assert envelope["fields"][3] == {
        "type": "struct",
        "fields": [
            {"type": "string", "optional": False, "field": "id"},
            {"type": "int64", "optional": False, "field": "total_order"},
            {"type": "int64", "optional": False, "field": "data_collection_order"},
        ],
        "optional": True,
        "name": "event.block",
        "version": 1,
        "field": "transaction",
    }
    row = envelope["fields"][1]
    assert row["name"] == "store.public.orders.Value" and row["optional"] is True and "version" not in row
    assert row["fields"][0] == {
        "type": "string",
        "optional": False,
        "name": "io.debezium.data.Uuid",
        "version": 1,
        "field": "id",
    }
    assert row["fields"][3] == {"type": "string", "optional": True, "field": "note"}
    assert schema_to_json(schemas.key) == {
        "type": "struct",
        "fields": [
            {
                "type": "string",
                "optional": False,
                "name": "io.debezium.data.Uuid",
                "version": 1,
                "field": "id",
            }
        ],
        "optional": False,
        "name": "store.public.orders.Key",
    }


def test_a_table_without_a_primary_key_has_no_key_schema() -> None:
    assert table_schemas("p", "s", "t", [PgColumn("a", PgType(INT4))]).key is None


def test_an_insert_event_reads_as_debeziums_payload() -> None:
    schemas = table_schemas("store", "public", "orders", COLUMNS)
    after = row_values(
        COLUMNS, ["ef9b5beb-9c21-4d66-a769-47207c205bbe", "2025-02-22 09:57:48.51736+00", "PENDING", None]
    )
    info = SourceInfo(
        "3.0.0.Final",
        "store",
        "store",
        "public",
        "orders",
        1740218268541456,
        "false",
        32545,
        2078978480,
        2078959952,
    )
    value = envelope_value("c", None, after, info, 1740218269005541)
    payload = to_json_value(schemas.envelope, value)
    assert payload["after"] == {
        "id": "ef9b5beb-9c21-4d66-a769-47207c205bbe",
        "created": "2025-02-22T09:57:48.517360Z",
        "state": "PENDING",
        "note": None,
    }
    assert payload["source"] == {
        "version": "3.0.0.Final",
        "connector": "postgresql",
        "name": "store",
        "ts_ms": 1740218268541,
        "snapshot": "false",
        "db": "store",
        "sequence": '["2078959952","2078978480"]',
        "ts_us": 1740218268541456,
        "ts_ns": 1740218268541456000,
        "schema": "public",
        "table": "orders",
        "txId": 32545,
        "lsn": 2078978480,
        "xmin": None,
        "origin": None,
        "origin_lsn": None,
    }
    assert payload["op"] == "c" and payload["before"] is None and payload["transaction"] is None
    assert (payload["ts_ms"], payload["ts_us"]) == (1740218269005, 1740218269005541)
    assert key_value(COLUMNS, after) == {"id": "ef9b5beb-9c21-4d66-a769-47207c205bbe"}
    json.dumps(payload)  # JSON-ready


def test_a_row_with_the_wrong_number_of_values_is_refused() -> None:
    with pytest.raises(DebeziumFormatError, match="1 values for 4 columns"):
        row_values(COLUMNS, ["x"])


def test_a_utc_timestamptz_is_rewritten_as_the_general_path_writes_it() -> None:
    """The fast path for ``+00`` texts against the general one (another zone written for the same
    instant), for every precision and fraction length; other shapes take the general path."""
    for digits in (-1, 0, 1, 3, 5, 6):
        for clock in ("08:00:00", "08:00:00.5", "23:59:59.123", "00:00:00.000001", "12:34:56.654321"):
            utc = text_value(PgType(TIMESTAMPTZ_OID, digits), f"2026-11-28 {clock}+00")
            hour = int(clock[:2]) + 1
            shifted = f"{'2026-11-29' if hour == 24 else '2026-11-28'} {hour % 24:02d}{clock[2:]}+01"
            assert utc == text_value(PgType(TIMESTAMPTZ_OID, digits), shifted), (digits, clock)
    assert text_value(PgType(TIMESTAMPTZ_OID), "2026-11-28 08:00:00+00:30") == "2026-11-28T07:30:00.000000Z"
