"""KIP-987's static assignment (``static_assign``): the seed's eight steps as tables, restarts and
departures of static workers, groups of static workers only, and properties over random histories.

Notation: connectors ``A``, ``B``, ``C`` with 3, 2 and 1 tasks (``A-0`` is task 0 of A); a member's static
assignment and holdings are written as such codes ("A A-0 B-1"). Members are ``<worker>-<n>`` (the n-th
process of that worker); a member's ``worker_id`` is its worker's name. Each table row states what the round
adds (``new``) and revokes; the seed's steps are named where they act.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from kconnect.runtime.group.assignor import leader_assign
from kconnect.runtime.group.cooperative_assignor import CooperativeState, cooperative_assign
from kconnect.runtime.group.protocol import CONFIG_MISMATCH, NO_ERROR, V2, V3, ConnectAssignment, WorkerState
from kconnect.runtime.group.static_assignor import STATIC_UNASSIGNED_REASON, static_assign
from kconnect.runtime.ids import TaskId
from tests.support.group_model import GroupModel, Item, Member

CONFIG = {"A": 3, "B": 2, "C": 1}
MAX_DELAY = 300_000


def parse(codes: str) -> tuple[tuple[str, ...], tuple[TaskId, ...]]:
    """ "A A-0 B-1" -> (connectors, tasks)."""
    connectors: list[str] = []
    tasks: list[TaskId] = []
    for code in codes.split():
        if "-" in code:
            tasks.append(TaskId.parse(code))
        else:
            connectors.append(code)
    return tuple(connectors), tuple(tasks)


def codes(connectors: Any, tasks: Any) -> str:
    """The inverse of :func:`parse`, sorted: connectors first."""
    return " ".join([*sorted(connectors), *(str(t) for t in sorted(tasks))])


def every_job(config: Mapping[str, int]) -> set[Item]:
    return {*config, *(TaskId(c, n) for c, k in config.items() for n in range(k))}


def ws(
    worker: str,
    static: str = "",
    holds: str | None = None,
    *,
    leaving: bool = False,
    delay: int = 0,
    worker_id: str | None = None,
) -> WorkerState:
    """A member's metadata: static assignment ``static``; ``holds`` None before its first assignment."""
    allocation = None
    if holds is not None:
        c, t = parse(holds)
        allocation = ConnectAssignment(V3, NO_ERROR, "?", "?", 1, c, t, delay_ms=delay)
    sc, stt = parse(static)
    return WorkerState(
        f"http://{worker}:8083/",
        1,
        allocation,
        leaving=leaving,
        worker_id=worker if worker_id is None else worker_id,
        static_connectors=sc,
        static_tasks=stt,
    )


def run(
    members: Mapping[str, WorkerState],
    *,
    state: CooperativeState | None = None,
    config: Mapping[str, int] = CONFIG,
    now: int = 0,
    generation: int = 1,
    leaving: frozenset[str] = frozenset(),
    leader: str | None = None,
) -> tuple[dict[str, ConnectAssignment], CooperativeState]:
    return static_assign(
        CooperativeState() if state is None else state,
        leader_id=leader or next(iter(members)),
        members=members,
        leader_config_offset=1,
        connectors=config,
        now_ms=now,
        max_delay_ms=MAX_DELAY,
        generation=generation,
        leaving=leaving,
    )


def moves(result: Mapping[str, ConnectAssignment]) -> dict[str, tuple[str, str]]:
    """member -> (new, revoked) as codes."""
    return {
        m: (codes(a.connectors, a.tasks), codes(a.revoked_connectors, a.revoked_tasks))
        for m, a in result.items()
    }


# ---------------------------------------------------------------------------------------------------
# The eight steps, one round at a time


def test_fresh_mixed_cluster_steps_1_2_6_8() -> None:
    members = {
        "s1-1": ws("s1", "A A-0"),
        "s2-1": ws("s2", "B-1 X Z-9"),  # X and Z-9 do not exist: ignored (s2 stays a static worker)
        "w1-1": ws("w1"),
        "w2-1": ws("w2"),
    }
    result, state = run(members)
    assert moves(result) == {
        "s1-1": ("A A-0", ""),  # step 6: static jobs to the workers listing them
        "s2-1": ("B-1", ""),
        "w1-1": ("B A-1 B-0", ""),  # step 8: wildcard jobs, balanced over the wildcard workers only
        "w2-1": ("C A-2 C-0", ""),
    }
    assert all(a.version == V3 and a.delay_ms == 0 for a in result.values())
    assert state.previous_connectors == {"A", "B", "C"}
    assert state.previous_tasks == every_job(CONFIG) - {"A", "B", "C"}
    assert not state.unassigned_connectors and not state.unassigned_tasks
    assert state.previous_version == V3


