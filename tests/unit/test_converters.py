"""Converters: Java's exact JSON (golden bytes from JsonConverter 3.9.0), round trips, errors, Spark."""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import json
import random
import struct
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import functions as F

from kconnect.runtime.codecs import java_json
from kconnect.runtime.codecs.java_json import java_float_str
from kconnect.runtime.dataplane.connect_data import (
    DATE,
    TIME,
    TIMESTAMP,
    ConnectDataError,
    ConnectField,
    ConnectSchema,
    decimal_schema,
    schema_from_json,
    schema_to_json,
)
from kconnect.runtime.dataplane.converters import (
    ENVELOPE_ERROR,
    ByteArrayConverter,
    JsonConverter,
    StringConverter,
    converter_from_config,
    error_column,
)
from kconnect.runtime.dataplane.converters.json_converter import sample_envelopes
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.plugins.config_def import ConfigValidationError
from tests.support.spark import local_spark

GOLDEN = Path(__file__).parent.parent / "golden" / "converters.txt"


def _golden() -> tuple[dict[str, str | None], list[tuple[str, str]]]:
    outputs: dict[str, str | None] = {}
    errors: list[tuple[str, str]] = []
    for line in GOLDEN.read_text().splitlines():
        kind, _, rest = line.partition(" ")
        if kind == "json":
            name, _, body = rest.partition(" ")
            outputs[name] = json.loads(body)
        elif kind == "error":
            decoder = json.JSONDecoder()
            given_text, end = decoder.raw_decode(rest)
            errors.append((given_text, json.loads(rest[end:].strip())))
    return outputs, errors


OUTPUTS, ERRORS = _golden()


def json_converter(**props: str) -> JsonConverter:
    c = JsonConverter()
    c.configure(props, False)
    return c


# ------------------------------------------------------------------------------------- record by record


@pytest.mark.parametrize(
    ("case", "props"),
    [
        ("envelope_all", {}),
        ("numeric_all", {"decimal.format": "NUMERIC"}),
        ("envelope_string", {}),
        ("envelope_opt_int64_null", {}),
        ("envelope_schemaless", {}),
        ("envelope_doubles", {}),
    ],
)
def test_reading_and_writing_javas_envelopes_gives_javas_bytes(case: str, props: dict[str, str]) -> None:
    text = OUTPUTS[case]
    assert text is not None
    c = json_converter(**props)
    read = c.to_connect(text.encode())
    assert c.from_connect(read.value, read.schema) == text.encode()


def test_envelope_values_are_the_connect_values_java_wrote() -> None:
    text = OUTPUTS["envelope_all"]
    assert text is not None
    read = json_converter().to_connect(text.encode())
    v = read.value
    assert read.schema is not None and read.schema.name == "com.example.All" and read.schema.version == 3
    assert (v["i8"], v["i16"], v["i32"], v["i64"]) == (-8, 300, 70000, 1 << 40)
    assert java_float_str(v["f32"]) == "0.1" and v["f64"] == 1e10
    assert v["s"] == 'h\u00e9llo "q"\n\t\u0001' and v["b"] == b"\x00\x01\xff"
    assert v["arr"] == [1, 2, 3] and v["m"] == {"a": 1, "b": -2}
    assert v["opt"] is None and v["dflt"] == 7  # Java wrote the field's default for its null
    assert v["dec"] == decimal.Decimal("-12.34")
    assert v["date"] == dt.date(1970, 1, 1) + dt.timedelta(days=19000)
    assert v["time"] == dt.time(1, 2, 3, 4000)
    assert v["ts"] == dt.datetime(2023, 11, 14, 22, 13, 20, 123000, tzinfo=dt.UTC)
    assert v["inner"] == {"x": 1, "y": "why"}


def test_schemas_disabled_writes_the_bare_payload_as_java() -> None:
    envelope = OUTPUTS["envelope_all"]
    assert envelope is not None
    read = json_converter().to_connect(envelope.encode())
    assert (
        json_converter(**{"schemas.enable": "false"}).from_connect(read.value, read.schema)
        == str(OUTPUTS["plain_all"]).encode()
    )


def test_null_schema_and_value_is_a_tombstone_both_ways() -> None:
    assert OUTPUTS["envelope_null_null"] is None
    c = json_converter()
    assert c.from_connect(None, None) is None
    assert c.to_connect(None).value is None and c.to_connect(b"").value is None


