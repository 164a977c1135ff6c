"""Iceberg table maintenance and the JDBC catalog on a real kconnect worker, the suite's broker, real Spark
and the tests' own PostgreSQL (tests/support/postgres.py).

One worker, two short stories (a worker with Spark starts in tens of seconds, so they share it):

1. maintenance: many tiny commits (a commit every half second while records trickle in), maintenance
   every few seconds compacting small files and expiring snapshots; the table ends with fewer data files
   than it was written with, every record once; then the connector is stopped, its consumer offsets
   rewound to 0 (behind what the table holds), resumed, and more records produced: the task resumes from
   the offsets in the table's snapshots past the compaction's snapshot (which carries none) and the expiry
   (which keeps the newest snapshot carrying them), with no gap and no repeat;
2. the jdbc catalog: ``iceberg.catalog.type=jdbc`` on PostgreSQL, the table read back by a session of the
   test's own through the same catalog, the table listed in PostgreSQL's ``iceberg_tables``, and the
   password neither in the worker's log nor in the validate answer;
3. the rest catalog: ``iceberg.catalog.type=rest`` on Apache Iceberg's own REST catalog server
   (tests/support/iceberg_rest.py), read back through it and listed by its REST API.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from pyspark.sql import SparkSession

from kconnect.runtime.cli.broker import free_port
from tests.integration.test_lakehouse_sinks import envelope
from tests.support.apache_kafka import Broker, one_record_batches
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.iceberg_rest import start_iceberg_rest
from tests.support.lakehouse_jars import spark_properties
from tests.support.lakehouse_reader import reader_session
from tests.support.postgres import DRIVER_JAR, PASSWORD, USER, PostgresServer, start_postgres

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1800)]


@dataclass
class Bench:
    worker: WorkerProcess
    spark: SparkSession
    warehouse: Path
    pg: PostgresServer
    bootstrap: str

    def topic(self, prefix: str, partitions: int = 2) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(name, partitions, 1)]).values():
            future.result(15)
        return name

    def produce(self, topic: str, ids: range) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, **one_record_batches()})
        for n in ids:
            producer.produce(topic, value=envelope(n), partition=n % 2)
        assert producer.flush(30) == 0

    def ids(self, table: str) -> list[int]:
        try:
            return sorted(r[0] for r in self.spark.sql(f"SELECT id FROM {table}").collect())
        except Exception as exc:
            if "TABLE_OR_VIEW_NOT_FOUND" in str(exc) or "without view support" in str(exc):
                return []  # a jdbc catalog without views refuses the view lookup of a missing table
            raise

    def events(self, name: str) -> list[dict[str, Any]]:
        out = []
        for line in self.worker.log_text().splitlines():
            if line.startswith("{") and f'"{name}"' in line:
                try:
                    out.append(json.loads(line))
                except ValueError:
                    continue
        return [e for e in out if e.get("event") == name]

    def create(self, name: str, config: dict[str, str]) -> None:
        resp = self.worker.request("POST", "/connectors", json={"name": name, "config": config})
        assert resp.status_code == 201, resp.text

    def stop_and_rewind(self, name: str, topic: str, partitions: int = 2) -> None:
        """Stop the connector and rewind its consumer group to the topic's start (offset 0 of each
        partition), behind what its tables hold: the tables' snapshots must decide where it resumes."""
        assert self.worker.request("PUT", f"/connectors/{name}/stop").status_code == 204
        wait_until(
            lambda: self.worker.get(f"/connectors/{name}/status").json()["connector"]["state"] == "STOPPED",
            120,
            "the connector stopped",
        )
        rewind = {
            "offsets": [
                {"partition": {"kafka_topic": topic, "kafka_partition": p}, "offset": {"kafka_offset": 0}}
                for p in range(partitions)
            ]
        }
        resp = self.worker.request("PATCH", f"/connectors/{name}/offsets", json=rewind)
        assert resp.status_code == 200, resp.text


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Bench]:
    workdir = tmp_path_factory.mktemp("lh-maint")
    warehouse = workdir / "warehouse"
    pg = start_postgres()  # raises with the server's own words if it cannot start: a failure, not a skip
    jars = {**spark_properties()}
    jars["spark.jars"] += "," + DRIVER_JAR  # Iceberg's JdbcCatalog loads the PostgreSQL driver
    spark = reader_session(
        "kconnect-lakehouse-maintenance",
        warehouse / "hadoop",
        {
            "spark.jars": jars["spark.jars"],
            "spark.sql.catalog.pgc": "org.apache.iceberg.spark.SparkCatalog",
            "spark.sql.catalog.pgc.type": "jdbc",
            "spark.sql.catalog.pgc.uri": pg.jdbc_url,
            "spark.sql.catalog.pgc.jdbc.user": USER,
            "spark.sql.catalog.pgc.jdbc.password": PASSWORD,
            "spark.sql.catalog.pgc.warehouse": str(warehouse / "jdbc"),
            "spark.sql.catalog.pgc.cache-enabled": "false",
        },
    )
    props = worker_properties(broker.bootstrap, f"lhm-{uuid.uuid4().hex[:8]}", free_port())
    props.update(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "offset.flush.interval.ms": "1000",
            **jars,
        }
    )
    worker = WorkerProcess(workdir, props, name="lhm-w0", spark=True).start()
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 120, "the worker to join")
        yield Bench(worker, spark, warehouse, pg, broker.bootstrap)
    finally:
        try:
            worker.stop(60)
            print(worker.log_text()[-4000:])
            spark.stop()
        finally:
            pg.stop()


