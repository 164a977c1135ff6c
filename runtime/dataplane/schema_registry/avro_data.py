"""Connect schemas and values to Avro and back, the way Confluent's ``AvroData`` maps them.

Why Confluent's mapping and not one of our own: a topic written by a Java worker's AvroConverter must read
back here with the same Connect schema (names, versions, parameters, logical types), and what kconnect
writes must read back in Java. The Avro schema carries Connect's metadata in ``connect.*`` properties
(``connect.name``/``connect.version``/``connect.doc``/``connect.parameters``/``connect.default``, and
``connect.type`` for int8/int16); Decimal/Date/Time/Timestamp are Avro's logical types; an optional
schema is a union with null; a map whose keys are not strings is an array of key/value records
(``io.confluent.connect.avro.MapEntry``); Avro enums become strings with Confluent's ``Enum`` parameters,
and other unions a struct named ``io.confluent.connect.avro.Union`` with one optional field per branch.

Values: fastavro reads and writes Avro's logical types as Python's Decimal, date, time and aware UTC
datetime, which are the Python values of Connect's logical types (``connect_data``), so values pass
through unchanged except for maps with non-string keys, unions and defaults. Pure: no I/O.
"""

from __future__ import annotations

import base64
import decimal
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from kconnect.runtime.dataplane.connect_data import (
    DATE,
    DECIMAL,
    SCALE_PARAMETER,
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
    "AVRO_ENUM",
    "AVRO_UNION",
    "AvroDataConfig",
    "avro_to_connect_schema",
    "connect_to_avro_schema",
    "from_avro_value",
    "to_avro_value",
]

