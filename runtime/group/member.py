"""The worker's membership in the Kafka group, speaking the embedded Connect protocol.

This is the facade the shell uses. The group protocol itself is a sans-I/O state machine
(:mod:`membership`: responses and ticks in, requests and events out) carried by a thin transport
(:mod:`transport`: kafka-python's public network client, on its own IO thread so that heartbeats keep
flowing while the herder works). What this module adds is Connect's meaning: the metadata a worker
joins with and the leader's assignment are encoded and decoded by :mod:`protocol`, and the assignment
is decided by the herder's callback. Everything learnt is handed to the herder as plain data
(``Joined``); no decision about connectors or tasks is made here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from kconnect.config.worker_keys import ConnectProtocol
from kconnect.runtime import logs
from kconnect.runtime.group import membership, protocol
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.group.transport import GroupTransport, TransportError

log = logs.get(__name__)


@dataclass(frozen=True, slots=True)
class Joined:
    """A completed rebalance: what the herder needs to apply it."""

    generation: int
    member_id: str
    protocol: ProtocolName
    assignment: ConnectAssignment


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member as the group coordinator describes it (any worker can ask, not only the leader)."""

    member_id: str
    client_id: str
    client_host: str
    metadata_version: int | None
    state: WorkerState | None
    assignment: ConnectAssignment | None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """The group as DescribeGroups reports it: what ``GET /workers`` and the CLI show of other members."""

    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...] = field(default_factory=tuple)


#: leader callback: (leader member id, selected protocol, {member id: (metadata version, state)})
AssignFn = Callable[[str, ProtocolName, Mapping[str, tuple[int, WorkerState]]], dict[str, ConnectAssignment]]


class MemberError(RuntimeError):
    """The group could not be reached or joined."""


def leader_assignments(
    assign: AssignFn, leader_id: str, protocol_name: str, members: Sequence[tuple[str, bytes]]
) -> dict[str, bytes]:
    """The leader's SyncGroup payload: the selected protocol name and every member's JoinGroup metadata
    decoded (any version a Java or kconnect worker sends), handed to ``assign``, and its answer encoded.
    Pure, so a test can feed it a Java member's bytes. An unknown protocol name raises
    :class:`~kconnect.runtime.group.protocol.ProtocolError`."""
    selected = protocol.parse_protocol_name(protocol_name)
    decoded = {member_id: protocol.decode_metadata(bytes(data)) for member_id, data in members}
    return {mid: protocol.encode_assignment(a) for mid, a in assign(leader_id, selected, decoded).items()}


def describe_members(raw_members: Sequence[Any]) -> tuple[GroupMember, ...]:
    """DescribeGroups members as plain data; metadata that does not decode is left out, not fatal (a
    member of another protocol type, or a broker that returns none)."""
    members: list[GroupMember] = []
    for m in raw_members:
        version: int | None = None
        state: WorkerState | None = None
        assignment: ConnectAssignment | None = None
        try:
            if m.member_metadata:
                version, state = protocol.decode_metadata(bytes(m.member_metadata))
            if m.member_assignment:
                assignment = protocol.decode_assignment(bytes(m.member_assignment))
        except ValueError as exc:
            log.warning("could not decode a group member's metadata", member=m.member_id, error=str(exc))
        members.append(GroupMember(m.member_id, m.client_id, m.client_host, version, state, assignment))
    return tuple(members)


