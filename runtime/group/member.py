"""The worker's membership in the Kafka group, speaking the embedded Connect protocol.

This is an edge: kafka-python's BaseCoordinator (a port of the Java AbstractCoordinator that Apache
Kafka Connect's WorkerCoordinator extends) drives JoinGroup, SyncGroup, Heartbeat and LeaveGroup on its
own IO thread. Everything it learns is handed to the herder as plain data (``Joined``); everything it
sends is computed by pure code (``protocol`` encodes, an assignor decides). No decision about connectors
or tasks is made here.
"""

from __future__ import annotations

import contextlib
import queue
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from kafka.coordinator.base import BaseCoordinator
from kafka.net.compat import KafkaNetClient
from kafka.protocol.admin import DescribeGroupsRequest

from kconnect.runtime import logs
from kconnect.runtime.group import protocol
from kconnect.runtime.group.protocol import ConnectAssignment, WorkerState

log = logs.get(__name__)


@dataclass(frozen=True, slots=True)
class Joined:
    """A completed rebalance: what the herder needs to apply it."""

    generation: int
    member_id: str
    protocol: str
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
    state: str
    protocol_type: str
    protocol: str
    members: tuple[GroupMember, ...] = field(default_factory=tuple)


#: leader callback: (leader member id, selected protocol, {member id: (metadata version, state)})
AssignFn = Callable[[str, str, Mapping[str, tuple[int, WorkerState]]], dict[str, ConnectAssignment]]


class MemberError(RuntimeError):
    """The group could not be reached or joined."""


class _ConnectCoordinator(BaseCoordinator):  # type: ignore[misc]
    def __init__(self, owner: WorkerMember, client: Any, **configs: Any) -> None:
        super().__init__(client, **configs)
        self._owner = owner

    def protocol_type(self) -> str:
        return "connect"

    def group_protocols(self) -> list[tuple[str, bytes]]:
        return self._owner._join_protocols()

    def _perform_assignment(self, leader_id: str, protocol_name: str, members: list[Any]) -> dict[str, bytes]:
        decoded: dict[str, tuple[int, WorkerState]] = {}
        for m in members:
            decoded[m.member_id] = protocol.decode_metadata(bytes(m.metadata))
        assignments = self._owner._assign(leader_id, protocol_name, decoded)
        return {mid: protocol.encode_assignment(a) for mid, a in assignments.items()}

    async def _on_join_complete_async(
        self, generation: int, member_id: str, protocol_name: str, member_assignment_bytes: bytes
    ) -> None:
        assignment = protocol.decode_assignment(bytes(member_assignment_bytes))
        self._owner._joined.put(Joined(generation, member_id, protocol_name, assignment))


