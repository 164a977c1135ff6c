"""KIP-415's incremental cooperative assignor: the seed's six scenarios as tables, graceful hand-over, the
downgrade to eager, and properties over random histories of the group.

Seed notation: ``AC0`` is connector A, ``AT1``/``AT2`` its tasks, ``BC0``/``BT1`` connector B and its task.
kconnect (like Apache Kafka Connect's code) numbers tasks from 0, so AT1 = A-0, AT2 = A-1, BT1 = B-0.

The seed lists under "assigned" everything a worker holds after the round; the wire assignment is
incremental. Each table row therefore states both: what the member holds after applying the round
(``holds``), what the round adds (``new``) and revokes, and the scheduled delay.

Clock: the leader's ``now_ms``. d = ``MAX_DELAY`` (scheduled.rebalance.max.delay.ms, 300 s); W2 leaves at
T0; rounds happen at the times stated, so d' = d - 100 s, d'' = d - 150 s, d''' = d - 250 s.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kconnect.runtime.group.assignor import leader_assign
from kconnect.runtime.group.cooperative_assignor import CooperativeState, cooperative_assign
from kconnect.runtime.group.eager_assignor import eager_assign
from kconnect.runtime.group.protocol import (
    CONFIG_MISMATCH,
    NO_ERROR,
    V0,
    V1,
    V2,
    ConnectAssignment,
    WorkerState,
)
from kconnect.runtime.ids import TaskId

CONFIG = {"A": 2, "B": 1}
MAX_DELAY = 300_000
T0 = 1_000_000
SEED: dict[str, str | TaskId] = {
    "AC0": "A",
    "AT1": TaskId("A", 0),
    "AT2": TaskId("A", 1),
    "BC0": "B",
    "BT1": TaskId("B", 0),
}


def items(codes: str) -> tuple[frozenset[str], frozenset[TaskId]]:
    """Seed codes ("AC0 AT1") as (connectors, tasks)."""
    parsed = [SEED[c] for c in codes.split()]
    return (
        frozenset(x for x in parsed if isinstance(x, str)),
        frozenset(x for x in parsed if isinstance(x, TaskId)),
    )


# ---------------------------------------------------------------------------------------------------
# A group of workers that apply their assignments as Apache Kafka Connect's coordinator does


@dataclass
class Worker:
    connectors: set[str] = field(default_factory=set)
    tasks: set[TaskId] = field(default_factory=set)
    assigned_once: bool = False
    received_delay: int = 0
    received_at: int = 0
    last_generation: int = -1
    #: The worker's memory as a leader: each worker process keeps its own, a restart loses it.
    leader_state: CooperativeState = field(default_factory=CooperativeState)


@dataclass
class Group:
    config: dict[str, int]
    max_delay: int = MAX_DELAY
    workers: dict[str, Worker] = field(default_factory=dict)
    generation: int = 0
    #: True: members report what is left of their delay (kconnect); False: the delay as received (Java).
    report_remaining_delay: bool = True

    def join(self, *ids: str) -> None:
        for m in ids:
            self.workers[m] = Worker()

    def vanish(self, *ids: str) -> None:
        for m in ids:
            del self.workers[m]

    def metadata(self, m: str, now: int) -> WorkerState:
        w = self.workers[m]
        if not w.assigned_once:
            return WorkerState(f"http://{m}:8083/", 1)
        delay = w.received_delay
        if self.report_remaining_delay:
            delay = max(0, w.received_delay - (now - w.received_at))
        allocation = ConnectAssignment(
            V2, NO_ERROR, "?", "?", 1, tuple(w.connectors), tuple(w.tasks), delay_ms=delay
        )
        return WorkerState(f"http://{m}:8083/", 1, allocation)

    def rebalance(
        self, leader: str, now: int, leaving: frozenset[str] = frozenset()
    ) -> dict[str, ConnectAssignment]:
        self.generation += 1
        states = {m: self.metadata(m, now) for m in self.workers}
        lw = self.workers[leader]
        result, lw.leader_state = cooperative_assign(
            lw.leader_state,
            leader_id=leader,
            members=states,
            leader_config_offset=1,
            connectors=self.config,
            version=V2,
            now_ms=now,
            max_delay_ms=self.max_delay,
            generation=self.generation,
            leaving=leaving,
            last_completed_generation=lw.last_generation,
        )
        assert set(result) == set(self.workers)
        for m, a in result.items():
            self.apply(m, a, now)
        return result

    def apply(self, m: str, a: ConnectAssignment, now: int) -> None:
        w = self.workers[m]
        assert not a.failed
        assert set(a.revoked_connectors) <= w.connectors and set(a.revoked_tasks) <= w.tasks
        assert not set(a.connectors) & w.connectors and not set(a.tasks) & w.tasks
        w.connectors = (w.connectors - set(a.revoked_connectors)) | set(a.connectors)
        w.tasks = (w.tasks - set(a.revoked_tasks)) | set(a.tasks)
        w.assigned_once = True
        w.received_delay, w.received_at = a.delay_ms, now
        w.last_generation = self.generation


Row = Mapping[str, tuple[str, str, str, int]]  # member -> (holds, new, revoked, delay)


def check(group: Group, result: Mapping[str, ConnectAssignment], expected: Row) -> None:
    assert set(result) == set(expected)
    for m, (holds, new, revoked, delay) in expected.items():
        a, w = result[m], group.workers[m]
        got = {
            "holds": (frozenset(w.connectors), frozenset(w.tasks)),
            "new": (frozenset(a.connectors), frozenset(a.tasks)),
            "revoked": (frozenset(a.revoked_connectors), frozenset(a.revoked_tasks)),
            "delay": a.delay_ms,
        }
        want = {"holds": items(holds), "new": items(new), "revoked": items(revoked), "delay": delay}
        assert got == want, f"member {m}"
        assert a.version == V2 and a.leader in group.workers


# ---------------------------------------------------------------------------------------------------
# The seed's scenarios


def test_first_worker_joins() -> None:
    g = Group(CONFIG)
    g.join("W1")
    check(g, g.rebalance("W1", 0), {"W1": ("AC0 AT1 AT2 BC0 BT1", "AC0 AT1 AT2 BC0 BT1", "", 0)})


def test_workers_join() -> None:
    g = Group(CONFIG)
    g.join("W1")
    g.rebalance("W1", 0)
    g.join("W2", "W3")  # W3 joins while the rebalance W2 triggered is still active: one round
    # Balance by revocation first. Connectors: 2 over 3 workers, so W1 keeps one; tasks: one each, so W1
    # gives up two. Which ones is the seed's choice: the last in Java string order go (Java takes the
    # first in the order the member reported them, which comes from a HashSet and carries no meaning).
    check(
        g,
        g.rebalance("W1", 10),
        {"W1": ("AC0 AT1", "", "AT2 BC0 BT1", 0), "W2": ("", "", "", 0), "W3": ("", "", "", 0)},
    )
    # W1 rejoins without them; they are new work now and go to the least loaded workers: connector B to
    # the first worker with no connector (W2), tasks one per task-less worker in member order.
    check(
        g,
        g.rebalance("W1", 20),
        {"W1": ("AC0 AT1", "", "", 0), "W2": ("AT2 BC0", "AT2 BC0", "", 0), "W3": ("BT1", "BT1", "", 0)},
    )


def initial_group() -> Group:
    """The seed's starting point for the other scenarios: W1([AC0, AT1]), W2([AT2, BC0]), W3([BT1]), W1
    leading. It is where "workers join" ends, reached the same way so the leader's memory is real."""
    g = Group(CONFIG)
    g.join("W1")
    g.rebalance("W1", 0)
    g.join("W2", "W3")
    g.rebalance("W1", 10)
    g.rebalance("W1", 20)
    assert {m: (w.connectors, w.tasks) for m, w in g.workers.items()} == {
        m: tuple(map(set, items(c))) for m, c in {"W1": "AC0 AT1", "W2": "AT2 BC0", "W3": "BT1"}.items()
    }
    return g


