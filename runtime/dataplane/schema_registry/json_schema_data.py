"""Connect schemas and values to JSON Schema and back, the way Confluent's ``JsonSchemaData`` maps them.

Why Confluent's spelling: a JSON Schema registered by a Java worker's JsonSchemaConverter must read back
here with the same Connect schema, and ours in Java. Connect's types that JSON does not have travel in
``connect.type`` (int8..int64, float32/float64, bytes, map); a struct's field order in each property's
``connect.index``; names in ``title``, docs in ``description``, versions and parameters in
``connect.version``/``connect.parameters``; an optional schema is ``oneOf`` null and the type. Values
are plain JSON: bytes as base64, Decimal as a JSON number, Date/Time/Timestamp as their int32/int64
Connect encodings. Pure: no I/O.
"""

from __future__ import annotations

import base64
import decimal
from collections.abc import Mapping
from typing import Any, Final

from kconnect.runtime.dataplane.connect_data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    ConnectDataError,
    ConnectField,
    ConnectSchema,
)
from kconnect.runtime.dataplane.schema_registry.logical_ints import (
    LOGICAL_INTS,
    logical_from_int,
    logical_to_int,
)

__all__ = [
    "connect_to_json_schema",
    "from_json_schema_value",
    "json_schema_to_connect",
    "to_json_schema_value",
]

_CONNECT_TYPES: Final = {
    "int8": ("integer", "int8"),
    "int16": ("integer", "int16"),
    "int32": ("integer", "int32"),
    "int64": ("integer", "int64"),
    "float": ("number", "float32"),
    "double": ("number", "float64"),
    "boolean": ("boolean", None),
    "string": ("string", None),
    "bytes": ("string", "bytes"),
}
_FROM_CONNECT_TYPE: Final = {
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float32": "float",
    "float64": "double",
    "bytes": "bytes",
}


def _base(schema: ConnectSchema, additional: bool) -> dict[str, Any]:
    if schema.name == DECIMAL:
        out: dict[str, Any] = {"type": "number", "connect.type": "bytes"}
    elif schema.type == "struct":
        props: dict[str, Any] = {}
        for index, f in enumerate(schema.fields):
            prop = _schema(f.schema, additional)
            prop["connect.index"] = index
            props[f.name] = prop
        out = {"type": "object", "properties": props}
        if not additional:
            out["additionalProperties"] = False
    elif schema.type == "array":
        assert schema.items is not None
        out = {"type": "array", "items": _schema(schema.items, additional)}
    elif schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        if schema.keys.type == "string" and not schema.keys.optional:
            out = {
                "type": "object",
                "additionalProperties": _schema(schema.values, additional),
                "connect.type": "map",
            }
        else:
            key = {**_schema(schema.keys, additional), "connect.index": 0}
            value = {**_schema(schema.values, additional), "connect.index": 1}
            entry = {"type": "object", "properties": {"key": key, "value": value}}
            out = {"type": "array", "items": entry, "connect.type": "map"}
    else:
        json_type, connect_type = _CONNECT_TYPES[schema.type]
        out = {"type": json_type}
        if connect_type is not None:
            out["connect.type"] = connect_type
    if schema.name is not None:
        out["title"] = schema.name
    if schema.doc is not None:
        out["description"] = schema.doc
    if schema.version is not None:
        out["connect.version"] = schema.version
    if schema.parameters:
        out["connect.parameters"] = dict(schema.parameters)
    if schema.default is not None:
        out["default"] = to_json_schema_value(schema, schema.default)
    return out


def _schema(schema: ConnectSchema, additional: bool) -> dict[str, Any]:
    base = _base(schema, additional)
    if not schema.optional:
        return base
    return {"oneOf": [{"type": "null"}, base]}


def connect_to_json_schema(schema: ConnectSchema, additional_properties: bool = True) -> dict[str, Any]:
    """The JSON Schema Confluent's JsonSchemaData writes for a Connect schema."""
    return _schema(schema, additional_properties)


