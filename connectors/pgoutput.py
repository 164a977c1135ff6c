"""PostgreSQL's ``pgoutput`` logical replication messages (protocol version 1), decoded into dataclasses.

Why decode ourselves: ``pgoutput`` is the plugin built into every PostgreSQL since 10 (nothing to install
on the server, unlike wal2json or decoderbufs), and psycopg2 hands its messages over as raw bytes. The
format is PostgreSQL's "Logical Replication Message Formats" chapter: a one-byte tag, then big-endian
Int8/16/32/64 fields, NUL-terminated strings, and tuple data whose columns are ``n`` (null), ``u``
(an unchanged TOASTed value, not sent) or ``t`` (the value as text, Int32 length first).

Pure: bytes in, a message out; :class:`PgOutputError` names what is wrong with a malformed message
(tests/unit/test_pgoutput.py holds a table of encoded messages).
"""

from __future__ import annotations

import datetime as dt
import struct
from dataclasses import dataclass
from typing import Final

#: PostgreSQL's epoch (2000-01-01) in microseconds after the Unix epoch: replication timestamps count from it.
PG_EPOCH_US: Final = 946_684_800_000_000


class PgOutputError(ValueError):
    """A message that is not valid ``pgoutput``: truncated, an unknown tag or tuple kind."""


@dataclass(frozen=True)
class Begin:
    final_lsn: int  # the LSN of the transaction's commit record
    commit_time_us: int  # Unix epoch microseconds
    xid: int


@dataclass(frozen=True)
class Commit:
    flags: int
    commit_lsn: int
    end_lsn: int
    commit_time_us: int


@dataclass(frozen=True)
class Origin:
    lsn: int
    name: str


@dataclass(frozen=True)
class RelationColumn:
    key: bool  # part of the replica identity (the primary key by default)
    name: str
    type_oid: int
    type_modifier: int


@dataclass(frozen=True)
class Relation:
    oid: int
    namespace: str
    name: str
    replica_identity: str  # d default, n nothing, f full, i index
    columns: tuple[RelationColumn, ...]


@dataclass(frozen=True)
class TypeMessage:
    oid: int
    namespace: str
    name: str


#: One column of a tuple: None for null, UNCHANGED for an unchanged TOASTed value, else its text.
class _Unchanged:
    __slots__ = ()

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED: Final = _Unchanged()
ColumnValue = str | None | _Unchanged


@dataclass(frozen=True)
class Insert:
    relation: int
    new: tuple[ColumnValue, ...]


@dataclass(frozen=True)
class Update:
    relation: int
    #: The old row: its key columns (``K``, replica identity default/index with a changed key) or the whole
    #: row (``O``, replica identity full); None when the server sent neither.
    old: tuple[ColumnValue, ...] | None
    old_kind: str | None
    new: tuple[ColumnValue, ...]


@dataclass(frozen=True)
class Delete:
    relation: int
    old: tuple[ColumnValue, ...]
    old_kind: str  # K (key columns) or O (the whole row)


@dataclass(frozen=True)
class Truncate:
    options: int
    relations: tuple[int, ...]


@dataclass(frozen=True)
class LogicalMessage:
    transactional: bool
    lsn: int
    prefix: str
    content: bytes


Message = (
    Begin | Commit | Origin | Relation | TypeMessage | Insert | Update | Delete | Truncate | LogicalMessage
)


class _Reader:
    """A cursor over one message's bytes; every read checks the length so truncation is named."""

    __slots__ = ("data", "pos")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def take(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.data):
            raise PgOutputError(f"message truncated: needs {end} bytes, has {len(self.data)}")
        chunk = self.data[self.pos : end]
        self.pos = end
        return chunk

    def int8(self) -> int:
        return self.take(1)[0]

    def int16(self) -> int:
        value: int = struct.unpack(">h", self.take(2))[0]
        return value

    def int32(self) -> int:
        value: int = struct.unpack(">i", self.take(4))[0]
        return value

    def uint32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def int64(self) -> int:
        value: int = struct.unpack(">q", self.take(8))[0]
        return value

    def uint64(self) -> int:
        value: int = struct.unpack(">Q", self.take(8))[0]
        return value

    def string(self) -> str:
        end = self.data.find(b"\x00", self.pos)
        if end < 0:
            raise PgOutputError("message truncated: a string has no terminating NUL")
        text = self.data[self.pos : end].decode("utf-8")
        self.pos = end + 1
        return text

    def timestamp_us(self) -> int:
        return self.int64() + PG_EPOCH_US

    def tuple_data(self) -> tuple[ColumnValue, ...]:
        count = self.int16()
        values: list[ColumnValue] = []
        for _ in range(count):
            kind = chr(self.int8())
            if kind == "n":
                values.append(None)
            elif kind == "u":
                values.append(UNCHANGED)
            elif kind == "t":
                length = self.int32()
                values.append(self.take(length).decode("utf-8"))
            elif kind == "b":
                raise PgOutputError("binary tuple data is not requested by this client and cannot be decoded")
            else:
                raise PgOutputError(f"unknown tuple column kind {kind!r}")
        return tuple(values)


