"""KIP-415's incremental cooperative assignor (protocols "compatible", v1, and "sessioned", v2).

Why incremental: workers keep running what they own across a rebalance and stop only what the leader
revokes, so adding or losing a worker moves only the work that must move. As Apache Kafka 3.9's
IncrementalCooperativeAssignor behaves: deferred resolution of imbalance, work lost with a vanished
worker held back for ``scheduled.rebalance.max.delay.ms`` (the worker coming back within the delay takes
it again), balancing revocations with an exponential back-off, and kconnect's graceful hand-over for
members that announce they are leaving. The leader's memory between rounds is the immutable
:class:`CooperativeState`, so every rule is a table test.

:func:`kconnect.runtime.group.static_assignor.static_assign` (KIP-987) runs this module's algorithm
(:func:`cooperative_round`) over its wildcard workers and jobs.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import NamedTuple, TypeVar

from kconnect.runtime.group import homes as home_rule
from kconnect.runtime.group.assignor_common import (
    Frame,
    checked_names,
    frame_of,
    java_order,
    mismatch_assignments,
)
from kconnect.runtime.group.group_record_types import Assigned, Home
from kconnect.runtime.group.protocol import NO_ERROR, V1, ConnectAssignment, WorkerState
from kconnect.runtime.ids import TaskId

_T = TypeVar("_T")

__all__ = [
    "CooperativeState",
    "Moves",
    "OpenRound",
    "Scope",
    "assignments",
    "cooperative_assign",
    "cooperative_round",
    "open_round",
]


@dataclass(frozen=True, slots=True)
class CooperativeState:
    """The leader's memory between cooperative rounds: the fields Java's IncrementalCooperativeAssignor
    keeps in its instance, as immutable data. Start from ``CooperativeState()``; every call of
    :func:`cooperative_assign` or :func:`~kconnect.runtime.group.assignor.leader_assign` returns the next
    one.

    Each worker keeps its own. Leadership is sticky, so the leader's memory normally describes the last
    generation; when it does not (another member led, or this leader's assignment never completed), the
    next round starts afresh, as Java's does when ``previousGenerationId`` differs from the last
    completed generation.
    """

    #: The generation the last round assigned (Java's ``previousGenerationId``); -1 before any round.
    previous_generation: int = -1
    #: The members of that round, minus those that announced they were leaving (Java's ``previousMembers``).
    previous_members: frozenset[str] = frozenset()
    #: What the last round left assigned, plus lost work still held back (Java's ``previousAssignment``).
    previous_connectors: frozenset[str] = frozenset()
    previous_tasks: frozenset[TaskId] = frozenset()
    #: Everything the last round revoked (Java's ``previousRevocation``).
    revoked_connectors: frozenset[str] = frozenset()
    revoked_tasks: frozenset[TaskId] = frozenset()
    #: Whether the last round revoked work to balance load (Java's ``revokedInPrevious``).
    revoked_in_previous: bool = False
    #: Successive load-balancing revocation rounds, for their back-off (``numSuccessiveRevokingRebalances``).
    revoking_rounds: int = 0
    #: When the scheduled rebalance is due, in the caller's clock (ms); 0 when none is scheduled.
    scheduled_rebalance_ms: int = 0
    #: The delay the last round sent (Java's ``delay``).
    delay_ms: int = 0
    #: Members that were empty while lost work waited, in the order they were found
    #: (Java's ``candidateWorkersForReassignment``): they get the lost work when the delay expires.
    candidates: tuple[str, ...] = ()
    #: The protocol version of the last round this leader computed (None: never led), for the downgrade.
    previous_version: int | None = None
    #: The last round was KIP-415's empty downgrade round: the leader must rejoin so that the real
    #: eager assignment follows (members that never ran cooperatively have no reason to).
    downgrade_round: bool = False
    #: ``static_assignor.static_assign`` only: the jobs this round left on no worker because no live
    #: worker may run them (see ``static_assignor.STATIC_UNASSIGNED_REASON``); the herder reports them
    #: UNASSIGNED. Empty otherwise.
    unassigned_connectors: frozenset[str] = frozenset()
    unassigned_tasks: frozenset[TaskId] = frozenset()
    #: kconnect's, beyond Java: what workers that left gracefully ran, so that it goes back to them when
    #: they return (``homes``).
    homes: tuple[Home, ...] = ()


# Java's ExponentialBackoff for successive revoking rebalances: initial 1 ms, multiplier 40, no jitter,
# capped at scheduled.rebalance.max.delay.ms.
_BACKOFF_MULTIPLIER = 40


def _revoking_backoff_ms(attempts: int, max_delay_ms: int) -> int:
    initial = min(max_delay_ms, 0 if max_delay_ms == 0 else 1)
    if max_delay_ms <= initial:
        return initial
    exp_max = math.log(max_delay_ms / max(initial, 1)) / math.log(_BACKOFF_MULTIPLIER)
    term = initial * math.pow(_BACKOFF_MULTIPLIER, min(attempts, exp_max))
    return min(int(term), max_delay_ms)


def _all_gone(state: CooperativeState, scope: Scope) -> bool:
    """No member of the last round is in the group under its member id: every worker was dropped at once
    (or restarted), so the leader's memory describes a group that no longer exists and no one can be told
    apart as gone. The round starts afresh, as a newly started leader's does; members that still run
    work report it and keep it (beyond Java, whose leader holds all of it for
    ``scheduled.rebalance.max.delay.ms``).

    Why: bench/brokers_random.py (issue 29): a broker's death took the group coordinator, both workers
    were answered "unknown member id" and rejoined under new ids; the leader, which had led the last
    generation under its old id, held every pipeline's work for the whole delay. The coordinator of
    ``group.protocol=connect`` applies the same rule to its records' target (``coordinator._all_gone``)."""
    return bool(state.previous_members) and state.previous_members.isdisjoint(scope.group)


def _inherit_delay(
    state: CooperativeState,
    members: Mapping[str, WorkerState],
    scope: Scope,
    connectors: Mapping[str, int],
    now_ms: int,
    max_delay_ms: int,
) -> CooperativeState:
    """The state a leader starts from when it did not lead the last generation.

    KIP-415's "leader bounces" heuristic: members report the delay of the assignment they last received.
    If a delay is running, the new leader honours it, treating everything unaccounted for as lost work
    (it cannot tell new from lost) and holding it until the delay ends or a member that joins meanwhile
    takes it. The remaining delay is the smallest one a member reports: exact when workers report what is
    left of their delay in ``allocation.delay_ms``, an upper bound when they report it as received (as
    Java workers do). With no delay running, unaccounted work is new and is assigned at once ("leader
    leaves"). Java 3.9 has no such heuristic: its new leader assigns everything unaccounted at once.

    "Everything" is the work of ``scope``: under ``static_assignor.static_assign``, the wildcard jobs.
    """
    fresh = CooperativeState(previous_version=state.previous_version, homes=state.homes)
    if max_delay_ms <= 0:
        return fresh
    reported = [
        s.allocation.delay_ms
        for s in members.values()
        if s.allocation is not None and s.allocation.delay_ms > 0
    ]
    if not reported:
        return fresh
    delay = min(min(reported), max_delay_ms)
    ex_c, ex_t = scope.excluded_connectors, scope.excluded_tasks
    tasks = (TaskId(c, n) for c, count in connectors.items() for n in range(count))
    return replace(
        fresh,
        previous_members=frozenset(scope.group),
        previous_connectors=frozenset(c for c in connectors if c not in ex_c),
        previous_tasks=frozenset(t for t in tasks if t not in ex_t) if ex_t else frozenset(tasks),
        scheduled_rebalance_ms=now_ms + delay,
        delay_ms=delay,
    )


def _duplicates(groups: Iterable[Iterable[_T]]) -> set[_T]:
    seen: set[_T] = set()
    doubled: set[_T] = set()
    for group in groups:
        for item in group:
            if item in seen:
                doubled.add(item)
            else:
                seen.add(item)
    return doubled


def _level(
    order: Sequence[str], loads: dict[str, int], items: Sequence[_T], out: dict[str, list[_T]]
) -> None:
    """Java's assignConnectors/assignTasks: members sorted by load then id; each pass gives one item to
    every member of the least loaded tier, so loads rise evenly from the bottom.

    The order within a tier stays the initial sort's (Java does not re-sort between passes). Linear in
    members plus items: the tier boundary only moves forward.
    """
    if not items or not order:
        return
    ranked = sorted(order, key=lambda m: loads[m])  # stable: ties keep the Java id order of ``order``
    n = len(ranked)
    level = [loads[m] for m in ranked]
    upto = 0
    i = 0
    while i < len(items):
        first = level[0]
        while upto < n and level[upto] <= first:
            upto += 1
        take = min(upto, len(items) - i)
        for k in range(take):
            out[ranked[k]].append(items[i + k])
            level[k] += 1
        i += take
    for m, load in zip(ranked, level, strict=True):
        loads[m] = load


def _wanting(
    staying: Sequence[str],
    loads_c: Mapping[str, int],
    connectors: int,
    loads_t: Mapping[str, int],
    tasks: int,
) -> frozenset[str]:
    """The members below their balanced share (of connectors or of tasks)."""
    if not staying:
        return frozenset()
    least_c, least_t = connectors // len(staying), tasks // len(staying)
    return frozenset(m for m in staying if loads_c[m] < least_c or loads_t[m] < least_t)


def _homeward(
    homes: Sequence[Home],
    members: Mapping[str, WorkerState],
    staying: Sequence[str],
    loads_c: Mapping[str, int],
    connectors: int,
    loads_t: Mapping[str, int],
    tasks: int,
) -> tuple[dict[str, str], dict[TaskId, str]]:
    """Where homed work goes on these loads: to its home member while that member is below its balanced
    share. Asked twice a round, before revoking (on what members keep) and before levelling (on what they
    keep plus what they were handed), since a member's shortfall changes in between."""
    return home_rule.homeward(homes, members, _wanting(staying, loads_c, connectors, loads_t, tasks))


def _balance_revocations(total: int, order: Sequence[str], loads: Mapping[str, int]) -> dict[str, int]:
    """Java's loadBalancingRevocations: how many items each member must give up so that nobody runs more
    than a perfectly balanced share of ``total`` (the first overloaded members in ``order`` keep the
    ``total % members`` extra ones). Underloaded members are filled from new and released work instead."""
    n = len(order)
    if n == 0:
        return {}
    least, extra = divmod(total, n)
    at_least = sum(1 for m in order if loads[m] == least)
    at_extra = sum(1 for m in order if loads[m] == least + 1)
    if at_extra == extra and at_least + at_extra == n:
        return {}
    out: dict[str, int] = {}
    granted = 0
    for m in order:
        load = loads[m]
        if load <= least:
            continue
        if granted < extra:
            granted += 1
            if load == least + 1:
                continue
            cap = least + 1
        else:
            cap = least
        out[m] = load - cap
    return out


@dataclass(frozen=True, slots=True)
class Scope:
    """The part of the group one run of the cooperative algorithm deals with.

    For :func:`cooperative_assign`, every member and every configured job. For
    ``static_assignor.static_assign`` (KIP-987 steps 7 and 8), the wildcard workers plus every leaving
    member, and the wildcard jobs.
    """

    #: The members that give up and receive work in this run, in Java order (leaving ones included).
    member_ids: Sequence[str]
    #: Every member of the group: departures since the last round are judged against it, and the next
    #: round remembers it.
    group: AbstractSet[str]
    #: Configured jobs outside the scope (the static jobs; existing ones only). A member of the scope
    #: that runs one gives it up as it gives up work no longer configured (step 3), and the leader's
    #: memory of one is never lost work.
    excluded_connectors: AbstractSet[str] = frozenset()
    excluded_tasks: AbstractSet[TaskId] = frozenset()
    #: Jobs in scope that members outside it stop in this round (wildcard jobs on static workers, step 5):
    #: they count for balance, but are neither lost nor free to assign before the next round.
    releasing_connectors: AbstractSet[str] = frozenset()
    releasing_tasks: AbstractSet[TaskId] = frozenset()


@dataclass(slots=True)
class Moves:
    """One member's part of a round: what it starts, and what it stops first."""

    new_c: list[str]
    new_t: list[TaskId]
    revoke_c: list[str]
    revoke_t: list[TaskId]


class OpenRound(NamedTuple):
    """What a cooperative-family round computes from, once :func:`open_round` let it go ahead: the
    generation's frame, the config offset it announces, and connectors and members in Java order."""

    frame: Frame
    config_offset: int
    names: list[str]
    member_ids: list[str]


def open_round(
    caller: str,
    min_version: int,
    state: CooperativeState,
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    version: int,
    max_delay_ms: int,
) -> OpenRound | tuple[dict[str, ConnectAssignment], CooperativeState]:
    """What every cooperative-family round checks first; an early answer (no members, CONFIG_MISMATCH)
    comes back as the round's result, otherwise what the round computes from."""
    if version < min_version:
        raise ValueError(f"{caller} serves protocol versions >= {min_version}, not version {version}")
    if max_delay_ms < 0:
        raise ValueError(f"scheduled rebalance max delay {max_delay_ms} ms is negative")
    if not members:
        return {}, state
    frame = frame_of(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return mismatch_assignments(frame, members, version), state
    # The work below comes from the leader's snapshot: announce its offset when it is ahead, so that every
    # member reads at least that far before acting (Java does this when it had to refresh its snapshot).
    config_offset = max(frame.config_offset, leader_config_offset)
    return OpenRound(frame, config_offset, checked_names(connectors), sorted(members, key=java_order))


def assignments(
    opened: OpenRound, moves: Mapping[str, Moves], version: int, delay_ms: int
) -> dict[str, ConnectAssignment]:
    """The wire assignment of every member of the round (in ``opened.member_ids`` order) from its moves:
    the cooperative and the static assignor send the same frame, and every member the same delay."""
    frame, config_offset = opened.frame, opened.config_offset
    return {
        m: ConnectAssignment(
            version,
            NO_ERROR,
            frame.leader,
            frame.leader_url,
            config_offset,
            tuple(moves[m].new_c),
            tuple(moves[m].new_t),
            tuple(moves[m].revoke_c),
            tuple(moves[m].revoke_t),
            delay_ms,
        )
        for m in opened.member_ids
    }


def cooperative_assign(
    state: CooperativeState,
    *,
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    version: int,
    now_ms: int,
    max_delay_ms: int,
    generation: int,
    leaving: AbstractSet[str] = frozenset(),
    last_completed_generation: int | None = None,
) -> tuple[dict[str, ConnectAssignment], CooperativeState]:
    """One round of KIP-415's incremental cooperative assignment (protocol version ``version`` >= 1).

    Members report everything they run in ``WorkerState.allocation``; the assignments returned are
    incremental: ``connectors``/``tasks`` to start, ``revoked_*`` to stop first, and ``delay_ms``, the
    time left before a scheduled rebalance (0: none). The rules, as Apache Kafka 3.9 applies them:

    * a leader behind the group's config offset answers CONFIG_MISMATCH to everyone (state unchanged);
    * work no longer configured, and every copy of work reported by two members, is revoked;
    * new work is assigned at once, to the least loaded members (connectors and tasks each balanced);
    * work lost with a member that vanished is held back for ``max_delay_ms``: it goes to members that
      were empty meanwhile (the member coming back, a replacement) when the delay expires, or is spread
      over everyone if there are none; ``max_delay_ms`` 0 reassigns it at once;
    * when no delay runs, overloaded members give up work (the last in Java string order); it is
      reassigned in the next round, after they released it, so nothing ever runs on two members; a
      second revoking round in a row is held back by an exponential delay (40 ms, 1.6 s, 64 s, ...).

    ``leaving`` (kconnect's graceful hand-over, beyond Java): members that announced a planned departure
    are revoked everything at once and assigned nothing; their work is not lost but released, so it is
    assigned in the next round without any delay, whether they are still in the group then or gone.

    ``generation`` is the generation being assigned; ``last_completed_generation`` the last one this
    leader's worker completed (default ``generation - 1``). When ``state`` was not computed for that
    generation, the round starts afresh (see :func:`_inherit_delay` for the leader-change heuristic).
    ``now_ms`` is the leader's clock, used only to schedule and measure the delay.
    """
    opened = open_round(
        "cooperative_assign",
        V1,
        state,
        leader_id,
        members,
        leader_config_offset,
        connectors,
        version,
        max_delay_ms,
    )
    if not isinstance(opened, OpenRound):
        return opened
    names, member_ids = opened.names, opened.member_ids
    completed = generation - 1 if last_completed_generation is None else last_completed_generation
    moves, delay, new_state = cooperative_round(
        state,
        Scope(member_ids, members.keys()),
        members,
        connectors,
        names,
        leaving=leaving,
        now_ms=now_ms,
        max_delay_ms=max_delay_ms,
        generation=generation,
        completed=completed,
        version=version,
    )
    return assignments(opened, moves, version, delay), new_state


def cooperative_round(
    state: CooperativeState,
    scope: Scope,
    members: Mapping[str, WorkerState],
    connectors: Mapping[str, int],
    names: Sequence[str],
    *,
    leaving: AbstractSet[str],
    now_ms: int,
    max_delay_ms: int,
    generation: int,
    completed: int,
    version: int,
) -> tuple[dict[str, Moves], int, CooperativeState]:
    """The body of :func:`cooperative_assign`, limited to ``scope``: each scope member's moves (in Java
    order), the delay every member of the group is sent, and the leader's next state.

    ``names`` are all configured connectors in Java order (tasks of excluded connectors may be in scope).
    """
    rank = {name: i for i, name in enumerate(names)}
    member_ids = list(scope.member_ids)
    gone = frozenset(m for m in member_ids if m in leaving)
    staying = [m for m in member_ids if m not in gone]
    staying_set = frozenset(staying)
    ex_c, ex_t = scope.excluded_connectors, scope.excluded_tasks
    rel_c, rel_t = scope.releasing_connectors, scope.releasing_tasks
    scope_names = [c for c in names if c not in ex_c] if ex_c else list(names)

    if state.previous_generation != completed:
        state = _inherit_delay(state, members, scope, connectors, now_ms, max_delay_ms)
    elif _all_gone(state, scope):
        state = CooperativeState(previous_version=state.previous_version, homes=state.homes)

    def task_key(t: TaskId) -> tuple[int, int]:
        return (rank[t.connector], t.task)

    def dealt_c(c: str) -> bool:
        return c in connectors and c not in ex_c

    def dealt_t(t: TaskId) -> bool:
        return 0 <= t.task < connectors.get(t.connector, 0) and not (ex_t and t in ex_t)

    # What members run now.
    owned_c: dict[str, tuple[str, ...]] = {}
    owned_t: dict[str, tuple[TaskId, ...]] = {}
    for m in member_ids:
        a = members[m].allocation
        owned_c[m] = a.connectors if a is not None else ()
        owned_t[m] = a.tasks if a is not None else ()
    active_c: set[str] = set().union(*owned_c.values())
    active_t: set[TaskId] = set().union(*owned_t.values())
    dup_c = _duplicates(owned_c.values()) if len(active_c) < sum(map(len, owned_c.values())) else set()
    dup_t = _duplicates(owned_t.values()) if len(active_t) < sum(map(len, owned_t.values())) else set()

    # A revocation of the last round that did not take effect: start again from what members report.
    prev_c: AbstractSet[str] = state.previous_connectors
    prev_t: AbstractSet[TaskId] = state.previous_tasks
    if not (state.revoked_connectors.isdisjoint(active_c) and state.revoked_tasks.isdisjoint(active_t)):
        prev_c, prev_t = active_c, active_t

    # Deleted: what the leader remembers or members run that is no longer configured, or out of scope.
    # (Java looks at its memory only, so a new leader would let a member run a deleted task for one more
    # round.)
    deleted_c = {c for c in active_c if not dealt_c(c)} | {c for c in prev_c if not dealt_c(c)}
    deleted_t = {t for t in active_t if not dealt_t(t)} | {t for t in prev_t if not dealt_t(t)}
    prev_only_t = prev_t - active_t
    lost_c = set(prev_c) - active_c - deleted_c
    lost_t = prev_only_t - deleted_t
    if rel_c:
        lost_c -= rel_c
    if rel_t:
        lost_t -= rel_t
    created_c = [c for c in scope_names if c not in active_c and c not in prev_c and c not in rel_c]
    total_tasks = sum(connectors.values()) - len(ex_t)
    known_tasks = len(active_t) + len(prev_only_t) - len(deleted_t)
    if rel_t:
        known_tasks += len(rel_t - active_t - prev_only_t)
    created_t: list[TaskId] = []
    if known_tasks < total_tasks:
        have: dict[str, set[int]] = {}
        for group in (active_t, prev_only_t, rel_t):
            for t in group:
                have.setdefault(t.connector, set()).add(t.task)
        for name in names:
            numbers = have.get(name)
            count = connectors[name]
            if numbers is None:
                fresh = [TaskId(name, n) for n in range(count)]
            else:
                fresh = [TaskId(name, n) for n in range(count) if n not in numbers]
            created_t.extend([t for t in fresh if t not in ex_t] if ex_t else fresh)

    # What a member leaving gracefully runs is its home: it goes back there when the member returns.
    homes = home_rule.left(
        state.homes,
        {
            home_rule.identity(members[m]): Assigned(frozenset(owned_c[m]), frozenset(owned_t[m]))
            for m in gone
        },
    )
    if homes:
        # Work leaves its home once its home member runs it (reports it, or holds it in the installed
        # target): not when this round's plan gives it there, which a warm-up may install only later.
        homes = home_rule.settle(
            homes,
            members,
            {m: Assigned(frozenset(owned_c[m]), frozenset(owned_t[m])) for m in staying},
            Assigned(
                frozenset(c for c in connectors if dealt_c(c)),
                frozenset(t for h in homes for t in h.assigned.tasks if dealt_t(t)),
            ),
        )

    # Revocations that are not about balance: deleted and duplicated work, and all of a leaving member's.
    removed_c = deleted_c | dup_c
    removed_t = deleted_t | dup_t
    revoke_c: dict[str, list[str]] = {}
    revoke_t: dict[str, list[TaskId]] = {}
    keep_c: dict[str, list[str]] = {}  # what each staying member goes on running, before balancing
    keep_t: dict[str, list[TaskId]] = {}
    for m in member_ids:
        if m in gone:
            revoke_c[m], revoke_t[m] = list(owned_c[m]), list(owned_t[m])
            continue
        if removed_c:
            keep_c[m] = [c for c in owned_c[m] if c not in removed_c]
            revoke_c[m] = [c for c in owned_c[m] if c in removed_c]
        else:
            keep_c[m], revoke_c[m] = list(owned_c[m]), []
        if removed_t:
            keep_t[m] = [t for t in owned_t[m] if t not in removed_t]
            revoke_t[m] = [t for t in owned_t[m] if t in removed_t]
        else:
            keep_t[m], revoke_t[m] = list(owned_t[m]), []
    new_c: dict[str, list[str]] = {m: [] for m in member_ids}
    new_t: dict[str, list[TaskId]] = {m: [] for m in member_ids}

    # Lost work: hold it during the delay, then give it to the candidates or to everyone (Java's
    # handleLostAssignments).
    scheduled = state.scheduled_rebalance_ms
    delay = state.delay_ms
    candidates = list(state.candidates)
    revoked_in_previous = state.revoked_in_previous
    revoking_rounds = state.revoking_rounds
    reassign_c: list[str] = []
    reassign_t: list[TaskId] = []
    lost_sorted_c = [c for c in names if c in lost_c]
    lost_sorted_t = sorted(lost_t, key=task_key)
    if not lost_c and not lost_t and not revoked_in_previous:
        scheduled, delay, candidates = 0, 0, []
    elif (scheduled <= 0 and state.previous_members <= scope.group) or max_delay_ms == 0:
        # Nobody left since the last round (the work went missing some other way), or delays are off.
        reassign_c, reassign_t = lost_sorted_c, lost_sorted_t
    elif scheduled > 0 and now_ms >= scheduled:
        picked = [m for m in candidates if m in staying_set]
        if picked:
            for i, c in enumerate(lost_sorted_c):
                new_c[picked[i % len(picked)]].append(c)
            for i, t in enumerate(lost_sorted_t):
                new_t[picked[i % len(picked)]].append(t)
        else:
            reassign_c, reassign_t = lost_sorted_c, lost_sorted_t
        scheduled, delay, candidates = 0, 0, []
        revoked_in_previous = False
    else:
        known = set(candidates)
        candidates += [m for m in staying if not keep_c[m] and not keep_t[m] and m not in known]
        delay = min(scheduled - now_ms, max_delay_ms) if now_ms < scheduled else max_delay_ms
        scheduled = now_ms + delay

    # Balance: no revocations while a delay runs; a second revoking round in a row waits a back-off.
    if delay == 0:
        loads_c = {m: len(keep_c[m]) + len(new_c[m]) for m in staying}
        loads_t = {m: len(keep_t[m]) + len(new_t[m]) for m in staying}
        if (scope_names or total_tasks) and any(loads_c[m] or loads_t[m] for m in staying):
            over_c = _balance_revocations(len(scope_names), staying, loads_c)
            over_t = _balance_revocations(total_tasks, staying, loads_t)
        else:
            over_c, over_t = {}, {}
        apply = False
        if revoked_in_previous and (over_c or over_t):
            revoking_rounds += 1
            delay = _revoking_backoff_ms(revoking_rounds, max_delay_ms)
            if delay != 0:
                scheduled = now_ms + delay
            else:
                apply = True
        elif over_c or over_t:
            apply = True
            revoked_in_previous = True
        elif revoked_in_previous:
            revoked_in_previous = False
            revoking_rounds = 0
        if apply:
            # Give up the last of what the member already ran (Java string order), never what it is
            # handed in this very round; work whose home member is back and short of work goes first.
            home_c, home_t = _homeward(
                homes, members, staying, loads_c, len(scope_names), loads_t, total_tasks
            )
            for m, k in over_c.items():
                ordered = home_rule.give_up_order(keep_c[m], m, home_c, java_order)
                k = min(k, len(ordered))
                keep_c[m], gave = ordered[: len(ordered) - k], ordered[len(ordered) - k :]
                revoke_c[m].extend(gave)
            for m, k in over_t.items():
                ordered_t = home_rule.give_up_order(keep_t[m], m, home_t, task_key)
                k = min(k, len(ordered_t))
                keep_t[m], gave_t = ordered_t[: len(ordered_t) - k], ordered_t[len(ordered_t) - k :]
                revoke_t[m].extend(gave_t)
    else:
        revoked_in_previous = False

    # New work and lost work that is due: to the least loaded staying members.
    loads_c = {m: len(keep_c[m]) + len(new_c[m]) for m in staying}
    loads_t = {m: len(keep_t[m]) + len(new_t[m]) for m in staying}
    items_c, items_t = created_c + reassign_c, created_t + reassign_t
    if homes and staying:
        # Work whose home member is back goes there first, up to that member's balanced share.
        home_c, home_t = _homeward(homes, members, staying, loads_c, len(scope_names), loads_t, total_tasks)
        items_c = home_rule.send_home(items_c, home_c, loads_c, len(scope_names) // len(staying), new_c)
        items_t = home_rule.send_home(items_t, home_t, loads_t, total_tasks // len(staying), new_t)
    _level(staying, loads_c, items_c, new_c)
    _level(staying, loads_t, items_t, new_t)
    moves = {m: Moves(new_c[m], new_t[m], revoke_c[m], revoke_t[m]) for m in member_ids}

    # Remember what is assigned after this round, plus the lost work still held back.
    all_revoked_c = {c for m in member_ids for c in revoke_c[m]}
    all_revoked_t: set[TaskId] = set().union(*revoke_t.values())
    next_c = (active_c - all_revoked_c).union(*new_c.values(), lost_c)
    next_t = active_t - all_revoked_t if all_revoked_t else set(active_t)
    next_t = next_t.union(*new_t.values(), lost_t)
    new_state = CooperativeState(
        previous_generation=generation,
        previous_members=frozenset(scope.group) - gone,
        previous_connectors=frozenset(next_c),
        previous_tasks=frozenset(next_t),
        revoked_connectors=frozenset(all_revoked_c),
        revoked_tasks=frozenset(all_revoked_t),
        revoked_in_previous=revoked_in_previous,
        revoking_rounds=revoking_rounds,
        scheduled_rebalance_ms=scheduled,
        delay_ms=delay,
        candidates=tuple(candidates),
        previous_version=version,
        homes=homes,
    )
    return moves, delay, new_state
