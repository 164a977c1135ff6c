"""The embedded Connect protocol against bytes from Apache Kafka Connect 3.9.0's own serializers.

``tests/golden/connect_protocol.txt`` was produced by ``tests/golden/GoldenProtocol.java``
(``tests/golden/regenerate.sh``). Every golden is decoded to the value Java was given and re-encoded;
the interop test at the end has Java decode what we encode.
"""

from __future__ import annotations

import contextlib
import random
import re
import shutil
import struct
import subprocess
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from kconnect.runtime.group.protocol import (
    CONFIG_MISMATCH,
    CONNECT_PROTOCOLS,
    NO_ERROR,
    V0,
    V1,
    V2,
    V3,
    ConnectAssignment,
    ProtocolError,
    ProtocolName,
    WorkerState,
    decode_assignment,
    decode_metadata,
    encode_assignment,
    encode_metadata,
    join_protocols,
    parse_protocol_name,
    protocol_names,
    version_for_protocol,
)
from kconnect.runtime.ids import TaskId
from tests.support.reference import reference_available, reference_home

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
GOLDEN_FILE = GOLDEN_DIR / "connect_protocol.txt"

L, LU = "leader-1", "http://leader:8083/"


def T(connector: str, *numbers: int) -> tuple[TaskId, ...]:
    return tuple(TaskId(connector, n) for n in numbers)


def CA(
    version: int,
    offset: int,
    connectors: tuple[str, ...] = (),
    tasks: tuple[TaskId, ...] = (),
    *,
    error: int = NO_ERROR,
    revoked_connectors: tuple[str, ...] = (),
    revoked_tasks: tuple[TaskId, ...] = (),
    delay: int = 0,
    leader: str = L,
    leader_url: str = LU,
) -> ConnectAssignment:
    """An assignment from leader-1 unless told otherwise: the goldens' common frame."""
    return ConnectAssignment(
        version,
        error,
        leader,
        leader_url,
        offset,
        connectors,
        tasks,
        revoked_connectors,
        revoked_tasks,
        delay,
    )


def load_goldens() -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for line in GOLDEN_FILE.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        name, hexed = line.split()
        out[name] = None if hexed == "null" else bytes.fromhex(hexed)
    return out


GOLDEN = load_goldens()

UNICODE_URL = "http://\u00fcn\u00efc\u00f8d\u00e9:8083/\u2603\U0001f4a1"
ALLOC_V2 = CA(V2, 13, ("c1",), T("c1", 0), revoked_connectors=("c2",), revoked_tasks=T("c2", 1), delay=5000)

EXPECTED_METADATA: dict[str, tuple[int, WorkerState]] = {
    "md_v0_basic": (V0, WorkerState("http://w1:8083/", 42)),
    "md_v0_unicode": (V0, WorkerState(UNICODE_URL, -1)),
    "md_v1_null_allocation": (V1, WorkerState("http://w1:8083/", 7, None)),
    "md_v2_null_allocation": (V2, WorkerState("http://w1:8083/", 7, None)),
    # Java's ExtendedAssignment.empty() singleton is serialized as a null allocation too.
    "md_v1_empty_singleton_allocation": (V1, WorkerState("http://w1:8083/", 7, None)),
    "md_v1_allocation": (V1, WorkerState("http://w2:8083/", 12, CA(V1, 12, ("c1",), T("c1", 0, 1)))),
    "md_v2_allocation": (V2, WorkerState("http://w2:8083/", 13, ALLOC_V2)),
    "md_v1_allocation_of_v2_assignment": (
        V1,
        WorkerState("http://w2:8083/", 13, replace(ALLOC_V2, version=V1)),
    ),
    "md_v2_allocation_empty_lists": (V2, WorkerState("http://w3:8083/", 3, CA(V2, 3))),
}

