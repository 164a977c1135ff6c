"""The group member's state machine, replayed without a broker: joins as leader and follower, a leader
change, MEMBER_ID_REQUIRED, rebalances, session and poll-interval expiry, a coordinator that moves, and
a Java worker's golden metadata bytes decoded by the leader."""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.runtime.group import membership as m
from kconnect.runtime.group import protocol
from kconnect.runtime.group.member import leader_assignments
from kconnect.runtime.group.protocol import ConnectAssignment, WorkerState
from kconnect.runtime.group.transport import _decode_join, _encode
from kconnect.runtime.ids import TaskId

CFG = m.MembershipConfig(
    group_id="g",
    session_timeout_ms=10_000,
    heartbeat_interval_ms=3_000,
    rebalance_timeout_ms=60_000,
    request_timeout_ms=40_000,
    retry_backoff_ms=100,
)
B1 = m.Coordinator(1, "b1", 9092)
B2 = m.Coordinator(2, "b2", 9092)
PROTOCOLS = (("sessioned", b"md-2"), ("compatible", b"md-1"), ("default", b"md-0"))

OutT = TypeVar("OutT")


def only(outputs: Sequence[m.Output], kind: type[OutT]) -> OutT:
    """The one output of ``kind`` (and nothing else of a request kind alongside it)."""
    found = [o for o in outputs if isinstance(o, kind)]
    assert len(found) == 1, f"expected one {kind.__name__} in {outputs}"
    return found[0]


def requests(outputs: Sequence[m.Output]) -> list[m.Output]:
    return [o for o in outputs if isinstance(o, m.FindCoordinator | m.JoinGroup | m.SyncGroup | m.Heartbeat)]


class Member:
    """A machine and its clock, with the common steps of a replay."""

    def __init__(self) -> None:
        self.now = 0
        self.m = m.Membership(CFG, self.now, jitter=lambda: 1.0)  # back-offs without their random factor

    def at(self, t: int) -> list[m.Output]:
        self.now = t
        return self.m.tick(t)

    def found(self, find: m.FindCoordinator, coordinator: m.Coordinator = B1) -> list[m.Output]:
        result = m.FindCoordinatorResult(m.NONE, coordinator.node_id, coordinator.host, coordinator.port)
        return self.m.on_response(find.request_id, result, self.now)

    def start_join(self) -> m.JoinGroup:
        """join() up to the JoinGroup on the wire (finding the coordinator if needed)."""
        out = self.m.join(self.now)
        if self.m.coordinator is None:
            out = self.found(only(out, m.FindCoordinator))
        need = only(out, m.MetadataNeeded)
        return only(self.m.metadata(need.attempt, PROTOCOLS, self.now), m.JoinGroup)

    def joined(
        self, join: m.JoinGroup, generation: int, member: str, leader: str, members: Sequence[str] = ()
    ) -> m.Joined:
        """Answer ``join`` (as leader, assigning ``b'a:<id>'`` to each member) and SyncGroup."""
        result = m.JoinGroupResult(
            m.NONE,
            generation,
            "connect",
            "sessioned",
            leader,
            member,
            tuple((mid, b"md") for mid in members),
        )
        out = self.m.on_response(join.request_id, result, self.now)
        if leader == member:
            need = only(out, m.AssignmentNeeded)
            assert [mid for mid, _ in need.members] == list(members)
            out = self.m.assignments(generation, {mid: f"a:{mid}".encode() for mid in members}, self.now)
        sync = only(out, m.SyncGroup)
        done = self.m.on_response(
            sync.request_id,
            m.SyncGroupResult(m.NONE, "connect", "sessioned", f"a:{member}".encode()),
            self.now,
        )
        return only(done, m.Joined)

    def stable(self, generation: int = 1, member: str = "w1", leader: str = "w1") -> None:
        members = ("w1", "w2") if leader == member else ()
        self.joined(self.start_join(), generation, member, leader, members)
        assert self.m.phase is m.Phase.STABLE

    def heartbeat_at(self, t: int) -> m.Heartbeat:
        return only(self.at(t), m.Heartbeat)

    def answer(self, request_id: int, result: m.Result) -> list[m.Output]:
        return self.m.on_response(request_id, result, self.now)


# ------------------------------------------------------------------------------------------- joins