def test_revocations_of_steps_3_4_5_then_the_hand_out() -> None:
    members = {
        "s1-1": ws("s1", "A A-0", holds="A-1 B"),  # step 5: A-1 and B are wildcard jobs
        "s2-1": ws("s2", "B-1", holds="A-0 B-1"),  # step 4: A-0 is static, but s1's
        "w1-1": ws("w1", holds="A B-0 C"),  # step 3: A is static
        "w2-1": ws("w2", holds="A-2 C-0"),
    }
    result, state = run(members)
    assert moves(result) == {
        "s1-1": ("", "B A-1"),
        "s2-1": ("", "A-0"),
        "w1-1": ("", "A"),
        # Nothing is handed out while its old owner still runs it; no balancing revocations: w1 and w2
        # hold 2 of the 4 wildcard tasks each once A-1 is back (step 7 counts released work in).
        "w2-1": ("", ""),
    }
    assert all(a.delay_ms == 0 for a in result.values())
    # Next round, after the revocations took effect: static jobs to their workers, released wildcard jobs
    # to the least loaded wildcard workers, at once (released work is not lost work).
    members = {
        "s1-1": ws("s1", "A A-0", holds=""),
        "s2-1": ws("s2", "B-1", holds="B-1"),
        "w1-1": ws("w1", holds="B-0 C"),
        "w2-1": ws("w2", holds="A-2 C-0"),
    }
    result, state = run(members, state=state, generation=2)
    assert moves(result) == {
        "s1-1": ("A A-0", ""),
        "s2-1": ("", ""),
        "w1-1": ("A-1", ""),
        "w2-1": ("B", ""),
    }
    assert all(a.delay_ms == 0 for a in result.values())


def test_a_static_task_needs_no_static_connector() -> None:
    result, _ = run({"s1-1": ws("s1", "A-1"), "w1-1": ws("w1")})
    assert moves(result) == {"s1-1": ("A-1", ""), "w1-1": ("A B C A-0 A-2 B-0 B-1 C-0", "")}


def test_jobs_named_but_not_existing_are_ignored_until_they_exist() -> None:
    members = {"s1-1": ws("s1", "Z Z-0 A-3 C-1"), "w1-1": ws("w1")}
    result, state = run(members)
    # s1 is a static worker with nothing to run: it gets no wildcard work either.
    assert moves(result) == {"s1-1": ("", ""), "w1-1": (codes(*parse("A B C A-0 A-1 A-2 B-0 B-1 C-0")), "")}
    # Connector Z is created later (with one task): it goes to s1, which named it beforehand.
    members = {"s1-1": ws("s1", "Z Z-0 A-3 C-1", holds=""), "w1-1": ws("w1", holds=moves(result)["w1-1"][0])}
    result, _ = run(members, state=state, generation=2, config={**CONFIG, "Z": 1})
    assert moves(result) == {"s1-1": ("Z Z-0", ""), "w1-1": ("", "")}


def test_static_workers_are_told_from_wildcard_ones_by_a_non_empty_static_assignment() -> None:
    # Step 1: a worker that sends an empty static assignment (or a worker id only) is a wildcard worker.
    members = {"a-1": ws("a"), "b-1": WorkerState("http://b:8083/", 1)}
    result, _ = run(members, config={"A": 2})
    assert moves(result) == {"a-1": ("A A-0", ""), "b-1": ("A-1", "")}


# ---------------------------------------------------------------------------------------------------
# Step 6: ties


