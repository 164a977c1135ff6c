"""The config every connector shares, and connector-config validation as the REST API reports it.

Apache Kafka Connect layers a connector's config: common keys (``name``, ``connector.class``,
``tasks.max``, converters, transforms, error handling), then keys for sources or sinks, then the
plugin's own. ``validate_connector_config`` reproduces the answer of
``PUT /connector-plugins/{plugin}/config/validate`` key for key (order, groups, messages, error
count), checked against an Apache Kafka Connect 3.9 worker, so tools written for Java's endpoint can
use ours unchanged.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kconnect.config.errors import ConfigError
from kconnect.runtime.client_config import ROLES, task_clients
from kconnect.runtime.plugins.api import (
    Connector,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    PluginDesc,
    PluginRegistry,
    SinkConnector,
    SourceConnector,
    connector_type,
    pruned_plugin_name,
)
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    CaseInsensitiveValidString,
    ClassResolver,
    CompositeValidator,
    ConfigDef,
    ConfigKey,
    ConfigValidationError,
    ConfigValue,
    Importance,
    LambdaValidator,
    NonEmptyString,
    NonEmptyStringWithoutControlChars,
    NonNullValidator,
    Range,
    Type,
    Validator,
    ValidString,
    Width,
    convert_to_string,
    java_str,
    java_trim,
    parse_type,
)

# ---- keys

NAME_CONFIG = "name"
CONNECTOR_CLASS_CONFIG = "connector.class"
TASKS_MAX_CONFIG = "tasks.max"
TASKS_MAX_ENFORCE_CONFIG = "tasks.max.enforce"
KEY_CONVERTER_CLASS_CONFIG = "key.converter"
VALUE_CONVERTER_CLASS_CONFIG = "value.converter"
HEADER_CONVERTER_CLASS_CONFIG = "header.converter"
TRANSFORMS_CONFIG = "transforms"
PREDICATES_CONFIG = "predicates"
CONFIG_RELOAD_ACTION_CONFIG = "config.action.reload"
ERRORS_RETRY_TIMEOUT_CONFIG = "errors.retry.timeout"
ERRORS_RETRY_MAX_DELAY_CONFIG = "errors.retry.delay.max.ms"
ERRORS_TOLERANCE_CONFIG = "errors.tolerance"
ERRORS_LOG_ENABLE_CONFIG = "errors.log.enable"
ERRORS_LOG_INCLUDE_MESSAGES_CONFIG = "errors.log.include.messages"

TOPICS_CONFIG = "topics"
TOPICS_REGEX_CONFIG = "topics.regex"
DLQ_TOPIC_NAME_CONFIG = "errors.deadletterqueue.topic.name"
DLQ_TOPIC_REPLICATION_FACTOR_CONFIG = "errors.deadletterqueue.topic.replication.factor"
DLQ_CONTEXT_HEADERS_ENABLE_CONFIG = "errors.deadletterqueue.context.headers.enable"

TOPIC_CREATION_GROUPS_CONFIG = "topic.creation.groups"
EXACTLY_ONCE_SUPPORT_CONFIG = "exactly.once.support"
TRANSACTION_BOUNDARY_CONFIG = "transaction.boundary"
TRANSACTION_BOUNDARY_INTERVAL_CONFIG = "transaction.boundary.interval.ms"
OFFSETS_TOPIC_CONFIG = "offsets.storage.topic"

CONSUMER_OVERRIDES_PREFIX = "consumer.override."

COMMON_GROUP = "Common"
TRANSFORMS_GROUP = "Transforms"
PREDICATES_GROUP = "Predicates"
ERROR_GROUP = "Error Handling"
TOPIC_CREATION_GROUP = "Topic Creation"
EXACTLY_ONCE_SUPPORT_GROUP = "Exactly Once Support"
OFFSETS_TOPIC_GROUP = "offsets.topic"

NULL_VALUE_ERROR = "Null value can not be supplied as the configuration value."

_CONVERTER_DOC = (
    "Converter between the runtime's record format and the bytes stored in Kafka for the {part} of "
    "each record. Because it is independent of the connector, any connector can be paired with any "
    "serialization format (JSON, Avro, ...). Unset means the worker's setting applies."
)


class ConnectorConfigError(ValueError):
    """A connector config the validator cannot even start on, such as one without ``connector.class``."""


def _unique_aliases(kind: str) -> Validator:
    def check(name: str, value: Any) -> None:
        if len(value) != len(set(value)):
            raise ConfigValidationError(name, value, "Duplicate alias provided.")

    return CompositeValidator.of(NonNullValidator(), LambdaValidator.with_(check, f"unique {kind} aliases"))


def _null_or(validator: Validator) -> Validator:
    """Unset is fine, anything set must pass ``validator`` (for optional keys with a Range)."""

    def check(name: str, value: Any) -> None:
        if value is not None:
            validator.ensure_valid(name, value)

    return LambdaValidator.with_(check, str(validator))


class RegexValidator(Validator):
    """A string that compiles as a regular expression (Python's ``re`` syntax)."""

    def ensure_valid(self, name: str, value: Any) -> None:
        if value is None:
            return
        try:
            re.compile(value)
        except re.error as exc:
            raise self._fail(name, value, f"Invalid regex: {exc}") from None

    def __str__(self) -> str:
        return "valid regex"


def class_name_syntax(name: str) -> object:
    """The default resolver for CLASS keys of connector configs: accepts any well-formed class name.

    Converter names in connector configs are usually Java's (``org.apache.kafka.connect.json.JsonConverter``);
    until a converter registry can say which names it serves, only their syntax is checked and the
    name itself is kept. Pass a real resolver to ``validate_connector_config`` to check existence.
    """
    if re.fullmatch(r"[A-Za-z_$][\w$]*(?:[.:][A-Za-z_$][\w$]*)*", name):
        return name
    raise LookupError(name)


def common_config_def() -> ConfigDef:
    """Keys every connector config has (Java's ``ConnectorConfig.configDef()``), in Java's order."""
    order = iter(range(1, 100))
    error_order = iter(range(1, 100))
    return (
        ConfigDef()
        .define(
            NAME_CONFIG,
            Type.STRING,
            NO_DEFAULT,
            NonEmptyStringWithoutControlChars(),
            Importance.HIGH,
            "Globally unique name of this connector.",
            group=COMMON_GROUP,
            order_in_group=next(order),
            width=Width.MEDIUM,
            display_name="Connector name",
        )
        .define(
            CONNECTOR_CLASS_CONFIG,
            Type.STRING,
            NO_DEFAULT,
            None,
            Importance.HIGH,
            "Class of this connector, as its full name (module.Class), its simple class name, or its alias "
            "(the simple name without the 'Connector' suffix); for the FileStream sink, "
            "'FileStreamSink', 'FileStreamSinkConnector' and "
            "'org.apache.kafka.connect.file.FileStreamSinkConnector' all work.",
            group=COMMON_GROUP,
            order_in_group=next(order),
            width=Width.LONG,
            display_name="Connector class",
        )
        .define(
            TASKS_MAX_CONFIG,
            Type.INT,
            1,
            Range.at_least(1),
            Importance.HIGH,
            "Maximum number of tasks to run for this connector.",
            group=COMMON_GROUP,
            order_in_group=next(order),
            width=Width.SHORT,
            display_name="Tasks max",
        )
        .define(
            TASKS_MAX_ENFORCE_CONFIG,
            Type.BOOLEAN,
            True,
            None,
            Importance.LOW,
            "(Deprecated) Whether a connector that produces more task configs than tasks.max fails, and "
            "running task sets larger than tasks.max are failed too. With false, such connectors and task "
            "sets are allowed to run.",
            group=COMMON_GROUP,
            order_in_group=next(order),
            width=Width.SHORT,
            display_name="Enforce tasks max",
        )
        .define(
            KEY_CONVERTER_CLASS_CONFIG,
            Type.CLASS,
            None,
            None,
            Importance.LOW,
            _CONVERTER_DOC.format(part="keys"),
            group=COMMON_GROUP,
            order_in_group=next(order),
            width=Width.SHORT,
            display_name="Key converter class",
        )
        .define(
            VALUE_CONVERTER_CLASS_CONFIG,
            Type.CLASS,
            None,
            None,
            Importance.LOW,
            _CONVERTER_DOC.format(part="values"),
            group=COMMON_GROUP,
            order_in_group=next(order),
            width=Width.SHORT,
            display_name="Value converter class",
        )
        .define(
            HEADER_CONVERTER_CLASS_CONFIG,
            Type.CLASS,
            None,
            None,
            Importance.LOW,
            _CONVERTER_DOC.format(part="header values"),
            group=COMMON_GROUP,
            order_in_group=next(order),
            width=Width.SHORT,
            display_name="Header converter class",
        )
        .define(
            TRANSFORMS_CONFIG,
            Type.LIST,
            [],
            _unique_aliases("transformation"),
            Importance.LOW,
            "Aliases of the transformations applied to records, in order.",
            group=TRANSFORMS_GROUP,
            order_in_group=next(order),
            width=Width.LONG,
            display_name="Transforms",
        )
        .define(
            PREDICATES_CONFIG,
            Type.LIST,
            [],
            _unique_aliases("predicate"),
            Importance.LOW,
            "Aliases of the predicates that transformations can be made conditional on.",
            group=PREDICATES_GROUP,
            order_in_group=next(order),
            width=Width.LONG,
            display_name="Predicates",
        )
        .define(
            CONFIG_RELOAD_ACTION_CONFIG,
            Type.STRING,
            "restart",
            ValidString.in_("none", "restart"),
            Importance.LOW,
            "What to do when values from external config providers change: 'none' leaves the connector "
            "alone, 'restart' restarts it with the new values (possibly later, if the provider says a "
            "value expires in the future).",
            group=COMMON_GROUP,
            order_in_group=next(order),
            width=Width.MEDIUM,
            display_name="Reload Action",
        )
        .define(
            ERRORS_RETRY_TIMEOUT_CONFIG,
            Type.LONG,
            0,
            None,
            Importance.MEDIUM,
            "How long, in milliseconds, a failed operation is retried; 0 (the default) never retries and "
            "-1 retries forever.",
            group=ERROR_GROUP,
            order_in_group=next(error_order),
            width=Width.MEDIUM,
            display_name="Retry Timeout for Errors",
        )
        .define(
            ERRORS_RETRY_MAX_DELAY_CONFIG,
            Type.LONG,
            60000,
            None,
            Importance.MEDIUM,
            "Longest wait, in milliseconds, between two retries; once reached, jitter is added so that "
            "retries do not come in herds.",
            group=ERROR_GROUP,
            order_in_group=next(error_order),
            width=Width.MEDIUM,
            display_name="Maximum Delay Between Retries for Errors",
        )
        .define(
            ERRORS_TOLERANCE_CONFIG,
            Type.STRING,
            "none",
            ValidString.in_("none", "all"),
            Importance.MEDIUM,
            "'none' (the default) fails the task on any error; 'all' skips the records that fail.",
            group=ERROR_GROUP,
            order_in_group=next(error_order),
            width=Width.SHORT,
            display_name="Error Tolerance",
        )
        .define(
            ERRORS_LOG_ENABLE_CONFIG,
            Type.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Log every error with the failed operation and record; by default only errors that are not "
            "tolerated are reported.",
            group=ERROR_GROUP,
            order_in_group=next(error_order),
            width=Width.SHORT,
            display_name="Log Errors",
        )
        .define(
            ERRORS_LOG_INCLUDE_MESSAGES_CONFIG,
            Type.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Include the failed record (key, value, headers) in error logs; off by default so that record "
            "contents stay out of log files, though topic, partition and offset are always logged.",
            group=ERROR_GROUP,
            order_in_group=next(error_order),
            width=Width.SHORT,
            display_name="Log Error Details",
        )
    )


def sink_config_def() -> ConfigDef:
    """Common keys plus the sink ones (Java's ``SinkConnectorConfig.configDef()``)."""
    return (
        common_config_def()
        # Java gives both topics keys order 4 in the Common group; kept so REST answers match.
        .define(
            TOPICS_CONFIG,
            Type.LIST,
            "",
            None,
            Importance.HIGH,
            "Comma-separated topics to consume.",
            group=COMMON_GROUP,
            order_in_group=4,
            width=Width.LONG,
            display_name="Topics",
        )
        .define(
            TOPICS_REGEX_CONFIG,
            Type.STRING,
            "",
            RegexValidator(),
            Importance.HIGH,
            "Regular expression naming the topics to consume; set either this or topics, not both.",
            group=COMMON_GROUP,
            order_in_group=4,
            width=Width.LONG,
            display_name="Topics regex",
        )
        .define(
            DLQ_TOPIC_NAME_CONFIG,
            Type.STRING,
            "",
            None,
            Importance.MEDIUM,
            "Topic that receives, as a dead letter queue, the records this sink, its transformations or its "
            "converters failed on; blank (the default) keeps no such records.",
            group=ERROR_GROUP,
            order_in_group=6,
            width=Width.MEDIUM,
            display_name="Dead Letter Queue Topic Name",
        )
        .define(
            DLQ_TOPIC_REPLICATION_FACTOR_CONFIG,
            Type.SHORT,
            3,
            None,
            Importance.MEDIUM,
            "Replication factor of the dead letter queue topic when it has to be created.",
            group=ERROR_GROUP,
            order_in_group=7,
            width=Width.MEDIUM,
            display_name="Dead Letter Queue Topic Replication Factor",
        )
        .define(
            DLQ_CONTEXT_HEADERS_ENABLE_CONFIG,
            Type.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Add headers describing the error to records sent to the dead letter queue; their keys all "
            "start with __connect.errors. so they cannot clash with the record's own headers.",
            group=ERROR_GROUP,
            order_in_group=8,
            width=Width.MEDIUM,
            display_name="Enable Error Context Headers",
        )
    )


def source_config_def() -> ConfigDef:
    """Common keys plus the source ones (Java's ``SourceConnectorConfig.configDef()``)."""
    return (
        common_config_def()
        .define(
            TOPIC_CREATION_GROUPS_CONFIG,
            Type.LIST,
            [],
            _unique_aliases("topic creation groups"),
            Importance.LOW,
            "Groups of settings for the topics this source connector creates.",
            group=TOPIC_CREATION_GROUP,
            order_in_group=1,
            width=Width.LONG,
            display_name="Topic Creation Groups",
        )
        .define(
            EXACTLY_ONCE_SUPPORT_CONFIG,
            Type.STRING,
            "requested",
            # Java lists these from a hash set, in this order; kept so the message text matches.
            CaseInsensitiveValidString.in_("required", "requested"),
            Importance.MEDIUM,
            "'requested' or 'required'. With 'required', creating or validating the connector first checks "
            "that it can give exactly-once delivery with this config, and that the worker has exactly-once "
            "source support enabled; use 'requested' for connectors that cannot answer that check.",
            group=EXACTLY_ONCE_SUPPORT_GROUP,
            order_in_group=2,
            width=Width.SHORT,
            display_name="Exactly once support",
        )
        .define(
            TRANSACTION_BOUNDARY_CONFIG,
            Type.STRING,
            "poll",
            CaseInsensitiveValidString.in_("interval", "poll", "connector"),
            Importance.MEDIUM,
            "'poll', 'interval' or 'connector': where producer transactions end. 'poll' commits one "
            "transaction per batch a task returns, 'interval' commits after "
            "transaction.boundary.interval.ms, 'connector' lets the connector decide (if it can).",
            group=EXACTLY_ONCE_SUPPORT_GROUP,
            order_in_group=3,
            width=Width.SHORT,
            display_name="Transaction Boundary",
        )
        .define(
            TRANSACTION_BOUNDARY_INTERVAL_CONFIG,
            Type.LONG,
            None,
            _null_or(Range.at_least(0)),
            Importance.LOW,
            "With transaction.boundary=interval, how often tasks commit their transactions; unset means the "
            "worker's offset.flush.interval.ms.",
            group=EXACTLY_ONCE_SUPPORT_GROUP,
            order_in_group=4,
            width=Width.SHORT,
            display_name="Transaction boundary interval",
        )
        .define(
            OFFSETS_TOPIC_CONFIG,
            Type.STRING,
            None,
            NonEmptyString(),
            Importance.LOW,
            "A separate offsets topic for this connector, created if missing; unset means the worker's "
            "offsets topic.",
            group=OFFSETS_TOPIC_GROUP,
            order_in_group=1,
            width=Width.LONG,
            display_name="Offsets topic",
        )
    )


def base_config_def(plugin: type[Connector]) -> ConfigDef:
    return source_config_def() if connector_type(plugin) == "source" else sink_config_def()


def enrich(config_def: ConfigDef, props: Mapping[str, str | None]) -> ConfigDef:
    """Add the per-alias keys that ``transforms`` and ``predicates`` call for (Java's ``enrich``).

    Each alias needs a ``<prefix><alias>.type`` class, so a config that names a transformation but
    not its class is reported key by key. When the class is one kconnect implements
    (``runtime/dataplane/transforms.py``), its own keys are added under the alias's prefix, and
    transformations
    get ``predicate`` and ``negate``, as Java's enrich adds them; a class kconnect does not implement is
    reported as Java reports a missing class.
    """
    from kconnect.runtime.dataplane.transforms import (
        lookup_plugin,  # imports pyspark's Python modules only, no JVM
    )

    enriched = ConfigDef(config_def)
    for list_key, kind, display in (
        (TRANSFORMS_CONFIG, "transformation", "Transformation"),
        (PREDICATES_CONFIG, "predicate", "Predicate"),
    ):
        try:
            aliases = parse_type(list_key, props.get(list_key), Type.LIST) or []
        except ConfigValidationError:
            continue  # reported against the list key itself
        for alias in dict.fromkeys(aliases):
            group = f"{list_key.capitalize()}: {alias}"
            enriched.define(
                f"{list_key}.{alias}.type",
                Type.CLASS,
                NO_DEFAULT,
                _known_plugin(kind),
                Importance.HIGH,
                f"Class for the '{alias}' {kind}.",
                group=group,
                order_in_group=0,
                width=Width.LONG,
                display_name=f"{display} type for {alias}",
            )
            prefix = f"{list_key}.{alias}."
            if kind == "transformation":
                enriched.define(
                    prefix + "predicate",
                    Type.STRING,
                    None,
                    None,
                    Importance.MEDIUM,
                    "The alias of a predicate used to determine whether to apply this transformation.",
                    group=group,
                    order_in_group=1,
                    display_name=f"Predicate for {alias}",
                ).define(
                    prefix + "negate",
                    Type.BOOLEAN,
                    False,
                    None,
                    Importance.MEDIUM,
                    "Whether the configured predicate should be negated.",
                    group=group,
                    order_in_group=2,
                    display_name=f"Negate predicate for {alias}",
                )
            plugin = lookup_plugin(kind, str(props.get(prefix + "type") or "").strip())
            if plugin is None:
                continue
            for key in plugin.config_def().config_keys.values():
                if prefix + key.name not in enriched.config_keys:
                    enriched.define_key(
                        dataclasses.replace(key, name=prefix + key.name, group=group, dependents=())
                    )
    return enriched


def _known_plugin(kind: str) -> Validator:
    """Java reports a transformation or predicate class it cannot load as "could not be found"."""

    def check(name: str, value: Any) -> None:
        from kconnect.runtime.dataplane.transforms import lookup_plugin

        if value is not None and lookup_plugin(kind, str(value)) is None:
            raise ConfigValidationError(name, value, f"Class {value} could not be found.")

    return LambdaValidator.with_(check, f"a {kind} kconnect implements")


def connector_config_def(connector: Connector, props: Mapping[str, str | None] | None = None) -> ConfigDef:
    """All keys of one connector's config: the type's base keys (enriched for ``props``' transforms
    and predicates when given), then the plugin's, which win where both define a key."""
    base = base_config_def(type(connector))
    if props is not None:
        base = enrich(base, props)
    return base.merged_with(_plugin_config_def(connector))


def _plugin_config_def(connector: Connector) -> ConfigDef:
    config_def = connector.config_def()
    if config_def is None:
        cls = type(connector)
        raise ConnectorConfigError(
            f"{cls.__module__}.{cls.__qualname__}.config_def() must return a ConfigDef that is not None."
        )
    return config_def


# ---- the REST entities (rest/entities ConfigInfos, ConfigInfo, ConfigKeyInfo, ConfigValueInfo)


@dataclass(frozen=True)
class ConfigKeyInfo:
    name: str
    type: str
    required: bool
    default_value: str | None
    importance: str
    documentation: str | None
    group: str | None
    order: int
    width: str
    display_name: str | None
    dependents: list[str]

    @classmethod
    def of(cls, key: ConfigKey) -> ConfigKeyInfo:
        return cls(
            name=key.name,
            type=key.type.value,
            required=key.required,
            default_value=None if key.required else convert_to_string(key.default, key.type),
            importance=key.importance.value,
            documentation=key.documentation,
            group=key.group,
            order=key.order_in_group,
            width=key.width.value,
            display_name=key.display_name,
            dependents=list(key.dependents),
        )

    def to_json(self) -> dict[str, Any]:
        # Field order as Java's Jackson serializes ConfigKeyInfo.
        return {
            "name": self.name,
            "type": self.type,
            "required": self.required,
            "default_value": self.default_value,
            "importance": self.importance,
            "documentation": self.documentation,
            "group": self.group,
            "width": self.width,
            "display_name": self.display_name,
            "dependents": list(self.dependents),
            "order": self.order,
        }


@dataclass(frozen=True)
class ConfigValueInfo:
    name: str
    value: str | None
    recommended_values: list[str]
    errors: list[str]
    visible: bool

    @classmethod
    def of(cls, value: ConfigValue, type_: Type | None) -> ConfigValueInfo:
        recommended_type = Type.STRING if type_ is Type.LIST else type_
        recommended = [convert_to_string(v, recommended_type) for v in value.recommended_values]
        return cls(
            name=value.name,
            value=convert_to_string(value.value, type_),
            recommended_values=[r for r in recommended if r is not None],
            errors=list(value.errors),
            visible=value.visible,
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "value": self.value,
            "recommended_values": list(self.recommended_values),
            "errors": list(self.errors),
            "visible": self.visible,
        }


@dataclass(frozen=True)
class ConfigInfo:
    definition: ConfigKeyInfo | None
    value: ConfigValueInfo | None

    def to_json(self) -> dict[str, Any]:
        return {
            "definition": None if self.definition is None else self.definition.to_json(),
            "value": None if self.value is None else self.value.to_json(),
        }


@dataclass(frozen=True)
class ConfigInfos:
    """The validate endpoint's answer; ``to_json()`` is the response body."""

    name: str
    error_count: int
    groups: list[str]
    configs: list[ConfigInfo] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "error_count": self.error_count,
            "groups": list(self.groups),
            "configs": [c.to_json() for c in self.configs],
        }

    def error_messages(self) -> list[str]:
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