def _props(node: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "title" in node:
        out["name"] = str(node["title"])
    if "description" in node:
        out["doc"] = str(node["description"])
    if "connect.version" in node:
        out["version"] = int(node["connect.version"])
    if "connect.parameters" in node:
        out["parameters"] = tuple((str(k), str(v)) for k, v in node["connect.parameters"].items())
    return out


def _to_connect(node: Any, optional: bool, optional_nonrequired: bool) -> ConnectSchema:
    if node is True or node == {}:
        raise ConnectDataError("A JSON schema that allows anything has no Connect type")
    for combiner in ("oneOf", "anyOf"):
        if combiner in node:
            branches = [b for b in node[combiner] if b.get("type") != "null"]
            nullable = len(branches) < len(node[combiner])
            if len(branches) != 1:
                raise ConnectDataError(f"JSON schema {combiner} of several types is not supported")
            merged = {**{k: v for k, v in node.items() if k != combiner}, **branches[0]}
            return _to_connect(merged, optional or nullable, optional_nonrequired)
    kind = node.get("type")
    if isinstance(kind, list):
        others = [k for k in kind if k != "null"]
        if len(others) != 1:
            raise ConnectDataError(f"JSON schema type {kind} is not supported")
        return _to_connect({**node, "type": others[0]}, optional or "null" in kind, optional_nonrequired)
    props = _props(node)
    connect_type = node.get("connect.type")
    default = node.get("default")
    if kind == "object":
        if connect_type == "map" or (
            "properties" not in node and isinstance(node.get("additionalProperties"), dict)
        ):
            values = _to_connect(node.get("additionalProperties", {}), False, optional_nonrequired)
            return ConnectSchema("map", optional, keys=ConnectSchema("string"), values=values, **props)
        properties = node.get("properties", {})
        required = set(node.get("required", ()))
        ordered = sorted(
            enumerate(properties.items()), key=lambda p: (p[1][1].get("connect.index", p[0]), p[0])
        )
        fields = []
        for _, (name, sub) in ordered:
            not_required = optional_nonrequired and name not in required
            fields.append(ConnectField(str(name), _to_connect(sub, not_required, optional_nonrequired)))
        return ConnectSchema("struct", optional, fields=tuple(fields), **props)
    if kind == "array":
        items = node.get("items", {})
        if connect_type == "map":
            entry = items.get("properties", {})
            keys = _to_connect(entry["key"], False, optional_nonrequired)
            values = _to_connect(entry["value"], False, optional_nonrequired)
            return ConnectSchema("map", optional, keys=keys, values=values, **props)
        return ConnectSchema(
            "array", optional, items=_to_connect(items, False, optional_nonrequired), **props
        )
    if props.get("name") == DECIMAL:
        schema = ConnectSchema("bytes", optional, **props)
    elif kind == "integer":
        name = props.get("name")
        base = {DATE: "int32", TIME: "int32", TIMESTAMP: "int64"}.get(str(name))
        schema = ConnectSchema(base or _FROM_CONNECT_TYPE.get(str(connect_type), "int64"), optional, **props)
    elif kind == "number":
        schema = ConnectSchema("float" if connect_type == "float32" else "double", optional, **props)
    elif kind == "string":
        schema = ConnectSchema("bytes" if connect_type == "bytes" else "string", optional, **props)
    elif kind == "boolean":
        schema = ConnectSchema("boolean", optional, **props)
    else:
        raise ConnectDataError(f"JSON schema type {kind} has no Connect type")
    if default is not None:
        parts = {f: getattr(schema, f) for f in schema.__dataclass_fields__}
        parts["default"] = from_json_schema_value(schema, default)
        schema = ConnectSchema(**parts)
    return schema


def json_schema_to_connect(node: Any, optional_for_nonrequired: bool = False) -> ConnectSchema:
    """The Connect schema Confluent's JsonSchemaData reads a JSON Schema (a parsed tree) as."""
    return _to_connect(node, False, optional_for_nonrequired)


def to_json_schema_value(schema: ConnectSchema, value: Any) -> Any:
    """A Connect value as the JSON value written under ``connect_to_json_schema(schema)``."""
    if value is None:
        if schema.default is not None:
            return to_json_schema_value(schema, schema.default)
        if schema.optional:
            return None
        raise ConnectDataError(f"Invalid null value for required {schema.type.upper()} field")
    if schema.name == DECIMAL:
        return decimal.Decimal(value)
    if schema.name in LOGICAL_INTS and (encoded := logical_to_int(schema.name, value)) is not None:
        return encoded
    if schema.type == "bytes":
        return base64.b64encode(bytes(value)).decode("ascii")
    if schema.type == "struct":
        return {f.name: to_json_schema_value(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "array":
        assert schema.items is not None
        return [to_json_schema_value(schema.items, v) for v in value]
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        if schema.keys.type == "string" and not schema.keys.optional:
            return {k: to_json_schema_value(schema.values, v) for k, v in value.items()}
        return [
            {"key": to_json_schema_value(schema.keys, k), "value": to_json_schema_value(schema.values, v)}
            for k, v in value.items()
        ]
    if schema.type in ("float", "double"):
        return float(value)
    return value


def from_json_schema_value(schema: ConnectSchema, value: Any) -> Any:
    """A parsed JSON value (numbers as Decimal or int) as Connect's Python value of ``schema``."""
    if value is None:
        return schema.default
    if schema.name == DECIMAL:
        return decimal.Decimal(str(value))
    if schema.name in LOGICAL_INTS:
        return logical_from_int(schema.name, value)
    if schema.type == "bytes":
        return base64.b64decode(value)
    if schema.type in ("float", "double"):
        return float(value)
    if schema.type in ("int8", "int16", "int32", "int64"):
        return int(value)
    if schema.type == "struct":
        return {f.name: from_json_schema_value(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "array":
        assert schema.items is not None
        return [from_json_schema_value(schema.items, v) for v in value]
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        if isinstance(value, list):
            return {
                from_json_schema_value(schema.keys, e["key"]): from_json_schema_value(
                    schema.values, e["value"]
                )
                for e in value
            }
        return {k: from_json_schema_value(schema.values, v) for k, v in value.items()}
    return value
