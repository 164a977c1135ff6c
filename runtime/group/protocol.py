"""The embedded Connect protocol: member metadata and assignments, byte for byte as Apache Kafka Connect 3.9.

A kconnect worker and a Java worker share one consumer group, so each must read what the other writes:
every layout here was checked against bytes produced by Kafka's own serializers
(``tests/golden/connect_protocol.txt``). The functions are pure; the group client calls them with the
bytes of JoinGroup and SyncGroup.

Facts about the Java side that shape this module (measured on the 3.9.0 classes):

* Java decodes every subscription and assignment through the version-1 schema whatever the header says,
  only rejecting a negative version, and fills fields missing at the end of the buffer with defaults
  (null allocation, null arrays, delay 0). The readers here do the same, so a future version that appends
  fields still decodes, and a v0 body read as v1 loses nothing.
* Java always writes the assigned and revoked arrays (count 0 when empty) and reads a null array (-1) as
  empty. The allocation inside a subscription is null (-1) only before the worker's first assignment.
* A connector entry lists ``-1`` for the connector instance first, then the task numbers. Java orders the
  assigned connectors through a ``HashSet``, so its byte order is not meaningful; this module writes entries
  sorted by connector name, task numbers ascending, so equal assignments always encode to equal bytes.
* The allocation in a v1/v2 subscription carries the subscription's version in its own header, whatever
  version the assignment was received with.

Version 3, protocol name ``static`` (kconnect's KIP-987 static assignments; no Apache Kafka release has it),
appends to the v2 subscription, in Kafka's types (INT16/INT32/INT64 big-endian; STRING = INT16 length +
UTF-8; NULLABLE_STRING = STRING with length -1 for null; NULLABLE_BYTES = INT32 length, -1 null; ARRAY =
INT32 count, read as empty when -1)::

    version             INT16 = 3
    url                 STRING
    config_offset       INT64
    allocation          NULLABLE_BYTES     the worker's current assignment, a v3 assignment (see below)
    --- appended by v3 ---
    flags               INT16              kconnect's flags (bit 0: leaving, bit 1: reconciles, bit 2:
                                           learns), always written in v3
    worker_id           NULLABLE_STRING    ``worker.id``: a stable name, unlike the group member id
    static_connectors   ARRAY of STRING    ``static.connectors``, sorted, unique
    static_tasks        ARRAY of (connector STRING, tasks ARRAY of INT32 >= 0)
                                           ``static.tasks`` grouped by connector like assignment entries
                                           (sorted by name, numbers ascending; no -1 entries)

The flags field sits where v1/v2 metadata carries it when a worker is leaving, right after the
allocation: a reader of v1/v2 (Java, or kconnect before v3) stops after the allocation or, if it knows the
flags, reads them there, and ignores the rest; so the graceful hand-over works whichever of the two
decodes the bytes. In v1/v2 the flags are written only when set (so a worker that is not leaving sends
Java's exact bytes); in v3 always, because fields follow them. A v3 reader defaults every v3 field the
buffer ends before (flags 0, no worker id, empty static assignment), like Java with missing trailing fields,
and ignores bytes after the static tasks (a later version's fields). The static fields travel only under
"static": the same worker's v2/v1/v0 metadata (for "sessioned", "compatible", "default") never carries them,
as the seed wants static assignments ignored unless every member speaks ``static``.

The types are written and read by ``runtime/storage/wire`` (shared with the group records), whose reader
names the field and the byte offset of every fault.

Assignment version 3 has exactly the v1/v2 layout (the static protocol changes who gets what, not how it is
sent), so a Java worker, which reads every assignment with the v1 schema, decodes it too.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from itertools import pairwise
from operator import attrgetter
from typing import Final

from kconnect.runtime.ids import CONNECTOR_TASK, TaskId
from kconnect.runtime.storage import wire
from kconnect.runtime.storage.wire import NULL as _NULL

__all__ = [
    "COMPATIBLE",
    "CONFIG_MISMATCH",
    "CONNECT_PROTOCOLS",
    "DEFAULT",
    "NO_ERROR",
    "SESSIONED",
    "STATIC",
    "V0",
    "V1",
    "V2",
    "V3",
    "ConnectAssignment",
    "ProtocolError",
    "ProtocolName",
    "WorkerState",
    "decode_assignment",
    "decode_metadata",
    "encode_assignment",
    "encode_metadata",
    "join_protocols",
    "parse_protocol_name",
    "protocol_names",
    "version_for_protocol",
]

#: Assignment error codes (``ConnectProtocol.Assignment``). CONFIG_MISMATCH tells members that the leader
#: is behind the group's config offset: read the config topic to the end and rejoin.
NO_ERROR = 0
CONFIG_MISMATCH = 1

#: Protocol versions as carried in the INT16 header of metadata and assignments.
V0 = 0  # eager, protocol name "default"
V1 = 1  # incremental cooperative, "compatible"
V2 = 2  # incremental cooperative with session keys (KIP-507), "sessioned"
V3 = 3  # sessioned plus worker id and static assignment (KIP-987, kconnect's), "static"


class ProtocolName(StrEnum):
    """A protocol name as advertised in JoinGroup and selected by the broker for the whole group.

    Why a type: the selected name decides the metadata and assignment version every member reads and
    writes, and it travels from the member through the herder, the assignor, the group records and the
    metrics; a plain string there could be a ``connect.protocol`` value (``eager``) by mistake. A StrEnum
    so that it compares, hashes, encodes and serializes exactly as the name itself.
    """

    DEFAULT = "default"
    COMPATIBLE = "compatible"
    SESSIONED = "sessioned"
    STATIC = "static"

    @property
    def version(self) -> int:
        """The metadata and assignment version that goes with this name (``V0`` .. ``V3``)."""
        return _VERSION_BY_NAME[self]


#: The protocol names as module constants, for callers that name one protocol.
DEFAULT: Final = ProtocolName.DEFAULT
COMPATIBLE: Final = ProtocolName.COMPATIBLE
SESSIONED: Final = ProtocolName.SESSIONED
STATIC: Final = ProtocolName.STATIC

_VERSION_BY_NAME: dict[ProtocolName, int] = {DEFAULT: V0, COMPATIBLE: V1, SESSIONED: V2, STATIC: V3}

# `connect.protocol` value -> protocol names it advertises, most preferred first. A worker offers every
# older protocol too so that a rolling upgrade (or downgrade) keeps one group: the broker picks a name
# that all members list.
_LADDERS: dict[str, tuple[ProtocolName, ...]] = {
    "eager": (DEFAULT,),
    "compatible": (COMPATIBLE, DEFAULT),
    "sessioned": (SESSIONED, COMPATIBLE, DEFAULT),
    "static": (STATIC, SESSIONED, COMPATIBLE, DEFAULT),
}

#: The `connect.protocol` values this module can speak.
CONNECT_PROTOCOLS: tuple[str, ...] = tuple(_LADDERS)

_KNOWN_VERSIONS = frozenset(_VERSION_BY_NAME.values())
_NULL_I32 = wire.int32(_NULL, "null")
_task_key = attrgetter("connector", "task")


class ProtocolError(ValueError):
    """Bytes or a protocol name from the group that cannot be decoded; for bytes the message names the field
    and its byte offset. A ValueError, so callers that guard a decode catch both."""


def _normalized(items: Iterable[str]) -> tuple[str, ...]:
    # Sorted and unique, so that equality and encoding do not depend on the order Java (a HashSet) or a
    # caller produced. The check first: assignors already build sorted tuples and pay only O(n).
    t = tuple(items)
    if all(a < b for a, b in pairwise(t)):
        return t
    return tuple(sorted(set(t)))


def _normalized_tasks(items: Iterable[TaskId]) -> tuple[TaskId, ...]:
    t = tuple(items)
    keys = [(x.connector, x.task) for x in t]
    if all(a < b for a, b in pairwise(keys)):
        return t
    return tuple(sorted(set(t), key=_task_key))


@dataclass(frozen=True, slots=True)
class ConnectAssignment:
    """One member's share of a generation, as the leader sends it in SyncGroup.

    Under ``compatible``/``sessioned`` (v1/v2) ``connectors`` and ``tasks`` are what is *added* and the
    revoked lists what must stop first; under eager (v0) they are the member's whole share. The collections
    are sets kept as sorted tuples: the wire order carries no meaning and equal assignments must compare
    (and encode) equal.
    """

    version: int
    error: int
    leader: str
    leader_url: str
    config_offset: int
    connectors: tuple[str, ...]
    tasks: tuple[TaskId, ...]
    revoked_connectors: tuple[str, ...] = ()
    revoked_tasks: tuple[TaskId, ...] = ()
    delay_ms: int = 0
    #: kconnect's ``group.protocol=connect``: the leader runs this generation by declarative
    #: reconciliation (``runtime/group/coordinator``), so the assignment moves nothing and members follow
    #: the target assignment in the group records. A trailing flags field (v1+) written only when set:
    #: Java ignores it, and a classic assignment stays byte for byte Java's.
    reconcile: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "connectors", _normalized(self.connectors))
        object.__setattr__(self, "tasks", _normalized_tasks(self.tasks))
        object.__setattr__(self, "revoked_connectors", _normalized(self.revoked_connectors))
        object.__setattr__(self, "revoked_tasks", _normalized_tasks(self.revoked_tasks))

    @property
    def failed(self) -> bool:
        """A failed assignment assigns nothing; the member must catch up on config and rejoin."""
        return self.error != NO_ERROR


@dataclass(frozen=True, slots=True)
class WorkerState:
    """A member's subscription metadata: where to reach it, how far it has read the config topic, and
    (v1+ only) everything it currently runs, which the cooperative assignor needs to revoke work.

    ``allocation`` is None until the worker has received its first assignment.
    """

    url: str
    config_offset: int
    allocation: ConnectAssignment | None = None
    #: kconnect's graceful hand-over: the worker is about to leave and asks the leader to move its work
    #: now rather than treat it as lost. Sent as a trailing flags field (v1+) only when set, so the
    #: metadata of a worker that is not leaving is byte for byte what Java sends; Java ignores it.
    leaving: bool = False
    #: v3 only: ``worker.id``, a name that survives restarts (member ids do not).
    worker_id: str | None = None
    #: v3 only: the worker's static assignment (``static.connectors``, ``static.tasks``), sorted and
    #: unique. Both empty: a wildcard worker.
    static_connectors: tuple[str, ...] = ()
    static_tasks: tuple[TaskId, ...] = ()
    #: ``group.protocol=connect``: the worker can reconcile from the group records, so the leader may run
    #: the group without JoinGroup rounds for configuration changes once every member says so. A bit of
    #: the trailing flags field, written only when set (v1/v2); Java ignores it.
    reconciles: bool = False
    #: Warm-up hand-over (the learner seed, issue 25): the worker can learn a task (prepare it without
    #: touching its records) and activate it when promoted, so the coordinator may give it learners. A
    #: worker that does not say so (Java, an older kconnect, a data plane not yet honouring the learner
    #: actions) gets every moved task the plain way. A bit of the trailing flags field, like ``reconciles``.
    learns: bool = False

    def __post_init__(self) -> None:
        if self.static_connectors:
            object.__setattr__(self, "static_connectors", _normalized(self.static_connectors))
        if self.static_tasks:
            object.__setattr__(self, "static_tasks", _normalized_tasks(self.static_tasks))

    @property
    def is_static(self) -> bool:
        """KIP-987's "static worker": it lists at least one connector or task (existing or not)."""
        return bool(self.static_connectors or self.static_tasks)