EXPECTED_ASSIGNMENTS: dict[str, ConnectAssignment] = {
    "as_v0_empty": CA(V0, 0),
    "as_v0_one_connector": CA(V0, 5, ("c1",), T("c1", 0, 1, 2)),
    "as_v0_connectors_and_tasks": CA(
        V0, 9, ("alpha", "beta"), T("alpha", 0, 1) + T("beta", 0) + T("gamma", 2)
    ),
    "as_v0_tasks_only": CA(V0, 9, (), T("x", 0, 1) + T("y", 3)),
    "as_v0_config_mismatch": CA(V0, 99, error=CONFIG_MISMATCH),
    "as_v0_unicode": CA(
        V0,
        1,
        ("conn\u00e9cteur-\u2603",),
        T("conn\u00e9cteur-\u2603", 0) + T("\u65e5\u672c\U0001f4a1", 0),
        leader="l\u00e9ader-\u2603",
        leader_url="http://\u00fcn\u00efc\u00f8d\u00e9/",
    ),
    "as_v0_large_values": CA(V0, 2**63 - 1, ("c",), T("c", 0, 2**31 - 1)),
    "as_v1_empty_lists": CA(V1, 0),
    "as_v2_empty_lists": CA(V2, 0),
    "as_v1_assigned": CA(V1, 4, ("c1",), T("c1", 0)),
    "as_v1_revocations": CA(V1, 4, revoked_connectors=("c2",), revoked_tasks=T("c2", 0, 1)),
    "as_v1_revoked_tasks_only": CA(V1, 4, revoked_tasks=T("c3", 2)),
    "as_v1_delay": CA(V1, 4, delay=30000),
    "as_v1_config_mismatch": CA(V1, 17, error=CONFIG_MISMATCH),
    "as_v2_config_mismatch": CA(V2, 17, error=CONFIG_MISMATCH),
    "as_v2_full": CA(
        V2,
        21,
        ("c1",),
        T("c1", 0, 1) + T("c4", 0),
        revoked_connectors=("c2",),
        revoked_tasks=T("c2", 0) + T("c3", 5),
        delay=1234,
    ),
    "as_v2_many_connectors": CA(
        V2,
        22,
        ("alpha", "mid", "zeta"),
        T("alpha", 0) + T("mid", 0, 1) + T("zeta", 0),
        revoked_connectors=("rev-a", "rev-b"),
        revoked_tasks=T("rev-a", 0) + T("rev-b", 0),
    ),
    "as_v2_unicode": CA(
        V2,
        2,
        ("\u65e5\u672c",),
        T("\u65e5\u672c", 0),
        revoked_connectors=("\U0001f4a1",),
        revoked_tasks=T("\U0001f4a1", 3),
        delay=7,
    ),
}

# Java orders assigned connectors through a HashSet and revoked connectors in the order it was given, so
# these goldens hold the same entries as our sorted encoding in another order.
JAVA_ORDERED = {"as_v2_many_connectors"}

JOIN_STATES = {
    "join_eager": ("eager", WorkerState("http://w2:8083/", 13, ALLOC_V2)),
    "join_compatible": ("compatible", WorkerState("http://w2:8083/", 13, ALLOC_V2)),
    "join_sessioned": ("sessioned", WorkerState("http://w2:8083/", 13, ALLOC_V2)),
    "join_sessioned_fresh": ("sessioned", WorkerState("http://w4:8083/", -1, None)),
}


def golden_joins(prefix: str) -> list[tuple[str, bytes]]:
    """The (name, metadata) pairs Java's metadataRequest produced, in its order."""
    rows = []
    for name, data in GOLDEN.items():
        m = re.fullmatch(rf"{prefix}_(\d+)_([a-z]+)", name)
        if m is not None:
            assert data is not None
            rows.append((int(m[1]), m[2], data))
    return [(proto, data) for _, proto, data in sorted(rows)]


# ---------------------------------------------------------------------------------------------------
# Goldens


def test_golden_file_covers_exactly_the_expected_cases() -> None:
    join_names = {n for n in GOLDEN if n.startswith("join_")}
    assert set(GOLDEN) - join_names == set(EXPECTED_METADATA) | set(EXPECTED_ASSIGNMENTS)
    assert {n.rsplit("_", 2)[0] for n in join_names} == set(JOIN_STATES)


@pytest.mark.parametrize("name", sorted(EXPECTED_METADATA))
def test_golden_metadata_decodes_and_reencodes(name: str) -> None:
    data = GOLDEN[name]
    assert data is not None
    version, state = decode_metadata(data)
    assert (version, state) == EXPECTED_METADATA[name]
    assert encode_metadata(state, version) == data


