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
"""

from __future__ import annotations

import codecs
import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kconnect.config.classes import CONVERTERS, resolve_alias
from kconnect.runtime.dataplane.connect_data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    ConnectDataError,
    ConnectField,
    ConnectSchema,
    SchemaAndValue,
    decimal_schema,
    from_json_value,
    schema_from_json,
    schema_to_json,
    to_json_value,
)
from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValidationError
from kconnect.runtime.plugins.converter_configs import converter_config_def
from kconnect.runtime.storage import java_json
from kconnect.runtime.storage.java_json import java_double_str, java_float_str

__all__ = [
    "ENVELOPE_ERROR",
    "SCHEMA_METADATA_KEY",
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

#: Column metadata key holding the column's Connect schema (the envelope's JSON of it).
SCHEMA_METADATA_KEY: Final = "connect.schema"
#: Java's message for an envelope that is not exactly {"schema", "payload"} (from JsonConverter 3.9).
ENVELOPE_ERROR: Final = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain additional '
    "fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter "
    "configuration."
)
_CORRUPT: Final = "__kc_corrupt"
_MALFORMED: Final = (
    "Converting byte[] to Kafka Connect data failed due to serialization error: malformed JSON"
)


def error_column(column: str) -> str:
    """Where ``to_columns(df, column)`` puts each row's conversion error (null when the row converted)."""
    return f"{column}__error"


# ------------------------------------------------------------------------ Connect schema <-> Spark type


def spark_type(schema: ConnectSchema) -> DataType:
    """The Spark type a value of this Connect schema is held in after conversion.

    Logical types get Spark's own types where Spark has one (Decimal, Date, Timestamp), so SQL on them
    works; Time stays int32 milliseconds of the day (Spark 4.0 has no time-of-day type).
    """
    if schema.name == DECIMAL:
        return DecimalType(38, schema.scale)
    if schema.name == DATE:
        return DateType()
    if schema.name == TIMESTAMP:
        return TimestampType()
    simple: dict[str, DataType] = {
        "int8": ByteType(),
        "int16": ShortType(),
        "int32": IntegerType(),
        "int64": LongType(),
        "float": FloatType(),
        "double": DoubleType(),
        "boolean": BooleanType(),
        "string": StringType(),
        "bytes": BinaryType(),
    }
    if schema.type in simple:
        return simple[schema.type]
    if schema.type == "array":
        assert schema.items is not None
        return ArrayType(spark_type(schema.items), True)
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        return MapType(spark_type(schema.keys), spark_type(schema.values), True)
    return StructType([StructField(f.name, spark_type(f.schema), True) for f in schema.fields])


def _json_read_type(schema: ConnectSchema, decimal_numeric: bool) -> DataType:
    """The type ``from_json`` reads the payload as, before logical types and base64 are decoded."""
    if schema.name == DECIMAL:
        return DecimalType(38, schema.scale) if decimal_numeric else StringType()
    if schema.name in (DATE, TIME):
        return IntegerType()
    if schema.name == TIMESTAMP:
        return LongType()
    if schema.type == "bytes":
        return StringType()
    if schema.type == "array":
        assert schema.items is not None
        return ArrayType(_json_read_type(schema.items, decimal_numeric), True)
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        if schema.keys.type != "string" or schema.keys.name is not None:
            raise ConnectDataError(
                "maps with non-string keys (Java writes them as arrays of pairs) are not supported in Spark "
                "frames"
            )
        return MapType(StringType(), _json_read_type(schema.values, decimal_numeric), True)
    if schema.type == "struct":
        return StructType(
            [StructField(f.name, _json_read_type(f.schema, decimal_numeric), True) for f in schema.fields]
        )
    return spark_type(schema)


