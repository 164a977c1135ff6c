"""The KIP-848 seed's group records as values: each record type's key and value, frozen.

Why apart: these types are what the whole group layer passes around (the coordinator's targets, the
reconciler's claims, the leader's memory); their bytes are ``group_record_codec``'s and the fold over the
topic ``group_records``'. Pure data: no I/O, no encoding. See ``group_record_codec`` for the seed's schemas
and where kconnect resolves what the seed leaves broken (the ``ConnectorsTasks`` shape, learners).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from kconnect.runtime.ids import TaskId

__all__ = [
    "KEY_VERSIONS",
    "Assigned",
    "Assignor",
    "ConnectorsTasksKey",
    "ConnectorsTasksValue",
    "CurrentMemberAssignmentKey",
    "CurrentMemberAssignmentValue",
    "GroupConfigurationKey",
    "GroupConfigurationValue",
    "GroupMetadataKey",
    "GroupMetadataValue",
    "Home",
    "Learner",
    "MemberMetadataKey",
    "MemberMetadataValue",
    "RecordKey",
    "RecordValue",
    "TargetAssignmentKey",
    "TargetAssignmentValue",
    "TargetMember",
]


# ---------------------------------------------------------------------------------------------------
# Values


@dataclass(frozen=True, slots=True)
class Assigned:
    """Connectors and tasks, as one ``ConnectorsTasks`` array carries them (sets: order means nothing)."""

    connectors: frozenset[str] = frozenset()
    tasks: frozenset[TaskId] = frozenset()

    def __post_init__(self) -> None:
        # Callers pass lists and tuples too; freezing them keeps equality (and changed_records) honest.
        object.__setattr__(self, "connectors", frozenset(self.connectors))
        object.__setattr__(self, "tasks", frozenset(self.tasks))

    # Set algebra over both halves at once: a reconciliation is revoke = held - share, kept = held & share.
    def __sub__(self, other: Assigned) -> Assigned:
        return Assigned(self.connectors - other.connectors, self.tasks - other.tasks)

    def __and__(self, other: Assigned) -> Assigned:
        return Assigned(self.connectors & other.connectors, self.tasks & other.tasks)

    def __or__(self, other: Assigned) -> Assigned:
        return Assigned(self.connectors | other.connectors, self.tasks | other.tasks)

    def __le__(self, other: Assigned) -> bool:
        return self.connectors <= other.connectors and self.tasks <= other.tasks


@dataclass(frozen=True, slots=True)
class Learner:
    """One task a member learns (warms up) while another member still runs it: the seed's learner task.

    A learner is never an owner: it is listed apart from ``assigned`` in both the target and the member's
    record, so nothing that decides who runs a task (the reconciler's claims, the coordinator's checks)
    ever sees it.
    """

    task: TaskId
    #: The seed's isReady: the member prepared everything that does not touch the task's records.
    ready: bool = False
    #: When the coordinator first asked for this learner (its clock, ms since the epoch): names the
    #: learner and starts its warm-up deadline.
    since_ms: int = 0


@dataclass(frozen=True, slots=True)
class GroupMetadataValue:
    """Record type 3: the group's epoch, bumped whenever the group's membership or metadata changes."""

    epoch: int


@dataclass(frozen=True, slots=True)
class ConnectorsTasksValue:
    """Record type 4: every connector and task the group must run, as of ``epoch``."""

    epoch: int
    assigned: Assigned


@dataclass(frozen=True, slots=True)
class Assignor:
    """One assignor a member supports, with the member's metadata for it (Connect's worker metadata)."""

    name: str
    minimum_version: int
    maximum_version: int
    reason: int
    version: int
    metadata: bytes


@dataclass(frozen=True, slots=True)
class MemberMetadataValue:
    """Record type 5: one member as the group knows it."""

    group_epoch: int
    instance_id: str
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str = ""
    assignors: tuple[Assignor, ...] = ()


@dataclass(frozen=True, slots=True)
class TargetMember:
    """One member's entry in the target assignment; ``metadata`` holds the Connect assignment bytes."""

    member_id: str
    error: int
    assigned: Assigned
    version: int
    metadata: bytes
    #: Tasks this member should learn (tag 0); another member's ``assigned`` still holds each of them.
    learners: frozenset[Learner] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "learners", frozenset(self.learners))


