"""Confluent's ``io.confluent.connect.avro.AvroConverter``: Avro records in Confluent's wire format.

The mapping is :mod:`avro_data` (Confluent's AvroData); the bytes are fastavro's, which writes the same
binary encoding as Java's Avro and confluent-kafka's AvroSerializer (both use fastavro or Avro's spec).
Parsed schemas are cached per schema id and per Connect schema, so a record costs one fastavro call.
"""

from __future__ import annotations

import io
import json
from collections.abc import Callable, Mapping
from typing import Any

import fastavro

from kconnect.runtime.dataplane.connect_data import ConnectSchema
from kconnect.runtime.dataplane.schema_registry.avro_data import (
    AvroDataConfig,
    avro_to_connect_schema,
    connect_to_avro_schema,
    from_avro_value,
    to_avro_value,
)
from kconnect.runtime.dataplane.schema_registry.base import Reader, RegistryConverter
from kconnect.runtime.dataplane.schema_registry.columns import Decode
from kconnect.runtime.plugins.schema_registry_configs import AVRO_CONVERTER

__all__ = ["AvroConverter", "avro_reader", "avro_writer"]


def _registry_schema(schema_str: str) -> Any:
    from confluent_kafka.schema_registry import Schema

    return Schema(schema_str, "AVRO")


def avro_reader(writer: Any, reader: Any | None = None) -> Callable[[memoryview], Any]:
    """Decode a payload written with ``writer`` (Avro JSON tree), resolved to ``reader`` when given."""
    parsed_writer = fastavro.parse_schema(writer)
    parsed_reader = None if reader is None else fastavro.parse_schema(reader)
    connect = avro_to_connect_schema(reader if reader is not None else writer)

    def decode(payload: memoryview) -> Any:
        value = fastavro.schemaless_reader(io.BytesIO(payload), parsed_writer, parsed_reader)
        return from_avro_value(connect, value)

    return decode


def avro_writer(schema: ConnectSchema, avro: Any) -> Callable[[Any], bytes]:
    """Encode a Connect value of ``schema`` under ``avro`` (the JSON tree of its Avro schema)."""
    parsed = fastavro.parse_schema(avro)

    def write(value: Any) -> bytes:
        out = io.BytesIO()
        fastavro.schemaless_writer(out, parsed, to_avro_value(schema, value))
        return out.getvalue()

    return write


class AvroConverter(RegistryConverter):
    """Confluent's AvroConverter: ``schema.registry.url`` and the serde keys, ``connect.meta.data``,
    ``enhanced.avro.schema.support``, ``scrub.invalid.names``, ``schemas.cache.config``."""

    java_class = AVRO_CONVERTER
    format_name = "Avro"
    schema_type = "AVRO"

    def __init__(self) -> None:
        super().__init__()
        self.data_config = AvroDataConfig()
        self._avro_by_id: dict[int, Any] = {}

    def _configure_format(self, parsed: Mapping[str, Any]) -> None:
        self.data_config = AvroDataConfig(
            connect_meta_data=bool(parsed["connect.meta.data"]),
            enhanced_avro_schema_support=bool(parsed["enhanced.avro.schema.support"]),
            scrub_invalid_names=bool(parsed["scrub.invalid.names"]),
            ignore_default_for_nullables=bool(parsed["ignore.default.for.nullables"]),
        )

    def _avro_of(self, schema_id: int, registered: Any) -> Any:
        found = self._avro_by_id.get(schema_id)
        if found is None:
            found = json.loads(registered.schema_str)
            self._avro_by_id[schema_id] = found
        return found

    def _reader(self, schema_id: int, registered: Any) -> Reader:
        avro = self._avro_of(schema_id, registered)
        return avro_to_connect_schema(avro), avro_reader(avro)

    def _writer(self, schema: ConnectSchema, topic: str) -> tuple[Any, str | None, Callable[[Any], bytes]]:
        avro = connect_to_avro_schema(schema, self.data_config)
        record_name = None
        if isinstance(avro, dict) and avro.get("type") == "record":
            ns = avro.get("namespace")
            record_name = f"{ns}.{avro['name']}" if ns else str(avro["name"])
        text = json.dumps(avro, separators=(",", ":"))
        return _registry_schema(text), record_name, avro_writer(schema, avro)

    def _latest_writer(
        self, latest: Any, schema: ConnectSchema, write: Callable[[Any], bytes]
    ) -> Callable[[Any], bytes]:
        # Written under the latest schema itself (its id is in the header), as Confluent's serializer does.
        avro = json.loads(latest.schema_str)
        target = avro_to_connect_schema(avro)
        encode = avro_writer(target, avro)
        return lambda value: encode(value)

    def _batch_reader(self, good: Mapping[int, Reader], newest: int) -> ConnectSchema | None:
        return good[newest][0]

    def _batch_decode(self, good: Mapping[int, Reader], newest: int) -> Decode:
        # Every id is read as the newest schema (Avro's schema resolution fills defaulted fields), so all
        # rows have the newest schema's shape; an id the newest cannot resolve fails its rows only.
        reader = self._avro_by_id[newest]
        readers = {}
        for schema_id in good:
            writer = self._avro_by_id[schema_id]
            readers[schema_id] = avro_reader(writer, None if schema_id == newest else reader)
        return _AvroDecoder(readers)


class _AvroDecoder:
    def __init__(self, readers: Mapping[int, Callable[[memoryview], Any]]) -> None:
        self.readers = dict(readers)

    def __call__(self, schema_id: int, payload: memoryview) -> Any:
        return self.readers[schema_id](payload)
