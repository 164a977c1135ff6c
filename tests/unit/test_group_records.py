"""Group records of the KIP-848 seed: codecs against bytes from Kafka's own serialization library, the fold,
changed_records and the described view.

``tests/golden/group_records.txt`` was produced by ``tests/golden/GoldenGroupRecords.java``
(``tests/golden/regenerate.sh``) with kafka-clients 3.9.0's schema types. Every golden is decoded to the
value Java was given and, except for the ones carrying unknown tagged fields, re-encoded byte for byte; the
interop test at the end has Java decode what we encode.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from structlog.testing import capture_logs

from kconnect.runtime.group.group_records import (
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
    GroupRecordError,
    GroupRecords,
    GroupState,
    Learner,
    MemberMetadataKey,
    MemberMetadataValue,
    RecordKey,
    RecordValue,
    TargetAssignmentKey,
    TargetAssignmentValue,
    TargetMember,
    apply,
    changed_records,
    decode_key,
    decode_value,
    encode_key,
    encode_value,
    partition_for,
)
from kconnect.runtime.group.group_view import describe
from kconnect.runtime.group.protocol import (
    V2,
    ConnectAssignment,
    WorkerState,
    encode_assignment,
    encode_metadata,
)
from kconnect.runtime.ids import TaskId
from tests.support.reference import reference_available, reference_home

GOLDEN_DIR = Path(__file__).resolve().parents[1] / "golden"
GOLDEN_FILE = GOLDEN_DIR / "group_records.txt"

G = "connect-cluster"
W1, W2 = "worker-1-4f2a", "worker-2-9c1d"


def T(connector: str, *numbers: int) -> frozenset[TaskId]:
    return frozenset(TaskId(connector, n) for n in numbers)


def A(connectors: tuple[str, ...] = (), tasks: frozenset[TaskId] = frozenset()) -> Assigned:
    return Assigned(frozenset(connectors), tasks)


W1_METADATA = encode_metadata(
    WorkerState(
        "http://w1:8083/",
        12,
        ConnectAssignment(2, 0, W1, "http://w1:8083/", 12, ("sink-a",), tuple(sorted(T("sink-a", 0, 1)))),
    ),
    V2,
)
W1_ASSIGNMENT = encode_assignment(
    ConnectAssignment(2, 0, W1, "http://w1:8083/", 12, ("sink-a",), tuple(sorted(T("sink-a", 0, 1))))
)
W2_ASSIGNMENT = encode_assignment(
    ConnectAssignment(2, 0, W1, "http://w1:8083/", 12, (), (), ("sink-a",), (TaskId("sink-a", 2),), 30000)
)
MEMBER = MemberMetadataValue(
    42,
    "w1",
    "connect-1",
    "/10.0.0.1",
    ("connect-configs", "connect-status"),
    "",
    (Assignor("sessioned", 0, 2, 0, 2, W1_METADATA), Assignor("default", 0, 0, -1, 0, b"")),
)
TARGET = TargetAssignmentValue(
    43,
    (
        TargetMember(W1, 0, A(("sink-a",), T("sink-a", 0, 1)), 2, W1_ASSIGNMENT),
        TargetMember(W2, 1, A((), T("source-b", 0)), 2, W2_ASSIGNMENT),
    ),
)

#: What GoldenGroupRecords.java was given, by golden name: keys and (key, value) pairs.
GOLDEN_KEYS: dict[str, RecordKey] = {
    "key_group_metadata": GroupMetadataKey(G),
    "key_connectors_tasks": ConnectorsTasksKey(G),
    "key_member_metadata": MemberMetadataKey(G, W1),
    "key_target_assignment": TargetAssignmentKey(G),
    "key_current_member_assignment": CurrentMemberAssignmentKey(G, W1),
    "key_group_configuration": GroupConfigurationKey(G),
    "key_unicode": MemberMetadataKey("gr\u00fcppe-\u2603", "m\u00e9mber-\U0001f4a1"),
    "key_empty_strings": CurrentMemberAssignmentKey("", ""),
}
GOLDEN_VALUES: dict[str, tuple[RecordKey, RecordValue]] = {
    "value_group_metadata": (GroupMetadataKey(G), GroupMetadataValue(42)),
    "value_group_metadata_min_epoch": (GroupMetadataKey(G), GroupMetadataValue(-(2**31))),
    "value_connectors_tasks": (
        ConnectorsTasksKey(G),
        ConnectorsTasksValue(7, A(("sink-a", "source-b"), T("sink-a", 0, 1, 2) | T("source-b", 0))),
    ),
    "value_connectors_tasks_empty": (ConnectorsTasksKey(G), ConnectorsTasksValue(0, A())),
    "value_member_metadata": (MemberMetadataKey(G, W1), MEMBER),
    "value_member_metadata_bare": (
        MemberMetadataKey(G, W1),
        MemberMetadataValue(-1, "", "", "", (), "connect-.*", ()),
    ),
    "value_target_assignment": (TargetAssignmentKey(G), TARGET),
    "value_target_assignment_empty": (TargetAssignmentKey(G), TargetAssignmentValue(0, ())),
    "value_current_member_assignment": (
        CurrentMemberAssignmentKey(G, W1),
        CurrentMemberAssignmentValue(
            43, 0, A(("sink-a",), T("sink-a", 0, 1) | T("source-b", 2**31 - 1)), 2, b"\x01\x02\x03"
        ),
    ),
    "value_group_configuration": (
        GroupConfigurationKey(G),
        GroupConfigurationValue(
            (("scheduled.rebalance.max.delay.ms", "300000"), ("session.timeout.ms", "10000"))
        ),
    ),
    "value_group_configuration_long": (
        GroupConfigurationKey(G),
        GroupConfigurationValue((("long", "x" * 300),)),
    ),
}
#: Goldens our writer never produces (several ConnectorsTasks elements, unknown tagged fields): decoded only.
GOLDEN_DECODE_ONLY: dict[str, tuple[RecordKey, RecordValue]] = {
    "value_connectors_tasks_two_elements": (
        ConnectorsTasksKey(G),
        ConnectorsTasksValue(8, A(("a", "b"), T("a", 0, 1) | T("b", 0))),
    ),
    "tagged_group_configuration": (GroupConfigurationKey(G), GroupConfigurationValue((("k", "v"),))),
    "tagged_connectors_tasks": (ConnectorsTasksKey(G), ConnectorsTasksValue(9, A(("a",), T("a", 0)))),
}


def _golden() -> tuple[dict[str, bytes], list[tuple[str, int, int]]]:
    cases: dict[str, bytes] = {}
    partitions: list[tuple[str, int, int]] = []
    for line in GOLDEN_FILE.read_text().splitlines():
        if not line or line.startswith("#"):
            continue
        parts = line.split(" ")
        if parts[0] == "partition_for":
            group = "" if parts[1] == "-" else bytes.fromhex(parts[1]).decode("utf-8")
            partitions.append((group, int(parts[2]), int(parts[3])))
        else:
            cases[parts[0]] = bytes.fromhex(parts[1])
    return cases, partitions


GOLDEN, GOLDEN_PARTITIONS = _golden()


def test_every_golden_case_is_checked() -> None:
    assert set(GOLDEN) == set(GOLDEN_KEYS) | set(GOLDEN_VALUES) | set(GOLDEN_DECODE_ONLY)
    assert len(GOLDEN_PARTITIONS) >= 20


@pytest.mark.parametrize("name", sorted(GOLDEN_KEYS))
def test_keys_match_kafkas_bytes(name: str) -> None:
    key = GOLDEN_KEYS[name]
    assert encode_key(key) == GOLDEN[name]
    assert decode_key(GOLDEN[name]) == key


@pytest.mark.parametrize("name", sorted(GOLDEN_VALUES))
def test_values_match_kafkas_bytes(name: str) -> None:
    key, value = GOLDEN_VALUES[name]
    assert encode_value(value) == GOLDEN[name]
    assert decode_value(key, GOLDEN[name]) == value


@pytest.mark.parametrize("name", sorted(GOLDEN_DECODE_ONLY))
def test_readers_take_the_union_and_skip_unknown_tagged_fields(name: str) -> None:
    key, value = GOLDEN_DECODE_ONLY[name]
    assert decode_value(key, GOLDEN[name]) == value


@pytest.mark.parametrize(("group", "partitions", "expected"), GOLDEN_PARTITIONS)
def test_partition_for_is_kafkas_coordinator_placement(group: str, partitions: int, expected: int) -> None:
    assert partition_for(group, partitions) == expected


def test_partition_for_rejects_no_partitions() -> None:
    with pytest.raises(ValueError, match="partitions must be positive"):
        partition_for("g", 0)


# ---------------------------------------------------------------------------------------------------
# Round trips (hypothesis)

text = st.text(max_size=20)
i8, i16, i32 = (st.integers(-(2 ** (b - 1)), 2 ** (b - 1) - 1) for b in (8, 16, 32))
assigned = st.builds(
    Assigned,
    st.frozensets(text, max_size=4),
    st.frozensets(st.builds(TaskId, text, i32), max_size=6),
)
keys: st.SearchStrategy[RecordKey] = st.one_of(
    st.builds(GroupMetadataKey, text),
    st.builds(ConnectorsTasksKey, text),
    st.builds(MemberMetadataKey, text, text),
    st.builds(TargetAssignmentKey, text),
    st.builds(CurrentMemberAssignmentKey, text, text),
    st.builds(GroupConfigurationKey, text),
)
member_values = st.builds(
    MemberMetadataValue,
    i32,
    text,
    text,
    text,
    st.lists(text, max_size=3).map(tuple),
    text,
    st.lists(st.builds(Assignor, text, i16, i16, i8, i16, st.binary(max_size=30)), max_size=3).map(tuple),
)
i64 = st.integers(-(2**63), 2**63 - 1)
learners = st.frozensets(st.builds(Learner, st.builds(TaskId, text, i32), st.booleans(), i64), max_size=4)
target_values = st.builds(
    TargetAssignmentValue,
    i32,
    st.lists(
        st.builds(TargetMember, text, i8, assigned, i16, st.binary(max_size=30), learners), max_size=3
    ).map(tuple),
)
current_values = st.builds(
    CurrentMemberAssignmentValue, i32, i8, assigned, i16, st.binary(max_size=30), learners
)
config_values = st.builds(GroupConfigurationValue, st.lists(st.tuples(text, text), max_size=4).map(tuple))


def _value_for(key: RecordKey) -> st.SearchStrategy[RecordValue]:
    if isinstance(key, GroupMetadataKey):
        return st.builds(GroupMetadataValue, i32)
    if isinstance(key, ConnectorsTasksKey):
        return st.builds(ConnectorsTasksValue, i32, assigned)
    if isinstance(key, MemberMetadataKey):
        return member_values
    if isinstance(key, TargetAssignmentKey):
        return target_values
    if isinstance(key, CurrentMemberAssignmentKey):
        return current_values
    return config_values


records = keys.flatmap(lambda k: st.tuples(st.just(k), _value_for(k)))


@given(records)
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow])
def test_every_record_round_trips(record: tuple[RecordKey, RecordValue]) -> None:
    key, value = record
    assert decode_key(encode_key(key)) == key
    data = encode_value(value)
    assert decode_value(key, data) == value
    assert encode_value(decode_value(key, data)) == data  # equal values encode to equal bytes


@given(records, st.data())
@settings(max_examples=200)
def test_every_truncation_is_a_clear_error(
    record: tuple[RecordKey, RecordValue], data: st.DataObject
) -> None:
    key, value = record
    whole = encode_value(value)
    cut = data.draw(st.integers(0, len(whole) - 1))
    with pytest.raises(GroupRecordError):
        decode_value(key, whole[:cut])
    with pytest.raises(GroupRecordError, match="trailing bytes"):
        decode_value(key, whole + b"\x00")


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        (b"\x00\x02\x00\x01g", None, "unknown group record key version 2"),
        (b"\x00\x09\x00\x01g", None, "unknown group record key version 9"),
        (b"\x00", None, "truncated group record key"),
        (b"\x00\x03\x00\x05g", None, "truncated group record key: the group id"),
        (b"\x00\x03\x00\x01gX", None, "1 trailing bytes"),
        (b"\x00\x03\xff\xff", None, "the field is not nullable"),
        (b"\x00\x03\x00\x01\xff", None, "not UTF-8"),
        (encode_key(GroupMetadataKey("g")), b"\x00\x01\x00\x00\x00\x01\x00", "unknown value version 1"),
        (encode_key(GroupMetadataKey("g")), b"\x00\x00\x00\x00", "truncated value of GroupMetadataKey"),
        (encode_key(GroupConfigurationKey("g")), b"\x00\x00\x02\x00\x01\x00\x00", "is null"),
        (
            encode_key(GroupConfigurationKey("g")),
            b"\x00\x00\xff\xff\xff\xff\xff\x00",
            "not a valid unsigned varint",
        ),
        (encode_key(GroupConfigurationKey("g")), b"\x00\x00\x7f\x00", "claims 126 elements"),
    ],
)
def test_malformed_records_raise_errors_naming_the_problem(
    key: bytes, value: bytes | None, message: str
) -> None:
    with pytest.raises(GroupRecordError, match=message):
        decoded = decode_key(key)
        assert value is not None
        decode_value(decoded, value)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (GroupMetadataValue(2**31), "epoch must be a signed 32-bit integer"),
        (CurrentMemberAssignmentValue(1, 128, A(), 0, b""), "error must be a signed 8-bit integer"),
        (CurrentMemberAssignmentValue(1, 0, A(), 0x8000, b""), "version must be a signed 16-bit integer"),
        (GroupConfigurationValue((("k", "\u00e9" * 20000),)), "at most 32767"),
        (ConnectorsTasksValue(1, A((), T("c", 2**31))), "task id of 'c'"),
    ],
)
def test_values_out_of_range_are_refused_on_encode(value: RecordValue, message: str) -> None:
    with pytest.raises(GroupRecordError, match=message):
        encode_value(value)


# ---------------------------------------------------------------------------------------------------
# The fold


def _fold(pairs: list[tuple[bytes | None, bytes | None]], start: GroupRecords | None = None) -> GroupRecords:
    state = start or GroupRecords()
    for offset, (k, v) in enumerate(pairs):
        state = apply(state, k, v, offset=offset, timestamp_ms=1_000 + offset)
    return state


def _rec(key: RecordKey, value: RecordValue | None) -> tuple[bytes, bytes | None]:
    return encode_key(key), None if value is None else encode_value(value)


FULL_GROUP: list[tuple[RecordKey, RecordValue]] = [
    (MemberMetadataKey(G, W1), MEMBER),
    (MemberMetadataKey(G, W2), MemberMetadataValue(42, "w2", "connect-2", "/10.0.0.2")),
    (
        ConnectorsTasksKey(G),
        ConnectorsTasksValue(42, A(("sink-a",), T("sink-a", 0, 1, 2) | T("source-b", 0))),
    ),
    (TargetAssignmentKey(G), TARGET),
    (CurrentMemberAssignmentKey(G, W1), CurrentMemberAssignmentValue(43, 0, A(("sink-a",)), 2, b"")),
    (CurrentMemberAssignmentKey(G, W2), CurrentMemberAssignmentValue(41, 0, A(), 2, b"")),
    (GroupConfigurationKey(G), GroupConfigurationValue((("session.timeout.ms", "10000"),))),
    (GroupMetadataKey(G), GroupMetadataValue(43)),
]


def test_fold_builds_the_group_and_tombstones_remove_members() -> None:
    folded = _fold([_rec(k, v) for k, v in FULL_GROUP])
    state = folded.groups[G]
    assert state.epoch == 43
    assert set(state.members) == {W1, W2}
    assert state.members[W1] == MEMBER
    assert state.target == TARGET and state.target_timestamp_ms == 1_003
    assert set(state.current) == {W1, W2}
    assert state.configuration == GroupConfigurationValue((("session.timeout.ms", "10000"),))
    assert state.last_offset == len(FULL_GROUP) - 1

    after = _fold(
        [_rec(MemberMetadataKey(G, W2), None), _rec(CurrentMemberAssignmentKey(G, W2), None)], folded
    ).groups[G]
    assert set(after.members) == {W1} and set(after.current) == {W1}
    assert after.target == TARGET  # group-level records are untouched by a member's tombstones

    cleared = _fold([_rec(TargetAssignmentKey(G), None), _rec(GroupMetadataKey(G), None)], folded).groups[G]
    assert cleared.target is None and cleared.target_timestamp_ms is None and cleared.epoch is None


def test_a_group_whose_every_record_is_tombstoned_is_gone() -> None:
    folded = _fold([_rec(k, v) for k, v in FULL_GROUP])
    gone = _fold([_rec(k, None) for k, _ in FULL_GROUP], folded)
    assert G not in gone.groups


def test_groups_are_kept_apart() -> None:
    folded = _fold(
        [
            _rec(GroupMetadataKey("a"), GroupMetadataValue(1)),
            _rec(GroupMetadataKey("b"), GroupMetadataValue(2)),
        ]
    )
    assert {g: s.epoch for g, s in folded.groups.items()} == {"a": 1, "b": 2}


def test_tombstone_for_an_unknown_group_changes_nothing() -> None:
    empty = GroupRecords()
    assert apply(empty, encode_key(MemberMetadataKey(G, W1)), None, offset=0, timestamp_ms=0) is empty


@pytest.mark.parametrize(
    ("key", "value", "event"),
    [
        (None, b"\x00\x00", "skipping group record without a key"),
        (b"\x00\x63\x00\x01g", b"\x00\x00", "skipping group record whose key does not decode"),
        (b"\x01", b"", "skipping group record whose key does not decode"),
        (encode_key(GroupMetadataKey(G)), b"\x00\x05\x00\x00\x00\x01\x00", "value does not decode"),
        (encode_key(GroupMetadataKey(G)), b"\x00\x00\x00", "value does not decode"),
        (encode_key(TargetAssignmentKey(G)), encode_value(TARGET)[:-5], "value does not decode"),
    ],
)
def test_corrupt_records_are_skipped_with_a_warning(
    key: bytes | None, value: bytes | None, event: str
) -> None:
    before = _fold([_rec(k, v) for k, v in FULL_GROUP])
    with capture_logs() as logs:
        after = apply(before, key, value, offset=77, timestamp_ms=5)
    assert after is before
    assert len(logs) == 1
    entry = logs[0]
    assert entry["log_level"] == "warning" and event in entry["event"]
    assert entry["offset"] == 77
    if key is not None:
        assert key.hex() in (entry.get("key", ""), entry.get("key_hex", ""))
        assert entry["error"]


@given(st.binary(max_size=40), st.one_of(st.none(), st.binary(max_size=60)))
@settings(max_examples=300)
def test_apply_never_raises(key: bytes, value: bytes | None) -> None:
    before = _fold([_rec(k, v) for k, v in FULL_GROUP])
    apply(before, key, value, offset=1, timestamp_ms=1)


@given(st.lists(records, max_size=12))
@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow])
def test_fold_keeps_the_last_value_per_key(history: list[tuple[RecordKey, RecordValue]]) -> None:
    folded = _fold([_rec(k, v) for k, v in history])
    last: dict[RecordKey, RecordValue] = {}
    for k, v in history:
        last[k] = v
    # Everything the fold holds is the last value written for its key, so rewriting it changes nothing.
    for k, v in last.items():
        assert changed_records(folded.groups.get(k.group_id), [(k, v)]) == []


# ---------------------------------------------------------------------------------------------------
# changed_records


def test_changed_records_drops_what_the_topic_already_holds() -> None:
    state = _fold([_rec(k, v) for k, v in FULL_GROUP]).groups[G]
    assert changed_records(state, FULL_GROUP) == []
    bumped = (GroupMetadataKey(G), GroupMetadataValue(44))
    new_member = (MemberMetadataKey(G, "w3"), MemberMetadataValue(44, "w3", "c", "h"))
    assert changed_records(state, [*FULL_GROUP, new_member, bumped]) == [_rec(*new_member), _rec(*bumped)]


def test_changed_records_writes_tombstones_only_for_entities_held() -> None:
    state = _fold([_rec(k, v) for k, v in FULL_GROUP]).groups[G]
    desired: list[tuple[RecordKey, RecordValue | None]] = [
        (MemberMetadataKey(G, W2), None),
        (CurrentMemberAssignmentKey(G, W2), None),
        (MemberMetadataKey(G, "never-there"), None),
        (CurrentMemberAssignmentKey("other-group", W1), None),
    ]
    assert changed_records(state, desired) == [
        (encode_key(MemberMetadataKey(G, W2)), None),
        (encode_key(CurrentMemberAssignmentKey(G, W2)), None),
    ]
    assert changed_records(None, desired) == []
    assert changed_records(None, FULL_GROUP[:1]) == [_rec(*FULL_GROUP[0])]


def test_changed_records_compares_values_not_their_order() -> None:
    state = _fold([_rec(GroupConfigurationKey(G), GroupConfigurationValue((("a", "1"), ("b", "2"))))]).groups[
        G
    ]
    assert (
        changed_records(
            state, [(GroupConfigurationKey(G), GroupConfigurationValue((("b", "2"), ("a", "1"))))]
        )
        == []
    )


# ---------------------------------------------------------------------------------------------------
# describe


def test_describe_shows_members_target_current_and_the_scheduled_delay() -> None:
    state = _fold([_rec(k, v) for k, v in FULL_GROUP]).groups[G]
    view = describe(state, now_ms=11_003)
    assert view["group"] == G and view["epoch"] == 43
    assert view["connectors_tasks"] == {
        "epoch": 42,
        "connectors": ["sink-a"],
        "tasks": ["sink-a-0", "sink-a-1", "sink-a-2", "source-b-0"],
    }
    w1 = view["members"][0]
    assert w1["member_id"] == W1 and w1["client_host"] == "/10.0.0.1"
    sessioned = w1["assignors"][0]
    assert sessioned["name"] == "sessioned" and sessioned["version"] == 2
    assert sessioned["metadata"]["url"] == "http://w1:8083/"
    assert sessioned["metadata"]["config_offset"] == 12
    assert sessioned["metadata"]["allocation"] == {
        "connectors": ["sink-a"],
        "tasks": ["sink-a-0", "sink-a-1"],
    }
    assert w1["assignors"][1]["metadata"] is None  # empty metadata: nothing to decode
    target = {m["member_id"]: m for m in view["target"]["members"]}
    assert view["target"]["assignment_epoch"] == 43
    assert target[W1]["connectors"] == ["sink-a"] and target[W1]["tasks"] == ["sink-a-0", "sink-a-1"]
    assert target[W2]["error"] == 1 and target[W2]["tasks"] == ["source-b-0"]
    assert target[W2]["assignment"]["delay_ms"] == 30000
    assert target[W2]["assignment"]["revoked"] == {"connectors": ["sink-a"], "tasks": ["sink-a-2"]}
    assert (
        target[W1]["assignment"]["leader"] == W1
        and target[W1]["assignment"]["leader_url"] == "http://w1:8083/"
    )
    assert [c["member_id"] for c in view["current"]] == [W1, W2]
    assert view["current"][0] == {
        "member_id": W1,
        "member_epoch": 43,
        "connectors": ["sink-a"],
        "tasks": [],
        "learners": [],
        "error": 0,
    }
    assert view["configuration"] == {"session.timeout.ms": "10000"}
    # The target record was written at timestamp 1_003 with a 30 s delay.
    assert view["scheduled_rebalance"] == {"due_ms": 31_003, "remaining_ms": 20_000}
    assert describe(state, now_ms=99_999)["scheduled_rebalance"] == {"due_ms": 31_003, "remaining_ms": 0}
    assert view["vanished"] == []


def test_describe_lists_vanished_members_and_no_delay_without_one() -> None:
    state = _fold([_rec(k, v) for k, v in FULL_GROUP] + [_rec(MemberMetadataKey(G, W2), None)]).groups[G]
    assert describe(state, now_ms=0)["vanished"] == [W2]
    no_delay = TargetAssignmentValue(
        44, (TargetMember(W1, 0, A(), 2, W1_ASSIGNMENT), TargetMember(W2, 0, A(), 0, b"junk"))
    )
    state = _fold([_rec(TargetAssignmentKey(G), no_delay)]).groups[G]
    view = describe(state, now_ms=0)
    assert view["scheduled_rebalance"] is None
    assert view["target"]["members"][1]["assignment"] is None
    assert view["epoch"] is None and view["members"] == [] and view["configuration"] is None


def test_describe_of_an_empty_state_is_json_ready() -> None:
    import json

    view = describe(GroupState("g"), now_ms=0)
    assert json.loads(json.dumps(view)) == view
    assert view["target"] is None and view["connectors_tasks"] is None and view["current"] == []


# ---------------------------------------------------------------------------------------------------
# Interop: Java decodes what we encode


@pytest.fixture(scope="module")
def java_decoder(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    ok, why = reference_available()
    if not ok:
        pytest.skip(f"interop needs the reference Apache Kafka Connect 3.9.0: {why}")
    if shutil.which("javac") is None:
        pytest.skip("interop needs javac (JDK 17+) to compile tests/golden/GoldenGroupRecords.java")
    classpath = (reference_home() / "classpath.txt").read_text().strip()
    out = tmp_path_factory.mktemp("golden-group-records")
    subprocess.run(
        ["javac", "-nowarn", "-d", str(out), "-cp", classpath, str(GOLDEN_DIR / "GoldenGroupRecords.java")],
        check=True,
        capture_output=True,
        timeout=120,
    )
    return ["java", "-cp", f"{classpath}:{out}", "GoldenGroupRecords", "decode"]


_TYPES = {
    GroupMetadataKey: 3,
    ConnectorsTasksKey: 4,
    MemberMetadataKey: 5,
    TargetAssignmentKey: 6,
    CurrentMemberAssignmentKey: 7,
    GroupConfigurationKey: 8,
}


@pytest.mark.interop
@given(st.lists(records, min_size=60, max_size=60))
@settings(
    max_examples=3,
    deadline=None,
    phases=[Phase.generate],  # a failure names its line; shrinking 60 records through Java takes minutes
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
def test_java_decodes_what_we_encode(
    java_decoder: list[str], random_records: list[tuple[RecordKey, RecordValue]]
) -> None:
    samples = [GOLDEN_VALUES[n] for n in sorted(GOLDEN_VALUES)] + random_records
    lines: list[str] = []
    expected: list[bytes] = []
    for key, value in samples:
        lines.append(f"key {encode_key(key).hex()}")
        expected.append(encode_key(key))
        lines.append(f"value {_TYPES[type(key)]} {encode_value(value).hex()}")
        expected.append(encode_value(value))
    done = subprocess.run(
        java_decoder, input="\n".join(lines) + "\n", capture_output=True, text=True, timeout=120, check=True
    )
    answers = done.stdout.split("\n")[:-1]
    assert len(answers) == len(lines), done.stderr
    for line, want, answer in zip(lines, expected, answers, strict=True):
        status, _, rest = answer.partition(" ")
        assert status == "OK", f"Java could not decode our {line}: {answer}"
        # Java re-serialized what it read with the same schema: equal bytes mean no field was misread.
        assert rest.partition(" ")[0] == want.hex(), f"{line}: {answer}"


@pytest.mark.interop
def test_java_rejects_what_we_reject(java_decoder: list[str]) -> None:
    good = encode_value(TARGET)
    bad = [good[:1], good[:9], good[:-3], good + b"\x00"]
    for data in bad:
        with pytest.raises(GroupRecordError):
            decode_value(TargetAssignmentKey(G), data)
    done = subprocess.run(
        java_decoder,
        input="".join(f"value 6 {d.hex()}\n" for d in bad),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert all(a.startswith("ERR ") for a in done.stdout.splitlines()), done.stdout


# ---------------------------------------------------------------------------------------------------
# Learners (issue 25): tagged fields, so records without them keep their bytes and older readers skip them

LEARNING = frozenset(
    {Learner(TaskId("sink-a", 2), False, 1_700_000_000_000), Learner(TaskId("b", 0), True, 5)}
)


def _learners_tag(entries: bytes, count: int) -> bytes:
    """Tag 0 holding ``count`` already encoded learner entries, as the only tagged field."""
    body = bytes([count + 1]) + entries
    return b"\x01\x00" + bytes([len(body)]) + body


def _entry(connector: str, task: int, is_learner: int, ready: int, since_ms: int) -> bytes:
    name = connector.encode()
    return (
        bytes([len(name) + 1])
        + name
        + task.to_bytes(4, "big", signed=True)
        + bytes([is_learner, ready])
        + since_ms.to_bytes(8, "big", signed=True)
        + b"\x00"
    )


def test_records_without_learners_keep_their_bytes() -> None:
    # The goldens above are Java's bytes for records without learners; a record that has some differs only
    # by its tag section, which Java (and an older kconnect) skips.
    plain = CurrentMemberAssignmentValue(3, 0, A(("a",)), 2, b"")
    with_learners = CurrentMemberAssignmentValue(3, 0, A(("a",)), 2, b"", LEARNING)
    assert encode_value(with_learners).startswith(encode_value(plain)[:-1])
    assert encode_value(plain).endswith(b"\x00")
    member = TargetMember(W1, 0, A(), 2, b"")
    assert encode_value(TargetAssignmentValue(1, (member,))) != encode_value(
        TargetAssignmentValue(1, (TargetMember(W1, 0, A(), 2, b"", LEARNING),))
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        (CurrentMemberAssignmentKey(G, W1), CurrentMemberAssignmentValue(9, 0, A(("a",)), 2, b"x", LEARNING)),
        (
            TargetAssignmentKey(G),
            TargetAssignmentValue(
                9,
                (
                    TargetMember(W1, 0, A(("a",), T("a", 0)), 2, b"", frozenset()),
                    TargetMember(W2, 0, A(), 2, b"m", LEARNING),
                ),
            ),
        ),
    ],
    ids=["current", "target"],
)
def test_learners_round_trip_and_older_readers_skip_them(key: RecordKey, value: RecordValue) -> None:
    data = encode_value(value)
    assert decode_value(key, data) == value
    # What a reader without learners sees: the same record with none (the tags are skipped).
    if isinstance(value, CurrentMemberAssignmentValue):
        bare: RecordValue = CurrentMemberAssignmentValue(
            value.member_epoch, value.error, value.assigned, value.version, value.metadata
        )
    else:
        assert isinstance(value, TargetAssignmentValue)
        bare = TargetAssignmentValue(
            value.assignment_epoch,
            tuple(
                TargetMember(m.member_id, m.error, m.assigned, m.version, m.metadata) for m in value.members
            ),
        )
    assert decode_value(key, encode_value(bare)) == bare


def test_learner_entries_carry_the_seeds_tags() -> None:
    value = CurrentMemberAssignmentValue(1, 0, A(), 2, b"", frozenset({Learner(TaskId("c", 3), True, 7)}))
    assert encode_value(value).endswith(_learners_tag(_entry("c", 3, 1, 1, 7), 1))


def _current_with(tags: bytes) -> bytes:
    return encode_value(CurrentMemberAssignmentValue(4, 0, A(("a",)), 2, b""))[:-1] + tags


def test_an_entry_without_is_learner_is_skipped() -> None:
    # The seed's other use of the tag (an active owner's task marked "being learned") is not a learner.
    tags = _learners_tag(_entry("c", 0, 0, 1, 5) + _entry("c", 1, 1, 0, 5), 2)
    decoded = decode_value(CurrentMemberAssignmentKey(G, W1), _current_with(tags))
    assert isinstance(decoded, CurrentMemberAssignmentValue)
    assert decoded.learners == frozenset({Learner(TaskId("c", 1), False, 5)})


@pytest.mark.parametrize(
    "tags",
    [
        _learners_tag(_entry("c", 0, 1, 1, 5)[:-3], 1),  # an entry cut short inside the field
        _learners_tag(_entry("c", 0, 1, 1, 5) + b"\x07", 1),  # trailing bytes inside the field
        b"\x01\x00\x01\x00",  # a null learners array
        b"\x01\x00\x02\x02\x05",  # a count the field cannot hold
    ],
    ids=["truncated-entry", "trailing-byte", "null-array", "bad-count"],
)
def test_corrupt_learners_are_skipped_with_a_warning_and_the_record_kept(tags: bytes) -> None:
    key = CurrentMemberAssignmentKey(G, W1)
    with capture_logs() as logs:
        decoded = decode_value(key, _current_with(tags))
    assert decoded == CurrentMemberAssignmentValue(4, 0, A(("a",)), 2, b"")
    assert [entry["event"] for entry in logs] == ["skipping learners that do not decode"]
    assert W1 in logs[0]["where"] and logs[0]["error"]
    # The fold keeps the record too.
    state = apply(GroupRecords(), encode_key(key), _current_with(tags), offset=3, timestamp_ms=1).groups[G]
    assert state.current[W1].assigned == A(("a",))


def test_unknown_tags_beside_the_learners_are_skipped() -> None:
    learners = _learners_tag(_entry("c", 0, 1, 0, 5), 1)
    tags = b"\x02\x00" + learners[2:] + b"\x09\x02\xab\xcd"  # tag 0, then an unknown tag 9
    decoded = decode_value(CurrentMemberAssignmentKey(G, W1), _current_with(tags))
    assert isinstance(decoded, CurrentMemberAssignmentValue)
    assert decoded.learners == frozenset({Learner(TaskId("c", 0), False, 5)})


def test_describe_shows_learners_with_their_tags() -> None:
    learner = Learner(TaskId("sink-a", 2), True, 1_000)
    target = TargetAssignmentValue(5, (TargetMember(W2, 0, A(), 2, b"", frozenset({learner})),))
    current = CurrentMemberAssignmentValue(5, 0, A(), 2, b"", frozenset({learner}))
    state = _fold([_rec(TargetAssignmentKey(G), target), _rec(CurrentMemberAssignmentKey(G, W2), current)])
    view = describe(state.groups[G], now_ms=0)
    shown = [{"task": "sink-a-2", "is_learner": True, "is_ready": True, "since_ms": 1_000}]
    assert view["target"]["members"][0]["learners"] == shown
    assert view["current"][0]["learners"] == shown
