"""Eager vs incremental cooperative assignment, side by side: figures only, no assertions.

    .venv/bin/python bench/assignor.py

(a) Task stops per event, simulated with the pure assignors: the group rebalances round by round, members
    apply their assignments (eager: release everything before every join; cooperative: stop only what is
    revoked) and rejoin as Kafka Connect workers do (at once after revocations, after the scheduled
    delay otherwise), until nothing moves.
(b) Assignor wall time and peak traced memory for 1,000 workers x 100,000 tasks (1,000 connectors x 100),
    cooperative and static (KIP-987: no static workers; 100 static workers listing one connector each).
(c) Encoded JoinGroup subscription size for a worker holding 10,000 tasks (v3: listing them as well).
"""

from __future__ import annotations

import os
import platform
import sys
import time
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TypeVar

from kconnect.runtime.group.cooperative_assignor import CooperativeState, cooperative_assign
from kconnect.runtime.group.eager_assignor import eager_assign
from kconnect.runtime.group.protocol import (
    NO_ERROR,
    V1,
    V2,
    V3,
    ConnectAssignment,
    WorkerState,
    encode_metadata,
)
from kconnect.runtime.group.static_assignor import static_assign
from kconnect.runtime.ids import TaskId

MAX_DELAY = 300_000
_R = TypeVar("_R")


# ---------------------------------------------------------------------------------------------------
# (a) task stops per event


@dataclass
class Worker:
    connectors: set[str] = field(default_factory=set)
    tasks: set[TaskId] = field(default_factory=set)
    known: bool = False
    state: CooperativeState = field(default_factory=CooperativeState)
    generation: int = -1


@dataclass
class Cluster:
    """A group of workers; ``stops`` counts already-running tasks stopped on workers by the protocol."""

    config: dict[str, int]
    cooperative: bool
    workers: dict[str, Worker] = field(default_factory=dict)
    leader: str = ""
    generation: int = 0
    now: int = 0
    stops: int = 0
    rounds: int = 0
    event_at: int = 0
    idle_since: int | None = None
    idle_ms: int = 0

    def join(self, m: str) -> None:
        self.workers[m] = Worker()
        self.leader = self.leader or m

    def crash(self, m: str) -> None:
        del self.workers[m]  # its tasks die with it: not a stop the protocol causes
        if self.leader == m:
            self.leader = next(iter(self.workers))

    def metadata(self, m: str) -> WorkerState:
        w = self.workers[m]
        if not w.known:
            return WorkerState(m, 1)
        return WorkerState(
            m, 1, ConnectAssignment(V2, NO_ERROR, "", "", 1, tuple(w.connectors), tuple(w.tasks))
        )

    def round(self, leaving: frozenset[str] = frozenset()) -> tuple[bool, int]:
        """One rebalance: whether it revoked anything, and the delay it scheduled (ms)."""
        self.generation += 1
        self.rounds += 1
        members = {m: self.metadata(m) for m in self.workers}
        if not self.cooperative:
            for w in self.workers.values():  # eager: everything stops before the join
                self.stops += len(w.tasks)
                w.connectors, w.tasks = set(), set()
            result = eager_assign(self.leader, members, 1, self.config, leaving=leaving)
            for m, a in result.items():
                self.workers[m].connectors, self.workers[m].tasks = set(a.connectors), set(a.tasks)
            self.note_idle()
            return False, 0
        lw = self.workers[self.leader]
        result, lw.state = cooperative_assign(
            lw.state,
            leader_id=self.leader,
            members=members,
            leader_config_offset=1,
            connectors=self.config,
            version=V2,
            now_ms=self.now,
            max_delay_ms=MAX_DELAY,
            generation=self.generation,
            leaving=leaving,
            last_completed_generation=lw.generation,
        )
        for m, a in result.items():
            w = self.workers[m]
            self.stops += len(a.revoked_tasks)
            w.connectors = (w.connectors - set(a.revoked_connectors)) | set(a.connectors)
            w.tasks = (w.tasks - set(a.revoked_tasks)) | set(a.tasks)
            w.known, w.generation = True, self.generation
        self.note_idle()
        revoked = any(a.revoked_tasks or a.revoked_connectors for a in result.values())
        return revoked, max(a.delay_ms for a in result.values())

    def settle(self) -> None:
        """Follow-up rounds as workers trigger them: at once after revocations, after a scheduled delay."""
        for _ in range(20):
            revoked, delay = self.round()
            if not revoked and not delay:
                return
            self.now += delay
        raise RuntimeError("did not settle")

    def running(self) -> int:
        return sum(len(w.tasks) for w in self.workers.values())

    def note_idle(self) -> None:
        """Track how long some task had no worker since the event (``event_at``)."""
        if self.running() < sum(self.config.values()):
            self.idle_since = self.event_at if self.idle_since is None else self.idle_since
        elif self.idle_since is not None:
            self.idle_ms = max(self.idle_ms, self.now - self.idle_since)
            self.idle_since = None


