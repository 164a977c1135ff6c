"""The ``static`` protocol (KIP-987, kconnect's): v3 metadata with the worker id and static assignment.

No Apache Kafka release has it, so there are no Java goldens: the bytes below are computed by hand from the
layout in ``kconnect.runtime.group.protocol``'s docstring, field by field. What Java must do with them (decode
the
v2 part and ignore the rest) is checked against the reference Apache Kafka Connect 3.9.0 classes when
they are present (``-m interop``).
"""

from __future__ import annotations

import contextlib
import struct
from dataclasses import replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.group.protocol import (
    NO_ERROR,
    SESSIONED,
    STATIC,
    V0,
    V1,
    V2,
    V3,
    ConnectAssignment,
    ProtocolError,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    join_protocols,
    protocol_names,
    version_for_protocol,
)
from kconnect.runtime.ids import TaskId
from tests.unit.test_protocol import _java_decode, assignments, int64, names
from tests.unit.test_protocol import java_decoder as java_decoder  # the fixture, shared


def T(connector: str, *numbers: int) -> tuple[TaskId, ...]:
    return tuple(TaskId(connector, n) for n in numbers)


def s16(text: str) -> bytes:
    """STRING: INT16 length, UTF-8."""
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def i16(v: int) -> bytes:
    return struct.pack(">h", v)


def i32(v: int) -> bytes:
    return struct.pack(">i", v)


def i64(v: int) -> bytes:
    return struct.pack(">q", v)


ALLOC = ConnectAssignment(V3, NO_ERROR, "L", "http://l/", 5, ("A",), T("A", 0), (), T("B", 1), 250)

# The allocation as a v3 metadata embeds it: v3 header, then exactly the v1/v2 assignment layout.
ALLOC_BYTES = b"".join(
    (
        i16(3),  # version
        i16(0),  # error
        s16("L"),  # leader
        s16("http://l/"),  # leader url
        i64(5),  # config offset
        i32(1) + s16("A") + i32(2) + i32(-1) + i32(0),  # assigned: A with [connector, task 0]
        i32(1) + s16("B") + i32(1) + i32(1),  # revoked: B with [task 1]
        i32(250),  # scheduled delay
    )
)

STATIC_FRESH = WorkerState(
    "http://w1:8083/",
    7,
    None,
    worker_id="w1",
    static_connectors=("c1",),
    static_tasks=T("c2", 1) + T("c1", 2, 0),  # given unsorted: kept sorted
)
STATIC_FRESH_BYTES = b"".join(
    (
        i16(3),  # version
        s16("http://w1:8083/"),  # url
        i64(7),  # config offset
        i32(-1),  # allocation: null, never assigned
        i16(0),  # kconnect flags: none
        s16("w1"),  # worker id
        i32(1) + s16("c1"),  # static connectors
        i32(2),  # static tasks: two connector entries, sorted, numbers ascending
        s16("c1") + i32(2) + i32(0) + i32(2),
        s16("c2") + i32(1) + i32(1),
    )
)

WILDCARD_ASSIGNED = WorkerState("http://w2:8083/", 9, ALLOC)
WILDCARD_ASSIGNED_BYTES = b"".join(
    (
        i16(3),
        s16("http://w2:8083/"),
        i64(9),
        i32(len(ALLOC_BYTES)) + ALLOC_BYTES,
        i16(0),  # flags
        i16(-1),  # worker id: null
        i32(0),  # no static connectors
        i32(0),  # no static tasks
    )
)

LEAVING_STATIC = WorkerState(
    "http://w3:8083/", 9, ALLOC, leaving=True, worker_id="w3", static_tasks=T("\u65e5\u672c", 4)
)
LEAVING_STATIC_BYTES = b"".join(
    (
        i16(3),
        s16("http://w3:8083/"),
        i64(9),
        i32(len(ALLOC_BYTES)) + ALLOC_BYTES,
        i16(1),  # flags: leaving
        s16("w3"),
        i32(0),
        i32(1) + s16("\u65e5\u672c") + i32(1) + i32(4),
    )
)

