"""What a classic group member and its transport exchange, as plain values: the group APIs' requests,
their responses, the events the member hands its owner, and the error codes it acts on.

Why apart from ``membership``: these are the vocabulary that ``membership`` (the state machine),
``transport`` (which carries requests over the network and brings responses back) and ``member`` (which
gives the events Connect's meaning) share; the state machine's rules are ``membership``'s. Every value
is frozen; nothing here does I/O.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "COORDINATOR_LOAD_IN_PROGRESS",
    "COORDINATOR_NOT_AVAILABLE",
    "FENCED_INSTANCE_ID",
    "GROUP_AUTHORIZATION_FAILED",
    "GROUP_MAX_SIZE_REACHED",
    "ILLEGAL_GENERATION",
    "INCONSISTENT_GROUP_PROTOCOL",
    "INVALID_GROUP_ID",
    "INVALID_SESSION_TIMEOUT",
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
    "MetadataNeeded",
    "Output",
    "RejoinRequested",
    "Request",
    "Result",
    "SyncGroup",
    "SyncGroupResult",
    "Unreachable",
]

# Kafka protocol error codes the member acts on (the protocol's public error table).
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
ILLEGAL_GENERATION = 22
INCONSISTENT_GROUP_PROTOCOL = 23
INVALID_GROUP_ID = 24
UNKNOWN_MEMBER_ID = 25
INVALID_SESSION_TIMEOUT = 26
REBALANCE_IN_PROGRESS = 27
GROUP_AUTHORIZATION_FAILED = 30
MEMBER_ID_REQUIRED = 79
GROUP_MAX_SIZE_REACHED = 81
FENCED_INSTANCE_ID = 82


@dataclass(frozen=True, slots=True)
class Generation:
    """The member's place in the group: a generation of -1 means it holds none (never joined or lost)."""

    generation_id: int
    member_id: str
    protocol: str | None


NO_GENERATION = Generation(-1, "", None)


@dataclass(frozen=True, slots=True)
class Coordinator:
    """The broker that coordinates the group, as FindCoordinator names it."""

    node_id: int
    host: str
    port: int


# ------------------------------------------------------------------------------------- requests (out)


@dataclass(frozen=True, slots=True)
class FindCoordinator:
    """Ask any broker which one coordinates the group."""

    request_id: int
    group_id: str


@dataclass(frozen=True, slots=True)
class JoinGroup:
    """Join (or rejoin) the group with this member's protocols, most preferred first."""

    request_id: int
    coordinator: Coordinator
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    protocol_type: str
    protocols: tuple[tuple[str, bytes], ...]
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class SyncGroup:
    """Complete a generation: the leader sends every member's assignment, a follower sends none."""

    request_id: int
    coordinator: Coordinator
    group_id: str
    generation_id: int
    member_id: str
    protocol_type: str
    protocol_name: str | None
    assignments: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """Tell the coordinator this member is alive in its generation."""

    request_id: int
    coordinator: Coordinator
    group_id: str
    generation_id: int
    member_id: str


@dataclass(frozen=True, slots=True)
class LeaveGroup:
    """Leave now, so that the others rebalance without waiting for this member's session to expire."""

    request_id: int
    coordinator: Coordinator
    group_id: str
    member_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class CloseConnection:
    """A request to the coordinator timed out: drop the connection, as Java's client disconnects."""

    coordinator: Coordinator


Request = FindCoordinator | JoinGroup | SyncGroup | Heartbeat | LeaveGroup

# --------------------------------------------------------------------------------------- events (out)


@dataclass(frozen=True, slots=True)
class MetadataNeeded:
    """The owner must answer :meth:`Membership.metadata` with its protocols for this attempt's JoinGroup
    (the metadata describes what the owner runs right now, so it is asked for at each JoinGroup)."""

    attempt: int


@dataclass(frozen=True, slots=True)
class AssignmentNeeded:
    """This member leads ``generation_id``: the owner must answer :meth:`Membership.assignments` with every
    member's assignment (or :meth:`Membership.assignment_failed`)."""

    generation_id: int
    leader_id: str
    protocol: str
    members: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Joined:
    """A generation completed: this member's assignment in it, still encoded."""

    generation_id: int
    member_id: str
    protocol: str
    assignment: bytes


@dataclass(frozen=True, slots=True)
class Lost:
    """The member lost its generation (session expiry, poll timeout, UNKNOWN_MEMBER_ID,
    ILLEGAL_GENERATION, FENCED_INSTANCE_ID): what it ran is no longer its own."""

    generation_id: int
    member_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class RejoinRequested:
    """The coordinator started a rebalance; the member keeps its generation until it rejoins."""

    reason: str


@dataclass(frozen=True, slots=True)
class Unreachable:
    """No coordinator was known for longer than ``heartbeat.interval.ms`` while the member held an
    assignment: its owner stops all its connectors and tasks now and the member rejoins reporting none
    once a coordinator answers (Java's ``WorkerCoordinator.poll`` since KAFKA-9184). The generation is
    kept; ``unknown_ms`` is how long the coordinator had been unknown."""

    generation_id: int
    member_id: str
    unknown_ms: int


@dataclass(frozen=True, slots=True)
class Failed:
    """A join failed in a way no retry fixes (or the owner's assignment failed); the member stops trying
    until the owner calls :meth:`Membership.join` again."""

    error_code: int | None
    message: str


@dataclass(frozen=True, slots=True)
class Left:
    """The LeaveGroup of :meth:`Membership.leave` was answered, failed or was not needed."""


Event = MetadataNeeded | AssignmentNeeded | Joined | Lost | RejoinRequested | Unreachable | Failed | Left
Output = Request | CloseConnection | Event

# ------------------------------------------------------------------------------------- responses (in)


@dataclass(frozen=True, slots=True)
class FindCoordinatorResult:
    """A FindCoordinator response (of the group's key)."""

    error_code: int
    node_id: int = -1
    host: str = ""
    port: int = -1


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    """A JoinGroup response; ``members`` (id, metadata) is filled for the leader only."""

    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = None
    leader: str = ""
    member_id: str = ""
    members: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    """A SyncGroup response: this member's assignment."""

    error_code: int
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    """A Heartbeat response."""

    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    """A LeaveGroup response."""

    error_code: int


Result = FindCoordinatorResult | JoinGroupResult | SyncGroupResult | HeartbeatResult | LeaveGroupResult
