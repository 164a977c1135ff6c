"""Records of the status topic and the latest-status fold over them.

Java workers and ours report connector and task states into the same compacted topic, and the REST API
of either answers from it, so the records match Connect 3.9's KafkaStatusBackingStore byte for byte (its
STATUS_SCHEMA_V0 and TOPIC_STATUS_SCHEMA_V0 through the internal schemaless JsonConverter).

Two generation rules exist in Java and both are here, as pure functions:

* on read, a task's UNASSIGNED status does not replace a RUNNING status of the same or a newer
  generation (a worker that lost the task in a rebalance may report it after the new owner started it);
  every other status simply replaces the previous one, and connector statuses always do;
* on write, ``putSafe`` only writes when :meth:`StatusState.can_write_safely` holds (no status yet, the
  same worker wrote the last one, or the last one is of the same or an older generation).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any, TypeAlias

from kconnect.runtime.codecs import java_json
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.config_log import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    CorruptRecord,
    parse_json,
    parse_task_key,
)
from kconnect.runtime.storage.folding import MapBuilder, NestedMapBuilder

__all__ = [
    "CONNECTOR_STATUS_PREFIX",
    "TASK_STATUS_PREFIX",
    "TOPIC_STATUS_PREFIX",
    "TOPIC_STATUS_SEPARATOR",
    "AutoRestartInfo",
    "ConnectorStatus",
    "ConnectorStatusDeletion",
    "CorruptRecord",
    "State",
    "StatusFold",
    "StatusRecord",
    "StatusState",
    "TaskStatus",
    "TaskStatusDeletion",
    "TopicStatus",
    "TopicStatusDeletion",
    "apply",
    "apply_all",
    "connector_key",
    "decode",
    "encode",
    "task_key",
]

CONNECTOR_STATUS_PREFIX = "status-connector-"
TASK_STATUS_PREFIX = "status-task-"
TOPIC_STATUS_PREFIX = "status-topic-"
TOPIC_STATUS_SEPARATOR = ":connector-"

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _empty() -> Mapping[Any, Any]:
    return _EMPTY


class State(StrEnum):
    """Java's AbstractStatus.State. DESTROYED is never written as a value: Java writes a tombstone."""

    UNASSIGNED = "UNASSIGNED"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    FAILED = "FAILED"
    DESTROYED = "DESTROYED"
    RESTARTING = "RESTARTING"
    STOPPED = "STOPPED"


@dataclass(frozen=True, slots=True)
class AutoRestartInfo:
    """kconnect's self-healing, beside Java's fields of a FAILED status: how many automatic restarts were
    made and when the next one is due (None: none is, the maximum was reached or the connector is paused or
    stopped). In the record value as ``"auto_restart": {"attempts", "next_attempt_ms"}``: Java's status
    reader reads the fields it knows and ignores this one, and every worker's REST answer can show it."""

    attempts: int
    next_attempt_ms: int | None


@dataclass(frozen=True, slots=True)
class ConnectorStatus:
    """``status-connector-<name>``. ``trace`` is nullable (written as JSON null); ``version`` is the
    plugin version running (KIP-891), written only when known, so Java workers before 4.1, which read
    the fields they know, still read the record. ``auto_restart``: see :class:`AutoRestartInfo`."""

    connector: str
    state: State
    trace: str | None
    worker_id: str
    generation: int
    version: str | None = None
    auto_restart: AutoRestartInfo | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", State(self.state))


@dataclass(frozen=True, slots=True)
class TaskStatus:
    """``status-task-<name>-<n>``, same value shape as a connector's."""

    task: TaskId
    state: State
    trace: str | None
    worker_id: str
    generation: int
    version: str | None = None
    auto_restart: AutoRestartInfo | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "state", State(self.state))


@dataclass(frozen=True, slots=True)
class ConnectorStatusDeletion:
    """``status-connector-<name>`` with a null value; Java drops the connector's task statuses with it."""

    connector: str