GOLDEN_V3 = {
    "static_fresh": (STATIC_FRESH, STATIC_FRESH_BYTES),
    "wildcard_assigned": (WILDCARD_ASSIGNED, WILDCARD_ASSIGNED_BYTES),
    "leaving_static": (LEAVING_STATIC, LEAVING_STATIC_BYTES),
}


# ---------------------------------------------------------------------------------------------------
# Names and versions


def test_static_is_preferred_over_sessioned() -> None:
    assert STATIC == "static" and version_for_protocol(STATIC) == V3 == 3
    assert protocol_names("static") == ["static", "sessioned", "compatible", "default"]
    assert protocol_names("STATIC") == protocol_names("static")


def test_a_static_worker_joins_with_every_version_and_static_fields_only_under_static() -> None:
    sent = join_protocols("static", STATIC_FRESH)
    assert [(name, decode_metadata(md)[0]) for name, md in sent] == [
        ("static", V3),
        ("sessioned", V2),
        ("compatible", V1),
        ("default", V0),
    ]
    # Under the older names it sends what a sessioned worker sends: Java's bytes, no static fields.
    plain = WorkerState(STATIC_FRESH.url, STATIC_FRESH.config_offset)
    assert sent[1:] == join_protocols("sessioned", plain)
    assert dict(sent)[STATIC] == STATIC_FRESH_BYTES
    assert dict(join_protocols("sessioned", STATIC_FRESH))[SESSIONED] == encode_metadata(plain, V2)


# ---------------------------------------------------------------------------------------------------
# Hand-computed bytes


@pytest.mark.parametrize("name", sorted(GOLDEN_V3))
def test_v3_metadata_bytes(name: str) -> None:
    state, data = GOLDEN_V3[name]
    assert encode_metadata(state, V3) == data
    assert decode_metadata(data) == (V3, state)


def test_worker_state_keeps_its_static_assignment_sorted_and_unique() -> None:
    s = WorkerState("u", 1, static_connectors=("b", "a", "b"), static_tasks=T("x", 3, 1, 3))
    assert s.static_connectors == ("a", "b") and s.static_tasks == T("x", 1, 3)
    assert s.is_static and not WorkerState("u", 1, worker_id="w").is_static
    assert WorkerState("u", 1, static_tasks=T("x", 0)).is_static


def test_v3_assignment_has_the_v2_layout() -> None:
    v3 = encode_assignment(ALLOC)
    assert v3 == ALLOC_BYTES
    assert v3[2:] == encode_assignment(replace(ALLOC, version=V2))[2:]
    assert decode_assignment(v3) == ALLOC


# ---------------------------------------------------------------------------------------------------
# Older readers


@pytest.mark.parametrize("name", sorted(GOLDEN_V3))
def test_a_v2_reader_decodes_v3_metadata_and_ignores_the_static_fields(name: str) -> None:
    state, data = GOLDEN_V3[name]
    # The v1/v2 path of the decoder is the reader kconnect had before v3: it reads url, offset,
    # allocation, then the flags if two bytes follow, and ignores the rest. The flags sit right after the
    # allocation in v3 too, so it still sees a leaving worker.
    for older in (V1, V2):
        version, seen = decode_metadata(i16(older) + data[2:])
        assert version == older
        assert seen == WorkerState(state.url, state.config_offset, state.allocation, leaving=state.leaving)


