"""The sink batch plan: converters + transforms + error policy over a raw frame, rows to SinkRecords,
and source records encoded with the configured converters. Real local Spark; no Kafka."""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pytest

from kconnect.runtime.dataplane.connect_data import (
    DATE,
    TIME,
    TIMESTAMP,
    ConnectDataError,
    ConnectField,
    ConnectSchema,
    decimal_schema,
)
from kconnect.runtime.dataplane.converters import JsonConverter
from kconnect.runtime.dataplane.errors_policy import split
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.dataplane.sink_batch import (
    FAST_PATH_MIN_RECORDS,
    RECORD_COLUMNS,
    envelope_aggregates,
    merged_bounds,
    prepare,
    prepared_on_stream,
    python_value,
    record_schemas,
    sink_plan,
    sink_record,
    tolerance_message,
)
from kconnect.runtime.dataplane.source_encoding import infer_schema, source_encoder
from kconnect.runtime.plugins.api import Header, SourceRecord
from kconnect.runtime.plugins.config_def import ConfigValidationError
from tests.support.spark import local_spark

JSON = "org.apache.kafka.connect.json.JsonConverter"
WORKER = {"key.converter": JSON, "value.converter": JSON}
ROUTE = {
    "transforms": "route",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": "(.*)",
    "transforms.route.replacement": "$1-routed",
}
STRUCT = ConnectSchema(
    "struct",
    fields=(ConnectField("id", ConnectSchema("int32")), ConnectField("name", ConnectSchema("string", True))),
)


