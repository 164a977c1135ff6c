"""Kafka to Iceberg side by side: Apache Iceberg's own Kafka Connect sink (1.12.0) on Apache Kafka Connect
4.3.1 and kconnect's ``IcebergSinkConnector``, on the same topics of one Apache Kafka node, each into a
Hadoop catalog on a warehouse directory of its own.

Both get the same connector config (Apache Iceberg's sink's keys; JsonConverter with schemas; tables
auto-created from the records' schema; ``iceberg.control.commit.interval-ms`` = ``--commit-ms`` on both,
whose default is 5 min in Apache's sink), one task each, and run one after the other on a fresh worker:

1. **big**: one topic of ``--records`` records (4 partitions; the issue's figure is 1,000,000: the default
   is 200,000 so that a run of both systems fits about 10 minutes on a 2-core machine) into ``bench.big``.
   records/s is the rows of the last table commit before the kill over the seconds from connector creation
   to that commit (the commit times are the snapshots' own); CPU seconds per 1,000 records is the worker's
   process tree's CPU (the JVM; kconnect's worker and its Spark JVM) over the same span, and "started" the
   same from the task's RUNNING (kconnect's Spark session and query started; Apache's task started), so
   without a worker's start for the connector; snapshots and data files per minute over the whole span.
   Once half the records are in the table the worker is SIGKILLed and a fresh one started in its place;
   when the table holds every record and is quiet, Spark SQL reads it back: lost (ids missing) and
   repeated (rows beyond the distinct ids).
2. **trickle**: ``--topics`` topics (default 50), 1 record/s each for ``--trickle-s`` seconds, routed by a
   field to one table per topic (``iceberg.tables.dynamic-enabled``). Per record: seconds from its produce
   to the commit of the first snapshot of its table that holds it (a query without caching, as Spark SQL
   with the catalog's ``cache-enabled=false``, sees it from then on): p50 / p99 / max; CPU per 1,000
   records; snapshots and data files per minute across the tables.
3. **warm** (only when ``--phases`` names it): ``--warm-records`` records into ``bench.warm`` to warm the
   worker up, then as many again: records/s and CPU per 1,000 records of the second lot, from its produce
   to the commit that holds it (what a record costs a worker that has run a while).

The tables are followed through their metadata files (the Hadoop catalog's ``version-hint.text`` and
``v<N>.metadata.json``: each snapshot's commit time and totals), so polling costs no Spark job.

    flock /tmp/kconnect-heavy.lock .venv/bin/python bench/lakehouse.py
    flock /tmp/kconnect-heavy.lock .venv/bin/python bench/lakehouse.py --records 1000000 --only kconnect

Figures depend on the machine's load: on a shared machine say so next to them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import density
import process_cpu
import results as bench_results
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from proc_tree import tree_rss

from kconnect.runtime.cli.broker import free_port
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.iceberg_kafka_connect import CONNECTOR_CLASS, iceberg_plugin
from tests.support.lakehouse_jars import lakehouse_jars, spark_properties
from tests.support.processes import command_name, descendants
from tests.support.reference import REFERENCE_4X, ReferenceWorker, reference_available

SYSTEMS = ("apache", "kconnect")
LABELS = {"apache": "Apache Kafka Connect 4.3.1 + Iceberg sink 1.12.0", "kconnect": "kconnect"}
TITLE = "Kafka to Iceberg: Apache Iceberg's Kafka Connect sink vs kconnect (bench/lakehouse.py)"
PARTITIONS = 4
SCHEMA = {
    "type": "struct",
    "name": "bench.Event",
    "optional": False,
    "fields": [
        {"field": "id", "type": "int64", "optional": False},
        {"field": "tbl", "type": "string", "optional": False},
        {"field": "payload", "type": "string", "optional": False},
        {"field": "produced_ms", "type": "int64", "optional": False},
    ],
}
_HEAD = '{"schema":' + json.dumps(SCHEMA, separators=(",", ":")) + ',"payload":'
PAYLOAD = "x" * 100


def record(n: int, table: str, produced_ms: int) -> bytes:
    return (
        _HEAD + f'{{"id":{n},"tbl":"{table}","payload":"{PAYLOAD}","produced_ms":{produced_ms}}}}}'
    ).encode()


# ------------------------------------------------------------------------------------------ metadata


@dataclass(frozen=True)
class Snapshot:
    at_ms: int
    total_records: int
    total_files: int
    added_files: int


def snapshots(warehouse: Path, table: str) -> list[Snapshot]:
    """The table's snapshots, oldest first, from its newest metadata file (none before its first commit)."""
    namespace, name = table.split(".")
    meta = warehouse / namespace / name / "metadata"
    try:
        version = int((meta / "version-hint.text").read_text().strip())
        doc = json.loads((meta / f"v{version}.metadata.json").read_text())
    except (OSError, ValueError):
        return []
    out = []
    for s in doc.get("snapshots", []):
        summary = s.get("summary", {})
        out.append(
            Snapshot(
                int(s["timestamp-ms"]),
                int(summary.get("total-records", 0)),
                int(summary.get("total-data-files", 0)),
                int(summary.get("added-data-files", 0)),
            )
        )
    return sorted(out, key=lambda s: s.at_ms)