def test_worker_leaves() -> None:
    g = initial_group()
    g.vanish("W2")
    check(g, g.rebalance("W1", T0), {"W1": ("AC0 AT1", "", "", MAX_DELAY), "W3": ("BT1", "", "", MAX_DELAY)})
    # After d: no candidate showed up, so the lost work is spread like new work. The seed gives BC0 to W1
    # and AT2 to W3; Java 3.9 decides the other way and kconnect follows Java: connectors and tasks are
    # balanced separately, so B goes to W3 (no connector yet) and A-1 to W1 (tied on tasks, W1 first).
    check(
        g,
        g.rebalance("W1", T0 + MAX_DELAY),
        {"W1": ("AC0 AT1 AT2", "AT2", "", 0), "W3": ("BT1 BC0", "BC0", "", 0)},
    )


def test_worker_bounces() -> None:
    g = initial_group()
    g.vanish("W2")
    check(g, g.rebalance("W1", T0), {"W1": ("AC0 AT1", "", "", MAX_DELAY), "W3": ("BT1", "", "", MAX_DELAY)})
    g.join("W2")  # restarted: it reports no assignment at all
    d1 = MAX_DELAY - 100_000  # d', the remaining delay
    check(
        g,
        g.rebalance("W1", T0 + 100_000),
        {"W1": ("AC0 AT1", "", "", d1), "W2": ("", "", "", d1), "W3": ("BT1", "", "", d1)},
    )
    check(
        g,
        g.rebalance("W1", T0 + MAX_DELAY),
        {"W1": ("AC0 AT1", "", "", 0), "W2": ("AT2 BC0", "AT2 BC0", "", 0), "W3": ("BT1", "", "", 0)},
    )