def test_join_as_leader_assigns_every_member_and_syncs_their_assignments() -> None:
    w = Member()
    assert w.m.need_rejoin and w.m.generation == m.NO_GENERATION
    assert w.at(0) == []  # nothing happens before the owner asks to join

    find = only(w.m.join(0), m.FindCoordinator)
    assert find.group_id == "g"
    need = only(w.found(find), m.MetadataNeeded)
    join = only(w.m.metadata(need.attempt, PROTOCOLS, 0), m.JoinGroup)
    assert (join.coordinator, join.member_id, join.protocol_type, join.protocols) == (
        B1,
        "",
        "connect",
        PROTOCOLS,
    )
    assert (join.session_timeout_ms, join.rebalance_timeout_ms) == (10_000, 60_000)
    assert join.timeout_ms == 65_000  # the broker holds a JoinGroup for up to the rebalance timeout

    out = w.answer(
        join.request_id,
        m.JoinGroupResult(m.NONE, 1, "connect", "sessioned", "w1", "w1", (("w1", b"x"), ("w2", b"y"))),
    )
    need_assign = only(out, m.AssignmentNeeded)
    assert need_assign == m.AssignmentNeeded(1, "w1", "sessioned", (("w1", b"x"), ("w2", b"y")))
    assert w.m.phase is m.Phase.AWAITING_ASSIGNMENT
    sync = only(w.m.assignments(1, {"w1": b"A1", "w2": b"A2"}, 0), m.SyncGroup)
    assert (sync.generation_id, sync.member_id, sync.protocol_name) == (1, "w1", "sessioned")
    assert dict(sync.assignments) == {"w1": b"A1", "w2": b"A2"}

    joined = only(
        w.answer(sync.request_id, m.SyncGroupResult(m.NONE, "connect", "sessioned", b"A1")), m.Joined
    )
    assert joined == m.Joined(1, "w1", "sessioned", b"A1")
    assert not w.m.need_rejoin and w.m.phase is m.Phase.STABLE
    assert w.m.generation == m.Generation(1, "w1", "sessioned")


def test_join_as_follower_sends_no_assignments() -> None:
    w = Member()
    join = w.start_join()
    out = w.answer(join.request_id, m.JoinGroupResult(m.NONE, 4, "connect", "sessioned", "w9", "w2", ()))
    sync = only(out, m.SyncGroup)
    assert sync.assignments == () and sync.member_id == "w2"
    assert not [o for o in out if isinstance(o, m.AssignmentNeeded)]
    joined = only(w.answer(sync.request_id, m.SyncGroupResult(m.NONE, None, None, b"mine")), m.Joined)
    assert joined == m.Joined(4, "w2", "sessioned", b"mine")


def test_leader_change_over_two_generations() -> None:
    """w1 leads generation 1; the coordinator starts a rebalance (heartbeat), and w1 follows w2 in 2."""
    w = Member()
    w.stable(generation=1, member="w1", leader="w1")
    hb = w.heartbeat_at(3_000)
    assert (hb.generation_id, hb.member_id, hb.coordinator) == (1, "w1", B1)

    out = w.answer(hb.request_id, m.HeartbeatResult(m.REBALANCE_IN_PROGRESS))
    assert out == [m.RejoinRequested("the coordinator started a rebalance")]
    # Still a member of generation 1 until it rejoins: it keeps heartbeating while the owner prepares.
    assert w.m.need_rejoin and w.m.phase is m.Phase.STABLE and w.m.generation.generation_id == 1
    assert only(w.at(6_000), m.Heartbeat).generation_id == 1

    join = w.start_join()
    assert join.member_id == "w1"  # rejoins under its member id
    assert w.joined(join, 2, "w1", "w2") == m.Joined(2, "w1", "sessioned", b"a:w1")
    assert w.m.generation == m.Generation(2, "w1", "sessioned")

    # And back: the next generation elects w1 again, which now must assign.
    w.m.request_rejoin("config changed")
    join = w.start_join()
    assert w.joined(join, 3, "w1", "w1", ("w1", "w2")).generation_id == 3


def test_member_id_required_retries_at_once_with_the_given_id() -> None:
    w = Member()
    first = w.start_join()
    assert first.member_id == ""
    out = w.answer(first.request_id, m.JoinGroupResult(m.MEMBER_ID_REQUIRED, member_id="w1-abc"))
    need = only(out, m.MetadataNeeded)
    assert w.m.generation == m.Generation(-1, "w1-abc", None)
    assert not [o for o in out if isinstance(o, m.Lost)]  # it never held a generation
    second = only(w.m.metadata(need.attempt, PROTOCOLS, w.now), m.JoinGroup)
    assert second.member_id == "w1-abc"
    assert w.joined(second, 0, "w1-abc", "w1-abc", ("w1-abc",)).generation_id == 0


def test_a_stale_metadata_answer_is_ignored() -> None:
    w = Member()
    w.start_join()
    assert w.m.metadata(1, PROTOCOLS, 0) == []  # attempt 1's JoinGroup is already out


# ------------------------------------------------------------------------------------- rebalances


def test_rebalance_in_progress_on_sync_starts_a_new_join_at_once() -> None:
    w = Member()
    join = w.start_join()
    sync = only(
        w.answer(join.request_id, m.JoinGroupResult(m.NONE, 1, None, "sessioned", "x", "w1")), m.SyncGroup
    )
    out = w.answer(sync.request_id, m.SyncGroupResult(m.REBALANCE_IN_PROGRESS))
    only(out, m.MetadataNeeded)
    assert w.m.need_rejoin and w.m.generation.generation_id == 1  # keeps its generation


