"""The KIP-848 seed's compacted group records on the wire: keys and values to bytes and back.

A Connect group on the seed's new rebalance protocol is stored as compacted records in the
group-records topic (``group.records.storage.topic``): one record per group-level entity (epoch,
connectors and tasks, target assignment, configuration) and one per member (metadata, current
assignment). Compaction keeps the latest value per key, so every entity needs a key of its own, and a
member that leaves is deleted with a tombstone. This module is pure: bytes in, frozen values
(``group_record_types``) out; the fold that the worker's read-to-end log and ``kconnect group describe``
both feed record by record is ``group_records``'.

Encoding, as Apache Kafka encodes its own coordinator records in ``__consumer_offsets``
(``MessageUtil.toVersionPrefixedByteBuffer``: an INT16 version, then the message written at that
version):

* KEY = INT16 record type, which Kafka calls the key version (3..8 here; the seed notes that Connect's
  existing internal keys already use 0..2), then the key's fields in the classic encoding, as the key
  schemas have ``flexibleVersions: "none"``: STRING = INT16 length + UTF-8.
* VALUE = INT16 version (0), then the fields in the flexible encoding (``flexibleVersions: "0+"``):
  INT8/INT16/INT32 big-endian; compact STRING/BYTES = UNSIGNED_VARINT (length + 1) then the bytes;
  compact ARRAY = UNSIGNED_VARINT (count + 1) then the elements; and a tagged-fields section
  (UNSIGNED_VARINT count, then per field UNSIGNED_VARINT tag, UNSIGNED_VARINT size, bytes) closing every
  struct: each array element that is a struct, and the value itself. Writers emit no tagged fields;
  readers skip any they find, so a later minor revision may add some without breaking older readers.
  None of the seed's fields is nullable, so a null (zero) length or count is rejected.
* A tombstone (null value) deletes the entity: per member for types 5 and 7, the group-level field for
  the others.

Where the seed is broken, kconnect decides:

* ``ConnectorsTasks`` is declared recursively in the seed (its ``Tasks`` is again ``[]ConnectorsTasks``),
  which no schema can encode. kconnect's resolution::

      ConnectorsTasks: [] { Connectors: []string, Tasks: [] { Connector: string, TaskIds: []int32 } }

  Writers emit exactly one element (connectors sorted; one ``Tasks`` entry per connector that has
  tasks, sorted by name, task ids ascending), so that equal assignments encode to equal bytes; readers
  take the union of all elements, so a writer that splits a large assignment stays readable.
* TargetAssignment's bracket nesting is broken: ``Version`` and ``Metadata`` belong to each member
  entry, beside ``MemberId``, ``Error`` and ``ConnectorsTasks``.
* The seed's TargetAssignment key lists its field under version 5; the key's version is 6.

Learners (the learner seed's warm-up hand-over, issue 25) travel in tagged fields, so that records written
without them (by an older kconnect, or with warm-up off) decode unchanged, an older reader skips them, and
a record without learners encodes to exactly the bytes it had before: tag 0 of each target member entry
(the tasks the coordinator asks that member to learn) and tag 0 of the current-assignment value (the
tasks the member learns, with its readiness). Both hold the same array::

    Learners: [] { Connector: string, TaskId: int32, IsLearner: bool, IsReady: bool, SinceMs: int64 }

``IsLearner``/``IsReady`` are the seed's tags. Writers set ``IsLearner`` on every entry; a reader skips an
entry without it (the seed's other use of the tag, marking an active owner's task as "being learned",
which kconnect does not write, so a later writer may). ``SinceMs`` is the coordinator's clock when it
first asked for that learner: it names the learner (a member's readiness counts only for the learner the
target asks for) and starts its warm-up deadline, so a new leader resumes the same deadline. A learners
field that does not decode is skipped with a warning and the rest of the record kept: losing a learner
costs a warm-up, never a task.

Homes (a rolling restart's work going back to the worker that ran it, issue 34) travel in tag 1 of the
target value itself, the same way (absent when there are none, so such a record's bytes are unchanged)::

    Homes: [] { Identity: string, ConnectorsTasks: [] ConnectorsTasks }

A homes field that does not decode is skipped with a warning: losing it costs extra moves, never a task.

Kafka's types themselves are ``runtime/storage/wire``'s; what a person reads of the folded state (``GET
/group``, ``kconnect group describe``) is ``group_view``'s.

The golden bytes in ``tests/golden/group_records.txt`` were written by Kafka's own serialization
library (``tests/golden/GoldenGroupRecords.java``) from these schemas.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from kconnect.runtime import logs
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
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import wire

__all__ = [
    "TAG_HOMES",
    "TAG_LEARNERS",
    "VALUE_VERSION",
    "GroupRecordError",
    "decode_key",
    "decode_value",
    "encode_key",
    "encode_value",
    "partition_for",
]

log = logs.get(__name__)

#: The only value version the seed defines; a later one is skipped by readers that do not know it.
VALUE_VERSION = 0
#: The tagged field holding learners, in a target member entry and in a current-assignment value.
TAG_LEARNERS = 0
#: The tagged field of a target value holding the homes of workers that left gracefully.
TAG_HOMES = 1


class GroupRecordError(ValueError):
    """A group record that cannot be encoded or decoded; the message names the field and the problem."""


# ---------------------------------------------------------------------------------------------------
# Encoding


def _connectors_tasks(assigned: Assigned, what: str) -> bytes:
    """One ConnectorsTasks element (see the module docstring), as a compact array of one."""
    by_connector: dict[str, list[int]] = {}
    for t in assigned.tasks:
        by_connector.setdefault(t.connector, []).append(t.task)
    connectors = wire.compact_array(
        [wire.compact_string(c, f"{what} connector name") for c in sorted(assigned.connectors)]
    )
    tasks = wire.compact_array(
        [
            wire.compact_string(name, f"{what} task connector name")
            + wire.compact_array([wire.int32(n, f"{what} task id of {name!r}") for n in sorted(ids)])
            + wire.NO_TAGS
            for name, ids in sorted(by_connector.items())
        ]
    )
    return wire.compact_array([connectors + tasks + wire.NO_TAGS])


def _learners(learners: frozenset[Learner], what: str) -> bytes:
    """A tagged-fields section: empty without learners (the bytes of a record that has none are unchanged),
    else tag 0 holding the learners array, sorted by task so that equal sets encode equal."""
    if not learners:
        return wire.NO_TAGS
    entries = wire.compact_array(
        [
            wire.compact_string(x.task.connector, f"{what} learner connector name")
            + wire.int32(x.task.task, f"{what} learner task id of {x.task.connector!r}")
            + wire.int8(1, "IsLearner")
            + wire.int8(1 if x.ready else 0, "IsReady")
            + wire.int64(x.since_ms, f"{what} learner since_ms of {x.task}")
            + wire.NO_TAGS
            for x in sorted(learners, key=lambda x: (x.task, x.since_ms, x.ready))
        ]
    )
    return wire.uvarint(1) + wire.uvarint(TAG_LEARNERS) + wire.uvarint(len(entries)) + entries


def _homes(homes: tuple[Home, ...]) -> bytes:
    """The target value's tag section: empty without homes, else tag 1 holding them (already sorted)."""
    if not homes:
        return wire.NO_TAGS
    entries = wire.compact_array(
        [
            wire.compact_string(h.identity, "home identity")
            + _connectors_tasks(h.assigned, f"home of {h.identity!r}")
            + wire.NO_TAGS
            for h in homes
        ]
    )
    return wire.uvarint(1) + wire.uvarint(TAG_HOMES) + wire.uvarint(len(entries)) + entries