@pytest.mark.parametrize("name", sorted(EXPECTED_ASSIGNMENTS))
def test_golden_assignment_decodes_and_reencodes(name: str) -> None:
    data = GOLDEN[name]
    assert data is not None
    decoded = decode_assignment(data)
    expected = EXPECTED_ASSIGNMENTS[name]
    assert decoded == expected
    ours = encode_assignment(expected)
    if name in JAVA_ORDERED:
        assert ours != data, "Java's entry order happened to be sorted: move this case out of JAVA_ORDERED"
        assert len(ours) == len(data)
        assert decode_assignment(ours) == decoded
    else:
        assert ours == data


@pytest.mark.parametrize("prefix", sorted(JOIN_STATES))
def test_join_protocols_match_worker_coordinator(prefix: str) -> None:
    connect_protocol, state = JOIN_STATES[prefix]
    assert join_protocols(connect_protocol, state) == golden_joins(prefix)


def test_golden_facts_null_versus_empty() -> None:
    # Java writes empty assigned/revoked arrays as count 0, never as null, and a delay of 0.
    empty_v1 = GOLDEN["as_v1_empty_lists"]
    assert empty_v1 is not None and empty_v1.endswith(bytes(12))
    # The allocation is null (-1) before the first assignment, for the empty singleton too.
    for name in ("md_v1_null_allocation", "md_v2_null_allocation", "md_v1_empty_singleton_allocation"):
        data = GOLDEN[name]
        assert data is not None and data.endswith(b"\xff\xff\xff\xff")
    # An allocation of an assignment with empty lists is not null: it is written in full.
    _, state = decode_metadata(GOLDEN["md_v2_allocation_empty_lists"] or b"")
    assert state.allocation == CA(V2, 3)


def test_golden_facts_allocation_takes_the_metadata_version() -> None:
    # The same v2 assignment is embedded with a v2 header in v2 metadata and a v1 header in v1 metadata.
    for name, version in (("md_v2_allocation", V2), ("md_v1_allocation_of_v2_assignment", V1)):
        data = GOLDEN[name]
        assert data is not None
        url_len = struct.unpack_from(">h", data, 2)[0]
        allocation_at = 2 + 2 + url_len + 8 + 4
        assert struct.unpack_from(">h", data, allocation_at)[0] == version


def test_golden_facts_sessioned_worker_sends_plain_v0_under_default() -> None:
    proto, default_md = golden_joins("join_sessioned")[-1]
    assert proto == "default"
    assert decode_metadata(default_md) == (V0, WorkerState("http://w2:8083/", 13))
    assert default_md == encode_metadata(WorkerState("http://w2:8083/", 13), V0)


def test_golden_facts_connector_entry_lists_connector_then_tasks() -> None:
    data = GOLDEN["as_v0_one_connector"]
    assert data is not None
    # one entry: "c1" with [-1, 0, 1, 2]
    assert data.endswith(struct.pack(">ih2si4i", 1, 2, b"c1", 4, -1, 0, 1, 2))


# ---------------------------------------------------------------------------------------------------
# Protocol names


def test_protocol_names() -> None:
    assert protocol_names("eager") == ["default"]
    assert protocol_names("compatible") == ["compatible", "default"]
    assert protocol_names("sessioned") == ["sessioned", "compatible", "default"]
    assert protocol_names("SESSIONED") == protocol_names("sessioned")  # Java compares ignoring case
    assert protocol_names("static") == ["static", "sessioned", "compatible", "default"]
    assert CONNECT_PROTOCOLS == ("eager", "compatible", "sessioned", "static")
    with pytest.raises(ValueError, match="expected one of eager, compatible, sessioned, static"):
        protocol_names("dynamic")


def test_version_for_protocol() -> None:
    assert [version_for_protocol(n) for n in ("default", "compatible", "sessioned")] == [V0, V1, V2]
    with pytest.raises(ValueError):
        version_for_protocol("eager")


def test_protocol_names_are_typed_and_read_exactly() -> None:
    assert [parse_protocol_name(n) for n in ("default", "compatible", "sessioned", "static")] == list(
        ProtocolName
    )
    assert [n.version for n in ProtocolName] == [V0, V1, V2, 3]
    assert all(type(n) is ProtocolName for n in protocol_names("static"))
    # A StrEnum: it is the name on the wire, in JSON and in f-strings.
    assert ProtocolName.SESSIONED == "sessioned" and f"{ProtocolName.STATIC}" == "static"
    for unknown in ("eager", "SESSIONED", "", "dynamic"):
        with pytest.raises(ProtocolError, match=f"unknown Connect group protocol name {unknown!r}"):
            parse_protocol_name(unknown)