@pytest.mark.parametrize(("given_text", "java_error"), ERRORS)
def test_bad_input_fails_with_javas_message(given_text: str, java_error: str) -> None:
    with pytest.raises(ConnectDataError) as info:
        json_converter().to_connect(given_text.encode())
    java_message = java_error.split(": ", 1)[1]
    if java_message == ENVELOPE_ERROR:
        assert str(info.value) == ENVELOPE_ERROR
    else:  # Jackson's parser detail differs from Python's; the prefix is Java's
        assert str(info.value).startswith(java_message.strip())


@pytest.mark.parametrize(
    ("schema", "value", "message"),
    [
        (ConnectSchema("int8"), 200, "out of range for schema type INT8"),
        (ConnectSchema("string"), None, "null value for field that is required"),
        (
            ConnectSchema("struct", fields=(ConnectField("a", ConnectSchema("int32")),)),
            {"b": 1},
            "b is not a valid",
        ),
        (decimal_schema(2), decimal.Decimal("1.234"), "mismatching scale"),
        (ConnectSchema("boolean"), "yes", "BOOLEAN"),
    ],
)
def test_values_that_do_not_fit_their_schema_are_refused(
    schema: ConnectSchema, value: Any, message: str
) -> None:
    with pytest.raises(ConnectDataError, match=message):
        json_converter().from_connect(value, schema)


def _schemas() -> st.SearchStrategy[ConnectSchema]:
    primitive = st.sampled_from(
        [
            ConnectSchema(t, o)
            for t in ("int8", "int16", "int32", "int64", "float", "double", "boolean", "string", "bytes")
            for o in (False, True)
        ]
        + [
            decimal_schema(3),
            ConnectSchema("int32", name=DATE, version=1),
            ConnectSchema("int32", True, name=TIME, version=1),
            ConnectSchema("int64", name=TIMESTAMP, version=1),
        ]
    )
    return st.recursive(
        primitive,
        lambda inner: st.one_of(
            inner.map(lambda s: ConnectSchema("array", items=s)),
            inner.map(lambda s: ConnectSchema("map", keys=ConnectSchema("string"), values=s)),
            st.lists(inner, min_size=1, max_size=4).map(
                lambda ss: ConnectSchema(
                    "struct", name="S", fields=tuple(ConnectField(f"f{i}", s) for i, s in enumerate(ss))
                )
            ),
        ),
        max_leaves=6,
    )


