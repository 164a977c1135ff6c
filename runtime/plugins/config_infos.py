"""Config keys and validation results as the REST API renders them (Java's ``ConfigInfos`` entities).

``GET /connector-plugins/{plugin}/config`` answers a list of :class:`ConfigKeyInfo` and
``PUT /connector-plugins/{plugin}/config/validate`` a :class:`ConfigInfos`; the field names, their order
and the rendering of defaults and values as strings are Java's, so tools written for Java's endpoints
read ours unchanged. These dataclasses are the one definition of those shapes: the OpenAPI document
(``rest/openapi.py``) derives its schemas from them.

The module is pure: ConfigKeys and ConfigValues in, JSON-ready entities out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kconnect.runtime.plugins.config_def import ConfigKey, ConfigValue, Password, Type, convert_to_string
from kconnect.runtime.plugins.connector_config import base_config_def, plugin_config_def
from kconnect.runtime.plugins.registry import PluginRegistry

__all__ = [
    "ConfigInfo",
    "ConfigInfos",
    "ConfigKeyInfo",
    "ConfigValueInfo",
    "generate_result",
    "plugin_config_key_infos",
]


@dataclass(frozen=True)
class ConfigKeyInfo:
    """A plugin's config key as Apache Kafka Connect 4.x's REST API describes it; the fields are in the
    order Java writes them, so tools written for Java's answers read ours unchanged. (4.x's ConfigKeyInfo
    is a Java record: a key's place in its group is ``order_in_group``, written after ``group``; 3.9 wrote
    it last, as ``order``.)"""

    name: str
    type: str
    required: bool
    default_value: str | None
    importance: str
    documentation: str | None
    group: str | None
    order_in_group: int
    width: str
    display_name: str | None
    dependents: list[str]

    @classmethod
    def of(cls, key: ConfigKey) -> ConfigKeyInfo:
        """A defined key as Java renders it: a required key has no default, others their default as text."""
        return cls(
            name=key.name,
            type=key.type.value,
            required=key.required,
            default_value=None if key.required else convert_to_string(key.default, key.type),
            importance=key.importance.value,
            documentation=key.documentation,
            group=key.group,
            order_in_group=key.order_in_group,
            width=key.width.value,
            display_name=key.display_name,
            dependents=list(key.dependents),
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object Java writes for this key."""
        # Field order as Java 4.x's Jackson serializes the ConfigKeyInfo record: its components' order.
        return {
            "name": self.name,
            "type": self.type,
            "required": self.required,
            "default_value": self.default_value,
            "importance": self.importance,
            "documentation": self.documentation,
            "group": self.group,
            "order_in_group": self.order_in_group,
            "width": self.width,
            "display_name": self.display_name,
            "dependents": list(self.dependents),
        }


@dataclass(frozen=True)
class ConfigValueInfo:
    """One key's validated value as Apache Kafka Connect reports it: the value as text, the recommended
    values and the errors, so a client shows each problem next to its key."""

    name: str
    value: str | None
    recommended_values: list[str]
    errors: list[str]
    visible: bool

    @classmethod
    def of(cls, value: ConfigValue, type_: Type | None) -> ConfigValueInfo:
        """A validated value rendered with its key's type (``type_``, None for undefined keys), as Java
        renders it. A PASSWORD key's value is ``[hidden]`` even when a plugin's ``validate`` answers the
        raw string and not a parsed ``Password``: Java would echo that string, a secret."""
        recommended_type = Type.STRING if type_ is Type.LIST else type_
        recommended = [convert_to_string(v, recommended_type) for v in value.recommended_values]
        shown = convert_to_string(value.value, type_)
        return cls(
            name=value.name,
            value=Password.HIDDEN if type_ is Type.PASSWORD and shown is not None else shown,
            recommended_values=[r for r in recommended if r is not None],
            errors=list(value.errors),
            visible=value.visible,
        )

    def to_json(self) -> dict[str, Any]:
        """The JSON object Java writes for this result."""
        return {
            "name": self.name,
            "value": self.value,
            "recommended_values": list(self.recommended_values),
            "errors": list(self.errors),
            "visible": self.visible,
        }


@dataclass(frozen=True)
class ConfigInfo:
    """One key of a validation answer: its definition (null for a key no ConfigDef defines) and its
    validated value, paired as Java pairs them."""

    definition: ConfigKeyInfo | None
    value: ConfigValueInfo | None

    def to_json(self) -> dict[str, Any]:
        """The JSON object Java writes for this entry."""
        return {
            "definition": None if self.definition is None else self.definition.to_json(),
            "value": None if self.value is None else self.value.to_json(),
        }


@dataclass(frozen=True)
class ConfigInfos:
    """The answer of ``PUT /connector-plugins/{plugin}/config/validate``, as Java's: the error count, the
    groups and every key's definition and value, so a client can tell a valid config at a glance."""

    name: str
    error_count: int
    groups: list[str]
    configs: list[ConfigInfo]

    def to_json(self) -> dict[str, Any]:
        """The response body, fields in Java's order."""
        return {
            "name": self.name,
            "error_count": self.error_count,
            "groups": list(self.groups),
            "configs": [c.to_json() for c in self.configs],
        }

    def error_messages(self) -> list[str]:
        """Every error of every key, in answer order, for the message of a refused create or update."""
        return [e for c in self.configs if c.value is not None for e in c.value.errors]

    def invalid_config_message(self) -> str:
        """The 400 message Java gives when creating or updating a connector whose config has errors."""
        lines = [
            f"Connector configuration is invalid and contains the following {self.error_count} error(s):",
            *self.error_messages(),
            "You can also find the above list of errors at the endpoint "
            "`/connector-plugins/{connectorType}/config/validate`",
        ]
        return "\n".join(lines)


def generate_result(
    name: str, keys: Mapping[str, ConfigKey], values: Sequence[ConfigValue], groups: Sequence[str]
) -> ConfigInfos:
    """Assemble ConfigInfos as Java's ``AbstractHerder.generateResult``.

    Values without a definition come first, in the order met; then every defined key in definition
    order. When two values share a name the later one wins, which is why a plugin's own result
    replaces a runtime-level result of the same name, as in Java.
    """
    infos: list[ConfigInfo] = []
    by_name: dict[str, ConfigValue] = {}
    errors = 0
    for value in values:
        by_name[value.name] = value
        if value.name not in keys:
            infos.append(ConfigInfo(None, ConfigValueInfo.of(value, None)))
            errors += len(value.errors)
    for key_name, key in keys.items():
        found = by_name.get(key_name)
        value_info = None if found is None else ConfigValueInfo.of(found, key.type)
        if found is not None:
            errors += len(found.errors)
        infos.append(ConfigInfo(ConfigKeyInfo.of(key), value_info))
    return ConfigInfos(name, errors, list(groups), infos)


def plugin_config_key_infos(
    registry: PluginRegistry, plugin: str, version: str | None = None
) -> list[ConfigKeyInfo]:
    """What ``GET /connector-plugins/{plugin}/config[?version=...]`` lists: the plugin's keys (at the
    newest version ``version`` allows, KIP-891), then its type's base keys."""
    desc = registry.find(plugin, version)
    plugin_def = plugin_config_def(desc.cls())
    base = base_config_def(desc.cls)
    keys = [*plugin_def.config_keys.values()]
    keys += [k for name, k in base.config_keys.items() if name not in plugin_def.config_keys]
    return [ConfigKeyInfo.of(k) for k in keys]
