"""Density: N small FileStream pipelines on ONE worker, kconnect and Apache Kafka Connect side by side
(issue 22: a task's cost should follow its records, not Spark's clock).

Per system, on one broker it starts itself (Apache Kafka 4.x, one KRaft node,
``tests.support.apache_kafka.KafkaCluster``; ``--broker embedded``: the embedded development broker), one
fresh worker runs ``--pipelines`` N pipelines, each a FileStreamSource (``tasks.max=1``) from its own file
into its own one-partition topic and a FileStreamSink (``tasks.max=1``) from that topic into its own file,
StringConverter for keys and values, ``offset.flush.interval.ms=1000`` (as ``dataplane.py``). Once every
connector and task is RUNNING, a feeder thread appends ``--rate`` R lines a second to each source file
(the N*R writes a second spread evenly, each line carrying its pipeline, sequence number and wall-clock
write time), and a tailer thread polls every sink file every 20 ms for new lines. After ``--warmup`` S
seconds the ``--window`` starts; over it:

- **cores**: CPU seconds (user + system, ``/proc/<pid>/stat``) of the worker's whole process tree divided
  by the window: the worker process, every live descendant (kconnect: the Spark JVM, Spark's Python daemon
  and workers, the Python data source's streaming runner) and the children each reaped (cutime +
  cstime: a process that lived and died inside the window, such as a Hadoop ``chmod``, is counted in the
  parent that reaped it); ``dataplane.tree_cpu``. The broker's cores are shown apart (not in the worker's).
- **peak RSS**: the sum of RSS over the tree, sampled every 0.5 s, its peak; and the tree's PSS (shared
  pages split between the processes sharing them, from ``/proc/<pid>/smaps_rollup``) at the window's end,
  since forked Python workers share pages that the RSS sum counts once per process.
- **latency**: from a line's write into the source file (its wall-clock stamp) to the tailer seeing it in
  the sink's file (the tailer's 20 ms poll is in it), for lines written during the window: p50, p99, max.
- **missing**: after the window the feeder stops and the bench waits up to ``--drain`` seconds for every
  line written since the start (warm-up included); lines still not in their sink file then are missing
  (their latency is not in the percentiles). ``dup`` counts lines that arrived more than once.

``--idle``: the same N pipelines with nothing fed (empty source files): cores and memory of a worker whose
2N tasks have no records. ``--spark-ui`` (kconnect) turns Spark's UI on and reports how many Spark jobs the
worker's SparkSession ran in the window, read from its REST API (``/api/v1/applications/<id>/jobs``), per
sink task and per second; the UI's own cost is then in the cores. Levers to measure without changing the
product: ``--sink-trigger "2 seconds"`` starts kconnect's worker through a wrapper that sets
``runtime.dataplane.sink_runner.SINK_TRIGGER`` before ``kconnect worker`` runs (the product's trigger is
500 ms); ``--worker-prop key=value`` (repeatable) adds or overrides a kconnect worker property (e.g. a
``spark.*`` setting). Sinks as Structured Streaming queries (``sink.task.placement=query``) run on Apache
Kafka only: with ``--broker embedded`` the bench refuses them (``query_sinks_on_embedded``: that broker's
high watermark stops short of a batch's tail).

``--spark-master standalone`` (issue 32) runs kconnect's worker against a standalone Spark cluster of one
worker with 2 cores that the bench starts from PySpark's jars (``tests/support/spark_cluster.py``) for that
run and stops after it; cores, RSS and processes then count the kconnect worker's tree, the Spark master's
and the Spark worker's (whose children are the application's executors and their Python workers).
``--spark-master both`` runs kconnect on ``local[2]`` and then on the cluster, for the side-by-side.

The bench cleans up what it starts (workers, the Spark JVM and Python workers below kconnect's worker,
the reference JVM, the broker) on exit, on an error and on Ctrl-C / SIGTERM. Nothing is asserted; it
prints one table and exits 0 (1 if a system failed to start its pipelines).

    .venv/bin/python bench/density.py --pipelines 3 --rate 10 --warmup 20 --window 30
    .venv/bin/python bench/density.py --pipelines 10 --rate 10 --warmup 30 --window 60   # the issue's run
    .venv/bin/python bench/density.py --pipelines 10 --idle --only kconnect --spark-ui
    .venv/bin/python bench/density.py --only kconnect --sink-trigger "2 seconds"
    .venv/bin/python bench/density.py --broker embedded --reference-version 4.x --keep
    .venv/bin/python bench/density.py --spark-master both --pipelines 100 --rate 1 --reference-version 4.x
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any, Protocol, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dataplane as dp
import httpx
import results
import spark_standalone
from density_feed import Feeder, Pipeline, Tailer, percentile

from kconnect.runtime.cli import broker as embedded
from kconnect.runtime.cli.broker import free_port
from tests.support import spark_cluster
from tests.support.apache_kafka import KafkaCluster
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.held_worker import with_repo_on_path
from tests.support.reference import REFERENCE_4X, REFERENCE_39, ReferenceWorker, reference_available

#: A bench's row type (``run_systems``).
R = TypeVar("R")
#: How often the tree's RSS is sampled.
RSS_POLL_S = 0.5

#: Sets the sink query's trigger, then runs ``kconnect worker`` (``--sink-trigger``; bench-only lever).
TRIGGER_WRAPPER = """\
import sys
import kconnect.runtime.dataplane.sink_runner as sink_runner
sink_runner.SINK_TRIGGER = sys.argv.pop(1)
from kconnect.runtime.cli.main import main
sys.exit(main(sys.argv[1:]))
"""


# ------------------------------------------------------------------------------------------ /proc


def _starttime(pid: int) -> int | None:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def _pss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as f:
            for line in f:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_pids(root: int) -> list[int]:
    return [root, *dp._descendants(root)]


class TreeWatch:
    """Samples a process tree's RSS sum every ``RSS_POLL_S`` (keeping the peak once ``arm()`` is called)
    and remembers every process seen in it with its start time, so that :meth:`kill_leftovers` can end
    exactly those (and no pid the kernel reused) after the worker stopped."""

    def __init__(self, root: int, others: Sequence[int] = ()) -> None:
        self.root = root
        #: More roots whose trees count with the worker's (a standalone Spark master and worker, whose
        #: executors are the worker's children); never killed here: they belong to the cluster.
        self.others = list(others)
        self.peak_kib = 0
        self.seen: dict[int, int] = {}
        self._armed = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="tree-watch")
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            total = 0
            for pid in tree_pids(self.root):
                start = _starttime(pid)
                if start is not None:
                    self.seen.setdefault(pid, start)
                total += dp._rss_kib(pid)
            for other in self.others:
                total += sum(dp._rss_kib(pid) for pid in tree_pids(other))
            if self._armed:
                self.peak_kib = max(self.peak_kib, total)
            self._stop.wait(RSS_POLL_S)

    def arm(self) -> None:
        self.peak_kib = 0
        self._armed = True

    def disarm(self) -> None:
        self._armed = False

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)

    def kill_leftovers(self) -> list[int]:
        """SIGKILL every process once seen in the tree that still runs (same pid, same start time)."""
        for pid in tree_pids(self.root):  # the last moment's children too
            start = _starttime(pid)
            if start is not None:
                self.seen.setdefault(pid, start)
        killed = []
        for pid, start in self.seen.items():
            if _starttime(pid) == start:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
        return killed


def load_average() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def cleanup(label: str, *steps: Callable[[], object] | None) -> None:
    """A bench run's clean-up: each step on its own (None skipped), so that one failing (or a second
    Ctrl-C) does not skip the others."""
    for step in steps:
        if step is not None:
            try:
                step()
            except BaseException as exc:  # cleanup goes on whatever happened
                print(f"{label}: cleanup step failed: {exc!r}", file=sys.stderr, flush=True)


# ------------------------------------------------------------------------------------------ systems


class System(Protocol):
    label: str

    @property
    def pid(self) -> int: ...

    def alive(self) -> bool: ...

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response: ...

    def stop(self) -> None: ...


class KconnectSystem:
    """One ``kconnect worker`` with the Spark executor: ``local[2]`` (as ``dataplane.py``), or with
    ``cluster`` a standalone Spark cluster of one 2-core worker (``--spark-master standalone``), whose
    master, worker and executors count with the worker's process tree."""

    def __init__(
        self,
        bootstrap: str,
        work: Path,
        args: argparse.Namespace,
        cluster: spark_cluster.StandaloneCluster | None = None,
    ) -> None:
        group = f"density-kc-{uuid.uuid4().hex[:6]}"
        props = worker_properties(bootstrap, group, free_port())
        self.cluster = cluster
        self.ui_port = free_port() if args.spark_ui else None
        props.update(
            {
                "group.protocol": "connect",
                "key.converter": dp.STRING_CONVERTER,
                "value.converter": dp.STRING_CONVERTER,
                "offset.flush.interval.ms": dp.FLUSH_INTERVAL_MS,
                "spark.master": "local[2]",
                "spark.ui.enabled": "true" if self.ui_port else "false",
                "spark.sql.shuffle.partitions": "1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.host": "127.0.0.1",
            }
        )
        if self.ui_port:
            props["spark.ui.port"] = str(self.ui_port)
        if cluster is not None:
            props.update(spark_standalone.worker_properties(cluster))
        for item in args.worker_prop:
            key, _, value = item.partition("=")
            props[key.strip()] = value.strip()
        self.label = (
            "kconnect"
            + (f" ({spark_standalone.label(cluster)})" if cluster is not None else " (local[2])")
            + (f" (trigger {args.sink_trigger})" if args.sink_trigger else "")
        )
        self.worker = WorkerProcess(work, props, name=group, spark=True)
        self.trigger = args.sink_trigger
        self._start()

    def _start(self) -> None:
        if not self.trigger:
            self.worker.start()
            return
        w = self.worker
        w.props_path.write_text("".join(f"{k}={v}\n" for k, v in w.props.items()))
        env = with_repo_on_path({**os.environ, "KCONNECT_LOG_LEVEL": "INFO"})
        with open(w.log_path, "ab") as log:
            w.proc = subprocess.Popen(
                [sys.executable, "-c", TRIGGER_WRAPPER, self.trigger, "worker", str(w.props_path)],
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
            )

    @property
    def pid(self) -> int:
        assert self.worker.proc is not None
        return self.worker.proc.pid

    @property
    def others(self) -> list[int]:
        """The standalone cluster's master and worker (the executors are the worker's children)."""
        return spark_standalone.roots(self.cluster) if self.cluster is not None else []

    def alive(self) -> bool:
        return self.worker.alive()

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return self.worker.request(method, path, json=body)

    def wait_ready(self) -> None:
        wait_until(
            lambda: (self.worker.workers() or {}).get("generation", -1) >= 0, 120, "the kconnect group"
        )

    def spark_jobs(self) -> int | None:
        """The highest Spark job id the worker's SparkSession has submitted (None without ``--spark-ui``
        or before the SparkSession started)."""
        if not self.ui_port:
            return None
        base = f"http://127.0.0.1:{self.ui_port}/api/v1/applications"
        with contextlib.suppress(httpx.HTTPError, ValueError, KeyError, IndexError):
            app = httpx.get(base, timeout=10).json()[0]["id"]
            jobs = httpx.get(f"{base}/{app}/jobs", timeout=30).json()
            return max((int(j["jobId"]) for j in jobs), default=-1) + 1
        return None

    def stop(self) -> None:
        if self.worker.proc is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.worker.stop(60)


