"""Apache Kafka Connect's data model (schemas, logical types) and its JSON envelope, as pure Python.

Connector configs written for Apache Kafka Connect exchange records with Java workers through topics,
so the JSON that kconnect writes must be the JSON Java's ``JsonConverter`` writes, byte for byte: the
schema object's key order (``type``, then ``fields``/``items``/``keys``+``values``, ``optional``,
``default``, ``name``, ``version``, ``doc``, ``parameters``, ``field``), Java's number formatting
(``1.0E10``) and Jackson's string escapes. This module builds the JSON tree (:func:`to_json_value`,
:func:`schema_to_json`); ``runtime/codecs/java_json`` writes it as Jackson does and reads it back.
``tests/golden/converters.txt`` holds Java's own output.

Python values per Connect type: int for int8..int64, float for float32/float64, bool, str, bytes,
list, dict (struct fields in schema order; maps), ``decimal.Decimal`` for Decimal, ``datetime.date`` for
Date, ``datetime.time`` for Time and an aware UTC ``datetime.datetime`` for Timestamp.
"""

from __future__ import annotations

import base64
import datetime as dt
import decimal
import functools
import json
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from kconnect.runtime.codecs.java_json import Float32

__all__ = [
    "DATE",
    "DECIMAL",
    "PRIMITIVE_TYPES",
    "TIME",
    "TIMESTAMP",
    "ConnectDataError",
    "ConnectField",
    "ConnectSchema",
    "SchemaAndValue",
    "decimal_schema",
    "from_json_value",
    "schema_from_json",
    "schema_to_json",
    "to_json_value",
]

DECIMAL: Final = "org.apache.kafka.connect.data.Decimal"
DATE: Final = "org.apache.kafka.connect.data.Date"
TIME: Final = "org.apache.kafka.connect.data.Time"
TIMESTAMP: Final = "org.apache.kafka.connect.data.Timestamp"
SCALE_PARAMETER: Final = "scale"
PRIMITIVE_TYPES: Final = ("int8", "int16", "int32", "int64", "float", "double", "boolean", "string", "bytes")
_ALL_TYPES: Final = (*PRIMITIVE_TYPES, "array", "map", "struct")
_INT_BITS: Final = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_LOGICAL: Final = frozenset({DECIMAL, DATE, TIME, TIMESTAMP})
_LONG_MIN: Final = -(2**63)
_LONG_MAX: Final = 2**63 - 1
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_EPOCH_DAY: Final = dt.date(1970, 1, 1)
_NON_FINITE_TEXT: Final = frozenset({"NaN", "Infinity", "-Infinity"})
# Java's BigDecimal has no precision limit; the default context's 28 digits would round (or refuse) the
# decimals of Decimal schemas with more digits, so their scaling runs exactly.
_EXACT: Final = decimal.Context(prec=decimal.MAX_PREC, Emax=decimal.MAX_EMAX, Emin=decimal.MIN_EMIN)


class ConnectDataError(ValueError):
    """Java's ``DataException``: a value does not fit its schema, or bytes are not what a converter reads."""


@dataclass(frozen=True)
class ConnectField:
    """Java's ``Field``: a struct's fields are a sequence of these, not a dict, because their order is the
    order Java's ``JsonConverter`` writes them and the order of the struct's values."""

    name: str
    schema: ConnectSchema


