"""The config every connector shares: its keys and ConfigDefs, layered as Apache Kafka Connect layers them.

Apache Kafka Connect layers a connector's config: common keys (``name``, ``connector.class``,
``tasks.max``, converters, transforms, error handling), then keys for sources or sinks, then the
plugin's own, and, for each alias in ``transforms`` and ``predicates``, that transformation's or
predicate's keys under the alias's prefix (``enrich``). This module defines those layers once, for
validation (:mod:`connector_validation`), the plugin listing (:mod:`config_infos`) and the data plane
(error handling, exactly-once settings), which all read the keys from here.

The module is pure: it builds ConfigDefs. Transformation and predicate keys come from
:mod:`transform_configs`, which holds no Spark code, so nothing here imports the data plane.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from kconnect.runtime.plugins.api import Connector, connector_type
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    CaseInsensitiveValidString,
    CompositeValidator,
    ConfigDef,
    ConfigValidationError,
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
    parse_type,
)
from kconnect.runtime.plugins.plugin_versions import InvalidVersionSpec, requirement
from kconnect.runtime.plugins.transform_configs import find_definition

log = logging.getLogger(__name__)

# ---- keys

NAME_CONFIG = "name"
CONNECTOR_CLASS_CONFIG = "connector.class"
#: KIP-891 (Kafka 4.1): which installed version of a plugin to use; see ``plugin_versions``. The names are
#: Apache Kafka 4.1's (``connector.plugin.version``, ``key.converter.plugin.version``,
#: ``transforms.<alias>.plugin.version``...); the KIP's text, which kconnect followed first, named them
#: ``*.version``, still read as deprecated aliases (:func:`plugin_version_names`).
CONNECTOR_VERSION_CONFIG = "connector.plugin.version"
VERSION_SUFFIX = ".plugin.version"
DEPRECATED_VERSION_SUFFIX = ".version"
DEPRECATED_CONNECTOR_VERSION_CONFIG = "connector.version"
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

_CONVERTER_DOC = (
    "Converter between the runtime's record format and the bytes stored in Kafka for the {part} of "
    "each record. Because it is independent of the connector, any connector can be paired with any "
    "serialization format (JSON, Avro, ...). Unset means the worker's setting applies."
)


class ConnectorConfigError(ValueError):
    """A connector config the validator cannot even start on, such as one without ``connector.class``,
    or a plugin whose ConfigDef is missing; REST answers it as a bad request rather than per key."""


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
        """Unset passes; a pattern that does not compile fails with the compiler's reason."""
        if value is None:
            return
        try:
            re.compile(value)
        except re.error as exc:
            raise self._fail(name, value, f"Invalid regex: {exc}") from None

    def __str__(self) -> str:
        return "valid regex"


def _version_range(name: str, value: Any) -> None:
    """Java's ``PluginVersionValidator``: a ``*.version`` value must be a version, a range or ``latest``."""
    if value is None:
        return
    try:
        requirement(str(value))
    except InvalidVersionSpec as exc:
        raise ConfigValidationError(name, value, str(exc)) from exc


VERSION_RANGE = LambdaValidator.with_(
    _version_range, "a version (1.2), a Maven version range ([1.0,2.0), (,1.5], [1.0,1.2),(1.2,)) or latest"
)


def _version_setting(
    key: str,
    plugin: str,
    display: str,
    order: int,
    group: str = COMMON_GROUP,
    importance: Importance = Importance.LOW,
    width: Width = Width.MEDIUM,
) -> dict[str, Any]:
    """The arguments of ``ConfigDef.define`` for a KIP-891 ``*.plugin.version`` key: one shape for all of
    them (importance and width as Java 4.x gives each)."""
    return {
        "name": key,
        "type": Type.STRING,
        "default": None,
        "validator": VERSION_RANGE,
        "importance": importance,
        "documentation": f"Version of the {plugin} to use (KIP-891): a version, a version range, or latest "
        "(the default, the newest installed).",
        "group": group,
        "order_in_group": order,
        "width": width,
        "display_name": display,
    }


