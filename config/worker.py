"""The typed, validated configuration of a distributed worker.

One table of :class:`Definition` rows drives everything: parsing, defaults, validation, the error
messages and the README reference (:func:`reference_markdown`). Adding a key means adding one row and
one field, and the documentation cannot drift from the parser.

Keys, types and defaults follow Apache Kafka Connect 3.9's distributed worker wherever a key exists
there, so an Apache worker file works unchanged; keys that are kconnect's own are marked as such in
the table. Values are parsed the way Kafka's ``ConfigDef`` parses them (strings and lists trimmed,
booleans case-insensitive, integers range-checked for their Java type) so a value accepted by one is
read the same by the other. Some validators are stricter than Apache's (timeouts must not be negative,
listeners, bootstrap servers, topic names and header rules must be well formed, the internal topics
must be distinct, the MAC algorithms must be ones Python's hashlib provides): failing at start-up with
the key named beats failing later inside a client, and the "Valid values" column shows the rule.
"""

from __future__ import annotations

import re
import socket
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any, NamedTuple

from kconnect.runtime.plugins.config_def import java_trim

from .classes import (
    CONVERTERS,
    HEADER_CONVERTERS,
    MAC_ALGORITHMS,
    OVERRIDE_POLICIES,
    canonical_mac_algorithm,
    resolve_alias,
)
from .errors import ConfigError

__all__ = [
    "PASSTHROUGH_KEYS",
    "PASSTHROUGH_PREFIXES",
    "ConfigType",
    "ConnectProtocol",
    "Definition",
    "ExactlyOnceSourceSupport",
    "Importance",
    "RestListener",
    "WorkerConfig",
    "definitions",
    "parse_listener",
    "reference_markdown",
    "unknown_keys",
]

INT16_MAX = 2**15 - 1
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
_TYPE_BOUNDS = {"short": (-(2**15), INT16_MAX), "int": (-(2**31), INT32_MAX), "long": (-(2**63), INT64_MAX)}


class ConfigType(StrEnum):
    """Kafka ConfigDef types, kept by name so the reference table reads like Apache's."""

    BOOLEAN = "boolean"
    STRING = "string"
    SHORT = "short"
    INT = "int"
    LONG = "long"
    LIST = "list"
    CLASS = "class"


class Importance(StrEnum):
    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class ConnectProtocol(StrEnum):
    """``connect.protocol``: which embedded-protocol versions this worker offers to the group."""

    EAGER = "eager"
    COMPATIBLE = "compatible"
    SESSIONED = "sessioned"
    STATIC = "static"


class ExactlyOnceSourceSupport(StrEnum):
    DISABLED = "disabled"
    PREPARING = "preparing"
    ENABLED = "enabled"


class _Rejected(Exception):
    """Raised by parsers and validators; turned into a ConfigError that names the key and raw value."""

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail


_INTEGER = re.compile(r"[+-]?[0-9]+")
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def _parse_type(kind: ConfigType, raw: str) -> Any:
    """Parse a raw string as ConfigDef does for ``kind``; the validator refines it afterwards."""
    value = java_trim(raw)
    if kind is ConfigType.BOOLEAN:
        if value.lower() == "true":
            return True
        if value.lower() == "false":
            return False
        raise _Rejected()
    if kind in (ConfigType.SHORT, ConfigType.INT, ConfigType.LONG):
        if not _INTEGER.fullmatch(value):
            raise _Rejected()
        number = int(value)
        low, high = _TYPE_BOUNDS[kind.value]
        if not low <= number <= high:
            raise _Rejected()
        return number
    if kind is ConfigType.LIST:
        if not value:
            return ()
        items = _LIST_SEPARATOR.split(value)
        # Java's String.split drops trailing empty strings, so "a,b," is [a, b] but "a,,b" keeps "".
        while items and not items[-1]:
            items.pop()
        return tuple(items)
    return value


# --- validators -------------------------------------------------------------------------------------
# Each one both checks and normalises (canonical spelling, enum member, kconnect alias), and carries the
# phrase that completes "must be ..." in error messages and the "Valid values" column of the README.


class Validator(ABC):
    """``allowed`` completes "must be ..."; calling returns the normalised value or raises _Rejected."""

    allowed: str

    @abstractmethod
    def __call__(self, value: Any) -> Any: ...


class IntRange(Validator):
    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high
        self.allowed = f"an integer between {low} and {high}"

    def __call__(self, value: Any) -> Any:
        if not self.low <= value <= self.high:
            raise _Rejected()
        return value


class PositiveOrBrokerDefault(Validator):
    """Partitions and replication factors: Apache's validators accept a positive count or -1."""

    def __init__(self, high: int) -> None:
        self.high = high
        self.allowed = f"a positive integer up to {high}, or -1 to use the broker's default"

    def __call__(self, value: Any) -> Any:
        if value != -1 and not 1 <= value <= self.high:
            raise _Rejected()
        return value


class Choice(Validator):
    def __init__(
        self, options: Sequence[str], *, case_insensitive: bool, convert: Callable[[str], Any] = str
    ) -> None:
        self.options = tuple(options)
        self.case_insensitive = case_insensitive
        self.convert = convert
        self.allowed = (
            "one of " + ", ".join(self.options) + (" (case-insensitive)" if case_insensitive else "")
        )

    def __call__(self, value: Any) -> Any:
        for option in self.options:
            if value == option or (self.case_insensitive and value.lower() == option.lower()):
                return self.convert(option)
        raise _Rejected()


