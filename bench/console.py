"""Console: how fast the console at /ui opens with many connectors (issue 34: "opens within 1 s with 1,000
connectors"), and the one REST call its list makes, kconnect beside Apache Kafka Connect 4.x.

On one broker it starts itself (Apache Kafka 4.x, one KRaft node; ``--broker embedded``: the embedded
development broker), per system one fresh worker gets ``--connectors`` N connectors, created eight at a
time: N - F FileStreamSource connectors created ``STOPPED`` (``initial_state``, KIP-980: configured, no
instance running, so a 2-core machine holds a thousand) and F = ``--failing`` FileStreamSink connectors
RUNNING whose task fails at once (its file's directory does not exist), so the list has failures to
put first. Then:

- **list call**: ``GET /connectors?expand=status&expand=info`` (the console's one call for the list),
  ``--calls`` times: median and max milliseconds, and the answer's size;
- **console open** (kconnect; Apache Kafka Connect has no console): a fresh headless Chromium (Debian's,
  ``make chromium``; a new profile each time, so nothing is cached) opens ``/ui/`` ``--opens`` times, and
  the page records: **page**, from navigation start (``performance.timeOrigin``) to the list on screen
  (counts, and the first rows, failures first); **in-page call**, the list's one REST call as the
  page saw it; **all rows**, navigation start to the last of the N rows in the DOM (the rows after the
  first screenful are added in one later task). ``--screenshot PATH`` saves the last one.

Nothing is asserted; figures measured on a shared machine say so. The bench stops what it starts.

    .venv/bin/python bench/console.py --connectors 1000
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dataplane import bench_reference_worker
from density import run_systems

from kconnect.runtime.cli.broker import free_port
from tests.support import browser
from tests.support.cluster import WorkerProcess, stable_view, wait_until, worker_properties
from tests.support.reference import REFERENCE_4X


@dataclass
class Row:
    system: str
    connectors: int
    create_s: float
    call_ms: list[float]
    answer_kib: float
    page_ms: list[float]
    list_ms: list[float]
    fetch_ms: list[float]
    rows_ms: list[float]


def _configs(n: int, failing: int, work: Path) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for i in range(n - failing):
        config = {"connector.class": "FileStreamSource", "file": str(work / f"in-{i}.txt"), "topic": f"t-{i}"}
        out.append({"name": f"pipeline-{i:04d}-source", "config": config, "initial_state": "STOPPED"})
    for i in range(failing):
        config = {"connector.class": "FileStreamSink", "topics": "t-0", "file": f"/nonexistent-dir/{i}.txt"}
        out.append({"name": f"audit-{i}-sink", "config": config})
    return out


def _create_all(url: str, bodies: list[dict[str, Any]]) -> float:
    started = time.monotonic()

    def create(body: dict[str, Any]) -> None:
        for _ in range(20):
            resp = httpx.post(url + "/connectors", json=body, timeout=120)
            # 409 "already exists": a retried create whose first answer was lost; another 409 or a 503 is a
            # rebalance or a worker still starting, asked again.
            if resp.status_code == 201 or (resp.status_code == 409 and "already exists" in resp.text):
                return
            time.sleep(1)
        raise RuntimeError(f"create {body['name']}: HTTP {resp.status_code} {resp.text[:200]}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, bodies))
    return time.monotonic() - started


def _list_calls(url: str, calls: int, expected: int) -> tuple[list[float], float]:
    times, size = [], 0
    with httpx.Client(timeout=120) as client:
        for _ in range(calls):
            t = time.perf_counter()
            resp = client.get(url + "/connectors", params=[("expand", "status"), ("expand", "info")])
            times.append((time.perf_counter() - t) * 1000)
            assert resp.status_code == 200 and len(resp.json()) == expected, resp.text[:200]
            size = len(resp.content)
    return times, size / 1024


def _opens(
    url: str, opens: int, expected: int, screenshot: Path | None
) -> tuple[list[float], list[float], list[float], list[float]]:
    page: list[float] = []
    listing: list[float] = []
    fetched: list[float] = []
    rows: list[float] = []
    for i in range(opens):
        with browser.chromium(height=1000) as driver:
            driver.get(url + "/ui/")
            wait_until(
                lambda d=driver: d.execute_script("return document.body.dataset.listCount") == str(expected),
                60,
                "the console's list",
                interval=0.05,
            )
            page.append(float(driver.execute_script("return Number(document.body.dataset.pageMs)")))
            listing.append(float(driver.execute_script("return Number(document.body.dataset.listMs)")))
            fetched.append(float(driver.execute_script("return Number(document.body.dataset.fetchMs)")))
            done = wait_until(
                lambda d=driver: d.execute_script("return document.body.dataset.rowsDoneMs"),
                60,
                "every row",
                interval=0.05,
            )
            rows.append(float(done))
            if screenshot is not None and i == opens - 1:
                driver.save_screenshot(str(screenshot))
    return page, listing, fetched, rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--failing", type=int, default=5)
    parser.add_argument("--calls", type=int, default=5)
    parser.add_argument("--opens", type=int, default=3)
    parser.add_argument("--systems", default="kconnect,apache", help="comma-separated: kconnect, apache")
    parser.add_argument("--broker", choices=("kafka", "embedded"), default="kafka")
    parser.add_argument("--screenshot", type=Path, help="save the console's list (the last open) here")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    if (why := browser.missing()) is not None:
        print(f"console bench: {why}", file=sys.stderr)
        return 1
    n = args.connectors

    def run_one(kind: str, bootstrap: str, _broker_pid: int | None, work: Path) -> Row:
        group = f"console-{kind}-{uuid.uuid4().hex[:6]}"
        bodies = _configs(n, args.failing, work)
        if kind == "kconnect":
            props = worker_properties(bootstrap, group, free_port())
            worker = WorkerProcess(work, props, name=group, spark=True).start()
            try:
                wait_until(stable_view([worker], 1), 180, "the kconnect worker")
                created = _create_all(worker.url, bodies)
                calls, kib = _list_calls(worker.url, args.calls, n)
                page, listing, fetched, rows = _opens(worker.url, args.opens, n, args.screenshot)
            finally:
                worker.stop()
            return Row("kconnect", n, created, calls, kib, page, listing, fetched, rows)
        # The context manager starts the worker (and stops it, SIGKILL after 30 s); calling start() too
        # would start a second JVM and orphan the first.
        with bench_reference_worker(bootstrap, group, work / f"{group}.log", version=REFERENCE_4X) as ref:
            created = _create_all(ref.url, bodies)
            calls, kib = _list_calls(ref.url, args.calls, n)
        return Row(f"Apache Kafka Connect {REFERENCE_4X}", n, created, calls, kib, [], [], [], [])

    def report(rows: list[Row]) -> None:
        def mm(values: list[float]) -> str:
            return f"{statistics.median(values):.0f} / {max(values):.0f}" if values else "(no console)"

        print(
            f"\n{'system':<27} {'connectors':>10} {'create s':>9} {'list call ms':>13} {'answer KiB':>10} "
            f"{'page ms':>13} {'in-page call ms':>15} {'all rows ms':>13}"
        )
        for r in rows:
            print(
                f"{r.system:<27} {r.connectors:>10} {r.create_s:>9.1f} {mm(r.call_ms):>13} "
                f"{r.answer_kib:>10.0f} "
                f"{mm(r.page_ms):>13} {mm(r.fetch_ms) if r.fetch_ms else '':>15} "
                f"{mm(r.rows_ms) if r.rows_ms else '':>13}"
            )
        print(
            "(median / max; page: navigation start to the first rows painted; all rows: to the last row "
            "in the DOM)"
        )
        print(json.dumps([r.__dict__ for r in rows]))

    systems = [s.strip() for s in args.systems.split(",") if s.strip()]
    return 0 if run_systems("console", args.broker, args.keep, systems, run_one, report) is not None else 1


if __name__ == "__main__":
    sys.exit(main())
