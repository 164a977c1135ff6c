"""Hand-over: how long a pipeline's output stops when its tasks move, kconnect (warm-up off and on) and
Apache Kafka Connect side by side (issue 25: the learner seed's warm-up hand-over).

Per system, on one broker the bench starts itself (Apache Kafka 4.x, one KRaft node,
``tests.support.apache_kafka.KafkaCluster``; ``--broker embedded``: the embedded development broker), a
fresh group of its own:

1. worker A starts alone and runs ``--pipelines`` N pipelines, each a FileStreamSource (``tasks.max=1``)
   from its own file into its own one-partition topic and a FileStreamSink (``tasks.max=1``) from that
   topic into its own file, StringConverter, ``offset.flush.interval.ms=1000``; once every task is
   RUNNING a feeder appends ``--rate`` R lines a second to each source file (``density.Feeder``: each line
   carries its pipeline, sequence number and write time) and a tailer polls every sink file every 20 ms
   (``density.Tailer``), noting when each line first appears;
2. **steady**: after ``--settle`` seconds, a window of ``--steady`` seconds with nothing moving;
3. **scale-out**: worker B, a new process (cold: nothing loaded, no client connected), joins the group;
   the window runs ``--step`` seconds from the moment B's process is started;
4. **scale-down**: A gets SIGTERM (a graceful leave); the window runs ``--step`` seconds from the signal;
5. the feeder stops and the bench waits up to ``--drain`` seconds for the last lines.

For each window, the **longest gap**: the longest stretch in which some pipeline's sink file received no
new line (from the last line before the window, or the window's start, to the window's end), the largest
over the pipelines, with the pipeline and when in the window it began. Then, over the whole run, per system:
**lost** (lines written, not in their sink file after the drain), **dup** (lines in a sink file more than
once) and **order** (lines that came after a later line of their pipeline), read from the sink files.
kconnect's rows also count the tasks B started from a preparation (``prepared``) and cold (``cold``) in
each step (its log's ``task started`` lines).

Systems (``--only``, in that order): ``off`` kconnect with ``max.warmup.tasks=0`` (every task moves the
plain way, as before issue 25), ``on`` kconnect with ``max.warmup.tasks=--warmup-tasks`` (2, the
default), ``reference`` Apache Kafka Connect 3.9 (``--reference-version 4.x`` for 4.x; connect.protocol
sessioned, its default scheduled.rebalance.max.delay.ms). Both kconnect systems run the product's
``kconnect worker`` with ``group.protocol=connect``, ``spark.master=local[2]`` (FileStream sink tasks are
consumer loops: no SparkSession), ``session.timeout.ms=6000``, ``heartbeat.interval.ms=1000``,
``rebalance.timeout.ms=20000`` (the integration tests' settings); the reference the same session and
heartbeat (``ReferenceWorker``'s), ``connect-distributed.sh``'s JVM options. Worker A is the group's
leader in every system (it starts first), so its graceful leave is also a leader change.

The FileStream source waits 1 s whenever a poll finds nothing new (Java's does the same), and at these
rates nearly every poll after a read finds nothing: its output comes in bursts a second apart, so the steady
window's gap is about 1 s on every system, and a hand-over shorter than that hides in it.
``--source-idle-ms`` (kconnect only; a bench-only lever, run through a wrapper as ``density.py``'s
trigger) shortens that wait, so that the gaps show what a hand-over itself costs. ``--worker-prop k=v``
adds a kconnect worker property (``sink.task.placement=query``: sink tasks as Structured Streaming queries,
where a cold worker must start Spark before its first sink runs; on Apache Kafka only: with ``--broker
embedded`` the bench refuses it, ``density.query_sinks_on_embedded``).

Nothing is asserted; it prints one table and exits 0 (1 if a system failed).

    .venv/bin/python bench/handover.py                          # off, on, reference: ~9 minutes
    .venv/bin/python bench/handover.py --only on --step 30      # kconnect with warm-up alone
    .venv/bin/python bench/handover.py --only off,on --warmup-tasks 4 --keep
    .venv/bin/python bench/handover.py --only off,on --worker-prop sink.task.placement=query  # queries
    .venv/bin/python bench/handover.py --only off,on --source-idle-ms 20   # what a hand-over costs
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dataplane as dp
import density as dn
import httpx
import results

from kconnect.runtime.cli.broker import free_port
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.held_worker import with_repo_on_path
from tests.support.reference import REFERENCE_4X, REFERENCE_39, ReferenceWorker, reference_available

STEPS = ("steady", "scale-out", "scale-down")

#: Sets the FileStream source task's idle wait, then runs ``kconnect worker`` (``--source-idle-ms``; a
#: bench-only lever, as ``density.py``'s trigger wrapper).
IDLE_WRAPPER = """\
import sys
from kconnect.connectors.file import FileStreamSourceTask
FileStreamSourceTask.idle_wait_s = float(sys.argv.pop(1)) / 1000
from kconnect.runtime.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


