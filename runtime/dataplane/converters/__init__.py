"""Converters (JSON, String, ByteArray) under Apache Kafka Connect's class names, for frames and records.

A converter has two faces. Sink tasks and the data plane convert whole batches: ``to_columns`` turns the
BINARY ``key``/``value`` column of the raw Kafka frame (``records.RAW_SCHEMA``) into a typed Spark column,
and ``from_columns`` turns a typed column back into BINARY for producing, both built only from Spark
column expressions so conversion runs inside the JVM, never row by row in Python. Source tasks produce
records one at a time in Python, so each converter also has ``to_connect(bytes)`` and
``from_connect(value, schema)`` over the pure model in :mod:`connect_data`.

Rows that cannot be converted never raise inside Spark: ``to_columns`` yields null and puts the reason in
the column named by :func:`error_column`, which :mod:`errors_policy` uses to tolerate, log or dead-letter
them as ``errors.tolerance`` says. The typed column carries its Connect schema in the column's metadata
(``connect.schema``) so transforms can compute the schema they produce and ``from_columns`` can write
Java's exact envelope; a column without it gets a schema derived from its Spark type.

The package holds one module per concern: the Connect schema of a typed column (``schema_columns``), the
JSON column expressions (``json_columns``), the contract (``base``), one module per format
(``byte_array_converter``, ``string_converter``, ``json_converter``; Avro, Protobuf and JSON Schema in
``runtime/dataplane/schema_registry``), and choosing one by name (``selection``). Importing from the
package itself keeps working: it re-exports the names the rest of kconnect uses.
"""

from __future__ import annotations

from kconnect.runtime.dataplane.converters.base import Converter
from kconnect.runtime.dataplane.converters.byte_array_converter import ByteArrayConverter
from kconnect.runtime.dataplane.converters.json_columns import ENVELOPE_ERROR
from kconnect.runtime.dataplane.converters.json_converter import SCHEMA_TEXT_CACHE, JsonConverter
from kconnect.runtime.dataplane.converters.schema_columns import (
    SCHEMA_METADATA_KEY,
    connect_schema_of,
    derive_schema,
    error_column,
    schema_metadata,
    spark_type,
    with_schema,
)
from kconnect.runtime.dataplane.converters.selection import (
    PLUGGED,
    converter_config,
    converter_from_config,
    new_converter,
)
from kconnect.runtime.dataplane.converters.string_converter import StringConverter

__all__ = [
    "ENVELOPE_ERROR",
    "PLUGGED",
    "SCHEMA_METADATA_KEY",
    "SCHEMA_TEXT_CACHE",
    "ByteArrayConverter",
    "Converter",
    "JsonConverter",
    "StringConverter",
    "connect_schema_of",
    "converter_config",
    "converter_from_config",
    "derive_schema",
    "error_column",
    "new_converter",
    "schema_metadata",
    "spark_type",
    "with_schema",
]
