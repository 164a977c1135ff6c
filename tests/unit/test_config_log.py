"""Config-topic codec and fold: golden bytes from Java, corrupt records, and the Java fold rules.

The golden values were produced by Apache Kafka Connect 3.9.0 itself (connect-runtime/connect-json
3.9.0 jars of tools/reference-connect, Jackson 2.16.2, JDK 17): Structs built from
KafkaConfigBackingStore's public schemas CONNECTOR_CONFIGURATION_V0, TASK_CONFIGURATION_V0,
CONNECTOR_TASKS_COMMIT_V0, TARGET_STATE_V1 (filled as serializeTargetState does: "state" = PAUSED for
STOPPED, "state.v2" = the name), TARGET_STATE_V0, SESSION_KEY_V0, RESTART_REQUEST_V0,
TASK_COUNT_RECORD_V0 and LOGGER_LEVEL_V0, serialised by a JsonConverter configured as the worker's
internal converter (schemas.enable=false). Property maps were LinkedHashMaps, so key order is insertion
order. The fold rules follow the 3.9.0 bytecode of KafkaConfigBackingStore (processConnectorConfigRecord,
processTasksCommitRecord, processConnectorRemoval, processTargetStateRecord, processTaskCountRecord) and
ClusterConfigState (tasks(), taskCount()).
"""

from __future__ import annotations

import base64
from dataclasses import FrozenInstanceError

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import config_log as cl
from kconnect.runtime.storage.config_log import (
    ConfigState,
    ConnectorConfig,
    ConnectorDeletion,
    CorruptRecord,
    LoggerLevel,
    RestartRequest,
    SessionKeyRecord,
    TargetState,
    TargetStateDeletion,
    TargetStateRecord,
    TaskCommit,
    TaskConfig,
    TaskCountRecord,
)

SESSION_KEY_B64 = "AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09o="  # bytes (i * 7 + 1) for i in 0..31
TRICKY = {
    'quote"back\\slash/': "tab\there\nnl\r\b\f",
    "ctl": "\x01\x1f\x7f",
    "uni": "h\u00e9llo \u4e16\u754c \U0001f600 \u2028",
    "nullval": None,
    "empty": "",
}

GOLDEN: list[tuple[cl.ConfigRecord, bytes, bytes | None]] = [
    (
        ConnectorConfig("foo", {"connector.class": "FileStreamSource", "tasks.max": "2", "name": "foo"}),
        b"connector-foo",
        b'{"properties":{"connector.class":"FileStreamSource","tasks.max":"2","name":"foo"}}',
    ),
    (
        TaskConfig(TaskId("foo", 0), TRICKY),
        b"task-foo-0",
        b'{"properties":{"quote\\"back\\\\slash/":"tab\\there\\nnl\\r\\b\\f","ctl":"\\u0001\\u001F\x7f",'
        b'"uni":"h\xc3\xa9llo \xe4\xb8\x96\xe7\x95\x8c \\uD83D\\uDE00 \xe2\x80\xa8",'
        b'"nullval":null,"empty":""}}',
    ),
    (TaskConfig(TaskId("foo", 1), {}), b"task-foo-1", b'{"properties":{}}'),
    (TaskCommit("foo", 2), b"commit-foo", b'{"tasks":2}'),
    (
        TargetStateRecord("foo", TargetState.STARTED),
        b"target-state-foo",
        b'{"state":"STARTED","state.v2":"STARTED"}',
    ),
    (
        TargetStateRecord("foo", TargetState.PAUSED),
        b"target-state-foo",
        b'{"state":"PAUSED","state.v2":"PAUSED"}',
    ),
    (
        TargetStateRecord("foo", TargetState.STOPPED),
        b"target-state-foo",
        b'{"state":"PAUSED","state.v2":"STOPPED"}',
    ),
    (
        SessionKeyRecord(SESSION_KEY_B64, "HmacSHA256", 1700000000123),
        b"session-key",
        b'{"key":"AQgPFh0kKzI5QEdOVVxjanF4f4aNlJuiqbC3vsXM09o=","algorithm":"HmacSHA256",'
        b'"creation-timestamp":1700000000123}',
    ),
    (
        RestartRequest("foo", include_tasks=True, only_failed=False),
        b"restart-connector-foo",
        b'{"include-tasks":true,"only-failed":false}',
    ),
    (TaskCountRecord("foo", 3), b"tasks-fencing-foo", b'{"task-count":3}'),
    (LoggerLevel("org.apache.kafka", "DEBUG"), b"logger-cluster-org.apache.kafka", b'{"level":"DEBUG"}'),
    # Tombstones KafkaConfigBackingStore.removeConnectorConfig writes.
    (ConnectorDeletion("foo"), b"connector-foo", None),
    (TargetStateDeletion("foo"), b"target-state-foo", None),
]