def derive_schema(data_type: DataType, optional: bool = True) -> ConnectSchema:
    """A Connect schema for a Spark type that carries none (a column a transform built, a given DDL)."""
    simple = {
        ByteType: "int8",
        ShortType: "int16",
        IntegerType: "int32",
        LongType: "int64",
        FloatType: "float",
        DoubleType: "double",
        BooleanType: "boolean",
        StringType: "string",
        BinaryType: "bytes",
    }
    for cls, name in simple.items():
        if isinstance(data_type, cls):
            return ConnectSchema(name, optional)
    if isinstance(data_type, DecimalType):
        return decimal_schema(data_type.scale, optional)
    if isinstance(data_type, DateType):
        return ConnectSchema("int32", optional, name=DATE, version=1)
    if isinstance(data_type, TimestampType):
        return ConnectSchema("int64", optional, name=TIMESTAMP, version=1)
    if isinstance(data_type, ArrayType):
        return ConnectSchema(
            "array", optional, items=derive_schema(data_type.elementType, data_type.containsNull)
        )
    if isinstance(data_type, MapType):
        return ConnectSchema(
            "map",
            optional,
            keys=derive_schema(data_type.keyType, False),
            values=derive_schema(data_type.valueType, data_type.valueContainsNull),
        )
    if isinstance(data_type, StructType):
        return ConnectSchema(
            "struct",
            optional,
            fields=tuple(
                ConnectField(f.name, derive_schema(f.dataType, f.nullable)) for f in data_type.fields
            ),
        )
    raise ConnectDataError(f"Spark type {data_type.simpleString()} has no Connect schema")