@dataclass(frozen=True, slots=True)
class TaskStatusDeletion:
    """``status-task-<name>-<n>`` with a null value: written when a connector is deleted or stopped, so that a
    task that no longer exists has no status left in REST answers."""

    task: TaskId


@dataclass(frozen=True, slots=True)
class TopicStatus:
    """``status-topic-<topic>:connector-<name>``: a topic a connector used (KIP-558)."""

    topic: str
    connector: str
    task: int
    discover_timestamp: int


@dataclass(frozen=True, slots=True)
class TopicStatusDeletion:
    """``status-topic-<topic>:connector-<name>`` with a null value: the topic set was reset."""

    topic: str
    connector: str


StatusRecord: TypeAlias = (
    ConnectorStatus
    | TaskStatus
    | ConnectorStatusDeletion
    | TaskStatusDeletion
    | TopicStatus
    | TopicStatusDeletion
)


def _check_int(value: int, low: int, high: int, what: str) -> int:
    if isinstance(value, bool) or not low <= value <= high:
        raise ValueError(f"{what} {value!r} is outside {low}..{high}")
    return value


def _status_value(
    state: State,
    trace: str | None,
    worker_id: str,
    generation: int,
    version: str | None,
    auto_restart: AutoRestartInfo | None = None,
) -> bytes | None:
    if state is State.DESTROYED:
        # Java's send() turns a DESTROYED status into a tombstone rather than a record.
        return None
    _check_int(generation, INT32_MIN, INT32_MAX, "generation")
    fields: dict[str, object] = {
        "state": state.value,
        "trace": trace,
        "worker_id": worker_id,
        "generation": generation,
    }
    if version is not None:
        fields["version"] = version
    if auto_restart is not None:
        _check_int(auto_restart.attempts, 0, INT32_MAX, "auto-restart attempts")
        fields["auto_restart"] = {
            "attempts": auto_restart.attempts,
            "next_attempt_ms": auto_restart.next_attempt_ms,
        }
    encoded: bytes = java_json.write_record(fields)
    return encoded


def connector_key(connector: str) -> bytes:
    """The key of a connector's status record (also what a tombstone for it is sent under)."""
    return (CONNECTOR_STATUS_PREFIX + connector).encode("utf-8")


def task_key(task: TaskId) -> bytes:
    """The key of a task's status record, spelt as Java's KafkaStatusBackingStore spells it, since the
    two runtimes share the topic."""
    return f"{TASK_STATUS_PREFIX}{task.connector}-{task.task}".encode()


def _topic_key(topic: str, connector: str) -> str:
    return f"{TOPIC_STATUS_PREFIX}{topic}{TOPIC_STATUS_SEPARATOR}{connector}"


def encode(record: StatusRecord) -> tuple[bytes, bytes | None]:
    """The (key, value) bytes Java's KafkaStatusBackingStore would write for this record."""
    key: str
    value: bytes | None
    match record:
        case ConnectorStatus(connector, state, trace, worker_id, generation, version, auto_restart):
            key = CONNECTOR_STATUS_PREFIX + connector
            value = _status_value(state, trace, worker_id, generation, version, auto_restart)
        case TaskStatus(task, state, trace, worker_id, generation, version, auto_restart):
            key = f"{TASK_STATUS_PREFIX}{task.connector}-{_check_int(task.task, 0, INT32_MAX, 'task number')}"
            value = _status_value(state, trace, worker_id, generation, version, auto_restart)
        case ConnectorStatusDeletion(connector):
            key, value = CONNECTOR_STATUS_PREFIX + connector, None
        case TaskStatusDeletion(task):
            key, value = f"{TASK_STATUS_PREFIX}{task.connector}-{task.task}", None
        case TopicStatus(topic, connector, task, discover_timestamp):
            key = _topic_key(topic, connector)
            value = java_json.write_record(
                {
                    "topic": {
                        "name": topic,
                        "connector": connector,
                        "task": _check_int(task, INT32_MIN, INT32_MAX, "task number"),
                        "discoverTimestamp": _check_int(
                            discover_timestamp, INT64_MIN, INT64_MAX, "timestamp"
                        ),
                    }
                }
            )
        case TopicStatusDeletion(topic, connector):
            key, value = _topic_key(topic, connector), None
    return key.encode("utf-8"), value