class NonEmpty(Validator):
    allowed = "a non-empty string"

    def __call__(self, value: Any) -> Any:
        if not value:
            raise _Rejected()
        return value


_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def _is_topic_name(name: str) -> bool:
    return bool(_TOPIC_NAME.fullmatch(name)) and name not in (".", "..")


class TopicName(Validator):
    """Kafka's own topic-name rule, checked here so a bad name is reported against its key."""

    allowed = (
        "a topic name of 1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-', other than '.' and '..'"
    )

    def __call__(self, value: Any) -> Any:
        if not _is_topic_name(value):
            raise _Rejected()
        return value


class ClassAlias(Validator):
    """A class name resolved through a :mod:`kconnect.config.classes` table to its kconnect alias."""

    def __init__(self, table: Mapping[str, str]) -> None:
        self.table = table
        aliases = list(dict.fromkeys(table.values()))
        self.allowed = (
            f"one of {', '.join(aliases)} or an Apache Kafka class name for one of them ({', '.join(table)})"
        )

    def __call__(self, value: Any) -> Any:
        alias = resolve_alias(value, self.table)
        if alias is None:
            raise _Rejected()
        return alias


class MacAlgorithm(Validator):
    allowed = "one of " + ", ".join(MAC_ALGORITHMS) + " (case-insensitive)"

    def __call__(self, value: Any) -> Any:
        canonical = canonical_mac_algorithm(value)
        if canonical is None:
            raise _Rejected()
        return canonical


class MacAlgorithmList(Validator):
    allowed = (
        "a non-empty comma-separated list drawn from " + ", ".join(MAC_ALGORITHMS) + " (case-insensitive)"
    )

    def __call__(self, value: Any) -> Any:
        if not value:
            raise _Rejected()
        result = []
        for item in value:
            canonical = canonical_mac_algorithm(item)
            if canonical is None:
                raise _Rejected(f"'{item}' is not")
            result.append(canonical)
        return tuple(result)


def _split_host_port(entry: str) -> tuple[str, int] | None:
    host, sep, port = entry.rpartition(":")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    if (
        not sep
        or not host
        or not re.fullmatch(r"[0-9A-Za-z._:%-]+", host)
        or not re.fullmatch(r"[0-9]{1,5}", port)
    ):
        return None
    return host, int(port)


class HostPortList(Validator):
    allowed = "a non-empty comma-separated list of host:port pairs (port 1-65535, IPv6 hosts in brackets)"

    def __call__(self, value: Any) -> Any:
        if not value:
            raise _Rejected()
        for entry in value:
            parsed = _split_host_port(entry)
            if parsed is None or not 1 <= parsed[1] <= 65535:
                raise _Rejected(f"'{entry}' is not")
        return value


class RestListener(NamedTuple):
    """One REST listener: protocol ``http`` or ``https``, host (empty = default interface), port (0 = any)."""

    protocol: str
    host: str
    port: int


_LISTENER = re.compile(
    r"(?P<protocol>[A-Za-z][A-Za-z0-9+.-]*)://(?:\[(?P<ipv6>[0-9A-Za-z:.%_-]*)\]|(?P<host>[0-9A-Za-z%._-]*))"
    r":(?P<port>[0-9]{1,5})/?"
)


def parse_listener(text: str) -> RestListener:
    """Parse ``protocol://host:port`` as Apache's REST server does (protocol case-insensitive).

    Raises ValueError; listeners read through :class:`WorkerConfig` have already passed this check.
    """
    match = _LISTENER.fullmatch(text)
    if match is None:
        raise ValueError(f"'{text}' is not of the form protocol://host:port")
    protocol = match["protocol"].lower()
    if protocol not in ("http", "https"):
        raise ValueError(f"'{text}' has protocol {match['protocol']}; only http and https are supported")
    port = int(match["port"])
    if port > 65535:
        raise ValueError(f"'{text}' has port {port}, above 65535")
    return RestListener(protocol, match["ipv6"] if match["ipv6"] is not None else match["host"], port)


class ListenerList(Validator):
    def __init__(self, *, may_be_empty: bool) -> None:
        self.may_be_empty = may_be_empty
        self.allowed = (
            ("a comma-separated list" if may_be_empty else "a non-empty comma-separated list")
            + " of URLs protocol://host:port with protocol http or https"
            + " (empty host: default interface; port 0-65535)"
            + ("; an empty value disables them" if may_be_empty else "")
        )

    def __call__(self, value: Any) -> Any:
        if not value and not self.may_be_empty:
            raise _Rejected()
        for entry in value:
            try:
                parse_listener(entry)
            except ValueError:
                raise _Rejected(f"'{entry}' is not") from None
        return value


def _csv_split(text: str) -> list[str]:
    """Split comma-separated items, honouring double quotes (with backslash escapes) around an item.

    This is the header-rule syntax of Apache's ``response.http.headers.config``, which lets a rule
    whose value contains commas be written in quotes.
    """
    items: list[str] = []
    current: list[str] = []
    quoted = False
    i = 0
    while i < len(text):
        ch = text[i]
        if quoted:
            if ch == "\\" and i + 1 < len(text):
                i += 1
                current.append(text[i])
            elif ch == '"':
                quoted = False
            else:
                current.append(ch)
        elif ch == '"':
            quoted = True
        elif ch == ",":
            items.append("".join(current).strip())
            current = []
        else:
            current.append(ch)
        i += 1
    items.append("".join(current).strip())
    return [item for item in items if item]