@pytest.mark.parametrize(("record", "key", "value"), GOLDEN, ids=lambda x: type(x).__name__)
def test_encode_matches_java_bytes(record: cl.ConfigRecord, key: bytes, value: bytes | None) -> None:
    assert cl.encode(record) == (key, value)


@pytest.mark.parametrize(("record", "key", "value"), GOLDEN, ids=lambda x: type(x).__name__)
def test_decode_java_bytes(record: cl.ConfigRecord, key: bytes, value: bytes | None) -> None:
    assert cl.decode(key, value) == record


def test_session_key_secret_and_repr() -> None:
    record = SessionKeyRecord(SESSION_KEY_B64, "HmacSHA256", 1)
    assert record.secret() == bytes((i * 7 + 1) & 0xFF for i in range(32))
    assert SESSION_KEY_B64 not in repr(record)


# --- decoding what older or other writers produce ------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        # TARGET_STATE_V0, written by workers before 3.5: only "state".
        (b"target-state-foo", b'{"state":"PAUSED"}', TargetStateRecord("foo", TargetState.PAUSED)),
        # "state.v2" wins over "state"; a non-string "state.v2" falls back to "state".
        (
            b"target-state-foo",
            b'{"state":"PAUSED","state.v2":"STOPPED"}',
            TargetStateRecord("foo", TargetState.STOPPED),
        ),
        (
            b"target-state-foo",
            b'{"state":"PAUSED","state.v2":7}',
            TargetStateRecord("foo", TargetState.PAUSED),
        ),
        (
            b"target-state-foo",
            b'{"state":"STARTED","state.v2":null}',
            TargetStateRecord("foo", TargetState.STARTED),
        ),
        # Restart flags default to false when missing or not booleans (recordToRestartRequest).
        (b"restart-connector-foo", b"{}", RestartRequest("foo", include_tasks=False, only_failed=False)),
        (
            b"restart-connector-foo",
            b'{"include-tasks":"yes","only-failed":true}',
            RestartRequest("foo", False, True),
        ),
        # Java's Base64 decoder accepts a key without padding.
        (
            b"session-key",
            b'{"key":"AAAA","algorithm":"HmacSHA256","creation-timestamp":5}',
            SessionKeyRecord("AAAA", "HmacSHA256", 5),
        ),
        (
            b"session-key",
            b'{"key":"AAA","algorithm":"HmacSHA256","creation-timestamp":5}',
            SessionKeyRecord("AAA", "HmacSHA256", 5),
        ),
        # Connector names may contain dashes; Java splits task keys on the last one.
        (b"task-my-conn-12", b'{"properties":{"a":"b"}}', TaskConfig(TaskId("my-conn", 12), {"a": "b"})),
        # Java's String.split drops trailing empty strings, so a trailing dash is ignored.
        (b"task-foo-3-", b'{"properties":{}}', TaskConfig(TaskId("foo", 3), {})),
        (b"task-foo-+3", b'{"properties":{}}', TaskConfig(TaskId("foo", 3), {})),
        # Fields a newer writer might add are ignored; whitespace is fine.
        (b"commit-foo", b' { "tasks" : 4 , "extra" : [1] } ', TaskCommit("foo", 4)),
        (b"connector-foo", b'{"properties":{"a":"1"},"v":2}', ConnectorConfig("foo", {"a": "1"})),
        # JsonConverter reads empty bytes as null.
        (b"connector-foo", b"", ConnectorDeletion("foo")),
        (b"target-state-foo", b"", TargetStateDeletion("foo")),
    ],
)
def test_decode_lenient_like_java(key: bytes, value: bytes, expected: cl.ConfigRecord) -> None:
    assert cl.decode(key, value) == expected