def test_join_protocols_versions_follow_names() -> None:
    state = WorkerState("http://w:1/", 5, CA(V1, 5, ("a",), T("a", 0)))
    versions = [(n, decode_metadata(md)[0]) for n, md in join_protocols("sessioned", state)]
    assert versions == [("sessioned", V2), ("compatible", V1), ("default", V0)]
    assert join_protocols("eager", state) == [("default", encode_metadata(WorkerState("http://w:1/", 5), V0))]


# ---------------------------------------------------------------------------------------------------
# The assignment value


def test_assignment_collections_are_sorted_sets() -> None:
    a = ConnectAssignment(
        V1,
        NO_ERROR,
        L,
        LU,
        1,
        ("b", "a", "b"),
        (TaskId("b", 1), TaskId("a", 10), TaskId("a", 2), TaskId("b", 1)),
    )
    assert a.connectors == ("a", "b")
    assert a.tasks == (TaskId("a", 2), TaskId("a", 10), TaskId("b", 1))
    assert not a.failed and CA(V0, 1, error=CONFIG_MISMATCH).failed


# ---------------------------------------------------------------------------------------------------
# Tolerant and strict reading


def test_missing_trailing_fields_take_java_defaults() -> None:
    v1 = encode_assignment(CA(V1, 4, ("c1",), T("c1", 0), revoked_tasks=T("c2", 1), delay=9))
    v0_body = encode_assignment(CA(V0, 4, ("c1",), T("c1", 0)))[2:]
    # A v1 header on a v0 body: revoked lists empty, delay 0.
    assert decode_assignment(b"\x00\x01" + v0_body) == CA(V1, 4, ("c1",), T("c1", 0))
    # A v1 assignment cut right after the revoked array: delay 0.
    assert decode_assignment(v1[:-4]) == CA(V1, 4, ("c1",), T("c1", 0), revoked_tasks=T("c2", 1))
    # v1 metadata without its allocation field reads as a null allocation.
    md = encode_metadata(WorkerState("u", 3), V0)
    assert decode_metadata(b"\x00\x01" + md[2:]) == (V1, WorkerState("u", 3))


def test_null_arrays_read_as_empty() -> None:
    head = encode_assignment(CA(V1, 4))[:-12]
    assert decode_assignment(head + struct.pack(">iii", -1, -1, 0)) == CA(V1, 4)


def test_future_versions_decode_known_fields_and_ignore_the_rest() -> None:
    a = CA(V2, 8, ("c",), T("c", 0), revoked_connectors=("d",), delay=3)
    future = b"\x00\x07" + encode_assignment(a)[2:] + b"static fields we do not know"
    assert decode_assignment(future) == replace(a, version=7)
    state = WorkerState("http://w/", 8, a)
    md = encode_metadata(state, V2)
    assert decode_metadata(b"\x00\x02" + md[2:] + b"\x00\x00\x02\x03") == (2, state)
    # A later version than 3 carries v3's fields first (see test_static_protocol.py).
    md = encode_metadata(state, 3)
    assert decode_metadata(b"\x00\x09" + md[2:] + b"\x01\x02\x03") == (
        9,
        replace(state, allocation=replace(a, version=3)),
    )


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"\xff\xff" + bytes(20), "version -1 at byte offset 0"),
        (b"\x00", "reading the version at byte offset 0"),
        (b"\x00\x00\x00\x00\x00\x05ab", "reading the leader id at byte offset 6 needs 5 bytes, only 2 left"),
        (b"\x00\x00\x00\x00\xff\xfe", "the leader id at byte offset 4 has negative length -2"),
        (b"\x00\x00\x00\x00\x00\x02\xc3\x28", "not UTF-8"),
    ],
)
def test_malformed_assignments_are_rejected_with_field_and_offset(data: bytes, message: str) -> None:
    with pytest.raises(ProtocolError, match=message):
        decode_assignment(data)


