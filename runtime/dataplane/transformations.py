"""Single message transformations with Apache Kafka Connect's names, as Spark column expressions.

Java applies a transformation to one record at a time; here each transformation is a :class:`Step` of
Spark column expressions over the whole record frame (``topic``, ``partition``, ``offset``, ``timestamp``,
``key``, ``value``, ``headers``), so the work stays in the JVM: no Python UDFs. Their keys and ConfigDefs
are in :mod:`kconnect.runtime.plugins.transform_configs` (pure, shared with validation and the plugin
listing); this module adds, for each, the Spark code built from its parsed config.

The typed ``key``/``value`` columns carry their Connect schema in their metadata (see
:mod:`converters`). Each transformation computes the schema it produces from the one it receives, purely
in Python, as Java's transformations compute their updated schemas, and hands it on in the new column's
metadata. A row a transformation cannot handle gets a per-row error in its Step instead of an exception,
which :mod:`transforms` turns into ``TRANSFORM_ERROR`` (Java's TRANSFORMATION stage).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kconnect.runtime.dataplane.connect_data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    ConnectDataError,
    ConnectField,
    ConnectSchema,
)
from kconnect.runtime.dataplane.converters import connect_schema_of, spark_type, with_schema
from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValidationError
from kconnect.runtime.plugins.transform_configs import CAST_TYPES, TRANSFORMATION_DEFS

__all__ = [
    "TRANSFORMATIONS",
    "Builder",
    "Step",
    "TransformationPlugin",
]


@dataclass(frozen=True)
class Step:
    """What one transform does to a frame: new column values, rows to keep, a per-row error."""

    columns: Mapping[str, Column] = field(default_factory=dict)
    keep: Column | None = None
    error: Column | None = None


Builder = Callable[[DataFrame], Step]


# --------------------------------------------------------------------------------------------- helpers


def _require_struct(schema: ConnectSchema | None, purpose: str) -> ConnectSchema:
    if schema is None or schema.type != "struct":
        found = "schemaless JSON" if schema is None else schema.type.upper()
        raise ConnectDataError(f"Only Struct objects supported for [{purpose}], found: {found}")
    return schema


def _struct(schema: ConnectSchema, fields: Sequence[ConnectField]) -> ConnectSchema:
    return ConnectSchema(
        "struct",
        schema.optional,
        None,
        schema.name,
        schema.version,
        schema.doc,
        schema.parameters,
        tuple(fields),
    )


def _rebuild(c: Column, exprs: Sequence[Column]) -> Column:
    """A new struct from ``exprs``, null where the input struct is null (tombstones stay tombstones)."""
    return F.when(c.isNull(), F.lit(None)).otherwise(F.struct(*exprs))


def _field(schema: ConnectSchema, name: str) -> ConnectField:
    found = schema.field(name)
    if found is None:
        raise ConnectDataError(f"Unknown field: {name}")
    return found


def _utc_text(ts: Column, fmt: str) -> Column:
    # date_format renders in the session time zone; Java's SimpleDateFormat here is set to UTC.
    return F.date_format(F.to_utc_timestamp(ts, F.current_timezone()), fmt)


# ------------------------------------------------------------------------------------- transformations


@dataclass(frozen=True)
class TransformationPlugin:
    """One Java transformation class: its ConfigDef and how to build a Step from parsed config."""

    class_name: str
    config_def: Callable[[], ConfigDef]
    build: Callable[[Mapping[str, Any], str], Builder]  # (parsed config, "key"|"value") -> builder
    target: str | None = None  # "key"/"value" for $Key/$Value variants

    @property
    def simple_name(self) -> str:
        """The class name without its package, which Java also accepts as an alias."""
        return self.class_name.rsplit(".", 1)[-1]


def _insert_field(cfg: Mapping[str, Any], target: str) -> Builder:
    def spec(key: str) -> tuple[str, bool] | None:
        raw = cfg.get(key)
        if raw is None:
            return None
        if raw.endswith("!"):
            return raw[:-1], False
        return (raw[:-1] if raw.endswith("?") else raw), True

    def build(df: DataFrame) -> Step:
        schema = _require_struct(connect_schema_of(df, target), "field insertion")
        c = F.col(target)
        fields = list(schema.fields)
        inserted: list[tuple[str, Column]] = []
        for key, ctype, expr in (
            ("topic.field", ConnectSchema("string"), F.col("topic")),
            ("partition.field", ConnectSchema("int32"), F.col("partition")),
            ("offset.field", ConnectSchema("int64"), F.col("offset")),
            (
                "timestamp.field",
                ConnectSchema("int64", name=TIMESTAMP, version=1),
                F.timestamp_millis(F.col("timestamp")),
            ),
            ("static.field", ConnectSchema("string"), F.lit(cfg.get("static.value"))),
        ):
            s = spec(key)
            if s is None:
                continue
            name, optional = s
            fields.append(ConnectField(name, ctype.with_optional(optional)))
            inserted.append((name, expr.cast(spark_type(ctype))))
        new = c
        for name, expr in inserted:
            new = new.withField(name, expr)
        out = _struct(schema, fields)
        return Step({target: with_schema(F.when(c.isNull(), F.lit(None)).otherwise(new), target, out)})

    return build


def _replace_field(cfg: Mapping[str, Any], target: str) -> Builder:
    exclude = set(cfg.get("exclude") or cfg.get("blacklist") or ())
    include = set(cfg.get("include") or cfg.get("whitelist") or ())
    renames = dict(pair.split(":") for pair in cfg.get("renames") or ())

    def build(df: DataFrame) -> Step:
        schema = _require_struct(connect_schema_of(df, target), "field replacement")
        c = F.col(target)
        kept = [f for f in schema.fields if f.name not in exclude and (not include or f.name in include)]
        fields = [ConnectField(renames.get(f.name, f.name), f.schema) for f in kept]
        exprs = [c[f.name].alias(renames.get(f.name, f.name)) for f in kept]
        return Step({target: with_schema(_rebuild(c, exprs), target, _struct(schema, fields))})

    return build


_NUMERIC: Final = ("int8", "int16", "int32", "int64", "float", "double")


def _masked(name: str, schema: ConnectSchema, replacement: str | None) -> Column:
    kind = spark_type(schema)
    if replacement is not None:
        if schema.type == "string" and schema.name is None:
            return F.lit(replacement)
        if schema.type in _NUMERIC or schema.name == DECIMAL:
            try:
                # Java parses the replacement as the field's own type: "1.5" cannot mask an int.
                int(replacement) if schema.type.startswith("int") else float(replacement)
            except ValueError:
                raise ConnectDataError(
                    f"Unable to convert {replacement} ({type(replacement).__name__}) to number"
                ) from None
            return F.lit(replacement).cast(kind)
        raise ConnectDataError(f"Cannot mask value of type {schema.type.upper()} with custom replacement.")
    if schema.name in (DATE, TIMESTAMP):
        return F.timestamp_millis(F.lit(0)).cast(kind)
    if schema.type in _NUMERIC or schema.name == DECIMAL or schema.name == TIME:
        return F.lit(0).cast(kind)
    if schema.type == "boolean":
        return F.lit(False)
    if schema.type == "string":
        return F.lit("")
    if schema.type == "array":
        return F.array().cast(kind)
    if schema.type == "map":
        return F.create_map().cast(kind)
    raise ConnectDataError(f"Cannot mask field {name} of type {schema.type.upper()}")


def _mask_field(cfg: Mapping[str, Any], target: str) -> Builder:
    names = set(cfg["fields"])
    replacement = cfg.get("replacement")

    def build(df: DataFrame) -> Step:
        schema = _require_struct(connect_schema_of(df, target), "masking fields")
        c = F.col(target)
        exprs = [
            (_masked(f.name, f.schema, replacement) if f.name in names else c[f.name]).alias(f.name)
            for f in schema.fields
        ]
        return Step({target: with_schema(_rebuild(c, exprs), target, schema)})

    return build


def _cast_column(c: Column, source: ConnectSchema, target_type: str) -> tuple[Column, Column]:
    """(cast value, error); casts follow Java's Cast (truncation, parseBoolean, base64 bytes)."""
    target = ConnectSchema(target_type)
    kind = spark_type(target)
    if source.type == "bytes" and source.name is None:
        if target_type != "string":
            raise ConnectDataError(
                f"Unexpected type in Cast transformation: {source.type.upper()} to {target_type}"
            )
        return F.base64(c), F.lit(None).cast("string")
    if source.type in ("array", "map", "struct"):
        raise ConnectDataError(f"Cast transformation does not support casting {source.type.upper()}")
    if target_type == "boolean" and source.type == "string":
        out = F.lower(c) == F.lit("true")
    else:
        out = c.try_cast(kind)
    error = F.when(
        c.isNotNull() & out.isNull(), F.concat(F.lit(f"Cannot cast to {target_type}: "), c.cast("string"))
    )
    return out, error