def test_a_group_whose_every_member_was_dropped_at_once_is_assigned_at_once() -> None:
    """Beyond the seed (issue 29's random broker kills): the coordinator's broker dies, every worker is
    answered "unknown member id" and rejoins under a new one. W1, which led, keeps its work and its
    memory; W2 and W3 stopped theirs (KAFKA-9184). With no member of the last round left, the leader's
    memory describes a group that is gone: the stopped work is assigned at once, not held for the delay
    as Java's leader would (its previousMembers never match again)."""
    g = initial_group()
    for old, new in (("W1", "W1b"), ("W2", "W2b"), ("W3", "W3b")):
        w = g.workers.pop(old)
        if old != "W1":
            w = Worker()  # stopped everything and rejoined empty
        g.workers[new] = w
    result = g.rebalance("W1b", T0)
    assert all(a.delay_ms == 0 for a in result.values())
    assert set().union(*(w.tasks for w in g.workers.values())) == items("AT1 AT2 BT1")[1]
    assert set().union(*(w.connectors for w in g.workers.values())) == items("AC0 BC0")[0]
    kept_c, kept_t = items("AC0 AT1")
    assert g.workers["W1b"].connectors >= kept_c and g.workers["W1b"].tasks >= kept_t


def test_one_member_dropped_while_another_stays_is_still_held_for_the_delay() -> None:
    """The all-gone rule needs every member gone: W2 alone under a new id is KIP-415's lost worker."""
    g = initial_group()
    g.vanish("W2")
    g.join("W2b")
    result = g.rebalance("W1", T0)
    assert {a.delay_ms for a in result.values()} == {MAX_DELAY}
    assert not g.workers["W2b"].tasks and not g.workers["W2b"].connectors


def test_leader_leaves() -> None:
    g = initial_group()
    g.vanish("W1")
    # W3 leads for the first time and no delay is running (members report delay 0): it cannot tell new
    # from lost, so it assigns AC0 and AT1 at once. The seed gives AC0 to W2 and AT1 to W3; Java 3.9 and
    # kconnect balance connectors and tasks separately: A goes to W3 (no connector), A-0 to W2 (tied on
    # tasks with W3, W2 first).
    check(g, g.rebalance("W3", T0), {"W2": ("AT2 BC0 AT1", "AT1", "", 0), "W3": ("BT1 AC0", "AC0", "", 0)})


def test_leader_bounces() -> None:
    g = initial_group()
    g.vanish("W2")
    check(g, g.rebalance("W1", T0), {"W1": ("AC0 AT1", "", "", MAX_DELAY), "W3": ("BT1", "", "", MAX_DELAY)})
    g.join("W2")
    d1 = MAX_DELAY - 100_000
    check(
        g,
        g.rebalance("W1", T0 + 100_000),
        {"W1": ("AC0 AT1", "", "", d1), "W2": ("", "", "", d1), "W3": ("BT1", "", "", d1)},
    )
    g.vanish("W1")
    # W3 leads now. Members report the delay running (what is left of it): W3 honours it and holds
    # everything unaccounted for (AC0, AT1 of the departed leader, AT2, BC0 lost before). W2 is empty:
    # a candidate. (Java 3.9's new leader has no memory and assigns everything at once, as new work.)
    d2 = MAX_DELAY - 150_000  # d''
    check(g, g.rebalance("W3", T0 + 150_000), {"W2": ("", "", "", d2), "W3": ("BT1", "", "", d2)})
    g.join("W1")  # the old leader is back, as a plain worker with nothing: a second candidate
    d3 = MAX_DELAY - 250_000  # d'''
    check(
        g,
        g.rebalance("W3", T0 + 250_000),
        {"W1": ("", "", "", d3), "W2": ("", "", "", d3), "W3": ("BT1", "", "", d3)},
    )
    # The delay expires: lost work goes round-robin over the candidates in the order they were found
    # (W2, then W1), connectors first (A, B), then tasks: exactly the seed's outcome.
    check(
        g,
        g.rebalance("W3", T0 + MAX_DELAY),
        {"W1": ("BC0 AT2", "BC0 AT2", "", 0), "W2": ("AC0 AT1", "AC0 AT1", "", 0), "W3": ("BT1", "", "", 0)},
    )


def test_leader_bounces_with_members_reporting_the_delay_as_received() -> None:
    # Java workers report the delay of their last assignment unchanged: the new leader can only take
    # the smallest reported one (an upper bound on what is left).
    g = initial_group()
    g.report_remaining_delay = False
    g.vanish("W2")
    g.rebalance("W1", T0)
    g.join("W2")
    g.rebalance("W1", T0 + 100_000)
    g.vanish("W1")
    d1 = MAX_DELAY - 100_000
    check(g, g.rebalance("W3", T0 + 150_000), {"W2": ("", "", "", d1), "W3": ("BT1", "", "", d1)})


# ---------------------------------------------------------------------------------------------------
# Graceful hand-over (kconnect's, beyond Java)