@dataclass(frozen=True)
class ConnectSchema:
    """One Connect schema; ``type`` is the envelope's spelling (``float`` is FLOAT32, ``double`` FLOAT64).

    ``default`` of None means "no default", as in Java (a null default cannot be told apart there either).
    """

    type: str
    optional: bool = False
    default: Any = field(default=None, compare=True, hash=False)
    name: str | None = None
    version: int | None = None
    doc: str | None = None
    parameters: tuple[tuple[str, str], ...] | None = None
    fields: tuple[ConnectField, ...] = ()
    items: ConnectSchema | None = None
    keys: ConnectSchema | None = None
    values: ConnectSchema | None = None

    def __post_init__(self) -> None:
        if self.type not in _ALL_TYPES:
            raise ConnectDataError(f"Unknown schema type: {self.type}")

    @functools.cached_property
    def field_names(self) -> frozenset[str]:
        """A struct's field names, computed once: every struct value written is checked against them."""
        return frozenset(f.name for f in self.fields)

    def field(self, name: str) -> ConnectField | None:
        """Java's ``Schema.field(name)``: the named struct field or None, for transforms and sinks that
        address fields by name."""
        return next((f for f in self.fields if f.name == name), None)

    @property
    def params(self) -> dict[str, str]:
        """The parameters as a dict for lookups; the field itself stays a tuple of pairs so that the frozen
        schema stays hashable and keeps the order the parameters were written in."""
        return dict(self.parameters or ())

    @property
    def scale(self) -> int:
        """The Decimal logical type's ``scale`` parameter: how many digits of the unscaled integer are
        fractional, when encoding and when reading back; 0 when the parameter is missing."""
        return int(self.params.get(SCALE_PARAMETER, "0"))

    def with_optional(self, optional: bool) -> ConnectSchema:
        """The same schema with only ``optional`` changed, for transforms that decide a field's optionality
        (InsertField's ``!``/``?`` suffixes, Flatten making fields under an optional struct optional)."""
        return _replace(self, optional=optional)


def _replace(schema: ConnectSchema, **changes: Any) -> ConnectSchema:
    values = {f: getattr(schema, f) for f in schema.__dataclass_fields__}
    values.update(changes)
    return ConnectSchema(**values)


def decimal_schema(scale: int, optional: bool = False) -> ConnectSchema:
    """Java's ``Decimal.schema(scale)`` (bytes, the Decimal name, version 1, the ``scale`` parameter),
    built in one place so that every Decimal schema kconnect emits matches Java's envelope."""
    return ConnectSchema(
        "bytes", optional, name=DECIMAL, version=1, parameters=((SCALE_PARAMETER, str(scale)),)
    )


@dataclass(frozen=True)
class SchemaAndValue:
    """Java's ``SchemaAndValue``: what a converter's ``to_connect`` returns; the schema is None when the
    data carries none (schemaless JSON, or a null)."""

    schema: ConnectSchema | None
    value: Any


# ---------------------------------------------------------------------------------------------- schemas


def schema_to_json(schema: ConnectSchema | None, replace_null_with_default: bool = True) -> Any:
    """The schema as Java's ``JsonConverter.asJsonSchema`` builds it (a dict, keys in Java's order)."""
    if schema is None:
        return None
    out: dict[str, Any] = {"type": schema.type}
    if schema.type == "struct":
        out["fields"] = [
            {**schema_to_json(f.schema, replace_null_with_default), "field": f.name} for f in schema.fields
        ]
    elif schema.type == "array":
        out["items"] = schema_to_json(schema.items)
    elif schema.type == "map":
        out["keys"] = schema_to_json(schema.keys)
        out["values"] = schema_to_json(schema.values)
    out["optional"] = schema.optional
    if schema.default is not None:
        out["default"] = to_json_value(schema, schema.default)
    if schema.name is not None:
        out["name"] = schema.name
    if schema.version is not None:
        out["version"] = schema.version
    if schema.doc is not None:
        out["doc"] = schema.doc
    if schema.parameters is not None:
        out["parameters"] = dict(schema.parameters)
    return out