def rows_in(warehouse: Path, table: str) -> int:
    snaps = snapshots(warehouse, table)
    return snaps[-1].total_records if snaps else 0


# ------------------------------------------------------------------------------------------- workers


class Worker:
    """One system's worker, started again after a SIGKILL with the same group and topics."""

    def __init__(
        self,
        kind: str,
        bootstrap: str,
        work: Path,
        event_log: bool = False,
        profile: bool = False,
        reader: str = "spark-kafka",
        extra: dict[str, str] | None = None,
    ) -> None:
        self.kind, self.bootstrap, self.work = kind, bootstrap, work
        self.event_log = event_log
        self.reader = reader
        self.extra = dict(extra or {})
        self.profile = profile
        self.spy: subprocess.Popen[bytes] | None = None
        self.group = f"bench-lh-{kind}-{uuid.uuid4().hex[:6]}"
        self.starts = 0
        self.ref: ReferenceWorker | None = None
        self.kc: WorkerProcess | None = None

    def start(self) -> Worker:
        self.starts += 1
        log = self.work / f"{self.kind}-{self.starts}.log"
        if self.kind == "apache":
            self.ref = ReferenceWorker(
                self.bootstrap,
                group_id=self.group,
                config_topic=f"{self.group}-configs",
                offset_topic=f"{self.group}-offsets",
                status_topic=f"{self.group}-status",
                log_path=log,
                extra={
                    "plugin.path": str(iceberg_plugin()),
                    "plugin.discovery": "hybrid_warn",
                    "value.converter.schemas.enable": "true",
                },
                version=REFERENCE_4X,
                startup_timeout_s=180,
            ).start()
        else:
            props = worker_properties(self.bootstrap, self.group, free_port())
            props.update(
                {
                    "value.converter.schemas.enable": "true",
                    "spark.master": "local[2]",
                    "spark.ui.enabled": "false",
                    "spark.sql.shuffle.partitions": "1",
                    # Without Spark's Kafka source, sink queries read with kconnect's Python reader.
                    **spark_properties(spark_kafka=self.reader == "spark-kafka"),
                }
            )
            props.update(self.extra)
            if self.event_log:  # where the JVM's seconds go: each stage's executor CPU and run time
                events = self.work / "spark-events"
                events.mkdir(exist_ok=True)
                props.update({"spark.eventLog.enabled": "true", "spark.eventLog.dir": events.as_uri()})
            if self.profile:  # the Spark JVM's samples (Flight Recorder), dumped before a kill or at exit
                jfr = self.work / f"kconnect-{self.starts}.jfr"
                props["spark.driver.extraJavaOptions"] = (
                    f"-XX:StartFlightRecording=filename={jfr},settings=profile"
                )
            kc = WorkerProcess(self.work, props, name=f"kconnect-{self.starts}", spark=True).start()
            self.kc = kc
            if self.profile and (shutil.which("py-spy") or (Path(sys.executable).parent / "py-spy").exists()):
                self._spy(kc.proc.pid if kc.proc else 0)
            wait_until(lambda: (kc.workers() or {}).get("generation", -1) >= 0, 180, "the kconnect worker")
        return self

    def _spy(self, pid: int) -> None:
        """py-spy samples the worker's Python (and Spark's Python workers below it) until it exits: raw
        collapsed stacks in ``<work>/kconnect-<n>.pyspy.txt`` (``bench/profile_report.py`` reads them)."""
        spy = shutil.which("py-spy") or str(Path(sys.executable).parent / "py-spy")
        out = self.work / f"kconnect-{self.starts}.pyspy.txt"
        self.spy = subprocess.Popen(
            [spy, "record", "--pid", str(pid), "--format", "raw", "--rate", "49", "--subprocesses",
             "--nonblocking", "--output", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip

    def cpu_split(self) -> dict[str, float]:
        """CPU seconds so far of the worker's Python process, its Spark JVM and Spark's Python workers (the
        Kafka reader's data source runs there), each with the children it reaped."""
        out = {"worker python": 0.0, "spark jvm": 0.0, "python workers": 0.0}
        if self.kc is None or self.kc.proc is None:
            return out
        root = self.kc.proc.pid
        for pid in [root, *descendants(root)]:
            own, reaped = process_cpu.cpu_ticks(pid)
            name = command_name(pid)
            kind = "worker python" if pid == root else "spark jvm" if name == "java" else "python workers"
            out[kind] += (own + reaped) / process_cpu.TICK
        return out

    def cpu_split_per_1k(self, since: dict[str, float], records: int) -> str:
        """:meth:`cpu_split` since ``since``, per 1,000 of ``records``, as the line the phases print."""
        per = 1000 / max(records, 1)
        return ", ".join(f"{k} {(v - since[k]) * per:.3f}" for k, v in self.cpu_split().items())

    def jvm_threads(self) -> dict[str, float]:
        """CPU seconds so far of the Spark JVM's live threads, by kind (a thread's name with its number
        dropped: the JIT's compiler threads, the garbage collector's, Spark's task threads ...)."""
        out: dict[str, float] = {}
        if self.kc is None or self.kc.proc is None:
            return out
        for pid in descendants(self.kc.proc.pid):
            if command_name(pid) != "java":
                continue
            with contextlib.suppress(OSError):
                for task in os.listdir(f"/proc/{pid}/task"):
                    with contextlib.suppress(OSError, ValueError, IndexError):
                        base = Path(f"/proc/{pid}/task/{task}")
                        fields = (base / "stat").read_text().rsplit(")", 1)[1].split()
                        own = int(fields[11]) + int(fields[12])  # utime + stime of this thread alone
                        kind = re.sub(r"\d+", "N", (base / "comm").read_text().strip()) or "?"
                        out[kind] = out.get(kind, 0.0) + own / process_cpu.TICK
        return out

    def dump_profile(self) -> None:
        """Before a kill: the JVM's Flight Recorder dumped now (a SIGKILL loses it)."""
        if not self.profile or self.kc is None or self.kc.proc is None:
            return
        for pid in descendants(self.kc.proc.pid):
            if command_name(pid) == "java":
                jfr = self.work / f"kconnect-{self.starts}.jfr"
                subprocess.run(
                    ["jcmd", str(pid), "JFR.dump", f"filename={jfr}"], capture_output=True, timeout=120
                )

    @property
    def pid(self) -> int:
        if self.ref is not None and self.ref.process is not None:
            return self.ref.process.pid
        assert self.kc is not None and self.kc.proc is not None
        return self.kc.proc.pid

    def cpu(self) -> float:
        return process_cpu.tree_cpu_seconds(self.pid)

    def create(self, name: str, config: dict[str, str]) -> None:
        body = {"name": name, "config": config}
        if self.ref is not None:
            resp = self.ref.rest("POST", "/connectors", json=body)
        else:
            assert self.kc is not None
            resp = self.kc.request("POST", "/connectors", json=body)
        if resp.status_code != 201:
            raise RuntimeError(f"{self.kind}: creating {name}: {resp.status_code} {resp.text}")

    def tasks_running(self, name: str) -> bool:
        """Whether the connector's tasks all say RUNNING (at least one)."""
        path = f"/connectors/{name}/status"
        if self.ref is not None:
            resp = self.ref.rest("GET", path)
        else:
            assert self.kc is not None
            resp = self.kc.request("GET", path)
        tasks = resp.json().get("tasks", []) if resp.status_code == 200 else []
        return bool(tasks) and all(t.get("state") == "RUNNING" for t in tasks)

    def delete(self, name: str) -> None:
        if self.ref is not None:
            self.ref.rest("DELETE", f"/connectors/{name}")
        elif self.kc is not None:
            self.kc.request("DELETE", f"/connectors/{name}")

    def kill(self) -> None:
        if self.ref is not None:
            self.ref.kill()
            self.ref = None
        elif self.kc is not None:
            # The worker and its Spark JVM: a SIGKILL of the worker leaves the JVM to notice its parent gone.
            below = descendants(self.kc.proc.pid) if self.kc.proc else []
            self.kc.kill()
            for pid in below:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            self.kc = None
            if self.spy is not None:  # its samples are written once the worker is gone
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.spy.wait(60)
                self.spy = None

    def stop(self) -> None:
        if self.ref is not None:
            self.ref.close()
            self.ref = None
        if self.kc is not None:
            self.dump_profile()
            with contextlib.suppress(Exception):  # one that would not stop in time was killed by stop()
                self.kc.stop(60)
            self.kc = None
        if self.spy is not None:  # it writes its samples once the worker is gone
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.spy.wait(60)
            self.spy = None


def connector_config(kind: str, warehouse: Path, commit_ms: int, control: str) -> dict[str, str]:
    """Apache Iceberg's sink's keys, the same for both (kconnect accepts the control keys and needs no
    control topic)."""
    return {
        "connector.class": CONNECTOR_CLASS if kind == "apache" else "IcebergSinkConnector",
        "tasks.max": "1",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.control.commit.interval-ms": str(commit_ms),
        "iceberg.control.topic": control,
        "iceberg.catalog.type": "hadoop",
        "iceberg.catalog.warehouse": str(warehouse),
    }


# --------------------------------------------------------------------------------------------- rows


@dataclass
class Row:
    system: str
    big_records: int = 0
    big_s: float = 0.0
    big_cpu_s: float = 0.0
    big_after_start_cpu_s: float = 0.0  # CPU s from the task's RUNNING to the last commit
    big_snapshots: int = 0
    big_files: int = 0
    lost: int | None = None
    repeated: int | None = None
    trickle_records: int = 0
    trickle_s: float = 0.0
    trickle_cpu_s: float = 0.0
    trickle_snapshots: int = 0
    trickle_files: int = 0
    latencies: list[float] = field(default_factory=list)
    warm_records: int = 0
    warm_s: float = 0.0
    warm_cpu_s: float = 0.0
    note: str = ""
    big_done: bool = False

    @property
    def records_per_s(self) -> float:
        return self.big_records / self.big_s if self.big_s else float("nan")


def per_minute(count: int, seconds: float) -> float:
    return count / seconds * 60 if seconds else float("nan")


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


# -------------------------------------------------------------------------------------------- phases


def create_topics(bootstrap: str, partitions: dict[str, int]) -> None:
    """Create the topics and wait until the broker answered for each, so producers find them."""
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept: its futures die with it
    futures = admin.create_topics([NewTopic(t, n, 1) for t, n in partitions.items()])
    for future in futures.values():
        future.result(60)
    time.sleep(1)


def produce_big(bootstrap: str, topic: str, first: int, records: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 50, "compression.type": "lz4"})
    now = int(time.time() * 1000)
    for n in range(first, first + records):
        while True:
            try:
                producer.produce(topic, record(n, "bench.big", now))
                break
            except BufferError:
                producer.poll(0.1)
    producer.flush(120)


def big_phase(worker: Worker, row: Row, args: argparse.Namespace, warehouse: Path, control: str) -> None:
    topic = f"lh-big-{worker.kind}"
    config = {
        **connector_config(worker.kind, warehouse, args.commit_ms, control),
        "topics": topic,
        "iceberg.tables": "bench.big",
    }
    cpu0, t0_ms, split0 = worker.cpu(), time.time() * 1000, worker.cpu_split()
    threads0 = worker.jvm_threads() if worker.profile else {}
    # Named for the system: a sink's consumer group is connect-<name>, and both run on one cluster.
    name = f"big-{worker.kind}"
    worker.create(name, config)
    half = args.records // 2  # the topic holds the first half now; the second comes before the kill
    wait_until(lambda: worker.tasks_running(name), 600, f"{worker.kind}: {name}'s task RUNNING", 0.2)
    cpu_started = worker.cpu()
    wait_until(lambda: rows_in(warehouse, "bench.big") >= half, 3600, f"{worker.kind}: {half} rows", 0.5)
    cpu1 = worker.cpu()
    snaps = snapshots(warehouse, "bench.big")
    row.big_after_start_cpu_s = cpu1 - cpu_started
    row.big_records = snaps[-1].total_records
    row.big_s = (snaps[-1].at_ms - t0_ms) / 1000
    row.big_cpu_s = cpu1 - cpu0
    row.big_snapshots = len(snaps)
    row.big_files = snaps[-1].total_files
    print(
        f"{worker.kind}: {row.big_records} rows in {row.big_s:.1f} s ({row.records_per_s:,.0f}/s)", flush=True
    )
    if worker.kind == "kconnect":  # where the worker tree's CPU went, per 1,000 records
        split = worker.cpu_split_per_1k(split0, row.big_records)
        of = row.big_cpu_s * 1000 / max(row.big_records, 1)
        print(f"kconnect CPU s per 1,000 records: {split} (of {of:.3f})", flush=True)
    if worker.profile and worker.kind == "kconnect":  # the JVM's share by thread kind
        threads = worker.jvm_threads()
        spent = sorted(((v - threads0.get(k, 0.0), k) for k, v in threads.items()), reverse=True)
        print(
            "kconnect Spark JVM CPU s by thread: "
            + ", ".join(f"{k} {v:.1f}" for v, k in spent[:12] if v > 0.05),
            flush=True,
        )
    # The kill lands mid-interval with records in flight: the second half is produced, read and staged
    # (Apache: written to data files its coordinator has not committed) but not yet committed.
    produce_big(worker.bootstrap, topic, half, args.records - half)
    time.sleep(args.commit_ms / 2000)
    in_table = rows_in(warehouse, "bench.big")
    print(f"{worker.kind}: SIGKILL with {in_table} rows in the table", flush=True)
    worker.dump_profile()
    worker.kill()
    worker.start()
    wait_until(
        lambda: rows_in(warehouse, "bench.big") >= args.records,
        1800,
        f"{worker.kind}: {args.records} rows after the kill",
        1.0,
    )
    # Quiet: no new snapshot for three commit intervals (a late duplicate commit would show up here).
    last = len(snapshots(warehouse, "bench.big"))
    quiet_until = time.monotonic() + 3 * args.commit_ms / 1000
    while time.monotonic() < quiet_until:
        time.sleep(1)
        now = len(snapshots(warehouse, "bench.big"))
        if now != last:
            last, quiet_until = now, time.monotonic() + 3 * args.commit_ms / 1000
    row.big_done = True
    worker.delete(name)


def trickle_phase(
    worker: Worker, row: Row, args: argparse.Namespace, warehouse: Path, control: str, topics: list[str]
) -> None:
    config = {
        **connector_config(worker.kind, warehouse, args.commit_ms, control),
        "topics": ",".join(topics),
        "iceberg.tables.dynamic-enabled": "true",
        "iceberg.tables.route-field": "tbl",
    }
    name = f"trickle-{worker.kind}"
    worker.create(name, config)
    # Each topic's first record creates its table: the measured window starts once every table exists.
    producer = Producer({"bootstrap.servers": worker.bootstrap, "linger.ms": 0})
    tables = [f"bench.t{i:02d}" for i in range(len(topics))]
    produced: dict[str, list[int]] = {t: [] for t in tables}

    def send(i: int) -> None:
        now = int(time.time() * 1000)
        producer.produce(topics[i], record(len(produced[tables[i]]), tables[i], now))
        produced[tables[i]].append(now)

    for i in range(len(topics)):
        send(i)
    producer.flush(30)
    wait_until(
        lambda: all(rows_in(warehouse, t) >= 1 for t in tables), 900, f"{worker.kind}: {len(tables)} tables"
    )
    for t in tables:
        produced[t].clear()
    base = {t: rows_in(warehouse, t) for t in tables}
    before = {t: len(snapshots(warehouse, t)) for t in tables}
    files_before = {t: snapshots(warehouse, t)[-1].total_files for t in tables}
    cpu0, t0 = worker.cpu(), time.monotonic()
    next_at = t0
    while time.monotonic() - t0 < args.trickle_s:
        for i in range(len(topics)):
            send(i)
        producer.poll(0)
        next_at += 1.0
        time.sleep(max(0.0, next_at - time.monotonic()))
    producer.flush(30)
    wait_until(
        lambda: all(rows_in(warehouse, t) >= base[t] + len(produced[t]) for t in tables),
        args.drain_s,
        f"{worker.kind}: the trickle's records",
        0.5,
    )
    row.trickle_s = time.monotonic() - t0
    row.trickle_cpu_s = worker.cpu() - cpu0
    row.trickle_records = sum(len(v) for v in produced.values())
    for t in tables:
        snaps = snapshots(warehouse, t)
        row.trickle_snapshots += len(snaps) - before[t]
        row.trickle_files += snaps[-1].total_files - files_before[t]
        for k, at in enumerate(produced[t]):
            seen = next((s.at_ms for s in snaps if s.total_records >= base[t] + k + 1), None)
            if seen is not None:
                row.latencies.append((seen - at) / 1000)
    worker.delete(name)


def read_back(warehouse: Path, records: int) -> tuple[int, int]:
    """Lost and repeated ids in ``bench.big``, read with Spark SQL (Spark's Iceberg runtime)."""
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master("local[2]").appName("lakehouse-bench-reader")
    settings = {
        "spark.jars": ",".join(str(p) for p in lakehouse_jars() if "iceberg" in p.name),
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": "2",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.sql.catalog.rb": "org.apache.iceberg.spark.SparkCatalog",
        "spark.sql.catalog.rb.type": "hadoop",
        "spark.sql.catalog.rb.warehouse": str(warehouse),
        "spark.sql.catalog.rb.cache-enabled": "false",
    }
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    try:
        total, distinct, inside = spark.sql(
            f"SELECT count(*), count(DISTINCT id), count(DISTINCT CASE WHEN id < {records} THEN id END) "
            "FROM rb.bench.big"
        ).collect()[0]
    finally:
        spark.stop()
    return records - int(inside), int(total) - int(distinct)


def warm_phase(worker: Worker, row: Row, args: argparse.Namespace, warehouse: Path, control: str) -> None:
    """A warm worker's cost per record: ``--warm-records`` records written to ``bench.warm`` first (the
    connector's start, first plans, class loading, JIT), then as many again, measured from their produce
    to the commit holding them all: the worker tree's CPU over that span."""
    topic, n = f"lh-warm-{worker.kind}", args.warm_records
    create_topics(worker.bootstrap, {topic: PARTITIONS})
    produce_big(worker.bootstrap, topic, 0, n)
    config = {
        **connector_config(worker.kind, warehouse, args.commit_ms, control),
        "topics": topic,
        "iceberg.tables": "bench.warm",
    }
    worker.create(f"warm-{worker.kind}", config)
    wait_until(lambda: rows_in(warehouse, "bench.warm") >= n, 3600, f"{worker.kind}: {n} warm-up rows", 0.5)
    time.sleep(args.commit_ms / 1000)  # the warm-up's last commit settled
    cpu0, t0_ms, split0 = worker.cpu(), time.time() * 1000, worker.cpu_split()
    produce_big(worker.bootstrap, topic, n, n)
    wait_until(lambda: rows_in(warehouse, "bench.warm") >= 2 * n, 3600, f"{worker.kind}: {2 * n} rows", 0.5)
    row.warm_cpu_s = worker.cpu() - cpu0
    if worker.kind == "kconnect" and worker.kc is not None and worker.kc.proc is not None:
        rss = tree_rss(worker.kc.proc.pid)
        print(
            f"kconnect (warm) CPU s per 1,000 records: {worker.cpu_split_per_1k(split0, n)}"
            f"; RSS MiB: worker {rss['root'] // 1024}, Spark JVM {rss['jvm'] // 1024}, "
            f"Python workers {rss['other'] // 1024}",
            flush=True,
        )
    snaps = snapshots(warehouse, "bench.warm")
    row.warm_records = snaps[-1].total_records - n
    row.warm_s = (snaps[-1].at_ms - t0_ms) / 1000
    print(f"{worker.kind}: {row.warm_records} warm rows in {row.warm_s:.1f} s", flush=True)


def run_one(kind: str, bootstrap: str, _broker_pid: int | None, work: Path, args: argparse.Namespace) -> Row:
    row = Row(kind)
    warehouse = work / f"{kind}-warehouse"
    control = f"lh-control-{kind}"
    topics = [f"lh-trickle-{i:02d}-{kind}" for i in range(args.topics)]
    create_topics(bootstrap, {control: 1, **dict.fromkeys(topics, 1)})
    extra = dict(item.split("=", 1) for item in args.set)
    worker = Worker(kind, bootstrap, work, args.event_log, args.profile, args.reader, extra)
    try:
        worker.start()
        if "big" in args.phases:
            big_phase(worker, row, args, warehouse, control)
        if "trickle" in args.phases:
            trickle_phase(worker, row, args, warehouse, control, topics)
        if "warm" in args.phases:
            warm_phase(worker, row, args, warehouse, control)
    except Exception as exc:  # one system failing still prints the other's figures
        row.note = f"{type(exc).__name__}: {exc}"[:300]
        print(f"{kind}: {row.note}", flush=True)
    finally:
        worker.stop()
    if row.big_done:  # the table is read back even when the trickle failed
        try:
            row.lost, row.repeated = read_back(warehouse, args.records)
        except Exception as exc:
            row.note = f"read back: {exc}"[:300]
    return row


def report(rows: list[Row]) -> None:
    print()
    print(
        f"{'system':<50} {'records/s':>9} {'CPU s/1k':>8} {'started':>8} {'snap/min':>8} "
        f"{'files/min':>9} "
        f"{'lost':>5} {'repeat':>6}"
    )
    for r in rows:
        print(
            f"{LABELS[r.system] + ' (big)':<50} {r.records_per_s:>9,.0f} "
            f"{r.big_cpu_s / max(r.big_records, 1) * 1000:>8.3f} "
            f"{r.big_after_start_cpu_s / max(r.big_records, 1) * 1000:>8.3f} "
            f"{per_minute(r.big_snapshots, r.big_s):>8.1f} "
            f"{per_minute(r.big_files, r.big_s):>9.1f} {r.lost if r.lost is not None else '-':>5} "
            f"{r.repeated if r.repeated is not None else '-':>6}"
        )
    print(
        f"\n{'system':<50} {'records':>7} {'CPU s/1k':>8} {'snap/min':>8} {'files/min':>9} {'p50 s':>6} "
        f"{'p99 s':>6} {'max s':>6}"
    )
    for r in rows:
        print(
            f"{LABELS[r.system] + ' (trickle)':<50} {r.trickle_records:>7} "
            f"{r.trickle_cpu_s / max(r.trickle_records, 1) * 1000:>8.3f} "
            f"{per_minute(r.trickle_snapshots, r.trickle_s):>8.1f} "
            f"{per_minute(r.trickle_files, r.trickle_s):>9.1f} "
            f"{percentile(r.latencies, 0.5):>6.1f} {percentile(r.latencies, 0.99):>6.1f} "
            f"{max(r.latencies, default=float('nan')):>6.1f}"
        )
    if any(r.warm_records for r in rows):
        print(f"\n{'system':<50} {'records':>7} {'records/s':>9} {'CPU s/1k':>8}")
        for r in rows:
            print(
                f"{LABELS[r.system] + ' (warm)':<50} {r.warm_records:>7} "
                f"{r.warm_records / r.warm_s if r.warm_s else float('nan'):>9,.0f} "
                f"{r.warm_cpu_s / max(r.warm_records, 1) * 1000:>8.3f}"
            )
    for r in rows:
        if r.note:
            print(f"{LABELS[r.system]}: {r.note}")


def figures_of(rows: list[Row], args: argparse.Namespace) -> list[bench_results.Figure]:
    out: list[bench_results.Figure] = []
    big = f"one topic, {args.records:,} records, commit {args.commit_ms / 1000:g} s"
    trickle = f"{args.topics} topics at 1 record/s, commit {args.commit_ms / 1000:g} s"
    for r in rows:
        system = LABELS[r.system]
        if not r.big_records:
            continue
        out.append(bench_results.figure(system, big, "records/s", round(r.records_per_s), "records/s"))
        out.append(
            bench_results.figure(
                system,
                big,
                "CPU per 1,000 records",
                round(r.big_cpu_s / max(r.big_records, 1) * 1000, 3),
                "s",
            )
        )
        if r.latencies:
            out.append(
                bench_results.figure(
                    system, trickle, "produce to query p50", round(percentile(r.latencies, 0.5), 1), "s"
                )
            )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--records", type=int, default=200_000, help="big topic (issue: 1,000,000)")
    parser.add_argument("--topics", type=int, default=50, help="trickle topics, 1 record/s each")
    parser.add_argument("--trickle-s", type=float, default=60.0, help="seconds of trickle measured")
    parser.add_argument("--commit-ms", type=int, default=10_000, help="iceberg.control.commit.interval-ms")
    parser.add_argument(
        "--drain-s", type=float, default=600.0, help="at most this long for the trickle's last records"
    )
    parser.add_argument("--phases", default="big,trickle", help="of big, trickle, warm")
    parser.add_argument(
        "--warm-records", type=int, default=200_000, help="warm phase: records of the warm-up, then as many"
    )
    parser.add_argument("--only", default=",".join(SYSTEMS))
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a kconnect worker property for this run (repeatable), e.g. a spark.* setting to compare",
    )
    parser.add_argument(
        "--reader",
        choices=("spark-kafka", "python"),
        default="spark-kafka",
        help="what kconnect's sink query reads Kafka with: Spark's Kafka source (on the worker's spark.jars, "
        "as docs/connectors/lakehouse.md advises) or kconnect's Python data source (without that jar)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument(
        "--event-log",
        action="store_true",
        help="kconnect's Spark event log in <work>/spark-events (with --keep: per-stage CPU to read after)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="kconnect's worker under py-spy and its Spark JVM under Flight Recorder, in <work> (with "
        "--keep; bench/profile_report.py reads them)",
    )
    bench_results.add_argument(parser)
    args = parser.parse_args(argv)
    systems = [s for s in args.only.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    if "apache" in systems:
        ok, why = reference_available(REFERENCE_4X)
        if not ok:
            print(f"Apache Kafka Connect 4.x is not available ({why}): kconnect alone", flush=True)
            systems = [s for s in systems if s != "apache"]

    def run(kind: str, bootstrap: str, pid: int | None, work: Path) -> Row:
        if "big" in args.phases:  # the same records, in a topic of each system's own
            topic = f"lh-big-{kind}"
            create_topics(bootstrap, {topic: PARTITIONS})
            started = time.monotonic()
            produce_big(bootstrap, topic, 0, args.records // 2)
            took = time.monotonic() - started
            print(f"{topic}: {args.records // 2} records produced in {took:.1f} s", flush=True)
        return run_one(kind, bootstrap, pid, work, args)

    rows = density.run_systems("lakehouse", "kafka", args.keep, systems, run, report)
    if rows is None:
        return 1
    bench_results.save("lakehouse", figures_of(rows, args), args, title=TITLE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