def _describe(value: object) -> str:
    if value is None:
        return "null"
    return "a JSON " + {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}.get(
        type(value), "object"
    )


def _object(key: str, value: object, what: str = "value") -> dict[str, object]:
    if not isinstance(value, dict):
        raise CorruptRecord(key, f"{what} should be a JSON object but is {_describe(value)}")
    return value


def _int(key: str, obj: Mapping[str, object], name: str, low: int, high: int) -> int:
    value = obj.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise CorruptRecord(key, f"'{name}' should be an integer but is {_describe(value)}")
    if not low <= value <= high:
        raise CorruptRecord(key, f"'{name}' is {value}, outside {low}..{high}")
    return value


def _str(key: str, obj: Mapping[str, object], name: str) -> str:
    value = obj.get(name)
    if not isinstance(value, str):
        raise CorruptRecord(key, f"'{name}' should be a string but is {_describe(value)}")
    return value


def _auto_restart(key: str, obj: Mapping[str, object]) -> AutoRestartInfo | None:
    raw = obj.get("auto_restart")
    if raw is None:
        return None
    info = _object(key, raw, "'auto_restart'")
    attempts = _int(key, info, "attempts", 0, INT32_MAX)
    due = None if info.get("next_attempt_ms") is None else _int(key, info, "next_attempt_ms", 0, INT64_MAX)
    return AutoRestartInfo(attempts, due)


def _status_fields(
    key: str, raw: bytes
) -> tuple[State, str | None, str, int, str | None, AutoRestartInfo | None]:
    # Unlike the config store, Java's status reader does not treat empty bytes as a tombstone: its
    # converter yields null, the parser fails and the record is dropped.
    obj = _object(key, None if not raw else parse_json(key, raw))
    name = obj.get("state")
    try:
        state = State(name) if isinstance(name, str) else None
    except ValueError:
        state = None
    if state is None:
        raise CorruptRecord(key, f"'state' should name a connector/task state but is {name!r}")
    trace = obj.get("trace")
    if trace is not None and not isinstance(trace, str):
        raise CorruptRecord(key, f"'trace' should be a string or null but is {_describe(trace)}")
    version = obj.get("version")
    if version is not None and not isinstance(version, str):
        raise CorruptRecord(key, f"'version' should be a string or absent but is {_describe(version)}")
    worker_id, generation = _str(key, obj, "worker_id"), _int(key, obj, "generation", INT32_MIN, INT32_MAX)
    return state, trace, worker_id, generation, version, _auto_restart(key, obj)