#: Bits of kconnect's trailing INT16 flags field in v1+ metadata.
FLAG_LEAVING = 0x0001
FLAG_RECONCILES = 0x0002
FLAG_LEARNS = 0x0004
#: Bits of kconnect's trailing INT16 flags field after the delay of a v1+ assignment.
ASSIGNMENT_FLAG_RECONCILE = 0x0001


# ---------------------------------------------------------------------------------------------------
# Encoding


def _entries(connectors: Sequence[str], tasks: Sequence[TaskId], what: str) -> bytes:
    """An ARRAY of (connector, [task numbers]) entries, -1 standing for the connector itself, as Java groups
    them; sorted by connector so that the bytes are a function of the assignment alone."""
    grouped: dict[str, list[int]] = {name: [CONNECTOR_TASK] for name in connectors}
    for task in tasks:  # sorted by (connector, task), so each entry's numbers come out ascending
        numbers = grouped.get(task.connector)
        if numbers is None:
            grouped[task.connector] = [task.task]
        else:
            numbers.append(task.task)
    parts = [wire.int32(len(grouped), f"the {what} entry count")]
    for name in sorted(grouped):
        parts.append(wire.string(name, f"{what} connector name"))
        parts.append(wire.int32_array(grouped[name], f"{what} task number of connector {name!r}"))
    return b"".join(parts)