# ---- validation


def _is_blank(text: str | None) -> bool:
    return text is None or not text.strip()


def _java_map_str(props: Mapping[str, str | None]) -> str:
    return "{" + ", ".join(f"{k}={java_str(v)}" for k, v in props.items()) + "}"


def _add_error(values: dict[str, ConfigValue], name: str, message: str) -> None:
    values.setdefault(name, ConfigValue(name)).add_error(message)


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
                values.setdefault(exc.key, ConfigValue(exc.key, value=strings[exc.key])).add_error(message)


def validate_connector_config(
    registry: PluginRegistry,
    props: Mapping[str, str | None],
    *,
    worker_group_id: str | None = None,
    exactly_once_source_enabled: bool = False,
    class_resolver: ClassResolver = class_name_syntax,
    worker_passthrough: Mapping[str, str] | None = None,
    worker_security_protocol: str = "PLAINTEXT",
) -> ConfigInfos:
    """Validate a connector config as ``PUT /connector-plugins/{plugin}/config/validate`` does.

    Raises ConnectorConfigError when ``connector.class`` is missing and PluginError when it names no
    single plugin; every other problem is reported inside the result, per key. ``worker_group_id``
    enables the distributed herder's check that a sink's consumer group is not the workers' group;
    ``worker_passthrough`` and ``worker_security_protocol`` (the worker's) the check of client overrides.
    """
    class_value = props.get(CONNECTOR_CLASS_CONFIG)
    if class_value is None:
        raise ConnectorConfigError(f"Connector config {_java_map_str(props)} contains no connector type")
    desc: PluginDesc = registry.find(class_value)
    connector = desc.cls()
    base = enrich(base_config_def(desc.cls), props)
    values = base.validate_all(props, class_resolver=class_resolver)
    # Plugins read plain string maps; a null value is reported below instead of reaching them.
    string_props = {k: v for k, v in props.items() if v is not None}
    if isinstance(connector, SinkConnector):
        validate_sink_topics(props, values)
        if worker_group_id is not None:
            _validate_sink_group(props, values, worker_group_id)
    elif isinstance(connector, SourceConnector):
        _validate_exactly_once(connector, string_props, values, exactly_once_source_enabled)
    _validate_client_overrides(props, values, worker_passthrough or {}, worker_security_protocol)
    for key, value in props.items():
        if value is None:
            _add_error(values, key, NULL_VALUE_ERROR)
    plugin_def = _plugin_config_def(connector)
    plugin_values = connector.validate(props)
    if plugin_values is None:
        raise ConnectorConfigError(
            f"{desc.class_name}.validate() must return a list of ConfigValue that is not None."
        )
    keys = dict(base.config_keys)
    keys.update(plugin_def.config_keys)
    groups = list(dict.fromkeys([*base.groups, *plugin_def.groups]))
    return generate_result(class_value, keys, [*values.values(), *plugin_values], groups)


