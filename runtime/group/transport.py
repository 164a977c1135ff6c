"""The thin transport under :mod:`membership`: carries its requests to the broker and feeds the responses
back, on an IO thread of its own so that heartbeats continue while the herder works.

Why a separate edge: the state machine decides, this module only moves bytes. It uses kafka-python's
public surface alone (``KafkaNetClient``: ``check_version``, ``send``, ``poll``, ``least_loaded_node``,
``close``, ``wakeup``, ``cluster.add_coordinator``; the request classes of ``kafka.protocol``), so a
kafka-python release that reshuffles its coordinator internals cannot break group membership. The
connection takes the worker's security settings (``client_config.to_kafka_python``) as before.

Threading: the machine is only touched under one lock, and never while an owner callback runs, so an
owner that takes its own lock in a callback (the worker's metadata and assignment) cannot deadlock with
a herder thread that holds that lock and asks the member something.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import kafka.errors as kafka_errors
from kafka.net.compat import KafkaNetClient
from kafka.protocol import consumer as group_api
from kafka.protocol.admin import DescribeGroupsRequest
from kafka.protocol.metadata import CoordinatorType, FindCoordinatorRequest

from kconnect.runtime import logs
from kconnect.runtime.group import membership as m

log = logs.get(__name__)

T = TypeVar("T")

#: Failures that say nothing about the coordinator's health (Java does not mark it unknown for these).
_NOT_A_DISCONNECT = (
    kafka_errors.NodeNotReadyError,
    kafka_errors.TooManyInFlightRequests,
    kafka_errors.ThrottlingQuotaExceededError,
)
#: The longest the IO thread sleeps between looks at the machine's timers and the stop flag.
_MAX_WAIT_MS = 200

#: Newest JoinGroup/SyncGroup versions this member speaks (as kafka-python's own coordinator caps them).
_JOIN_MAX_VERSION = 7
_SYNC_MAX_VERSION = 5


class TransportError(RuntimeError):
    """A request of the owner (not of the machine) could not be answered."""


def _now_ms() -> int:
    return int(time.monotonic() * 1000)


class _Waiter:
    """One owner request's answer, handed from the IO thread to the waiting thread."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None

    def succeed(self, value: Any) -> None:
        self.value = value
        self.done.set()

    def fail(self, error: BaseException) -> None:
        self.error = error
        self.done.set()


