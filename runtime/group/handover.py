"""The coordinator's warm-up hand-over under ``group.protocol=connect``: which moves wait for a learner.

Why: the assignor decides where work should run (its fixed point, ``coordinator.compute_target``); moved
as it is, a task stops on its old owner before its new owner has loaded the plugin, started Spark or
planned its query, and nothing runs it meanwhile (issue 25 measured 19.6 s on a graceful scale-down). The
learner seed (``kstream-incremental-rebalancing-learner-tasks.txt``) and Kafka Streams' warm-up replicas
(KIP-441) fix that by handing a moving task over in two steps:

1. **learn**: the target keeps the task in its old owner's share (it keeps running there) and lists it as
   a *learner* of the new owner, which prepares everything that does not touch the task's records;
2. **promote**: once the new owner's current-assignment record says the learner is ready, the next target
   moves the task the plain way (revoked from the old owner, claimed by the new one, ``reconciler``), and
   the new owner activates what it prepared.

A learner is never an owner: it is never in a share, so the reconciler's claims and the coordinator's
``judge`` never see it, and exclusivity (never two active owners) is exactly what it was without
learners. Everything that decides a learner's fate lives in the records (the previous target's learners
with the time each was first asked for, the members' records with their readiness), so a new leader
resumes a warm-up where the old one left it, never duplicating a task into two shares.

The rules, for each task the assignor moves from a live owner ``A`` (whose target share holds it and whose
record lists it) to ``B``:

* no hand-over (plain move) when warm-up is off (``max.warmup.tasks`` = 0), when ``B`` cannot learn (its
  metadata lacks the ``learns`` flag: Java, an older kconnect, a data plane that does not prepare yet), when
  ``B`` is leaving, or for a connector (connectors carry no state to warm up). A task whose old owner is
  gone, or does not run it yet, has nothing to hand over and moves at once (the seed's leader fail-over
  case);
* ``B`` already learns it: **promote** when its record says ready for that learner; **drop** it and move
  the plain way once past its deadline (``task.warmup.timeout.ms`` after it was first asked for; when ``A``
  is leaving, also no later than ``task.shutdown.graceful.timeout.ms``); else keep learning;
* a new move: a learner when ``B`` has fewer than ``max.warmup.tasks`` learners; otherwise it waits in
  ``A``'s share for a free slot (a promotion or a drop frees one, and either recomputes the target);
* a new move off a leaving ``A``, or home to ``B`` (``homes.coming_home``: ``B`` left gracefully, came
  back, and the task is of the work it ran then): always a learner, whatever ``B``'s count. The cap bounds
  what warm-ups cost a member that keeps its own work; a leaving member's work lands on the others anyway,
  learned or cold, so learning all of it at once costs them no more than starting it cold, and each task
  then stops on ``A`` only once its new owner has it prepared; a returning member's home work, learned
  two at a time, went on moving home into the next worker's turn of a rolling restart (issue 34's goal:
  nothing but the restarted worker's work moves in its turn). Measured (``bench/rolling.py``, 3 workers x
  100 tasks, 2026-11-28): the plain moves of a departure stopped their tasks' output 1.5-1.7 s (median,
  p95 2.5-2.7 s), the learned ones 0.05-0.07 s (p95 0.4-0.5 s). The departure stays bounded: each such
  learner is dropped, and its task moved plainly, ``task.shutdown.graceful.timeout.ms`` after it was
  asked for;
* a leaving ``A``'s task that ``B`` is learning stays headed for ``B`` in every later target, wherever the
  assignor, re-spreading the tasks still learned over loads that each promotion changed, puts it this time
  (``_follow_learners``): the first plan is carried out, not re-drawn with each promotion.

Pure: plain data in, the shares and learners of the next target out.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kconnect.runtime.group.group_records import (
    Assigned,
    CurrentMemberAssignmentValue,
    Learner,
    TargetAssignmentValue,
)
from kconnect.runtime.ids import TaskId

__all__ = [
    "Candidate",
    "HandOver",
    "WarmupSettings",
    "due_learners",
    "learner_deadline",
    "plan",
]


@dataclass(frozen=True, slots=True)
class WarmupSettings:
    """The worker keys that bound a warm-up (``config.worker``'s ``max.warmup.tasks``,
    ``task.warmup.timeout.ms``, ``task.shutdown.graceful.timeout.ms``).

    The default turns warm-up off, so a coordinator given no settings moves work as it always did.
    """

    #: Learners per member at once (KIP-441's ``max.warmup.replicas``); 0: no warm-up.
    max_warmup_tasks: int = 0
    #: A learner not ready this long after it was first asked for is dropped; the task moves plainly.
    warmup_timeout_ms: int = 60_000
    #: A leaving member's tasks are learned elsewhere for at most this long before they move plainly.
    graceful_timeout_ms: int = 5_000

    def __post_init__(self) -> None:
        for name in ("max_warmup_tasks", "warmup_timeout_ms", "graceful_timeout_ms"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must not be negative, got {getattr(self, name)}")

    @property
    def enabled(self) -> bool:
        """Whether any task may be learned."""
        return self.max_warmup_tasks > 0


@dataclass(frozen=True, slots=True)
class Candidate:
    """A live member as the hand-over needs to know it (from its JoinGroup metadata)."""

    #: It said it can learn tasks (``WorkerState.learns``).
    learns: bool = False
    #: It announced a graceful leave (``WorkerState.leaving``).
    leaving: bool = False


@dataclass(frozen=True, slots=True)
class HandOver:
    """The next target's shares and learners, and what the hand-over decided on the way."""

    shares: Mapping[str, Assigned]
    learners: Mapping[str, frozenset[Learner]]
    #: Tasks given to their learner as active in this target.
    promoted: frozenset[TaskId] = frozenset()
    #: Learners dropped past their deadline (their task moves the plain way).
    expired: frozenset[TaskId] = frozenset()
    #: Moves held back in the old owner's share for want of a learner slot.
    waiting: frozenset[TaskId] = frozenset()
    #: The earliest deadline among the learners kept: when the coordinator must look again.
    wake_at_ms: int | None = None
    #: task -> the member that keeps running it while another learns it.
    kept_by: Mapping[TaskId, str] = field(default_factory=dict)