def test_fields_the_buffer_ends_before_take_their_defaults() -> None:
    data = STATIC_FRESH_BYTES
    head = 2 + 2 + len("http://w1:8083/") + 8 + 4  # up to the allocation
    base = WorkerState("http://w1:8083/", 7)
    assert decode_metadata(data[:head]) == (V3, base)
    assert decode_metadata(data[: head + 2]) == (V3, base)
    assert decode_metadata(data[: head + 2 + 4]) == (V3, replace(base, worker_id="w1"))
    with_connectors = head + 2 + 4 + 4 + 4
    assert decode_metadata(data[:with_connectors]) == (
        V3,
        replace(base, worker_id="w1", static_connectors=("c1",)),
    )
    # A v2 body under a v3 header reads as a wildcard worker with no worker id.
    v2 = encode_metadata(WILDCARD_ASSIGNED, V2)
    assert decode_metadata(i16(3) + v2[2:]) == (
        V3,
        replace(WILDCARD_ASSIGNED, allocation=replace(ALLOC, version=V2)),
    )


def test_later_versions_keep_v3_fields_and_append() -> None:
    later = i16(4) + STATIC_FRESH_BYTES[2:] + b"\x00\x00\x00\x07 later fields"
    assert decode_metadata(later) == (4, STATIC_FRESH)


# ---------------------------------------------------------------------------------------------------
# Malformed v3 metadata


def _at(data: bytes, marker: bytes) -> int:
    i = data.find(marker)
    assert i >= 0
    return i


def test_truncated_v3_fields_name_the_field_and_offset() -> None:
    data = STATIC_FRESH_BYTES
    flags_at = 2 + 2 + len("http://w1:8083/") + 8 + 4
    cases = [
        (flags_at + 1, f"reading kconnect's flags at byte offset {flags_at}"),
        (flags_at + 3, f"reading the length of the worker id at byte offset {flags_at + 2}"),
        (flags_at + 5, f"reading the worker id at byte offset {flags_at + 4} needs 2 bytes, only 1 left"),
        (flags_at + 8, f"reading the static connectors count at byte offset {flags_at + 6}"),
        (flags_at + 11, "reading 1 static connectors at byte offset"),
        (flags_at + 13, f"reading one of the static connectors at byte offset {flags_at + 12}"),
        (flags_at + 16, f"reading the static task entry count at byte offset {flags_at + 14}"),
        (len(data) - 1, "reading 1 task numbers of static task connector 'c2'"),
    ]
    for cut, message in cases:
        with pytest.raises(ProtocolError, match=message):
            decode_metadata(data[:cut])


def test_every_truncation_of_v3_metadata_is_rejected_or_a_valid_prefix() -> None:
    for _, data in GOLDEN_V3.values():
        for cut in range(len(data)):
            try:
                version, _ = decode_metadata(data[:cut])
            except ProtocolError as e:
                assert "byte offset" in str(e)
            else:
                assert version == V3


def test_invalid_static_fields_are_rejected() -> None:
    head = STATIC_FRESH_BYTES[: 2 + 2 + len("http://w1:8083/") + 8 + 4] + i16(0) + s16("w1")
    at = len(head)
    with pytest.raises(ProtocolError, match=f"static connectors count at byte offset {at} is -2"):
        decode_metadata(head + i32(-2))
    with pytest.raises(ProtocolError, match=r"worker id at byte offset \d+ has negative length -3"):
        decode_metadata(head[:-4] + i16(-3))
    # -1 stands for a connector in assignments; a static task list has no room for it.
    tasks_at = at + 4
    with pytest.raises(ProtocolError, match=f"static tasks at byte offset {tasks_at} list task number -1"):
        decode_metadata(head + i32(0) + i32(1) + s16("c") + i32(1) + i32(-1))
    with pytest.raises(ProtocolError, match="task number -7 of connector 'c'"):
        decode_metadata(head + i32(0) + i32(1) + s16("c") + i32(1) + i32(-7))
    # Null arrays read as empty, as Java reads nullable arrays.
    assert decode_metadata(head + i32(-1) + i32(-1))[1] == WorkerState("http://w1:8083/", 7, worker_id="w1")


