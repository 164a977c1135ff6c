"""Whole clusters under ``group.protocol=connect``, replayed with real herders over one group-records
partition (``tests/support/reconcile_model``): after every step no connector or task runs on two members;
once every member has read everything, every configured connector and task runs exactly once; and no
config change ever asks for a classic round.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.runtime.group.coordinator import is_reconciled_target
from kconnect.runtime.group.group_records import Assigned
from kconnect.runtime.group.herder import LATE_LEAVE_REASON
from tests.support.reconcile_model import DoubleRun, ReconcileModel

MEMBERS = ("m1", "m2", "m3")
WORK = {"a": 3, "b": 2}


def assert_no_round_asked(model: ReconcileModel) -> None:
    """No herder asked for a classic round outside one, except to announce a graceful hand-over (the
    leaving flag travels in JoinGroup metadata)."""
    announcing = ("graceful hand-over", LATE_LEAVE_REASON)
    outside = [r for r in model.rejoins if not r.during_round and r.reason not in announcing]
    assert outside == [], f"a classic round was asked for while reconciling: {outside}"


def shares(model: ReconcileModel, reader: str) -> dict[str, Assigned]:
    state = model.members[reader].state
    assert state is not None and state.target is not None
    return {m.member_id: m.assigned for m in state.target.members}


@pytest.mark.parametrize("from_classic", [False, True], ids=["new-group", "after-classic-rounds"])
def test_a_cluster_reconciles_to_everything_running_once(from_classic: bool) -> None:
    model = ReconcileModel(MEMBERS, WORK, from_classic=from_classic)
    model.settle()
    model.assert_converged()
    leader = model.members["m1"].state
    assert leader is not None and is_reconciled_target(leader.target)
    assert all(m.herder.group.reconciling for m in model.members.values())
    assert model.rejoins == []


def test_the_migration_from_classic_rounds_moves_nothing() -> None:
    model = ReconcileModel(MEMBERS, WORK, from_classic=True)
    starts = model.starts
    model.settle()
    # The classic round started everything; the first target keeps it where it runs.
    assert model.starts == starts and model.stops == 0
    model.assert_converged()


def test_config_changes_are_reconciled_without_a_round() -> None:
    model = ReconcileModel(MEMBERS, WORK)
    model.settle()
    generation = model.generation
    for work in ({"a": 3, "b": 2, "c": 1}, {"a": 6, "c": 1}, {"a": 1, "c": 4, "d": 2}, {"d": 0}, WORK):
        model.set_connectors(work)
        model.settle()
        model.assert_converged()
    assert model.generation == generation
    assert model.rejoins == []


def test_a_member_reading_slowly_never_runs_what_another_was_given() -> None:
    model = ReconcileModel(MEMBERS, {"a": 6})
    model.settle()
    # The leader reads the new config first and installs a target that moves work to a new connector.
    model.set_connectors({"a": 2, "b": 4})
    model.read_config("m1")
    model.read("m1")
    # m2 and m3 read the new target one record at a time, m3 ahead of m2 and before its config.
    for _ in range(len(model.log)):
        model.read("m3", 1)
        model.read("m2", 1)
        model.read("m3", 1)
    model.read_config("m3")
    model.read_config("m2")
    model.settle()
    model.assert_converged()
    assert model.rejoins == []


def test_two_claims_of_one_task_from_consecutive_targets_start_it_once() -> None:
    # Target N gives a new task to y; target N+1 (the next config change) moves it to z before y has read
    # N+1. z reads N+1 and claims the task first; y, still at N, claims it after. Both claims are in the
    # log; only the reader of the first one back may start it.
    model = ReconcileModel(MEMBERS, {"a": 2, "b": 2})
    model.settle()
    model.set_connectors({"a": 2, "b": 3, "c": 1})
    model.read_config("m1")
    model.read("m1")
    first = shares(model, "m1")
    model.set_connectors({"a": 1, "b": 2, "c": 1})
    model.read_config("m1")
    model.read("m1")
    second = shares(model, "m1")
    state = model.members["m1"].state
    assert state is not None and state.target is not None
    epoch_n = state.target.assignment_epoch - 1
    moved = [
        (y, z, t)
        for y in ("m2", "m3")
        for z in ("m2", "m3")
        for t in sorted(first[y].tasks & second[z].tasks)
        if y != z
    ]
    assert moved, "the second target moves a task the first one gave to another member"
    y, z, task = moved[0]
    model.read_config(y)
    model.read_config(z)
    model.read(z)  # z claims the task under N+1
    while True:  # y reads up to target N only, and claims it too
        model.read(y, 1)
        ystate = model.members[y].state
        if ystate is not None and ystate.target is not None and ystate.target.assignment_epoch == epoch_n:
            break
    claims = []
    for member in (y, z):
        written = model.members[member].herder.written
        if written is not None and task in written.assigned.tasks:
            claims.append(member)
    assert claims == [y, z], "both members claimed the task"
    for _ in range(3):
        model.read(z)
        model.read(y)
    model.settle()
    model.assert_converged()
    assert task in model.members[z].running()


# ------------------------------------------------------------------------------------ replays

MEMBER = st.sampled_from(MEMBERS)
READ = st.tuples(st.just("read"), MEMBER, st.sampled_from([1, 1, 2, None]))
CONFIG = st.tuples(st.just("config"), MEMBER)
CHANGE = st.tuples(
    st.just("change"), st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 4), max_size=4)
)
TICK = st.tuples(st.just("tick"), st.sampled_from([50, 500, 5_000]))
ROUND = st.tuples(st.just("round"), MEMBER)
COMPLETE = st.tuples(st.just("complete"), MEMBER)

STEPS = st.one_of(READ, READ, READ, CONFIG, CONFIG, CHANGE, TICK)
STEPS_WITH_ROUNDS = st.one_of(READ, READ, READ, CONFIG, CHANGE, TICK, ROUND, COMPLETE, COMPLETE)


def replay(ops: list[tuple[object, ...]], *, from_classic: bool = False) -> ReconcileModel:
    model = ReconcileModel(MEMBERS, WORK, from_classic=from_classic)
    for op in ops:
        model.apply(op)  # check_exclusive runs after every herder event
    model.settle()
    model.assert_converged()
    assert_no_round_asked(model)
    return model


@settings(max_examples=60, deadline=None, derandomize=True)
@given(ops=st.lists(STEPS, max_size=50), from_classic=st.booleans())
def test_property_any_interleaving_of_reads_and_config_changes(
    ops: list[tuple[object, ...]], from_classic: bool
) -> None:
    model = replay(ops, from_classic=from_classic)
    assert model.generation == (2 if from_classic else 1), "no classic round was needed"
    assert model.rejoins == []


@settings(max_examples=60, deadline=None, derandomize=True)
@given(ops=st.lists(STEPS_WITH_ROUNDS, max_size=50))
def test_property_leader_changes_mid_reconciliation(ops: list[tuple[object, ...]]) -> None:
    replay(ops)


# ------------------------------------------------------------------------------------ leader change


def test_a_new_leader_resumes_a_reconciliation_where_the_old_one_left_it() -> None:
    model = ReconcileModel(MEMBERS, {"a": 4, "b": 2})
    model.settle()
    # m1 (the leader) installs a target for a changed config; the others are between targets: m2 has
    # read part of it, m3 nothing.
    epoch_before = model.max_epoch_seen
    model.set_connectors({"a": 1, "b": 2, "c": 3})
    model.read_config("m1")  # the shell reconciles after a config move: the leader installs the target
    assert model.max_epoch_seen == epoch_before + 1
    model.read("m1")
    model.read_config("m2")
    model.read("m2", 3)
    # A classic round elects m2; it completes for m2 first, which resumes coordinating from the records.
    model.begin_round("m2")
    model.complete("m2")
    model.read("m2")
    model.complete("m3")
    model.read_config("m3")
    model.read("m3", 1)
    model.complete("m1")
    model.settle()
    model.assert_converged()
    assert not model.members["m1"].herder.is_leader and model.members["m2"].herder.is_leader
    assert model.rejoins == [] or all(r.during_round for r in model.rejoins)


def test_a_new_leader_that_had_not_read_the_last_target_resumes_it() -> None:
    model = ReconcileModel(MEMBERS, {"a": 4})
    model.settle()
    model.set_connectors({"a": 4, "b": 2})
    model.read_config("m1")
    model.read("m1")
    before = shares(model, "m1")
    model.read_config("m3")  # restarts what m3 runs with the new configs
    moves = (model.starts, model.stops)
    # m3 has read the config but not the target when it becomes leader; the shell reads the group records
    # to their end on joining, so it coordinates from m1's target rather than from the one before it.
    # (Its members' metadata now carries newer config offsets, so it may bump the group epoch, but the
    # target it installs is the same.)
    model.begin_round("m3")
    model.complete("m3")
    model.read("m3")
    assert shares(model, "m3") == before
    # Nothing is undone (no stop); m3 may meanwhile start the part of the target that is its own.
    assert model.stops == moves[1]
    model.complete_all()
    model.settle()
    model.assert_converged()


def test_a_round_that_changes_nothing_bumps_nothing() -> None:
    model = ReconcileModel(MEMBERS, WORK)
    model.settle()
    epoch, log = model.max_epoch_seen, len(model.log)
    model.begin_round("m2")
    model.complete_all()
    model.settle()
    assert model.max_epoch_seen == epoch and len(model.log) == log


def stale_leader() -> tuple[ReconcileModel, int]:
    """m1 led the target that added connector b; m1 and m2 run it. m3's herder has not taken in the new
    config (the shell hands it over in the config-moved event, after ``_on_joined`` reconciled) when it
    is elected leader. Returns the model and the number of stops before the round."""
    model = ReconcileModel(MEMBERS, {"a": 4})
    model.settle()
    model.set_connectors({"a": 4, "b": 2})
    for _ in range(4):
        for mid in MEMBERS:
            if mid != "m3":
                model.read_config(mid)
            model.read(mid)
    state = model.members["m1"].state
    assert state is not None and state.connectors_tasks is not None
    assert "b" in state.connectors_tasks.assigned.connectors
    assert "b" in model.owners()
    return model, model.stops


def test_a_new_leader_behind_on_config_does_not_undo_the_last_target() -> None:
    model, stops = stale_leader()
    model.begin_round("m3")
    model.complete("m3")
    model.complete_all()
    for mid in ("m1", "m2"):
        model.read(mid)
    state = model.members["m1"].state
    assert state is not None and state.connectors_tasks is not None
    assert "b" in state.connectors_tasks.assigned.connectors, "the new leader's target dropped b"
    assert model.stops == stops, "the leader change stopped running work"


def test_a_new_leader_behind_on_config_converges_once_it_reads_the_config() -> None:
    model, _ = stale_leader()
    model.begin_round("m3")
    model.complete_all()
    model.settle()
    model.assert_converged()
    assert "b" in model.owners()


# ------------------------------------------------------------------------------------ membership


def test_a_member_that_vanishes_has_its_work_held_back_then_reassigned() -> None:
    model = ReconcileModel(MEMBERS, {"a": 4, "b": 2}, max_delay_ms=30_000, rebalance_timeout_ms=600_000)
    model.settle()
    lost = model.members["m3"].running()
    assert lost
    model.begin_round("m1", ["m1", "m2"])
    model.complete_all()
    # Held back: nobody runs m3's work until the delay is due.
    for _ in range(3):
        model.quiet_pass()
    assert not (lost & set(model.owners()))
    wake = model.members["m1"].herder.wake_at_ms
    assert wake is not None and wake > model.now_ms
    model.advance(wake - model.now_ms)
    model.settle()
    model.assert_converged()
    assert lost <= set(model.owners())


def test_a_member_joining_takes_a_share_without_a_double_run() -> None:
    model = ReconcileModel(("m1", "m2"), {"a": 5, "b": 3})
    model.settle()
    model.begin_round("m1", ["m1", "m2", "m3"])
    model.complete("m1")  # the leader installs a target that moves work of m1 and m2 to m3
    model.read("m1")
    model.complete("m3")  # m3 reads the target and claims what nobody lists
    assert not model.members["m3"].running(), "a claim is started only once it has been read back"
    model.read("m3")
    model.read("m3")
    # What m3 runs now, m1 had released; what m2 still lists, m3 waits for.
    state = model.members["m3"].state
    assert state is not None
    assert not (model.members["m3"].running() & model.members["m2"].running())
    model.complete("m2")
    model.read("m3")
    model.settle()
    model.assert_converged()
    assert model.members["m3"].running()
    assert model.rejoins == []


def test_a_graceful_leave_hands_the_work_over_before_the_member_goes() -> None:
    model = ReconcileModel(MEMBERS, {"a": 4, "b": 2}, max_delay_ms=30_000)
    model.settle()
    leaving = model.members["m2"]
    held = leaving.running()
    assert held
    model.begin_leave("m2")  # asks for a round: the leaving flag travels in its metadata
    assert [r.reason for r in model.rejoins] == ["graceful hand-over"]
    model.complete("m1")  # the leader gives m2 an empty share at once (no scheduled delay)
    model.complete("m3")
    model.read("m3")
    assert not (model.members["m3"].running() & held), "m3 waits until m2 released"
    model.complete("m2")  # m2 stops everything and writes an empty record
    assert not leaving.running() and not leaving.ready_to_leave
    model.read("m2")  # ... and goes once it has read that record back
    assert leaving.ready_to_leave
    model.settle()
    assert "m2" not in model.members
    model.assert_converged()
    assert held <= set(model.owners())
    assert_no_round_asked(model)


@pytest.mark.parametrize("members", [MEMBERS, ("m1",)], ids=["three-members", "the-last-member"])
def test_a_worker_that_begins_leaving_during_a_round_says_so_in_one_more(members: tuple[str, ...]) -> None:
    """SIGTERM while a round is on: the JoinGroup already went out without the leaving flag, so the
    leader's target keeps the worker's share; without another round it would wait for a target that
    never comes (until rebalance.timeout.ms)."""
    model = ReconcileModel(members, WORK, max_delay_ms=30_000)
    model.settle()
    leaving = model.members[members[-1]]
    held = leaving.running()
    assert held
    model.begin_round("m1")  # a round someone else asked for: the metadata says the worker stays
    model.execute(leaving, leaving.herder.begin_leave())
    model.complete_all()
    model.settle()
    assert leaving.running() == held and not leaving.ready_to_leave
    assert [r.reason for r in model.rejoins if r.member == leaving.member_id][-1] == LATE_LEAVE_REASON
    model.begin_round("m1")  # the round it asked for carries the flag
    model.complete_all()
    model.settle()
    assert not leaving.running()
    assert leaving.member_id not in model.members, "it went once it had released everything"
    if len(members) > 1:
        model.assert_converged()
        assert held <= set(model.owners())


@pytest.mark.parametrize("max_delay_ms", [0, 30_000], ids=["no-delay", "with-delay"])
def test_the_leader_leaving_gracefully_hands_over_and_a_new_leader_takes_over(max_delay_ms: int) -> None:
    model = ReconcileModel(MEMBERS, {"a": 4, "b": 2}, max_delay_ms=max_delay_ms)
    model.settle()
    held = model.members["m1"].running()
    model.begin_leave("m1")
    model.complete_all()
    model.settle()
    assert sorted(model.members) == ["m2", "m3"] and model.leader != "m1"
    model.assert_converged()
    assert held <= set(model.owners())
    assert_no_round_asked(model)


MEMBERS4 = ("m1", "m2", "m3", "m4")
MEMBER4 = st.sampled_from(MEMBERS4)
STEPS_WITH_MEMBERSHIP = st.one_of(
    st.tuples(st.just("read"), MEMBER4, st.sampled_from([1, 1, 2, None])),
    st.tuples(st.just("read"), MEMBER4, st.sampled_from([1, 1, 2, None])),
    st.tuples(st.just("read"), MEMBER4, st.sampled_from([1, 1, 2, None])),
    st.tuples(st.just("config"), MEMBER4),
    CHANGE,
    st.tuples(st.just("tick"), st.sampled_from([50, 500, 5_000, 20_000])),
    st.tuples(st.just("round"), MEMBER4, st.lists(MEMBER4, min_size=1, max_size=4, unique=True)),
    st.tuples(st.just("complete"), MEMBER4),
    st.tuples(st.just("complete"), MEMBER4),
    st.tuples(st.just("leave"), MEMBER4),
    st.tuples(st.just("depart"), MEMBER4),
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    ops=st.lists(STEPS_WITH_MEMBERSHIP, max_size=60),
    max_delay_ms=st.sampled_from([0, 30_000]),
    from_classic=st.booleans(),
)
def test_property_members_joining_and_leaving(
    ops: list[tuple[object, ...]], max_delay_ms: int, from_classic: bool
) -> None:
    model = ReconcileModel(MEMBERS, WORK, max_delay_ms=max_delay_ms, from_classic=from_classic)
    for op in ops:
        if op[0] in ("read", "config", "complete", "leave", "depart") and op[1] not in model.members:
            continue  # a member that is not in the group (any more) does nothing
        model.apply(op)
    model.settle()
    model.assert_converged()
    assert_no_round_asked(model)


# ------------------------------------------------------------------------------------ fencing


def lagging_member() -> tuple[ReconcileModel, set[object]]:
    """m3 joins; the target moves work of m1 and m2 to it; m1 revokes at once but m2 stops reading the
    group records (its process keeps running) for longer than rebalance.timeout.ms. The leader (m1) wakes
    at the deadline and fences m2. Returns the model and what m2 was asked to revoke."""
    model = ReconcileModel(("m1", "m2"), {"a": 4, "b": 4}, rebalance_timeout_ms=10_000)
    model.settle()
    model.begin_round("m1", ["m1", "m2", "m3"])
    model.complete("m2")  # reads the records to their end before the leader installs the new target
    model.complete("m1")
    model.complete("m3")
    model.read("m1")
    model.read("m1")  # the leader has read its own acknowledgement back
    model.read("m3")
    state = model.members["m1"].state
    assert state is not None and state.target is not None and state.target.assignment_epoch == 2
    share = next(m.assigned for m in state.target.members if m.member_id == "m2")
    revoked = model.members["m2"].running() - {*share.connectors, *share.tasks}
    assert revoked, "the new target moves some of m2's work to m3"
    wake = model.members["m1"].herder.wake_at_ms
    assert wake is not None
    model.advance(wake - model.now_ms)  # the leader wakes at the revocation deadline
    decision = model.members["m1"].herder.last_decision
    assert decision is not None and decision.fenced == frozenset({"m2"})
    return model, revoked


def test_a_member_that_does_not_revoke_in_time_is_fenced_and_starts_over() -> None:
    model, revoked = lagging_member()
    # m2 reads the tombstone of its record before m3 does: it stops everything and starts over at epoch 0.
    stops = model.stops
    model.read("m2")
    m2 = model.members["m2"]
    assert not (m2.running() & revoked)
    assert model.stops > stops
    model.settle()
    model.assert_converged()
    assert model.rejoins == []


def test_the_fencing_tombstone_is_the_documented_exception_to_exclusivity() -> None:
    # The seed's exception (see the reconciler's docstring): once the leader fenced a member that did not
    # revoke within rebalance.timeout.ms, a member reading the tombstone before the fenced member does
    # starts the work the fenced member may still run. Every other replay in this module never sees this.
    model, revoked = lagging_member()
    with pytest.raises(DoubleRun) as raised:
        for _ in range(3):
            model.read("m3")
    assert any(str(item) in str(raised.value) for item in revoked)
