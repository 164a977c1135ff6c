"""Restarts at scale: a worker started over internal topics that already hold many connectors and offsets.

For each system (kconnect, then the reference Apache Kafka Connect), on one Apache Kafka broker
(``tests.support.apache_kafka.KafkaCluster(size=1)``):

1. fresh internal topics are created and filled directly, in Java's formats (``config_log.encode``,
   ``offset_log.encode``), not through REST: ``--connectors`` FileStreamSource connectors, one task each,
   each reading a small file of its own (task configs committed, as a previous worker left them), and
   ``--offsets`` offset records spread over the connectors (``--offsets / --connectors`` distinct
   partitions each, the task's own file among them at the file's end, so no task has anything to read);
2. one worker is started over them, and the clock runs from its process start:

   - *REST s*: until REST answers anything (kconnect answers 503 "starting" until it has joined);
   - *joined s*: until ``GET /connectors`` answers 200;
   - *RUNNING s*: until ``GET /connectors?expand=status`` shows every connector and task RUNNING;
   - *read s*: the read of the internal topics to their end, as each worker logs it (kconnect: its
     "internal topics read to their end" line; the reference: from its first "Starting KafkaBasedLog" to
     its last "Finished reading KafkaBasedLog" line).

   The config topic's end offset is printed before and after: a worker that rewrites task configs on
   restart (it computed different ones) shows there; *threads* is the worker process's thread count
   (``/proc/<pid>/status``), the most sampled while waiting for RUNNING.

Target (issue 24 item 3): kconnect at every task RUNNING in under 30 s on 2 cores, REST answering within
1 s of the process start.

    .venv/bin/python bench/restart.py --connectors 100 --offsets 10000      # a quick run
    .venv/bin/python bench/restart.py                 # 1,000 connectors, 100,000 offsets
    .venv/bin/python bench/restart.py --only kconnect --reference 4x
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import re
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import results
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage import config_log, offset_log
from tests.support.apache_kafka import KafkaCluster
from tests.support.cluster import WorkerProcess, worker_properties
from tests.support.reference import REFERENCE_4X, ReferenceWorker, reference_available

OFFSET_PARTITIONS = 25  # both workers' default offset.storage.partitions
STATUS_PARTITIONS = 5
JAVA_SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
TASK_CLASS = {
    "kconnect": "kconnect.connectors.file.FileStreamSourceTask",
    "reference": "org.apache.kafka.connect.file.FileStreamSourceTask",
}


@dataclass
class Row:
    system: str
    rest_s: float | None = None
    first_status: int | None = None
    joined_s: float | None = None
    running_s: float | None = None
    read_s: float | None = None
    config_end_before: int = 0
    config_end_after: int = 0
    #: The worker process's thread count (``/proc/<pid>/status`` Threads) once every task was RUNNING, or
    #: at the timeout: the largest of the samples taken while waiting.
    threads: int | None = None
    note: str = ""


def create_topics(admin: AdminClient, prefix: str) -> dict[str, str]:
    names = {"config": f"{prefix}-configs", "offset": f"{prefix}-offsets", "status": f"{prefix}-status"}
    compact = {"cleanup.policy": "compact"}
    futures = admin.create_topics(
        [
            NewTopic(names["config"], 1, 1, config=compact),
            NewTopic(names["offset"], OFFSET_PARTITIONS, 1, config=compact),
            NewTopic(names["status"], STATUS_PARTITIONS, 1, config=compact),
        ]
    )
    for future in futures.values():
        future.result(30)
    return names


def fill(bootstrap: str, topics: dict[str, str], system: str, files: list[Path], offsets: int) -> None:
    """The records a previous worker would have left: configs, task configs and commits, and offsets."""
    producer = Producer(
        {"bootstrap.servers": bootstrap, "linger.ms": 20, "partitioner": "murmur2_random", "acks": "all"}
    )

    def send(topic: str, key: bytes, value: bytes | None) -> None:
        while True:
            try:
                producer.produce(topic, key=key, value=value)
                return
            except BufferError:
                producer.poll(0.1)

    for i, path in enumerate(files):
        name = f"file-{i:05d}"
        props = {
            "name": name,
            "connector.class": JAVA_SOURCE,
            "tasks.max": "1",
            "file": str(path),
            "topic": f"restart-{i % 10}",
        }
        task = {**props, "task.class": TASK_CLASS[system]}
        for record in (
            config_log.ConnectorConfig(name, props),
            config_log.TaskConfig(TaskId(name, 0), task),
            config_log.TaskCommit(name, 1),
        ):
            send(topics["config"], *config_log.encode(record))
    per_connector = max(1, offsets // len(files))
    for i, path in enumerate(files):
        name = f"file-{i:05d}"
        size = path.stat().st_size
        for j in range(per_connector):
            # The last partition of each connector is its task's own file, at its end.
            filename = str(path) if j == per_connector - 1 else f"{path}.rotated-{j}"
            record = offset_log.SourceOffset(name, {"filename": filename}, {"position": size})
            send(topics["offset"], *offset_log.encode(record))
    producer.flush(120)


def end_offset(bootstrap: str, topic: str) -> int:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"bench-{uuid.uuid4().hex[:6]}"})
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10, cached=False)[1])
    finally:
        consumer.close()


def task_states(body: object) -> dict[str, int]:
    """How many connectors' tasks are in each state (a connector not RUNNING counts as its own state)."""
    counts: dict[str, int] = {}
    for info in body.values() if isinstance(body, dict) else ():
        status = info.get("status", {}) if isinstance(info, dict) else {}
        tasks = status.get("tasks", [])
        state = "NO TASK" if len(tasks) != 1 else str(tasks[0].get("state"))
        if status.get("connector", {}).get("state") != "RUNNING":
            state = f"connector {status.get('connector', {}).get('state')}"
        counts[state] = counts.get(state, 0) + 1
    return counts


