"""Source hosts on a Spark cluster (issue 32): how many, and which host runs which source task."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.dataplane.source_host_plan import (
    Placement,
    host_count,
    host_slots,
    place,
    task_load,
)


@pytest.mark.parametrize(
    ("cores", "task_cpus", "slots"),
    [(2, 1, 2), (8, 2, 4), (1, 1, 1), (3, 2, 1), (0, 1, 1), (4, 0, 4)],
)
def test_host_slots(cores: int, task_cpus: int, slots: int) -> None:
    assert host_slots(cores, task_cpus) == slots


@pytest.mark.parametrize(
    ("tasks", "slots", "per_host", "hosts"),
    [
        (0, 8, 64, 0),  # no source task, no host
        (1, 2, 64, 1),
        (100, 2, 64, 1),  # two slots: one host, one slot left for sink batches
        (100, 8, 64, 2),  # one host per 64 tasks
        (1000, 8, 64, 7),  # never every slot
        (5, 1, 64, 1),  # one slot: one host all the same (the worker warns)
        (3, 4, 1, 3),
        (10, 4, 1, 3),
    ],
)
def test_host_count(tasks: int, slots: int, per_host: int, hosts: int) -> None:
    assert host_count(tasks, slots, per_host) == hosts


@given(st.integers(0, 10_000), st.integers(1, 512), st.integers(1, 200))
def test_hosts_leave_a_slot_for_sink_batches(tasks: int, slots: int, per_host: int) -> None:
    hosts = host_count(tasks, slots, per_host)
    assert hosts == 0 if tasks == 0 else hosts >= 1
    if slots >= 2:
        assert hosts <= slots - 1
    assert hosts <= max(1, tasks)


def test_task_load_weighs_an_idle_task_one() -> None:
    assert task_load(0) == 1.0
    assert task_load(-5) == 1.0
    assert task_load(200) == 2.0


@pytest.mark.parametrize(
    ("hosts", "waiting", "expected"),
    [
        ({}, {"a": 1.0}, Placement()),  # no live host: everything waits
        ({"h0": {}}, {"a": 1.0, "b": 1.0}, Placement({"a": "h0", "b": "h0"})),
        ({"h0": {}, "h1": {}}, {"a": 1, "b": 1, "c": 1}, Placement({"a": "h0", "b": "h1", "c": "h0"})),
        # the heavy task first, alone on one host; the light ones on the other
        ({"h0": {}, "h1": {}}, {"a": 1, "big": 5, "c": 1}, Placement({"big": "h0", "a": "h1", "c": "h1"})),
        # a new, empty host takes tasks from the full one until they are even
        (
            {"h0": {"a": 1, "b": 1, "c": 1, "d": 1}, "h1": {}},
            {},
            Placement(moves={"d": "h1", "c": "h1"}),
        ),
        # near-even stays put (a move restarts a task)
        ({"h0": {"a": 1, "b": 1}, "h1": {"c": 1}}, {}, Placement()),
        # a busy task is not moved onto a host where it would make things worse
        ({"h0": {"big": 3, "a": 1}, "h1": {"b": 1}}, {}, Placement(moves={"a": "h1"})),
        ({"h0": {"big": 3}, "h1": {"b": 1}}, {}, Placement()),
        # a host lost: its tasks wait and go to the host with room
        ({"h1": {"x": 1, "y": 1}, "h2": {}}, {"a": 1, "b": 1}, Placement({"a": "h2", "b": "h2"})),
    ],
)
def test_place(hosts: dict[str, dict[str, float]], waiting: dict[str, float], expected: Placement) -> None:
    assert place(hosts, waiting) == expected


def test_moves_are_bounded_per_round() -> None:
    hosts: dict[str, dict[str, float]] = {"h0": {f"t{i}": 1.0 for i in range(40)}, "h1": {}}
    assert len(place(hosts, {}, max_moves=4).moves) == 4


@given(
    st.dictionaries(
        st.sampled_from([f"h{i}" for i in range(5)]),
        st.dictionaries(st.text("abcdef", min_size=1, max_size=3), st.floats(1, 10), max_size=8),
        min_size=1,
    ),
    st.dictionaries(st.text("uvwxyz", min_size=1, max_size=3), st.floats(1, 10), max_size=12),
)
def test_every_waiting_task_starts_on_a_live_host_and_moves_never_widen_the_gap(
    hosts: dict[str, dict[str, float]], waiting: dict[str, float]
) -> None:
    # task names unique across hosts
    seen: set[str] = set()
    hosts = {h: {t: v for t, v in ts.items() if not (t in seen or seen.add(t))} for h, ts in hosts.items()}  # type: ignore[func-returns-value]
    result = place(hosts, waiting, max_moves=100)
    assert set(result.starts) == set(waiting)
    assert set(result.starts.values()) <= set(hosts)
    assert set(result.moves.values()) <= set(hosts)
    after = {h: dict(ts) for h, ts in hosts.items()}
    for task, host in result.starts.items():
        after[host][task] = waiting[task]
    before_gap = max(sum(t.values()) for t in after.values()) - min(sum(t.values()) for t in after.values())
    for task, host in result.moves.items():
        [source] = [h for h, ts in after.items() if task in ts]
        assert source != host
        after[host][task] = after[source].pop(task)
    after_gap = max(sum(t.values()) for t in after.values()) - min(sum(t.values()) for t in after.values())
    assert after_gap <= before_gap + 1e-9