@pytest.mark.parametrize(
    ("code", "lost", "member_after", "coordinator_after", "rejoin"),
    [
        (m.NONE, False, "w1", B1, False),
        (m.REBALANCE_IN_PROGRESS, False, "w1", B1, True),
        (m.ILLEGAL_GENERATION, True, "w1", B1, True),
        (m.UNKNOWN_MEMBER_ID, True, "", B1, True),
        (m.FENCED_INSTANCE_ID, True, "", B1, True),
        (m.NOT_COORDINATOR, False, "w1", None, False),
        (m.COORDINATOR_NOT_AVAILABLE, False, "w1", None, False),
        (m.GROUP_AUTHORIZATION_FAILED, False, "w1", B1, False),
    ],
)
def test_heartbeat_answers(
    code: int, lost: bool, member_after: str, coordinator_after: m.Coordinator | None, rejoin: bool
) -> None:
    w = Member()
    w.stable()
    hb = w.heartbeat_at(3_000)
    out = w.answer(hb.request_id, m.HeartbeatResult(code))
    assert any(isinstance(o, m.Lost) for o in out) == lost
    assert w.m.generation.member_id == member_after
    assert (w.m.generation.generation_id < 0) == lost
    assert w.m.coordinator == coordinator_after
    assert w.m.need_rejoin == rejoin
    if coordinator_after is None:  # a stable member looks for the coordinator at once
        only(out, m.FindCoordinator)


# ------------------------------------------------------------------------------------ expiry


def test_session_expiry_without_a_successful_heartbeat_looks_for_the_coordinator_again() -> None:
    """As Java's AbstractCoordinator: the coordinator is presumed gone, the generation kept (a coordinator
    failover takes longer than a session; the new one knows the member): no Lost, a FindCoordinator."""
    w = Member()
    w.stable()
    hb = w.heartbeat_at(3_000)
    assert w.at(9_000) == []  # the heartbeat is still out: no second one
    assert w.m.next_deadline_ms(9_000) <= 10_001
    assert w.at(10_000) == []  # exactly one session: not yet
    out = w.at(10_001)
    assert not any(isinstance(o, m.Lost) for o in out)
    assert w.m.generation.generation_id == 1 and w.m.generation.member_id == "w1"
    assert w.m.coordinator is None and w.m.phase is m.Phase.STABLE and not w.m.need_rejoin
    find = only(out, m.FindCoordinator)
    assert w.answer(hb.request_id, m.HeartbeatResult(m.NONE)) == []  # an answer from the old one: ignored
    assert w.at(13_000) == []  # still looking (within heartbeat.interval.ms): no Lost, nothing revoked
    w.found(find, B2)  # the new coordinator, a fresh session clock
    hb2 = w.heartbeat_at(16_000)
    assert hb2.coordinator == B2 and hb2.generation_id == 1 and hb2.member_id == "w1"
    assert w.answer(hb2.request_id, m.HeartbeatResult(m.NONE)) == []
    assert w.m.phase is m.Phase.STABLE and w.m.generation.generation_id == 1


def test_after_session_expiry_a_coordinator_that_dropped_the_member_ends_the_generation() -> None:
    w = Member()
    w.stable()
    w.heartbeat_at(3_000)
    find = only(w.at(10_001), m.FindCoordinator)
    w.found(find, B2)
    hb = w.heartbeat_at(13_001)
    out = w.answer(hb.request_id, m.HeartbeatResult(m.UNKNOWN_MEMBER_ID))
    assert only(out, m.Lost) == m.Lost(1, "w1", "Heartbeat: unknown member id")
    assert w.m.generation == m.NO_GENERATION and w.m.need_rejoin
    # Dropped by a coordinator is not isolated: under the cooperative protocols its owner keeps its work
    # and rejoins reporting it (Java's WorkerCoordinator), the leader revoking duplicates.
    assert not w.m.isolated


def test_successful_heartbeats_keep_the_session() -> None:
    w = Member()
    w.stable()
    for t in range(3_000, 60_000, 3_000):
        w.m.poll(t)
        hb = w.heartbeat_at(t)
        assert w.answer(hb.request_id, m.HeartbeatResult(m.NONE)) == []
    assert w.m.phase is m.Phase.STABLE and not w.m.need_rejoin


def test_poll_interval_expiry_leaves_the_group() -> None:
    """The owner stopped calling poll (a stuck herder): after rebalance.timeout.ms the member leaves, so
    the others rebalance without it, though its heartbeats were fine."""
    w = Member()
    w.stable()
    t = 0
    while t < 60_000:
        t += 3_000
        hb = w.heartbeat_at(t)
        w.answer(hb.request_id, m.HeartbeatResult(m.NONE))
    out = w.at(60_001)
    leave = only(out, m.LeaveGroup)
    assert (leave.coordinator, leave.member_id) == (B1, "w1")
    assert only(out, m.Lost).generation_id == 1
    assert w.m.need_rejoin and w.m.generation == m.NO_GENERATION
    assert w.answer(leave.request_id, m.LeaveGroupResult(m.NONE)) == []
    # Back to life: the owner rejoins as a new member.
    assert w.start_join().member_id == ""


def test_poll_keeps_the_member_in() -> None:
    w = Member()
    w.stable()
    for t in range(3_000, 120_000, 3_000):
        w.m.poll(t)
        w.answer(w.heartbeat_at(t).request_id, m.HeartbeatResult(m.NONE))
    assert w.m.generation.generation_id == 1


# ---------------------------------------------------------------------------- coordinator moves


def test_coordinator_move_while_stable_keeps_the_generation() -> None:
    w = Member()
    w.stable()
    hb = w.heartbeat_at(3_000)
    find = only(w.answer(hb.request_id, m.HeartbeatResult(m.NOT_COORDINATOR)), m.FindCoordinator)
    assert w.found(find, B2) == []
    assert w.m.coordinator == B2 and w.m.generation.generation_id == 1 and not w.m.need_rejoin
    hb2 = only(w.at(3_100), m.Heartbeat)  # a failed heartbeat retries after the back-off
    assert (hb2.coordinator, hb2.generation_id) == (B2, 1)


