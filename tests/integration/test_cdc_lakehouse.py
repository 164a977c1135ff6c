"""PostgreSQL -> Kafka -> Iceberg end to end, with the worker killed on the way (issue 33's "done when").

A real PostgreSQL (``wal_level=logical``), the suite's Apache Kafka broker, a kconnect worker on Spark with
``exactly.once.source.support=enabled`` running the CDC source (Debezium's envelope) and the Iceberg sink
in upsert mode by the primary key. A snapshot of 40 rows, then inserts, updates and deletes in
transactions while the worker is SIGKILLed; a second worker takes both connectors over. The Iceberg
table, read with Spark SQL, ends equal to the PostgreSQL table read with SQL: every insert, update and
delete applied once, none lost.

It reads the table with the lakehouse modules' Spark reader (the ``reader`` fixture,
tests/integration/conftest.py: Iceberg's Hadoop catalog on the warehouse directory).
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg2
import pytest
from pyspark.sql import SparkSession

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, wait_until, worker_properties
from tests.support.lakehouse_jars import spark_properties
from tests.support.postgres import DATABASE, PASSWORD, USER, captured_table, cdc_config, start_postgres

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]


def iceberg_rows(spark: SparkSession, warehouse: Path, table: str) -> list[tuple[Any, ...]]:
    """The table's rows by id; none before the sink created it (looked up on disk first, so the wait
    does not fill the log with Spark's table-not-found errors)."""
    if not (warehouse / "iceberg" / Path(*table.split(".")) / "metadata").is_dir():
        return []
    return [tuple(r) for r in spark.sql(f"SELECT id, name, qty FROM chk.{table} ORDER BY id").collect()]


def test_postgres_changes_reach_iceberg_across_a_killed_worker(
    reader: tuple[SparkSession, Path],
    tmp_path: Path,
    broker: Broker,
) -> None:
    spark, warehouse = reader
    pg = start_postgres(logical=True)
    group = f"pg2ice-{uuid.uuid4().hex[:8]}"
    props = worker_properties(broker.bootstrap, group, free_port(), scheduled_rebalance_max_delay_ms=0)
    props.update(
        {
            "exactly.once.source.support": "enabled",
            "offset.flush.interval.ms": "500",
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            **spark_properties(),
        }
    )
    table = f"kc.items_{uuid.uuid4().hex[:6]}"
    source = cdc_config(pg.port, {**captured_table("shop", "items"), "max.batch.size": "50"})
    sink = {
        "connector.class": "IcebergSinkConnector",
        "tasks.max": "1",
        "topics": "shop.public.items",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "iceberg.tables": table,
        "iceberg.tables.auto-create-enabled": "true",
        "iceberg.tables.upsert-mode-enabled": "true",
        "iceberg.tables.default-id-columns": "id",
        "iceberg.control.commit.interval-ms": "2000",
        "iceberg.catalog.type": "hadoop",
        "iceberg.catalog.warehouse": str(warehouse / "iceberg"),
    }
    connection = psycopg2.connect(
        host="127.0.0.1", port=pg.port, user=USER, password=PASSWORD, dbname=DATABASE
    )
    connection.autocommit = True
    with connection.cursor() as cursor:
        cursor.execute("CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int)")
        cursor.execute("INSERT INTO items SELECT g, 'item ' || g, g FROM generate_series(1, 40) g")

    stop_writing = threading.Event()
    written = [0]

    def write() -> None:
        """Transactions of an insert, an update and (every third) a delete, until told to stop."""
        n = 40
        with connection.cursor() as cursor:
            while not stop_writing.is_set():
                n += 1
                cursor.execute("BEGIN")
                cursor.execute("INSERT INTO items VALUES (%s, %s, %s)", (n, f"item {n}", n))
                cursor.execute("UPDATE items SET qty = qty + 100, name = name || '!' WHERE id = %s", (n - 7,))
                if n % 3 == 0:
                    cursor.execute("DELETE FROM items WHERE id = %s", (n - 20,))
                cursor.execute("COMMIT")
                written[0] = n
                time.sleep(0.02)

    def postgres_rows() -> list[tuple[Any, ...]]:
        with connection.cursor() as cursor:
            cursor.execute("SELECT id, name, qty FROM items ORDER BY id")
            return [tuple(r) for r in cursor.fetchall()]

    # Both workers start at once (one Spark start's wait instead of two); the one running the CDC task
    # is SIGKILLed and the other takes its work over.
    workers = [
        WorkerProcess(
            tmp_path,
            {**props, "listeners": f"http://127.0.0.1:{free_port()}"},
            name=f"pg2ice-w{i}",
            spark=True,
        )
        for i in range(2)
    ]
    for w in workers:
        w.start()
    writer = threading.Thread(target=write)
    began = time.monotonic()
    phases: dict[str, float] = {}

    def mark(phase: str) -> None:
        phases[phase] = round(time.monotonic() - began, 1)

    try:
        wait_until(stable_view(workers, 2), 180, "both workers in one generation")
        mark("workers joined")
        for name, config in (("pg-src", source), ("ice-sink", sink)):
            resp = workers[0].request("POST", "/connectors", json={"name": name, "config": config})
            assert resp.status_code == 201, resp.text
        wait_until(
            lambda: len(iceberg_rows(spark, warehouse, table)) >= 40,
            180,
            "the snapshot in Iceberg",
            interval=2,
        )
        mark("snapshot in Iceberg")
        writer.start()
        wait_until(lambda: written[0] >= 120, 60, "changes under way", interval=0.5)
        holder = workers[0].get("/connectors/pg-src/status").json()["tasks"][0]["worker_id"]
        victim = next(w for w in workers if holder.endswith(f":{w.port}"))
        survivor = next(w for w in workers if w is not victim)
        victim.kill()  # SIGKILL mid-stream: the source's transaction open, the slot unacknowledged
        mark("worker killed")
        at_kill = written[0]
        wait_until(lambda: written[0] >= at_kill + 80, 60, "changes while the task moves", interval=0.5)
        stop_writing.set()
        writer.join(30)
        expected = postgres_rows()
        wait_until(
            lambda: iceberg_rows(spark, warehouse, table) == expected,
            240,
            f"Iceberg equal to PostgreSQL ({len(expected)} rows)",
            interval=2,
        )
        mark("Iceberg equal")
        moved = survivor.get("/connectors/pg-src/status").json()["tasks"][0]
        assert moved["state"] == "RUNNING" and moved["worker_id"].endswith(f":{survivor.port}"), moved
        print(
            f"\n{written[0] - 40} change transactions, {len(expected)} rows equal in PostgreSQL and Iceberg; "
            f"seconds: {phases}"
        )
    finally:
        stop_writing.set()
        if writer.is_alive():
            writer.join(30)
        connection.close()
        for w in workers:
            if w.alive():
                w.stop(60)
            print(w.name, w.log_text()[-2000:])
        pg.stop()
