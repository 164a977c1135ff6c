"""The herder under ``group.protocol=connect``: the coordinating leader's step, the member's reconciliation.

Why apart from ``herder``: under classic rounds the herder moves this worker from what it runs to what each
rebalance gives it; under reconciliation no round moves work, and two further steps run whenever the
group records move on: the leader's (``coordinator.coordinate``: bump epochs, install targets, fence)
and every member's (``reconciler.reconcile``: revoke what its target share no longer holds, claim what
it does, acknowledge in its own record), with warm-up learners (``learner``) beside them. Those steps
and their state's bookkeeping are here, as the part of :class:`~kconnect.runtime.group.herder.Herder`
that it inherits; the decisions themselves stay in ``coordinator`` and ``reconciler``.

Pure, like the herder: the records and a clock in, actions out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from kconnect.runtime.group import coordinator, group_records, learner, protocol, reconciler
from kconnect.runtime.group.coordinator import CoordinatorInput
from kconnect.runtime.group.group_records import Assigned, CurrentMemberAssignmentValue, GroupState
from kconnect.runtime.group.herder_actions import Action, ReadyToLeave, ReportUnassigned, WriteGroupRecords
from kconnect.runtime.group.herder_inputs import CoordinatorSettings, GroupView, with_overrides
from kconnect.runtime.group.protocol import WorkerState
from kconnect.runtime.group.static_assignor import STATIC_UNASSIGNED_REASON
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, Properties

__all__ = ["Reconciliation"]


class Reconciliation:
    """The reconciliation steps of :class:`~kconnect.runtime.group.herder.Herder`, which inherits them.

    The attributes below are the herder's fields these steps read and write (declared, and documented,
    on ``Herder``); the methods that raise are the herder's own, used here.
    """

    group: GroupView
    snapshot: ClusterConfigSnapshot
    rebalancing: bool
    leaving: bool
    owned_connectors: set[str]
    owned_tasks: set[TaskId]
    stopping: set[TaskId]
    coordinator_settings: CoordinatorSettings
    live_members: Mapping[str, tuple[int, WorkerState]]
    written: CurrentMemberAssignmentValue | None
    acknowledged: bool
    member_epoch: int
    pending: Assigned
    awaiting_epoch: int
    awaiting_since_ms: int
    wake_at_ms: int | None
    last_decision: coordinator.Decision | None
    prior_generation: int
    coordinated_generation: int
    learns: bool
    learning: learner.Learning

    @property
    def is_leader(self) -> bool:
        raise NotImplementedError

    def _release(
        self, connectors: set[str], tasks: set[TaskId], *, acknowledge: bool = False
    ) -> list[Action]:
        raise NotImplementedError

    def _converge(self) -> list[Action]:
        raise NotImplementedError

    def _task_configs(self, tasks: set[TaskId]) -> dict[TaskId, Properties]:
        raise NotImplementedError

    def on_group_records(self, group: GroupState | None, now_ms: int) -> list[Action]:
        """The group records moved on (or the wake-up time passed): as the coordinating leader, bump
        epochs and install targets; as a member, reconcile toward this worker's target share.

        Only while the generation reconciles; under classic rounds the records are a history only.
        """
        if not self.group.reconciling or self.rebalancing:
            return []
        actions: list[Action] = []
        if self.is_leader:
            actions += self._coordinate(group, now_ms)
        else:
            self.wake_at_ms = None  # only the coordinating leader has deadlines to keep
        actions += self._reconcile(group)
        return actions

    def on_task_prepared(self, task: TaskId, attempt: int, group: GroupState | None) -> list[Action]:
        """Preparation ``attempt`` of a learned task finished (``PrepareTask``): say the learner is ready in
        this member's record, from ``group`` (the records as read now), so the coordinator may promote it.
        A late answer for a preparation discarded since changes nothing."""
        self.learning, ready = learner.on_prepared(self.learning, task, attempt)
        if not ready or not self.group.reconciling or self.rebalancing:
            return []  # after a round, the next on_group_records reports it
        return self._reconcile(group)

    def on_task_preparation_failed(self, task: TaskId, attempt: int) -> list[Action]:
        """Preparation ``attempt`` of a learned task failed: release it. The learner stays unready, so the
        coordinator drops it at its deadline and the task moves the plain way."""
        self.learning, discarded = learner.on_preparation_failed(self.learning, task, attempt)
        return [*discarded]

    def on_tasks_stopped(self, tasks: Iterable[TaskId], group: GroupState | None) -> list[Action]:
        """Tasks released in the background (``StopTask.acknowledge``) have stopped: say so in this member's
        record at once, so that their new owners may start them while slower ones still stop; the last
        one lets the member acknowledge its target and start what it claimed. ``group``: the records as
        read now. Tasks not stopping here (already reported) change nothing."""
        done = self.stopping & set(tasks)
        if not done:
            return []
        self.stopping -= done
        if self.rebalancing:
            return []  # the round's assignment (and under reconciliation its records) says what follows
        if not self.group.reconciling:
            return self._converge()  # a task given back meanwhile starts now
        return self._reconcile(group)

    def on_group_write_failed(self) -> None:
        """A group-records write failed: say it again at the next step (and let the leader recompute)."""
        self.written = None
        self.awaiting_epoch = -1

    def _coordinate(self, group: GroupState | None, now_ms: int) -> list[Action]:
        settings = self.coordinator_settings
        held_epoch = group.epoch if group is not None and group.epoch is not None else -1
        waited_ms = now_ms - self.awaiting_since_ms
        if self.awaiting_epoch > held_epoch and waited_ms < settings.rebalance_timeout_ms:
            return []  # its own last records are not read back yet: computing now would bump twice
        self.awaiting_epoch = -1
        if not self.live_members:
            return []
        behind = max(
            coordinator.target_config_offset(group.target if group is not None else None),
            max((state.config_offset for _v, state in self.live_members.values()), default=-1),
        )
        if self.snapshot.offset < behind:
            # A leader behind the group's config (a new one, say) would compute from older work and undo
            # the last target. Its config log reads on by itself; the config it reads brings it back here.
            return []
        inp = CoordinatorInput(
            group_id=settings.group_id,
            generation=self.group.generation,
            protocol=self.group.protocol or protocol.SESSIONED,
            leader_id=self.group.member_id,
            leader_url=self.group.leader_url,
            members=with_overrides(self.live_members, self.snapshot),
            work=self.snapshot.task_counts(),
            config_offset=self.snapshot.offset,
            now_ms=now_ms,
            max_delay_ms=settings.max_delay_ms,
            rebalance_timeout_ms=settings.rebalance_timeout_ms,
            configuration=settings.configuration,
            warmup=settings.warmup,
            fresh=self.prior_generation < 0 and self.coordinated_generation != self.group.generation,
        )
        decision = coordinator.coordinate(group, inp)
        self.last_decision = decision
        self.wake_at_ms = decision.wake_at_ms
        actions: list[Action] = []
        if decision.records:
            epoch = decision.group_epoch if decision.bumped else -1
            actions.append(WriteGroupRecords(decision.records, epoch))
        if decision.bumped:
            self.coordinated_generation = self.group.generation
            self.awaiting_epoch, self.awaiting_since_ms = decision.group_epoch, now_ms
            if decision.unassigned_connectors or decision.unassigned_tasks:
                actions.append(
                    ReportUnassigned(
                        decision.unassigned_connectors,
                        decision.unassigned_tasks,
                        STATIC_UNASSIGNED_REASON,
                        self.group.generation,
                    )
                )
        return actions

    def _reconcile(self, group: GroupState | None) -> list[Action]:
        mine = group.current.get(self.group.member_id) if group is not None else None
        if mine is not None and mine == self.written:
            self.acknowledged = True
        actions: list[Action] = []
        reporting: frozenset[group_records.Learner] = frozenset()
        if self.learns and not self.leaving:
            target = group.target if group is not None else None
            asked = learner.targeted(target, self.group.member_id)
            share = (coordinator.target_share(target, self.group.member_id) or Assigned()).tasks
            configs = self._task_configs({x.task for x in asked} | set(share))
            self.learning, prepared = learner.on_target(self.learning, asked, share, configs)
            actions += prepared
            reporting = learner.reported(self.learning, asked)

        def decide() -> reconciler.Step:
            """The reconciler's step from what this member holds and is still stopping right now."""
            held = Assigned(frozenset(self.owned_connectors), frozenset(self.owned_tasks))
            return reconciler.reconcile(
                group,
                self.group.member_id,
                held,
                self.written,
                acknowledged=self.acknowledged,
                learners=reporting,
                stopping=frozenset(self.stopping),
            )

        step = decide()
        if step.fenced:
            # FENCED_MEMBER_EPOCH: stop everything, then start over at epoch 0 from the same records.
            actions += self._release(set(self.owned_connectors), set(self.owned_tasks))
            self._reset_reconciliation()
            return actions + self._reconcile(group)
        if step.revoke.connectors or step.revoke.tasks:
            # Revoked tasks stop in the background, each reported when done (on_tasks_stopped); the record
            # and the starts are decided again from what is still stopping, so each goes when it is done.
            actions += self._release(set(step.revoke.connectors), set(step.revoke.tasks), acknowledge=True)
            step = decide()
        if step.record is not None:
            self.written = step.record
            gid = self.coordinator_settings.group_id
            key = group_records.CurrentMemberAssignmentKey(gid, self.group.member_id)
            actions.append(WriteGroupRecords(((key, step.record),)))
        if step.start.connectors or step.start.tasks:
            self.owned_connectors |= step.start.connectors
            self.owned_tasks |= step.start.tasks
            actions += self._converge()
        if step.epoch >= 0:
            self.member_epoch = step.epoch
        self.pending = step.pending
        released = mine is not None and not mine.assigned.connectors and not mine.assigned.tasks
        holds = self.owned_connectors or self.owned_tasks or self.stopping
        if self.leaving and released and not holds:
            actions.append(ReadyToLeave())
        return actions

    def _reset_reconciliation(self) -> None:
        self.written = None
        self.acknowledged = False
        self.member_epoch = -1
        self.pending = Assigned()