def learner_deadline(learner: Learner, settings: WarmupSettings, *, owner_leaving: bool) -> int:
    """When ``learner`` is dropped if not ready: from when it was first asked for, the warm-up timeout,
    and no later than the graceful shutdown timeout when its task's owner is leaving."""
    timeout = settings.warmup_timeout_ms
    if owner_leaving:
        timeout = min(timeout, settings.graceful_timeout_ms)
    return learner.since_ms + timeout


def _share_owner(target: TargetAssignmentValue | None) -> dict[TaskId, str]:
    owners: dict[TaskId, str] = {}
    for member in sorted(target.members, key=lambda m: m.member_id) if target is not None else ():
        for task in member.assigned.tasks:
            owners.setdefault(task, member.member_id)
    return owners


def _target_learners(target: TargetAssignmentValue | None) -> dict[TaskId, tuple[str, Learner]]:
    out: dict[TaskId, tuple[str, Learner]] = {}
    for member in sorted(target.members, key=lambda m: m.member_id) if target is not None else ():
        for learner in member.learners:
            out.setdefault(learner.task, (member.member_id, learner))
    return out


def _is_ready(current: CurrentMemberAssignmentValue | None, learner: Learner) -> bool:
    """Whether the member's record says ``learner`` (the same one: same task, same since) is ready."""
    if current is None:
        return False
    return Learner(learner.task, True, learner.since_ms) in current.learners


def due_learners(
    target: TargetAssignmentValue | None,
    current: Mapping[str, CurrentMemberAssignmentValue],
    candidates: Mapping[str, Candidate],
    settings: WarmupSettings,
    now_ms: int,
) -> tuple[bool, int | None]:
    """Whether ``target``'s learners call for a new target now (one is ready, or past its deadline), and
    otherwise the earliest deadline to look again at. The coordinator's trigger: a learner's readiness is
    news the group metadata does not carry."""
    owners = _share_owner(target)
    wake: int | None = None
    for task, (member_id, learner) in sorted(_target_learners(target).items()):
        if _is_ready(current.get(member_id), learner):
            return True, None
        owner = owners.get(task)
        leaving = owner is not None and candidates.get(owner, Candidate()).leaving
        deadline = learner_deadline(learner, settings, owner_leaving=leaving)
        if now_ms >= deadline:
            return True, None
        wake = deadline if wake is None else min(wake, deadline)
    return False, wake


def _follow_learners(
    desired: Mapping[str, Assigned],
    owners: Mapping[TaskId, str],
    learning: Mapping[TaskId, tuple[str, Learner]],
    candidates: Mapping[str, Candidate],
) -> dict[str, Assigned]:
    """``desired`` with each task of a leaving owner that a live member is learning headed for that member,
    wherever the assignor put it this time.

    Why: the assignor spreads a leaving member's work over the others by their loads (``_level``), and it
    runs again for every target of the hand-over, while the tasks still being learned are kept in the
    leaving member's share. Each promotion adds to its learner's load, so the tasks still learned were
    spread differently each time: their learners moved to other members (a new since, a preparation
    discarded and started again elsewhere), and the deadline that bounds a departure
    (``task.shutdown.graceful.timeout.ms`` after a learner was asked for) started over with each move.
    bench/rolling.py at 5 x 200 (2026-11-29 07:00): a leaving worker's 80 tasks drew several hundred
    preparations discarded in 20 s, and three hand-overs in five ran past ``rebalance.timeout.ms``.
    Headed where the first plan sent them, they end balanced as that plan was: every later target only
    carries out the first plan, one promotion after another."""
    shares = dict(desired)
    placed = {task: member_id for member_id, share in desired.items() for task in share.tasks}
    for task, (learner_id, _learner) in sorted(learning.items()):
        owner = owners.get(task)
        if owner is None or not candidates.get(owner, Candidate()).leaving:
            continue
        learner_member = candidates.get(learner_id)
        if learner_member is None or learner_member.leaving or not learner_member.learns:
            continue
        now = placed.get(task)
        if now is None or now == learner_id or learner_id not in shares:
            continue
        one = Assigned(tasks=frozenset({task}))
        shares[now] = shares[now] - one
        shares[learner_id] = shares[learner_id] | one
    return shares


