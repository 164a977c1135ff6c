"""The worker's herder thread and the events it handles (split from :mod:`kconnect.runtime.shell.worker`,
which assembles the parts).
"""

from __future__ import annotations

import queue
import threading
import time
import traceback
from dataclasses import dataclass

from kconnect.runtime import logs
from kconnect.runtime.group import protocol
from kconnect.runtime.group.member import Joined, WorkerMember
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell import session_keys
from kconnect.runtime.shell.actions import ActionDispatch
from kconnect.runtime.shell.auto_restarts import AutoRestarts
from kconnect.runtime.shell.connectors import (
    ConnectorCallDone,
    ConnectorCallTimedOut,
    ConnectorTaskConfigs,
)
from kconnect.runtime.shell.leader import LeaderRound
from kconnect.runtime.shell.stores import StartupError as StartupError  # raised here; the CLI imports it
from kconnect.runtime.shell.tasks import TaskPrepared, TaskReleased
from kconnect.runtime.storage.config_log import TargetState
from kconnect.runtime.storage.kafka_log import KafkaLogError

__all__ = [
    "BEGIN_LEAVE",
    "CONFIG_MOVED",
    "GROUP_MOVED",
    "HerderLoop",
    "ReconfigureRequest",
    "RestartTask",
    "now_ms",
]

CONFIG_MOVED, GROUP_MOVED, BEGIN_LEAVE = object(), object(), object()


@dataclass
class ReconfigureRequest:
    connector: str


@dataclass
class RestartTask:
    """A REST task restart that reached this worker, the task's owner; the herder thread carries it out."""

    task: TaskId


#: How long the herder thread waits, once a background stop has returned while others are still under way,
#: for more of them to return before it releases what has stopped (``_drain_events``).
RELEASE_COALESCE_S = 0.02


def now_ms() -> int:
    # Wall-clock time: the next leader reads a scheduled rebalance from the group records' timestamps.
    return int(time.time() * 1000)


