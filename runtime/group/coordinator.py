"""The coordinator's part under ``group.protocol=connect``: the KIP-848 seed's epochs, kept by the leader.

Why the leader plays it: no Kafka broker implements the seed's ConnectGroupHeartbeat API, so the broker
keeps its classic role (membership, sessions, electing a leader through JoinGroup) and the worker the
classic round elects leader does what the seed asks of the coordinator, with the group-records topic as
the channel both ways. The topic is compacted, durable and read by every worker in one total order, which
is what makes the hand-over safe (see ``reconciler``).

The seed's three epochs, as kconnect keeps them:

* **group epoch** (record type 3): bumped whenever the group's metadata changes: a member joins, leaves
  or changes its metadata (URL, static assignment, leaving), the connectors or task counts change, a
  static-assignment override changes, or a scheduled rebalance falls due. The members' metadata (type 5)
  and the work the group accounts for (type 4) are written with it.
* **assignment epoch** (type 6): whenever the group epoch is ahead of the target, the leader computes a
  new target with the group's assignor (``assignor.leader_assign``: cooperative or static), iterated to
  its fixed point because the target is declarative (KIP-415's two rounds, revoke then assign, collapse
  into one end state), and persists it with the group epoch as its assignment epoch. Work lost with a
  vanished member stays out of the target for ``scheduled.rebalance.max.delay.ms`` (the delay travels in
  each member's Connect assignment inside the target, as in classic rounds), and the leader wakes to
  recompute when it is due.
* **member epoch** (type 7, written by each member): a member acknowledges a target by writing what it
  runs at that epoch after stopping what the target revoked. :func:`judge` is the seed's heartbeat check
  over those records: an acknowledgement of the current epoch that holds only the member's own target is
  accepted; one behind it is still reconciling, and accepted at the new epoch when it holds a subset of
  its target (the seed's lost-acknowledgement edge case); a member that claims work outside its target
  at the current epoch, names an epoch ahead of the target, or has not revoked within
  ``rebalance.timeout.ms`` is fenced: the leader deletes its record (a tombstone), the member stops all
  its work and rejoins at epoch 0.

Warm-up hand-over (the learner seed, issue 25; ``handover``): with ``max.warmup.tasks`` above 0, a task the
new target moves away from a member that runs it goes first to its new owner as a learner, recorded in the
target next to that member's share, while the old owner keeps it; a learner that its member's record says
is ready, or that is past its deadline, bumps the group epoch like a metadata change, and the target that
follows moves the task the plain way. Off (the default of :class:`CoordinatorInput`), targets are exactly
what they were without it.

Everything here is pure: the group records as folded, the live members, the work and a clock in;
records to write and when to wake out. Nothing of the leader's memory lives outside the records, so a
new leader resumes a reconciliation exactly where the old one left it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache

from kconnect.runtime.group import handover, protocol
from kconnect.runtime.group import homes as home_rule
from kconnect.runtime.group.assignor import CooperativeState, leader_assign
from kconnect.runtime.group.group_records import (
    Assigned,
    ConnectorsTasksKey,
    ConnectorsTasksValue,
    CurrentMemberAssignmentKey,
    GroupConfigurationKey,
    GroupConfigurationValue,
    GroupMetadataKey,
    GroupMetadataValue,
    GroupState,
    MemberMetadataKey,
    MemberMetadataValue,
    RecordKey,
    RecordValue,
    TargetAssignmentKey,
    TargetAssignmentValue,
    TargetMember,
)
from kconnect.runtime.group.handover import Candidate, WarmupSettings
from kconnect.runtime.group.leader_memory import member_metadata
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.group.target_assignment import (
    Verdict,
    is_reconciled_target,
    judge,
    scheduled_rebalance,
    target_config_offset,
    target_member,
    target_share,
)
from kconnect.runtime.ids import TaskId

__all__ = [
    "CoordinatorInput",
    "Decision",
    "Verdict",
    "coordinate",
    "is_reconciled_target",
    "judge",
    "target_config_offset",
    "target_member",
    "target_share",
]

Record = tuple[RecordKey, RecordValue | None]

#: Fixed-point rounds of the assignor per target; KIP-415 needs two (revoke, then assign what was
#: revoked), a third settles a balancing revocation's own follow-up.
_MAX_ROUNDS = 4


@dataclass(frozen=True, slots=True)
class CoordinatorInput:
    """What the leader knows when it coordinates: the live members of the classic generation it leads,
    the work from the config topic, its settings and the time."""

    group_id: str
    #: The classic generation the live members were seen in; the first group epoch when none is recorded.
    generation: int
    protocol: ProtocolName
    leader_id: str
    leader_url: str
    #: member id -> (metadata version, metadata): static assignments with overrides already applied.
    members: Mapping[str, tuple[int, WorkerState]]
    #: connector -> task count (the config topic as read by the leader).
    work: Mapping[str, int]
    config_offset: int
    now_ms: int
    max_delay_ms: int
    rebalance_timeout_ms: int
    configuration: Sequence[tuple[str, str]] = ()
    #: The leader completed no generation before the one it leads and has not coordinated in it yet: the
    #: whole cluster (re)started, so the records' last target is history, not work lost a moment ago.
    #: Everything is assigned at once, as a freshly started Java leader does (no delay).
    fresh: bool = False
    #: Warm-up hand-over (``handover``); the default is off: every move is a plain one.
    warmup: WarmupSettings = field(default_factory=WarmupSettings)


@dataclass(frozen=True, slots=True)
class Decision:
    """What one coordination step decided; ``records`` are the group records to write, in order."""

    records: tuple[Record, ...]
    group_epoch: int
    assignment_epoch: int
    #: Whether this step installed a new target (the group epoch moved).
    bumped: bool = False
    fenced: frozenset[str] = frozenset()
    #: When the leader must coordinate again even if nothing happens (a delay or a revocation deadline).
    wake_at_ms: int | None = None
    #: Static jobs no live worker may run (KIP-987): the leader reports them UNASSIGNED.
    unassigned_connectors: frozenset[str] = frozenset()
    unassigned_tasks: frozenset[TaskId] = frozenset()
    verdicts: Mapping[str, tuple[Verdict, int]] = field(default_factory=dict)
    #: The warm-up hand-over of the target this step installed (None: no new target).
    handover: handover.HandOver | None = None


def _member_value(name: ProtocolName, version: int, state: WorkerState) -> MemberMetadataValue:
    # The allocation and the config offset are left out: they change with every reconciliation step and
    # config write, and are not group metadata (a change of either must not bump the group epoch).
    return member_metadata(0, name, version, replace(state, allocation=None, config_offset=-1))


def _work(work: Mapping[str, int]) -> Assigned:
    """Every connector and task of ``work`` (connector -> task count), as the group accounts for it."""
    return _work_of(tuple(sorted(work.items())))


@lru_cache(maxsize=8)
def _work_of(counts: tuple[tuple[str, int], ...]) -> Assigned:
    """:func:`_work` once per distinct configuration: the leader steps on every record it reads, and
    rebuilding a set of 400 tasks each time cost about 1 ms a step idle, 7 ms under load (issue 34)."""
    return Assigned(
        frozenset(c for c, _count in counts),
        frozenset(TaskId(c, n) for c, count in counts for n in range(count)),
    )


def _all_gone(group: GroupState, inp: CoordinatorInput) -> bool:
    """No member of the records' target is live under its member id: every worker of that generation was
    dropped or restarted, as when the whole cluster restarts, so the target is history and nobody can be
    told apart as gone; everything is assigned at once, as by a ``fresh`` leader (members that still run
    work report it and keep it).

    Why: a leader that a coordinator dropped completed a generation before, so it is not fresh, but the
    group it remembers is gone. bench/brokers_random.py (issue 29): both workers lost their coordinator
    when its broker died, stopped everything (the KAFKA-9184 rule), were dropped and rejoined under new
    member ids a second apart; the first to rejoin led alone, found every worker of the last target gone,
    and held all the work for ``scheduled.rebalance.max.delay.ms`` (six pipelines silent for 200 s)."""
    target = group.target
    if target is None or not target.members:
        return False
    return not any(m.member_id in inp.members for m in target.members)


@lru_cache(maxsize=256)
def _announced_leaving(metadata: bytes) -> bool:
    """Whether a member's recorded worker metadata (its JoinGroup metadata, as the leader wrote it in its
    member-metadata record) carries the leaving flag; metadata that does not decode says nothing."""
    try:
        return protocol.decode_metadata(metadata)[1].leaving
    except ValueError:
        return False


def departed_leaving(group: GroupState, inp: CoordinatorInput) -> frozenset[str]:
    """Members of the records' target that are gone from the group after announcing a graceful leave (the
    member-metadata record the leader wrote for them carries the leaving flag).

    Why they matter: such a member's work is not lost but released. A leaving worker goes on handing its
    work over until it holds nothing, or until its hand-over has run ``rebalance.timeout.ms``; then it
    stops whatever it still runs and only after that sends LeaveGroup (``runtime/shell/worker.py``'s
    ``stop``). At 5 x 200 a hand-over took 10-17 s, twice past the bench's 20 s, and the leader held the
    2-3 tasks still in the departed worker's share for ``scheduled.rebalance.max.delay.ms`` as if it had
    crashed (bench/rolling.py, 2026-11-29: a 304 s gap in their output). Java's assignor likewise keeps a
    member that announced it was leaving out of its ``previousMembers``; only a member that vanished
    unannounced has its work held for its return (KIP-415).

    Why a task still stops before another worker starts it: the new owner claims the task only once no
    other member's current-assignment record lists it (``reconciler``), and the departed member's record is
    deleted in the very step that hands its work out; so what matters is that the member no longer runs
    the task when it is out of the group. It leaves in one of three ways, each after it stopped:

    * LeaveGroup from ``Worker.stop``: sent after every task and connector it ran has stopped (background
      releases awaited, the rest stopped together, each bounded by ``task.shutdown.graceful.timeout.ms``),
      and the worker keeps polling its member meanwhile so that its own poll timeout cannot send
      LeaveGroup first;
    * dropped by the coordinator (its session expired, or it did not rejoin a round within
      ``rebalance.timeout.ms``): when it learns it (the next heartbeat or join answers "unknown member
      id"), a leaving herder releases everything before rejoining (``Herder.on_rejoin_preparing``,
      ``dropped``), and reading its record's tombstone it stops everything too (fenced);
    * its process died: nothing runs.

    The second way leaves a window, as for any zombie member: a leaving worker dropped while its process
    is stalled (no heartbeat for ``session.timeout.ms``) runs its tasks until it resumes and hears of it.
    Java closes the same window for a vanished member only by waiting ``scheduled.rebalance.max.delay.ms``
    (and a zombie that cannot reach the coordinator stops its work itself, KAFKA-9184); a leaving worker
    is not a vanished one: it was shutting down."""
    target = group.target
    if target is None:
        return frozenset()
    out: set[str] = set()
    for entry in target.members:
        if entry.member_id in inp.members:
            continue
        recorded = group.members.get(entry.member_id)
        if recorded is not None and any(_announced_leaving(a.metadata) for a in recorded.assignors):
            out.add(entry.member_id)
    return frozenset(out)


def _memory(group: GroupState, inp: CoordinatorInput, version: int, reconciled: bool) -> CooperativeState:
    """The assignor's memory as the records hold it (what the last target accounted for, the delay
    running), so that every leader, old or new, computes from the same state. ``reconciled``: the
    records' target is a coordinator's (``is_reconciled_target``) and the leader is not ``fresh``.

    A member that departed after announcing its leave (:func:`departed_leaving`) is not a previous member
    whose return the delay waits for, and what its share still held is not remembered as assigned: the
    assignor sees it as work to assign now, with no delay, like new work."""
    target, accounted = group.target, group.connectors_tasks
    if not reconciled or target is None or accounted is None:
        return CooperativeState(previous_version=version, homes=target.homes if target is not None else ())
    gone_leaving = departed_leaving(group, inp)
    released = Assigned()
    for entry in target.members:
        if entry.member_id in gone_leaving:
            released = released | entry.assigned
    due = scheduled_rebalance(group)
    scheduled_ms, delay_ms = (due[0], max(0, due[0] - inp.now_ms)) if due is not None else (0, 0)
    candidates = tuple(
        m.member_id
        for m in target.members
        if due is not None and not m.assigned.connectors and not m.assigned.tasks
    )
    return CooperativeState(
        previous_generation=target.assignment_epoch,
        previous_members=frozenset(m.member_id for m in target.members if m.member_id not in gone_leaving),
        previous_connectors=accounted.assigned.connectors - released.connectors,
        previous_tasks=accounted.assigned.tasks - released.tasks,
        scheduled_rebalance_ms=scheduled_ms,
        delay_ms=delay_ms,
        candidates=candidates,
        previous_version=version,
        homes=target.homes,
    )


def _allocations(group: GroupState, inp: CoordinatorInput, reconciled: bool) -> dict[str, Assigned]:
    """Where each live member stands for the assignor: its share of the last reconciled target (where it
    is heading), or what it reported in JoinGroup when no reconciled target exists yet (the group comes
    from classic rounds).

    A live member the reconciled target does not name stands where its JoinGroup says, less what the
    target gives the live members it names: a worker a coordinator dropped ("unknown member id" after a
    coordinator failover) rejoins under a new member id and keeps running its work meanwhile, as Java's
    worker does under the cooperative protocols, whose assignor reads what members report. Counting it
    nowhere made that work "lost" with the old id: held for ``scheduled.rebalance.max.delay.ms`` and
    stopped by the member at the next target (bench/brokers_random.py: every pipeline silent from then
    on)."""
    named: dict[str, Assigned] = {}
    if reconciled:
        for member_id in inp.members:
            share = target_share(group.target, member_id)
            if share is not None:
                named[member_id] = share
    taken = Assigned()
    for share in named.values():
        taken = taken | share
    out: dict[str, Assigned] = {}
    for member_id, (_version, state) in inp.members.items():
        share = named.get(member_id)
        if share is None and state.allocation is not None:
            reported = Assigned(frozenset(state.allocation.connectors), frozenset(state.allocation.tasks))
            share = reported - taken if reconciled else reported
        out[member_id] = share or Assigned()
    return out


def compute_target(
    group: GroupState, inp: CoordinatorInput, epoch: int, *, reconciled: bool
) -> tuple[dict[str, Assigned], int, CooperativeState]:
    """The declarative target: each live member's share, the delay holding lost work back, and the
    assignor's final memory. The group's assignor runs until it revokes nothing more (its fixed point).
    ``reconciled``: the records' target was a coordinator's (:func:`is_reconciled_target`)."""
    version = protocol.version_for_protocol(inp.protocol)
    if version < protocol.V1:
        raise ValueError("declarative reconciliation needs a cooperative protocol (compatible or newer)")
    remembered = reconciled and not inp.fresh and not _all_gone(group, inp)
    alloc = _allocations(group, inp, remembered)
    memory = _memory(group, inp, version, remembered)
    completed = memory.previous_generation
    generation = max(epoch, completed + 1)
    leaving = frozenset(m for m, (_v, s) in inp.members.items() if s.leaving)
    delay = 0
    for _ in range(_MAX_ROUNDS):
        members = {
            m: replace(
                state,
                config_offset=inp.config_offset,
                allocation=ConnectAssignment(
                    version,
                    protocol.NO_ERROR,
                    inp.leader_id,
                    inp.leader_url,
                    inp.config_offset,
                    tuple(alloc[m].connectors),
                    tuple(alloc[m].tasks),
                ),
            )
            for m, (_v, state) in inp.members.items()
        }
        result, memory = leader_assign(
            memory,
            selected_protocol=inp.protocol,
            leader_id=inp.leader_id,
            members=members,
            leader_config_offset=inp.config_offset,
            connectors=inp.work,
            now_ms=inp.now_ms,
            max_delay_ms=inp.max_delay_ms,
            generation=generation,
            leaving=leaving,
            last_completed_generation=completed,
        )
        revoked = False
        for m, a in result.items():
            revoked = revoked or bool(a.revoked_connectors or a.revoked_tasks)
            stopped = Assigned(frozenset(a.revoked_connectors), frozenset(a.revoked_tasks))
            alloc[m] = (alloc[m] - stopped) | Assigned(frozenset(a.connectors), frozenset(a.tasks))
        delay = max((a.delay_ms for a in result.values()), default=0)
        if not revoked:
            break
        completed, generation = generation, generation + 1
    for m in leaving:
        alloc[m] = Assigned()
    return alloc, delay, memory


def coordinate(group: GroupState | None, inp: CoordinatorInput) -> Decision:
    """One coordination step: bump the group epoch if the group's metadata changed (or a scheduled
    rebalance fell due), compute and install a new target if so, and judge every member's acknowledgement.

    Call it whenever something it reads may have moved: a classic round completed, the config topic or
    the group records moved on, or the wake-up time it returned passed.
    """
    held = group if group is not None else GroupState(inp.group_id)
    version = protocol.version_for_protocol(inp.protocol)
    records: list[Record] = []
    gid = inp.group_id
    reconciled = is_reconciled_target(held.target)

    # -- the group's metadata: members and work -------------------------------------------------------
    changed = not reconciled or held.epoch is None
    member_values: dict[str, MemberMetadataValue] = {}
    for member_id, (v, state) in sorted(inp.members.items()):
        value = _member_value(inp.protocol, v, state)
        before = held.members.get(member_id)
        if before is not None and replace(before, group_epoch=0) == value:
            member_values[member_id] = before
        else:
            member_values[member_id] = value
            changed = True
    departed = (set(held.members) | set(held.current)) - set(inp.members)
    if reconciled and held.target is not None:
        departed |= {m.member_id for m in held.target.members} - set(inp.members)
    changed = changed or bool(departed)
    work = _work(inp.work)
    accounted = held.connectors_tasks.assigned if held.connectors_tasks is not None else None
    changed = changed or accounted != work
    due = scheduled_rebalance(held) if reconciled else None
    if due is not None and inp.now_ms >= due[0]:
        changed = True
    # Warm-up: a learner ready (promote it) or past its deadline (drop it) needs a new target, as a metadata
    # change would; otherwise its deadline is when to look again.
    candidates = {m: Candidate(learns=st.learns, leaving=st.leaving) for m, (_v, st) in inp.members.items()}
    learners_due, learner_wake = (False, None)
    if reconciled:
        learners_due, learner_wake = handover.due_learners(
            held.target, held.current, candidates, inp.warmup, inp.now_ms
        )
    changed = changed or learners_due

    epoch = held.epoch if held.epoch is not None else inp.generation - 1
    assignment_epoch = held.target.assignment_epoch if held.target is not None else -1
    unassigned_c: frozenset[str] = frozenset()
    unassigned_t: frozenset[TaskId] = frozenset()
    wake: list[int] = []
    target = held.target
    target_ts = held.target_timestamp_ms if held.target_timestamp_ms is not None else inp.now_ms
    plan: handover.HandOver | None = None
    if changed:
        epoch += 1
        alloc, delay, memory = compute_target(held, inp, epoch, reconciled=reconciled)
        unassigned_c, unassigned_t = memory.unassigned_connectors, memory.unassigned_tasks
        # A group migrating from classic rounds has no reconciled history to hand over from: plain moves.
        # A fresh leader does: the records say who runs what, and a live owner is an owner whoever leads.
        warmup = inp.warmup if reconciled else WarmupSettings()
        # Work going back to a worker that left gracefully and returned is learned there all at once.
        homes = (*memory.homes, *(held.target.homes if held.target is not None else ()))
        states = {m: st for m, (_v, st) in inp.members.items()}
        home = home_rule.coming_home(homes, states, alloc)
        plan = handover.plan(alloc, held.target, held.current, candidates, warmup, inp.now_ms, home)
        alloc = dict(plan.shares)
        for member_id, value in member_values.items():
            if value.group_epoch == 0 or held.members.get(member_id) is None:
                value = replace(value, group_epoch=epoch)
            records.append((MemberMetadataKey(gid, member_id), value))
        for member_id in sorted(departed):
            if member_id in held.members:
                records.append((MemberMetadataKey(gid, member_id), None))
            if member_id in held.current:
                records.append((CurrentMemberAssignmentKey(gid, member_id), None))
        target = TargetAssignmentValue(
            epoch,
            tuple(
                TargetMember(
                    member_id,
                    protocol.NO_ERROR,
                    alloc[member_id],
                    version,
                    protocol.encode_assignment(
                        ConnectAssignment(
                            version,
                            protocol.NO_ERROR,
                            inp.leader_id,
                            inp.leader_url,
                            inp.config_offset,
                            tuple(alloc[member_id].connectors),
                            tuple(alloc[member_id].tasks),
                            delay_ms=delay,
                            reconcile=True,
                        )
                    ),
                    plan.learners.get(member_id, frozenset()),
                )
                for member_id in sorted(alloc)
            ),
            memory.homes,
        )
        # The work the target accounts for: everything configured at this epoch. What no target share
        # holds is lost work held back (or static work no live worker may run).
        records.append((ConnectorsTasksKey(gid), ConnectorsTasksValue(epoch, work)))
        records.append((TargetAssignmentKey(gid), target))
        records.append((GroupConfigurationKey(gid), GroupConfigurationValue(tuple(inp.configuration))))
        # The group epoch last: a reader that sees it knows the records of that epoch precede it.
        records.append((GroupMetadataKey(gid), GroupMetadataValue(epoch)))
        assignment_epoch = epoch
        target_ts = inp.now_ms
        if delay > 0:
            wake.append(inp.now_ms + delay)
        if plan.wake_at_ms is not None:
            wake.append(plan.wake_at_ms)
    else:
        if due is not None:
            wake.append(due[0])
        if learner_wake is not None:
            wake.append(learner_wake)

    # -- member epochs: judge every acknowledgement against the (new) target ---------------------------
    verdicts: dict[str, tuple[Verdict, int]] = {}
    fenced: set[str] = set()
    if target is not None:
        age = max(0, inp.now_ms - target_ts)
        for member_id in sorted(inp.members):
            current = held.current.get(member_id)
            verdict = judge(
                current, target, member_id, target_age_ms=age, rebalance_timeout_ms=inp.rebalance_timeout_ms
            )
            verdicts[member_id] = verdict
            # The leader never fences itself: it knows what it runs better than its record as last read.
            if verdict[0] is Verdict.FENCED and current is not None and member_id != inp.leader_id:
                fenced.add(member_id)
                records.append((CurrentMemberAssignmentKey(gid, member_id), None))
            elif verdict[0] is Verdict.REVOKING:
                wake.append(target_ts + inp.rebalance_timeout_ms + 1)
    return Decision(
        records=tuple(records),
        group_epoch=epoch,
        assignment_epoch=assignment_epoch,
        bumped=changed,
        fenced=frozenset(fenced),
        wake_at_ms=min(wake) if wake else None,
        unassigned_connectors=unassigned_c,
        unassigned_tasks=unassigned_t,
        verdicts=verdicts,
        handover=plan,
    )