class WorkerMember:
    """A worker's group membership; thread-safe calls from the herder thread, IO on its own thread."""

    def __init__(
        self,
        *,
        bootstrap_servers: str,
        group_id: str,
        client_id: str,
        connect_protocol: str,
        session_timeout_ms: int,
        heartbeat_interval_ms: int,
        rebalance_timeout_ms: int,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        metadata: Callable[[], WorkerState],
        assign: AssignFn,
        client_settings: Mapping[str, Any] | None = None,
    ) -> None:
        """``client_settings``: kafka-python connection settings (security), from
        :func:`kconnect.runtime.client_config.to_kafka_python`."""
        self.group_id = group_id
        self.connect_protocol = connect_protocol
        self._metadata = metadata
        self._assign_fn = assign
        self._joined: queue.Queue[Joined] = queue.Queue()
        self._client = KafkaNetClient(
            bootstrap_servers=bootstrap_servers.split(","),
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            **(client_settings or {}),
        )
        self._coordinator: _ConnectCoordinator | None = None
        self._configs = {
            "group_id": group_id,
            "session_timeout_ms": session_timeout_ms,
            "heartbeat_interval_ms": heartbeat_interval_ms,
            "max_poll_interval_ms": rebalance_timeout_ms,  # kafka-python sends it as the rebalance timeout
            "request_timeout_ms": request_timeout_ms,
            "retry_backoff_ms": retry_backoff_ms,
        }
        self._lock = threading.Lock()
        self.last_protocol: str | None = None

    # -- lifecycle -------------------------------------------------------------------------------------

    def connect(self, timeout_ms: int) -> None:
        """Reach the cluster (bootstrap and version probe) or fail with a clear error within the timeout."""
        try:
            version = self._client.check_version(timeout_ms=timeout_ms)
        except Exception as exc:
            raise MemberError(
                f"could not reach the Kafka cluster to join group '{self.group_id}': {exc}"
            ) from exc
        if version is None:
            raise MemberError(f"could not reach the Kafka cluster to join group '{self.group_id}'")
        self._client._net.start()  # the IO thread: heartbeats keep flowing while the herder works
        self._coordinator = _ConnectCoordinator(self, self._client, api_version=version, **self._configs)

    @property
    def coordinator(self) -> _ConnectCoordinator:
        if self._coordinator is None:
            raise MemberError("the member is not connected")
        return self._coordinator

    def need_rejoin(self) -> bool:
        return bool(self.coordinator.need_rejoin())

    def request_rejoin(self) -> None:
        self.coordinator.request_rejoin()

    def ensure_active(self, timeout_ms: int) -> Joined | None:
        """Join or rejoin if needed; returns the assignment of a rebalance that completed, if any."""
        coord = self.coordinator
        coord.ensure_active_group(timeout_ms=timeout_ms)
        return self.poll_joined()

    def poll_joined(self) -> Joined | None:
        try:
            joined = self._joined.get_nowait()
        except queue.Empty:
            return None
        self.last_protocol = joined.protocol
        return joined

    def poll_heartbeat(self) -> None:
        """Tell the heartbeat loop the herder is alive (else it leaves after the rebalance timeout)."""
        self.coordinator.poll_heartbeat()

    def generation(self) -> tuple[int, str]:
        gen = self.coordinator._generation
        return int(gen.generation_id), str(gen.member_id)

    def member_id(self) -> str:
        return self.generation()[1]

    def leave(self, timeout_ms: int = 5000) -> None:
        """Send LeaveGroup so the others rebalance now instead of after the session timeout."""
        if self._coordinator is not None:
            try:
                self._coordinator.close(timeout_ms=timeout_ms)
            except Exception as exc:
                log.warning("leaving the group failed", error=str(exc))

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._client._net.stop(timeout_ms=2000)
        with contextlib.suppress(Exception):
            self._client.close()

    # -- group description (any member) ---------------------------------------------------------------------

    def describe(self, timeout_ms: int = 5000) -> GroupDescription:
        coord = self.coordinator
        node = coord.coordinator()
        if node is None:
            raise MemberError("the group coordinator is not known yet")
        request = DescribeGroupsRequest(groups=[self.group_id], include_authorized_operations=False)
        manager = coord._manager

        async def send() -> Any:
            # Requests must go through the IO thread's event loop; polling from here would race it.
            return await manager.wait_for(manager.send(request, node_id=node), timeout_ms)

        response = self._client._net.run(send)
        group = response.groups[0]
        members: list[GroupMember] = []
        for m in group.members:
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
        return GroupDescription(group.group_state, group.protocol_type, group.protocol_data, tuple(members))

    # -- callbacks from the coordinator (IO thread) ----------------------------------------------------

    def _join_protocols(self) -> list[tuple[str, bytes]]:
        return protocol.join_protocols(self.connect_protocol, self._metadata())

    def _assign(
        self, leader_id: str, protocol_name: str, members: Mapping[str, tuple[int, WorkerState]]
    ) -> dict[str, ConnectAssignment]:
        return self._assign_fn(leader_id, protocol_name, members)
