"""Control-plane burst: 20 connectors POSTed at once to a 3-worker group, side by side on one broker.

Three systems, one after the other, each a fresh group of three workers with its own internal topics on
the same embedded broker:

1. **kconnect, group.protocol=connect**: the leader computes a target assignment and the workers reconcile
   to it through the group-records topic; no JoinGroup/SyncGroup round per connector.
2. **kconnect, group.protocol=classic**: every connector created is a round of the whole group, as in
   Apache Kafka Connect.
3. **reference Connect 3.9**: three Apache Kafka Connect 3.9 distributed workers (``connect.protocol``
   sessioned), when Java and the reference jars are present (else a row says why).

All three run ``connect.protocol=sessioned`` with session.timeout.ms=6000, heartbeat.interval.ms=1000 and
rebalance.timeout.ms=20000 (the integration tests' settings; the test broker completes a generation about
session.timeout.ms / 2 after its first JoinGroup). The kconnect workers use the product's executor
(``kconnect worker``); FileStream sources start no SparkSession.

Once the group is stable, twenty FileStreamSource connectors (``tasks.max=1``, a one-line file each onto a
pre-created topic) are POSTed one after another, as fast as the REST API answers, round-robin over the
three workers. A POST answered 409 (a rebalance under way) is retried after 0.1 s until accepted; the 409s
are counted. A background thread polls ``GET /connectors?expand=status`` on the first worker every ~20 ms
and records when each connector and its task are first RUNNING. Printed per system: seconds from the
first POST until every connector and task is RUNNING, seconds until the last POST was accepted, the
group generations gone through in that time, the 409s, and POST -> RUNNING per connector (median, max;
from just before the connector's first POST attempt). kconnect's generations come from ``GET /workers``
(``this_worker.generation``, highest of the three) before and after; the Java workers' from their logs
(``Joined group at generation N``, highest of the three).

    .venv/bin/python bench/reconcile.py                 # several minutes (mostly classic and Java)
    .venv/bin/python bench/reconcile.py --only connect   # some systems: connect, classic, reference

Figures only: nothing is asserted.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli import broker as embedded
from tests.support.cluster import WorkerProcess, stable_view, start_cluster, wait_until
from tests.support.reference import ReferenceWorker, parse_assignments, reference_available

CONNECTORS = 20
WORKERS = 3
SOURCE_CLASS = "org.apache.kafka.connect.file.FileStreamSourceConnector"
#: The same group timings for all three systems (tests/support/cluster.worker_properties' values).
SESSION_TIMEOUT_MS = 6000
HEARTBEAT_INTERVAL_MS = 1000
REBALANCE_TIMEOUT_MS = 20000
RETRY_PAUSE_S = 0.1
POLL_INTERVAL_S = 0.02
RUNNING_TIMEOUT_S = 600.0


@dataclass
class Row:
    system: str
    seconds: float | None = None  # first POST -> every connector and task RUNNING
    posting: float | None = None  # first POST -> last POST accepted
    gen_before: int | None = None
    gen_after: int | None = None
    conflicts: int = 0  # 409s
    other: Counter[str] = field(default_factory=Counter)  # other answers that were retried
    per: list[float] = field(default_factory=list)  # POST -> RUNNING per connector
    wall: float | None = None  # the whole system's run: start, burst, stop
    note: str = ""

    @property
    def generations(self) -> int | None:
        if self.gen_before is None or self.gen_after is None:
            return None
        return self.gen_after - self.gen_before


def create_topics(bootstrap: str, names: list[str]) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(n, 1, 1) for n in names]).values():
        future.result(30)


def source_configs(work: Path, prefix: str) -> dict[str, dict[str, str]]:
    configs = {}
    for i in range(CONNECTORS):
        source = work / f"{prefix}-in{i}.txt"
        source.write_text(f"line {i}\n")
        configs[f"src{i:02d}"] = {
            "connector.class": SOURCE_CLASS,
            "file": str(source),
            "topic": f"{prefix}-t{i}",
            "tasks.max": "1",
        }
    return configs


class RunningPoller:
    """Polls ``GET /connectors?expand=status`` every ~20 ms; first time each connector + task RUNNING."""

    def __init__(self, url: str, expected: int) -> None:
        self.expected = expected
        self.running_at: dict[str, float] = {}
        self.done = threading.Event()
        self._stop = threading.Event()
        self._client = httpx.Client(base_url=url, timeout=30)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _poll(self) -> None:
        resp = self._client.get("/connectors", params={"expand": "status"})
        now = time.monotonic()
        if resp.status_code != 200:
            return
        for name, entry in resp.json().items():
            status = entry.get("status") or {}
            tasks = status.get("tasks") or []
            if (
                status.get("connector", {}).get("state") == "RUNNING"
                and tasks
                and all(t.get("state") == "RUNNING" for t in tasks)
            ):
                self.running_at.setdefault(name, now)
        if len(self.running_at) >= self.expected:
            self.done.set()

    def _run(self) -> None:
        while not self._stop.is_set() and not self.done.is_set():
            with contextlib.suppress(httpx.HTTPError, ValueError, AttributeError):
                self._poll()
            self._stop.wait(POLL_INTERVAL_S)

    def __enter__(self) -> RunningPoller:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)
        self._client.close()


def burst(row: Row, post_urls: list[str], poll_url: str, configs: dict[str, dict[str, str]]) -> None:
    """POST every connector (round-robin over ``post_urls``) and wait until all are RUNNING; fills ``row``."""
    clients = [httpx.Client(base_url=u, timeout=120) for u in post_urls]
    first_post: dict[str, float] = {}
    try:
        with RunningPoller(poll_url, len(configs)) as poller:
            t0 = time.monotonic()
            for i, (name, config) in enumerate(configs.items()):
                client = clients[i % len(clients)]
                first_post[name] = time.monotonic()
                while True:
                    text = ""
                    try:
                        resp = client.post("/connectors", json={"name": name, "config": config})
                        code, text = str(resp.status_code), resp.text
                    except httpx.HTTPError as exc:
                        code = type(exc).__name__
                    if code == "201":
                        break
                    if code == "409" and "already exists" in text:
                        # An earlier attempt that timed out client-side was accepted after all.
                        row.other["409 already exists (accepted)"] += 1
                        break
                    if code == "409":
                        row.conflicts += 1
                    else:
                        row.other[code] += 1
                    if time.monotonic() - first_post[name] > RUNNING_TIMEOUT_S:
                        raise RuntimeError(f"{name} not accepted within {RUNNING_TIMEOUT_S:.0f} s: {code}")
                    time.sleep(RETRY_PAUSE_S)
            row.posting = time.monotonic() - t0
            if not poller.done.wait(RUNNING_TIMEOUT_S):
                row.note = (
                    f"timed out after {RUNNING_TIMEOUT_S:.0f} s: "
                    f"{len(poller.running_at)} of {len(configs)} RUNNING"
                )
            running_at = dict(poller.running_at)
    finally:
        for c in clients:
            c.close()
    if len(running_at) == len(configs):
        row.seconds = max(running_at.values()) - t0
    row.per = sorted(running_at[n] - first_post[n] for n in running_at)
    if row.other:
        extra = "other answers retried: " + ", ".join(f"{k} x{v}" for k, v in sorted(row.other.items()))
        row.note = f"{row.note}; {extra}" if row.note else extra


def failure(exc: Exception) -> str:
    text = str(exc).splitlines()[0] if str(exc) else ""
    return f"failed: {type(exc).__name__}: {text}"[:300]


# ------------------------------------------------------------------------------------------ kconnect


def kconnect_generation(workers: list[WorkerProcess]) -> int:
    gens = []
    for w in workers:
        view = w.workers()
        if view is not None:
            gens.append(view["this_worker"]["generation"])
    return max(gens)


def run_kconnect(group_protocol: str, bootstrap: str, work: Path) -> Row:
    row = Row(f"kconnect group.protocol={group_protocol}")
    started = time.monotonic()
    prefix = f"kc-{group_protocol}-{uuid.uuid4().hex[:6]}"
    configs = source_configs(work, prefix)
    create_topics(bootstrap, [c["topic"] for c in configs.values()])
    workers = start_cluster(
        work,
        bootstrap,
        WORKERS,
        group=prefix,
        spark=True,
        group_protocol=group_protocol,
        connect_protocol="sessioned",
        session_timeout_ms=SESSION_TIMEOUT_MS,
        heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
        rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
    )
    try:
        wait_until(stable_view(workers, WORKERS), 180, f"a stable {WORKERS}-worker group")
        row.gen_before = kconnect_generation(workers)
        burst(row, [w.url for w in workers], workers[0].url, configs)
        row.gen_after = kconnect_generation(workers)
    except Exception as exc:  # a figure, not a failure: the row says what happened
        row.note = failure(exc)
    finally:
        for w in workers:
            if w.alive():
                w.kill()
    row.wall = time.monotonic() - started
    return row


# ------------------------------------------------------------------------------------------ reference


def java_generation(workers: list[ReferenceWorker]) -> int | None:
    """The group's generation as the Java workers logged it: every worker at the same one, no error."""
    lasts = []
    for w in workers:
        logged = parse_assignments(w.log_text())
        if not logged:
            return None
        lasts.append(logged[-1])
    gens = {a["generation"] for a in lasts}
    if len(gens) != 1 or any(a.get("error") != 0 for a in lasts):
        return None
    return gens.pop()


