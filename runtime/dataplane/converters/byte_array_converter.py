"""Apache Kafka Connect's ByteArrayConverter."""

from __future__ import annotations

from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kconnect.runtime.dataplane.connect_data import (
    ConnectDataError,
    ConnectSchema,
    SchemaAndValue,
)
from kconnect.runtime.dataplane.converters.base import Converter
from kconnect.runtime.dataplane.converters.schema_columns import error_column, with_schema
from kconnect.runtime.plugins.config_def import ConfigDef
from kconnect.runtime.plugins.converter_configs import converter_config_def

__all__ = ["ByteArrayConverter"]


class ByteArrayConverter(Converter):
    """Apache Kafka Connect's ByteArrayConverter: bytes passed through unchanged under an optional bytes
    schema, for payloads that a connector handles as opaque."""

    java_class = "org.apache.kafka.connect.converters.ByteArrayConverter"
    SCHEMA: Final = ConnectSchema("bytes", optional=True)

    def config_def(self) -> ConfigDef:
        """Java's keys for this converter: ``converter.type`` only."""
        return converter_config_def(self.java_class)

    def to_connect(self, data: bytes | None, topic: str = "") -> SchemaAndValue:
        """The bytes as they are, under the optional bytes schema; null stays null (a tombstone)."""
        return SchemaAndValue(self.SCHEMA, None if data is None else bytes(data))

    def from_connect(self, value: Any, schema: ConnectSchema | None = None, topic: str = "") -> bytes | None:
        """The value's bytes; a value that is not bytes, or a schema other than bytes, is refused with
        Java's message rather than coerced."""
        if schema is not None and schema.type != "bytes":
            raise ConnectDataError(f"Invalid schema type for ByteArrayConverter: {schema.type.upper()}")
        if value is not None and not isinstance(value, bytes | bytearray | memoryview):
            raise ConnectDataError(
                f"ByteArrayConverter is not compatible with objects of type {type(value).__name__}"
            )
        return None if value is None else bytes(value)

    def to_columns(self, df: DataFrame, column: str, schema: ConnectSchema | None = None) -> DataFrame:
        """The BINARY column unchanged, tagged with the bytes schema; its error column is always null,
        since raw bytes cannot fail to convert."""
        return df.withColumn(column, with_schema(F.col(column), column, self.SCHEMA)).withColumn(
            error_column(column), F.lit(None).cast("string")
        )

    def from_column(self, c: Column, schema: ConnectSchema | None) -> Column:
        """The column as it is, after Java's check that its schema is bytes, which fails while the plan is
        built rather than row by row."""
        if schema is not None and schema.type != "bytes":
            raise ConnectDataError(f"Invalid schema type for ByteArrayConverter: {schema.type.upper()}")
        return c