def plan(
    desired: Mapping[str, Assigned],
    previous: TargetAssignmentValue | None,
    current: Mapping[str, CurrentMemberAssignmentValue],
    candidates: Mapping[str, Candidate],
    settings: WarmupSettings,
    now_ms: int,
    home: Mapping[TaskId, str] | None = None,
) -> HandOver:
    """The next target: ``desired`` (the assignor's shares for the live members) with each move that
    waits for a learner kept in its old owner's share, and the learners that warm those moves up.

    ``previous`` is the target in force (its shares say who owns what, its learners what is being
    learned since when), ``current`` the members' records (what they run, which learners are ready),
    ``candidates`` the live members, ``home`` the tasks going back to their home member (task -> member,
    ``homes.coming_home``). See the module docstring for the rules.
    """
    home = home or {}
    shares = {m: Assigned(a.connectors, a.tasks) for m, a in desired.items()}
    learners: dict[str, set[Learner]] = {m: set() for m in desired}
    if not settings.enabled:
        return HandOver(shares, {m: frozenset() for m in desired})
    owners = _share_owner(previous)
    learning = _target_learners(previous)
    shares = _follow_learners(shares, owners, learning, candidates)
    moves: list[tuple[TaskId, str, str]] = []  # (task, from A, to B)
    for member_id, share in sorted(shares.items()):
        for task in sorted(share.tasks):
            owner = owners.get(task)
            if owner is None or owner == member_id or owner not in desired:
                continue  # nobody runs it (a new task, or its owner is gone): nothing to hand over
            owner_record = current.get(owner)
            if owner_record is None or task not in owner_record.assigned.tasks:
                continue  # its owner does not run it (yet): moving it costs nothing
            moves.append((task, owner, member_id))

    promoted: set[TaskId] = set()
    expired: set[TaskId] = set()
    waiting: set[TaskId] = set()
    kept_by: dict[TaskId, str] = {}
    wake: int | None = None

    def keep(task: TaskId, owner: str, member_id: str) -> None:
        shares[member_id] = shares[member_id] - Assigned(tasks=frozenset({task}))
        shares[owner] = shares[owner] | Assigned(tasks=frozenset({task}))
        kept_by[task] = owner

    new: list[tuple[TaskId, str, str]] = []
    # Learners under way first, so that they keep their slots before new moves take any.
    for task, owner, member_id in moves:
        candidate = candidates.get(member_id, Candidate())
        if not candidate.learns or candidate.leaving:
            continue  # plain move
        under_way = learning.get(task)
        if under_way is None or under_way[0] != member_id:
            new.append((task, owner, member_id))
            continue
        learner = Learner(task, False, under_way[1].since_ms)
        if _is_ready(current.get(member_id), learner):
            promoted.add(task)  # the plain move now: the learner activates what it prepared
            continue
        owner_leaving = candidates.get(owner, Candidate()).leaving
        deadline = learner_deadline(learner, settings, owner_leaving=owner_leaving)
        if now_ms >= deadline:
            expired.add(task)
            continue
        keep(task, owner, member_id)
        learners[member_id].add(learner)
        wake = deadline if wake is None else min(wake, deadline)
    for task, owner, member_id in new:
        owner_leaving = candidates.get(owner, Candidate()).leaving
        uncapped = owner_leaving or home.get(task) == member_id
        if uncapped or len(learners[member_id]) < settings.max_warmup_tasks:
            learner = Learner(task, False, now_ms)
            keep(task, owner, member_id)
            learners[member_id].add(learner)
            deadline = learner_deadline(learner, settings, owner_leaving=owner_leaving)
            wake = deadline if wake is None else min(wake, deadline)
        else:
            keep(task, owner, member_id)
            waiting.add(task)
    return HandOver(
        shares=shares,
        learners={m: frozenset(x) for m, x in learners.items()},
        promoted=frozenset(promoted),
        expired=frozenset(expired),
        waiting=frozenset(waiting),
        wake_at_ms=wake,
        kept_by=kept_by,
    )
