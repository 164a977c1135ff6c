"""pgoutput's message decoder (connectors/pgoutput.py): a table of encoded messages and what they decode
to, truncated and malformed messages refused with what is wrong, and LSN texts. The expected bytes are
written out per PostgreSQL's "Logical Replication Message Formats" (protocol version 1)."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.connectors.pgoutput import (
    PG_EPOCH_US,
    UNCHANGED,
    Begin,
    Commit,
    Delete,
    Insert,
    LogicalMessage,
    Message,
    Origin,
    PgOutputError,
    Relation,
    RelationColumn,
    Truncate,
    TypeMessage,
    Update,
    decode,
    lsn_text,
    parse_lsn,
)


def s(text: str) -> bytes:
    return text.encode() + b"\x00"


def tup(*values: str | object | None) -> bytes:
    out = struct.pack(">h", len(values))
    for v in values:
        if v is None:
            out += b"n"
        elif v is UNCHANGED:
            out += b"u"
        else:
            data = str(v).encode()
            out += b"t" + struct.pack(">i", len(data)) + data
    return out


TS = 817_000_000_000  # microseconds after 2000-01-01

CASES: list[tuple[bytes, Message]] = [
    (b"B" + struct.pack(">QqI", 0x16B374D848, TS, 731), Begin(0x16B374D848, TS + PG_EPOCH_US, 731)),
    (b"C" + struct.pack(">bQQq", 0, 10, 20, TS), Commit(0, 10, 20, TS + PG_EPOCH_US)),
    (b"O" + struct.pack(">Q", 5) + s("node"), Origin(5, "node")),
    (
        b"R"
        + struct.pack(">I", 16384)
        + s("public")
        + s("orders")
        + b"d"
        + struct.pack(">h", 2)
        + b"\x01"
        + s("id")
        + struct.pack(">Ii", 23, -1)
        + b"\x00"
        + s("price")
        + struct.pack(">Ii", 1700, (10 << 16 | 2) + 4),
        Relation(
            16384,
            "public",
            "orders",
            "d",
            (RelationColumn(True, "id", 23, -1), RelationColumn(False, "price", 1700, (10 << 16 | 2) + 4)),
        ),
    ),
    (b"Y" + struct.pack(">I", 70000) + s("public") + s("mood"), TypeMessage(70000, "public", "mood")),
    (b"I" + struct.pack(">I", 16384) + b"N" + tup("1", None, "héllo"), Insert(16384, ("1", None, "héllo"))),
    (b"U" + struct.pack(">I", 1) + b"N" + tup("1", UNCHANGED), Update(1, None, None, ("1", UNCHANGED))),
    (
        b"U" + struct.pack(">I", 1) + b"K" + tup("1") + b"N" + tup("2", "x"),
        Update(1, ("1",), "K", ("2", "x")),
    ),
    (
        b"U" + struct.pack(">I", 1) + b"O" + tup("1", "a") + b"N" + tup("1", "b"),
        Update(1, ("1", "a"), "O", ("1", "b")),
    ),
    (b"D" + struct.pack(">I", 1) + b"K" + tup("7", None), Delete(1, ("7", None), "K")),
    (b"D" + struct.pack(">I", 1) + b"O" + tup("7", "x"), Delete(1, ("7", "x"), "O")),
    (b"T" + struct.pack(">Ib", 2, 1) + struct.pack(">II", 5, 6), Truncate(1, (5, 6))),
    (
        b"M" + b"\x01" + struct.pack(">Q", 9) + s("kc") + struct.pack(">i", 2) + b"hi",
        LogicalMessage(True, 9, "kc", b"hi"),
    ),
]


@pytest.mark.parametrize(("data", "message"), CASES)
def test_messages_decode(data: bytes, message: Message) -> None:
    assert decode(data) == message


@pytest.mark.parametrize(("data", "_message"), CASES)
def test_every_truncation_is_refused(data: bytes, _message: Message) -> None:
    for cut in range(len(data)):
        with pytest.raises(PgOutputError):
            decode(data[:cut])


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"Z", "unknown pgoutput message tag 'Z'"),
        (b"I" + struct.pack(">I", 1) + b"X" + tup("1"), "expected tuple marker 'N'"),
        (b"I" + struct.pack(">I", 1) + b"N" + struct.pack(">h", 1) + b"q", "unknown tuple column kind 'q'"),
        (b"D" + struct.pack(">I", 1) + b"N" + tup("1"), "a Delete has 'N'"),
        (b"B" + struct.pack(">QqI", 1, 2, 3) + b"!", "1 trailing bytes after a Begin"),
    ],
)
def test_malformed_messages_say_what_is_wrong(data: bytes, message: str) -> None:
    with pytest.raises(PgOutputError, match=message.replace("(", r"\(")):
        decode(data)


@given(st.integers(0, 2**64 - 1))
def test_lsn_text_round_trips(lsn: int) -> None:
    assert parse_lsn(lsn_text(lsn)) == lsn


def test_lsn_text_is_postgres_spelling() -> None:
    assert lsn_text(0x16B374D848) == "16/B374D848"
    with pytest.raises(PgOutputError, match="not an LSN"):
        parse_lsn("16-B3")


@given(st.binary(max_size=64))
def test_arbitrary_bytes_decode_or_fail_cleanly(data: bytes) -> None:
    with contextlib.suppress(PgOutputError):
        decode(data)
