"""KIP-987's static assignor (protocol "static", v3; kconnect's: no Apache release has it).

Why a worker lists jobs: some connectors must run on particular machines (a local file, a licence, a
device), so a worker may name the connectors and tasks it runs (``static.connectors``, ``static.tasks``).
Static jobs go to the workers that list them; KIP-415's cooperative algorithm
(:mod:`kconnect.runtime.group.cooperative_assignor`) deals the rest out among the workers without a
static assignment. The leader's memory is the cooperative one, so a group can move between "sessioned"
and "static" without losing it.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace

from kconnect.runtime.group.assignor_common import java_order, running_work
from kconnect.runtime.group.cooperative_assignor import (
    CooperativeState,
    Moves,
    OpenRound,
    Scope,
    assignments,
    cooperative_round,
    open_round,
)
from kconnect.runtime.group.protocol import V3, ConnectAssignment, WorkerState
from kconnect.runtime.ids import TaskId

__all__ = ["STATIC_UNASSIGNED_REASON", "static_assign"]


#: Why :func:`static_assign` leaves a job in ``CooperativeState.unassigned_*``, for its status.
STATIC_UNASSIGNED_REASON = (
    "no live worker lists it in its static assignment (static.connectors, static.tasks), and every live "
    "worker has a static assignment"
)


def _static_tie_key(member_id: str, state: WorkerState) -> tuple[bytes, bytes]:
    # worker.id first: it survives restarts, so the same workers win ties after a restart. The url stands
    # in for a worker that sent none; the member id breaks what is left (two members of one worker id).
    name = state.worker_id if state.worker_id is not None else state.url
    return java_order(name), java_order(member_id)


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
    opened = open_round(
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
    if not isinstance(opened, OpenRound):
        return opened
    names, member_ids = opened.names, opened.member_ids
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
    moves: dict[str, Moves] = {}
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
        moves[m] = Moves([], [], revoke_c, revoke_t)
        load[m] = kept

    # Step 6: static jobs nobody runs, to the least loaded static worker listing them.
    running_c, running_t = running_work(members) if listers_c or listers_t else (set(), set())
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
        scope = Scope(
            scope_ids,
            members.keys(),
            frozenset(listers_c),
            frozenset(listers_t),
            frozenset(releasing_c),
            frozenset(releasing_t),
        )
        coop_moves, delay, coop_state = cooperative_round(
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

    out = assignments(opened, moves, version, delay)
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
