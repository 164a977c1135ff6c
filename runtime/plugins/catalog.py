"""Every plugin kind ``GET /connector-plugins`` can list, and how a name in a URL resolves to one.

Apache Kafka Connect 3.9 lists connectors first, then (with ``connectorsOnly=false``) transformations,
predicates, converters and header converters, each kind sorted by class name, as ``{"class", "type",
"version"}``. Connectors come from the :class:`PluginRegistry`; the other kinds are the ones kconnect
implements itself and accepts by their Apache class names (``config/classes.py``,
``runtime/plugins/transform_configs.py``), so the list never names a class a worker would then refuse:
only the transformations and predicates kconnect implements are listed, not all of Java's.

The module is pure: a catalogue is built from a registry and answers lookups. The keys of the other
kinds come from :mod:`converter_configs` and :mod:`transform_configs`, which hold no Spark code, so
listing plugins never imports the data plane.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kconnect.config.classes import CONVERTERS, HEADER_CONVERTERS
from kconnect.runtime import __version__
from kconnect.runtime.plugins.config_def import ConfigDef
from kconnect.runtime.plugins.config_infos import ConfigKeyInfo, plugin_config_key_infos
from kconnect.runtime.plugins.converter_configs import converter_config_def
from kconnect.runtime.plugins.plugin_versions import not_found_message, requirement
from kconnect.runtime.plugins.registry import (
    AmbiguousPluginError,
    PluginDesc,
    PluginError,
    PluginRegistry,
    PluginVersionError,
)
from kconnect.runtime.plugins.transform_configs import PREDICATE_DEFS, TRANSFORMATION_DEFS

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


@dataclass(frozen=True)
class OtherPlugin:
    """A plugin that is not a connector: listed with ``connectorsOnly=false``, with its config keys."""

    class_name: str
    type: str
    version: str

    @property
    def simple_name(self) -> str:
        """The class name without its package, which a URL may name the plugin by."""
        return self.class_name.rsplit(".", 1)[-1]

    def info(self) -> dict[str, str]:
        """The plugin's entry in ``GET /connector-plugins``."""
        return {"class": self.class_name, "type": self.type, "version": self.version}

    def config_def(self) -> ConfigDef:
        """The plugin's keys, for ``GET /connector-plugins/{plugin}/config``."""
        if self.type == "transformation":
            return TRANSFORMATION_DEFS[self.class_name].config_def()
        if self.type == "predicate":
            return PREDICATE_DEFS[self.class_name].config_def()
        return converter_config_def(self.class_name)


def builtin_other_plugins() -> list[OtherPlugin]:
    """The transformations, predicates, converters and header converters kconnect implements, by their
    Apache class names."""
    plugins = [OtherPlugin(name, "transformation", __version__) for name in TRANSFORMATION_DEFS]
    plugins += [OtherPlugin(name, "predicate", __version__) for name in PREDICATE_DEFS]
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
        """A catalogue of the registry's connectors and ``others`` (by default the built-in other kinds)."""
        return cls(registry, tuple(builtin_other_plugins() if others is None else others))

    def connectors(self) -> list[PluginDesc]:
        """The connector plugins, as the registry lists them."""
        return self.registry.plugins()

    def listing(self, connectors_only: bool = True) -> list[dict[str, str]]:
        """What ``GET /connector-plugins`` answers; kinds in Java's order, each sorted by class name."""
        entries = [d.info() for d in self.connectors()]
        if not connectors_only:
            entries += [p.info() for p in self.others]
        # Sources and sinks are one kind (connectors), sorted together by class name.
        rank = {t: max(i - 1, 0) for i, t in enumerate(PLUGIN_TYPE_ORDER)}
        return sorted(entries, key=lambda e: (rank.get(e["type"], len(rank)), e["class"]))

    def config_keys(self, plugin: str, version: str | None = None) -> list[ConfigKeyInfo]:
        """What ``GET /connector-plugins/{plugin}/config[?version=...]`` answers for a plugin of any kind.

        Connector names resolve as the registry resolves them (class name, declared alias, simple name,
        simple name without ``Connector``); other plugins by class name or simple name. ``version`` is a
        KIP-891 requirement (a version, a range or ``latest``); the other kinds have kconnect's version.
        Raises UnknownPluginError when nothing matches, PluginError when a connector alias is ambiguous,
        PluginVersionError when no version meets ``version``, InvalidVersionSpec when it is malformed.
        """
        wanted = requirement(version)
        try:
            return plugin_config_key_infos(self.registry, plugin, version)
        except (AmbiguousPluginError, PluginVersionError):
            raise
        except PluginError:
            pass
        matches = [p for p in self.others if plugin in (p.class_name, p.simple_name)]
        if not matches:
            raise UnknownPluginError(f"Unknown plugin {plugin}.")
        if wanted is not None and not wanted.contains(matches[0].version):
            available = [matches[0].version]
            raise PluginVersionError(not_found_message(matches[0].class_name, wanted, available), available)
        return [ConfigKeyInfo.of(k) for k in matches[0].config_def().config_keys.values()]