class GroupTransport:
    """Drives one :class:`membership.Membership` over the network.

    ``on_event`` receives the machine's events on the IO thread, with no lock held; it may answer them
    through :meth:`call` (the metadata and the leader's assignment).
    """

    def __init__(
        self,
        machine: m.Membership,
        *,
        bootstrap_servers: str,
        client_id: str,
        retry_backoff_ms: int,
        on_event: Callable[[m.Event], None],
        client_settings: Mapping[str, Any] | None = None,
    ) -> None:
        """The client's own request timeout is the JoinGroup's (the broker holds a JoinGroup for up to
        the rebalance timeout); the machine enforces the shorter one of every other request."""
        self._machine = machine
        self._group_id = machine.config.group_id
        self._on_event = on_event
        self._client = KafkaNetClient(
            bootstrap_servers=bootstrap_servers.split(","),
            client_id=client_id,
            request_timeout_ms=machine.config.join_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            **(client_settings or {}),
        )
        self._lock = threading.RLock()
        self._outbox: list[m.Output] = []
        self._jobs: list[tuple[Callable[[m.Coordinator | None], Any], _Waiter]] = []
        self._node_ids: dict[m.Coordinator, str] = {}
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------------------- owner's side

    def connect(self, timeout_ms: int) -> tuple[int, ...]:
        """Bootstrap (on the caller's thread), then start the IO thread; the broker's version."""
        version = self._client.check_version(timeout_ms=timeout_ms)
        if version is None:
            raise TransportError("the cluster did not answer the version probe")
        self._thread = threading.Thread(target=self._run, name=f"group-io-{self._group_id}", daemon=True)
        self._thread.start()
        return tuple(version)

    def call(self, step: Callable[[m.Membership, int], list[m.Output]]) -> None:
        """Apply one input to the machine now; its outputs go out on the IO thread."""
        with self._lock:
            out = step(self._machine, _now_ms())
            self._outbox.extend(out)
        if out:
            self._client.wakeup()

    def read(self, query: Callable[[m.Membership], T]) -> T:
        """Read the machine's state consistently with the IO thread."""
        with self._lock:
            return query(self._machine)

    def describe_group(self, timeout_ms: int) -> Any:
        """DescribeGroups at the coordinator; kafka-python's response group (any member may ask)."""

        def send(coordinator: m.Coordinator | None) -> Any:
            if coordinator is None:
                raise TransportError("the group coordinator is not known yet")
            request = DescribeGroupsRequest(groups=[self._group_id], include_authorized_operations=False)
            return self._client.send(self._node_id(coordinator), request)

        waiter = _Waiter()
        with self._lock:
            self._jobs.append((send, waiter))
        self._client.wakeup()
        if not waiter.done.wait(timeout_ms / 1000):
            raise TransportError(f"DescribeGroups got no answer within {timeout_ms} ms")
        if waiter.error is not None:
            raise TransportError(str(waiter.error)) from waiter.error
        return waiter.value.groups[0]

    def stop(self, timeout_s: float = 2.0) -> None:
        """Stop the IO thread (after the machine's last requests went out)."""
        self._stopping.set()
        self._client.wakeup()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout_s)

    def close(self) -> None:
        """Close every connection."""
        self._client.close()

    # ---------------------------------------------------------------------------------- IO thread

    def _run(self) -> None:
        while not self._stopping.is_set():
            try:
                self._step()
            except Exception as exc:  # the IO loop must outlive any one bad response
                log.error("group IO step failed", error=repr(exc))
                time.sleep(0.1)

    def _step(self) -> None:
        now = _now_ms()
        with self._lock:
            out = self._outbox + self._machine.tick(now)
            self._outbox = []
            jobs, self._jobs = self._jobs, []
            coordinator = self._machine.coordinator
            wait_ms = self._machine.next_deadline_ms(now) - now
        for job, waiter in jobs:
            self._start_job(job, waiter, coordinator)
        for item in out:
            self._handle(item)
        with self._lock:
            busy = bool(self._outbox) or bool(self._jobs)
        self._client.poll(timeout_ms=0 if busy else max(0, min(wait_ms, _MAX_WAIT_MS)))

    def _start_job(
        self, job: Callable[[m.Coordinator | None], Any], waiter: _Waiter, coord: m.Coordinator | None
    ) -> None:
        try:
            future = job(coord)
        except Exception as exc:
            waiter.fail(exc)
            return
        future.add_callback(waiter.succeed)
        future.add_errback(waiter.fail)

    def _handle(self, item: m.Output) -> None:
        if isinstance(item, m.CloseConnection):
            node = self._node_ids.get(item.coordinator)
            if node is not None:
                self._client.close(node)
        elif isinstance(item, m.FindCoordinator):
            self._send_find(item)
        elif isinstance(item, m.JoinGroup | m.SyncGroup | m.Heartbeat | m.LeaveGroup):
            self._send(item.request_id, self._node_id(item.coordinator), _encode(item), _decode_for(item))
        else:
            self._on_event(item)

    def _node_id(self, coordinator: m.Coordinator) -> str:
        node = self._node_ids.get(coordinator)
        if node is None:
            raise TransportError(f"coordinator {coordinator} was never registered")
        return node

    def _send_find(self, item: m.FindCoordinator) -> None:
        node = self._client.least_loaded_node()
        if node is None:
            self._fail(
                item.request_id, kafka_errors.NodeNotReadyError("no broker to ask for the coordinator")
            )
            return
        request = FindCoordinatorRequest(key=item.group_id, key_type=0, coordinator_keys=[item.group_id])
        self._send(item.request_id, node, request, self._decode_find)

    def _decode_find(self, response: Any) -> m.Result:
        # v4+ answers in a list of coordinators (one per key asked); older versions at the top level.
        result = response.coordinators[0] if response.coordinators else response
        if result.error_code != m.NONE:
            return m.FindCoordinatorResult(int(result.error_code))
        coordinator = m.Coordinator(int(result.node_id), str(result.host), int(result.port))
        self._node_ids[coordinator] = self._client.cluster.add_coordinator(
            result, CoordinatorType.GROUP, self._group_id
        )
        return m.FindCoordinatorResult(m.NONE, coordinator.node_id, coordinator.host, coordinator.port)

    def _send(self, request_id: int, node: Any, request: Any, decode: Callable[[Any], m.Result]) -> None:
        def delivered(response: Any) -> None:
            try:
                result = decode(response)
            except Exception as exc:
                self._fail(request_id, exc)
                return
            self.call(lambda machine, now: machine.on_response(request_id, result, now))

        try:
            future = self._client.send(node, request)
        except Exception as exc:
            self._fail(request_id, exc)
            return
        future.add_callback(delivered)
        future.add_errback(lambda exc: self._fail(request_id, exc))

    def _fail(self, request_id: int, exc: BaseException) -> None:
        disconnect = not isinstance(exc, _NOT_A_DISCONNECT)
        message = f"{type(exc).__name__}: {exc}"
        self.call(lambda machine, now: machine.on_failure(request_id, message, now, disconnect=disconnect))