def process_threads(pid: int | None) -> int | None:
    """The process's thread count (librdkafka threads included), None once it is gone."""
    if pid is None:
        return None
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("Threads:"):
                return int(line.split()[1])
    except (OSError, ValueError):
        return None
    return None


def watch(
    url: str, started: float, row: Row, connectors: int, timeout_s: float, pid: int | None = None
) -> None:
    """Poll REST from the process start: first answer, 200 on /connectors, every task RUNNING; sample
    the process's threads meanwhile (the most seen)."""
    client = httpx.Client(base_url=url, timeout=10.0)
    deadline = started + timeout_s
    states: dict[str, int] = {}
    try:
        while time.monotonic() < deadline:
            try:
                resp = client.get("/connectors")
            except httpx.HTTPError:
                time.sleep(0.02)
                continue
            now = time.monotonic() - started
            if row.rest_s is None:
                row.rest_s, row.first_status = now, resp.status_code
            if resp.status_code == 200:
                row.joined_s = now
                break
            time.sleep(0.05)
        while row.joined_s is not None and time.monotonic() < deadline:
            threads = process_threads(pid)
            if threads is not None:
                row.threads = max(row.threads or 0, threads)
            try:
                resp = client.get("/connectors", params={"expand": "status"})
                if resp.status_code == 200:
                    states = task_states(resp.json())
                    if states.get("RUNNING", 0) >= connectors:
                        row.running_s = time.monotonic() - started
                        return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        row.note = f"not every task RUNNING within {timeout_s:.0f} s: {states}"
    finally:
        client.close()


def kconnect_read_s(log_path: Path) -> float | None:
    for line in log_path.read_text(errors="replace").splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and entry.get("event") == "internal topics read to their end":
                return float(entry["seconds"])
    return None


_JAVA_TIME = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\]")


def reference_read_s(log: str) -> float | None:
    def stamp(line: str) -> datetime | None:
        match = _JAVA_TIME.match(line)
        return None if match is None else datetime.strptime(match.group(1), "%Y-%m-%d %H:%M:%S,%f")

    starts = [stamp(line) for line in log.splitlines() if "Starting KafkaBasedLog" in line]
    ends = [stamp(line) for line in log.splitlines() if "Finished reading KafkaBasedLog" in line]
    starts_ok = [s for s in starts if s is not None]
    ends_ok = [e for e in ends if e is not None]
    if not starts_ok or not ends_ok:
        return None
    return (max(ends_ok) - min(starts_ok)).total_seconds()


@contextlib.contextmanager
def prepared(
    admin: AdminClient, bootstrap: str, system: str, files: list[Path], offsets: int
) -> Iterator[tuple[str, dict[str, str]]]:
    prefix = f"restart-{system}-{uuid.uuid4().hex[:6]}"
    topics = create_topics(admin, prefix)
    began = time.monotonic()
    fill(bootstrap, topics, system, files, offsets)
    print(f"  {system}: topics filled in {time.monotonic() - began:.1f} s", flush=True)
    yield prefix, topics


def run_kconnect(
    admin: AdminClient, bootstrap: str, work: Path, files: list[Path], args: argparse.Namespace
) -> Row:
    row = Row("kconnect")
    with prepared(admin, bootstrap, "kconnect", files, args.offsets) as (prefix, topics):
        props = worker_properties(
            bootstrap,
            prefix,
            free_port(),
            offset_storage_partitions=OFFSET_PARTITIONS,
            status_storage_partitions=STATUS_PARTITIONS,
        )
        props.update(
            {
                "config.storage.topic": topics["config"],
                "offset.storage.topic": topics["offset"],
                "status.storage.topic": topics["status"],
                "offset.flush.interval.ms": "1000",
            }
        )
        row.config_end_before = end_offset(bootstrap, topics["config"])
        worker = WorkerProcess(work, props, name=f"kconnect-{prefix}", spark=True)
        started = time.monotonic()
        worker.start()
        try:
            watch(
                worker.url, started, row, len(files), args.timeout, worker.proc.pid if worker.proc else None
            )
        finally:
            worker.stop()
        row.read_s = kconnect_read_s(worker.log_path)
        row.config_end_after = end_offset(bootstrap, topics["config"])
        print(f"  kconnect log: {worker.log_path}", flush=True)
    return row