def schema_from_json(node: Any) -> ConnectSchema | None:
    """Java's ``asConnectSchema``: a schema object from an envelope (None for JSON null)."""
    if node is None:
        return None
    if not isinstance(node, Mapping):
        raise ConnectDataError(f"Schema must be a JSON object, got {_json_kind(node)}")
    type_ = node.get("type")
    if not isinstance(type_, str):
        raise ConnectDataError("Schema must contain 'type' field")
    if type_ not in _ALL_TYPES:
        raise ConnectDataError(f"Unknown schema type: {type_}")
    fields: tuple[ConnectField, ...] = ()
    items = keys = values = None
    if type_ == "struct":
        raw_fields = node.get("fields")
        if not isinstance(raw_fields, list):
            raise ConnectDataError('Struct schema\'s "fields" argument is not an array.')
        parsed = []
        for f in raw_fields:
            name = f.get("field") if isinstance(f, Mapping) else None
            if not isinstance(name, str):
                raise ConnectDataError("Struct schema's field name not specified properly")
            sub = schema_from_json(f)
            assert sub is not None
            parsed.append(ConnectField(name, sub))
        fields = tuple(parsed)
    elif type_ == "array":
        if node.get("items") is None:
            raise ConnectDataError("Array schema did not specify the element type")
        items = schema_from_json(node["items"])
    elif type_ == "map":
        if node.get("keys") is None or node.get("values") is None:
            raise ConnectDataError("Map schema did not specify the key and value types")
        keys, values = schema_from_json(node["keys"]), schema_from_json(node["values"])
    params = node.get("parameters")
    if params is not None and not isinstance(params, Mapping):
        raise ConnectDataError("Schema parameters must be a JSON object")
    version = node.get("version")
    schema = ConnectSchema(
        type_,
        optional=node.get("optional") is True,
        name=node.get("name") if isinstance(node.get("name"), str) else None,
        version=version if isinstance(version, int) and not isinstance(version, bool) else None,
        doc=node.get("doc") if isinstance(node.get("doc"), str) else None,
        parameters=tuple((str(k), str(v)) for k, v in params.items()) if params is not None else None,
        fields=fields,
        items=items,
        keys=keys,
        values=values,
    )
    if node.get("default") is not None:
        schema = _replace(schema, default=from_json_value(schema, node["default"]))
    return schema


# ----------------------------------------------------------------------------------------------- values


def _json_kind(node: Any) -> str:
    if node is None:
        return "null"
    if isinstance(node, bool):
        return "boolean"
    if isinstance(node, int | float | decimal.Decimal):
        return "number"
    if isinstance(node, str):
        return "string"
    if isinstance(node, list):
        return "array"
    return "object"


