"""Rolling restart of a whole cluster: how long pipelines' output stops, how many tasks move, and whether
anything is lost, kconnect and Apache Kafka Connect side by side (issue 34, item 1).

Per system, on one Apache Kafka node the bench starts itself (``tests.support.apache_kafka.KafkaCluster``;
``--broker embedded``: the embedded development broker), a fresh group of its own:

1. ``--workers`` W workers start (the first alone, so it leads; the others once it has joined) and
   ``--pipelines`` P FileStream pipelines are created, each a source (``tasks.max=1``) from its own file
   into its own one-partition topic and a sink (``tasks.max=1``) from that topic into its own file; once
   every task is RUNNING a feeder appends ``--rate`` R lines a second to each source file
   (``density.Feeder``) and a tailer notes when each line first reaches its sink file (``density.Tailer``);
2. **steady**: after ``--settle`` seconds, a window of ``--steady`` seconds with nothing moving;
3. **the roll**: each worker in turn gets SIGTERM (a graceful leave), is started again with the same
   identity (the same properties file, REST port and so advertised URL), and once every task is RUNNING
   again (and ``--pause`` seconds more) the next worker's turn comes;
4. the feeder stops and the bench waits up to ``--drain`` seconds for the last lines.

Per system it prints the roll's duration; the **longest gap** (the longest stretch in which a pipeline's
sink file received no new line) in the steady window and during the roll, the roll's as the max and p95
over pipelines; **task moves** during the roll, read from the status topic's history (a task reported
RUNNING by another worker than the one that last reported it RUNNING), their total, the most any one task
moved in one turn, and the moves past issue 34's goal (a task moves at most twice per restart of its
worker, away and back, and a task of another worker not at all); and lines **lost** and **repeated**,
from the sink files after the drain.

Systems (``--only``): ``kconnect`` (``kconnect worker``, ``group.protocol=connect``, warm-up hand-over on:
``max.warmup.tasks`` ``--warmup-tasks``, the integration tests' session settings, ``spark.master=local[2]``
with FileStream sinks as consumer loops) and ``reference`` (Apache Kafka Connect 4.x by default,
``connect.protocol=sessioned`` and its default ``scheduled.rebalance.max.delay.ms``, the same session
settings, ``connect-distributed.sh``'s JVM options). ``--worker-prop k=v`` adds a kconnect worker property.

Nothing is asserted; it prints one table and exits 0 (1 if a system failed).

    .venv/bin/python bench/rolling.py --workers 3 --pipelines 50 --rate 2       # ~10 minutes
    .venv/bin/python bench/rolling.py --workers 5 --pipelines 200 --rate 1      # the issue's scale
    .venv/bin/python bench/rolling.py --only kconnect --workers 2 --pipelines 4 --keep
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dataplane as dp
import density as dn
import handover as ho
import httpx
import results
from confluent_kafka import Consumer, TopicPartition

from kconnect.runtime.cli.broker import free_port
from kconnect.runtime.storage import status_log
from tests.support.cluster import WorkerProcess, topic_names, wait_until, worker_properties
from tests.support.reference import REFERENCE_4X, REFERENCE_39, ReferenceWorker, reference_available

# ------------------------------------------------------------------------------------------ systems


class KconnectNode:
    """One ``kconnect worker``; ``start`` after ``stop`` comes back with the same properties and port,
    so the same advertised URL: the same identity."""

    def __init__(self, bootstrap: str, work: Path, group: str, name: str, args: argparse.Namespace) -> None:
        props = worker_properties(bootstrap, group, free_port())
        props.update(
            {
                "group.protocol": "connect",
                "max.warmup.tasks": str(args.warmup_tasks),
                "key.converter": dp.STRING_CONVERTER,
                "value.converter": dp.STRING_CONVERTER,
                "offset.flush.interval.ms": dp.FLUSH_INTERVAL_MS,
                "spark.master": "local[2]",
                "spark.ui.enabled": "false",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.driver.host": "127.0.0.1",
            }
        )
        for item in args.worker_prop:
            key, _, value = item.partition("=")
            props[key.strip()] = value.strip()
        self.status_topic = topic_names(group)["status.storage.topic"]
        self.worker = WorkerProcess(work, props, name=name, spark=True)
        self.worker_id = f"127.0.0.1:{self.worker.port}"  # the advertised URL's host:port, as in statuses

    def start(self) -> None:
        self.worker.start()

    def wait_ready(self) -> None:
        wait_until(lambda: (self.worker.workers() or {}).get("generation", -1) >= 0, 180, "a worker to join")

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response:
        return self.worker.request(method, path, json=body)

    def stop(self) -> None:
        if self.worker.alive():
            with contextlib.suppress(Exception):
                self.worker.stop(120)


class ReferenceNode:
    """One Apache Kafka Connect distributed worker; a fixed port, so a restart keeps its identity."""

    def __init__(self, bootstrap: str, work: Path, group: str, name: str, version: str) -> None:
        self.status_topic = f"{group}-status"
        self.worker: ReferenceWorker = dp.bench_reference_worker(
            bootstrap,
            group,
            work / f"{name}.log",
            offset_partitions=3,
            status_partitions=3,
            version=version,
            port=free_port(),
        )
        self.worker_id = self.worker.worker_id

    def start(self) -> None:
        self.worker.start()

    def wait_ready(self) -> None:
        self.worker.wait_for_log(r"Joined group at generation", 180)

    def rest(self, method: str, path: str, body: Any = None) -> httpx.Response:
        if body is None:
            return self.worker.rest(method, path)
        return self.worker.rest(method, path, json=body)

    def stop(self) -> None:
        if self.worker.alive:
            self.worker.stop(120)


# ------------------------------------------------------------------------------------------ task moves


@dataclass
class Moves:
    total: int = 0
    most: int = 0  # the most any one task moved in one turn
    extra: int = 0  # moves past the goal: more than 2 for a task of the restarted worker, any for the rest
    starts: int = 0  # RUNNING reports during the roll (a task started again where it was counts too)


def status_history(bootstrap: str, topic: str) -> list[tuple[float, status_log.StatusRecord]]:
    """The status topic from its start, each decoded record with its timestamp (seconds), in time order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"rolling-{uuid.uuid4().hex[:6]}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        seen = dict.fromkeys(partitions, 0)
        records: list[tuple[float, status_log.StatusRecord]] = []
        deadline = time.monotonic() + 60
        while any(seen[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen[msg.partition() or 0] = (msg.offset() or 0) + 1
            with contextlib.suppress(ValueError, KeyError, TypeError):
                decoded = status_log.decode(msg.key(), msg.value())
                if decoded is not None:
                    records.append((msg.timestamp()[1] / 1000, decoded))
        records.sort(key=lambda item: item[0])
        return records
    finally:
        consumer.close()


def task_moves(
    history: list[tuple[float, status_log.StatusRecord]], turns: list[tuple[str, float, float]]
) -> Moves:
    """Moves per turn ``(restarted worker id, start, end)``: a task reported RUNNING by another worker than
    the one that last reported it RUNNING. A task the restarted worker ran when its turn began may move
    twice in that turn (away, and back); any other task's move, or a third, counts as ``extra``."""
    owner: dict[Any, str] = {}
    moves = Moves()
    events = iter(history)
    pending = next(events, None)
    for restarted, start, end in turns:
        while pending is not None and pending[0] < start:
            _note_owner(owner, pending[1])
            pending = next(events, None)
        ran_here = {task for task, worker in owner.items() if worker == restarted}
        per_task: dict[Any, int] = {}
        while pending is not None and pending[0] <= end:
            record = pending[1]
            if isinstance(record, status_log.TaskStatus) and record.state is status_log.State.RUNNING:
                moves.starts += 1
                previous = owner.get(record.task)
                if previous is not None and previous != record.worker_id:
                    per_task[record.task] = per_task.get(record.task, 0) + 1
            _note_owner(owner, record)
            pending = next(events, None)
        moves.total += sum(per_task.values())
        moves.most = max(moves.most, *per_task.values(), 0)
        moves.extra += sum(max(0, n - (2 if task in ran_here else 0)) for task, n in per_task.items())
    return moves


def _note_owner(owner: dict[Any, str], record: status_log.StatusRecord) -> None:
    if isinstance(record, status_log.TaskStatus) and record.state is status_log.State.RUNNING:
        owner[record.task] = record.worker_id


# ------------------------------------------------------------------------------------------ one run


@dataclass
class Row:
    system: str
    note: str = ""
    steady_gap: float | None = None
    roll_gap_max: float | None = None
    roll_gap_p95: float | None = None
    roll_s: float | None = None
    turns_s: list[float] = field(default_factory=list)
    moves: Moves = field(default_factory=Moves)
    written: int = 0
    lost: int = 0
    dup: int = 0
    load: str = ""


def per_pipeline_gaps(arrivals: list[list[float]], start: float, end: float) -> list[float]:
    """Each pipeline's longest stretch without a new line in [start, end], ascending."""
    return sorted(ho.longest_gap([times], start, end).seconds for times in arrivals)


def _node(kind: str, bootstrap: str, work: Path, group: str, name: str, args: argparse.Namespace) -> Any:
    if kind == "reference":
        version = REFERENCE_4X if args.reference_version == "4.x" else REFERENCE_39
        return ReferenceNode(bootstrap, work, group, name, version)
    return KconnectNode(bootstrap, work, group, name, args)


def label_of(kind: str, args: argparse.Namespace) -> str:
    if kind == "reference":
        return f"reference Connect {args.reference_version}"
    return f"kconnect (warm-up {args.warmup_tasks})"


def run_system(kind: str, bootstrap: str, work: Path, args: argparse.Namespace) -> Row:
    label = label_of(kind, args)
    row = Row(label)
    if kind == "reference":
        version = REFERENCE_4X if args.reference_version == "4.x" else REFERENCE_39
        ok, why = reference_available(version)
        if not ok:
            row.note = f"not available: {why}"
            return row
    group = f"rolling-{kind[:3]}-{uuid.uuid4().hex[:6]}"
    nodes: list[Any] = []
    feeder: dn.Feeder | None = None
    tailer: dn.Tailer | None = None
    try:
        for i in range(args.workers):
            node = _node(kind, bootstrap, work, group, f"{group}-{i}", args)
            nodes.append(node)
            node.start()
            if i == 0:
                node.wait_ready()  # the first leads
        for node in nodes:
            node.wait_ready()
        first = nodes[0]
        print(f"{label}: {args.workers} workers up; creating {args.pipelines} pipelines ...", flush=True)
        pipelines, names = dn.create_pipelines(first, bootstrap, work, group[-6:], args.pipelines)
        wait_until(lambda: dn.all_running(first, names), 600, f"{label}: every task RUNNING", 1.0)
        tailer = dn.Tailer(pipelines)
        tailer.start()
        feeder = dn.Feeder(pipelines, args.rate)
        feeder.start()
        time.sleep(args.settle)

        start = time.time()
        time.sleep(args.steady)
        steady = (start, time.time())

        row.load = dn.load_average()
        roll_start = time.time()
        turns: list[tuple[str, float, float]] = []
        for i, node in enumerate(nodes):
            turn = time.time()
            print(f"{label}: restarting worker {i} (load average {dn.load_average()}) ...", flush=True)
            node.stop()
            node.start()
            node.wait_ready()
            survivor = node
            wait_until(lambda n=survivor: dn.all_running(n, names), 600, f"{label}: every task RUNNING", 0.5)
            row.turns_s.append(time.time() - turn)
            time.sleep(args.pause)
            turns.append((node.worker_id, turn, time.time()))
        roll = (roll_start, time.time())
        row.roll_s = roll[1] - roll[0] - args.pause * len(nodes)

        feeder.stop()
        row.written = sum(feeder.written)
        deadline = time.monotonic() + args.drain
        while time.monotonic() < deadline and sum(len(x) for x in tailer.arrived) < row.written:
            time.sleep(0.2)
        tailer.stop()
        arrivals = ho.arrival_times(tailer)
        if args.keep:  # for reading the gaps against the workers' logs afterwards
            dump = {"steady": steady, "roll": roll, "turns": turns, "arrivals": arrivals}
            (work / f"{group}-arrivals.json").write_text(json.dumps(dump))
        row.steady_gap = ho.longest_gap(arrivals, *steady).seconds
        gaps = per_pipeline_gaps(arrivals, *roll)
        row.roll_gap_max = gaps[-1] if gaps else None
        row.roll_gap_p95 = dn.percentile(gaps, 95)
        row.lost, row.dup, _order = ho.file_accounting(pipelines, feeder.written)
        row.moves = task_moves(status_history(bootstrap, first.status_topic), turns)
        if feeder.behind_s > 0.1:
            row.note = f"feeder fell {feeder.behind_s:.2f} s behind"
        return row
    except (httpx.HTTPError, RuntimeError, TimeoutError, AssertionError, OSError) as exc:
        print(f"{label}: failed: {exc}", file=sys.stderr, flush=True)
        row.note = f"FAILED: {str(exc).splitlines()[0][:200]}"
        row.roll_gap_max = None
        return row
    finally:
        dn.cleanup(
            label,
            feeder.stop if feeder is not None else None,
            tailer.stop if tailer is not None else None,
            *(node.stop for node in reversed(nodes)),
        )


# ------------------------------------------------------------------------------------------ output


def _f(value: float | None, width: int) -> str:
    return f"{value:{width}.2f}" if value is not None else f"{'-':>{width}}"


def print_table(rows: list[Row], args: argparse.Namespace) -> None:
    print(
        f"\nrolling restart: {args.workers} workers, {args.pipelines} FileStream pipelines "
        f"({2 * args.pipelines} tasks) fed {args.rate:g} lines/s each; each worker SIGTERMed and started "
        f"again with the same identity, the next once every task is RUNNING; broker {args.broker}"
        + (f"; kconnect worker properties {' '.join(args.worker_prop)}" if args.worker_prop else "")
    )
    print("gaps: the longest stretch in which a pipeline's sink file got no new line (s)")
    print(
        f"{'system':<26} {'roll s':>7} {'steady gap':>10} {'roll gap max':>12} {'p95':>6} {'moves':>6} "
        f"{'most':>5} {'extra':>5} {'starts':>7} {'lines':>7} {'lost':>5} {'dup':>5}"
    )
    for r in rows:
        if r.roll_gap_max is None:
            print(f"{r.system:<26} {r.note}")
            continue
        print(
            f"{r.system:<26} {_f(r.roll_s, 7)} {_f(r.steady_gap, 10)} {_f(r.roll_gap_max, 12)} "
            f"{_f(r.roll_gap_p95, 6)} {r.moves.total:6d} {r.moves.most:5d} {r.moves.extra:5d} "
            f"{r.moves.starts:7d} {r.written:7d} {r.lost:5d} {r.dup:5d}"
        )
    for r in rows:
        if r.turns_s:
            turns = " ".join(f"{t:.1f}" for t in r.turns_s)
            print(f"  {r.system}: seconds per turn {turns}; load average at the roll's start {r.load}")
        if r.note and r.roll_gap_max is not None:
            print(f"  {r.system}: {r.note}")


#: The chart's title on the documentation site's benchmarks page.
TITLE = "A rolling restart of a whole cluster (bench/rolling.py)"


def figures_of(rows: list[Row], args: argparse.Namespace) -> list[results.Figure]:
    """The run's figures for ``bench/results/rolling.json``: the roll's duration, the longest output gaps
    (steady, and during the roll over pipelines: max and p95), task moves and lines lost and repeated."""
    shape = f"{args.workers} workers, {args.pipelines} pipelines at {args.rate:g} lines/s"
    if args.broker != "kafka":
        shape += f" ({args.broker} broker)"
    figures = []
    for r in rows:
        if r.roll_gap_max is None:
            continue
        system = results.system_name(r.system)
        load = f"load average at the roll's start {r.load}" if r.load else ""
        for metric, value, unit in (
            ("roll duration", r.roll_s, "s"),
            ("longest output gap, steady", r.steady_gap, "s"),
            ("longest output gap during the roll, max", r.roll_gap_max, "s"),
            ("longest output gap during the roll, p95", r.roll_gap_p95, "s"),
            ("task moves", r.moves.total, "moves"),
            ("lines lost", r.lost, "lines"),
            ("lines repeated", r.dup, "lines"),
        ):
            if value is not None:
                figures.append(results.figure(system, shape, metric, round(value, 2), unit, load=load))
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--workers", type=int, default=3, help="W: workers in the group")
    parser.add_argument("--pipelines", type=int, default=50, help="P: FileStream source+sink pairs")
    parser.add_argument("--rate", type=float, default=2.0, help="R: lines a second into each source file")
    parser.add_argument("--settle", type=float, default=15.0, help="seconds fed before the steady window")
    parser.add_argument("--steady", type=float, default=20.0, help="the steady window, seconds")
    parser.add_argument("--pause", type=float, default=2.0, help="seconds between one turn and the next")
    parser.add_argument("--drain", type=float, default=90.0, help="at most this long for the last lines")
    parser.add_argument("--only", default="kconnect,reference", help="systems, comma-separated, in order")
    parser.add_argument("--warmup-tasks", type=int, default=2, help="kconnect's max.warmup.tasks")
    parser.add_argument("--broker", choices=("kafka", "embedded"), default="kafka")
    parser.add_argument("--reference-version", choices=("3.9", "4.x"), default="4.x")
    parser.add_argument("--worker-prop", action="append", default=[], help="kconnect worker key=value")
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, files)")
    results.add_argument(parser)
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.only.split(",") if s.strip()]
    if not systems or set(systems) - {"kconnect", "reference"}:
        parser.error(f"--only takes kconnect and/or reference, not {args.only!r}")
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    if refused := dn.query_sinks_on_embedded(args.broker, args.worker_prop):
        parser.error(refused)
    began = time.monotonic()
    rows = dn.run_systems(
        "rolling",
        args.broker,
        args.keep,
        systems,
        lambda kind, bootstrap, _broker_pid, work: run_system(kind, bootstrap, work, args),
        lambda rows: print_table(rows, args),
    )
    if rows is None:
        return 130
    print(f"total {time.monotonic() - began:.0f} s; load average now {dn.load_average()}")
    results.save("rolling", figures_of(rows, args), args, title=TITLE)
    return 1 if any(r.roll_gap_max is None and not r.note.startswith("not available") for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