def _cast(cfg: Mapping[str, Any], target: str) -> Builder:
    spec = [item.split(":") for item in cfg["spec"]]

    def build(df: DataFrame) -> Step:
        c = F.col(target)
        schema = connect_schema_of(df, target)
        if len(spec) == 1 and len(spec[0]) == 1:
            if schema is None:
                raise ConnectDataError("Cast needs a value with a schema")
            target_type = CAST_TYPES[spec[0][0].strip()]
            out, error = _cast_column(c, schema, target_type)
            return Step(
                {target: with_schema(out, target, ConnectSchema(target_type, schema.optional))}, error=error
            )
        struct_schema = _require_struct(schema, "cast types")
        wanted = {k.strip(): CAST_TYPES[v.strip()] for k, v in spec}
        exprs, fields, errors = [], [], []
        for f in struct_schema.fields:
            if f.name in wanted:
                out, error = _cast_column(c[f.name], f.schema, wanted[f.name])
                exprs.append(out.alias(f.name))
                fields.append(ConnectField(f.name, ConnectSchema(wanted[f.name], f.schema.optional)))
                errors.append(error)
            else:
                exprs.append(c[f.name].alias(f.name))
                fields.append(f)
        return Step(
            {target: with_schema(_rebuild(c, exprs), target, _struct(struct_schema, fields))},
            error=F.coalesce(*errors) if errors else None,
        )

    return build