def test_graceful_leave_revokes_at_once_and_reassigns_next_round_without_delay() -> None:
    g = initial_group()
    check(
        g,
        g.rebalance("W1", T0, leaving=frozenset({"W2"})),
        {"W1": ("AC0 AT1", "", "", 0), "W2": ("", "", "AT2 BC0", 0), "W3": ("BT1", "", "", 0)},
    )
    g.vanish("W2")  # it released everything and left the group
    check(
        g, g.rebalance("W1", T0 + 10), {"W1": ("AC0 AT1 AT2", "AT2", "", 0), "W3": ("BT1 BC0", "BC0", "", 0)}
    )


def test_graceful_leave_reassigns_while_the_leaving_member_is_still_in_the_group() -> None:
    g = initial_group()
    g.rebalance("W1", T0, leaving=frozenset({"W2"}))
    check(
        g,
        g.rebalance("W1", T0 + 10, leaving=frozenset({"W2"})),
        {"W1": ("AC0 AT1 AT2", "AT2", "", 0), "W2": ("", "", "", 0), "W3": ("BT1 BC0", "BC0", "", 0)},
    )
    g.vanish("W2")
    check(g, g.rebalance("W1", T0 + 20), {"W1": ("AC0 AT1 AT2", "", "", 0), "W3": ("BT1 BC0", "", "", 0)})


def test_leaving_member_that_has_not_released_yet_is_revoked_again_and_nothing_moves() -> None:
    g = initial_group()
    first = g.rebalance("W1", T0, leaving=frozenset({"W2"}))
    # W2 did not stop its work in time and reports it again.
    g.workers["W2"].connectors, g.workers["W2"].tasks = map(set, items("AT2 BC0"))
    again = g.rebalance("W1", T0 + 10, leaving=frozenset({"W2"}))
    assert (again["W2"].revoked_connectors, again["W2"].revoked_tasks) == (
        first["W2"].revoked_connectors,
        first["W2"].revoked_tasks,
    )
    assert not any(a.connectors or a.tasks for a in again.values())


def test_graceful_leave_during_a_delay_moves_its_work_at_once_while_lost_work_waits() -> None:
    g = initial_group()
    g.vanish("W2")
    g.rebalance("W1", T0)  # W2's work (AT2, BC0) is lost: delay d
    d1 = MAX_DELAY - 10
    check(
        g,
        g.rebalance("W1", T0 + 10, leaving=frozenset({"W3"})),
        {"W1": ("AC0 AT1", "", "", d1), "W3": ("", "", "BT1", d1)},
    )
    g.vanish("W3")
    d2 = MAX_DELAY - 20
    # BT1 was released, not lost: it goes now; AT2 and BC0 still wait for the delay.
    check(g, g.rebalance("W1", T0 + 20), {"W1": ("AC0 AT1 BT1", "BT1", "", d2)})
    check(g, g.rebalance("W1", T0 + MAX_DELAY), {"W1": ("AC0 AT1 BT1 AT2 BC0", "AT2 BC0", "", 0)})


def test_everyone_leaving_leaves_the_work_unassigned_until_someone_stays() -> None:
    g = initial_group()
    result = g.rebalance("W1", T0, leaving=frozenset({"W1", "W2", "W3"}))
    assert not any(a.connectors or a.tasks for a in result.values())
    assert all(not w.connectors and not w.tasks for w in g.workers.values())
    g.join("W4")
    g.vanish("W1", "W2", "W3")
    check(g, g.rebalance("W4", T0 + 10), {"W4": ("AC0 AT1 AT2 BC0 BT1", "AC0 AT1 AT2 BC0 BT1", "", 0)})


# ---------------------------------------------------------------------------------------------------
# Other rules


def test_deleted_connectors_and_tasks_are_revoked() -> None:
    g = initial_group()
    g.config = {"A": 1}  # B deleted, A down to one task
    check(
        g,
        g.rebalance("W1", T0),
        {"W1": ("AC0 AT1", "", "", 0), "W2": ("", "", "AT2 BC0", 0), "W3": ("", "", "BT1", 0)},
    )


def test_a_new_leader_revokes_deleted_work_at_once() -> None:
    # Java's new leader has no memory of B and would leave its task running a round longer.
    g = initial_group()
    g.vanish("W1")
    g.config = {"A": 2}
    result = g.rebalance("W3", T0)
    assert result["W3"].revoked_tasks == (TaskId("B", 0),)
    assert result["W2"].revoked_connectors == ("B",)


def test_duplicates_are_revoked_from_every_holder_then_assigned_once() -> None:
    g = initial_group()
    g.workers["W3"].tasks.add(TaskId("A", 0))  # W1 and W3 both report A-0
    result = g.rebalance("W1", T0)
    assert result["W1"].revoked_tasks == (TaskId("A", 0),)
    assert result["W3"].revoked_tasks == (TaskId("A", 0),)
    assert not any(TaskId("A", 0) in a.tasks for a in result.values())
    result = g.rebalance("W1", T0 + 10)
    assert [m for m, a in result.items() if TaskId("A", 0) in a.tasks] == ["W1"]  # least loaded, first