_HEADER_ACTIONS = ("set", "add", "setDate", "addDate")


def _header_rule_problem(rule: str) -> str | None:
    parts = rule.split(None, 1)
    if len(parts) != 2:
        return f"rule '{rule}' is not '[action] [header name]:[header value]'"
    action, header = parts
    if action.lower() not in {a.lower() for a in _HEADER_ACTIONS}:
        return f"rule '{rule}' has action '{action}', not one of {', '.join(_HEADER_ACTIONS)}"
    pieces = header.strip().split(":")
    while pieces and not pieces[-1]:
        pieces.pop()
    if len(pieces) != 2:
        return f"rule '{rule}' does not have exactly one ':' between header name and value"
    name = pieces[0].strip()
    if not name or any(c.isspace() for c in name):
        return f"rule '{rule}' has an empty header name or one containing whitespace"
    return None


class HeaderRules(Validator):
    allowed = (
        "comma-separated rules '[action] [header name]:[header value]' with action one of "
        + ", ".join(_HEADER_ACTIONS)
        + ", each in double quotes if it contains a comma"
    )

    def __call__(self, value: Any) -> Any:
        for rule in _csv_split(value):
            problem = _header_rule_problem(rule)
            if problem is not None:
                raise _Rejected(problem)
        return value


class TaskIdList(Validator):
    allowed = "a comma-separated list of task ids of the form <connector>-<task number>"

    def __call__(self, value: Any) -> Any:
        for entry in value:
            if not re.fullmatch(r".+-[0-9]+", entry):
                raise _Rejected(f"'{entry}' is not")
        return value


class NonEmptyItems(Validator):
    allowed = "a comma-separated list of non-empty names"

    def __call__(self, value: Any) -> Any:
        if any(not item for item in value):
            raise _Rejected("an entry is empty")
        return value


# --- the definitions table ----------------------------------------------------------------------------

_TYPE_ALLOWED = {
    ConfigType.BOOLEAN: "true or false",
    ConfigType.STRING: "a string",
    ConfigType.SHORT: f"an integer between {-(2**15)} and {INT16_MAX}",
    ConfigType.INT: f"an integer between {-(2**31)} and {INT32_MAX}",
    ConfigType.LONG: f"an integer between {-(2**63)} and {INT64_MAX}",
    ConfigType.LIST: "a comma-separated list",
    ConfigType.CLASS: "a class name",
}


@dataclass(frozen=True)
class Definition:
    """One worker configuration key: how to parse it, its default, and what the README says about it.

    ``default`` is written as it would appear in a properties file and goes through the same parsing
    as a user's value, so a default can never be something a user could not have typed. ``None`` means
    the key is optional with no value; ``required`` keys have no default at all.
    """

    key: str
    type: ConfigType
    default: str | None
    documentation: str
    validator: Validator | None = None
    importance: Importance = Importance.LOW
    required: bool = False
    kconnect: bool = False
    default_text: str | None = None

    @property
    def attribute(self) -> str:
        """The WorkerConfig field holding the parsed value."""
        return self.key.replace(".", "_")

    @property
    def allowed(self) -> str:
        return self.validator.allowed if self.validator is not None else _TYPE_ALLOWED[self.type]

    def parse(self, raw: str) -> Any:
        """Parse and validate one raw value, raising ConfigError that names this key and the value."""
        try:
            value = _parse_type(self.type, raw)
            return value if self.validator is None else self.validator(value)
        except _Rejected as rejected:
            detail = f"; {rejected.detail}" if rejected.detail else ""
            raise ConfigError(self.key, raw, f"must be {self.allowed}{detail}") from None


_H, _M = Importance.HIGH, Importance.MEDIUM
# The group-records topic default is derived rather than fixed so that two Connect clusters sharing a
# Kafka cluster, which must differ in group.id anyway, never share group records by accident.
GROUP_RECORDS_TOPIC_SUFFIX = "-group-records"
_POSITIVE_INT = IntRange(1, INT32_MAX)
_NON_NEGATIVE_INT = IntRange(0, INT32_MAX)
_NON_NEGATIVE_LONG = IntRange(0, INT64_MAX)
_POSITIVE_LONG = IntRange(1, INT64_MAX)
_PARTITIONS = PositiveOrBrokerDefault(INT32_MAX)
_REPLICATION = PositiveOrBrokerDefault(INT16_MAX)


def _storage(
    name: str, what: str, *, partitions: str | None, kconnect: bool = False, default_topic: str | None = None
) -> list[Definition]:
    """The topic / partitions / replication.factor triple that each internal store has."""
    prefix = f"{name}.storage."
    rows = [
        Definition(
            f"{prefix}topic",
            ConfigType.STRING,
            None,
            f"Name of the compacted topic holding {what}.",
            TopicName(),
            _H,
            required=default_topic is None,
            kconnect=kconnect,
            default_text=default_topic,
        ),
        Definition(
            f"{prefix}replication.factor",
            ConfigType.SHORT,
            "3",
            f"Replication factor used when the worker creates the topic holding {what}.",
            _REPLICATION,
            kconnect=kconnect,
        ),
    ]
    if partitions is not None:
        rows.append(
            Definition(
                f"{prefix}partitions",
                ConfigType.INT,
                partitions,
                f"Number of partitions used when the worker creates the topic holding {what}.",
                _PARTITIONS,
                kconnect=kconnect,
            )
        )
    return rows


