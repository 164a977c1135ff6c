"""Data-plane throughput, side by side on one embedded broker: file -> Kafka -> file.

Three systems move the same input file (``--records`` lines of ``--size`` bytes, default 1,000,000 x 100)
from a file through a fresh topic into an output file, one after the other:

1. **ceiling**: a plain confluent-kafka producer and consumer (consumer on a thread, started first): what
   this machine and broker allow a Python client at all.
2. **reference**: Apache Kafka Connect 3.9 (``/work/shared/tools/reference-connect``), one distributed
   worker, FileStreamSource (``batch.size`` 2000) and FileStreamSink, StringConverter both sides.
3. **kconnect**: one kconnect worker with the Spark executor, the same connectors, converters and
   settings. Its SparkSession is started before the clock (a warm-up sink connector), as a worker that
   already runs tasks has it; the reference worker is likewise started and joined before its clock.
   Once per ``--group-protocol`` value (default ``connect,classic``), each on a fresh worker and group:
   under ``connect`` the new connectors and tasks are reconciled without a JoinGroup/SyncGroup round,
   under ``classic`` each assignment is a round, as in Apache Kafka Connect.

Each time runs from connector creation (ceiling: first produce) until the output file holds every line;
the outputs are then compared with the input. Peak resident memory is sampled from ``/proc`` every
0.2 s: a worker's RSS with its two tasks running minus its idle RSS (per task), and for kconnect the Spark
JVM and Spark's Python workers separately. Then, when ``kconnect.connectors.parquet.ParquetSinkConnector``
is importable, Kafka -> Parquet records per second on the same kconnect worker.

``transforms`` runs the reference and kconnect FileStream pipelines again with two sink transforms that
both implement and that work on string values (``TRANSFORMS``: RegexRouter, then TimestampRouter).
``pipelines`` runs ``--pipelines`` (default 1, 2, 4) independent FileStream pipelines at once on the first
kconnect worker and prints their aggregate records/s. For the reference and kconnect rows a second table
puts side by side: wall seconds, records/s, CPU seconds of the worker process and of the processes below it
(kconnect's Spark JVM and Python workers), µs of CPU per record, the broker's CPU seconds and the worker
tree's peak RSS; then whether each target holds (CPU per record at most the reference's, wall time at most
half, records/s at least 2x).

``--spark-master standalone`` (issue 32) runs the kconnect rows on a standalone Spark cluster of one 2-core
worker that the bench starts for each kconnect worker from PySpark's jars and stops after it
(``spark_standalone.py``, the cluster ``density.py`` runs); ``both`` runs ``local[2]`` first, then the
cluster, for the side by side. On the cluster ``auto`` places the source task on a source host (a Spark
job on the executor), so the warm-up starts one too; CPU and RSS then count the cluster's master and worker
trees (the executor and its Python workers) as Spark's. The sentinels run for the cluster rows (a busy sink
may become a query there).

The parts, one module per concept: ``file_pipeline.py`` (the input, topic, connector configs, checks),
``proc_tree.py`` (CPU and RSS from /proc), ``dataplane_kconnect.py`` (the kconnect rows),
``dataplane_report.py`` (tables and figures); this module runs the ceiling and the reference and ties
them together, and still exports the parts' names (``dp.tree_cpu`` ...) for the other benches.

    .venv/bin/python bench/dataplane.py                     # 1,000,000 records; minutes on 2 cores
    .venv/bin/python bench/dataplane.py --records 100000    # a quick run
    .venv/bin/python bench/dataplane.py --only ceiling,kconnect
    .venv/bin/python bench/dataplane.py --group-protocol connect    # kconnect rows for one protocol only
    .venv/bin/python bench/dataplane.py --only reference,kconnect,transforms   # the side-by-side rows
    .venv/bin/python bench/dataplane.py --only reference,kconnect --group-protocol connect \
        --source-placement worker,executor    # the source task on the worker's thread, then as a Spark job
    .venv/bin/python bench/dataplane.py --only reference,kconnect --group-protocol connect \
        --sink-placement auto,query    # the sink as a consumer loop (issue 22), then as a streaming query
    .venv/bin/python bench/dataplane.py --only reference,kconnect --group-protocol connect \
        --spark-master both    # the big pipeline on local[2], then on a standalone cluster (issue 32)

Test-broker workaround, in this bench only (the product targets Apache Kafka): a sink task that runs as a
Structured Streaming query (``--sink-placement query``, the transforms rows, Parquet) plans each
micro-batch up to the high watermark, and the embedded broker reports it as the base offset of a
partition's last batch + 1 (DESIGN.md, test broker quirk 2), so the tail of the source's last batch would
never be read. While such a sink runs, the bench therefore writes a one-record "sentinel" batch (value
``#``) to its topic every second, and sentinel lines are left out when the output is counted and compared
(``Sentinels``); the Parquet row's pre-loaded topic ends with a batch of one record instead. A consumer
loop (the default under this local master) and the reference read every record the broker serves and need
neither.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import results as bench_results
from confluent_kafka import Consumer, Producer, TopicPartition

# The bench's parts, one module per concept; their names stay importable from here (``dp.tree_cpu``,
# ``dp.create_topic``, ``dp.kconnect_worker`` ...), as other benches use them.
from dataplane_kconnect import PARQUET_CLASS as PARQUET_CLASS
from dataplane_kconnect import Health as Health
from dataplane_kconnect import create as create
from dataplane_kconnect import delete_all as delete_all
from dataplane_kconnect import kconnect_worker as kconnect_worker
from dataplane_kconnect import parquet_available as parquet_available
from dataplane_kconnect import parquet_rows as parquet_rows
from dataplane_kconnect import run_kconnect as run_kconnect
from dataplane_kconnect import run_kconnect_rows
from dataplane_kconnect import run_parquet as run_parquet
from dataplane_kconnect import run_pipelines as run_pipelines
from dataplane_kconnect import warm_up as warm_up
from dataplane_report import CPU_HEADER as CPU_HEADER
from dataplane_report import TITLE, figures_of, print_side_by_side, print_table
from file_pipeline import FLUSH_INTERVAL_MS as FLUSH_INTERVAL_MS
from file_pipeline import REFERENCE_JAVA_OPTS as REFERENCE_JAVA_OPTS
from file_pipeline import SENTINEL as SENTINEL
from file_pipeline import STRING_CONVERTER as STRING_CONVERTER
from file_pipeline import TRANSFORMS as TRANSFORMS
from file_pipeline import (
    TRANSFORMS_LABEL,
    Result,
    connector_configs,
    create_topic,
    make_input,
    produce_all,
    same_lines,
    wait_for_size,
)
from file_pipeline import Sentinels as Sentinels
from file_pipeline import bench_reference_worker as bench_reference_worker
from file_pipeline import count_lines as count_lines
from file_pipeline import wait_for_lines as wait_for_lines
from proc_tree import _TICK as _TICK
from proc_tree import Meter, mib, tree_rss
from proc_tree import PeakSampler as PeakSampler
from proc_tree import _comm as _comm
from proc_tree import _cpu_ticks as _cpu_ticks
from proc_tree import _descendants as _descendants
from proc_tree import _rss_kib as _rss_kib
from proc_tree import tree_cpu as tree_cpu

from kconnect.runtime.cli import broker as embedded
from tests.support.cluster import WorkerProcess as WorkerProcess
from tests.support.cluster import wait_until as wait_until
from tests.support.reference import reference_available

# ------------------------------------------------------------------------------------------ systems


def run_ceiling(bootstrap: str, source: Path, out: Path, records: int) -> Result:
    topic = f"ceiling-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    expected_size = source.stat().st_size
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ceiling-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    done = threading.Event()
    errors: list[str] = []

    def consume() -> None:
        got = 0
        with open(out, "wb") as f:
            while got < records and not done.is_set():
                batch = consumer.consume(num_messages=10000, timeout=0.2)
                lines = []
                for msg in batch:
                    if msg.error() is not None:
                        errors.append(str(msg.error()))
                        continue
                    lines.append(msg.value())
                if lines:
                    lines.append(b"")
                    f.write(b"\n".join(lines))
                    got += len(lines) - 1
            f.flush()

    reader = threading.Thread(target=consume, daemon=True)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    started = time.monotonic()
    reader.start()
    with open(source, "rb") as f:
        produce_all(producer, topic, (line.rstrip(b"\n") for line in f))
    producer.flush(60)
    finished = wait_for_size(out, expected_size, 600, reader.is_alive)
    done.set()
    reader.join(30)
    consumer.close()
    ok = same_lines(source, out)
    return Result("confluent-kafka (ceiling)", records, finished - started, "" if ok else "OUTPUT DIFFERS")


#: Client settings that give the reference worker librdkafka's batching (kconnect's clients are
#: librdkafka): the Java producer's defaults (linger.ms 0, batch.size 16 KiB) send many small batches, and
#: on this broker a consumer's fetch costs about the same whatever a batch holds, so the defaults alone
#: slow the Java sink. The "tuned" run shows how much of the gap is defaults rather than the runtime.
REFERENCE_TUNED = {
    "producer.linger.ms": "5",
    "producer.batch.size": "1000000",
    "consumer.max.poll.records": "10000",
    "consumer.max.partition.fetch.bytes": "10485760",
    "consumer.fetch.max.wait.ms": "20",
}


def run_reference(
    bootstrap: str,
    work: Path,
    source: Path,
    out: Path,
    records: int,
    tuned: bool = False,
    transforms: bool = False,
    broker_pid: int | None = None,
) -> Result:
    label = "reference Connect 3.9" + (" (tuned)" if tuned else "") + (TRANSFORMS_LABEL if transforms else "")
    side = "" if tuned else "reference"
    variant = "transforms" if transforms else "plain"
    ok, why = reference_available()
    if not ok:
        return Result(label, records, None, f"not available: {why}", side=side, variant=variant)
    prefix = f"ref-{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}-lines"
    create_topic(bootstrap, topic)
    expected_size = source.stat().st_size
    with bench_reference_worker(
        bootstrap,
        prefix,
        work / f"reference{'-tuned' if tuned else ''}{'-transforms' if transforms else ''}.log",
        REFERENCE_TUNED if tuned else None,
    ) as worker:
        worker.wait_for_log(r"Joined group at generation", 120)
        assert worker.process is not None
        idle = tree_rss(worker.process.pid)
        with Meter(worker.process.pid, broker_pid) as meter:
            started = time.monotonic()
            for name, config in connector_configs(source, out, topic, transforms).items():
                resp = worker.rest("POST", "/connectors", json={"name": name, "config": config})
                if resp.status_code != 201:
                    raise RuntimeError(f"creating {name} on the reference worker: {resp.text}")
            finished = wait_for_size(out, expected_size, 1800, lambda: worker.alive)
            meter.stop()
        peak = meter.peak
    ok = same_lines(source, out)
    jvm_idle = idle["root"] + idle["jvm"]
    jvm_peak = peak["root"] + peak["jvm"]
    memory = {
        "idle worker": mib(jvm_idle),
        "peak with 2 tasks": mib(jvm_peak),
        "per running task": mib((jvm_peak - jvm_idle) // 2),
    }
    return Result(
        label,
        records,
        finished - started,
        "" if ok else "OUTPUT DIFFERS",
        memory,
        side=side,
        variant=variant,
        cpu=meter.cpu,
        peak_rss=peak["total"],
    )


@contextlib.contextmanager
def workdir(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kconnect-bench-dataplane-"))
    try:
        yield path
    finally:
        if keep:
            print(f"\nkept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="bytes per line before the newline")
    parser.add_argument(
        "--only",
        default="ceiling,reference,kconnect,parquet,transforms,pipelines",
        help="systems to run, comma-separated; also reference-tuned (the reference with REFERENCE_TUNED). "
        "transforms: the FileStream pipeline again with two sink transforms (TRANSFORMS), for the reference "
        "and kconnect if they run; pipelines: --pipelines concurrent pipelines on one kconnect worker",
    )
    parser.add_argument(
        "--pipelines",
        default="1,2,4",
        help="the pipelines rows: how many concurrent FileStream pipelines, comma-separated (each moves "
        "--records lines; run on the first --group-protocol's worker)",
    )
    parser.add_argument(
        "--group-protocol",
        default="connect,classic",
        help="kconnect's group.protocol values, comma-separated: a fresh worker (and group) for each, "
        "each with its kconnect and parquet rows",
    )
    parser.add_argument(
        "--source-placement",
        default="auto",
        help="source.task.placement of the kconnect workers, comma-separated: a fresh worker for each "
        "(auto: on the worker with this local master; executor: the source task as a Spark job); "
        "pipelines and parquet run with the first only",
    )
    parser.add_argument(
        "--sink-placement",
        default="auto",
        help="sink.task.placement of the kconnect workers, comma-separated: a fresh worker for each (auto: "
        "an untransformed sink as a consumer loop on this local master; query: a streaming query)",
    )
    parser.add_argument(
        "--spark-master",
        choices=("local", "standalone", "both"),
        default="local",
        help="the kconnect workers' Spark: local[2], a standalone cluster of one 2-core worker the bench "
        "starts for each kconnect worker (spark_standalone.py, as density.py's), or both (local first): "
        "a fresh worker for each",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, outputs)")
    bench_results.add_argument(parser)
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",")}
    group_protocols = [g.strip() for g in args.group_protocol.split(",") if g.strip()]
    placements = [p.strip() for p in args.source_placement.split(",") if p.strip()]
    if not placements or set(placements) - {"auto", "worker", "executor"}:
        parser.error(f"--source-placement takes auto, worker and/or executor, not {args.source_placement!r}")
    sink_placements = [p.strip() for p in args.sink_placement.split(",") if p.strip()]
    if not sink_placements or set(sink_placements) - {"auto", "worker", "query"}:
        parser.error(f"--sink-placement takes auto, worker and/or query, not {args.sink_placement!r}")
    pipelines = [int(n) for n in args.pipelines.split(",") if n.strip()] if "pipelines" in only else []
    unknown = set(group_protocols) - {"connect", "classic"}
    if unknown or not group_protocols:
        parser.error(f"--group-protocol takes connect and/or classic, not {args.group_protocol!r}")
    print(
        f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"{args.records:,} records of {args.size} bytes"
    )
    results: list[Result] = []
    with workdir(args.keep) as work:
        source = work / "input.txt"
        make_input(source, args.records, args.size)
        broker = embedded.start(log_path=work / "broker.log")
        pid = broker.process.pid
        try:
            if "ceiling" in only:
                print("ceiling: plain confluent-kafka producer and consumer ...", flush=True)
                results.append(run_ceiling(broker.bootstrap, source, work / "out-ceiling.txt", args.records))
            if "reference" in only:
                print("reference: Apache Kafka Connect 3.9 ...", flush=True)
                out = work / "out-reference.txt"
                results.append(
                    run_reference(broker.bootstrap, work, source, out, args.records, broker_pid=pid)
                )
            if {"reference", "transforms"} <= only:
                print("reference: Apache Kafka Connect 3.9, two transforms ...", flush=True)
                out = work / "out-reference-transforms.txt"
                results.append(
                    run_reference(
                        broker.bootstrap, work, source, out, args.records, transforms=True, broker_pid=pid
                    )
                )
            if "reference-tuned" in only:
                print("reference: Apache Kafka Connect 3.9, clients batching like librdkafka ...", flush=True)
                out = work / "out-reference-tuned.txt"
                results.append(run_reference(broker.bootstrap, work, source, out, args.records, tuned=True))
            masters = ["local", "standalone"] if args.spark_master == "both" else [args.spark_master]
            runs = [
                (g, p, s, m)
                for m in masters
                for g in group_protocols
                for p in placements
                for s in sink_placements
            ]
            kconnect_runs = runs if only & {"kconnect", "parquet"} else []
            for i, (group_protocol, placement, sink_placement, master) in enumerate(kconnect_runs):
                results.extend(
                    run_kconnect_rows(
                        broker.bootstrap,
                        work,
                        source,
                        args.records,
                        only if i == 0 else only - {"parquet"},
                        group_protocol,
                        pid,
                        pipelines if i == 0 else [],
                        placement,
                        sink_placement,
                        master,
                    )
                )
        except (httpx.HTTPError, RuntimeError, TimeoutError, AssertionError) as exc:
            print(f"\nbench aborted: {exc}", file=sys.stderr)
            print_table(results)
            print_side_by_side(results)
            return 1
        finally:
            broker.stop()
        print_table(results)
        print_side_by_side(results)
        bench_results.save("dataplane", figures_of(results, args.records), args, title=TITLE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