def test_malformed_entries_are_rejected() -> None:
    head = encode_assignment(CA(V1, 4))[:-12]
    at = len(head)
    with pytest.raises(ProtocolError, match=f"assigned entry count at byte offset {at} is -2"):
        decode_assignment(head + struct.pack(">i", -2))
    with pytest.raises(ProtocolError, match="1000000 assigned entries"):
        decode_assignment(head + struct.pack(">i", 1_000_000))
    with pytest.raises(
        ProtocolError, match=f"task count of assigned connector 'c' at byte offset {at + 7} is -1"
    ):
        decode_assignment(head + struct.pack(">ih1si", 1, 1, b"c", -1))
    with pytest.raises(ProtocolError, match="3 task numbers of assigned connector 'c'"):
        decode_assignment(head + struct.pack(">ih1sii", 1, 1, b"c", 3, 0))


def test_malformed_metadata_is_rejected() -> None:
    md = encode_metadata(WorkerState("u", 1), V1)  # ends with a null allocation
    with pytest.raises(ProtocolError, match="worker metadata version -3"):
        decode_metadata(b"\xff\xfd" + md[2:])
    with pytest.raises(ProtocolError, match=f"allocation length at byte offset {len(md) - 4} is -2"):
        decode_metadata(md[:-4] + struct.pack(">i", -2))
    with pytest.raises(ProtocolError, match="reading the allocation at byte offset"):
        decode_metadata(md[:-4] + struct.pack(">i", 50) + bytes(10))
    # A fault inside the allocation is reported at its offset in the whole metadata.
    inner = encode_assignment(CA(V1, 1))
    with pytest.raises(
        ProtocolError,
        match=rf"allocation in worker metadata: reading the error code at byte offset {len(md) + 2}",
    ):
        decode_metadata(md[:-4] + struct.pack(">i", 3) + inner[:3])


@pytest.mark.parametrize("name", sorted(GOLDEN))
def test_every_truncation_of_a_golden_is_rejected_or_a_valid_prefix(name: str) -> None:
    data = GOLDEN[name]
    assert data is not None
    decode = decode_metadata if name.startswith(("md_", "join_")) else decode_assignment
    for cut in range(len(data)):
        try:
            decode(data[:cut])
        except ProtocolError as e:
            assert "byte offset" in str(e)


def test_encoding_refuses_what_the_protocol_cannot_carry() -> None:
    with pytest.raises(ValueError, match="version 0"):
        encode_assignment(CA(V0, 1, revoked_tasks=T("a", 1)))
    with pytest.raises(ValueError, match="INT32"):
        encode_assignment(CA(V1, 1, (), T("a", 2**31)))
    with pytest.raises(ValueError, match="at most 32767"):
        encode_assignment(CA(V1, 1, ("x" * 40_000,)))
    with pytest.raises(ValueError, match="64-bit"):
        encode_metadata(WorkerState("u", 2**63), V0)
    with pytest.raises(ValueError, match="unknown protocol version 4"):
        encode_assignment(CA(4, 1))
    with pytest.raises(ValueError, match="unknown protocol version 4"):
        encode_metadata(WorkerState("u", 1), 4)


# ---------------------------------------------------------------------------------------------------
# Properties

names = st.text(st.characters(exclude_categories=["Cs"]), min_size=0, max_size=12)
task_numbers = st.integers(0, 2**31 - 1) | st.just(0)
task_ids = st.builds(TaskId, st.sampled_from(["a", "b", "c\u00e9", "\U0001f4a1"]) | names, task_numbers)
int16 = st.integers(-(2**15), 2**15 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)


@st.composite
def assignments(draw: st.DrawFn, version: int) -> ConnectAssignment:
    cooperative = version >= V1
    return ConnectAssignment(
        version,
        draw(int16),
        draw(names),
        draw(names),
        draw(int64),
        tuple(draw(st.lists(names, max_size=5))),
        tuple(draw(st.lists(task_ids, max_size=8))),
        tuple(draw(st.lists(names, max_size=4))) if cooperative else (),
        tuple(draw(st.lists(task_ids, max_size=6))) if cooperative else (),
        draw(st.integers(-(2**31), 2**31 - 1)) if cooperative else 0,
    )


any_assignment = st.sampled_from([V0, V1, V2]).flatmap(assignments)


@given(st.sampled_from([V0, V1, V2]).flatmap(lambda v: assignments(v)))
def test_assignment_round_trip(a: ConnectAssignment) -> None:
    data = encode_assignment(a)
    assert decode_assignment(data) == a
    assert encode_assignment(decode_assignment(data)) == data


