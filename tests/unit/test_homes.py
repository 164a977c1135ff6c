"""Work going home after a rolling restart (issue 34): ``runtime/group/homes`` and its use by the
cooperative assignor, replayed round by round with no sockets; the homes' bytes in the target record."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.runtime.group import group_records as gr
from kconnect.runtime.group import homes
from kconnect.runtime.group.assignor import CooperativeState, leader_assign
from kconnect.runtime.group.group_records import (
    Assigned,
    Home,
    TargetAssignmentKey,
    TargetAssignmentValue,
    TargetMember,
)
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import wire


class Group:
    """A sessioned (v2) group whose leader's memory carries over, driven round by round to a fixed point
    as members apply each assignment (stop the revoked, start the new)."""

    def __init__(self, connectors: dict[str, int]) -> None:
        self.work = connectors
        self.state = CooperativeState()
        self.generation = 0
        self.own: dict[str, set[TaskId]] = {}
        self.url: dict[str, str] = {}
        self.joined = 0

    def join(self, url: str) -> str:
        self.joined += 1
        member = f"m{self.joined:04d}"
        self.own[member], self.url[member] = set(), url
        return member

    def rounds(self, leaving: frozenset[str] = frozenset()) -> None:
        for _ in range(8):
            self.generation += 1
            members = {
                m: WorkerState(
                    self.url[m],
                    0,
                    ConnectAssignment(2, 0, "L", "http://l/", 0, (), tuple(sorted(self.own[m]))),
                    leaving=m in leaving,
                )
                for m in self.own
            }
            result, self.state = leader_assign(
                self.state,
                selected_protocol=ProtocolName.SESSIONED,
                leader_id=min(self.own),
                members=members,
                leader_config_offset=0,
                connectors=self.work,
                now_ms=0,
                max_delay_ms=300_000,
                generation=self.generation,
                leaving=leaving,
            )
            moved = False
            for m, a in result.items():
                self.own[m] -= set(a.revoked_tasks)
                self.own[m] |= set(a.tasks)
                moved = moved or bool(a.revoked_tasks or a.tasks)
            if not moved:
                return
        raise AssertionError("the assignor did not settle in 8 rounds")

    def owners(self) -> dict[TaskId, str]:
        out: dict[TaskId, str] = {}
        for m, tasks in self.own.items():
            for t in tasks:
                assert t not in out, f"{t} runs on {out[t]} and {self.url[m]}"
                out[t] = self.url[m]
        return out

    def restart(self, url: str) -> None:
        (member,) = (m for m in self.own if self.url[m] == url)
        self.rounds(frozenset({member}))  # SIGTERM: it announces its departure
        del self.own[member]
        self.rounds()  # gone
        self.join(url)  # back with the same identity
        self.rounds()


def roll(workers: int, pipelines: int) -> list[tuple[int, int, int]]:
    """Each worker restarted in turn: per turn, (tasks of other workers that moved, tasks of the restarted
    worker not back, the restarted worker's tasks)."""
    group = Group({f"p{n:03d}-{kind}": 1 for n in range(pipelines) for kind in ("source", "sink")})
    urls = [f"http://w{n}:8083/" for n in range(workers)]
    for url in urls:
        group.join(url)
    group.rounds()
    out = []
    for url in urls:
        before = group.owners()
        group.restart(url)
        after = group.owners()
        assert set(after) == set(before), "a task is not running after the turn"
        mine = {t for t, u in before.items() if u == url}
        others = sum(1 for t, u in before.items() if u != url and after[t] != u)
        out.append((others, sum(1 for t in mine if after[t] != url), len(mine)))
    return out


@pytest.mark.parametrize(
    ("workers", "pipelines"),
    [(3, 50), (5, 200)],  # bench/rolling.py's two sizes
)
def test_a_rolling_restart_moves_no_task_of_another_worker(workers: int, pipelines: int) -> None:
    share = 2 * pipelines // workers
    for others, not_back, mine in roll(workers, pipelines):
        assert others == 0
        assert mine - not_back >= share  # back: all of it, or its balanced share when it ran more


@settings(max_examples=40, deadline=None)
@given(
    workers=st.integers(2, 6),
    tasks=st.integers(0, 40),
    order=st.lists(st.integers(0, 5), min_size=1, max_size=8),
)
def test_restarts_in_any_order_keep_every_task_once_and_move_only_the_restarted_workers(
    workers: int, tasks: int, order: list[int]
) -> None:
    group = Group({f"c{n:02d}": 1 for n in range(tasks)})
    urls = [f"http://w{n}:8083/" for n in range(workers)]
    for url in urls:
        group.join(url)
    group.rounds()
    for pick in order:
        url = urls[pick % workers]
        before = group.owners()
        group.restart(url)
        after = group.owners()
        assert set(after) == set(before) == {TaskId(f"c{n:02d}", 0) for n in range(tasks)}
        assert all(after[t] == u for t, u in before.items() if u != url)
        loads = Counter(after.values())
        assert max(loads.values(), default=0) - min((loads[u] for u in urls), default=0) <= 1


def test_without_a_graceful_departure_nothing_is_remembered() -> None:
    group = Group({"a": 4, "b": 4})
    for url in ("http://w0:8083/", "http://w1:8083/"):
        group.join(url)
    group.rounds()
    group.join("http://w2:8083/")
    group.rounds()
    assert group.state.homes == ()


# ------------------------------------------------------------------------------------- pure parts


def T(*specs: str) -> frozenset[TaskId]:
    return frozenset(TaskId(s.split("-")[0], int(s.split("-")[1])) for s in specs)


def test_the_latest_departure_is_a_tasks_home() -> None:
    first = homes.left((), {"w1": Assigned(frozenset({"a"}), T("a-0", "a-1"))})
    assert first == (Home("w1", Assigned(frozenset({"a"}), T("a-0", "a-1"))),)
    # w2 left with a-1 (it had gone there while w1 was away): a-1's home is w2's now.
    second = homes.left(first, {"w2": Assigned(frozenset(), T("a-1")), "w3": Assigned()})
    assert second == (
        Home("w1", Assigned(frozenset({"a"}), T("a-0"))),
        Home("w2", Assigned(frozenset(), T("a-1"))),
    )


def test_settle_keeps_only_work_not_yet_home_and_still_configured() -> None:
    members = {"m1": WorkerState("http://w1/", 0), "m2": WorkerState("http://w2/", 0)}
    held = (
        Home("http://w1/", Assigned(frozenset(), T("a-0", "b-0"))),
        Home("http://w2/", Assigned(frozenset(), T("a-1", "c-0"))),
        Home("http://w9/", Assigned(frozenset(), T("a-2"))),
    )
    holding = {"m1": Assigned(frozenset(), T("a-0")), "m2": Assigned(frozenset(), T("b-0"))}
    out = homes.settle(held, members, holding, Assigned(frozenset(), T("a-0", "a-1", "a-2", "b-0")))
    # w1 holds a-0 again (b-0 is still on its way: a target installs moves a few at a time under warm-up);
    # w2 keeps a-1 (c-0 is deleted); w9 is away: kept.
    assert out == (
        Home("http://w1/", Assigned(frozenset(), T("b-0"))),
        Home("http://w2/", Assigned(frozenset(), T("a-1"))),
        Home("http://w9/", Assigned(frozenset(), T("a-2"))),
    )


def test_a_worker_id_names_a_home_before_the_url() -> None:
    assert homes.identity(WorkerState("http://w1/", 0, worker_id="east-1")) == "east-1"
    assert homes.identity(WorkerState("http://w1/", 0)) == "http://w1/"


# ----------------------------------------------------------------------------------------- bytes


def target(home: tuple[Home, ...]) -> TargetAssignmentValue:
    member = TargetMember("m1", 0, Assigned(frozenset({"a"}), T("a-0")), 2, b"\x00\x02")
    return TargetAssignmentValue(3, (member,), home)


def test_homes_round_trip_and_a_target_without_them_keeps_its_bytes() -> None:
    key = TargetAssignmentKey("g")
    with_homes = target(
        (Home("http://w2/", Assigned(frozenset({"b"}), T("b-0", "b-1"))), Home("east-1", Assigned()))
    )
    assert gr.decode_value(key, gr.encode_value(with_homes)) == with_homes
    plain = gr.encode_value(target(()))
    assert plain.endswith(wire.NO_TAGS)
    assert gr.encode_value(with_homes).startswith(plain[:-1])  # the same fields, then tag 1


def test_homes_that_do_not_decode_are_skipped_and_the_target_kept() -> None:
    key = TargetAssignmentKey("g")
    plain = gr.encode_value(target(()))
    garbage = b"\x05\xff\xff"
    broken = plain[:-1] + wire.uvarint(1) + wire.uvarint(gr.TAG_HOMES) + wire.uvarint(len(garbage)) + garbage
    value = gr.decode_value(key, broken)
    assert isinstance(value, TargetAssignmentValue)
    assert value.homes == () and value.members == target(()).members