def test_ties_go_to_the_least_loaded_then_the_smallest_worker_id() -> None:
    # Member ids sort the other way round: the worker id decides, so a restart does not change the outcome.
    members = {
        "m1": ws("beta", "A B A-0 A-1"),
        "m2": ws("alpha", "A B A-0 A-1"),
        "m3": ws("wild"),
    }
    result, _ = run(members)
    assert moves(result) == {
        "m2": ("A A-0", ""),  # alpha: A (0-0 tie), then A-0 (1-1 tie)
        "m1": ("B A-1", ""),  # beta: B (alpha had 1), then A-1
        "m3": ("C A-2 B-0 B-1 C-0", ""),
    }
    # Without worker ids the urls decide; then the member ids (two processes of one worker).
    no_ids = {m: replace(s, worker_id=None) for m, s in members.items()}
    assert moves(run(no_ids)[0]) == moves(result)
    twins = {"m9": ws("twin", "A"), "m1": ws("twin", "A")}
    assert moves(run(twins, config={"A": 0})[0]) == {"m1": ("A", ""), "m9": ("", "")}


def test_a_static_job_run_by_two_listing_workers_stays_with_the_first_in_tie_order() -> None:
    members = {
        "m1": ws("beta", "A-0", holds="A-0"),
        "m2": ws("alpha", "A-0", holds="A-0"),
        "m3": ws("wild", holds="A B C A-1 A-2 B-0 B-1 C-0"),
    }
    result, _ = run(members)
    assert moves(result) == {"m2": ("", ""), "m1": ("", "A-0"), "m3": ("", "")}
    # Held by one of them only: it stays where it is, whoever would win a tie.
    members["m2"] = ws("alpha", "A-0", holds="")
    assert moves(run(members)[0]) == {"m2": ("", ""), "m1": ("", ""), "m3": ("", "")}


# ---------------------------------------------------------------------------------------------------
# Only static workers


def test_jobs_no_live_worker_may_run_stay_unassigned_and_are_reported() -> None:
    members = {"s1-1": ws("s1", "A A-0 A-1 A-2"), "s2-1": ws("s2", "B B-0 B-1 Q")}
    result, state = run(members)
    assert moves(result) == {"s1-1": ("A A-0 A-1 A-2", ""), "s2-1": ("B B-0 B-1", "")}
    assert state.unassigned_connectors == {"C"} and state.unassigned_tasks == {TaskId("C", 0)}
    assert "static assignment" in STATIC_UNASSIGNED_REASON
    assert all(a.delay_ms == 0 for a in result.values())
    # A wildcard worker joins: it takes them, nothing is reported any more.
    members = {
        "s1-1": ws("s1", "A A-0 A-1 A-2", holds="A A-0 A-1 A-2"),
        "s2-1": ws("s2", "B B-0 B-1 Q", holds="B B-0 B-1"),
        "w1-1": ws("w1"),
    }
    result, state = run(members, state=state, generation=2)
    assert moves(result)["w1-1"] == ("C C-0", "")
    assert not state.unassigned_connectors and not state.unassigned_tasks


def test_a_static_group_whose_wildcard_workers_all_leave_reports_their_work() -> None:
    members = {"s1-1": ws("s1", "A", holds="A"), "w1-1": ws("w1", holds="B C", leaving=True)}
    result, state = run(members, config={"A": 0, "B": 0, "C": 0}, leaving=frozenset({"w1-1"}))
    assert moves(result) == {"s1-1": ("", ""), "w1-1": ("", "B C")}
    assert state.unassigned_connectors == {"B", "C"}


# ---------------------------------------------------------------------------------------------------
# Several rounds: a group of workers that apply their assignments as Kafka Connect workers do


@dataclass
class Worker:
    name: str
    static: str = ""
    connectors: set[str] = field(default_factory=set)
    tasks: set[TaskId] = field(default_factory=set)
    assigned_once: bool = False
    received_delay: int = 0
    received_at: int = 0
    last_generation: int = -1
    leaving: bool = False
    #: The worker's memory as a leader: each process keeps its own, a restart loses it.
    leader_state: CooperativeState = field(default_factory=CooperativeState)

    def holds(self) -> str:
        return codes(self.connectors, self.tasks)


