"""``converter.type``: the key every converter defines, Apache's (converter_configs) and Confluent's
(schema_registry_configs) alike; the runtime sets it to key, value or header.

Why a module of its own: both catalogues start each converter's ConfigDef with it, and converter_configs
imports schema_registry_configs, so the latter cannot take it from the former without a cycle. Pure.
"""

from __future__ import annotations

from kconnect.runtime.plugins.config_def import NO_DEFAULT, ConfigDef, Importance, Type, ValidString


def converter_type_def() -> ConfigDef:
    """A new ConfigDef holding ``converter.type`` alone, for a converter's other keys to be added to."""
    return ConfigDef().define(
        "converter.type",
        Type.STRING,
        NO_DEFAULT,
        ValidString.in_("key", "value", "header"),
        Importance.LOW,
        "Whether this converter handles keys, values or headers; set by the runtime.",
    )
