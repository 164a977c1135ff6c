"""Issue 34: a worker releasing tasks says each released as soon as it has stopped, so its new owner may
start it while slower ones still stop; a task still stops before another worker starts it.

Replayed with real herders over one group-records partition (``tests/support/reconcile_model``, with
``background_stops``: a stop finishes only when a step says so), and the reconciler's rule as a table. The
shell's part (each stop on its own thread, bounded by ``task.shutdown.graceful.timeout.ms``, answered with
a ``TaskReleased`` event) is ``runtime/shell/tasks.py``'s ``Tasks.release``, tested at the end with a
stand-in executor whose stop of one task hangs.
"""

from __future__ import annotations

import queue
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.config.worker import WorkerConfig
from kconnect.runtime.group import herder as hd
from kconnect.runtime.group.group_records import (
    Assigned,
)
from kconnect.runtime.group.reconciler import reconcile
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.tasks import TaskReleased, Tasks
from kconnect.runtime.shell.view import WorkerMetrics
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot
from tests.support.reconcile_model import ReconcileModel
from tests.unit.test_reconciler import group, parse, rec

BASE = {
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
    "key.converter": "json",
    "value.converter": "json",
}

# ------------------------------------------------------------------------------ the reconciler's rule


def test_a_task_still_stopping_stays_listed_at_the_last_acknowledged_epoch() -> None:
    # m1 was at epoch 4 with a-0 a-1 a-2; target 5 moves a-1 and a-2 to m2. a-1 has stopped, a-2 has not.
    state = group({"m1": rec(4, "a a-0 a-1 a-2")}, {"m1": "a a-0 b", "m2": "a-1 a-2"})
    step = reconcile(
        state,
        "m1",
        parse("a a-0"),
        rec(4, "a a-0 a-1 a-2"),
        acknowledged=True,
        stopping=frozenset(parse("a-2").tasks),
    )
    # a-1 leaves the record (its release); a-2 stays; b is claimed; nothing starts; not yet at epoch 5,
    # where a record holding a-2 would be fenced (it is outside m1's share).
    assert step.record == rec(4, "a a-0 a-2 b")
    assert step.start == Assigned() and step.revoke == Assigned()
    assert step.pending == parse("b")
    done = reconcile(state, "m1", parse("a a-0"), step.record, acknowledged=True)
    assert done.record == rec(5, "a a-0 b")


def test_what_is_stopping_is_never_started_even_when_the_target_gives_it_back() -> None:
    # Its own record, read back, lists a-1 (still stopping) and the target gives a-1 back to it.
    state = group({"m1": rec(4, "a a-0 a-1")}, {"m1": "a a-0 a-1", "m2": ""})
    step = reconcile(
        state,
        "m1",
        parse("a a-0"),
        rec(4, "a a-0 a-1"),
        acknowledged=True,
        stopping=frozenset(parse("a-1").tasks),
    )
    assert step.start == Assigned()
    assert step.record is None, "the record as written already lists it"
    assert step.pending == parse("a-1")
    after = reconcile(state, "m1", parse("a a-0"), rec(4, "a a-0 a-1"), acknowledged=True)
    assert after.record == rec(5, "a a-0 a-1"), "once stopped, claimed at the target's epoch"


# ------------------------------------------------------------------------------ replays with real herders


def test_a_leaving_worker_releases_each_task_as_it_stops_and_a_hung_one_last() -> None:
    """SIGTERM: three stops, one of which hangs. The other two are released at once and their new owner
    starts them; the hung one is released (and started elsewhere) only once its stop returned, which the
    shell bounds by task.shutdown.graceful.timeout.ms. The worker goes only after the last."""
    model = ReconcileModel(("m1", "m2"), {"a": 5, "b": 1}, background_stops=True)
    model.settle()
    leaving, staying = model.members["m2"], model.members["m1"]
    tasks = sorted(leaving.tasks)
    assert len(tasks) >= 3, tasks
    hung, fast = tasks[0], set(tasks[1:])
    model.begin_leave("m2")
    model.complete("m1")  # the leader's target gives m2 nothing
    model.complete("m2")  # m2 revokes everything: its tasks stop in the background
    assert leaving.stopping == set(tasks)
    assert leaving.herder.stopping == set(tasks)
    model.read("m1")
    assert not (staying.tasks & set(tasks)), "nothing released yet: m1 waits"

    model.finish_stops("m2", fast)  # two stops return; m2's record releases them
    assert leaving.tasks == {hung}
    for _ in range(3):
        model.read("m1")  # claim, read back, start
    assert fast <= staying.tasks, "released tasks started on their new owner while the hung one stops"
    assert hung not in staying.tasks and hung in leaving.tasks
    model.read("m2")
    assert not leaving.ready_to_leave

    model.finish_stops("m2", {hung})  # the graceful timeout: the hung task is abandoned, released
    model.read("m2")
    assert leaving.ready_to_leave
    for _ in range(3):
        model.read("m1")
    assert hung in staying.tasks
    model.settle()
    assert "m2" not in model.members
    model.assert_converged()