def _encode_assignment(a: ConnectAssignment, version: int) -> bytes:
    if version not in _KNOWN_VERSIONS:
        raise ValueError(f"cannot encode an assignment of unknown protocol version {version}")
    head = b"".join(
        (
            wire.int16(version, "version"),
            wire.int16(a.error, "error code"),
            wire.string(a.leader, "leader id"),
            wire.string(a.leader_url, "leader url"),
            wire.int64(a.config_offset, "config offset"),
            _entries(a.connectors, a.tasks, "assigned"),
        )
    )
    if version == V0:
        if a.revoked_connectors or a.revoked_tasks or a.delay_ms:
            # v0 has no field for them; dropping them silently would lose a revocation.
            raise ValueError("a version 0 (eager) assignment cannot carry revocations or a scheduled delay")
        return head
    return b"".join(
        (
            head,
            _entries(a.revoked_connectors, a.revoked_tasks, "revoked"),
            wire.int32(a.delay_ms, "scheduled delay"),
            wire.int16(ASSIGNMENT_FLAG_RECONCILE, "assignment flags") if a.reconcile else b"",
        )
    )


def encode_assignment(a: ConnectAssignment) -> bytes:
    """The SyncGroup bytes of ``a`` in its own version (v0: no revoked lists and no delay)."""
    return _encode_assignment(a, a.version)


