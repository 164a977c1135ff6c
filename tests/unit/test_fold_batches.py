"""The folds over the internal topics in batches (``ConfigFold``, ``StatusFold``, ``OffsetFold``) against the
record-at-a-time folds they replaced.

The old folds rebuilt frozen maps for every record, which made a start-up read quadratic. They are kept
here, verbatim, as the reference: folding any history in one batch, or in batches with snapshots taken
in between, must give what they give, and a snapshot taken earlier must not change when the fold moves on
(the builders mutate dicts they own and hand out read-only copies). Nothing here is timed: the linear cost
is what ``bench/restart.py`` shows.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import config_log as cl
from kconnect.runtime.storage import offset_log as ol
from kconnect.runtime.storage import status_log as sl

_EMPTY: Mapping[Any, Any] = MappingProxyType({})


def _put(mapping: Mapping[Any, Any], key: Any, value: Any) -> Mapping[Any, Any]:
    updated = dict(mapping)
    updated[key] = value
    return MappingProxyType(updated)


def _drop(mapping: Mapping[Any, Any], key: Any) -> Mapping[Any, Any]:
    if key not in mapping:
        return mapping
    updated = dict(mapping)
    del updated[key]
    return MappingProxyType(updated)


# --- the reference folds (as they were before the builders) -------------------------------------------


def ref_offset_apply(state: ol.OffsetState, record: ol.SourceOffset) -> ol.OffsetState:
    by_partition = dict(state.records.get(record.connector, _EMPTY))
    index = ol.partition_json(record.partition)
    if record.offset is None:
        by_partition.pop(index, None)
    else:
        by_partition[index] = record
    records = dict(state.records)
    if by_partition:
        records[record.connector] = MappingProxyType(by_partition)
    else:
        records.pop(record.connector, None)
    return replace(state, records=MappingProxyType(records))


def _ref_is_stale(current: sl.TaskStatus | None, incoming: sl.TaskStatus) -> bool:
    return (
        incoming.state is sl.State.UNASSIGNED
        and current is not None
        and current.state is sl.State.RUNNING
        and current.generation >= incoming.generation
    )


def ref_status_apply(state: sl.StatusState, record: sl.StatusRecord) -> sl.StatusState:
    match record:
        case sl.ConnectorStatus(connector):
            return replace(state, connector_statuses=_put(state.connector_statuses, connector, record))
        case sl.ConnectorStatusDeletion(connector):
            return replace(
                state,
                connector_statuses=_drop(state.connector_statuses, connector),
                task_statuses_by_connector=_drop(state.task_statuses_by_connector, connector),
            )
        case sl.TaskStatus(task):
            if _ref_is_stale(state.task_status(task), record):
                return state
            tasks = state.task_statuses_by_connector.get(task.connector, _EMPTY)
            return replace(
                state,
                task_statuses_by_connector=_put(
                    state.task_statuses_by_connector, task.connector, _put(tasks, task.task, record)
                ),
            )
        case sl.TaskStatusDeletion(task):
            tasks = _drop(state.task_statuses_by_connector.get(task.connector, _EMPTY), task.task)
            by_connector = (
                _put(state.task_statuses_by_connector, task.connector, tasks)
                if tasks
                else _drop(state.task_statuses_by_connector, task.connector)
            )
            return replace(state, task_statuses_by_connector=by_connector)
    assert isinstance(record, sl.TopicStatus | sl.TopicStatusDeletion)
    topics = state.topic_statuses.get(record.connector, _EMPTY)
    if isinstance(record, sl.TopicStatusDeletion):
        topics = _drop(topics, record.topic)
    else:
        topics = _put(topics, record.topic, record)
    statuses = (
        _put(state.topic_statuses, record.connector, topics)
        if topics
        else _drop(state.topic_statuses, record.connector)
    )
    return replace(state, topic_statuses=statuses)


def _ref_remove_connector(state: cl.ConfigState, connector: str) -> cl.ConfigState:
    view = state.view
    return cl.ConfigState(
        replace(
            view,
            connector_configs=_drop(view.connector_configs, connector),
            committed_task_counts=_drop(view.committed_task_counts, connector),
            committed_task_configs=_drop(view.committed_task_configs, connector),
            applied_connector_configs=_drop(view.applied_connector_configs, connector),
            restart_requests=_drop(view.restart_requests, connector),
        ),
        _drop(state.deferred, connector),
    )


def _ref_commit(state: cl.ConfigState, connector: str, count: int) -> cl.ConfigState:
    view = state.view
    config = view.connector_configs.get(connector)
    if config is None:
        return _ref_remove_connector(state, connector)
    deferred = state.deferred.get(connector)
    pending = deferred if deferred is not None else _EMPTY
    if all(i in pending for i in range(count)):
        generation = view.task_config_generations.get(connector)
        view = replace(
            view,
            committed_task_configs=_put(
                view.committed_task_configs, connector, tuple(pending[i] for i in range(count))
            ),
            inconsistent=view.inconsistent - {connector},
            applied_connector_configs=_put(view.applied_connector_configs, connector, config),
            task_config_generations=(
                view.task_config_generations
                if deferred is None
                else _put(
                    view.task_config_generations, connector, 0 if generation is None else generation + 1
                )
            ),
        )
    else:
        view = replace(view, inconsistent=view.inconsistent | {connector})
    view = replace(
        view,
        committed_task_counts=_put(view.committed_task_counts, connector, count),
        pending_fencing=view.pending_fencing | {connector},
    )
    return cl.ConfigState(
        view, state.deferred if deferred is None else _put(state.deferred, connector, _EMPTY)
    )


def ref_config_apply(state: cl.ConfigState, record: cl.ConfigRecord | None, offset: int) -> cl.ConfigState:
    view = state.view
    match record:
        case None:
            pass
        case cl.ConnectorConfig(connector, properties):
            view = replace(
                view,
                connector_configs=_put(view.connector_configs, connector, properties),
                target_states=(
                    view.target_states
                    if connector in view.target_states
                    else _put(view.target_states, connector, cl.TargetState.STARTED)
                ),
            )
        case cl.ConnectorDeletion(connector):
            state = _ref_remove_connector(state, connector)
            view = state.view
        case cl.TaskConfig(task, properties):
            tasks = state.deferred.get(task.connector, _EMPTY)
            state = replace(
                state, deferred=_put(state.deferred, task.connector, _put(tasks, task.task, properties))
            )
        case cl.TaskCommit(connector, count):
            state = _ref_commit(state, connector, count)
            view = state.view
        case cl.TargetStateRecord(connector, target):
            view = replace(view, target_states=_put(view.target_states, connector, target))
        case cl.TargetStateDeletion(connector):
            targets = _drop(view.target_states, connector)
            if connector in view.connector_configs:
                targets = _put(targets, connector, cl.TargetState.STARTED)
            view = replace(view, target_states=targets)
        case cl.SessionKeyRecord():
            view = replace(view, session_key=record)
        case cl.RestartRequest(connector):
            view = replace(
                view,
                restart_requests=_put(view.restart_requests, connector, cl.PendingRestart(offset, record)),
            )
        case cl.TaskCountRecord(connector, task_count):
            view = replace(
                view,
                task_count_records=_put(view.task_count_records, connector, task_count),
                pending_fencing=view.pending_fencing - {connector},
            )
        case cl.LoggerLevel(namespace, level):
            view = replace(view, logger_levels=_put(view.logger_levels, namespace, level))
        case cl.StaticAssignmentRecord(worker_id):
            view = replace(view, static_overrides=_put(view.static_overrides, worker_id, record))
        case cl.StaticAssignmentDeletion(worker_id):
            view = replace(view, static_overrides=_drop(view.static_overrides, worker_id))
    return cl.ConfigState(replace(view, offset=offset + 1), state.deferred)


# --- strategies ----------------------------------------------------------------------------------------

names = st.sampled_from(["a", "b", "a-b"])
config_records = st.one_of(
    st.builds(cl.ConnectorConfig, names, st.sampled_from([{"k": "v"}, {"k": "w"}])),
    st.builds(cl.ConnectorDeletion, names),
    st.builds(cl.TaskConfig, st.builds(TaskId, names, st.integers(0, 3)), st.sampled_from([{"t": "x"}, {}])),
    st.builds(cl.TaskCommit, names, st.integers(0, 3)),
    st.builds(cl.TargetStateRecord, names, st.sampled_from(cl.TargetState)),
    st.builds(cl.TargetStateDeletion, names),
    st.builds(cl.SessionKeyRecord, st.just("AAAA"), st.just("HmacSHA256"), st.integers(0, 10)),
    st.builds(cl.RestartRequest, names, st.booleans(), st.booleans()),
    st.builds(cl.TaskCountRecord, names, st.integers(0, 3)),
    st.builds(cl.LoggerLevel, names, st.sampled_from(["INFO", "DEBUG"])),
    st.builds(cl.StaticAssignmentRecord, st.sampled_from(["w1", "w2"]), st.just(("a",)), st.just(())),
    st.builds(cl.StaticAssignmentDeletion, st.sampled_from(["w1", "w2"])),
    st.none(),
)
task_ids = st.builds(TaskId, names, st.integers(0, 3))
status_records = st.one_of(
    st.builds(
        sl.ConnectorStatus,
        names,
        st.sampled_from(sl.State),
        st.none(),
        st.sampled_from(["w1", "w2"]),
        st.integers(0, 3),
    ),
    st.builds(
        sl.TaskStatus,
        task_ids,
        st.sampled_from(sl.State),
        st.none(),
        st.sampled_from(["w1", "w2"]),
        st.integers(0, 3),
    ),
    st.builds(sl.ConnectorStatusDeletion, names),
    st.builds(sl.TaskStatusDeletion, task_ids),
    st.builds(sl.TopicStatus, st.sampled_from(["t1", "t2"]), names, st.integers(0, 3), st.integers(0, 9)),
    st.builds(sl.TopicStatusDeletion, st.sampled_from(["t1", "t2"]), names),
)
small_maps = st.dictionaries(st.sampled_from(["f", "g"]), st.integers(0, 2), max_size=2)
offset_records = st.builds(
    ol.SourceOffset,
    names,
    st.none() | small_maps,
    st.none() | st.builds(lambda n: {"pos": n}, st.integers(0, 9)),
)
#: Where the fold takes snapshots: indexes into the history (duplicates and out-of-range ones are harmless).
cuts = st.lists(st.integers(0, 40), max_size=6)


def _assert_read_only(value: object) -> None:
    """Every map a snapshot hands out, at every level, is read-only."""
    if isinstance(value, Mapping):
        assert isinstance(value, MappingProxyType), type(value)
        for item in value.values():
            _assert_read_only(item)


# --- properties ----------------------------------------------------------------------------------------


@settings(max_examples=300)
@given(st.lists(config_records, max_size=40), cuts)
def test_config_fold_in_batches_equals_the_record_at_a_time_fold(
    history: list[cl.ConfigRecord | None], cut_at: list[int]
) -> None:
    expected = [cl.ConfigState()]
    for offset, record in enumerate(history):
        expected.append(ref_config_apply(expected[-1], record, offset))
    fold = cl.ConfigFold()
    taken: list[tuple[int, cl.ConfigState]] = []
    for offset, record in enumerate(history):
        if offset in cut_at:
            taken.append((offset, fold.freeze()))
        fold.add(record, offset)
    assert fold.freeze() == expected[-1]
    # Snapshots taken along the way still show what they showed: later records did not leak into them.
    for offset, snapshot in taken:
        assert snapshot == expected[offset]
    for field in ("connector_configs", "target_states", "committed_task_counts", "restart_requests"):
        _assert_read_only(getattr(fold.freeze().view, field))
    _assert_read_only(fold.freeze().deferred)
    assert cl.apply_all(cl.ConfigState(), ((r, i) for i, r in enumerate(history))) == expected[-1]


@settings(max_examples=200)
@given(st.lists(config_records, max_size=30), st.integers(0, 30))
def test_config_apply_all_continues_from_any_state(history: list[cl.ConfigRecord | None], split: int) -> None:
    state = cl.ConfigState()
    for offset, record in enumerate(history[:split]):
        state = cl.apply(state, record, offset)  # the single-record fold, now on the builder
    rest = [(r, i) for i, r in enumerate(history) if i >= split]
    expected = cl.ConfigState()
    for offset, record in enumerate(history):
        expected = ref_config_apply(expected, record, offset)
    before = state
    assert cl.apply_all(state, rest) == expected
    assert state == before  # the state continued from is not touched


@settings(max_examples=300)
@given(st.lists(status_records, max_size=40), cuts)
def test_status_fold_in_batches_equals_the_record_at_a_time_fold(
    history: list[sl.StatusRecord], cut_at: list[int]
) -> None:
    expected = [sl.StatusState()]
    for record in history:
        expected.append(ref_status_apply(expected[-1], record))
    fold = sl.StatusFold()
    taken: list[tuple[int, sl.StatusState]] = []
    for i, record in enumerate(history):
        if i in cut_at:
            taken.append((i, fold.freeze()))
        fold.add(record)
    final = fold.freeze()
    assert final == expected[-1]
    for i, snapshot in taken:
        assert snapshot == expected[i]
    _assert_read_only(final.connector_statuses)
    _assert_read_only(final.task_statuses_by_connector)
    _assert_read_only(final.topic_statuses)
    split = len(history) // 2
    assert sl.apply_all(expected[split], history[split:]) == expected[-1]


@settings(max_examples=300)
@given(st.lists(offset_records, max_size=40), cuts)
def test_offset_fold_in_batches_equals_the_record_at_a_time_fold(
    history: list[ol.SourceOffset], cut_at: list[int]
) -> None:
    expected = [ol.OffsetState()]
    for record in history:
        expected.append(ref_offset_apply(expected[-1], record))
    fold = ol.OffsetFold()
    taken: list[tuple[int, ol.OffsetState]] = []
    for i, record in enumerate(history):
        if i in cut_at:
            taken.append((i, fold.freeze()))
        fold.add(record)
    final = fold.freeze()
    assert final == expected[-1]
    for i, snapshot in taken:
        assert snapshot == expected[i]
    _assert_read_only(final.records)
    split = len(history) // 2
    assert ol.apply_all(expected[split], history[split:]) == expected[-1]
    state = ol.OffsetState()
    for record in history:
        state = ol.apply(state, record)
    assert state == expected[-1]


def test_freeze_without_new_records_gives_the_same_snapshot() -> None:
    """The shell asks for snapshots far more often than records arrive; an unchanged fold hands out the
    snapshot it already built instead of building another."""
    fold = ol.OffsetFold()
    fold.add(ol.SourceOffset("a", {"f": 1}, {"pos": 1}))
    assert fold.freeze() is fold.freeze()
    config = cl.ConfigFold()
    config.add(cl.ConnectorConfig("a", {"k": "v"}), 0)
    assert config.freeze() is config.freeze()
    status = sl.StatusFold()
    status.add(sl.TopicStatusDeletion("t", "a"))
    assert status.freeze() is status.freeze()
