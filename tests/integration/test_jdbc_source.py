"""The JDBC source end to end: the suite's broker, one kconnect worker on local Spark with the PostgreSQL
driver jar on ``spark.jars``, and a real PostgreSQL server the test starts (tests/support/postgres.py).

Incremental (timestamp+incrementing) copies every row once, in order, with its schema; a restarted task
resumes from the offsets topic with no row lost or repeated and picks up updated rows. A bulk copy is read
by Spark's JDBC reader in several partitions. Wrong credentials fail the connector naming the cause.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.postgres import DRIVER_JAR, PASSWORD, USER, PostgresServer, start_postgres

pytestmark = pytest.mark.integration


class Reader:
    """A consumer of one topic from its start, collecting JSON envelopes across calls."""

    def __init__(self, bootstrap: str, topic: str) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"check-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
            }
        )
        self.consumer.subscribe([topic])
        self.values: list[Any] = []

    def until(self, count: int, timeout: float) -> list[Any]:
        def enough() -> bool:
            for message in self.consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is None and message.value() is not None:
                    self.values.append(json.loads(message.value()))
            return len(self.values) >= count

        wait_until(enough, timeout, f"{count} records (have {len(self.values)})", interval=0)
        return self.values

    def settle(self, seconds: float = 3.0) -> list[Any]:
        """Whatever else arrives within ``seconds``: a repeat would show up here."""
        import time

        end = time.monotonic() + seconds
        while time.monotonic() < end:
            for message in self.consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is None and message.value() is not None:
                    self.values.append(json.loads(message.value()))
        return self.values

    def close(self) -> None:
        self.consumer.close()


class Bench:
    def __init__(self, worker: WorkerProcess, pg: PostgresServer, bootstrap: str) -> None:
        self.worker = worker
        self.pg = pg
        self.bootstrap = bootstrap

    def create(self, name: str, config: dict[str, str]) -> None:
        full = {
            "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
            "tasks.max": "1",
            "connection.url": self.pg.jdbc_url,
            "connection.user": USER,
            "connection.password": PASSWORD,
            **config,
        }
        resp = self.worker.request("POST", "/connectors", json={"name": name, "config": full})
        assert resp.status_code == 201, resp.text

    def status(self, name: str) -> dict[str, Any]:
        resp = self.worker.get(f"/connectors/{name}/status")
        return dict(resp.json()) if resp.status_code == 200 else {}


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Bench]:
    workdir: Path = tmp_path_factory.mktemp("jdbc-source")
    pg = start_postgres()
    props = worker_properties(broker.bootstrap, f"jdbcsrc-{uuid.uuid4().hex[:8]}", free_port())
    props.update(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.jars": DRIVER_JAR,
            "offset.flush.interval.ms": "500",
        }
    )
    worker = WorkerProcess(workdir, props, name="jdbcsrc-w0", spark=True).start()
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        yield Bench(worker, pg, broker.bootstrap)
    finally:
        worker.stop(60)
        print(worker.log_text()[-3000:])
        pg.stop()


def test_timestamp_incrementing_copies_each_row_once_and_resumes_after_a_restart(bench: Bench) -> None:
    table = f"orders_{uuid.uuid4().hex[:6]}"
    bench.pg.psql(
        f"CREATE TABLE {table} (id serial PRIMARY KEY, name text, amount numeric(10,2) NOT NULL, "
        "day date, updated timestamptz NOT NULL DEFAULT now() - interval '1 minute')"
    )
    bench.pg.psql(
        f"INSERT INTO {table} (name, amount, day) "
        "SELECT 'n' || i, i * 1.25, DATE '2026-01-01' + i FROM generate_series(1, 25) AS i"
    )
    name = f"src-{table}"
    bench.create(
        name,
        {
            "mode": "timestamp+incrementing",
            "incrementing.column.name": "id",
            "timestamp.column.name": "updated",
            "table.whitelist": table,
            "topic.prefix": "pg-",
            "batch.max.rows": "10",
            "poll.interval.ms": "300",
            "value.converter.schemas.enable": "true",
        },
    )
    reader = Reader(bench.bootstrap, f"pg-{table}")
    try:
        values = reader.until(25, 150)
        assert [v["payload"]["id"] for v in values] == list(range(1, 26))
        first = values[0]
        assert first["schema"]["name"] == table
        fields = {f["field"]: f for f in first["schema"]["fields"]}
        assert fields["id"]["type"] == "int32" and fields["id"]["optional"] is False
        assert fields["name"]["type"] == "string" and fields["name"]["optional"] is True
        assert fields["amount"]["name"] == "org.apache.kafka.connect.data.Decimal"
        assert fields["amount"]["parameters"] == {"scale": "2"}
        assert fields["day"]["name"] == "org.apache.kafka.connect.data.Date"
        assert fields["updated"]["name"] == "org.apache.kafka.connect.data.Timestamp"
        assert first["payload"]["name"] == "n1" and first["payload"]["day"] == 20455

        # The task restarts: it continues from the offsets topic, so nothing is read twice or skipped.
        resp = bench.worker.request("POST", f"/connectors/{name}/restart?includeTasks=true&onlyFailed=false")
        assert resp.status_code in (202, 204), resp.text
        bench.pg.psql(
            f"INSERT INTO {table} (name, amount) SELECT 'm' || i, i FROM generate_series(1, 7) AS i"
        )
        # An update moves a row's timestamp forward: timestamp modes copy it again, with its new values.
        bench.pg.psql(
            f"UPDATE {table} SET name = 'renamed', updated = now() - interval '1 second' WHERE id = 3"
        )
        values = reader.until(33, 120)
        values = reader.settle(3)
        ids = [v["payload"]["id"] for v in values]
        assert ids == [*range(1, 33), 3], ids
        assert values[-1]["payload"]["name"] == "renamed"
        assert bench.status(name)["tasks"][0]["state"] == "RUNNING"
    finally:
        reader.close()
    # The stored offset has Confluent's shape.
    offsets = bench.worker.get(f"/connectors/{name}/offsets").json()["offsets"]
    assert offsets[0]["partition"] == {"protocol": "1", "table": f"postgres.public.{table}"}
    assert offsets[0]["offset"]["incrementing"] == 3
    assert set(offsets[0]["offset"]) == {"incrementing", "timestamp", "timestamp_nanos"}


def test_a_bulk_copy_is_read_by_spark_in_parallel_partitions(bench: Bench) -> None:
    table = f"big_{uuid.uuid4().hex[:6]}"
    bench.pg.psql(f"CREATE TABLE {table} (id bigint PRIMARY KEY, label text NOT NULL, at timestamp)")
    bench.pg.psql(
        f"INSERT INTO {table} SELECT i, 'row ' || i, "
        "TIMESTAMP '2026-11-28 08:00:00' + i * interval '1 second' FROM generate_series(1, 5000) AS i"
    )
    name = f"bulk-{table}"
    bench.create(
        name,
        {
            "mode": "bulk",
            "table.whitelist": table,
            "topic.prefix": "bulk-",
            "batch.max.rows": "1000",
            "poll.interval.ms": "600000",
            "bulk.read.partitions": "3",
            "value.converter.schemas.enable": "true",
        },
    )
    reader = Reader(bench.bootstrap, f"bulk-{table}")
    try:
        values = reader.until(5000, 180)
        assert sorted(v["payload"]["id"] for v in values) == list(range(1, 5001))
        by_id = {v["payload"]["id"]: v["payload"] for v in values}
        # 2026-11-28T08:00:10 as UTC epoch millis: a timestamp column is its wall time in UTC.
        assert by_id[10] == {"id": 10, "label": "row 10", "at": 1795852810000}
    finally:
        reader.close()
    assert "bulk read through Spark" in bench.worker.log_text()
    assert "partitions=3" in bench.worker.log_text() or '"partitions": 3' in bench.worker.log_text()


def test_wrong_credentials_fail_the_connector_naming_the_cause(bench: Bench) -> None:
    name = f"badpw-{uuid.uuid4().hex[:6]}"
    bench.create(
        name,
        {"mode": "bulk", "topic.prefix": "x-", "connection.password": "not-the-password"},
    )

    def failed() -> Any:
        connector = bench.status(name).get("connector", {})
        return connector.get("state") == "FAILED" and connector

    connector = wait_until(failed, 60, "the connector FAILED")
    assert "password authentication failed" in connector["trace"], connector["trace"]
    assert "not-the-password" not in connector["trace"]