def _values(schema: ConnectSchema) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if schema.name == DATE:
        base = st.dates(dt.date(1900, 1, 1), dt.date(2200, 1, 1))
    elif schema.name == TIME:
        base = st.integers(0, 86_399_999).map(
            lambda ms: dt.time(ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000 * 1000)
        )
    elif schema.name == TIMESTAMP:
        base = st.integers(-(10**12), 10**13).map(
            lambda ms: dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(milliseconds=ms)
        )
    elif schema.name == "org.apache.kafka.connect.data.Decimal":
        base = st.integers(-(10**17), 10**17).map(lambda n: decimal.Decimal(n).scaleb(-3))
    elif schema.type in ("int8", "int16", "int32", "int64"):
        bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}[schema.type]
        base = st.integers(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    elif schema.type == "float":
        base = st.floats(width=32, allow_nan=False, allow_infinity=False)
    elif schema.type == "double":
        base = st.floats(allow_nan=False, allow_infinity=False)
    elif schema.type == "boolean":
        base = st.booleans()
    elif schema.type == "string":
        base = st.text(max_size=8)
    elif schema.type == "bytes":
        base = st.binary(max_size=8)
    elif schema.type == "array":
        assert schema.items is not None
        base = st.lists(_values(schema.items), max_size=3)
    elif schema.type == "map":
        assert schema.values is not None
        base = st.dictionaries(st.text(max_size=4), _values(schema.values), max_size=3)
    else:
        base = st.fixed_dictionaries({f.name: _values(f.schema) for f in schema.fields})
    return st.one_of(st.none(), base) if schema.optional else base


@settings(max_examples=150, deadline=None)
@given(st.data())
def test_json_round_trip_keeps_schema_and_value(data: st.DataObject) -> None:
    schema = data.draw(_schemas())
    value = data.draw(_values(schema))
    c = json_converter()
    encoded = c.from_connect(value, schema)
    assert encoded is not None
    read = c.to_connect(encoded)
    assert read.schema == schema
    assert read.value == value
    assert c.from_connect(read.value, read.schema) == encoded
    assert schema_from_json(schema_to_json(schema)) == schema


@given(st.binary())
def test_bytearray_and_string_converters_round_trip(raw: bytes) -> None:
    b = ByteArrayConverter()
    b.configure({}, True)
    assert b.from_connect(b.to_connect(raw).value) == raw
    s = StringConverter()
    s.configure({}, False)
    text = raw.decode("utf-8", "replace")
    assert s.to_connect(text.encode()).value == text and s.from_connect(text) == text.encode()


def test_bytearray_refuses_what_java_refuses() -> None:
    b = ByteArrayConverter()
    with pytest.raises(ConnectDataError, match=r"^Invalid schema type for ByteArrayConverter: STRING$"):
        b.from_connect(b"x", ConnectSchema("string"))
    with pytest.raises(ConnectDataError, match="not compatible with objects of type str"):
        b.from_connect("x")


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        ("org.apache.kafka.connect.json.JsonConverter", JsonConverter),
        ("json", JsonConverter),
        ("org.apache.kafka.connect.storage.StringConverter", StringConverter),
        ("org.apache.kafka.connect.converters.ByteArrayConverter", ByteArrayConverter),
    ],
)
def test_converters_are_found_by_java_class_name_and_alias(name: str, cls: type) -> None:
    c = converter_from_config(
        {"value.converter": name, "value.converter.schemas.enable": "false"}, "value.converter", False
    )
    assert isinstance(c, cls)
    if isinstance(c, JsonConverter):
        assert c.schemas_enable is False


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"key.converter": "com.example.AvroConverter"},
            "Invalid value com.example.AvroConverter for configuration key.converter",
        ),
        (
            {"key.converter": "json", "key.converter.schemas.enable": "maybe"},
            "Invalid value maybe for configuration schemas.enable",
        ),
        (
            {"key.converter": "json", "key.converter.decimal.format": "HEX"},
            "Invalid value HEX for configuration decimal.format",
        ),
        ({"key.converter": "string", "key.converter.converter.encoding": "EBCDIC"}, "converter.encoding"),
        ({}, 'Missing required configuration "key.converter"'),
    ],
)
def test_bad_converter_config_names_key_value_and_rule(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigValidationError, match=message):
        converter_from_config(config, "key.converter", True)


# -------------------------------------------------------------------------------------- Spark columns


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    return local_spark()


def _random_value(rng: random.Random, schema: ConnectSchema) -> Any:
    if schema.optional and rng.random() < 0.2:
        return None
    if schema.name == "org.apache.kafka.connect.data.Decimal":
        return decimal.Decimal(rng.randint(-(10**17), 10**17)).scaleb(-schema.scale)
    if schema.name == DATE:
        return dt.date(1970, 1, 1) + dt.timedelta(days=rng.randint(-30000, 60000))
    if schema.name == TIME:
        ms = rng.randint(0, 86_399_999)
        return dt.time(ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000 * 1000)
    if schema.name == TIMESTAMP:
        return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(
            milliseconds=rng.randint(-(10**12), 10**13)
        )
    t = schema.type
    if t in ("int8", "int16", "int32", "int64"):
        bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}[t]
        return rng.randint(-(2 ** (bits - 1)), 2 ** (bits - 1) - 1)
    if t == "float":
        import struct

        return struct.unpack(">f", struct.pack(">f", rng.uniform(-1e6, 1e6)))[0]
    if t == "double":
        return rng.choice([rng.uniform(-1e12, 1e12), rng.random() * 1e-5, 1e21, 0.0])
    if t == "boolean":
        return rng.random() < 0.5
    if t == "string":
        return "".join(rng.choice('ab"\\\n\u00e9\u4e2d\U0001f600 ') for _ in range(rng.randint(0, 6)))
    if t == "bytes":
        return rng.randbytes(rng.randint(0, 6))
    if t == "array":
        assert schema.items is not None
        return [_random_value(rng, schema.items) for _ in range(rng.randint(0, 3))]
    if t == "map":
        assert schema.values is not None
        return {f"k{i}": _random_value(rng, schema.values) for i in range(rng.randint(0, 3))}
    return {f.name: _random_value(rng, f.schema) for f in schema.fields}


def _raw_rows(values: list[bytes | None]) -> list[tuple[Any, ...]]:
    return [("t", 0, i, 1700000000000, None, v, [("h", b"1")]) for i, v in enumerate(values)]


