"""The herder replayed without I/O: events in, actions out, for whole rebalances."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.runtime.group import protocol
from kconnect.runtime.group.herder import (
    CatchUpConfig,
    Herder,
    LeaderOutcome,
    PublishTaskConfigs,
    ReportUnassigned,
    RequestRejoin,
    ResetActiveTopics,
    StartConnector,
    StartTask,
    StopConnector,
    StopTask,
)
from kconnect.runtime.group.protocol import ConnectAssignment, WorkerState
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import config_log
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, ConfigState
from tests.support import revoking_assignor

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"


def snapshot(connectors: dict[str, int], version: str = "v1") -> ClusterConfigSnapshot:
    """A config topic holding ``connectors`` (name -> committed task count), folded as a worker does."""
    state = ConfigState()
    records: list[config_log.ConfigRecord] = []
    for name, count in sorted(connectors.items()):
        records.append(
            config_log.ConnectorConfig(name, {"connector.class": SOURCE, "name": name, "v": version})
        )
        records += [
            config_log.TaskConfig(TaskId(name, i), {"task": str(i), "v": version}) for i in range(count)
        ]
        records.append(config_log.TaskCommit(name, count))
    for offset, record in enumerate(records):
        state = config_log.apply(state, record, offset)
    return state.snapshot()


def assignment(
    version: int,
    connectors: tuple[str, ...] = (),
    tasks: tuple[TaskId, ...] = (),
    revoked_connectors: tuple[str, ...] = (),
    revoked_tasks: tuple[TaskId, ...] = (),
    delay_ms: int = 0,
    error: int = protocol.NO_ERROR,
    offset: int = 0,
) -> ConnectAssignment:
    return ConnectAssignment(
        version=version,
        error=error,
        leader="m1",
        leader_url="http://w1:8083/",
        config_offset=offset,
        connectors=connectors,
        tasks=tasks,
        revoked_connectors=revoked_connectors,
        revoked_tasks=revoked_tasks,
        delay_ms=delay_ms,
    )


def kinds(actions: list[object]) -> list[tuple[str, str]]:
    out = []
    for a in actions:
        name = type(a).__name__
        if isinstance(a, StartConnector | StopConnector):
            out.append((name, a.name))
        elif isinstance(a, StartTask | StopTask):
            out.append((name, str(a.task)))
        else:
            out.append((name, ""))
    return out


A0, A1, B0 = TaskId("a", 0), TaskId("a", 1), TaskId("b", 0)


def test_eager_first_assignment_starts_connectors_then_tasks() -> None:
    h = Herder("w1", snapshot({"a": 2, "b": 1}))
    assert h.on_rejoin_preparing(member_lost=False, selected_protocol=None) == []  # nothing runs yet
    actions = h.on_rebalanced(1, "m1", "default", assignment(0, ("a",), (A0, B0)))
    assert kinds(actions) == [("StartConnector", "a"), ("StartTask", "a-0"), ("StartTask", "b-0")]
    assert h.is_leader and h.group.generation == 1


def test_eager_rejoin_releases_everything_before_joining() -> None:
    h = Herder("w1", snapshot({"a": 2}))
    h.on_rebalanced(1, "m1", "default", assignment(0, ("a",), (A0, A1)))
    actions = h.on_rejoin_preparing(member_lost=False, selected_protocol="default")
    assert kinds(actions) == [("StopTask", "a-0"), ("StopTask", "a-1"), ("StopConnector", "a")]
    assert not h.owned_tasks and not h.running_tasks and h.rebalancing
    # The next generation gives only part back: only that part starts.
    actions = h.on_rebalanced(2, "m1", "default", assignment(0, (), (A1,)))
    assert kinds(actions) == [("StartTask", "a-1")]


def test_cooperative_rejoin_keeps_running_work() -> None:
    h = Herder("w1", snapshot({"a": 2}))
    h.on_rebalanced(1, "m1", "sessioned", assignment(2, ("a",), (A0, A1)))
    assert h.on_rejoin_preparing(member_lost=False, selected_protocol="sessioned") == []
    assert h.running_tasks.keys() == {A0, A1}
    # An empty incremental assignment changes nothing.
    assert h.on_rebalanced(2, "m1", "sessioned", assignment(2)) == []
    assert h.owned_tasks == {A0, A1}


def test_cooperative_revocation_stops_then_asks_to_rejoin_at_once() -> None:
    h = Herder("w1", snapshot({"a": 2, "b": 1}))
    h.on_rebalanced(1, "m1", "sessioned", assignment(2, ("a",), (A0, A1)))
    actions = h.on_rebalanced(2, "m1", "sessioned", assignment(2, ("b",), (B0,), revoked_tasks=(A1,)))
    assert kinds(actions) == [
        ("StopTask", "a-1"),
        ("StartConnector", "b"),
        ("StartTask", "b-0"),
        ("RequestRejoin", ""),
    ]
    rejoin = actions[-1]
    assert isinstance(rejoin, RequestRejoin) and rejoin.delay_ms == 0
    assert h.owned_tasks == {A0, B0}
    # The allocation it reports when rejoining is what it now owns.
    allocation = h.current_allocation()
    assert allocation is not None and set(allocation.tasks) == {A0, B0}
    assert set(allocation.connectors) == {"a", "b"}


def test_scheduled_delay_becomes_a_delayed_rejoin() -> None:
    h = Herder("w1", snapshot({"a": 1}))
    actions = h.on_rebalanced(1, "m1", "compatible", assignment(1, ("a",), (A0,), delay_ms=5000))
    assert actions[-1] == RequestRejoin("scheduled rebalance delay", 5000)


def test_lost_member_releases_everything_even_when_cooperative() -> None:
    h = Herder("w1", snapshot({"a": 1}))
    h.on_rebalanced(1, "m1", "sessioned", assignment(2, ("a",), (A0,)))
    actions = h.on_rejoin_preparing(member_lost=True, selected_protocol="sessioned")
    assert kinds(actions) == [("StopTask", "a-0"), ("StopConnector", "a")]
    assert h.current_allocation() is not None and not h.owned_tasks


def test_config_mismatch_catches_up_and_rejoins() -> None:
    h = Herder("w1", snapshot({"a": 1}))
    actions = h.on_rebalanced(1, "m1", "sessioned", assignment(2, error=protocol.CONFIG_MISMATCH, offset=42))
    assert actions == [CatchUpConfig(42), RequestRejoin("config mismatch")]
    assert h.rebalancing and not h.group.known


def test_new_connector_asks_for_a_rebalance() -> None:
    h = Herder("w1", snapshot({"a": 1}))
    h.on_rebalanced(1, "m1", "sessioned", assignment(2, ("a",), (A0,)))
    actions = h.on_config(snapshot({"a": 1, "b": 1}))
    assert kinds(actions) == [("RequestRejoin", "")]


def test_changed_task_configs_stop_the_task_until_reassigned() -> None:
    h = Herder("w1", snapshot({"a": 2}))
    h.on_rebalanced(1, "m1", "sessioned", assignment(2, ("a",), (A0, A1)))
    actions = h.on_config(snapshot({"a": 2}, version="v2"))
    # The connector's own config changed too: it restarts in place; its tasks wait for the rebalance.
    assert kinds(actions) == [
        ("StopTask", "a-0"),
        ("StopTask", "a-1"),
        ("StopConnector", "a"),
        ("StartConnector", "a"),
        ("RequestRejoin", ""),
    ]
    assert h.owned_tasks == set()


def test_deleted_connector_stops_with_its_tasks() -> None:
    h = Herder("w1", snapshot({"a": 1, "b": 1}))
    h.on_rebalanced(1, "m1", "sessioned", assignment(2, ("a", "b"), (A0, B0)))
    actions = h.on_config(snapshot({"b": 1}))
    # Once the last of it stopped here, its active topics (KIP-558) are forgotten, once.
    assert kinds(actions) == [
        ("StopTask", "a-0"),
        ("StopConnector", "a"),
        ("ResetActiveTopics", ""),
        ("RequestRejoin", ""),
    ]
    assert [a for a in actions if isinstance(a, ResetActiveTopics)] == [ResetActiveTopics("a")]


def test_work_released_for_a_configured_connector_keeps_its_active_topics() -> None:
    h = Herder("w1", snapshot({"a": 2}))
    h.on_rebalanced(1, "m1", "sessioned", assignment(2, ("a",), (TaskId("a", 0), TaskId("a", 1))))
    revoked = assignment(2, (), (), revoked_connectors=("a",), revoked_tasks=(TaskId("a", 1),))
    actions = h.on_rebalanced(2, "m1", "sessioned", revoked)
    assert any(isinstance(a, StopConnector) for a in actions)
    assert not any(isinstance(a, ResetActiveTopics) for a in actions)


def test_task_configs_are_published_only_when_they_differ() -> None:
    h = Herder("w1", snapshot({"a": 2}))
    h.on_rebalanced(1, "m1", "sessioned", assignment(2, ("a",), ()))
    same = [{"task": "0", "v": "v1"}, {"task": "1", "v": "v1"}]
    assert h.on_task_configs("a", same) == []
    different = [{"task": "0", "v": "v1"}]
    assert h.on_task_configs("a", different) == [PublishTaskConfigs("a", ({"task": "0", "v": "v1"},))]
    # Not running here: never published from here.
    assert h.on_task_configs("b", different) == []


# --------------------------------------------------------------------------------- replayed groups


def replay(rounds: list[set[str]], connectors: dict[str, int], seed: int) -> None:
    """Members come and go; each round the leader runs ``revoking_assign`` and every member applies its
    assignment in a random order, rejoining after revocations. After every single application no task
    or connector runs on two workers, and a stable group ends with everything running exactly once."""
    rng = random.Random(seed)
    snap = snapshot(connectors)
    herders: dict[str, Herder] = {}
    generation = 0

    def check_exclusive() -> None:
        seen: dict[object, str] = {}
        for mid, h in herders.items():
            for item in [*h.running_connectors, *h.running_tasks]:
                assert item not in seen, f"{item} runs on {seen[item]} and {mid}"
                seen[item] = mid

    def one_round(members: set[str]) -> bool:
        nonlocal generation
        generation += 1
        for gone in set(herders) - members:
            h = herders.pop(gone)
            h.on_rejoin_preparing(member_lost=True, selected_protocol="sessioned")
        for mid in members:
            herders.setdefault(mid, Herder(mid, snap))
        states = {
            mid: WorkerState(f"http://{mid}/", snap.offset, herders[mid].current_allocation())
            for mid in members
        }
        leader = min(members)
        result = revoking_assignor.revoking_assign(leader, states, snap.offset, snap.task_counts(), 2)
        rejoin = False
        for mid in rng.sample(sorted(members), len(members)):
            actions = herders[mid].on_rebalanced(generation, mid, "sessioned", result[mid])
            rejoin |= any(isinstance(a, RequestRejoin) for a in actions)
            check_exclusive()
        return rejoin

    for members in rounds:
        if not members:
            continue
        for _ in range(5):  # revocations trigger follow-up rounds until the group settles
            if not one_round(members):
                break
        else:
            raise AssertionError("the group did not settle within 5 rounds")
        running_tasks = [t for h in herders.values() for t in h.running_tasks]
        expected = {TaskId(c, i) for c, n in connectors.items() for i in range(n)}
        assert sorted(running_tasks) == sorted(expected)
        running_connectors = sorted(c for h in herders.values() for c in h.running_connectors)
        assert running_connectors == sorted(connectors)
        loads = [len(h.running_tasks) + len(h.running_connectors) for h in herders.values()]
        assert max(loads) - min(loads) <= 2


def test_replayed_joins_and_leaves_never_run_anything_twice() -> None:
    replay(
        [{"w1"}, {"w1", "w2"}, {"w1", "w2", "w3"}, {"w2", "w3"}, {"w3", "w4"}], {"a": 4, "b": 3, "c": 1}, 7
    )


@settings(max_examples=60, deadline=None)
@given(
    rounds=st.lists(
        st.sets(st.sampled_from(["w1", "w2", "w3", "w4", "w5"]), min_size=1), min_size=1, max_size=6
    ),
    connectors=st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 6), min_size=1),
    seed=st.integers(0, 1000),
)
def test_property_any_membership_sequence_is_exclusive_and_converges(
    rounds: list[set[str]], connectors: dict[str, int], seed: int
) -> None:
    replay(rounds, connectors, seed)


# ------------------------------------------------------------------------------------ graceful leave


def test_graceful_leave_hands_work_over_through_the_leader() -> None:
    h = Herder("w1", snapshot({"a": 2}))
    h.on_rebalanced(1, "m2", "sessioned", assignment(2, ("a",), (A0, A1)))
    assert h.begin_leave() == [RequestRejoin("graceful hand-over")]
    assert h.leaving  # the next metadata carries the flag
    # A kconnect leader revokes everything the leaving worker holds...
    actions = h.on_rebalanced(
        2, "m2", "sessioned", assignment(2, revoked_connectors=("a",), revoked_tasks=(A0, A1))
    )
    assert kinds(actions) == [
        ("StopTask", "a-0"),
        ("StopTask", "a-1"),
        ("StopConnector", "a"),
        ("RequestRejoin", ""),
    ]
    # ...and once it has reported holding nothing, it gets nothing and may go.
    actions = h.on_rebalanced(3, "m2", "sessioned", assignment(2))
    assert kinds(actions) == [("ReadyToLeave", "")]


def test_graceful_leave_under_a_leader_that_ignores_the_flag_releases_and_goes() -> None:
    h = Herder("w1", snapshot({"a": 1, "b": 1}))
    h.on_rebalanced(1, "m2", "sessioned", assignment(2, ("a",), (A0,)))
    h.begin_leave()
    # An Apache Kafka Connect leader revokes nothing (and may even assign more): nothing new starts.
    actions = h.on_rebalanced(2, "m2", "sessioned", assignment(2, ("b",), (B0,)))
    assert kinds(actions) == [("StopTask", "a-0"), ("StopConnector", "a"), ("ReadyToLeave", "")]
    assert not h.running_tasks and not h.running_connectors


def test_graceful_leave_under_eager_is_a_plain_release() -> None:
    h = Herder("w1", snapshot({"a": 1}))
    h.on_rebalanced(1, "m2", "default", assignment(0, ("a",), (A0,)))
    actions = h.begin_leave()
    assert kinds(actions) == [("StopTask", "a-0"), ("StopConnector", "a"), ("ReadyToLeave", "")]
    assert not h.leaving


# ------------------------------------------------------------------ decisions the shell used to make


def static_override(
    base: ClusterConfigSnapshot, worker: str, connectors: tuple[str, ...]
) -> ClusterConfigSnapshot:
    """``base`` plus an operator's static-assignment override for ``worker``, as the config topic folds it."""
    state = ConfigState()
    records: list[config_log.ConfigRecord] = []
    for name in base.connectors():
        config = base.connector_config(name)
        assert config is not None
        records.append(config_log.ConnectorConfig(name, {k: v for k, v in config.items() if v is not None}))
        configs = base.task_configs(name)
        records += [
            config_log.TaskConfig(TaskId(name, i), {k: v for k, v in c.items() if v is not None})
            for i, c in enumerate(configs)
        ]
        records.append(config_log.TaskCommit(name, len(configs)))
    records.append(config_log.StaticAssignmentRecord(worker, connectors, ()))
    for offset, record in enumerate(records):
        state = config_log.apply(state, record, offset)
    return state.snapshot()


