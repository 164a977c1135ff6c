"""Records of the config topic and the cluster-config snapshot folded from them.

The config topic is shared with Apache Kafka Connect: a Java worker and a kconnect worker in one group read
and write the same records, so keys and values here are byte-compatible with what Connect 3.9 writes
(``KafkaConfigBackingStore`` serialising Connect structs through its internal ``JsonConverter`` with
``schemas.enable=false``; Jackson 2.16 underneath). The JSON writer and reader that make that true are
:mod:`kconnect.runtime.storage.java_json`'s, shared with the status and offset codecs and the converters.

Everything in this module is pure: decoding never touches Kafka, and the fold :func:`apply` maps an
immutable :class:`ConfigState` and one record to a new state. Reading a topic record by record that way
would copy the snapshot's maps per record (quadratic in the topic), so the I/O edge keeps a
:class:`ConfigFold`, which owns plain dicts while it folds: it calls ``add_raw`` per record, logs any
:class:`CorruptRecord` it gets back, and hands ``freeze().snapshot()`` to the herder when asked.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypeAlias

from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import java_json
from kconnect.runtime.storage.folding import MapBuilder, NestedMapBuilder, SetBuilder

__all__ = [
    "COMMIT_PREFIX",
    "CONNECTOR_PREFIX",
    "LOGGER_CLUSTER_PREFIX",
    "RESTART_PREFIX",
    "SESSION_KEY_KEY",
    "TARGET_STATE_PREFIX",
    "TASK_COUNT_PREFIX",
    "TASK_PREFIX",
    "ClusterConfigSnapshot",
    "ConfigFold",
    "ConfigRecord",
    "ConfigState",
    "ConnectorConfig",
    "ConnectorDeletion",
    "CorruptRecord",
    "LoggerLevel",
    "PendingRestart",
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
    "advance",
    "apply",
    "apply_all",
    "apply_raw",
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

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _empty() -> Mapping[Any, Any]:
    return _EMPTY


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
# Reading record values (the JSON itself is runtime/storage/java_json's, byte for byte Java's)
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


# ---------------------------------------------------------------------------------------------------
# Snapshot and fold
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PendingRestart:
    """The latest restart request for a connector and where it was read, so the herder acts once."""

    offset: int
    request: RestartRequest


@dataclass(frozen=True, slots=True)
class ClusterConfigSnapshot:
    """An immutable view of the config topic up to ``offset``, as Java's ClusterConfigState.

    ``offset`` follows Java: the position *after* the last record read (record offset + 1), -1 before
    any. It is what a worker reports as its config offset when it joins, and a leader compares it with
    the other members', so it must mean the same thing on a Java worker and on ours.
    """

    offset: int = -1
    session_key: SessionKeyRecord | None = None
    connector_configs: Mapping[str, Properties] = field(default_factory=_empty)
    target_states: Mapping[str, TargetState] = field(default_factory=_empty)
    committed_task_counts: Mapping[str, int] = field(default_factory=_empty)
    committed_task_configs: Mapping[str, tuple[Properties, ...]] = field(default_factory=_empty)
    inconsistent: frozenset[str] = frozenset()
    applied_connector_configs: Mapping[str, Properties] = field(default_factory=_empty)
    task_count_records: Mapping[str, int] = field(default_factory=_empty)
    task_config_generations: Mapping[str, int] = field(default_factory=_empty)
    pending_fencing: frozenset[str] = frozenset()
    restart_requests: Mapping[str, PendingRestart] = field(default_factory=_empty)
    logger_levels: Mapping[str, str] = field(default_factory=_empty)
    static_overrides: Mapping[str, StaticAssignmentRecord] = field(default_factory=_empty)

    def connectors(self) -> list[str]:
        """Sorted, so that what is derived from it (task counts, the assignor's input, listings) is the same
        on every worker whatever order the records were read in."""
        return sorted(self.connector_configs)

    def contains(self, connector: str) -> bool:
        """Whether the connector has a config: a target state alone does not make a connector exist, since
        REST may write one just before the config (see ``target_state``)."""
        return connector in self.connector_configs

    def connector_config(self, connector: str) -> Properties | None:
        """The latest config written for the connector, which may be newer than the one its current task
        configs were generated from (``applied_connector_config``)."""
        return self.connector_configs.get(connector)

    def applied_connector_config(self, connector: str) -> Properties | None:
        """The connector config in force when its current task configs were committed."""
        return self.applied_connector_configs.get(connector)

    def target_state(self, connector: str) -> TargetState | None:
        """Always set for an existing connector (STARTED unless a record says otherwise).

        A state can also exist for a connector without a config: the REST API may write an initial
        state just before the config, and Java keeps it.
        """
        return self.target_states.get(connector)

    def task_count(self, connector: str) -> int:
        """The count of the latest commit, even an inconsistent one (0 if none), as Java reports it."""
        return self.committed_task_counts.get(connector, 0)

    def is_inconsistent(self, connector: str) -> bool:
        """Whether the latest commit lacked some of its task records (compaction, or a leader that died
        mid-write): none of its tasks run until the leader writes a complete set again."""
        return connector in self.inconsistent

    def tasks(self, connector: str) -> list[TaskId]:
        """The connector's tasks; none while it is inconsistent, so nothing runs half-updated configs."""
        if connector in self.inconsistent:
            return []
        return [TaskId(connector, i) for i in range(self.task_count(connector))]

    def task_configs(self, connector: str) -> list[Properties]:
        """The configs of the tasks that may run, as many as the committed count; none while the connector is
        inconsistent, so no worker runs a half-updated set."""
        if connector in self.inconsistent:
            return []
        return list(self.committed_task_configs.get(connector, ())[: self.task_count(connector)])

    def task_config(self, task: TaskId) -> Properties | None:
        """One task's config from the last complete commit; unlike ``task_configs`` it ignores inconsistency,
        so a caller deciding whether the task exists also checks ``task_count``."""
        committed = self.committed_task_configs.get(task.connector, ())
        return committed[task.task] if 0 <= task.task < len(committed) else None

    def task_counts(self) -> dict[str, int]:
        """Connector -> number of tasks to assign; 0 for inconsistent ones, which the leader must repair."""
        return {c: len(self.tasks(c)) for c in self.connectors()}

    def task_count_record(self, connector: str) -> int | None:
        """The count in the latest ``tasks-fencing-<connector>`` record (KIP-618), None if none: how many task
        instances of the previous generation zombie fencing must fence."""
        return self.task_count_records.get(connector)

    def is_pending_fencing(self, connector: str) -> bool:
        """Whether task configs were committed after the last task-count record (KIP-618 fencing)."""
        return connector in self.pending_fencing

    def task_config_generation(self, connector: str) -> int | None:
        """Java's task-config generation: 0 at the first commit that applied task records, +1 at each later
        one, None before any; a commit with no task records of its own leaves it unchanged."""
        return self.task_config_generations.get(connector)

    def restart_request(self, connector: str) -> PendingRestart | None:
        """The newest restart request with the offset it was read at: a newer request replaces a pending one,
        as in Java, and the offset lets the herder act on each request once."""
        return self.restart_requests.get(connector)

    def logger_level(self, namespace: str) -> str | None:
        """The level of the latest ``logger-cluster-<namespace>`` record (``PUT /admin/loggers`` with
        ``scope=cluster``): a cluster-wide level lives in the config topic so that every worker reads it."""
        return self.logger_levels.get(namespace)


@dataclass(frozen=True, slots=True)
class ConfigState:
    """What the fold carries: the visible snapshot plus task configs still waiting for their commit."""

    view: ClusterConfigSnapshot = field(default_factory=ClusterConfigSnapshot)
    #: connector -> task number -> config. A connector that ever had a task record keeps an (empty) entry
    #: after its commit, as Java's map does; the task-config generation depends on that.
    deferred: Mapping[str, Mapping[int, Properties]] = field(default_factory=_empty)

    def snapshot(self) -> ClusterConfigSnapshot:
        """The visible part only: deferred task configs are not in force until their commit, so nothing
        outside the fold may see them."""
        return self.view

    @property
    def offset(self) -> int:
        """The snapshot's offset (the position after the last record folded), which is what a worker reports
        as its config offset when it joins the group."""
        return self.view.offset


class ConfigFold:
    """The fold over the config topic, mutable between snapshots so that reading N records costs O(N).

    Why a builder: a frozen snapshot rebuilt per record copied each map the record touched (every
    connector's config, target state, task count...), so reading a topic of many connectors was
    quadratic. The fold owns plain dicts and copies a map only the first time it is written after a
    :meth:`freeze`; the states it gives are as immutable as before. Semantics are Java's
    KafkaConfigBackingStore's, record by record.
    """

    __slots__ = (
        "_applied",
        "_configs",
        "_counts",
        "_deferred",
        "_generations",
        "_inconsistent",
        "_levels",
        "_offset",
        "_pending_fencing",
        "_restarts",
        "_session_key",
        "_state",
        "_static",
        "_targets",
        "_task_configs",
        "_task_count_records",
    )

    def __init__(self, state: ConfigState | None = None) -> None:
        base = state if state is not None else ConfigState()
        view = base.view
        self._offset = view.offset
        self._session_key = view.session_key
        self._configs: MapBuilder[str, Properties] = MapBuilder(view.connector_configs)
        self._targets: MapBuilder[str, TargetState] = MapBuilder(view.target_states)
        self._counts: MapBuilder[str, int] = MapBuilder(view.committed_task_counts)
        self._task_configs: MapBuilder[str, tuple[Properties, ...]] = MapBuilder(view.committed_task_configs)
        self._inconsistent: SetBuilder[str] = SetBuilder(view.inconsistent)
        self._applied: MapBuilder[str, Properties] = MapBuilder(view.applied_connector_configs)
        self._task_count_records: MapBuilder[str, int] = MapBuilder(view.task_count_records)
        self._generations: MapBuilder[str, int] = MapBuilder(view.task_config_generations)
        self._pending_fencing: SetBuilder[str] = SetBuilder(view.pending_fencing)
        self._restarts: MapBuilder[str, PendingRestart] = MapBuilder(view.restart_requests)
        self._levels: MapBuilder[str, str] = MapBuilder(view.logger_levels)
        self._static: MapBuilder[str, StaticAssignmentRecord] = MapBuilder(view.static_overrides)
        #: connector -> task number -> config; an emptied entry stays (see ConfigState.deferred).
        self._deferred: NestedMapBuilder[str, int, Properties] = NestedMapBuilder(
            base.deferred, keep_empty=True
        )
        self._state: ConfigState | None = base

    @property
    def offset(self) -> int:
        """The position after the last record folded (-1 before any)."""
        return self._offset

    def _remove_connector(self, connector: str) -> None:
        """Java's processConnectorRemoval, plus dropping a pending restart that now has nothing to restart.

        Target state, inconsistency, task-count records and generations survive, as in Java: the target
        state goes with its own tombstone, and a re-created connector stays inconsistent until the leader
        writes a complete set of task configs for it.
        """
        self._configs.pop(connector)
        self._counts.pop(connector)
        self._task_configs.pop(connector)
        self._applied.pop(connector)
        self._restarts.pop(connector)
        self._deferred.drop(connector)

    def _commit(self, connector: str, count: int) -> None:
        config = self._configs.get(connector)
        if config is None:
            # Compaction can leave task records and a commit of a connector whose config (and tombstone)
            # are gone; Java (KAFKA-16838) forgets everything about it instead of resurrecting its tasks.
            self._remove_connector(connector)
            return
        deferred = self._deferred.inner(connector)
        pending: Mapping[int, Properties] = deferred if deferred is not None else _EMPTY
        if all(i in pending for i in range(count)):
            # Extra task records beyond the count are fine: compaction may keep an old higher-numbered one.
            self._task_configs.set(connector, tuple(pending[i] for i in range(count)))
            self._inconsistent.discard(connector)
            self._applied.set(connector, config)
            if deferred is not None:
                generation = self._generations.get(connector)
                self._generations.set(connector, 0 if generation is None else generation + 1)
        else:
            # Compaction removed some of the task records this commit covered (or a leader died mid-write):
            # keep the old task configs but expose none, until a complete commit repairs it.
            self._inconsistent.add(connector)
        self._counts.set(connector, count)
        self._pending_fencing.add(connector)
        # Deferred configs are dropped even when not applied: the next commit needs a fresh, complete set.
        if deferred is not None:
            self._deferred.replace(connector, {})

    def add(self, record: ConfigRecord | None, offset: int) -> None:
        """Fold the record read at ``offset`` (None: a no-op record that still counts)."""
        match record:
            case None:
                pass
            case ConnectorConfig(connector, properties):
                self._configs.set(connector, properties)
                # Connectors created before target states existed start STARTED; a state written
                # before the config (an explicit initial state) is kept.
                if connector not in self._targets:
                    self._targets.set(connector, TargetState.STARTED)
            case ConnectorDeletion(connector):
                self._remove_connector(connector)
            case TaskConfig(task, properties):
                self._deferred.set(task.connector, task.task, properties)
            case TaskCommit(connector, count):
                self._commit(connector, count)
            case TargetStateRecord(connector, target):
                self._targets.set(connector, target)
            case TargetStateDeletion(connector):
                if connector in self._configs:
                    # Java restores the default so an existing connector always has a target state.
                    self._targets.set(connector, TargetState.STARTED)
                else:
                    self._targets.pop(connector)
            case SessionKeyRecord():
                self._session_key = record
            case RestartRequest(connector):
                self._restarts.set(connector, PendingRestart(offset, record))
            case TaskCountRecord(connector, task_count):
                self._task_count_records.set(connector, task_count)
                self._pending_fencing.discard(connector)
            case LoggerLevel(namespace, level):
                self._levels.set(namespace, level)
            case StaticAssignmentRecord(worker_id):
                self._static.set(worker_id, record)
            case StaticAssignmentDeletion(worker_id):
                self._static.pop(worker_id)
        self._offset = offset + 1
        self._state = None

    def advance(self, offset: int) -> None:
        """Count a record that changed nothing (a corrupt one Java would still count) towards the offset."""
        self.add(None, offset)

    def add_raw(self, key: bytes | None, value: bytes | None, offset: int) -> CorruptRecord | None:
        """Decode and fold one consumed record; a corrupt one comes back for the caller to log, not raised."""
        try:
            record = decode(key, value)
        except CorruptRecord as corrupt:
            if corrupt.advances_offset:
                self.advance(offset)
            return corrupt
        self.add(record, offset)
        return None

    def freeze(self) -> ConfigState:
        """The state folded so far; the same object until the next record."""
        if self._state is None:
            view = ClusterConfigSnapshot(
                offset=self._offset,
                session_key=self._session_key,
                connector_configs=self._configs.freeze(),
                target_states=self._targets.freeze(),
                committed_task_counts=self._counts.freeze(),
                committed_task_configs=self._task_configs.freeze(),
                inconsistent=self._inconsistent.freeze(),
                applied_connector_configs=self._applied.freeze(),
                task_count_records=self._task_count_records.freeze(),
                task_config_generations=self._generations.freeze(),
                pending_fencing=self._pending_fencing.freeze(),
                restart_requests=self._restarts.freeze(),
                logger_levels=self._levels.freeze(),
                static_overrides=self._static.freeze(),
            )
            self._state = ConfigState(view, self._deferred.freeze())
        return self._state


def apply_all(state: ConfigState, records: Iterable[tuple[ConfigRecord | None, int]]) -> ConfigState:
    """Fold ``(record, offset)`` pairs in order, in time linear in the batch."""
    fold = ConfigFold(state)
    for record, offset in records:
        fold.add(record, offset)
    return fold.freeze()


def apply(state: ConfigState, record: ConfigRecord | None, offset: int) -> ConfigState:
    """Fold the record read at ``offset`` into the state (None: a no-op record that still counts). Costs a
    copy of each map the record touches; batches go through :func:`apply_all` or a :class:`ConfigFold`."""
    return apply_all(state, ((record, offset),))


def advance(state: ConfigState, offset: int) -> ConfigState:
    """Count a record that changed nothing (a corrupt one Java would still count) towards the offset."""
    return apply(state, None, offset)


def apply_raw(
    state: ConfigState, key: bytes | None, value: bytes | None, offset: int
) -> tuple[ConfigState, CorruptRecord | None]:
    """Decode and fold one consumed record; a corrupt one comes back for the caller to log, not raised."""
    try:
        record = decode(key, value)
    except CorruptRecord as corrupt:
        return (advance(state, offset) if corrupt.advances_offset else state), corrupt
    return apply(state, record, offset), None