def test_spark_columns_round_trip_to_javas_exact_bytes(spark) -> None:  # type: ignore[no-untyped-def]
    golden = OUTPUTS["envelope_all"]
    assert golden is not None
    schema = json_converter().to_connect(golden.encode()).schema
    assert schema is not None
    c = json_converter()
    rng = random.Random(5)
    expected = (
        [golden.encode()] + [c.from_connect(_random_value(rng, schema), schema) for _ in range(60)] + [None]
    )
    df = spark.createDataFrame(_raw_rows(expected), RAW_SCHEMA)
    typed = c.to_columns(df, "value")
    assert typed.schema["value"].dataType.simpleString().startswith("struct<i8:tinyint,i16:smallint")
    back = c.from_columns(typed, "value")
    plan = back._jdf.queryExecution().executedPlan().toString()
    assert "PythonUDF" not in plan and "BatchEvalPython" not in plan and "ArrowEvalPython" not in plan
    rows = back.orderBy("offset").select("value", error_column("value"), "headers").collect()
    assert [r[error_column("value")] for r in rows] == [None] * len(expected)
    assert [None if r["value"] is None else bytes(r["value"]) for r in rows] == expected
    assert all(r["headers"][0]["key"] == "h" for r in rows)  # headers carried through unchanged


def test_spark_bad_rows_get_an_error_not_an_exception(spark) -> None:  # type: ignore[no-untyped-def]
    good = json_converter().from_connect(
        {"a": 1}, ConnectSchema("struct", fields=(ConnectField("a", ConnectSchema("int32")),))
    )
    other_schema = json_converter().from_connect(5, ConnectSchema("int32"))
    values = [
        good,
        b'{"payload":1}',
        b"{bad",
        b'{"schema":'
        + b'{"type":"struct","fields":[{"type":"int32","optional":false,"field":"a"}],"optional":false}'
        + b',"payload":{"a":"x"}}',
        other_schema,
        None,
    ]
    df = spark.createDataFrame(_raw_rows(values), RAW_SCHEMA)
    rows = json_converter().to_columns(df, "value").orderBy("offset").collect()
    errors = [r[error_column("value")] for r in rows]
    assert errors[0] is None and rows[0]["value"]["a"] == 1
    assert errors[1] == ENVELOPE_ERROR
    assert errors[2] is not None and "serialization error" in errors[2]
    assert errors[3] is not None and "does not fit schema" in errors[3]
    assert errors[4] is not None and "differs" in errors[4]
    assert errors[5] is None and rows[5]["value"] is None  # a tombstone is not an error
    assert all(rows[i]["value"] is None for i in range(1, 5))


def test_records_read_after_their_envelope_prefix_fail_as_whole_records_do(spark) -> None:  # type: ignore[no-untyped-def]
    """A record starting with the batch's envelope prefix has only its payload parsed: what follows the
    prefix (another key, a payload that does not fit, truncated JSON, a null) fails with the message the
    whole record's reading gives, and records naming another schema still differ."""
    schema = ConnectSchema("struct", fields=(ConnectField("a", ConnectSchema("int32")),))
    good = json_converter().from_connect({"a": 1}, schema)
    prefix = '{"schema":' + java_json.write(schema_to_json(schema)) + ',"payload":'
    assert good.decode().startswith(prefix)
    head = prefix.encode()
    values = [
        good,
        head + b'{"a":2},"extra":1}',
        head + b'{"a":"x"}}',
        head + b'{"a":',
        json_converter().from_connect(5, ConnectSchema("int32")),
        None,
        head + b"null}",
        head + b'{"a":3} }',
        b"",
        head + b'{"a":4},{"a":5}}',
        head + b"}",
        head + b'{"a":6},"payload":{"a":7}}',
        head + b'{"a":8}} ',
    ]
    df = spark.createDataFrame(_raw_rows(values), RAW_SCHEMA)
    converter = json_converter()
    converter.envelope_prefix = prefix  # the last batch's: every record of it was spelled so
    sample = sample_envelopes(df, {"value": converter})["value"]
    assert sample.schema == schema and sample.prefix == prefix
    fast = converter.to_columns(df, "value", sampled=sample).orderBy("offset").collect()
    whole_sample = sample._replace(prefix=None)
    whole = converter.to_columns(df, "value", sampled=whole_sample).orderBy("offset").collect()
    errors = [r[error_column("value")] for r in fast]
    assert errors == [r[error_column("value")] for r in whole]
    assert [r["value"] for r in fast] == [r["value"] for r in whole]
    assert errors[0] is None and fast[0]["value"]["a"] == 1
    assert errors[1] == ENVELOPE_ERROR
    assert errors[2] is not None and "does not fit schema" in errors[2]
    assert errors[3] is not None and "serialization error" in errors[3]
    assert errors[4] is not None and "differs" in errors[4]
    assert errors[5] is None and fast[5]["value"] is None
    assert errors[6] is not None and "Invalid null value" in errors[6]
    assert errors[7] is None and fast[7]["value"]["a"] == 3
    assert errors[8] is None and fast[8]["value"] is None
    assert all(e is not None for e in errors[9:12])  # two values, none, a second payload key
    assert errors[12] is None and fast[12]["value"]["a"] == 8  # read whole: it ends with a space