_DEFINITIONS: tuple[Definition, ...] = (
    # Kafka cluster and group membership
    Definition(
        "bootstrap.servers",
        ConfigType.LIST,
        "localhost:9092",
        "host:port pairs used for the first connection to the Kafka cluster; the rest of the cluster is "
        "discovered from them, so a few are enough.",
        HostPortList(),
        _H,
    ),
    Definition(
        "group.id",
        ConfigType.STRING,
        None,
        "Names the Connect cluster: workers with the same group.id form one cluster. It must not clash "
        "with any consumer group.",
        NonEmpty(),
        _H,
        required=True,
    ),
    Definition(
        "session.timeout.ms",
        ConfigType.INT,
        "10000",
        "A worker that sends no heartbeat for this long is removed from the group and its work "
        "rebalanced. Must lie within the broker's group.min/max.session.timeout.ms.",
        _POSITIVE_INT,
        _H,
    ),
    Definition(
        "heartbeat.interval.ms",
        ConfigType.INT,
        "3000",
        "Interval between heartbeats to the group coordinator; must be below session.timeout.ms and is "
        "usually at most a third of it. Lower values also make rebalances start sooner.",
        _POSITIVE_INT,
        _H,
    ),
    Definition(
        "rebalance.timeout.ms",
        ConfigType.INT,
        "60000",
        "How long the coordinator waits for every member to rejoin during a rebalance; a worker that "
        "takes longer to stop its work is dropped from the group.",
        _POSITIVE_INT,
        _H,
    ),
    Definition(
        "worker.sync.timeout.ms",
        ConfigType.INT,
        "3000",
        "When this worker is behind the config topic, how long it tries to catch up before it leaves "
        "the group and backs off.",
        _NON_NEGATIVE_INT,
        _M,
    ),
    Definition(
        "worker.unsync.backoff.ms",
        ConfigType.INT,
        "300000",
        "How long a worker that could not catch up within worker.sync.timeout.ms stays out of the "
        "group before rejoining.",
        _NON_NEGATIVE_INT,
        _M,
    ),
    Definition(
        "connect.protocol",
        ConfigType.STRING,
        "static",
        "Embedded protocol this worker offers: eager (stop-the-world), compatible (incremental "
        "cooperative, KIP-415), sessioned (compatible plus signed internal requests, KIP-507) or static "
        "(kconnect's KIP-987 static assignments, the default: it also offers sessioned, compatible and "
        "default, and a group without static workers behaves exactly as sessioned; Apache Kafka Connect "
        "3.9 defaults to sessioned and has no static). Set sessioned where Apache Kafka Connect workers "
        "share the group: the broker then settles on sessioned anyway.",
        Choice([p.value for p in ConnectProtocol], case_insensitive=True, convert=ConnectProtocol),
    ),
    Definition(
        "scheduled.rebalance.max.delay.ms",
        ConfigType.INT,
        "300000",
        "How long the leader keeps a departed worker's connectors and tasks unassigned, waiting for it "
        "to return, before giving them to the remaining workers.",
        IntRange(0, INT32_MAX),
    ),
    Definition(
        "exactly.once.source.support",
        ConfigType.STRING,
        "disabled",
        "Exactly-once delivery for source connectors: enabled on a new cluster, or preparing on every "
        "worker first and then enabled when turning it on in a running cluster.",
        Choice(
            [e.value for e in ExactlyOnceSourceSupport],
            case_insensitive=True,
            convert=ExactlyOnceSourceSupport,
        ),
        _H,
    ),
    Definition(
        "inter.worker.key.generation.algorithm",
        ConfigType.STRING,
        "HmacSHA256",
        "Algorithm of the session keys the leader generates for signing internal REST requests.",
        MacAlgorithm(),
    ),
    Definition(
        "inter.worker.key.size",
        ConfigType.INT,
        None,
        "Size in bits of generated session keys; when unset, the algorithm's own default size is used.",
        IntRange(40, INT32_MAX),
    ),
    Definition(
        "inter.worker.key.ttl.ms",
        ConfigType.INT,
        "3600000",
        "How long a session key is used before the leader rotates it.",
        IntRange(0, INT32_MAX),
    ),
    Definition(
        "inter.worker.signature.algorithm",
        ConfigType.STRING,
        "HmacSHA256",
        "Algorithm used to sign internal REST requests; must be listed in "
        "inter.worker.verification.algorithms.",
        MacAlgorithm(),
    ),
    Definition(
        "inter.worker.verification.algorithms",
        ConfigType.LIST,
        "HmacSHA256",
        "Algorithms accepted when verifying signed internal REST requests.",
        MacAlgorithmList(),
    ),
    # Internal topics
    *_storage("config", "connector and task configurations", partitions=None),
    *_storage("offset", "source connector offsets", partitions="25"),
    *_storage("status", "connector and task statuses", partitions="5"),
    *_storage(
        "group.records",
        "the group records (target and current assignments)",
        partitions="1",
        kconnect=True,
        default_topic=f"<group.id>{GROUP_RECORDS_TOPIC_SUFFIX}",
    ),
    # Converters and worker behaviour
    Definition(
        "key.converter",
        ConfigType.CLASS,
        None,
        "Converter for record keys, between Connect data and bytes in Kafka. Settings for it go under "
        "the key.converter. prefix.",
        ClassAlias(CONVERTERS),
        _H,
        required=True,
    ),
    Definition(
        "value.converter",
        ConfigType.CLASS,
        None,
        "Converter for record values, between Connect data and bytes in Kafka. Settings for it go under "
        "the value.converter. prefix.",
        ClassAlias(CONVERTERS),
        _H,
        required=True,
    ),
    Definition(
        "header.converter",
        ConfigType.CLASS,
        "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        "Converter for record header values. Settings for it go under the header.converter. prefix.",
        ClassAlias(HEADER_CONVERTERS),
    ),
    Definition(
        "task.shutdown.graceful.timeout.ms",
        ConfigType.LONG,
        "5000",
        "Total time given to all tasks being stopped together to finish before they are abandoned.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "offset.flush.interval.ms",
        ConfigType.LONG,
        "60000",
        "How often tasks' offsets are committed.",
        _POSITIVE_LONG,
    ),
    Definition(
        "offset.flush.timeout.ms",
        ConfigType.LONG,
        "5000",
        "How long an offset commit may wait for records to flush before it is abandoned and retried "
        "at the next interval.",
        _POSITIVE_LONG,
    ),
    Definition(
        "plugin.path",
        ConfigType.LIST,
        "",
        "Directories searched for connector, converter and transformation plugins.",
        NonEmptyItems(),
    ),
    Definition(
        "plugin.discovery",
        ConfigType.STRING,
        "hybrid_warn",
        "How Apache Kafka discovers Java plugins; accepted so Apache worker files load, without "
        "effect on kconnect's plugin discovery.",
        Choice(["only_scan", "service_load", "hybrid_warn", "hybrid_fail"], case_insensitive=True),
    ),
    Definition(
        "config.providers",
        ConfigType.LIST,
        "",
        "Names of config providers for ${provider:...} references. kconnect always resolves ${env:NAME} "
        "and ${file:PATH:KEY}; other names resolve only when config.providers.<name>.class is Apache's "
        "EnvVarConfigProvider or FileConfigProvider.",
        NonEmptyItems(),
    ),
    Definition(
        "connector.client.config.override.policy",
        ConfigType.STRING,
        "All",
        "Which Kafka client settings connector configurations may override: All, None, or Principal "
        "(only the client principal).",
        ClassAlias(OVERRIDE_POLICIES),
        _M,
    ),
    Definition(
        "topic.creation.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether source connectors configured with topic.creation. settings may create their topics.",
    ),
    Definition(
        "topic.tracking.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether the worker records the topics each connector uses.",
    ),
    Definition(
        "topic.tracking.allow.reset",
        ConfigType.BOOLEAN,
        "true",
        "Whether users may reset a connector's recorded topics through the REST API.",
    ),
    Definition(
        "auto.include.jmx.reporter",
        ConfigType.BOOLEAN,
        "true",
        "Deprecated in Apache Kafka; accepted so Apache worker files load. kconnect has no JMX.",
    ),
    # REST API
    Definition(
        "listeners",
        ConfigType.LIST,
        "http://:8083",
        "URLs the REST API listens on. An empty host binds the default interface, 0.0.0.0 binds all.",
        ListenerList(may_be_empty=False),
    ),
    Definition(
        "admin.listeners",
        ConfigType.LIST,
        None,
        "URLs for the admin endpoints (/admin/...). Unset: they are served on listeners; empty: they are "
        "disabled.",
        ListenerList(may_be_empty=True),
        default_text="(served on listeners)",
    ),
    Definition(
        "rest.advertised.host.name",
        ConfigType.STRING,
        None,
        "Host name other workers use to reach this one, if not the listener's.",
    ),
    Definition(
        "rest.advertised.port",
        ConfigType.INT,
        None,
        "Port other workers use to reach this one, if not the listener's.",
        IntRange(1, 65535),
    ),
    Definition(
        "rest.advertised.listener",
        ConfigType.STRING,
        None,
        "Protocol (http or https) of the URL advertised to other workers.",
        Choice(["http", "https"], case_insensitive=True),
    ),
    Definition(
        "rest.extension.classes",
        ConfigType.LIST,
        "",
        "REST extensions to load, in order. They often implement authentication, so a worker must "
        "refuse to start rather than run without one it cannot load.",
        NonEmptyItems(),
    ),
    Definition(
        "access.control.allow.origin",
        ConfigType.STRING,
        "",
        "Value of the Access-Control-Allow-Origin header; empty allows only the REST API's own origin, "
        "'*' allows any.",
    ),
    Definition(
        "access.control.allow.methods",
        ConfigType.STRING,
        "",
        "Value of the Access-Control-Allow-Methods header; empty allows GET, POST and HEAD.",
    ),
    Definition(
        "response.http.headers.config",
        ConfigType.STRING,
        "",
        "Rules adding headers to every REST response, e.g. 'set X-Frame-Options:DENY'.",
        HeaderRules(),
    ),
    # Kafka clients
    Definition(
        "client.id",
        ConfigType.STRING,
        "",
        "Client id sent to brokers by the worker's clients, for request logging and quotas.",
    ),
    Definition(
        "client.dns.lookup",
        ConfigType.STRING,
        "use_all_dns_ips",
        "How clients use the addresses a broker host name resolves to.",
        Choice(["use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"], case_insensitive=False),
        _M,
    ),
    Definition(
        "metadata.max.age.ms",
        ConfigType.LONG,
        "300000",
        "Clients refresh cluster metadata at least this often.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "metadata.recovery.strategy",
        ConfigType.STRING,
        "none",
        "What clients do when no known broker is reachable: none (fail) or rebootstrap (start again "
        "from bootstrap.servers).",
        Choice(["none", "rebootstrap"], case_insensitive=True),
    ),
    Definition(
        "request.timeout.ms",
        ConfigType.INT,
        "40000",
        "How long a client waits for a broker's response before retrying or failing the request.",
        _NON_NEGATIVE_INT,
        _M,
    ),
    Definition(
        "retry.backoff.ms",
        ConfigType.LONG,
        "100",
        "Initial wait before a client retries a failed request.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "retry.backoff.max.ms",
        ConfigType.LONG,
        "1000",
        "Upper bound of the growing wait between retries.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "reconnect.backoff.ms",
        ConfigType.LONG,
        "50",
        "Initial wait before a client reconnects to a broker.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "reconnect.backoff.max.ms",
        ConfigType.LONG,
        "1000",
        "Upper bound of the growing wait between reconnection attempts.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "socket.connection.setup.timeout.ms",
        ConfigType.LONG,
        "10000",
        "Initial time a client waits for a socket connection to be established.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "socket.connection.setup.timeout.max.ms",
        ConfigType.LONG,
        "30000",
        "Upper bound of the growing socket connection setup timeout.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "connections.max.idle.ms",
        ConfigType.LONG,
        "540000",
        "Clients close connections idle for longer than this.",
        importance=_M,
    ),
    Definition(
        "receive.buffer.bytes",
        ConfigType.INT,
        "32768",
        "TCP receive buffer size of client sockets; -1 uses the OS default.",
        IntRange(-1, INT32_MAX),
        _M,
    ),
    Definition(
        "send.buffer.bytes",
        ConfigType.INT,
        "131072",
        "TCP send buffer size of client sockets; -1 uses the OS default.",
        IntRange(-1, INT32_MAX),
        _M,
    ),
    Definition(
        "security.protocol",
        ConfigType.STRING,
        "PLAINTEXT",
        "Protocol used to talk to brokers; the ssl.* and sasl.* settings configure it.",
        Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], case_insensitive=True),
        _M,
    ),
    # kconnect's own
    Definition(
        "kconnect.executor",
        ConfigType.STRING,
        "spark",
        "What runs this worker's tasks: spark runs them (sink tasks as Structured Streaming queries in "
        "this worker's SparkSession, source tasks as poll loops producing to Kafka); held only holds "
        "them, reporting UNASSIGNED, for clusters that exercise the group protocol and rebalancing alone.",
        Choice(["spark", "held"], case_insensitive=False),
        _M,
        kconnect=True,
    ),
    Definition(
        "spark.master",
        ConfigType.STRING,
        "local[*]",
        "Spark master URL for the SparkSession that runs this worker's tasks. Every other spark.* key is "
        "passed to the SparkSession as is.",
        NonEmpty(),
        _M,
        kconnect=True,
    ),
    Definition(
        "worker.id",
        ConfigType.STRING,
        None,
        "A stable name for this worker in logs and status; when unset the advertised REST URL "
        "identifies it, as in Apache Kafka Connect.",
        NonEmpty(),
        kconnect=True,
    ),
    Definition(
        "static.connectors",
        ConfigType.LIST,
        "",
        "With connect.protocol=static: connectors only this and other workers listing them may run "
        "(KIP-987).",
        NonEmptyItems(),
        kconnect=True,
    ),
    Definition(
        "static.tasks",
        ConfigType.LIST,
        "",
        "With connect.protocol=static: tasks (<connector>-<n>) only this and other workers listing them "
        "may run (KIP-987).",
        TaskIdList(),
        kconnect=True,
    ),
)