def _value_to_key(cfg: Mapping[str, Any], target: str) -> Builder:
    names = list(cfg["fields"])

    def build(df: DataFrame) -> Step:
        schema = _require_struct(connect_schema_of(df, "value"), "copying fields from value to key")
        fields = [_field(schema, n) for n in names]
        c = F.col("value")
        key = _rebuild(c, [c[n].alias(n) for n in names])
        return Step({"key": with_schema(key, "key", ConnectSchema("struct", fields=tuple(fields)))})

    return build


def _field_path(cfg: Mapping[str, Any]) -> list[str]:
    name = str(cfg["field"])
    if str(cfg.get("field.syntax.version", "V1")).upper() == "V1":
        return [name]
    # V2: dotted paths; a backtick-quoted segment may itself contain dots.
    return [part.strip("`") for part in re.findall(r"`[^`]*`|[^.]+", name)]


def _extract_field(cfg: Mapping[str, Any], target: str) -> Builder:
    path = _field_path(cfg)

    def build(df: DataFrame) -> Step:
        schema = _require_struct(connect_schema_of(df, target), "field extraction")
        c = F.col(target)
        for part in path:
            f = _field(_require_struct(schema, "field extraction"), part)
            schema, c = f.schema, c[part]
        return Step({target: with_schema(c, target, schema)})

    return build