def test_new_work_is_assigned_at_once_while_lost_work_waits() -> None:
    g = initial_group()
    g.vanish("W2")
    g.rebalance("W1", T0)
    g.config = {**CONFIG, "C": 1}
    result = g.rebalance("W1", T0 + 10)
    assert {m: (a.connectors, a.tasks) for m, a in result.items()} == {
        "W1": ((), (TaskId("C", 0),)),
        "W3": (("C",), ()),
    }
    assert {a.delay_ms for a in result.values()} == {MAX_DELAY - 10}


def test_no_delay_when_disabled() -> None:
    g = initial_group()
    g.max_delay = 0
    g.vanish("W2")
    check(g, g.rebalance("W1", T0), {"W1": ("AC0 AT1 AT2", "AT2", "", 0), "W3": ("BT1 BC0", "BC0", "", 0)})


def test_a_delay_that_expired_with_the_lost_worker_back_returns_its_work() -> None:
    g = initial_group()
    g.vanish("W2")
    g.rebalance("W1", T0)
    g.join("W2")
    # W2 came back but no round ran while the delay was on: it is not a candidate, the work is spread.
    result = g.rebalance("W1", T0 + MAX_DELAY + 5)
    assert {m: (a.connectors, a.tasks) for m, a in result.items()} == {
        "W1": ((), ()),
        "W2": (("B",), (TaskId("A", 1),)),
        "W3": ((), ()),
    }


def test_successive_revoking_rounds_back_off() -> None:
    g = Group({"A": 6})
    g.join("W1")
    g.rebalance("W1", 0)
    g.join("W2")
    first = g.rebalance("W1", 10)  # W1 (A, 6 tasks) gives up 3 tasks
    assert len(first["W1"].revoked_tasks) == 3 and first["W1"].delay_ms == 0
    g.join("W3")  # joins before the follow-up round: balancing again would be a second revoking round
    second = g.rebalance("W1", 20)
    assert {m: a.delay_ms for m, a in second.items()} == {"W1": 40, "W2": 40, "W3": 40}
    assert not any(a.revoked_tasks or a.revoked_connectors for a in second.values())
    # The released tasks are new work: the two empty workers, W2 first, level up.
    assert [len(second[m].tasks) for m in ("W1", "W2", "W3")] == [0, 2, 1]
    third = g.rebalance("W1", 60)  # the back-off is over: balance
    assert {m: len(a.revoked_tasks) for m, a in third.items()} == {"W1": 1, "W2": 0, "W3": 0}
    fourth = g.rebalance("W1", 70)
    assert {m: len(w.tasks) for m, w in g.workers.items()} == {"W1": 2, "W2": 2, "W3": 2}
    assert not any(a.revoked_tasks or a.delay_ms for a in fourth.values())


def test_revoked_work_still_reported_is_revoked_again_not_moved() -> None:
    g = Group(CONFIG)
    g.join("W1")
    g.rebalance("W1", 0)
    g.join("W2", "W3")
    first = g.rebalance("W1", 10)
    g.workers["W1"].connectors, g.workers["W1"].tasks = map(set, items("AC0 AT1 AT2 BC0 BT1"))  # ignored it
    again = g.rebalance("W1", 20)
    # Nothing moves. Balancing again right away would be a second revoking round in a row: Java backs
    # off (40 ms) first, then revokes the same work again.
    assert not any(a.connectors or a.tasks or a.revoked_tasks for a in again.values())
    assert {a.delay_ms for a in again.values()} == {40}
    third = g.rebalance("W1", 60)
    assert third["W1"].revoked_tasks == first["W1"].revoked_tasks
    assert not any(a.connectors or a.tasks for a in third.values())


def test_config_mismatch_keeps_the_state() -> None:
    members = {"W1": WorkerState("http://W1:8083/", 3), "W2": WorkerState("http://W2:8083/", 5)}
    state = CooperativeState(previous_generation=4, delay_ms=7)
    result, after = cooperative_assign(
        state,
        leader_id="W1",
        members=members,
        leader_config_offset=3,
        connectors=CONFIG,
        version=V1,
        now_ms=0,
        max_delay_ms=MAX_DELAY,
        generation=5,
    )
    assert after is state
    for a in result.values():
        assert a == ConnectAssignment(V1, CONFIG_MISMATCH, "W1", "http://W1:8083/", 5, (), ())


def test_leader_ahead_announces_its_own_snapshot_offset() -> None:
    members = {"W1": WorkerState("http://W1:8083/", 3), "W2": WorkerState("http://W2:8083/", 5)}
    result, _ = cooperative_assign(
        CooperativeState(),
        leader_id="W1",
        members=members,
        leader_config_offset=6,
        connectors=CONFIG,
        version=V1,
        now_ms=0,
        max_delay_ms=MAX_DELAY,
        generation=1,
    )
    assert {a.config_offset for a in result.values()} == {6}