def _jobs(spark, action):  # type: ignore[no-untyped-def]
    """``action()``'s answer and how many Spark jobs it ran."""
    sc = spark.sparkContext
    group = f"sample-{random.randrange(1 << 30)}"
    sc.setJobGroup(group, "under test")
    try:
        found = action()
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)
    return found, len(sc.statusTracker().getJobIdsForGroup(group))


def _sampled_jobs(spark, df, columns):  # type: ignore[no-untyped-def]
    """``sample_envelopes``'s answer and how many aggregations over the batch it ran (one aggregation
    can be more than one Spark job: adaptive execution runs its shuffle as a job of its own)."""
    _, per_aggregation = _jobs(spark, lambda: df.agg(F.count("*")).first())
    found, jobs = _jobs(spark, lambda: sample_envelopes(df, columns))
    assert jobs % per_aggregation == 0
    return found, jobs // per_aggregation


def test_key_and_value_envelopes_are_sampled_in_one_job(spark) -> None:  # type: ignore[no-untyped-def]
    """One producer, one spelling: a key and a value schema (keys null on some records) in one job, once
    the converters hold the batch's envelope prefixes (the first time, one record is read per column)."""
    key_schema = ConnectSchema("string")
    value_schema = ConnectSchema("struct", fields=(ConnectField("a", ConnectSchema("int32")),))
    keys, values = json_converter(), json_converter()
    rows = [
        ("t", 0, i, 1, keys.from_connect(f"k{i}", key_schema) if i % 2 else None,
         values.from_connect({"a": i}, value_schema), [])
        for i in range(6)
    ]  # fmt: skip
    df = spark.createDataFrame(rows, RAW_SCHEMA)
    first, first_jobs = _jobs(spark, lambda: sample_envelopes(df, {"key": keys, "value": values}))
    found, jobs = _sampled_jobs(spark, df, {"key": keys, "value": values})
    assert jobs == 1 and first_jobs > jobs
    assert found == first
    assert found["key"].schema == key_schema and found["value"].schema == value_schema
    value_text = java_json.write(schema_to_json(value_schema))
    assert found["value"].spellings == {value_text}
    assert found["value"].prefix == '{"schema":' + value_text + ',"payload":'
    assert keys.envelope_prefix == found["key"].prefix is not None
    typed = values.to_columns(df, "value", sampled=found["value"]).orderBy("offset").collect()
    assert [r["value"]["a"] for r in typed] == list(range(6))
    assert all(r[error_column("value")] is None for r in typed)


def test_mixed_spellings_are_sampled_with_the_first_records_schema(spark) -> None:  # type: ignore[no-untyped-def]
    """Texts that differ take a second job: the first record's schema, its other spellings accepted,
    another schema named so that its records fail; keys all null sample as no schema."""
    java = json_converter().from_connect(
        {"a": 1}, ConnectSchema("struct", fields=(ConnectField("a", ConnectSchema("int32")),))
    )
    reordered = (
        b'{"payload": {"a": 2}, "schema": {"optional": false, "fields": '
        b'[{"field": "a", "optional": false, "type": "int32"}], "type": "struct"}}'
    )
    other = b'{"schema":{"type":"int64"},"payload":3}'
    df = spark.createDataFrame(_raw_rows([java, reordered, other, None]), RAW_SCHEMA)
    converter = json_converter()
    found, jobs = _sampled_jobs(spark, df, {"key": json_converter(), "value": converter})
    assert jobs == 2
    assert found["key"] == (None, frozenset(), None)
    schema, spellings, prefix = found["value"]
    assert prefix is not None and java.decode().startswith(prefix)  # the first record's, Java's spelling
    assert schema is not None and schema.type == "struct" and len(spellings) == 2
    rows = converter.to_columns(df, "value", sampled=found["value"]).orderBy("offset").collect()
    errors = [r[error_column("value")] for r in rows]
    assert errors[:2] == [None, None] and errors[3] is None
    assert errors[2] is not None and "differs" in errors[2]