def test_encoding_refuses_what_v3_cannot_carry() -> None:
    with pytest.raises(ValueError, match="negative task number"):
        encode_metadata(WorkerState("u", 1, static_tasks=T("c", -1)), V3)
    with pytest.raises(ValueError, match="worker id is 40000 bytes"):
        encode_metadata(WorkerState("u", 1, worker_id="w" * 40_000), V3)
    with pytest.raises(ValueError, match="static connector name is 40000 bytes"):
        encode_metadata(WorkerState("u", 1, static_connectors=("c" * 40_000,)), V3)
    # Older versions have no field for them: they are left out, not refused.
    assert encode_metadata(WorkerState("u", 1, static_tasks=T("c", -1)), V2) == encode_metadata(
        WorkerState("u", 1), V2
    )


# ---------------------------------------------------------------------------------------------------
# Properties

static_task_ids = st.builds(TaskId, names, st.integers(0, 2**31 - 1))


@st.composite
def v3_states(draw: st.DrawFn) -> WorkerState:
    allocation = draw(st.none() | assignments(V3))
    return WorkerState(
        draw(names),
        draw(int64),
        allocation,
        leaving=draw(st.booleans()),
        worker_id=draw(st.none() | names),
        static_connectors=tuple(draw(st.lists(names, max_size=5))),
        static_tasks=tuple(draw(st.lists(static_task_ids, max_size=8))),
    )


@given(v3_states())
def test_v3_metadata_round_trip(state: WorkerState) -> None:
    data = encode_metadata(state, V3)
    assert decode_metadata(data) == (V3, state)
    # The v2 view of the same bytes: the v2 fields and the flag, nothing static.
    assert decode_metadata(i16(V2) + data[2:])[1] == WorkerState(
        state.url, state.config_offset, state.allocation, leaving=state.leaving
    )


@given(assignments(V3))
def test_v3_assignment_round_trip(a: ConnectAssignment) -> None:
    data = encode_assignment(a)
    assert decode_assignment(data) == a
    assert data[2:] == encode_assignment(replace(a, version=V2))[2:]


@given(v3_states(), st.data())
def test_any_corruption_of_v3_metadata_decodes_or_raises_protocol_error(
    state: WorkerState, data: st.DataObject
) -> None:
    raw = bytearray(encode_metadata(state, V3))
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode_metadata(bytes(raw))


# ---------------------------------------------------------------------------------------------------
# Java reads v3


@pytest.mark.interop
def test_java_decodes_v3_metadata_as_its_v2_fields(java_decoder: list[str]) -> None:
    states = [s for s, _ in GOLDEN_V3.values()]
    states.append(replace(STATIC_FRESH, leaving=True, allocation=ALLOC))
    answers = _java_decode(java_decoder, [f"metadata {encode_metadata(s, V3).hex()}" for s in states])
    for state, answer in zip(states, answers, strict=True):
        status, _, rest = answer.partition(" ")
        assert status == "OK", answer
        again = bytes.fromhex(rest.split(" ")[0])
        # Java re-encodes what it read as v2 metadata: url, offset and allocation, nothing static.
        allocation = None if state.allocation is None else replace(state.allocation, version=V2)
        assert decode_metadata(again) == (V2, WorkerState(state.url, state.config_offset, allocation))


@pytest.mark.interop
def test_java_decodes_v3_assignments(java_decoder: list[str]) -> None:
    cases = [ALLOC, replace(ALLOC, connectors=(), tasks=(), revoked_tasks=(), delay_ms=0)]
    answers = _java_decode(java_decoder, [f"assignment {encode_assignment(a).hex()}" for a in cases])
    for a, answer in zip(cases, answers, strict=True):
        status, _, rest = answer.partition(" ")
        assert status == "OK", answer
        java_hex, _, java_text = rest.partition(" ")
        assert "version=3 " in java_text
        again = decode_assignment(bytes.fromhex(java_hex))
        assert replace(again, version=V3) == a
