"""Leader fail-over with memory: the seed's "leader leaves" and "leader bounces" scenarios, with and
without the group records.

The group below is the one of test_cooperative_assignor (workers apply their assignments as Java's
coordinator does), plus a group-records topic: after every round the leader's records and each member's
current assignment go through the real codecs (encoded, then folded back from bytes with the record's
timestamp, as a worker reads them). A worker that leads without having led the last generation rebuilds
its memory from the topic when ``with_records`` is set; otherwise it starts as Java's new leader does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kconnect.runtime.group import group_records, group_view, leader_memory
from kconnect.runtime.group.cooperative_assignor import CooperativeState, cooperative_assign
from kconnect.runtime.group.protocol import V2, ConnectAssignment
from kconnect.runtime.ids import TaskId
from tests.unit.test_cooperative_assignor import CONFIG, MAX_DELAY, T0, Group, check, items

GROUP = "connect-cluster"


@dataclass
class RecordedGroup(Group):
    with_records: bool = True
    topic: group_records.GroupRecords = field(default_factory=group_records.GroupRecords)
    offset: int = 0

    def state(self) -> group_records.GroupState | None:
        return self.topic.groups.get(GROUP)

    def write(self, records: list[leader_memory.Record], now: int) -> None:
        for key, value in group_records.changed_records(self.state(), records):
            self.topic = group_records.apply(self.topic, key, value, offset=self.offset, timestamp_ms=now)
            self.offset += 1

    def rebalance(
        self, leader: str, now: int, leaving: frozenset[str] = frozenset()
    ) -> dict[str, ConnectAssignment]:
        self.generation += 1
        members = {m: (V2, self.metadata(m, now)) for m in self.workers}
        states = {m: s for m, (_v, s) in members.items()}
        lw = self.workers[leader]
        completed = lw.last_generation
        if self.with_records and lw.leader_state.previous_generation != completed:
            remembered = leader_memory.remember(self.state(), completed=completed, now_ms=now)
            if remembered is not None:
                lw.leader_state = remembered
        result, lw.leader_state = cooperative_assign(
            lw.leader_state,
            leader_id=leader,
            members=states,
            leader_config_offset=1,
            connectors=self.config,
            version=V2,
            now_ms=now,
            max_delay_ms=self.max_delay,
            generation=self.generation,
            leaving=leaving,
            last_completed_generation=completed,
        )
        self.write(
            leader_memory.round_records(
                GROUP,
                generation=self.generation,
                protocol_name="sessioned",
                members=members,
                assignments=result,
                state=lw.leader_state,
                configuration=[("scheduled.rebalance.max.delay.ms", str(self.max_delay))],
                previous=self.state(),
            ),
            now,
        )
        for m, a in result.items():
            self.apply(m, a, now)
            w = self.workers[m]
            running = group_records.Assigned(frozenset(w.connectors), frozenset(w.tasks))
            self.write([leader_memory.current_assignment_record(GROUP, m, self.generation, a, running)], now)
        return result


def initial(with_records: bool) -> RecordedGroup:
    g = RecordedGroup(dict(CONFIG), with_records=with_records)
    g.join("W1")
    g.rebalance("W1", 0)
    g.join("W2", "W3")
    g.rebalance("W1", 10)
    g.rebalance("W1", 20)
    return g


def test_records_describe_the_group_after_the_seed_start() -> None:
    g = initial(True)
    state = g.state()
    assert state is not None and state.epoch == 3
    assert state.target is not None and state.target.assignment_epoch == 3
    whole = {m.member_id: (m.assigned.connectors, m.assigned.tasks) for m in state.target.members}
    assert whole == {m: items(c) for m, c in {"W1": "AC0 AT1", "W2": "AT2 BC0", "W3": "BT1"}.items()}
    current = {m: (c.assigned.connectors, c.assigned.tasks) for m, c in state.current.items()}
    assert current == whole
    assert state.connectors_tasks is not None
    assert state.connectors_tasks.assigned.connectors == {"A", "B"}
    assert group_view.scheduled_rebalance(state) is None


def test_leader_leaves_without_records_assigns_the_lost_work_at_once() -> None:
    g = initial(False)
    g.vanish("W1")
    # Java's (and kconnect's without records) new leader cannot tell new from lost: A and A-0 move now.
    check(g, g.rebalance("W3", T0), {"W2": ("AT2 BC0 AT1", "AT1", "", 0), "W3": ("BT1 AC0", "AC0", "", 0)})


def test_leader_leaves_with_records_holds_the_lost_work_and_gives_it_back() -> None:
    g = initial(True)
    g.vanish("W1")
    # The target assignment of generation 3 says W1 held A and A-0: they are lost, not new. The new
    # leader holds them for the delay, as the old leader would have for any other member.
    check(g, g.rebalance("W3", T0), {"W2": ("AT2 BC0", "", "", MAX_DELAY), "W3": ("BT1", "", "", MAX_DELAY)})
    state = g.state()
    assert state is not None
    held = leader_memory.held_back(state)
    assert (held.connectors, held.tasks) == items("AC0 AT1")
    assert "W1" not in state.members and "W1" not in state.current  # tombstoned
    g.join("W1")  # back in time, empty: a candidate
    d1 = MAX_DELAY - 100_000
    check(
        g,
        g.rebalance("W3", T0 + 100_000),
        {"W1": ("", "", "", d1), "W2": ("AT2 BC0", "", "", d1), "W3": ("BT1", "", "", d1)},
    )
    check(
        g,
        g.rebalance("W3", T0 + MAX_DELAY),
        {"W1": ("AC0 AT1", "AC0 AT1", "", 0), "W2": ("AT2 BC0", "", "", 0), "W3": ("BT1", "", "", 0)},
    )


def test_leader_leaves_with_records_still_assigns_new_work_at_once() -> None:
    g = initial(True)
    g.vanish("W1")
    g.config["C"] = 1  # created after the last recorded epoch: new, not lost
    result = g.rebalance("W3", T0)
    new_c = {c for a in result.values() for c in a.connectors}
    new_t = {t for a in result.values() for t in a.tasks}
    assert new_c == {"C"} and new_t == {TaskId("C", 0)}
    assert all(a.delay_ms == MAX_DELAY for a in result.values())  # A and A-0 wait for W1


def _bounce(with_records: bool) -> RecordedGroup:
    """The seed's "leader bounces" up to the leader's departure: W2 vanished at T0, came back empty at
    T0+100s, then the leader W1 vanishes; meanwhile connector C was created."""
    g = initial(with_records)
    g.vanish("W2")
    g.rebalance("W1", T0)
    g.join("W2")
    g.rebalance("W1", T0 + 100_000)
    g.vanish("W1")
    g.config["C"] = 1
    return g


def test_leader_bounces_with_records_continues_the_delay_and_assigns_new_work() -> None:
    g = _bounce(True)
    d2 = MAX_DELAY - 150_000
    result = g.rebalance("W3", T0 + 150_000)
    # The delay continues with what is left; the old leader's A and A-0 are lost, as are A-1 and B of
    # the first departure: all held. C is new: assigned at once (to W2, the least loaded).
    assert {m: (set(a.connectors), set(a.tasks), a.delay_ms) for m, a in result.items()} == {
        "W2": ({"C"}, {TaskId("C", 0)}, d2),
        "W3": (set(), set(), d2),
    }
    assert not any(a.revoked_connectors or a.revoked_tasks for a in result.values())


def test_leader_bounces_without_records_holds_new_work_too() -> None:
    g = _bounce(False)
    d2 = MAX_DELAY - 150_000
    # The heuristic of members reporting their delay: everything unaccounted is held, C included.
    check(g, g.rebalance("W3", T0 + 150_000), {"W2": ("", "", "", d2), "W3": ("BT1", "", "", d2)})


def test_remember_an_expired_delay_reassigns_at_the_next_round() -> None:
    g = _bounce(True)
    del g.config["C"]
    # The new leader takes over only after the delay ran out: the lost work goes to the candidates.
    result = g.rebalance("W3", T0 + MAX_DELAY + 1)
    assert all(a.delay_ms == 0 for a in result.values())
    held = {c for a in result.values() for c in a.connectors} | {t for a in result.values() for t in a.tasks}
    assert held == {"A", "B", TaskId("A", 0), TaskId("A", 1)}


def test_records_of_a_generation_the_new_leader_did_not_complete_are_not_used() -> None:
    g = initial(True)
    state = g.state()
    assert state is not None and state.target is not None
    epoch = state.target.assignment_epoch
    assert leader_memory.remember(state, completed=epoch, now_ms=T0) is not None
    # It missed the last generation (a follower's SyncGroup can be lost): its members' allocations are
    # of another epoch than the target, so the target would call work lost that was never handed out.
    assert leader_memory.remember(state, completed=epoch - 1, now_ms=T0) is None


def test_nothing_to_remember_without_a_target_assignment() -> None:
    assert leader_memory.remember(None, completed=1, now_ms=0) is None
    assert leader_memory.remember(group_records.GroupState(GROUP), completed=1, now_ms=0) is None
    assert CooperativeState().previous_generation == -1