def test_envelopes_not_spelled_as_java_spells_them_are_sampled_by_their_texts(spark) -> None:  # type: ignore[no-untyped-def]
    """A producer that spaces its envelopes otherwise (Python's json.dumps): the first batch takes a second
    job, which finds no Java prefix; the converter then reads the schema texts with the positions, and a
    batch of one spelling needs no job more, as before envelope prefixes."""
    schema = {"type": "struct", "fields": [{"type": "int32", "optional": False, "field": "a"}]}
    values = [json.dumps({"schema": schema, "payload": {"a": i}}).encode() for i in range(4)]
    df = spark.createDataFrame(_raw_rows(values), RAW_SCHEMA)
    converter = json_converter()
    first, first_jobs = _sampled_jobs(spark, df, {"value": converter})
    assert first_jobs == 2 and first["value"].prefix is None and converter.envelope_texts
    found, jobs = _sampled_jobs(spark, df, {"value": converter})
    assert jobs == 1 and found == first and found["value"].schema is not None
    rows = converter.to_columns(df, "value", sampled=found["value"]).orderBy("offset").collect()
    assert [r["value"]["a"] for r in rows] == [0, 1, 2, 3]


def test_spark_accepts_the_batch_schema_in_any_key_order_or_spacing(spark) -> None:  # type: ignore[no-untyped-def]
    """Python producers write envelope schemas with their keys in another order: the same schema."""
    java = json_converter().from_connect(
        {"a": 1}, ConnectSchema("struct", fields=(ConnectField("a", ConnectSchema("int32")),))
    )
    reordered = (
        b'{"payload": {"a": 2}, "schema": {"optional": false, "fields": '
        b'[{"field": "a", "optional": false, "type": "int32"}], "type": "struct"}}'
    )
    other = (
        b'{"schema":{"type":"struct","fields":[{"field":"a","type":"int64","optional":false}]},'
        b'"payload":{"a":3}}'
    )
    df = spark.createDataFrame(_raw_rows([java, reordered, other]), RAW_SCHEMA)
    rows = json_converter().to_columns(df, "value").orderBy("offset").collect()
    errors = [r[error_column("value")] for r in rows]
    assert errors[:2] == [None, None]
    assert [rows[0]["value"]["a"], rows[1]["value"]["a"]] == [1, 2]
    assert errors[2] is not None and "differs" in errors[2]  # int64 is another schema, whatever the order


def test_spark_string_bytearray_and_schemaless_json(spark) -> None:  # type: ignore[no-untyped-def]
    values = [b'{"a": [1, 2]}', "h\u00e9".encode(), None]
    df = spark.createDataFrame(_raw_rows(values), RAW_SCHEMA)
    s = StringConverter()
    s.configure({}, False)
    b = ByteArrayConverter()
    b.configure({}, False)
    plain = json_converter(**{"schemas.enable": "false"})
    typed = s.to_columns(df, "value").orderBy("offset").collect()
    assert [r["value"] for r in typed] == ['{"a": [1, 2]}', "h\u00e9", None]
    assert [
        r["value"] for r in b.from_columns(b.to_columns(df, "value"), "value").orderBy("offset").collect()
    ] == [bytearray(v) if v is not None else None for v in values]
    kept = plain.to_columns(df.limit(1), "value")
    back = plain.from_columns(kept, "value").collect()
    assert bytes(back[0]["value"]) == b'{"a": [1, 2]}' and kept.collect()[0][error_column("value")] is None
    # With a schema given, schemas.enable=false parses the bare payload into typed columns.
    given_schema = ConnectSchema(
        "struct", fields=(ConnectField("a", ConnectSchema("array", items=ConnectSchema("int64"))),)
    )
    typed_plain = plain.to_columns(df.limit(1), "value", given_schema)
    assert typed_plain.collect()[0]["value"]["a"] == [1, 2]
    assert bytes(plain.from_columns(typed_plain, "value").collect()[0]["value"]) == b'{"a":[1,2]}'