class ReferenceSystem:
    """One Apache Kafka Connect distributed worker, the JVM options of ``connect-distributed.sh``."""

    def __init__(self, bootstrap: str, work: Path, version: str) -> None:
        prefix = f"density-ref-{uuid.uuid4().hex[:6]}"
        self.label = f"reference Connect {'3.9' if version == REFERENCE_39 else version}"
        self.worker: ReferenceWorker = dp.bench_reference_worker(
            bootstrap, prefix, work / f"{prefix}.log", version=version
        )
        self.worker.start()

    @property
    def pid(self) -> int:
        assert self.worker.process is not None
        return self.worker.process.pid

    def alive(self) -> bool:
        return self.worker.alive

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return (
            self.worker.rest(method, path, json=body) if body is not None else self.worker.rest(method, path)
        )

    def wait_ready(self) -> None:
        self.worker.wait_for_log(r"Joined group at generation", 120)

    def spark_jobs(self) -> int | None:
        return None

    others: list[int] = []

    def stop(self) -> None:
        self.worker.close()


# ------------------------------------------------------------------------------------------ one run


@dataclass
class Row:
    system: str
    note: str = ""
    cores: float | None = None
    broker_cores: float | None = None
    peak_rss_kib: int = 0
    pss_kib: int = 0
    processes: int = 0
    latencies: list[float] = field(default_factory=list)
    written: int = 0
    missing: int = 0
    duplicates: int = 0
    jobs_per_task_s: float | None = None
    load: str = ""