def encode_key(key: RecordKey) -> bytes:
    """The record key: INT16 record type, then the key's STRING fields (classic encoding)."""
    version = KEY_VERSIONS.get(type(key))
    if version is None:
        raise GroupRecordError(f"not a group record key: {key!r}")
    try:
        parts = [wire.int16(version, "key version")]
        parts += [wire.string(getattr(key, n), n) for n in ("group_id", "member_id") if hasattr(key, n)]
    except wire.WireError as exc:
        raise GroupRecordError(str(exc)) from None
    return b"".join(parts)


def _encode_body(value: RecordValue) -> bytes:
    if isinstance(value, GroupMetadataValue):
        return wire.int32(value.epoch, "epoch")
    if isinstance(value, ConnectorsTasksValue):
        return wire.int32(value.epoch, "epoch") + _connectors_tasks(value.assigned, "ConnectorsTasks")
    if isinstance(value, MemberMetadataValue):
        assignors = [
            wire.compact_string(a.name, "assignor name")
            + wire.int16(a.minimum_version, f"minimum_version of assignor {a.name!r}")
            + wire.int16(a.maximum_version, f"maximum_version of assignor {a.name!r}")
            + wire.int8(a.reason, f"reason of assignor {a.name!r}")
            + wire.int16(a.version, f"version of assignor {a.name!r}")
            + wire.compact_bytes(a.metadata, f"metadata of assignor {a.name!r}")
            + wire.NO_TAGS
            for a in value.assignors
        ]
        return b"".join(
            (
                wire.int32(value.group_epoch, "group_epoch"),
                wire.compact_string(value.instance_id, "instance_id"),
                wire.compact_string(value.client_id, "client_id"),
                wire.compact_string(value.client_host, "client_host"),
                wire.compact_array(
                    [wire.compact_string(t, "subscribed topic name") for t in value.subscribed_topic_names]
                ),
                wire.compact_string(value.subscribed_topic_regex, "subscribed_topic_regex"),
                wire.compact_array(assignors),
            )
        )
    if isinstance(value, TargetAssignmentValue):
        members = [
            wire.compact_string(m.member_id, "target member id")
            + wire.int8(m.error, f"error of target member {m.member_id!r}")
            + _connectors_tasks(m.assigned, f"target of member {m.member_id!r}")
            + wire.int16(m.version, f"version of target member {m.member_id!r}")
            + wire.compact_bytes(m.metadata, f"metadata of target member {m.member_id!r}")
            + _learners(m.learners, f"target member {m.member_id!r}")
            for m in value.members
        ]
        return wire.int32(value.assignment_epoch, "assignment_epoch") + wire.compact_array(members)
    if isinstance(value, CurrentMemberAssignmentValue):
        return b"".join(
            (
                wire.int32(value.member_epoch, "member_epoch"),
                wire.int8(value.error, "error"),
                _connectors_tasks(value.assigned, "current assignment"),
                wire.int16(value.version, "version"),
                wire.compact_bytes(value.metadata, "metadata"),
            )
        )
    if isinstance(value, GroupConfigurationValue):
        return wire.compact_array(
            [
                wire.compact_string(name, "configuration name")
                + wire.compact_string(v, f"value of configuration {name!r}")
                + wire.NO_TAGS
                for name, v in value.configurations
            ]
        )
    raise GroupRecordError(f"not a group record value: {value!r}")