@dataclass
class Group:
    """Members keyed by member id ``<worker>-<n>``; the leader is sticky, the oldest member replaces it.

    Every round is checked: nothing is held or started by two members, static jobs are only ever given to
    workers that list them and wildcard workers never hold one, leaving members get nothing, and the
    unassigned report is exactly the work no live worker may run. ``compare_sessioned``: each round is
    also computed by ``cooperative_assign`` (sessioned) from the same state and must be the same.
    """

    config: dict[str, int] = field(default_factory=lambda: dict(CONFIG))
    max_delay: int = MAX_DELAY
    workers: dict[str, Worker] = field(default_factory=dict)
    generation: int = 0
    now: int = 0
    leader: str | None = None
    incarnations: Counter[str] = field(default_factory=Counter)
    compare_sessioned: bool = False
    state: CooperativeState = field(default_factory=CooperativeState)
    seen: set[str] = field(default_factory=set)

    def join(self, name: str, static: str = "") -> str:
        self.incarnations[name] += 1
        mid = f"{name}-{self.incarnations[name]}"
        self.workers[mid] = Worker(name, static)
        return mid

    def member(self, name: str) -> str:
        [mid] = [m for m, w in self.workers.items() if w.name == name]
        return mid

    def vanish(self, name: str) -> None:
        del self.workers[self.member(name)]

    def leave(self, name: str) -> None:
        self.workers[self.member(name)].leaving = True

    def holds(self, name: str) -> str:
        return self.workers[self.member(name)].holds()

    def metadata(self, m: str) -> WorkerState:
        w = self.workers[m]
        sc, stt = parse(w.static)
        base = WorkerState(
            f"http://{w.name}:8083/",
            1,
            leaving=w.leaving,
            worker_id=w.name,
            static_connectors=sc,
            static_tasks=stt,
        )
        if not w.assigned_once:
            return base
        delay = max(0, w.received_delay - (self.now - w.received_at))
        allocation = ConnectAssignment(
            V3, NO_ERROR, "?", "?", 1, tuple(w.connectors), tuple(w.tasks), delay_ms=delay
        )
        return replace(base, allocation=allocation)

    def round(self) -> dict[str, ConnectAssignment]:
        self.generation += 1
        if self.leader not in self.workers:
            self.leader = next(iter(self.workers))
        states = {m: self.metadata(m) for m in self.workers}
        leaving = frozenset(m for m, w in self.workers.items() if w.leaving)
        lw = self.workers[self.leader]
        kwargs: dict[str, Any] = dict(
            leader_id=self.leader,
            members=states,
            leader_config_offset=1,
            connectors=self.config,
            now_ms=self.now,
            max_delay_ms=self.max_delay,
            generation=self.generation,
            leaving=leaving,
            last_completed_generation=lw.last_generation,
        )
        result, new_state = static_assign(lw.leader_state, **kwargs)
        if self.compare_sessioned:
            coop, coop_state = cooperative_assign(lw.leader_state, version=V2, **kwargs)
            assert {m: replace(a, version=V3) for m, a in coop.items()} == result
            assert replace(coop_state, previous_version=V3) == new_state
        lw.leader_state = self.state = new_state
        self.check(states, leaving, result, new_state)
        for m, a in result.items():
            w = self.workers[m]
            w.connectors = (w.connectors - set(a.revoked_connectors)) | set(a.connectors)
            w.tasks = (w.tasks - set(a.revoked_tasks)) | set(a.tasks)
            w.assigned_once, w.received_delay, w.received_at = True, a.delay_ms, self.now
            w.last_generation = self.generation
        # A leaving member that holds nothing any more goes.
        for m in [m for m in leaving if m in self.workers]:
            w = self.workers[m]
            if not w.connectors and not w.tasks and len(self.workers) > 1:
                del self.workers[m]
        return result

    def check(
        self,
        states: Mapping[str, WorkerState],
        leaving: frozenset[str],
        result: Mapping[str, ConnectAssignment],
        state: CooperativeState,
    ) -> None:
        existing = every_job(self.config)
        static_workers = {m for m, s in states.items() if m not in leaving and s.is_static}
        listed = {m: {*states[m].static_connectors, *states[m].static_tasks} for m in states}
        static_jobs = existing & set().union(*(listed[m] for m in static_workers))
        seen: Counter[Item] = Counter()
        for m, a in result.items():
            w = self.workers[m]
            new: set[Item] = {*a.connectors, *a.tasks}
            seen.update(w.connectors | set(a.connectors))
            seen.update(w.tasks | set(a.tasks))
            after = ({*w.connectors, *w.tasks} - {*a.revoked_connectors, *a.revoked_tasks}) | new
            if m in leaving:
                assert not new and not after, (m, new, after)
            elif m in static_workers:
                assert new <= listed[m] and after <= listed[m] & existing, (m, new, after)
                if a.revoked_connectors or a.revoked_tasks:
                    self.seen.add("revoked from a static worker")
            else:
                assert not (new & static_jobs) and not (after & static_jobs), (m, new, after)
        doubled = [x for x, n in seen.items() if n > 1]
        assert not doubled, f"held or started by two members: {doubled}"
        wildcard_staying = [m for m in states if m not in leaving and m not in static_workers]
        unassigned: set[Item] = {*state.unassigned_connectors, *state.unassigned_tasks}
        if static_workers and not wildcard_staying:
            assert unassigned == existing - static_jobs
            if unassigned:
                self.seen.add("unassigned reported")
        else:
            assert not unassigned
        if static_workers and wildcard_staying:
            self.seen.add("mixed")
        if max(a.delay_ms for a in result.values()):
            self.seen.add("delay running")

    def settle(self) -> None:
        """Rejoin as members would (at once after revocations, after the delay otherwise) until quiet."""
        for _ in range(30):
            result = self.round()
            moving = any(
                a.connectors or a.tasks or a.revoked_connectors or a.revoked_tasks for a in result.values()
            )
            delay = max(a.delay_ms for a in result.values())
            if not moving and delay == 0 and not any(w.leaving for w in self.workers.values()):
                return
            self.now += delay + 1
        raise AssertionError("the group did not settle in 30 rounds")

    def assert_settled(self) -> None:
        """Every static job on exactly one worker that lists it; every wildcard job exactly once on the
        wildcard workers, balanced, or (no wildcard worker) on none and reported; nothing else runs."""
        existing = every_job(self.config)
        listed = {m: {*parse(w.static)[0], *parse(w.static)[1]} for m, w in self.workers.items()}
        static_workers = {m for m in self.workers if listed[m]}
        static_jobs = existing & set().union(*(listed[m] for m in static_workers))
        wildcard = [m for m in self.workers if m not in static_workers]
        holders: dict[Item, list[str]] = {}
        for m, w in self.workers.items():
            for item in {*w.connectors, *w.tasks}:
                holders.setdefault(item, []).append(m)
        for job in static_jobs:
            assert len(holders.get(job, [])) == 1 and holders[job][0] in static_workers, (
                job,
                holders.get(job),
            )
            assert job in listed[holders[job][0]]
        wildcard_jobs = existing - static_jobs
        if wildcard:
            for job in wildcard_jobs:
                assert len(holders.get(job, [])) == 1 and holders[job][0] in wildcard, (job, holders.get(job))
            for kind in ("connectors", "tasks"):
                loads = [len(getattr(self.workers[m], kind)) for m in wildcard]
                assert max(loads) - min(loads) <= 1, (kind, loads)
        else:
            assert not (wildcard_jobs & set(holders))
            assert {*self.state.unassigned_connectors, *self.state.unassigned_tasks} == wildcard_jobs
        assert set(holders) <= existing


