"""Kafka's wire types, written and read in one place: the classic and the flexible (compact) encodings.

Why one module: the embedded Connect protocol (``group/protocol.py``: JoinGroup metadata, SyncGroup
assignments) and the group records (``group/group_records.py``: the KIP-848 seed's coordinator-style
records) both speak Kafka's types, and each had its own cursor and packers. One reader means one set of
bounds checks and one way to report a bad byte: every failure names the field and the byte offset it
starts at. It lives in ``storage/`` because it is a byte format with no notion of a group, beside the JSON
of the internal topics (``java_json``); the group layer depends on storage, never the reverse.

The types (``org.apache.kafka.common.protocol.types.Type``)::

    INT8 / INT16 / INT32 / INT64     signed, big-endian
    STRING                           INT16 length, then UTF-8 (at most 32767 bytes)
    NULLABLE_STRING                  STRING, length -1 for null
    ARRAY                            INT32 count (-1: null), then the elements
    UNSIGNED_VARINT                  7 bits a byte, low bits first, high bit set while more follow
    COMPACT_STRING / COMPACT_BYTES   UNSIGNED_VARINT (length + 1; 0 is null), then the bytes
    COMPACT_ARRAY                    UNSIGNED_VARINT (count + 1; 0 is null), then the elements
    TAGGED_FIELDS                    UNSIGNED_VARINT count, then per field: tag, size, bytes

Writers raise :class:`WireError` (a ``ValueError``) for a value the type cannot carry; the
:class:`Reader` raises the error class its codec names, so callers keep their own error type.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import Final

__all__ = [
    "MAX_STRING_BYTES",
    "NO_TAGS",
    "NULL",
    "Reader",
    "WireError",
    "compact_array",
    "compact_bytes",
    "compact_string",
    "int8",
    "int16",
    "int32",
    "int32_array",
    "int64",
    "nullable_string",
    "string",
    "uvarint",
]

#: The length or count that stands for null in the classic encoding.
NULL: Final = -1
#: Kafka's limit for a string's UTF-8 length (INT16 length prefix; compact strings share it).
MAX_STRING_BYTES: Final = 0x7FFF

_I8: Final = struct.Struct(">b")
_I16: Final = struct.Struct(">h")
_I32: Final = struct.Struct(">i")
_I64: Final = struct.Struct(">q")


class WireError(ValueError):
    """A value a Kafka wire type cannot carry (a writer's refusal); the message names the field."""


# --------------------------------------------------------------------------------------------- writing


def _fixed(packer: struct.Struct, bits: int) -> Callable[[int, str], bytes]:
    limit = 1 << (bits - 1)

    def write(value: int, what: str) -> bytes:
        if isinstance(value, bool) or not isinstance(value, int) or not -limit <= value < limit:
            raise WireError(f"{what} must be a signed {bits}-bit integer (INT{bits}), got {value!r}")
        return packer.pack(value)

    write.__doc__ = f"INT{bits}, big-endian; refuses a value outside the signed {bits}-bit range."
    return write


int8: Final = _fixed(_I8, 8)
int16: Final = _fixed(_I16, 16)
int32: Final = _fixed(_I32, 32)
int64: Final = _fixed(_I64, 64)


def int32_array(values: Sequence[int], what: str) -> bytes:
    """An ARRAY of INT32 (count, then the values) in one pack, since task lists can be long."""
    try:
        return struct.pack(f">i{len(values)}i", len(values), *values)
    except struct.error:
        bad = next(
            v for v in values if isinstance(v, bool) or not isinstance(v, int) or not -(2**31) <= v < 2**31
        )
        raise WireError(f"{what} must be a signed 32-bit integer (INT32), got {bad!r}") from None


def _utf8(value: str, what: str) -> bytes:
    if not isinstance(value, str):
        raise WireError(f"{what} must be a string, got {value!r}")
    raw = value.encode("utf-8")
    if len(raw) > MAX_STRING_BYTES:
        raise WireError(f"{what} is {len(raw)} bytes of UTF-8; Kafka strings hold at most {MAX_STRING_BYTES}")
    return raw


def string(value: str, what: str) -> bytes:
    """STRING: INT16 length, then UTF-8."""
    raw = _utf8(value, what)
    return _I16.pack(len(raw)) + raw


def nullable_string(value: str | None, what: str) -> bytes:
    """NULLABLE_STRING: a STRING, or length -1 for None."""
    return _I16.pack(NULL) if value is None else string(value, what)


def uvarint(n: int) -> bytes:
    """UNSIGNED_VARINT: seven bits a byte, low bits first."""
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def compact_string(value: str, what: str) -> bytes:
    """COMPACT_STRING: UNSIGNED_VARINT length + 1, then UTF-8."""
    raw = _utf8(value, what)
    return uvarint(len(raw) + 1) + raw


def compact_bytes(value: bytes, what: str) -> bytes:
    """COMPACT_BYTES: UNSIGNED_VARINT length + 1, then the bytes."""
    if not isinstance(value, bytes | bytearray):
        raise WireError(f"{what} must be bytes, got {type(value).__name__}")
    return uvarint(len(value) + 1) + bytes(value)


def compact_array(items: Sequence[bytes]) -> bytes:
    """COMPACT_ARRAY of already encoded elements: UNSIGNED_VARINT count + 1, then the elements."""
    return uvarint(len(items) + 1) + b"".join(items)


#: An empty TAGGED_FIELDS section: writers emit no tagged fields.
NO_TAGS: Final = uvarint(0)


# --------------------------------------------------------------------------------------------- reading


class Reader:
    """A bounds-checked cursor over ``data[start:end]``: every failure names the field and its byte offset.

    Why the knobs: ``kind`` names what is being read in every message (``assignment``, ``group record
    key``); ``error`` is the codec's own error class, so its callers catch what they always caught;
    ``reading`` says whether a truncation reads "reading <field>" (the Connect protocol's messages) or
    just "<field>" (the group records'). Offsets are absolute in ``data``, so a fault inside a nested
    structure (an allocation inside worker metadata) is reported where it sits in the whole buffer.
    """

    __slots__ = ("_data", "_end", "_error", "_kind", "_reading", "pos")

    def __init__(
        self,
        data: bytes,
        kind: str,
        *,
        start: int = 0,
        end: int | None = None,
        error: Callable[[str], Exception] = WireError,
        reading: bool = True,
    ) -> None:
        self._data = data
        self._kind = kind
        self.pos = start
        self._end = len(data) if end is None else end
        self._error = error
        self._reading = "reading " if reading else ""

    # -- position and failures

    def at_end(self) -> bool:
        """Whether no byte is left (readers default the fields a shorter, older version lacks)."""
        return self.pos >= self._end

    def remaining(self) -> int:
        """How many bytes are left."""
        return max(0, self._end - self.pos)

    def fail(self, message: str) -> Exception:
        """The codec's error for invalid (not truncated) bytes: ``invalid <kind>: <message>``."""
        return self._error(f"invalid {self._kind}: {message}")

    def need(self, n: int, what: str) -> None:
        """Raise the truncation error unless ``n`` more bytes are there for ``what``."""
        left = self._end - self.pos
        if n > left:
            raise self._error(
                f"truncated {self._kind}: {self._reading}{what} at byte offset {self.pos} needs {n} bytes, "
                f"only {max(left, 0)} left"
            )

    def skip(self, n: int, what: str) -> int:
        """Step over ``n`` bytes; where they start."""
        self.need(n, what)
        start = self.pos
        self.pos += n
        return start

    def take(self, n: int, what: str) -> bytes:
        """The next ``n`` bytes."""
        start = self.skip(n, what)
        return self._data[start : self.pos]

    def end(self) -> None:
        """Refuse bytes after the last field (for types whose whole buffer is one value)."""
        if self.pos != self._end:
            raise self.fail(f"{self._end - self.pos} trailing bytes after byte offset {self.pos}")

    # -- fixed-width integers

    def _fixed(self, packer: struct.Struct, what: str) -> int:
        self.need(packer.size, what)
        (value,) = packer.unpack_from(self._data, self.pos)
        self.pos += packer.size
        return int(value)

    def int8(self, what: str) -> int:
        """INT8."""
        return self._fixed(_I8, what)

    def int16(self, what: str) -> int:
        """INT16."""
        return self._fixed(_I16, what)

    def int32(self, what: str) -> int:
        """INT32."""
        return self._fixed(_I32, what)

    def int64(self, what: str) -> int:
        """INT64."""
        return self._fixed(_I64, what)

    def int32s(self, n: int, what: str) -> tuple[int, ...]:
        """``n`` INT32 values in one unpack (an array's elements after its count)."""
        self.need(4 * n, what)
        values = struct.unpack_from(f">{n}i", self._data, self.pos)
        self.pos += 4 * n
        return values

    # -- the classic encoding

    def _utf8(self, n: int, at: int, what: str) -> str:
        raw = self.take(n, what)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise self.fail(f"{what} at byte offset {at} is not UTF-8 ({exc.reason})") from None

    def string(self, what: str) -> str:
        """STRING; a negative length is refused (the field is not nullable)."""
        at = self.pos
        n = self.int16(f"the length of {what}")
        if n < 0:
            raise self.fail(f"{what} at byte offset {at} has negative length {n}; the field is not nullable")
        return self._utf8(n, at, what)

    def nullable_string(self, what: str) -> str | None:
        """NULLABLE_STRING: None for length -1."""
        at = self.pos
        if self.int16(f"the length of {what}") == NULL:
            return None
        self.pos = at
        return self.string(what)

    def array_count(self, what: str, min_size: int, items: str) -> int:
        """An ARRAY's INT32 count, 0 for null (-1, read as empty as Java reads nullable arrays).

        The count is checked against the bytes left (each element at least ``min_size``) before any is
        read, so a corrupt count fails at once instead of allocating; ``items`` names them in that error.
        """
        at = self.pos
        count = self.int32(f"the {what} count")
        if count == NULL:
            return 0
        if count < 0:
            raise self.fail(f"{what} count at byte offset {at} is {count}")
        self.need(count * min_size, f"{count} {items}")
        return count

    # -- the flexible (compact) encoding

    def uvarint(self, what: str) -> int:
        """UNSIGNED_VARINT of at most 32 bits (5 bytes), as Kafka's."""
        at = self.pos
        value = 0
        for i in range(5):
            b = self.take(1, what)[0]
            value |= (b & 0x7F) << (7 * i)
            if not b & 0x80:
                if value > 0xFFFFFFFF:
                    break
                return value
        raise self.fail(f"{what} at byte offset {at} is not a valid unsigned varint")

    def compact_length(self, what: str) -> int:
        """A compact length (stored + 1); zero is null, which this reader's callers never allow."""
        at = self.pos
        n = self.uvarint(f"the length of {what}")
        if n == 0:
            raise self.fail(f"{what} at byte offset {at} is null; the field is not nullable")
        return n - 1

    def compact_string(self, what: str) -> str:
        """COMPACT_STRING (not nullable)."""
        at = self.pos
        n = self.compact_length(what)
        if n > MAX_STRING_BYTES:
            raise self.fail(f"{what} at byte offset {at} has length {n}, more than {MAX_STRING_BYTES}")
        return self._utf8(n, at, what)

    def compact_bytes(self, what: str) -> bytes:
        """COMPACT_BYTES (not nullable)."""
        return bytes(self.take(self.compact_length(what), what))

    def compact_count(self, what: str, min_size: int) -> int:
        """A COMPACT_ARRAY's count (not nullable), checked against the bytes left (each >= ``min_size``)."""
        at = self.pos
        n = self.compact_length(f"the {what} array")
        if n * min_size > self._end - self.pos:
            raise self._error(
                f"truncated {self._kind}: the {what} array at byte offset {at} claims {n} elements, "
                f"more than the {self._end - self.pos} bytes left can hold"
            )
        return n

    def tags(self, where: str) -> None:
        """Skip a TAGGED_FIELDS section: fields a later revision added that this reader does not know."""
        count = self.uvarint(f"the tagged-field count of {where}")
        for _ in range(count):
            tag = self.uvarint(f"a tag of {where}")
            size = self.uvarint(f"the size of tag {tag} of {where}")
            self.skip(size, f"tag {tag} of {where}")
