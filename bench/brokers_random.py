"""Brokers dying at random under FileStream pipelines, kconnect and Apache Kafka Connect side by side
(issue 29, item 4).

One three-node Apache Kafka cluster (``min.insync.replicas=2``, replication factor 3 for every topic: the
workers' internal topics and the pipelines') serves each system in turn (``density.run_systems``). Per
system, two fresh workers of one group run ``--pipelines`` N FileStream pipelines (a source from its own
file into its own topic, a sink from that topic into its own file, ``tasks.max=1``, String converters); a
feeder appends ``--rate`` lines a second to each source file (``density.Feeder``: each line carries its
pipeline, sequence number and write time) and a tailer notes when each line first shows in its sink file
(``density.Tailer``, every 20 ms). After ``--warmup`` seconds the chaos starts: every ``--kill-every``
seconds a node picked at random (seeded, ``--seed``: both systems meet the same sequence) is SIGKILLed and
restarted ``--down`` seconds later, for ``--chaos`` seconds; then the feeder stops and the bench waits up
to ``--drain`` seconds for every line.

Figures per system: lines written; lost (never arrived); repeated (arrived more than once: at-least-once
delivery redelivers after a fault); and the longest time any pipeline's output received nothing while
lines were being written to it (from the chaos's start until the last line arrived or the drain ended),
with the pipeline and when. Nothing is asserted; one table, exit 0 (1 if a system failed to start).

    .venv/bin/python bench/brokers_random.py                     # the issue's run: 6 x 20 lines/s, 4 min
    .venv/bin/python bench/brokers_random.py --chaos 80 --only kconnect
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import random
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dataplane as dp
import density as dn
import httpx
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import KafkaCluster
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.reference import REFERENCE_4X, ReferenceWorker, reference_available

CLUSTER_CONFIG = {"min.insync.replicas": "2", "default.replication.factor": "3"}


@dataclass
class Row:
    system: str
    note: str = ""
    written: int = 0
    lost: int = 0
    repeated: int = 0
    longest_gap_s: float = 0.0
    gap_where: str = ""
    kills: list[str] = field(default_factory=list)
    drained_s: float | None = None
    load: str = ""


class Workers:
    """Two workers of one group, kconnect's or Apache Kafka Connect's; REST through whichever answers."""

    def __init__(self, kind: str, bootstrap: str, work: Path) -> None:
        self.kind = kind
        group = f"random-{kind[:3]}-{uuid.uuid4().hex[:6]}"
        self.kc: list[WorkerProcess] = []
        self.ref: list[ReferenceWorker] = []
        if kind == "kconnect":
            self.label = "kconnect"
            for i in range(2):
                props = worker_properties(bootstrap, group, free_port())
                props.update(
                    {
                        "config.storage.replication.factor": "3",
                        "offset.storage.replication.factor": "3",
                        "status.storage.replication.factor": "3",
                        "group.records.storage.replication.factor": "3",
                        "key.converter": dp.STRING_CONVERTER,
                        "value.converter": dp.STRING_CONVERTER,
                        "offset.flush.interval.ms": dp.FLUSH_INTERVAL_MS,
                        "spark.master": "local[1]",
                        "spark.ui.enabled": "false",
                        "spark.driver.bindAddress": "127.0.0.1",
                        "spark.driver.host": "127.0.0.1",
                    }
                )
                self.kc.append(WorkerProcess(work, props, name=f"{group}-w{i}", spark=True).start())
        else:
            self.label = "Apache Kafka Connect 4.3.1"
            extra = {
                "config.storage.replication.factor": "3",
                "offset.storage.replication.factor": "3",
                "status.storage.replication.factor": "3",
            }
            for i in range(2):
                worker = dp.bench_reference_worker(
                    bootstrap,
                    group,
                    work / f"{group}-w{i}.log",
                    extra=extra,
                    version=REFERENCE_4X,
                    startup_timeout_s=300.0,
                )
                self.ref.append(worker.start())

    def wait_ready(self) -> None:
        """Every worker answers REST and the group has a generation (kconnect) / joined (Connect)."""

        def in_group(w: WorkerProcess) -> bool:
            if not w.alive():  # said at once, with its log's last line, rather than after 300 s
                last = (w.log_text().strip().splitlines() or [""])[-1][:300]
                raise RuntimeError(f"{w.name} exited while starting ({w.proc and w.proc.returncode}): {last}")
            try:
                return bool((w.workers() or {}).get("generation", -1) >= 0)
            except httpx.HTTPError:
                return False

        for w in self.kc:
            wait_until(lambda w=w: in_group(w), 300, f"{w.name} in its group", 1.0)  # type: ignore[misc]
        for r in self.ref:
            r.wait_for_log(r"Joined group at generation", 300)

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response:
        last: Exception | None = None
        for w in self.kc:
            with contextlib.suppress(httpx.HTTPError):
                return w.request(method, path, json=body)
        for r in self.ref:
            try:
                return r.rest(method, path, json=body) if body is not None else r.rest(method, path)
            except httpx.HTTPError as exc:
                last = exc
        raise RuntimeError(f"no worker answered {method} {path}: {last}")

    def alive(self) -> bool:
        return all(w.alive() for w in self.kc) and all(r.alive for r in self.ref)

    def exits(self) -> list[str]:
        """Each kconnect worker that exited, with its exit status (a negative one is the signal that ended
        it: -9 is a SIGKILL from outside, e.g. the OOM killer; -6/-11 a native crash, whose stacks
        faulthandler wrote to its log)."""
        return [
            f"{w.name} exit status {w.proc.returncode}"
            for w in self.kc
            if w.proc is not None and w.proc.poll() is not None
        ]

    def stop(self) -> None:
        for w in self.kc:
            with contextlib.suppress(Exception):
                w.stop(60)
        for r in self.ref:
            with contextlib.suppress(Exception):
                r.close()


def create_pipelines(workers: Workers, bootstrap: str, work: Path, tag: str, n: int) -> list[dn.Pipeline]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    pipelines = [
        dn.Pipeline(i, f"random-{tag}-{i}", work / f"in-{tag}-{i}.txt", work / f"out-{tag}-{i}.txt")
        for i in range(n)
    ]
    for future in admin.create_topics([NewTopic(p.topic, 1, 3) for p in pipelines]).values():
        future.result(60)
    for p in pipelines:
        p.source.write_text("")
        for kind, config in (
            ("source", {"connector.class": "FileStreamSource", "file": str(p.source), "topic": p.topic}),
            ("sink", {"connector.class": "FileStreamSink", "file": str(p.sink), "topics": p.topic}),
        ):
            body = {"name": f"{tag}-{p.index}-{kind}", "config": {**config, "tasks.max": "1"}}
            deadline = time.monotonic() + 120
            while True:
                try:
                    resp = workers.rest("POST", "/connectors", body)
                except RuntimeError:  # no worker answered yet
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(1.0)
                    continue
                if resp.status_code in (200, 201) or (
                    resp.status_code == 409 and "already exists" in resp.text
                ):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"creating {body['name']}: {resp.status_code} {resp.text[:300]}")
                time.sleep(0.5)
    return pipelines


class ExitWatch(threading.Thread):
    """Notes when (seconds after ``start``) each worker of ``workers`` is first seen exited, to set beside
    the kills: a worker's death under broker kills is what issue 29's bench run saw."""

    def __init__(self, workers: Workers, start: float) -> None:
        super().__init__(daemon=True, name="exit-watch")
        self.workers, self.start_s = workers, start
        self.seen: dict[str, str] = {}
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(0.5):
            for what in self.workers.exits():
                name = what.split(" ", 1)[0]
                if name not in self.seen:
                    self.seen[name] = f"{what} at +{time.time() - self.start_s:.0f}s"
                    print(f"worker exited: {self.seen[name]}", flush=True)

    def stop(self) -> None:
        self._halt.set()


class Chaos(threading.Thread):
    """Every ``every`` seconds SIGKILLs a node picked by ``rng`` and restarts it ``down`` seconds later."""

    def __init__(self, cluster: KafkaCluster, rng: random.Random, every: float, down: float, length: float):
        super().__init__(daemon=True, name="chaos")
        self.cluster, self.rng, self.every, self.down, self.length = cluster, rng, every, down, length
        self.kills: list[str] = []
        #: Nodes found exited after a restart (a broker that could not register with the controller
        #: quorum in time exits: seen with the machine's load average at 60-100), started again.
        self.restarts_failed: list[str] = []
        self.error: str | None = None

    def run(self) -> None:
        start = time.monotonic()
        try:
            while len(self.kills) * self.every < self.length:
                time.sleep(max(0.0, start + len(self.kills) * self.every - time.monotonic()))
                for other in self.cluster.nodes:  # one that exited after its restart is started again
                    if not other.alive():
                        at = time.monotonic() - start
                        self.restarts_failed.append(f"node{other.node_id}@{at:.0f}s")
                        print(f"chaos: node {other.node_id} had exited after its restart; again", flush=True)
                        self.cluster.restart(other.node_id, wait=False)
                node = self.rng.choice(self.cluster.nodes)
                at = time.monotonic() - start
                self.cluster.kill(node.node_id)
                self.kills.append(f"node{node.node_id}@{at:.0f}s")
                print(f"chaos: node {node.node_id} SIGKILLed at +{at:.0f}s", flush=True)
                time.sleep(self.down)
                # Started again without waiting for it to register, so that the next kill keeps its time
                # (waiting, a slow registration on a loaded machine pushed kills up to 70 s apart).
                self.cluster.restart(node.node_id, wait=False)
            time.sleep(max(0.0, start + self.length - time.monotonic()))
        except Exception as exc:  # reported in the row
            self.error = str(exc)[:200]


def in_sync(bootstrap: str, pipelines: list[dn.Pipeline]) -> str:
    """How many of the pipelines' partitions have fewer in-sync replicas than ``min.insync.replicas`` (2)
    at the drain's end: such a partition takes no write from any producer (kconnect's or Java's), so lines
    lost there are the cluster's state, not the workers'."""
    try:
        md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(timeout=15)
    except Exception as exc:  # the report says so rather than failing
        return f"ISR unknown ({str(exc)[:80]})"
    short = [
        p.topic
        for p in pipelines
        if p.topic in md.topics and any(len(part.isrs) < 2 for part in md.topics[p.topic].partitions.values())
    ]
    return f"{len(short)} of {len(pipelines)} pipeline partitions below min.insync.replicas at the end"


def longest_gap(tailer: dn.Tailer, written: list[int], start: float, end: float) -> tuple[float, str]:
    """The longest stretch from ``start`` (wall clock) in which a pipeline's sink file got no new line: up to
    its last line for a pipeline whose every line arrived, up to ``end`` (the drain's end) otherwise."""
    best, where = 0.0, ""
    for i, arrived in enumerate(tailer.arrived):
        times = sorted(t for _stamp, t in arrived.values() if t >= start)
        stop = times[-1] if len(arrived) >= written[i] and times else end
        edges = [start, *times, stop]
        for a, b in itertools.pairwise(edges):
            if b - a > best:
                best, where = b - a, f"pipeline {i} from +{a - start:.0f}s"
    return best, where


def run_one(kind: str, bootstrap: str, _pid: int | None, work: Path, args: argparse.Namespace) -> Row:
    label = "kconnect" if kind == "kconnect" else "Apache Kafka Connect 4.3.1"
    if kind != "kconnect":
        ok, why = reference_available(REFERENCE_4X)
        if not ok:
            return Row(label, note=f"not available: {why}")
    cluster = dn.running_cluster
    assert cluster is not None
    workers: Workers | None = None
    feeder: dn.Feeder | None = None
    tailer: dn.Tailer | None = None
    try:
        workers = Workers(kind, bootstrap, work)
        workers.wait_ready()
        tag = f"{kind[:3]}{uuid.uuid4().hex[:4]}"
        pipelines = create_pipelines(workers, bootstrap, work, tag, args.pipelines)
        names = [f"{tag}-{p.index}-{k}" for p in pipelines for k in ("source", "sink")]
        w = workers
        wait_until(lambda: dn.all_running(w, names), 300, f"{label}: every task RUNNING", 1.0)
        print(f"{label}: {len(names)} connectors RUNNING; feeding {args.rate:g} lines/s each", flush=True)
        tailer, feeder = dn.Tailer(pipelines), dn.Feeder(pipelines, args.rate)
        tailer.start()
        feeder.start()
        time.sleep(args.warmup)
        load_start = dn.load_average()
        chaos = Chaos(cluster, random.Random(args.seed), args.kill_every, args.down, args.chaos)
        chaos_start = time.time()
        exit_watch = ExitWatch(workers, chaos_start)
        exit_watch.start()
        chaos.start()
        chaos.join(args.chaos + 180)
        print(f"{label}: chaos over ({', '.join(chaos.kills)}); draining", flush=True)
        feeder.stop()
        total = sum(feeder.written)
        drain_start = time.monotonic()
        drained: float | None = None
        while time.monotonic() - drain_start < args.drain:
            if sum(len(a) for a in tailer.arrived) >= total:
                drained = time.monotonic() - drain_start
                break
            time.sleep(0.2)
        end = time.time()
        isr = in_sync(bootstrap, pipelines)
        tailer.stop()
        exit_watch.stop()
        arrived = sum(len(a) for a in tailer.arrived)
        gap, where = longest_gap(tailer, list(feeder.written), chaos_start, end)
        return Row(
            label,
            note=(f"chaos error: {chaos.error}" if chaos.error else "")
            + "".join(f" worker exited: {what}" for what in exit_watch.seen.values())
            + "".join(f" node exited after its restart: {what};" for what in chaos.restarts_failed)
            + f" {isr}",
            written=total,
            lost=total - arrived,
            repeated=tailer.duplicates,
            longest_gap_s=gap,
            gap_where=where,
            kills=chaos.kills,
            drained_s=drained,
            load=f"{load_start} -> {dn.load_average()}",
        )
    except (httpx.HTTPError, RuntimeError, TimeoutError, AssertionError, OSError) as exc:
        print(f"{label}: failed: {exc}", file=sys.stderr, flush=True)
        return Row(label, note=f"FAILED: {str(exc).splitlines()[0][:200]}")
    finally:
        dn.cleanup(
            label,
            feeder.stop if feeder is not None else None,
            tailer.stop if tailer is not None else None,
            workers.stop if workers is not None else None,
        )
        for node in cluster.nodes:  # the next system starts on a whole cluster
            if not node.alive():
                with contextlib.suppress(Exception):
                    cluster.restart(node.node_id, timeout=120)


def report(rows: list[Row], args: argparse.Namespace) -> None:
    print(
        f"\n{args.pipelines} FileStream pipelines x {args.rate:g} lines/s on 2 workers, 3 Apache Kafka 4.3.1 "
        f"nodes; a random node SIGKILLed every {args.kill_every:g} s, back {args.down:g} s later, for "
        f"{args.chaos:g} s (seed {args.seed}); drain up to {args.drain:g} s"
    )
    print(f"{'system':28} {'written':>8} {'lost':>6} {'repeated':>9} {'longest silence':>16}  drained  kills")
    for r in rows:
        if r.note.startswith(("FAILED", "not available")):
            print(f"{r.system:28} {r.note}")
            continue
        drained = "no" if r.drained_s is None else f"{r.drained_s:.1f}s"
        print(
            f"{r.system:28} {r.written:8d} {r.lost:6d} {r.repeated:9d} {r.longest_gap_s:15.1f}s  "
            f"{drained:>7}  {' '.join(r.kills)}"
        )
        print(
            f"{'':28} longest silence: {r.gap_where}; load average {r.load}{'; ' + r.note if r.note else ''}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--pipelines", type=int, default=6)
    parser.add_argument("--rate", type=float, default=20.0, help="lines a second into each source file")
    parser.add_argument("--warmup", type=float, default=20.0)
    parser.add_argument("--chaos", type=float, default=240.0, help="seconds of random kills")
    parser.add_argument("--kill-every", type=float, default=40.0)
    parser.add_argument("--down", type=float, default=10.0, help="seconds a killed node stays down")
    parser.add_argument("--drain", type=float, default=120.0)
    parser.add_argument("--seed", type=int, default=29)
    parser.add_argument("--only", default="kconnect,reference")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.only.split(",") if s.strip()]
    rows = dn.run_systems(
        "brokers-random",
        "kafka",
        args.keep,
        systems,
        lambda kind, bootstrap, pid, work: run_one(kind, bootstrap, pid, work, args),
        lambda rows: report(rows, args),
        size=3,
        broker_config=dict(CLUSTER_CONFIG),
    )
    if rows is None:
        return 130
    return 1 if any(r.note.startswith("FAILED") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