def encode_value(value: RecordValue) -> bytes:
    """The record value: INT16 version 0, the fields in the flexible encoding, then its tag section (empty
    but for a current assignment's learners)."""
    try:
        if isinstance(value, CurrentMemberAssignmentValue):
            tags = _learners(value.learners, "current assignment")
        elif isinstance(value, TargetAssignmentValue):
            tags = _homes(value.homes)
        else:
            tags = wire.NO_TAGS
        return wire.int16(VALUE_VERSION, "value version") + _encode_body(value) + tags
    except wire.WireError as exc:
        raise GroupRecordError(str(exc)) from None


# ---------------------------------------------------------------------------------------------------
# Decoding


def _reader(data: bytes, kind: str) -> wire.Reader:
    return wire.Reader(bytes(data), kind, error=GroupRecordError, reading=False)


def _read_assigned(r: wire.Reader, what: str) -> Assigned:
    connectors: set[str] = set()
    tasks: set[TaskId] = set()
    for _ in range(r.compact_count(f"{what} ConnectorsTasks", 3)):
        for _ in range(r.compact_count(f"{what} connectors", 1)):
            connectors.add(r.compact_string(f"a {what} connector name"))
        for _ in range(r.compact_count(f"{what} tasks", 3)):
            name = r.compact_string(f"a {what} task connector name")
            for _ in range(r.compact_count(f"task ids of {what} connector {name!r}", 4)):
                tasks.add(TaskId(name, r.int32(f"a task id of {what} connector {name!r}")))
            r.tags(f"a {what} task entry")
        r.tags(f"a {what} ConnectorsTasks element")
    return Assigned(frozenset(connectors), frozenset(tasks))


