"""The sink task stall watch's decisions (``runtime/dataplane/stall_watch.py``), as tables of looks."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.dataplane.stall_watch import Reading, observe, reading, start, unreadable
from kconnect.runtime.plugins.api import TopicPartition

A = TopicPartition("t", 0)
B = TopicPartition("t", 1)
BOUND = 30.0


@dataclass(frozen=True)
class Look:
    """One look: when, positions, ends, inbox size; and what the verdict must say."""

    at: float
    positions: dict[TopicPartition, int]
    ends: dict[TopicPartition, int]
    waiting: int
    stalled: bool
    reestablish: frozenset[TopicPartition] = frozenset()
    escalate: bool = False


def run(looks: list[Look]) -> None:
    state = start(0.0)
    for i, look in enumerate(looks):
        state, verdict = observe(state, look.at, BOUND, look.positions, look.ends, look.waiting)
        got = (verdict.stalled, verdict.reestablish, verdict.escalate)
        assert got == (look.stalled, look.reestablish, look.escalate), (i, look, verdict)


CASES = {
    "caught up and idle for long is never a stall": [
        Look(0, {A: 10}, {A: 10}, 0, False),
        Look(100, {A: 10}, {A: 10}, 0, False),
        Look(1000, {A: 10}, {A: 10}, 0, False),
    ],
    "behind and unmoved for the bound: stalled, re-established once per bound": [
        Look(0, {A: 10}, {A: 10}, 0, False),
        Look(100, {A: 10}, {A: 50}, 0, False),  # the first look behind starts the clock
        Look(120, {A: 10}, {A: 60}, 0, False),
        Look(130, {A: 10}, {A: 70}, 0, True, frozenset({A})),
        Look(140, {A: 10}, {A: 80}, 0, True),  # still stalled; the last re-establishment is too recent
        Look(160, {A: 10}, {A: 90}, 0, True, frozenset({A}), escalate=True),  # the re-seek did not help
        Look(190, {A: 10}, {A: 90}, 0, True, frozenset({A}), escalate=True),
    ],
    "moving while behind (a backlog being read) is no stall": [
        Look(0, {A: 0}, {A: 1000}, 0, False),
        Look(20, {A: 100}, {A: 1000}, 0, False),
        Look(40, {A: 200}, {A: 1000}, 0, False),
        Look(60, {A: 300}, {A: 1000}, 0, False),
    ],
    "records waiting in the inbox (a slow put, a paused partition) are no reading stall": [
        Look(0, {A: 10}, {A: 99}, 5000, False),
        Look(100, {A: 10}, {A: 99}, 5000, False),
    ],
    "a stall ends as soon as the position moves": [
        Look(0, {A: 10}, {A: 20}, 0, False),
        Look(30, {A: 10}, {A: 20}, 0, True, frozenset({A})),
        Look(31, {A: 20}, {A: 25}, 0, False),
        Look(60, {A: 20}, {A: 25}, 0, False),  # the clock starts again at this first look behind, unmoved
        Look(89, {A: 20}, {A: 25}, 0, False),
        Look(90, {A: 20}, {A: 25}, 0, True, frozenset({A})),  # a new stall starts gently again
    ],
    "an unknown end (leader down) is no evidence": [
        Look(0, {A: 10}, {}, 0, False),
        Look(100, {A: 10}, {}, 0, False),
    ],
    "only the partitions behind are re-established": [
        Look(0, {A: 10, B: 5}, {A: 20, B: 5}, 0, False),
        Look(40, {A: 10, B: 5}, {A: 20, B: 5}, 0, True, frozenset({A})),
    ],
    "a rewind (position back) is progress": [
        Look(0, {A: 50}, {A: 60}, 0, False),
        Look(29, {A: 0}, {A: 60}, 0, False),
        Look(40, {A: 0}, {A: 60}, 0, False),
    ],
}


@pytest.mark.parametrize("looks", CASES.values(), ids=CASES.keys())
def test_stall_watch_decides_from_each_look(looks: list[Look]) -> None:
    run(looks)


def test_the_published_reading_names_the_lag_and_the_last_progress_in_wall_clock_time() -> None:
    state = start(100.0)
    state, verdict = observe(state, 100.0, BOUND, {A: 10, B: 3}, {A: 15, B: 3}, 0)
    assert reading(state, verdict, 5000.0, 100.0) == Reading(5, 5000.0, False, 0.0, (), 0)
    state, verdict = observe(state, 140.0, BOUND, {A: 10, B: 3}, {A: 17, B: 3}, 0)
    assert reading(state, verdict, 5040.0, 140.0) == Reading(7, 5000.0, True, 40.0, ("t-0",), 1)


@given(
    steps=st.lists(
        st.tuples(st.floats(0.1, 20.0), st.integers(0, 5), st.integers(0, 50), st.integers(0, 3)),
        max_size=30,
    )
)
def test_never_stalled_while_caught_up_and_never_reestablished_more_than_once_a_bound(
    steps: list[tuple[float, int, int, int]],
) -> None:
    state, now, position = start(0.0), 0.0, 0
    last_action: float | None = None
    for dt, advance, extra, waiting in steps:
        now += dt
        position += advance
        state, verdict = observe(state, now, BOUND, {A: position}, {A: position + extra}, waiting)
        if extra == 0 or waiting:
            assert not verdict.stalled
        if verdict.stalled:
            assert verdict.stalled_s >= BOUND
        if verdict.reestablish:
            assert last_action is None or now - last_action >= BOUND
            last_action = now


def test_a_task_that_cannot_read_its_partitions_offsets_is_stalled_once_that_lasts_a_bound() -> None:
    """A task whose partitions or committed offsets cannot be read (the group's coordinator answering
    NOT_COORDINATOR, ``make faults`` 2026-11-29) reads nothing: stalled, with the error as its cause,
    once that lasts ``sink.task.stall.timeout.ms``; before that, what was published stays."""
    before = Reading(lag=3, last_progress_at=5.0)
    assert unreadable(before, BOUND - 1, BOUND, "NOT_COORDINATOR") is before
    after = unreadable(before, BOUND + 2, BOUND, "Broker: Not coordinator")
    assert after.stalled and after.stalled_s == BOUND + 2 and after.cause == "Broker: Not coordinator"
    assert (after.lag, after.last_progress_at) == (3, 5.0)