def test_sink_plan_reads_converters_transforms_and_errors() -> None:
    plan = sink_plan(
        {**WORKER, "value.converter.schemas.enable": "false"},
        {**ROUTE, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"},
        "c",
        2,
    )
    assert isinstance(plan.value_converter, JsonConverter) and not plan.value_converter.schemas_enable
    assert [t.alias for t in plan.chain.transforms] == ["route"]
    assert plan.policy.tolerance_all and plan.policy.dlq_topic == "dlq"
    assert (plan.connector, plan.task) == ("c", 2)


@pytest.mark.parametrize(
    ("converters", "config", "key"),
    [
        ({**WORKER, "value.converter": "com.example.Avro"}, {}, "value.converter"),
        (WORKER, {"transforms": "x", "transforms.x.type": "Nope"}, "transforms.x.type"),
        (WORKER, {"errors.tolerance": "some"}, "errors.tolerance"),
    ],
)
def test_bad_plan_keys_are_named(converters: dict[str, str], config: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigValidationError, match=key.replace(".", r"\.")):
        sink_plan(converters, config, "c", 0)


STRING = "org.apache.kafka.connect.storage.StringConverter"
BYTES = "org.apache.kafka.connect.converters.ByteArrayConverter"
SCHEMALESS = {**WORKER, "key.converter.schemas.enable": "false", "value.converter.schemas.enable": "false"}
CONTENT = {**WORKER, "value.converter.schema.content": '{"type": "string"}'}


@pytest.mark.parametrize(
    ("converters", "config", "expected"),
    [
        ({"key.converter": STRING, "value.converter": STRING}, ROUTE, True),
        ({"key.converter": BYTES, "value.converter": STRING}, {}, True),
        (SCHEMALESS, {}, True),  # schemaless JSON stays text: nothing to learn from the batch
        (SCHEMALESS, ROUTE, False),  # ... unless transforms need its inferred struct
        (WORKER, {}, False),  # envelopes: the schema is sampled from the batch
        ({**CONTENT, "key.converter": STRING}, ROUTE, True),  # KIP-1054: the schema is configured
        ({**CONTENT, "key.converter.schemas.enable": "true"}, {}, False),
    ],
)
def test_plans_that_read_no_batch_are_prepared_on_the_stream(
    converters: dict[str, str], config: dict[str, str], expected: bool
) -> None:
    assert prepared_on_stream(sink_plan(converters, config, "c", 0)) is expected


@pytest.mark.parametrize(
    ("value", "schema", "expected"),
    [
        (None, STRUCT, None),
        ('{"a":[1,2.5,"x"],"b":null}', None, {"a": [1, 2.5, "x"], "b": None}),
        ("7", None, 7),
        (bytearray(b"\x00\x01"), ConnectSchema("bytes"), b"\x00\x01"),
        (3_723_004, ConnectSchema("int32", name=TIME), dt.time(1, 2, 3, 4000)),
        (dt.date(2024, 2, 29), ConnectSchema("int32", name=DATE), dt.date(2024, 2, 29)),
        (decimal.Decimal("1.50"), decimal_schema(2), decimal.Decimal("1.50")),
        ([1, None], ConnectSchema("array", items=ConnectSchema("int64", True)), [1, None]),
        (
            {"k": 1},
            ConnectSchema("map", keys=ConnectSchema("string"), values=ConnectSchema("int64")),
            {"k": 1},
        ),
    ],
)
def test_python_values_are_javas_connect_data(
    value: Any, schema: ConnectSchema | None, expected: Any
) -> None:
    assert python_value(value, schema) == expected


def test_timestamps_become_aware_utc() -> None:
    aware = dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
    naive_local = aware.astimezone().replace(tzinfo=None)  # what Spark's collect hands back
    out = python_value(naive_local, ConnectSchema("int64", name=TIMESTAMP))
    assert out == aware and out.tzinfo is dt.UTC


def test_tolerance_message_names_record_stage_and_cause() -> None:
    row = {
        "topic": "t",
        "partition": 0,
        "offset": 5,
        "error__stage": "VALUE_CONVERTER",
        "error__class": JSON,
        "error__message": "malformed JSON",
    }
    text = tolerance_message(row)
    assert text.startswith("Tolerance exceeded in error handler")
    assert "t-0@5" in text and "VALUE_CONVERTER" in text and "malformed JSON" in text


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    return local_spark()


def test_a_batch_becomes_routed_sink_records_and_failed_rows(spark) -> None:  # type: ignore[no-untyped-def]
    plan = sink_plan(WORKER, {**ROUTE, "errors.tolerance": "all"}, "c", 0)
    conv = JsonConverter()
    conv.configure({}, False)
    raw: list[tuple[Any, ...]] = [
        ("in", 0, 0, 1000, None, conv.from_connect({"id": 1, "name": "a"}, STRUCT), [("h", b"v")]),
        ("in", 0, 1, 1001, None, b"{not json", []),
        (
            "in",
            0,
            2,
            -1,
            conv.from_connect("k", ConnectSchema("string")),
            conv.from_connect(None, None),
            None,
        ),
    ]
    prepared = prepare(plan, spark.createDataFrame(raw, RAW_SCHEMA))
    good, failed = split(prepared)
    key_schema, value_schema = record_schemas(prepared)
    records = [sink_record(r, key_schema, value_schema) for r in good.select(*RECORD_COLUMNS).collect()]
    records.sort(key=lambda r: r.offset)
    assert [(r.topic, r.offset) for r in records] == [("in-routed", 0), ("in-routed", 2)]
    assert records[0].value == {"id": 1, "name": "a"} and records[0].headers == (Header("h", b"v"),)
    assert records[0].timestamp == 1000 and records[1].timestamp is None
    assert records[1].key == "k" and records[1].value is None
    [bad] = failed.collect()
    assert bad["offset"] == 1 and bad["error__stage"] == "VALUE_CONVERTER"


def test_envelope_bounds_merge_across_groups_ignoring_nulls() -> None:
    """A grouped aggregation's rows: least of the lows, greatest of the highs, per column; none: []."""
    rows = [("t", 0, 1, 2, None, "b", "c", None, None), ("t", 1, 3, 4, 5, "a", "b", None, None)]
    assert merged_bounds(rows, 5) == ["a", "c", None, None]
    assert merged_bounds([], 5) == []


def test_a_batchs_envelopes_sampled_in_the_callers_own_aggregation_need_no_job(spark) -> None:  # type: ignore[no-untyped-def]
    """The sink runner checks the envelopes with the batch's positions (one grouped job): ``prepare``
    given that check runs no Spark job of its own to sample once the converters hold the topic's envelope
    prefix (the first batch reads one record for it), and converts as it would have."""
    plan = sink_plan(WORKER, {}, "c", 0)
    conv = JsonConverter()
    conv.configure({}, False)
    raw: list[tuple[Any, ...]] = [
        (topic, p, o, 1000, None, conv.from_connect({"id": o, "name": "a"}, STRUCT), [])
        for topic, p, o in (("a", 0, 0), ("a", 1, 1), ("b", 0, 2))
    ]
    frame = spark.createDataFrame(raw, RAW_SCHEMA).persist()
    assert len(envelope_aggregates(plan)) == 8  # four per column, the key's and the value's
    first = frame.groupBy("topic", "partition").agg(*envelope_aggregates(plan)).collect()
    prepare(plan, frame, bounds=merged_bounds(first, 2))  # reads one record: the value's prefix
    rows = frame.groupBy("topic", "partition").agg(*envelope_aggregates(plan)).collect()
    bounds = merged_bounds(rows, 2)
    sc = spark.sparkContext
    sc.setJobGroup("kc-bounds-test", "under test")
    try:
        prepared = prepare(plan, frame, bounds=bounds)
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    assert len(sc.statusTracker().getJobIdsForGroup("kc-bounds-test")) == 0
    assert record_schemas(prepared)[1] == STRUCT
    good, failed = split(prepared)
    assert sorted(r["value"]["id"] for r in good.collect()) == [0, 1, 2] and failed.count() == 0
    frame.unpersist()


@pytest.mark.parametrize(
    ("records", "payload_only"),
    [(None, True), (FAST_PATH_MIN_RECORDS, True), (FAST_PATH_MIN_RECORDS - 1, False), (3, False)],
)
def test_envelopes_are_read_by_their_payload_alone_only_in_batches_large_enough(
    spark, records: int | None, payload_only: bool
) -> None:  # type: ignore[no-untyped-def]
    """A batch of fewer than FAST_PATH_MIN_RECORDS records (the runner knows its offset ranges) reads its
    envelopes whole, as the payload-only reading's larger plan costs a small batch more than it saves;
    either way the batch converts alike."""
    plan = sink_plan(WORKER, {}, "c", 0)
    conv = JsonConverter()
    conv.configure({}, False)
    raw: list[tuple[Any, ...]] = [
        ("a", 0, o, 1000, None, conv.from_connect({"id": o, "name": "a"}, STRUCT), []) for o in range(3)
    ]
    frame = spark.createDataFrame(raw, RAW_SCHEMA)
    bounds = merged_bounds(frame.groupBy("topic", "partition").agg(*envelope_aggregates(plan)).collect(), 2)
    prepare(plan, frame, bounds=bounds)  # the first batch reads one record for the value's prefix
    prepared = prepare(plan, frame, bounds=bounds, records=records)
    analyzed = prepared._jdf.queryExecution().analyzed().toString()
    assert ("__kc_fast_value" in analyzed) is payload_only
    good, failed = split(prepared)
    assert sorted(r["value"]["id"] for r in good.collect()) == [0, 1, 2] and failed.count() == 0


def test_source_records_encode_as_javas_json_converter() -> None:
    encoder = source_encoder(WORKER, {})
    key, value, headers = encoder.encode(
        SourceRecord(None, None, "t", value="line", headers=(Header("h", 1),))
    )
    assert key is None
    assert json.loads(value or b"") == {"schema": {"type": "string", "optional": False}, "payload": "line"}
    assert headers == [("h", b"1")]
    _, value, _ = encoder.encode(SourceRecord(None, None, "t", value={"a": [1]}))
    assert json.loads(value or b"") == {"schema": None, "payload": {"a": [1]}}
    plain = source_encoder({**WORKER, "value.converter.schemas.enable": "false"}, {})
    assert plain.encode(SourceRecord(None, None, "t", value={"a": [1]}))[1] == b'{"a":[1]}'
    text = source_encoder({"key.converter": "string", "value.converter": "string"}, {})
    assert text.encode(SourceRecord(None, None, "t", key=5, value=True))[:2] == (b"5", b"true")


def test_source_values_that_do_not_fit_raise_data_errors() -> None:
    raw = source_encoder(
        {"key.converter": "string", "value.converter": "bytearray"}, {"errors.tolerance": "all"}
    )
    assert raw.policy.tolerance_all
    with pytest.raises(ConnectDataError, match="ByteArrayConverter"):
        raw.encode(SourceRecord(None, None, "t", value="not bytes"))


@pytest.mark.parametrize(
    ("value", "expected"),
    [("s", "string"), (True, "boolean"), (3, "int64"), (1.5, "double"), (b"x", "bytes")],
)
def test_inferred_source_schemas(value: Any, expected: str) -> None:
    schema = infer_schema(value)
    assert schema is not None and schema.type == expected and not schema.optional
    assert infer_schema({"a": 1}) is None and infer_schema(None) is None


def test_schemaless_json_gets_an_inferred_schema_when_transforms_need_a_struct(spark) -> None:  # type: ignore[no-untyped-def]
    plan = sink_plan(
        {**WORKER, "value.converter.schemas.enable": "false"},
        {
            "transforms": "insert",
            "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.insert.static.field": "origin",
            "transforms.insert.static.value": "kc",
        },
        "c",
        0,
    )
    raw = [("in", 0, n, 0, None, json.dumps({"id": n}).encode(), []) for n in range(2)]
    raw.append(("in", 0, 2, 0, None, b"{oops", []))
    prepared = prepare(plan, spark.createDataFrame(raw, RAW_SCHEMA))
    good, failed = split(prepared)
    key_schema, value_schema = record_schemas(prepared)
    values = sorted(
        (sink_record(r, key_schema, value_schema).value for r in good.select(*RECORD_COLUMNS).collect()),
        key=lambda v: v["id"],
    )
    assert values == [{"id": 0, "origin": "kc"}, {"id": 1, "origin": "kc"}]
    assert [r["offset"] for r in failed.collect()] == [2]


def test_bytes_that_are_not_json_are_a_serialization_error_with_schemas(spark) -> None:  # type: ignore[no-untyped-def]
    plan = sink_plan(WORKER, {}, "c", 0)
    raw = [("in", 0, 0, 0, None, b"this is not JSON", []), ("in", 0, 1, 0, None, b"5", [])]
    _, failed = split(prepare(plan, spark.createDataFrame(raw, RAW_SCHEMA)))
    errors = {r["offset"]: r["error__message"] for r in failed.collect()}
    assert "serialization error" in errors[0]  # not JSON at all
    assert '"schema" and "payload"' in errors[1]  # JSON, but no envelope