def test_a_static_worker_that_bounces_within_the_delay_gets_its_jobs_back() -> None:
    g = Group()
    g.join("w1")  # leads: a new leader would not know what s1 ran (KIP-415's "leader leaves")
    g.join("w2")
    g.join("s1", "A A-0")
    g.settle()
    assert g.holds("s1") == "A A-0"
    wild = (g.holds("w1"), g.holds("w2"))
    g.now += 1000
    g.vanish("s1")
    # What only s1 listed is now wildcard work that vanished with its worker: lost work, held back.
    result = g.round()
    assert moves(result) == {"w1-1": ("", ""), "w2-1": ("", "")}
    assert {a.delay_ms for a in result.values()} == {MAX_DELAY}
    g.now += 100_000
    g.join("s1", "A A-0")  # the same worker (worker.id), a new member
    result = g.round()
    assert moves(result) == {"w1-1": ("", ""), "w2-1": ("", ""), "s1-2": ("A A-0", "")}
    assert {a.delay_ms for a in result.values()} == {0}  # nothing lost any more: the delay is over
    g.settle()
    assert (g.holds("w1"), g.holds("w2")) == wild  # the wildcard workers never noticed
    g.assert_settled()


def test_a_static_worker_gone_beyond_the_delay_loses_its_jobs_until_it_returns() -> None:
    g = Group()
    g.join("w1")
    g.join("w2")
    g.join("s1", "A A-0")
    g.settle()
    g.vanish("s1")
    g.round()
    g.now += MAX_DELAY
    result = g.round()  # the delay is over: the seed's "the job will migrate back to the wildcard workers"
    assert {*result["w1-1"].connectors, *result["w2-1"].connectors} == {"A"}
    assert {*result["w1-1"].tasks, *result["w2-1"].tasks} == {TaskId("A", 0)}
    g.settle()
    g.assert_settled()
    g.join("s1", "A A-0")
    result = g.round()  # step 3: the wildcard workers give them up ...
    assert {*result["w1-1"].revoked_connectors, *result["w2-1"].revoked_connectors} == {"A"}
    assert {*result["w1-1"].revoked_tasks, *result["w2-1"].revoked_tasks} == {TaskId("A", 0)}
    assert moves(result)["s1-2"] == ("", "")
    result = g.round()  # ... and s1 gets them in the next round
    assert moves(result)["s1-2"] == ("A A-0", "")
    g.settle()
    g.assert_settled()


