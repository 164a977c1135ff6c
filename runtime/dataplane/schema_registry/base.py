"""What the three Schema Registry converters share: settings, the registry, framing and the frame path.

A subclass says how its format maps a registered schema to a Connect schema and decodes a payload
(``_reader``), and how it writes a Connect value (``_writer``); this class does the rest the same way for
all three, as Confluent's ``AbstractKafkaSchemaSerDe`` does: the subject per strategy, auto
registration or ``use.latest.version``, ids cached so that only a schema's first record calls the
registry, and failures as ``ConnectDataError`` naming the topic and cause (the runtime adds partition and
offset, and applies ``errors.tolerance``).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Mapping
from typing import Any

from pyspark.sql import Column, DataFrame

from kconnect.runtime.dataplane.connect_data import ConnectDataError, ConnectSchema, SchemaAndValue
from kconnect.runtime.dataplane.converters import Converter
from kconnect.runtime.dataplane.schema_registry.columns import Decode, decode_column
from kconnect.runtime.dataplane.schema_registry.registry import (
    Registry,
    RegistryError,
    registry_settings,
    subject_name,
)
from kconnect.runtime.dataplane.schema_registry.wire import WireFormatError, frame, unframe
from kconnect.runtime.plugins.converter_configs import converter_config_def

__all__ = ["RegistryConverter"]

#: (Connect schema, decode(payload) -> Connect value) for one writer schema id.
Reader = tuple[ConnectSchema | None, Callable[[memoryview], Any]]


class RegistryConverter(Converter):
    """A Confluent Schema Registry converter; subclasses name their format and mapping."""

    format_name: str = ""
    schema_type: str = ""
    #: How schemas are fetched by id (``format`` of GET /schemas/ids/{id}; Protobuf's is "serialized").
    fetch_format: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.registry: Registry | None = None
        self.parsed: dict[str, Any] = {}
        self._readers: dict[int, Reader] = {}
        self._written: dict[tuple[str, ConnectSchema], tuple[int, Callable[[Any], bytes]]] = {}

    def config_def(self) -> Any:
        """Confluent's keys for this converter (``runtime/plugins/schema_registry_configs.py``)."""
        return converter_config_def(self.java_class)

    def _configure(self, parsed: Mapping[str, Any]) -> None:
        self.parsed = dict(parsed)
        self.registry = Registry(registry_settings(parsed))
        self._configure_format(parsed)

    def _configure_format(self, parsed: Mapping[str, Any]) -> None:
        pass

    @property
    def _registry(self) -> Registry:
        if self.registry is None:
            raise ConnectDataError(f"{type(self).__name__} is not configured")
        return self.registry

    # -- format hooks

    @abstractmethod
    def _reader(self, schema_id: int, registered: Any) -> Reader:
        """The Connect schema of a registered schema and how to decode payloads written with it."""

    @abstractmethod
    def _writer(self, schema: ConnectSchema, topic: str) -> tuple[Any, str | None, Callable[[Any], bytes]]:
        """For a Connect schema: the registry ``Schema`` to register, its record name (for the subject
        strategies) and a function writing a Connect value as the payload (after the 5-byte header)."""

    # -- record by record

    def _reader_for(self, schema_id: int) -> Reader:
        found = self._readers.get(schema_id)
        if found is None:
            found = self._reader(schema_id, self._registry.schema(schema_id, self.fetch_format))
            self._readers[schema_id] = found
        return found

    def to_connect(self, data: bytes | None, topic: str = "") -> SchemaAndValue:
        """One record's bytes as Connect data; null or empty bytes are a tombstone, as in Confluent's."""
        if data is None or len(data) == 0:
            return SchemaAndValue(None, None)
        where = f" for topic {topic}" if topic else ""
        try:
            schema_id, payload = unframe(bytes(data))
            schema, decode = self._reader_for(schema_id)
            return SchemaAndValue(schema, decode(payload))
        except WireFormatError as exc:
            raise ConnectDataError(
                f"Converting byte[] to Kafka Connect data failed due to serialization error{where}: {exc}"
            ) from None
        except RegistryError as exc:
            raise ConnectDataError(
                f"Failed to deserialize data{where} to {self.format_name}: {exc}"
            ) from None
        except ConnectDataError:
            raise
        except Exception as exc:
            raise ConnectDataError(
                f"Failed to deserialize data{where} to {self.format_name}: {type(exc).__name__}: {exc}"
            ) from None

    def from_connect(self, value: Any, schema: ConnectSchema | None = None, topic: str = "") -> bytes | None:
        """One Connect value in the wire format, its schema registered (or looked up) once per subject."""
        if value is None and (schema is None or schema.optional):
            return None
        if schema is None:
            raise ConnectDataError(
                f"{type(self).__name__} needs a schema for the {'key' if self.is_key else 'value'} of topic "
                f"{topic}: schemaless data (a dict without a Connect schema) cannot be written as "
                f"{self.format_name}"
            )
        try:
            schema_id, write = self._writer_for(schema, topic)
            return frame(schema_id, write(value))
        except RegistryError as exc:
            raise ConnectDataError(
                f"Failed to serialize {self.format_name} data for topic {topic}: {exc}"
            ) from None

    def _writer_for(self, schema: ConnectSchema, topic: str) -> tuple[int, Callable[[Any], bytes]]:
        strategy = (
            self._registry.settings.key_strategy if self.is_key else self._registry.settings.value_strategy
        )
        cache_key = (topic if strategy != "RecordNameStrategy" else "", schema)
        found = self._written.get(cache_key)
        if found is not None:
            return found
        registered, record_name, write = self._writer(schema, topic)
        subject = subject_name(strategy, topic, self.is_key, record_name)
        settings = self._registry.settings
        if settings.use_schema_id >= 0:
            schema_id = settings.use_schema_id
        elif settings.use_latest_version:
            latest = self._registry.latest(subject)
            if settings.latest_compatibility_strict and not self._registry.compatible(subject, registered):
                raise RegistryError(
                    f"Schema being registered is incompatible with the latest schema of subject {subject}",
                    retriable=False,
                )
            schema_id = latest.schema_id
            write = self._latest_writer(latest.schema, schema, write)
        else:
            schema_id = self._registry.register(subject, registered)
        self._written[cache_key] = (schema_id, write)
        return schema_id, write

    def _latest_writer(
        self, latest: Any, schema: ConnectSchema, write: Callable[[Any], bytes]
    ) -> Callable[[Any], bytes]:
        """How values are written under the subject's latest schema (``use.latest.version``); by default
        with the record's own schema, which the compatibility check found compatible."""
        return write

    # -- Spark frames

    @property
    def reads_batch(self) -> bool:
        # The batch's schema ids are read before its records are decoded.
        return True

    def batch_decoder(self, ids: list[int]) -> tuple[ConnectSchema | None, Decode, Mapping[int, str]]:
        """For the frame path: the newest id that resolves gives the reader schema; see ``columns``."""
        bad: dict[int, str] = {}
        good: dict[int, Reader] = {}
        for schema_id in ids:
            try:
                good[schema_id] = self._reader_for(schema_id)
            except Exception as exc:
                bad[schema_id] = str(exc)
        if not good:
            return None, _undecodable, bad
        newest = max(good)
        return self._batch_reader(good, newest), self._batch_decode(good, newest), bad

    def _batch_reader(self, good: Mapping[int, Reader], newest: int) -> ConnectSchema | None:
        return good[newest][0]

    def _batch_decode(self, good: Mapping[int, Reader], newest: int) -> Decode:
        """Decode records of each id; formats with schema resolution (Avro) read every id as the newest."""
        readers = {i: r[1] for i, r in good.items()}
        return _ByIdDecoder(readers)

    def to_columns(self, df: DataFrame, column: str, schema: ConnectSchema | None = None) -> DataFrame:
        """The column decoded (see ``columns.decode_column``)."""
        return decode_column(self, df, column, schema)

    def from_column(self, c: Column, schema: ConnectSchema | None) -> Column:
        """Not offered: kconnect writes source records one by one (``from_connect``), never a frame."""
        raise ConnectDataError(
            f"{type(self).__name__} does not write Spark columns; records are written one by one"
        )


class _ByIdDecoder:
    def __init__(self, readers: Mapping[int, Callable[[memoryview], Any]]) -> None:
        self.readers = dict(readers)

    def __call__(self, schema_id: int, payload: memoryview) -> Any:
        return self.readers[schema_id](payload)


def _undecodable(schema_id: int, payload: memoryview) -> Any:
    raise ConnectDataError(f"schema id {schema_id} could not be read")
