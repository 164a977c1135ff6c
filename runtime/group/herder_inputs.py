"""What the herder is handed besides events: a round's outcome as its leader computed it, the coordinating
leader's settings, and what the worker knows of the group after its last completed rebalance.

Why apart from ``herder``: these are plain frozen values that the shell builds (``leader``, ``worker``)
and the herder reads; ``with_overrides`` applies the config topic's static-assignment overrides to the
members' metadata before the coordinator computes with them. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kconnect.runtime.group.handover import WarmupSettings
from kconnect.runtime.group.protocol import ProtocolName, WorkerState
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot

__all__ = ["CoordinatorSettings", "GroupView", "LeaderOutcome", "with_overrides"]


@dataclass(frozen=True, slots=True)
class LeaderOutcome:
    """What the leader's assignor decided for a round beyond the assignments it sends.

    Why an event: the assign callback runs inside the member's join, before the round completes, so what
    it implies for this worker (rejoin after KIP-415's empty downgrade round, report static work nobody
    lists) is handed to the herder, which acts on it when that round completes (``Herder.on_rebalanced``).
    """

    #: The leader sent KIP-415's empty downgrade round: the real eager round must follow at once.
    downgrade_round: bool = False
    unassigned_connectors: frozenset[str] = frozenset()
    unassigned_tasks: frozenset[TaskId] = frozenset()
    #: Why the unassigned static work is not running (the status trace).
    reason: str = ""
    #: ``group.protocol=connect``: the leader runs the generation by reconciliation; it coordinates
    #: these members (member id -> (metadata version, metadata)) once the round completes.
    reconcile: bool = False
    members: Mapping[str, tuple[int, WorkerState]] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class CoordinatorSettings:
    """The worker settings the coordinating leader computes with (``coordinator.CoordinatorInput``)."""

    group_id: str = ""
    max_delay_ms: int = 0
    rebalance_timeout_ms: int = 60000
    configuration: tuple[tuple[str, str], ...] = ()
    #: Warm-up hand-over bounds (``max.warmup.tasks`` and the timeouts); the default is off.
    warmup: WarmupSettings = field(default_factory=WarmupSettings)


def with_overrides(
    members: Mapping[str, tuple[int, WorkerState]], snapshot: ClusterConfigSnapshot
) -> dict[str, tuple[int, WorkerState]]:
    """Members' metadata with the static-assignment overrides written over REST (KIP-987) applied, so a
    changed override reaches the coordinator from the config topic rather than through a JoinGroup round."""
    out: dict[str, tuple[int, WorkerState]] = {}
    for member_id, (version, state) in members.items():
        override = snapshot.static_overrides.get(state.worker_id or "")
        if override is not None:
            tasks, _malformed = TaskId.parse_valid(override.tasks)  # REST refuses malformed ones
            state = replace(state, static_connectors=tuple(override.connectors), static_tasks=tasks)
        out[member_id] = (version, state)
    return out


@dataclass(frozen=True, slots=True)
class GroupView:
    """What this worker knows of the group after its last completed rebalance."""

    generation: int = -1
    member_id: str = ""
    protocol: ProtocolName | None = None
    leader_id: str = ""
    leader_url: str = ""
    config_offset: int = -1
    #: The generation runs by declarative reconciliation (``group.protocol=connect`` on every member).
    reconciling: bool = False

    @property
    def known(self) -> bool:
        """A rebalance completed: generation, leader and protocol are known."""
        return self.generation >= 0