class HerderLoop(ActionDispatch):
    """The herder thread: each tick drains the worker's events into the herder, keeps the group
    membership (rejoins, joins, heartbeats), and carries out what the herder answers.

    Why a class of its own: this is the worker's one loop, the only thread that calls the herder, and
    its order (config before reconcile, catch-up before acting on group records) is the point. It is a
    base of :class:`~kconnect.runtime.shell.worker.Worker`, which assembles the parts declared here.
    """

    worker_id: str
    leader: LeaderRound
    auto_restarts: AutoRestarts
    session_keys: session_keys.KeyRotation
    started: threading.Event
    last_tick: float
    _stopping: threading.Event
    _stopped: threading.Event
    _records_behind: bool

    def _run(self) -> None:
        logs.bind(worker=self.worker_id)
        member = self._require_member()
        while not self._stopping.is_set():
            try:
                self._tick(member)
            except Exception as exc:  # the loop must survive anything a single tick hits
                self.log.error("herder tick failed", error=str(exc), trace=traceback.format_exc())
                time.sleep(0.5)
        self._stopped.set()

    def _tick(self, member: WorkerMember) -> None:
        self.last_tick = time.monotonic()
        self._drain_events()
        if self._rejoin_at is not None and time.monotonic() >= self._rejoin_at:
            self._rejoin_at = None
            member.request_rejoin()
        if member.need_rejoin():
            # Background stops finish first: what the worker reports in JoinGroup must not leave out work
            # that still runs (a round can move it at once).
            released = self.tasks.await_releases()
            if released:
                self._on_tasks_released(released)
            with self._lock:
                # A member a coordinator dropped keeps its work under the cooperative protocols and
                # rejoins reporting it (Java's WorkerCoordinator.onJoinPrepare revokes nothing; the
                # leader's assignor revokes duplicates); one that knew no coordinator for longer than
                # heartbeat.interval.ms releases everything first, as Java's WorkerCoordinator.poll
                # (eager protocols release in any case).
                lost = self.herder.group.known and member.isolated()
                # A generation lost (dropped by the coordinator, or left on the poll timeout): a leaving
                # worker stops everything then, since the leader hands its work out at once.
                dropped = member.generation()[0] < 0
                if not self.herder.rebalancing:
                    self.metrics.rebalance_started_at = time.monotonic()
                actions = self.herder.on_rejoin_preparing(lost, member.last_protocol, dropped=dropped)
            self._execute(actions)
            if self.metrics.rebalance_started_at is None:
                self.metrics.rebalance_started_at = time.monotonic()
            joined = member.ensure_active(timeout_ms=1000)
        else:
            joined = member.poll_joined()
        if joined is not None:
            self._on_joined(joined)
        self._rotate_session_key()
        self._auto_restart()
        member.poll_heartbeat()
        try:
            event = self._events.get(timeout=0.1)
            self._events.put(event)  # handled by the next _drain_events
        except queue.Empty:
            pass

    def _drain_events(self) -> None:
        config_moved = group_moved = False
        reconfigure: set[str] = set()
        prepared: list[TaskPrepared] = []
        released: set[TaskId] = set()
        coalesced = False
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                if released and not coalesced and self.tasks.releasing():
                    # Stops started together end a few ms apart: a moment's wait releases them in one
                    # record rather than one each, which every member would read and claim from in turn.
                    coalesced = True
                    time.sleep(RELEASE_COALESCE_S)
                    continue
                break
            if event is CONFIG_MOVED:
                config_moved = True
            elif event is GROUP_MOVED:
                group_moved = True
            elif isinstance(event, ReconfigureRequest):
                reconfigure.add(event.connector)
            elif event is BEGIN_LEAVE:
                with self._lock:
                    actions = self.herder.begin_leave()
                self.log.info("leaving the group: handing work over first")
                self._execute(actions)
            elif isinstance(event, RestartTask):
                with self._lock:
                    actions = self.herder.on_restart_task(event.task)
                self._execute(actions)
            elif isinstance(event, ConnectorCallDone | ConnectorTaskConfigs | ConnectorCallTimedOut):
                self._on_connector_answer(event)
            elif isinstance(event, TaskPrepared):
                prepared.append(event)
            elif isinstance(event, TaskReleased):
                released.add(event.task)
        if config_moved:
            with self._lock:
                snapshot = self.stores.snapshot()
                fresh = snapshot is not self.herder.snapshot
                actions = self.herder.on_config(snapshot, self.stores.status_state()) if fresh else []
            self._execute(actions)
        if released:
            self._on_tasks_released(released)
        wake = self.herder.wake_at_ms
        if config_moved or group_moved or (wake is not None and now_ms() >= wake):
            self._reconcile()
        for done in prepared:
            self._on_task_prepared(done)
        for name in sorted(reconfigure):
            self.connectors.request_task_configs(name)  # answered as a ConnectorTaskConfigs event

    def _on_connector_answer(
        self, event: ConnectorCallDone | ConnectorTaskConfigs | ConnectorCallTimedOut
    ) -> None:
        """What a connector instance's own thread answered (or the watchdog said of it), to the herder."""
        with self._lock:
            if isinstance(event, ConnectorTaskConfigs):
                actions = self.herder.on_task_configs(event.name, event.configs, event.attempt)
            elif isinstance(event, ConnectorCallTimedOut):
                actions = self.herder.on_connector_call_timed_out(
                    event.name, event.attempt, event.method, event.elapsed_s, event.stack
                )
                if event.method == "start":
                    self.metrics.connector_startup_failures += 1
            else:
                actions = self.herder.on_connector_call_done(
                    event.name, event.attempt, event.method, event.target_state, event.trace
                )
                if event.method == "start" and actions and event.target_state == TargetState.STARTED:
                    if event.trace is None:
                        self.metrics.connector_startup_successes += 1
                    else:
                        self.metrics.connector_startup_failures += 1
        self._execute(actions)

    def _reconcile(self) -> None:
        """``group.protocol=connect``: the herder coordinates (leader) and reconciles from the records."""
        if self._records_behind and not self._catch_up_group_records():
            return
        with self._lock:
            if not self.herder.group.reconciling:
                return
            actions = self.herder.on_group_records(self.stores.group_state(self.config.group_id), now_ms())
        self._execute(actions)

    def _on_tasks_released(self, tasks: set[TaskId]) -> None:
        """Background stops finished: the herder releases those tasks in this member's record (from the
        records read to their end, as a reconcile reads them), so their new owners may start them."""
        if self._records_behind and not self._catch_up_group_records():
            for task in sorted(tasks):
                self._events.put(TaskReleased(task))  # the next tick tries again
            return
        with self._lock:
            actions = self.herder.on_tasks_stopped(tasks, self.stores.group_state(self.config.group_id))
        self.log.info(
            "tasks released", tasks=[str(t) for t in sorted(tasks)], still=len(self.herder.stopping)
        )
        self._execute(actions)

    def _on_task_prepared(self, event: TaskPrepared) -> None:
        """A learner's preparation ended (on its own thread): tell the herder, which says the learner is
        ready in this member's record (from the records read to their end: a ready learner is written into
        the current record, never an older one) or releases a failed preparation."""
        if event.trace is None and self._records_behind and not self._catch_up_group_records():
            self._events.put(event)  # the next tick tries again
            return
        with self._lock:
            if event.trace is None:
                group = self.stores.group_state(self.config.group_id)
                actions = self.herder.on_task_prepared(event.task, event.attempt, group)
            else:
                actions = self.herder.on_task_preparation_failed(event.task, event.attempt)
        self._execute(actions)

    def _on_joined(self, joined: Joined) -> None:
        assignment = joined.assignment
        with self._lock:
            catch_up = self.herder.on_assignment_received(assignment, self.stores.config_offset())
        self._execute(catch_up)
        with self._lock:
            actions = self.herder.on_rebalanced(
                joined.generation, joined.member_id, joined.protocol, assignment, self.stores.status_state()
            )
            group = self.herder.group
        self.metrics.rebalance_completed(assignment.delay_ms, assignment.error == protocol.NO_ERROR)
        logs.bind(generation=joined.generation)
        self.log.info(
            "rebalance completed",
            generation=joined.generation,
            protocol=joined.protocol,
            leader=group.leader_id,
            leader_url=group.leader_url,
            connectors=sorted(assignment.connectors),
            tasks=[str(t) for t in assignment.tasks],
            revoked_connectors=sorted(assignment.revoked_connectors),
            revoked_tasks=[str(t) for t in assignment.revoked_tasks],
            delay_ms=assignment.delay_ms,
            error=assignment.error,
            rebalance_ms=round(self.metrics.last_rebalance_ms, 1),
            rebalances_completed=self.metrics.rebalances_completed,
        )
        self._execute(actions)
        self.leader.write_group_records(joined.generation, joined.member_id, assignment)
        if assignment.reconcile:
            # A leader new to the role resumes from every record the last one wrote, and from the config as
            # read (the next drain hands the herder the newest config first, then reconciles). Should the
            # records not be readable now, the reconcile that this event starts reads them first.
            self._records_behind = True
            self._catch_up_group_records()
            self._events.put(CONFIG_MOVED)
        self._rotate_session_key()
        self.started.set()

    def _auto_restart(self) -> None:
        """Self-healing, on every tick: restart the FAILED connectors and tasks run here whose restart is
        due (``auto_restarts``), through the herder's restart path, as a user's restart of them would."""
        with self._lock:
            connectors, tasks = set(self.herder.running_connectors), set(self.herder.running_tasks)
            snapshot = self.herder.snapshot
        for key in self.auto_restarts.step(connectors, tasks, snapshot, now_ms()):
            with self._lock:
                if isinstance(key, str):
                    actions = self.herder.on_restart_connector(key)
                else:
                    actions = self.herder.on_restart_task(key)
            self.log.info(
                "auto restart",
                entry=str(key),
                attempts=getattr(self.auto_restarts.entry(key), "attempts", None),
            )
            self._execute(actions)

    def _rotate_session_key(self) -> None:
        """KIP-507, on every tick as Java's herder does: a leader writes a new session key when there is
        none or it expired. Not only after a round: under ``group.protocol=connect`` a stable group has
        none, and ``inter.worker.key.ttl.ms`` must still hold."""
        with self._lock:
            leader, group_protocol = self.herder.is_leader, self.herder.group.protocol
        self.session_keys.tick(leader, group_protocol)

    def _catch_up_group_records(self) -> bool:
        """Read the group records to their end before the herder acts on them; True once done.

        A failure (the records topic's leader moving after a broker died, longer than the read waits) must
        not lose the reconcile that should follow a join: the worker would sit with no work until the next
        generation. The read is retried with the next group event, which this queues.
        """
        try:
            self.stores.read_group_records_to_end()
        except KafkaLogError as exc:
            self.log.warning(
                "group records not read to their end; reconciling waits for them", error=str(exc)
            )
            time.sleep(0.5)
            self._events.put(GROUP_MOVED)
            return False
        self._records_behind = False
        return True