def version_key_of(plugin_key: str) -> str:
    """The key that selects the version of the plugin ``plugin_key`` names (``key.converter`` ->
    ``key.converter.plugin.version``, ``transforms.x.type`` -> ``transforms.x.plugin.version``)."""
    return plugin_key.removesuffix(".type") + VERSION_SUFFIX


def _version_keys(props: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(deprecated name, 4.x name) of every KIP-891 version key ``props`` can have: the connector's, the
    converters' and one per alias listed in ``transforms`` and ``predicates``."""
    pairs = [(DEPRECATED_CONNECTOR_VERSION_CONFIG, CONNECTOR_VERSION_CONFIG)]
    plugin_keys = [KEY_CONVERTER_CLASS_CONFIG, VALUE_CONVERTER_CLASS_CONFIG, HEADER_CONVERTER_CLASS_CONFIG]
    for list_key in (TRANSFORMS_CONFIG, PREDICATES_CONFIG):
        try:
            aliases = parse_type(list_key, props.get(list_key), Type.LIST) or []
        except ConfigValidationError:
            continue
        plugin_keys += [f"{list_key}.{alias}.type" for alias in aliases]
    for plugin_key in plugin_keys:
        stem = plugin_key.removesuffix(".type")
        pairs.append((stem + DEPRECATED_VERSION_SUFFIX, stem + VERSION_SUFFIX))
    return pairs


_V = TypeVar("_V")


def plugin_version_names(props: Mapping[str, _V], *, warn: bool = False) -> dict[str, _V]:
    """``props`` with the version keys under Apache Kafka 4.1's names: a deprecated ``connector.version``,
    ``key.converter.version``, ``transforms.<alias>.version``... gives its value to the 4.x name
    (``connector.plugin.version``...) unless that is set too, when the 4.x name wins. The deprecated key
    stays (a config is stored as written). ``warn`` logs a warning per deprecated key found, for the
    places a user's config is first read (validation, a connector's start)."""
    named = dict(props)
    for old, new in _version_keys(props):
        if old not in props:
            continue
        if new not in props:
            named[new] = props[old]
        if warn:
            log.warning(
                "Connector config key %s is deprecated: Apache Kafka Connect 4.1 and later name it %s%s",
                old,
                new,
                f" (set too, so {old} is ignored)" if new in props else "",
            )
    return named


def connector_version(props: Mapping[str, str | None]) -> str | None:
    """The connector's version requirement, under the 4.x name or the deprecated ``connector.version``."""
    value = props.get(CONNECTOR_VERSION_CONFIG)
    return value if value is not None else props.get(DEPRECATED_CONNECTOR_VERSION_CONFIG)


@dataclasses.dataclass(frozen=True)
class _InstalledVersions:
    """Java 4.x's recommender of a version key: the installed versions of its plugin, shown while the
    plugin is named (``plugin_key`` set: a converter's class; None: always, as the connector's)."""

    versions: tuple[str, ...]
    plugin_key: str | None = None

    def valid_values(self, name: str, parsed: Mapping[str, Any]) -> list[Any]:
        return list(self.versions) if self.visible(name, parsed) else []

    def visible(self, name: str, parsed: Mapping[str, Any]) -> bool:
        return self.plugin_key is None or parsed.get(self.plugin_key) is not None


def with_installed_versions(
    config_def: ConfigDef,
    connector_versions: Sequence[str],
    builtin_version: str,
    props: Mapping[str, str | None],
) -> ConfigDef:
    """``config_def`` with the version keys filled in as Java 4.x's validation fills them: the connector's
    defaults to the newest of ``connector_versions`` (installed, oldest first) and recommends them all; a
    converter's, while its class is set, defaults to and recommends ``builtin_version`` (kconnect's own
    converters come in one version, the runtime's) and is hidden while it is not."""
    keys = config_def.config_keys
    filled = ConfigDef()
    if CONNECTOR_VERSION_CONFIG in keys and connector_versions:
        filled.define_key(
            dataclasses.replace(
                keys[CONNECTOR_VERSION_CONFIG],
                default=connector_versions[-1],
                recommender=_InstalledVersions(tuple(connector_versions)),
            )
        )
    converters = (KEY_CONVERTER_CLASS_CONFIG, VALUE_CONVERTER_CLASS_CONFIG, HEADER_CONVERTER_CLASS_CONFIG)
    for plugin_key in converters:
        key = version_key_of(plugin_key)
        if key not in keys:
            continue
        named = bool(str(props.get(plugin_key) or "").strip())
        filled.define_key(
            dataclasses.replace(
                keys[key],
                default=builtin_version if named else None,
                recommender=_InstalledVersions((builtin_version,), plugin_key),
            )
        )
    return config_def.merged_with(filled)


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
            **_version_setting(
                CONNECTOR_VERSION_CONFIG,
                "connector",
                "Connector version",
                next(order),
                importance=Importance.MEDIUM,
            )
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
            **_version_setting(
                version_key_of(KEY_CONVERTER_CLASS_CONFIG),
                "key converter",
                "Key converter version",
                next(order),
                width=Width.SHORT,
            )
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
            **_version_setting(
                version_key_of(VALUE_CONVERTER_CLASS_CONFIG),
                "value converter",
                "Value converter version",
                next(order),
                width=Width.SHORT,
            )
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
            **_version_setting(
                version_key_of(HEADER_CONVERTER_CLASS_CONFIG),
                "header converter",
                "Header converter version",
                next(order),
                width=Width.SHORT,
            )
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
    """The keys every connector of this plugin's type has (source or sink), before the plugin's own."""
    return source_config_def() if connector_type(plugin) == "source" else sink_config_def()


def enrich(config_def: ConfigDef, props: Mapping[str, str | None]) -> ConfigDef:
    """Add the per-alias keys that ``transforms`` and ``predicates`` call for (Java's ``enrich``).

    Each alias needs a ``<prefix><alias>.type`` class, so a config that names a transformation but
    not its class is reported key by key. When the class is one kconnect implements
    (``runtime/plugins/transform_configs.py``), its own keys are added under the alias's prefix, and
    transformations get ``predicate`` and ``negate``, as Java's enrich adds them; a class kconnect does
    not implement is reported as Java reports a missing class.
    """
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
            enriched.define(
                **_version_setting(
                    prefix + VERSION_SUFFIX[1:], f"'{alias}' {kind}", f"Version of {alias}", 3, group
                )
            )
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
            plugin = find_definition(kind, str(props.get(prefix + "type") or "").strip())
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
        if value is not None and find_definition(kind, str(value)) is None:
            raise ConfigValidationError(name, value, f"Class {value} could not be found.")

    return LambdaValidator.with_(check, f"a {kind} kconnect implements")


def connector_config_def(connector: Connector, props: Mapping[str, str | None] | None = None) -> ConfigDef:
    """All keys of one connector's config: the type's base keys (enriched for ``props``' transforms
    and predicates when given), then the plugin's, which win where both define a key."""
    base = base_config_def(type(connector))
    if props is not None:
        base = enrich(base, props)
    return base.merged_with(plugin_config_def(connector))


def plugin_config_def(connector: Connector) -> ConfigDef:
    """The plugin's own keys; a plugin answering None is refused with Java's message rather than crashing
    validation or the listing later."""
    config_def = connector.config_def()
    if config_def is None:
        cls = type(connector)
        raise ConnectorConfigError(
            f"{cls.__module__}.{cls.__qualname__}.config_def() must return a ConfigDef that is not None."
        )
    return config_def
