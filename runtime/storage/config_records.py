"""Records of the config topic: their keys, their JSON values, and the codec between the two.

The config topic is shared with Apache Kafka Connect: a Java worker and a kconnect worker in one group read
and write the same records, so keys and values here are byte-compatible with what Connect 3.9 writes
(``KafkaConfigBackingStore`` serialising Connect structs through its internal ``JsonConverter`` with
``schemas.enable=false``; Jackson 2.16 underneath). The JSON writer and reader that make that true are
:mod:`kconnect.runtime.codecs.java_json`'s, shared with the status and offset codecs and the converters.

Why apart from ``config_log``: this module is the format (one record, bytes in and out; the status and
offset codecs share its limits and ``parse_json``), that one the fold of many records into the cluster-config
snapshot the herder reads. Pure: decoding never touches Kafka.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import TypeAlias

from kconnect.runtime.codecs import java_json
from kconnect.runtime.ids import TaskId

__all__ = [
    "COMMIT_PREFIX",
    "CONNECTOR_PREFIX",
    "INT32_MAX",
    "INT32_MIN",
    "INT64_MAX",
    "INT64_MIN",
    "LOGGER_CLUSTER_PREFIX",
    "RESTART_PREFIX",
    "SESSION_KEY_KEY",
    "STATIC_ASSIGNMENT_PREFIX",
    "TARGET_STATE_PREFIX",
    "TASK_COUNT_PREFIX",
    "TASK_PREFIX",
    "ConfigRecord",
    "ConnectorConfig",
    "ConnectorDeletion",
    "CorruptRecord",
    "LoggerLevel",
    "Properties",
    "RestartRequest",
    "SessionKeyRecord",
    "StaticAssignmentDeletion",
    "StaticAssignmentRecord",
    "TargetState",
    "TargetStateDeletion",
    "TargetStateRecord",
    "TaskCommit",
    "TaskConfig",
    "TaskCountRecord",
    "decode",
    "encode",
    "parse_json",
    "parse_task_key",
]

# Key prefixes, as KafkaConfigBackingStore spells them (TARGET_STATE_PREFIX, CONNECTOR_PREFIX, ...).
TARGET_STATE_PREFIX = "target-state-"
CONNECTOR_PREFIX = "connector-"
TASK_PREFIX = "task-"
COMMIT_PREFIX = "commit-"
RESTART_PREFIX = "restart-connector-"
TASK_COUNT_PREFIX = "tasks-fencing-"
SESSION_KEY_KEY = "session-key"
LOGGER_CLUSTER_PREFIX = "logger-cluster-"
#: kconnect's own (KIP-987 over REST): an operator's static-assignment override for one worker id.
#: Java's config store logs a key it does not know and skips it, so mixed clusters are unaffected.
STATIC_ASSIGNMENT_PREFIX = "static-assignment-"

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

#: A connector's or task's configuration. Values may be null: Java's schema for the map is
#: ``map(STRING, OPTIONAL_STRING)`` and a null value is not the same as an absent key to ConfigDef.
Properties: TypeAlias = Mapping[str, str | None]


class CorruptRecord(ValueError):
    """A record that cannot be understood; the reader logs it and moves on, as Java's does.

    ``advances_offset`` says whether Java would still count the record towards the config offset it
    reports to the group: KafkaConfigBackingStore sets its offset for every record whose value the
    converter accepted, before it looks at the key or the shape, and skips the offset only when the bytes
    are not JSON at all. Reporting the same offset as Java workers matters because the group leader
    compares members' config offsets.
    """

    def __init__(self, key: str, reason: str, *, advances_offset: bool = True) -> None:
        super().__init__(f"config record '{key}': {reason}" if key else reason)
        self.key = key
        self.reason = reason
        self.advances_offset = advances_offset


# ---------------------------------------------------------------------------------------------------
# Reading record values (the JSON itself is runtime/codecs/java_json's, byte for byte Java's)
# ---------------------------------------------------------------------------------------------------


def parse_json(key: str, raw: bytes) -> object:
    """Parse a record value as Jackson would accept it, or raise a :class:`CorruptRecord`.

    Empty bytes read as null, as JsonConverter reads them. Bytes that are not JSON are not counted
    towards the config offset (Java's converter throws before the offset moves).
    """
    if not raw:
        return None
    try:
        return java_json.read(raw)
    except ValueError as exc:
        raise CorruptRecord(key, f"value is not valid JSON ({exc})", advances_offset=False) from exc


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _object(key: str, value: object) -> dict[str, object]:
    if not isinstance(value, dict):
        raise CorruptRecord(key, f"value should be a JSON object but is {_type_name(value)}")
    return value


def _int_field(key: str, obj: Mapping[str, object], name: str, low: int, high: int) -> int:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptRecord(key, f"'{name}' should be an integer but is {_type_name(value)}")
    if not low <= value <= high:
        raise CorruptRecord(key, f"'{name}' is {value}, outside {low}..{high}")
    return value


def _str_field(key: str, obj: Mapping[str, object], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise CorruptRecord(key, f"'{name}' should be a string but is {_type_name(value)}")
    return value


def _properties(key: str, value: object) -> Properties:
    obj = _object(key, value)
    props = obj.get("properties")
    if not isinstance(props, dict):
        raise CorruptRecord(key, f"'properties' should be a JSON object but is {_type_name(props)}")
    checked: dict[str, str | None] = {}
    for name, item in props.items():
        if item is not None and not isinstance(item, str):
            raise CorruptRecord(
                key, f"property '{name}' should be a string or null but is {_type_name(item)}"
            )
        checked[name] = item
    return MappingProxyType(checked)


def _freeze(props: Properties) -> Properties:
    return props if isinstance(props, MappingProxyType) else MappingProxyType(dict(props))


# ---------------------------------------------------------------------------------------------------
# Records
# ---------------------------------------------------------------------------------------------------


class TargetState(StrEnum):
    """The state a user asked a connector to be in (Java's ``TargetState``)."""

    STARTED = "STARTED"
    PAUSED = "PAUSED"
    STOPPED = "STOPPED"


@dataclass(frozen=True, slots=True)
class ConnectorConfig:
    """``connector-<name>``: a connector's configuration, the one record that is the source of truth."""

    connector: str
    properties: Properties

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", _freeze(self.properties))


@dataclass(frozen=True, slots=True)
class ConnectorDeletion:
    """``connector-<name>`` with a null value: the connector was deleted."""

    connector: str


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """``task-<name>-<n>``: one task's configuration, invisible until a matching commit arrives."""

    task: TaskId
    properties: Properties

    def __post_init__(self) -> None:
        object.__setattr__(self, "properties", _freeze(self.properties))


@dataclass(frozen=True, slots=True)
class TaskCommit:
    """``commit-<name>``: applies the task configs written since the last commit, all at once."""

    connector: str
    tasks: int


@dataclass(frozen=True, slots=True)
class TargetStateRecord:
    """``target-state-<name>``: pause, resume or stop."""

    connector: str
    state: TargetState


@dataclass(frozen=True, slots=True)
class TargetStateDeletion:
    """``target-state-<name>`` with a null value, written right after a connector's deletion."""

    connector: str


@dataclass(frozen=True, slots=True)
class SessionKeyRecord:
    """``session-key``: the key that signs internal REST requests under the ``sessioned`` protocol.

    ``key`` is kept as the record carries it, base64 text, so that a record read and written back is the
    same bytes; :meth:`secret` gives the raw key.
    """

    key: str
    algorithm: str
    creation_timestamp: int

    def secret(self) -> bytes:
        """The raw key; Java's basic Base64 decoder accepts a missing padding, Python's wants it."""
        return base64.b64decode(self.key + "=" * (-len(self.key) % 4), validate=True)

    def __repr__(self) -> str:
        # The key signs requests between workers; keep it out of logs and reprs.
        return (
            f"SessionKeyRecord(key=<redacted>, algorithm={self.algorithm!r}, "
            f"creation_timestamp={self.creation_timestamp})"
        )


@dataclass(frozen=True, slots=True)
class RestartRequest:
    """``restart-connector-<name>``: a REST restart request, forwarded to every worker through the log."""

    connector: str
    include_tasks: bool = False
    only_failed: bool = False


@dataclass(frozen=True, slots=True)
class TaskCountRecord:
    """``tasks-fencing-<name>``: how many task producers a reconfiguration must fence (KIP-618)."""

    connector: str
    task_count: int


@dataclass(frozen=True, slots=True)
class LoggerLevel:
    """``logger-cluster-<namespace>``: a cluster-wide log level (KIP-976)."""

    namespace: str
    level: str


@dataclass(frozen=True, slots=True)
class StaticAssignmentRecord:
    """``static-assignment-<worker id>``: the static connectors and tasks an operator set for a worker
    over REST; it wins over the worker's ``static.connectors``/``static.tasks`` while it exists."""

    worker_id: str
    connectors: tuple[str, ...]
    tasks: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class StaticAssignmentDeletion:
    """A tombstone for ``static-assignment-<worker id>``: the worker's properties apply again."""

    worker_id: str


ConfigRecord: TypeAlias = (
    ConnectorConfig
    | ConnectorDeletion
    | TaskConfig
    | TaskCommit
    | TargetStateRecord
    | TargetStateDeletion
    | SessionKeyRecord
    | RestartRequest
    | TaskCountRecord
    | LoggerLevel
    | StaticAssignmentRecord
    | StaticAssignmentDeletion
)


def _int_in(value: int, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{what} {value!r} is outside {low}..{high}")
    return value


def encode(record: ConfigRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes Java's KafkaConfigBackingStore would write for this record."""
    key: str
    value: object
    match record:
        case ConnectorConfig(connector, properties):
            key, value = CONNECTOR_PREFIX + connector, {"properties": properties}
        case ConnectorDeletion(connector):
            key, value = CONNECTOR_PREFIX + connector, None
        case TaskConfig(task, properties):
            _int_in(task.task, 0, INT32_MAX, "task number")
            key, value = f"{TASK_PREFIX}{task.connector}-{task.task}", {"properties": properties}
        case TaskCommit(connector, tasks):
            key, value = COMMIT_PREFIX + connector, {"tasks": _int_in(tasks, 0, INT32_MAX, "task count")}
        case TargetStateRecord(connector, state):
            # Workers older than 3.5 know only STARTED and PAUSED and read "state"; newer ones prefer
            # "state.v2". Java therefore writes STOPPED as PAUSED in the old field.
            legacy = TargetState.PAUSED if state is TargetState.STOPPED else state
            key, value = TARGET_STATE_PREFIX + connector, {"state": legacy.value, "state.v2": state.value}
        case TargetStateDeletion(connector):
            key, value = TARGET_STATE_PREFIX + connector, None
        case SessionKeyRecord(encoded_key, algorithm, created):
            try:
                record.secret()
            except (binascii.Error, ValueError) as exc:
                raise ValueError(f"session key is not base64: {exc}") from None
            key = SESSION_KEY_KEY
            value = {
                "key": encoded_key,
                "algorithm": algorithm,
                "creation-timestamp": _int_in(created, INT64_MIN, INT64_MAX, "creation timestamp"),
            }
        case RestartRequest(connector, include_tasks, only_failed):
            key = RESTART_PREFIX + connector
            value = {"include-tasks": bool(include_tasks), "only-failed": bool(only_failed)}
        case TaskCountRecord(connector, task_count):
            key = TASK_COUNT_PREFIX + connector
            value = {"task-count": _int_in(task_count, 0, INT32_MAX, "task count")}
        case LoggerLevel(namespace, level):
            key, value = LOGGER_CLUSTER_PREFIX + namespace, {"level": level}
        case StaticAssignmentRecord(worker_id, connectors, tasks):
            key = STATIC_ASSIGNMENT_PREFIX + worker_id
            value = {"connectors": list(connectors), "tasks": list(tasks)}
        case StaticAssignmentDeletion(worker_id):
            key, value = STATIC_ASSIGNMENT_PREFIX + worker_id, None
    return key.encode("utf-8"), None if value is None else java_json.write_record(value)


def _java_split_dashes(text: str) -> list[str]:
    """``text.split("-")`` with Java's semantics, which drop trailing empty strings."""
    parts = text.split("-")
    while parts and parts[-1] == "":
        parts.pop()
    return parts


_TASK_NUMBER = re.compile(r"\+?[0-9]+")


def parse_task_key(key: str, skip: int) -> TaskId | None:
    """Parse ``<skip dash-separated words>-<connector>-<n>`` as Java's parseTaskId does, or None."""
    parts = _java_split_dashes(key)
    if len(parts) < skip + 2 or not _TASK_NUMBER.fullmatch(parts[-1]):
        return None
    number = int(parts[-1])
    connector = "-".join(parts[skip:-1])
    if number > INT32_MAX or not connector:
        return None
    return TaskId(connector, number)


def _name(key: str, prefix: str) -> str:
    name = key[len(prefix) :]
    if not name:
        raise CorruptRecord(key, "the key names no connector")
    return name


def decode(key: bytes | None, value: bytes | None) -> ConfigRecord | None:
    """Decode one config-topic record; None for a tombstone that means nothing for its key.

    Java logs null values on ``task-``, ``commit-``, ``session-key``, ``restart-connector-``,
    ``tasks-fencing-`` and ``logger-cluster-`` keys and otherwise ignores them. They are not corruption:
    cleaning up a deleted connector's leftovers writes exactly such tombstones, so they are returned as
    None, which :func:`apply` treats as "only the offset moves".
    """
    if key is None:
        raise CorruptRecord("", "config record without a key", advances_offset=False)
    # Java reads keys with StringDeserializer, which replaces malformed UTF-8.
    text = key.decode("utf-8", errors="replace")
    data = parse_json(text, value) if value is not None else None

    # Same order as KafkaConfigBackingStore's consumer callback; the prefixes do not overlap.
    if text.startswith(TARGET_STATE_PREFIX):
        connector = _name(text, TARGET_STATE_PREFIX)
        if data is None:
            return TargetStateDeletion(connector)
        return TargetStateRecord(connector, _target_state(text, _object(text, data)))
    if text.startswith(CONNECTOR_PREFIX):
        connector = _name(text, CONNECTOR_PREFIX)
        if data is None:
            return ConnectorDeletion(connector)
        return ConnectorConfig(connector, _properties(text, data))
    if text.startswith(TASK_PREFIX):
        task = parse_task_key(text, 1)
        if task is None:
            raise CorruptRecord(text, "the key is not of the form task-<connector>-<task number>")
        return None if data is None else TaskConfig(task, _properties(text, data))
    if text.startswith(COMMIT_PREFIX):
        connector = _name(text, COMMIT_PREFIX)
        if data is None:
            return None
        return TaskCommit(connector, _int_field(text, _object(text, data), "tasks", 0, INT32_MAX))
    if text.startswith(RESTART_PREFIX):
        connector = _name(text, RESTART_PREFIX)
        if data is None:
            return None
        obj = _object(text, data)
        # Java defaults a missing or non-boolean flag to false rather than dropping the request.
        include_tasks, only_failed = obj.get("include-tasks"), obj.get("only-failed")
        return RestartRequest(
            connector,
            include_tasks=include_tasks if isinstance(include_tasks, bool) else False,
            only_failed=only_failed if isinstance(only_failed, bool) else False,
        )
    if text.startswith(TASK_COUNT_PREFIX):
        connector = _name(text, TASK_COUNT_PREFIX)
        if data is None:
            return None
        return TaskCountRecord(connector, _int_field(text, _object(text, data), "task-count", 0, INT32_MAX))
    if text == SESSION_KEY_KEY:
        return None if data is None else _session_key(text, _object(text, data))
    if text.startswith(LOGGER_CLUSTER_PREFIX):
        namespace = _name(text, LOGGER_CLUSTER_PREFIX)
        if data is None:
            return None
        return LoggerLevel(namespace, _str_field(text, _object(text, data), "level"))
    if text.startswith(STATIC_ASSIGNMENT_PREFIX):
        worker_id = _name(text, STATIC_ASSIGNMENT_PREFIX)
        if data is None:
            return StaticAssignmentDeletion(worker_id)
        obj = _object(text, data)
        return StaticAssignmentRecord(
            worker_id, _str_list(text, obj, "connectors"), _str_list(text, obj, "tasks")
        )
    raise CorruptRecord(text, "unknown key prefix")


def _str_list(key: str, obj: Mapping[str, object], field_name: str) -> tuple[str, ...]:
    items = obj.get(field_name, [])
    if not isinstance(items, list) or not all(isinstance(i, str) for i in items):
        raise CorruptRecord(key, f"'{field_name}' should be a list of strings but is {_type_name(items)}")
    return tuple(items)


def _target_state(key: str, obj: Mapping[str, object]) -> TargetState:
    # Prefer "state.v2" (3.5+); a non-string there falls back to "state", but an unknown name does not.
    name = obj.get("state.v2")
    if not isinstance(name, str):
        name = obj.get("state")
        if not isinstance(name, str):
            raise CorruptRecord(key, f"'state' should be a string but is {_type_name(name)}")
    try:
        return TargetState(name)
    except ValueError:
        raise CorruptRecord(key, f"unknown target state '{name}'") from None


def _session_key(key: str, obj: Mapping[str, object]) -> SessionKeyRecord:
    record = SessionKeyRecord(
        _str_field(key, obj, "key"),
        _str_field(key, obj, "algorithm"),
        _int_field(key, obj, "creation-timestamp", INT64_MIN, INT64_MAX),
    )
    try:
        record.secret()
    except (binascii.Error, ValueError) as exc:
        raise CorruptRecord(key, f"'key' is not base64 ({exc})") from exc
    return record
