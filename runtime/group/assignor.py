"""Leader-side assignors: who runs which connector and task in the next generation.

Pure functions of the members' metadata and the leader's view of the config topic, so every rule is a
table test. The leader calls :func:`leader_assign` in onLeaderElected and encodes the result with
:mod:`kconnect.runtime.group.protocol`.

* :func:`eager_assign` is Apache Kafka Connect's EagerAssignor (protocol "default"): every member stopped
  everything before joining, so the whole cluster is dealt out again round-robin.
* :func:`cooperative_assign` is KIP-415's incremental cooperative assignor ("compatible", "sessioned"), as
  Apache Kafka 3.9's IncrementalCooperativeAssignor behaves: deferred resolution of imbalance, with the
  leader's memory between rounds kept in an immutable :class:`CooperativeState`.
* :func:`static_assign` is KIP-987's static assignment ("static", kconnect's; no Apache release has it):
  static jobs go to the workers that list them, and the cooperative algorithm deals the rest out among
  the workers without a static assignment.
* :func:`leader_assign` picks one of them from the selected protocol and handles KIP-415's downgrade.
* :func:`revoking_assign` is the simpler cooperative assignor that served before this one landed (same
  target as eager, in at most two rounds, no delay); it stays for comparison until the worker switches.

All of them sort members and connector names the way Java's ``String.compareTo`` does (UTF-16 code
units), so a kconnect leader and a Java leader deal the same cluster out identically, even for names
outside the BMP.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, replace
from typing import NamedTuple, TypeVar

from kconnect.runtime.group.protocol import (
    CONFIG_MISMATCH,
    NO_ERROR,
    V0,
    V1,
    V3,
    ConnectAssignment,
    WorkerState,
    version_for_protocol,
)
from kconnect.runtime.ids import TaskId

_T = TypeVar("_T")

__all__ = [
    "STATIC_UNASSIGNED_REASON",
    "CooperativeState",
    "cooperative_assign",
    "eager_assign",
    "leader_assign",
    "revoking_assign",
    "static_assign",
]


def _java_order(s: str) -> bytes:
    # Big-endian UTF-16 bytes compare exactly like Java compares strings: code unit by code unit, with a
    # prefix first. Python's own order (code points) differs once supplementary characters are involved.
    return s.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True, slots=True)
class _Frame:
    """What every member's assignment shares in one generation."""

    leader: str
    leader_url: str
    config_offset: int
    mismatch: bool


def _frame(leader_id: str, members: Mapping[str, WorkerState], leader_config_offset: int) -> _Frame:
    if leader_id not in members:
        raise ValueError(f"the leader {leader_id!r} is not among the group's members")
    # Java assigns at the highest offset any member has read. A leader behind it cannot know the configs
    # the others act on, so it assigns nothing and tells everyone to resync (CONFIG_MISMATCH).
    max_offset = max(state.config_offset for state in members.values())
    return _Frame(leader_id, members[leader_id].url, max_offset, leader_config_offset < max_offset)


def _round_robin(
    members: Mapping[str, WorkerState], connectors: Mapping[str, int]
) -> dict[str, tuple[list[str], list[TaskId]]]:
    """EagerAssignor's deal: all connectors, then all tasks, from one circular iterator over the members.

    Connectors go first so that a cluster of one-task connectors does not put every connector on even
    members and every task on odd ones. Item k of the deal goes to member k mod M, which lets each
    member's share be taken as one stride slice: O(connectors + tasks), no per-item bookkeeping.
    """
    member_ids = sorted(members, key=_java_order)
    names = sorted(connectors, key=_java_order)
    tasks: list[TaskId] = []
    for name in names:
        count = connectors[name]
        if count < 0:
            raise ValueError(f"connector {name!r} has a negative task count {count}")
        tasks.extend(TaskId(name, n) for n in range(count))
    m = len(member_ids)
    first_task_turn = len(names) % m  # the member the circular iterator reaches after the connectors
    return {
        member: (names[i::m], tasks[(i - first_task_turn) % m :: m]) for i, member in enumerate(member_ids)
    }


