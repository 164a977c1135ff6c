"""PostgreSQL change data capture side by side: Debezium 3.6.1.Final's PostgreSQL connector on Apache Kafka
Connect 4.3.1 and kconnect's ``PostgresCdcSourceConnector``, on the same database and the same broker.

One PostgreSQL (``wal_level=logical``, ``tests/support/postgres.py``) holds ``snap``, a table of ``--rows``
rows (default 1,000,000: id, a text, a numeric, a timestamptz). One Apache Kafka node serves both systems,
which run one after the other, each on a fresh worker with its own slot, publication and topic prefix,
JsonConverter with schemas on both sides (the same bytes to write), offsets flushed every second:

1. **snapshot**: from connector creation until all ``--rows`` snapshot records are in Kafka (a consumer
   counts them): rows/s, and the worker tree's CPU seconds (kconnect: the worker process; Debezium: the
   JVM) per row.
2. **steady**: a writer commits ``--rate`` inserts per second (transactions of ``--txn`` rows) into
   ``steady`` for ``--seconds``; each change's latency is its consumer's receipt time minus its commit time
   (``source.ts_us``, from the WAL): p50 and p99 seconds, the worker tree's CPU µs per change, and the WAL
   the slot retains (``pg_current_wal_lsn() - restart_lsn``, sampled every 0.5 s): its most while the
   writer runs, and what is left once every change is in Kafka.

    .venv/bin/python bench/cdc.py                          # 1,000,000 rows, 2,000 changes/s for 30 s
    .venv/bin/python bench/cdc.py --rows 100000 --seconds 20 --only kconnect

Figures depend on the machine's load: on a shared machine say so next to them.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import density
import process_cpu
import psycopg2
from confluent_kafka import Consumer

from kconnect.runtime.cli.broker import free_port
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.debezium import CONNECTOR_CLASS, debezium_worker
from tests.support.postgres import DATABASE, PASSWORD, USER, PostgresServer, start_postgres

SYSTEMS = ("debezium", "kconnect")


@dataclass
class Row:
    system: str
    snapshot_s: float
    snapshot_rows: int
    snapshot_cpu_s: float
    changes: int
    p50_s: float
    p99_s: float
    steady_cpu_s: float
    wal_max_bytes: int
    wal_end_bytes: int

    @property
    def rows_per_s(self) -> float:
        return self.snapshot_rows / self.snapshot_s

    @property
    def cpu_us_per_change(self) -> float:
        return self.steady_cpu_s / max(self.changes, 1) * 1e6


class Counter:
    """Counts the records of a topic and, for the steady table, each change's commit-to-receipt seconds."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"cdc-bench-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "topic.metadata.refresh.interval.ms": "500",
                "fetch.wait.max.ms": "10",
            }
        )
        self.consumer.subscribe(topics)
        self.counts: dict[str, int] = {t: 0 for t in topics}
        self.latencies: list[float] = []
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stopping.is_set():
            for message in self.consumer.consume(num_messages=1000, timeout=0.2):
                if message.error() is not None or message.value() is None:
                    continue
                topic = message.topic()
                self.counts[topic] = self.counts.get(topic, 0) + 1
                if topic.endswith(".steady"):
                    received = time.time()
                    payload = json.loads(message.value())["payload"]
                    self.latencies.append(received - payload["source"]["ts_us"] / 1e6)
        self.consumer.close()

    def close(self) -> None:
        self.stopping.set()
        self.thread.join(30)


def prepare(pg: PostgresServer, rows: int) -> None:
    pg.psql(
        "CREATE TABLE snap (id bigint PRIMARY KEY, label text NOT NULL, amount numeric(12,2), at timestamptz)"
    )
    pg.psql(
        "INSERT INTO snap SELECT i, 'row ' || i, i * 0.01, "
        "TIMESTAMPTZ '2026-11-28 08:00:00+00' + i * interval '1 ms' "
        f"FROM generate_series(1, {rows}) AS i"
    )
    pg.psql("CREATE TABLE steady (id bigint PRIMARY KEY, label text NOT NULL, at timestamptz DEFAULT now())")
    pg.psql("VACUUM ANALYZE snap")