def all_running(system: System, names: list[str]) -> bool:
    resp = system.rest("GET", "/connectors?expand=status")
    if resp.status_code != 200:
        return False
    body = resp.json()
    for name in names:
        status = (body.get(name) or {}).get("status") or {}
        tasks = status.get("tasks") or []
        if (status.get("connector") or {}).get("state") != "RUNNING" or not tasks:
            return False
        if any(t.get("state") != "RUNNING" for t in tasks):
            failed = [t for t in tasks if t.get("state") == "FAILED"]
            if failed:
                raise RuntimeError(f"{name} task FAILED: {str(failed[0].get('trace', ''))[-2000:]}")
            return False
    return True


def create_pipelines(
    system: System, bootstrap: str, work: Path, tag: str, count: int
) -> tuple[list[Pipeline], list[str]]:
    pipelines = []
    for i in range(count):
        topic = f"density-{tag}-{i}-lines"
        dp.create_topic(bootstrap, topic)
        p = Pipeline(i, topic, work / f"in-{tag}-{i}.txt", work / f"out-{tag}-{i}.txt")
        p.source.write_text("")
        pipelines.append(p)
    names = []
    for p in pipelines:
        for kind, config in (
            ("source", {"connector.class": "FileStreamSource", "file": str(p.source), "topic": p.topic}),
            ("sink", {"connector.class": "FileStreamSink", "file": str(p.sink), "topics": p.topic}),
        ):
            name = f"density-{tag}-{p.index}-{kind}"
            body = {"name": name, "config": {**config, "tasks.max": "1"}}
            deadline = time.monotonic() + 120
            while True:
                resp = system.rest("POST", "/connectors", body)
                if resp.status_code in (200, 201):
                    break
                if resp.status_code == 409 and "already exists" in resp.text:
                    break
                if time.monotonic() > deadline or resp.status_code not in (409, 500, 503):
                    raise RuntimeError(f"creating {name}: {resp.status_code} {resp.text[:500]}")
                time.sleep(0.2)
            names.append(name)
    return pipelines, names


