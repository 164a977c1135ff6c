"""The ConfigDefs of the transformations and predicates kconnect implements, by Apache class name.

Connector configs name Java's single message transforms and predicates (``transforms.<alias>.type``,
``predicates.<alias>.type``) with their Java keys. Three places need those keys: the connector config's
validation adds them under each alias's prefix (``runtime/plugins/connector_config.py``), the plugin
listing shows them (``runtime/plugins/catalog.py``), and the data plane parses a transform's settings
before building its Spark columns (``runtime/dataplane/transformations.py``, ``predicates.py``). They are
defined here once, apart from the Spark code, so the control plane reads them without importing Spark and
the plugin modules never import the data plane.

The module is pure: ConfigDefs, validators and two tables keyed by Apache class name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

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
    "CAST_TYPES",
    "PREDICATE_DEFS",
    "TRANSFORMATION_DEFS",
    "PredicateDef",
    "TransformationDef",
    "find_definition",
    "find_predicate",
    "find_transformation",
]

_PKG: Final = "org.apache.kafka.connect.transforms."


_REPLACE_NULL_DOC: Final = (
    "When a field is null but its schema has a default, write the default (true) or keep the null (false)."
)


# ------------------------------------------------------------------------------------- validators


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


# -------------------------------------------------------------------------------- ConfigDefs


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


#: Cast's ``spec`` type names -> the Connect schema type each casts to.
CAST_TYPES: Final = {
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
        if parts[-1].strip() not in CAST_TYPES:
            raise ConfigValidationError(
                name,
                value,
                f"Invalid type found in casting spec: {parts[-1].strip()}; valid: " + ", ".join(CAST_TYPES),
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


def _hoist_field_def() -> ConfigDef:
    return ConfigDef().define(
        "field",
        Type.STRING,
        NO_DEFAULT,
        None,
        Importance.MEDIUM,
        "Field name for the single field that will be created in the resulting Struct or Map.",
    )


def _flatten_def() -> ConfigDef:
    return ConfigDef().define(
        "delimiter",
        Type.STRING,
        ".",
        None,
        Importance.MEDIUM,
        "Joins a nested field's name to its parents' names in the flattened field name.",
    )


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


# ------------------------------------------------------------------------------------------- tables


@dataclass(frozen=True)
class TransformationDef:
    """One Java transformation class kconnect implements: its name and keys, without the Spark code.

    ``target`` is ``"key"`` or ``"value"`` for the ``$Key``/``$Value`` variants, None for transformations
    of the whole record; the data plane pairs each definition with its Spark builder by ``base``.
    """

    class_name: str
    config_def: Callable[[], ConfigDef]
    target: str | None = None

    @property
    def simple_name(self) -> str:
        """The class name without its package, which Java also accepts as an alias."""
        return self.class_name.rsplit(".", 1)[-1]

    @property
    def base(self) -> str:
        """The simple name without a ``$Key``/``$Value`` suffix: the transformation both variants share."""
        return self.simple_name.split("$", 1)[0]


@dataclass(frozen=True)
class PredicateDef:
    """One Java predicate class kconnect implements: its name and keys, without the Spark code."""

    class_name: str
    config_def: Callable[[], ConfigDef]

    @property
    def simple_name(self) -> str:
        """The class name without its package, which Java also accepts as an alias."""
        return self.class_name.rsplit(".", 1)[-1]


def _variants(base: str, config_def: Callable[[], ConfigDef]) -> list[TransformationDef]:
    return [TransformationDef(f"{_PKG}{base}${t.title()}", config_def, t) for t in ("key", "value")]


#: The transformations kconnect implements, by Apache class name, in the order error messages list them.
TRANSFORMATION_DEFS: Final[Mapping[str, TransformationDef]] = {
    d.class_name: d
    for d in [
        *_variants("Cast", _cast_def),
        *_variants("ExtractField", _extract_field_def),
        TransformationDef(f"{_PKG}Filter", ConfigDef),
        *_variants("Flatten", _flatten_def),
        *_variants("HoistField", _hoist_field_def),
        *_variants("InsertField", _insert_field_def),
        *_variants("MaskField", _mask_field_def),
        TransformationDef(f"{_PKG}RegexRouter", _regex_router_def),
        *_variants("ReplaceField", _replace_field_def),
        *_variants("TimestampConverter", _timestamp_converter_def),
        TransformationDef(f"{_PKG}TimestampRouter", _timestamp_router_def),
        TransformationDef(f"{_PKG}ValueToKey", _value_to_key_def),
    ]
}


def _has_header_key_def() -> ConfigDef:
    return ConfigDef().define(
        "name",
        Type.STRING,
        NO_DEFAULT,
        NonEmptyString(),
        Importance.MEDIUM,
        "Header key to look for.",
    )


def _topic_name_matches_def() -> ConfigDef:
    return ConfigDef().define(
        "pattern",
        Type.STRING,
        NO_DEFAULT,
        CompositeValidator.of(NonEmptyString(), _REGEX),
        Importance.MEDIUM,
        "Pattern the whole topic name must match.",
    )


#: The predicates kconnect implements, by Apache class name, in the order error messages list them.
PREDICATE_DEFS: Final[Mapping[str, PredicateDef]] = {
    d.class_name: d
    for d in [
        PredicateDef(f"{_PKG}predicates.HasHeaderKey", _has_header_key_def),
        PredicateDef(f"{_PKG}predicates.RecordIsTombstone", ConfigDef),
        PredicateDef(f"{_PKG}predicates.TopicNameMatches", _topic_name_matches_def),
    ]
}


def _lookup(name: str, table: Mapping[str, Any]) -> Any:
    """By Java class name, or by the simple name Java also accepts as a plugin alias."""
    if name in table:
        return table[name]
    matches = [p for p in table.values() if p.simple_name == name or p.class_name.endswith("." + name)]
    return matches[0] if len(matches) == 1 else None


def find_transformation(name: str) -> TransformationDef | None:
    """A transformation by Java class name or by the simple name Java also accepts; None if unknown."""
    found: TransformationDef | None = _lookup(name, TRANSFORMATION_DEFS)
    return found


def find_predicate(name: str) -> PredicateDef | None:
    """A predicate by Java class name or by the simple name Java also accepts; None if unknown."""
    found: PredicateDef | None = _lookup(name, PREDICATE_DEFS)
    return found


def find_definition(kind: str, name: str) -> TransformationDef | PredicateDef | None:
    """A transformation (``kind="transformation"``) or predicate by Java class name or simple name."""
    return find_transformation(name) if kind == "transformation" else find_predicate(name)