_BY_KEY = {d.key: d for d in _DEFINITIONS}

#: Keys under these prefixes are accepted without a definition and kept verbatim in
#: ``WorkerConfig.passthrough``: Kafka client overrides and security settings, REST TLS settings,
#: converter and config-provider settings, extra internal-topic settings. ``spark.`` keys go to
#: ``WorkerConfig.spark`` instead.
PASSTHROUGH_PREFIXES: tuple[str, ...] = (
    "producer.",
    "consumer.",
    "admin.",
    "listeners.https.",
    "ssl.",
    "sasl.",
    "metrics.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "config.providers.",
    "config.storage.",
    "offset.storage.",
    "status.storage.",
    "group.records.storage.",
)
#: Single keys kept verbatim like the prefixed ones.
PASSTHROUGH_KEYS: tuple[str, ...] = ("metric.reporters",)
_SPARK_PREFIX = "spark."


def _is_passthrough(key: str) -> bool:
    return key in PASSTHROUGH_KEYS or key.startswith(PASSTHROUGH_PREFIXES)


def definitions() -> tuple[Definition, ...]:
    """Every defined key in table order (cluster, topics, worker, REST, clients, kconnect)."""
    return _DEFINITIONS


def unknown_keys(props: Mapping[str, str]) -> list[str]:
    """Keys that match no definition and no pass-through prefix, sorted, for the caller to warn about.

    Parsing does not fail on them because Apache Kafka only warns too, and a worker file shared with
    Apache workers may carry keys for features kconnect does not have.
    """
    return sorted(
        key
        for key in props
        if key not in _BY_KEY and not _is_passthrough(key) and not key.startswith(_SPARK_PREFIX)
    )