@given(st.sampled_from([V0, V1, V2]), names, int64, st.none() | any_assignment)
def test_metadata_round_trip(
    version: int, url: str, offset: int, allocation: ConnectAssignment | None
) -> None:
    state = WorkerState(url, offset, allocation)
    data = encode_metadata(state, version)
    if version == V0:
        expected = WorkerState(url, offset)
    elif allocation is None:
        expected = state
    else:  # embedded under the metadata's version, even an eager (v0) assignment
        expected = WorkerState(url, offset, replace(allocation, version=version))
    assert decode_metadata(data) == (version, expected)


@settings(suppress_health_check=[HealthCheck.too_slow])
@given(st.binary(max_size=200))
@example(b"\x00\x01\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x7f\xff\xff\xff")
def test_arbitrary_bytes_decode_or_raise_protocol_error(data: bytes) -> None:
    for decode in (decode_assignment, decode_metadata):
        with contextlib.suppress(ProtocolError):
            decode(data)


@given(any_assignment, st.data())
def test_any_corruption_decodes_or_raises_protocol_error(a: ConnectAssignment, data: st.DataObject) -> None:
    raw = bytearray(encode_assignment(a))
    i = data.draw(st.integers(0, len(raw) - 1))
    raw[i] = data.draw(st.integers(0, 255))
    with contextlib.suppress(ProtocolError):
        decode_assignment(bytes(raw))


# ---------------------------------------------------------------------------------------------------
# Interop: Java decodes what we encode


def _interop_cases() -> Iterator[tuple[str, bytes, object]]:
    """(kind, bytes, value) triples: every golden value plus random ones from a fixed seed."""
    for _, (version, state) in EXPECTED_METADATA.items():
        yield "metadata", encode_metadata(state, version), (version, state)
    for a in EXPECTED_ASSIGNMENTS.values():
        yield "assignment", encode_assignment(a), a
    rng = random.Random(20241030)
    pool = ["a", "b", "sink-\u00e9", "\u65e5\u672c", "\U0001f4a1", "c" * 300]
    for i in range(60):
        version = (V0, V1, V2)[i % 3]
        coop = version >= V1
        a = ConnectAssignment(
            version,
            rng.choice([NO_ERROR, CONFIG_MISMATCH]),
            rng.choice(pool),
            rng.choice(pool),
            rng.randrange(-1, 2**40),
            tuple(rng.sample(pool, rng.randrange(0, 4))),
            tuple(TaskId(rng.choice(pool), rng.randrange(0, 50)) for _ in range(rng.randrange(0, 12))),
            tuple(rng.sample(pool, rng.randrange(0, 3))) if coop else (),
            tuple(TaskId(rng.choice(pool), rng.randrange(0, 50)) for _ in range(rng.randrange(0, 5)))
            if coop
            else (),
            rng.randrange(0, 300_000) if coop else 0,
        )
        yield "assignment", encode_assignment(a), a
        allocation = a if rng.random() < 0.7 else None
        state = WorkerState(f"http://w{i}.example:8083/", rng.randrange(-1, 10_000), allocation)
        md_version = rng.choice((V0, V1, V2))
        if md_version == V0:
            expected_state = WorkerState(state.url, state.config_offset)
        elif allocation is None:
            expected_state = state
        else:
            expected_state = replace(state, allocation=replace(allocation, version=md_version))
        yield "metadata", encode_metadata(state, md_version), (md_version, expected_state)