# ------------------------------------------------------------------------------------------ gaps


@dataclass
class Gap:
    seconds: float
    pipeline: int
    began_s: float  # when it began, from the window's start (negative: before the window)


def longest_gap(arrivals: list[list[float]], start: float, end: float) -> Gap:
    """The longest stretch in [start, end] in which some pipeline got no new line: each pipeline's
    arrival times (wall clock, ascending) between its last arrival before ``start`` (else ``start``) and
    ``end``; the largest over the pipelines."""
    best = Gap(0.0, -1, 0.0)
    for i, times in enumerate(arrivals):
        before = [t for t in times if t < start]
        inside = [t for t in times if start <= t <= end]
        points = [before[-1] if before else start, *inside, end]
        for a, b in itertools.pairwise(points):
            if b - a > best.seconds:
                best = Gap(b - a, i, a - start)
    return best


def arrival_times(tailer: dn.Tailer) -> list[list[float]]:
    """Per pipeline, the wall-clock times at which its lines first appeared, ascending."""
    return [sorted(arrival for _stamp, arrival in arrived.values()) for arrived in tailer.arrived]


def file_accounting(pipelines: list[dn.Pipeline], written: list[int]) -> tuple[int, int, int]:
    """(lost, duplicated, out of order) over every pipeline, from the sink files as they are."""
    lost = dup = order = 0
    for p, count in zip(pipelines, written, strict=True):
        seqs: list[int] = []
        if p.sink.exists():
            for line in p.sink.read_text(errors="replace").splitlines():
                with contextlib.suppress(ValueError, IndexError):
                    seqs.append(int(line.split(" ", 2)[1]))
        distinct = set(seqs)
        lost += sum(1 for n in range(count) if n not in distinct)
        dup += len(seqs) - len(distinct)
        highest = -1
        for n in seqs:
            if n < highest:
                order += 1
            highest = max(highest, n)
    return lost, dup, order


# ------------------------------------------------------------------------------------------ systems


class Node(Protocol):
    def alive(self) -> bool: ...

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response: ...

    def stop(self) -> None: ...

    def log_text(self) -> str: ...