@pytest.mark.parametrize(
    "key",
    [
        b"task-foo-0",
        b"commit-foo",
        b"session-key",
        b"restart-connector-foo",
        b"tasks-fencing-foo",
        b"logger-cluster-x",
    ],
)
def test_meaningless_tombstones_decode_to_none(key: bytes) -> None:
    assert cl.decode(key, None) is None


CORRUPT: list[tuple[bytes | None, bytes | None, str, bool]] = [
    (b"connector-foo", b"{bad", "not valid JSON", False),
    (b"connector-foo", b'{"properties":{"a":NaN}}', "not valid JSON", False),
    (b"connector-foo", b"\xff\xfe{", "not valid JSON", False),
    (None, b"{}", "without a key", False),
    (b"connector-foo", b"[1]", "should be a JSON object but is an array", True),
    (b"connector-foo", b'{"properties":"x"}', "'properties' should be a JSON object", True),
    (b"connector-foo", b"{}", "'properties' should be a JSON object but is null", True),
    (b"connector-foo", b'{"properties":{"a":1}}', "property 'a'", True),
    (b"connector-", b'{"properties":{}}', "names no connector", True),
    (b"task-foo", b'{"properties":{}}', "task-<connector>-<task number>", True),
    (b"task-foo-x", b'{"properties":{}}', "task-<connector>-<task number>", True),
    (b"task--0", b'{"properties":{}}', "task-<connector>-<task number>", True),
    (b"task-foo-99999999999", b'{"properties":{}}', "task-<connector>-<task number>", True),
    (b"task-foo-0", b'{"props":{}}', "'properties'", True),
    (b"commit-foo", b'{"tasks":"2"}', "'tasks' should be an integer but is a string", True),
    (b"commit-foo", b'{"tasks":2.0}', "'tasks' should be an integer but is a number", True),
    (b"commit-foo", b'{"tasks":true}', "'tasks' should be an integer but is a boolean", True),
    (b"commit-foo", b'{"tasks":-1}', "outside", True),
    (b"commit-foo", b'{"tasks":4294967296}', "outside", True),
    (b"commit-foo", b"2", "should be a JSON object but is a number", True),
    (b"target-state-foo", b'{"state":"RUNNING"}', "unknown target state 'RUNNING'", True),
    (b"target-state-foo", b'{"state":"PAUSED","state.v2":"BOGUS"}', "unknown target state 'BOGUS'", True),
    (b"target-state-foo", b"{}", "'state' should be a string but is null", True),
    (b"target-state-foo", b'"PAUSED"', "should be a JSON object", True),
    (b"session-key", b'{"key":"!!!!","algorithm":"HmacSHA256","creation-timestamp":1}', "not base64", True),
    (
        b"session-key",
        b'{"key":"AAAA","algorithm":"HmacSHA256","creation-timestamp":"1"}',
        "creation-timestamp",
        True,
    ),
    (b"session-key", b'{"key":"AAAA","creation-timestamp":1}', "'algorithm'", True),
    (b"session-key", b'{"algorithm":"HmacSHA256","creation-timestamp":1}', "'key'", True),
    (b"restart-connector-foo", b'"now"', "should be a JSON object", True),
    (b"tasks-fencing-foo", b'{"task-count":null}', "'task-count'", True),
    (b"logger-cluster-org", b'{"level":5}', "'level'", True),
    (b"logger-cluster-", b'{"level":"INFO"}', "names no", True),
    (b"mystery-foo", b"{}", "unknown key prefix", True),
    (b"", b"{}", "unknown key prefix", True),
]


