"""Single message transforms and predicates with Apache Kafka Connect's names and configs, as Spark columns.

Connector configs written for Apache Kafka Connect (``transforms``, ``transforms.<alias>.type``,
``.predicate``, ``.negate``, ``predicates``, ``predicates.<alias>.type`` and each transform's own keys)
work unchanged. Java applies a transform to one record at a time; here each transform is a
:class:`Step` of Spark column expressions over the whole record frame (``topic``, ``partition``,
``offset``, ``timestamp``, ``key``, ``value``, ``headers``), so the work stays in the JVM: no Python UDFs.

The typed ``key``/``value`` columns carry their Connect schema in their metadata (see
:mod:`converters`). Each transform computes the schema it produces from the one it receives, purely in
Python, as Java's transforms compute their updated schemas, and hands it on in the new column's metadata.
A row a transform cannot handle gets a message in ``TRANSFORM_ERROR`` instead of an exception, so
:mod:`errors_policy` can tolerate or dead-letter it (Java's TRANSFORMATION stage).
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
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    CaseInsensitiveValidString,
    CompositeValidator,
    ConfigDef,
    ConfigValidationError,
    Importance,
    LambdaValidator,
    NonEmptyString,
    Type,
    ValidString,
)

__all__ = [
    "PREDICATES",
    "TRANSFORMATIONS",
    "TRANSFORM_ERROR",
    "TRANSFORM_ERROR_CLASS",
    "Step",
    "TransformChain",
    "lookup_plugin",
    "transform_chain",
]

TRANSFORM_ERROR: Final = "transform__error"
TRANSFORM_ERROR_CLASS: Final = "transform__error_class"
_PKG: Final = "org.apache.kafka.connect.transforms."
_REPLACE_NULL_DOC: Final = (
    "When a field is null but its schema has a default, write the default (true) or keep the null (false)."
)


@dataclass(frozen=True)
class Step:
    """What one transform does to a frame: new column values, rows to keep, a per-row error."""

    columns: Mapping[str, Column] = field(default_factory=dict)
    keep: Column | None = None
    error: Column | None = None


Builder = Callable[[DataFrame], Step]


# --------------------------------------------------------------------------------------------- helpers


def _colon_pairs(name: str, value: Any) -> None:
    for item in value or ():
        if len(item.split(":")) != 2:
            raise ConfigValidationError(
                name, value, "Invalid rename mapping: " + item if name == "renames" else "Invalid " + name
            )


_PAIRS = LambdaValidator.with_(
    _colon_pairs, "list of colon-delimited pairs, e.g. <code>foo:bar,abc:xyz</code>"
)


def _non_empty_list(name: str, value: Any) -> None:
    if not value:
        raise ConfigValidationError(name, value, "Empty list")


_NON_EMPTY_LIST = LambdaValidator.with_(_non_empty_list, "non-empty list")


def _valid_regex(name: str, value: Any) -> None:
    try:
        re.compile(value)
    except (re.error, TypeError) as exc:
        raise ConfigValidationError(name, value, f"Invalid regex: {exc}") from None


_REGEX = LambdaValidator.with_(_valid_regex, "valid regex")


def _replace_null(defn: ConfigDef) -> ConfigDef:
    return defn.define(
        "replace.null.with.default", Type.BOOLEAN, True, None, Importance.MEDIUM, _REPLACE_NULL_DOC
    )


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
        return self.class_name.rsplit(".", 1)[-1]


def _insert_field_def() -> ConfigDef:
    d = ConfigDef()
    suffix = " A trailing ! makes the new field required, a trailing ? (or none) optional."
    for key, doc in (
        ("topic.field", "Name of the new field that holds the record's topic."),
        ("partition.field", "Name of the new field that holds the record's partition."),
        ("offset.field", "Name of the new field that holds the record's offset (sink records only)."),
        ("timestamp.field", "Name of the new field that holds the record's timestamp."),
        ("static.field", "Name of the new field that holds static.value."),
    ):
        d.define(
            key,
            Type.STRING,
            None,
            None,
            Importance.MEDIUM,
            doc + suffix,
        )
    d.define(
        "static.value",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "The constant written into static.field.",
    )
    return _replace_null(d)


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


def _replace_field_def() -> ConfigDef:
    return _replace_null(
        ConfigDef()
        .define(
            "exclude",
            Type.LIST,
            "",
            None,
            Importance.MEDIUM,
            "Fields to drop; wins over include.",
        )
        .define("blacklist", Type.LIST, None, None, Importance.LOW, "Old name of exclude.")
        .define(
            "include",
            Type.LIST,
            "",
            None,
            Importance.MEDIUM,
            "Fields to keep; when set, all others are dropped.",
        )
        .define("whitelist", Type.LIST, None, None, Importance.LOW, "Old name of include.")
        .define("renames", Type.LIST, "", _PAIRS, Importance.MEDIUM, "Renames as old:new pairs.")
    )


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


def _mask_field_def() -> ConfigDef:
    return _replace_null(
        ConfigDef()
        .define(
            "fields",
            Type.LIST,
            NO_DEFAULT,
            _NON_EMPTY_LIST,
            Importance.HIGH,
            "Fields whose values are replaced.",
        )
        .define(
            "replacement",
            Type.STRING,
            None,
            NonEmptyString(),
            Importance.LOW,
            "Value written into every masked field instead of the type's empty value; numeric and string "
            "fields only.",
        )
    )


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


_CAST_TYPES: Final = {
    "int8": "int8",
    "int16": "int16",
    "int32": "int32",
    "int64": "int64",
    "float32": "float",
    "float64": "double",
    "boolean": "boolean",
    "string": "string",
}


def _cast_spec(name: str, value: Any) -> None:
    items = value or []
    if not items:
        raise ConfigValidationError(name, value, "Must specify at least one field to cast.")
    for item in items:
        parts = item.split(":")
        if len(parts) > 2 or (len(items) > 1 and len(parts) != 2):
            raise ConfigValidationError(name, value, "Invalid spec: " + item)
        if parts[-1].strip() not in _CAST_TYPES:
            raise ConfigValidationError(
                name,
                value,
                f"Invalid type found in casting spec: {parts[-1].strip()}; valid: " + ", ".join(_CAST_TYPES),
            )


def _cast_def() -> ConfigDef:
    return _replace_null(
        ConfigDef().define(
            "spec",
            Type.LIST,
            NO_DEFAULT,
            CompositeValidator.of(
                LambdaValidator.with_(
                    _cast_spec, "list of colon-delimited pairs, e.g. <code>foo:bar,abc:xyz</code>"
                )
            ),
            Importance.HIGH,
            "Either field:type pairs (cast those fields of a struct) or one type (cast the whole value); "
            "types: int8, int16, int32, int64, float32, float64, boolean, string. Bytes cast only to string.",
        )
    )


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
            target_type = _CAST_TYPES[spec[0][0].strip()]
            out, error = _cast_column(c, schema, target_type)
            return Step(
                {target: with_schema(out, target, ConnectSchema(target_type, schema.optional))}, error=error
            )
        struct_schema = _require_struct(schema, "cast types")
        wanted = {k.strip(): _CAST_TYPES[v.strip()] for k, v in spec}
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


def _value_to_key_def() -> ConfigDef:
    return _replace_null(
        ConfigDef().define(
            "fields",
            Type.LIST,
            NO_DEFAULT,
            _NON_EMPTY_LIST,
            Importance.HIGH,
            "Value fields copied into a new struct key.",
        )
    )


def _value_to_key(cfg: Mapping[str, Any], target: str) -> Builder:
    names = list(cfg["fields"])

    def build(df: DataFrame) -> Step:
        schema = _require_struct(connect_schema_of(df, "value"), "copying fields from value to key")
        fields = [_field(schema, n) for n in names]
        c = F.col("value")
        key = _rebuild(c, [c[n].alias(n) for n in names])
        return Step({"key": with_schema(key, "key", ConnectSchema("struct", fields=tuple(fields)))})

    return build


def _extract_field_def() -> ConfigDef:
    return _replace_null(
        ConfigDef().define(
            "field",
            Type.STRING,
            NO_DEFAULT,
            None,
            Importance.MEDIUM,
            "The field whose value replaces the whole key or value.",
        )
    ).define(
        "field.syntax.version",
        Type.STRING,
        "V1",
        CaseInsensitiveValidString.in_("V1", "V2"),
        Importance.HIGH,
        "V1: field names are top-level names. V2: dotted paths reach nested fields, and backticks quote a "
        "name that contains dots.",
    )


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


def _flatten_def() -> ConfigDef:
    return ConfigDef().define(
        "delimiter",
        Type.STRING,
        ".",
        None,
        Importance.MEDIUM,
        "Joins a nested field's name to its parents' names in the flattened field name.",
    )


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


def _timestamp_converter_def() -> ConfigDef:
    return _replace_null(
        ConfigDef()
        .define(
            "field",
            Type.STRING,
            "",
            None,
            Importance.HIGH,
            "The field to convert; empty converts the whole value.",
        )
        .define(
            "target.type",
            Type.STRING,
            NO_DEFAULT,
            ValidString.in_("string", "unix", "Date", "Time", "Timestamp"),
            Importance.HIGH,
            "What to convert to: string, unix, Date, Time or Timestamp.",
        )
        .define(
            "format",
            Type.STRING,
            "",
            None,
            Importance.MEDIUM,
            "Date pattern (SimpleDateFormat letters) for writing string targets and reading string inputs.",
        )
        .define(
            "unix.precision",
            Type.STRING,
            "milliseconds",
            ValidString.in_("nanoseconds", "microseconds", "milliseconds", "seconds"),
            Importance.LOW,
            "Unit of unix timestamps, read and written: seconds, milliseconds, microseconds or nanoseconds.",
        )
    )


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


def _regex_router_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            "regex",
            Type.STRING,
            NO_DEFAULT,
            _REGEX,
            Importance.HIGH,
            "Pattern the whole topic name must match.",
        )
        .define(
            "replacement",
            Type.STRING,
            NO_DEFAULT,
            None,
            Importance.HIGH,
            "The new topic; $1, $2 ... refer to the pattern's groups.",
        )
    )


def _regex_router(cfg: Mapping[str, Any], target: str) -> Builder:
    # Java: matcher.matches() (the whole topic) then replaceFirst; anchoring the pattern does both.
    anchored = f"^(?:{cfg['regex']})$"

    def build(df: DataFrame) -> Step:
        topic = F.col("topic")
        return Step({"topic": F.regexp_replace(topic, anchored, str(cfg["replacement"]))})

    return build


def _timestamp_router_def() -> ConfigDef:
    return (
        ConfigDef()
        .define(
            "topic.format",
            Type.STRING,
            "${topic}-${timestamp}",
            None,
            Importance.HIGH,
            "The new topic name; ${topic} and ${timestamp} stand for the topic and the formatted timestamp.",
        )
        .define(
            "timestamp.format",
            Type.STRING,
            "yyyyMMdd",
            None,
            Importance.HIGH,
            "Date pattern (SimpleDateFormat letters) for ${timestamp}, in UTC.",
        )
    )


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


def _variants(
    base: str, config_def: Callable[[], ConfigDef], build: Callable[[Mapping[str, Any], str], Builder]
) -> list[TransformationPlugin]:
    return [TransformationPlugin(f"{_PKG}{base}${t.title()}", config_def, build, t) for t in ("key", "value")]


TRANSFORMATIONS: Final[dict[str, TransformationPlugin]] = {
    p.class_name: p
    for p in [
        *_variants("Cast", _cast_def, _cast),
        *_variants("ExtractField", _extract_field_def, _extract_field),
        TransformationPlugin(f"{_PKG}Filter", ConfigDef, _filter),
        *_variants("Flatten", _flatten_def, _flatten),
        *_variants("InsertField", _insert_field_def, _insert_field),
        *_variants("MaskField", _mask_field_def, _mask_field),
        TransformationPlugin(f"{_PKG}RegexRouter", _regex_router_def, _regex_router),
        *_variants("ReplaceField", _replace_field_def, _replace_field),
        *_variants("TimestampConverter", _timestamp_converter_def, _timestamp_converter),
        TransformationPlugin(f"{_PKG}TimestampRouter", _timestamp_router_def, _timestamp_router),
        TransformationPlugin(f"{_PKG}ValueToKey", _value_to_key_def, _value_to_key),
    ]
}


# ------------------------------------------------------------------------------------------- predicates


@dataclass(frozen=True)
class PredicatePlugin:
    class_name: str
    config_def: Callable[[], ConfigDef]
    build: Callable[[Mapping[str, Any]], Callable[[DataFrame], Column]]

    @property
    def simple_name(self) -> str:
        return self.class_name.rsplit(".", 1)[-1]


def _topic_name_matches(cfg: Mapping[str, Any]) -> Callable[[DataFrame], Column]:
    anchored = f"^(?:{cfg['pattern']})$"
    return lambda df: F.coalesce(F.col("topic").rlike(anchored), F.lit(False))


def _has_header_key(cfg: Mapping[str, Any]) -> Callable[[DataFrame], Column]:
    name = str(cfg["name"])
    return lambda df: F.coalesce(F.exists(F.col("headers"), lambda h: h["key"] == F.lit(name)), F.lit(False))


PREDICATES: Final[dict[str, PredicatePlugin]] = {
    p.class_name: p
    for p in [
        PredicatePlugin(
            f"{_PKG}predicates.HasHeaderKey",
            lambda: ConfigDef().define(
                "name",
                Type.STRING,
                NO_DEFAULT,
                NonEmptyString(),
                Importance.MEDIUM,
                "Header key to look for.",
            ),
            _has_header_key,
        ),
        PredicatePlugin(
            f"{_PKG}predicates.RecordIsTombstone", ConfigDef, lambda cfg: lambda df: F.col("value").isNull()
        ),
        PredicatePlugin(
            f"{_PKG}predicates.TopicNameMatches",
            lambda: ConfigDef().define(
                "pattern",
                Type.STRING,
                NO_DEFAULT,
                CompositeValidator.of(NonEmptyString(), _REGEX),
                Importance.MEDIUM,
                "Pattern the whole topic name must match.",
            ),
            _topic_name_matches,
        ),
    ]
}


def _lookup(name: str, table: Mapping[str, Any]) -> Any:
    """By Java class name, or by the simple name Java also accepts as a plugin alias."""
    if name in table:
        return table[name]
    matches = [p for p in table.values() if p.simple_name == name or p.class_name.endswith("." + name)]
    return matches[0] if len(matches) == 1 else None


def lookup_plugin(kind: str, name: str) -> TransformationPlugin | PredicatePlugin | None:
    """A transformation (``kind="transformation"``) or predicate by Java class name or simple name."""
    table: Mapping[str, Any] = TRANSFORMATIONS if kind == "transformation" else PREDICATES
    found: TransformationPlugin | PredicatePlugin | None = _lookup(name, table)
    return found


# ---------------------------------------------------------------------------------------------- chains


@dataclass(frozen=True)
class ConfiguredTransform:
    alias: str
    plugin: TransformationPlugin
    builder: Builder
    predicate: Callable[[DataFrame], Column] | None = None
    negate: bool = False


@dataclass(frozen=True)
class TransformChain:
    """A connector's ``transforms`` in order, each with its optional predicate."""

    transforms: tuple[ConfiguredTransform, ...] = ()

    def apply(self, df: DataFrame) -> DataFrame:
        """The frame after every transform; adds ``TRANSFORM_ERROR``/``TRANSFORM_ERROR_CLASS`` (null if fine).

        Raises ConnectDataError when a transform cannot apply to this frame's types at all (for example
        InsertField on a string value): Java fails every such record too, so the task fails clearly.
        """
        if TRANSFORM_ERROR not in df.columns:
            df = df.withColumn(TRANSFORM_ERROR, F.lit(None).cast("string")).withColumn(
                TRANSFORM_ERROR_CLASS, F.lit(None).cast("string")
            )
        for t in self.transforms:
            df = self._apply_one(df, t)
        return df

    @staticmethod
    def _apply_one(df: DataFrame, t: ConfiguredTransform) -> DataFrame:
        try:
            step = t.builder(df)
        except ConnectDataError as exc:
            raise ConnectDataError(f"Transformation {t.alias} ({t.plugin.class_name}): {exc}") from None
        cond: Column | None = None
        if t.predicate is not None:
            cond = t.predicate(df)
            if t.negate:
                cond = ~cond
        cond_col = "__kc_applies"
        df = df.withColumn(cond_col, cond if cond is not None else F.lit(True))
        applies = F.col(cond_col)
        updates: dict[str, Column] = {}
        for name, expr in step.columns.items():
            if cond is None:
                updates[name] = expr
                continue
            before, after = df.schema[name].dataType, df.select(expr).schema[0].dataType
            if before != after and spark_type_changed(before, after):
                raise ConnectDataError(
                    f"Transformation {t.alias} ({t.plugin.class_name}) changes the {name} type and has a "
                    "predicate; "
                    "in a Spark frame every row must keep one type"
                )
            metadata = df.select(expr).schema[0].metadata
            updates[name] = F.when(applies, expr).otherwise(F.col(name)).alias(name, metadata=metadata)
        if step.error is not None:
            error = F.when(applies, step.error)
            updates[TRANSFORM_ERROR] = F.coalesce(F.col(TRANSFORM_ERROR), error)
            updates[TRANSFORM_ERROR_CLASS] = F.when(
                F.col(TRANSFORM_ERROR).isNull() & error.isNotNull(), F.lit(t.plugin.class_name)
            ).otherwise(F.col(TRANSFORM_ERROR_CLASS))
        if updates:
            df = df.withColumns(updates)
        if step.keep is not None:
            # A row that already failed is kept so the error policy sees it.
            df = df.where(~applies | step.keep | F.col(TRANSFORM_ERROR).isNotNull())
        return df.drop(cond_col)


