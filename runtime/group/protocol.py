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
    flags               INT16              kconnect's flags (bit 0: leaving), always written in v3
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

Assignment version 3 has exactly the v1/v2 layout (the static protocol changes who gets what, not how it is
sent), so a Java worker, which reads every assignment with the v1 schema, decodes it too.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from operator import attrgetter

from kconnect.runtime.ids import CONNECTOR_TASK, TaskId

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
    "WorkerState",
    "decode_assignment",
    "decode_metadata",
    "encode_assignment",
    "encode_metadata",
    "join_protocols",
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

#: Protocol names as advertised in JoinGroup.
DEFAULT = "default"
COMPATIBLE = "compatible"
SESSIONED = "sessioned"
STATIC = "static"

_VERSION_BY_NAME: dict[str, int] = {DEFAULT: V0, COMPATIBLE: V1, SESSIONED: V2, STATIC: V3}

# `connect.protocol` value -> protocol names it advertises, most preferred first. A worker offers every
# older protocol too so that a rolling upgrade (or downgrade) keeps one group: the broker picks a name
# that all members list.
_LADDERS: dict[str, tuple[str, ...]] = {
    "eager": (DEFAULT,),
    "compatible": (COMPATIBLE, DEFAULT),
    "sessioned": (SESSIONED, COMPATIBLE, DEFAULT),
    "static": (STATIC, SESSIONED, COMPATIBLE, DEFAULT),
}

#: The `connect.protocol` values this module can speak.
CONNECT_PROTOCOLS: tuple[str, ...] = tuple(_LADDERS)

_KNOWN_VERSIONS = frozenset(_VERSION_BY_NAME.values())
_NULL = -1
_MAX_STRING_BYTES = 0x7FFF  # INT16 length prefix

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I64 = struct.Struct(">q")
_NULL_I32 = _I32.pack(_NULL)
_task_key = attrgetter("connector", "task")


class ProtocolError(ValueError):
    """Bytes from the group that cannot be decoded; the message names the field and its byte offset."""


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


# ---------------------------------------------------------------------------------------------------
# Encoding


def _check_range(value: int, bits: int, what: str) -> int:
    limit = 1 << (bits - 1)
    if not -limit <= value < limit:
        raise ValueError(f"{what} {value} does not fit in a signed {bits}-bit integer")
    return value


def _string(value: str, what: str) -> bytes:
    data = value.encode("utf-8")
    if len(data) > _MAX_STRING_BYTES:
        raise ValueError(
            f"{what} is {len(data)} bytes of UTF-8; the protocol allows at most {_MAX_STRING_BYTES}"
        )
    return _I16.pack(len(data)) + data


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
    parts = [_I32.pack(len(grouped))]
    for name in sorted(grouped):
        numbers = grouped[name]
        parts.append(_string(name, f"{what} connector name"))
        try:
            parts.append(struct.pack(f">i{len(numbers)}i", len(numbers), *numbers))
        except struct.error:
            bad = next(n for n in numbers if not -(1 << 31) <= n < (1 << 31))
            raise ValueError(
                f"{what} task number {bad} of connector {name!r} does not fit in INT32"
            ) from None
    return b"".join(parts)


def _encode_assignment(a: ConnectAssignment, version: int) -> bytes:
    if version not in _KNOWN_VERSIONS:
        raise ValueError(f"cannot encode an assignment of unknown protocol version {version}")
    head = b"".join(
        (
            _I16.pack(version),
            _I16.pack(_check_range(a.error, 16, "error code")),
            _string(a.leader, "leader id"),
            _string(a.leader_url, "leader url"),
            _I64.pack(_check_range(a.config_offset, 64, "config offset")),
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
            _I32.pack(_check_range(a.delay_ms, 32, "scheduled delay")),
        )
    )


def encode_assignment(a: ConnectAssignment) -> bytes:
    """The SyncGroup bytes of ``a`` in its own version (v0: no revoked lists and no delay)."""
    return _encode_assignment(a, a.version)


def _nullable_string(value: str | None, what: str) -> bytes:
    return _I16.pack(_NULL) if value is None else _string(value, what)


