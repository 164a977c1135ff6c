"""Choosing a converter by its Java class name or kconnect alias, and the converter settings a task uses.

Why separate: this is the one place that knows every converter (the three here and the Schema Registry
ones, imported when first named), so each converter module knows only the contract.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Final

from kconnect.config.classes import CONVERTERS, resolve_alias
from kconnect.runtime.dataplane.converters.base import Converter
from kconnect.runtime.dataplane.converters.byte_array_converter import ByteArrayConverter
from kconnect.runtime.dataplane.converters.json_converter import JsonConverter
from kconnect.runtime.dataplane.converters.string_converter import StringConverter
from kconnect.runtime.plugins.config_def import ConfigValidationError

__all__ = ["PLUGGED", "converter_config", "converter_from_config", "new_converter"]


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
