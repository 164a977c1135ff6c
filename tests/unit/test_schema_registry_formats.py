"""JsonSchemaConverter and ProtobufConverter against confluent-kafka's JSON and Protobuf serializers.

As in test_schema_registry_avro.py, Confluent's serializers and the converter share confluent-kafka's
in-memory registry client: the bytes each side writes are read by the other.
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
from typing import Any

import pytest
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufDeserializer, ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, timestamp_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kconnect.runtime.dataplane.connect_data import (
    DATE,
    TIMESTAMP,
    ConnectDataError,
    ConnectField,
    ConnectSchema,
    decimal_schema,
)
from kconnect.runtime.dataplane.converters import new_converter
from kconnect.runtime.dataplane.schema_registry.base import RegistryConverter
from kconnect.runtime.dataplane.schema_registry.wire import (
    read_message_indexes,
    unframe,
    write_message_indexes,
)

JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"


def _ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


@pytest.fixture
def client() -> SchemaRegistryClient:
    return SchemaRegistryClient.new_client({"url": "mock://formats"})


def _converter(name: str, client: SchemaRegistryClient) -> RegistryConverter:
    converter = new_converter(name)
    assert isinstance(converter, RegistryConverter)
    converter.configure({"schema.registry.url": "mock://formats"}, False)
    assert converter.registry is not None
    converter.registry.use_client(client)
    return converter


# ------------------------------------------------------------------------------------------ JSON Schema

USER_JSON_SCHEMA = {
    "type": "object",
    "title": "com.example.User",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "score": {"type": "number"},
        "tags": {"type": "array", "items": {"type": "string"}},
        "email": {"oneOf": [{"type": "null"}, {"type": "string"}]},
        "attrs": {"type": "object", "additionalProperties": {"type": "integer"}},
    },
}


def test_json_schema_serializer_bytes_read_as_connect_data_and_back(client: SchemaRegistryClient) -> None:
    value = {"id": 1, "name": "a", "score": 1.5, "tags": ["x"], "email": None, "attrs": {"k": 2}}
    data = JSONSerializer(json.dumps(USER_JSON_SCHEMA), client)(value, _ctx("users"))
    converter = _converter(JSON_SCHEMA, client)
    read = converter.to_connect(data, "users")
    assert read.value == value
    assert read.schema is not None and read.schema.name == "com.example.User"
    kinds = {f.name: (f.schema.type, f.schema.optional) for f in read.schema.fields}
    assert kinds == {
        "id": ("int64", False),
        "name": ("string", False),
        "score": ("double", False),
        "tags": ("array", False),
        "email": ("string", True),
        "attrs": ("map", False),
    }
    ours = converter.from_connect(read.value, read.schema, "copies")
    assert JSONDeserializer(None, schema_registry_client=client)(ours, _ctx("copies")) == value


def test_connect_logical_types_travel_through_json_schema(client: SchemaRegistryClient) -> None:
    schema = ConnectSchema(
        "struct",
        name="r.Logical",
        fields=(
            ConnectField("amount", decimal_schema(2)),
            ConnectField("day", ConnectSchema("int32", name=DATE, version=1)),
            ConnectField("at", ConnectSchema("int64", name=TIMESTAMP, version=1)),
            ConnectField("raw", ConnectSchema("bytes")),
            ConnectField("small", ConnectSchema("int8")),
        ),
    )
    value = {
        "amount": decimal.Decimal("123456789012345678901234.56"),
        "day": dt.date(2026, 11, 28),
        "at": dt.datetime(2026, 11, 28, 8, 0, tzinfo=dt.UTC),
        "raw": b"\x00\x01",
        "small": -3,
    }
    converter = _converter(JSON_SCHEMA, client)
    data = converter.from_connect(value, schema, "logical")
    assert data is not None
    # Confluent's deserializer validates the record against the registered schema.
    plain = JSONDeserializer(None, schema_registry_client=client)(data, _ctx("logical"))
    assert plain["raw"] == "AAE=" and plain["day"] == 20785
    read = converter.to_connect(data, "logical")
    assert read.value == value and read.schema == schema


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    value=st.fixed_dictionaries(
        {
            "i": st.integers(-(2**63), 2**63 - 1),
            "s": st.text(max_size=10),
            "b": st.booleans(),
            "f": st.floats(allow_nan=False, allow_infinity=False),
            "o": st.none() | st.integers(-5, 5),
        }
    )
)
def test_json_schema_round_trips(client: SchemaRegistryClient, value: dict[str, Any]) -> None:
    schema = ConnectSchema(
        "struct",
        name="h.J",
        fields=(
            ConnectField("i", ConnectSchema("int64")),
            ConnectField("s", ConnectSchema("string")),
            ConnectField("b", ConnectSchema("boolean")),
            ConnectField("f", ConnectSchema("double")),
            ConnectField("o", ConnectSchema("int32", optional=True)),
        ),
    )
    converter = _converter(JSON_SCHEMA, client)
    read = converter.to_connect(converter.from_connect(value, schema, "rt"), "rt")
    assert read.value == value and read.schema == schema


# ---------------------------------------------------------------------------------------------- Protobuf


def _user_class() -> Any:
    file = descriptor_pb2.FileDescriptorProto(
        name="user.proto",
        package="com.example",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    color = file.enum_type.add(name="Color")
    color.value.add(name="RED", number=0)
    color.value.add(name="GREEN", number=1)
    user = file.message_type.add(name="User")
    t = descriptor_pb2.FieldDescriptorProto
    user.field.add(name="id", number=1, type=t.TYPE_INT64, label=t.LABEL_OPTIONAL)
    user.field.add(name="name", number=2, type=t.TYPE_STRING, label=t.LABEL_OPTIONAL)
    user.field.add(name="tags", number=3, type=t.TYPE_STRING, label=t.LABEL_REPEATED)
    user.field.add(
        name="at",
        number=4,
        type=t.TYPE_MESSAGE,
        label=t.LABEL_OPTIONAL,
        type_name=".google.protobuf.Timestamp",
    )
    user.field.add(
        name="color", number=5, type=t.TYPE_ENUM, label=t.LABEL_OPTIONAL, type_name=".com.example.Color"
    )
    user.field.add(name="ratio", number=6, type=t.TYPE_DOUBLE, label=t.LABEL_OPTIONAL)
    pool = DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("com.example.User"))


def test_protobuf_serializer_bytes_read_as_connect_data_and_back(client: SchemaRegistryClient) -> None:
    user_class = _user_class()
    message = user_class(id=5, name="Ada", tags=["x", "y"], color=1, ratio=0.25)
    message.at.seconds = 1_700_000_000
    serializer = ProtobufSerializer(user_class, client, {"use.deprecated.format": False})
    data = serializer(message, _ctx("pb"))
    assert data is not None
    _, payload = unframe(data)
    assert read_message_indexes(payload)[0] == [0]
    converter = _converter(PROTOBUF, client)
    read = converter.to_connect(data, "pb")
    assert read.value == {
        "id": 5,
        "name": "Ada",
        "tags": ["x", "y"],
        "at": dt.datetime(2023, 11, 14, 22, 13, 20, tzinfo=dt.UTC),
        "color": "GREEN",
        "ratio": 0.25,
    }
    assert read.schema is not None and read.schema.name == "com.example.User"
    at = read.schema.field("at")
    assert at is not None and at.schema.name == TIMESTAMP
    ours = converter.from_connect(read.value, read.schema, "pb-copy")
    back = ProtobufDeserializer(user_class, {"use.deprecated.format": False})(ours, _ctx("pb-copy"))
    assert back == message


@pytest.mark.parametrize("indexes", [[0], [1], [0, 2], [3, 1, 4]])
def test_message_indexes_read_back(indexes: list[int]) -> None:
    encoded = write_message_indexes(indexes)
    assert read_message_indexes(memoryview(encoded + b"rest")) == (indexes, memoryview(b"rest"))


def test_protobuf_writes_structs_only() -> None:
    converter = new_converter(PROTOBUF)
    converter.configure({"schema.registry.url": "mock://formats"}, False)
    with pytest.raises(ConnectDataError, match="structs"):
        converter.from_connect("text", ConnectSchema("string"), "t")