def iceberg_config(topic: str, **extra: str) -> dict[str, str]:
    return {
        "connector.class": "IcebergSinkConnector",
        "topics": topic,
        "tasks.max": "1",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "true",
        "iceberg.tables": "kc.${topic}",
        "iceberg.tables.auto-create-enabled": "true",
        **extra,
    }


def test_maintenance_compacts_and_expires_and_a_rewound_task_resumes_exactly(bench: Bench) -> None:
    topic = bench.topic("maint")
    table = f"chk.kc.`{topic}`"
    config = iceberg_config(
        topic,
        **{
            "iceberg.catalog.warehouse": str(bench.warehouse / "hadoop"),
            "iceberg.control.commit.interval-ms": "500",
        },
    )
    bench.create("maint", config)
    # Tiny commits: a few records at a time, each batch committed before the next arrives.
    for start in range(0, 60, 10):
        bench.produce(topic, range(start, start + 10))
        wait_until(lambda s=start: len(bench.ids(table)) >= s + 10, 300, f"{start + 10} rows", interval=1)
    commits = len(bench.events("committed to tables"))
    written = bench.spark.sql(f"SELECT count(*) FROM {table}.files").collect()[0][0]
    assert commits >= 5 and written >= 5, (
        f"{commits} commits, {written} files: the test needs many small ones"
    )

    # Maintenance on: the task restarts with the new config and resumes from the table; its first batch
    # starts the schedule (the runtime asks an idle task to commit only once it has consumed something).
    maintenance = {
        "iceberg.tables.maintenance.interval-ms": "3000",
        "iceberg.tables.maintenance.compact.min-input-files": "2",
        "iceberg.tables.maintenance.expire-snapshots.older-than-ms": "0",
        "iceberg.tables.maintenance.expire-snapshots.retain-last": "1",
    }
    resp = bench.worker.request("PUT", "/connectors/maint/config", json={**config, **maintenance})
    assert resp.status_code == 200, resp.text
    bench.produce(topic, range(60, 70))

    def compacted() -> list[dict[str, Any]]:
        return [e for e in bench.events("table maintained") if e.get("files_rewritten", 0) > 0]

    wait_until(compacted, 300, "a maintenance run that compacted", interval=2)
    wait_until(
        lambda: any(e.get("snapshots_expired", 0) > 0 for e in bench.events("table maintained")),
        120,
        "a maintenance run that expired snapshots",
        interval=2,
    )
    files = bench.spark.sql(f"SELECT count(*) FROM {table}.files").collect()[0][0]
    snapshots = bench.spark.sql(f"SELECT operation, summary FROM {table}.snapshots").collect()
    print(
        f"\n{commits} commits, {written} data files; after maintenance {files} files, {len(snapshots)} "
        f"snapshots; first compaction: {compacted()[0]}"
    )
    assert files < written
    assert len(snapshots) < commits, "snapshots were expired"
    assert any("kconnect.offsets.maint" in (s[1] or {}) for s in snapshots), "the offsets' snapshot is kept"
    wait_until(lambda: bench.ids(table) == list(range(70)), 120, "70 rows, each once", interval=2)

    # Stop, rewind the consumer group behind what the table holds, resume: the snapshots decide.
    bench.stop_and_rewind("maint", topic)
    opened_before = len(bench.events("partition opened"))
    assert bench.worker.request("PUT", "/connectors/maint/resume").status_code == 202
    bench.produce(topic, range(70, 90))
    wait_until(lambda: len(bench.ids(table)) >= 90, 300, "90 rows", interval=2)
    opened = bench.events("partition opened")[opened_before:]
    assert sorted(e["resume"] for e in opened) == [35, 35], opened
    assert bench.ids(table) == list(range(90)), "a gap or a repeat after the rewind"


def test_jdbc_catalog_on_postgresql_writes_a_table_read_back_through_it(bench: Bench) -> None:
    topic = bench.topic("jdbc")
    config = iceberg_config(
        topic,
        **{
            "iceberg.catalog": "pgc",  # the jdbc catalog's tables live under its name: the reader's too
            "iceberg.catalog.type": "jdbc",
            "iceberg.catalog.uri": bench.pg.jdbc_url,
            "iceberg.catalog.jdbc.user": USER,
            "iceberg.catalog.jdbc.password": PASSWORD,
            "iceberg.catalog.warehouse": str(bench.warehouse / "jdbc"),
            "iceberg.control.commit.interval-ms": "1000",
        },
    )
    resp = bench.worker.request(
        "PUT", "/connector-plugins/IcebergSinkConnector/config/validate", json={"name": "pgc", **config}
    )
    assert resp.status_code == 200 and resp.json()["error_count"] == 0, resp.text
    assert PASSWORD not in resp.text
    bench.create("pgc", config)
    bench.produce(topic, range(50))
    table = f"pgc.kc.`{topic}`"
    wait_until(
        lambda: bench.ids(table) == list(range(50)), 300, "50 rows through the jdbc catalog", interval=2
    )
    listed = bench.pg.psql("SELECT table_namespace, table_name FROM iceberg_tables")
    assert ["kc", topic] in listed, listed
    assert PASSWORD not in bench.worker.log_text()


