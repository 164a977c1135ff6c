"""Status-topic codec and fold.

Golden values were produced by Apache Kafka Connect 3.9.0 (connect-runtime 3.9.0 jar of
tools/reference-connect): KafkaStatusBackingStore's private serialize(AbstractStatus) and
serializeTopicStatus(TopicStatus), invoked reflectively on a store whose converter is the worker's
internal JsonConverter (schemas.enable=false). Field names are its constants STATE_KEY_NAME ("state"),
TRACE_KEY_NAME ("trace", the only optional field: written as null when there is no trace),
WORKER_ID_KEY_NAME ("worker_id"), GENERATION_KEY_NAME ("generation"), and TOPIC_STATE_KEY "topic" with
"name", "connector", "task", "discoverTimestamp". The fold rules follow the 3.9.0 bytecode of
readConnectorStatus, readTaskStatus (the stale-UNASSIGNED rule), remove(connector) and
CacheEntry.canWriteSafely.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import status_log as sl
from kconnect.runtime.storage.config_log import CorruptRecord
from kconnect.runtime.storage.status_log import (
    ConnectorStatus,
    ConnectorStatusDeletion,
    State,
    StatusState,
    TaskStatus,
    TaskStatusDeletion,
    TopicStatus,
    TopicStatusDeletion,
)

GOLDEN: list[tuple[sl.StatusRecord, bytes, bytes | None]] = [
    (
        ConnectorStatus("foo", State.RUNNING, None, "10.0.0.1:8083", 7),
        b"status-connector-foo",
        b'{"state":"RUNNING","trace":null,"worker_id":"10.0.0.1:8083","generation":7}',
    ),
    (
        ConnectorStatus(
            "foo", State.FAILED, "java.lang.RuntimeException: boom\n\tat X.y(X.java:1)\n", "10.0.0.1:8083", 8
        ),
        b"status-connector-foo",
        b'{"state":"FAILED","trace":"java.lang.RuntimeException: boom\\n\\tat X.y(X.java:1)\\n",'
        b'"worker_id":"10.0.0.1:8083","generation":8}',
    ),
    (
        TaskStatus(TaskId("foo", 0), State.UNASSIGNED, None, "w2:8083", 3),
        b"status-task-foo-0",
        b'{"state":"UNASSIGNED","trace":null,"worker_id":"w2:8083","generation":3}',
    ),
    (
        TaskStatus(TaskId("foo", 1), State.STOPPED, None, "w2:8083", 2147483647),
        b"status-task-foo-1",
        b'{"state":"STOPPED","trace":null,"worker_id":"w2:8083","generation":2147483647}',
    ),
    (
        TopicStatus("orders", "foo", 2, 1700000000456),
        b"status-topic-orders:connector-foo",
        b'{"topic":{"name":"orders","connector":"foo","task":2,"discoverTimestamp":1700000000456}}',
    ),
    (ConnectorStatusDeletion("foo"), b"status-connector-foo", None),
    (TaskStatusDeletion(TaskId("my-conn", 12)), b"status-task-my-conn-12", None),
    (TopicStatusDeletion("orders", "foo"), b"status-topic-orders:connector-foo", None),
]


@pytest.mark.parametrize(("record", "key", "value"), GOLDEN, ids=lambda x: type(x).__name__)
def test_encode_matches_java_bytes(record: sl.StatusRecord, key: bytes, value: bytes | None) -> None:
    assert sl.encode(record) == (key, value)


@pytest.mark.parametrize(("record", "key", "value"), GOLDEN, ids=lambda x: type(x).__name__)
def test_decode_java_bytes(record: sl.StatusRecord, key: bytes, value: bytes | None) -> None:
    assert sl.decode(key, value) == record


def test_destroyed_is_written_as_a_tombstone() -> None:
    # KafkaStatusBackingStore.send: value = state == DESTROYED ? null : serialize(status).
    assert sl.encode(ConnectorStatus("foo", State.DESTROYED, None, "w", 1)) == (b"status-connector-foo", None)
    assert sl.encode(TaskStatus(TaskId("foo", 2), State.DESTROYED, None, "w", 1)) == (
        b"status-task-foo-2",
        None,
    )
    assert sl.decode(b"status-connector-foo", None) == ConnectorStatusDeletion("foo")


def test_all_java_states_round_trip() -> None:
    assert [s.value for s in State] == [
        "UNASSIGNED", "RUNNING", "PAUSED", "FAILED", "DESTROYED", "RESTARTING", "STOPPED"
    ]  # fmt: skip
    for state in State:
        if state is not State.DESTROYED:
            record = TaskStatus(TaskId("c", 0), state, "t", "w", 1)
            assert sl.decode(*sl.encode(record)) == record


def test_state_given_as_text_is_coerced() -> None:
    status = ConnectorStatus("foo", "RUNNING", None, "w", 1)  # type: ignore[arg-type]
    assert status.state is State.RUNNING
    with pytest.raises(ValueError):
        ConnectorStatus("foo", "BOGUS", None, "w", 1)  # type: ignore[arg-type]


def test_key_helpers() -> None:
    assert sl.connector_key("foo") == b"status-connector-foo"
    assert sl.task_key(TaskId("a-b", 3)) == b"status-task-a-b-3"


STATUS_V = b'{"state":"PAUSED","worker_id":"w","generation":1}'
EXTRA_V = b'{"state":"RUNNING","trace":null,"worker_id":"w","generation":0,"x":1}'


@pytest.mark.parametrize(
    ("key", "value", "expected"),
    [
        # A missing trace reads as null, as Java's map lookup does; unknown fields are ignored.
        (b"status-connector-foo", STATUS_V, ConnectorStatus("foo", State.PAUSED, None, "w", 1)),
        (b"status-task-a-b-c-4", EXTRA_V, TaskStatus(TaskId("a-b-c", 4), State.RUNNING, None, "w", 0)),
    ],
)
def test_decode_lenient_like_java(key: bytes, value: bytes, expected: sl.StatusRecord) -> None:
    assert sl.decode(key, value) == expected


CORRUPT: list[tuple[bytes | None, bytes | None, str]] = [
    (b"status-connector-foo", b"{x", "not valid JSON"),
    (b"status-connector-foo", b"", "should be a JSON object but is null"),  # Java drops these
    (b"status-connector-foo", b"[]", "should be a JSON object"),
    (b"status-connector-foo", b'{"state":"SLEEPING","worker_id":"w","generation":1}', "'state'"),
    (b"status-connector-foo", b'{"worker_id":"w","generation":1}', "'state'"),
    (b"status-connector-foo", b'{"state":"RUNNING","trace":3,"worker_id":"w","generation":1}', "'trace'"),
    (b"status-connector-foo", b'{"state":"RUNNING","generation":1}', "'worker_id'"),
    (b"status-connector-foo", b'{"state":"RUNNING","worker_id":"w","generation":"1"}', "'generation'"),
    (b"status-connector-foo", b'{"state":"RUNNING","worker_id":"w","generation":1.5}', "'generation'"),
    (b"status-connector-foo", b'{"state":"RUNNING","worker_id":"w","generation":2147483648}', "outside"),
    (b"status-connector-", b"{}", "names no connector"),
    (b"status-task-foo", b"{}", "status-task-<connector>-<task number>"),
    (b"status-task-foo-x", b"{}", "status-task-<connector>-<task number>"),
    (b"status-topic-orders", b"{}", "status-topic-<topic>:connector-<connector>"),
    (b"status-topic-:connector-foo", b"{}", "status-topic-<topic>:connector-<connector>"),
    (b"status-topic-orders:connector-", b"{}", "status-topic-<topic>:connector-<connector>"),
    (b"status-topic-orders:task-foo", b"{}", "status-topic-<topic>:connector-<connector>"),
    (b"status-topic-orders:connector-foo", b'{"name":"orders"}', "'topic' should be a JSON object"),
    (
        b"status-topic-orders:connector-foo",
        b'{"topic":{"name":"orders","connector":"foo","task":1}}',
        "'discoverTimestamp'",
    ),
    (
        b"status-topic-orders:connector-foo",
        b'{"topic":{"name":"other","connector":"foo","task":1,"discoverTimestamp":1}}',
        "not the key's",
    ),
    (b"something-else", b"{}", "unknown key prefix"),
    (None, b"{}", "without a key"),
]


@pytest.mark.parametrize(("key", "value", "fragment"), CORRUPT)
def test_corrupt_records_name_the_key(key: bytes | None, value: bytes | None, fragment: str) -> None:
    with pytest.raises(CorruptRecord) as info:
        sl.decode(key, value)
    if key:
        assert f"'{key.decode()}'" in str(info.value)
    assert fragment in str(info.value)


def test_status_log_reexports_the_shared_corrupt_record() -> None:
    assert sl.CorruptRecord is CorruptRecord


# --- fold ----------------------------------------------------------------------------------------------


def fold(*records: sl.StatusRecord) -> StatusState:
    state = StatusState()
    for record in records:
        state = sl.apply(state, record)
    return state


T0 = TaskId("foo", 0)


def tstatus(state: State, worker: str, generation: int, task: TaskId = T0) -> TaskStatus:
    return TaskStatus(task, state, None, worker, generation)


def test_latest_status_wins() -> None:
    state = fold(
        ConnectorStatus("foo", State.UNASSIGNED, None, "w1", 1),
        ConnectorStatus("foo", State.RUNNING, None, "w1", 1),
        tstatus(State.RUNNING, "w1", 1),
        tstatus(State.FAILED, "w1", 1),
        ConnectorStatus("bar", State.PAUSED, None, "w2", 1),
    )
    assert state.connectors() == ["bar", "foo"]
    foo = state.connector_status("foo")
    assert foo is not None and foo.state is State.RUNNING
    task = state.task_status(T0)
    assert task is not None and task.state is State.FAILED
    assert state.connector_status("baz") is None
    assert state.task_status(TaskId("foo", 9)) is None


def test_stale_unassigned_does_not_replace_running_of_same_or_newer_generation() -> None:
    running = tstatus(State.RUNNING, "w2", 5)
    # The worker that lost the task in generation 5's rebalance reports it UNASSIGNED after w2 started it.
    assert fold(running, tstatus(State.UNASSIGNED, "w1", 5)).task_status(T0) == running
    assert fold(running, tstatus(State.UNASSIGNED, "w1", 4)).task_status(T0) == running
    # A newer generation's UNASSIGNED is real.
    newer = tstatus(State.UNASSIGNED, "w1", 6)
    assert fold(running, newer).task_status(T0) == newer
    # The rule is only about UNASSIGNED over RUNNING.
    failed = tstatus(State.FAILED, "w1", 3)
    assert fold(running, failed).task_status(T0) == failed
    unassigned = tstatus(State.UNASSIGNED, "w1", 3)
    assert fold(tstatus(State.PAUSED, "w2", 5), unassigned).task_status(T0) == unassigned
    # An older generation's connector UNASSIGNED from another worker is stale too (see the next test).
    conn = ConnectorStatus("foo", State.UNASSIGNED, None, "w1", 1)
    running_c = ConnectorStatus("foo", State.RUNNING, None, "w2", 5)
    assert fold(running_c, conn).connector_status("foo") == running_c


def test_a_connectors_late_unassigned_from_its_old_owner_does_not_replace_the_new_owners_running() -> None:
    # w4 stopped the connector (it went home to w1) and wrote UNASSIGNED; w1 started it and wrote RUNNING;
    # w4's write landed last. Same generation: no round moved it (group.protocol=connect).
    running = ConnectorStatus("foo", State.RUNNING, None, "w1", 10)
    late = ConnectorStatus("foo", State.UNASSIGNED, None, "w4", 10)
    assert fold(running, late).connector_status("foo") == running
    # From the worker that runs it, or of a newer generation (a leader's report), UNASSIGNED applies.
    own = ConnectorStatus("foo", State.UNASSIGNED, None, "w1", 10)
    assert fold(running, own).connector_status("foo") == own
    newer = ConnectorStatus("foo", State.UNASSIGNED, None, "w4", 11)
    assert fold(running, newer).connector_status("foo") == newer
    # Only UNASSIGNED over RUNNING: a FAILED or PAUSED from another worker is news.
    failed = ConnectorStatus("foo", State.FAILED, "boom", "w4", 10)
    assert fold(running, failed).connector_status("foo") == failed


def test_tombstones_delete() -> None:
    other = tstatus(State.RUNNING, "w", 1, TaskId("bar", 0))
    state = fold(
        ConnectorStatus("foo", State.RUNNING, None, "w", 1),
        tstatus(State.RUNNING, "w", 1),
        tstatus(State.RUNNING, "w", 1, TaskId("foo", 1)),
        other,
    )
    after = sl.apply(state, TaskStatusDeletion(TaskId("foo", 1)))
    assert [t.task for t in after.task_statuses("foo")] == [T0]
    # Java's remove(connector) drops the connector's task statuses too.
    after = sl.apply(state, ConnectorStatusDeletion("foo"))
    assert after.connector_status("foo") is None
    assert after.task_statuses("foo") == []
    assert after.task_statuses("bar") == [other]
    # Deleting what is not there is harmless.
    assert sl.apply(StatusState(), TaskStatusDeletion(T0)) == StatusState()
    assert sl.apply(StatusState(), ConnectorStatusDeletion("x")) == StatusState()


def test_task_statuses_in_task_order() -> None:
    state = fold(*(tstatus(State.RUNNING, "w", 1, TaskId("foo", n)) for n in (10, 2, 0)))
    assert [t.task.task for t in state.task_statuses("foo")] == [0, 2, 10]


def test_topic_statuses() -> None:
    state = fold(
        TopicStatus("b-topic", "foo", 0, 1),
        TopicStatus("a-topic", "foo", 1, 2),
        TopicStatus("a-topic", "bar", 0, 3),
    )
    assert [t.topic for t in state.topics("foo")] == ["a-topic", "b-topic"]
    assert state.topic_status("bar", "a-topic") == TopicStatus("a-topic", "bar", 0, 3)
    state = sl.apply(state, TopicStatusDeletion("a-topic", "foo"))
    assert [t.topic for t in state.topics("foo")] == ["b-topic"]
    state = sl.apply(state, TopicStatusDeletion("b-topic", "foo"))
    assert state.topics("foo") == []
    assert "foo" not in state.topic_statuses


@pytest.mark.parametrize(
    ("current", "incoming", "safe"),
    [
        (None, tstatus(State.RUNNING, "w1", 1), True),  # nothing yet
        (tstatus(State.RUNNING, "w1", 5), tstatus(State.FAILED, "w1", 2), True),  # same worker
        (tstatus(State.RUNNING, "w1", 5), tstatus(State.RUNNING, "w2", 5), True),  # same generation
        (tstatus(State.RUNNING, "w1", 5), tstatus(State.RUNNING, "w2", 6), True),  # newer generation
        (tstatus(State.RUNNING, "w1", 5), tstatus(State.UNASSIGNED, "w2", 4), False),  # older, other worker
    ],
)
def test_can_write_safely(current: TaskStatus | None, incoming: TaskStatus, safe: bool) -> None:
    # KafkaStatusBackingStore.CacheEntry.canWriteSafely, applied by putSafe before writing.
    state = StatusState() if current is None else fold(current)
    assert state.can_write_safely(incoming) is safe
    conn_state = (
        StatusState()
        if current is None
        else fold(ConnectorStatus("foo", current.state, None, current.worker_id, current.generation))
    )
    conn = ConnectorStatus("foo", incoming.state, None, incoming.worker_id, incoming.generation)
    assert conn_state.can_write_safely(conn) is safe


# --- properties ----------------------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "a-b"])
workers = st.sampled_from(["w1", "w2"])
traces = st.none() | st.text(max_size=20)
generations = st.integers(0, 4)
task_ids = st.builds(TaskId, names, st.integers(0, 3))
topics = st.sampled_from(["t1", "t.2"])
statuses = st.one_of(
    st.builds(ConnectorStatus, names, st.sampled_from(State), traces, workers, generations),
    st.builds(TaskStatus, task_ids, st.sampled_from(State), traces, workers, generations),
    st.builds(ConnectorStatusDeletion, names),
    st.builds(TaskStatusDeletion, task_ids),
    st.builds(TopicStatus, topics, names, st.integers(0, 3), st.integers(0, 2**63 - 1)),
    st.builds(TopicStatusDeletion, topics, names),
)


@given(statuses)
def test_round_trip(record: sl.StatusRecord) -> None:
    decoded = sl.decode(*sl.encode(record))
    if isinstance(record, ConnectorStatus) and record.state is State.DESTROYED:
        assert decoded == ConnectorStatusDeletion(record.connector)
    elif isinstance(record, TaskStatus) and record.state is State.DESTROYED:
        assert decoded == TaskStatusDeletion(record.task)
    else:
        assert decoded == record


@settings(max_examples=200)
@given(st.lists(statuses, max_size=30))
def test_fold_never_raises_and_matches_folding_bytes(history: list[sl.StatusRecord]) -> None:
    direct, via_bytes = StatusState(), StatusState()
    for record in history:
        direct = sl.apply(direct, record)
        via_bytes = sl.apply(via_bytes, sl.decode(*sl.encode(record)))
    # DESTROYED goes through the log as a deletion, so compare only runs without it.
    if not any(isinstance(r, ConnectorStatus | TaskStatus) and r.state is State.DESTROYED for r in history):
        assert via_bytes == direct
    for name in via_bytes.connectors():
        assert via_bytes.connector_status(name) is not None
