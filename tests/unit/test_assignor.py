"""The eager and revoking assignors: Apache's EagerAssignor deal, and safe convergence under cooperation."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.runtime.group.eager_assignor import eager_assign
from kconnect.runtime.group.protocol import (
    CONFIG_MISMATCH,
    NO_ERROR,
    V0,
    V1,
    V2,
    ConnectAssignment,
    WorkerState,
)
from kconnect.runtime.ids import TaskId
from tests.support.revoking_assignor import revoking_assign


def T(connector: str, *numbers: int) -> tuple[TaskId, ...]:
    return tuple(TaskId(connector, n) for n in numbers)


def members_at(offset: int, *ids: str) -> dict[str, WorkerState]:
    return {m: WorkerState(f"http://{m}:8083/", offset) for m in ids}


def shares(result: Mapping[str, ConnectAssignment]) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    return {m: (a.connectors, tuple(str(t) for t in a.tasks)) for m, a in result.items()}


# ---------------------------------------------------------------------------------------------------
# Eager: tables


def test_eager_three_members_two_connectors() -> None:
    # Java's EagerAssignor: connectors a, b dealt to w1, w2; the same circular iterator then deals
    # a-0 w3, a-1 w1, a-2 w2, b-0 w3, b-1 w1.
    result = eager_assign("w1", members_at(7, "w2", "w3", "w1"), 7, {"b": 2, "a": 3})
    assert shares(result) == {
        "w1": (("a",), ("a-1", "b-1")),
        "w2": (("b",), ("a-2",)),
        "w3": ((), ("a-0", "b-0")),
    }
    for a in result.values():
        assert (a.version, a.error, a.leader, a.leader_url, a.config_offset) == (
            V0,
            NO_ERROR,
            "w1",
            "http://w1:8083/",
            7,
        )
        assert a.revoked_connectors == () and a.revoked_tasks == () and a.delay_ms == 0


def test_eager_config_mismatch_when_a_member_is_ahead_of_the_leader() -> None:
    members = members_at(5, "w1", "w2") | {"w3": WorkerState("http://w3:8083/", 9)}
    result = eager_assign("w1", members, 5, {"a": 3})
    assert set(result) == {"w1", "w2", "w3"}
    for a in result.values():
        assert a == ConnectAssignment(V0, CONFIG_MISMATCH, "w1", "http://w1:8083/", 9, (), ())


def test_eager_leader_ahead_of_members_assigns_at_the_members_max_offset() -> None:
    # EagerAssignor uses the highest offset a member reported, not the leader's own snapshot offset.
    result = eager_assign("w1", members_at(5, "w1", "w2"), 8, {"a": 1})
    assert {a.config_offset for a in result.values()} == {5}
    assert not any(a.failed for a in result.values())


def test_eager_leader_that_caught_up_uses_its_fresher_view() -> None:
    # The leader reported 3 but has since read to 9 (Java's fresh-snapshot path): no mismatch.
    members = {"w1": WorkerState("http://w1:8083/", 3), "w2": WorkerState("http://w2:8083/", 9)}
    result = eager_assign("w1", members, 9, {"a": 0})
    assert not any(a.failed for a in result.values())
    assert {a.config_offset for a in result.values()} == {9}


def test_eager_empty_cluster_and_empty_config() -> None:
    assert eager_assign("w1", {}, 0, {"a": 1}) == {}
    result = eager_assign("w1", members_at(0, "w1", "w2"), 0, {})
    assert shares(result) == {"w1": ((), ()), "w2": ((), ())}


def test_eager_one_member_gets_everything() -> None:
    result = eager_assign("solo", members_at(1, "solo"), 1, {"x": 2, "y": 0, "z": 1})
    assert shares(result) == {"solo": (("x", "y", "z"), ("x-0", "x-1", "z-0"))}


def test_eager_more_members_than_work() -> None:
    result = eager_assign("a", members_at(1, "a", "b", "c", "d"), 1, {"k": 1})
    assert shares(result) == {"a": (("k",), ()), "b": ((), ("k-0",)), "c": ((), ()), "d": ((), ())}


def test_eager_orders_members_and_connectors_like_java_strings() -> None:
    # Java compares UTF-16 code units: U+1F600 (surrogates D83D DE00) sorts before U+FF5E, unlike Python.
    emoji, fullwidth = "m\U0001f600", "m\uff5e"
    result = eager_assign(fullwidth, members_at(1, fullwidth, emoji), 1, {"c\uff5e": 0, "c\U0001f600": 0})
    assert result[emoji].connectors == ("c\U0001f600",)
    assert result[fullwidth].connectors == ("c\uff5e",)


def test_eager_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="not among the group's members"):
        eager_assign("ghost", members_at(1, "w1"), 1, {})
    with pytest.raises(ValueError, match="negative task count"):
        eager_assign("w1", members_at(1, "w1"), 1, {"a": -1})


# ---------------------------------------------------------------------------------------------------
# Revoking: tables


def owning(offset: int, member: str, connectors: tuple[str, ...], tasks: tuple[TaskId, ...]) -> WorkerState:
    alloc = ConnectAssignment(V2, NO_ERROR, "w1", "http://w1:8083/", offset, connectors, tasks)
    return WorkerState(f"http://{member}:8083/", offset, alloc)


def test_revoking_fresh_cluster_is_the_eager_target() -> None:
    config = {"b": 2, "a": 3}
    eager = eager_assign("w1", members_at(7, "w1", "w2", "w3"), 7, config)
    result = revoking_assign("w1", members_at(7, "w1", "w2", "w3"), 7, config, V2)
    assert shares(result) == shares(eager)
    assert all(a.version == V2 and not a.revoked_connectors and not a.revoked_tasks for a in result.values())


def test_revoking_worker_joins() -> None:
    # w1 and w2 run the two-member target; w3 joins. Everything w3's target holds is revoked elsewhere first.
    config = {"a": 3, "b": 2}
    before = eager_assign("w1", members_at(7, "w1", "w2"), 7, config)
    assert shares(before) == {"w1": (("a",), ("a-0", "a-2", "b-1")), "w2": (("b",), ("a-1", "b-0"))}
    members = {m: owning(7, m, a.connectors, a.tasks) for m, a in before.items()}
    members["w3"] = WorkerState("http://w3:8083/", 7)
    r1 = revoking_assign("w1", members, 7, config, V1)
    # Target: w1 (a | a-1, b-1), w2 (b | a-2), w3 (- | a-0, b-0).
    assert {m: (a.revoked_connectors, a.revoked_tasks) for m, a in r1.items()} == {
        "w1": ((), T("a", 0, 2)),
        "w2": ((), T("a", 1) + T("b", 0)),
        "w3": ((), ()),
    }
    # a-1 and a-2 change hands between w1 and w2, a-0 and b-0 go to w3: all wait for the next round.
    assert {m: (a.connectors, a.tasks) for m, a in r1.items()} == {
        "w1": ((), ()),
        "w2": ((), ()),
        "w3": ((), ()),
    }

    members2 = {
        "w1": owning(7, "w1", ("a",), T("b", 1)),
        "w2": owning(7, "w2", ("b",), ()),
        "w3": WorkerState("http://w3:8083/", 7),
    }
    r2 = revoking_assign("w1", members2, 7, config, V1)
    assert {m: (a.connectors, a.tasks) for m, a in r2.items()} == {
        "w1": ((), T("a", 1)),
        "w2": ((), T("a", 2)),
        "w3": ((), T("a", 0) + T("b", 0)),
    }
    assert not any(a.revoked_connectors or a.revoked_tasks for a in r2.values())


def test_revoking_deleted_connector_is_revoked() -> None:
    members = {"w1": owning(3, "w1", ("gone", "a"), T("gone", 0) + T("a", 0))}
    result = revoking_assign("w1", members, 3, {"a": 1}, V2)
    assert result["w1"].revoked_connectors == ("gone",)
    assert result["w1"].revoked_tasks == T("gone", 0)
    assert result["w1"].connectors == () and result["w1"].tasks == ()


def test_revoking_item_reported_twice_stays_only_with_its_target_member() -> None:
    # Target with members w1, w2 and {"a": 2}: w1 (a | a-1), w2 (- | a-0).
    members = {"w1": owning(3, "w1", (), T("a", 0)), "w2": owning(3, "w2", (), T("a", 0))}
    result = revoking_assign("w1", members, 3, {"a": 2}, V2)
    assert result["w1"].revoked_tasks == T("a", 0)
    assert result["w2"].revoked_tasks == ()
    assert result["w1"].tasks == T("a", 1) and result["w1"].connectors == ("a",)


def test_revoking_item_reported_twice_off_target_is_revoked_from_both() -> None:
    # Target with members w1, w2, w3 and {"a": 1}: w1 (a), w2 (a-0). w1 and w3 both report a-0.
    members = {
        "w1": owning(3, "w1", (), T("a", 0)),
        "w2": WorkerState("http://w2:8083/", 3),
        "w3": owning(3, "w3", (), T("a", 0)),
    }
    result = revoking_assign("w1", members, 3, {"a": 1}, V2)
    assert result["w1"].revoked_tasks == T("a", 0) and result["w3"].revoked_tasks == T("a", 0)
    assert result["w2"].tasks == ()  # still reported by others: next round


def test_revoking_config_mismatch() -> None:
    members = {"w1": owning(3, "w1", ("a",), ()), "w2": WorkerState("http://w2:8083/", 4)}
    result = revoking_assign("w1", members, 3, {"a": 1}, V2)
    for a in result.values():
        assert a == ConnectAssignment(V2, CONFIG_MISMATCH, "w1", "http://w1:8083/", 4, (), ())


def test_revoking_rejects_eager_version_and_handles_empty_cluster() -> None:
    with pytest.raises(ValueError, match="version >= 1"):
        revoking_assign("w1", members_at(1, "w1"), 1, {}, V0)
    assert revoking_assign("w1", {}, 1, {}, V1) == {}


# ---------------------------------------------------------------------------------------------------
# Properties

member_ids = st.lists(
    st.text("abcdefgh\u00e9\U0001f600", min_size=1, max_size=4), min_size=1, max_size=7, unique=True
)
configs = st.dictionaries(st.text("xyzw\uff5e", min_size=1, max_size=3), st.integers(0, 6), max_size=6)


def items(a: ConnectAssignment) -> list[str | TaskId]:
    return [*a.connectors, *a.tasks]


@given(member_ids, configs, st.data())
def test_eager_assigns_everything_exactly_once_and_evenly(
    ids: list[str], config: dict[str, int], data: st.DataObject
) -> None:
    leader = data.draw(st.sampled_from(ids))
    result = eager_assign(leader, members_at(2, *ids), 2, config)
    assert set(result) == set(ids)
    everything: Counter[str | TaskId] = Counter()
    for a in result.values():
        everything.update(items(a))
    expected = set(config) | {TaskId(c, n) for c, count in config.items() for n in range(count)}
    assert set(everything) == expected
    assert all(n == 1 for n in everything.values())
    loads = [len(items(a)) for a in result.values()]
    assert max(loads) - min(loads) <= 1
    connector_loads = [len(a.connectors) for a in result.values()]
    assert max(connector_loads) - min(connector_loads) <= 1


Owned = dict[str, tuple[set[str], set[TaskId]]]


def to_members(owned: Owned, offset: int) -> dict[str, WorkerState]:
    return {
        m: WorkerState(
            f"http://{m}/",
            offset,
            ConnectAssignment(V2, NO_ERROR, "x", "http://x/", offset, tuple(cs), tuple(ts))
            if cs or ts
            else None,
        )
        for m, (cs, ts) in owned.items()
    }


def assert_no_double_ownership(owned: Owned) -> None:
    seen: Counter[str | TaskId] = Counter()
    for cs, ts in owned.values():
        seen.update(cs)
        seen.update(ts)
    doubled = [item for item, n in seen.items() if n > 1]
    assert not doubled, f"owned by two members: {doubled}"


@st.composite
def prior_ownership(draw: st.DrawFn, ids: list[str], config: dict[str, int]) -> Owned:
    """What members run before a rebalance: an earlier generation's eager target over other members and
    another config (workers joined, left, connectors resized or deleted), or arbitrary disjoint ownership."""
    owned: Owned = {m: (set(), set()) for m in ids}
    if draw(st.booleans()):
        old_ids = draw(member_ids)
        old_config = draw(configs)
        for m, a in eager_assign(old_ids[0], members_at(1, *old_ids), 1, old_config).items():
            if m in owned:
                owned[m] = (set(a.connectors), set(a.tasks))
    else:
        names = sorted(set(config) | set(draw(configs)))
        pool: list[str | TaskId] = [*names, *(TaskId(c, n) for c in names for n in range(4))]
        for item in pool:
            holder = draw(st.none() | st.sampled_from(ids))
            if holder is None:
                continue
            if isinstance(item, TaskId):
                owned[holder][1].add(item)
            else:
                owned[holder][0].add(item)
    return owned


@settings(max_examples=300)
@given(member_ids, configs, st.data())
def test_revoking_converges_within_two_rounds_without_double_ownership(
    ids: list[str], config: dict[str, int], data: st.DataObject
) -> None:
    leader = data.draw(st.sampled_from(ids))
    version = data.draw(st.sampled_from([V1, V2]))
    owned = data.draw(prior_ownership(ids, config))
    target = eager_assign(leader, members_at(5, *ids), 5, config)
    assert_no_double_ownership(owned)
    for _round in range(2):
        result = revoking_assign(leader, to_members(owned, 5), 5, config, version)
        running_before = set().union(*(cs | ts for cs, ts in owned.values()))
        assigned: Counter[str | TaskId] = Counter()
        for m, a in result.items():
            assert a.version == version and a.delay_ms == 0 and not a.failed
            cs, ts = owned[m]
            # Revocations name only what the member runs; assignments only what nobody runs yet, so a
            # task starts only after every previous owner has stopped it, whatever order members apply in.
            assert set(a.revoked_connectors) <= cs and set(a.revoked_tasks) <= ts
            assert not set(items(a)) & running_before
            assigned.update(items(a))
        assert all(n == 1 for n in assigned.values())
        owned = {
            m: (
                (cs - set(result[m].revoked_connectors)) | set(result[m].connectors),
                (ts - set(result[m].revoked_tasks)) | set(result[m].tasks),
            )
            for m, (cs, ts) in owned.items()
        }
        assert_no_double_ownership(owned)
    assert {m: (cs, ts) for m, (cs, ts) in owned.items()} == {
        m: (set(a.connectors), set(a.tasks)) for m, a in target.items()
    }
    # Stable: a third round changes nothing.
    final = revoking_assign(leader, to_members(owned, 5), 5, config, version)
    assert not any(items(a) or a.revoked_connectors or a.revoked_tasks for a in final.values())


@given(member_ids, configs, st.data())
def test_revoking_resolves_items_reported_by_several_members_in_one_round(
    ids: list[str], config: dict[str, int], data: st.DataObject
) -> None:
    leader = ids[0]
    pool: list[str | TaskId] = [*config, *(TaskId(c, n) for c, k in config.items() for n in range(k + 1))]
    owned: Owned = {m: (set(), set()) for m in ids}
    for item in pool:
        for holder in data.draw(st.lists(st.sampled_from(ids), max_size=3, unique=True)):
            if isinstance(item, TaskId):
                owned[holder][1].add(item)
            else:
                owned[holder][0].add(item)
    result = revoking_assign(leader, to_members(owned, 1), 1, config, V1)
    after = {
        m: (
            (cs - set(result[m].revoked_connectors)) | set(result[m].connectors),
            (ts - set(result[m].revoked_tasks)) | set(result[m].tasks),
        )
        for m, (cs, ts) in owned.items()
    }
    assert_no_double_ownership(after)


def test_revoking_at_scale_revokes_every_misplaced_task() -> None:
    # 1,000 workers x 100,000 tasks with every item misplaced (bench/assignor.py measures its time).
    ids = [f"connect-{i:04d}" for i in range(1000)]
    config = {f"conn-{c:04d}": 100 for c in range(1000)}
    target = eager_assign(ids[0], members_at(9, *ids), 9, config)
    shifted = {
        ids[i]: WorkerState(f"http://{ids[i]}/", 9, target[ids[(i + 1) % len(ids)]]) for i in range(len(ids))
    }
    result = revoking_assign(ids[0], shifted, 9, config, V2)
    assert sum(len(a.revoked_tasks) for a in result.values()) == 100_000
    assert not any(a.tasks for a in result.values())  # nothing moves before its owner released it