def test_base64_helpers_agree_with_java_on_decimal_bytes() -> None:
    # Java's BigDecimal("-12.34") unscaled -1234 is 0xFB2E: "+y4=" in the golden plain output.
    assert '"dec":"+y4="' in str(OUTPUTS["plain_all"])
    assert base64.b64decode("+y4=") == (-1234).to_bytes(2, "big", signed=True)


def test_schemaless_json_gets_a_batch_wide_inferred_schema_on_request(spark) -> None:  # type: ignore[no-untyped-def]
    from kconnect.runtime.dataplane.transforms import transform_chain

    values = [b'{"a":1,"b":{"c":"x"}}', b'{"a":2,"d":[1.5]}', b"{bad", None]
    df = spark.createDataFrame(_raw_rows(values), RAW_SCHEMA)
    plain = json_converter(**{"schemas.enable": "false"})
    inferred = plain.infer_schema(df, "value")
    assert inferred is not None and [f.name for f in inferred.fields] == ["a", "b", "d"]
    assert inferred.field("a") == ConnectField(
        "a", ConnectSchema("int64", True)
    )  # Java reads schemaless ints as Long
    typed = plain.to_columns(df, "value", inferred)
    chain = transform_chain(
        {
            "transforms": "i",
            "transforms.i.type": "org.apache.kafka.connect.transforms.InsertField$Value",
            "transforms.i.offset.field": "o",
        }
    )
    rows = plain.from_columns(chain.apply(typed), "value").orderBy("offset").collect()
    assert bytes(rows[0]["value"]) == b'{"a":1,"b":{"c":"x"},"d":null,"o":0}'
    assert rows[2][error_column("value")] is not None and rows[3]["value"] is None


def test_string_converter_writes_what_javas_tostring_writes() -> None:
    s = StringConverter()
    s.configure({}, False)
    assert [s.from_connect(v) for v in (True, 1e10, 42, "x")] == [b"true", b"1.0E10", b"42", b"x"]
    assert s.from_connect(0.1, ConnectSchema("float")) == b"0.1"


def test_spark_decimals_up_to_15_bytes_read_exactly(spark) -> None:  # type: ignore[no-untyped-def]
    schema = ConnectSchema("struct", fields=(ConnectField("d", decimal_schema(4)),))
    c = json_converter()
    values = [decimal.Decimal(n).scaleb(-4) for n in (0, -1, 2**63, -(2**63) - 1, 2**119 - 1, -(2**119))]
    encoded = [c.from_connect({"d": v}, schema) for v in values]
    rows = (
        c.to_columns(spark.createDataFrame(_raw_rows(encoded), RAW_SCHEMA), "value")
        .orderBy("offset")
        .collect()
    )
    assert [r["value"]["d"] for r in rows] == values


def test_float32_text_near_the_largest_float32() -> None:
    # Rounding to fewer digits can pass FLT_MAX (3.4025001647762064e38 to 4 digits is 3.403e38): those
    # candidates are skipped, not an OverflowError (found by the round-trip property).
    from kconnect.runtime.codecs.java_json import java_float_str

    value = struct.unpack(">f", struct.pack(">f", 3.4025001647762064e38))[0]
    text = java_float_str(value)
    assert struct.pack(">f", float(text)) == struct.pack(">f", value), text


# ------------------------------------------------------------------------ schema.content (KIP-1054)

CONTENT = '{"type":"struct","fields":[{"type":"int32","optional":false,"field":"a"}],"optional":false}'
CONTENT_SCHEMA = ConnectSchema("struct", fields=(ConnectField("a", ConnectSchema("int32")),))


def test_schema_content_reads_bare_payloads_and_envelopes_with_the_configured_schema() -> None:
    c = json_converter(**{"schema.content": CONTENT})
    bare = c.to_connect(b'{"a": 7}')
    assert bare.schema == CONTENT_SCHEMA and bare.value == {"a": 7}
    # An envelope's own schema is ignored; its payload is read with the configured one.
    enveloped = c.to_connect(b'{"schema": {"type": "string"}, "payload": {"a": 8}}')
    assert enveloped.schema == CONTENT_SCHEMA and enveloped.value == {"a": 8}
    assert c.to_connect(None).schema is None  # a tombstone stays one
    # Without schemas.enable the setting has no effect, as in Java.
    plain = json_converter(**{"schema.content": CONTENT, "schemas.enable": "false"}).to_connect(b'{"a": 7}')
    assert plain.schema is None and plain.value == {"a": 7}
    # Writing is unchanged: the envelope, as without the setting.
    assert c.from_connect({"a": 1}, CONTENT_SCHEMA) == json_converter().from_connect({"a": 1}, CONTENT_SCHEMA)