@dataclass(frozen=True)
class WorkerConfig:
    """A distributed worker's configuration, parsed and checked; build it with :meth:`from_properties`.

    Fields are named after their keys with dots turned into underscores. Lists are tuples and the
    mappings are read-only so that a config shared between the herder, the REST server and the
    executor cannot be changed under one of them. Cross-key checks run in ``__post_init__`` and
    therefore also guard ``dataclasses.replace``.
    """

    # Kafka cluster and group membership
    bootstrap_servers: tuple[str, ...]
    group_id: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    worker_sync_timeout_ms: int
    worker_unsync_backoff_ms: int
    connect_protocol: ConnectProtocol
    scheduled_rebalance_max_delay_ms: int
    exactly_once_source_support: ExactlyOnceSourceSupport
    inter_worker_key_generation_algorithm: str
    inter_worker_key_size: int | None
    inter_worker_key_ttl_ms: int
    inter_worker_signature_algorithm: str
    inter_worker_verification_algorithms: tuple[str, ...]
    # Internal topics
    config_storage_topic: str
    config_storage_replication_factor: int
    offset_storage_topic: str
    offset_storage_replication_factor: int
    offset_storage_partitions: int
    status_storage_topic: str
    status_storage_replication_factor: int
    status_storage_partitions: int
    group_records_storage_topic: str
    group_records_storage_replication_factor: int
    group_records_storage_partitions: int
    # Converters and worker behaviour
    key_converter: str
    value_converter: str
    header_converter: str
    task_shutdown_graceful_timeout_ms: int
    offset_flush_interval_ms: int
    offset_flush_timeout_ms: int
    plugin_path: tuple[str, ...]
    plugin_discovery: str
    config_providers: tuple[str, ...]
    connector_client_config_override_policy: str
    topic_creation_enable: bool
    topic_tracking_enable: bool
    topic_tracking_allow_reset: bool
    auto_include_jmx_reporter: bool
    # REST API
    listeners: tuple[str, ...]
    admin_listeners: tuple[str, ...] | None
    rest_advertised_host_name: str | None
    rest_advertised_port: int | None
    rest_advertised_listener: str | None
    rest_extension_classes: tuple[str, ...]
    access_control_allow_origin: str
    access_control_allow_methods: str
    response_http_headers_config: str
    # Kafka clients
    client_id: str
    client_dns_lookup: str
    metadata_max_age_ms: int
    metadata_recovery_strategy: str
    request_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    connections_max_idle_ms: int
    receive_buffer_bytes: int
    send_buffer_bytes: int
    security_protocol: str
    # kconnect's own
    kconnect_executor: str
    spark_master: str
    worker_id: str | None
    static_connectors: tuple[str, ...]
    static_tasks: tuple[str, ...]
    #: Every ``spark.*`` key, with ``spark.master`` always present (its default applied).
    spark: Mapping[str, str]
    #: Keys accepted by prefix (see PASSTHROUGH_PREFIXES), verbatim and with their full names.
    passthrough: Mapping[str, str]

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> WorkerConfig:
        """Parse substituted worker properties; raises ConfigError for the first bad key.

        Unknown keys are ignored here; call :func:`unknown_keys` to warn about them.
        """
        values: dict[str, Any] = {}
        for definition in _DEFINITIONS:
            raw = props.get(definition.key)
            if raw is not None:
                values[definition.attribute] = definition.parse(raw)
            elif definition.required:
                raise ConfigError.missing(definition.key)
            elif definition.default is not None:
                values[definition.attribute] = definition.parse(definition.default)
            else:
                values[definition.attribute] = None
        if values["group_records_storage_topic"] is None:
            derived = values["group_id"] + GROUP_RECORDS_TOPIC_SUFFIX
            if not _is_topic_name(derived):
                raise ConfigError(
                    "group.records.storage.topic",
                    derived,
                    f"must be {TopicName.allowed}; the default is derived from group.id, so set "
                    "group.records.storage.topic explicitly",
                )
            values["group_records_storage_topic"] = derived
        spark = {key: value for key, value in props.items() if key.startswith(_SPARK_PREFIX)}
        spark["spark.master"] = values["spark_master"]
        passthrough = {
            key: value for key, value in props.items() if key not in _BY_KEY and _is_passthrough(key)
        }
        return cls(**values, spark=MappingProxyType(spark), passthrough=MappingProxyType(passthrough))

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                "heartbeat.interval.ms",
                str(self.heartbeat_interval_ms),
                f"must be lower than session.timeout.ms ({self.session_timeout_ms})",
            )
        if self.inter_worker_signature_algorithm not in self.inter_worker_verification_algorithms:
            raise ConfigError(
                "inter.worker.signature.algorithm",
                self.inter_worker_signature_algorithm,
                "must be one of inter.worker.verification.algorithms ("
                + ", ".join(self.inter_worker_verification_algorithms)
                + ")",
            )
        seen: dict[str, str] = {}
        for key in (
            "config.storage.topic",
            "offset.storage.topic",
            "status.storage.topic",
            "group.records.storage.topic",
        ):
            topic = getattr(self, key.replace(".", "_"))
            if topic in seen:
                # Two stores on one topic would read each other's records as their own.
                raise ConfigError(key, topic, f"must differ from {seen[topic]}, which names the same topic")
            seen[topic] = key

    # --- derived views ----------------------------------------------------------------------------

    @property
    def rest_listeners(self) -> tuple[RestListener, ...]:
        return tuple(parse_listener(text) for text in self.listeners)

    @property
    def admin_rest_listeners(self) -> tuple[RestListener, ...] | None:
        """None: serve admin endpoints on the regular listeners; empty: do not serve them."""
        if self.admin_listeners is None:
            return None
        return tuple(parse_listener(text) for text in self.admin_listeners)

    @property
    def rest_url(self) -> str:
        """The URL other workers use to reach this one; see :meth:`advertised_url`."""
        return self.advertised_url()

    def advertised_url(self, *, local_host: str | None = None, bound_port: int | None = None) -> str:
        """Compute the advertised REST URL the way Apache Kafka Connect's REST server does.

        The protocol is rest.advertised.listener, else http if any listener is http, else https. The
        host is rest.advertised.host.name, else the host of the first listener of that protocol, else
        of the first listener; an empty host means this machine, ``local_host`` or the host name.
        (Apache uses the local host's IP address there; a host name survives address changes.) The
        port is rest.advertised.port, else the matching listener's port, else ``bound_port``, which the
        REST server passes once it has bound a listener configured with port 0.

        The trailing slash matches Apache's URLs, which workers exchange in the group protocol and
        which Java workers extend with relative paths.
        """
        listeners = self.rest_listeners
        if self.rest_advertised_listener is not None:
            protocol = self.rest_advertised_listener
        elif any(listener.protocol == "http" for listener in listeners):
            protocol = "http"
        elif any(listener.protocol == "https" for listener in listeners):
            protocol = "https"
        else:
            protocol = "http"
        match = next((listener for listener in listeners if listener.protocol == protocol), None)
        first = listeners[0]
        host = (
            self.rest_advertised_host_name
            or (match.host if match is not None else "")
            or first.host
            or local_host
            or socket.gethostname()
        )
        if self.rest_advertised_port is not None:
            port = self.rest_advertised_port
        elif match is not None and match.port > 0:
            port = match.port
        elif bound_port is not None:
            port = bound_port
        else:
            port = (match or first).port
        if ":" in host:
            host = f"[{host}]"
        return f"{protocol}://{host}:{port}/"

    def prefixed(self, prefix: str) -> dict[str, str]:
        """Pass-through settings under ``prefix``, with the prefix removed (e.g. ``"key.converter."``)."""
        return {
            key[len(prefix) :]: value for key, value in self.passthrough.items() if key.startswith(prefix)
        }

    def storage_topic_settings(self, prefix: str) -> dict[str, str]:
        """Extra topic configs for an internal topic, from keys like ``offset.storage.min.insync.replicas``.

        ``prefix`` is one of ``config.storage.``, ``offset.storage.``, ``status.storage.`` or
        ``group.records.storage.``. cleanup.policy is dropped because internal topics are always
        compacted, and partitions because the config topic always has exactly one.
        """
        settings = self.prefixed(prefix)
        for name in ("topic", "partitions", "replication.factor", "cleanup.policy"):
            settings.pop(name, None)
        return settings


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference_markdown() -> str:
    """The worker configuration reference as a Markdown table, generated from :func:`definitions`."""
    lines = [
        "| Key | Type | Default | Valid values | Importance | Description |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in _DEFINITIONS:
        if d.required:
            default = "(required)"
        elif d.default_text is not None:
            default = f"`{d.default_text}`"
        elif d.default is None:
            default = "(unset)"
        elif d.default == "":
            default = '""'
        else:
            default = f"`{d.default}`"
        description = ("kconnect only. " if d.kconnect else "") + d.documentation
        cells = [f"`{d.key}`", d.type.value, default, d.allowed, d.importance.value, description]
        lines.append("| " + " | ".join(_markdown_cell(cell) for cell in cells) + " |")
    prefixes = ", ".join(f"`{p}*`" for p in PASSTHROUGH_PREFIXES)
    keys = ", ".join(f"`{k}`" for k in PASSTHROUGH_KEYS)
    lines += [
        "",
        f"Keys starting with {prefixes}, and {keys}, are accepted without validation and handed to the "
        "Kafka clients, REST TLS setup, converters, config providers or internal-topic creation they "
        "belong to. Keys starting with `spark.` are passed to the SparkSession. Any other key is "
        "reported as unknown and ignored.",
    ]
    return "\n".join(lines) + "\n"


PROPERTIES_DOC_HEADER = (
    "# Worker properties\n\n"
    "Generated from `config/worker.py` (`python -m kconnect.config.worker > config/PROPERTIES.md` "
    "rewrites it; a test keeps it in sync). Keys, types and defaults follow Apache Kafka Connect 3.9 "
    "where the names match.\n\n"
)


if __name__ == "__main__":
    import sys

    sys.stdout.write(PROPERTIES_DOC_HEADER + reference_markdown())