def test_stale_leader_memory_is_ignored() -> None:
    # The state says A-0 was assigned in generation 3, but the leader's worker completed generation 5 since.
    stale = CooperativeState(previous_generation=3, previous_tasks=frozenset({TaskId("A", 0)}))
    result, after = cooperative_assign(
        stale,
        leader_id="W1",
        members={"W1": WorkerState("http://W1:8083/", 1)},
        leader_config_offset=1,
        connectors={"A": 1},
        version=V2,
        now_ms=0,
        max_delay_ms=MAX_DELAY,
        generation=6,
        last_completed_generation=5,
    )
    assert result["W1"].tasks == (TaskId("A", 0),) and result["W1"].delay_ms == 0
    assert after.previous_generation == 6


def test_bad_input() -> None:
    kw = dict(leader_config_offset=1, now_ms=0, max_delay_ms=1, generation=1)
    one = {"W1": WorkerState("u", 1)}
    with pytest.raises(ValueError, match="versions >= 1"):
        cooperative_assign(CooperativeState(), leader_id="W1", members=one, connectors={}, version=V0, **kw)
    with pytest.raises(ValueError, match="negative task count"):
        cooperative_assign(
            CooperativeState(), leader_id="W1", members=one, connectors={"a": -1}, version=V1, **kw
        )
    with pytest.raises(ValueError, match="not among"):
        cooperative_assign(CooperativeState(), leader_id="x", members=one, connectors={}, version=V1, **kw)
    with pytest.raises(ValueError, match="unknown Connect group protocol"):
        leader_assign(
            CooperativeState(), selected_protocol="dynamic", leader_id="W1", members=one, connectors={}, **kw
        )
    assert cooperative_assign(
        CooperativeState(), leader_id="W1", members={}, connectors={}, version=V1, **kw
    ) == ({}, CooperativeState())


# ---------------------------------------------------------------------------------------------------
# leader_assign: dispatch and the downgrade to eager


def lead(
    state: CooperativeState,
    protocol: str,
    members: Mapping[str, WorkerState],
    generation: int,
    offset: int = 1,
) -> tuple[dict[str, ConnectAssignment], CooperativeState]:
    return leader_assign(
        state,
        selected_protocol=protocol,
        leader_id="W1",
        members=members,
        leader_config_offset=offset,
        connectors=CONFIG,
        now_ms=generation * 1000,
        max_delay_ms=MAX_DELAY,
        generation=generation,
    )


def test_leader_assign_versions_by_protocol() -> None:
    members = {m: WorkerState(f"http://{m}/", 1) for m in ("W1", "W2")}
    for protocol, version in (("compatible", V1), ("sessioned", V2)):
        result, state = lead(CooperativeState(), protocol, members, 1)
        assert {a.version for a in result.values()} == {version}
        assert state.previous_version == version
    # A leader whose last generation was eager deals eagerly at once.
    result, state = leader_assign(
        CooperativeState(),
        selected_protocol="default",
        leader_id="W1",
        members=members,
        leader_config_offset=1,
        connectors=CONFIG,
        now_ms=1000,
        max_delay_ms=MAX_DELAY,
        generation=2,
        last_protocol="default",
    )
    assert result == eager_assign("W1", members, 1, CONFIG)
    assert state.previous_version == V0 and not state.downgrade_round


def test_a_leader_with_no_history_starts_an_eager_group_with_the_empty_round() -> None:
    # It cannot tell from v0 metadata whether members still run cooperatively assigned work (a new
    # leader of a group being downgraded), so it sends the empty round and asks for another.
    members = {m: WorkerState(f"http://{m}/", 1) for m in ("W1", "W2")}
    empty, state = lead(CooperativeState(), "default", members, 1)
    assert all(not a.connectors and not a.tasks for a in empty.values())
    assert state.downgrade_round
    regular, state = lead(state, "default", members, 2)
    assert regular == eager_assign("W1", members, 1, CONFIG)
    assert not state.downgrade_round


def test_a_new_leader_that_ran_cooperatively_detects_the_downgrade() -> None:
    members = {m: WorkerState(f"http://{m}/", 1) for m in ("W2", "W3")}
    empty, state = leader_assign(
        CooperativeState(),
        selected_protocol="default",
        leader_id="W2",
        members=members,
        leader_config_offset=1,
        connectors=CONFIG,
        now_ms=1000,
        max_delay_ms=MAX_DELAY,
        generation=5,
        last_protocol="sessioned",
    )
    assert all(not a.connectors and not a.tasks for a in empty.values()) and state.downgrade_round