def decode(key: bytes | None, value: bytes | None) -> StatusRecord:
    """Decode one status-topic record, or raise :class:`CorruptRecord` naming the key."""
    if key is None:
        raise CorruptRecord("", "status record without a key")
    text = key.decode("utf-8", errors="replace")
    if text.startswith(CONNECTOR_STATUS_PREFIX):
        connector = text[len(CONNECTOR_STATUS_PREFIX) :]
        if not connector:
            raise CorruptRecord(text, "the key names no connector")
        if value is None:
            return ConnectorStatusDeletion(connector)
        return ConnectorStatus(connector, *_status_fields(text, value))
    if text.startswith(TASK_STATUS_PREFIX):
        task = parse_task_key(text, 2)
        if task is None:
            raise CorruptRecord(text, "the key is not of the form status-task-<connector>-<task number>")
        if value is None:
            return TaskStatusDeletion(task)
        return TaskStatus(task, *_status_fields(text, value))
    if text.startswith(TOPIC_STATUS_PREFIX):
        topic, separator, connector = text[len(TOPIC_STATUS_PREFIX) :].partition(":")
        # Topic names cannot contain ':', so the first one starts the separator.
        if not topic or not separator or not connector.startswith("connector-") or connector == "connector-":
            raise CorruptRecord(text, "the key is not of the form status-topic-<topic>:connector-<connector>")
        connector = connector[len("connector-") :]
        if value is None:
            return TopicStatusDeletion(topic, connector)
        outer = _object(text, None if not value else parse_json(text, value))
        inner = _object(text, outer.get("topic"), "'topic'")
        # Java files the status under the key's topic and connector whatever the value says; no Java
        # writer makes them differ, so a record where they do is treated as corrupt rather than guessed at.
        name, owner = _str(text, inner, "name"), _str(text, inner, "connector")
        if (name, owner) != (topic, connector):
            raise CorruptRecord(text, f"the value names topic '{name}' of connector '{owner}', not the key's")
        return TopicStatus(
            topic,
            connector,
            _int(text, inner, "task", INT32_MIN, INT32_MAX),
            _int(text, inner, "discoverTimestamp", INT64_MIN, INT64_MAX),
        )
    raise CorruptRecord(text, "unknown key prefix")


# ---------------------------------------------------------------------------------------------------
# Fold
# ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StatusState:
    """The latest status of every connector, task and used topic, as read from the status topic.

    Topic statuses are kept under the connector and topic named by the record's key, as Java does.
    """

    connector_statuses: Mapping[str, ConnectorStatus] = field(default_factory=_empty)
    task_statuses_by_connector: Mapping[str, Mapping[int, TaskStatus]] = field(default_factory=_empty)
    topic_statuses: Mapping[str, Mapping[str, TopicStatus]] = field(default_factory=_empty)

    def connectors(self) -> list[str]:
        """The connectors that have a status record, sorted so that listings are stable."""
        return sorted(self.connector_statuses)

    def connector_status(self, connector: str) -> ConnectorStatus | None:
        """The latest status of a connector, or None when the status topic holds none (REST
        answers 404 then)."""
        return self.connector_statuses.get(connector)

    def task_status(self, task: TaskId) -> TaskStatus | None:
        """The latest status of a task after the read-side generation rule, or None when it has none."""
        return self.task_statuses_by_connector.get(task.connector, _EMPTY).get(task.task)

    def task_statuses(self, connector: str) -> list[TaskStatus]:
        """A connector's task statuses in task-number order, the order Connect's status endpoint lists them
        in."""
        tasks = self.task_statuses_by_connector.get(connector, _EMPTY)
        return [tasks[n] for n in sorted(tasks)]

    def topic_status(self, connector: str, topic: str) -> TopicStatus | None:
        """The record of one topic a connector used (KIP-558), or None when it has not used it or it was
        reset."""
        return self.topic_statuses.get(connector, _EMPTY).get(topic)

    def topics(self, connector: str) -> list[TopicStatus]:
        """The topics a connector used, sorted by name, for the ``/connectors/<name>/topics`` endpoint."""
        topics = self.topic_statuses.get(connector, _EMPTY)
        return [topics[t] for t in sorted(topics)]

    def can_write_safely(self, status: ConnectorStatus | TaskStatus) -> bool:
        """Java's putSafe guard: do not overwrite a newer generation's status written by another worker."""
        current = (
            self.connector_status(status.connector)
            if isinstance(status, ConnectorStatus)
            else self.task_status(status.task)
        )
        return (
            current is None
            or current.worker_id == status.worker_id
            or current.generation <= status.generation
        )


def _is_stale(current: TaskStatus | None, incoming: TaskStatus) -> bool:
    return (
        incoming.state is State.UNASSIGNED
        and current is not None
        and current.state is State.RUNNING
        and current.generation >= incoming.generation
    )


