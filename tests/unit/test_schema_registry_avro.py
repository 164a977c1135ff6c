"""AvroConverter against confluent-kafka's own AvroSerializer/AvroDeserializer bytes, and its mapping.

The registry here is confluent-kafka's in-memory ``MockSchemaRegistryClient`` (``mock://``), shared by
Confluent's serializers and the converter (``Registry.use_client``): these are unit tests of the bytes
and the mapping. The live tests against Apache Kafka are tests/integration/test_schema_registry.py.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import os
import socket
import sys
from typing import Any

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kconnect.runtime.dataplane.connect_data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    ConnectDataError,
    ConnectField,
    ConnectSchema,
    decimal_schema,
)
from kconnect.runtime.dataplane.converters import converter_from_config, new_converter
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.dataplane.schema_registry.avro_converter import AvroConverter
from kconnect.runtime.dataplane.schema_registry.avro_data import (
    avro_to_connect_schema,
    connect_to_avro_schema,
)
from kconnect.runtime.dataplane.schema_registry.wire import WireFormatError, frame, unframe
from kconnect.runtime.dataplane.sink_batch import prepare, python_value, record_schemas, sink_plan
from kconnect.runtime.plugins.api import SourceRecord
from kconnect.runtime.plugins.config_def import ConfigValidationError
from kconnect.runtime.plugins.converter_configs import converter_config_def
from kconnect.runtime.plugins.password_keys import password_names
from tests.support.spark import local_spark

AVRO = "io.confluent.connect.avro.AvroConverter"

USER = {
    "type": "record",
    "name": "User",
    "namespace": "com.example",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "amount", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
        {"name": "born", "type": {"type": "int", "logicalType": "date"}},
        {"name": "wakes", "type": {"type": "int", "logicalType": "time-millis"}},
        {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "score", "type": "double"},
        {"name": "ratio", "type": "float"},
        {"name": "ok", "type": "boolean"},
        {"name": "raw", "type": "bytes"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "int"}},
        {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
        {
            "name": "address",
            "type": [
                "null",
                {"type": "record", "name": "Address", "fields": [{"name": "city", "type": "string"}]},
            ],
            "default": None,
        },
    ],
}

USER_VALUE: dict[str, Any] = {
    "id": 7,
    "name": "Ada",
    "email": None,
    "amount": decimal.Decimal("12.34"),
    "born": dt.date(1990, 12, 10),
    "wakes": dt.time(7, 30, 0, 250000),
    "at": dt.datetime(2026, 11, 28, 8, 0, 1, 5000, tzinfo=dt.UTC),
    "score": 0.1,
    "ratio": 0.5,
    "ok": True,
    "raw": b"\x00\xff",
    "tags": ["a", "b"],
    "attrs": {"k": 1},
    "color": "GREEN",
    "address": {"city": "London"},
}


def _ctx(topic: str, is_key: bool = False) -> SerializationContext:
    return SerializationContext(topic, MessageField.KEY if is_key else MessageField.VALUE)


@pytest.fixture
def client() -> SchemaRegistryClient:
    return SchemaRegistryClient.new_client({"url": "mock://unit"})


def _converter(client: SchemaRegistryClient, is_key: bool = False, **props: str) -> AvroConverter:
    converter = new_converter(AVRO)
    assert isinstance(converter, AvroConverter)
    converter.configure({"schema.registry.url": "mock://unit", **props}, is_key)
    assert converter.registry is not None
    converter.registry.use_client(client)
    return converter


# ---------------------------------------------------------------------------------------- wire format


def test_frames_are_magic_byte_id_and_payload() -> None:
    data = frame(258, b"xyz")
    assert data == b"\x00\x00\x00\x01\x02xyz"
    schema_id, payload = unframe(data)
    assert schema_id == 258 and bytes(payload) == b"xyz"


@pytest.mark.parametrize("data", [b"", b"\x00\x00", b"\x01\x00\x00\x00\x01x", b'{"a":1}'])
def test_bytes_without_the_magic_byte_are_refused_with_confluents_message(data: bytes) -> None:
    with pytest.raises(WireFormatError, match="Unknown magic byte"):
        unframe(data)


# ------------------------------------------------------------------------- interop with confluent-kafka


def test_confluent_serializer_bytes_read_as_connect_data(client: SchemaRegistryClient) -> None:
    data = AvroSerializer(client, json.dumps(USER))(USER_VALUE, _ctx("users"))
    assert data is not None
    read = _converter(client).to_connect(data, "users")
    assert read.value == USER_VALUE
    schema = read.schema
    assert schema is not None and schema.name == "com.example.User"
    types = {f.name: (f.schema.type, f.schema.name, f.schema.optional) for f in schema.fields}
    assert types["amount"] == ("bytes", DECIMAL, False)
    assert types["born"] == ("int32", DATE, False)
    assert types["wakes"] == ("int32", TIME, False)
    assert types["at"] == ("int64", TIMESTAMP, False)
    assert types["email"] == ("string", None, True)
    assert types["address"] == ("struct", "com.example.Address", True)
    assert types["ratio"][0] == "float" and types["score"][0] == "double"
    color = schema.field("color")
    assert color is not None and color.schema.params["io.confluent.connect.avro.Enum"] == "com.example.Color"
    amount = schema.field("amount")
    assert amount is not None and amount.schema.scale == 2


def test_our_bytes_read_with_confluents_deserializer(client: SchemaRegistryClient) -> None:
    data = AvroSerializer(client, json.dumps(USER))(USER_VALUE, _ctx("users"))
    converter = _converter(client)
    read = converter.to_connect(data, "users")
    ours = converter.from_connect(read.value, read.schema, "copies")
    assert ours is not None and ours[0] == 0
    assert AvroDeserializer(client)(ours, _ctx("copies")) == USER_VALUE
    registered = json.loads(client.get_latest_version("copies-value").schema.schema_str)
    assert registered["name"] == "User" and registered["namespace"] == "com.example"


def test_connect_schemas_map_to_avro_as_confluents_avro_data() -> None:
    schema = ConnectSchema(
        "struct",
        fields=(
            ConnectField("b", ConnectSchema("int8")),
            ConnectField("s", ConnectSchema("int16", optional=True)),
            ConnectField("d", decimal_schema(3)),
            ConnectField("n", ConnectSchema("string", default="x")),
            ConnectField(
                "m", ConnectSchema("map", keys=ConnectSchema("int32"), values=ConnectSchema("string"))
            ),
        ),
        version=2,
        doc="a doc",
    )
    avro = connect_to_avro_schema(schema)
    assert avro["name"] == "ConnectDefault" and avro["namespace"] == "io.confluent.connect.avro"
    assert avro["connect.version"] == 2 and avro["connect.doc"] == "a doc"
    fields = {f["name"]: f for f in avro["fields"]}
    assert fields["b"]["type"] == {"type": "int", "connect.type": "int8"}
    assert fields["s"]["type"] == ["null", {"type": "int", "connect.type": "int16"}]
    assert fields["s"]["default"] is None
    assert fields["d"]["type"]["logicalType"] == "decimal" and fields["d"]["type"]["scale"] == 3
    assert fields["d"]["type"]["precision"] == 64
    assert fields["d"]["type"]["connect.name"] == DECIMAL
    assert fields["n"]["default"] == "x"
    entry = fields["m"]["type"]["items"]
    assert fields["m"]["type"]["type"] == "array" and entry["name"] == "MapEntry"
    assert [f["name"] for f in entry["fields"]] == ["key", "value"]
    assert avro_to_connect_schema(avro) == schema


def test_maps_with_non_string_keys_travel_as_key_value_records(client: SchemaRegistryClient) -> None:
    schema = ConnectSchema(
        "struct",
        name="com.example.Counts",
        fields=(
            ConnectField(
                "by_id", ConnectSchema("map", keys=ConnectSchema("int64"), values=ConnectSchema("int32"))
            ),
        ),
    )
    converter = _converter(client)
    data = converter.from_connect({"by_id": {1: 10, 2: 20}}, schema, "counts")
    assert AvroDeserializer(client)(data, _ctx("counts")) == {
        "by_id": [{"key": 1, "value": 10}, {"key": 2, "value": 20}]
    }
    assert converter.to_connect(data, "counts").value == {"by_id": {1: 10, 2: 20}}


def test_after_a_schemas_first_record_no_record_calls_the_registry(client: SchemaRegistryClient) -> None:
    data = AvroSerializer(client, json.dumps(USER))(USER_VALUE, _ctx("users"))
    converter = _converter(client)
    assert converter.registry is not None
    converter.to_connect(data, "users")
    schema = converter.to_connect(data, "users").schema
    converter.from_connect(USER_VALUE, schema, "out")
    calls = converter.registry.calls
    for _ in range(50):
        converter.to_connect(data, "users")
        converter.from_connect(USER_VALUE, schema, "out")
    assert converter.registry.calls == calls


def test_unknown_schema_ids_fail_naming_the_topic_and_cause(client: SchemaRegistryClient) -> None:
    with pytest.raises(ConnectDataError, match=r"topic users.*404"):
        _converter(client).to_connect(frame(999, b"\x02"), "users")
    with pytest.raises(ConnectDataError, match="Unknown magic byte"):
        _converter(client).to_connect(b'{"id": 1}', "users")


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_registry_that_is_down_is_retried_then_fails_as_unreachable() -> None:
    converter = new_converter(AVRO)
    converter.configure({"schema.registry.url": f"http://127.0.0.1:{_closed_port()}"}, False)
    assert isinstance(converter, AvroConverter) and converter.registry is not None
    converter.registry.retry_for_s = 0.5
    with pytest.raises(ConnectDataError, match="unreachable"):
        converter.to_connect(frame(1, b"\x02"), "t")
    assert converter.registry.calls >= 2


def test_schema_evolution_with_a_defaulted_field_reads_old_records_as_new(
    client: SchemaRegistryClient,
) -> None:
    v1 = {"type": "record", "name": "E", "fields": [{"name": "a", "type": "int"}]}
    v2 = {
        "type": "record",
        "name": "E",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "none"}],
    }
    old = AvroSerializer(client, json.dumps(v1))({"a": 1}, _ctx("ev"))
    new = AvroSerializer(client, json.dumps(v2))({"a": 2, "b": "yes"}, _ctx("ev"))
    converter = _converter(client)
    ids = sorted({unframe(old)[0], unframe(new)[0]})
    schema, decode, bad = converter.batch_decoder(ids)
    assert not bad and schema is not None and [f.name for f in schema.fields] == ["a", "b"]
    assert decode(unframe(old)[0], unframe(old)[1]) == {"a": 1, "b": "none"}
    assert decode(unframe(new)[0], unframe(new)[1]) == {"a": 2, "b": "yes"}


# ------------------------------------------------------------------------------------------- settings


def test_credentials_are_password_keys_and_masked_under_the_converter_prefix() -> None:
    names = password_names(converter_config_def(AVRO), "value.converter.")
    assert {
        "value.converter.basic.auth.user.info",
        "value.converter.bearer.auth.token",
        "value.converter.schema.registry.ssl.key.password",
    } <= names
    converter = _converter(
        SchemaRegistryClient.new_client({"url": "mock://x"}),
        **{
            "basic.auth.credentials.source": "USER_INFO",
            "basic.auth.user.info": "me:secret",
        },
    )
    assert "me:secret" not in repr(converter.parsed) and "me:secret" not in str(converter.parsed)
    assert converter.registry is not None and "me:secret" not in repr(converter.registry.settings)
    assert converter.registry.settings.conf["basic.auth.user.info"] == "me:secret"


@pytest.mark.parametrize(
    ("props", "key"),
    [
        ({}, "schema.registry.url"),
        ({"schema.registry.url": "ftp://x"}, "schema.registry.url"),
        ({"schema.registry.url": "http://x", "auto.register.schemas": "maybe"}, "auto.register.schemas"),
        (
            {"schema.registry.url": "http://x", "value.subject.name.strategy": "com.Other"},
            "value.subject.name.strategy",
        ),
        (
            {"schema.registry.url": "http://x", "basic.auth.credentials.source": "USER_INFO"},
            "basic.auth.user.info",
        ),
        (
            {"schema.registry.url": "http://x", "schema.registry.ssl.truststore.location": "/t.jks"},
            "schema.registry.ssl.truststore.type",
        ),
    ],
)
def test_bad_settings_name_the_key(props: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigValidationError) as info:
        new_converter(AVRO).configure(props, False)
    assert key in str(info.value)


def test_several_urls_and_confluents_defaults() -> None:
    converter = new_converter(AVRO)
    converter.configure({"schema.registry.url": "http://a:8081, http://b:8081"}, False)
    assert isinstance(converter, AvroConverter) and converter.registry is not None
    settings_ = converter.registry.settings
    assert settings_.conf["url"] == "http://a:8081,http://b:8081"
    assert settings_.auto_register and not settings_.use_latest_version
    assert settings_.latest_compatibility_strict and settings_.value_strategy == "TopicNameStrategy"
    assert converter.data_config.connect_meta_data and not converter.data_config.scrub_invalid_names


@pytest.mark.parametrize(
    ("strategy", "subject"),
    [
        ("io.confluent.kafka.serializers.subject.TopicNameStrategy", "orders-value"),
        ("io.confluent.kafka.serializers.subject.RecordNameStrategy", "com.example.Order"),
        ("io.confluent.kafka.serializers.subject.TopicRecordNameStrategy", "orders-com.example.Order"),
    ],
)
def test_subject_name_strategies(client: SchemaRegistryClient, strategy: str, subject: str) -> None:
    schema = ConnectSchema(
        "struct", name="com.example.Order", fields=(ConnectField("a", ConnectSchema("int32")),)
    )
    converter = _converter(client, **{"value.subject.name.strategy": strategy})
    converter.from_connect({"a": 1}, schema, "orders")
    assert client.get_subjects() == [subject]


def test_without_auto_registration_an_unregistered_schema_fails(client: SchemaRegistryClient) -> None:
    converter = _converter(client, **{"auto.register.schemas": "false"})
    with pytest.raises(ConnectDataError, match="orders-value"):
        converter.from_connect("x", ConnectSchema("string"), "orders")


def test_use_latest_version_writes_with_the_subjects_latest_schema(client: SchemaRegistryClient) -> None:
    latest = {
        "type": "record",
        "name": "O",
        "fields": [{"name": "a", "type": "int"}, {"name": "b", "type": "string", "default": "d"}],
    }
    schema_id = client.register_schema("orders-value", Schema(json.dumps(latest), "AVRO"))
    converter = _converter(
        client,
        **{
            "auto.register.schemas": "false",
            "use.latest.version": "true",
            "latest.compatibility.strict": "false",
        },
    )
    record = ConnectSchema("struct", name="O", fields=(ConnectField("a", ConnectSchema("int32")),))
    data = converter.from_connect({"a": 5}, record, "orders")
    assert data is not None and unframe(data)[0] == schema_id
    assert AvroDeserializer(client)(data, _ctx("orders")) == {"a": 5, "b": "d"}


def test_source_records_with_a_struct_schema_are_written_as_avro(client: SchemaRegistryClient) -> None:
    from kconnect.runtime.dataplane.source_encoding import source_encoder

    schema = ConnectSchema("struct", name="r.R", fields=(ConnectField("x", ConnectSchema("int64")),))
    encoder = source_encoder(
        {
            "key.converter": "string",
            "value.converter": AVRO,
            "value.converter.schema.registry.url": "mock://unit",
        },
        {},
    )
    assert isinstance(encoder.value_converter, AvroConverter) and encoder.value_converter.registry is not None
    encoder.value_converter.registry.use_client(client)
    _, value, _ = encoder.encode(SourceRecord(None, None, "src", value={"x": 3}, value_schema=schema))
    assert AvroDeserializer(client)(value, _ctx("src")) == {"x": 3}
    with pytest.raises(ConnectDataError, match="needs a schema"):
        encoder.encode(SourceRecord(None, None, "src", value={"x": 3}))


# ------------------------------------------------------------------------------------------ round trips

_LEAVES = st.sampled_from(
    [
        (ConnectSchema("int8"), st.integers(-128, 127)),
        (ConnectSchema("int16"), st.integers(-(2**15), 2**15 - 1)),
        (ConnectSchema("int32"), st.integers(-(2**31), 2**31 - 1)),
        (ConnectSchema("int64"), st.integers(-(2**63), 2**63 - 1)),
        (ConnectSchema("double"), st.floats(allow_nan=False)),
        (ConnectSchema("boolean"), st.booleans()),
        (ConnectSchema("string"), st.text(max_size=20)),
        (ConnectSchema("bytes"), st.binary(max_size=20)),
        (ConnectSchema("string", optional=True), st.none() | st.text(max_size=5)),
        (decimal_schema(2), st.decimals(min_value=-(10**9), max_value=10**9, places=2)),
        (ConnectSchema("int32", name=DATE, version=1), st.dates(dt.date(1, 1, 1), dt.date(9999, 1, 1))),
        (
            ConnectSchema("int64", name=TIMESTAMP, version=1),
            st.datetimes(dt.datetime(1900, 1, 1), dt.datetime(2200, 1, 1)).map(
                lambda d: d.replace(microsecond=d.microsecond // 1000 * 1000, tzinfo=dt.UTC)
            ),
        ),
        (
            ConnectSchema("map", keys=ConnectSchema("int32"), values=ConnectSchema("string")),
            st.dictionaries(st.integers(-5, 5), st.text(max_size=3), max_size=3),
        ),
        (
            ConnectSchema("array", items=ConnectSchema("int64")),
            st.lists(st.integers(-(2**63), 2**63 - 1), max_size=3),
        ),
    ]
)


@st.composite
def _records(draw: st.DrawFn) -> tuple[ConnectSchema, dict[str, Any]]:
    leaves = draw(st.lists(_LEAVES, min_size=1, max_size=6))
    fields = tuple(ConnectField(f"f{i}", schema) for i, (schema, _) in enumerate(leaves))
    value = {f"f{i}": draw(values) for i, (_, values) in enumerate(leaves)}
    return ConnectSchema("struct", name="h.R", fields=fields), value


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=_records())
def test_connect_data_round_trips_through_avro(
    client: SchemaRegistryClient, record: tuple[ConnectSchema, dict[str, Any]]
) -> None:
    schema, value = record
    converter = _converter(client)
    data = converter.from_connect(value, schema, "rt")
    read = converter.to_connect(data, "rt")
    assert read.value == value
    assert read.schema == schema


# ------------------------------------------------------------------------------------ the Spark column


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    # The column path decodes in a Python UDF, whose workers import kconnect: this interpreter, as the
    # worker's executor sets it (spark_executor.python_workers_executable).
    # The shared test session may predate that setting (another test of this process made it), so its
    # Python workers' interpreter is set too, as test_task_preparation does.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = local_spark()
    session.sparkContext.pythonExec = sys.executable
    return session


def test_a_sink_batch_decodes_avro_columns_and_dead_letters_bad_rows(spark, client) -> None:  # type: ignore[no-untyped-def]
    v1 = {"type": "record", "name": "E", "namespace": "n", "fields": [{"name": "a", "type": "int"}]}
    v2 = {
        "type": "record",
        "name": "E",
        "namespace": "n",
        "fields": [
            {"name": "a", "type": "int"},
            {"name": "at", "type": {"type": "int", "logicalType": "time-millis"}, "default": 0},
        ],
    }
    old = AvroSerializer(client, json.dumps(v1))({"a": 1}, _ctx("in"))
    new = AvroSerializer(client, json.dumps(v2))({"a": 2, "at": dt.time(1, 2, 3)}, _ctx("in"))
    config = {
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": AVRO,
        "value.converter.schema.registry.url": "mock://unit",
    }
    plan = sink_plan(config, {"errors.tolerance": "all"}, "c", 0)
    value_converter = plan.value_converter
    assert isinstance(value_converter, AvroConverter) and value_converter.registry is not None
    value_converter.registry.use_client(client)
    raw = [
        ("in", 0, 0, 1, None, old, []),
        ("in", 0, 1, 1, None, new, []),
        ("in", 0, 2, 1, None, b"no magic", []),
        ("in", 0, 3, 1, None, frame(4242, b"\x02"), []),
        ("in", 0, 4, 1, None, None, []),
    ]
    prepared = prepare(plan, spark.createDataFrame(raw, RAW_SCHEMA))
    _, value_schema = record_schemas(prepared)
    rows = {r["offset"]: r for r in prepared.collect()}
    assert python_value(rows[0]["value"], value_schema) == {"a": 1, "at": dt.time(0, 0)}
    assert python_value(rows[1]["value"], value_schema) == {"a": 2, "at": dt.time(1, 2, 3)}
    assert rows[4]["value"] is None and rows[4]["error__message"] is None
    assert "Unknown magic byte" in rows[2]["error__message"]
    assert "4242" in rows[3]["error__message"] and rows[3]["error__stage"] == "VALUE_CONVERTER"


def test_worker_style_config_names_the_converter_and_its_prefixed_settings(
    client: SchemaRegistryClient,
) -> None:
    converter = converter_from_config(
        {"value.converter": AVRO, "value.converter.schema.registry.url": "http://r:8081"},
        "value.converter",
        False,
    )
    assert isinstance(converter, AvroConverter)
    with pytest.raises(ConfigValidationError, match=r"schema\.registry\.url"):
        converter_from_config({"value.converter": AVRO}, "value.converter", False)