def test_revoked_in_a_reconciliation_each_task_is_released_as_it_stops() -> None:
    """A member joins: the target moves work of the others to it; each revoked task is released when its
    stop returns, one held back while the rest move."""
    model = ReconcileModel(("m1", "m2"), {"a": 6, "b": 4}, background_stops=True)
    model.settle()
    model.begin_round("m1", ["m1", "m2", "m3"])
    model.complete_all()
    model.read("m1")
    model.read("m2")
    stopping = {m: set(model.members[m].stopping) for m in ("m1", "m2")}
    revoked = stopping["m1"] | stopping["m2"]
    assert len(revoked) >= 2, stopping
    hung = min(revoked)
    holder = "m1" if hung in stopping["m1"] else "m2"
    for m in ("m1", "m2"):
        model.finish_stops(m, stopping[m] - {hung})
    for _ in range(3):
        for m in ("m3", "m1", "m2"):
            model.read(m)
    m3 = model.members["m3"]
    assert revoked - {hung} <= m3.tasks
    assert hung not in m3.tasks and hung in model.members[holder].tasks
    model.finish_stops(holder, {hung})
    model.settle()
    model.assert_converged()
    assert hung in m3.tasks


MEMBERS4 = ("m1", "m2", "m3", "m4")
MEMBER4 = st.sampled_from(MEMBERS4)
TASK = st.builds(TaskId, st.sampled_from(["a", "b"]), st.integers(0, 2))
STEPS = st.one_of(
    st.tuples(st.just("read"), MEMBER4, st.sampled_from([1, 2, None])),
    st.tuples(st.just("read"), MEMBER4, st.sampled_from([1, 2, None])),
    st.tuples(st.just("config"), MEMBER4),
    st.tuples(
        st.just("change"), st.dictionaries(st.sampled_from(["a", "b", "c"]), st.integers(0, 3), max_size=3)
    ),
    st.tuples(st.just("tick"), st.sampled_from([50, 500, 5_000])),
    st.tuples(st.just("round"), MEMBER4, st.lists(MEMBER4, min_size=1, max_size=4, unique=True)),
    st.tuples(st.just("complete"), MEMBER4),
    st.tuples(st.just("leave"), MEMBER4),
    st.tuples(st.just("depart"), MEMBER4),
    st.tuples(st.just("stopped"), MEMBER4),
    st.tuples(st.just("stopped"), MEMBER4, TASK),
    st.tuples(st.just("stopped"), MEMBER4, TASK),
)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(ops=st.lists(STEPS, max_size=60))
def test_property_stops_finishing_in_any_order_never_run_a_task_twice(ops: list[tuple[object, ...]]) -> None:
    # check_exclusive runs after every step: a stopping task still runs on its member.
    model = ReconcileModel(("m1", "m2", "m3"), {"a": 3, "b": 3}, background_stops=True)
    for op in ops:
        if (
            op[0] in ("read", "config", "complete", "leave", "depart", "stopped")
            and op[1] not in model.members
        ):
            continue
        model.apply(op)
    model.settle()
    model.assert_converged()


# ------------------------------------------------------------------------------ the shell's part


class _Stopper:
    """A stand-in executor: ``stop_task`` returns at once, except for ``hung``, which returns at its
    timeout (as the Spark executor abandons a runner past task.shutdown.graceful.timeout.ms)."""

    def __init__(self, hung: TaskId) -> None:
        self.hung = hung

    def stop_task(self, task: TaskId, timeout_s: float) -> None:
        if task == self.hung:
            time.sleep(timeout_s)


class _NoConnectors:
    """Stores whose config knows no connector: a stopped task's status is not written (deleted work)."""

    def snapshot(self) -> ClusterConfigSnapshot:
        return ClusterConfigSnapshot()


def test_the_shell_posts_each_release_as_its_stop_returns() -> None:
    hung, fast = TaskId("a", 0), [TaskId("a", 1), TaskId("a", 2)]
    config = WorkerConfig.from_properties({**BASE, "task.shutdown.graceful.timeout.ms": "1500"})
    tasks = Tasks(config, "w1", _Stopper(hung), _NoConnectors(), WorkerMetrics())  # type: ignore[arg-type]
    events: queue.Queue[object] = queue.Queue()
    began = time.monotonic()
    for t in [hung, *fast]:
        tasks.release(hd.StopTask(t, acknowledge=True), 3, events.put)
    first = {events.get(timeout=1.0), events.get(timeout=1.0)}
    assert tasks.releasing() == 1
    assert first == {TaskReleased(t) for t in fast}
    assert time.monotonic() - began < 1.0, "the fast stops did not wait for the hung one"
    assert tasks.await_releases() == {hung}, "a rejoin waits for the stop still under way"
    assert time.monotonic() - began >= 1.4
    assert events.get(timeout=1.0) == TaskReleased(hung)
    assert tasks.await_releases() == set() and tasks.releasing() == 0


@pytest.mark.parametrize("acknowledge", [False, True])
def test_stop_task_compares_by_task_alone(acknowledge: bool) -> None:
    # How a stop is carried out is not what it decides: replays compare actions by task.
    assert hd.StopTask(TaskId("a", 0), acknowledge=acknowledge) == hd.StopTask(TaskId("a", 0))


def test_a_worker_leaving_while_a_release_is_under_way_waits_for_it() -> None:
    # Its target moved everything away and one stop is still under way when SIGTERM comes: it is not ready
    # to leave (it hands over through a round, whose records say when the last task is released).
    model = ReconcileModel(("m1", "m2"), {"a": 4}, background_stops=True)
    model.settle()
    model.begin_round("m1", ["m1", "m2", "m3"])
    model.complete_all()
    for m in ("m1", "m2"):
        model.read(m)
    holder = next(m for m in ("m1", "m2") if model.members[m].stopping)
    herder = model.members[holder].herder
    herder.owned_connectors.clear()
    herder.owned_tasks.clear()  # as if everything it owned had moved: only the stop under way is left
    actions = herder.begin_leave()
    assert not any(isinstance(a, hd.ReadyToLeave) for a in actions)
    assert any(isinstance(a, hd.RequestRejoin) for a in actions)
