"""The classic group member as a sans-I/O state machine: responses and ticks in, requests and events out.

Why a state machine: a rebalance (who leads, a leader that moves, a session that expires, a coordinator
that fails over) must be replayable in a unit test without a broker, and the member must not depend on
any client library's internals. This module speaks the four group APIs (FindCoordinator, JoinGroup,
SyncGroup, Heartbeat, plus LeaveGroup) as plain values; ``transport`` carries them over the network and
``member`` gives them Connect's meaning. No sockets, threads or clocks here: time comes in as ``now_ms``.
The values themselves (requests, responses, events, error codes) are ``membership_messages``'.

The semantics are those of the Java AbstractCoordinator as Connect's WorkerCoordinator uses it:

* Joining starts only when the owner asks (:meth:`Membership.join`): the owner must stop what it gives
  up before its JoinGroup describes what it runs. Within one join, retries (MEMBER_ID_REQUIRED, a
  rebalance in progress, a coordinator that moved) continue on their own.
* The owner answers two questions through event/answer pairs, so that no callback runs inside the
  machine: :class:`MetadataNeeded` (the protocols and metadata of the next JoinGroup) and
  :class:`AssignmentNeeded` (the leader's assignment of every member).
* While stable, heartbeats go every ``heartbeat_interval_ms``; no successful one for
  ``session_timeout_ms`` and the member considers itself lost. If the owner does not call
  :meth:`Membership.poll` within ``rebalance_timeout_ms``, the member leaves the group, as Java's heartbeat
  thread does, so that the others can rebalance without it.
* Error handling follows the protocol: UNKNOWN_MEMBER_ID / ILLEGAL_GENERATION / FENCED_INSTANCE_ID reset
  the generation (:class:`Lost`), REBALANCE_IN_PROGRESS asks for a rejoin, COORDINATOR_NOT_AVAILABLE /
  NOT_COORDINATOR / a disconnect make the member find the coordinator again.
* A member that holds an assignment and has known no coordinator for longer than
  ``heartbeat_interval_ms`` tells its owner to stop everything (:class:`Unreachable`) and rejoins, with
  its generation, once the owner has done so: Java's ``WorkerCoordinator.poll`` (KAFKA-9184) revokes the
  whole assignment when coordinator discovery does not succeed within ``heartbeat.interval.ms``, under
  every Connect protocol, so that a worker cut off from the group never runs work the leader has given
  to others.
"""

from __future__ import annotations

import enum
import math
import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from kconnect.runtime.group.membership_messages import (
    COORDINATOR_LOAD_IN_PROGRESS,
    COORDINATOR_NOT_AVAILABLE,
    FENCED_INSTANCE_ID,
    GROUP_AUTHORIZATION_FAILED,
    GROUP_MAX_SIZE_REACHED,
    ILLEGAL_GENERATION,
    INCONSISTENT_GROUP_PROTOCOL,
    INVALID_GROUP_ID,
    INVALID_SESSION_TIMEOUT,
    MEMBER_ID_REQUIRED,
    NO_GENERATION,
    NONE,
    NOT_COORDINATOR,
    REBALANCE_IN_PROGRESS,
    UNKNOWN_MEMBER_ID,
    AssignmentNeeded,
    CloseConnection,
    Coordinator,
    Event,
    Failed,
    FindCoordinator,
    FindCoordinatorResult,
    Generation,
    Heartbeat,
    HeartbeatResult,
    Joined,
    JoinGroup,
    JoinGroupResult,
    LeaveGroup,
    LeaveGroupResult,
    Left,
    Lost,
    MetadataNeeded,
    Output,
    RejoinRequested,
    Request,
    Result,
    SyncGroup,
    SyncGroupResult,
    Unreachable,
)

