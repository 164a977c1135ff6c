"""Warm-up hand-over (issue 25) in whole clusters under ``group.protocol=connect``: real herders over one
group-records partition (``tests/support/reconcile_model``) with learners on.

After every step the model checks that no task runs on two members, that no member runs a task it is
preparing, that an activation uses a finished preparation, that every target keeps each learner's task in
exactly one other member's share (never two active owners, a learner never an owner), at most
``max.warmup.tasks`` learners a member besides a leaving member's tasks, and that no target drops a task
whose owner lives. The scenarios are the learner seed's (scale-out, graceful scale-down, leader fail-over
mid warm-up) plus its time bounds and a learner crashing; the properties interleave all of them with
joins, leaves and leader changes.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.runtime.group.handover import WarmupSettings
from kconnect.runtime.ids import TaskId
from tests.support.reconcile_model import ReconcileModel

WARMUP = WarmupSettings(max_warmup_tasks=2, warmup_timeout_ms=60_000, graceful_timeout_ms=5_000)


def tasks_of(model: ReconcileModel, member: str) -> set[TaskId]:
    return set(model.members[member].tasks)


def learners_in_target(model: ReconcileModel) -> dict[str, set[TaskId]]:
    state = model.members[model.leader].state
    assert state is not None and state.target is not None
    return {m.member_id: {x.task for x in m.learners} for m in state.target.members}


def pass_without_preparing(model: ReconcileModel) -> None:
    """Everyone reads everything once; no preparation finishes."""
    for mid in sorted(model.members):
        model.complete(mid)
        model.read_config(mid)
        model.read(mid)


def test_scale_out_hands_over_without_stopping_a_task_before_its_learner_is_ready() -> None:
    model = ReconcileModel(["m1"], {"a": 4}, warmup=WARMUP, learns=True, prepare_in_settle=False)
    model.settle()
    before = tasks_of(model, "m1")
    model.begin_round("m1", ["m1", "m2"])
    model.complete_all()
    for _ in range(3):
        pass_without_preparing(model)
    # Learning: m1 still runs everything, m2 prepares two tasks and runs none.
    assert tasks_of(model, "m1") == before and not model.members["m2"].tasks
    learning = learners_in_target(model)["m2"]
    assert len(learning) == 2 and set(model.members["m2"].preparing) == learning
    model.prepare("m2")
    model.prepare_in_settle = True
    model.settle()
    model.assert_converged()
    assert tasks_of(model, "m2") == learning, "the tasks learned are the tasks moved"
    assert model.activations == 2, "both started from their preparation, none cold"
    assert learners_in_target(model) == {"m1": set(), "m2": set()}


def test_graceful_scale_down_has_the_tasks_learned_before_the_member_goes() -> None:
    model = ReconcileModel(
        ["m1", "m2", "m3"], {"a": 4, "b": 2}, warmup=WARMUP, learns=True, prepare_in_settle=False
    )
    model.settle()
    leaving = tasks_of(model, "m3")
    assert leaving
    model.begin_leave("m3")
    model.complete_all()
    for _ in range(3):
        pass_without_preparing(model)
    assert tasks_of(model, "m3") == leaving, "it keeps running its tasks while they are learned"
    learned = set().union(*learners_in_target(model).values())
    assert learned == leaving
    for mid in ("m1", "m2"):
        model.prepare(mid)
    model.prepare_in_settle = True
    model.settle()
    assert "m3" not in model.members
    model.assert_converged()
    assert model.activations == len(leaving)


def test_a_departure_past_max_warmup_tasks_is_learned_whole_and_nothing_starts_cold() -> None:
    # Issue 34's rolling restart: m2 leaves with six tasks, one staying member may learn one task at once
    # for itself; the departure's tasks are all learned at once all the same (they land on m1 anyway),
    # while m2 keeps running them, and each starts on m1 from its preparation.
    one = WarmupSettings(max_warmup_tasks=1, warmup_timeout_ms=60_000, graceful_timeout_ms=5_000)
    model = ReconcileModel(["m1", "m2"], {"a": 12}, warmup=one, learns=True, prepare_in_settle=False)
    model.settle()
    leaving = tasks_of(model, "m2")
    assert len(leaving) == 6
    model.begin_leave("m2")
    model.complete_all()
    for _ in range(3):
        pass_without_preparing(model)
    assert tasks_of(model, "m2") == leaving, "it keeps running its tasks while they are learned"
    assert learners_in_target(model)["m1"] == leaving
    model.prepare("m1")
    model.prepare_in_settle = True
    model.settle()
    assert "m2" not in model.members
    model.assert_converged()
    assert model.activations == len(leaving), "every task of the departure started warm"


def test_a_learner_not_ready_in_time_is_dropped_and_the_task_moves_plainly() -> None:
    model = ReconcileModel(["m1"], {"a": 4}, warmup=WARMUP, learns=True, prepare_in_settle=False)
    model.settle()
    start = model.now_ms
    model.begin_round("m1", ["m1", "m2"])
    model.complete_all()
    model.settle()  # nothing prepares: the leader wakes at the deadline and drops the learners
    model.assert_converged()
    assert model.activations == 0 and len(tasks_of(model, "m2")) == 2
    assert model.now_ms >= start + WARMUP.warmup_timeout_ms
    assert not model.members["m2"].preparing and not model.members["m2"].prepared, "discarded"


def test_a_leaving_members_hand_over_is_bounded_by_the_graceful_timeout() -> None:
    model = ReconcileModel(["m1", "m2"], {"a": 4}, warmup=WARMUP, learns=True, prepare_in_settle=False)
    model.settle()
    start = model.now_ms
    model.begin_leave("m2")
    model.complete_all()
    model.settle()
    assert "m2" not in model.members
    model.assert_converged()
    assert model.now_ms - start < WARMUP.warmup_timeout_ms, "gone after the graceful bound, not the warm-up"


@pytest.mark.parametrize("cap", [1, 2])
def test_at_most_max_warmup_tasks_learners_a_member(cap: int) -> None:
    # The model checks the cap on every target; here: the moves still all happen, in turns.
    warmup = WarmupSettings(max_warmup_tasks=cap, warmup_timeout_ms=60_000, graceful_timeout_ms=5_000)
    model = ReconcileModel(["m1"], {"a": 6}, warmup=warmup, learns=True, prepare_in_settle=False)
    model.settle()
    model.begin_round("m1", ["m1", "m2"])
    model.complete_all()
    pass_without_preparing(model)
    assert len(learners_in_target(model)["m2"]) == cap
    model.prepare_in_settle = True
    model.settle()
    model.assert_converged()
    assert model.activations == 3 and len(tasks_of(model, "m2")) == 3


def test_a_new_leader_mid_warm_up_keeps_the_learners_learning() -> None:
    model = ReconcileModel(["m1", "m2"], {"a": 4}, warmup=WARMUP, learns=True, prepare_in_settle=False)
    model.settle()
    model.begin_round("m1", ["m1", "m2", "m3"])
    model.complete_all()
    pass_without_preparing(model)
    learning = learners_in_target(model)
    assert learning["m3"]
    # A round led by m2 (same members): the new coordinator resumes from the records.
    model.begin_round("m2")
    model.complete_all()
    pass_without_preparing(model)
    assert learners_in_target(model) == learning and model.leader == "m2"
    model.prepare_in_settle = True
    model.settle()
    model.assert_converged()
    assert model.activations == len(learning["m3"])


def test_the_owner_failing_mid_warm_up_gives_its_tasks_at_once_never_twice() -> None:
    # The seed's leader transfer: S1 (leader, owner of what S4 learns) crashes before S4 is ready.
    model = ReconcileModel(["m1", "m2"], {"a": 4}, warmup=WARMUP, learns=True, prepare_in_settle=False)
    model.settle()
    model.begin_round("m1", ["m1", "m2", "m3"])
    model.complete_all()
    pass_without_preparing(model)
    assert learners_in_target(model)["m3"]
    model.prepare("m3")
    model.begin_round("m2", ["m2", "m3"])  # m1's process is gone
    model.complete_all()
    model.settle()
    model.assert_converged()


def test_a_learner_crashing_leaves_its_tasks_where_they_run() -> None:
    model = ReconcileModel(["m1"], {"a": 4}, warmup=WARMUP, learns=True, prepare_in_settle=False)
    model.settle()
    running = tasks_of(model, "m1")
    model.begin_round("m1", ["m1", "m2"])
    model.complete_all()
    pass_without_preparing(model)
    assert learners_in_target(model)["m2"]
    stops = model.stops
    model.begin_round("m1", ["m1"])  # m2 crashes while learning
    model.complete_all()
    model.settle()
    model.assert_converged()
    assert tasks_of(model, "m1") == running and model.stops == stops, "nothing moved, nothing stopped"
    assert learners_in_target(model) == {"m1": set()}


def test_members_that_cannot_learn_get_tasks_the_plain_way() -> None:
    model = ReconcileModel(["m1"], {"a": 4}, warmup=WARMUP, learns=True)
    model.settle()
    model.begin_round("m1", ["m1", "m2"])
    model.members["m2"].herder.learns = False  # an older worker, or a data plane that cannot prepare
    model.begin_round("m1")
    model.complete_all()
    model.settle()
    model.assert_converged()
    assert model.learners_seen == 0 and model.activations == 0


@pytest.mark.parametrize("learns", [False, True], ids=["not-learning", "learning-but-cap-0"])
def test_warm_up_off_is_todays_behaviour(learns: bool) -> None:
    def run(warmup: WarmupSettings | None, learn: bool) -> list[tuple[frozenset[TaskId], ...]]:
        model = ReconcileModel(["m1"], {"a": 4, "b": 2}, warmup=warmup, learns=learn)
        model.settle()
        model.begin_round("m1", ["m1", "m2", "m3"])
        model.complete_all()
        model.settle()
        model.begin_leave("m2")
        model.complete_all()
        model.settle()
        model.assert_converged()
        assert model.learners_seen == 0
        state = model.members[model.leader].state
        assert state is not None and state.target is not None
        return [tuple(m.assigned.tasks for m in state.target.members)]

    assert run(WarmupSettings(max_warmup_tasks=0), learns) == run(None, False)


# ------------------------------------------------------------------------------------ properties

MEMBERS4 = ("m1", "m2", "m3", "m4")
MEMBER4 = st.sampled_from(MEMBERS4)
READ = st.tuples(st.just("read"), MEMBER4, st.sampled_from([1, 2, None, None]))
PREPARE = st.tuples(st.just("prepare"), MEMBER4)
COMPLETE = st.tuples(st.just("complete"), MEMBER4)
MEMBERSHIP = st.tuples(st.just("round"), MEMBER4, st.lists(MEMBER4, min_size=1, max_size=4, unique=True))
#: Joins, crashes, graceful leaves and leader changes, with reads, preparations and time in between.
CHURN = st.one_of(
    MEMBERSHIP,
    st.tuples(st.just("round"), MEMBER4),  # a new leader, same members
    COMPLETE,
    COMPLETE,
    READ,
    READ,
    READ,
    PREPARE,
    PREPARE,
    st.tuples(st.just("tick"), st.sampled_from([500, 5_000, 70_000])),
    st.tuples(st.just("leave"), MEMBER4),
    st.tuples(st.just("depart"), MEMBER4),
)
#: The same with configuration changes (tasks appear, go, change config mid warm-up).
CHURN_AND_CONFIG = st.one_of(
    CHURN,
    st.tuples(st.just("config"), MEMBER4),
    st.tuples(
        st.just("change"), st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 4), max_size=3)
    ),
)
WARMUPS = st.builds(
    WarmupSettings,
    max_warmup_tasks=st.sampled_from([0, 1, 2, 2, 3, 3]),
    warmup_timeout_ms=st.sampled_from([1_000, 60_000]),
    graceful_timeout_ms=st.sampled_from([0, 5_000, 120_000]),
)


def replay(
    ops: list[tuple[object, ...]], warmup: WarmupSettings, max_delay_ms: int, prepare_in_settle: bool
) -> ReconcileModel:
    model = ReconcileModel(
        ["m1", "m2"],
        {"a": 4, "b": 2},
        warmup=warmup,
        learns=True,
        max_delay_ms=max_delay_ms,
        prepare_in_settle=prepare_in_settle,
    )
    for op in ops:
        names_member = op[0] not in ("change", "tick")
        new_membership = op[0] == "round" and len(op) == 3
        if names_member and not new_membership and op[1] not in model.members:
            continue  # a member that is not in the group (any more) does nothing, nor leads a round
        staying = [m.member_id for m in model.members.values() if not m.herder.leaving]
        if op[0] == "leave" and staying == [op[1]]:
            continue  # the last member staying does not leave: someone must run the work
        listed = [str(m) for m in op[2]] if new_membership and isinstance(op[2], list) else []
        if new_membership and not [m for m in listed if m in staying or m not in model.members]:
            continue  # nor does a round drop every member staying
        model.apply(op)  # every step: exclusivity, learners apart from owners, nothing dropped
    # Every task eventually assigned: once everyone has read everything (preparations finishing, or the
    # leader waking at the learners' deadlines), everything runs exactly once and no learner is left.
    model.settle()
    model.assert_converged()
    assert all(not ls for ls in learners_in_target(model).values()), "no learner left once settled"
    return model


@settings(max_examples=150, deadline=None, derandomize=True)
@given(
    ops=st.lists(CHURN, min_size=10, max_size=60),
    warmup=WARMUPS,
    max_delay_ms=st.sampled_from([0, 30_000]),
    prepare_in_settle=st.booleans(),
)
def test_property_membership_churn_with_learners(
    ops: list[tuple[object, ...]], warmup: WarmupSettings, max_delay_ms: int, prepare_in_settle: bool
) -> None:
    replay(ops, warmup, max_delay_ms, prepare_in_settle)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(
    ops=st.lists(CHURN_AND_CONFIG, min_size=10, max_size=60),
    warmup=WARMUPS,
    prepare_in_settle=st.booleans(),
)
def test_property_churn_and_config_changes_with_learners(
    ops: list[tuple[object, ...]], warmup: WarmupSettings, prepare_in_settle: bool
) -> None:
    replay(ops, warmup, 0, prepare_in_settle)