def _is_late_release(current: ConnectorStatus | None, incoming: ConnectorStatus) -> bool:
    """A connector's UNASSIGNED from the worker that stopped it, read after another worker's RUNNING of
    the same or a newer generation: the old owner's report of its stop, landed late, not news.

    Why, beyond Java (whose reader keeps every connector status): the old owner writes UNASSIGNED when it
    stops a connector that moves and does not wait for the write, and its new owner writes RUNNING once
    started; two producers, so under load the first can land after the second. Under
    ``group.protocol=connect`` both carry the same classic generation (targets move work without a
    round), so the writer's guard (``can_write_safely``) cannot tell them apart either. bench/rolling.py at
    5 x 200 (2026-11-29 07:46, load 40): 26 connectors that went home stayed UNASSIGNED in the status
    topic while they ran. An UNASSIGNED from the worker that reported RUNNING still applies."""
    return (
        incoming.state is State.UNASSIGNED
        and current is not None
        and current.state is State.RUNNING
        and current.worker_id != incoming.worker_id
        and current.generation >= incoming.generation
    )


class StatusFold:
    """The fold over the status topic, mutable between snapshots so that reading N records costs O(N).

    Why a builder: a frozen state rebuilt per record copied the connector's task map (and the map of all
    connectors) each time, quadratic over a topic of many connectors. The fold owns its dicts and copies a
    map only the first time it is written after a :meth:`freeze`; the snapshots stay immutable.
    """

    __slots__ = ("_connectors", "_snapshot", "_tasks", "_topics")

    def __init__(self, state: StatusState | None = None) -> None:
        base = state if state is not None else StatusState()
        self._connectors: MapBuilder[str, ConnectorStatus] = MapBuilder(base.connector_statuses)
        self._tasks: NestedMapBuilder[str, int, TaskStatus] = NestedMapBuilder(
            base.task_statuses_by_connector
        )
        self._topics: NestedMapBuilder[str, str, TopicStatus] = NestedMapBuilder(base.topic_statuses)
        self._snapshot: StatusState | None = base

    def add(self, record: StatusRecord) -> None:
        """Fold one status record (the topic has several partitions, so there is no single offset to keep)."""
        match record:
            case ConnectorStatus(connector):
                if _is_late_release(self._connectors.get(connector), record):
                    return
                self._connectors.set(connector, record)
            case ConnectorStatusDeletion(connector):
                self._connectors.pop(connector)
                self._tasks.drop(connector)
            case TaskStatus(task):
                if _is_stale(self._tasks.get(task.connector, task.task), record):
                    return
                self._tasks.set(task.connector, task.task, record)
            case TaskStatusDeletion(task):
                self._tasks.pop(task.connector, task.task)
            case TopicStatus(topic, connector):
                self._topics.set(connector, topic, record)
            case TopicStatusDeletion(topic, connector):
                self._topics.pop(connector, topic)
        self._snapshot = None

    def add_all(self, records: Iterable[StatusRecord]) -> None:
        """Fold records in order."""
        for record in records:
            self.add(record)

    def freeze(self) -> StatusState:
        """The state folded so far; the same object until the next record changes it."""
        if self._snapshot is None:
            self._snapshot = StatusState(
                self._connectors.freeze(), self._tasks.freeze(), self._topics.freeze()
            )
        return self._snapshot


def apply_all(state: StatusState, records: Iterable[StatusRecord]) -> StatusState:
    """Fold a batch of records in time linear in the batch (plus one copy of each map touched)."""
    fold = StatusFold(state)
    fold.add_all(records)
    return fold.freeze()


def apply(state: StatusState, record: StatusRecord) -> StatusState:
    """Fold one status record; batches go through :func:`apply_all` or a :class:`StatusFold`."""
    return apply_all(state, (record,))