def test_a_static_job_another_live_worker_lists_moves_to_it_at_once() -> None:
    g = Group()
    g.join("s1", "A-0")
    g.join("s2", "A-0")  # a second worker listing A-0: the seed's duplicate static assignment
    g.join("w1")
    g.settle()
    assert (g.holds("s1"), g.holds("s2")) == ("A-0", "")
    g.vanish("s1")
    result = g.round()
    assert moves(result)["s2-1"] == ("A-0", "") and {a.delay_ms for a in result.values()} == {0}
    g.join("s1", "A-0")
    g.settle()
    assert (g.holds("s1"), g.holds("s2")) == ("", "A-0")  # no move back: s2 lists it too
    g.assert_settled()


def test_in_a_group_of_static_workers_a_restarting_workers_jobs_wait_for_it() -> None:
    g = Group(config={"A": 2, "B": 1})
    g.join("s1", "A A-0 A-1")
    g.join("s2", "B B-0")
    g.settle()
    g.assert_settled()
    g.vanish("s1")
    result = g.round()
    assert moves(result) == {"s2-1": ("", "")}
    assert g.state.unassigned_connectors == {"A"}
    assert g.state.unassigned_tasks == {TaskId("A", 0), TaskId("A", 1)}
    assert result["s2-1"].delay_ms == 0  # nobody could take them: nothing to wait for
    g.now += 10 * MAX_DELAY
    g.join("s1", "A A-0 A-1")
    result = g.round()
    assert moves(result)["s1-2"] == ("A A-0 A-1", "")
    assert not g.state.unassigned_connectors and not g.state.unassigned_tasks


def test_a_leaving_static_worker_hands_its_jobs_to_the_wildcard_workers_without_a_delay() -> None:
    g = Group()
    g.join("w1")
    g.join("s1", "A A-0")
    g.settle()
    g.leave("s1")
    result = g.round()
    # A leaving worker's static assignment no longer counts: it gives up everything, as in sessioned.
    assert moves(result) == {"w1-1": ("", ""), "s1-1": ("", "A A-0")}
    assert list(g.workers) == ["w1-1"]  # it released everything and went
    result = g.round()
    assert moves(result) == {"w1-1": ("A A-0", "")}
    assert {a.delay_ms for a in result.values()} == {0}
    g.assert_settled()


def test_the_seeds_rolling_plan_on_a_static_group() -> None:
    """The seed's test plan from the point the group speaks static: add static workers for a connector,
    a task, and duplicating both; remove a wildcard worker; add static workers for the rest; remove the
    remaining wildcard workers. Every step settles with everything running where it must."""
    g = Group(config={"A": 3, "B": 2})
    for w in ("w1", "w2", "w3"):
        g.join(w)
    g.settle()
    g.assert_settled()
    steps: list[tuple[str, str]] = [
        ("join", "sA:A"),
        ("join", "sT:B-1"),
        ("join", "sD:A B-1"),
        ("vanish", "w1"),
        ("join", "sR1:B B-0"),
        ("join", "sR2:A-0 A-1 A-2"),
        ("vanish", "w2"),
        ("vanish", "w3"),
    ]
    for kind, arg in steps:
        if kind == "join":
            name, static = arg.split(":")
            g.join(name, static)
        else:
            g.vanish(arg)
        g.settle()
        g.assert_settled()
    assert g.holds("sA") == "A" and g.holds("sT") == "B-1" and g.holds("sD") == ""
    assert g.holds("sR1") == "B B-0" and g.holds("sR2") == "A-0 A-1 A-2"
    assert not g.state.unassigned_connectors and not g.state.unassigned_tasks


