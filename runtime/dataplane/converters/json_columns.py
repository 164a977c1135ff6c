"""Spark column expressions between Java's JSON text and typed columns, for :class:`JsonConverter`.

Why separate: these are the expressions that run inside the JVM (decimals as base64, Java's escapes for
characters outside the BMP, the envelope test); the converter class only chooses among them.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    DataType,
    DecimalType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
)

from kconnect.runtime.dataplane.connect_data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    ConnectDataError,
    ConnectSchema,
)
from kconnect.runtime.dataplane.converters.schema_columns import spark_type

__all__ = [
    "CORRUPT_COLUMN",
    "ENVELOPE_ERROR",
    "MALFORMED",
    "decode_json",
    "encode_json",
    "is_envelope",
    "json_read_type",
    "json_text",
]


#: Java's message for an envelope that is not exactly {"schema", "payload"} (from JsonConverter 3.9).
ENVELOPE_ERROR: Final = (
    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain additional '
    "fields. If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter "
    "configuration."
)
CORRUPT_COLUMN: Final = "__kc_corrupt"
MALFORMED: Final = "Converting byte[] to Kafka Connect data failed due to serialization error: malformed JSON"


# ------------------------------------------------------------------ Spark expressions: JSON <-> typed


def json_read_type(schema: ConnectSchema, decimal_numeric: bool) -> DataType:
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
        return ArrayType(json_read_type(schema.items, decimal_numeric), True)
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        if schema.keys.type != "string" or schema.keys.name is not None:
            raise ConnectDataError(
                "maps with non-string keys (Java writes them as arrays of pairs) are not supported in Spark "
                "frames"
            )
        return MapType(StringType(), json_read_type(schema.values, decimal_numeric), True)
    if schema.type == "struct":
        return StructType(
            [StructField(f.name, json_read_type(f.schema, decimal_numeric), True) for f in schema.fields]
        )
    return spark_type(schema)


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


def decode_json(c: Column, schema: ConnectSchema, decimal_numeric: bool) -> Column:
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
        out = F.transform(c, lambda x: decode_json(x, items, decimal_numeric))
    elif schema.type == "map" and _needs_codec(schema):
        values = schema.values
        assert values is not None
        out = F.transform_values(c, lambda _k, v: decode_json(v, values, decimal_numeric))
    elif schema.type == "struct" and _needs_codec(schema):
        fields = [decode_json(c[f.name], f.schema, decimal_numeric).alias(f.name) for f in schema.fields]
        out = F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*fields))
    else:
        out = c
    if schema.default is not None:
        out = F.coalesce(out, F.lit(schema.default).cast(spark_type(schema)))
    return out


def encode_json(c: Column, schema: ConnectSchema, decimal_numeric: bool) -> Column:
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
        out = F.transform(c, lambda x: encode_json(x, items, decimal_numeric))
    elif schema.type == "map" and _needs_codec(schema):
        values = schema.values
        assert values is not None
        out = F.transform_values(c, lambda _k, v: encode_json(v, values, decimal_numeric))
    elif schema.type == "struct" and _needs_codec(schema):
        fields = [encode_json(c[f.name], f.schema, decimal_numeric).alias(f.name) for f in schema.fields]
        out = F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*fields))
    else:
        out = c
    if schema.default is not None:
        out = F.coalesce(
            out,
            encode_json(F.lit(schema.default).cast(spark_type(schema)), _no_default(schema), decimal_numeric),
        )
    return out


def _no_default(schema: ConnectSchema) -> ConnectSchema:
    values = {f: getattr(schema, f) for f in schema.__dataclass_fields__}
    values["default"] = None
    return ConnectSchema(**values)


def is_envelope(text: Column) -> Column:
    """Whether JSON ``text`` is an object of exactly the keys ``schema`` and ``payload`` (null when it is
    no JSON object): Java's envelope test, as a column expression."""
    return F.array_sort(F.json_object_keys(text)) == F.array(F.lit("payload"), F.lit("schema"))


def json_text(c: Column) -> Column:
    """Any column as compact JSON text, nulls inside structs kept (Java writes them)."""
    wrapped = _escape_non_bmp(F.to_json(F.array(c), {"ignoreNullFields": "false"}))
    return wrapped.substr(F.lit(2), F.length(wrapped) - 2)


def _escape_non_bmp(text: Column) -> Column:
    """JSON text with each character outside the BMP as its two escaped surrogates (``\\uD83D\\uDE00``).

    Why: Java's JsonConverter (Jackson's UTF-8 generator) escapes them, as ``runtime/codecs/java_json``
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


def _epoch_date() -> Column:
    # A function, not a module constant: building a Column needs an active SparkContext.
    return F.lit("1970-01-01").cast("date")