class KconnectNode:
    """One ``kconnect worker`` process of the system's group."""

    def __init__(
        self,
        bootstrap: str,
        work: Path,
        group: str,
        name: str,
        warmup_tasks: int,
        extra: list[str],
        source_idle_ms: float | None = None,
    ) -> None:
        props = worker_properties(bootstrap, group, free_port())
        props.update(
            {
                "group.protocol": "connect",
                "max.warmup.tasks": str(warmup_tasks),
                "key.converter": dp.STRING_CONVERTER,
                "value.converter": dp.STRING_CONVERTER,
                "offset.flush.interval.ms": dp.FLUSH_INTERVAL_MS,
                "spark.master": "local[2]",
                "spark.ui.enabled": "false",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.host": "127.0.0.1",
            }
        )
        for item in extra:
            key, _, value = item.partition("=")
            props[key.strip()] = value.strip()
        self.worker = WorkerProcess(work, props, name=name, spark=True)
        if source_idle_ms is None:
            self.worker.start()
            return
        w = self.worker
        w.props_path.write_text("".join(f"{k}={v}\n" for k, v in w.props.items()))
        env = with_repo_on_path({**os.environ, "KCONNECT_LOG_LEVEL": "INFO"})
        with open(w.log_path, "ab") as log:
            w.proc = subprocess.Popen(
                [sys.executable, "-c", IDLE_WRAPPER, str(source_idle_ms), "worker", str(w.props_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )

    def wait_ready(self) -> None:
        wait_until(
            lambda: (self.worker.workers() or {}).get("generation", -1) >= 0, 120, "the worker to join"
        )

    def alive(self) -> bool:
        return self.worker.alive()

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return self.worker.request(method, path, json=body)

    def stop(self) -> None:
        if self.worker.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.worker.stop(90)

    def log_text(self) -> str:
        return self.worker.log_text()


class ReferenceNode:
    """One Apache Kafka Connect distributed worker of the system's group."""

    def __init__(self, bootstrap: str, work: Path, group: str, name: str, version: str) -> None:
        self.worker: ReferenceWorker = dp.bench_reference_worker(
            bootstrap, group, work / f"{name}.log", offset_partitions=3, status_partitions=3, version=version
        )
        self.worker.start()

    def wait_ready(self) -> None:
        self.worker.wait_for_log(r"Joined group at generation", 120)

    def alive(self) -> bool:
        return self.worker.alive

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return (
            self.worker.rest(method, path, json=body) if body is not None else self.worker.rest(method, path)
        )

    def stop(self) -> None:
        self.worker.stop(90)

    def log_text(self) -> str:
        return self.worker.log_text()


def _prepared_and_cold(log: str, since: int) -> tuple[int, int]:
    """How many tasks a kconnect worker's log (from byte ``since``) says were started from a preparation
    and cold."""
    prepared = cold = 0
    for line in log[since:].splitlines():
        if '"event": "task started"' not in line:
            continue
        with contextlib.suppress(ValueError):
            event = json.loads(line[line.index("{") :])
            if event.get("prepared") is True:
                prepared += 1
            else:
                cold += 1
    return prepared, cold


# ------------------------------------------------------------------------------------------ one run


@dataclass
class Row:
    system: str
    note: str = ""
    gaps: dict[str, Gap] = field(default_factory=dict)
    starts: dict[str, tuple[int, int]] = field(default_factory=dict)  # step -> (prepared, cold) on B
    written: int = 0
    lost: int = 0
    dup: int = 0
    order: int = 0
    leave_s: float | None = None  # SIGTERM to A's exit
    load: dict[str, str] = field(default_factory=dict)


def _node(kind: str, bootstrap: str, work: Path, group: str, name: str, args: argparse.Namespace) -> Any:
    if kind == "reference":
        version = REFERENCE_4X if args.reference_version == "4.x" else REFERENCE_39
        return ReferenceNode(bootstrap, work, group, name, version)
    warmup_tasks = 0 if kind == "off" else args.warmup_tasks
    return KconnectNode(bootstrap, work, group, name, warmup_tasks, args.worker_prop, args.source_idle_ms)


def label_of(kind: str, args: argparse.Namespace) -> str:
    if kind == "reference":
        return f"reference Connect {args.reference_version}"
    if kind == "off":
        return "kconnect warm-up off"
    return f"kconnect warm-up on ({args.warmup_tasks})"


def run_system(kind: str, bootstrap: str, work: Path, args: argparse.Namespace) -> Row:
    label = label_of(kind, args)
    row = Row(label)
    if kind == "reference":
        version = REFERENCE_4X if args.reference_version == "4.x" else REFERENCE_39
        ok, why = reference_available(version)
        if not ok:
            row.note = f"not available: {why}"
            return row
    group = f"handover-{kind[:3]}-{uuid.uuid4().hex[:6]}"
    nodes: list[Any] = []
    feeder: dn.Feeder | None = None
    tailer: dn.Tailer | None = None
    try:
        a = _node(kind, bootstrap, work, group, f"{group}-a", args)
        nodes.append(a)
        a.wait_ready()
        print(f"{label}: worker A up; creating {args.pipelines} pipelines ...", flush=True)
        pipelines, names = dn.create_pipelines(a, bootstrap, work, group[-6:], args.pipelines)
        wait_until(lambda: dn.all_running(a, names), 180, f"{label}: every task RUNNING", 1.0)
        tailer = dn.Tailer(pipelines)
        tailer.start()
        feeder = dn.Feeder(pipelines, args.rate)
        feeder.start()
        time.sleep(args.settle)

        windows: dict[str, tuple[float, float]] = {}
        row.load["steady"] = dn.load_average()
        start = time.time()
        time.sleep(args.steady)
        windows["steady"] = (start, time.time())

        row.load["scale-out"] = dn.load_average()
        print(f"{label}: scale-out (worker B joins; load average {row.load['scale-out']}) ...", flush=True)
        start = time.time()
        b = _node(kind, bootstrap, work, group, f"{group}-b", args)
        nodes.append(b)
        time.sleep(max(0.0, start + args.step - time.time()))
        windows["scale-out"] = (start, time.time())
        if not b.alive():
            raise RuntimeError("worker B exited during the scale-out")
        b_log_mark = len(b.log_text())
        if kind != "reference":
            row.starts["scale-out"] = _prepared_and_cold(b.log_text(), 0)

        row.load["scale-down"] = dn.load_average()
        print(f"{label}: scale-down (SIGTERM to A; load average {row.load['scale-down']}) ...", flush=True)
        start = time.time()
        leaving = threading.Thread(target=a.stop, daemon=True, name="leave")
        leaving.start()
        leaving.join(args.step)
        if not leaving.is_alive():
            row.leave_s = time.time() - start
        time.sleep(max(0.0, start + args.step - time.time()))
        windows["scale-down"] = (start, time.time())
        if kind != "reference":
            row.starts["scale-down"] = _prepared_and_cold(b.log_text(), b_log_mark)

        feeder.stop()
        row.written = sum(feeder.written)
        deadline = time.monotonic() + args.drain
        while time.monotonic() < deadline and sum(len(x) for x in tailer.arrived) < row.written:
            time.sleep(0.2)
        tailer.stop()
        arrivals = arrival_times(tailer)
        row.gaps = {step: longest_gap(arrivals, *windows[step]) for step in STEPS}
        row.lost, row.dup, row.order = file_accounting(pipelines, feeder.written)
        if feeder.behind_s > 0.1:
            row.note = f"feeder fell {feeder.behind_s:.2f} s behind"
        return row
    except (httpx.HTTPError, RuntimeError, TimeoutError, AssertionError, OSError) as exc:
        print(f"{label}: failed: {exc}", file=sys.stderr, flush=True)
        row.note = f"FAILED: {str(exc).splitlines()[0][:200]}"
        row.gaps = {}
        return row
    finally:
        dn.cleanup(
            label,
            feeder.stop if feeder is not None else None,
            tailer.stop if tailer is not None else None,
            *(node.stop for node in reversed(nodes)),
        )


# ------------------------------------------------------------------------------------------ output


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    print(
        f"\n{args.pipelines} FileStream pipelines fed {args.rate:g} lines/s each, on worker A; B joins "
        f"(scale-out), then A gets SIGTERM (scale-down); windows: steady {args.steady:g} s, each step "
        f"{args.step:g} s; broker {args.broker}"
        + (f"; kconnect worker properties {' '.join(args.worker_prop)}" if args.worker_prop else "")
        + (
            f"; kconnect FileStream source idle wait {args.source_idle_ms:g} ms"
            if args.source_idle_ms
            else ""
        )
    )
    print("longest gap: the longest stretch in which some pipeline's sink file got no new line (s)")
    header = (
        f"{'system':<30} {'steady':>7} {'scale-out':>10} {'scale-down':>11} {'lines':>6} {'lost':>5} "
        f"{'dup':>4} {'order':>5}  {'B started (prepared/cold)':<26} {'A left s':>8}"
    )
    print(header)
    for r in rows:
        if not r.gaps:
            print(f"{r.system:<30} {r.note}")
            continue
        started = " ".join(f"{step} {p}/{c}" for step, (p, c) in r.starts.items()) if r.starts else "-"
        leave = f"{r.leave_s:8.1f}" if r.leave_s is not None else f"{'>step':>8}"
        print(
            f"{r.system:<30} {r.gaps['steady'].seconds:7.2f} {r.gaps['scale-out'].seconds:10.2f} "
            f"{r.gaps['scale-down'].seconds:11.2f} {r.written:6d} {r.lost:5d} {r.dup:4d} {r.order:5d}  "
            f"{started:<26} {leave}"
        )
    for r in rows:
        if not r.gaps:
            continue
        where = "; ".join(
            f"{step}: pipeline {g.pipeline} from {g.began_s:+.1f} s" for step, g in r.gaps.items()
        )
        print(f"  {r.system}: {where}; load average at each window's start: {r.load}")
        if r.note:
            print(f"  {r.system}: {r.note}")


#: The chart's title on the documentation site's benchmarks page.
TITLE = "How long a pipeline's output stops when its tasks move (bench/handover.py)"


def figures_of(rows: list[Row], args: argparse.Namespace) -> list[results.Figure]:
    """The run's figures for ``bench/results/handover.json``: the longest output gap per window."""
    shape = f"{args.pipelines} pipelines at {args.rate:g} lines/s"
    if args.source_idle_ms:
        shape += f", source idle wait {args.source_idle_ms:g} ms"
    if args.worker_prop:
        shape += ", " + " ".join(args.worker_prop)
    if args.broker != "kafka":
        shape += f" ({args.broker} broker)"
    figures = []
    for r in rows:
        load = "load average at each window's start: " + "; ".join(f"{k} {v}" for k, v in r.load.items())
        for window, gap in r.gaps.items():
            metric = f"longest output gap, {window}"
            system = results.system_name(r.system)
            figures.append(results.figure(system, shape, metric, round(gap.seconds, 2), "s", load=load))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pipelines", type=int, default=4, help="N: FileStream source+sink pairs")
    parser.add_argument("--rate", type=float, default=20.0, help="R: lines a second into each source file")
    parser.add_argument("--settle", type=float, default=10.0, help="seconds fed before the steady window")
    parser.add_argument("--steady", type=float, default=20.0, help="the steady window, seconds")
    parser.add_argument("--step", type=float, default=45.0, help="each step's window, seconds")
    parser.add_argument("--drain", type=float, default=60.0, help="at most this long for the last lines")
    parser.add_argument("--only", default="off,on,reference", help="systems (off, on, reference), in order")
    parser.add_argument("--warmup-tasks", type=int, default=2, help="max.warmup.tasks of the 'on' system")
    parser.add_argument("--broker", choices=("kafka", "embedded"), default="kafka")
    parser.add_argument("--reference-version", choices=("3.9", "4.x"), default="3.9")
    parser.add_argument("--worker-prop", action="append", default=[], help="kconnect worker key=value")
    parser.add_argument(
        "--source-idle-ms",
        type=float,
        default=None,
        help="kconnect: the FileStream source's wait when a poll finds nothing (1000 in the product)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, files)")
    results.add_argument(parser)
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.only.split(",") if s.strip()]
    if not systems or set(systems) - {"off", "on", "reference"}:
        parser.error(f"--only takes off, on and/or reference, not {args.only!r}")
    if refused := dn.query_sinks_on_embedded(args.broker, args.worker_prop):
        parser.error(refused)
    began = time.monotonic()
    rows = dn.run_systems(
        "handover",
        args.broker,
        args.keep,
        systems,
        lambda kind, bootstrap, _broker_pid, work: run_system(kind, bootstrap, work, args),
        lambda rows: print_table(rows, args),
    )
    if rows is None:
        return 130
    print(f"total {time.monotonic() - began:.0f} s; load average now {dn.load_average()}")
    results.save("handover", figures_of(rows, args), args, title=TITLE)
    return 1 if any(not r.gaps and not r.note.startswith("not available") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