def plugin_config_key_infos(registry: PluginRegistry, plugin: str) -> list[ConfigKeyInfo]:
    """What ``GET /connector-plugins/{plugin}/config`` lists: the plugin's keys, then its type's base keys."""
    desc = registry.find(plugin)
    plugin_def = _plugin_config_def(desc.cls())
    base = base_config_def(desc.cls)
    keys = [*plugin_def.config_keys.values()]
    keys += [k for name, k in base.config_keys.items() if name not in plugin_def.config_keys]
    return [ConfigKeyInfo.of(k) for k in keys]


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
class ConnectorConfig:
    """A validated connector config with typed values, for the herder and the worker."""

    plugin: PluginDesc
    values: Mapping[str, Any]
    originals: Mapping[str, str]

    @property
    def name(self) -> str:
        return str(self.values[NAME_CONFIG])

    @property
    def type(self) -> str:
        return self.plugin.type

    @property
    def tasks_max(self) -> int:
        return int(self.values[TASKS_MAX_CONFIG])

    @property
    def tasks_max_enforce(self) -> bool:
        return bool(self.values[TASKS_MAX_ENFORCE_CONFIG])

    @property
    def transforms(self) -> list[str]:
        return list(self.values[TRANSFORMS_CONFIG])

    def get(self, key: str) -> Any:
        return self.values[key]


def parse_connector_config(
    registry: PluginRegistry,
    props: Mapping[str, str],
    *,
    class_resolver: ClassResolver = class_name_syntax,
) -> ConnectorConfig:
    """Parse a stored connector config; the first problem raises, as Java's ``ConnectorConfig`` does.

    This is for configs that were validated when submitted: a failure here means the plugin or the
    config changed underneath, and the connector should fail with this message.
    """
    class_value = props.get(CONNECTOR_CLASS_CONFIG)
    if class_value is None:
        raise ConnectorConfigError(f"Connector config {_java_map_str(props)} contains no connector type")
    desc = registry.find(class_value)
    config_def = connector_config_def(desc.cls(), props)
    values = config_def.parse(props, class_resolver=class_resolver)
    if desc.type == "sink":
        problems: dict[str, ConfigValue] = {}
        validate_sink_topics(props, problems)
        for problem in problems.values():
            raise ConfigValidationError(problem.name, props.get(problem.name), problem.errors[0])
    return ConnectorConfig(desc, values, dict(props))