def _static_fields(state: WorkerState) -> bytes:
    """The v3 fields after the flags: worker id, static connectors, static tasks (module docstring)."""
    for task in state.static_tasks:
        if task.task < 0:
            raise ValueError(f"static task {task} has a negative task number")
    parts = [
        wire.nullable_string(state.worker_id, "worker id"),
        wire.int32(len(state.static_connectors), "the static connectors count"),
    ]
    parts += [wire.string(name, "static connector name") for name in state.static_connectors]
    parts.append(_entries((), state.static_tasks, "static"))
    return b"".join(parts)


def encode_metadata(state: WorkerState, version: int) -> bytes:
    """The JoinGroup metadata of ``state`` in ``version``.

    v0 has no allocation. For v1+ the allocation is written with the metadata's version in its header
    (as Java does, whatever version the worker received it with), or as a null field when the worker has
    never been assigned anything. v3 appends the flags, the worker id and the static assignment; older
    versions leave the last two out (see the module docstring).
    """
    if version not in _KNOWN_VERSIONS:
        raise ValueError(f"cannot encode metadata of unknown protocol version {version}")
    head = b"".join(
        (
            wire.int16(version, "version"),
            wire.string(state.url, "worker url"),
            wire.int64(state.config_offset, "config offset"),
        )
    )
    if version == V0:
        return head
    flags = (
        (FLAG_LEAVING if state.leaving else 0)
        | (FLAG_RECONCILES if state.reconciles else 0)
        | (FLAG_LEARNS if state.learns else 0)
    )
    # v1/v2: the flags only when set, so that the bytes are Java's; v3: always, the static fields follow.
    tail = wire.int16(flags, "flags") if flags else b""
    if version >= V3:
        tail = wire.int16(flags, "flags") + _static_fields(state)
    if state.allocation is None:
        return head + _NULL_I32 + tail
    allocation = _encode_assignment(state.allocation, version)
    return b"".join((head, wire.int32(len(allocation), "the allocation length"), allocation, tail))