def test_a_changed_static_override_of_this_worker_asks_for_a_rebalance() -> None:
    base = snapshot({"a": 1})
    h = Herder("w1", base)
    h.on_rebalanced(1, "m1", "static", assignment(3, ("a",), (A0,)))
    actions = h.on_config(static_override(base, "w1", ("a",)))
    assert actions == [RequestRejoin("static assignment changed")]
    # Removing it is a change too.
    assert h.on_config(base) == [RequestRejoin("static assignment changed")]


def test_another_workers_static_override_is_not_this_workers_business() -> None:
    base = snapshot({"a": 1})
    h = Herder("w1", base)
    h.on_rebalanced(1, "m1", "static", assignment(3, ("a",), (A0,)))
    assert h.on_config(static_override(base, "w2", ("a",))) == []


def test_an_assignment_from_a_newer_config_is_applied_after_catching_up() -> None:
    old, new = snapshot({"a": 1}), snapshot({"a": 1, "b": 1})
    h = Herder("w1", old)
    given = assignment(2, ("a", "b"), (A0, B0), offset=new.offset)
    assert h.on_assignment_received(given, config_offset_read=old.offset) == [CatchUpConfig(new.offset)]
    # The shell reads the config topic to its end and hands the snapshot in; the herder takes it as is.
    assert h.on_config_read(new) == [] and h.snapshot is new
    actions = h.on_rebalanced(1, "m1", "sessioned", given)
    assert kinds(actions) == [
        ("StartConnector", "a"),
        ("StartConnector", "b"),
        ("StartTask", "a-0"),
        ("StartTask", "b-0"),
    ]