def java_stable(workers: list[ReferenceWorker], quiet_s: float = 4.0) -> Callable[[], int | None]:
    """A predicate: all three at one generation, unchanged for ``quiet_s`` seconds."""
    seen: dict[str, float | int] = {}

    def check() -> int | None:
        gen = java_generation(workers)
        if gen is None or gen != seen.get("gen"):
            seen.clear()
            if gen is not None:
                seen.update(gen=gen, since=time.monotonic())
            return None
        return gen if time.monotonic() - seen["since"] >= quiet_s else None

    return check


def run_reference(bootstrap: str, work: Path) -> Row:
    row = Row("reference Connect 3.9")
    ok, why = reference_available()
    if not ok:
        row.note = f"not available: {why}"
        return row
    started = time.monotonic()
    prefix = f"ref-{uuid.uuid4().hex[:6]}"
    configs = source_configs(work, prefix)
    create_topics(bootstrap, [c["topic"] for c in configs.values()])
    workers = [
        ReferenceWorker(
            bootstrap,
            group_id=prefix,
            config_topic=f"{prefix}-configs",
            offset_topic=f"{prefix}-offsets",
            status_topic=f"{prefix}-status",
            log_path=work / f"{prefix}-w{i}.log",
            protocol="sessioned",
            session_timeout_ms=SESSION_TIMEOUT_MS,
            heartbeat_interval_ms=HEARTBEAT_INTERVAL_MS,
            rebalance_timeout_ms=REBALANCE_TIMEOUT_MS,
            offset_partitions=3,  # as kconnect's workers (tests/support/cluster.worker_properties)
            status_partitions=3,
        )
        for i in range(WORKERS)
    ]
    try:
        for w in workers:
            w.start()
        row.gen_before = wait_until(java_stable(workers), 180, f"a stable {WORKERS}-worker Java group")
        burst(row, [w.url for w in workers], workers[0].url, configs)
        row.gen_after = max(a["generation"] for w in workers for a in parse_assignments(w.log_text()))
    except Exception as exc:  # a figure, not a failure: the row says what happened
        row.note = failure(exc)
    finally:
        for w in workers:
            with contextlib.suppress(Exception):
                w.kill()
                w.close()
    row.wall = time.monotonic() - started
    return row


