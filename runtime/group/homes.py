"""Work going home after a rolling restart: a worker that leaves gracefully and comes back gets back the
work it ran, and no other worker's work moves (issue 34's goal: a task moves at most twice per restart of
its worker, away and back).

Why it is needed: KIP-415's balancing revocation takes the last tasks in Java order from each overloaded
member, whichever worker they came from. Through a rolling restart of W workers that moved about as many
tasks of the workers not restarting as of the one restarting (pure simulation, 5 workers x 400 tasks: 64
to 80 of another worker's tasks moved per turn), and a task that did not go home moved again when its new
worker's turn came.

The rule, pure over plain data (the cooperative round calls it; the records carry the homes so that every
leader, old or new, knows them):

* a member leaving gracefully (``WorkerState.leaving``) records what it runs as its home, under its
  identity (``worker.id``, else its advertised URL: the names that survive a restart); work has one home,
  the latest;
* when a member that needs work to be balanced has an identity with a home, the overloaded members give
  up its home's work first, and work released or new goes first to its home member up to its balanced
  share;
* work leaves a home once it is back there or no longer configured (see :func:`settle` for why a home
  is not forgotten sooner).

With no home recorded (no graceful departure), the order of everything is Java's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

from kconnect.runtime.group.group_record_types import Assigned, Home
from kconnect.runtime.group.protocol import WorkerState
from kconnect.runtime.ids import TaskId

__all__ = ["coming_home", "give_up_order", "homeward", "identity", "left", "send_home", "settle"]

_T = TypeVar("_T", str, TaskId)


def identity(state: WorkerState) -> str:
    """The name a worker keeps across a restart: its ``worker.id`` when it has one, else its URL."""
    return state.worker_id or state.url


def left(homes: Sequence[Home], departures: Mapping[str, Assigned]) -> tuple[Home, ...]:
    """``homes`` after the members in ``departures`` (identity -> what it still runs) left gracefully:
    what each ran joins its home and leaves any other. A departure takes several rounds when its moves
    wait for warm-ups (``handover``), each seeing less still running, so a home grows, never shrinks,
    while its worker leaves; what stayed in it from an earlier departure (work past the worker's balanced
    share) is only ever a candidate for going back while the worker is short of work."""
    moving = {k: a for k, a in departures.items() if a.connectors or a.tasks}
    if not moving:
        return tuple(homes)
    taken = _union(moving.values())
    out = {h.identity: h.assigned - taken for h in homes}
    for k, a in moving.items():
        out[k] = out.get(k, Assigned()) | a
    return tuple(Home(k, a) for k, a in sorted(out.items()) if a.connectors or a.tasks)


def _union(parts: Iterable[Assigned]) -> Assigned:
    out = Assigned()
    for a in parts:
        out = out | a
    return out


def homeward(
    homes: Sequence[Home], members: Mapping[str, WorkerState], wanting: AbstractSet[str]
) -> tuple[dict[str, str], dict[TaskId, str]]:
    """Which member each homed connector and task belongs with, for the members in ``wanting`` (those
    below their balanced share) whose identity has a home."""
    if not homes or not wanting:
        return {}, {}
    by_identity = {identity(members[m]): m for m in wanting}
    home_c: dict[str, str] = {}
    home_t: dict[TaskId, str] = {}
    for h in homes:
        m = by_identity.get(h.identity)
        if m is None:
            continue
        home_c.update(dict.fromkeys(h.assigned.connectors, m))
        home_t.update(dict.fromkeys(h.assigned.tasks, m))
    return home_c, home_t


def give_up_order(
    owned: Iterable[_T], owner: str, home: Mapping[_T, str], key: Callable[[_T], Any]
) -> list[_T]:
    """``owned`` in the order an overloaded member gives it up from the end: Java's order (``key``), but
    with what belongs with another member in ``home`` moved last, so that it goes first."""
    if not home:
        return sorted(owned, key=key)
    return sorted(owned, key=lambda item: (home.get(item, owner) != owner, key(item)))


def send_home(
    items: Sequence[_T], home: Mapping[_T, str], loads: dict[str, int], cap: int, out: Mapping[str, list[_T]]
) -> list[_T]:
    """Give each item of ``items`` that has a home member to that member while its load is below ``cap``;
    the others come back, in order, for the usual levelling."""
    if not home:
        return list(items)
    rest: list[_T] = []
    for item in items:
        m = home.get(item)
        if m is not None and m in out and loads[m] < cap:
            out[m].append(item)
            loads[m] += 1
        else:
            rest.append(item)
    return rest


def settle(
    homes: Sequence[Home],
    members: Mapping[str, WorkerState],
    holding: Mapping[str, Assigned],
    configured: Assigned,
) -> tuple[Home, ...]:
    """``homes`` before a round: work its home member runs (``holding``: member -> what it reports, or
    holds in the installed target) or no longer ``configured`` leaves its home.

    A home is not forgotten when its member merely *could* be full: under ``group.protocol=connect`` the
    warm-up hand-over installs a target's moves a few at a time (``handover``), so the next target is
    computed while most of the work is still on its way home, and must still know where it goes. What
    stays past the member's balanced share changes nothing (the member never wants work again until it
    is short), and its next graceful departure replaces the whole home."""
    if not homes:
        return ()
    present = {identity(members[m]): m for m in holding}
    out: list[Home] = []
    for h in homes:
        m = present.get(h.identity)
        kept = h.assigned & configured
        if m is not None:
            kept = kept - holding[m]
        if kept.connectors or kept.tasks:
            out.append(Home(h.identity, kept))
    return tuple(out)


def coming_home(
    homes: Sequence[Home], members: Mapping[str, WorkerState], desired: Mapping[str, Assigned]
) -> dict[TaskId, str]:
    """The tasks ``desired`` (member -> its next share) gives back to their home member: task -> member.
    The warm-up hand-over learns these without its per-member cap (``handover.plan``): the member ran
    them moments ago and came back short of exactly that work."""
    if not homes:
        return {}
    by_identity = {identity(state): m for m, state in members.items()}
    out: dict[TaskId, str] = {}
    for h in homes:
        m = by_identity.get(h.identity)
        if m is not None and m in desired:
            out.update(dict.fromkeys(h.assigned.tasks & desired[m].tasks, m))
    return out