def broker_ticks(broker_pid: int | None) -> float:
    return sum(dp._cpu_ticks(broker_pid)) / dp._TICK if broker_pid else 0.0


def run_system(
    kind: str, bootstrap: str, broker_pid: int | None, work: Path, args: argparse.Namespace
) -> Row:
    """One system's run; ``kconnect-standalone`` inside a standalone Spark cluster of its own."""
    if kind != "kconnect-standalone":
        return _run_system(kind, bootstrap, broker_pid, work, args)
    why = spark_standalone.available()
    if why is not None:
        return Row("kconnect (standalone)", note=f"not available: {why}")
    try:
        with spark_standalone.running(work) as cluster:
            return _run_system(kind, bootstrap, broker_pid, work, args, cluster)
    except RuntimeError as exc:
        return Row("kconnect (standalone)", note=f"FAILED: {str(exc).splitlines()[0][:200]}")


def _run_system(
    kind: str,
    bootstrap: str,
    broker_pid: int | None,
    work: Path,
    args: argparse.Namespace,
    cluster: spark_cluster.StandaloneCluster | None = None,
) -> Row:
    label = kind
    system: KconnectSystem | ReferenceSystem | None = None
    watch: TreeWatch | None = None
    feeder: Feeder | None = None
    tailer: Tailer | None = None
    try:
        if kind.startswith("kconnect"):
            system = KconnectSystem(bootstrap, work, args, cluster)
        else:
            version = REFERENCE_4X if args.reference_version == "4.x" else REFERENCE_39
            ok, why = reference_available(version)
            if not ok:
                return Row(f"reference Connect {args.reference_version}", note=f"not available: {why}")
            system = ReferenceSystem(bootstrap, work, version)
        label = system.label
        watch = TreeWatch(system.pid, system.others)
        system.wait_ready()
        tag = f"{kind[:3]}{uuid.uuid4().hex[:4]}"
        print(f"{label}: creating {args.pipelines} pipelines ...", flush=True)
        started = time.monotonic()
        pipelines, names = create_pipelines(system, bootstrap, work, tag, args.pipelines)
        wait_until(lambda: all_running(system, names), 300, f"{label}: every connector and task RUNNING", 1.0)
        print(
            f"{label}: all {2 * args.pipelines} tasks RUNNING after {time.monotonic() - started:.1f} s",
            flush=True,
        )
        tailer = Tailer(pipelines)
        tailer.start()
        if not args.idle:
            feeder = Feeder(pipelines, args.rate)
            feeder.start()
        time.sleep(args.warmup)
        if not system.alive():
            raise RuntimeError(f"{label}: the worker exited during the warm-up")
        load_start = load_average()
        print(f"{label}: window of {args.window:.0f} s (load average {load_start}) ...", flush=True)
        jobs_before = system.spark_jobs()
        roots = [system.pid, *system.others]
        cpu_before, broker_before = [dp.tree_cpu(r) for r in roots], broker_ticks(broker_pid)
        window_start, t0 = time.time(), time.monotonic()
        watch.arm()
        time.sleep(args.window)
        cpu_after, broker_after = [dp.tree_cpu(r) for r in roots], broker_ticks(broker_pid)
        elapsed = time.monotonic() - t0
        window_end = time.time()
        watch.disarm()
        jobs_after = system.spark_jobs()
        pids = [p for r in roots for p in tree_pids(r) if _starttime(p) is not None]
        pss = sum(_pss_kib(p) for p in pids)
        load_end = load_average()
        row = Row(
            label,
            cores=sum(sum(a.values()) - sum(b.values()) for a, b in zip(cpu_after, cpu_before, strict=True))
            / elapsed,
            broker_cores=(broker_after - broker_before) / elapsed if broker_pid else None,
            peak_rss_kib=watch.peak_kib,
            pss_kib=pss,
            processes=len(pids),
            load=f"{load_start} -> {load_end}",
        )
        if jobs_before is not None and jobs_after is not None:
            row.jobs_per_task_s = (jobs_after - jobs_before) / args.pipelines / elapsed
        if feeder is not None:
            feeder.stop()
            if feeder.behind_s > 0.1:
                row.note = f"feeder fell {feeder.behind_s:.2f} s behind"
            total = sum(feeder.written)
            deadline = time.monotonic() + args.drain
            while time.monotonic() < deadline:
                if sum(len(a) for a in tailer.arrived) >= total:
                    break
                time.sleep(0.2)
            tailer.stop()
            row.written = total
            row.missing = total - sum(len(a) for a in tailer.arrived)
            row.duplicates = tailer.duplicates
            row.latencies = sorted(
                arrival - stamp
                for arrived in tailer.arrived
                for stamp, arrival in arrived.values()
                if window_start <= stamp < window_end
            )
        return row
    except (httpx.HTTPError, RuntimeError, TimeoutError, AssertionError, OSError) as exc:
        print(f"{label}: failed: {exc}", file=sys.stderr, flush=True)
        return Row(label, note=f"FAILED: {str(exc).splitlines()[0][:200]}")
    finally:
        cleanup(
            label,
            feeder.stop if feeder is not None else None,
            tailer.stop if tailer is not None else None,
            system.stop if system is not None else None,
            watch.close if watch is not None else None,
        )
        if watch is not None:
            leftovers = watch.kill_leftovers()
            if leftovers:
                print(f"{label}: killed {len(leftovers)} leftover processes of its tree", flush=True)


