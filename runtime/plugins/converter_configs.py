"""The ConfigDefs of the converters and header converters kconnect implements, by Apache class name.

Two places need them: the data plane's converters parse their settings with them
(``runtime/dataplane/converters.py``), and ``GET /connector-plugins/{plugin}/config`` lists them
(``runtime/plugins/catalog.py``). They live here, apart from both, so that the plugin catalogue does not
import the data plane (and with it Spark) and the data plane does not import the catalogue: the keys are
defined once and each side imports them at module top.

The module is pure: it builds ConfigDefs and imports nothing but :mod:`config_def` and the other
catalogues of converter keys.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final

from kconnect.runtime.plugins.config_def import ConfigDef, Importance, Type, Width
from kconnect.runtime.plugins.converter_type import converter_type_def
from kconnect.runtime.plugins.schema_registry_configs import SCHEMA_REGISTRY_CONFIG_DEFS

__all__ = [
    "BYTE_ARRAY_CONVERTER",
    "CONVERTER_CONFIG_DEFS",
    "JSON_CONVERTER",
    "SIMPLE_HEADER_CONVERTER",
    "STRING_CONVERTER",
    "converter_config_def",
]

JSON_CONVERTER: Final = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER: Final = "org.apache.kafka.connect.storage.StringConverter"
BYTE_ARRAY_CONVERTER: Final = "org.apache.kafka.connect.converters.ByteArrayConverter"
SIMPLE_HEADER_CONVERTER: Final = "org.apache.kafka.connect.storage.SimpleHeaderConverter"


def _json_converter_def() -> ConfigDef:
    return (
        converter_type_def()
        .define(
            "schemas.enable",
            Type.BOOLEAN,
            True,
            None,
            Importance.HIGH,
            "Whether each serialized key or value carries its schema in an envelope.",
            group="Schemas",
            order_in_group=0,
            width=Width.MEDIUM,
            display_name="Enable Schemas",
        )
        .define(
            "schemas.cache.size",
            Type.INT,
            1000,
            None,
            Importance.HIGH,
            "How many schemas one converter instance keeps converted.",
            group="Schemas",
            order_in_group=1,
            width=Width.MEDIUM,
            display_name="Schema Cache Size",
        )
        .define(
            "schema.content",
            Type.STRING,
            None,
            None,
            Importance.HIGH,
            "Apache Kafka 4.2's external schema (KIP-1054): a Connect JSON schema every record is read "
            "with, instead of the schema in each record's envelope; a record may be the bare payload. "
            "Only with schemas.enable=true, and only when reading (sink connectors).",
            group="Schemas",
            order_in_group=2,
            width=Width.MEDIUM,
            display_name="Schema Content",
        )
        .define(
            "decimal.format",
            Type.STRING,
            "BASE64",
            None,
            Importance.LOW,
            "How decimals are written: BASE64 (the default) or NUMERIC; case-insensitive.",
            group="Serialization",
            order_in_group=0,
            width=Width.MEDIUM,
            display_name="Decimal Format",
        )
        .define(
            "replace.null.with.default",
            Type.BOOLEAN,
            True,
            None,
            Importance.LOW,
            "Whether a null field that has a default value is written as that default.",
            group="Serialization",
            order_in_group=1,
            width=Width.MEDIUM,
            display_name="Replace null with default",
        )
    )


def _string_converter_def() -> ConfigDef:
    return converter_type_def().define(
        "converter.encoding",
        Type.STRING,
        "UTF8",
        None,
        Importance.HIGH,
        "Character encoding of the strings.",
        group="Converter",
        order_in_group=0,
        width=Width.MEDIUM,
        display_name="Encoding",
    )


#: Apache class name -> a fresh ConfigDef of that converter (fresh because ConfigDefs are mutable).
CONVERTER_CONFIG_DEFS: Mapping[str, Callable[[], ConfigDef]] = MappingProxyType(
    {
        JSON_CONVERTER: _json_converter_def,
        STRING_CONVERTER: _string_converter_def,
        BYTE_ARRAY_CONVERTER: converter_type_def,
        SIMPLE_HEADER_CONVERTER: ConfigDef,
        **SCHEMA_REGISTRY_CONFIG_DEFS,
    }
)


def converter_config_def(class_name: str) -> ConfigDef:
    """The keys of the converter named by its Apache class name; an empty ConfigDef for any other name,
    as the plugin listing shows a converter that declares no keys."""
    return CONVERTER_CONFIG_DEFS.get(class_name, ConfigDef)()