def test_coordinator_lost_during_join_finds_it_again_and_retries() -> None:
    w = Member()
    join = w.start_join()
    out = w.m.on_failure(join.request_id, "connection reset", w.now, disconnect=True)
    find = only(out, m.FindCoordinator)
    assert w.m.coordinator is None and w.m.phase is m.Phase.UNJOINED
    w.now = 50
    assert [o for o in w.found(find, B2) if isinstance(o, m.MetadataNeeded)] == []  # back-off first
    need = only(w.at(100), m.MetadataNeeded)
    join2 = only(w.m.metadata(need.attempt, PROTOCOLS, w.now), m.JoinGroup)
    assert join2.coordinator == B2
    # The first JoinGroup's late answer belongs to an abandoned attempt.
    assert w.answer(join.request_id, m.JoinGroupResult(m.NONE, 1, None, "sessioned", "w1", "w1")) == []


def test_not_coordinator_on_join_finds_the_new_one() -> None:
    w = Member()
    join = w.start_join()
    find = only(w.answer(join.request_id, m.JoinGroupResult(m.NOT_COORDINATOR)), m.FindCoordinator)
    need = only(w.found(find, B2), m.MetadataNeeded)
    assert only(w.m.metadata(need.attempt, PROTOCOLS, w.now), m.JoinGroup).coordinator == B2


def test_a_sync_that_times_out_drops_the_connection_and_finds_the_coordinator() -> None:
    w = Member()
    join = w.start_join()
    sync = only(
        w.answer(join.request_id, m.JoinGroupResult(m.NONE, 1, None, "sessioned", "x", "w1")), m.SyncGroup
    )
    assert w.at(39_999) == []
    out = w.at(40_000)
    assert out[0] == m.CloseConnection(B1)
    only(out, m.FindCoordinator)
    assert w.m.coordinator is None and w.m.phase is m.Phase.UNJOINED and w.m.joining
    assert w.answer(sync.request_id, m.SyncGroupResult(m.NONE)) == []  # given up on


def test_find_coordinator_failures_back_off() -> None:
    w = Member()
    find = only(w.m.join(0), m.FindCoordinator)
    assert w.m.on_failure(find.request_id, "no broker", 0, disconnect=False) == []
    assert w.at(99) == []
    only(w.at(100), m.FindCoordinator)


@pytest.mark.parametrize(
    ("failures", "initial", "ceiling", "factor", "expected"),
    [
        (0, 100, 1000, 1.0, 100),  # the first retry waits retry.backoff.ms
        (1, 100, 1000, 1.0, 200),
        (2, 100, 1000, 1.0, 400),
        (3, 100, 1000, 1.0, 800),
        (4, 100, 1000, 1.0, 1000),  # capped at retry.backoff.max.ms
        (50, 100, 1000, 1.0, 1000),
        (10_000, 100, 1000, 1.0, 1000),  # no overflow however long the outage
        (3, 100, 1000, 0.8, 640),  # the jitter scales the wait...
        (2, 100, 1000, 1.2, 480),
        (4, 100, 1000, 1.2, 1000),  # ...never past the ceiling
        (0, 100, 100, 1.2, 100),  # a ceiling not above the start: a fixed wait, as Java's
        (5, 100, 50, 0.8, 100),
        (3, 0, 1000, 1.0, 8),  # retry.backoff.ms=0 still grows from 1 ms
        (2, 50, 30_000, 1.0, 200),
    ],
)
def test_backoff_grows_exponentially_to_the_ceiling(
    failures: int, initial: int, ceiling: int, factor: float, expected: int
) -> None:
    assert m.backoff_ms(failures, initial, ceiling, factor) == expected


def test_default_jitter_stays_within_a_fifth_of_the_wait() -> None:
    waits = set()
    for _ in range(200):
        machine = m.Membership(CFG, 0)
        find = only(machine.join(0), m.FindCoordinator)
        machine.on_failure(find.request_id, "no broker", 0, disconnect=True)
        waits.add(machine.next_deadline_ms(0))  # the first back-off: 100 ms +- 20 %
    assert min(waits) >= 80 and max(waits) <= 120 and len(waits) > 5, sorted(waits)


def _outage(w: Member, until: int, out: list[m.Output]) -> tuple[list[int], list[m.Output]]:
    """Drive ``w`` as the worker would while no broker answers: every FindCoordinator fails at once, the
    transport sleeps until :meth:`next_deadline_ms`, the herder asks to join again. The times at which the
    member asked for the coordinator, and the outputs of the last wake-up (not yet answered)."""
    asked: list[int] = []
    while w.now < until:
        out = out + w.m.join(w.now)
        while finds := [o for o in out if isinstance(o, m.FindCoordinator)]:
            asked.append(w.now)
            out = w.m.on_failure(finds[0].request_id, "no broker", w.now, disconnect=True)
        wake = w.m.next_deadline_ms(w.now)
        assert wake > w.now, f"the transport would poll without waiting at {w.now} (phase {w.m.phase})"
        out = w.at(wake)
    return asked, out