def spark_type_changed(before: Any, after: Any) -> bool:
    return bool(before.simpleString() != after.simpleString())


def _sub_props(config: Mapping[str, str], prefix: str, skip: Sequence[str] = ()) -> dict[str, str]:
    return {
        k[len(prefix) :]: v
        for k, v in config.items()
        if k.startswith(prefix) and k[len(prefix) :] not in skip
    }


def _aliases(config: Mapping[str, str], key: str) -> list[str]:
    raw = config.get(key, "").strip()
    aliases = [a.strip() for a in raw.split(",") if a.strip()] if raw else []
    if len(set(aliases)) != len(aliases):
        raise ConfigValidationError(key, raw, "Duplicate alias provided.")
    return aliases


def transform_chain(config: Mapping[str, str]) -> TransformChain:
    """The chain a connector config describes, with Java's keys; errors name the key and what is allowed."""
    predicates: dict[str, Callable[[DataFrame], Column]] = {}
    for alias in _aliases(config, "predicates"):
        key = f"predicates.{alias}.type"
        plugin = _lookup(config.get(key, ""), PREDICATES)
        if plugin is None:
            raise ConfigValidationError(
                key, config.get(key), "Not a predicate kconnect knows; supported: " + ", ".join(PREDICATES)
            )
        parsed = plugin.config_def().parse(_sub_props(config, f"predicates.{alias}.", ("type",)))
        predicates[alias] = plugin.build(parsed)
    configured = []
    for alias in _aliases(config, "transforms"):
        key = f"transforms.{alias}.type"
        plugin = _lookup(config.get(key, ""), TRANSFORMATIONS)
        if plugin is None:
            raise ConfigValidationError(
                key,
                config.get(key),
                "Not a transformation kconnect knows; supported: " + ", ".join(TRANSFORMATIONS),
            )
        prefix = f"transforms.{alias}."
        parsed = plugin.config_def().parse(_sub_props(config, prefix, ("type", "predicate", "negate")))
        predicate_alias = config.get(prefix + "predicate")
        negate_raw = config.get(prefix + "negate", "false").strip().lower()
        if negate_raw not in ("true", "false"):
            raise ConfigValidationError(
                prefix + "negate", config[prefix + "negate"], "Expected value to be either true or false"
            )
        predicate = None
        if predicate_alias:
            if predicate_alias not in predicates:
                raise ConfigValidationError(
                    prefix + "predicate",
                    predicate_alias,
                    "Unknown predicate alias; defined in predicates: " + config.get("predicates", ""),
                )
            predicate = predicates[predicate_alias]
        configured.append(
            ConfiguredTransform(
                alias, plugin, plugin.build(parsed, plugin.target or "value"), predicate, negate_raw == "true"
            )
        )
    return TransformChain(tuple(configured))
