"""Kafka's wire types (runtime/storage/wire.py): the bytes each writer makes, the reader's bounds checks and
the offsets its errors name. The codecs built on it have their own golden tests (test_protocol*.py,
test_group_records.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.storage import wire


class _CodecError(ValueError):
    pass


def test_writers_make_kafkas_bytes() -> None:
    assert wire.int8(-1, "x") == b"\xff"
    assert wire.int16(258, "x") == b"\x01\x02"
    assert wire.int32(-2, "x") == b"\xff\xff\xff\xfe"
    assert wire.int64(1, "x") == b"\x00" * 7 + b"\x01"
    assert wire.int32_array([1, -1], "x") == b"\x00\x00\x00\x02\x00\x00\x00\x01\xff\xff\xff\xff"
    assert wire.string("h\u00e9", "x") == b"\x00\x03h\xc3\xa9"
    assert wire.nullable_string(None, "x") == b"\xff\xff"
    assert wire.uvarint(300) == b"\xac\x02"
    assert wire.compact_string("ab", "x") == b"\x03ab"
    assert wire.compact_bytes(b"", "x") == b"\x01"
    assert wire.compact_array([b"\x01", b"\x02"]) == b"\x03\x01\x02"
    assert wire.NO_TAGS == b"\x00"


@pytest.mark.parametrize(
    ("write", "message"),
    [
        (lambda: wire.int8(128, "the error"), "the error must be a signed 8-bit integer"),
        (lambda: wire.int16(True, "a flag"), "a flag must be a signed 16-bit integer"),
        (lambda: wire.int64(2**63, "the offset"), r"64-bit integer \(INT64\)"),
        (lambda: wire.int32_array([0, 2**31], "task number"), r"task number .*INT32.*2147483648"),
        (lambda: wire.string("x" * 40_000, "a name"), "a name is 40000 bytes of UTF-8; .* at most 32767"),
        (lambda: wire.compact_bytes("text", "metadata"), "metadata must be bytes"),  # type: ignore[arg-type]
    ],
)
def test_writers_refuse_what_the_type_cannot_carry(write: object, message: str) -> None:
    with pytest.raises(wire.WireError, match=message):
        write()  # type: ignore[operator]


def test_reader_reads_back_what_the_writers_wrote() -> None:
    data = b"".join(
        (
            wire.int8(-3, "a"),
            wire.int16(-300, "b"),
            wire.int64(2**40, "c"),
            wire.string("s", "d"),
            wire.nullable_string(None, "e"),
            wire.int32(2, "count") + wire.string("x", "f") + wire.string("y", "f"),
            wire.int32_array([7, 8], "g"),
            wire.compact_string("\u00e9", "h"),
            wire.compact_bytes(b"\x00", "i"),
            wire.compact_array([wire.compact_string("z", "j")]),
            wire.NO_TAGS,
        )
    )
    r = wire.Reader(data, "test record")
    assert (r.int8("a"), r.int16("b"), r.int64("c"), r.string("d"), r.nullable_string("e")) == (
        -3,
        -300,
        2**40,
        "s",
        None,
    )
    assert [r.string("f") for _ in range(r.array_count("names", 2, "names"))] == ["x", "y"]
    assert r.int32s(r.int32("count"), "numbers") == (7, 8)
    assert (r.compact_string("h"), r.compact_bytes("i")) == ("\u00e9", b"\x00")
    assert [r.compact_string("j") for _ in range(r.compact_count("js", 1))] == ["z"]
    r.tags("the record")
    assert r.at_end() and r.remaining() == 0
    r.end()


@given(st.integers(0, 0xFFFFFFFF))
def test_uvarint_round_trips(n: int) -> None:
    r = wire.Reader(wire.uvarint(n), "varint")
    assert r.uvarint("n") == n
    assert r.at_end()


@pytest.mark.parametrize(
    ("data", "read", "reading", "message"),
    [
        (
            b"\x00",
            lambda r: r.int16("the version"),
            True,
            "truncated rec: reading the version at byte offset 0",
        ),
        (
            b"\x00",
            lambda r: r.int16("the version"),
            False,
            r"truncated rec: the version at byte offset 0 needs 2",
        ),
        (b"\xff\xfe", lambda r: r.string("the id"), True, "the id at byte offset 0 has negative length -2"),
        (
            b"\x00\x01\xff",
            lambda r: r.string("the id"),
            True,
            r"invalid rec: the id at byte offset 0 is not UTF-8",
        ),
        (
            b"\xff\xff\xff\xfe",
            lambda r: r.array_count("names", 2, "names"),
            True,
            "names count at byte offset 0",
        ),
        (
            b"\x00\x00\x00\x09",
            lambda r: r.array_count("names", 2, "names"),
            True,
            "reading 9 names at byte offset 4",
        ),
        (b"\x00", lambda r: r.compact_string("the id"), True, "the id at byte offset 0 is null"),
        (b"\xff\xff\xff\xff\x7f", lambda r: r.uvarint("n"), True, "not a valid unsigned varint"),
        (b"\x05\x00", lambda r: r.compact_count("members", 1), True, "claims 4 elements"),
        (
            b"\x01\x05\x02\x00",
            lambda r: r.tags("the value"),
            True,
            "reading tag 5 of the value at byte offset 3",
        ),
    ],
)
def test_reader_errors_name_the_field_and_offset(
    data: bytes, read: object, reading: bool, message: str
) -> None:
    r = wire.Reader(data, "rec", error=_CodecError, reading=reading)
    with pytest.raises(_CodecError, match=message):
        read(r)  # type: ignore[operator]


def test_a_nested_reader_reports_offsets_in_the_whole_buffer() -> None:
    r = wire.Reader(b"\x00\x00\x00\x00\x00", "inner", start=3, end=5)
    assert r.int16("a") == 0
    with pytest.raises(wire.WireError, match="reading b at byte offset 5 needs 1 bytes, only 0 left"):
        r.int8("b")


def test_trailing_bytes_are_refused_by_end() -> None:
    r = wire.Reader(b"\x00\x01\x02", "key")
    r.int16("the version")
    with pytest.raises(wire.WireError, match="invalid key: 1 trailing bytes after byte offset 2"):
        r.end()


def test_null_array_reads_as_empty() -> None:
    assert wire.Reader(b"\xff\xff\xff\xff", "a").array_count("names", 2, "names") == 0