# ------------------------------------------------------------------------- the codec to kafka-python


def _encode(item: m.JoinGroup | m.SyncGroup | m.Heartbeat | m.LeaveGroup) -> Any:
    """The kafka-python request for one of the machine's requests (kafka-python picks the version the
    broker supports, up to the caps)."""
    if isinstance(item, m.JoinGroup):
        return group_api.JoinGroupRequest(
            group_id=item.group_id,
            session_timeout_ms=item.session_timeout_ms,
            rebalance_timeout_ms=item.rebalance_timeout_ms,
            member_id=item.member_id,
            group_instance_id=None,
            protocol_type=item.protocol_type,
            protocols=list(item.protocols),
            max_version=_JOIN_MAX_VERSION,
        )
    if isinstance(item, m.SyncGroup):
        return group_api.SyncGroupRequest(
            group_id=item.group_id,
            generation_id=item.generation_id,
            member_id=item.member_id,
            group_instance_id=None,
            protocol_type=item.protocol_type,
            protocol_name=item.protocol_name,
            assignments=list(item.assignments),
            max_version=_SYNC_MAX_VERSION,
        )
    if isinstance(item, m.Heartbeat):
        return group_api.HeartbeatRequest(
            group_id=item.group_id,
            generation_id=item.generation_id,
            member_id=item.member_id,
            group_instance_id=None,
        )
    identity = group_api.LeaveGroupRequest.MemberIdentity(
        member_id=item.member_id, group_instance_id=None, reason=item.reason[:255]
    )
    return group_api.LeaveGroupRequest(group_id=item.group_id, member_id=item.member_id, members=[identity])


def _decode_for(item: m.JoinGroup | m.SyncGroup | m.Heartbeat | m.LeaveGroup) -> Callable[[Any], m.Result]:
    if isinstance(item, m.JoinGroup):
        return _decode_join
    if isinstance(item, m.SyncGroup):
        return _decode_sync
    if isinstance(item, m.Heartbeat):
        return lambda response: m.HeartbeatResult(int(response.error_code))
    return lambda response: m.LeaveGroupResult(int(response.error_code))


def _decode_join(response: Any) -> m.Result:
    return m.JoinGroupResult(
        error_code=int(response.error_code),
        generation_id=int(response.generation_id),
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        leader=str(response.leader or ""),
        member_id=str(response.member_id or ""),
        members=tuple((str(x.member_id), bytes(x.metadata)) for x in (response.members or ())),
    )


def _decode_sync(response: Any) -> m.Result:
    return m.SyncGroupResult(
        error_code=int(response.error_code),
        protocol_type=response.protocol_type,
        protocol_name=response.protocol_name,
        assignment=bytes(response.assignment or b""),
    )
