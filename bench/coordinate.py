"""The leader's and the members' step cost under ``group.protocol=connect`` at the rolling bench's scale,
without brokers (issue 34, item 3: the leader produced a target only every 1.5-3 s under load).

A whole rolling restart is replayed through real herders over one modelled group-records partition
(``tests/support/reconcile_model``): ``--workers`` W members, ``--pipelines`` P pipelines as 2P connectors
of one task each (a FileStream source and sink per pipeline, as ``bench/rolling.py`` creates), warm-up on
(``max.warmup.tasks`` 2, learners ready as soon as asked). Each worker in turn leaves gracefully and
comes back under the same identity, and the group settles before the next turn. Every call of
``coordinator.coordinate`` (the leader's step: judging acknowledgements, and when the group epoch moves,
computing and installing a target) and every member's ``Herder.on_group_records`` (its reconcile step) is
timed. Printed per kind: calls, median, p95 and max in milliseconds, and the total; then the same replay
with each target member's Connect assignment decoded at every reading (``--compare``: the readings of
``target_assignment`` before they were cached), side by side.

The figures are one process on this machine's load: compare rows of one run, not runs.

    .venv/bin/python bench/coordinate.py                         # 5 workers x 200 pipelines, ~1 min
    .venv/bin/python bench/coordinate.py --workers 3 --pipelines 50 --compare
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kconnect.runtime.group import coordinator, protocol, target_assignment
from kconnect.runtime.group import herder_reconciliation as hr
from kconnect.runtime.group.handover import WarmupSettings
from tests.support.reconcile_model import ReconcileModel


@contextmanager
def timing(calls: dict[str, list[float]]) -> Iterator[None]:
    """Time every coordinate call (as ``bumped`` or ``judged``) and every member reconcile step."""
    coordinate = coordinator.coordinate
    on_group_records = hr.Reconciliation.on_group_records

    def timed_coordinate(group: object, inp: coordinator.CoordinatorInput) -> coordinator.Decision:
        began = time.perf_counter()
        decision = coordinate(group, inp)  # type: ignore[arg-type]
        calls["leader: target installed" if decision.bumped else "leader: judged only"].append(
            time.perf_counter() - began
        )
        return decision

    def timed_reconcile(self: hr.Reconciliation, group: object, now_ms: int) -> list[object]:
        began = time.perf_counter()
        try:
            return on_group_records(self, group, now_ms)  # type: ignore[arg-type, return-value]
        finally:
            calls["member: on_group_records (incl. leader)"].append(time.perf_counter() - began)

    hr.coordinator.coordinate = timed_coordinate  # type: ignore[assignment]
    hr.Reconciliation.on_group_records = timed_reconcile  # type: ignore[assignment, method-assign]
    try:
        yield
    finally:
        hr.coordinator.coordinate = coordinate
        hr.Reconciliation.on_group_records = on_group_records  # type: ignore[method-assign]


def roll(workers: int, pipelines: int) -> dict[str, list[float]]:
    """One rolling restart replayed; the step times by kind."""
    members = tuple(f"w{i}" for i in range(workers))
    work = {f"p{i}-{side}": 1 for i in range(pipelines) for side in ("source", "sink")}
    model = ReconcileModel(members, work, warmup=WarmupSettings(2, 60_000, 5_000), learns=True)
    model.settle()
    calls: dict[str, list[float]] = {
        "leader: target installed": [],
        "leader: judged only": [],
        "member: on_group_records (incl. leader)": [],
    }
    with timing(calls):
        for member in members:
            model.begin_leave(member)
            model.complete_all()
            model.settle()
            back = sorted({*model.members, member})
            model.begin_round(model.leader if model.leader in back else back[0], back)
            model.complete_all()
            model.settle()
    model.assert_converged()
    return calls


def row(label: str, times: list[float]) -> str:
    if not times:
        return f"{label:44} {0:>6}"
    ms = sorted(t * 1000 for t in times)
    p95 = ms[min(len(ms) - 1, int(0.95 * len(ms)))]
    figures = f"{statistics.median(ms):>8.2f} {p95:>8.2f} {ms[-1]:>8.2f} {sum(ms) / 1000:>8.2f}"
    return f"{label:44} {len(ms):>6} {figures}"


def report(title: str, calls: dict[str, list[float]]) -> None:
    print(title)
    print(f"{'step':44} {'calls':>6} {'p50 ms':>8} {'p95 ms':>8} {'max ms':>8} {'total s':>8}")
    for label, times in calls.items():
        print(row(label, times))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=5)
    parser.add_argument("--pipelines", type=int, default=200)
    parser.add_argument("--compare", action="store_true", help="also replay with the readings uncached")
    args = parser.parse_args()
    load = os.getloadavg()[0]
    print(
        f"{args.workers} workers, {args.pipelines} pipelines ({4 * args.pipelines} connectors and tasks); "
        f"load average {load:.1f}"
    )
    report("cached readings (as the product runs)", roll(args.workers, args.pipelines))
    if args.compare:
        cached: Callable[[bytes], protocol.ConnectAssignment] = target_assignment._assignment
        target_assignment._assignment = protocol.decode_assignment  # type: ignore[assignment]
        try:
            report("decoded at every reading (before)", roll(args.workers, args.pipelines))
        finally:
            target_assignment._assignment = cached  # type: ignore[assignment]
    return 0


if __name__ == "__main__":
    sys.exit(main())