def _same_shape(a: DataType, b: DataType) -> bool:
    """Equal types ignoring nullability (``from_json`` marks everything nullable)."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same_shape(x.dataType, y.dataType)
            for x, y in zip(a.fields, b.fields, strict=True)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_shape(a.elementType, b.elementType)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return _same_shape(a.keyType, b.keyType) and _same_shape(a.valueType, b.valueType)
    return a == b


def schema_metadata(schema: ConnectSchema | None) -> dict[str, str]:
    """The column metadata that carries ``schema`` as Java's JSON schema text: a Spark type cannot hold all
    a Connect schema says (name, version, doc, default, parameters), so it travels beside."""
    return {} if schema is None else {SCHEMA_METADATA_KEY: java_json.write(schema_to_json(schema))}


def with_schema(column: Column, name: str, schema: ConnectSchema | None) -> Column:
    """``column`` named ``name`` carrying ``schema`` in its metadata (what transforms hand on)."""
    return column.alias(name, metadata=schema_metadata(schema))


def connect_schema_of(df: DataFrame, column: str) -> ConnectSchema | None:
    """The Connect schema of a frame column: its metadata's if it still fits the type, else derived.

    Returns None for a column with no schema at all (schemaless JSON kept as a string).
    """
    struct_field = df.schema[column]
    raw = struct_field.metadata.get(SCHEMA_METADATA_KEY)
    if raw is not None:
        schema = schema_from_json(java_json.read(raw))
        if schema is not None and _same_shape(spark_type(schema), struct_field.dataType):
            return schema
    if struct_field.metadata.get("connect.schemaless"):
        return None
    return derive_schema(struct_field.dataType, True)


# ------------------------------------------------------------------ Spark expressions: JSON <-> typed


def _needs_codec(schema: ConnectSchema) -> bool:
    if schema.name in (DECIMAL, DATE, TIMESTAMP) or schema.type == "bytes" or schema.default is not None:
        return True
    if schema.type == "array":
        assert schema.items is not None
        return _needs_codec(schema.items)
    if schema.type == "map":
        assert schema.values is not None
        return _needs_codec(schema.values)
    return any(_needs_codec(f.schema) for f in schema.fields)


def _decimal_from_base64(c: Column, scale: int) -> Column:
    """Java's Decimal bytes (big-endian two's complement unscaled value) to a Spark decimal.

    Built from string and decimal expressions so it stays in the JVM. ``conv`` reads at most 64 bits,
    so the bytes are read as a high part and the low 8 bytes; up to 15 bytes (36 digits, within
    Spark's 38) are read, longer ones become null.
    """
    d0 = DecimalType(38, 0)
    raw = F.try_to_binary(c, F.lit("base64"))
    hexed = F.hex(raw)
    low = F.conv(hexed.substr(F.greatest(F.lit(1), F.length(hexed) - 15), F.lit(16)), 16, 10).cast(d0)
    high_hex = F.when(F.length(raw) > 8, hexed.substr(F.lit(1), F.length(hexed) - 16)).otherwise(F.lit("0"))
    unsigned = F.conv(high_hex, 16, 10).cast(d0) * F.lit(str(2**64)).cast(d0) + low
    negative = F.conv(F.substring(hexed, 1, 1), 16, 10).cast("int") >= 8
    # 2^(8n) exactly: a double power would round 2^64 when cast to a decimal.
    span = F.lit(None).cast(d0)
    for n in range(15, 0, -1):
        span = F.when(F.length(raw) == n, F.lit(str(2 ** (8 * n))).cast(d0)).otherwise(span)
    signed = F.when(negative, unsigned - span).otherwise(unsigned)
    magnitude = F.abs(signed).cast("string")
    # lpad also truncates, so pad only what is shorter than one digit before the point.
    digits = F.when(F.length(magnitude) <= scale, F.lpad(magnitude, scale + 1, "0")).otherwise(magnitude)
    if scale > 0:
        cut = F.length(digits) - scale
        digits = F.concat(digits.substr(F.lit(1), cut), F.lit("."), digits.substr(cut + 1, F.lit(scale)))
    text = F.concat(F.when(signed < 0, F.lit("-")).otherwise(F.lit("")), digits)
    return F.when((F.length(raw) >= 1) & (F.length(raw) <= 15), text.try_cast(DecimalType(38, scale)))


def _decimal_to_base64(c: Column, scale: int) -> Column:
    """A Spark decimal as Java writes a Decimal: base64 of the minimal two's complement unscaled bytes.

    ``hex`` of a long gives the two's complement, so unscaled values up to 64 bits are written; larger
    ones become null (``decimal.format=NUMERIC`` writes any decimal).
    """
    unscaled = (c * F.lit(10**scale)).try_cast(DecimalType(38, 0)).try_cast("long")
    hexed = F.hex(unscaled)
    positive = F.when(F.length(hexed) % 2 == 1, F.concat(F.lit("0"), hexed)).otherwise(hexed)
    positive = F.when(
        F.conv(F.substring(positive, 1, 1), 16, 10).cast("int") >= 8, F.concat(F.lit("00"), positive)
    ).otherwise(positive)
    negative = F.regexp_replace(hexed, "^(FF)+(?=[89A-F])", "")
    return F.base64(F.unhex(F.when(unscaled < 0, negative).otherwise(positive)))


def _decode(c: Column, schema: ConnectSchema, decimal_numeric: bool) -> Column:
    """JSON-level Spark column (as from_json read it) to the typed representation of ``schema``."""
    out: Column
    if schema.name == DECIMAL:
        out = c if decimal_numeric else _decimal_from_base64(c, schema.scale)
    elif schema.name == DATE:
        out = F.date_add(_epoch_date(), c)
    elif schema.name == TIMESTAMP:
        out = F.timestamp_millis(c)
    elif schema.type == "bytes":
        out = F.try_to_binary(c, F.lit("base64"))
    elif schema.type == "array" and _needs_codec(schema):
        items = schema.items
        assert items is not None
        out = F.transform(c, lambda x: _decode(x, items, decimal_numeric))
    elif schema.type == "map" and _needs_codec(schema):
        values = schema.values
        assert values is not None
        out = F.transform_values(c, lambda _k, v: _decode(v, values, decimal_numeric))
    elif schema.type == "struct" and _needs_codec(schema):
        fields = [_decode(c[f.name], f.schema, decimal_numeric).alias(f.name) for f in schema.fields]
        out = F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*fields))
    else:
        out = c
    if schema.default is not None:
        out = F.coalesce(out, F.lit(schema.default).cast(spark_type(schema)))
    return out


def _encode(c: Column, schema: ConnectSchema, decimal_numeric: bool) -> Column:
    """Typed Spark column to the JSON-level column ``to_json`` writes as Java writes the value."""
    out: Column
    if schema.name == DECIMAL:
        out = c if decimal_numeric else _decimal_to_base64(c, schema.scale)
    elif schema.name == DATE:
        out = F.datediff(c, _epoch_date())
    elif schema.name == TIMESTAMP:
        out = F.unix_millis(c)
    elif schema.type == "bytes":
        out = F.base64(c)
    elif schema.type == "array" and _needs_codec(schema):
        items = schema.items
        assert items is not None
        out = F.transform(c, lambda x: _encode(x, items, decimal_numeric))
    elif schema.type == "map" and _needs_codec(schema):
        values = schema.values
        assert values is not None
        out = F.transform_values(c, lambda _k, v: _encode(v, values, decimal_numeric))
    elif schema.type == "struct" and _needs_codec(schema):
        fields = [_encode(c[f.name], f.schema, decimal_numeric).alias(f.name) for f in schema.fields]
        out = F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*fields))
    else:
        out = c
    if schema.default is not None:
        out = F.coalesce(
            out, _encode(F.lit(schema.default).cast(spark_type(schema)), _no_default(schema), decimal_numeric)
        )
    return out


def _no_default(schema: ConnectSchema) -> ConnectSchema:
    values = {f: getattr(schema, f) for f in schema.__dataclass_fields__}
    values["default"] = None
    return ConnectSchema(**values)


def _is_envelope(text: Column) -> Column:
    """Whether JSON ``text`` is an object of exactly the keys ``schema`` and ``payload`` (null when it is
    no JSON object): Java's envelope test, as a column expression."""
    return F.array_sort(F.json_object_keys(text)) == F.array(F.lit("payload"), F.lit("schema"))


def _json_text(c: Column) -> Column:
    """Any column as compact JSON text, nulls inside structs kept (Java writes them)."""
    wrapped = _escape_non_bmp(F.to_json(F.array(c), {"ignoreNullFields": "false"}))
    return wrapped.substr(F.lit(2), F.length(wrapped) - 2)


def _escape_non_bmp(text: Column) -> Column:
    """JSON text with each character outside the BMP as its two escaped surrogates (``\\uD83D\\uDE00``).

    Why: Java's JsonConverter (Jackson's UTF-8 generator) escapes them, as ``runtime/storage/java_json``
    does, while Spark's ``to_json`` writes them raw. Without a code-point function in Spark SQL, the
    text's UTF-16 code units go through hex: each surrogate unit ``DXYZ`` becomes the hex of the six
    characters ``\\uDXYZ`` (a digit ``d`` is ``003d``, a letter ``004n``), marked with ``G`` (never a hex
    digit) between the two steps. ``\\G`` keeps the match on 4-digit unit boundaries. Only texts that
    hold such a character pay for it.
    """
    units = F.hex(F.encode(text, "UTF-16BE"))
    marked = F.regexp_replace(
        units, r"\G((?:[0-9A-F]{4})*?)D([89A-F])([0-9A-F])([0-9A-F])", "$1005C00750044G$2G$3G$4"
    )
    marked = F.regexp_replace(marked, "G([0-9])", "003$1")
    for n, letter in enumerate("ABCDEF", 1):
        marked = F.regexp_replace(marked, "G" + letter, f"004{n}")
    escaped = F.decode(F.unhex(marked), "UTF-16BE")
    return F.when(text.rlike("[\\x{10000}-\\x{10FFFF}]"), escaped).otherwise(text)


# ----------------------------------------------------------------------------------------- converters


#: How many schema objects' envelope JSON a JsonConverter keeps written (Java's ``schemas.cache.size``
#: default).
SCHEMA_TEXT_CACHE = 1000


class Converter(ABC):
    """Apache Kafka Connect's Converter: configure once, then convert keys or values both ways."""

    java_class: ClassVar[str]

    def __init__(self) -> None:
        self.is_key = False

    @abstractmethod
    def config_def(self) -> ConfigDef:
        """The keys this converter accepts, as Apache Kafka Connect's converter of the same class defines
        them, so that ``configure``, validation and the plugin listing use Java's keys."""
        ...

    def configure(self, props: Mapping[str, Any], is_key: bool) -> None:
        """Parse ``props`` (Java's keys); ConfigValidationError names the key, value and what is allowed."""
        self.is_key = is_key
        self._configure(self.config_def().parse({**props, "converter.type": "key" if is_key else "value"}))

    def _configure(self, parsed: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        pass

    @abstractmethod
    def to_connect(self, data: bytes | None, topic: str = "") -> SchemaAndValue:
        """Java's ``toConnectData`` for one record's bytes: the record-by-record reference of what a key or
        value means, which the tests hold the column path (``to_columns``) to."""
        ...

    @abstractmethod
    def from_connect(self, value: Any, schema: ConnectSchema | None = None, topic: str = "") -> bytes | None:
        """Java's ``fromConnectData`` for one value: how a source record's key or value is serialized in
        Python, one record at a time, before it is produced."""
        ...

    @abstractmethod
    def to_columns(self, df: DataFrame, column: str, schema: ConnectSchema | None = None) -> DataFrame:
        """Replace BINARY ``column`` with its typed form and add ``error_column(column)``."""

    @abstractmethod
    def from_column(self, c: Column, schema: ConnectSchema | None) -> Column:
        """A typed column (whose Connect schema is ``schema``) as BINARY, as Java serializes it."""

    def from_columns(self, df: DataFrame, column: str) -> DataFrame:
        """Replace typed ``column`` with the BINARY Java would produce for it."""
        return df.withColumn(column, self.from_column(F.col(column), connect_schema_of(df, column)))

    @property
    def reads_batch(self) -> bool:
        """Whether ``to_columns`` (given no schema) runs a Spark job over the frame to learn a schema from
        its records, which a streaming frame cannot have run on it: see ``sink_batch.prepared_on_stream``."""
        return False


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
_SCHEMA_SPELLINGS = 16


class JsonConverter(Converter):
    """Apache Kafka Connect's JsonConverter: the ``{"schema", "payload"}`` envelope (or the bare payload
    with ``schemas.enable=false``) in Java's exact bytes, so that Java and kconnect workers can share
    topics."""

    java_class = "org.apache.kafka.connect.json.JsonConverter"

    def __init__(self) -> None:
        super().__init__()
        self.schemas_enable = True
        self.decimal_numeric = False
        self.replace_null_with_default = True
        #: ``schema.content`` (KIP-1054), parsed: the schema every record is read with (None: each
        #: record's envelope says).
        self.content_schema: ConnectSchema | None = None
        self._schema_texts: dict[int, tuple[ConnectSchema, str]] = {}

    def config_def(self) -> ConfigDef:
        """Java's JsonConverter keys: ``schemas.enable``, ``schemas.cache.size``, ``schema.content``,
        ``decimal.format``, ``replace.null.with.default`` and ``converter.type``."""
        return converter_config_def(self.java_class)

    def _configure(self, parsed: Mapping[str, Any]) -> None:
        self.schemas_enable = bool(parsed["schemas.enable"])
        fmt = str(parsed["decimal.format"]).upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise ConfigValidationError(
                "decimal.format",
                parsed["decimal.format"],
                "String must be one of (case insensitive): BASE64, NUMERIC",
            )
        self.decimal_numeric = fmt == "NUMERIC"
        self.replace_null_with_default = bool(parsed["replace.null.with.default"])
        content = parsed.get("schema.content")
        self.content_schema = None
        if content:
            try:
                self.content_schema = schema_from_json(java_json.read(str(content)))
            except (ValueError, ConnectDataError) as exc:
                raise ConfigValidationError(
                    "schema.content", content, f"must be a Connect JSON schema ({exc})"
                ) from None
            if self.content_schema is None:
                raise ConfigValidationError(
                    "schema.content", content, "must be a Connect JSON schema, not null"
                )

    # -- record by record

    def to_connect(self, data: bytes | None, topic: str = "") -> SchemaAndValue:
        """One record's JSON read as Java reads it: null or empty bytes are a tombstone, and malformed text
        or an envelope with other fields fails with Java's message."""
        if data is None or len(data) == 0:
            return SchemaAndValue(None, None)
        try:
            node = java_json.read(data, exact=True)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConnectDataError(
                f"Converting byte[] to Kafka Connect data failed due to serialization error: {exc}"
            ) from None
        if not self.schemas_enable:
            return SchemaAndValue(None, from_json_value(None, node))
        if self.content_schema is not None:
            # KIP-1054: the configured schema; the record is an envelope (its payload is read) or the
            # bare payload.
            payload = (
                node["payload"] if isinstance(node, dict) and set(node) == {"schema", "payload"} else node
            )
            value = from_json_value(
                self.content_schema, payload, replace_null_with_default=self.replace_null_with_default
            )
            return SchemaAndValue(self.content_schema, value)
        if not isinstance(node, dict) or set(node) != {"schema", "payload"}:
            raise ConnectDataError(ENVELOPE_ERROR)
        schema = schema_from_json(node["schema"])
        value = from_json_value(
            schema, node["payload"], replace_null_with_default=self.replace_null_with_default
        )
        return SchemaAndValue(schema, value)

    def from_connect(self, value: Any, schema: ConnectSchema | None = None, topic: str = "") -> bytes | None:
        """One value written as Java's JsonConverter writes it: a null value without a schema is a
        tombstone (null bytes), anything else the envelope or bare payload in Java's JSON text."""
        if schema is None and value is None:
            return None
        payload = to_json_value(
            schema,
            value,
            decimal_numeric=self.decimal_numeric,
            replace_null_with_default=self.replace_null_with_default,
        )
        if not self.schemas_enable:
            return java_json.write(payload).encode("utf-8")
        return f'{{"schema":{self._schema_text(schema)},"payload":{java_json.write(payload)}}}'.encode()

    def _schema_text(self, schema: ConnectSchema | None) -> str:
        """The envelope's schema JSON, written once per schema object: a source reuses one schema object
        per table, and writing a wide schema (a Debezium envelope: ~100 nodes) for every record cost five
        times the payload (Java's JsonConverter caches it too, ``schemas.cache.size``). Keyed by identity,
        with the schema held so the id stays its own; the cache is emptied when it reaches its bound."""
        if schema is None:
            return "null"
        cached = self._schema_texts.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        if len(self._schema_texts) >= SCHEMA_TEXT_CACHE:
            self._schema_texts.clear()
        text = java_json.write(schema_to_json(schema))
        self._schema_texts[id(schema)] = (schema, text)
        return text

    # -- Spark frames

    @property
    def reads_batch(self) -> bool:
        # Envelopes name their schema, and without schema.content it is sampled from the batch.
        return self.schemas_enable and self.content_schema is None

    def sample_schema(self, df: DataFrame, column: str) -> tuple[ConnectSchema | None, frozenset[str]]:
        """The batch's envelope schema when none is given, and every spelling of it the batch holds.

        One Spark job: the first record's schema text and the distinct texts. Producers other than Java
        write the same schema with its keys in another order or with other spacing; each text is parsed
        here and the ones meaning the first record's schema are accepted, so that only records naming
        another schema are errors (one frame has one Spark type).
        """
        texts = (
            df.where(F.col(column).isNotNull())
            .select(F.get_json_object(F.col(column).cast("string"), "$.schema").alias("s"))
            .where(F.col("s").isNotNull())
        )
        row = texts.agg(F.first("s"), F.slice(F.collect_set("s"), 1, _SCHEMA_SPELLINGS)).first()
        if row is None or row[0] is None:
            return None, frozenset()
        parsed: list[tuple[str, ConnectSchema]] = []
        for text in [row[0], *row[1]]:
            try:
                found = schema_from_json(java_json.read(text))
            except (ValueError, ConnectDataError):
                continue
            if found is not None:
                parsed.append((str(text), found))
        if not parsed or parsed[0][0] != row[0]:
            return None, frozenset()
        first = parsed[0][1]
        return first, frozenset(text for text, schema in parsed if schema == first)

    def infer_schema(self, df: DataFrame, column: str) -> ConnectSchema | None:
        """A schema for schemaless JSON, inferred over every record of the batch by Spark's JSON reader.

        Opt-in: pass the result to ``to_columns`` so transforms that need a struct (InsertField, Cast,
        ...) work on schemaless records too. Every field is optional (a record may lack it); integers
        are int64 and other numbers float64, as Java reads schemaless numbers. The inference is one
        more pass over the batch, in the JVM. None when no record holds a JSON value.
        """
        spark = df.sparkSession
        text = F.col(column).cast("string")
        if self.schemas_enable:
            text = F.get_json_object(text, "$.payload")
        wrapped = df.where(F.col(column).isNotNull() & (F.length(F.col(column)) > 0)).select(
            F.concat(F.lit('{"p":'), text, F.lit("}")).alias("value")
        )
        jvm = spark._jvm
        assert jvm is not None
        strings = getattr(wrapped._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
        inferred = StructType.fromJson(json.loads(spark._jsparkSession.read().json(strings).schema().json()))
        found = [f for f in inferred.fields if f.name == "p"]
        if not found:
            return None
        return derive_schema(found[0].dataType, True)

    def to_columns(self, df: DataFrame, column: str, schema: ConnectSchema | None = None) -> DataFrame:
        """Typed ``column`` from JSON bytes: the envelope's payload (schemas.enable) or the plain JSON.

        With ``schema`` None and schemas.enable, the schema is taken from the first record; records whose
        envelope names another schema are errors (one frame has one Spark type). Without schemas and
        without ``schema``, the JSON text is kept as a string column (schemaless, as Java's maps).
        """
        raw = F.col(column)
        text = raw.cast("string")
        err = error_column(column)
        spellings: frozenset[str] = frozenset()
        content = self.schemas_enable and self.content_schema is not None and schema is None
        if content:
            schema = self.content_schema
        elif schema is None and self.schemas_enable:
            schema, spellings = self.sample_schema(df, column)
        if schema is None:
            if self.schemas_enable:
                # No record names a schema: every value is null or a schemaless envelope.
                payload = F.get_json_object(text, "$.payload")
                keys_ok = _is_envelope(text)
                present = raw.isNotNull() & (F.length(raw) > 0)
                # Bytes that are not JSON at all are a serialization error, as Java reports them.
                error = F.when(
                    present & F.json_object_keys(F.concat(F.lit('{"p":'), text, F.lit("}"))).isNull(),
                    F.lit(_MALFORMED),
                ).when(present & ~F.coalesce(keys_ok, F.lit(False)), F.lit(ENVELOPE_ERROR))
                typed = F.when(error.isNull(), payload)
            else:
                typed = F.when(F.length(raw) > 0, text)
                error = F.when(
                    raw.isNotNull()
                    & (F.length(raw) > 0)
                    & F.json_object_keys(F.concat(F.lit('{"p":'), text, F.lit("}"))).isNull(),
                    F.lit(_MALFORMED),
                )
                typed = F.when(error.isNull(), typed)
            # Both from the input frame at once: the error reads the raw bytes the typed column replaces.
            return df.withColumns({column: typed, err: error}).withColumn(
                column, F.col(column).alias(column, metadata={"connect.schemaless": True})
            )
        read_type = StructType(
            [
                StructField("payload", _json_read_type(schema, self.decimal_numeric), True),
                StructField(_CORRUPT, StringType(), True),
            ]
        )
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": _CORRUPT}
        if content:
            # KIP-1054: an envelope is read for its payload, anything else as the bare payload.
            enveloped = _is_envelope(text)
            wrapped = F.when(F.coalesce(enveloped, F.lit(False)), text).otherwise(
                F.concat(F.lit('{"payload":'), text, F.lit("}"))
            )
            keys_ok = F.lit(True)
            schema_ok = F.lit(True)
        elif self.schemas_enable:
            wrapped = text
            keys_ok = _is_envelope(text)
            expected = java_json.write(schema_to_json(schema))
            # A schemaless envelope ("schema": null) is read with the given schema too.
            record_schema = F.get_json_object(text, "$.schema")
            schema_ok = record_schema.isNull() | record_schema.isin(sorted(spellings | {expected}))
        else:
            wrapped = F.concat(F.lit('{"payload":'), text, F.lit("}"))
            keys_ok = F.lit(True)
            schema_ok = F.lit(True)
        tmp = f"__kc_parsed_{column}"
        staged = df.withColumn(tmp, F.from_json(wrapped, read_type, options))
        parsed = F.col(tmp)
        present = raw.isNotNull() & (F.length(raw) > 0)
        null_payload = parsed["payload"].isNull() & parsed[_CORRUPT].isNull()
        what = schema.name or schema.type
        error = (
            F.when(~present, F.lit(None))
            .when(F.json_object_keys(wrapped).isNull(), F.lit(_MALFORMED))
            .when(~F.coalesce(keys_ok, F.lit(False)), F.lit(ENVELOPE_ERROR))
            .when(
                ~F.coalesce(schema_ok, F.lit(False)),
                F.lit(f"Record's schema differs from this batch's schema ({what}); one frame holds one type"),
            )
            .when(
                parsed[_CORRUPT].isNotNull(),
                F.lit(
                    f"Converting byte[] to Kafka Connect data failed: the payload does not fit schema {what}"
                ),
            )
            .when(
                null_payload & F.lit(not schema.optional and schema.default is None),
                F.lit(f"Invalid null value for required {schema.type.upper()} field"),
            )
        )
        staged = staged.withColumn(err, error)
        typed = F.when(F.col(err).isNull(), _decode(parsed["payload"], schema, self.decimal_numeric))
        return staged.withColumn(column, with_schema(typed, column, schema)).drop(tmp)

    def from_column(self, c: Column, schema: ConnectSchema | None) -> Column:
        """A typed column as Java's JSON bytes, from column expressions only: the schema text is computed
        once for the batch and concatenated, and a null value stays null (a tombstone)."""
        if schema is None:
            # Schemaless: the column holds JSON text already.
            body = c.cast("string")
            out = (
                F.concat(F.lit('{"schema":null,"payload":'), body, F.lit("}"))
                if self.schemas_enable
                else body
            )
            return F.when(c.isNotNull(), out.cast("binary"))
        payload = _json_text(_encode(c, schema, self.decimal_numeric))
        if self.schemas_enable:
            out = F.concat(
                F.lit('{"schema":' + java_json.write(schema_to_json(schema)) + ',"payload":'),
                payload,
                F.lit("}"),
            )
        else:
            out = payload
        # A null value is a tombstone: Java reads one as (null schema, null value) and writes it back as null.
        return F.when(c.isNotNull(), out.cast("binary"))


_CLASSES: Final[dict[str, type[Converter]]] = {
    "json": JsonConverter,
    "string": StringConverter,
    "bytearray": ByteArrayConverter,
}


#: The registration hook for converters in modules of their own, imported when first named (they import
#: this module): alias -> "module:class".
PLUGGED: Final[dict[str, str]] = {
    "avro": "kconnect.runtime.dataplane.schema_registry.avro_converter:AvroConverter",
    "protobuf": "kconnect.runtime.dataplane.schema_registry.protobuf_converter:ProtobufConverter",
    "json-schema": "kconnect.runtime.dataplane.schema_registry.json_schema_converter:JsonSchemaConverter",
}


def new_converter(name: str) -> Converter:
    """A converter by Apache Kafka Connect class name or kconnect alias (``config/classes.py``)."""
    alias = resolve_alias(name, CONVERTERS)
    if alias is None:
        allowed = ", ".join([*CONVERTERS, *_CLASSES])
        raise ConfigValidationError(message=f"Invalid converter class {name}: supported are {allowed}")
    if alias in PLUGGED:
        module, _, cls = PLUGGED[alias].partition(":")
        plugged: type[Converter] = getattr(importlib.import_module(module), cls)
        return plugged()
    return _CLASSES[alias]()


def converter_from_config(config: Mapping[str, str], key: str, is_key: bool) -> Converter:
    """The converter ``config[key]`` names (``key.converter``/``value.converter``), configured with its
    ``<key>.`` prefixed properties, as Java configures a connector's converter overrides."""
    if key not in config:
        raise ConfigValidationError(
            key, None, message=f'Missing required configuration "{key}" which has no default value.'
        )
    try:
        converter = new_converter(config[key])
    except ConfigValidationError:
        raise ConfigValidationError(
            key, config[key], f"Class {config[key]} could not be found; supported: " + ", ".join(CONVERTERS)
        ) from None
    prefix = key + "."
    converter.configure({k[len(prefix) :]: v for k, v in config.items() if k.startswith(prefix)}, is_key)
    return converter


def _epoch_date() -> Column:
    # A function, not a module constant: building a Column needs an active SparkContext.
    return F.lit("1970-01-01").cast("date")


def converter_config(worker_defaults: Mapping[str, str], task_config: Mapping[str, str]) -> dict[str, str]:
    """The converter settings a task uses: worker ones, overridden by the connector's (Java's rule).

    A connector that names its own ``value.converter`` drops the worker's ``value.converter.*`` settings,
    since they were meant for another class.
    """
    merged: dict[str, str] = {}
    for side in ("key", "value"):
        prefix = f"{side}.converter"
        source = task_config if prefix in task_config else worker_defaults
        merged.update({k: v for k, v in source.items() if k == prefix or k.startswith(prefix + ".")})
        if source is not task_config:
            merged.update({k: v for k, v in task_config.items() if k.startswith(prefix + ".")})
    return merged