# ------------------------------------------------------------------------------------------ output


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    mode = "idle (no records)" if args.idle else f"{args.rate:g} lines/s each"
    print(
        f"\n{args.pipelines} pipelines ({2 * args.pipelines} connectors, one task each) on one worker, "
        f"{mode}; window {args.window:g} s after {args.warmup:g} s warm-up; broker {args.broker}"
    )
    header = (
        f"{'system':<34} {'cores':>6} {'broker':>6} {'peak RSS':>9} {'PSS':>9} {'procs':>5} "
        f"{'p50 s':>6} {'p99 s':>6} {'max s':>6} {'lines':>6} {'missing':>7} {'dup':>4}"
    )
    print(header)
    for r in rows:
        if r.cores is None:
            print(f"{r.system:<34} {r.note}")
            continue
        lat = r.latencies
        latency = (
            f"{percentile(lat, 50):6.2f} {percentile(lat, 99):6.2f} {lat[-1]:6.2f}"
            if lat
            else f"{'-':>6} " * 3
        )
        broker = f"{r.broker_cores:6.3f}" if r.broker_cores is not None else f"{'-':>6}"
        print(
            f"{r.system:<34} {r.cores:6.3f} {broker} {r.peak_rss_kib // 1024:5d} MiB "
            f"{r.pss_kib // 1024:5d} MiB {r.processes:5d} {latency.rstrip()} "
            f"{r.written:6d} {r.missing:7d} {r.duplicates:4d}"
        )
    for r in rows:
        extra = []
        if r.jobs_per_task_s is not None:
            extra.append(f"Spark jobs per sink task per second {r.jobs_per_task_s:.2f}")
        if r.load:
            extra.append(f"load average {r.load}")
        if r.note and r.cores is not None:
            extra.append(r.note)
        if extra:
            print(f"  {r.system}: " + "; ".join(extra))


