"""Live rebalance cost, eager vs cooperative, side by side on the embedded broker.

For each protocol: three real workers hold a connector with 30 tasks; then one event at a time (a fourth
worker joins; the fourth leaves cleanly; a worker is killed and its tasks wait out
``scheduled.rebalance.max.delay.ms``). For each event it prints the tasks stopped on the workers that
stay and the wall time from the event until every task is held exactly once again.

    .venv/bin/python bench/rebalance.py            # about three minutes on 2 cores

The test broker completes a generation ``session.timeout.ms / 2`` after the first JoinGroup (3 s here),
so wall times include that floor per rebalance round; Apache Kafka does not have it.
"""

from __future__ import annotations

import os
import platform
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kconnect.runtime.cli import broker as embedded
from kconnect.runtime.cli.broker import free_port
from tests.support.cluster import WorkerProcess, stable_view, start_cluster, wait_nudging, wait_until

TASKS = 30
DELAY_MS = 10000


def holdings(workers: list[WorkerProcess]) -> dict[str, dict[str, Any]] | None:
    out: dict[str, dict[str, Any]] = {}
    for w in workers:
        view = w.workers()
        if view is None or view["this_worker"]["rebalancing"] or view["this_worker"]["scheduled_delay_ms"]:
            return None
        me = view["this_worker"]
        out[w.url] = {
            "tasks": set(me["assignment"]["tasks"]),
            "stops": me["task_stops"],
            "gen": me["generation"],
        }
    if len({v["gen"] for v in out.values()}) != 1:
        return None
    held = [t for v in out.values() for t in v["tasks"]]
    return out if len(held) == TASKS and len(set(held)) == TASKS else None


def run(protocol: str, bootstrap: str, work: Path) -> list[tuple[str, int, float]]:
    workers = start_cluster(
        work,
        bootstrap,
        3,
        connect_protocol=protocol,
        scheduled_rebalance_max_delay_ms=DELAY_MS,
        group_protocol="classic",  # the classic rounds are what this compares
    )
    results: list[tuple[str, int, float]] = []
    try:
        wait_until(stable_view(workers, 3), 120, "group")
        config = {"connector.class": "FileStreamSink", "topics": "bench-in", "tasks.max": str(TASKS)}
        wait_until(
            lambda: (
                workers[0].request("POST", "/connectors", json={"name": "s", "config": config}).status_code
                == 201
            ),
            60,
            "create",
        )
        before = wait_until(lambda: holdings(workers), 120, "settled")

        def event(name: str, act: Any, staying: list[WorkerProcess], everyone: list[WorkerProcess]) -> None:
            nonlocal before
            t0 = time.monotonic()
            act()
            # The embedded broker needs a nudge where Kafka would rebalance by itself (wait_nudging).
            after = wait_nudging(
                lambda: holdings(everyone),
                lambda: everyone[0].request("PUT", "/connectors/s/config", json=config),
                180,
                name,
            )
            elapsed = time.monotonic() - t0
            stops = sum(after[w.url]["stops"] - before[w.url]["stops"] for w in staying)
            results.append((name, stops, elapsed))
            before = after

        props = dict(workers[0].props)
        props["listeners"] = f"http://127.0.0.1:{free_port()}"
        fourth = WorkerProcess(work, props, name=f"{protocol}-fourth")
        event("4th worker joins", fourth.start, workers[:3], [*workers, fourth])
        event("4th worker stops cleanly", fourth.stop, workers[:3], workers[:3])
        victim = workers[2]
        event("a worker is killed", victim.kill, workers[:2], workers[:2])
    finally:
        for w in workers:
            if w.alive():
                w.stop()
    return results


def main() -> None:
    print(
        f"kconnect live rebalance bench — {platform.python_version()}, {os.cpu_count()} cores, "
        f"{time.strftime('%Y-%m-%d')}; {TASKS} tasks, scheduled.rebalance.max.delay.ms={DELAY_MS}"
    )
    rows: dict[str, list[tuple[str, int, float]]] = {}
    with tempfile.TemporaryDirectory() as tmp, embedded.running() as b:
        for proto in ("eager", "sessioned"):
            rows[proto] = run(proto, b.bootstrap, Path(tmp))
    print(f"{'event':28} {'eager stops':>12} {'eager s':>9} {'coop stops':>11} {'coop s':>8}")
    for (name, es, et), (_, cs, ct) in zip(rows["eager"], rows["sessioned"], strict=True):
        print(f"{name:28} {es:12d} {et:9.1f} {cs:11d} {ct:8.1f}")


if __name__ == "__main__":
    main()
