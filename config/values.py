"""How one raw worker-property value is read: Kafka ConfigDef's types and kconnect's validators.

Split from the worker's key table (:mod:`kconnect.config.worker_keys`) because this is the part that
knows nothing about particular keys: how ``ConfigDef`` trims and types a string, and the checks that
each normalise a value (canonical spelling, enum member, kconnect alias) and carry the phrase that
completes "must be ..." in error messages and the "Valid values" column of the reference.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from enum import StrEnum
from typing import Any

from .classes import MAC_ALGORITHMS, canonical_mac_algorithm, resolve_alias
from .java_text import java_trim

#: The bounds of Java's short, int and long: a value Java could not hold is refused, as ConfigDef does.
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


class Rejected(Exception):
    """Raised by parsers and validators; turned into a ConfigError that names the key and raw value."""

    def __init__(self, detail: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail


_INTEGER = re.compile(r"[+-]?[0-9]+")
_LIST_SEPARATOR = re.compile(r"[ \t\n\x0b\f\r]*,[ \t\n\x0b\f\r]*")


def parse_type(kind: ConfigType, raw: str) -> Any:
    """Parse a raw string as ConfigDef does for ``kind``; the validator refines it afterwards."""
    value = java_trim(raw)
    if kind is ConfigType.BOOLEAN:
        if value.lower() == "true":
            return True
        if value.lower() == "false":
            return False
        raise Rejected()
    if kind in (ConfigType.SHORT, ConfigType.INT, ConfigType.LONG):
        if not _INTEGER.fullmatch(value):
            raise Rejected()
        number = int(value)
        low, high = _TYPE_BOUNDS[kind.value]
        if not low <= number <= high:
            raise Rejected()
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
    """``allowed`` completes "must be ..."; calling returns the normalised value or raises Rejected."""

    allowed: str

    @abstractmethod
    def __call__(self, value: Any) -> Any: ...


class IntRange(Validator):
    """An integer within bounds: Apache's ``Range.between``, and stricter where a negative makes no sense."""

    def __init__(self, low: int, high: int) -> None:
        self.low, self.high = low, high
        self.allowed = f"an integer between {low} and {high}"

    def __call__(self, value: Any) -> Any:
        if not self.low <= value <= self.high:
            raise Rejected()
        return value


class PositiveOrBrokerDefault(Validator):
    """Partitions and replication factors: Apache's validators accept a positive count or -1."""

    def __init__(self, high: int) -> None:
        self.high = high
        self.allowed = f"a positive integer up to {high}, or -1 to use the broker's default"

    def __call__(self, value: Any) -> Any:
        if value != -1 and not 1 <= value <= self.high:
            raise Rejected()
        return value


class Choice(Validator):
    """One of a fixed set of names, returned in its canonical spelling (or converted, e.g. to an enum)."""

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
        raise Rejected()


class NonEmpty(Validator):
    """A string that must say something: an empty group.id or worker.id would name nothing."""

    allowed = "a non-empty string"

    def __call__(self, value: Any) -> Any:
        if not value:
            raise Rejected()
        return value


_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")


def is_topic_name(name: str) -> bool:
    """Kafka's rule for a topic name; also checks the group-records topic name derived from group.id."""
    return bool(_TOPIC_NAME.fullmatch(name)) and name not in (".", "..")


class TopicName(Validator):
    """Kafka's own topic-name rule, checked here so a bad name is reported against its key."""

    allowed = (
        "a topic name of 1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-', other than '.' and '..'"
    )

    def __call__(self, value: Any) -> Any:
        if not is_topic_name(value):
            raise Rejected()
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
            raise Rejected()
        return alias


class MacAlgorithm(Validator):
    """A JCA MAC algorithm name that hashlib can compute, so session keys sign as Java's workers do."""

    allowed = "one of " + ", ".join(MAC_ALGORITHMS) + " (case-insensitive)"

    def __call__(self, value: Any) -> Any:
        canonical = canonical_mac_algorithm(value)
        if canonical is None:
            raise Rejected()
        return canonical


class MacAlgorithmList(Validator):
    """A non-empty list of :class:`MacAlgorithm` names, each checked and named when it is not one."""

    allowed = (
        "a non-empty comma-separated list drawn from " + ", ".join(MAC_ALGORITHMS) + " (case-insensitive)"
    )

    def __call__(self, value: Any) -> Any:
        if not value:
            raise Rejected()
        result = []
        for item in value:
            canonical = canonical_mac_algorithm(item)
            if canonical is None:
                raise Rejected(f"'{item}' is not")
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
    """``bootstrap.servers``: host:port pairs, checked here so a typo fails at start-up, naming the key."""

    allowed = "a non-empty comma-separated list of host:port pairs (port 1-65535, IPv6 hosts in brackets)"

    def __call__(self, value: Any) -> Any:
        if not value:
            raise Rejected()
        for entry in value:
            parsed = _split_host_port(entry)
            if parsed is None or not 1 <= parsed[1] <= 65535:
                raise Rejected(f"'{entry}' is not")
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
    """``response.http.headers.config``: Apache's header rules, each checked and its problem named."""

    allowed = (
        "comma-separated rules '[action] [header name]:[header value]' with action one of "
        + ", ".join(_HEADER_ACTIONS)
        + ", each in double quotes if it contains a comma"
    )

    def __call__(self, value: Any) -> Any:
        for rule in _csv_split(value):
            problem = _header_rule_problem(rule)
            if problem is not None:
                raise Rejected(problem)
        return value


class TaskIdList(Validator):
    """Task ids ``<connector>-<n>`` (``static.tasks``), so a static assignment cannot name a non-task."""

    allowed = "a comma-separated list of task ids of the form <connector>-<task number>"

    def __call__(self, value: Any) -> Any:
        for entry in value:
            if not re.fullmatch(r".+-[0-9]+", entry):
                raise Rejected(f"'{entry}' is not")
        return value


class NonEmptyItems(Validator):
    """A list of names with no empty entry (``a,,b`` would name nothing in the middle)."""

    allowed = "a comma-separated list of non-empty names"

    def __call__(self, value: Any) -> Any:
        if any(not item for item in value):
            raise Rejected("an entry is empty")
        return value


#: What a key without a validator accepts, by type: the "must be ..." of its error and reference row.
TYPE_ALLOWED = {
    ConfigType.BOOLEAN: "true or false",
    ConfigType.STRING: "a string",
    ConfigType.SHORT: f"an integer between {-(2**15)} and {INT16_MAX}",
    ConfigType.INT: f"an integer between {-(2**31)} and {INT32_MAX}",
    ConfigType.LONG: f"an integer between {-(2**63)} and {INT64_MAX}",
    ConfigType.LIST: "a comma-separated list",
    ConfigType.CLASS: "a class name",
}