@pytest.mark.parametrize(("key", "value", "fragment", "advances"), CORRUPT)
def test_corrupt_records_name_the_key(
    key: bytes | None, value: bytes | None, fragment: str, advances: bool
) -> None:
    with pytest.raises(CorruptRecord) as info:
        cl.decode(key, value)
    if key:
        assert f"'{key.decode('utf-8', 'replace')}'" in str(info.value)
        assert info.value.key == key.decode("utf-8", "replace")
    assert fragment in str(info.value)
    assert info.value.advances_offset is advances
    assert isinstance(info.value, ValueError)


def test_malformed_utf8_key_is_replaced_like_java_string_deserializer() -> None:
    with pytest.raises(CorruptRecord, match="unknown key prefix") as info:
        cl.decode(b"\xffoops", b"{}")
    assert info.value.key == "\ufffdoops"


def test_encode_rejects_values_java_cannot_hold() -> None:
    with pytest.raises(ValueError):
        cl.encode(TaskCommit("foo", 2**31))
    with pytest.raises(ValueError):
        cl.encode(TaskCountRecord("foo", -1))
    with pytest.raises(ValueError):
        cl.encode(SessionKeyRecord("!!!!", "HmacSHA256", 0))


# --- round trips -----------------------------------------------------------------------------------------

names = st.text(alphabet="ab-_.x", min_size=1, max_size=6).filter(lambda s: s.strip("-") == s)
props = st.dictionaries(st.text(max_size=6), st.none() | st.text(max_size=8), max_size=4)
records = st.one_of(
    st.builds(ConnectorConfig, names, props),
    st.builds(ConnectorDeletion, names),
    st.builds(TaskConfig, st.builds(TaskId, names, st.integers(0, 4)), props),
    st.builds(TaskCommit, names, st.integers(0, 4)),
    st.builds(TargetStateRecord, names, st.sampled_from(TargetState)),
    st.builds(TargetStateDeletion, names),
    st.builds(
        SessionKeyRecord,
        st.binary(min_size=1, max_size=32).map(lambda b: base64.b64encode(b).decode()),
        st.sampled_from(["HmacSHA256", "HmacSHA512"]),
        st.integers(0, 2**63 - 1),
    ),
    st.builds(RestartRequest, names, st.booleans(), st.booleans()),
    st.builds(TaskCountRecord, names, st.integers(0, 8)),
    st.builds(LoggerLevel, names, st.sampled_from(["INFO", "DEBUG", "TRACE"])),
)


@given(records)
def test_round_trip(record: cl.ConfigRecord) -> None:
    key, value = cl.encode(record)
    assert cl.decode(key, value) == record


# --- the fold --------------------------------------------------------------------------------------------


def fold(*items: cl.ConfigRecord | None) -> ConfigState:
    state = ConfigState()
    for offset, record in enumerate(items):
        state = cl.apply(state, record, offset)
    return state


def conf(name: str = "foo", **extra: str) -> ConnectorConfig:
    return ConnectorConfig(name, {"name": name, **extra})


def task(name: str, n: int, **extra: str) -> TaskConfig:
    return TaskConfig(TaskId(name, n), {"task": str(n), **extra})


def test_empty_state() -> None:
    snap = ConfigState().snapshot()
    assert snap.offset == -1
    assert snap.connectors() == []
    assert snap.task_counts() == {}
    assert snap.session_key is None
    assert snap.target_state("foo") is None
    assert snap.tasks("foo") == []
    assert snap.task_count("foo") == 0


def test_offset_is_position_after_last_record_like_java() -> None:
    # KafkaConfigBackingStore sets offset = record.offset() + 1; members compare it when joining.
    state = cl.apply(ConfigState(), conf(), 41)
    assert state.offset == state.snapshot().offset == 42
    assert cl.advance(state, 42).offset == 43