def _static_fields(state: WorkerState) -> bytes:
    """The v3 fields after the flags: worker id, static connectors, static tasks (module docstring)."""
    for task in state.static_tasks:
        if task.task < 0:
            raise ValueError(f"static task {task} has a negative task number")
    parts = [_nullable_string(state.worker_id, "worker id"), _I32.pack(len(state.static_connectors))]
    parts += [_string(name, "static connector name") for name in state.static_connectors]
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
            _I16.pack(version),
            _string(state.url, "worker url"),
            _I64.pack(_check_range(state.config_offset, 64, "config offset")),
        )
    )
    if version == V0:
        return head
    flags = FLAG_LEAVING if state.leaving else 0
    # v1/v2: the flags only when set, so that the bytes are Java's; v3: always, the static fields follow.
    tail = _I16.pack(flags) if flags else b""
    if version >= V3:
        tail = _I16.pack(flags) + _static_fields(state)
    if state.allocation is None:
        return head + _NULL_I32 + tail
    allocation = _encode_assignment(state.allocation, version)
    return b"".join((head, _I32.pack(len(allocation)), allocation, tail))


# ---------------------------------------------------------------------------------------------------
# Decoding


class _Reader:
    """A bounds-checked cursor, so that every truncation reports the field and the absolute offset."""

    __slots__ = ("_data", "_end", "_kind", "pos")

    def __init__(self, data: bytes, pos: int, end: int, kind: str) -> None:
        self._data = data
        self.pos = pos
        self._end = end
        self._kind = kind

    def at_end(self) -> bool:
        return self.pos >= self._end

    def remaining(self) -> int:
        return max(0, self._end - self.pos)

    def _need(self, n: int, what: str) -> None:
        left = self._end - self.pos
        if n > left:
            raise ProtocolError(
                f"truncated {self._kind}: reading {what} at byte offset {self.pos} needs {n} bytes, "
                f"only {max(left, 0)} left"
            )

    def skip(self, n: int, what: str) -> int:
        """Step over ``n`` bytes; where they start."""
        self._need(n, what)
        start = self.pos
        self.pos += n
        return start

    def int16(self, what: str) -> int:
        self._need(2, what)
        (v,) = _I16.unpack_from(self._data, self.pos)
        self.pos += 2
        return int(v)

    def int32(self, what: str) -> int:
        self._need(4, what)
        (v,) = _I32.unpack_from(self._data, self.pos)
        self.pos += 4
        return int(v)

    def int64(self, what: str) -> int:
        self._need(8, what)
        (v,) = _I64.unpack_from(self._data, self.pos)
        self.pos += 8
        return int(v)

    def string(self, what: str) -> str:
        at = self.pos
        n = self.int16(f"the length of {what}")
        if n < 0:
            raise ProtocolError(f"invalid {self._kind}: {what} at byte offset {at} has negative length {n}")
        self._need(n, what)
        raw = self._data[self.pos : self.pos + n]
        try:
            value = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ProtocolError(
                f"invalid {self._kind}: {what} at byte offset {at} is not UTF-8: {e}"
            ) from None
        self.pos += n
        return value

    def nullable_string(self, what: str) -> str | None:
        at = self.pos
        n = self.int16(f"the length of {what}")
        if n == _NULL:
            return None
        self.pos = at
        return self.string(what)

    def strings(self, what: str) -> list[str]:
        """An ARRAY of STRING; null reads as empty."""
        at = self.pos
        count = self.int32(f"the {what} count")
        if count == _NULL:
            return []
        if count < 0:
            raise ProtocolError(f"invalid {self._kind}: {what} count at byte offset {at} is {count}")
        self._need(count * 2, f"{count} {what}")  # each is at least its INT16 length
        return [self.string(f"one of the {what}") for _ in range(count)]

    def entries(self, what: str) -> tuple[list[str], list[TaskId]]:
        """A nullable ARRAY of connector entries; null reads as empty, as Java reads it."""
        at = self.pos
        count = self.int32(f"the {what} entry count")
        if count == _NULL:
            return [], []
        if count < 0:
            raise ProtocolError(f"invalid {self._kind}: {what} entry count at byte offset {at} is {count}")
        self._need(count * 6, f"{count} {what} entries")  # each entry is at least INT16 + INT32
        connectors: list[str] = []
        tasks: list[TaskId] = []
        for _ in range(count):
            name = self.string(f"a {what} connector name")
            at = self.pos
            n = self.int32(f"the task count of {what} connector {name!r}")
            if n < 0:
                raise ProtocolError(
                    f"invalid {self._kind}: task count of {what} connector {name!r} "
                    f"at byte offset {at} is {n}"
                )
            self._need(4 * n, f"{n} task numbers of {what} connector {name!r}")
            numbers = struct.unpack_from(f">{n}i", self._data, self.pos)
            self.pos += 4 * n
            for number in numbers:
                if number == CONNECTOR_TASK:
                    connectors.append(name)
                else:
                    tasks.append(TaskId(name, number))
        return connectors, tasks

    def version(self) -> int:
        at = self.pos
        v = self.int16("the version")
        if v < 0:
            raise ProtocolError(f"unsupported {self._kind} version {v} at byte offset {at}")
        return v


