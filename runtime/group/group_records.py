"""The group-records topic folded into each group's state, and the records worth writing against it.

A Connect group on the KIP-848 seed's protocol is stored as compacted records in the group-records topic
(``group.records.storage.topic``): one record per group-level entity and one per member. This module is
the fold over that topic (:func:`apply`, record by record, as the worker's read-to-end log and ``kconnect
group describe`` both feed it) into a frozen :class:`GroupState` per group, and the other direction: which
of the records a leader or member wants written differ from what the topic holds (:func:`changed_records`).

The records' types are ``group_record_types``', their bytes ``group_record_codec``'s; both are named here
too, as every caller has imported them from this module. What a person reads of the folded state
(``GET /group``, ``kconnect group describe``) is ``group_view``'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any

from kconnect.runtime import logs
from kconnect.runtime.group.group_record_codec import (
    TAG_HOMES,
    TAG_LEARNERS,
    VALUE_VERSION,
    GroupRecordError,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from kconnect.runtime.group.group_record_types import (
    KEY_VERSIONS,
    Assigned,
    Assignor,
    ConnectorsTasksKey,
    ConnectorsTasksValue,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    GroupConfigurationKey,
    GroupConfigurationValue,
    GroupMetadataKey,
    GroupMetadataValue,
    Home,
    Learner,
    MemberMetadataKey,
    MemberMetadataValue,
    RecordKey,
    RecordValue,
    TargetAssignmentKey,
    TargetAssignmentValue,
    TargetMember,
)

__all__ = [
    "KEY_VERSIONS",
    "TAG_HOMES",
    "TAG_LEARNERS",
    "VALUE_VERSION",
    "Assigned",
    "Assignor",
    "ConnectorsTasksKey",
    "ConnectorsTasksValue",
    "CurrentMemberAssignmentKey",
    "CurrentMemberAssignmentValue",
    "GroupConfigurationKey",
    "GroupConfigurationValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "GroupRecordError",
    "GroupRecords",
    "GroupState",
    "Home",
    "Learner",
    "MemberMetadataKey",
    "MemberMetadataValue",
    "RecordKey",
    "RecordValue",
    "TargetAssignmentKey",
    "TargetAssignmentValue",
    "TargetMember",
    "apply",
    "changed_records",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for",
]

log = logs.get(__name__)


# ---------------------------------------------------------------------------------------------------
# The fold


def _frozen_map(items: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(items))


@dataclass(frozen=True, slots=True)
class GroupState:
    """One group as its records describe it; ``last_offset`` is the offset of the last record applied."""

    group_id: str
    epoch: int | None = None
    connectors_tasks: ConnectorsTasksValue | None = None
    members: Mapping[str, MemberMetadataValue] = field(default_factory=lambda: MappingProxyType({}))
    target: TargetAssignmentValue | None = None
    #: The Kafka timestamp of the target record: the scheduled delays in it count from there.
    target_timestamp_ms: int | None = None
    current: Mapping[str, CurrentMemberAssignmentValue] = field(default_factory=lambda: MappingProxyType({}))
    configuration: GroupConfigurationValue | None = None
    last_offset: int = -1

    def is_empty(self) -> bool:
        """Whether no entity is left (every record tombstoned): ``apply`` then drops the group, so a deleted
        group is not reported as an empty one."""
        return (
            self.epoch is None
            and self.connectors_tasks is None
            and not self.members
            and self.target is None
            and not self.current
            and self.configuration is None
        )


@dataclass(frozen=True, slots=True)
class GroupRecords:
    """Every group found in the topic, by group id (a topic may hold the records of several groups)."""

    groups: Mapping[str, GroupState] = field(default_factory=lambda: MappingProxyType({}))


def _held(state: GroupState | None, key: RecordKey) -> RecordValue | None:
    """What ``state`` holds for ``key`` (None when it holds nothing)."""
    if state is None or key.group_id != state.group_id:
        return None
    if isinstance(key, GroupMetadataKey):
        return None if state.epoch is None else GroupMetadataValue(state.epoch)
    if isinstance(key, ConnectorsTasksKey):
        return state.connectors_tasks
    if isinstance(key, MemberMetadataKey):
        return state.members.get(key.member_id)
    if isinstance(key, TargetAssignmentKey):
        return state.target
    if isinstance(key, CurrentMemberAssignmentKey):
        return state.current.get(key.member_id)
    return state.configuration


def _with(state: GroupState, key: RecordKey, value: RecordValue | None, timestamp_ms: int) -> GroupState:
    """``state`` with ``key`` set to ``value`` (None: deleted)."""
    if isinstance(key, GroupMetadataKey):
        assert value is None or isinstance(value, GroupMetadataValue)
        return replace(state, epoch=None if value is None else value.epoch)
    if isinstance(key, ConnectorsTasksKey):
        assert value is None or isinstance(value, ConnectorsTasksValue)
        return replace(state, connectors_tasks=value)
    if isinstance(key, MemberMetadataKey):
        members = dict(state.members)
        if value is None:
            members.pop(key.member_id, None)
        else:
            assert isinstance(value, MemberMetadataValue)
            members[key.member_id] = value
        return replace(state, members=_frozen_map(members))
    if isinstance(key, TargetAssignmentKey):
        assert value is None or isinstance(value, TargetAssignmentValue)
        return replace(state, target=value, target_timestamp_ms=None if value is None else timestamp_ms)
    if isinstance(key, CurrentMemberAssignmentKey):
        current = dict(state.current)
        if value is None:
            current.pop(key.member_id, None)
        else:
            assert isinstance(value, CurrentMemberAssignmentValue)
            current[key.member_id] = value
        return replace(state, current=_frozen_map(current))
    assert value is None or isinstance(value, GroupConfigurationValue)
    return replace(state, configuration=value)


def apply(
    records: GroupRecords, key: bytes | None, value: bytes | None, *, offset: int, timestamp_ms: int
) -> GroupRecords:
    """Fold one record of the group-records topic into ``records``.

    A record that does not decode (no key, unknown key or value version, truncated or corrupt bytes) is
    skipped with a warning naming its key and offset, and ``records`` is returned unchanged: one bad
    record must not hide the rest of the group from a worker or from ``kconnect group describe``.
    A group left with no entity at all (every record tombstoned) is dropped.
    """
    if key is None:
        log.warning("skipping group record without a key", offset=offset)
        return records
    try:
        decoded_key = decode_key(key)
    except GroupRecordError as exc:
        log.warning(
            "skipping group record whose key does not decode", key=key.hex(), offset=offset, error=str(exc)
        )
        return records
    decoded_value: RecordValue | None = None
    if value is not None:
        try:
            decoded_value = decode_value(decoded_key, value)
        except GroupRecordError as exc:
            log.warning(
                "skipping group record whose value does not decode",
                key=repr(decoded_key),
                key_hex=key.hex(),
                offset=offset,
                error=str(exc),
            )
            return records
    group_id = decoded_key.group_id
    state = records.groups.get(group_id)
    if state is None:
        if decoded_value is None:
            return records  # a tombstone for an entity nobody holds changes nothing
        state = GroupState(group_id)
    state = replace(_with(state, decoded_key, decoded_value, timestamp_ms), last_offset=offset)
    groups = dict(records.groups)
    if state.is_empty():
        groups.pop(group_id, None)
    else:
        groups[group_id] = state
    return replace(records, groups=_frozen_map(groups))


def changed_records(
    state: GroupState | None, desired: Sequence[tuple[RecordKey, RecordValue | None]]
) -> list[tuple[bytes, bytes | None]]:
    """The encoded records of ``desired`` still worth writing, in order: a value ``state`` already holds
    is dropped (a compacted topic keeps it anyway), and so is a tombstone for an entity ``state`` lacks."""
    out: list[tuple[bytes, bytes | None]] = []
    for key, value in desired:
        held = _held(state, key)
        if value is None:
            if held is not None:
                out.append((encode_key(key), None))
        elif held != value:
            out.append((encode_key(key), encode_value(value)))
    return out