def test_deferred_task_configs_become_visible_on_commit() -> None:
    state = fold(conf(), task("foo", 0), task("foo", 1))
    snap = state.snapshot()
    assert snap.task_configs("foo") == []
    assert snap.task_count("foo") == 0
    assert snap.task_counts() == {"foo": 0}

    snap = cl.apply(state, TaskCommit("foo", 2), 3).snapshot()
    assert [dict(c) for c in snap.task_configs("foo")] == [{"task": "0"}, {"task": "1"}]
    assert snap.tasks("foo") == [TaskId("foo", 0), TaskId("foo", 1)]
    assert snap.task_count("foo") == 2
    assert snap.task_counts() == {"foo": 2}
    assert snap.task_config(TaskId("foo", 1)) == {"task": "1"}
    assert snap.task_config(TaskId("foo", 2)) is None
    assert snap.task_config_generation("foo") == 0
    assert snap.applied_connector_config("foo") == {"name": "foo"}
    assert not snap.is_inconsistent("foo")
    assert snap.offset == 4


def test_reconfiguration_replaces_all_task_configs_at_once() -> None:
    state = fold(
        conf(), task("foo", 0), task("foo", 1), TaskCommit("foo", 2), conf(x="1"), task("foo", 0, v="2")
    )
    snap = state.snapshot()
    assert [dict(c) for c in snap.task_configs("foo")] == [{"task": "0"}, {"task": "1"}]  # not yet
    assert snap.connector_config("foo") == {"name": "foo", "x": "1"}
    assert snap.applied_connector_config("foo") == {"name": "foo"}
    snap = cl.apply(state, TaskCommit("foo", 1), 9).snapshot()
    assert [dict(c) for c in snap.task_configs("foo")] == [{"task": "0", "v": "2"}]
    assert snap.task_count("foo") == 1
    assert snap.task_config_generation("foo") == 1
    assert snap.applied_connector_config("foo") == {"name": "foo", "x": "1"}


def test_leftover_higher_task_configs_do_not_block_a_commit() -> None:
    # Java's completeTaskIdSet only checks that 0..n-1 are present (compaction can keep task 2 around).
    snap = fold(conf(), task("foo", 2), task("foo", 0), task("foo", 1), TaskCommit("foo", 2)).snapshot()
    assert not snap.is_inconsistent("foo")
    assert [dict(c) for c in snap.task_configs("foo")] == [{"task": "0"}, {"task": "1"}]


def test_commit_with_missing_task_configs_marks_connector_inconsistent() -> None:
    # As in KafkaConfigBackingStore's javadoc: a commit whose batch lacks a task config (compacted away,
    # or the leader died mid-write) cannot be applied.
    state = fold(conf(), task("foo", 0), task("foo", 1), TaskCommit("foo", 2))
    partial: list[cl.ConfigRecord] = [task("foo", 1, v="new"), TaskCommit("foo", 2)]
    for offset, record in enumerate(partial, start=10):
        state = cl.apply(state, record, offset)
    snap = state.snapshot()
    assert snap.is_inconsistent("foo")
    assert snap.inconsistent == frozenset({"foo"})
    assert snap.tasks("foo") == []
    assert snap.task_configs("foo") == []
    assert snap.task_count("foo") == 2  # Java still records the commit's count
    assert snap.task_counts() == {"foo": 0}  # nothing to assign until the leader repairs it
    assert snap.task_config(TaskId("foo", 0)) == {"task": "0"}  # the old configs are kept, not exposed
    assert snap.is_pending_fencing("foo")
    assert snap.task_config_generation("foo") == 0

    # The deferred configs were dropped: writing only the missing one is not enough ...
    state = cl.apply(state, task("foo", 0), 12)
    state = cl.apply(state, TaskCommit("foo", 2), 13)
    assert state.snapshot().is_inconsistent("foo")
    # ... a complete set is.
    complete: list[cl.ConfigRecord] = [task("foo", 0), task("foo", 1), TaskCommit("foo", 2)]
    for offset, record in enumerate(complete, start=14):
        state = cl.apply(state, record, offset)
    snap = state.snapshot()
    assert not snap.is_inconsistent("foo")
    assert len(snap.task_configs("foo")) == 2
    assert snap.task_counts() == {"foo": 2}


def test_zero_task_commit_without_task_records() -> None:
    snap = fold(conf(), TaskCommit("foo", 0)).snapshot()
    assert snap.task_configs("foo") == []
    assert snap.task_counts() == {"foo": 0}
    assert not snap.is_inconsistent("foo")
    assert snap.task_config_generation("foo") is None  # Java bumps it only when task records were seen