#: The chart's title on the documentation site's benchmarks page.
TITLE = "Many small FileStream pipelines on one worker (bench/density.py)"


def figures_of(rows: list[Row], args: argparse.Namespace) -> list[results.Figure]:
    """The run's figures for ``bench/results/density.json``: cores, peak RSS and p99 latency per system."""
    lines = "line" if args.rate == 1 else "lines"
    fed = f"pipelines at {args.rate:g} {lines}/s"
    shape = f"{args.pipelines} idle pipelines" if args.idle else f"{args.pipelines} {fed}"
    if args.broker != "kafka":
        shape += f" ({args.broker} broker)"
    figures = []
    for r in rows:
        if r.cores is None:
            continue
        system, load = results.system_name(r.system), f"load average {r.load}" if r.load else ""
        figures.append(results.figure(system, shape, "cores", round(r.cores, 3), "cores", load=load))
        figures.append(results.figure(system, shape, "peak RSS", r.peak_rss_kib // 1024, "MiB", load=load))
        if r.latencies:
            p99 = round(percentile(r.latencies, 99), 2)
            figures.append(results.figure(system, shape, "p99 latency", p99, "s", load=load))
    return figures


def warm_broker(bootstrap: str) -> None:
    """One record through an idempotent producer, so that a fresh Apache Kafka node has made its
    transaction coordinator (``__transaction_state``, made on the first InitProducerId) before a worker's
    idempotent writers ask it: on 2026-11-27 a kconnect worker whose status writer met "Coordinator load
    in progress" on a fresh node started its connectors but wrote no status and no task configs."""
    from confluent_kafka import Producer

    topic = f"density-warm-{uuid.uuid4().hex[:6]}"
    dp.create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True})
    producer.produce(topic, b"warm")
    if producer.flush(120) != 0:
        raise RuntimeError("the broker did not take an idempotent producer's record within 120 s")


#: The Apache Kafka cluster of the run under way (``broker_running``), for a bench that faults its nodes.
running_cluster: KafkaCluster | None = None


@contextlib.contextmanager
def broker_running(
    kind: str, work: Path, size: int = 1, broker_config: dict[str, str] | None = None
) -> Iterator[tuple[str, int | None]]:
    """The run's broker: the embedded one, or ``size`` Apache Kafka nodes (``broker_config`` on each);
    yields the bootstrap and the first node's pid."""
    global running_cluster
    if kind == "embedded":
        with embedded.running(log_path=work / "broker.log") as broker:
            yield broker.bootstrap, broker.process.pid
        return
    with KafkaCluster(work / "kafka", size=size, broker_config=broker_config) as cluster:
        node = cluster.nodes[0]
        warm_broker(cluster.bootstrap)
        running_cluster = cluster
        try:
            yield cluster.bootstrap, node.process.pid if node.process else None
        finally:
            running_cluster = None