def _tagged(r: wire.Reader, where: str) -> dict[int, bytes]:
    """A TAGGED_FIELDS section as tag -> bytes (a tag seen twice: the last), for the fields this reader
    knows; unknown ones are stepped over like ``wire.Reader.tags`` does."""
    fields: dict[int, bytes] = {}
    for _ in range(r.uvarint(f"the tagged-field count of {where}")):
        tag = r.uvarint(f"a tag of {where}")
        size = r.uvarint(f"the size of tag {tag} of {where}")
        fields[tag] = r.take(size, f"tag {tag} of {where}")
    return fields


def _read_learners(fields: Mapping[int, bytes], where: str) -> frozenset[Learner]:
    """The learners in tag 0 of a tag section; a field that does not decode is skipped with a warning (the
    record's other fields stand: a lost learner costs a warm-up, never a task)."""
    data = fields.get(TAG_LEARNERS)
    if data is None:
        return frozenset()
    r = _reader(data, f"learners of {where}")
    try:
        learners: list[Learner] = []
        for _ in range(r.compact_count("learners", 16)):
            name = r.compact_string("a learner connector name")
            task = TaskId(name, r.int32(f"a learner task id of connector {name!r}"))
            is_learner = r.int8(f"IsLearner of {task}") != 0
            ready = r.int8(f"IsReady of {task}") != 0
            since_ms = r.int64(f"SinceMs of {task}")
            r.tags(f"learner {task}")
            if is_learner:
                learners.append(Learner(task, ready, since_ms))
        r.end()
    except GroupRecordError as exc:
        log.warning("skipping learners that do not decode", where=where, error=str(exc))
        return frozenset()
    return frozenset(learners)


def _read_homes(fields: Mapping[int, bytes]) -> tuple[Home, ...]:
    """The homes in tag 1 of a target value; a field that does not decode is skipped with a warning."""
    data = fields.get(TAG_HOMES)
    if data is None:
        return ()
    r = _reader(data, "homes of the target")
    try:
        homes = []
        for _ in range(r.compact_count("homes", 3)):
            identity = r.compact_string("a home identity")
            homes.append(Home(identity, _read_assigned(r, f"home of {identity!r}")))
            r.tags(f"home {identity!r}")
        r.end()
    except GroupRecordError as exc:
        log.warning("skipping homes that do not decode", error=str(exc))
        return ()
    return tuple(homes)


def decode_key(data: bytes) -> RecordKey:
    """Decode a record key; raises GroupRecordError for an unknown key version or malformed bytes."""
    r = _reader(data, "group record key")
    version = r.int16("the key version")
    key: RecordKey
    if version == 3:
        key = GroupMetadataKey(r.string("the group id"))
    elif version == 4:
        key = ConnectorsTasksKey(r.string("the group id"))
    elif version == 5:
        key = MemberMetadataKey(r.string("the group id"), r.string("the member id"))
    elif version == 6:
        key = TargetAssignmentKey(r.string("the group id"))
    elif version == 7:
        key = CurrentMemberAssignmentKey(r.string("the group id"), r.string("the member id"))
    elif version == 8:
        key = GroupConfigurationKey(r.string("the group id"))
    else:
        raise GroupRecordError(f"unknown group record key version {version} (known: 3 to 8)")
    r.end()
    return key


