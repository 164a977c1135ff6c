"""Confluent's ``io.confluent.connect.protobuf.ProtobufConverter``: Protobuf in Confluent's wire format.

After the 5-byte header come the message indexes (which message of the schema file the record is) and
the message. Schemas are fetched by id as serialized ``FileDescriptorProto`` (the registry's
``format=serialized``), built into message classes at run time and mapped by :mod:`protobuf_data`.
What kconnect writes is a proto3 file with one top-level message, registered in the same serialized form
confluent-kafka's ProtobufSerializer registers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from kconnect.runtime.dataplane.connect_data import ConnectSchema
from kconnect.runtime.dataplane.schema_registry.base import Reader, RegistryConverter
from kconnect.runtime.dataplane.schema_registry.protobuf_data import (
    connect_to_file,
    connect_to_message,
    descriptor_to_connect,
    message_class,
    message_to_connect,
    new_pool,
)
from kconnect.runtime.dataplane.schema_registry.wire import read_message_indexes, write_message_indexes
from kconnect.runtime.plugins.schema_registry_configs import PROTOBUF_CONVERTER

__all__ = ["ProtobufConverter"]


class _ProtobufReader:
    """Decodes payloads of one registered schema; holds the serialized file, so it pickles (Spark)."""

    def __init__(self, name: str, schema_str: str, int_for_enums: bool) -> None:
        self.name = name
        self.schema_str = schema_str
        self.int_for_enums = int_for_enums
        self._classes: dict[tuple[int, ...], Any] = {}
        self._file: Any = None
        self._pool: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {"name": self.name, "schema_str": self.schema_str, "int_for_enums": self.int_for_enums}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["name"], state["schema_str"], state["int_for_enums"])  # type: ignore[misc]

    def message_class(self, indexes: list[int]) -> Any:
        key = tuple(indexes)
        found = self._classes.get(key)
        if found is None:
            from confluent_kafka.schema_registry.common.protobuf import _str_to_proto

            if self._file is None:
                self._file = _str_to_proto(self.name, self.schema_str)
                self._pool = new_pool()
            found = message_class(self._pool, self._file, indexes)
            self._classes[key] = found
        return found

    def __call__(self, payload: memoryview) -> Any:
        indexes, body = read_message_indexes(payload)
        message = self.message_class(indexes)()
        message.ParseFromString(bytes(body))
        return message_to_connect(message, self.int_for_enums)


class ProtobufConverter(RegistryConverter):
    """Confluent's ProtobufConverter: the serde keys plus ``int.for.enums``."""

    java_class = PROTOBUF_CONVERTER
    format_name = "Protobuf"
    schema_type = "PROTOBUF"
    fetch_format = "serialized"

    def __init__(self) -> None:
        super().__init__()
        self.int_for_enums = False
        self._pool: Any = None

    def _configure_format(self, parsed: Mapping[str, Any]) -> None:
        self.int_for_enums = bool(parsed["int.for.enums"])

    def _reader(self, schema_id: int, registered: Any) -> Reader:
        reader = _ProtobufReader(f"kconnect-{schema_id}.proto", registered.schema_str, self.int_for_enums)
        schema = descriptor_to_connect(reader.message_class([0]).DESCRIPTOR, self.int_for_enums)
        return schema, reader

    def _writer(self, schema: ConnectSchema, topic: str) -> tuple[Any, str | None, Callable[[Any], bytes]]:
        from confluent_kafka.schema_registry import Schema
        from confluent_kafka.schema_registry.common.protobuf import _proto_to_str

        if self._pool is None:
            self._pool = new_pool()
        file = connect_to_file(schema)
        cls = message_class(self._pool, file, [0])
        header = write_message_indexes([0])

        def write(value: Any) -> bytes:
            body: bytes = connect_to_message(cls(), schema, value).SerializeToString()
            return header + body

        record_name = cls.DESCRIPTOR.full_name
        return Schema(_proto_to_str(file), "PROTOBUF"), record_name, write
