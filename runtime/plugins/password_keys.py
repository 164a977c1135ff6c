"""Which keys of a connector config its ConfigDefs declare PASSWORD, for masking where a config is printed.

Why: ``config/masking.py`` recognises a credential by its key's name, and a plugin is free to name its
secret ``aws.secret.access.key`` or ``endpoint.token.value``. Apache Kafka Connect hides the value of any
key declared ``Type.PASSWORD`` in the connector's ConfigDef, and in those of its converters,
transformations and predicates under their prefixes; these are the names ``masking.masked(...,
extra=...)`` takes. REST answers with stored configs (``GET /connectors/{name}/config``, ``/tasks``) are
not masked, as in Java; a validate answer hides PASSWORD values in ``config_infos``.

The connector's part is cached per plugin class: it is a pure function of the class's ConfigDef (Java
builds one per class too), and the failed-action log asks for it for every action that fails.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

from kconnect.runtime.plugins.api import Connector
from kconnect.runtime.plugins.config_def import ConfigDef, Type
from kconnect.runtime.plugins.connector_config import (
    HEADER_CONVERTER_CLASS_CONFIG,
    KEY_CONVERTER_CLASS_CONFIG,
    VALUE_CONVERTER_CLASS_CONFIG,
    connector_config_def,
    enrich,
    plugin_version_names,
)
from kconnect.runtime.plugins.connector_validation import find_connector_plugin
from kconnect.runtime.plugins.converter_configs import converter_config_def
from kconnect.runtime.plugins.registry import PluginRegistry

__all__ = ["config_password_keys", "password_names", "plugin_password_keys"]

_CONVERTER_KEYS = (KEY_CONVERTER_CLASS_CONFIG, VALUE_CONVERTER_CLASS_CONFIG, HEADER_CONVERTER_CLASS_CONFIG)


def password_names(config_def: ConfigDef, prefix: str = "") -> frozenset[str]:
    """The keys ``config_def`` declares PASSWORD, each under ``prefix`` (a converter's ``key.converter.``)."""
    return frozenset(prefix + k.name for k in config_def.config_keys.values() if k.type is Type.PASSWORD)


@functools.cache
def plugin_password_keys(plugin: type[Connector]) -> frozenset[str]:
    """The PASSWORD keys of a connector class: its own ConfigDef's and the runtime's common keys'."""
    return password_names(connector_config_def(plugin()))


@functools.cache
def _converter_password_keys(prefix: str, class_name: str) -> frozenset[str]:
    return password_names(converter_config_def(class_name), prefix + ".")


def config_password_keys(registry: PluginRegistry, config: Mapping[str, str | None]) -> frozenset[str]:
    """The PASSWORD keys of one connector config: the plugin ``connector.class`` (and its version) names,
    the converters it names and its transformations' and predicates' keys under ``transforms.<alias>.``.

    Never raises: it serves log lines, and a config naming no installed plugin (or a plugin whose
    ``config_def`` fails) is still printed, masked by name and by what was found before the failure.
    """
    names: set[str] = set()
    try:
        props = plugin_version_names(config)
        names |= password_names(enrich(ConfigDef(), props))
        for key in _CONVERTER_KEYS:
            if props.get(key):
                names |= _converter_password_keys(key, str(props[key]).strip())
        desc, _ = find_connector_plugin(registry, props)
        names |= plugin_password_keys(desc.cls)
    except Exception:  # a log line must still be written; what was found so far is still masked
        pass
    return frozenset(names)