def test_a_stable_member_that_loses_its_broker_waits_between_tries() -> None:
    w = Member()
    w.joined(w.start_join(), 1, "w1", "w1")
    beat = only(w.at(3_000), m.Heartbeat)
    # The broker dies: the heartbeat's connection fails; the session then expires with no coordinator.
    out = w.m.on_failure(beat.request_id, "connection refused", 3_000, disconnect=True)
    assert w.m.coordinator is None
    asked, _ = _outage(w, 50_000, out)  # within rebalance.timeout.ms (the worker is not polled here)
    gaps = [b - a for a, b in itertools.pairwise(asked)]
    assert gaps[:5] == [100, 200, 400, 800, 1000], gaps
    assert set(gaps[5:]) == {1000}, gaps
    # Past heartbeat.interval.ms with no coordinator it revoked its assignment (Java's WorkerCoordinator.poll,
    # KAFKA-9184), keeping its generation and member id, and waits for its owner before rejoining.
    assert w.m.isolated and w.m.generation.generation_id == 1 and w.m.need_rejoin


def _lose_coordinator(w: Member, t: int) -> list[m.Output]:
    """The heartbeat sent at ``t`` fails with a disconnect: the coordinator is unknown from ``t``."""
    beat = w.heartbeat_at(t)
    out = w.m.on_failure(beat.request_id, "connection refused", t, disconnect=True)
    assert w.m.coordinator is None and not any(isinstance(o, m.Lost | m.Unreachable) for o in out)
    return out


def _find_fails(w: Member, out: list[m.Output]) -> list[m.Output]:
    """Every FindCoordinator among ``out`` is answered COORDINATOR_NOT_AVAILABLE (a failover under way)."""
    events = [o for o in out if not isinstance(o, m.FindCoordinator)]
    while finds := [o for o in out if isinstance(o, m.FindCoordinator)]:
        out = w.answer(finds[0].request_id, m.FindCoordinatorResult(m.COORDINATOR_NOT_AVAILABLE, -1, "", -1))
        events += [o for o in out if not isinstance(o, m.FindCoordinator)]
    return events


def _unknown_until(w: Member, until: int, out: list[m.Output]) -> list[m.Output]:
    """Drive the member, as its transport would, while no coordinator is found, up to ``until``."""
    seen = _find_fails(w, out)
    while (wake := w.m.next_deadline_ms(w.now)) <= until:
        assert wake > w.now, f"the transport would poll without waiting at {w.now}"
        seen += _find_fails(w, w.at(wake))
    return seen


def test_a_coordinator_unknown_for_less_than_the_heartbeat_interval_keeps_the_work() -> None:
    w = Member()
    w.stable()
    out = _lose_coordinator(w, 3_000)
    seen = _unknown_until(w, 3_000 + CFG.heartbeat_interval_ms, out)  # exactly the bound: not past it
    assert not any(isinstance(o, m.Unreachable | m.Lost) for o in seen), seen
    assert not w.m.isolated and not w.m.need_rejoin and w.m.phase is m.Phase.STABLE
    assert w.m.next_deadline_ms(w.now) <= 3_000 + CFG.heartbeat_interval_ms + 1  # the driver wakes for it


def test_a_coordinator_unknown_past_the_heartbeat_interval_revokes_everything_and_rejoins() -> None:
    w = Member()
    w.stable()
    out = _lose_coordinator(w, 3_000)
    seen = _unknown_until(w, 6_001, out)
    assert [o for o in seen if isinstance(o, m.Unreachable)] == [m.Unreachable(1, "w1", 3_001)]
    assert w.m.isolated and w.m.need_rejoin
    assert w.m.generation == m.Generation(1, "w1", "sessioned")  # kept, as Java keeps it
    # It does not rejoin on its own (the JoinGroup must report the work stopped): the owner releases
    # everything, then asks to join; the same member id goes with the JoinGroup.
    seen = _unknown_until(w, 9_000, [])
    assert not any(isinstance(o, m.MetadataNeeded | m.Unreachable) for o in seen), seen
    out = w.m.join(w.now)
    while not (finds := [o for o in out if isinstance(o, m.FindCoordinator)]):
        out = w.at(w.m.next_deadline_ms(w.now))
    need = only(w.found(only(finds, m.FindCoordinator), B2), m.MetadataNeeded)
    join = only(w.m.metadata(need.attempt, PROTOCOLS, w.now), m.JoinGroup)
    assert join.member_id == "w1"
    assert w.joined(join, 2, "w1", "w2").generation_id == 2
    assert not w.m.isolated  # a new assignment: the clock starts afresh with the next loss
    out = _lose_coordinator(w, w.now + CFG.heartbeat_interval_ms)
    assert not w.m.isolated


