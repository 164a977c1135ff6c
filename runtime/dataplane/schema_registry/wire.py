"""Confluent's wire format: magic byte 0, the schema id as a 4-byte big-endian int, then the payload.

Protobuf payloads carry, between the id and the message, the path of the message type within the schema
file as "message indexes": a zigzag varint count, then each index as a zigzag varint; the common case of
the file's first message ([0]) is written as the single byte 0. Pure functions, so the framing is
tested on its own against the bytes confluent-kafka's serializers write.
"""

from __future__ import annotations

import struct
from typing import Final

__all__ = [
    "MAGIC_BYTE",
    "WireFormatError",
    "frame",
    "read_message_indexes",
    "unframe",
    "write_message_indexes",
]

MAGIC_BYTE: Final = 0
_HEADER: Final = struct.Struct(">bI")


class WireFormatError(ValueError):
    """Bytes that are not in Confluent's wire format (no magic byte, too short, bad indexes)."""


def frame(schema_id: int, payload: bytes) -> bytes:
    """The record's bytes: the header for ``schema_id`` followed by ``payload``."""
    return _HEADER.pack(MAGIC_BYTE, schema_id) + payload


def unframe(data: bytes) -> tuple[int, memoryview]:
    """The schema id and the payload after the header; WireFormatError with Confluent's message when the
    bytes do not start with the magic byte."""
    if len(data) < _HEADER.size:
        raise WireFormatError(
            f"Unknown magic byte! (the record is {len(data)} bytes, shorter than the 5-byte header)"
        )
    magic, schema_id = _HEADER.unpack_from(data)
    if magic != MAGIC_BYTE:
        raise WireFormatError("Unknown magic byte!")
    return schema_id, memoryview(data)[_HEADER.size :]


def _zigzag(n: int) -> int:
    return (n << 1) ^ (n >> 63)


def _unzigzag(n: int) -> int:
    return (n >> 1) ^ -(n & 1)


def _write_varint(out: bytearray, value: int) -> None:
    value &= (1 << 64) - 1
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _read_varint(data: memoryview, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise WireFormatError("Invalid message indexes: truncated varint")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, pos
        shift += 7


def write_message_indexes(indexes: list[int]) -> bytes:
    """Protobuf's message indexes; [0] (the first message of the file) is the single byte 0."""
    if indexes == [0]:
        return b"\x00"
    out = bytearray()
    _write_varint(out, _zigzag(len(indexes)))
    for index in indexes:
        _write_varint(out, _zigzag(index))
    return bytes(out)


def read_message_indexes(payload: memoryview) -> tuple[list[int], memoryview]:
    """The message indexes at the start of a Protobuf payload and the message bytes after them."""
    count, pos = _read_varint(payload, 0)
    count = _unzigzag(count)
    if count == 0:
        return [0], payload[pos:]
    if count < 0 or count > len(payload):
        raise WireFormatError(f"Invalid message indexes: count {count}")
    indexes = []
    for _ in range(count):
        index, pos = _read_varint(payload, pos)
        indexes.append(_unzigzag(index))
    return indexes, payload[pos:]