def test_a_schema_content_that_is_no_schema_is_refused_naming_the_key() -> None:
    with pytest.raises(ConfigValidationError) as info:
        json_converter(**{"schema.content": "{not json"})
    assert "schema.content" in str(info.value)
    assert json_converter(**{"schema.content": ""}).content_schema is None  # empty: not set


def test_spark_reads_with_the_schema_content(spark) -> None:  # type: ignore[no-untyped-def]
    values = [b'{"a": 1}', b'{"schema": null, "payload": {"a": 2}}', b'{"a": "x"}', None]
    df = spark.createDataFrame(_raw_rows(values), RAW_SCHEMA)
    rows = json_converter(**{"schema.content": CONTENT}).to_columns(df, "value").orderBy("offset").collect()
    errors = [r[error_column("value")] for r in rows]
    assert errors[:2] == [None, None]
    assert [rows[0]["value"]["a"], rows[1]["value"]["a"]] == [1, 2]
    assert errors[2] is not None and "does not fit schema" in errors[2]
    assert errors[3] is None and rows[3]["value"] is None


_INT_FIELD = '{"type":"struct","fields":[{"type":"int32","optional":false,"field":"a"}],"optional":false}'


@pytest.mark.parametrize(
    "text",
    [
        f'{{"schema":{_INT_FIELD},"payload":{{"a":1}}}}',
        f'{{"schema":{_INT_FIELD},"payload":{{"a":1}} }}',  # space before the closing brace
        f'{{"schema":{_INT_FIELD},"payload":{{"a":1}},"extra":2}}',  # another key: Java's envelope error
        f'{{"schema":{_INT_FIELD},"payload":{{"a":1}},"payload":{{"a":2}}}}',  # a duplicate payload
        f'{{"schema":{_INT_FIELD},"payload":{{"a":1}}}}  ',  # trailing text after the envelope
        f'{{"schema":{_INT_FIELD},"payload":{{"a":"one"}}}}',  # a payload the schema refuses
        f'{{"schema":{_INT_FIELD},"payload":{{"a":1}}',  # truncated
        '{"schema":null,"payload":{"a":1}}',
        '{"schema":{"type":"string","optional":false,"doc":"x,\\"payload\\":y"},"payload":"v"}',
        '{"schema":{"type":"string","optional":false,"doc":"x","payload":1},"payload":"v"}',  # odd key
        '{"schema":{"type":"int64","optional":false},"payload":12345678901234567890}',
        '{"schema":{"type":"double","optional":false},"payload":0.1}',
        '{"schema":{"type":"nope"},"payload":1}',  # not a schema: Java's error
        '{"schema":[],"payload":1}',
        '{"schema":{"type":"int32","optional":true},"payload":null}',
    ],
)
def test_envelopes_read_by_their_payload_read_as_whole_envelopes_do(text: str) -> None:
    """A record whose schema text was seen before is read by its payload alone (``_envelope``); what it
    reads, or the error it raises, is what reading the whole envelope gives (the reference converter
    below never takes that path). Each text twice: the second read finds its prefix cached."""

    def read(converter: JsonConverter) -> Any:
        try:
            got = converter.to_connect(text.encode())
        except ConnectDataError as exc:
            return ("error", str(exc))
        return (got.schema, got.value)

    fast, whole = json_converter(), json_converter()
    whole._envelope = lambda _data: None  # type: ignore[method-assign]
    expected = read(whole)
    assert read(fast) == expected
    assert read(fast) == expected


def test_a_javas_envelope_is_read_by_its_payload_and_its_schema_parsed_once() -> None:
    converter = json_converter()
    first = f'{{"schema":{_INT_FIELD},"payload":{{"a":1}}}}'.encode()
    second = f'{{"schema":{_INT_FIELD},"payload":{{"a":2}}}}'.encode()
    one, two = converter._envelope(first), converter._envelope(second)
    assert one is not None and two is not None
    assert (one.value, two.value) == ({"a": 1}, {"a": 2})
    assert one.schema is two.schema  # one ConnectSchema for the prefix both records start with
    assert list(converter._prefix_schemas) == [first[: first.index(b',"payload":')]]