def _hoist_field(cfg: Mapping[str, Any], target: str) -> Builder:
    """The whole key or value becomes the one field of a new struct (Java's HoistField with a schema; a
    schemaless value, which Java wraps in a map, is refused as the other struct transformations refuse it)."""
    name = str(cfg["field"])

    def build(df: DataFrame) -> Step:
        inner = connect_schema_of(df, target)
        if inner is None:
            raise ConnectDataError(f"HoistField needs a {target} schema in kconnect, found: schemaless JSON")
        c = F.col(target)
        out = ConnectSchema("struct", fields=(ConnectField(name, inner),))
        # A null (a tombstone: Java's converter gives it no schema, and Java hoists it into a map holding
        # null) becomes a struct holding null.
        return Step({target: with_schema(F.struct(c.alias(name)), target, out)})

    return build


def _flatten(cfg: Mapping[str, Any], target: str) -> Builder:
    delimiter = str(cfg["delimiter"])

    def walk(
        schema: ConnectSchema, c: Column, prefix: str, optional: bool, out: list[tuple[ConnectField, Column]]
    ) -> None:
        for f in schema.fields:
            name = prefix + f.name
            if f.schema.type == "struct":
                walk(f.schema, c[f.name], name + delimiter, optional or f.schema.optional, out)
            else:
                fs = f.schema.with_optional(optional or f.schema.optional)
                out.append((ConnectField(name, fs), c[f.name].alias(name)))

    def build(df: DataFrame) -> Step:
        schema = _require_struct(connect_schema_of(df, target), "flattening")
        c = F.col(target)
        pairs: list[tuple[ConnectField, Column]] = []
        walk(schema, c, "", False, pairs)
        out = _struct(schema, [p[0] for p in pairs])
        return Step({target: with_schema(_rebuild(c, [p[1] for p in pairs]), target, out)})

    return build


def _timestamp_converter(cfg: Mapping[str, Any], target: str) -> Builder:
    field_name = str(cfg["field"])
    target_type = str(cfg["target.type"])
    fmt = str(cfg["format"])
    precision = str(cfg["unix.precision"])
    if target_type == "string" and not fmt:
        raise ConfigValidationError(
            "format",
            fmt,
            "TimestampConverter requires format option to be specified when using string timestamps",
        )

    def to_ts(c: Column, schema: ConnectSchema) -> Column:
        if schema.name == TIMESTAMP:
            return c
        if schema.name == DATE:
            return c.cast("timestamp")
        if schema.name == TIME:
            return F.timestamp_millis(c.cast("long"))
        if schema.type == "int64":
            if precision == "seconds":
                return F.timestamp_seconds(c)
            if precision == "microseconds":
                return F.timestamp_micros(c)
            if precision == "nanoseconds":
                return F.timestamp_micros(F.floor(c / 1000).cast("long"))
            return F.timestamp_millis(c)
        if schema.type == "string":
            if not fmt:
                raise ConnectDataError(
                    "TimestampConverter requires format option to be specified when using string timestamps"
                )
            return F.try_to_timestamp(c, F.lit(fmt))
        raise ConnectDataError(
            f"Schema {schema.name or schema.type} does not correspond to a known timestamp type format"
        )

    def from_ts(ts: Column, optional: bool) -> tuple[Column, ConnectSchema]:
        millis = F.unix_millis(ts)
        if target_type == "string":
            return _utc_text(ts, fmt), ConnectSchema("string", optional)
        if target_type == "unix":
            scaled = {
                "seconds": F.floor(millis / 1000).cast("long"),
                "microseconds": F.unix_micros(ts),
                "nanoseconds": F.unix_micros(ts) * 1000,
            }
            return scaled.get(precision, millis), ConnectSchema("int64", optional)
        if target_type == "Date":
            return F.date_from_unix_date(F.floor(millis / 86_400_000).cast("int")), ConnectSchema(
                "int32", optional, name=DATE, version=1
            )
        if target_type == "Time":
            return F.pmod(millis, F.lit(86_400_000)).cast("int"), ConnectSchema(
                "int32", optional, name=TIME, version=1
            )
        return ts, ConnectSchema("int64", optional, name=TIMESTAMP, version=1)

    def build(df: DataFrame) -> Step:
        schema = connect_schema_of(df, target)
        c = F.col(target)
        if schema is None:
            raise ConnectDataError("TimestampConverter needs a value with a schema")
        if not field_name:
            ts = to_ts(c, schema)
            out, out_schema = from_ts(ts, schema.optional)
            error = F.when(c.isNotNull() & ts.isNull(), F.lit("Could not parse timestamp"))
            return Step({target: with_schema(out, target, out_schema)}, error=error)
        struct = _require_struct(schema, "converting timestamp formats")
        f = _field(struct, field_name)
        ts = to_ts(c[field_name], f.schema)
        out, out_schema = from_ts(ts, f.schema.optional)
        fields = [ConnectField(x.name, out_schema) if x.name == field_name else x for x in struct.fields]
        exprs = [(out if x.name == field_name else c[x.name]).alias(x.name) for x in struct.fields]
        error = F.when(
            c[field_name].isNotNull() & ts.isNull(), F.lit(f"Could not parse timestamp in field {field_name}")
        )
        return Step({target: with_schema(_rebuild(c, exprs), target, _struct(struct, fields))}, error=error)

    return build


