"""Protocol compatibility of whole groups, replayed on the classic coordinator model.

The embedded test broker never re-selects a group's protocol (DESIGN.md, "Test broker" item 3), so protocol
migration cannot be tested live; :mod:`tests.support.group_model` re-selects it every generation as Apache
Kafka does, and drives real herders through real protocol bytes. KIP-415's "Compatibility, Deprecation,
and Migration Plan" is the specification: a rolling bounce to ``compatible`` upgrades without downtime; one
worker switched back to ``eager`` downgrades the group, with "a one-time double rebalancing, with the leader
detecting the downgrade and first sending a downgraded assignment with empty assigned connectors and tasks
and from then on just regular downgraded assignments".

Every model run checks, after each single member applies its assignment, that no connector or task runs on two
members (:class:`~tests.support.group_model.DoubleRun`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kconnect.runtime.group import protocol
from kconnect.runtime.ids import TaskId
from tests.support.group_model import Coordinator, GroupModel, Item, Round, shuffled

CONNECTORS = {"a": 4, "b": 3, "c": 2}  # 3 connectors and 9 tasks
WORKERS = ("w1", "w2", "w3")


def group(
    *protocols: str,
    connectors: dict[str, int] | None = None,
    seed: int | None = None,
    coordinator: Coordinator = "java",
) -> GroupModel:
    """A settled group of workers w1, w2, ... with these ``connect.protocol`` values (w1 joins first and
    leads)."""
    g = GroupModel(
        CONNECTORS if connectors is None else connectors,
        delivery=None if seed is None else shuffled(seed),
        coordinator=coordinator,
    )
    for i, p in enumerate(protocols, start=1):
        g.add_member(f"w{i}", p)
    g.settle()
    g.assert_exactly_once()
    return g


def placement(g: GroupModel) -> dict[Item, str]:
    """Item -> the worker (process name) running it."""
    return {item: g.members[mids[0]].worker for item, mids in g.owners().items()}


def stopped_items(g: GroupModel, since: int) -> list[tuple[str, Item]]:
    return [(e.member, e.item) for e in g.events[since:] if e.action == "stop"]


def is_empty(r: Round) -> bool:
    return all(not a.connectors and not a.tasks for a in r.assignments.values())


# ------------------------------------------------------------------------------------------ eager


@pytest.mark.parametrize("seed", range(4))
def test_a_default_group_stops_everything_before_every_rejoin(seed: int) -> None:
    g = group("eager", "eager", "eager", seed=seed)
    assert g.protocol == "default"
    events: list[Callable[[], object]] = [
        lambda: g.add_member("w4", "eager"),
        lambda: g.set_connectors({**CONNECTORS, "d": 2}),
        lambda: g.remove_member(g.worker("w2").member_id),
        lambda: g.set_connectors(CONNECTORS, version="v2"),
    ]
    for event in events:
        event()
        running = {mid: len(m.running()) for mid, m in g.members.items()}
        stops_before = g.total_stops()
        rounds = g.settle()
        assert len(rounds) == 1 and rounds[0].protocol == "default"
        [r] = rounds
        # Every member released all it ran before joining: stops counted in the join phase.
        assert r.stops_before_join == running
        assert g.total_stops() - stops_before == sum(running.values())
        assert all(a.version == protocol.V0 for a in r.assignments.values())
        assert all(not a.revoked_connectors and not a.revoked_tasks for a in r.assignments.values())
        # ... and starts its whole new share.
        assert sum(r.starts_on_sync.values()) == len(g.expected_items())
        g.assert_exactly_once()


# ------------------------------------------------------------------------------------------ cooperative


@pytest.mark.parametrize("connect_protocol", ["compatible", "sessioned"])
@pytest.mark.parametrize("seed", range(4))
def test_a_cooperative_group_keeps_work_in_place_when_a_member_joins(
    connect_protocol: str, seed: int
) -> None:
    g = group(connect_protocol, connect_protocol, connect_protocol, seed=seed)
    assert g.protocol == connect_protocol
    before, mark = placement(g), len(g.events)
    g.add_member("w4", connect_protocol)
    rounds = g.settle()
    g.assert_exactly_once()
    after = placement(g)
    assert {r.protocol for r in rounds} == {connect_protocol}
    assert all(n == 0 for r in rounds for n in r.stops_before_join.values())  # nothing stops to rejoin
    kept = {item for item, worker in before.items() if after[item] == worker}
    moved = set(before) - kept
    stopped = stopped_items(g, mark)
    # Only what moves to the new member stops, once; work that stays was never interrupted.
    assert sorted((g.worker(before[i]).member_id, i) for i in moved) == sorted(stopped, key=str)
    assert not kept & {item for _, item in stopped}
    assert all(after[item] == "w4" for item in moved) and moved
    v = protocol.version_for_protocol(connect_protocol)
    assert {a.version for r in rounds for a in r.assignments.values()} == {v}


@pytest.mark.parametrize("connect_protocol", ["compatible", "sessioned"])
def test_a_cooperative_group_stops_nothing_on_survivors_when_a_member_leaves(connect_protocol: str) -> None:
    g = group(connect_protocol, connect_protocol, connect_protocol)
    before, mark = placement(g), len(g.events)
    g.remove_member(g.worker("w2").member_id)
    g.settle()
    g.assert_exactly_once()
    survivors_stopped = [(m, i) for m, i in stopped_items(g, mark) if not m.startswith("w2-")]
    assert survivors_stopped == []
    after = placement(g)
    assert all(after[i] == w for i, w in before.items() if w != "w2")


# ------------------------------------------------------------------------------------------ upgrade


def _expected(protocols: Sequence[str]) -> str:
    if "eager" in protocols:
        return "default"
    return "compatible" if "compatible" in protocols else "sessioned"


@pytest.mark.parametrize("targets", [("compatible",), ("sessioned",), ("compatible", "sessioned")])
@pytest.mark.parametrize("same_join_phase", [True, False])
@pytest.mark.parametrize("seed", range(3))
def test_rolling_upgrade_from_eager(targets: tuple[str, ...], same_join_phase: bool, seed: int) -> None:
    g = group("eager", "eager", "eager", seed=seed)
    seen: list[str | None] = []
    for target in targets:
        for worker in WORKERS:
            old = g.worker(worker).member_id
            if same_join_phase:
                g.restart_member(old, target)
            else:
                g.remove_member(old)
                for r in g.settle():
                    assert r.protocol == _expected([g.members[m].connect_protocol for m in r.members])
                g.assert_exactly_once()
                g.add_member(worker, target)
            rounds = g.settle()
            protocols = [m.connect_protocol for m in g.members.values()]
            assert {r.protocol for r in rounds} == {_expected(protocols)}
            assert all(
                set(r.metadata_versions.values()) == {protocol.version_for_protocol(r.protocol or "")}
                for r in rounds
            )
            seen.append(g.protocol)
            g.assert_exactly_once()
    # The protocol stays "default" while any member is eager, then follows the upgrade.
    expected = {
        ("compatible",): ["default", "default", "compatible"],
        ("sessioned",): ["default", "default", "sessioned"],
        ("compatible", "sessioned"): [
            "default",
            "default",
            "compatible",
            "compatible",
            "compatible",
            "sessioned",
        ],
    }[targets]
    assert seen == expected
    # Once upgraded, a join no longer stops the world: only what moves to the new member stops.
    mark = len(g.events)
    g.add_member("w4", targets[-1])
    assert all(n == 0 for r in g.settle() for n in r.stops_before_join.values())
    after = placement(g)
    assert all(after[item] == "w4" for _, item in stopped_items(g, mark))
    g.assert_exactly_once()


# ------------------------------------------------------------------------------------------ downgrade


def _check_downgrade(g: GroupModel, rounds: list[Round]) -> None:
    default_rounds = [r for r in rounds if r.protocol == "default"]
    assert default_rounds, [(r.generation, r.protocol) for r in rounds]
    first = default_rounds[0]
    # The leader's first default round: empty v0 assignments to everyone ...
    assert {a.version for a in first.assignments.values()} == {protocol.V0}
    assert is_empty(first), {m: (a.connectors, a.tasks) for m, a in first.assignments.items()}
    # ... then a regular eager assignment of everything.
    assert len(default_rounds) >= 2, "no second rebalance after the empty downgrade round"
    second = default_rounds[1]
    assert {a.version for a in second.assignments.values()} == {protocol.V0}
    assigned = [i for a in second.assignments.values() for i in (*a.connectors, *a.tasks)]
    assert sorted(map(str, assigned)) == sorted(map(str, g.expected_items()))
    assert rounds[-1].protocol == "default" and g.protocol == "default"
    g.assert_exactly_once()


@pytest.mark.parametrize("from_protocol", ["compatible", "sessioned"])
@pytest.mark.parametrize("switched", ["w2", "w3"])  # w1 leads and keeps leading
@pytest.mark.parametrize("seed", range(4))
def test_the_leaders_first_default_round_is_empty_for_everyone(
    from_protocol: str, switched: str, seed: int
) -> None:
    """The half of KIP-415's downgrade that works: the leader that assigned cooperatively sends empty
    v0 assignments, every member releases everything, and nothing ever runs twice."""
    g = group(from_protocol, from_protocol, from_protocol, seed=seed)
    running = {mid: len(m.running()) for mid, m in g.members.items()}
    g.restart_member(g.worker(switched).member_id, "eager")
    r = g.rebalance()
    assert r.protocol == "default" and r.leader == g.worker("w1").member_id
    assert r.metadata_versions == dict.fromkeys(r.members, protocol.V0)
    assert {a.version for a in r.assignments.values()} == {protocol.V0} and is_empty(r)
    # Members prepared under the cooperative protocol, so they released nothing before joining ...
    assert all(r.stops_before_join[mid] == 0 for mid in running if mid in r.members)
    # ... and release everything on the empty assignment.
    assert all(r.stops_on_sync[mid] == n for mid, n in running.items() if mid in r.members)
    assert not g.owners()


@pytest.mark.parametrize("from_protocol", ["compatible", "sessioned"])
def test_the_empty_downgrade_round_is_followed_by_a_rebalance(from_protocol: str) -> None:
    g = group(from_protocol, from_protocol, from_protocol)
    g.restart_member(g.worker("w2").member_id, "eager")
    r = g.rebalance()
    assert is_empty(r) and not g.owners()
    assert g.needs_rebalance() or any(m.rejoin_at is not None for m in g.members.values())


def test_downgrade_when_the_leader_is_the_worker_switched_to_eager() -> None:
    """Sessioned w1 (leader), w2, w3 run a, a-0, a-1, a-2; w1 restarts with connect.protocol=eager. The
    coordinator moves leadership to w3 (first in its members map), which never led: it deals a-2 to the
    restarted w1 while w3 still runs it, and w1 applies its assignment first."""
    g = GroupModel({"a": 3}, delivery=lambda ms: sorted(ms, key=lambda m: (m != "w1-2", m)))
    for w in WORKERS:
        g.add_member(w, "sessioned")
    g.settle()
    assert g.leader == "w1-1" and g.owners()[TaskId("a", 2)] == ["w3-1"]
    g.restart_member("w1-1", "eager")
    assert g.leader == "w3-1"
    _check_downgrade(g, g.settle())


@pytest.mark.parametrize("from_protocol", ["compatible", "sessioned"])
@pytest.mark.parametrize("switched", WORKERS)  # w1 leads
@pytest.mark.parametrize("seed", range(4))
def test_downgrade_to_eager_in_one_join_phase(from_protocol: str, switched: str, seed: int) -> None:
    g = group(from_protocol, from_protocol, from_protocol, seed=seed)
    g.restart_member(g.worker(switched).member_id, "eager")
    _check_downgrade(g, g.settle())
    # The double rebalance is one-time: later eager rebalances assign at once.
    g.add_member("w4", from_protocol)
    [r] = g.settle()
    assert r.protocol == "default" and not is_empty(r)
    g.assert_exactly_once()


@pytest.mark.parametrize("from_protocol", ["compatible", "sessioned"])
@pytest.mark.parametrize("switched", WORKERS)
@pytest.mark.parametrize("seed", range(4))
def test_downgrade_to_eager_after_the_worker_left(from_protocol: str, switched: str, seed: int) -> None:
    g = group(from_protocol, from_protocol, from_protocol, seed=seed)
    g.remove_member(g.worker(switched).member_id)
    assert {r.protocol for r in g.settle()} == {from_protocol}
    g.assert_exactly_once()
    g.add_member(switched, "eager")
    _check_downgrade(g, g.settle())


@pytest.mark.parametrize("seed", range(4))
def test_downgrade_then_upgrade_again(seed: int) -> None:
    g = group("sessioned", "sessioned", "sessioned", seed=seed)
    eager = g.restart_member(g.worker("w2").member_id, "eager")
    _check_downgrade(g, g.settle())
    g.restart_member(eager, "sessioned")
    rounds = g.settle()
    assert rounds[-1].protocol == "sessioned"
    g.assert_exactly_once()


# ------------------------------------------------------------------------------------------ mixed versions

E, C, S = "eager", "compatible", "sessioned"
MIXED: list[tuple[tuple[str, ...], str]] = [
    ((E,), "default"),
    ((C,), "compatible"),
    ((S,), "sessioned"),
    ((E, E), "default"),
    ((E, C), "default"),
    ((E, S), "default"),
    ((C, C), "compatible"),
    ((C, S), "compatible"),
    ((S, S), "sessioned"),
    ((E, E, E), "default"),
    ((E, E, C), "default"),
    ((E, E, S), "default"),
    ((E, C, C), "default"),
    ((E, C, S), "default"),
    ((E, S, S), "default"),
    ((C, C, C), "compatible"),
    ((C, C, S), "compatible"),
    ((C, S, S), "compatible"),
    ((S, S, S), "sessioned"),
]
ADVERTISED = {E: ("default",), C: ("compatible", "default"), S: ("sessioned", "compatible", "default")}


@pytest.mark.parametrize(("protocols", "selected"), MIXED)
@pytest.mark.parametrize("coordinator", ["java", "scala"])
@pytest.mark.parametrize("reverse", [False, True])
def test_mixed_version_groups(
    protocols: tuple[str, ...], selected: str, coordinator: Coordinator, reverse: bool
) -> None:
    g = group(*(reversed(protocols) if reverse else protocols), coordinator=coordinator)
    version = protocol.version_for_protocol(selected)
    assert g.rounds and {r.protocol for r in g.rounds} == {selected}
    last = g.rounds[-1]
    for mid, m in g.members.items():
        assert last.advertised[mid] == ADVERTISED[m.connect_protocol]
        # Each member's metadata, read under the selected name, is of that protocol's version ...
        assert last.metadata_versions[mid] == version
        # ... and so is the assignment it decodes; cooperative metadata carries the member's allocation.
        assert last.assignments[mid].version == version
        assert m.herder.cooperative == (version >= protocol.V1)
    # Rejoining, cooperative members report what they run in their metadata; eager metadata cannot.
    again = g.rebalance()
    assert again.protocol == selected
    for m in g.members.values():
        _, state = protocol.decode_metadata(dict(m.protocols)[selected])
        if version == protocol.V0:
            assert state.allocation is None
        else:
            assert state.allocation is not None
            assert set(state.allocation.tasks) == {i for i in m.running() if isinstance(i, TaskId)}


# ------------------------------------------------------------------------------------------ property

PROTOCOLS = ("eager", "compatible", "sessioned")
ALL_WORKERS = ("w1", "w2", "w3", "w4")

_add = st.tuples(st.just("add"), st.sampled_from(ALL_WORKERS), st.sampled_from(PROTOCOLS))
_restart = st.tuples(st.just("restart"), st.sampled_from(ALL_WORKERS), st.sampled_from(PROTOCOLS))
_remove = st.tuples(st.just("remove"), st.sampled_from(ALL_WORKERS), st.just(""))
_config = st.tuples(
    st.just("config"),
    st.dictionaries(st.sampled_from(["a", "b", "c", "d"]), st.integers(0, 4), max_size=4),
    st.sampled_from(["v1", "v2"]),
)
_settle = st.tuples(st.just("settle"), st.just(""), st.just(""))
op = st.one_of(_add, _add, _restart, _restart, _remove, _config, _settle, _settle, _settle)


def _replay(
    initial: list[str],
    ops: list[tuple[object, object, object]],
    seed: int,
    coordinator: Coordinator,
    max_delay_ms: int,
    *,
    downgrades: bool,
) -> None:
    """Form a settled group of ``initial`` workers (their connect.protocol values), then apply ``ops``;
    rebalance only on "settle" ops (so several changes can share a join phase) and at the
    end, checking after each that the settled group runs everything exactly once. Without ``downgrades``,
    an eager worker only joins while no member last completed a cooperative generation (else it joins as
    compatible instead)."""
    g = GroupModel(
        {"a": 2, "b": 1}, delivery=shuffled(seed), coordinator=coordinator, max_delay_ms=max_delay_ms
    )
    present: dict[str, str] = {}  # worker -> member id
    for worker, p in zip(ALL_WORKERS, initial, strict=False):
        present[worker] = g.add_member(worker, p)
    g.settle()

    def connect_protocol(wanted: object) -> str:
        cooperative = any(
            m.last_protocol is not None and protocol.version_for_protocol(m.last_protocol) >= protocol.V1
            for m in g.members.values()
        )
        return "compatible" if wanted == "eager" and cooperative and not downgrades else str(wanted)

    for kind, x, y in ops:
        worker = str(x)
        if kind == "add" and worker not in present:
            present[worker] = g.add_member(worker, connect_protocol(y))
        elif kind == "remove" and worker in present:
            g.remove_member(present.pop(worker))
        elif kind == "restart" and worker in present:
            present[worker] = g.restart_member(present[worker], connect_protocol(y))
        elif kind == "config":
            assert isinstance(x, dict)
            g.set_connectors(x, version=str(y))
        elif kind == "settle":
            g.settle()  # DoubleRun is checked after every single assignment applied
            if g.members:
                g.assert_exactly_once()
    g.settle()
    if g.members:
        g.assert_exactly_once()
        assert g.protocol == _expected([m.connect_protocol for m in g.members.values()])
    else:
        assert not g.owners()


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.lists(st.sampled_from(PROTOCOLS), max_size=3),
    ops=st.lists(op, min_size=1, max_size=16),
    seed=st.integers(0, 10_000),
    coordinator=st.sampled_from(["java", "scala"]),
    max_delay_ms=st.sampled_from([0, 3000]),
)
def test_property_joins_leaves_upgrades_and_config_changes(
    initial: list[str],
    ops: list[tuple[object, object, object]],
    seed: int,
    coordinator: Coordinator,
    max_delay_ms: int,
) -> None:
    """Random workers join, leave and restart with random connect.protocol values (never downgrading a
    cooperative group), connectors come and go: nothing ever runs on two members, and once the group
    settles everything runs exactly once under the protocol its members share."""
    _replay(initial, ops, seed, coordinator, max_delay_ms, downgrades=False)


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    initial=st.lists(st.sampled_from(PROTOCOLS), max_size=3),
    ops=st.lists(op, min_size=1, max_size=16),
    seed=st.integers(0, 10_000),
    coordinator=st.sampled_from(["java", "scala"]),
    max_delay_ms=st.sampled_from([0, 3000]),
)
def test_property_including_downgrades(
    initial: list[str],
    ops: list[tuple[object, object, object]],
    seed: int,
    coordinator: Coordinator,
    max_delay_ms: int,
) -> None:
    """The same with eager workers joining cooperative groups too."""
    _replay(initial, ops, seed, coordinator, max_delay_ms, downgrades=True)