def _unscaled_bytes(value: decimal.Decimal, scale: int) -> bytes:
    shifted = value.scaleb(scale, context=_EXACT)
    if shifted != shifted.to_integral_value():
        raise ConnectDataError(f"BigDecimal has mismatching scale value for given Decimal schema: {value}")
    unscaled = int(shifted)
    length = max(1, (unscaled + (unscaled < 0)).bit_length() // 8 + 1)
    return unscaled.to_bytes(length, "big", signed=True)


def to_json_value(
    schema: ConnectSchema | None,
    value: Any,
    *,
    decimal_numeric: bool = False,
    replace_null_with_default: bool = True,
) -> Any:
    """A Connect value as the JSON tree Java's ``convertToJson`` makes (numbers keep their Connect type)."""
    return _to_json(schema, value, decimal_numeric, replace_null_with_default)


def _to_json(schema: ConnectSchema | None, value: Any, decimal_numeric: bool, replace_null: bool) -> Any:
    """``to_json_value`` with positional flags: it runs for every field of every record a converter
    writes (a Debezium envelope: ~25 calls), so the common types are tested first and logical types
    (named schemas) once by set membership."""
    if value is None:
        if schema is not None and schema.default is not None and replace_null:
            value = schema.default
        if value is None:
            if schema is not None and not schema.optional:
                raise ConnectDataError(
                    "Conversion error: null value for field that is required and has no default"
                )
            return None
    if schema is None:
        return _schemaless_to_json(value)
    name = schema.name
    if name is not None and name in _LOGICAL:
        return _logical_to_json(schema, name, value, decimal_numeric)
    t = schema.type
    if t == "string":
        if not isinstance(value, str):
            raise ConnectDataError(f"Invalid Java object for schema type STRING: {type(value).__name__}")
        return value
    if t == "struct":
        if not isinstance(value, Mapping):
            raise ConnectDataError(f"Invalid Java object for schema type STRUCT: {type(value).__name__}")
        names = schema.field_names
        if not names.issuperset(value):
            raise ConnectDataError(f"{sorted(set(value) - names)[0]} is not a valid field name")
        return _struct_to_json(schema, value, decimal_numeric, replace_null)
    bits = _INT_BITS.get(t)
    if bits is not None:
        if not isinstance(value, int) or isinstance(value, bool):
            raise ConnectDataError(f"Invalid Java object for schema type {t.upper()}: {type(value).__name__}")
        if not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise ConnectDataError(f"Value {value} is out of range for schema type {t.upper()}")
        return value
    if t in ("float", "double"):
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise ConnectDataError(f"Invalid Java object for schema type {t.upper()}: {type(value).__name__}")
        return Float32(float(value)) if t == "float" else float(value)
    if t == "boolean":
        if not isinstance(value, bool):
            raise ConnectDataError(f"Invalid Java object for schema type BOOLEAN: {type(value).__name__}")
        return value
    if t == "bytes":
        if not isinstance(value, bytes | bytearray | memoryview):
            raise ConnectDataError(f"Invalid Java object for schema type BYTES: {type(value).__name__}")
        return base64.b64encode(bytes(value)).decode("ascii")
    if t == "array":
        if not isinstance(value, Sequence) or isinstance(value, str | bytes):
            raise ConnectDataError(f"Invalid Java object for schema type ARRAY: {type(value).__name__}")
        return [_to_json(schema.items, v, decimal_numeric, replace_null) for v in value]
    # map
    if not isinstance(value, Mapping):
        raise ConnectDataError(f"Invalid Java object for schema type MAP: {type(value).__name__}")
    assert schema.keys is not None
    if schema.keys.type == "string" and schema.keys.name is None:
        return {k: _to_json(schema.values, v, decimal_numeric, replace_null) for k, v in value.items()}
    # Java writes maps with non-string keys as an array of [key, value] pairs.
    return [
        [
            _to_json(schema.keys, k, decimal_numeric, replace_null),
            _to_json(schema.values, v, decimal_numeric, replace_null),
        ]
        for k, v in value.items()
    ]


def _struct_to_json(
    schema: ConnectSchema, value: Mapping[str, Any], decimal_numeric: bool, replace_null: bool
) -> dict[str, Any]:
    """A struct's members; the leaves most records are made of (a string, a plain integer in range, a
    null in an optional field without default) are taken as they are, without a call each."""
    out: dict[str, Any] = {}
    get = value.get
    for f in schema.fields:
        v = get(f.name)
        s = f.schema
        kind = type(v)
        if kind is str and s.type == "string":
            out[f.name] = v
        elif v is None and s.optional and s.default is None:
            out[f.name] = None
        elif kind is int and s.name is None and s.type == "int64" and _LONG_MIN <= v <= _LONG_MAX:  # type: ignore[operator]
            out[f.name] = v
        else:
            out[f.name] = _to_json(s, v, decimal_numeric, replace_null)
    return out


def _logical_to_json(schema: ConnectSchema, name: str, value: Any, decimal_numeric: bool) -> Any:
    if name == DECIMAL:
        if not isinstance(value, decimal.Decimal | int):
            raise ConnectDataError(f"Invalid type for Decimal: {type(value).__name__}")
        number = decimal.Decimal(value)
        if decimal_numeric:
            return number.quantize(decimal.Decimal(1).scaleb(-schema.scale), context=_EXACT)
        return base64.b64encode(_unscaled_bytes(number, schema.scale)).decode("ascii")
    if name == DATE:
        if not isinstance(value, dt.date) or isinstance(value, dt.datetime):
            raise ConnectDataError(f"Invalid type for Date: {type(value).__name__}")
        return (value - _EPOCH_DAY).days
    if name == TIME:
        if not isinstance(value, dt.time):
            raise ConnectDataError(f"Invalid type for Time: {type(value).__name__}")
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    # TIMESTAMP
    if not isinstance(value, dt.datetime):
        raise ConnectDataError(f"Invalid type for Timestamp: {type(value).__name__}")
    aware = value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)
    delta = aware - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def _schemaless_to_json(value: Any) -> Any:
    if isinstance(value, bool | str | int | float) or value is None:
        return value
    if isinstance(value, decimal.Decimal):
        return value
    if isinstance(value, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, Mapping):
        if all(isinstance(k, str) for k in value):
            return {k: _schemaless_to_json(v) for k, v in value.items()}
        return [[_schemaless_to_json(k), _schemaless_to_json(v)] for k, v in value.items()]
    if isinstance(value, Sequence):
        return [_schemaless_to_json(v) for v in value]
    raise ConnectDataError(f"Couldn't convert {type(value).__name__} to JSON.")