def _decode_body(key: RecordKey, r: wire.Reader) -> RecordValue:
    if isinstance(key, GroupMetadataKey):
        return GroupMetadataValue(r.int32("the epoch"))
    if isinstance(key, ConnectorsTasksKey):
        return ConnectorsTasksValue(r.int32("the epoch"), _read_assigned(r, "group"))
    if isinstance(key, MemberMetadataKey):
        group_epoch = r.int32("the group epoch")
        instance_id = r.compact_string("the instance id")
        client_id = r.compact_string("the client id")
        client_host = r.compact_string("the client host")
        topics = tuple(
            r.compact_string("a subscribed topic name")
            for _ in range(r.compact_count("subscribed topic names", 1))
        )
        regex = r.compact_string("the subscribed topic regex")
        assignors = []
        for _ in range(r.compact_count("assignors", 10)):
            name = r.compact_string("an assignor name")
            assignors.append(
                Assignor(
                    name,
                    r.int16(f"the minimum version of assignor {name!r}"),
                    r.int16(f"the maximum version of assignor {name!r}"),
                    r.int8(f"the reason of assignor {name!r}"),
                    r.int16(f"the version of assignor {name!r}"),
                    r.compact_bytes(f"the metadata of assignor {name!r}"),
                )
            )
            r.tags(f"assignor {name!r}")
        return MemberMetadataValue(
            group_epoch, instance_id, client_id, client_host, topics, regex, tuple(assignors)
        )
    if isinstance(key, TargetAssignmentKey):
        epoch = r.int32("the assignment epoch")
        members = []
        for _ in range(r.compact_count("target members", 7)):
            member_id = r.compact_string("a target member id")
            error = r.int8(f"the error of target member {member_id!r}")
            target_share = _read_assigned(r, f"target member {member_id!r}")
            version = r.int16(f"the version of target member {member_id!r}")
            metadata = r.compact_bytes(f"the metadata of target member {member_id!r}")
            where = f"target member {member_id!r}"
            learners = _read_learners(_tagged(r, where), where)
            members.append(TargetMember(member_id, error, target_share, version, metadata, learners))
        # The value's own tag section (read by decode_value for every other type) holds its homes.
        return TargetAssignmentValue(epoch, tuple(members), _read_homes(_tagged(r, "the value")))
    if isinstance(key, CurrentMemberAssignmentKey):
        # The value's own tag section (read by decode_value for every other type) holds its learners.
        epoch = r.int32("the member epoch")
        error = r.int8("the error")
        current = _read_assigned(r, "current")
        version = r.int16("the version")
        metadata = r.compact_bytes("the metadata")
        where = f"the current assignment of member {key.member_id!r}"
        learners = _read_learners(_tagged(r, "the value"), where)
        return CurrentMemberAssignmentValue(epoch, error, current, version, metadata, learners)
    if isinstance(key, GroupConfigurationKey):
        configurations = []
        for _ in range(r.compact_count("configurations", 3)):
            name = r.compact_string("a configuration name")
            configurations.append((name, r.compact_string(f"the value of configuration {name!r}")))
            r.tags(f"configuration {name!r}")
        return GroupConfigurationValue(tuple(configurations))
    raise GroupRecordError(f"not a group record key: {key!r}")


def decode_value(key: RecordKey, data: bytes) -> RecordValue:
    """Decode the value of the record ``key`` names; raises GroupRecordError for an unknown value version
    or malformed bytes (truncated, trailing bytes, null where the field is not nullable, bad UTF-8)."""
    r = _reader(data, f"value of {type(key).__name__}")
    version = r.int16("the value version")
    if version != VALUE_VERSION:
        raise GroupRecordError(
            f"unknown value version {version} for {type(key).__name__} (known: {VALUE_VERSION})"
        )
    value = _decode_body(key, r)
    if not isinstance(key, CurrentMemberAssignmentKey | TargetAssignmentKey):  # these read their own
        r.tags("the value")
    r.end()
    return value


def partition_for(group_id: str, partitions: int) -> int:
    """The partition that holds all of ``group_id``'s records: Kafka's coordinator placement,
    ``Utils.abs(groupId.hashCode()) % partitions`` (Java's String.hashCode over UTF-16 code units;
    ``Utils.abs`` maps Integer.MIN_VALUE to 0), so one partition's reader sees a whole group."""
    if partitions <= 0:
        raise ValueError(f"partitions must be positive, got {partitions}")
    units = group_id.encode("utf-16-be", "surrogatepass")
    h = 0
    for (unit,) in struct.iter_unpack(">H", units):
        h = (31 * h + unit) & 0xFFFFFFFF
    if h >= 0x80000000:
        h -= 0x100000000
    return (0 if h == -0x80000000 else abs(h)) % partitions