def _mismatch(
    frame: _Frame, members: Mapping[str, WorkerState], version: int
) -> dict[str, ConnectAssignment]:
    return {
        member: ConnectAssignment(
            version, CONFIG_MISMATCH, frame.leader, frame.leader_url, frame.config_offset, (), ()
        )
        for member in members
    }


def eager_assign(
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    *,
    leaving: AbstractSet[str] = frozenset(),
) -> dict[str, ConnectAssignment]:
    """The eager ("default" protocol, v0) assignment of every member, as Apache's EagerAssignor makes it.

    ``connectors`` maps each connector in the leader's config snapshot to its committed task count. The
    assignments carry the highest config offset any member reported; if the leader is behind it, every
    member gets CONFIG_MISMATCH instead. No members, no assignments.

    ``leaving`` (kconnect's graceful hand-over, beyond Java) names members that announced a planned
    departure: they get an empty assignment and the others share the work.
    """
    if not members:
        return {}
    frame = _frame(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return _mismatch(frame, members, V0)
    staying = {m: s for m, s in members.items() if m not in leaving} if leaving else members
    deal = _round_robin(staying, connectors) if staying else {}
    return {
        member: ConnectAssignment(
            V0, NO_ERROR, frame.leader, frame.leader_url, frame.config_offset, tuple(names), tuple(tasks)
        )
        for member, (names, tasks) in ((m, deal.get(m, ([], []))) for m in members)
    }


def revoking_assign(
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    version: int,
) -> dict[str, ConnectAssignment]:
    """A cooperative (v1/v2) assignment that converges on the eager target in at most two rounds.

    Members report everything they run in their metadata allocation (Java's coordinator folds each
    incremental assignment into it). Against the eager target:

    * revoked: what a member runs that its target does not hold (this includes deleted connectors and
      tasks, and every copy of an item reported twice except the one its target member runs);
    * assigned: what its target holds and it does not run, unless another member still reports it. That
      item is being revoked in this round and is handed out in the next one, after its old owner stopped
      it and rejoined, so a task never runs on two workers at once.

    The caller must rejoin after applying revocations, as Java's herder does, for the second round to
    happen. Same CONFIG_MISMATCH rule as :func:`eager_assign`.
    """
    if version <= V0:
        raise ValueError(
            f"revoking_assign serves the cooperative protocols (version >= 1), not version {version}"
        )
    if not members:
        return {}
    frame = _frame(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return _mismatch(frame, members, version)
    target = _round_robin(members, connectors)

    # Who gets each item in the target; the items anyone still runs.
    target_connector: dict[str, str] = {}
    target_task: dict[TaskId, str] = {}
    for member, (names, tasks) in target.items():
        target_connector.update(dict.fromkeys(names, member))
        target_task.update(dict.fromkeys(tasks, member))
    running_connectors: set[str] = set()
    running_tasks: set[TaskId] = set()
    for state in members.values():
        if state.allocation is not None:
            running_connectors.update(state.allocation.connectors)
            running_tasks.update(state.allocation.tasks)

    out: dict[str, ConnectAssignment] = {}
    for member, (names, tasks) in target.items():
        owned = members[member].allocation
        revoked_connectors: tuple[str, ...] = ()
        revoked_tasks: tuple[TaskId, ...] = ()
        if owned is not None:
            revoked_connectors = tuple(c for c in owned.connectors if target_connector.get(c) != member)
            revoked_tasks = tuple(t for t in owned.tasks if target_task.get(t) != member)
        out[member] = ConnectAssignment(
            version,
            NO_ERROR,
            frame.leader,
            frame.leader_url,
            frame.config_offset,
            tuple(c for c in names if c not in running_connectors),
            tuple(t for t in tasks if t not in running_tasks),
            revoked_connectors,
            revoked_tasks,
            0,
        )
    return out


# ---------------------------------------------------------------------------------------------------
# KIP-415: incremental cooperative assignment with deferred resolution of imbalance


@dataclass(frozen=True, slots=True)
class CooperativeState:
    """The leader's memory between cooperative rounds: the fields Java's IncrementalCooperativeAssignor
    keeps in its instance, as immutable data. Start from ``CooperativeState()``; every call of
    :func:`cooperative_assign` or :func:`leader_assign` returns the next one.

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
    #: :func:`static_assign` only: the jobs this round left on no worker because no live worker may run
    #: them (see :data:`STATIC_UNASSIGNED_REASON`); the herder reports them UNASSIGNED. Empty otherwise.
    unassigned_connectors: frozenset[str] = frozenset()
    unassigned_tasks: frozenset[TaskId] = frozenset()


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


def _inherit_delay(
    state: CooperativeState,
    members: Mapping[str, WorkerState],
    scope: _Scope,
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

    "Everything" is the work of ``scope``: under :func:`static_assign`, the wildcard jobs.
    """
    fresh = CooperativeState(previous_version=state.previous_version)
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
class _Scope:
    """The part of the group one run of the cooperative algorithm deals with.

    For :func:`cooperative_assign`, every member and every configured job. For :func:`static_assign`
    (KIP-987 steps 7 and 8), the wildcard workers plus every leaving member, and the wildcard jobs.
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
class _Moves:
    """One member's part of a round: what it starts, and what it stops first."""

    new_c: list[str]
    new_t: list[TaskId]
    revoke_c: list[str]
    revoke_t: list[TaskId]


def _checked_names(connectors: Mapping[str, int]) -> list[str]:
    names = sorted(connectors, key=_java_order)
    for name in names:
        if connectors[name] < 0:
            raise ValueError(f"connector {name!r} has a negative task count {connectors[name]}")
    return names


class _OpenRound(NamedTuple):
    frame: _Frame
    config_offset: int
    names: list[str]
    member_ids: list[str]


def _open_round(
    caller: str,
    min_version: int,
    state: CooperativeState,
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    version: int,
    max_delay_ms: int,
) -> _OpenRound | tuple[dict[str, ConnectAssignment], CooperativeState]:
    """What every cooperative-family round checks first; an early answer (no members, CONFIG_MISMATCH)
    comes back as the round's result, otherwise what the round computes from."""
    if version < min_version:
        raise ValueError(f"{caller} serves protocol versions >= {min_version}, not version {version}")
    if max_delay_ms < 0:
        raise ValueError(f"scheduled rebalance max delay {max_delay_ms} ms is negative")
    if not members:
        return {}, state
    frame = _frame(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return _mismatch(frame, members, version), state
    # The work below comes from the leader's snapshot: announce its offset when it is ahead, so that every
    # member reads at least that far before acting (Java does this when it had to refresh its snapshot).
    config_offset = max(frame.config_offset, leader_config_offset)
    return _OpenRound(frame, config_offset, _checked_names(connectors), sorted(members, key=_java_order))


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
    opened = _open_round(
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
    if not isinstance(opened, _OpenRound):
        return opened
    frame, config_offset, names, member_ids = opened
    completed = generation - 1 if last_completed_generation is None else last_completed_generation
    moves, delay, new_state = _cooperative_round(
        state,
        _Scope(member_ids, members.keys()),
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
    out = {
        m: ConnectAssignment(
            version,
            NO_ERROR,
            frame.leader,
            frame.leader_url,
            config_offset,
            tuple(mv.new_c),
            tuple(mv.new_t),
            tuple(mv.revoke_c),
            tuple(mv.revoke_t),
            delay,
        )
        for m, mv in moves.items()
    }
    return out, new_state


def _cooperative_round(
    state: CooperativeState,
    scope: _Scope,
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
) -> tuple[dict[str, _Moves], int, CooperativeState]:
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
            # handed in this very round.
            for m, k in over_c.items():
                ordered = sorted(keep_c[m], key=_java_order)
                k = min(k, len(ordered))
                keep_c[m], gave = ordered[: len(ordered) - k], ordered[len(ordered) - k :]
                revoke_c[m].extend(gave)
            for m, k in over_t.items():
                ordered_t = sorted(keep_t[m], key=task_key)
                k = min(k, len(ordered_t))
                keep_t[m], gave_t = ordered_t[: len(ordered_t) - k], ordered_t[len(ordered_t) - k :]
                revoke_t[m].extend(gave_t)
    else:
        revoked_in_previous = False

    # New work and lost work that is due: to the least loaded staying members.
    loads_c = {m: len(keep_c[m]) + len(new_c[m]) for m in staying}
    loads_t = {m: len(keep_t[m]) + len(new_t[m]) for m in staying}
    _level(staying, loads_c, created_c + reassign_c, new_c)
    _level(staying, loads_t, created_t + reassign_t, new_t)

    moves = {m: _Moves(new_c[m], new_t[m], revoke_c[m], revoke_t[m]) for m in member_ids}

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
    )
    return moves, delay, new_state


# ---------------------------------------------------------------------------------------------------
# KIP-987: static assignments


#: Why :func:`static_assign` leaves a job in ``CooperativeState.unassigned_*``, for its status.
STATIC_UNASSIGNED_REASON = (
    "no live worker lists it in its static assignment (static.connectors, static.tasks), and every live "
    "worker has a static assignment"
)


def _static_tie_key(member_id: str, state: WorkerState) -> tuple[bytes, bytes]:
    # worker.id first: it survives restarts, so the same workers win ties after a restart. The url stands
    # in for a worker that sent none; the member id breaks what is left (two members of one worker id).
    name = state.worker_id if state.worker_id is not None else state.url
    return _java_order(name), _java_order(member_id)


def static_assign(
    state: CooperativeState,
    *,
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    now_ms: int,
    max_delay_ms: int,
    generation: int,
    leaving: AbstractSet[str] = frozenset(),
    last_completed_generation: int | None = None,
    version: int = V3,
) -> tuple[dict[str, ConnectAssignment], CooperativeState]:
    """One round of KIP-987's static assignment, for a group whose members all speak ``static`` (v3).

    The seed's eight steps; each member's static assignment is ``WorkerState.static_connectors`` and
    ``static_tasks``:

    1. Members listing at least one job are static workers, the others wildcard workers. A leaving
       member (graceful hand-over) is neither: its static assignment no longer counts, it gives up
       everything, and the cooperative part below treats it as a leaving member.
    2. Existing jobs that at least one static worker lists are static jobs, the others wildcard jobs.
       Jobs listed but not configured are ignored; a static task needs no static connector.
    3. A wildcard worker running a static job gives it up (the cooperative part, in which static jobs are
       out of scope, revokes it like work no longer configured).
    4. A static worker running a static job it does not list gives it up; so does each but one static
       worker running the same static job (two workers list it): the first in tie-break order keeps it.
    5. A static worker running a wildcard job (or a job no longer configured) gives it up.
    6. Each static job that no member runs goes to a static worker listing it: the least loaded (jobs it
       runs after this round, connectors and tasks together), ties to the smallest ``worker_id`` (the url
       if none) in Java string order, then member id. Static connectors are handed out first, then static
       tasks, each in (connector, task number) order. A static job still running somewhere is given to
       its static worker in the next round, after the old owner released it, so no job ever runs on two
       members.
    7-8. :func:`cooperative_assign`'s algorithm (KIP-415, with its scheduled delay for lost work and its
       balancing revocations) over the wildcard workers and the wildcard jobs only. Wildcard jobs that
       static workers give up in this round count towards the balance but are assigned in the next round.

    Consequences: a static group with no static worker is assigned exactly as ``sessioned`` would assign
    it. When a static worker vanishes, what only it listed becomes wildcard work that it ran: lost work,
    held back for ``max_delay_ms`` (the worker coming back within the delay takes it again at once) and
    then handed to the wildcard workers; a static job another live static worker lists moves to that
    worker at once. When the group's live workers are all static workers, the wildcard jobs can run
    nowhere: they are assigned to no one and listed in the returned state's ``unassigned_connectors`` and
    ``unassigned_tasks`` (reason: :data:`STATIC_UNASSIGNED_REASON`), so that their status can say so.

    The returned state is the cooperative leader's memory (the same type ``cooperative_assign`` keeps, so
    a group can move between ``sessioned`` and ``static`` without losing it): it remembers the static jobs
    placed on static workers as assigned, which is how a static worker's departure is told from new work.
    Arguments are those of :func:`cooperative_assign`; ``version`` (3 or later) is the assignments'.
    Every member is sent the cooperative part's delay.
    """
    opened = _open_round(
        "static_assign",
        V3,
        state,
        leader_id,
        members,
        leader_config_offset,
        connectors,
        version,
        max_delay_ms,
    )
    if not isinstance(opened, _OpenRound):
        return opened
    frame, config_offset, names, member_ids = opened
    rank = {name: i for i, name in enumerate(names)}

    def existing(t: TaskId) -> bool:
        return 0 <= t.task < connectors.get(t.connector, 0)

    # Step 1: static workers (in tie-break order) and the others, which the cooperative part deals with.
    static_workers = sorted(
        (m for m in member_ids if m not in leaving and members[m].is_static),
        key=lambda m: _static_tie_key(m, members[m]),
    )
    static_set = frozenset(static_workers)
    scope_ids = [m for m in member_ids if m not in static_set]

    # Step 2: static jobs, each with the static workers listing it (in tie-break order).
    listers_c: dict[str, list[str]] = {}
    listers_t: dict[TaskId, list[str]] = {}
    for m in static_workers:
        for c in members[m].static_connectors:
            if c in connectors:
                listers_c.setdefault(c, []).append(m)
        for t in members[m].static_tasks:
            if existing(t):
                listers_t.setdefault(t, []).append(m)

    # Steps 4 and 5: a static worker keeps only static jobs it lists, one copy of each.
    moves: dict[str, _Moves] = {}
    holder_c: dict[str, str] = {}
    holder_t: dict[TaskId, str] = {}
    releasing_c: set[str] = set()  # wildcard jobs static workers stop now (step 5)
    releasing_t: set[TaskId] = set()
    load: dict[str, int] = {}
    for m in static_workers:
        a = members[m].allocation
        revoke_c: list[str] = []
        revoke_t: list[TaskId] = []
        kept = 0
        for c in a.connectors if a is not None else ():
            if c not in holder_c and m in listers_c.get(c, ()):
                holder_c[c] = m
                kept += 1
            else:
                revoke_c.append(c)
                if c in connectors and c not in listers_c:
                    releasing_c.add(c)
        for t in a.tasks if a is not None else ():
            if t not in holder_t and m in listers_t.get(t, ()):
                holder_t[t] = m
                kept += 1
            else:
                revoke_t.append(t)
                if existing(t) and t not in listers_t:
                    releasing_t.add(t)
        moves[m] = _Moves([], [], revoke_c, revoke_t)
        load[m] = kept

    # Step 6: static jobs nobody runs, to the least loaded static worker listing them.
    running_c: set[str] = set()
    running_t: set[TaskId] = set()
    for s in members.values() if listers_c or listers_t else ():
        if s.allocation is not None:
            running_c.update(s.allocation.connectors)
            running_t.update(s.allocation.tasks)
    for c in names:
        listers = listers_c.get(c)
        if listers is None or c in running_c:
            continue
        pick = min(listers, key=load.__getitem__)  # the first of equals: tie-break order
        moves[pick].new_c.append(c)
        holder_c[c] = pick
        load[pick] += 1
    for t in sorted(listers_t, key=lambda t: (rank[t.connector], t.task)):
        if t in running_t:
            continue
        listers = listers_t[t]
        pick = min(listers, key=load.__getitem__)
        moves[pick].new_t.append(t)
        holder_t[t] = pick
        load[pick] += 1

    # Steps 7 and 8: the cooperative algorithm over wildcard workers (and leaving members) and jobs.
    completed = generation - 1 if last_completed_generation is None else last_completed_generation
    if scope_ids:
        scope = _Scope(
            scope_ids,
            members.keys(),
            frozenset(listers_c),
            frozenset(listers_t),
            frozenset(releasing_c),
            frozenset(releasing_t),
        )
        coop_moves, delay, coop_state = _cooperative_round(
            state,
            scope,
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
        moves.update(coop_moves)
    else:  # every member is a static worker: no wildcard work can run, nothing to hold back for anyone
        delay = 0
        coop_state = CooperativeState(
            previous_generation=generation, previous_members=frozenset(members), previous_version=version
        )

    unassigned_c: frozenset[str] = frozenset()
    unassigned_t: frozenset[TaskId] = frozenset()
    if static_workers and all(m in leaving for m in scope_ids):
        unassigned_c = frozenset(c for c in names if c not in listers_c)
        every_task = (TaskId(c, n) for c in names for n in range(connectors[c]))
        unassigned_t = frozenset(t for t in every_task if t not in listers_t)

    out = {
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
            delay,
        )
        for m in member_ids
    }
    if not static_workers:  # nothing to add: exactly the cooperative round ("sessioned")
        return out, coop_state
    # Remember the static jobs on static workers as assigned (their loss is lost work), and every
    # revocation of this round.
    static_revoked_c = {c for m in static_workers for c in moves[m].revoke_c}
    static_revoked_t = {t for m in static_workers for t in moves[m].revoke_t}
    new_state = replace(
        coop_state,
        previous_connectors=coop_state.previous_connectors.union(holder_c),
        previous_tasks=coop_state.previous_tasks.union(holder_t),
        revoked_connectors=coop_state.revoked_connectors.union(static_revoked_c),
        revoked_tasks=coop_state.revoked_tasks.union(static_revoked_t),
        unassigned_connectors=unassigned_c,
        unassigned_tasks=unassigned_t,
    )
    return out, new_state


def leader_assign(
    state: CooperativeState,
    *,
    selected_protocol: str,
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    now_ms: int,
    max_delay_ms: int,
    generation: int,
    leaving: AbstractSet[str] = frozenset(),
    last_completed_generation: int | None = None,
    last_protocol: str | None = None,
) -> tuple[dict[str, ConnectAssignment], CooperativeState]:
    """The leader's assignment for the protocol the group selected, and the leader's next state.

    ``last_protocol`` is the protocol of the last generation the leader completed as a member (None:
    it has completed none); it decides the downgrade round when this leader did not lead before.

    * "default" (v0): :func:`eager_assign`; except right after a cooperative round computed by this
      leader (KIP-415's downgrade): members still run what they owned, because they prepared the join
      under the cooperative protocol. Every member first gets a v0 assignment with nothing in it, so
      that it releases everything; regular eager assignments follow from the next round on.
    * "compatible" (v1) and "sessioned" (v2): :func:`cooperative_assign` in that version.
    * "static" (v3): :func:`static_assign`. The broker selects it only when every member speaks it; when
      any member does not, it selects "sessioned" and static assignments play no part.

    Raises ValueError for a protocol name kconnect does not know.
    """
    version = version_for_protocol(selected_protocol)
    if version >= V3:
        return static_assign(
            state,
            leader_id=leader_id,
            members=members,
            leader_config_offset=leader_config_offset,
            connectors=connectors,
            now_ms=now_ms,
            max_delay_ms=max_delay_ms,
            generation=generation,
            leaving=leaving,
            last_completed_generation=last_completed_generation,
            version=version,
        )
    if version >= V1:
        return cooperative_assign(
            state,
            leader_id=leader_id,
            members=members,
            leader_config_offset=leader_config_offset,
            connectors=connectors,
            version=version,
            now_ms=now_ms,
            max_delay_ms=max_delay_ms,
            generation=generation,
            leaving=leaving,
            last_completed_generation=last_completed_generation,
        )
    if not members:
        return {}, state
    frame = _frame(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return _mismatch(frame, members, V0), state
    eager_state = CooperativeState(previous_version=V0)
    # The leader cannot see from v0 metadata whether members still run cooperatively assigned work, so
    # it judges from its own history: the last round it computed, or the last generation it completed
    # as a member (a new leader of a group being downgraded). A leader with no history at all cannot
    # rule it out either, so it also starts with the empty round (one extra rebalance for a new eager
    # group, the price of never running a task twice).
    led_cooperatively = state.previous_version is not None and state.previous_version >= V1
    was_cooperative = last_protocol is None or version_for_protocol(last_protocol) >= V1
    if state.previous_version != V0 and (led_cooperatively or was_cooperative):
        empty = ConnectAssignment(V0, NO_ERROR, frame.leader, frame.leader_url, frame.config_offset, (), ())
        return {m: empty for m in sorted(members, key=_java_order)}, replace(
            eager_state, downgrade_round=True
        )
    return eager_assign(leader_id, members, leader_config_offset, connectors, leaving=leaving), eager_state