def test_a_coordinator_found_in_between_resets_the_clock() -> None:
    w = Member()
    w.stable()
    out = _lose_coordinator(w, 3_000)
    _unknown_until(w, 5_499, out)  # FindCoordinator at 3,000, 3,100, 3,300, 3,700 and 4,500 failed
    find = only(w.at(w.m.next_deadline_ms(w.now)), m.FindCoordinator)
    assert w.now == 5_500
    w.found(find, B2)  # found after 2.5 s: in time
    assert w.m.coordinator == B2 and not w.m.isolated
    out = _lose_coordinator(w, w.now + CFG.heartbeat_interval_ms)  # lost again at once
    lost_at = w.now
    seen = _unknown_until(w, lost_at + CFG.heartbeat_interval_ms, out)  # 3 s more: 5.5 s in all, not 3 s
    assert not any(isinstance(o, m.Unreachable) for o in seen) and not w.m.isolated
    seen = _unknown_until(w, lost_at + CFG.heartbeat_interval_ms + 1, [])
    assert any(isinstance(o, m.Unreachable) for o in seen) and w.m.isolated


def test_a_coordinator_found_but_refusing_connections_does_not_stop_the_clock() -> None:
    """A SIGKILLed coordinator's broker is still named by FindCoordinator until the controller fences it:
    finding it is not reaching it (Java's ensureCoordinatorReady: ``client.isUnavailable``)."""
    w = Member()
    w.stable()
    out = _lose_coordinator(w, 3_000)
    seen: list[m.Output] = []
    while not w.m.isolated and w.now < 10_000:
        for o in out:
            if isinstance(o, m.FindCoordinator):
                w.found(o, B1)  # the dead one again
                beat = w.heartbeat_at(w.m.next_deadline_ms(w.now))
                seen += w.m.on_failure(beat.request_id, "connection refused", w.now, disconnect=True)
        seen += [o for o in out if isinstance(o, m.Unreachable)]
        out = w.at(w.m.next_deadline_ms(w.now))
    seen += [o for o in out if isinstance(o, m.Unreachable)]
    assert only(seen, m.Unreachable).unknown_ms == CFG.heartbeat_interval_ms + 1
    assert w.now == 6_001 and w.m.isolated


def test_a_coordinator_that_answers_stops_the_clock() -> None:
    w = Member()
    w.stable()
    out = _lose_coordinator(w, 3_000)
    w.found(only(out, m.FindCoordinator), B1)  # the same broker, back (a connection reset, say)
    beat = w.heartbeat_at(w.m.next_deadline_ms(w.now))
    assert w.answer(beat.request_id, m.HeartbeatResult(m.NONE)) == []
    assert not any(isinstance(o, m.Unreachable) for o in w.at(20_000)) and not w.m.isolated


def test_a_member_holding_no_assignment_has_nothing_to_revoke() -> None:
    w = Member()
    out = w.m.join(0)
    _unknown_until(w, 30_000, out)  # no coordinator ever found while joining for the first time
    assert not w.m.isolated


def test_a_coordinator_lost_during_a_cooperative_rejoin_revokes_the_work_still_held() -> None:
    w = Member()
    w.stable()
    w.now = 3_000
    w.m.request_rejoin("a new connector")
    need = only(w.m.join(w.now), m.MetadataNeeded)
    join = only(w.m.metadata(need.attempt, PROTOCOLS, w.now), m.JoinGroup)
    out = w.m.on_failure(join.request_id, "connection reset", w.now, disconnect=True)
    assert w.m.coordinator is None
    seen = _unknown_until(w, 6_001, out)
    assert only(seen, m.Unreachable).generation_id == 1 and w.m.isolated and not w.m.joining


def test_a_member_joining_without_a_broker_waits_between_tries() -> None:
    w = Member()
    asked, _ = _outage(w, 30_000, w.m.join(0))
    assert len(asked) < 35, asked  # about one a second once at the ceiling, not one per poll
    assert asked[-1] - asked[-2] == 1000


def test_the_backoff_starts_over_once_the_coordinator_is_found() -> None:
    w = Member()
    _, out = _outage(w, 10_000, w.m.join(0))
    find = only(out, m.FindCoordinator)
    need = only(w.found(find), m.MetadataNeeded)
    join = only(w.m.metadata(need.attempt, PROTOCOLS, w.now), m.JoinGroup)
    # The coordinator goes again: finding it starts from retry.backoff.ms, not from the ceiling.
    find = only(
        w.m.on_failure(join.request_id, "connection refused", w.now, disconnect=True), m.FindCoordinator
    )
    start = w.now
    w.m.on_failure(find.request_id, "no broker", start, disconnect=True)
    assert w.m.next_deadline_ms(start) == start + 100


def test_join_retries_after_load_in_progress_back_off_exponentially() -> None:
    w = Member()
    join = w.start_join()
    waits = []
    for _ in range(6):
        w.answer(join.request_id, m.JoinGroupResult(m.COORDINATOR_LOAD_IN_PROGRESS))
        wake = w.m.next_deadline_ms(w.now)
        waits.append(wake - w.now)
        need = only(w.at(wake), m.MetadataNeeded)
        join = only(w.m.metadata(need.attempt, PROTOCOLS, w.now), m.JoinGroup)
    assert waits == [100, 200, 400, 800, 1000, 1000]
    w.joined(join, 1, "w1", "w1")
    w.m.request_rejoin()  # a later round starts from retry.backoff.ms again
    need = only(w.m.join(w.now), m.MetadataNeeded)
    join = only(w.m.metadata(need.attempt, PROTOCOLS, w.now), m.JoinGroup)
    w.answer(join.request_id, m.JoinGroupResult(m.COORDINATOR_LOAD_IN_PROGRESS))
    assert w.m.next_deadline_ms(w.now) - w.now == 100