def test_target_state_defaults_and_updates() -> None:
    state = fold(conf())
    assert state.snapshot().target_state("foo") is TargetState.STARTED
    state = cl.apply(state, TargetStateRecord("foo", TargetState.STOPPED), 1)
    assert state.snapshot().target_state("foo") is TargetState.STOPPED
    # A config update keeps the state.
    state = cl.apply(state, conf(x="2"), 2)
    assert state.snapshot().target_state("foo") is TargetState.STOPPED
    # A target-state tombstone for a connector that still exists restores the default.
    state = cl.apply(state, TargetStateDeletion("foo"), 3)
    assert state.snapshot().target_state("foo") is TargetState.STARTED


def test_initial_target_state_written_before_the_config_is_kept() -> None:
    # putConnectorConfig(..., targetState) sends the target state first, then the config.
    snap = fold(TargetStateRecord("foo", TargetState.PAUSED), conf()).snapshot()
    assert snap.target_state("foo") is TargetState.PAUSED
    assert snap.contains("foo")


def test_connector_deletion() -> None:
    state = fold(
        conf(),
        task("foo", 0),
        TaskCommit("foo", 1),
        TargetStateRecord("foo", TargetState.PAUSED),
        conf("bar"),
    )
    state = cl.apply(state, RestartRequest("foo", True, False), 5)
    state = cl.apply(state, ConnectorDeletion("foo"), 6)
    snap = state.snapshot()
    assert not snap.contains("foo")
    assert snap.connectors() == ["bar"]
    assert snap.connector_config("foo") is None
    assert snap.task_configs("foo") == []
    assert snap.task_count("foo") == 0
    assert snap.task_config(TaskId("foo", 0)) is None
    assert snap.restart_request("foo") is None
    assert snap.task_counts() == {"bar": 0}
    # Java removes the target state with its own tombstone, written right after the config's.
    assert snap.target_state("foo") is TargetState.PAUSED
    snap = cl.apply(state, TargetStateDeletion("foo"), 7).snapshot()
    assert snap.target_state("foo") is None


def test_delete_and_recreate() -> None:
    history: list[cl.ConfigRecord] = [
        conf(),
        task("foo", 0),
        TaskCommit("foo", 1),
        TargetStateRecord("foo", TargetState.PAUSED),
        task("foo", 0, stale="yes"),  # written, never committed
        ConnectorDeletion("foo"),
        TargetStateDeletion("foo"),
        conf(v="2"),
    ]
    snap = fold(*history).snapshot()
    assert snap.contains("foo")
    assert snap.connector_config("foo") == {"name": "foo", "v": "2"}
    assert snap.target_state("foo") is TargetState.STARTED
    assert snap.task_configs("foo") == []
    assert snap.task_count("foo") == 0
    # The uncommitted config from before the deletion went with it, so a commit cannot pick it up ...
    assert fold(*history, TaskCommit("foo", 1)).snapshot().is_inconsistent("foo")
    # ... and the re-created connector gets only the task configs written for it.
    snap = fold(*history, task("foo", 0, fresh="yes"), TaskCommit("foo", 1)).snapshot()
    assert [dict(c) for c in snap.task_configs("foo")] == [{"task": "0", "fresh": "yes"}]


def test_recreated_connector_stays_inconsistent_until_repaired() -> None:
    # processConnectorRemoval does not clear the inconsistent set; the leader's repair does.
    state = fold(conf(), task("foo", 1), TaskCommit("foo", 2), ConnectorDeletion("foo"), conf())
    assert state.snapshot().is_inconsistent("foo")
    assert state.snapshot().tasks("foo") == []
    state = fold(
        conf(),
        task("foo", 1),
        TaskCommit("foo", 2),
        ConnectorDeletion("foo"),
        conf(),
        task("foo", 0),
        TaskCommit("foo", 1),
    )
    assert not state.snapshot().is_inconsistent("foo")
    assert state.snapshot().tasks("foo") == [TaskId("foo", 0)]


