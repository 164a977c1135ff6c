"""Every plugin kind ``GET /connector-plugins`` can list, and how a name in a URL resolves to one.

Apache Kafka Connect 3.9 lists connectors first, then (with ``connectorsOnly=false``) transformations,
predicates, converters and header converters, each kind sorted by class name, as ``{"class", "type",
"version"}``. Connectors come from the :class:`PluginRegistry`; the other kinds are the ones kconnect
implements itself and accepts by their Apache class names (``config/classes.py``,
``runtime/dataplane/transforms.py``), so the list never names a class a worker would then refuse: only the
transformations and predicates kconnect implements are listed, not all of Java's.

The module is pure: a catalogue is built from a registry and answers lookups.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kconnect.config.classes import CONVERTERS, HEADER_CONVERTERS
from kconnect.runtime import __version__
from kconnect.runtime.plugins.api import AmbiguousPluginError, PluginDesc, PluginError, PluginRegistry
from kconnect.runtime.plugins.config_def import NO_DEFAULT, ConfigDef, Importance, Type, ValidString, Width
from kconnect.runtime.plugins.connector_config import ConfigKeyInfo, plugin_config_key_infos

__all__ = [
    "PLUGIN_TYPE_ORDER",
    "OtherPlugin",
    "PluginCatalog",
    "UnknownPluginError",
    "builtin_other_plugins",
]

#: The order Java lists plugin kinds in when ``connectorsOnly=false``.
PLUGIN_TYPE_ORDER: tuple[str, ...] = (
    "source",
    "sink",
    "transformation",
    "predicate",
    "converter",
    "header_converter",
)


class UnknownPluginError(LookupError):
    """No plugin of any kind has this name; the REST layer answers 404 as Java does."""


def _converter_type_def() -> ConfigDef:
    # Every Java converter defines converter.type; the runtime sets it to key, value or header.
    return ConfigDef().define(
        "converter.type",
        Type.STRING,
        NO_DEFAULT,
        ValidString.in_("key", "value", "header"),
        Importance.LOW,
        "Whether this converter handles keys, values or headers; set by the runtime.",
    )


def _json_converter_def() -> ConfigDef:
    return (
        _converter_type_def()
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
    return _converter_type_def().define(
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


_CONFIG_DEFS = {
    "org.apache.kafka.connect.json.JsonConverter": _json_converter_def,
    "org.apache.kafka.connect.storage.StringConverter": _string_converter_def,
    "org.apache.kafka.connect.converters.ByteArrayConverter": _converter_type_def,
    "org.apache.kafka.connect.storage.SimpleHeaderConverter": ConfigDef,
}


@dataclass(frozen=True)
class OtherPlugin:
    """A plugin that is not a connector: listed with ``connectorsOnly=false``, with its config keys."""

    class_name: str
    type: str
    version: str

    @property
    def simple_name(self) -> str:
        return self.class_name.rsplit(".", 1)[-1]

    def info(self) -> dict[str, str]:
        return {"class": self.class_name, "type": self.type, "version": self.version}

    def config_def(self) -> ConfigDef:
        if self.type in ("transformation", "predicate"):
            from kconnect.runtime.dataplane.transforms import (  # pyspark: imported only when asked
                PREDICATES,
                TRANSFORMATIONS,
            )

            table = TRANSFORMATIONS if self.type == "transformation" else PREDICATES
            return table[self.class_name].config_def()
        factory = _CONFIG_DEFS.get(self.class_name, ConfigDef)
        return factory()


def builtin_other_plugins() -> list[OtherPlugin]:
    """The transformations, predicates, converters and header converters kconnect implements, by their
    Apache class names."""
    from kconnect.runtime.dataplane.transforms import PREDICATES, TRANSFORMATIONS

    plugins = [OtherPlugin(name, "transformation", __version__) for name in TRANSFORMATIONS]
    plugins += [OtherPlugin(name, "predicate", __version__) for name in PREDICATES]
    plugins += [OtherPlugin(name, "converter", __version__) for name in CONVERTERS]
    plugins += [OtherPlugin(name, "header_converter", __version__) for name in HEADER_CONVERTERS]
    return plugins


@dataclass(frozen=True)
class PluginCatalog:
    """Connector plugins (from the registry) plus the other kinds, in Java's listing order."""

    registry: PluginRegistry
    others: tuple[OtherPlugin, ...]

    @classmethod
    def of(cls, registry: PluginRegistry, others: Sequence[OtherPlugin] | None = None) -> PluginCatalog:
        return cls(registry, tuple(builtin_other_plugins() if others is None else others))

    def connectors(self) -> list[PluginDesc]:
        return self.registry.plugins()

    def listing(self, connectors_only: bool = True) -> list[dict[str, str]]:
        """What ``GET /connector-plugins`` answers; kinds in Java's order, each sorted by class name."""
        entries = [d.info() for d in self.connectors()]
        if not connectors_only:
            entries += [p.info() for p in self.others]
        # Sources and sinks are one kind (connectors), sorted together by class name.
        rank = {t: max(i - 1, 0) for i, t in enumerate(PLUGIN_TYPE_ORDER)}
        return sorted(entries, key=lambda e: (rank.get(e["type"], len(rank)), e["class"]))

    def config_keys(self, plugin: str) -> list[ConfigKeyInfo]:
        """What ``GET /connector-plugins/{plugin}/config`` answers for a plugin of any kind.

        Connector names resolve as the registry resolves them (class name, declared alias, simple name,
        simple name without ``Connector``); other plugins by class name or simple name.
        Raises UnknownPluginError when nothing matches, PluginError when a connector alias is ambiguous.
        """
        try:
            return plugin_config_key_infos(self.registry, plugin)
        except AmbiguousPluginError:
            raise
        except PluginError:
            pass
        matches = [p for p in self.others if plugin in (p.class_name, p.simple_name)]
        if not matches:
            raise UnknownPluginError(f"Unknown plugin {plugin}.")
        return [ConfigKeyInfo.of(k) for k in matches[0].config_def().config_keys.values()]
