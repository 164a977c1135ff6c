"""Where a kconnect worker's data-plane CPU goes: CPU seconds per thread, for the worker process and every
process below it (the Spark JVM's threads by name, Spark's Python daemon and workers, the streaming
source runner), read from ``/proc`` before and after one run.

It answers what ``dataplane.py``'s side-by-side table cannot: which part of the ``cpu all`` column to cut.
One kconnect worker on the embedded broker (the same worker settings as ``dataplane.py``, its SparkSession
warmed up first), then per repetition a fresh topic and one of:

- ``pipeline``: a FileStream source and a FileStream sink of ``--records`` lines (``dataplane.py``'s run);
- ``sink``: the topic filled by a plain producer first, then only the FileStream sink reads it;
- ``source``: only the FileStream source, until a consumer has read every record back;
- ``trickle``: a sink that has caught up, then one record every 100 ms for 30 s: the per-micro-batch cost
  (checkpoints, planning, processes Spark forks) with almost no records.

The first line of a run is the whole tree's CPU (``process_cpu.tree_cpu``, what ``dataplane.py`` counts);
the lines below it are the threads that ran, which do not add up to it exactly (a thread that ended
during the run is not listed).

``--transforms`` gives the sink ``dataplane.TRANSFORMS`` (RegexRouter, TimestampRouter). Threads are named
as the kernel has them (15 characters, digits folded to N): ``jvm:Executor task l`` is Spark's task
threads, ``jvm:stream executio`` the micro-batch planner, ``jvm:CN CompilerThre`` the JIT,
``jvm:reaped-children`` processes the JVM forked and reaped, ``py:daemon:python`` Spark's Python workers
(the sink's Kafka reader), ``worker:python`` the worker's own Python threads (source tasks, ``put``).

    .venv/bin/python bench/cpu_threads.py                          # pipeline, 400,000 lines, 3 repetitions
    .venv/bin/python bench/cpu_threads.py --mode sink --transforms
    .venv/bin/python bench/cpu_threads.py --mode trickle --records 1000 --repeat 1

With ``--transforms`` the sink is a Structured Streaming query, which plans up to the high watermark, and
the embedded broker reports that short of a multi-record batch's tail (DESIGN.md, test broker quirk 2;
the product targets Apache Kafka): the topics this bench fills itself end with a batch of one record, and
in ``pipeline`` mode ``dataplane.Sentinels`` writes a one-record ``#`` batch every second (its lines are
not counted), as ``dataplane.py`` does.
"""

from __future__ import annotations

import argparse
import collections
import os
import re
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dataplane as dp
import process_cpu
from confluent_kafka import Consumer, Producer, TopicPartition

from kconnect.runtime.cli import broker as embedded
from kconnect.runtime.dataplane.task_runner import produce


def threads(pid: int) -> collections.Counter[str]:
    """CPU seconds per thread name of one process (names with digits folded, so pools add up)."""
    out: collections.Counter[str] = collections.Counter()
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            stat = Path(f"/proc/{pid}/task/{tid}/stat").read_text()
        except OSError:
            continue
        name = re.sub(r"[0-9#]+", "N", stat[stat.index("(") + 1 : stat.rindex(")")])
        fields = stat.rsplit(")", 1)[1].split()
        out[name] += (int(fields[11]) + int(fields[12])) / process_cpu.TICK
    return out


def snapshot(root: int) -> collections.Counter[str]:
    """CPU seconds so far per thread of the worker process and every process below it."""
    snap: collections.Counter[str] = collections.Counter()
    for name, seconds in threads(root).items():
        snap[f"worker:{name}"] += seconds
    snap["worker:reaped-children"] += process_cpu.cpu_ticks(root)[1] / process_cpu.TICK
    for pid in dp._descendants(root):
        if dp._comm(pid) == "java":
            kind = "jvm"
        else:
            try:
                command = (
                    Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
                )
            except OSError:
                continue
            kind = (
                "py:daemon"
                if "daemon" in command
                else "py:streamrunner"
                if "stream" in command
                else "py:other"
            )
        for name, seconds in threads(pid).items():
            snap[f"{kind}:{name}"] += seconds
        snap[f"{kind}:reaped-children"] += process_cpu.cpu_ticks(pid)[1] / process_cpu.TICK
    return snap