# -------------------------------------------------------------------------------- fatal, leave


def test_fatal_join_error_stops_until_the_owner_asks_again() -> None:
    w = Member()
    join = w.start_join()
    out = w.answer(join.request_id, m.JoinGroupResult(m.INCONSISTENT_GROUP_PROTOCOL))
    assert only(out, m.Failed).error_code == m.INCONSISTENT_GROUP_PROTOCOL
    assert w.at(10_000) == [] and w.m.need_rejoin and not w.m.joining
    only(w.m.join(10_000), m.MetadataNeeded)


def test_failed_leader_assignment_fails_the_join() -> None:
    w = Member()
    join = w.start_join()
    w.answer(join.request_id, m.JoinGroupResult(m.NONE, 1, None, "sessioned", "w1", "w1", (("w1", b""),)))
    assert only(w.m.assignment_failed(1, "boom", w.now), m.Failed).message.endswith("boom")
    assert w.m.phase is m.Phase.UNJOINED


def test_protocol_type_mismatch_is_fatal() -> None:
    w = Member()
    join = w.start_join()
    out = w.answer(join.request_id, m.JoinGroupResult(m.NONE, 1, "consumer", "range", "w1", "w1"))
    assert only(out, m.Failed).error_code == m.INCONSISTENT_GROUP_PROTOCOL


def test_leave_sends_leave_group_once_and_then_nothing() -> None:
    w = Member()
    w.stable()
    out = w.m.leave(1_000)
    leave = only(out, m.LeaveGroup)
    assert (leave.member_id, leave.reason) == ("w1", "the worker is stopping")
    assert w.m.generation == m.NO_GENERATION and w.m.closed
    assert w.at(50_000) == [m.CloseConnection(B1), m.Left()]  # unanswered: given up after the timeout
    assert w.m.leave(50_000) == [] and w.m.join(50_000) == [] and w.at(100_000) == []


def test_leave_before_joining_sends_nothing() -> None:
    w = Member()
    assert w.m.leave(0) == [m.Left()]


# --------------------------------------------------------------------------- randomized replays

_JOIN_ERRORS = [
    m.REBALANCE_IN_PROGRESS,
    m.UNKNOWN_MEMBER_ID,
    m.ILLEGAL_GENERATION,
    m.NOT_COORDINATOR,
    m.COORDINATOR_NOT_AVAILABLE,
    m.COORDINATOR_LOAD_IN_PROGRESS,
    m.MEMBER_ID_REQUIRED,
]
_SYNC_ERRORS = [
    m.REBALANCE_IN_PROGRESS,
    m.UNKNOWN_MEMBER_ID,
    m.ILLEGAL_GENERATION,
    m.NOT_COORDINATOR,
    m.COORDINATOR_NOT_AVAILABLE,
]


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("join"), st.sampled_from(_JOIN_ERRORS)),
            st.tuples(st.just("sync"), st.sampled_from(_SYNC_ERRORS)),
            st.tuples(st.just("drop"), st.booleans()),
        ),
        max_size=12,
    ),
    st.booleans(),
)
def test_any_run_of_retriable_errors_ends_in_one_joined_generation(
    faults: list[tuple[str, object]], leads: bool
) -> None:
    """Whatever retriable errors the coordinator answers, the join goes on by itself (no owner call),
    never has two requests of a round out at once, and completes once the coordinator cooperates."""
    w = Member()
    pending = list(w.m.join(0))
    faults = list(faults)
    joined: list[m.Joined] = []
    member = "w1"
    for _step in range(200):
        if joined:
            break
        outstanding = requests(pending)
        assert len([o for o in outstanding if isinstance(o, m.JoinGroup | m.SyncGroup)]) <= 1
        if not pending:
            pending = w.at(w.now + 100)
            continue
        item = pending.pop(0)
        if isinstance(item, m.FindCoordinator):
            pending += w.found(item)
        elif isinstance(item, m.MetadataNeeded):
            pending += w.m.metadata(item.attempt, PROTOCOLS, w.now)
        elif isinstance(item, m.AssignmentNeeded):
            pending += w.m.assignments(item.generation_id, {member: b"A"}, w.now)
        elif isinstance(item, m.JoinGroup):
            if faults and faults[0][0] in ("join", "drop"):
                kind, detail = faults.pop(0)
                if kind == "drop":
                    pending += w.m.on_failure(item.request_id, "dropped", w.now, disconnect=bool(detail))
                else:
                    assert isinstance(detail, int)
                    pending += w.answer(item.request_id, m.JoinGroupResult(detail, member_id=member))
            else:
                leader = member if leads else "other"
                pending += w.answer(
                    item.request_id, m.JoinGroupResult(m.NONE, 7, "connect", "sessioned", leader, member)
                )
        elif isinstance(item, m.SyncGroup):
            if faults and faults[0][0] == "sync":
                _kind, detail = faults.pop(0)
                assert isinstance(detail, int)
                pending += w.answer(item.request_id, m.SyncGroupResult(detail))
            else:
                pending += w.answer(item.request_id, m.SyncGroupResult(m.NONE, None, None, b"A"))
        elif isinstance(item, m.Joined):
            joined.append(item)
        else:
            assert not isinstance(item, m.Failed), item
    assert joined == [m.Joined(7, member, "sessioned", b"A")]
    assert w.m.phase is m.Phase.STABLE and not w.m.need_rejoin