def test_downgrade_sends_an_empty_eager_assignment_once() -> None:
    members = {m: WorkerState(f"http://{m}/", 1) for m in ("W1", "W2")}
    coop, state = lead(CooperativeState(), "sessioned", members, 1)
    assert all(a.tasks for a in coop.values())  # the members run their share from here on
    # A worker with connect.protocol=eager joins: the group is on "default" now (v0 metadata: no
    # allocation). The members prepared this join under the cooperative protocol and still run their
    # work, so a regular eager deal could start a task on W3 while W1 still runs it. First everyone
    # releases everything (the KIP's one-time double rebalance).
    everyone = members | {"W3": WorkerState("http://W3/", 1)}
    empty, state = lead(state, "default", everyone, 2)
    assert set(empty) == {"W1", "W2", "W3"}
    for a in empty.values():
        assert a == ConnectAssignment(V0, NO_ERROR, "W1", "http://W1/", 1, (), ())
    # From the next round on, regular eager assignments.
    regular, state = lead(state, "default", everyone, 3)
    assert regular == eager_assign("W1", everyone, 1, CONFIG)
    again, _ = lead(state, "default", everyone, 4)
    assert again == regular


def test_downgrade_waits_out_a_config_mismatch() -> None:
    members = {m: WorkerState(f"http://{m}/", 1) for m in ("W1", "W2")}
    _, state = lead(CooperativeState(), "compatible", members, 1)
    ahead = members | {"W2": WorkerState("http://W2/", 9)}
    failed, kept = lead(state, "default", ahead, 2)
    assert all(a.error == CONFIG_MISMATCH and a.version == V0 for a in failed.values())
    assert kept is state
    empty, _ = lead(kept, "default", ahead, 3, offset=9)
    assert not any(a.connectors or a.tasks or a.failed for a in empty.values())


def test_eager_leaving_members_get_nothing() -> None:
    members = {m: WorkerState(f"http://{m}/", 1) for m in ("W1", "W2", "W3")}
    result = eager_assign("W1", members, 1, CONFIG, leaving={"W2"})
    assert result["W2"].connectors == () and result["W2"].tasks == ()
    assert result == eager_assign("W1", members, 1, CONFIG, leaving={"W2"})
    assert {m: (a.connectors, a.tasks) for m, a in result.items() if m != "W2"} == {
        m: (a.connectors, a.tasks)
        for m, a in eager_assign("W1", {k: members[k] for k in ("W1", "W3")}, 1, CONFIG).items()
    }


# ---------------------------------------------------------------------------------------------------
# Properties over random histories

Item = str | TaskId


@dataclass
class Sim:
    """A group replayed round by round: each event is followed by a rebalance at a drawn time."""

    config: dict[str, int]
    max_delay: int
    group: Group = field(init=False)
    leader: str | None = None
    leaving: set[str] = field(default_factory=set)
    now: int = 0
    next_id: int = 0
    #: What the history exercised, reported as Hypothesis events (see --hypothesis-show-statistics).
    seen: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.group = Group(self.config, self.max_delay)

    def new_id(self) -> str:
        self.next_id += 1
        return f"w{self.next_id:02d}"

    def staying(self) -> list[str]:
        return [m for m in self.group.workers if m not in self.leaving]

    def round(self) -> dict[str, ConnectAssignment]:
        g = self.group
        if self.leader not in g.workers:
            if self.leader is not None:
                self.seen.add("leader changed")
            self.leader = next(iter(g.workers))  # sticky; the oldest member takes over
        before = {m: (set(w.connectors), set(w.tasks)) for m, w in g.workers.items()}
        result = g.rebalance(self.leader, self.now, frozenset(self.leaving))
        # Happens-before, whatever order members apply in: an item is held or started by one member only.
        seen: Counter[Item] = Counter()
        for m, a in result.items():
            cs, ts = before[m]
            seen.update(cs | set(a.connectors))
            seen.update(ts | set(a.tasks))
            if m in self.leaving:
                assert not a.connectors and not a.tasks
        doubled = [x for x, n in seen.items() if n > 1]
        assert not doubled, f"held or started by two members: {doubled}"
        delay = max(a.delay_ms for a in result.values())
        if delay:
            self.seen.add("delay running")
        if any(a.revoked_tasks for m, a in result.items() if m not in self.leaving):
            self.seen.add("revoked from a staying member")
        if delay and any(a.tasks for a in result.values()):
            self.seen.add("assigned during a delay")
        # A leaving member that holds nothing any more goes.
        for m in list(self.leaving):
            w = g.workers[m]
            if not w.connectors and not w.tasks and len(g.workers) > 1:
                g.vanish(m)
                self.leaving.discard(m)
        return result

    def settle(self) -> None:
        """Rejoin as members would (at once after revocations, after the delay otherwise) until quiet."""
        for _ in range(30):
            result = self.round()
            moving = any(
                a.connectors or a.tasks or a.revoked_connectors or a.revoked_tasks for a in result.values()
            )
            delay = max(a.delay_ms for a in result.values())
            if not moving and delay == 0 and not self.leaving:
                return
            self.now += delay + 1
        raise AssertionError("the group did not settle in 30 rounds")


