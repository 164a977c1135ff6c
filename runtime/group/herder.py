"""The herder: the one state machine that decides what this worker runs.

It follows the sans-I/O style of h11: the worker shell feeds it events (a rebalance completed, the
config topic moved on, the group is about to be rejoined, a connector produced task configs) and
carries out the actions it returns (start or stop a connector or task, write a status, publish task
configs, rejoin the group). It never touches a socket, a thread or a clock of its own, so a whole
sequence of rebalances can be replayed in a unit test.

Where a rebalance decision is made: the assignors (``assignor``) decide who owns what; the herder
decides only how this worker moves from what it runs to what it owns.

Operations (Apache Kafka Connect's pause, resume, stop and restart) arrive the way they do in Java: as
``target-state-<name>`` and ``restart-connector-<name>`` records in the config topic, which every worker
reads; each acts only on the connectors and tasks it owns. A target state change becomes a transition of
what runs here; a restart request becomes stop, RESTARTING, start, once per request (the offset it was
read at is remembered), with :func:`restart_plan` deciding what ``onlyFailed``/``includeTasks`` select.

Beside it: the actions it returns are ``herder_actions``', what the shell hands it besides events (a round's
leader outcome, the coordinator's settings, the group as last joined) ``herder_inputs``', the restart rule
``restart_plan``'s; all are named here too. Under ``group.protocol=connect`` the coordinating leader's
and the member's reconciliation steps are ``herder_reconciliation``'s, which the herder inherits.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from kconnect.runtime.group import coordinator, learner, protocol
from kconnect.runtime.group.group_records import Assigned, CurrentMemberAssignmentValue
from kconnect.runtime.group.herder_actions import (
    AbandonConnector,
    Action,
    ActivatePreparedTask,
    CatchUpConfig,
    DiscardPreparedTask,
    PrepareTask,
    PublishTaskConfigs,
    ReadyToLeave,
    ReportConnector,
    ReportRestarting,
    ReportUnassigned,
    RequestRejoin,
    RequestTaskConfigs,
    ResetActiveTopics,
    StartConnector,
    StartTask,
    StopConnector,
    StopTask,
    TransitionConnector,
    TransitionTask,
    WriteGroupRecords,
)
from kconnect.runtime.group.herder_inputs import CoordinatorSettings, GroupView, LeaderOutcome, with_overrides
from kconnect.runtime.group.herder_reconciliation import Reconciliation
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.group.restart_plan import RestartPlan, restart_plan
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, Properties, TargetState
from kconnect.runtime.storage.status_log import State, StatusState

__all__ = [
    "LATE_LEAVE_REASON",
    "AbandonConnector",
    "Action",
    "ActivatePreparedTask",
    "CatchUpConfig",
    "CoordinatorSettings",
    "DiscardPreparedTask",
    "GroupView",
    "Herder",
    "LeaderOutcome",
    "PrepareTask",
    "PublishTaskConfigs",
    "ReadyToLeave",
    "ReportConnector",
    "ReportRestarting",
    "ReportUnassigned",
    "RequestRejoin",
    "RequestTaskConfigs",
    "ResetActiveTopics",
    "RestartPlan",
    "StartConnector",
    "StartTask",
    "StopConnector",
    "StopTask",
    "TransitionConnector",
    "TransitionTask",
    "WriteGroupRecords",
    "restart_plan",
    "with_overrides",
]

#: Why a leaving worker under reconciliation asks for another round (:meth:`Herder.join_leaving`).
LATE_LEAVE_REASON = "graceful hand-over: the round began before the worker began leaving"


@dataclass
class Herder(Reconciliation):
    """State of one worker; methods take an event and return the actions it implies."""

    worker_id: str
    snapshot: ClusterConfigSnapshot
    group: GroupView = field(default_factory=GroupView)
    rebalancing: bool = True
    owned_connectors: set[str] = field(default_factory=set)
    owned_tasks: set[TaskId] = field(default_factory=set)
    running_connectors: dict[str, Properties] = field(default_factory=dict)
    running_tasks: dict[TaskId, Properties] = field(default_factory=dict)
    #: Tasks released in the background (``StopTask.acknowledge``) whose stop has not finished: still
    #: listed as held in this member's record, never started here again until ``on_tasks_stopped``.
    stopping: set[TaskId] = field(default_factory=set)
    rebalances_completed: int = 0
    #: Graceful hand-over (kconnect's, beyond Apache Kafka Connect): the worker announced it is leaving.
    leaving: bool = False
    #: Whether the JoinGroup this worker sent last carried the leaving flag (:meth:`join_leaving`).
    leave_announced: bool = False
    #: The target state each running connector and task was last started or transitioned with.
    connector_targets: dict[str, TargetState] = field(default_factory=dict)
    task_targets: dict[TaskId, TargetState] = field(default_factory=dict)
    #: connector -> config-topic offset of the last restart request acted on (or skipped as old).
    restarts_seen: dict[str, int] = field(default_factory=dict)
    #: The latest statuses the shell handed in: what "only failed" restarts are judged against.
    statuses: StatusState = field(default_factory=StatusState)
    #: What this worker decided as the leader of the round now completing (``on_leader_assigned``).
    leader_outcome: LeaderOutcome | None = None
    #: ``group.protocol=connect`` (see ``coordinator`` and ``reconciler``): the coordinator's settings,
    #: the live members of the generation this worker leads, and the member's reconciliation state.
    coordinator_settings: CoordinatorSettings = field(default_factory=CoordinatorSettings)
    live_members: Mapping[str, tuple[int, WorkerState]] = field(default_factory=dict)
    #: The last record this member wrote, and whether its own record has been read back since.
    written: CurrentMemberAssignmentValue | None = None
    acknowledged: bool = False
    #: The target epoch this member last reconciled to (-1: none), and what it still waits for.
    member_epoch: int = -1
    pending: Assigned = field(default_factory=Assigned)
    #: The leader wrote this group epoch and waits to read it back before coordinating again.
    awaiting_epoch: int = -1
    awaiting_since_ms: int = 0
    #: When the coordinating leader must look again (a delay or revocation deadline); None: no need.
    wake_at_ms: int | None = None
    #: The coordinator's last step as this leader took it (fenced members, verdicts), for inspection;
    #: ``GET /group`` and the metrics read the same from the records (``group_view.reconciliation``).
    last_decision: coordinator.Decision | None = None
    #: The generation completed before the current one (-1: the current one is this process's first),
    #: and the generation this worker last installed a target in as the coordinating leader.
    prior_generation: int = -1
    coordinated_generation: int = -1
    #: The instance of each connector started here whose answers count (``StartConnector.attempt``); an
    #: instance stopped, replaced or abandoned is not here, so its late answers change nothing.
    connector_attempts: dict[str, int] = field(default_factory=dict)
    last_attempt: int = 0
    #: Warm-up hand-over (issue 25): this worker honours the learner actions (PrepareTask,
    #: ActivatePreparedTask, DiscardPreparedTask) and says so in its metadata (``WorkerState.learns``).
    #: Off, it ignores any learner a target asks of it, and every task it gets starts cold, as before.
    learns: bool = False
    #: The tasks it learns (``learner``): their preparations, ready or not.
    learning: learner.Learning = field(default_factory=learner.Learning)

    def __post_init__(self) -> None:
        self._mark_restarts_seen(self.snapshot)

    # -- queries ---------------------------------------------------------------------------------------

    @property
    def is_leader(self) -> bool:
        """This worker leads a settled group: the only one that may write the config topic now."""
        return self.led_last_generation and not self.rebalancing

    @property
    def led_last_generation(self) -> bool:
        """This worker was the leader of the last generation it completed (a rebalance may be under way)."""
        return self.group.known and self.group.leader_id == self.group.member_id

    @property
    def cooperative(self) -> bool:
        """The group's protocol is incremental (KIP-415): work is kept across rebalances unless revoked."""
        return self.group.protocol is not None and protocol.version_for_protocol(self.group.protocol) >= 1

    def current_allocation(self) -> ConnectAssignment | None:
        """The assignment this worker reports when it rejoins (cooperative protocols only)."""
        if not self.group.known:
            return None
        return ConnectAssignment(
            version=protocol.version_for_protocol(self.group.protocol or protocol.DEFAULT),
            error=protocol.NO_ERROR,
            leader=self.group.leader_id,
            leader_url=self.group.leader_url,
            config_offset=self.group.config_offset,
            connectors=tuple(sorted(self.owned_connectors)),
            tasks=tuple(sorted(self.owned_tasks)),
        )

    # -- events ----------------------------------------------------------------------------------------

    def on_startup_config(self, snapshot: ClusterConfigSnapshot) -> None:
        """The config topic as read before joining. Restart requests in it are history, not orders:
        Java's config store hands only requests read after start-up to the herder."""
        self.snapshot = snapshot
        self._mark_restarts_seen(snapshot)

    def on_config_read(self, snapshot: ClusterConfigSnapshot) -> list[Action]:
        """The shell read the config topic to its end to carry out :class:`CatchUpConfig`.

        The snapshot is taken as it is, without the comparison ``on_config`` makes: the catch-up happens
        inside a rebalance (the assignment that follows applies it) or before a rejoin.
        """
        self.snapshot = snapshot
        return []

    def on_assignment_received(self, assignment: ConnectAssignment, config_offset_read: int) -> list[Action]:
        """A rebalance completed; before it is applied: the leader may have assigned from a newer config
        than this worker has read (``config_offset_read``), and the assignment must be applied on that one."""
        if assignment.error == protocol.NO_ERROR and assignment.config_offset > config_offset_read:
            return [CatchUpConfig(assignment.config_offset)]
        return []

    def on_leader_assigned(self, outcome: LeaderOutcome) -> None:
        """This worker, as leader, computed a round: remember what it implies until the round completes."""
        self.leader_outcome = outcome

    def on_rejoin_preparing(
        self, member_lost: bool, selected_protocol: ProtocolName | None, *, dropped: bool = False
    ) -> list[Action]:
        """Before (re)joining: eager workers release everything; so does a member that lost touch, and a
        leaving member that is no longer in the group.

        ``member_lost``: no coordinator was known for longer than heartbeat.interval.ms
        (``Membership.isolated``, Java's KAFKA-9184 rule), so the work may be given to others, and keeping
        it would break the rule that a task stops before another worker starts it. A cooperative member
        that a coordinator dropped is not lost in this sense: it keeps its work and rejoins reporting it,
        as Java's ``WorkerCoordinator`` does.

        ``dropped``: the member lost its generation (the coordinator answered "unknown member id" or
        "illegal generation", or the member left on its own poll timeout). A *leaving* member releases
        everything then: the leader hands what a departed leaving member's share still held to the others
        at once (``coordinator.departed_leaving``), not after ``scheduled.rebalance.max.delay.ms`` as a
        crashed member's, so a leaving member out of the group must not go on running any of it.
        """
        self.rebalancing = True
        eager = selected_protocol is None or protocol.version_for_protocol(selected_protocol) == 0
        gone_leaving = self.leaving and dropped and self.group.known
        if (eager and self.group.known) or member_lost or gone_leaving:
            return self._release(set(self.owned_connectors), set(self.owned_tasks))
        return []

    def on_rebalanced(
        self,
        generation: int,
        member_id: str,
        selected_protocol: ProtocolName,
        assignment: ConnectAssignment,
        statuses: StatusState | None = None,
    ) -> list[Action]:
        """A rebalance completed with ``assignment``: release what it revokes, start what it gives, and
        decide whether another rebalance must follow (revocations, a downgrade, a scheduled delay)."""
        if statuses is not None:
            self.statuses = statuses
        leader_actions = self._leader_outcome_actions(generation)
        if assignment.error != protocol.NO_ERROR:
            # The leader was behind the group's newest config: catch up, then try again.
            self.rebalancing = True
            return [
                CatchUpConfig(assignment.config_offset),
                RequestRejoin("config mismatch"),
                *leader_actions,
            ]
        return self._apply_assignment(generation, member_id, selected_protocol, assignment) + leader_actions

    def _leader_outcome_actions(self, generation: int) -> list[Action]:
        """What the round this worker led (if it did) asks of it now that the round completed."""
        outcome, self.leader_outcome = self.leader_outcome, None
        if outcome is None:
            self.live_members = {}
            return []
        self.live_members = dict(outcome.members) if outcome.reconcile else {}
        actions: list[Action] = []
        if outcome.unassigned_connectors or outcome.unassigned_tasks:
            actions.append(
                ReportUnassigned(
                    outcome.unassigned_connectors, outcome.unassigned_tasks, outcome.reason, generation
                )
            )
        if outcome.downgrade_round:
            # After KIP-415's empty downgrade round the leader itself asks for the real eager round.
            actions.append(RequestRejoin("leader's downgrade round: the eager round follows"))
        return actions

    def _apply_assignment(
        self, generation: int, member_id: str, selected_protocol: ProtocolName, assignment: ConnectAssignment
    ) -> list[Action]:
        actions: list[Action] = []
        selected = protocol.parse_protocol_name(selected_protocol)
        version = selected.version
        # KIP-415's downgrade: the first eager generation after a cooperative one is the leader's empty
        # round; a second rebalance must follow for the real eager assignment.
        downgraded = version == 0 and self.group.known and self.cooperative
        if version == 0:
            new_connectors = set(assignment.connectors)
            new_tasks = set(assignment.tasks)
            # Eager: everything was released before joining; anything still held and not reassigned goes.
            actions += self._release(self.owned_connectors - new_connectors, self.owned_tasks - new_tasks)
        else:
            revoked_c = set(assignment.revoked_connectors) & self.owned_connectors
            revoked_t = set(assignment.revoked_tasks) & self.owned_tasks
            actions += self._release(revoked_c, revoked_t)
            new_connectors = (self.owned_connectors - revoked_c) | set(assignment.connectors)
            new_tasks = (self.owned_tasks - revoked_t) | set(assignment.tasks)
        self.owned_connectors = new_connectors
        self.owned_tasks = new_tasks
        self.prior_generation = self.group.generation
        self.group = GroupView(
            generation=generation,
            member_id=member_id,
            protocol=selected,
            leader_id=assignment.leader,
            leader_url=assignment.leader_url,
            config_offset=assignment.config_offset,
            reconciling=assignment.reconcile and version >= 1,
        )
        self.rebalancing = False
        self.rebalances_completed += 1
        if not self.group.reconciling:
            self._reset_reconciliation()
            # Learners exist only under reconciliation: back on classic rounds, nothing is handed over.
            self.learning, discarded = learner.discard_all(self.learning)
            actions += discarded
        if self.leaving and not self.group.reconciling:
            return actions + self._leave_step(version, assignment)
        if self.leaving and not self.leave_announced:
            # It began leaving while this round's JoinGroup was already sent without the flag: the leader
            # kept its work in the target. Say it in one more round.
            return [*actions, RequestRejoin(LATE_LEAVE_REASON)]
        if self.leaving:
            return actions  # the leader's next target gives this worker nothing: see on_group_records
        actions += self._converge()
        actions += self._process_restarts()
        if downgraded:
            actions.append(RequestRejoin("protocol downgraded to eager"))
        elif version >= 1 and (assignment.revoked_connectors or assignment.revoked_tasks):
            actions.append(RequestRejoin("assignment revoked work"))
        elif assignment.delay_ms > 0:
            actions.append(RequestRejoin("scheduled rebalance delay", assignment.delay_ms))
        return actions

    def _leave_step(self, version: int, assignment: ConnectAssignment) -> list[Action]:
        """While leaving, start nothing; go once nothing is held.

        A leader that does not know the flag (an Apache Kafka Connect leader, or the eager protocol)
        revokes nothing: then release everything at once and go, as a plain shutdown would.
        """
        revoked = bool(assignment.revoked_connectors or assignment.revoked_tasks)
        if version >= 1 and revoked:
            # Rejoin once more, reporting nothing held, so the leader hands the work out in that round
            # rather than after this worker is gone.
            return [RequestRejoin("graceful hand-over: released revoked work")]
        if self.owned_connectors or self.owned_tasks:
            return [*self._release(set(self.owned_connectors), set(self.owned_tasks)), ReadyToLeave()]
        return [ReadyToLeave()]

    def on_config(self, snapshot: ClusterConfigSnapshot, statuses: StatusState | None = None) -> list[Action]:
        """The config topic moved on: restart what changed here; rebalance when the work set changed or
        this worker's static assignment override did (it takes effect in a rebalance); follow new target
        states; carry out new restart requests for what runs here."""
        if statuses is not None:
            self.statuses = statuses
        old, self.snapshot = self.snapshot, snapshot
        actions: list[Action] = []
        work_changed = set(old.connectors()) != set(snapshot.connectors()) or any(
            old.task_configs(c) != snapshot.task_configs(c) for c in snapshot.connectors() if old.contains(c)
        )
        # Tasks whose committed configs changed stop now; the rebalance that follows hands them out again.
        # Reconciling, a task keeps its owner: converging restarts it with its new config, and the
        # coordinator's next target moves only what the new task count moves.
        for task in sorted(self.owned_tasks):
            if not snapshot.contains(task.connector) or (
                not self.group.reconciling
                and old.task_configs(task.connector) != snapshot.task_configs(task.connector)
            ):
                actions += self._release(set(), {task})
        for name in sorted(self.owned_connectors):
            if not snapshot.contains(name):
                actions += self._release({name}, set())
        if not self.rebalancing:
            actions += self._converge()
            actions += self._process_restarts()
        if self.group.reconciling and not self.rebalancing:
            # The coordinator (the leader) turns the change into a target; no round.
            return actions
        if work_changed:
            actions.append(RequestRejoin("connectors or task configs changed"))
        if old.static_overrides.get(self.worker_id) != snapshot.static_overrides.get(self.worker_id):
            actions.append(RequestRejoin("static assignment changed"))
        return actions

    def on_restart_task(self, task: TaskId) -> list[Action]:
        """A REST request to restart one task reached its owner: stop, RESTARTING, start again.

        Nothing happens when the task does not run here (any more): the REST layer found the owner
        from the leader's last assignment, which a rebalance may have changed since.
        """
        config = self.running_tasks.pop(task, None)
        if config is None:
            return []
        self.task_targets.pop(task, None)
        return [StopTask(task), ReportRestarting(task.connector, task), *self._converge()]

    def on_restart_connector(self, name: str) -> list[Action]:
        """Restart a connector instance running here (self-healing, ``auto_restart``): stop, RESTARTING,
        start again, as a restart request's connector part does, but without a config-topic record, since
        only its owner decides it. Nothing happens when the connector does not run here (any more)."""
        if self.running_connectors.pop(name, None) is None:
            return []
        self.connector_targets.pop(name, None)
        return [StopConnector(name), ReportRestarting(name), *self._converge()]

    def begin_leave(self) -> list[Action]:
        """Announce a planned departure: rejoin flagged as leaving, so the leader moves the work now.

        Under the eager protocol (or before the first rebalance) there is nothing to hand over
        cooperatively: release everything and go.
        """
        if not self.group.known or not self.cooperative:
            return [*self._release(set(self.owned_connectors), set(self.owned_tasks)), ReadyToLeave()]
        self.leaving = True
        # A leaving worker learns nothing: its preparations go (the coordinator gives it no learners).
        self.learning, discarded = learner.discard_all(self.learning)
        actions: list[Action] = [*discarded]
        if not self.owned_connectors and not self.owned_tasks and not self.stopping:
            return [*actions, ReadyToLeave()]
        return [*actions, RequestRejoin("graceful hand-over")]

    def join_leaving(self) -> bool:
        """The leaving flag for the JoinGroup being sent, remembered.

        Under reconciliation only the leader's target moves a leaving worker's work, and the leader learns
        of the departure from JoinGroup metadata alone; a round joined before the worker began leaving
        must therefore be followed by one that says so (see :meth:`on_rebalanced`).
        """
        self.leave_announced = self.leaving
        return self.leaving

    def on_task_configs(
        self, connector: str, configs: Sequence[Mapping[str, str]], attempt: int | None = None
    ) -> list[Action]:
        """A connector running here computed its task configs; publish them only when they differ.

        ``attempt`` names the instance that computed them: one stopped or abandoned since is ignored.
        """
        if connector not in self.running_connectors or not self.snapshot.contains(connector):
            return []
        if attempt is not None and self.connector_attempts.get(connector) != attempt:
            return []
        if list(self.snapshot.task_configs(connector)) == [dict(c) for c in configs]:
            return []
        return [PublishTaskConfigs(connector, tuple(dict(c) for c in configs))]

    # -- connector instances' answers (their calls run on their own threads) -----------------------

    def on_connector_call_done(
        self, name: str, attempt: int, method: str, target_state: TargetState, trace: str | None = None
    ) -> list[Action]:
        """A connector instance's ``start`` or ``stop`` (a start-up, or a transition to ``target_state``)
        returned on its thread, or raised (``trace``): report what it came to; a start that returned asks
        for task configs. An answer of an instance no longer current here changes nothing.
        """
        if self.connector_attempts.get(name) != attempt or name not in self.running_connectors:
            return []
        if trace is not None:
            return [ReportConnector(name, State.FAILED, trace)]
        if target_state == TargetState.STARTED:
            actions: list[Action] = [ReportConnector(name, State.RUNNING)]
            if method == "start":
                actions.append(RequestTaskConfigs(name, attempt))
            return actions
        return [ReportConnector(name, State.PAUSED if target_state == TargetState.PAUSED else State.STOPPED)]

    def on_connector_call_timed_out(
        self, name: str, attempt: int, method: str, elapsed_s: float, stack: str = ""
    ) -> list[Action]:
        """A call of a connector instance ran past ``connector.method.timeout.ms``.

        Its thread is abandoned in any case. An instance still current here is FAILED, with a trace naming
        the method and how long it has been stuck, and stays in ``running_connectors`` so that nothing
        starts it again by itself (a hanging start would hang again, and abandon a thread each time): a
        restart request or a new config starts a new instance, as for any FAILED connector. An instance
        already stopped (a ``stop()`` that hangs) needs no status: it was reported when it was released.
        """
        actions: list[Action] = [AbandonConnector(name, attempt)]
        if self.connector_attempts.get(name) != attempt or name not in self.running_connectors:
            return actions
        del self.connector_attempts[name]
        trace = (
            f"{method}() of connector {name} has not returned after {elapsed_s:.1f} s "
            "(connector.method.timeout.ms); its thread is abandoned and whatever it returns is ignored. "
            "Restart the connector to start a new instance."
        )
        if stack:
            trace += "\nWhere it was blocked:\n" + stack
        return [*actions, ReportConnector(name, State.FAILED, trace)]

    # -- internals ---------------------------------------------------------------------------------

    def _release(
        self, connectors: set[str], tasks: set[TaskId], *, acknowledge: bool = False
    ) -> list[Action]:
        """Stop and forget ``connectors`` and ``tasks``. ``acknowledge``: the tasks stop in the background
        and stay in :attr:`stopping` until the shell says they stopped (``on_tasks_stopped``); otherwise
        the shell finishes each stop before it carries out the next action."""
        actions: list[Action] = []
        stopped: set[str] = set()  # the connectors something of which stopped here
        for t in sorted(tasks):
            self.owned_tasks.discard(t)
            self.task_targets.pop(t, None)
            if self.running_tasks.pop(t, None) is not None:
                actions.append(StopTask(t, acknowledge=acknowledge))
                stopped.add(t.connector)
                if acknowledge:
                    self.stopping.add(t)
        for c in sorted(connectors):
            self.owned_connectors.discard(c)
            self.connector_targets.pop(c, None)
            self.connector_attempts.pop(c, None)
            if self.running_connectors.pop(c, None) is not None:
                actions.append(StopConnector(c))
                stopped.add(c)
        # A deleted connector's last piece here stopped: forget its topics (once, after its last stop).
        still = set(self.running_connectors) | {t.connector for t in self.running_tasks}
        actions += [ResetActiveTopics(c) for c in sorted(stopped - still) if not self.snapshot.contains(c)]
        return actions

    def _task_configs(self, tasks: set[TaskId]) -> dict[TaskId, Properties]:
        """The committed configs of ``tasks`` (those the config topic has, consistent)."""
        snap = self.snapshot
        out: dict[TaskId, Properties] = {}
        for task in tasks:
            if not snap.contains(task.connector) or snap.is_inconsistent(task.connector):
                continue
            configs = snap.task_configs(task.connector)
            if 0 <= task.task < len(configs):
                out[task] = configs[task.task]
        return out

    def _mark_restarts_seen(self, snapshot: ClusterConfigSnapshot) -> None:
        for name, pending in snapshot.restart_requests.items():
            self.restarts_seen[name] = max(self.restarts_seen.get(name, -1), pending.offset)

    def _process_restarts(self) -> list[Action]:
        """Act once on each restart request not yet seen, for the parts of it that run here.

        Java stops what restarts, reports it RESTARTING, then starts it again: connector first, then
        its tasks. Only the newest request per connector is kept by the config fold, as in Java, where
        a newer request replaces a pending one.
        """
        actions: list[Action] = []
        for name, pending in sorted(self.snapshot.restart_requests.items()):
            if self.restarts_seen.get(name, -1) >= pending.offset:
                continue
            self.restarts_seen[name] = pending.offset
            plan = restart_plan(pending.request, self.snapshot, self.statuses)
            if plan is None:
                continue
            if plan.connector and name in self.running_connectors:
                del self.running_connectors[name]
                self.connector_targets.pop(name, None)
                self.connector_attempts.pop(name, None)
                actions += [StopConnector(name), ReportRestarting(name)]
            tasks = [t for t in plan.tasks if t in self.running_tasks]
            for task in tasks:
                del self.running_tasks[task]
                self.task_targets.pop(task, None)
                actions.append(StopTask(task))
            actions += [ReportRestarting(name, task) for task in tasks]
        if actions:
            actions += self._converge()
        return actions

    def _converge(self) -> list[Action]:
        """Start what is owned and configured but not running; restart what runs with a stale config."""
        actions: list[Action] = []
        if self.leaving:
            return actions
        snap = self.snapshot
        for name in sorted(self.owned_connectors):
            if not snap.contains(name):
                continue
            config = snap.connector_config(name)
            if config is None:
                continue
            target = snap.target_state(name) or TargetState.STARTED
            running = self.running_connectors.get(name)
            if running is not None and dict(running) != dict(config):
                actions.append(StopConnector(name))
                running = None
            if running is None:
                self.running_connectors[name] = config
                self.connector_targets[name] = target
                self.last_attempt += 1
                self.connector_attempts[name] = self.last_attempt
                actions.append(StartConnector(name, config, target, self.last_attempt))
            elif self.connector_targets.get(name) != target:
                self.connector_targets[name] = target
                actions.append(TransitionConnector(name, target))
        for task in sorted(self.owned_tasks):
            if not snap.contains(task.connector) or snap.is_inconsistent(task.connector):
                continue
            if task in self.stopping:
                continue  # its last run here is still stopping: started once it has (on_tasks_stopped)
            configs = snap.task_configs(task.connector)
            if task.task >= len(configs):
                continue
            tconfig = configs[task.task]
            task_target = snap.target_state(task.connector) or TargetState.STARTED
            running_t = self.running_tasks.get(task)
            if running_t is not None and dict(running_t) != dict(tconfig):
                actions.append(StopTask(task))
                running_t = None
            if running_t is None:
                self.running_tasks[task] = tconfig
                self.task_targets[task] = task_target
                # A task learned here starts from its preparation (a promotion); any other cold.
                self.learning, prepared = learner.on_start(self.learning, task, tconfig, task_target)
                if isinstance(prepared, ActivatePreparedTask):
                    actions.append(prepared)
                    continue
                if prepared is not None:
                    actions.append(prepared)
                actions.append(StartTask(task, tconfig, task_target))
            elif self.task_targets.get(task) != task_target:
                self.task_targets[task] = task_target
                actions.append(TransitionTask(task, task_target))
        return actions