def produce_lines(bootstrap: str, topic: str, count: int) -> None:
    """``count`` lines, the last in a batch of its own, so that a query sink reads them all on the embedded
    broker too (module docstring)."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    line = b"x" * 99
    for i in range(count - 1):
        produce(producer, topic, None, line, {})
        if i % 10000 == 0:
            producer.poll(0)
    producer.flush(60)
    produce(producer, topic, None, line, {})
    producer.flush(60)


def read_back(bootstrap: str, topic: str, count: int) -> None:
    """Wait until ``count`` records can be read from the topic (the test broker's high watermark lags,
    so the records are read rather than the watermark asked)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{topic}"})
    consumer.assign([TopicPartition(topic, 0, 0)])
    got, deadline = 0, time.monotonic() + 600
    try:
        while got < count and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(10000, 0.5) if m.error() is None)
    finally:
        consumer.close()
    if got < count:
        raise RuntimeError(f"read {got} of {count} records back from {topic}")


def one_run(args: argparse.Namespace, worker: dp.WorkerProcess, bootstrap: str, work: Path, rep: int) -> None:
    topic = f"threads-{uuid.uuid4().hex[:6]}"
    dp.create_topic(bootstrap, topic)
    source_file, out = work / f"in{rep}.txt", work / f"out{rep}.txt"
    source = {
        "connector.class": "FileStreamSource",
        "file": str(source_file),
        "topic": topic,
        "batch.size": "2000",
    }
    sink = {
        "connector.class": "FileStreamSink",
        "file": str(out),
        "topics": topic,
        **(dp.TRANSFORMS if args.transforms else {}),
    }
    names: list[str] = []
    if args.mode in ("pipeline", "source"):
        dp.make_input(source_file, args.records, 99)
    elif args.mode in ("sink", "trickle"):
        produce_lines(bootstrap, topic, args.records)
    time.sleep(2)
    before, started = snapshot(worker.proc.pid), time.monotonic()
    tree_before = process_cpu.tree_cpu(worker.proc.pid)
    records = args.records
    if args.mode in ("pipeline", "source"):
        dp.create(worker, f"threads-src{rep}", source)
        names.append(f"threads-src{rep}")
    if args.mode == "source":
        read_back(bootstrap, topic, args.records)
    else:
        dp.create(worker, f"threads-sink{rep}", sink)
        names.append(f"threads-sink{rep}")
        with dp.Sentinels(bootstrap, [topic], args.transforms and args.mode == "pipeline"):
            dp.wait_for_lines(out, args.records, 100, 600, worker.alive)
    if args.mode == "trickle":
        time.sleep(3)
        before, started = snapshot(worker.proc.pid), time.monotonic()
        tree_before = process_cpu.tree_cpu(worker.proc.pid)
        producer = Producer({"bootstrap.servers": bootstrap})
        records = 0
        while time.monotonic() - started < 30:
            producer.produce(topic, b"y" * 99)
            producer.flush(5)
            records += 1
            time.sleep(0.1)
        dp.wait_for_lines(out, args.records + records, 100, 600, worker.alive)
    wall = time.monotonic() - started
    after, tree_after = snapshot(worker.proc.pid), process_cpu.tree_cpu(worker.proc.pid)
    diff = {k: after[k] - before[k] for k in set(after) | set(before)}
    # The total from the processes' own counters (``process_cpu.tree_cpu``): a thread that ended during the
    # run leaves the per-thread sums, its time staying in its process's total.
    total = sum(tree_after.values()) - sum(tree_before.values())
    print(
        f"{args.mode}{' +transforms' if args.transforms else ''} run {rep + 1}: {records:,} records, "
        f"wall {wall:.1f} s, CPU {total:.2f} s = {total / max(records, 1) * 1e6:.1f} µs/record",
        flush=True,
    )
    for name, seconds in sorted(diff.items(), key=lambda kv: -kv[1]):
        if seconds >= 0.05:
            print(f"    {seconds:6.2f}  {name}")
    dp.delete_all(worker, names)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", choices=("pipeline", "sink", "source", "trickle"), default="pipeline")
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--transforms", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        with embedded.running(log_path=work / "broker.log") as broker:
            worker = dp.kconnect_worker(broker.bootstrap, work, "connect")
            try:
                dp.wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 90, "the group")
                dp.warm_up(worker, broker.bootstrap, work, "connect")
                for rep in range(args.repeat):
                    one_run(args, worker, broker.bootstrap, work, rep)
            finally:
                worker.stop(30)


if __name__ == "__main__":
    main()