@dataclass(frozen=True, slots=True)
class Home:
    """What a worker ran when it left the group gracefully, so that it gets that work back when it
    returns (a rolling restart moves each task away and back, and nothing else): ``identity`` is the
    worker's ``worker.id`` or, without one, its advertised URL, the names that survive a restart."""

    identity: str
    assigned: Assigned


@dataclass(frozen=True, slots=True)
class TargetAssignmentValue:
    """Record type 6: what every member should run at ``assignment_epoch`` (one record, all members)."""

    assignment_epoch: int
    members: tuple[TargetMember, ...]
    #: The homes of workers that left gracefully and whose work has not all gone back (tag 1 of the
    #: value), sorted by identity.
    homes: tuple[Home, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "homes", tuple(sorted(self.homes, key=lambda h: h.identity)))


@dataclass(frozen=True, slots=True)
class CurrentMemberAssignmentValue:
    """Record type 7: what one member runs now, at ``member_epoch``."""

    member_epoch: int
    error: int
    assigned: Assigned
    version: int
    metadata: bytes
    #: Tasks the member learns, with whether each is ready (tag 0); never part of ``assigned``.
    learners: frozenset[Learner] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "learners", frozenset(self.learners))


@dataclass(frozen=True, slots=True)
class GroupConfigurationValue:
    """Record type 8: group-level configuration as (name, value) pairs, kept sorted by name.

    Sorted because the order carries no meaning and equal configurations must compare and encode equal.
    """

    configurations: tuple[tuple[str, str], ...]

    def __post_init__(self) -> None:
        object.__setattr__(self, "configurations", tuple(sorted(self.configurations)))


# ---------------------------------------------------------------------------------------------------
# Keys


@dataclass(frozen=True, slots=True)
class GroupMetadataKey:
    """Key of record type 3 (the group's epoch): one per group, so the group id is the whole key."""

    group_id: str


@dataclass(frozen=True, slots=True)
class ConnectorsTasksKey:
    """Key of record type 4 (everything the group must run): one per group, so the group id is the key."""

    group_id: str


@dataclass(frozen=True, slots=True)
class MemberMetadataKey:
    """Key of record type 5: the member id is part of the key so that compaction keeps one record per
    member and a tombstone removes just the member that left."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class TargetAssignmentKey:
    """Key of record type 6: one target for the whole group (every member in one record), so the group id
    is the whole key."""

    group_id: str


@dataclass(frozen=True, slots=True)
class CurrentMemberAssignmentKey:
    """Key of record type 7: per member, like ``MemberMetadataKey``, so that each member's current
    assignment compacts and is deleted on its own."""

    group_id: str
    member_id: str


@dataclass(frozen=True, slots=True)
class GroupConfigurationKey:
    """Key of record type 8 (group-level configuration): one per group, so the group id is the whole key."""

    group_id: str


RecordKey = (
    GroupMetadataKey
    | ConnectorsTasksKey
    | MemberMetadataKey
    | TargetAssignmentKey
    | CurrentMemberAssignmentKey
    | GroupConfigurationKey
)
RecordValue = (
    GroupMetadataValue
    | ConnectorsTasksValue
    | MemberMetadataValue
    | TargetAssignmentValue
    | CurrentMemberAssignmentValue
    | GroupConfigurationValue
)

#: Key version (record type) of each key, as the seed numbers them.
KEY_VERSIONS: Mapping[type[Any], int] = MappingProxyType(
    {
        GroupMetadataKey: 3,
        ConnectorsTasksKey: 4,
        MemberMetadataKey: 5,
        TargetAssignmentKey: 6,
        CurrentMemberAssignmentKey: 7,
        GroupConfigurationKey: 8,
    }
)
_VALUE_FOR_KEY: Mapping[type[Any], type[Any]] = MappingProxyType(
    {
        GroupMetadataKey: GroupMetadataValue,
        ConnectorsTasksKey: ConnectorsTasksValue,
        MemberMetadataKey: MemberMetadataValue,
        TargetAssignmentKey: TargetAssignmentValue,
        CurrentMemberAssignmentKey: CurrentMemberAssignmentValue,
        GroupConfigurationKey: GroupConfigurationValue,
    }
)