# ---------------------------------------------------------------------------------------------------
# Decoding


def _reader(data: bytes, kind: str, start: int = 0, end: int | None = None) -> wire.Reader:
    return wire.Reader(data, kind, start=start, end=end, error=ProtocolError)


def _strings(r: wire.Reader, what: str) -> list[str]:
    """An ARRAY of STRING; null reads as empty."""
    count = r.array_count(what, 2, what)  # each is at least its INT16 length
    return [r.string(f"one of the {what}") for _ in range(count)]


def _read_entries(r: wire.Reader, what: str) -> tuple[list[str], list[TaskId]]:
    """A nullable ARRAY of connector entries; null reads as empty, as Java reads it."""
    count = r.array_count(f"{what} entry", 6, f"{what} entries")  # each at least INT16 + INT32
    connectors: list[str] = []
    tasks: list[TaskId] = []
    for _ in range(count):
        name = r.string(f"a {what} connector name")
        at = r.pos
        n = r.int32(f"the task count of {what} connector {name!r}")
        if n < 0:
            raise r.fail(f"task count of {what} connector {name!r} at byte offset {at} is {n}")
        for number in r.int32s(n, f"{n} task numbers of {what} connector {name!r}"):
            if number == CONNECTOR_TASK:
                connectors.append(name)
            else:
                tasks.append(TaskId(name, number))
    return connectors, tasks


def _version(r: wire.Reader, kind: str) -> int:
    at = r.pos
    v = r.int16("the version")
    if v < 0:
        raise ProtocolError(f"unsupported {kind} version {v} at byte offset {at}")
    return v


def _decode_assignment(r: wire.Reader, kind: str) -> ConnectAssignment:
    version = _version(r, kind)
    error = r.int16("the error code")
    leader = r.string("the leader id")
    leader_url = r.string("the leader url")
    config_offset = r.int64("the config offset")
    # Like Java, read every version with the v1 layout and default whatever the buffer ends before.
    connectors: list[str] = []
    tasks: list[TaskId] = []
    revoked_connectors: list[str] = []
    revoked_tasks: list[TaskId] = []
    delay = 0
    flags = 0
    if not r.at_end():
        connectors, tasks = _read_entries(r, "assigned")
    if not r.at_end():
        revoked_connectors, revoked_tasks = _read_entries(r, "revoked")
    if not r.at_end():
        delay = r.int32("the scheduled delay")
    if r.remaining() >= 2:
        flags = r.int16("kconnect's assignment flags")
    # Anything after is a newer version's field: ignored.
    return ConnectAssignment(
        version,
        error,
        leader,
        leader_url,
        config_offset,
        tuple(connectors),
        tuple(tasks),
        tuple(revoked_connectors),
        tuple(revoked_tasks),
        delay,
        reconcile=bool(flags & ASSIGNMENT_FLAG_RECONCILE),
    )


def decode_assignment(data: bytes) -> ConnectAssignment:
    """Decode SyncGroup assignment bytes of any version >= 0.

    Raises ProtocolError for a negative version or malformed data.
    """
    data = bytes(data)
    return _decode_assignment(_reader(data, "assignment"), "assignment")