def started(config: dict[str, int], cooperative: bool, n: int) -> Cluster:
    c = Cluster(config, cooperative)
    c.join("w1")
    c.settle()
    for i in range(2, n + 1):
        c.join(f"w{i}")
    c.settle()
    c.stops = c.rounds = c.idle_ms = 0
    c.now += 1000
    c.event_at = c.now
    return c


def event_add_worker(c: Cluster) -> None:
    c.join("w4")
    c.settle()


def event_bounce(c: Cluster) -> None:
    c.crash("w3")
    _, delay = c.round()
    c.now += delay // 2  # back halfway through the delay (an eager group has none: right after)
    c.join("w3")
    c.settle()


def event_leave(c: Cluster) -> None:
    c.crash("w3")
    c.settle()


def event_graceful_leave(c: Cluster) -> None:
    if c.cooperative:
        c.round(frozenset({"w3"}))  # its tasks are revoked (and counted) in this round
    else:
        c.stops += len(c.workers["w3"].tasks)  # it stops its tasks as it shuts down
        c.workers["w3"].tasks = set()
    c.crash("w3")  # then it sends LeaveGroup: the next rebalance
    c.settle()


def task_stops() -> list[tuple[str, Cluster, Cluster]]:
    config = {"c1": 10, "c2": 10, "c3": 10}  # 30 tasks
    events: list[tuple[str, Callable[[Cluster], None]]] = [
        ("4th worker joins 3 (30 tasks)", event_add_worker),
        ("worker bounces within the delay", event_bounce),
        ("worker leaves for good", event_leave),
        ("graceful leave", event_graceful_leave),
    ]
    rows = []
    for name, run in events:
        eager = started(config, False, 3)
        run(eager)
        coop = started(config, True, 3)
        run(coop)
        assert eager.running() == coop.running() == 30
        rows.append((name, eager, coop))
    return rows


# ---------------------------------------------------------------------------------------------------
# (b) scale


def timed(fn: Callable[[], _R], repeat: int = 3) -> tuple[_R, float, float]:
    """Best wall time of ``repeat`` runs, then peak traced memory of one more (tracemalloc slows it)."""
    best = float("inf")
    result: _R | None = None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    tracemalloc.start()
    fn()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert result is not None
    return result, best, peak / 2**20


def scale() -> list[tuple[str, float, float, str]]:
    ids = [f"connect-{i:04d}" for i in range(1000)]
    config = {f"conn-{c:04d}": 100 for c in range(1000)}
    fresh = {m: WorkerState(f"http://{m}:8083/", 9) for m in ids}
    rows = []

    eager, t, mem = timed(lambda: eager_assign(ids[0], fresh, 9, config))
    rows.append(
        ("eager, 1,000 workers", t, mem, f"{sum(len(a.tasks) for a in eager.values()):,} tasks dealt")
    )

    def initial() -> tuple[dict[str, ConnectAssignment], CooperativeState]:
        return cooperative_assign(
            CooperativeState(),
            leader_id=ids[0],
            members=fresh,
            leader_config_offset=9,
            connectors=config,
            version=V2,
            now_ms=0,
            max_delay_ms=MAX_DELAY,
            generation=1,
        )

    (first, state), t, mem = timed(initial)
    rows.append(
        ("cooperative, initial", t, mem, f"{sum(len(a.tasks) for a in first.values()):,} tasks assigned")
    )

    # Every member reports its share as decoded from the wire would give it: fresh objects.
    balanced = {
        m: WorkerState(
            f"http://{m}:8083/",
            9,
            ConnectAssignment(
                V2, NO_ERROR, ids[0], "", 9, a.connectors, tuple(TaskId(x.connector, x.task) for x in a.tasks)
            ),
        )
        for m, a in first.items()
    }
    joined = {**balanced, "connect-new": WorkerState("http://connect-new:8083/", 9)}

    def join() -> tuple[dict[str, ConnectAssignment], CooperativeState]:
        return cooperative_assign(
            state,
            leader_id=ids[0],
            members=joined,
            leader_config_offset=9,
            connectors=config,
            version=V2,
            now_ms=10,
            max_delay_ms=MAX_DELAY,
            generation=2,
            last_completed_generation=1,
        )

    (second, state2), t, mem = timed(join)
    revoked = sum(len(a.revoked_tasks) for a in second.values())
    rows.append(("cooperative, 1 worker joins", t, mem, f"{revoked} tasks revoked from {len(ids)} workers"))

    def without_revoked(m: str, s: WorkerState) -> WorkerState:
        assert s.allocation is not None or m == "connect-new"
        if s.allocation is None:
            return s
        gone = set(second[m].revoked_tasks)
        kept = tuple(x for x in s.allocation.tasks if x not in gone)
        return WorkerState(
            s.url, 9, ConnectAssignment(V2, NO_ERROR, ids[0], "", 9, s.allocation.connectors, kept)
        )

    released = {m: without_revoked(m, s) for m, s in joined.items()}

    def follow_up() -> tuple[dict[str, ConnectAssignment], CooperativeState]:
        return cooperative_assign(
            state2,
            leader_id=ids[0],
            members=released,
            leader_config_offset=9,
            connectors=config,
            version=V2,
            now_ms=20,
            max_delay_ms=MAX_DELAY,
            generation=3,
            last_completed_generation=2,
        )

    (third, _), t, mem = timed(follow_up)
    got = len(third["connect-new"].tasks)
    rows.append(("cooperative, follow-up round", t, mem, f"the new worker gets the {got} released tasks"))

    eager_join, t, mem = timed(lambda: eager_assign(ids[0], joined, 9, config))
    rows.append(("eager, 1 worker joins", t, mem, "all 100,000 tasks restart"))
    del eager_join

    def static_initial(
        members: dict[str, WorkerState],
    ) -> tuple[dict[str, ConnectAssignment], CooperativeState]:
        return static_assign(
            CooperativeState(),
            leader_id=ids[0],
            members=members,
            leader_config_offset=9,
            connectors=config,
            now_ms=0,
            max_delay_ms=MAX_DELAY,
            generation=1,
        )

    (plain, _), t, mem = timed(lambda: static_initial(fresh))
    rows.append(
        ("static, no static workers", t, mem, f"{sum(len(a.tasks) for a in plain.values()):,} tasks assigned")
    )
    # Workers 900-999 each list one connector and its 100 tasks (conn-0000 ... conn-0099).
    with_static = dict(fresh)
    for i, m in enumerate(ids[900:]):
        name = f"conn-{i:04d}"
        with_static[m] = WorkerState(
            f"http://{m}:8083/",
            9,
            worker_id=m,
            static_connectors=(name,),
            static_tasks=tuple(TaskId(name, n) for n in range(100)),
        )
    (mixed, _), t, mem = timed(lambda: static_initial(with_static))
    on_static = sum(len(mixed[m].tasks) for m in ids[900:])
    rows.append(("static, 100 static workers", t, mem, f"{on_static:,} tasks on the static workers"))
    return rows