@pytest.fixture(scope="module")
def java_decoder(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    ok, why = reference_available()
    if not ok:
        pytest.skip(f"interop needs the reference Apache Kafka Connect 3.9.0: {why}")
    if shutil.which("javac") is None:
        pytest.skip("interop needs javac (JDK 17+) to compile tests/golden/GoldenProtocol.java")
    classpath = (reference_home() / "classpath.txt").read_text().strip()
    out = tmp_path_factory.mktemp("golden-java")
    subprocess.run(
        ["javac", "-nowarn", "-d", str(out), "-cp", classpath, str(GOLDEN_DIR / "GoldenProtocol.java")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return ["java", "-cp", f"{classpath}:{out}", "GoldenProtocol", "decode"]


def _java_decode(cmd: list[str], lines: list[str]) -> list[str]:
    done = subprocess.run(
        cmd, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, check=True
    )
    answers = done.stdout.splitlines()
    assert len(answers) == len(lines), done.stderr
    return answers


@pytest.mark.interop
def test_java_decodes_what_we_encode(java_decoder: list[str]) -> None:
    cases = list(_interop_cases())
    answers = _java_decode(java_decoder, [f"{kind} {data.hex()}" for kind, data, _ in cases])
    for (kind, data, value), answer in zip(cases, answers, strict=True):
        status, _, rest = answer.partition(" ")
        assert status == "OK", f"Java could not decode our {kind} {data.hex()}: {answer}"
        java_hex, _, java_text = rest.partition(" ")
        # Java re-serialized what it decoded: reading that back must give the value we encoded, so no field
        # was misread on the Java side.
        again = bytes.fromhex(java_hex)
        if kind == "metadata":
            assert decode_metadata(again) == value, java_text
            assert f"url='{value[1].url}'" in java_text  # type: ignore[index]
        else:
            assert decode_assignment(again) == value, java_text
            assert f"version={value.version} " in java_text  # type: ignore[attr-defined]


@pytest.mark.interop
def test_java_rejects_what_we_reject(java_decoder: list[str]) -> None:
    good = encode_assignment(CA(V1, 4, ("c1",), T("c1", 0)))
    bad = [good[:1], good[:7], b"\xff\xff" + good[2:], good[:-30]]
    for data in bad:
        with pytest.raises(ProtocolError):
            decode_assignment(data)
    answers = _java_decode(java_decoder, [f"assignment {d.hex()}" for d in bad])
    assert all(a.startswith("ERR ") for a in answers), answers


@pytest.mark.parametrize("version", [V1, V2])
@pytest.mark.parametrize("allocation", [None, ConnectAssignment(2, 0, "l", "http://l/", 3, ("c",), ())])
def test_leaving_flag_trails_the_java_fields_and_round_trips(
    version: int, allocation: ConnectAssignment | None
) -> None:
    staying = WorkerState("http://w:8083/", 3, allocation)
    leaving = WorkerState("http://w:8083/", 3, allocation, leaving=True)
    plain = encode_metadata(staying, version)
    flagged = encode_metadata(leaving, version)
    # A worker that is not leaving sends exactly Java's bytes; the flag only appends two bytes.
    assert flagged == plain + b"\x00\x01"
    assert decode_metadata(flagged)[1].leaving
    assert not decode_metadata(plain)[1].leaving
    assert decode_metadata(flagged)[1].allocation == decode_metadata(plain)[1].allocation
    # v0 has no room for it: an eager group never hears of a graceful leave.
    assert encode_metadata(leaving, V0) == encode_metadata(staying, V0)


@pytest.mark.parametrize("version", [V1, V2, V3])
def test_learns_flag_is_bit_2_beside_the_others(version: int) -> None:
    # Warm-up hand-over (issue 25): a worker that can learn tasks says so in the same flags field.
    state = WorkerState("http://w:8083/", 3, None, reconciles=True, learns=True)
    data = encode_metadata(state, version)
    if version < V3:
        assert data.endswith(b"\x00\x06")
    decoded = decode_metadata(data)[1]
    assert decoded.learns and decoded.reconciles and not decoded.leaving
    assert not decode_metadata(encode_metadata(WorkerState("http://w:8083/", 3, None), version))[1].learns


@pytest.mark.interop
def test_java_decodes_metadata_that_carries_the_leaving_flag(java_decoder: list[str]) -> None:
    allocation = ConnectAssignment(2, 0, "l", "http://l/", 3, ("c",), (TaskId("c", 0),))
    cases = [WorkerState("http://w:8083/", 3, a, leaving=True) for a in (None, allocation)]
    lines = [f"metadata {encode_metadata(s, v).hex()}" for s in cases for v in (V1, V2)]
    answers = _java_decode(java_decoder, lines)
    assert all(a.startswith("OK ") for a in answers), answers
    for answer in answers:
        # What Java re-encodes is the same worker without our trailing field.
        again = decode_metadata(bytes.fromhex(answer.split(" ")[1]))[1]
        assert again.url == "http://w:8083/" and not again.leaving