def write_steady(pg: PostgresServer, rate: int, seconds: float, txn: int, start_id: int) -> int:
    """``rate`` inserts per second in transactions of ``txn`` rows, paced; returns how many were written."""
    connection = psycopg2.connect(
        host="127.0.0.1", port=pg.port, user=USER, password=PASSWORD, dbname=DATABASE
    )
    written = 0
    interval = txn / rate
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            while time.monotonic() - started < seconds:
                due = started + (written // txn) * interval
                if due > time.monotonic():
                    time.sleep(due - time.monotonic())
                ids = range(start_id + written, start_id + written + txn)
                cursor.execute(
                    "INSERT INTO steady (id, label) SELECT i, 'change ' || i FROM unnest(%s::bigint[]) AS i",
                    (list(ids),),
                )
                connection.commit()
                written += txn
    finally:
        connection.close()
    return written


class WalSampler:
    """The WAL a slot retains on the server, sampled every half second in a thread of its own."""

    def __init__(self, pg: PostgresServer, slot: str) -> None:
        self.pg = pg
        self.slot = slot
        self.most = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def now(self) -> int:
        rows = self.pg.psql(
            "SELECT pg_current_wal_lsn() - restart_lsn FROM pg_replication_slots "
            f"WHERE slot_name = '{self.slot}'"
        )
        return int(float(rows[0][0])) if rows and rows[0] and rows[0][0] else 0

    def _run(self) -> None:
        while not self.stopping.wait(0.5):
            self.most = max(self.most, self.now())

    def close(self) -> int:
        """The most seen while running."""
        self.stopping.set()
        self.thread.join(10)
        return self.most


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def measure(
    system: str,
    pid: int,
    create: Any,
    bootstrap: str,
    pg: PostgresServer,
    args: argparse.Namespace,
    base: int,
) -> Row:
    topics = [f"{system}.public.snap", f"{system}.public.steady"]
    counter = Counter(bootstrap, topics)
    try:
        cpu0 = process_cpu.tree_cpu_seconds(pid)
        started = time.monotonic()
        create()
        wait_until(
            lambda: counter.counts[topics[0]] >= args.rows, 3600, f"{system}: {args.rows} snapshot rows", 0.2
        )
        snapshot_s = time.monotonic() - started
        cpu1 = process_cpu.tree_cpu_seconds(pid)
        print(f"{system}: snapshot of {args.rows} rows in {snapshot_s:.1f} s", flush=True)
        wal = WalSampler(pg, f"{system}_slot")
        written = write_steady(pg, args.rate, args.seconds, args.txn, base)
        wal_max = wal.close()
        wait_until(lambda: counter.counts[topics[1]] >= written, 600, f"{system}: {written} changes", 0.2)
        cpu2 = process_cpu.tree_cpu_seconds(pid)
        time.sleep(3)  # an offset flush (every second on both) acknowledges the slot
        wal_end = wal.now()
        latencies = list(counter.latencies)
    finally:
        counter.close()
    return Row(
        system,
        snapshot_s,
        args.rows,
        cpu1 - cpu0,
        written,
        percentile(latencies, 0.5),
        percentile(latencies, 0.99),
        cpu2 - cpu1,
        wal_max,
        wal_end,
    )


def connector_config(pg: PostgresServer, prefix: str) -> dict[str, str]:
    return {
        "connector.class": CONNECTOR_CLASS,
        "tasks.max": "1",
        "database.hostname": "127.0.0.1",
        "database.port": str(pg.port),
        "database.user": USER,
        "database.password": PASSWORD,
        "database.dbname": DATABASE,
        "plugin.name": "pgoutput",
        "topic.prefix": prefix,
        "slot.name": f"{prefix}_slot",
        "publication.name": f"{prefix}_pub",
        "table.include.list": "public\\.(snap|steady)",
    }


def run_one(
    kind: str,
    bootstrap: str,
    _broker_pid: int | None,
    work: Path,
    pg: PostgresServer,
    args: argparse.Namespace,
    base: int,
) -> Row:
    config = connector_config(pg, kind)
    pg.psql("TRUNCATE steady")  # the previous system's changes are not this one's snapshot
    if kind == "debezium":
        with debezium_worker(bootstrap, f"bench-dbz-{uuid.uuid4().hex[:6]}", work / "debezium.log") as worker:
            assert worker.process is not None

            def create() -> None:
                resp = worker.rest("POST", "/connectors", json={"name": "cdc", "config": config})
                if resp.status_code != 201:
                    raise RuntimeError(f"creating Debezium's connector: {resp.text}")

            row = measure(kind, worker.process.pid, create, bootstrap, pg, args, base)
    else:
        props = worker_properties(bootstrap, f"bench-kc-{uuid.uuid4().hex[:6]}", free_port())
        props.update(
            {
                "key.converter.schemas.enable": "true",
                "value.converter.schemas.enable": "true",
                "offset.flush.interval.ms": "1000",
            }
        )
        worker = WorkerProcess(work, props, name="kconnect", spark=True).start()
        try:
            wait_until(
                lambda: (worker.workers() or {}).get("generation", -1) >= 0, 120, "the kconnect worker"
            )
            assert worker.proc is not None

            def create() -> None:
                resp = worker.request("POST", "/connectors", json={"name": "cdc", "config": config})
                if resp.status_code != 201:
                    raise RuntimeError(f"creating kconnect's connector: {resp.text}")

            row = measure(kind, worker.proc.pid, create, bootstrap, pg, args, base)
        finally:
            worker.stop(60)
    pg.psql(f"SELECT pg_drop_replication_slot('{kind}_slot')")
    return row


def report(rows: list[Row]) -> None:
    print()
    print(
        f"{'system':<10} {'snapshot s':>10} {'rows/s':>9} {'CPU µs/row':>10} {'changes':>8} "
        f"{'p50 s':>7} {'p99 s':>7} {'CPU µs/change':>13} {'WAL max MB':>10} {'WAL end MB':>10}"
    )
    for r in rows:
        print(
            f"{r.system:<10} {r.snapshot_s:>10.1f} {r.rows_per_s:>9,.0f} "
            f"{r.snapshot_cpu_s / r.snapshot_rows * 1e6:>10.1f} {r.changes:>8} {r.p50_s:>7.3f} "
            f"{r.p99_s:>7.3f} {r.cpu_us_per_change:>13.1f} {r.wal_max_bytes / 1e6:>10.1f} "
            f"{r.wal_end_bytes / 1e6:>10.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--rate", type=int, default=2000, help="changes per second in the steady phase")
    parser.add_argument("--txn", type=int, default=20, help="rows per transaction in the steady phase")
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--only", default=",".join(SYSTEMS))
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    args = parser.parse_args(argv)
    systems = [s for s in args.only.split(",") if s]
    unknown = sorted(set(systems) - set(SYSTEMS))
    if unknown:
        parser.error(f"unknown systems {unknown}; choose from {', '.join(SYSTEMS)}")
    pg = start_postgres(logical=True)
    try:
        prepare(pg, args.rows)
        bases = {kind: (i + 1) * 100_000_000 for i, kind in enumerate(SYSTEMS)}
        rows = density.run_systems(
            "cdc",
            "kafka",
            args.keep,
            systems,
            lambda kind, bootstrap, pid, work: run_one(kind, bootstrap, pid, work, pg, args, bases[kind]),
            report,
        )
    finally:
        pg.stop()
    return 0 if rows is not None else 1


if __name__ == "__main__":
    sys.exit(main())
