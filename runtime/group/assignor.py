"""Who owns a task: the leader's assignment, and which assignor makes it for the protocol the group selected.

Start here to find who runs which connector and task in the next generation. The leader calls
:func:`leader_assign` in onLeaderElected and encodes the result with :mod:`kconnect.runtime.group.protocol`.
Every assignor is a pure function of the members' metadata and the leader's view of the config topic, so
every rule is a table test; each has a module of its own:

* "default" (v0): :mod:`~kconnect.runtime.group.eager_assignor`, Apache Kafka Connect's EagerAssignor:
  every member stopped everything before joining, so the whole cluster is dealt out again round-robin.
* "compatible" (v1), "sessioned" (v2): :mod:`~kconnect.runtime.group.cooperative_assignor`, KIP-415's
  incremental cooperative assignor as Apache Kafka 3.9's IncrementalCooperativeAssignor behaves
  (deferred resolution of imbalance, ``scheduled.rebalance.max.delay.ms``), with the leader's memory
  between rounds kept in an immutable :class:`CooperativeState`.
* "static" (v3, kconnect's; no Apache release has it): :mod:`~kconnect.runtime.group.static_assignor`,
  KIP-987's static assignment: static jobs go to the workers that list them, and the cooperative
  algorithm deals the rest out among the workers without a static assignment.

This module also makes KIP-415's downgrade round (a group moving from a cooperative protocol to
"default"). What all assignors share (Java's string order, the CONFIG_MISMATCH answer) is in
:mod:`~kconnect.runtime.group.assignor_common`.
"""

from __future__ import annotations

from collections.abc import Mapping
from collections.abc import Set as AbstractSet
from dataclasses import replace

from kconnect.runtime.group.assignor_common import frame_of, java_order, mismatch_assignments
from kconnect.runtime.group.cooperative_assignor import CooperativeState, cooperative_assign
from kconnect.runtime.group.eager_assignor import eager_assign
from kconnect.runtime.group.protocol import (
    NO_ERROR,
    V0,
    V1,
    V3,
    ConnectAssignment,
    ProtocolName,
    WorkerState,
    version_for_protocol,
)
from kconnect.runtime.group.static_assignor import STATIC_UNASSIGNED_REASON, static_assign

# CooperativeState (the leader's memory, which leader_assign takes and returns) and
# STATIC_UNASSIGNED_REASON (why its result leaves a job on no worker) are part of leader_assign's contract,
# so its callers find them here.
__all__ = ["STATIC_UNASSIGNED_REASON", "CooperativeState", "leader_assign"]


def leader_assign(
    state: CooperativeState,
    *,
    selected_protocol: ProtocolName,
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    now_ms: int,
    max_delay_ms: int,
    generation: int,
    leaving: AbstractSet[str] = frozenset(),
    last_completed_generation: int | None = None,
    last_protocol: ProtocolName | None = None,
) -> tuple[dict[str, ConnectAssignment], CooperativeState]:
    """The leader's assignment for the protocol the group selected, and the leader's next state.

    ``last_protocol`` is the protocol of the last generation the leader completed as a member (None:
    it has completed none); it decides the downgrade round when this leader did not lead before.

    * "default" (v0): :func:`eager_assign`; except right after a cooperative round computed by this
      leader (KIP-415's downgrade): members still run what they owned, because they prepared the join
      under the cooperative protocol. Every member first gets a v0 assignment with nothing in it, so
      that it releases everything; regular eager assignments follow from the next round on.
    * "compatible" (v1) and "sessioned" (v2): :func:`cooperative_assign` in that version.
    * "static" (v3): :func:`static_assign`. The broker selects it only when every member speaks it; when
      any member does not, it selects "sessioned" and static assignments play no part.

    Raises ValueError (:class:`~kconnect.runtime.group.protocol.ProtocolError`) for a protocol name
    kconnect does not know.
    """
    version = version_for_protocol(selected_protocol)
    if version >= V3:
        return static_assign(
            state,
            leader_id=leader_id,
            members=members,
            leader_config_offset=leader_config_offset,
            connectors=connectors,
            now_ms=now_ms,
            max_delay_ms=max_delay_ms,
            generation=generation,
            leaving=leaving,
            last_completed_generation=last_completed_generation,
            version=version,
        )
    if version >= V1:
        return cooperative_assign(
            state,
            leader_id=leader_id,
            members=members,
            leader_config_offset=leader_config_offset,
            connectors=connectors,
            version=version,
            now_ms=now_ms,
            max_delay_ms=max_delay_ms,
            generation=generation,
            leaving=leaving,
            last_completed_generation=last_completed_generation,
        )
    if not members:
        return {}, state
    frame = frame_of(leader_id, members, leader_config_offset)
    if frame.mismatch:
        return mismatch_assignments(frame, members, V0), state
    eager_state = CooperativeState(previous_version=V0)
    # The leader cannot see from v0 metadata whether members still run cooperatively assigned work, so
    # it judges from its own history: the last round it computed, or the last generation it completed
    # as a member (a new leader of a group being downgraded). A leader with no history at all cannot
    # rule it out either, so it also starts with the empty round (one extra rebalance for a new eager
    # group, the price of never running a task twice).
    led_cooperatively = state.previous_version is not None and state.previous_version >= V1
    was_cooperative = last_protocol is None or version_for_protocol(last_protocol) >= V1
    if state.previous_version != V0 and (led_cooperatively or was_cooperative):
        empty = ConnectAssignment(V0, NO_ERROR, frame.leader, frame.leader_url, frame.config_offset, (), ())
        return {m: empty for m in sorted(members, key=java_order)}, replace(eager_state, downgrade_round=True)
    return eager_assign(leader_id, members, leader_config_offset, connectors, leaving=leaving), eager_state
