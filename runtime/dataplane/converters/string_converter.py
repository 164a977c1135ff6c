"""Apache Kafka Connect's StringConverter."""

from __future__ import annotations

import codecs
from collections.abc import Mapping
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kconnect.runtime.codecs import java_json
from kconnect.runtime.codecs.java_json import java_double_str, java_float_str
from kconnect.runtime.dataplane.connect_data import (
    ConnectSchema,
    SchemaAndValue,
)
from kconnect.runtime.dataplane.converters.base import Converter
from kconnect.runtime.dataplane.converters.schema_columns import error_column, with_schema
from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValidationError
from kconnect.runtime.plugins.converter_configs import converter_config_def

__all__ = ["StringConverter"]


class StringConverter(Converter):
    """Apache Kafka Connect's StringConverter: text in the configured charset (``converter.encoding``)
    under an optional string schema; only the charsets that both Spark and Python know are accepted, so
    that both faces agree."""

    java_class = "org.apache.kafka.connect.storage.StringConverter"
    SCHEMA: Final = ConnectSchema("string", optional=True)
    #: Java charset names Spark's encode/decode know, and Python's codec for each.
    CHARSETS: Final = {
        "UTF8": "UTF-8",
        "UTF-8": "UTF-8",
        "US-ASCII": "US-ASCII",
        "ISO-8859-1": "ISO-8859-1",
        "UTF-16": "UTF-16",
        "UTF-16BE": "UTF-16BE",
        "UTF-16LE": "UTF-16LE",
    }

    def __init__(self) -> None:
        super().__init__()
        self.encoding = "UTF-8"

    def config_def(self) -> ConfigDef:
        """Java's keys for this converter: ``converter.encoding`` and ``converter.type``."""
        return converter_config_def(self.java_class)

    def _configure(self, parsed: Mapping[str, Any]) -> None:
        name = str(parsed["converter.encoding"])
        charset = self.CHARSETS.get(name.upper())
        if charset is None:
            raise ConfigValidationError(
                "converter.encoding",
                name,
                "Unsupported encoding; supported: " + ", ".join(sorted(self.CHARSETS)),
            )
        self.encoding = charset

    def to_connect(self, data: bytes | None, topic: str = "") -> SchemaAndValue:
        """The bytes as text in the configured charset, a malformed sequence replaced by U+FFFD as Java
        does, so that one bad record does not fail the task."""
        # Java's StringDeserializer replaces malformed input rather than failing.
        return SchemaAndValue(
            self.SCHEMA, None if data is None else codecs.decode(data, self.encoding, "replace")
        )

    def from_connect(self, value: Any, schema: ConnectSchema | None = None, topic: str = "") -> bytes | None:
        """``value.toString()`` encoded as Java writes it (``true``, ``1.0E10``, float32 text under a float
        schema), so that a source record's bytes equal Java's."""
        if value is None:
            return None
        # Java writes value.toString(): numbers and booleans as Java prints them (1.0E10, true).
        if isinstance(value, str):
            text = value
        elif isinstance(value, bool | int | float):
            if schema is not None and schema.type == "float":
                text = java_float_str(value)
            elif isinstance(value, float):
                text = java_double_str(value)
            else:
                text = java_json.write(value)
        else:
            text = str(value)
        return text.encode(self.encoding)

    def to_columns(self, df: DataFrame, column: str, schema: ConnectSchema | None = None) -> DataFrame:
        """The column decoded in the JVM with the configured charset; its error column stays null, since
        this converter refuses no row."""
        return df.withColumn(
            column, with_schema(F.decode(F.col(column), self.encoding), column, self.SCHEMA)
        ).withColumn(error_column(column), F.lit(None).cast("string"))

    def from_column(self, c: Column, schema: ConnectSchema | None) -> Column:
        """The column's string form encoded with the configured charset: Java writes ``toString()`` of
        whatever value it is given."""
        return F.encode(c.cast("string"), self.encoding)


#: How many distinct spellings of a batch's envelope schema are read to accept equivalent ones.