# The messages (requests, responses, events, error codes) are ``membership_messages``'; they are named here
# too, as ``transport`` and ``member`` read them through this module.
__all__ = [
    "BACKOFF_JITTER",
    "BACKOFF_MULTIPLIER",
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "FENCED_INSTANCE_ID",
    "GROUP_AUTHORIZATION_FAILED",
    "GROUP_MAX_SIZE_REACHED",
    "ILLEGAL_GENERATION",
    "INCONSISTENT_GROUP_PROTOCOL",
    "INVALID_GROUP_ID",
    "INVALID_SESSION_TIMEOUT",
    "JOIN_GRACE_MS",
    "MEMBER_ID_REQUIRED",
    "NONE",
    "NOT_COORDINATOR",
    "NO_GENERATION",
    "REBALANCE_IN_PROGRESS",
    "UNKNOWN_MEMBER_ID",
    "AssignmentNeeded",
    "CloseConnection",
    "Coordinator",
    "Event",
    "Failed",
    "FindCoordinator",
    "FindCoordinatorResult",
    "Generation",
    "Heartbeat",
    "HeartbeatResult",
    "JoinGroup",
    "JoinGroupResult",
    "Joined",
    "LeaveGroup",
    "LeaveGroupResult",
    "Left",
    "Lost",
    "Membership",
    "MembershipConfig",
    "MetadataNeeded",
    "Output",
    "Phase",
    "RejoinRequested",
    "Request",
    "Result",
    "SyncGroup",
    "SyncGroupResult",
    "Unreachable",
    "backoff_ms",
]

#: JoinGroup errors no retry can fix: the owner hears of them (:class:`Failed`) and decides.
_FATAL_JOIN = frozenset(
    {
        INCONSISTENT_GROUP_PROTOCOL,
        INVALID_SESSION_TIMEOUT,
        INVALID_GROUP_ID,
        GROUP_AUTHORIZATION_FAILED,
        GROUP_MAX_SIZE_REACHED,
        FENCED_INSTANCE_ID,
    }
)
_COORDINATOR_GONE = frozenset({COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR})

#: Java's joinGroupTimeoutMs: the broker holds a JoinGroup open for up to the rebalance timeout.
JOIN_GRACE_MS = 5000

#: Java's CommonClientConfigs.RETRY_BACKOFF_JITTER and its exponential base (KIP-580).
BACKOFF_JITTER = 0.2
BACKOFF_MULTIPLIER = 2


def backoff_ms(failures: int, initial_ms: int, max_ms: int, random_factor: float = 1.0) -> int:
    """How long to wait before the next try after ``failures`` consecutive failed ones (0: the first).

    Why exponential: with the broker gone every try fails at once, and a fixed ``retry.backoff.ms``
    (100 ms) would keep the worker retrying ten times a second for as long as the outage lasts. As Java's
    ExponentialBackoff (KIP-580): ``initial * 2**failures``, scaled by ``random_factor`` (drawn from
    ``[1 - BACKOFF_JITTER, 1 + BACKOFF_JITTER]`` so that workers that lost the same broker do not retry
    in step), never above ``max_ms``; a ``max_ms`` not above ``initial_ms`` means no growth and no jitter.
    """
    if max_ms <= initial_ms:
        return initial_ms
    exp_max = math.log(max_ms / max(initial_ms, 1)) / math.log(BACKOFF_MULTIPLIER)
    term = max(initial_ms, 1) * BACKOFF_MULTIPLIER ** min(float(max(failures, 0)), exp_max)
    return min(int(term * random_factor), max_ms)


class Phase(enum.Enum):
    """Where the member is in the join protocol (Java's MemberState, with the two owner answers made
    explicit so that a test can see the member waiting for them)."""

    UNJOINED = "unjoined"
    AWAITING_METADATA = "awaiting-metadata"
    JOINING = "joining"
    AWAITING_ASSIGNMENT = "awaiting-assignment"
    SYNCING = "syncing"
    STABLE = "stable"


_ATTEMPT_PHASES = frozenset(
    {Phase.AWAITING_METADATA, Phase.JOINING, Phase.AWAITING_ASSIGNMENT, Phase.SYNCING}
)


@dataclass(frozen=True, slots=True)
class MembershipConfig:
    """The timing and identity of a member; the same settings Java's coordinator takes."""

    group_id: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    request_timeout_ms: int
    retry_backoff_ms: int
    #: The ceiling of the exponential back-off of FindCoordinator and JoinGroup/SyncGroup retries.
    retry_backoff_max_ms: int = 1000
    protocol_type: str = "connect"

    @property
    def join_timeout_ms(self) -> int:
        """How long a JoinGroup may stay unanswered: the broker holds it while others join."""
        return max(self.request_timeout_ms, self.rebalance_timeout_ms + JOIN_GRACE_MS)