def test_commit_for_connector_whose_config_was_compacted_away_is_ignored() -> None:
    # KAFKA-16838: after compaction removed both a deleted connector's config and its tombstone, its task
    # records and commit may remain; they must not bring its tasks back.
    state = fold(task("gone", 0), TaskCommit("gone", 1))
    snap = state.snapshot()
    assert not snap.contains("gone")
    assert snap.task_count("gone") == 0
    assert snap.task_configs("gone") == []
    assert not snap.is_pending_fencing("gone")
    snap = cl.apply(state, conf("gone"), 2).snapshot()
    assert snap.task_configs("gone") == []
    assert snap.task_counts() == {"gone": 0}


def test_session_key_replacement() -> None:
    first = SessionKeyRecord("AAAA", "HmacSHA256", 1)
    second = SessionKeyRecord("BBBB", "HmacSHA256", 2)
    assert fold(first).snapshot().session_key == first
    assert fold(first, conf(), second).snapshot().session_key == second
    # A session-key tombstone is meaningless: the key stays.
    assert fold(first, cl.decode(b"session-key", None)).snapshot().session_key == first


def test_restart_requests_keep_the_latest_per_connector() -> None:
    snap = fold(
        conf(), RestartRequest("foo"), RestartRequest("foo", include_tasks=True), RestartRequest("bar")
    ).snapshot()
    pending = snap.restart_request("foo")
    assert pending is not None
    assert pending.offset == 2
    assert pending.request == RestartRequest("foo", include_tasks=True, only_failed=False)
    assert set(snap.restart_requests) == {"foo", "bar"}


def test_task_count_records_and_fencing() -> None:
    state = fold(conf(), task("foo", 0), TaskCommit("foo", 1))
    assert state.snapshot().is_pending_fencing("foo")
    state = cl.apply(state, TaskCountRecord("foo", 1), 3)
    snap = state.snapshot()
    assert not snap.is_pending_fencing("foo")
    assert snap.task_count_record("foo") == 1
    assert snap.task_count_record("bar") is None


def test_logger_levels() -> None:
    snap = fold(
        LoggerLevel("org.a", "DEBUG"), LoggerLevel("org.b", "INFO"), LoggerLevel("org.a", "WARN")
    ).snapshot()
    assert snap.logger_level("org.a") == "WARN"
    assert snap.logger_level("org.b") == "INFO"
    assert snap.logger_level("org.c") is None


def test_connectors_are_sorted() -> None:
    assert fold(conf("zeta"), conf("alpha"), conf("mid")).snapshot().connectors() == ["alpha", "mid", "zeta"]


def test_apply_raw_counts_offsets_as_java_does() -> None:
    state = ConfigState()
    state, error = cl.apply_raw(state, *cl.encode(conf()), 0)
    assert error is None and state.offset == 1 and state.snapshot().contains("foo")
    # Not JSON: Java's converter throws before the offset moves.
    state, error = cl.apply_raw(state, b"connector-bar", b"{nope", 1)
    assert isinstance(error, CorruptRecord) and state.offset == 1
    # JSON of the wrong shape or an unknown key: Java has already counted the record.
    state, error = cl.apply_raw(state, b"connector-bar", b"[]", 2)
    assert isinstance(error, CorruptRecord) and state.offset == 3
    state, error = cl.apply_raw(state, b"whatever", b"{}", 3)
    assert isinstance(error, CorruptRecord) and state.offset == 4
    # A meaningless tombstone changes nothing but counts.
    state, error = cl.apply_raw(state, b"commit-foo", None, 4)
    assert error is None and state.offset == 5
    assert state.snapshot().connectors() == ["foo"]


def test_snapshots_are_immutable_and_persistent() -> None:
    state = fold(conf(), task("foo", 0), TaskCommit("foo", 1))
    before = state.snapshot()
    after = cl.apply(state, ConnectorDeletion("foo"), 3).snapshot()
    assert before.contains("foo") and not after.contains("foo")
    with pytest.raises(FrozenInstanceError):
        before.offset = 7  # type: ignore[misc]
    with pytest.raises(TypeError):
        before.connector_configs["x"] = {}  # type: ignore[index]
    config = before.connector_config("foo")
    assert config is not None
    with pytest.raises(TypeError):
        config["name"] = "bar"  # type: ignore[index]