class WorkerMember:
    """A worker's group membership; thread-safe calls from the herder thread, IO on its own thread."""

    def __init__(
        self,
        *,
        bootstrap_servers: str,
        group_id: str,
        client_id: str,
        connect_protocol: ConnectProtocol,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        rebalance_timeout_ms: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        metadata: Callable[[], WorkerState],
        assign: AssignFn,
        client_settings: Mapping[str, Any] | None = None,
        retry_backoff_max_ms: int = 1000,
    ) -> None:
        """``client_settings``: kafka-python connection settings (security), from
        :func:`kconnect.runtime.client_config.to_kafka_python`."""
        self.group_id = group_id
        self.connect_protocol = connect_protocol
        self._metadata = metadata
        self._assign_fn = assign
        self._config = membership.MembershipConfig(
            group_id=group_id,
            session_timeout_ms=session_timeout_ms,
            heartbeat_interval_ms=heartbeat_interval_ms,
            rebalance_timeout_ms=rebalance_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
        )
        self._bootstrap_servers = bootstrap_servers
        self._client_id = client_id
        self._retry_backoff_ms = retry_backoff_ms
        self._client_settings = dict(client_settings or {})
        self._transport: GroupTransport | None = None
        # What the IO thread hands to the herder thread: completed joins, a failed join, the end of a leave.
        self._cond = threading.Condition()
        self._joined: list[Joined] = []
        self._failure: str | None = None
        self._left = False
        self.last_protocol: ProtocolName | None = None

    # -- lifecycle -------------------------------------------------------------------------------------

    def connect(self, timeout_ms: int) -> None:
        """Reach the cluster (bootstrap and version probe) or fail with a clear error within the timeout."""
        machine = membership.Membership(self._config, int(time.monotonic() * 1000))
        transport = GroupTransport(
            machine,
            bootstrap_servers=self._bootstrap_servers,
            client_id=self._client_id,
            retry_backoff_ms=self._retry_backoff_ms,
            on_event=self._on_event,
            client_settings=self._client_settings,
        )
        self._transport = transport  # before its IO thread starts: events may name it
        try:
            transport.connect(timeout_ms)
        except Exception as exc:
            self._transport = None
            transport.close()
            raise MemberError(
                f"could not reach the Kafka cluster to join group '{self.group_id}': {exc}"
            ) from exc

    @property
    def transport(self) -> GroupTransport:
        """The connected transport (a clear error before :meth:`connect`)."""
        if self._transport is None:
            raise MemberError("the member is not connected")
        return self._transport

    def need_rejoin(self) -> bool:
        """Whether the herder must prepare a rebalance and call :meth:`ensure_active`."""
        return self.transport.read(lambda m: m.need_rejoin)

    def request_rejoin(self) -> None:
        """Ask for a new generation (a config change, a scheduled rebalance)."""
        self.transport.call(lambda m, _now: m.request_rejoin("the worker asked to rejoin"))

    def ensure_active(self, timeout_ms: int) -> Joined | None:
        """Join or rejoin if needed; returns the assignment of a rebalance that completed, if any.
        A join that failed for good raises :class:`MemberError` (the next call tries again)."""
        transport = self.transport
        with self._cond:
            failure, self._failure = self._failure, None
        if failure is not None:
            raise MemberError(failure)
        transport.call(lambda m, now: m.join(now))
        with self._cond:
            self._cond.wait_for(
                lambda: bool(self._joined) or self._failure is not None or not transport.read(_joining),
                timeout_ms / 1000,
            )
            failure, self._failure = self._failure, None
        if failure is not None:
            raise MemberError(failure)
        return self.poll_joined()

    def poll_joined(self) -> Joined | None:
        """The next completed rebalance not yet handed to the herder, if any."""
        with self._cond:
            if not self._joined:
                return None
            joined = self._joined.pop(0)
        self.last_protocol = joined.protocol
        return joined

    def poll_heartbeat(self) -> None:
        """Tell the heartbeat loop the herder is alive (else it leaves after the rebalance timeout)."""
        self.transport.call(lambda m, now: m.poll(now))

    def generation(self) -> tuple[int, str]:
        """(generation id, member id); a generation below 0 means the worker holds none."""
        gen = self.transport.read(lambda m: m.generation)
        return gen.generation_id, gen.member_id

    def isolated(self) -> bool:
        """Whether the member revoked its assignment because no coordinator was known for longer than
        heartbeat.interval.ms (the owner releases all its work before rejoining), until the next
        assignment; one a coordinator dropped keeps its work under the cooperative protocols."""
        return self.transport.read(lambda m: m.isolated)

    def member_id(self) -> str:
        """This worker's member id in the group ('' before its first JoinGroup)."""
        return self.generation()[1]

    def leave(self, timeout_ms: int = 5000) -> None:
        """Send LeaveGroup so the others rebalance now instead of after the session timeout."""
        transport = self._transport
        if transport is None:
            return
        try:
            transport.call(lambda m, now: m.leave(now))
            with self._cond:
                if not self._cond.wait_for(lambda: self._left, timeout_ms / 1000):
                    log.warning("leaving the group got no answer in time", timeout_ms=timeout_ms)
        except Exception as exc:
            log.warning("leaving the group failed", error=str(exc))

    def close(self) -> None:
        """Stop the IO thread and close the connections."""
        transport = self._transport
        if transport is None:
            return
        try:
            transport.stop(timeout_s=2.0)
        finally:
            transport.close()

    # -- group description (any member) ---------------------------------------------------------------------

    def describe(self, timeout_ms: int = 5000) -> GroupDescription:
        """DescribeGroups at the coordinator: every member's id, host, metadata and assignment."""
        try:
            group = self.transport.describe_group(timeout_ms)
        except TransportError as exc:
            raise MemberError(str(exc)) from exc
        return GroupDescription(
            group.group_state, group.protocol_type, group.protocol_data, describe_members(group.members)
        )

    # -- the machine's events (IO thread, no lock held) --------------------------------------------------

    def _on_event(self, event: membership.Event) -> None:
        transport = self.transport
        if isinstance(event, membership.MetadataNeeded):
            protocols = protocol.join_protocols(self.connect_protocol, self._metadata())
            transport.call(lambda m, now: m.metadata(event.attempt, protocols, now))
        elif isinstance(event, membership.AssignmentNeeded):
            log.info("elected group leader", generation=event.generation_id, protocol=event.protocol)
            try:
                payload = leader_assignments(self._assign_fn, event.leader_id, event.protocol, event.members)
            except Exception as exc:
                log.error("the leader's assignment failed", error=repr(exc))
                message = repr(exc)
                transport.call(lambda m, now: m.assignment_failed(event.generation_id, message, now))
                return
            transport.call(lambda m, now: m.assignments(event.generation_id, payload, now))
        elif isinstance(event, membership.Joined):
            self._on_joined(event)
        elif isinstance(event, membership.Lost):
            log.warning("lost the group generation", generation=event.generation_id, reason=event.reason)
        elif isinstance(event, membership.RejoinRequested):
            log.info("rejoining the group", reason=event.reason)
        elif isinstance(event, membership.Unreachable):
            log.warning(
                "the group coordinator was unreachable: revoking all connectors and tasks to avoid running"
                " them while not a member of the group",
                generation=event.generation_id,
                member=event.member_id,
                unknown_ms=event.unknown_ms,
            )
        elif isinstance(event, membership.Failed):
            log.error("joining the group failed", error=event.message, code=event.error_code)
            with self._cond:
                self._failure = f"joining group '{self.group_id}' failed: {event.message}"
                self._cond.notify_all()
        else:  # Left
            with self._cond:
                self._left = True
                self._cond.notify_all()

    def _on_joined(self, event: membership.Joined) -> None:
        try:
            selected = protocol.parse_protocol_name(event.protocol)
            assignment = protocol.decode_assignment(event.assignment)
        except ValueError as exc:
            # An assignment (or a protocol) this worker cannot read: run nothing of it and ask for another
            # round.
            log.error("could not decode the group assignment", error=str(exc))
            self.transport.call(lambda m, _now: m.request_rejoin("the assignment did not decode"))
            return
        log.info("joined the group", generation=event.generation_id, member=event.member_id)
        with self._cond:
            self._joined.append(Joined(event.generation_id, event.member_id, selected, assignment))
            self._cond.notify_all()


def _joining(machine: membership.Membership) -> bool:
    return machine.joining