# ---------------------------------------------------------------------------------------------------
# Frame, dispatch, bad input


def test_a_leader_behind_the_group_answers_config_mismatch_in_v3() -> None:
    members = {"s1-1": replace(ws("s1", "A"), config_offset=1), "w1-1": replace(ws("w1"), config_offset=5)}
    state = CooperativeState(previous_generation=3)
    result, after = static_assign(
        state,
        leader_id="s1-1",
        members=members,
        leader_config_offset=1,
        connectors=CONFIG,
        now_ms=0,
        max_delay_ms=0,
        generation=4,
    )
    assert after is state
    assert {(a.version, a.error, a.config_offset) for a in result.values()} == {(V3, CONFIG_MISMATCH, 5)}


def test_leader_assign_dispatches_static() -> None:
    members = {"s1-1": ws("s1", "A-0"), "w1-1": ws("w1")}
    kw: dict[str, Any] = dict(
        leader_id="s1-1",
        members=members,
        leader_config_offset=1,
        connectors=CONFIG,
        now_ms=0,
        max_delay_ms=MAX_DELAY,
        generation=1,
    )
    via_leader, state = leader_assign(CooperativeState(), selected_protocol="static", **kw)
    assert (via_leader, state) == static_assign(CooperativeState(), **kw)
    assert moves(via_leader)["s1-1"] == ("A-0", "")
    # Under sessioned (some member does not speak static) static assignments play no part.
    sessioned, _ = leader_assign(CooperativeState(), selected_protocol="sessioned", **kw)
    assert {a.version for a in sessioned.values()} == {V2}
    assert sum(len(a.tasks) + len(a.connectors) for a in sessioned.values()) == len(every_job(CONFIG))
    assert moves(sessioned)["s1-1"] != ("A-0", "")


def test_bad_input() -> None:
    kw: dict[str, Any] = dict(leader_config_offset=1, connectors=CONFIG, now_ms=0, generation=1)
    one = {"s1-1": ws("s1", "A")}
    with pytest.raises(ValueError, match="versions >= 3"):
        static_assign(CooperativeState(), leader_id="s1-1", members=one, max_delay_ms=0, version=V2, **kw)
    with pytest.raises(ValueError, match="negative"):
        static_assign(CooperativeState(), leader_id="s1-1", members=one, max_delay_ms=-1, **kw)
    with pytest.raises(ValueError, match="not among"):
        static_assign(CooperativeState(), leader_id="x", members=one, max_delay_ms=0, **kw)
    with pytest.raises(ValueError, match="negative task count"):
        static_assign(
            CooperativeState(),
            leader_id="s1-1",
            members=one,
            max_delay_ms=0,
            **{**kw, "connectors": {"A": -1}},
        )
    assert static_assign(CooperativeState(), leader_id="x", members={}, max_delay_ms=0, **kw) == (
        {},
        CooperativeState(),
    )


# ---------------------------------------------------------------------------------------------------
# Properties over random histories

POOL = ["a", "b", "c", "n1", "z", "a-0", "a-1", "a-2", "a-3", "b-0", "c-0", "n1-0", "z-0"]


def claims(pick: int) -> str:
    return " ".join(code for i, code in enumerate(POOL) if pick >> i & 1)


