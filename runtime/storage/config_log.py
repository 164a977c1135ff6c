"""The cluster-config snapshot folded from the config topic's records (``config_records``).

Everything in this module is pure: the fold :func:`apply` maps an immutable :class:`ConfigState` and one
record to a new state. Reading a topic record by record that way would copy the snapshot's maps per record
(quadratic in the topic), so the I/O edge keeps a :class:`ConfigFold`, which owns plain dicts while it
folds: it calls ``add_raw`` per record, logs any :class:`CorruptRecord` it gets back, and hands
``freeze().snapshot()`` to the herder when asked.

The records themselves (keys, values, their JSON and its limits) are ``config_records``'; they are named
here too, so the many callers that read both from this module keep doing so.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.config_records import (
    COMMIT_PREFIX,
    CONNECTOR_PREFIX,
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    LOGGER_CLUSTER_PREFIX,
    RESTART_PREFIX,
    SESSION_KEY_KEY,
    STATIC_ASSIGNMENT_PREFIX,
    TARGET_STATE_PREFIX,
    TASK_COUNT_PREFIX,
    TASK_PREFIX,
    ConfigRecord,
    ConnectorConfig,
    ConnectorDeletion,
    CorruptRecord,
    LoggerLevel,
    Properties,
    RestartRequest,
    SessionKeyRecord,
    StaticAssignmentDeletion,
    StaticAssignmentRecord,
    TargetState,
    TargetStateDeletion,
    TargetStateRecord,
    TaskCommit,
    TaskConfig,
    TaskCountRecord,
    decode,
    encode,
    parse_json,
    parse_task_key,
)
from kconnect.runtime.storage.folding import MapBuilder, NestedMapBuilder, SetBuilder

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

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _empty() -> Mapping[Any, Any]:
    return _EMPTY


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