# ---------------------------------------------------------------------------------------------------
# (c) subscription size


def subscription_sizes() -> list[tuple[str, int, int, int]]:
    shapes = {
        "100 connectors x 100 tasks": {f"connector-{c:04d}": 100 for c in range(100)},
        "1 connector x 10,000 tasks": {"connector-0000": 10_000},
        "10,000 connectors x 1 task": {f"connector-{c:05d}": 1 for c in range(10_000)},
    }
    rows = []
    for name, shape in shapes.items():
        tasks = tuple(TaskId(c, n) for c, k in shape.items() for n in range(k))
        allocation = ConnectAssignment(
            V2, NO_ERROR, "connect-0001", "http://connect-0001:8083/", 42, (), tasks
        )
        state = WorkerState("http://connect-0002:8083/", 42, allocation)
        listing = WorkerState(state.url, 42, allocation, worker_id="connect-0002", static_tasks=tasks)
        rows.append(
            (
                name,
                len(encode_metadata(state, V1)),
                len(encode_metadata(state, V2)),
                len(encode_metadata(listing, V3)),
            )
        )
    return rows


# ---------------------------------------------------------------------------------------------------


def machine() -> str:
    model = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            model = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return f"{model}, nproc {nproc}, Python {sys.version.split()[0]} ({platform.python_implementation()})"


def main() -> None:
    print(f"kconnect assignor bench, {datetime.now(UTC):%Y-%m-%d %H:%M} UTC")
    print(f"machine: {machine()}\n")

    print("(a) already-running tasks stopped per event; 3 workers, 3 connectors x 10 tasks, max delay 300 s")
    print("    rounds: rebalances until settled; idle: longest time a task had no worker (rebalances aside)")
    head = f"{'eager stops':>11} {'rounds':>6} {'idle s':>6} {'coop stops':>10} {'rounds':>6} {'idle s':>6}"
    print(f"    {'event':32} {head}")
    for name, e, c in task_stops():
        print(
            f"    {name:32} {e.stops:>11} {e.rounds:>6} {e.idle_ms / 1000:>6.0f}"
            f" {c.stops:>10} {c.rounds:>6} {c.idle_ms / 1000:>6.0f}"
        )

    print("\n(b) 1,000 workers x 100,000 tasks (1,000 connectors x 100); best of 3; target < 1 s")
    print(f"    {'case':30} {'wall s':>7} {'peak MiB':>9}  result")
    for name, t, mem, note in scale():
        print(f"    {name:30} {t:>7.3f} {mem:>9.1f}  {note}")

    print("\n(c) JoinGroup subscription of a worker holding 10,000 tasks; target < 1 MB")
    print("    (v1 and v2 differ only in the version field; v3: a static worker that also lists them)")
    print(f"    {'shape':30} {'v1 bytes':>9} {'v2 bytes':>9} {'v3 bytes':>9}")
    for name, v1, v2, v3 in subscription_sizes():
        print(f"    {name:30} {v1:>9,} {v2:>9,} {v3:>9,}")


if __name__ == "__main__":
    main()