def _decode_assignment(r: _Reader) -> ConnectAssignment:
    version = r.version()
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
    if not r.at_end():
        connectors, tasks = r.entries("assigned")
    if not r.at_end():
        revoked_connectors, revoked_tasks = r.entries("revoked")
    if not r.at_end():
        delay = r.int32("the scheduled delay")
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
    )


def decode_assignment(data: bytes) -> ConnectAssignment:
    """Decode SyncGroup assignment bytes of any version >= 0.

    Raises ProtocolError for a negative version or malformed data.
    """
    data = bytes(data)
    return _decode_assignment(_Reader(data, 0, len(data), "assignment"))


def decode_metadata(data: bytes) -> tuple[int, WorkerState]:
    """Decode JoinGroup member metadata of any version >= 0: its version and the worker's state.

    Raises ProtocolError for a negative version or malformed data.
    """
    data = bytes(data)
    r = _Reader(data, 0, len(data), "worker metadata")
    version = r.version()
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
                _Reader(data, start, start + size, "allocation in worker metadata")
            )
    flags = 0
    if version < V3:
        if version >= V1 and r.remaining() >= 2:
            flags = r.int16("kconnect's flags")
        return version, WorkerState(url, config_offset, allocation, leaving=bool(flags & FLAG_LEAVING))
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
        static_connectors = r.strings("static connectors")
    if not r.at_end():
        at = r.pos
        listed, static_tasks = r.entries("static task")
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
        worker_id=worker_id,
        static_connectors=tuple(static_connectors),
        static_tasks=tuple(static_tasks),
    )


# ---------------------------------------------------------------------------------------------------
# Protocol negotiation


def _ladder(connect_protocol: str) -> tuple[str, ...]:
    # Java matches `connect.protocol` case-insensitively (ConnectProtocolCompatibility.compatibility).
    ladder = _LADDERS.get(connect_protocol.lower())
    if ladder is None:
        raise ValueError(
            f"unknown connect.protocol {connect_protocol!r}; expected one of {', '.join(CONNECT_PROTOCOLS)}"
        )
    return ladder


def protocol_names(connect_protocol: str) -> list[str]:
    """The protocol names a worker with this ``connect.protocol`` advertises, most preferred first."""
    return list(_ladder(connect_protocol))


def version_for_protocol(name: str) -> int:
    """The metadata and assignment version that goes with a protocol name the group selected."""
    try:
        return _VERSION_BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown Connect group protocol name {name!r}") from None


def join_protocols(connect_protocol: str, state: WorkerState) -> list[tuple[str, bytes]]:
    """The (name, metadata) pairs of a JoinGroup request, as WorkerCoordinator.metadata() builds them.

    Each name carries the metadata of its own version, so whichever protocol the broker selects, the
    leader reads the layout it expects: a sessioned worker sends v2 metadata under "sessioned", v1 under
    "compatible" (both with its allocation), and plain v0 (url and offset, no allocation) under "default".
    A static worker adds v3 under "static" (with its worker id and static assignment) in front of those.
    """
    return [(name, encode_metadata(state, _VERSION_BY_NAME[name])) for name in _ladder(connect_protocol)]