def from_json_value(
    schema: ConnectSchema | None, node: Any, *, replace_null_with_default: bool = True
) -> Any:
    """Java's ``convertToConnect``: a JSON tree (numbers as Decimal or int) read as a value of ``schema``."""
    if node is None:
        if schema is None:
            return None
        if schema.default is not None and replace_null_with_default:
            return schema.default
        if schema.optional:
            return None
        raise ConnectDataError(f"Invalid null value for required {schema.type.upper()} field")
    if schema is None:
        return _schemaless_from_json(node)
    kind = _json_kind(node)

    def mismatch() -> ConnectDataError:
        what = schema.name or schema.type.upper()
        return ConnectDataError(
            f"Invalid JSON {kind} for schema type {what}: {json.dumps(node, default=str)}"
        )

    if schema.name == DECIMAL:
        if kind == "number":
            return decimal.Decimal(node).quantize(decimal.Decimal(1).scaleb(-schema.scale), context=_EXACT)
        if kind != "string":
            raise mismatch()
        raw = _b64decode(node)
        return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-schema.scale, context=_EXACT)
    if schema.name in (DATE, TIME, TIMESTAMP):
        if kind != "number" or not isinstance(node, int) or isinstance(node, bool):
            raise mismatch()
        if schema.name == DATE:
            return _EPOCH_DAY + dt.timedelta(days=node)
        if schema.name == TIME:
            if not 0 <= node < 86_400_000:
                raise ConnectDataError(f"Time values must be between 0 and 86400000 milliseconds: {node}")
            ms = node
            return dt.time(ms // 3_600_000, ms // 60_000 % 60, ms // 1000 % 60, ms % 1000 * 1000)
        return _EPOCH + dt.timedelta(milliseconds=node)
    t = schema.type
    if t in _INT_BITS:
        if not isinstance(node, int) or isinstance(node, bool):
            raise mismatch()
        bits = _INT_BITS[t]
        if not -(2 ** (bits - 1)) <= node < 2 ** (bits - 1):
            raise ConnectDataError(f"Value {node} is out of range for schema type {t.upper()}")
        return node
    if t in ("float", "double"):
        if isinstance(node, str) and node in _NON_FINITE_TEXT:
            node = float(node)  # Jackson writes a NaN or an infinity as a string; read it back as one
        elif kind != "number" or isinstance(node, bool):
            raise mismatch()
        if t == "float":  # Java's floatValue(): the nearest float32
            return struct.unpack(">f", struct.pack(">f", float(node)))[0]
        return float(node)
    if t == "boolean":
        if not isinstance(node, bool):
            raise mismatch()
        return node
    if t == "string":
        if not isinstance(node, str):
            raise mismatch()
        return node
    if t == "bytes":
        if not isinstance(node, str):
            raise mismatch()
        return _b64decode(node)
    kw = {"replace_null_with_default": replace_null_with_default}
    if t == "array":
        if not isinstance(node, list):
            raise mismatch()
        return [from_json_value(schema.items, v, **kw) for v in node]
    if t == "map":
        assert schema.keys is not None
        if schema.keys.type == "string" and schema.keys.name is None:
            if not isinstance(node, dict):
                raise mismatch()
            return {k: from_json_value(schema.values, v, **kw) for k, v in node.items()}
        if not isinstance(node, list) or not all(isinstance(p, list) and len(p) == 2 for p in node):
            raise ConnectDataError("Maps with non-string fields should be encoded as JSON array of tuples")
        return {
            from_json_value(schema.keys, p[0], **kw): from_json_value(schema.values, p[1], **kw) for p in node
        }
    if not isinstance(node, dict):
        raise mismatch()
    return {f.name: from_json_value(f.schema, node.get(f.name), **kw) for f in schema.fields}


def _b64decode(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=True)
    except ValueError as exc:
        raise ConnectDataError(f"Invalid bytes field: not base64 ({exc})") from None


def _schemaless_from_json(node: Any) -> Any:
    # Java reads integral numbers as Long and others as Double when no schema says otherwise.
    if isinstance(node, decimal.Decimal):
        return float(node)
    if isinstance(node, list):
        return [_schemaless_from_json(v) for v in node]
    if isinstance(node, dict):
        return {k: _schemaless_from_json(v) for k, v in node.items()}
    return node
