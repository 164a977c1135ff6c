"""Confluent's ``io.confluent.connect.json.JsonSchemaConverter``: JSON in Confluent's wire format.

The payload after the 5-byte header is the record's JSON text, as confluent-kafka's JSONSerializer and
Java's KafkaJsonSchemaSerializer write it; the schema is a JSON Schema registered with type JSON and
mapped to Connect by :mod:`json_schema_data`. Values are written with ``java_json`` (Jackson's number
and string spelling, Decimals exact) and read with Python's json module, numbers as Decimal so that
Decimal fields lose no digits.
"""

from __future__ import annotations

import decimal
import json
from collections.abc import Callable, Mapping
from typing import Any

from kconnect.runtime.codecs import java_json
from kconnect.runtime.dataplane.connect_data import ConnectSchema
from kconnect.runtime.dataplane.schema_registry.base import Reader, RegistryConverter
from kconnect.runtime.dataplane.schema_registry.json_schema_data import (
    connect_to_json_schema,
    from_json_schema_value,
    json_schema_to_connect,
    to_json_schema_value,
)
from kconnect.runtime.plugins.schema_registry_configs import JSON_SCHEMA_CONVERTER

__all__ = ["JsonSchemaConverter"]


class _JsonReader:
    """Decodes payloads of one registered schema (a plain object, so Spark can ship it)."""

    def __init__(self, schema: ConnectSchema) -> None:
        self.schema = schema

    def __call__(self, payload: memoryview) -> Any:
        node = json.loads(bytes(payload), parse_float=decimal.Decimal)
        return from_json_schema_value(self.schema, node)


class _JsonWriter:
    def __init__(self, schema: ConnectSchema) -> None:
        self.schema = schema

    def __call__(self, value: Any) -> bytes:
        return java_json.write(to_json_schema_value(self.schema, value)).encode("utf-8")


class JsonSchemaConverter(RegistryConverter):
    """Confluent's JsonSchemaConverter: the serde keys plus ``object.additional.properties``,
    ``use.optional.for.nonrequired`` and ``decimal.format`` (Decimals are written as JSON numbers)."""

    java_class = JSON_SCHEMA_CONVERTER
    format_name = "JSON Schema"
    schema_type = "JSON"

    def __init__(self) -> None:
        super().__init__()
        self.additional_properties = True
        self.optional_for_nonrequired = False

    def _configure_format(self, parsed: Mapping[str, Any]) -> None:
        self.additional_properties = bool(parsed["object.additional.properties"])
        self.optional_for_nonrequired = bool(parsed["use.optional.for.nonrequired"])

    def _reader(self, schema_id: int, registered: Any) -> Reader:
        schema = json_schema_to_connect(json.loads(registered.schema_str), self.optional_for_nonrequired)
        return schema, _JsonReader(schema)

    def _writer(self, schema: ConnectSchema, topic: str) -> tuple[Any, str | None, Callable[[Any], bytes]]:
        from confluent_kafka.schema_registry import Schema

        node = connect_to_json_schema(schema, self.additional_properties)
        text = json.dumps(node, separators=(",", ":"))
        record_name = schema.name if schema.type == "struct" else None
        return Schema(text, "JSON"), record_name, _JsonWriter(schema)