# -------------------------------------------------------------------------- a Java member's bytes


def _golden(name: str) -> bytes:
    path = Path(__file__).resolve().parents[1] / "golden" / "connect_protocol.txt"
    for line in path.read_text().splitlines():
        if line.startswith(name + " "):
            return bytes.fromhex(line.split()[1])
    raise KeyError(name)


def test_the_leader_decodes_a_java_members_golden_metadata() -> None:
    """A Java 3.9 worker joins with ``sessioned`` metadata (v2, written by Apache Kafka's own serializer):
    the leader hands the decoded state to the assignor and the Java member's assignment goes out in
    SyncGroup as bytes it can read."""
    java_md = _golden("join_sessioned_0_sessioned")
    kc_state = WorkerState("http://kc:8083/", 13)
    kc_md = dict(protocol.join_protocols("sessioned", kc_state))["sessioned"]
    seen: dict[str, tuple[int, WorkerState]] = {}

    def assign(
        leader: str, protocol_name: str, members: Mapping[str, tuple[int, WorkerState]]
    ) -> dict[str, ConnectAssignment]:
        seen.update(members)
        return {
            mid: ConnectAssignment(2, protocol.NO_ERROR, leader, "http://kc:8083/", 13, (f"c-{mid}",), ())
            for mid in members
        }

    w = Member()
    join = w.start_join()
    out = w.answer(
        join.request_id,
        m.JoinGroupResult(
            m.NONE, 3, "connect", "sessioned", "kc-1", "kc-1", (("kc-1", kc_md), ("java-1", java_md))
        ),
    )
    need = only(out, m.AssignmentNeeded)
    payload = leader_assignments(assign, need.leader_id, need.protocol, need.members)
    version, java_state = seen["java-1"]
    assert version == 2
    assert (java_state.url, java_state.config_offset) == ("http://w2:8083/", 13)
    assert java_state.allocation is not None
    assert java_state.allocation.connectors == ("c1",) and java_state.allocation.tasks == (TaskId("c1", 0),)
    assert seen["kc-1"] == (2, kc_state)

    sync = only(w.m.assignments(need.generation_id, payload, w.now), m.SyncGroup)
    sent = dict(sync.assignments)
    assert protocol.decode_assignment(sent["java-1"]).connectors == ("c-java-1",)
    assert sent["java-1"][:2] == b"\x00\x02"  # the v2 header a Java worker reads


def test_the_leader_hands_the_assignor_a_typed_protocol_name_and_refuses_an_unknown_one() -> None:
    """The selected name read off JoinGroup reaches the assign callback as a ProtocolName; a name kconnect
    does not know is a clear error (the member then reports the round failed) before anything is assigned."""
    md = dict(protocol.join_protocols("static", WorkerState("http://kc:8083/", 1)))
    names: list[object] = []

    def assign(
        leader: str, protocol_name: protocol.ProtocolName, members: Mapping[str, tuple[int, WorkerState]]
    ) -> dict[str, ConnectAssignment]:
        names.append(protocol_name)
        return {}

    leader_assignments(assign, "kc-1", "static", [("kc-1", md["static"])])
    assert names == [protocol.ProtocolName.STATIC] and type(names[0]) is protocol.ProtocolName
    with pytest.raises(protocol.ProtocolError, match="unknown Connect group protocol name 'range'"):
        leader_assignments(assign, "kc-1", "range", [("kc-1", md["static"])])
    assert len(names) == 1


# ------------------------------------------------------------------------------ transport codec


def test_transport_codec_maps_to_kafka_python_requests_and_back() -> None:
    join = m.JoinGroup(1, B1, "g", 10_000, 60_000, "w1", "connect", PROTOCOLS, 65_000)
    request = _encode(join)
    assert (request.group_id, request.member_id, request.protocol_type) == ("g", "w1", "connect")
    assert (request.session_timeout_ms, request.rebalance_timeout_ms) == (10_000, 60_000)
    assert [tuple(p) for p in request.protocols] == list(PROTOCOLS)
    sync = _encode(m.SyncGroup(2, B1, "g", 5, "w1", "connect", "sessioned", (("w1", b"A"), ("w2", b"B"))))
    heartbeat = _encode(m.Heartbeat(3, B1, "g", 5, "w1"))
    leave = _encode(m.LeaveGroup(4, B1, "g", "w1", "bye"))
    for message, versions in ((request, (0, 4, 7)), (sync, (0, 3, 5)), (heartbeat, (0, 3)), (leave, (0, 3))):
        for version in versions:  # every version the broker may choose encodes
            assert message.encode(version=version)

    from kafka.protocol.consumer import JoinGroupResponse

    response = JoinGroupResponse(
        error_code=0,
        generation_id=5,
        protocol_type="connect",
        protocol_name="sessioned",
        leader="w1",
        member_id="w1",
        members=[JoinGroupResponse.JoinGroupResponseMember(member_id="w1", metadata=b"md")],
    )
    assert _decode_join(response) == m.JoinGroupResult(
        0, 5, "connect", "sessioned", "w1", "w1", (("w1", b"md"),)
    )
