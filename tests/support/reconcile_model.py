"""A deterministic model of a whole cluster under ``group.protocol=connect``, driving real herders.

Pure: no sockets, no threads, no clock of its own. What it models, as the worker shell does it
(``runtime/shell/worker.py`` and ``leader.py``):

* **The group-records topic**: one partition, an append-only list of encoded records with the model time
  as their timestamp. Each member has a read position and folds the records it has read with
  ``group_records.apply`` (the real codec, bytes in). A :class:`WriteGroupRecords` action is carried out
  as the shell does: ``changed_records`` against *that member's* folded state, then appended.
* **Classic rounds** that elect a leader, all reconciling (every member says ``reconciles``): every member
  prepares (``on_rejoin_preparing``), the leader's assign callback hands the herder
  ``LeaderOutcome(reconcile=True, members=...)`` (``on_leader_assigned``, before the round completes),
  then each member completes the round on its own (``on_rebalanced`` with an empty Connect assignment that
  carries ``reconcile=True``), reads the group records to their end and reconciles
  (``on_group_records``). Completions can interleave with other members' steps. Optionally the group
  starts with one classic cooperative round (its records written as ``leader_memory`` writes them), so
  the first coordination migrates a group that ran classic rounds.
* **The config topic** (``group_model.ConfigTopic``): a change commits a new snapshot; each member reads it
  when a step says so (``on_config``, then ``on_group_records`` as the shell does after a config move).
* **Time**: steps advance the model clock; the leader looks again when its ``wake_at_ms`` has passed (it
  does so without reading further, as a shell whose reader lags would).
* **Membership**: a round may add members (fresh herders) or drop them (their process stops first, so
  what they ran stops with them). A graceful leave (``begin_leave``) asks for a round that carries the
  leaving flag; once the herder says ``ReadyToLeave`` the member may depart (a round without it).

* **Warm-up** (issue 25; ``warmup`` on and ``learns`` members): ``PrepareTask`` starts a preparation, which
  finishes when a step says so (``("prepare", member)``, or every pass of :meth:`ReconcileModel.settle` with
  ``prepare_in_settle``); ``ActivatePreparedTask`` runs a task from its finished preparation and
  ``DiscardPreparedTask`` drops one. :meth:`ReconcileModel.check_learners` (run with ``check_exclusive``)
  asserts that no member prepares what it runs, an activation uses a finished preparation, and every
  target keeps learners apart from owners: never in the learner's own share, always in exactly one other
  member's share, at most ``max.warmup.tasks`` per member.

* **Stops in the background** (``StopTask.acknowledge``, a task released under reconciliation): the task
  keeps running on its member until its stop finishes, which the model reports to the herder
  (``on_tasks_stopped``) at once after the actions that asked for it, or, with ``background_stops``, when a
  step says so (``("stopped", member)`` or ``("stopped", member, task)``, and every pass of
  :meth:`ReconcileModel.settle`), so a replay can hold one stop while others finish.

Actions carried out: Start*/Stop* update what each member runs; ``WriteGroupRecords`` appends;
``RequestRejoin`` is recorded (a config change must never need a classic round while reconciling; only
the graceful hand-over starts one) and otherwise ignored. After every step
:meth:`ReconcileModel.check_exclusive` asserts that no connector and no task runs on two members.

Not modelled: zombie members (a member the group dropped while its process keeps running), failed writes,
compaction of the group-records topic, static assignments.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kconnect.runtime.group import group_records as gr
from kconnect.runtime.group import leader_memory, protocol
from kconnect.runtime.group.assignor import CooperativeState, leader_assign
from kconnect.runtime.group.handover import WarmupSettings
from kconnect.runtime.group.herder import (
    Action,
    ActivatePreparedTask,
    CoordinatorSettings,
    DiscardPreparedTask,
    Herder,
    LeaderOutcome,
    PrepareTask,
    ReadyToLeave,
    RequestRejoin,
    StartConnector,
    StartTask,
    StopConnector,
    StopTask,
    WriteGroupRecords,
)
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.ids import TaskId
from tests.support.group_model import ConfigTopic

__all__ = ["GROUP", "DoubleRun", "LearnerBroken", "ModelMember", "ReconcileModel", "Rejoin"]

GROUP = "connect-cluster"
SESSIONED = ProtocolName.SESSIONED
Item = str | TaskId


class DoubleRun(AssertionError):
    """A connector or task ran on two members at once."""


class LearnerBroken(AssertionError):
    """A learner ran its task, was activated without a finished preparation, or a target mixed learners
    with owners."""


@dataclass(frozen=True)
class Rejoin:
    """A RequestRejoin a herder emitted, and whether the member was inside a round when it did."""

    member: str
    reason: str
    during_round: bool
    step: int


@dataclass
class ModelMember:
    member_id: str
    herder: Herder
    #: Next offset of the group-records topic to read, and the records folded so far.
    position: int = 0
    folded: gr.GroupRecords = field(default_factory=gr.GroupRecords)
    connectors: set[str] = field(default_factory=set)
    tasks: set[TaskId] = field(default_factory=set)
    #: Between on_rejoin_preparing and on_rebalanced of the round in progress.
    joining: bool = False
    #: Graceful hand-over: it asked for a round to announce it (``begin_leave``), and the herder said it
    #: holds nothing any more (``ReadyToLeave``): it may send LeaveGroup.
    announced: bool = False
    ready_to_leave: bool = False
    #: Warm-up: preparations under way and finished (task -> attempt), and how many tasks it activated.
    preparing: dict[TaskId, int] = field(default_factory=dict)
    prepared: dict[TaskId, int] = field(default_factory=dict)
    activations: int = 0
    #: Tasks whose background stop (``StopTask.acknowledge``) has not finished: they still run.
    stopping: set[TaskId] = field(default_factory=set)

    @property
    def url(self) -> str:
        return f"http://{self.member_id}:8083/"

    @property
    def state(self) -> gr.GroupState | None:
        return self.folded.groups.get(GROUP)

    def running(self) -> set[Item]:
        return {*self.connectors, *self.tasks}


class ReconcileModel:
    """``members`` real herders in one reconciling group; see the module docstring."""

    def __init__(
        self,
        members: Sequence[str],
        connectors: Mapping[str, int],
        *,
        now_ms: int = 1_700_000_000_000,
        max_delay_ms: int = 0,
        rebalance_timeout_ms: int = 600_000,
        from_classic: bool = False,
        warmup: WarmupSettings | None = None,
        learns: bool = False,
        prepare_in_settle: bool = True,
        background_stops: bool = False,
    ) -> None:
        self.config = ConfigTopic()
        self.versions = 1
        self.config.set_connectors(connectors, "v1")
        self.now_ms = now_ms
        self.settings = CoordinatorSettings(
            group_id=GROUP,
            max_delay_ms=max_delay_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            configuration=(("scheduled.rebalance.max.delay.ms", str(max_delay_ms)),),
            warmup=warmup or WarmupSettings(),
        )
        self.learns = learns
        self.prepare_in_settle = prepare_in_settle
        self.background_stops = background_stops
        self.activations = 0
        self.learners_seen = 0
        #: The group-records partition: (key, value, timestamp).
        self.log: list[tuple[bytes, bytes | None, int]] = []
        self.members: dict[str, ModelMember] = {}
        self.generation = 0
        self.leader = ""
        self.steps = 0
        self.rejoins: list[Rejoin] = []
        self.starts = 0
        self.stops = 0
        self.max_epoch_seen = -1
        #: The log offset ``check_learners`` has checked the targets up to.
        self._checked = 0
        for m in members:
            self.members[m] = ModelMember(m, self._herder(m))
        if from_classic:
            self._classic_round(sorted(members)[0])
        self.begin_round(sorted(members)[0])
        self.complete_all()

    # -- construction ------------------------------------------------------------------------------

    def _herder(self, member_id: str) -> Herder:
        h = Herder(member_id, self.config.snapshot)
        h.coordinator_settings = self.settings
        h.learns = self.learns
        return h

    def worker_state(self, member: ModelMember) -> WorkerState:
        return WorkerState(
            member.url,
            member.herder.snapshot.offset,
            member.herder.current_allocation(),
            leaving=member.herder.join_leaving(),
            worker_id=member.member_id,
            reconciles=True,
            learns=member.herder.learns,
        )

    # -- the group-records topic -------------------------------------------------------------------

    def append(self, member: ModelMember, action: WriteGroupRecords) -> None:
        if action.epoch >= 0:
            self._check_nothing_dropped(member, action)
        for key, value in gr.changed_records(member.state, list(action.records)):
            self.log.append((key, value, self.now_ms))
        if action.epoch >= 0:
            self.max_epoch_seen = max(self.max_epoch_seen, action.epoch)

    def read(self, member_id: str, count: int | None = None) -> None:
        """``member_id`` reads ``count`` more records (None: to the end), then reconciles."""
        m = self.members[member_id]
        self._fold(m, count)
        self._group_moved(m)

    def _fold(self, m: ModelMember, count: int | None = None) -> None:
        end = len(self.log) if count is None else min(len(self.log), m.position + count)
        while m.position < end:
            key, value, ts = self.log[m.position]
            m.folded = gr.apply(m.folded, key, value, offset=m.position, timestamp_ms=ts)
            m.position += 1

    def _group_moved(self, m: ModelMember) -> None:
        self.steps += 1
        self.execute(m, m.herder.on_group_records(m.state, self.now_ms))
        self.check_exclusive(f"after {m.member_id} reconciled at offset {m.position}")

    # -- the config topic --------------------------------------------------------------------------

    def set_connectors(self, connectors: Mapping[str, int]) -> None:
        """A new config is committed (every connector it touches gets new configs)."""
        self.versions += 1
        self.config.set_connectors(connectors, f"v{self.versions}")

    def read_config(self, member_id: str) -> None:
        """``member_id`` reads the config topic to its end (``on_config``), then reconciles."""
        m = self.members[member_id]
        snapshot = self.config.snapshot
        if snapshot is m.herder.snapshot or snapshot.offset == m.herder.snapshot.offset:
            return
        self.steps += 1
        self.execute(m, m.herder.on_config(snapshot))
        self.check_exclusive(f"after {member_id} read config offset {snapshot.offset}")
        self._group_moved(m)

    def advance(self, ms: int) -> None:
        """Time passes; the leader looks again if its wake-up time passed (the shell's loop does)."""
        self.now_ms += ms
        leader = self.members.get(self.leader)
        if (
            leader is not None
            and leader.herder.wake_at_ms is not None
            and self.now_ms >= leader.herder.wake_at_ms
        ):
            self._group_moved(leader)

    @property
    def in_round(self) -> bool:
        return any(m.joining for m in self.members.values())

    def apply(self, op: tuple[object, ...]) -> None:
        """One step of a replay: ``("read", member, count | None)``, ``("config", member)``,
        ``("change", {connector: tasks})``, ``("tick", ms)``, ``("round", leader)`` or ``("round", leader,
        members)`` (a new membership; ignored while a round is in progress or when the leader is not among
        the members) or ``("complete", member)``."""
        kind = op[0]
        if kind == "read":
            self.read(str(op[1]), op[2] if isinstance(op[2], int) else None)
        elif kind == "config":
            self.read_config(str(op[1]))
        elif kind == "change":
            assert isinstance(op[1], Mapping)
            self.set_connectors(op[1])
        elif kind == "tick":
            assert isinstance(op[1], int)
            self.advance(op[1])
        elif kind == "round":
            members = [str(m) for m in op[2]] if len(op) > 2 and isinstance(op[2], Sequence) else None
            if not self.in_round and (members is None or str(op[1]) in members):
                self.begin_round(str(op[1]), members)
        elif kind == "complete":
            self.complete(str(op[1]))
        elif kind == "leave":
            self.begin_leave(str(op[1]))
        elif kind == "depart":
            self.depart(str(op[1]))
        elif kind == "prepare":
            self.prepare(str(op[1]))
        elif kind == "stopped":
            task = op[2] if len(op) > 2 and isinstance(op[2], TaskId) else None
            self.finish_stops(str(op[1]), None if task is None else {task})
        else:
            raise ValueError(f"unknown step {op!r}")

    # -- rounds ------------------------------------------------------------------------------------

    def begin_round(self, leader: str, members: Sequence[str] | None = None) -> None:
        """A classic round that reconciles, led by ``leader``: every member prepares and the leader's assign
        callback runs; each member completes it later (:meth:`complete`)."""
        if members is not None:
            for gone in set(self.members) - set(members):
                self.remove(gone)
            for new in set(members) - set(self.members):
                self.members[new] = ModelMember(new, self._herder(new))
        self.generation += 1
        self.leader = leader
        for m in self.members.values():
            self.execute(m, m.herder.on_rejoin_preparing(member_lost=False, selected_protocol=SESSIONED))
            m.joining = True
        metadata = {mid: (protocol.V2, self.worker_state(m)) for mid, m in sorted(self.members.items())}
        self.members[leader].herder.on_leader_assigned(LeaderOutcome(reconcile=True, members=metadata))

    def complete(self, member_id: str) -> None:
        """``member_id`` receives its SyncGroup answer: the round completes for it."""
        m = self.members[member_id]
        if not m.joining:
            return
        m.joining = False
        self.steps += 1
        keep = ConnectAssignment(
            protocol.V2,
            protocol.NO_ERROR,
            self.leader,
            self.members[self.leader].url,
            max(x.herder.snapshot.offset for x in self.members.values()),
            (),
            (),
            reconcile=True,
        )
        self.execute(m, m.herder.on_rebalanced(self.generation, member_id, SESSIONED, keep))
        self.check_exclusive(f"after {member_id} completed generation {self.generation}")
        # The shell reads the group records to their end before reconciling after a round.
        self._fold(m)
        self._group_moved(m)

    def complete_all(self) -> None:
        for mid in sorted(self.members):
            self.complete(mid)

    def begin_leave(self, member_id: str) -> None:
        """``member_id`` starts a graceful hand-over; the round it asks for follows at once (if no round is
        in progress and it is not the last member)."""
        m = self.members[member_id]
        if self.in_round or m.herder.leaving or len(self.members) < 2:
            return
        self.steps += 1
        self.execute(m, m.herder.begin_leave())
        if m.announced:
            self.begin_round(self.leader if self.leader in self.members else member_id)

    def depart(self, member_id: str) -> None:
        """A member that is ready to leave sends LeaveGroup: a round follows without it."""
        m = self.members[member_id]
        if self.in_round or not m.ready_to_leave:
            return
        assert not m.running(), f"{member_id} leaves while running {sorted(map(str, m.running()))}"
        rest = sorted(set(self.members) - {member_id})
        if not rest:
            self.remove(member_id)  # the last member: the group is empty, no round follows
            return
        self.begin_round(self.leader if self.leader in rest else rest[0], rest)

    def prepare(self, member_id: str) -> None:
        """``member_id``'s data plane finishes every preparation under way and says so."""
        m = self.members.get(member_id)
        if m is None:
            return
        for task, attempt in sorted(m.preparing.items()):
            if m.preparing.get(task) != attempt:
                continue  # discarded by an earlier answer's reconciliation
            del m.preparing[task]
            m.prepared[task] = attempt
            self.steps += 1
            self.execute(m, m.herder.on_task_prepared(task, attempt, m.state))
            self.check_exclusive(f"after {member_id} prepared {task}")

    def finish_stops(self, member_id: str, tasks: set[TaskId] | None = None) -> None:
        """``member_id``'s background stops of ``tasks`` (None: all of them) finish and are reported."""
        m = self.members.get(member_id)
        if m is None:
            return
        done = m.stopping if tasks is None else m.stopping & tasks
        if not done:
            return
        done = set(done)
        m.stopping -= done
        m.tasks -= done
        self.steps += 1
        self.execute(m, m.herder.on_tasks_stopped(done, m.state))
        self.check_exclusive(f"after {member_id} finished stopping {sorted(map(str, done))}")

    def remove(self, member_id: str) -> None:
        """``member_id``'s process stops (everything it ran stops with it) and it leaves the group."""
        m = self.members.pop(member_id)
        m.connectors.clear()
        m.tasks.clear()
        m.preparing.clear()
        m.prepared.clear()
        m.stopping.clear()

    def _classic_round(self, leader: str) -> None:
        """One classic cooperative round on a fresh group, recorded as ``leader_memory`` records it."""
        self.generation += 1
        self.leader = leader
        snap = self.config.snapshot
        metadata = {
            mid: (protocol.V2, WorkerState(m.url, snap.offset, worker_id=mid))
            for mid, m in sorted(self.members.items())
        }
        result, state = leader_assign(
            CooperativeState(previous_version=protocol.V2),
            selected_protocol=SESSIONED,
            leader_id=leader,
            members={mid: s for mid, (_v, s) in metadata.items()},
            leader_config_offset=snap.offset,
            connectors=snap.task_counts(),
            now_ms=self.now_ms,
            max_delay_ms=self.settings.max_delay_ms,
            generation=self.generation,
        )
        lm = self.members[leader]
        records = leader_memory.round_records(
            GROUP,
            generation=self.generation,
            protocol_name=SESSIONED,
            members=metadata,
            assignments=result,
            state=state,
            configuration=self.settings.configuration,
            previous=None,
        )
        self.append(lm, WriteGroupRecords(tuple(records)))
        for mid, m in sorted(self.members.items()):
            actions = m.herder.on_rebalanced(self.generation, mid, SESSIONED, result[mid])
            self.execute(m, actions)
            running = gr.Assigned(frozenset(m.herder.owned_connectors), frozenset(m.herder.owned_tasks))
            record = leader_memory.current_assignment_record(
                GROUP, mid, self.generation, result[mid], running
            )
            self.append(m, WriteGroupRecords((record,)))
        assert not any(m.herder.group.reconciling for m in self.members.values())
        self.check_exclusive("after the classic round")

    # -- actions -----------------------------------------------------------------------------------

    def execute(self, m: ModelMember, actions: Sequence[Action]) -> None:
        """Carry out ``actions`` as the shell does; background stops finish right after them unless the
        model holds them (``background_stops``)."""
        self._execute(m, actions)
        if not self.background_stops and m.stopping and m.member_id in self.members:
            self.finish_stops(m.member_id)

    def _execute(self, m: ModelMember, actions: Sequence[Action]) -> None:
        for action in actions:
            if isinstance(action, StartConnector):
                m.connectors.add(action.name)
                self.starts += 1
            elif isinstance(action, StopConnector):
                m.connectors.discard(action.name)
                self.stops += 1
            elif isinstance(action, StartTask):
                m.tasks.add(action.task)
                self.starts += 1
            elif isinstance(action, PrepareTask):
                if action.task in m.tasks:
                    raise LearnerBroken(f"{m.member_id} prepares {action.task}, which it runs")
                m.preparing[action.task] = action.attempt
                self.learners_seen += 1
            elif isinstance(action, DiscardPreparedTask):
                for book in (m.preparing, m.prepared):
                    if book.get(action.task) == action.attempt:
                        del book[action.task]
            elif isinstance(action, ActivatePreparedTask):
                if m.prepared.get(action.task) != action.attempt:
                    raise LearnerBroken(f"{m.member_id} activates {action.task} without its preparation")
                del m.prepared[action.task]
                m.tasks.add(action.task)
                self.starts += 1
                m.activations += 1
                self.activations += 1
            elif isinstance(action, StopTask):
                self.stops += 1
                if action.acknowledge:
                    m.stopping.add(action.task)  # it runs until the stop finishes (finish_stops)
                else:
                    m.tasks.discard(action.task)
            elif isinstance(action, WriteGroupRecords):
                self.append(m, action)
            elif isinstance(action, RequestRejoin):
                self.rejoins.append(Rejoin(m.member_id, action.reason, m.herder.rebalancing, self.steps))
                if action.reason.startswith("graceful hand-over"):
                    m.announced = True
            elif isinstance(action, ReadyToLeave):
                m.ready_to_leave = True

    # -- checks ------------------------------------------------------------------------------------

    def owners(self) -> dict[Item, list[str]]:
        out: dict[Item, list[str]] = {}
        for mid, m in sorted(self.members.items()):
            for item in m.running():
                out.setdefault(item, []).append(mid)
        return out

    def check_exclusive(self, context: str = "") -> None:
        twice = {str(item): mids for item, mids in self.owners().items() if len(mids) > 1}
        if twice:
            raise DoubleRun(f"{context}: running on two members: {twice}")
        self.check_learners(context)

    def check_learners(self, context: str = "") -> None:
        """Learners never run their task, and every target written so far keeps them apart from owners."""
        for m in self.members.values():
            learning = (set(m.preparing) | set(m.prepared)) & m.tasks
            if learning:
                raise LearnerBroken(f"{context}: {m.member_id} runs {sorted(map(str, learning))} it learns")
        folded = gr.GroupRecords()
        for offset, (key, value, ts) in enumerate(self.log[self._checked :], start=self._checked):
            folded = gr.apply(folded, key, value, offset=offset, timestamp_ms=ts)
            target = folded.groups[GROUP].target if GROUP in folded.groups else None
            if target is not None and gr.decode_key(key) == gr.TargetAssignmentKey(GROUP):
                self._check_target(target, f"{context}: target of epoch {target.assignment_epoch}")
        self._checked = len(self.log)

    def _check_nothing_dropped(self, leader: ModelMember, action: WriteGroupRecords) -> None:
        """A new target keeps in some share every configured task whose owner (in the target before it)
        lives and stays: warm-up or not, no task is lost while its old owner lives."""
        before = leader.state.target if leader.state is not None else None
        after = next((v for _k, v in action.records if isinstance(v, gr.TargetAssignmentValue)), None)
        if before is None or after is None:
            return
        # A leaving owner's work may have nowhere to go (the last member leaving): it does not count.
        live = {m for m, (_v, state) in leader.herder.live_members.items() if not state.leaving}
        snap = leader.herder.snapshot
        configured = {TaskId(c, i) for c, n in snap.task_counts().items() for i in range(n)}
        owned = {t for m in before.members if m.member_id in live for t in m.assigned.tasks} & configured
        kept = {t for m in after.members for t in m.assigned.tasks}
        if owned - kept:
            lost = sorted(map(str, owned - kept))
            raise LearnerBroken(f"target of epoch {after.assignment_epoch} drops {lost}, whose owners live")

    def _check_target(self, target: gr.TargetAssignmentValue, context: str) -> None:
        owners: dict[TaskId, list[str]] = {}
        for member in target.members:
            for task in member.assigned.tasks:
                owners.setdefault(task, []).append(member.member_id)
        twice = {str(t): o for t, o in owners.items() if len(o) > 1}
        if twice:
            raise DoubleRun(f"{context}: in two shares: {twice}")
        # A leaving member's tasks, and a returning member's home work, are learned at once (``handover``):
        # only the others count.
        leaving = {m for m, mem in self.members.items() if mem.herder.leaving}
        for member in target.members:
            # The model's workers are named by worker.id = member id: a home's identity.
            homed = {t for h in target.homes if h.identity == member.member_id for t in h.assigned.tasks}
            capped = [
                x
                for x in member.learners
                if not set(owners.get(x.task, [])) & leaving and x.task not in homed
            ]
            if len(capped) > self.settings.warmup.max_warmup_tasks:
                raise LearnerBroken(f"{context}: {member.member_id} learns {len(capped)} tasks")
            for x in member.learners:
                held_by = owners.get(x.task, [])
                if member.member_id in held_by or len(held_by) != 1:
                    raise LearnerBroken(
                        f"{context}: learner {x.task} of {member.member_id}, owners {held_by}"
                    )

    def expected(self) -> set[Item]:
        snap = self.config.snapshot
        counts = snap.task_counts()
        return {*counts, *(TaskId(c, i) for c, n in counts.items() for i in range(n))}

    def quiet_pass(self) -> bool:
        """Every member reads the config and the group records to their end and reconciles once; True
        when nothing was written, started or stopped."""
        before = (len(self.log), self.starts, self.stops, len(self.members))
        for mid in sorted(self.members):
            self.complete(mid)
            self.read_config(mid)
            self.read(mid)
        if self.prepare_in_settle:
            for mid in sorted(self.members):
                self.prepare(mid)
        for mid in sorted(self.members):
            self.finish_stops(mid)
        for mid in sorted(self.members):
            if self.members[mid].ready_to_leave:
                self.depart(mid)
        return (len(self.log), self.starts, self.stops, len(self.members)) == before

    def settle(self, max_passes: int = 40) -> int:
        """Read to the end until quiet, honouring the leader's wake-up; the number of passes it took."""
        for n in range(1, max_passes + 1):
            if self.quiet_pass():
                wake = self.members[self.leader].herder.wake_at_ms if self.leader in self.members else None
                if wake is None:
                    return n
                self.now_ms = max(self.now_ms, wake)
        raise AssertionError(f"the group did not settle within {max_passes} passes")

    def assert_converged(self) -> None:
        """Every configured connector and task runs exactly once, with the config committed last."""
        owners = self.owners()
        expected = self.expected()
        missing, extra = expected - set(owners), set(owners) - expected
        assert not missing and not extra, (
            f"missing {sorted(map(str, missing))}, extra {sorted(map(str, extra))}"
        )
        assert all(len(mids) == 1 for mids in owners.values())
        snap = self.config.snapshot
        for m in self.members.values():
            for task in m.tasks:
                assert dict(m.herder.running_tasks[task]) == dict(
                    snap.task_configs(task.connector)[task.task]
                )
            for name in m.connectors:
                assert dict(m.herder.running_connectors[name]) == dict(snap.connector_config(name) or {})
        # Every member's record lists exactly what it runs, at the target's epoch.
        leader_state = self.members[self.leader].state
        assert leader_state is not None and leader_state.target is not None
        for mid, m in self.members.items():
            current = leader_state.current.get(mid)
            assert current is not None, f"{mid} has no current-assignment record"
            assert current.member_epoch == leader_state.target.assignment_epoch
            assert current.assigned == gr.Assigned(frozenset(m.connectors), frozenset(m.tasks))