def _history(g: Group, history: list[tuple[str, int, int]], *, static: bool) -> None:
    names = iter(f"w{i:02d}" for i in range(100))
    bounced: list[tuple[str, str]] = []
    for kind, pick, dt in history:
        staying = [m for m, w in g.workers.items() if not w.leaving]
        connectors = sorted(g.config)
        if kind == "join":
            if bounced and pick % 2:
                g.join(*bounced.pop())  # a bounced worker returns with its static assignment
            else:
                g.join(next(names), claims(pick) if static and pick % 3 else "")
        elif kind in ("vanish", "bounce") and len(staying) > 1:
            w = g.workers.pop(staying[pick % len(staying)])
            if kind == "bounce":
                bounced.append((w.name, w.static))
        elif kind == "restart" and static and len(staying) > 1:
            w = g.workers.pop(staying[pick % len(staying)])  # back at once with another static assignment
            g.join(w.name, claims(pick // 7) if pick % 4 else "")
        elif kind == "reclaim" and static and staying:
            # The static assignment of a running member changes (issue 4's REST override): it keeps what
            # it runs until the leader revokes it.
            g.workers[staying[pick % len(staying)]].static = claims(pick // 5) if pick % 4 else ""
        elif kind == "leave" and len(staying) > 1:
            g.workers[staying[pick % len(staying)]].leaving = True
        elif kind == "add":
            g.config[f"n{pick % 3}"] = pick % 4
        elif kind == "remove" and connectors:
            del g.config[connectors[pick % len(connectors)]]
        elif kind == "resize" and connectors:
            g.config[connectors[pick % len(connectors)]] = pick % 5
        g.now += dt
        g.round()


events = st.sampled_from(
    ["join", "vanish", "bounce", "restart", "reclaim", "leave", "add", "remove", "resize", "time"]
)
histories = st.lists(st.tuples(events, st.integers(0, 2**16), st.integers(0, 400)), max_size=30)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.sampled_from([0, 100, 300]), st.lists(st.integers(0, 2**13), min_size=1, max_size=4))
def test_random_static_histories_keep_static_jobs_on_their_workers_and_settle(
    history: list[tuple[str, int, int]], max_delay: int, initial: list[int]
) -> None:
    g = Group(config={"a": 3, "b": 1, "c": 0}, max_delay=max_delay)
    for i, pick in enumerate(initial):
        g.join(f"i{i}", claims(pick) if pick % 3 else "")
    g.round()  # every round checks: never held twice, static jobs only on listing workers, the report
    _history(g, history, static=True)
    g.settle()
    for what in sorted(g.seen):
        event(what)
    g.assert_settled()


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(histories, st.sampled_from([0, 100, 300]), st.integers(1, 4))
def test_a_static_group_without_static_workers_is_assigned_exactly_like_sessioned(
    history: list[tuple[str, int, int]], max_delay: int, initial: int
) -> None:
    g = Group(config={"a": 3, "b": 1, "c": 0}, max_delay=max_delay, compare_sessioned=True)
    for i in range(initial):
        g.join(f"i{i}")
    g.round()
    _history(g, history, static=False)
    g.settle()
    g.assert_settled()


# ---------------------------------------------------------------------------------------------------
# Real herders on the model of Kafka's group coordinator


class StaticGroupModel(GroupModel):
    """The group model with workers that send ``worker.id`` and a static assignment (``claims``), as
    a static-protocol worker will once the worker process passes its properties to its metadata."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.claims: dict[str, str] = {}

    def _worker_state(self, member: Member) -> WorkerState:
        sc, stt = parse(self.claims.get(member.worker, ""))
        return replace(
            super()._worker_state(member), worker_id=member.worker, static_connectors=sc, static_tasks=stt
        )


def _where(g: GroupModel) -> dict[Item, str]:
    return {item: g.members[mids[0]].worker for item, mids in g.owners().items()}


def test_a_mixed_protocol_group_ignores_static_assignments_until_every_member_speaks_static() -> None:
    g = StaticGroupModel({"a": 3, "b": 2})
    g.claims = {"s1": "a a-0 a-1 a-2", "s2": "b-1"}
    g.add_member("s1", "static")
    g.add_member("s2", "static")
    g.add_member("w1", "sessioned")
    g.settle()
    g.assert_exactly_once()
    assert g.protocol == "sessioned"  # the broker picks what every member speaks
    assert {v for r in g.rounds for v in r.metadata_versions.values()} == {V2}
    # s1 runs whatever the cooperative assignor gave it, not (only) what it lists.
    assert {i for i, w in _where(g).items() if w == "s1"} != {"a", *(TaskId("a", n) for n in range(3))}
    # The last worker moves to static: the group switches, static assignments now hold.
    g.restart_member(g.worker("w1").member_id, "static")
    g.settle()
    g.assert_exactly_once()
    assert g.protocol == "static"
    assert {a.version for a in g.rounds[-1].assignments.values()} == {V3}
    where = _where(g)
    assert {i for i, w in where.items() if w == "s1"} == {"a", *(TaskId("a", n) for n in range(3))}
    assert {i for i, w in where.items() if w == "s2"} == {TaskId("b", 1)}
    assert {i for i, w in where.items() if w == "w1"} == {"b", TaskId("b", 0)}