def test_rest_catalog_on_apache_icebergs_rest_server_writes_a_table_read_back_through_it(
    bench: Bench, tmp_path: Path
) -> None:
    server = start_iceberg_rest(tmp_path)
    try:
        topic = bench.topic("rest")
        config = iceberg_config(
            topic,
            **{
                "iceberg.catalog.type": "rest",
                "iceberg.catalog.uri": server.uri,
                "iceberg.control.commit.interval-ms": "1000",
            },
        )
        bench.create("rstc", config)
        bench.produce(topic, range(30))
        for key, value in {
            "": "org.apache.iceberg.spark.SparkCatalog",
            ".type": "rest",
            ".uri": server.uri,
        }.items():
            bench.spark.conf.set("spark.sql.catalog.rstc" + key, value)
        bench.spark.conf.set("spark.sql.catalog.rstc.cache-enabled", "false")
        table = f"rstc.kc.`{topic}`"
        wait_until(
            lambda: bench.ids(table) == list(range(30)), 300, "30 rows through the rest catalog", interval=2
        )
        listed = httpx.get(f"{server.uri}/v1/namespaces/kc/tables", timeout=10).json()
        assert {"namespace": ["kc"], "name": topic} in listed["identifiers"], listed
        assert bench.worker.request("DELETE", "/connectors/rstc").status_code == 204
    finally:
        server.stop()


def routed(n: int, table: str) -> bytes:
    schema = {
        "type": "struct",
        "optional": False,
        "fields": [
            {"field": "id", "type": "int64", "optional": False},
            {"field": "tbl", "type": "string", "optional": False},
        ],
    }
    return json.dumps({"schema": schema, "payload": {"id": n, "tbl": table}}).encode()


def test_tables_routed_by_field_are_written_together_and_a_rewound_task_resumes_exactly(bench: Bench) -> None:
    """Three tables of the same columns from one topic (``iceberg.tables.dynamic-enabled``): a commit writes
    their data files in one Spark job and appends them table by table through Iceberg's API (the log says
    so); each table reads back its own rows, its files carry column metrics (read from the footers by
    field id), and a task rewound behind what the tables hold resumes from their snapshots exactly."""
    topic = bench.topic("routed")
    suffix = topic.rsplit("-", 1)[1]
    tables = [f"kc.r{suffix}_{i}" for i in range(3)]
    config = {
        **iceberg_config(topic),
        "iceberg.tables.dynamic-enabled": "true",
        "iceberg.tables.route-field": "tbl",
        "iceberg.catalog.warehouse": str(bench.warehouse / "hadoop"),
        "iceberg.control.commit.interval-ms": "1000",
    }
    config.pop("iceberg.tables")
    producer = Producer({"bootstrap.servers": bench.bootstrap, **one_record_batches()})

    def produce(ids: range) -> None:
        for n in ids:
            producer.produce(topic, value=routed(n, tables[n % 3]), partition=n % 2)
        assert producer.flush(30) == 0

    def expected(upto: int) -> dict[str, list[int]]:
        return {t: [n for n in range(upto) if n % 3 == i] for i, t in enumerate(tables)}

    def held() -> dict[str, list[int]]:
        return {t: bench.ids(f"chk.{t}") for t in tables}

    bench.create("routed", config)
    produce(range(0, 30))  # the first commit creates the three tables
    wait_until(lambda: held() == expected(30), 300, "30 rows in three tables", interval=2)
    produce(range(30, 60))  # the tables exist: their files come from one job
    wait_until(lambda: held() == expected(60), 300, "60 rows in three tables", interval=2)
    together = bench.events("tables written together")
    assert together and together[-1]["tables"] == 3 and together[-1]["failed"] == 0, together
    bounds = bench.spark.sql(
        f"SELECT lower_bounds, upper_bounds, record_count FROM chk.{tables[0]}.files"
    ).collect()
    assert all(r[0] and r[1] and r[0].get(1) is not None for r in bounds), bounds  # id's metrics, field 1

    bench.stop_and_rewind("routed", topic)
    assert bench.worker.request("PUT", "/connectors/routed/resume").status_code == 202
    produce(range(60, 90))
    wait_until(lambda: held() == expected(90), 300, "90 rows in three tables, each once", interval=2)
    assert held() == expected(90), "a gap or a repeat after the rewind"
    assert len(bench.events("tables written together")) > len(together)
