"""The classic group coordinator model itself: hash orders, protocol selection, leaders, generations.

The JVM orders below were produced by running java.util.HashMap, Scala 2.13's mutable.HashMap and Scala
2.13's ``groupBy``/``maxBy`` (scala-library 2.13.16, OpenJDK 17) on the same inputs; the model reproduced
3,000 further random cases (insertions, removals, resizes, equal hashes) exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import pytest

from kconnect.runtime.group import assignor, protocol
from kconnect.runtime.group.protocol import ConnectAssignment, WorkerState
from kconnect.runtime.ids import TaskId
from tests.support.group_model import (
    AdapterState,
    DoubleRun,
    GroupModel,
    InconsistentGroupProtocol,
    JavaHashMapKeys,
    ScalaMutableHashMapKeys,
    adapter_assign,
    candidate_protocols,
    default_assignor,
    java_string_hash,
    scala_immutable_hashmap_order,
    select_protocol,
    shuffled,
    vote,
)

EAGER = ("default",)
COMPATIBLE = ("compatible", "default")
SESSIONED = ("sessioned", "compatible", "default")


# --------------------------------------------------------------------------------------- hash orders


@pytest.mark.parametrize(
    ("text", "expected"),
    [("", 0), ("a", 97), ("Aa", 2112), ("BB", 2112), ("default", 0x5C13D641), ("compatible", -842605868)],
)
def test_java_string_hash(text: str, expected: int) -> None:
    assert java_string_hash(text) == expected


def _ops(table: JavaHashMapKeys | ScalaMutableHashMapKeys, ops: str) -> list[str]:
    for op in ops.split():
        if op.startswith("+"):
            table.put(op[1:])
        else:
            table.remove(op[1:])
    return table.order()


MANY = "+m0 +m1 +m2 +m3 +m4 +m5 +m6 +m7 +m8 +m9 +m10 +m11 +m12 +m13 -m0 -m1 -m2 -m3"


@pytest.mark.parametrize(
    ("ops", "java", "scala"),
    [
        ("+w1-1 +w2-1 +w3-1", "w3-1 w1-1 w2-1", "w3-1 w1-1 w2-1"),
        ("+w3-1 +w1-1 +w2-1 -w1-1 +w1-2", "w3-1 w2-1 w1-2", "w3-1 w1-2 w2-1"),
        ("+worker-10 +worker-2 +worker-1 +worker-20", "worker-2 worker-1 worker-10 worker-20", None),
        # Equal hashes: Java keeps insertion order in the bucket, and so does Scala among equal hashes.
        ("+Aa +BB +C", "Aa BB C", "Aa BB C"),
        ("+BB +Aa +C", "BB Aa C", "BB Aa C"),
        # Grown past 12 entries (capacity 32), then shrunk: the capacity stays.
        (MANY, "m4 m5 m6 m7 m8 m9 m11 m10 m13 m12", "m4 m5 m6 m7 m8 m9 m11 m10 m13 m12"),
    ],
)
def test_hash_map_iteration_orders_match_the_jvm(ops: str, java: str, scala: str | None) -> None:
    assert _ops(JavaHashMapKeys(), ops) == java.split()
    if scala is not None:
        assert _ops(ScalaMutableHashMapKeys(), ops) == scala.split()


def test_scala_immutable_hash_map_order_matches_the_jvm() -> None:
    assert scala_immutable_hashmap_order(["default", "compatible", "sessioned", "static"]) == [
        "static",
        "compatible",
        "default",
        "sessioned",
    ]
    assert scala_immutable_hashmap_order("abcdefgh") == list("efabgdch")


# --------------------------------------------------------------------------------------- protocol selection


def test_candidates_and_votes() -> None:
    assert candidate_protocols([SESSIONED, COMPATIBLE]) == {"compatible", "default"}
    assert vote(SESSIONED, {"compatible", "default"}) == "compatible"
    assert vote(("b", "a"), {"a", "b"}) == "b"  # a member's own preference order decides its vote
    with pytest.raises(ValueError, match="candidate"):
        vote(("x",), {"a"})
    with pytest.raises(ValueError, match="empty group"):
        candidate_protocols([])


@pytest.mark.parametrize(
    ("advertised", "java", "scala"),
    [
        # Connect's ladders: the newest protocol all members share, unanimously.
        ([SESSIONED], "sessioned", "sessioned"),
        ([SESSIONED, SESSIONED], "sessioned", "sessioned"),
        ([SESSIONED, COMPATIBLE], "compatible", "compatible"),
        ([SESSIONED, EAGER, COMPATIBLE], "default", "default"),
        # Majority over a member's preference: 2 votes for b beat 1 for a.
        ([("a", "b"), ("b", "a"), ("b", "a")], "b", "b"),
        # A protocol not everyone supports is no candidate, however many first preferences it has.
        ([("x", "a"), ("x", "a"), ("a",)], "a", "a"),
        # Ties. Java: first in the votes HashMap (bucket, then first vote); Scala: first in CHAMP order.
        ([("default", "compatible"), ("compatible", "default")], "default", "compatible"),
        ([("compatible", "default"), ("default", "compatible")], "compatible", "compatible"),
        ([("sessioned", "compatible"), ("compatible", "sessioned")], "compatible", "compatible"),
        ([("a", "b"), ("b", "a")], "a", "a"),
        ([("b", "a"), ("a", "b")], "a", "a"),
        ([("range", "roundrobin"), ("roundrobin", "range")], "range", "roundrobin"),
        ([("BB", "Aa"), ("Aa", "BB")], "BB", "BB"),  # equal hashes: first vote, in both
        ([("x", "y", "z"), ("y", "x", "z"), ("x", "y", "z"), ("y", "x", "z"), ("z", "x", "y")], "x", "x"),
    ],
)
def test_select_protocol(advertised: list[tuple[str, ...]], java: str, scala: str) -> None:
    assert select_protocol(advertised, "java") == java
    assert select_protocol(advertised, "scala") == scala


def test_no_common_protocol_cannot_be_selected() -> None:
    with pytest.raises(ValueError):
        select_protocol([("a",), ("b",)])


# --------------------------------------------------------------------------------------- the group


def test_generations_start_at_one_and_count_every_join_phase() -> None:
    g = GroupModel({"a": 2})
    assert g.generation == 0 and g.protocol is None
    w1 = g.add_member("w1")
    assert g.needs_rebalance()
    [r] = g.settle()
    assert (r.generation, r.protocol, r.leader, r.members) == (1, "sessioned", w1, (w1,))
    assert not g.needs_rebalance() and g.settle() == []
    g.add_member("w2")
    rounds = g.settle()  # cooperative: a revocation round, then the assignment round
    assert [r.generation for r in rounds] == list(range(2, 2 + len(rounds)))
    n = g.generation
    assert g.rebalance().generation == n + 1  # a rebalance nobody needed still makes a generation
    # The group empties: the coordinator still completes a generation, without protocol or leader.
    for mid in list(g.members):
        g.remove_member(mid)
    [r] = g.settle()
    assert (r.generation, r.protocol, r.leader, g.leader) == (n + 2, None, None, None)
    w3 = g.add_member("w3", "eager")
    rounds = g.settle()
    # A leader with no history starts an eager group with the empty round, then deals for real.
    assert [(r.generation, r.protocol, r.leader) for r in rounds] == [
        (n + 3, "default", w3),
        (n + 4, "default", w3),
    ]
    assert [r.generation for r in g.rounds] == list(range(1, n + 5))
    g.assert_exactly_once()


def test_the_first_member_leads_and_the_leader_stays_while_it_rejoins() -> None:
    g = GroupModel({"a": 3})
    w2 = g.add_member("w2")
    g.add_member("w1")
    g.settle()
    assert g.leader == w2  # first to join, although w1 sorts first and comes first in the map
    for worker in ("w3", "w4", "w5"):
        g.add_member(worker)
        g.settle()
        assert g.leader == w2
    g.set_connectors({"a": 3, "b": 1})
    g.settle()
    assert g.leader == w2
    assert {r.leader for r in g.rounds} == {w2}


@pytest.mark.parametrize("coordinator", ["java", "scala"])
def test_a_departed_leader_is_replaced_by_the_first_member_in_map_order(coordinator: str) -> None:
    g = GroupModel({"a": 3}, coordinator=coordinator)  # type: ignore[arg-type]
    w1, w2, w3 = (g.add_member(w) for w in ("w1", "w2", "w3"))
    g.settle()
    assert g.leader == w1 and g.member_order() == [w3, w1, w2]
    g.remove_member(w1)
    assert g.leader == w3  # members.keySet().iterator().next(), not the oldest or the smallest id
    g.settle()
    assert g.rounds[-1].leader == w3
    # A restarted worker is a new member: its old id's leadership does not come back.
    w3_2 = g.restart_member(w3)
    assert w3_2 == "w3-2" and g.leader == w2
    g.settle()
    assert g.leader == w2
    g.assert_exactly_once()


def test_the_leader_decodes_every_member_under_the_selected_protocol() -> None:
    g = GroupModel({"a": 1})
    s = g.add_member("s", "sessioned")
    c = g.add_member("c", "compatible")
    [r] = g.settle()
    assert r.protocol == "compatible" and r.metadata_versions == {s: 1, c: 1}
    assert r.advertised == {s: SESSIONED, c: COMPATIBLE}
    assert {a.version for a in r.assignments.values()} == {1}
    # What each member sent is real JoinGroup metadata, one entry per name.
    sent = dict(g.members[s].protocols)
    assert [protocol.decode_metadata(sent[n])[0] for n in SESSIONED] == [2, 1, 0]


def test_a_member_sharing_no_protocol_is_rejected() -> None:
    g = GroupModel({"a": 1})
    g.add_member("old", "eager")
    g.settle()
    with pytest.raises(InconsistentGroupProtocol):
        g.add_member("new", "sessioned", advertise=("sessioned",))
    assert list(g.members) == ["old-1"] and not g.needs_rebalance()
    # Without the eager member the same worker can join.
    g.restart_member("old-1", "compatible")
    g.settle()
    g.add_member("new", "sessioned", advertise=("sessioned", "compatible"))
    assert {r.protocol for r in g.settle()} == {"compatible"}
    with pytest.raises(ValueError, match="cannot advertise"):
        g.add_member("x", "eager", advertise=("sessioned",))


def test_delivery_orders_are_reproducible_permutations() -> None:
    members = [f"w{i}" for i in range(6)]
    a, b = shuffled(3), shuffled(3)
    rounds_a = [a(members) for _ in range(5)]
    assert rounds_a == [b(members) for _ in range(5)]
    assert all(sorted(r) == members for r in rounds_a) and len({tuple(r) for r in rounds_a}) > 1

    g = GroupModel({"a": 4, "b": 2}, delivery=shuffled(11))
    for w in ("w1", "w2", "w3"):
        g.add_member(w)
    g.settle()
    g.add_member("w4")
    g.settle()
    assert all(sorted(r.delivery) == sorted(r.members) for r in g.rounds)
    g.assert_exactly_once()


def test_starts_and_stops_are_counted_per_member() -> None:
    g = GroupModel({"a": 2})
    w1 = g.add_member("w1", "eager")
    g.settle()
    assert (g.members[w1].starts, g.members[w1].stops) == (3, 0)
    g.add_member("w2", "eager")
    [r] = g.settle()
    assert r.stops_before_join == {w1: 3, "w2-1": 0}
    assert r.starts_on_sync[w1] + r.starts_on_sync["w2-1"] == 3
    g.remove_member(w1)
    assert g.departed[0].stops == 3 + len(r.assignments[w1].connectors) + len(r.assignments[w1].tasks)
    g.settle()
    assert g.total_starts() == 3 + 3 + g.rounds[-1].starts_on_sync["w2-1"]
    g.assert_exactly_once()


def _everything_to_everyone(
    state: object,
    *,
    selected_protocol: str,
    leader_id: str,
    members: Mapping[str, WorkerState],
    leader_config_offset: int,
    connectors: Mapping[str, int],
    now_ms: int,
    max_delay_ms: int,
    generation: int,
    leaving: frozenset[str] = frozenset(),
) -> tuple[dict[str, ConnectAssignment], object]:
    version = protocol.version_for_protocol(selected_protocol)
    tasks = tuple(TaskId(c, i) for c, n in connectors.items() for i in range(n))
    return {
        m: ConnectAssignment(version, 0, leader_id, "u", leader_config_offset, tuple(connectors), tasks)
        for m in members
    }, state


def test_the_model_catches_work_running_twice() -> None:
    g = GroupModel({"a": 1}, assign=_everything_to_everyone, initial_state=lambda: None)
    g.add_member("w1")
    g.add_member("w2")
    with pytest.raises(DoubleRun, match="after w2-1 applied its assignment"):
        g.settle()


def test_scheduled_rejoins_move_the_clock() -> None:
    def delayed(
        state: AdapterState | None, **kw: object
    ) -> tuple[dict[str, ConnectAssignment], AdapterState]:
        result, new_state = adapter_assign(state, **kw)  # type: ignore[arg-type]
        if kw["generation"] == 1:
            result = {m: replace(a, delay_ms=5000) for m, a in result.items()}
        return result, new_state

    g = GroupModel({"a": 1}, assign=delayed, initial_state=AdapterState)
    g.add_member("w1")
    rounds = g.settle()
    assert [r.generation for r in rounds] == [1, 2] and g.now_ms == 5000
    g.assert_exactly_once()


def test_config_changes_reach_every_herder_and_rebalance() -> None:
    g = GroupModel({"a": 2})
    g.add_member("w1")
    g.add_member("w2")
    g.settle()
    g.set_connectors({"a": 3, "b": 1})
    assert g.needs_rebalance()
    g.settle()
    g.assert_exactly_once()
    g.set_connectors({"b": 1})
    g.settle()
    g.assert_exactly_once()
    assert g.expected_items() == {"b", TaskId("b", 0)}


def test_graceful_leave_hands_work_over_without_the_scheduled_delay() -> None:
    g = GroupModel({"a": 4, "b": 2}, max_delay_ms=300_000, delivery=shuffled(1))
    for w in ("w1", "w2", "w3"):
        g.add_member(w, "sessioned")
    g.settle()
    w2 = g.worker("w2")
    ran = w2.running()
    g.begin_leave(w2.member_id)
    rounds = g.settle()
    assert w2.member_id not in g.members and g.departed == [w2]
    assert g.now_ms == 0 and len(rounds) >= 2  # flagged round revokes, next one reassigns, then it leaves
    assert w2.stops == len(ran)
    g.assert_exactly_once()


def test_a_vanished_member_s_work_waits_for_the_scheduled_delay() -> None:
    g = GroupModel({"a": 4, "b": 2}, max_delay_ms=300_000)
    for w in ("w1", "w2", "w3"):
        g.add_member(w, "sessioned")
    g.settle()
    g.remove_member(g.worker("w2").member_id)
    [held, reassigned] = g.settle()
    assert held.assignments[g.leader or ""].delay_ms == 300_000
    assert g.now_ms == 300_000 and reassigned.generation == held.generation + 1
    g.assert_exactly_once()


def test_the_model_runs_the_runtime_leader_assign() -> None:
    fn, state = default_assignor()
    assert fn is assignor.leader_assign and state is assignor.CooperativeState
    assert GroupModel().assign is assignor.leader_assign