def test_no_catch_up_when_the_config_read_is_as_new_or_the_assignment_failed() -> None:
    h = Herder("w1", snapshot({"a": 1}))
    assert h.on_assignment_received(assignment(2, offset=5), config_offset_read=5) == []
    failed = assignment(2, error=protocol.CONFIG_MISMATCH, offset=9)
    assert h.on_assignment_received(failed, config_offset_read=5) == []


def test_the_leader_reports_static_work_nobody_lists_once_its_round_completed() -> None:
    h = Herder("w1", snapshot({"a": 1, "b": 1}))
    h.on_leader_assigned(
        LeaderOutcome(unassigned_connectors=frozenset({"b"}), unassigned_tasks=frozenset({B0}), reason="why")
    )
    actions = h.on_rebalanced(4, "m1", "static", assignment(3, ("a",), (A0,)))
    assert actions[-1] == ReportUnassigned(frozenset({"b"}), frozenset({B0}), "why", 4)
    # Once: the next round this worker did not lead reports nothing.
    assert not any(isinstance(a, ReportUnassigned) for a in h.on_rebalanced(5, "m1", "static", assignment(3)))


def test_the_leader_of_the_empty_downgrade_round_asks_for_the_eager_round() -> None:
    h = Herder("w1", snapshot({"a": 1}))
    h.on_rebalanced(1, "m1", "default", assignment(0, ("a",), (A0,)))
    h.on_leader_assigned(LeaderOutcome(downgrade_round=True))
    actions = h.on_rebalanced(2, "m1", "default", assignment(0, ("a",), (A0,)))
    assert [a for a in actions if isinstance(a, RequestRejoin)] == [
        RequestRejoin("leader's downgrade round: the eager round follows")
    ]
    assert h.leader_outcome is None


def test_a_failed_round_still_consumes_what_its_leader_decided() -> None:
    h = Herder("w1", snapshot({"a": 1}))
    h.on_leader_assigned(LeaderOutcome(downgrade_round=True))
    actions = h.on_rebalanced(1, "m1", "sessioned", assignment(2, error=protocol.CONFIG_MISMATCH, offset=3))
    assert actions == [
        CatchUpConfig(3),
        RequestRejoin("config mismatch"),
        RequestRejoin("leader's downgrade round: the eager round follows"),
    ]
    assert h.leader_outcome is None
