"""Connector-config validation as the REST API reports it, and strict parsing of stored configs.

``validate_connector_config`` reproduces the answer of ``PUT /connector-plugins/{plugin}/config/validate``
key for key (order, groups, messages, error count), checked against an Apache Kafka Connect 3.9 worker, so
tools written for Java's endpoint can use ours unchanged: the keys of :mod:`connector_config`, the rules a
single key cannot express (a sink's topics, exactly-once preflight, the consumer group, client overrides)
and the plugin's own ``validate``, rendered by :mod:`config_infos`. ``parse_connector_config`` applies the
same definitions to a stored config, raising on the first problem as Java's ``ConnectorConfig`` does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kconnect.config.config_providers import ConfigProviders
from kconnect.config.errors import ConfigError
from kconnect.config.java_text import java_trim
from kconnect.config.masking import shown as printable
from kconnect.runtime import __version__
from kconnect.runtime.client_config import ROLES, task_clients
from kconnect.runtime.plugins.api import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SinkConnector,
    SourceConnector,
)
from kconnect.runtime.plugins.config_def import (
    ClassResolver,
    ConfigValidationError,
    ConfigValue,
    NonEmptyStringWithoutControlChars,
    Type,
    java_str,
    parse_type,
)
from kconnect.runtime.plugins.config_infos import ConfigInfos, generate_result
from kconnect.runtime.plugins.connector_config import (
    CONNECTOR_CLASS_CONFIG,
    CONNECTOR_VERSION_CONFIG,
    CONSUMER_OVERRIDES_PREFIX,
    DLQ_TOPIC_NAME_CONFIG,
    EXACTLY_ONCE_SUPPORT_CONFIG,
    HEADER_CONVERTER_CLASS_CONFIG,
    KEY_CONVERTER_CLASS_CONFIG,
    NAME_CONFIG,
    PREDICATES_CONFIG,
    TASKS_MAX_CONFIG,
    TASKS_MAX_ENFORCE_CONFIG,
    TOPICS_CONFIG,
    TOPICS_REGEX_CONFIG,
    TRANSACTION_BOUNDARY_CONFIG,
    TRANSFORMS_CONFIG,
    VALUE_CONVERTER_CLASS_CONFIG,
    ConnectorConfigError,
    base_config_def,
    class_name_syntax,
    connector_config_def,
    enrich,
    plugin_config_def,
    plugin_version_names,
    version_key_of,
    with_installed_versions,
)
from kconnect.runtime.plugins.override_policy import ConnectorKind, OverridePolicy, refused_overrides
from kconnect.runtime.plugins.plugin_versions import (
    InvalidVersionSpec,
    VersionRequirement,
    not_found_message,
    requirement,
)
from kconnect.runtime.plugins.registry import (
    PluginDesc,
    PluginRegistry,
    PluginVersionError,
    pruned_plugin_name,
)

__all__ = [
    "NULL_VALUE_ERROR",
    "ParsedConnectorConfig",
    "connector_name_errors",
    "find_connector_plugin",
    "normalize_connector_name",
    "parse_connector_config",
    "plugin_mismatch_error",
    "sink_topics",
    "validate_connector_config",
    "validate_sink_topics",
]

NULL_VALUE_ERROR = "Null value can not be supplied as the configuration value."


#: The policy when none is given: Java's default up to Kafka 4.x.
ALL_OVERRIDES = OverridePolicy()


def _is_blank(text: str | None) -> bool:
    return text is None or not text.strip()


def _config_keys_str(props: Mapping[str, str | None]) -> str:
    """A config as the "contains no connector type" error shows it: its keys, sorted, without values.

    Why not Java's whole map, or values masked by name: the message reaches a REST answer and, for a
    stored config, the connector's failure trace (status topic, ``GET /connectors/{name}/status``).
    Without ``connector.class`` no ConfigDef says which keys are PASSWORD, so masking by name
    (``config/masking.py``) would still print a secret named ``aws.secret.access.key``. The keys are what
    helps here anyway: a misspelt ``connector.clas`` shows among them. The message's words stay Java's.
    """
    return "{" + ", ".join(sorted(props)) + "}"


def _add_error(values: dict[str, ConfigValue], name: str, message: str) -> None:
    values.setdefault(name, ConfigValue(name)).add_error(message)


def _wanted(spec: str | None) -> VersionRequirement | None:
    """A ``*.version`` requirement, None for none or a malformed one (its key's validator reports that)."""
    try:
        return requirement(spec)
    except InvalidVersionSpec:
        return None


def find_connector_plugin(
    registry: PluginRegistry, props: Mapping[str, str | None]
) -> tuple[PluginDesc, str | None]:
    """The plugin ``connector.class`` and ``connector.plugin.version`` select, and why the version could
    not be met (then the newest version, so the rest of the config is still checked against a real
    plugin)."""
    class_value = props.get(CONNECTOR_CLASS_CONFIG) or ""
    if _wanted(props.get(CONNECTOR_VERSION_CONFIG)) is None:
        return registry.find(class_value), None
    try:
        return registry.find(class_value, props.get(CONNECTOR_VERSION_CONFIG)), None
    except PluginVersionError as exc:
        return registry.find(class_value), str(exc)


def _builtin_plugin_keys(props: Mapping[str, str | None]) -> list[str]:
    """The keys naming plugins kconnect implements itself: the converters, and each alias's type."""
    keys = [KEY_CONVERTER_CLASS_CONFIG, VALUE_CONVERTER_CLASS_CONFIG, HEADER_CONVERTER_CLASS_CONFIG]
    for list_key in (TRANSFORMS_CONFIG, PREDICATES_CONFIG):
        try:
            aliases = parse_type(list_key, props.get(list_key), Type.LIST) or []
        except ConfigValidationError:
            continue
        keys += [f"{list_key}.{alias}.type" for alias in aliases]
    return keys


def _validate_builtin_versions(props: Mapping[str, str | None], values: dict[str, ConfigValue]) -> None:
    """``key.converter.plugin.version``, ``transforms.<alias>.plugin.version`` and the like (KIP-891): the
    converters, transformations and predicates kconnect implements come in one version, the runtime's
    own."""
    for plugin_key in _builtin_plugin_keys(props):
        plugin = props.get(plugin_key)
        key = version_key_of(plugin_key)
        wanted = _wanted(props.get(key))
        if plugin and wanted is not None and not wanted.contains(__version__):
            _add_error(values, key, not_found_message(plugin.strip(), wanted, [__version__]))


def validate_sink_topics(props: Mapping[str, str | None], values: dict[str, ConfigValue]) -> None:
    """The sink rules a single key cannot express (Java's ``SinkConnectorConfig.validate``)."""
    topics_raw = props.get(TOPICS_CONFIG)
    regex_raw = props.get(TOPICS_REGEX_CONFIG)
    has_topics = not _is_blank(topics_raw)
    has_regex = not _is_blank(regex_raw)
    if has_topics and has_regex:
        message = (
            f"{TOPICS_CONFIG} and {TOPICS_REGEX_CONFIG} are mutually exclusive options, but both are set."
        )
        _add_error(values, TOPICS_CONFIG, message)
        _add_error(values, TOPICS_REGEX_CONFIG, message)
    elif not has_topics and not has_regex:
        message = f"Must configure one of {TOPICS_CONFIG} or {TOPICS_REGEX_CONFIG}"
        _add_error(values, TOPICS_CONFIG, message)
        _add_error(values, TOPICS_REGEX_CONFIG, message)
    dlq = java_trim(props.get(DLQ_TOPIC_NAME_CONFIG) or "")
    if not dlq:
        return
    if has_topics:
        topics = sink_topics(props)
        if dlq in topics:
            _add_error(
                values,
                TOPICS_CONFIG,
                f"The DLQ topic '{dlq}' may not be included in the list of topics "
                f"('{TOPICS_CONFIG}={java_str(topics)}') consumed by the connector",
            )
    if has_regex:
        assert regex_raw is not None
        try:
            matches = re.fullmatch(regex_raw, dlq) is not None
        except re.error:
            return  # already reported by the key's validator
        if matches:
            _add_error(
                values,
                TOPICS_REGEX_CONFIG,
                f"The DLQ topic '{dlq}' may not be matched by the regex for the topics "
                f"('{TOPICS_REGEX_CONFIG}={regex_raw}') consumed by the connector",
            )


def sink_topics(props: Mapping[str, str | None]) -> list[str]:
    """The distinct, non-empty topics a sink's ``topics`` names, in order."""
    parsed = parse_type(TOPICS_CONFIG, props.get(TOPICS_CONFIG), Type.LIST) or []
    return list(dict.fromkeys(t for t in parsed if t))


def _unexpected(exc: Exception) -> str:
    detail = java_trim(str(exc))
    return (
        "An unexpected error occurred during validation"
        + (f": {detail}" if detail else "")
        + "; please see the worker logs for more details."
    )


def _validate_exactly_once(
    connector: SourceConnector,
    props: Mapping[str, str],
    values: dict[str, ConfigValue],
    exactly_once_source_enabled: bool,
) -> None:
    """Preflight checks Java's distributed herder runs for sources (KIP-618)."""
    support = values.get(EXACTLY_ONCE_SUPPORT_CONFIG)
    if support is not None and not support.errors and str(support.value).lower() == "required":
        if not exactly_once_source_enabled:
            support.add_error("This worker does not have exactly-once source support enabled.")
        try:
            answer = connector.exactly_once_support(props)
        except Exception as exc:
            support.add_error(_unexpected(exc))
        else:
            if answer is None:
                support.add_error(
                    "The connector does not implement the API required for preflight validation of "
                    "exactly-once source support. Please consult the documentation for the connector to "
                    "determine whether it supports exactly-once semantics, and then consider reconfiguring "
                    'the connector to use the value "requested" for this property (which will disable this '
                    "preflight check and allow the connector to be created)."
                )
            elif answer is not ExactlyOnceSupport.SUPPORTED:
                support.add_error(
                    "The connector does not support exactly-once semantics with the provided configuration."
                )
    boundary = values.get(TRANSACTION_BOUNDARY_CONFIG)
    if boundary is not None and not boundary.errors and str(boundary.value).lower() == "connector":
        try:
            can_define: ConnectorTransactionBoundaries | None = connector.can_define_transaction_boundaries(
                props
            )
        except Exception as exc:
            boundary.add_error(_unexpected(exc))
            return
        if can_define is None:
            boundary.add_error(
                "This connector has returned a null value from its canDefineTransactionBoundaries method, "
                "which is not permitted. The connector will be treated as if it cannot define its own "
                "transaction boundaries, and cannot be configured with 'transaction.boundary' set to "
                "'connector'."
            )
        if can_define is not ConnectorTransactionBoundaries.SUPPORTED:
            boundary.add_error(
                "The connector does not support connector-defined transaction boundaries with the given "
                "configuration. Please reconfigure it to use a different transaction boundary definition."
            )


def _validate_sink_group(
    props: Mapping[str, str | None], values: dict[str, ConfigValue], worker_group_id: str
) -> None:
    """A sink's consumer group must not be the workers' own group (Java's distributed herder)."""
    override_key = CONSUMER_OVERRIDES_PREFIX + "group.id"
    if override_key in props:
        group = props[override_key]
        if group == worker_group_id:
            result = values.setdefault(override_key, ConfigValue(override_key, value=group))
            result.add_error(f"Consumer group {group} conflicts with Connect worker group {worker_group_id}")
    else:
        name_value = values.get(NAME_CONFIG)
        name = None if name_value is None else name_value.value
        if name is not None and f"connect-{name}" == worker_group_id:
            _add_error(
                values,
                NAME_CONFIG,
                f"Consumer group for sink connector named {name} conflicts with Connect worker group "
                f"{worker_group_id}",
            )


def _validate_client_overrides(
    props: Mapping[str, str | None],
    values: dict[str, ConfigValue],
    worker_passthrough: Mapping[str, str],
    worker_security_protocol: str,
) -> None:
    """``producer.override.*``, ``consumer.override.*`` and ``admin.override.*`` that kconnect's Kafka
    clients cannot honour (a JKS trust store, an unsupported login module) are reported on their key now,
    merged with the worker's settings exactly as the task will merge them, rather than failing every task."""
    strings = {k: v for k, v in props.items() if v is not None}
    for role in ROLES:
        prefix = f"{role}.override."
        if not any(k.startswith(prefix) for k in strings):
            continue
        try:
            task_clients(role, worker_security_protocol, worker_passthrough, strings)
        except ConfigError as exc:
            if exc.key.startswith(prefix):
                shown = exc.value if exc.value == "[hidden]" else strings[exc.key]
                message = str(ConfigError(exc.key, shown, exc.allowed))
                echoed = printable(exc.key, strings[exc.key])
                values.setdefault(exc.key, ConfigValue(exc.key, value=echoed)).add_error(message)


def validate_connector_config(
    registry: PluginRegistry,
    props: Mapping[str, str | None],
    *,
    worker_group_id: str | None = None,
    exactly_once_source_enabled: bool = False,
    class_resolver: ClassResolver = class_name_syntax,
    worker_passthrough: Mapping[str, str] | None = None,
    worker_security_protocol: str = "PLAINTEXT",
    override_policy: OverridePolicy = ALL_OVERRIDES,
    config_providers: ConfigProviders | None = None,
) -> ConfigInfos:
    """Validate a connector config as ``PUT /connector-plugins/{plugin}/config/validate`` does.

    Raises ConnectorConfigError when ``connector.class`` is missing and PluginError when it names no
    single plugin; every other problem is reported inside the result, per key. ``worker_group_id``
    enables the distributed herder's check that a sink's consumer group is not the workers' group;
    ``worker_passthrough`` and ``worker_security_protocol`` (the worker's) the check of client overrides,
    ``override_policy`` (``connector.client.config.override.policy``) which of them are allowed at all.
    ``config_providers`` (the worker's) reports each ``${provider:...}`` reference to a declared provider
    that cannot be resolved (a path outside ``allowed.paths``, a missing key) on its key. The config is
    validated as written, references unresolved, so no secret reaches the answer or the plugin's
    ``validate``.
    """
    class_value = props.get(CONNECTOR_CLASS_CONFIG)
    if class_value is None:
        raise ConnectorConfigError(f"Connector config {_config_keys_str(props)} contains no connector type")
    # The deprecated *.version names count as the 4.x ones (with a warning each).
    props = plugin_version_names(props, warn=True)
    desc, version_problem = find_connector_plugin(registry, props)
    connector = desc.cls()
    base = with_installed_versions(
        enrich(base_config_def(desc.cls), props), registry.versions(class_value), __version__, props
    )
    values = base.validate_all(props, class_resolver=class_resolver)
    if version_problem is not None:
        # Java 4.x reports a version nobody installed on both keys.
        _add_error(values, CONNECTOR_CLASS_CONFIG, version_problem)
        _add_error(values, CONNECTOR_VERSION_CONFIG, version_problem)
    _validate_builtin_versions(props, values)
    # Plugins read plain string maps; a null value is reported below instead of reaching them.
    string_props = {k: v for k, v in props.items() if v is not None}
    kind: ConnectorKind | None = None
    if isinstance(connector, SinkConnector):
        kind = "sink"
        validate_sink_topics(props, values)
        if worker_group_id is not None:
            _validate_sink_group(props, values, worker_group_id)
    elif isinstance(connector, SourceConnector):
        kind = "source"
        _validate_exactly_once(connector, string_props, values, exactly_once_source_enabled)
    _validate_client_overrides(props, values, worker_passthrough or {}, worker_security_protocol)
    if kind is not None:
        for key, message in refused_overrides(override_policy, kind, props):
            # Java echoes the refused value as written; a sasl.jaas.config holds a password.
            values.setdefault(key, ConfigValue(key, value=printable(key, props[key]))).add_error(message)

    for key, value in props.items():
        if value is None:
            _add_error(values, key, NULL_VALUE_ERROR)
    plugin_def = plugin_config_def(connector)
    plugin_values = connector.validate(props)
    if plugin_values is None:
        raise ConnectorConfigError(
            f"{desc.class_name}.validate() must return a list of ConfigValue that is not None."
        )
    if config_providers is not None:
        # After the plugin's own results, which replace the runtime's of the same name.
        by_name = {v.name: v for v in plugin_values}
        for key, messages in config_providers.resolve(props).problems.items():
            for message in messages:
                if key in by_name:
                    by_name[key].add_error(message)
                else:
                    _add_error(values, key, message)
    keys = dict(base.config_keys)
    keys.update(plugin_def.config_keys)
    groups = list(dict.fromkeys([*base.groups, *plugin_def.groups]))
    return generate_result(class_value, keys, [*values.values(), *plugin_values], groups)


# ---- names and plugin matching


def normalize_connector_name(name: str | None) -> str:
    """The name as Java stores it: trimmed of leading and trailing whitespace and control characters."""
    return java_trim(name or "")


def connector_name_errors(name: str | None) -> list[str]:
    """Why Apache Kafka Connect 3.9 would reject this connector name; empty when it is acceptable.

    Java trims the name first, then requires it to be non-empty and free of ISO control characters
    (U+0000-U+001F, U+007F-U+009F). A missing name is reported as an empty one, as Java reports it.
    Anything else is allowed, slashes and inner spaces included.
    """
    try:
        NonEmptyStringWithoutControlChars().ensure_valid(NAME_CONFIG, normalize_connector_name(name))
    except ConfigValidationError as exc:
        return [str(exc)]
    return []


def plugin_mismatch_error(path_plugin: str, connector_class: str | None) -> str | None:
    """The validate endpoint's check that the body's ``connector.class`` fits the plugin in the URL.

    Java compares by suffix after dropping a ``Connector`` ending, so a URL naming the alias accepts a
    body naming the full class. Returns the 400 message, or None when they fit (or the body has none).
    """
    if connector_class is None:
        return None
    if pruned_plugin_name(connector_class).endswith(pruned_plugin_name(path_plugin)):
        return None
    return f"Included connector type {connector_class} does not match request type {path_plugin}"


# ---- parsing for the runtime


@dataclass(frozen=True)
class ParsedConnectorConfig:
    """A stored connector config parsed into typed values (``tasks.max`` an int, ``transforms`` a list).

    Named apart from ``config_log.ConnectorConfig``, the config topic's record of the raw properties:
    this is what those properties mean once the connector's ConfigDef has parsed them.
    """

    plugin: PluginDesc
    values: Mapping[str, Any]
    originals: Mapping[str, str]

    @property
    def name(self) -> str:
        """The connector's name."""
        return str(self.values[NAME_CONFIG])

    @property
    def type(self) -> str:
        """``source`` or ``sink``, from the plugin."""
        return self.plugin.type

    @property
    def tasks_max(self) -> int:
        """How many tasks the connector may run."""
        return int(self.values[TASKS_MAX_CONFIG])

    @property
    def tasks_max_enforce(self) -> bool:
        """Whether more task configs than ``tasks.max`` fail the connector."""
        return bool(self.values[TASKS_MAX_ENFORCE_CONFIG])

    @property
    def transforms(self) -> list[str]:
        """The aliases of ``transforms``, in order."""
        return list(self.values[TRANSFORMS_CONFIG])

    def get(self, key: str) -> Any:
        """The typed value of any key the connector's ConfigDef defines."""
        return self.values[key]


def parse_connector_config(
    registry: PluginRegistry,
    props: Mapping[str, str],
    *,
    class_resolver: ClassResolver = class_name_syntax,
) -> ParsedConnectorConfig:
    """Parse a stored connector config; the first problem raises, as Java's ``ConnectorConfig`` does.

    This is for configs that were validated when submitted: a failure here means the plugin or the
    config changed underneath, and the connector should fail with this message.
    """
    class_value = props.get(CONNECTOR_CLASS_CONFIG)
    if class_value is None:
        raise ConnectorConfigError(f"Connector config {_config_keys_str(props)} contains no connector type")
    props = plugin_version_names(props)
    desc = registry.find(class_value, props.get(CONNECTOR_VERSION_CONFIG))
    config_def = connector_config_def(desc.cls(), props)
    values = config_def.parse(props, class_resolver=class_resolver)
    if desc.type == "sink":
        problems: dict[str, ConfigValue] = {}
        validate_sink_topics(props, problems)
        for problem in problems.values():
            raise ConfigValidationError(problem.name, props.get(problem.name), problem.errors[0])
    return ParsedConnectorConfig(desc, values, dict(props))