def _regex_router(cfg: Mapping[str, Any], target: str) -> Builder:
    # Java: matcher.matches() (the whole topic) then replaceFirst; anchoring the pattern does both.
    anchored = f"^(?:{cfg['regex']})$"

    def build(df: DataFrame) -> Step:
        topic = F.col("topic")
        return Step({"topic": F.regexp_replace(topic, anchored, str(cfg["replacement"]))})

    return build


def _timestamp_router(cfg: Mapping[str, Any], target: str) -> Builder:
    pieces = re.split(r"(\$\{topic\}|\$\{timestamp\})", str(cfg["topic.format"]))
    fmt = str(cfg["timestamp.format"])

    def build(df: DataFrame) -> Step:
        stamp = _utc_text(F.timestamp_millis(F.col("timestamp")), fmt)
        parts = [
            F.col("topic") if p == "${topic}" else stamp if p == "${timestamp}" else F.lit(p)
            for p in pieces
            if p
        ]
        topic = F.when(F.col("timestamp").isNotNull(), F.concat(*parts)).otherwise(F.col("topic"))
        error = F.when(F.col("timestamp").isNull(), F.lit("Timestamp missing on record"))
        return Step({"topic": topic}, error=error)

    return build


def _filter(cfg: Mapping[str, Any], target: str) -> Builder:
    # Filter drops every record it applies to; a predicate narrows which (see TransformChain).
    return lambda df: Step(keep=F.lit(False))


#: Each transformation's Spark code, by the simple name its $Key/$Value variants share.
_BUILDERS: Final[Mapping[str, Callable[[Mapping[str, Any], str], Builder]]] = {
    "Cast": _cast,
    "ExtractField": _extract_field,
    "Filter": _filter,
    "Flatten": _flatten,
    "HoistField": _hoist_field,
    "InsertField": _insert_field,
    "MaskField": _mask_field,
    "RegexRouter": _regex_router,
    "ReplaceField": _replace_field,
    "TimestampConverter": _timestamp_converter,
    "TimestampRouter": _timestamp_router,
    "ValueToKey": _value_to_key,
}

#: The transformations kconnect runs, by Apache class name, in the order of their definitions.
TRANSFORMATIONS: Final[dict[str, TransformationPlugin]] = {
    d.class_name: TransformationPlugin(d.class_name, d.config_def, _BUILDERS[d.base], d.target)
    for d in TRANSFORMATION_DEFS.values()
}