@dataclass(slots=True)
class _InFlight:
    kind: type[Request]
    deadline_ms: int
    coordinator: Coordinator | None


class Membership:
    """One member of a classic group. Every input returns the outputs it caused, in order: requests for
    the transport to send, connection drops, and events for the owner.

    Not thread-safe: its driver serializes the calls (see ``transport``).
    """

    def __init__(
        self, config: MembershipConfig, now_ms: int, jitter: Callable[[], float] | None = None
    ) -> None:
        """``now_ms`` starts the clocks; every later input brings its own time. ``jitter`` draws the
        back-off's random factor (a uniform one by default; a test passes a constant)."""
        if config.heartbeat_interval_ms >= config.session_timeout_ms:
            raise ValueError("heartbeat.interval.ms must be lower than session.timeout.ms")
        self.config = config
        self.phase = Phase.UNJOINED
        self.generation = NO_GENERATION
        self.coordinator: Coordinator | None = None
        self.closed = False
        self._rejoin_needed = True
        self._join_wanted = False
        self._attempt = 0
        self._next_id = 0
        self._in_flight: dict[int, _InFlight] = {}
        self._find_id: int | None = None
        self._find_retry_at = now_ms
        self._join_retry_at = now_ms
        self._jitter = jitter or (lambda: random.uniform(1 - BACKOFF_JITTER, 1 + BACKOFF_JITTER))
        self._find_failures = 0  # consecutive FindCoordinator failures: the back-off's exponent
        self._join_failures = 0  # consecutive JoinGroup/SyncGroup attempts that failed with a back-off
        self._step_id: int | None = None  # the JoinGroup or SyncGroup of the current attempt
        self._heartbeat_id: int | None = None
        self._leave_id: int | None = None
        self._last_reset = now_ms
        self._last_send: int | None = None
        self._last_receive: int | None = None
        self._heartbeat_failed = False
        self._last_poll = now_ms
        self._holds_assignment = False  # an assignment was received and not revoked since (Java's snapshot)
        self._unknown_since: int | None = None  # when the coordinator became unknown while one was held
        self._unreachable_nodes: set[int] = set()  # coordinators whose connection failed since then
        self._isolated = False

    # ---------------------------------------------------------------------------------- queries

    @property
    def need_rejoin(self) -> bool:
        """Whether the member must (re)join: never joined, lost, or told that a rebalance started."""
        return self._rejoin_needed

    @property
    def isolated(self) -> bool:
        """Whether the member revoked its assignment because no coordinator was known for longer than
        ``heartbeat_interval_ms`` (:class:`Unreachable`), until its next assignment: its owner must release
        all its work before rejoining. A member that a coordinator dropped (unknown member id, illegal
        generation) is not isolated: it keeps running its work under the cooperative protocols and rejoins
        reporting it, as Java's ``WorkerCoordinator`` does."""
        return self._isolated

    @property
    def joining(self) -> bool:
        """Whether a join the owner asked for is still under way."""
        return self._join_wanted

    def next_deadline_ms(self, now_ms: int) -> int:
        """The latest time the driver may wait before calling :meth:`tick` again."""
        times = [f.deadline_ms for f in self._in_flight.values()]
        if not self.closed:
            known = self.coordinator is not None
            if self._wants_coordinator() and not known and self._find_id is None:
                times.append(self._find_retry_at)
            # A JoinGroup or a heartbeat goes to the coordinator: while none is known their timers are
            # not due (:meth:`_advance` sends neither), and counting a past one would make the driver
            # poll without waiting for as long as the broker stays away.
            joinable = self.phase in (Phase.UNJOINED, Phase.STABLE)
            if known and self._join_wanted and self._rejoin_needed and joinable:
                times.append(self._join_retry_at)
            if self._unknown_since is not None and not self._coordinator_reachable():
                times.append(self._unreachable_deadline(self._unknown_since) + 1)
            if self.phase is Phase.STABLE:
                if known:  # a session runs out against a coordinator; while none is known it is looked for
                    times.append(self._session_deadline() + 1)
                times.append(self._last_poll + self.config.rebalance_timeout_ms + 1)
                if known and self._heartbeat_id is None:
                    times.append(self._next_heartbeat_at())
        return max(now_ms, min(times, default=now_ms + self.config.heartbeat_interval_ms))

    # ----------------------------------------------------------------------------- owner's calls

    def join(self, now_ms: int) -> list[Output]:
        """Join or rejoin if needed (the owner has stopped what it gives up); a no-op once stable."""
        if self.closed or not self._rejoin_needed:
            return []
        self._join_wanted = True
        return self._advance(now_ms)

    def request_rejoin(self, reason: str = "requested") -> list[Output]:
        """Ask for a new generation; heartbeats continue until the owner calls :meth:`join`."""
        if self.closed or self._rejoin_needed:
            self._rejoin_needed = True
            return []
        self._rejoin_needed = True
        return [RejoinRequested(reason)]

    def poll(self, now_ms: int) -> list[Output]:
        """The owner is alive: without this call for ``rebalance_timeout_ms`` the member leaves."""
        self._last_poll = now_ms
        return []

    def leave(self, now_ms: int, reason: str = "the worker is stopping") -> list[Output]:
        """Leave the group for good: LeaveGroup if the coordinator may know this member, then silence.
        :class:`Left` follows when that is done."""
        if self.closed:
            return []
        self.closed = True
        self._join_wanted = False
        out = self._leave_group(now_ms, reason, lost=False)
        if self._leave_id is None:
            out.append(Left())
        return out

    def metadata(self, attempt: int, protocols: Sequence[tuple[str, bytes]], now_ms: int) -> list[Output]:
        """The answer to :class:`MetadataNeeded`: send this attempt's JoinGroup."""
        if attempt != self._attempt or self.phase is not Phase.AWAITING_METADATA or self.closed:
            return []
        coordinator = self.coordinator
        if coordinator is None:  # it went away meanwhile: the attempt restarts once it is found again
            return self._attempt_failed(now_ms, backoff=False)
        request_id = self._track(JoinGroup, now_ms + self.config.join_timeout_ms, coordinator)
        self._step_id = request_id
        self.phase = Phase.JOINING
        return [
            JoinGroup(
                request_id=request_id,
                coordinator=coordinator,
                group_id=self.config.group_id,
                session_timeout_ms=self.config.session_timeout_ms,
                rebalance_timeout_ms=self.config.rebalance_timeout_ms,
                member_id=self.generation.member_id,
                protocol_type=self.config.protocol_type,
                protocols=tuple((name, bytes(data)) for name, data in protocols),
                timeout_ms=self.config.join_timeout_ms,
            )
        ]

    def assignments(self, generation_id: int, assignments: Mapping[str, bytes], now_ms: int) -> list[Output]:
        """The leader's answer to :class:`AssignmentNeeded`: send every member's assignment."""
        if (
            self.phase is not Phase.AWAITING_ASSIGNMENT
            or generation_id != self.generation.generation_id
            or self.closed
        ):
            return []
        return self._sync(now_ms, tuple((mid, bytes(a)) for mid, a in assignments.items()))

    def assignment_failed(self, generation_id: int, message: str, now_ms: int) -> list[Output]:
        """The leader could not assign: this join fails; the owner decides when to try again."""
        if self.phase is not Phase.AWAITING_ASSIGNMENT or generation_id != self.generation.generation_id:
            return []
        return self._fatal(None, f"the leader's assignment failed: {message}")

    # ----------------------------------------------------------------------------- network inputs

    def tick(self, now_ms: int) -> list[Output]:
        """Time passed: expire requests and timers, send what is due."""
        out: list[Output] = []
        for request_id, flight in sorted(self._in_flight.items()):
            if flight.deadline_ms <= now_ms and request_id in self._in_flight:
                if flight.coordinator is not None and flight.coordinator == self.coordinator:
                    out.append(CloseConnection(flight.coordinator))
                out.extend(self.on_failure(request_id, "the request timed out", now_ms, disconnect=True))
        if self.closed:
            return out
        since = self._unknown_since
        if (
            since is not None
            and now_ms > self._unreachable_deadline(since)
            and not self._coordinator_reachable()
        ):
            out.extend(self._unreachable(now_ms, since))
        if self.phase is Phase.STABLE:
            if self.coordinator is not None and now_ms > self._session_deadline():
                # No heartbeat got through for a whole session: the coordinator is presumed gone and looked
                # up again, the generation kept, as Java's AbstractCoordinator does ("session timed out
                # without receiving a heartbeat response"). A coordinator's broker SIGKILLed takes longer
                # than a session to fail over; the new coordinator loads the group with its members and
                # their sessions, so the next heartbeat keeps this member (its tasks running), and an
                # answer that it was dropped (unknown member, illegal generation) ends the generation then.
                # Ending it here instead made every worker of the group drop all its work at once, which
                # then waited scheduled.rebalance.max.delay.ms for "lost" owners (bench/brokers_random.py).
                out.extend(self._coordinator_dead(now_ms))
            elif now_ms - self._last_poll > self.config.rebalance_timeout_ms:
                out.extend(
                    self._leave_group(
                        now_ms, "the worker did not poll within rebalance.timeout.ms", lost=True
                    )
                )
        out.extend(self._advance(now_ms))
        return out

    def on_response(self, request_id: int, result: Result, now_ms: int) -> list[Output]:
        """A response arrived; one for a request the member gave up on is ignored."""
        flight = self._in_flight.pop(request_id, None)
        if flight is None:
            return []
        if flight.coordinator == self.coordinator is not None and result.error_code not in _COORDINATOR_GONE:
            self._coordinator_confirmed()  # it answered as the coordinator: the discovery clock stops
        out: list[Output]
        if isinstance(result, FindCoordinatorResult):
            out = self._on_find(result, now_ms)
        elif isinstance(result, JoinGroupResult):
            out = self._on_join(request_id, result, now_ms)
        elif isinstance(result, SyncGroupResult):
            out = self._on_sync(request_id, result, now_ms)
        elif isinstance(result, HeartbeatResult):
            out = self._on_heartbeat(request_id, result, now_ms)
        else:
            out = self._on_leave(request_id)
        if not self.closed:
            out.extend(self._advance(now_ms))
        return out

    def on_failure(self, request_id: int, message: str, now_ms: int, *, disconnect: bool) -> list[Output]:
        """A request got no response. ``disconnect``: the connection failed (not a mere back-off), so
        the coordinator is presumed gone."""
        flight = self._in_flight.pop(request_id, None)
        if flight is None:
            return []
        out: list[Output] = []
        coordinator_request = flight.coordinator is not None and flight.coordinator == self.coordinator
        if disconnect and flight.coordinator is not None and self._holds_assignment:
            self._unreachable_nodes.add(flight.coordinator.node_id)
        if flight.kind is FindCoordinator:
            self._find_id = None
            self._find_backoff(now_ms)
        elif flight.kind is LeaveGroup:
            out.extend(self._on_leave(request_id))
        elif flight.kind is Heartbeat:
            if request_id == self._heartbeat_id:
                self._heartbeat_id = None
                self._heartbeat_failed = True
            if disconnect and coordinator_request:
                out.extend(self._coordinator_dead(now_ms))
        elif request_id == self._step_id:  # JoinGroup or SyncGroup of the current attempt
            out.extend(self._attempt_failed(now_ms, backoff=True))
            if disconnect and coordinator_request:
                out.extend(self._coordinator_dead(now_ms))
        if not self.closed:
            out.extend(self._advance(now_ms))
        return out

    # --------------------------------------------------------------------------------- handlers

    def _on_find(self, result: FindCoordinatorResult, now_ms: int) -> list[Output]:
        self._find_id = None
        if result.error_code == NONE:
            self.coordinator = Coordinator(result.node_id, result.host, result.port)
            if result.node_id not in self._unreachable_nodes:
                self._coordinator_confirmed()  # discovery succeeded in time: the clock starts again next time
            self._last_reset = now_ms  # a fresh session clock, as Java resets it on discovery
            self._find_failures = 0
            return []
        self._find_backoff(now_ms)
        if result.error_code == GROUP_AUTHORIZATION_FAILED and self._join_wanted:
            return self._fatal(result.error_code, "not authorized to find the group's coordinator")
        return []

    def _on_join(self, request_id: int, result: JoinGroupResult, now_ms: int) -> list[Output]:
        if request_id != self._step_id or self.phase is not Phase.JOINING:
            return []
        self._step_id = None
        code = result.error_code
        if code == NONE:
            if result.protocol_type is not None and result.protocol_type != self.config.protocol_type:
                return self._fatal(
                    INCONSISTENT_GROUP_PROTOCOL,
                    f"JoinGroup answered protocol type {result.protocol_type!r}, "
                    f"not {self.config.protocol_type!r}",
                )
            protocol = result.protocol_name or ""
            self.generation = Generation(result.generation_id, result.member_id, protocol)
            if result.leader == result.member_id:
                self.phase = Phase.AWAITING_ASSIGNMENT
                return [AssignmentNeeded(result.generation_id, result.leader, protocol, result.members)]
            return self._sync(now_ms, ())
        if code == MEMBER_ID_REQUIRED:  # JoinGroup v4+: retry at once with the id the coordinator gave
            self.generation = Generation(-1, result.member_id, None)
            return self._attempt_failed(now_ms, backoff=False)
        if code == UNKNOWN_MEMBER_ID:
            out = self._reset_generation("JoinGroup: unknown member id", keep=False)
            return out + self._attempt_failed(now_ms, backoff=False)
        if code in _COORDINATOR_GONE:
            return self._coordinator_dead(now_ms) + self._attempt_failed(now_ms, backoff=False)
        if code in (REBALANCE_IN_PROGRESS, ILLEGAL_GENERATION):
            return self._attempt_failed(now_ms, backoff=False)
        if code == COORDINATOR_LOAD_IN_PROGRESS:
            return self._attempt_failed(now_ms, backoff=True)
        if code in _FATAL_JOIN:
            return self._fatal(code, f"JoinGroup failed with error code {code}")
        return self._fatal(code, f"JoinGroup failed with unexpected error code {code}")

    def _on_sync(self, request_id: int, result: SyncGroupResult, now_ms: int) -> list[Output]:
        if request_id != self._step_id or self.phase is not Phase.SYNCING:
            return []
        self._step_id = None
        code = result.error_code
        if code == NONE:
            gen = self.generation
            if result.protocol_type is not None and result.protocol_type != self.config.protocol_type:
                return self._fatal(INCONSISTENT_GROUP_PROTOCOL, "SyncGroup answered another protocol type")
            if result.protocol_name is not None and result.protocol_name != gen.protocol:
                return self._fatal(INCONSISTENT_GROUP_PROTOCOL, "SyncGroup answered another protocol")
            self.phase = Phase.STABLE
            self._rejoin_needed = False
            self._join_wanted = False
            self._join_failures = 0
            self._last_reset = now_ms
            self._holds_assignment = True
            self._coordinator_confirmed()
            self._isolated = False
            self._last_poll = now_ms
            self._last_send = None
            self._heartbeat_failed = False
            return [Joined(gen.generation_id, gen.member_id, gen.protocol or "", bytes(result.assignment))]
        self._rejoin_needed = True
        if code == REBALANCE_IN_PROGRESS:
            return self._attempt_failed(now_ms, backoff=False)
        if code == UNKNOWN_MEMBER_ID:
            out = self._reset_generation("SyncGroup: unknown member id", keep=False)
            return out + self._attempt_failed(now_ms, backoff=False)
        if code == ILLEGAL_GENERATION:
            out = self._reset_generation("SyncGroup: illegal generation", keep=True)
            return out + self._attempt_failed(now_ms, backoff=False)
        if code in _COORDINATOR_GONE:
            return self._coordinator_dead(now_ms) + self._attempt_failed(now_ms, backoff=False)
        return self._fatal(code, f"SyncGroup failed with error code {code}")

    def _on_heartbeat(self, request_id: int, result: HeartbeatResult, now_ms: int) -> list[Output]:
        if request_id != self._heartbeat_id:
            return []
        self._heartbeat_id = None
        if self.phase is not Phase.STABLE:
            return []  # the member is rejoining: the answer is about a generation it is leaving
        code = result.error_code
        if code == NONE:
            self._last_receive = now_ms
            return []
        if code == REBALANCE_IN_PROGRESS:
            # Still a member until it rejoins; the heartbeat counts (the coordinator keeps it for the
            # rebalance timeout only if heartbeats keep arriving).
            self._last_receive = now_ms
            return self.request_rejoin("the coordinator started a rebalance")
        self._heartbeat_failed = True
        if code == ILLEGAL_GENERATION:
            return self._reset_generation("Heartbeat: illegal generation", keep=True)
        if code == UNKNOWN_MEMBER_ID:
            return self._reset_generation("Heartbeat: unknown member id", keep=False)
        if code == FENCED_INSTANCE_ID:
            return self._reset_generation("Heartbeat: fenced by another instance", keep=False)
        if code in _COORDINATOR_GONE:
            return self._coordinator_dead(now_ms)
        return []

    def _on_leave(self, request_id: int) -> list[Output]:
        if request_id != self._leave_id:
            return []
        self._leave_id = None
        return [Left()] if self.closed else []

    # ---------------------------------------------------------------------------------- internals

    def _wants_coordinator(self) -> bool:
        return not self.closed and ((self._join_wanted and self._rejoin_needed) or self.phase is Phase.STABLE)

    def _session_deadline(self) -> int:
        last = self._last_reset if self._last_receive is None else max(self._last_receive, self._last_reset)
        return last + self.config.session_timeout_ms

    def _unreachable_deadline(self, since: int) -> int:
        return since + self.config.heartbeat_interval_ms

    def _coordinator_reachable(self) -> bool:
        """A coordinator is known and its connection has not failed since the discovery clock started.

        Java's ``ensureCoordinatorReady`` does not count a coordinator found whose connection failed
        (``client.isUnavailable``): it marks it unknown again and its timer runs on. A SIGKILLed
        coordinator's broker is named by FindCoordinator until the controller fences it, so counting
        it would restart the clock at every lookup and never reach the bound."""
        coordinator = self.coordinator
        return coordinator is not None and coordinator.node_id not in self._unreachable_nodes

    def _coordinator_confirmed(self) -> None:
        self._unknown_since = None
        self._unreachable_nodes.clear()

    def _unreachable(self, now_ms: int, since: int) -> list[Output]:
        """The coordinator stayed unknown past ``heartbeat_interval_ms`` with an assignment held: revoke it.

        Java's rule (``WorkerCoordinator.poll``, KAFKA-9184): a worker whose coordinator discovery does not
        succeed within ``heartbeat.interval.ms`` revokes all its connectors and tasks, under every Connect
        protocol, and rejoins with an empty assignment. A coordinator that cannot be reached may have
        dropped the member and let the leader give its work to others; stopping early is what keeps a task
        from running twice. The generation and member id are kept (Java keeps them): if the same members
        are back in the next round, the leader reassigns the revoked work at once instead of holding it
        ``scheduled.rebalance.max.delay.ms``. The join waits for the owner (:meth:`join`) so that the
        JoinGroup reports the work as stopped.
        """
        self._coordinator_confirmed()
        self._holds_assignment = False
        self._isolated = True
        self._join_wanted = False
        self._rejoin_needed = True
        if self.phase in _ATTEMPT_PHASES:
            self._attempt_failed(now_ms, backoff=False)
        gen = self.generation
        return [Unreachable(gen.generation_id, gen.member_id, now_ms - since)]

    def _next_heartbeat_at(self) -> int:
        last = self._last_reset if self._last_send is None else max(self._last_send, self._last_reset)
        wait = self.config.retry_backoff_ms if self._heartbeat_failed else self.config.heartbeat_interval_ms
        return last + wait

    def _track(self, kind: type[Request], deadline_ms: int, coordinator: Coordinator | None) -> int:
        self._next_id += 1
        self._in_flight[self._next_id] = _InFlight(kind, deadline_ms, coordinator)
        return self._next_id

    def _advance(self, now_ms: int) -> list[Output]:
        """Send whatever the state calls for now."""
        out: list[Output] = []
        if self.closed:
            return out
        coordinator = self.coordinator
        if coordinator is None:
            if self._wants_coordinator() and self._find_id is None and now_ms >= self._find_retry_at:
                timeout = now_ms + self.config.request_timeout_ms
                self._find_id = self._track(FindCoordinator, timeout, None)
                out.append(FindCoordinator(self._find_id, self.config.group_id))
            return out
        if (
            self._join_wanted
            and self._rejoin_needed
            and self.phase in (Phase.UNJOINED, Phase.STABLE)
            and now_ms >= self._join_retry_at
        ):
            self._attempt += 1
            self.phase = Phase.AWAITING_METADATA
            self._heartbeat_id = None  # heartbeats stop while joining; a late answer is ignored
            out.append(MetadataNeeded(self._attempt))
            return out
        if self.phase is Phase.STABLE and self._heartbeat_id is None and now_ms >= self._next_heartbeat_at():
            self._last_send = now_ms
            self._heartbeat_failed = False
            gen = self.generation
            self._heartbeat_id = self._track(Heartbeat, now_ms + self.config.request_timeout_ms, coordinator)
            out.append(
                Heartbeat(
                    self._heartbeat_id, coordinator, self.config.group_id, gen.generation_id, gen.member_id
                )
            )
        return out

    def _sync(self, now_ms: int, assignments: tuple[tuple[str, bytes], ...]) -> list[Output]:
        coordinator = self.coordinator
        if coordinator is None:
            return self._attempt_failed(now_ms, backoff=False)
        gen = self.generation
        self._step_id = self._track(SyncGroup, now_ms + self.config.request_timeout_ms, coordinator)
        self.phase = Phase.SYNCING
        return [
            SyncGroup(
                request_id=self._step_id,
                coordinator=coordinator,
                group_id=self.config.group_id,
                generation_id=gen.generation_id,
                member_id=gen.member_id,
                protocol_type=self.config.protocol_type,
                protocol_name=gen.protocol,
                assignments=assignments,
            )
        ]

    def _attempt_failed(self, now_ms: int, *, backoff: bool) -> list[Output]:
        """This JoinGroup/SyncGroup round is over; the join goes on (at once or after the back-off)."""
        self.phase = Phase.UNJOINED
        self._attempt += 1
        self._step_id = None
        self._rejoin_needed = True
        if backoff:
            self._join_retry_at = now_ms + self._backoff(self._join_failures)
            self._join_failures += 1
        else:
            self._join_retry_at = now_ms
        return []

    def _backoff(self, failures: int) -> int:
        cfg = self.config
        return backoff_ms(failures, cfg.retry_backoff_ms, cfg.retry_backoff_max_ms, self._jitter())

    def _find_backoff(self, now_ms: int) -> None:
        """FindCoordinator failed (no broker reachable, or the coordinator not available yet): the next
        one waits exponentially longer, up to ``retry.backoff.max.ms``."""
        self._find_retry_at = now_ms + self._backoff(self._find_failures)
        self._find_failures += 1

    def _fatal(self, code: int | None, message: str) -> list[Output]:
        self.phase = Phase.UNJOINED
        self._attempt += 1
        self._step_id = None
        self._rejoin_needed = True
        self._join_wanted = False
        return [Failed(code, message)]

    def _coordinator_dead(self, now_ms: int) -> list[Output]:
        """Forget the coordinator; a round under way with it is over."""
        if self.coordinator is None:
            return []
        self.coordinator = None
        self._heartbeat_id = None
        if self._holds_assignment and self._unknown_since is None:
            self._unknown_since = now_ms  # Java's discovery timer (heartbeat.interval.ms) starts here
        self._find_retry_at = min(self._find_retry_at, now_ms)
        if self.phase in _ATTEMPT_PHASES:
            return self._attempt_failed(now_ms, backoff=False)
        return []

    def _reset_generation(self, reason: str, *, keep: bool) -> list[Output]:
        """The member no longer holds its generation (``keep``: it may rejoin under the same id)."""
        old = self.generation
        self.generation = Generation(-1, old.member_id if keep else "", None)
        self._rejoin_needed = True
        if self.phase is Phase.STABLE:
            self.phase = Phase.UNJOINED
            self._heartbeat_id = None
        return [Lost(old.generation_id, old.member_id, reason)] if old.generation_id >= 0 else []

    def _leave_group(self, now_ms: int, reason: str, *, lost: bool) -> list[Output]:
        """LeaveGroup when the coordinator may know this member; the generation is gone either way."""
        out: list[Output] = []
        coordinator = self.coordinator
        member_id = self.generation.member_id
        if coordinator is not None and member_id and self._leave_id is None:
            self._leave_id = self._track(LeaveGroup, now_ms + self.config.request_timeout_ms, coordinator)
            out.append(LeaveGroup(self._leave_id, coordinator, self.config.group_id, member_id, reason))
        if self.phase in _ATTEMPT_PHASES:
            self._attempt += 1
            self._step_id = None
        self.phase = Phase.UNJOINED
        self._heartbeat_id = None
        lost_events = self._reset_generation(reason, keep=False)
        if lost:
            out.extend(lost_events)
        return out