def assert_settled(sim: Sim) -> None:
    """Settled with no delay running: everything configured runs exactly once, evenly."""
    held: Counter[Item] = Counter()
    for w in sim.group.workers.values():
        held.update(w.connectors)
        held.update(w.tasks)
    configured = set(sim.config) | {TaskId(c, n) for c, k in sim.config.items() for n in range(k)}
    assert set(held) == configured
    assert all(n == 1 for n in held.values())
    # Java's assignor balances connectors and tasks separately (so the sum may differ by two).
    for kind in ("connectors", "tasks"):
        loads = [len(getattr(w, kind)) for w in sim.group.workers.values()]
        assert max(loads) - min(loads) <= 1, (kind, loads)


events = st.sampled_from(["join", "vanish", "bounce", "leave", "add", "remove", "resize", "time"])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.tuples(events, st.integers(0, 2**16), st.integers(0, 400)), max_size=30),
    st.sampled_from([0, 100, 300]),
    st.integers(1, 4),
)
def test_random_histories_never_double_assign_and_settle_balanced(
    history: list[tuple[str, int, int]], max_delay: int, initial_members: int
) -> None:
    sim = Sim({"a": 3, "b": 1, "c": 0}, max_delay)
    for _ in range(initial_members):
        sim.group.join(sim.new_id())
    sim.round()
    bounced: list[str] = []
    for kind, pick, dt in history:
        g = sim.group
        staying = sim.staying()
        names = sorted(sim.config)
        if kind == "join":
            g.join(bounced.pop() if bounced and pick % 2 else sim.new_id())  # a bounced member returns
        elif kind in ("vanish", "bounce") and len(staying) > 1:
            m = staying[pick % len(staying)]
            g.vanish(m)
            if kind == "bounce":
                bounced.append(m)
        elif kind == "leave" and len(staying) > 1:
            sim.leaving.add(staying[pick % len(staying)])
        elif kind == "add":
            sim.config[f"n{pick % 7}"] = pick % 4
        elif kind == "remove" and names:
            del sim.config[names[pick % len(names)]]
        elif kind == "resize" and names:
            sim.config[names[pick % len(names)]] = pick % 5
        sim.now += dt
        sim.round()
    sim.settle()
    for what in sorted(sim.seen):
        event(what)

    assert_settled(sim)


@settings(max_examples=100, deadline=None)
@given(st.integers(1, 6), st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 8), max_size=6))
def test_a_fresh_group_is_assigned_everything_at_once_and_balanced(n: int, config: dict[str, int]) -> None:
    members = {f"w{i}": WorkerState(f"http://w{i}/", 1) for i in range(n)}
    result, state = cooperative_assign(
        CooperativeState(),
        leader_id="w0",
        members=members,
        leader_config_offset=1,
        connectors=config,
        version=V2,
        now_ms=0,
        max_delay_ms=MAX_DELAY,
        generation=1,
    )
    held: Counter[Item] = Counter()
    for a in result.values():
        held.update(a.connectors)
        held.update(a.tasks)
        assert a.delay_ms == 0 and not a.revoked_connectors and not a.revoked_tasks
    assert set(held) == set(config) | {TaskId(c, k) for c, t in config.items() for k in range(t)}
    assert all(v == 1 for v in held.values())
    for kind in ("connectors", "tasks"):
        loads = [len(getattr(a, kind)) for a in result.values()]
        assert max(loads) - min(loads) <= 1
    assert state.previous_tasks == frozenset(t for a in result.values() for t in a.tasks)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["join", "leave", "add", "resize"]), st.integers(0, 2**16)), max_size=20
    ),
    st.integers(2, 4),
)
def test_graceful_hand_overs_never_schedule_a_delay(
    history: list[tuple[str, int]], initial_members: int
) -> None:
    # Nobody vanishes unannounced: whatever joins, leaves gracefully or changes, no work is ever "lost".
    sim = Sim({"a": 3, "b": 1}, MAX_DELAY)
    for _ in range(initial_members):
        sim.group.join(sim.new_id())
    sim.round()
    for kind, pick in history:
        staying = sim.staying()
        if kind == "join":
            sim.group.join(sim.new_id())
        elif kind == "leave" and len(staying) > 1:
            sim.leaving.add(staying[pick % len(staying)])
        elif kind == "add":
            sim.config[f"n{pick % 5}"] = pick % 4
        elif kind == "resize":
            names = sorted(sim.config)
            sim.config[names[pick % len(names)]] = pick % 5
        sim.now += 1
        for _ in range(3):  # the round of the event and the follow-ups members trigger
            result = sim.round()
            assert all(a.delay_ms in (0, 40, 1600) for a in result.values())  # at most a revoking back-off
            sim.now += max(a.delay_ms for a in result.values())
    sim.settle()
    assert_settled(sim)