# ------------------------------------------------------------------------------------------ main


def java_version() -> str:
    if shutil.which("java") is None:
        return "no java"
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30)
        return (out.stderr or out.stdout).splitlines()[0]
    return "java -version failed"


def load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def print_table(rows: list[Row]) -> None:
    print(
        f"\n{'system':34} {'all RUNNING s':>13} {'posted s':>8} {'generations':>13} {'409s':>5} "
        f"{'median s':>8} {'max s':>6}  note"
    )
    for r in rows:
        seconds = f"{r.seconds:.1f}" if r.seconds is not None else "-"
        posting = f"{r.posting:.1f}" if r.posting is not None else "-"
        gens = f"{r.generations} ({r.gen_before}->{r.gen_after})" if r.generations is not None else "-"
        median = f"{statistics.median(r.per):.2f}" if r.per else "-"
        worst = f"{r.per[-1]:.2f}" if r.per else "-"
        conflicts = str(r.conflicts) if r.posting is not None else "-"
        line = (
            f"{r.system:34} {seconds:>13} {posting:>8} {gens:>13} {conflicts:>5} "
            f"{median:>8} {worst:>6}  {r.note}"
        )
        print(line.rstrip())
    print(
        "\nall RUNNING s: first POST until every connector and task is RUNNING; posted s: until the last "
        "POST was accepted;\ngenerations: new group generations by then (before->after); median/max: "
        "POST -> RUNNING per connector."
    )
    walls = ", ".join(f"{r.system} {r.wall:.0f} s" for r in rows if r.wall is not None)
    if walls:
        print(f"wall time per system (start, stable group, burst, stop): {walls}")


@contextlib.contextmanager
def workdir(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kconnect-bench-reconcile-"))
    try:
        yield path
    finally:
        if keep:
            print(f"\nkept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--only",
        default="connect,classic,reference",
        help="systems, comma-separated: connect,classic,reference",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (worker logs)")
    args = parser.parse_args(argv)
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    nproc = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S %Z')}; {platform.platform()} ({platform.machine()}), "
        f"nproc {nproc}; Python {platform.python_version()} ({platform.python_implementation()}); "
        f"{java_version()}; load average {load()}"
    )
    print(
        f"{CONNECTORS} FileStreamSource connectors (tasks.max=1) POSTed in a burst to {WORKERS} workers; "
        f"all systems: connect.protocol=sessioned, session.timeout.ms={SESSION_TIMEOUT_MS}, "
        f"heartbeat.interval.ms={HEARTBEAT_INTERVAL_MS}, rebalance.timeout.ms={REBALANCE_TIMEOUT_MS}",
        flush=True,
    )
    began = time.monotonic()
    rows: list[Row] = []
    with workdir(args.keep) as work, embedded.running(log_path=work / "broker.log") as broker:
        for system in only:
            print(f"{system} ... (load average {load()})", flush=True)
            if system in ("connect", "classic"):
                rows.append(run_kconnect(system, broker.bootstrap, work))
            elif system == "reference":
                rows.append(run_reference(broker.bootstrap, work))
            else:
                print(f"unknown system {system!r}", file=sys.stderr)
                return 2
        print_table(rows)
        print(f"total {time.monotonic() - began:.0f} s; load average now {load()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