def decode_metadata(data: bytes) -> tuple[int, WorkerState]:
    """Decode JoinGroup member metadata of any version >= 0: its version and the worker's state.

    Raises ProtocolError for a negative version or malformed data.
    """
    data = bytes(data)
    r = _reader(data, "worker metadata")
    version = _version(r, "worker metadata")
    url = r.string("the worker url")
    config_offset = r.int64("the config offset")
    allocation = None
    if not r.at_end():
        at = r.pos
        size = r.int32("the allocation length")
        if size < _NULL:
            raise ProtocolError(f"invalid worker metadata: allocation length at byte offset {at} is {size}")
        if size != _NULL:
            start = r.skip(size, "the allocation")
            allocation = _decode_assignment(
                _reader(data, "allocation in worker metadata", start, start + size),
                "allocation in worker metadata",
            )
    flags = 0
    if version < V3:
        if version >= V1 and r.remaining() >= 2:
            flags = r.int16("kconnect's flags")
        return version, WorkerState(
            url,
            config_offset,
            allocation,
            leaving=bool(flags & FLAG_LEAVING),
            reconciles=bool(flags & FLAG_RECONCILES),
            learns=bool(flags & FLAG_LEARNS),
        )
    # v3: each field the buffer ends before takes its default; anything after the last is a later
    # version's and ignored.
    worker_id: str | None = None
    static_connectors: list[str] = []
    static_tasks: list[TaskId] = []
    if not r.at_end():
        flags = r.int16("kconnect's flags")
    if not r.at_end():
        worker_id = r.nullable_string("the worker id")
    if not r.at_end():
        static_connectors = _strings(r, "static connectors")
    if not r.at_end():
        at = r.pos
        listed, static_tasks = _read_entries(r, "static task")
        bad = [t for t in static_tasks if t.task < 0] + [TaskId(c, CONNECTOR_TASK) for c in listed]
        if bad:
            raise ProtocolError(
                f"invalid worker metadata: the static tasks at byte offset {at} list task number "
                f"{bad[0].task} of connector {bad[0].connector!r}"
            )
    return version, WorkerState(
        url,
        config_offset,
        allocation,
        leaving=bool(flags & FLAG_LEAVING),
        reconciles=bool(flags & FLAG_RECONCILES),
        learns=bool(flags & FLAG_LEARNS),
        worker_id=worker_id,
        static_connectors=tuple(static_connectors),
        static_tasks=tuple(static_tasks),
    )


# ---------------------------------------------------------------------------------------------------
# Protocol negotiation


def _ladder(connect_protocol: str) -> tuple[ProtocolName, ...]:
    # Java matches `connect.protocol` case-insensitively (ConnectProtocolCompatibility.compatibility).
    ladder = _LADDERS.get(connect_protocol.lower())
    if ladder is None:
        raise ValueError(
            f"unknown connect.protocol {connect_protocol!r}; expected one of {', '.join(CONNECT_PROTOCOLS)}"
        )
    return ladder


def protocol_names(connect_protocol: str) -> list[ProtocolName]:
    """The protocol names a worker with this ``connect.protocol`` advertises, most preferred first."""
    return list(_ladder(connect_protocol))


def parse_protocol_name(name: str) -> ProtocolName:
    """The protocol name the group selected, read off the wire (JoinGroup, SyncGroup) or from a caller.

    Matched exactly, as the broker echoes one of the names the members advertised. An unknown name is a
    :class:`ProtocolError` naming it: kconnect cannot tell which version of the metadata and assignment
    goes with it.
    """
    try:
        return ProtocolName(name)
    except ValueError:
        raise ProtocolError(f"unknown Connect group protocol name {name!r}") from None


def version_for_protocol(name: str) -> int:
    """The metadata and assignment version that goes with a protocol name the group selected."""
    return parse_protocol_name(name).version


def join_protocols(connect_protocol: str, state: WorkerState) -> list[tuple[ProtocolName, bytes]]:
    """The (name, metadata) pairs of a JoinGroup request, as WorkerCoordinator.metadata() builds them.

    Each name carries the metadata of its own version, so whichever protocol the broker selects, the
    leader reads the layout it expects: a sessioned worker sends v2 metadata under "sessioned", v1 under
    "compatible" (both with its allocation), and plain v0 (url and offset, no allocation) under "default".
    A static worker adds v3 under "static" (with its worker id and static assignment) in front of those.
    """
    return [(name, encode_metadata(state, name.version)) for name in _ladder(connect_protocol)]