def test_records_copy_their_properties() -> None:
    source = {"a": "1"}
    record = ConnectorConfig("foo", source)
    source["a"] = "2"
    assert record.properties == {"a": "1"}


# --- properties of the fold ------------------------------------------------------------------------------

small_names = st.sampled_from(["a", "b", "a-b"])
fold_records = st.one_of(
    st.builds(ConnectorConfig, small_names, st.just({"k": "v"})),
    st.builds(ConnectorDeletion, small_names),
    st.builds(TaskConfig, st.builds(TaskId, small_names, st.integers(0, 3)), st.just({"t": "x"})),
    st.builds(TaskCommit, small_names, st.integers(0, 3)),
    st.builds(TargetStateRecord, small_names, st.sampled_from(TargetState)),
    st.builds(TargetStateDeletion, small_names),
    st.builds(SessionKeyRecord, st.just("AAAA"), st.just("HmacSHA256"), st.integers(0, 10)),
    st.builds(RestartRequest, small_names, st.booleans(), st.booleans()),
    st.builds(TaskCountRecord, small_names, st.integers(0, 3)),
    st.builds(LoggerLevel, small_names, st.just("INFO")),
    st.none(),
)


@settings(max_examples=300)
@given(st.lists(fold_records, max_size=40))
def test_fold_never_raises_and_consistent_connectors_have_all_their_task_configs(
    history: list[cl.ConfigRecord | None],
) -> None:
    state = ConfigState()
    for offset, record in enumerate(history):
        state = cl.apply(state, record, offset)
    snap = state.snapshot()
    assert snap.offset == (len(history) if history else -1)
    for name in snap.connectors():
        assert snap.target_state(name) is not None
        if not snap.is_inconsistent(name):
            assert len(snap.task_configs(name)) == snap.task_count(name)
            assert len(snap.tasks(name)) == snap.task_count(name)
    assert snap.task_counts() == {c: len(snap.tasks(c)) for c in snap.connectors()}
    assert set(snap.task_counts()) == set(snap.connectors())


@settings(max_examples=200)
@given(st.lists(fold_records.filter(lambda r: r is not None), max_size=30))
def test_folding_decoded_bytes_equals_folding_records(history: list[cl.ConfigRecord]) -> None:
    direct, via_bytes = ConfigState(), ConfigState()
    for offset, record in enumerate(history):
        direct = cl.apply(direct, record, offset)
        via_bytes, error = cl.apply_raw(via_bytes, *cl.encode(record), offset)
        assert error is None
    assert via_bytes.snapshot() == direct.snapshot()


# ------------------------------------------------------------------------- kconnect's static overrides


def test_static_assignment_override_round_trips_folds_and_is_deleted_by_a_tombstone() -> None:
    record = cl.StaticAssignmentRecord("10.0.0.7:8083", ("orders",), ("orders-0", "orders-2"))
    key, value = cl.encode(record)
    assert key == b"static-assignment-10.0.0.7:8083"
    assert value == b'{"connectors":["orders"],"tasks":["orders-0","orders-2"]}'
    assert cl.decode(key, value) == record
    state = cl.apply(cl.ConfigState(), record, 0)
    assert state.snapshot().static_overrides == {"10.0.0.7:8083": record}
    gone = cl.apply(state, cl.decode(key, None), 1)
    assert cl.decode(key, None) == cl.StaticAssignmentDeletion("10.0.0.7:8083")
    assert gone.snapshot().static_overrides == {} and gone.snapshot().offset == 2


@pytest.mark.parametrize(
    "value",
    [b'{"connectors": "orders"}', b'{"tasks": [1, 2]}', b"[]"],
)
def test_malformed_static_assignment_overrides_are_corrupt_records(value: bytes) -> None:
    with pytest.raises(cl.CorruptRecord, match="static-assignment-w1"):
        cl.decode(b"static-assignment-w1", value)