def query_sinks_on_embedded(kind: str, worker_props: list[str]) -> str | None:
    """Why a run cannot be measured, or None: ``--broker embedded`` with kconnect worker properties that make
    the FileStream sinks Structured Streaming queries (``sink.task.placement=query``). A query plans up to
    the high watermark, which the embedded broker reports as the base offset of a partition's last batch
    + 1 (DESIGN.md, test broker quirk 2): the tail of each batch would wait for the next one (latency) and
    the last one's for ever (the drain). The product targets Apache Kafka and does nothing about it; such
    runs belong on ``--broker kafka``."""
    props = {k.strip(): v.strip() for k, _, v in (item.partition("=") for item in worker_props)}
    # A cluster master's auto is the consumer loop too while records are few (issue 32), as here.
    if kind != "embedded" or props.get("sink.task.placement", "auto").lower() != "query":
        return None
    return (
        "--broker embedded with sinks as Structured Streaming queries: their micro-batches end at the high "
        "watermark, which the embedded broker reports short of a batch's tail (DESIGN.md, test broker quirk "
        "2); use --broker kafka"
    )


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def run_systems(
    name: str,
    broker: str,
    keep: bool,
    systems: Sequence[str],
    run_one: Callable[[str, str, int | None, Path], R],
    report: Callable[[list[R]], None],
    size: int = 1,
    broker_config: dict[str, str] | None = None,
) -> list[R] | None:
    """A bench's run around its systems (this one's and ``handover.py``'s): SIGTERM stops it as Ctrl-C
    does, the machine is named, one broker serves every system in turn (``run_one(kind, bootstrap,
    broker_pid, work)``) and ``report`` prints the rows; None when interrupted, after reporting the rows
    measured so far. The work directory goes unless ``keep``. ``size`` and ``broker_config``: the Apache
    Kafka cluster's nodes and their settings (``brokers_random.py`` runs three and kills them)."""
    signal.signal(signal.SIGTERM, _terminate)
    print(
        f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}; {platform.platform()}, nproc "
        f"{os.cpu_count()}; Python {platform.python_version()}; load average {load_average()}",
        flush=True,
    )
    work = Path(tempfile.mkdtemp(prefix=f"kconnect-bench-{name}-"))
    rows: list[R] = []
    try:
        with broker_running(broker, work, size, broker_config) as (bootstrap, broker_pid):
            for kind in systems:
                rows.append(run_one(kind, bootstrap, broker_pid, work))
    except KeyboardInterrupt:
        print("\ninterrupted; everything started was stopped", file=sys.stderr)
        report(rows)
        return None
    finally:
        if keep:
            print(f"\nkept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    report(rows)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pipelines", type=int, default=10, help="N: FileStream source+sink pairs")
    parser.add_argument("--rate", type=float, default=10.0, help="R: lines a second into each source file")
    parser.add_argument("--warmup", type=float, default=30.0, help="seconds fed before the window")
    parser.add_argument("--window", type=float, default=60.0, help="seconds measured")
    parser.add_argument("--drain", type=float, default=60.0, help="at most this long for the last lines")
    parser.add_argument("--idle", action="store_true", help="feed nothing: the idle cost of 2N tasks")
    parser.add_argument("--only", default="kconnect,reference", help="systems, comma-separated, in order")
    parser.add_argument("--broker", choices=("kafka", "embedded"), default="kafka")
    parser.add_argument("--reference-version", choices=("3.9", "4.x"), default="3.9")
    parser.add_argument("--spark-ui", action="store_true", help="kconnect: count Spark jobs via Spark's UI")
    parser.add_argument(
        "--sink-trigger", default="", help='kconnect: the sink queries\' trigger ("2 seconds")'
    )
    parser.add_argument("--worker-prop", action="append", default=[], help="kconnect worker key=value")
    parser.add_argument(
        "--spark-master",
        choices=("local", "standalone", "both"),
        default="local",
        help="kconnect's Spark: local[2], a standalone cluster of one 2-core worker it starts, or both",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, files)")
    results.add_argument(parser)
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.only.split(",") if s.strip()]
    if not systems or set(systems) - {"kconnect", "reference"}:
        parser.error(f"--only takes kconnect and/or reference, not {args.only!r}")
    masters = {"local": ["kconnect"], "standalone": ["kconnect-standalone"]}
    masters["both"] = masters["local"] + masters["standalone"]
    systems = [m for s in systems for m in (masters[args.spark_master] if s == "kconnect" else [s])]
    if refused := query_sinks_on_embedded(args.broker, args.worker_prop):
        parser.error(refused)
    rows = run_systems(
        "density",
        args.broker,
        args.keep,
        systems,
        lambda kind, bootstrap, broker_pid, work: run_system(kind, bootstrap, broker_pid, work, args),
        lambda rows: print_table(rows, args),
    )
    if rows is None:
        return 130
    results.save("density", figures_of(rows, args), args, title=TITLE)
    return 1 if any(r.cores is None and not r.note.startswith("not available") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