NAMESPACE: Final = "io.confluent.connect.avro"
DEFAULT_RECORD: Final = "ConnectDefault"
MAP_ENTRY: Final = "MapEntry"
AVRO_ENUM: Final = NAMESPACE + ".Enum"
AVRO_UNION: Final = NAMESPACE + ".Union"
FIXED_SIZE: Final = "connect.fixed.size"
PRECISION: Final = "connect.decimal.precision"
DEFAULT_PRECISION: Final = 64
_PRIMITIVES: Final = {
    "int32": "int",
    "int64": "long",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_FROM_AVRO: Final = {
    "int": "int32",
    "long": "int64",
    "float": "float",
    "double": "double",
    "boolean": "boolean",
    "string": "string",
    "bytes": "bytes",
}
_INVALID_NAME_CHARS: Final = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class AvroDataConfig:
    """Confluent's ``AvroDataConfig`` keys that change the mapping."""

    connect_meta_data: bool = True
    enhanced_avro_schema_support: bool = False
    scrub_invalid_names: bool = False
    ignore_default_for_nullables: bool = False


# ------------------------------------------------------------------------------- Connect -> Avro schema


@dataclass
class _Names:
    """The record names given out while one schema is converted: Avro refuses a name defined twice, so
    unnamed structs and map entries are numbered (ConnectDefault, ConnectDefault2, ...) as in Java."""

    used: dict[str, int] = field(default_factory=dict)
    defined: dict[str, Any] = field(default_factory=dict)

    def next(self, base: str) -> str:
        count = self.used.get(base, 0) + 1
        self.used[base] = count
        return base if count == 1 else f"{base}{count}"


def _scrub(name: str, config: AvroDataConfig) -> str:
    if not config.scrub_invalid_names:
        return name
    scrubbed = _INVALID_NAME_CHARS.sub("_", name)
    return "_" + scrubbed if scrubbed[:1].isdigit() else scrubbed


def _meta(avro: dict[str, Any], schema: ConnectSchema, config: AvroDataConfig, named: bool) -> None:
    if not config.connect_meta_data:
        return
    if schema.doc is not None:
        avro["connect.doc"] = schema.doc
    if schema.version is not None:
        avro["connect.version"] = schema.version
    if schema.parameters:
        avro["connect.parameters"] = dict(schema.parameters)
    if schema.default is not None and schema.type not in ("struct",):
        avro["connect.default"] = _default_json(schema, schema.default)
    if named and schema.name is not None:
        avro["connect.name"] = schema.name


def _bare(schema: ConnectSchema, config: AvroDataConfig, names: _Names) -> Any:
    """The Avro schema of ``schema`` without its optional union."""
    params = schema.params
    if schema.name == DECIMAL:
        avro: dict[str, Any] = {
            "type": "bytes",
            "scale": schema.scale,
            "precision": int(params.get(PRECISION, DEFAULT_PRECISION)),
        }
        _meta(avro, schema, config, named=True)
        avro["logicalType"] = "decimal"
        return avro
    logical = {DATE: ("int", "date"), TIME: ("int", "time-millis"), TIMESTAMP: ("long", "timestamp-millis")}
    if schema.name in logical:
        base, logical_type = logical[schema.name]
        avro = {"type": base}
        _meta(avro, schema, config, named=True)
        avro["logicalType"] = logical_type
        return avro
    if schema.type == "string" and AVRO_ENUM in params:
        symbols = [v for k, v in schema.parameters or () if k.startswith(AVRO_ENUM + ".")]
        full = params[AVRO_ENUM]
        namespace, _, name = full.rpartition(".")
        avro = {"type": "enum", "name": _scrub(name, config), "symbols": symbols}
        if namespace:
            avro["namespace"] = namespace
        if config.connect_meta_data and schema.doc is not None:
            avro["doc"] = schema.doc
        return avro
    if schema.type == "bytes" and FIXED_SIZE in params:
        full = schema.name or NAMESPACE + "." + names.next("fixed")
        namespace, _, name = full.rpartition(".")
        avro = {"type": "fixed", "name": _scrub(name, config), "size": int(params[FIXED_SIZE])}
        if namespace:
            avro["namespace"] = namespace
        return avro
    if schema.type in ("int8", "int16"):
        avro = {"type": "int"}
        if config.connect_meta_data:
            avro["connect.type"] = schema.type
        _meta(avro, schema, config, named=True)
        return avro
    if schema.type in _PRIMITIVES:
        base = _PRIMITIVES[schema.type]
        avro = {"type": base}
        _meta(avro, schema, config, named=True)
        return avro if len(avro) > 1 else base
    if schema.type == "array":
        assert schema.items is not None
        avro = {"type": "array", "items": _schema(schema.items, config, names)}
        _meta(avro, schema, config, named=True)
        return avro
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        if schema.keys.type == "string" and not schema.keys.optional:
            avro = {"type": "map", "values": _schema(schema.values, config, names)}
        else:
            entry = {
                "type": "record",
                "name": names.next(MAP_ENTRY),
                "namespace": NAMESPACE,
                "fields": [
                    {"name": "key", "type": _schema(schema.keys, config, names)},
                    {"name": "value", "type": _schema(schema.values, config, names)},
                ],
            }
            avro = {"type": "array", "items": entry}
        _meta(avro, schema, config, named=True)
        return avro
    if schema.name == AVRO_UNION:
        return [_bare(f.schema, config, names) for f in schema.fields]
    # struct
    full = schema.name or NAMESPACE + "." + names.next(DEFAULT_RECORD)
    if full in names.defined:
        return full  # a record already defined in this schema is referred to by its name
    namespace, _, name = full.rpartition(".")
    avro = {"type": "record", "name": _scrub(name, config)}
    if namespace:
        avro["namespace"] = namespace
    if config.connect_meta_data and schema.doc is not None:
        avro["doc"] = schema.doc
    names.defined[full] = avro
    avro["fields"] = [_field(f, config, names) for f in schema.fields]
    if config.connect_meta_data:
        if schema.version is not None:
            avro["connect.version"] = schema.version
        if schema.parameters:
            avro["connect.parameters"] = dict(schema.parameters)
        if schema.doc is not None:
            avro["connect.doc"] = schema.doc
    return avro


def _schema(schema: ConnectSchema, config: AvroDataConfig, names: _Names) -> Any:
    bare = _bare(schema, config, names)
    if not schema.optional:
        return bare
    if isinstance(bare, list):
        return bare if "null" in bare else ["null", *bare]
    if schema.default is not None:
        # Avro's default must match the union's first branch.
        return [bare, "null"]
    return ["null", bare]


def _field(f: ConnectField, config: AvroDataConfig, names: _Names) -> dict[str, Any]:
    out: dict[str, Any] = {"name": _scrub(f.name, config), "type": _schema(f.schema, config, names)}
    if f.schema.default is not None:
        out["default"] = _default_json(f.schema, f.schema.default)
    elif f.schema.optional:
        out["default"] = None
    return out


def connect_to_avro_schema(schema: ConnectSchema, config: AvroDataConfig = AvroDataConfig()) -> Any:
    """The Avro schema (as its JSON tree) that Confluent's AvroData writes for a Connect schema."""
    return _schema(schema, config, _Names())


def _default_json(schema: ConnectSchema, value: Any) -> Any:
    """A Connect default as Avro's JSON default (bytes as ISO-8859-1 text, logical types as their base)."""
    if value is None:
        return None
    if schema.name == DECIMAL:
        unscaled = int(decimal.Decimal(value).scaleb(schema.scale).to_integral_value())
        raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
        return raw.decode("latin-1")
    if schema.name in LOGICAL_INTS and (encoded := logical_to_int(schema.name, value)) is not None:
        return encoded
    if schema.type == "bytes":
        return bytes(value).decode("latin-1")
    if schema.type == "struct" and isinstance(value, Mapping):
        return {f.name: _default_json(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "array":
        assert schema.items is not None
        return [_default_json(schema.items, v) for v in value]
    if schema.type == "map":
        assert schema.values is not None and schema.keys is not None
        if schema.keys.type == "string" and not schema.keys.optional:
            return {k: _default_json(schema.values, v) for k, v in value.items()}
        return [
            {"key": _default_json(schema.keys, k), "value": _default_json(schema.values, v)}
            for k, v in value.items()
        ]
    return value


# ------------------------------------------------------------------------------- Avro -> Connect schema


def _props(avro: Mapping[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "connect.doc" in avro:
        out["doc"] = str(avro["connect.doc"])
    if "connect.version" in avro:
        out["version"] = int(avro["connect.version"])
    if "connect.parameters" in avro:
        out["parameters"] = tuple((str(k), str(v)) for k, v in avro["connect.parameters"].items())
    if "connect.name" in avro:
        out["name"] = str(avro["connect.name"])
    return out


def _full_name(avro: Mapping[str, Any], namespace: str | None) -> str:
    name = str(avro["name"])
    if "." in name:
        return name
    ns = avro.get("namespace", namespace)
    return f"{ns}.{name}" if ns else name


@dataclass
class _Known:
    """Named Avro types met so far while reading one schema (a later reference names them)."""

    types: dict[str, Any] = field(default_factory=dict)


def _to_connect(avro: Any, optional: bool, namespace: str | None, known: _Known) -> ConnectSchema:
    if isinstance(avro, list):
        branches = [b for b in avro if b != "null"]
        nullable = len(branches) < len(avro)
        if len(branches) == 1:
            return _to_connect(branches[0], optional or nullable, namespace, known)
        fields = []
        for branch in branches:
            inner = _to_connect(branch, True, namespace, known)
            label = inner.name.rpartition(".")[2] if inner.type == "struct" and inner.name else inner.type
            if isinstance(branch, str) and branch in _FROM_AVRO:
                label = branch
            fields.append(ConnectField(label, inner))
        return ConnectSchema("struct", optional or nullable, name=AVRO_UNION, fields=tuple(fields))
    if isinstance(avro, str):
        if avro in _FROM_AVRO:
            return ConnectSchema(_FROM_AVRO[avro], optional)
        if avro == "null":
            raise ConnectDataError("Avro schema null alone has no Connect type")
        full = avro if "." in avro or namespace is None else f"{namespace}.{avro}"
        found = known.types.get(full, known.types.get(avro))
        if found is None:
            raise ConnectDataError(f"Avro schema refers to unknown type {avro}")
        return _to_connect(found, optional, namespace, known)
    kind = avro["type"]
    props = _props(avro)
    logical = avro.get("logicalType")
    if isinstance(kind, dict | list):
        return _to_connect(kind, optional, namespace, known)
    if kind == "bytes" and logical == "decimal":
        scale = int(avro.get("scale", 0))
        params = dict(props.pop("parameters", ()))
        params.setdefault(SCALE_PARAMETER, str(scale))
        precision = avro.get("precision")
        if precision is not None and int(precision) != DEFAULT_PRECISION:
            params.setdefault(PRECISION, str(precision))
        props.update(name=DECIMAL, version=1)
        return ConnectSchema("bytes", optional, parameters=tuple(params.items()), **props)
    if kind == "int" and logical == "date":
        props.update(name=DATE, version=1)
        return ConnectSchema("int32", optional, **props)
    if kind == "int" and logical == "time-millis":
        props.update(name=TIME, version=1)
        return ConnectSchema("int32", optional, **props)
    if kind == "long" and logical == "timestamp-millis":
        props.update(name=TIMESTAMP, version=1)
        return ConnectSchema("int64", optional, **props)
    if kind == "int" and avro.get("connect.type") in ("int8", "int16"):
        return ConnectSchema(str(avro["connect.type"]), optional, **props)
    if kind in _FROM_AVRO:
        return ConnectSchema(_FROM_AVRO[kind], optional, **props)
    if kind == "array":
        items = avro["items"]
        entry = known.types.get(items) if isinstance(items, str) else items
        if (
            isinstance(entry, dict)
            and entry.get("type") == "record"
            and _full_name(entry, NAMESPACE).startswith(NAMESPACE + "." + MAP_ENTRY)
            and [f["name"] for f in entry.get("fields", ())] == ["key", "value"]
        ):
            full = _full_name(entry, NAMESPACE)
            known.types[full] = entry
            keys = _to_connect(entry["fields"][0]["type"], False, NAMESPACE, known)
            values = _to_connect(entry["fields"][1]["type"], False, NAMESPACE, known)
            return ConnectSchema("map", optional, keys=keys, values=values, **props)
        return ConnectSchema("array", optional, items=_to_connect(items, False, namespace, known), **props)
    if kind == "map":
        values = _to_connect(avro["values"], False, namespace, known)
        return ConnectSchema("map", optional, keys=ConnectSchema("string"), values=values, **props)
    if kind == "enum":
        full = _full_name(avro, namespace)
        known.types[full] = avro
        symbols = [(AVRO_ENUM, full)] + [(f"{AVRO_ENUM}.{s}", str(s)) for s in avro["symbols"]]
        props.pop("parameters", None)
        default = avro.get("connect.default")
        return ConnectSchema(
            "string", optional, default=default, parameters=tuple(symbols), **{**props, "name": full}
        )
    if kind == "fixed":
        full = _full_name(avro, namespace)
        known.types[full] = avro
        return ConnectSchema("bytes", optional, name=full, parameters=((FIXED_SIZE, str(avro["size"])),))
    if kind == "record":
        full = _full_name(avro, namespace)
        known.types[full] = avro
        inner_ns = full.rpartition(".")[0] or None
        fields = []
        for f in avro["fields"]:
            fs = _to_connect(f["type"], False, inner_ns, known)
            if "default" in f and f["default"] is not None:
                fs = _with_default(fs, _default_from_json(fs, f["default"]))
            fields.append(ConnectField(str(f["name"]), fs))
        name = None if full in (f"{NAMESPACE}.{DEFAULT_RECORD}",) else full
        if full.startswith(f"{NAMESPACE}.{DEFAULT_RECORD}"):
            name = None
        props.pop("name", None)
        return ConnectSchema("struct", optional, name=name, fields=tuple(fields), **props)
    raise ConnectDataError(f"Avro type {kind} has no Connect type")


def _with_default(schema: ConnectSchema, default: Any) -> ConnectSchema:
    values = {f: getattr(schema, f) for f in schema.__dataclass_fields__}
    values["default"] = default
    return ConnectSchema(**values)


def avro_to_connect_schema(avro: Any) -> ConnectSchema:
    """The Connect schema Confluent's AvroData reads an Avro schema (its JSON tree) as."""
    return _to_connect(avro, False, None, _Known())


def _default_from_json(schema: ConnectSchema, value: Any) -> Any:
    if value is None:
        return None
    if schema.name == DECIMAL:
        raw = str(value).encode("latin-1")
        return decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-schema.scale)
    if schema.name in LOGICAL_INTS:
        return logical_from_int(schema.name, value)
    if schema.type == "bytes":
        return str(value).encode("latin-1")
    if schema.type == "struct" and isinstance(value, Mapping):
        return {f.name: _default_from_json(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "array":
        assert schema.items is not None
        return [_default_from_json(schema.items, v) for v in value]
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        if isinstance(value, list):
            return {
                _default_from_json(schema.keys, e["key"]): _default_from_json(schema.values, e["value"])
                for e in value
            }
        return {k: _default_from_json(schema.values, v) for k, v in value.items()}
    if schema.type in ("float", "double"):
        return float(value)
    return value


# ---------------------------------------------------------------------------------------------- values


def _plain(schema: ConnectSchema) -> bool:
    """Whether values of ``schema`` pass to and from fastavro unchanged (no map entries, unions or
    defaults to fill inside), so that a record's conversion skips walking them."""
    if schema.name == AVRO_UNION:
        return False
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        return schema.keys.type == "string" and not schema.keys.optional and _plain(schema.values)
    if schema.type == "array":
        assert schema.items is not None
        return _plain(schema.items)
    if schema.type == "struct":
        return all(_plain(f.schema) and f.schema.default is None for f in schema.fields)
    return True


def to_avro_value(schema: ConnectSchema, value: Any) -> Any:
    """A Connect value as the Python value fastavro writes under ``connect_to_avro_schema(schema)``.

    A null where the schema has a default is the default (Java's struct getter returns it); a null in a
    required field fails with Java's message.
    """
    if value is None:
        if schema.default is not None:
            value = schema.default
        elif schema.optional:
            return None
        else:
            raise ConnectDataError(f"Invalid null value for required {schema.type.upper()} field")
    if schema.type == "struct":
        if schema.name == AVRO_UNION:
            for f in schema.fields:
                branch = value.get(f.name) if isinstance(value, Mapping) else None
                if branch is not None:
                    return to_avro_value(f.schema, branch)
            return None
        if not isinstance(value, Mapping):
            raise ConnectDataError(
                f"Struct schema {schema.name or ''} needs a dict, not {type(value).__name__}"
            )
        return {f.name: to_avro_value(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "array":
        assert schema.items is not None
        if _plain(schema.items):
            return value
        return [to_avro_value(schema.items, v) for v in value]
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        if schema.keys.type == "string" and not schema.keys.optional:
            if _plain(schema.values):
                return value
            return {k: to_avro_value(schema.values, v) for k, v in value.items()}
        return [
            {"key": to_avro_value(schema.keys, k), "value": to_avro_value(schema.values, v)}
            for k, v in value.items()
        ]
    if schema.name == DECIMAL and not isinstance(value, decimal.Decimal):
        return decimal.Decimal(value)
    if schema.type in ("float", "double") and isinstance(value, int):
        return float(value)
    return value


def from_avro_value(schema: ConnectSchema, value: Any) -> Any:
    """A value fastavro read (under the Avro schema of ``schema``) as Connect's Python value."""
    if value is None:
        return None
    if schema.type == "struct":
        if schema.name == AVRO_UNION:
            return _union_value(schema, value)
        return {f.name: from_avro_value(f.schema, value.get(f.name)) for f in schema.fields}
    if schema.type == "array":
        assert schema.items is not None
        if _plain(schema.items):
            return value
        return [from_avro_value(schema.items, v) for v in value]
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        if isinstance(value, list):
            return {
                _hashable(from_avro_value(schema.keys, e["key"])): from_avro_value(schema.values, e["value"])
                for e in value
            }
        if _plain(schema.values):
            return value
        return {k: from_avro_value(schema.values, v) for k, v in value.items()}
    return value


def _hashable(value: Any) -> Any:
    if isinstance(value, dict):
        return tuple(value.items())
    if isinstance(value, list):
        return tuple(value)
    return value


_PY_TYPES: Final = {
    "boolean": (bool,),
    "int32": (int,),
    "int64": (int,),
    "int8": (int,),
    "int16": (int,),
    "float": (float,),
    "double": (float,),
    "string": (str,),
    "bytes": (bytes,),
    "array": (list,),
    "map": (dict,),
    "struct": (dict,),
}


def _union_value(schema: ConnectSchema, value: Any) -> dict[str, Any]:
    out: dict[str, Any] = {f.name: None for f in schema.fields}
    for f in schema.fields:
        kinds = _PY_TYPES.get(f.schema.type, ())
        if isinstance(value, bool) and f.schema.type != "boolean":
            continue
        if isinstance(value, kinds):
            out[f.name] = from_avro_value(f.schema, value)
            return out
    raise ConnectDataError(f"Avro union value {type(value).__name__} matches no branch of {schema.name}")


def b64(data: bytes) -> str:
    """Base64 text of bytes, for error messages that show a record's raw bytes briefly."""
    return base64.b64encode(data[:32]).decode("ascii")