def decode(data: bytes) -> Message:
    """One ``pgoutput`` message (protocol version 1); PgOutputError for anything else."""
    try:
        return _decode(data)
    except UnicodeDecodeError as exc:
        raise PgOutputError(f"a name or value is not UTF-8: {exc}") from exc


def _decode(data: bytes) -> Message:
    if not data:
        raise PgOutputError("empty message")
    reader = _Reader(bytes(data))
    tag = chr(reader.int8())
    message: Message
    if tag == "B":
        message = Begin(reader.uint64(), reader.timestamp_us(), reader.uint32())
    elif tag == "C":
        message = Commit(reader.int8(), reader.uint64(), reader.uint64(), reader.timestamp_us())
    elif tag == "O":
        message = Origin(reader.uint64(), reader.string())
    elif tag == "R":
        oid = reader.uint32()
        namespace = reader.string() or "pg_catalog"
        name = reader.string()
        identity = chr(reader.int8())
        columns = []
        for _ in range(reader.int16()):
            flags = reader.int8()
            columns.append(RelationColumn(bool(flags & 1), reader.string(), reader.uint32(), reader.int32()))
        message = Relation(oid, namespace, name, identity, tuple(columns))
    elif tag == "Y":
        message = TypeMessage(reader.uint32(), reader.string(), reader.string())
    elif tag == "I":
        relation = reader.uint32()
        _expect(reader, "N")
        message = Insert(relation, reader.tuple_data())
    elif tag == "U":
        relation = reader.uint32()
        kind = chr(reader.int8())
        old: tuple[ColumnValue, ...] | None = None
        old_kind: str | None = None
        if kind in ("K", "O"):
            old, old_kind = reader.tuple_data(), kind
            kind = chr(reader.int8())
        if kind != "N":
            raise PgOutputError(f"an Update has {kind!r} where the new tuple's N belongs")
        message = Update(relation, old, old_kind, reader.tuple_data())
    elif tag == "D":
        relation = reader.uint32()
        kind = chr(reader.int8())
        if kind not in ("K", "O"):
            raise PgOutputError(f"a Delete has {kind!r} where K or O belongs")
        message = Delete(relation, reader.tuple_data(), kind)
    elif tag == "T":
        count = reader.uint32()
        options = reader.int8()
        message = Truncate(options, tuple(reader.uint32() for _ in range(count)))
    elif tag == "M":
        transactional = bool(reader.int8() & 1)
        lsn = reader.uint64()
        prefix = reader.string()
        message = LogicalMessage(transactional, lsn, prefix, reader.take(reader.int32()))
    else:
        raise PgOutputError(f"unknown pgoutput message tag {tag!r}")
    if reader.pos != len(reader.data):
        raise PgOutputError(
            f"{len(reader.data) - reader.pos} trailing bytes after a {type(message).__name__}"
        )
    return message


def _expect(reader: _Reader, kind: str) -> None:
    found = chr(reader.int8())
    if found != kind:
        raise PgOutputError(f"expected tuple marker {kind!r}, found {found!r}")


def lsn_text(lsn: int) -> str:
    """An LSN as PostgreSQL writes it, ``16/B374D848``."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """``16/B374D848`` as an integer; PgOutputError otherwise."""
    high, sep, low = text.partition("/")
    try:
        if not sep:
            raise ValueError(text)
        return (int(high, 16) << 32) | int(low, 16)
    except ValueError as exc:
        raise PgOutputError(f"not an LSN: {text!r}") from exc


def from_us(us: int) -> dt.datetime:
    """Unix epoch microseconds as an aware UTC datetime."""
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)
