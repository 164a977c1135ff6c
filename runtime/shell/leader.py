"""The leader's round: the assign callback the group member calls on the leader, and the group records.

Why a module of its own: when this worker leads a rebalance, the member hands it every member's metadata
and needs the assignments back before SyncGroup. Around the assignor's pure decision
(``assignor.leader_assign``) sits I/O: catching up with the config topic, rebuilding the assignor's memory
from the group records when this worker did not lead the last generation, and afterwards recording the
round in the group-records topic. What the round implies for this worker itself (rejoin after a downgrade
round, report unassigned static work) goes to the herder as a :class:`LeaderOutcome`.

Also here: what a worker's static assignment (KIP-987's ``static`` protocol) is, since the metadata the
member sends and ``GET /workers/{id}/static-assignment`` both read it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from kconnect.config.worker import ConnectProtocol, GroupProtocol, WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.group import assignor, group_records, leader_memory, protocol
from kconnect.runtime.group.herder import Herder, LeaderOutcome, with_overrides
from kconnect.runtime.group.member import WorkerMember
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.stores import InternalTopics
from kconnect.runtime.shell.view import LeaderView
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot
from kconnect.runtime.storage.kafka_log import KafkaLogError

log = logs.get(__name__)


def static_assignment(
    snapshot: ClusterConfigSnapshot, config: WorkerConfig, own_id: str, worker_id: str
) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """A worker's static connectors and tasks and where they come from: an override written over
    REST wins while it exists; otherwise this worker's own properties (other workers' properties
    are only known from their metadata, which ``GET /workers`` shows)."""
    override = snapshot.static_overrides.get(worker_id)
    if override is not None:
        return override.connectors, override.tasks, "override"
    if worker_id == own_id:
        return tuple(config.static_connectors), tuple(config.static_tasks), "properties"
    return (), (), "properties"


def reconciles(cfg: WorkerConfig) -> bool:
    """Whether this worker offers declarative reconciliation: ``group.protocol=connect`` with a cooperative
    ``connect.protocol`` (eager members stop everything before every round, so they cannot)."""
    return cfg.group_protocol is GroupProtocol.CONNECT and cfg.connect_protocol is not ConnectProtocol.EAGER


def group_configuration(cfg: WorkerConfig) -> list[tuple[str, str]]:
    """The worker settings a round was computed under, recorded with it (the group records show them)."""
    return [
        ("connect.protocol", cfg.connect_protocol),
        ("group.protocol", cfg.group_protocol),
        ("scheduled.rebalance.max.delay.ms", str(cfg.scheduled_rebalance_max_delay_ms)),
        ("session.timeout.ms", str(cfg.session_timeout_ms)),
        ("heartbeat.interval.ms", str(cfg.heartbeat_interval_ms)),
        ("rebalance.timeout.ms", str(cfg.rebalance_timeout_ms)),
    ]


class LeaderRound:
    """The leader's side of a rebalance for one worker, and its memory between rounds.

    ``assign`` runs on the member's thread; the herder and the stores are read under ``lock``.
    ``generation`` gives the generation the member is joining (the round being assigned).
    """

    def __init__(
        self,
        config: WorkerConfig,
        worker_id: str,
        stores: InternalTopics,
        herder: Herder,
        lock: threading.RLock,
        generation: Callable[[], int],
    ) -> None:
        self.config = config
        self.worker_id = worker_id
        self.stores = stores
        self.herder = herder
        self._lock = lock
        self._generation = generation
        self._state = assignor.CooperativeState()  # the leader's memory between rebalances
        #: what the leader's last assignment asks to record; written once the round has completed
        self._pending_records: list[leader_memory.Record] = []
        #: What this worker saw and decided when it last led: ``GET /workers`` answers from it.
        self.leader_view: LeaderView | None = None
        self.log = logs.get("kconnect.worker", worker=worker_id)

    def static_assignment(self, worker_id: str | None = None) -> tuple[tuple[str, ...], tuple[str, ...], str]:
        """:func:`static_assignment` over the config read so far (this worker's if ``worker_id`` is None)."""
        return static_assignment(
            self.stores.snapshot(), self.config, self.worker_id, worker_id or self.worker_id
        )

    def metadata(self, url: str) -> WorkerState:
        """What this worker tells the group when it joins: its URL, config offset, what it holds (the
        cooperative protocols' allocation), whether it is leaving, and its static assignment as its
        properties say (the leader applies overrides from the config topic itself, so an override takes
        effect without this worker rejoining)."""
        static_tasks, malformed = TaskId.parse_valid(self.config.static_tasks)
        for text in malformed:
            log.warning("ignoring a malformed static task id", task=text)
        with self._lock:
            return WorkerState(
                url=url,
                config_offset=self.stores.config_offset(),
                allocation=self.herder.current_allocation(),
                leaving=self.herder.join_leaving(),
                reconciles=reconciles(self.config),
                learns=self.herder.learns,
                worker_id=self.worker_id,
                static_connectors=tuple(self.config.static_connectors),
                static_tasks=static_tasks,
            )

    def assign(
        self, leader_id: str, protocol_name: ProtocolName, members: Mapping[str, tuple[int, WorkerState]]
    ) -> dict[str, ConnectAssignment]:
        """The member's assign callback: every member's assignment for the round this worker leads."""
        max_offset = max(state.config_offset for _v, state in members.values())
        if self.stores.config_offset() < max_offset:
            self.stores.read_config_to_end()
        snap = self.stores.snapshot()
        # KIP-987 overrides over REST win over properties (the metadata carries the properties' only).
        states = {mid: state for mid, (_v, state) in with_overrides(members, snap).items()}
        if (
            reconciles(self.config)
            and protocol_name.version >= protocol.V1
            and all(s.reconciles for s in states.values())
        ):
            return self._reconciling_round(leader_id, protocol_name, members, max(snap.offset, max_offset))
        counts = snap.task_counts()
        with self._lock:
            last_generation = self.herder.group.generation
            last_protocol = self.herder.group.protocol
        generation = self._generation()
        # Wall-clock time: a scheduled rebalance must mean the same instant to the next leader, which
        # reads it from the group records' timestamps.
        now_ms = int(time.time() * 1000)
        # Only a leader that completed a generation itself can tell whose work of that generation is
        # missing; a freshly started one (a whole cluster restarting) assigns everything, as Java does.
        if last_generation >= 0 and self._state.previous_generation != last_generation:
            self._remember_from_records(last_generation, now_ms)
        result, self._state = assignor.leader_assign(
            self._state,
            selected_protocol=protocol_name,
            leader_id=leader_id,
            members=states,
            leader_config_offset=snap.offset,
            connectors=counts,
            now_ms=now_ms,
            max_delay_ms=self.config.scheduled_rebalance_max_delay_ms,
            generation=generation,
            leaving=frozenset(mid for mid, st in states.items() if st.leaving),
            last_completed_generation=last_generation if last_generation >= 0 else None,
            last_protocol=last_protocol,
        )
        self._pending_records = leader_memory.round_records(
            self.config.group_id,
            generation=generation,
            protocol_name=protocol_name,
            members=members,
            assignments=result,
            state=self._state,
            configuration=group_configuration(self.config),
            previous=self.stores.group_state(self.config.group_id),
        )
        # Static jobs no live worker lists (KIP-987) are reported UNASSIGNED, with the reason, once joined.
        outcome = LeaderOutcome(
            downgrade_round=self._state.downgrade_round,
            unassigned_connectors=self._state.unassigned_connectors,
            unassigned_tasks=self._state.unassigned_tasks,
            reason=assignor.STATIC_UNASSIGNED_REASON,
        )
        with self._lock:
            self.herder.on_leader_assigned(outcome)
        self.log.info(
            "leader computed assignments",
            members=len(states),
            protocol=protocol_name,
            config_offset=snap.offset,
        )
        self.leader_view = LeaderView(leader_id, protocol_name, dict(members), result)
        return result

    def _reconciling_round(
        self,
        leader_id: str,
        protocol_name: ProtocolName,
        members: Mapping[str, tuple[int, WorkerState]],
        config_offset: int,
    ) -> dict[str, ConnectAssignment]:
        """``group.protocol=connect`` on every member: the round moves nothing (each member keeps what it
        runs) and says so with the reconcile flag; once it completes, this leader coordinates the new
        membership through the group records (``herder.on_group_records``)."""
        url = members[leader_id][1].url if leader_id in members else ""
        keep = ConnectAssignment(
            protocol_name.version, protocol.NO_ERROR, leader_id, url, config_offset, (), (), reconcile=True
        )
        with self._lock:
            self.herder.on_leader_assigned(LeaderOutcome(reconcile=True, members=dict(members)))
        self.log.info("leader: the round reconciles", members=len(members), protocol=protocol_name)
        result = {m: keep for m in members}
        self.leader_view = LeaderView(leader_id, protocol_name, dict(members), result)
        self._pending_records = []
        return result

    def _remember_from_records(self, completed: int, now_ms: int) -> None:
        """A leader that did not lead the last generation rebuilds the assignor's memory from the group
        records (KIP-415's "new or lost?" question, answered by the last target assignment)."""
        if not self.stores.read_group_records_to_end():
            self.log.warning("could not read the group records to their end; assigning without them")
            return
        remembered = leader_memory.remember(
            self.stores.group_state(self.config.group_id),
            completed=completed,
            now_ms=now_ms,
            previous_version=self._state.previous_version,
        )
        if remembered is None:
            return
        self._state = remembered
        self.log.info(
            "leader remembered the previous assignment from the group records",
            completed_generation=completed,
            connectors=len(remembered.previous_connectors),
            tasks=len(remembered.previous_tasks),
            scheduled_delay_ms=remembered.delay_ms,
        )

    def write_group_records(self, generation: int, member_id: str, assignment: ConnectAssignment) -> None:
        """The leader's records of the round it computed, then this member's current assignment.

        Written after the round completed, from the herder thread, so that SyncGroup never waits on them;
        records equal to what the topic already holds are not rewritten.
        """
        pending, self._pending_records = self._pending_records, []
        if assignment.reconcile:
            return  # reconciling: the coordinator and the member's reconciliation write the records
        with self._lock:
            running = group_records.Assigned(
                frozenset(self.herder.owned_connectors), frozenset(self.herder.owned_tasks)
            )
        wanted = [*pending]
        if assignment.error == protocol.NO_ERROR:
            wanted.append(
                leader_memory.current_assignment_record(
                    self.config.group_id, member_id, generation, assignment, running
                )
            )
        records = group_records.changed_records(self.stores.group_state(self.config.group_id), wanted)
        if not records:
            return
        try:
            self.stores.write_group_records(records)
        except KafkaLogError as exc:
            self.log.warning("could not write the group records", generation=generation, error=str(exc))


def new_member(
    cfg: WorkerConfig, url: str, leader: LeaderRound, client_settings: Mapping[str, Any]
) -> WorkerMember:
    """The worker's group member: it joins with this worker's metadata and, when it is elected leader,
    assigns with ``leader``'s round."""
    return WorkerMember(
        bootstrap_servers=",".join(cfg.bootstrap_servers),
        group_id=cfg.group_id,
        client_id=leader.worker_id,
        connect_protocol=cfg.connect_protocol,
        session_timeout_ms=cfg.session_timeout_ms,
        heartbeat_interval_ms=cfg.heartbeat_interval_ms,
        rebalance_timeout_ms=cfg.rebalance_timeout_ms,
        request_timeout_ms=cfg.request_timeout_ms,
        retry_backoff_ms=cfg.retry_backoff_ms,
        retry_backoff_max_ms=cfg.retry_backoff_max_ms,
        metadata=lambda: leader.metadata(url),
        assign=leader.assign,
        # kafka-python's own reconnection back-off (its default ceiling is 30 s) follows the worker's
        # settings, as a Java worker's group client does.
        client_settings={
            **client_settings,
            "reconnect_backoff_ms": cfg.reconnect_backoff_ms,
            "reconnect_backoff_max_ms": cfg.reconnect_backoff_max_ms,
        },
    )