def run_reference(
    admin: AdminClient, bootstrap: str, work: Path, files: list[Path], args: argparse.Namespace
) -> Row:
    version = REFERENCE_4X if args.reference == "4x" else None
    row = Row("reference " + (REFERENCE_4X if version else "3.9"))
    ok, why = reference_available(*([version] if version else []))
    if not ok:
        row.note = f"not available: {why}"
        return row
    with prepared(admin, bootstrap, "reference", files, args.offsets) as (prefix, topics):
        row.config_end_before = end_offset(bootstrap, topics["config"])
        log_path = work / f"reference-{prefix}.log"
        kwargs = {"version": version} if version else {}
        worker = ReferenceWorker(
            bootstrap,
            group_id=prefix,
            config_topic=topics["config"],
            offset_topic=topics["offset"],
            status_topic=topics["status"],
            log_path=log_path,
            offset_partitions=OFFSET_PARTITIONS,
            status_partitions=STATUS_PARTITIONS,
            startup_timeout_s=args.timeout,
            java_opts=args.java_opts,
            **kwargs,  # type: ignore[arg-type]
        )
        try:
            worker.start()  # returns once REST answers
            assert worker.started_at is not None
            pid = worker.process.pid if worker.process is not None else None
            watch(worker.url, worker.started_at, row, len(files), args.timeout, pid)
            row.read_s = reference_read_s(worker.log_text())
        finally:
            worker.stop()
        row.config_end_after = end_offset(bootstrap, topics["config"])
        print(f"  reference log: {log_path}", flush=True)
    return row


#: The chart's title on the documentation site's benchmarks page.
TITLE = "A worker restarted over 1,000 connectors and 100,000 offsets (bench/restart.py)"


def figures_of(rows: list[Row], args: argparse.Namespace) -> list[results.Figure]:
    """The run's figures for ``bench/results/restart.json``: seconds from the process start."""
    shape = f"{args.connectors:,} connectors, {args.offsets:,} offset records"
    figures = []
    for r in rows:
        for metric, value in (
            ("REST answers", r.rest_s),
            ("joined", r.joined_s),
            ("every task RUNNING", r.running_s),
            ("internal topics read", r.read_s),
        ):
            if value is not None:
                system = results.system_name(r.system)
                figures.append(results.figure(system, shape, metric, round(value, 2), "s"))
    return figures


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--connectors", type=int, default=1000)
    parser.add_argument("--offsets", type=int, default=100_000)
    parser.add_argument("--only", default="kconnect,reference")
    parser.add_argument("--reference", choices=("3.9", "4x"), default="3.9")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per worker until all RUNNING")
    parser.add_argument(
        "--java-opts",
        default="-Xms256M -Xmx2G -XX:+UseG1GC",
        help="the reference JVM's options (a heap for 1,000 tasks, not the tests' 512 MB)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    results.add_argument(parser)
    args = parser.parse_args()
    only = set(args.only.split(","))
    work = Path(tempfile.mkdtemp(prefix="kconnect-restart-"))
    files = []
    for i in range(args.connectors):
        path = work / "in" / f"input-{i:05d}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"line {i}\n")
        files.append(path)
    print(
        f"restart bench: {args.connectors} FileStreamSource connectors x 1 task, {args.offsets} offset"
        f" records; {platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}",
        flush=True,
    )
    rows: list[Row] = []
    with KafkaCluster(work / "kafka", size=1) as cluster:
        bootstrap = cluster.bootstrap
        admin = AdminClient({"bootstrap.servers": bootstrap})
        if "kconnect" in only:
            rows.append(run_kconnect(admin, bootstrap, work, files, args))
        if "reference" in only:
            rows.append(run_reference(admin, bootstrap, work, files, args))
    print()
    print(
        f"{'system':<16} {'REST s':>7} {'first':>5} {'joined s':>9} {'RUNNING s':>10} {'read s':>7}"
        f" {'config end before/after':>24} {'threads':>8}  note"
    )
    for r in rows:
        ends = f"{r.config_end_before}/{r.config_end_after}"
        print(
            f"{r.system:<16} {fmt(r.rest_s):>7} {r.first_status or '-':>5} {fmt(r.joined_s):>9}"
            f" {fmt(r.running_s):>10} {fmt(r.read_s):>7} {ends:>24} {r.threads or '-':>8}  {r.note}"
        )
    results.save("restart", figures_of(rows, args), args, title=TITLE)
    if not args.keep:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"work directory kept: {work}")


if __name__ == "__main__":
    main()
