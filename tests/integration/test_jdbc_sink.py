"""The JDBC sink end to end: the suite's broker, one kconnect worker on local Spark with the PostgreSQL
driver jar on ``spark.jars``, and a real PostgreSQL server the test starts (tests/support/postgres.py).

Records carry schemas (JsonConverter, schemas.enable=true). Insert mode appends every record to a table
the task creates; upsert mode with repeated keys leaves one row per key holding the newest value, also
across batches; a missing table without auto.create and an unreachable database FAIL the task with a
trace that says which. A PostgreSQL server that cannot start fails the module (it is installed by
``make test``): a JDBC test that skipped would prove nothing.

A JDBC sink task is a Structured Streaming query, which plans up to the high watermark: under
``KCONNECT_TEST_BROKER=embedded`` the records are produced one per batch (``one_record_batches``), as that
broker reports the watermark short of a multi-record batch's tail (DESIGN.md, test broker quirk 2).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker, one_record_batches
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.postgres import DRIVER_JAR, PASSWORD, USER, PostgresServer, start_postgres

pytestmark = pytest.mark.integration

# Keys in the order Java's JsonConverter writes them: kconnect's converter compares a record's schema
# text with the batch's, so a producer must write them as Connect does (field names last, etc.).
VALUE_SCHEMA = {
    "type": "struct",
    "fields": [
        {"type": "int32", "optional": False, "field": "id"},
        {"type": "string", "optional": True, "field": "name"},
        {"type": "double", "optional": False, "field": "amount"},
        {
            "type": "int64",
            "optional": False,
            "name": "org.apache.kafka.connect.data.Timestamp",
            "version": 1,
            "field": "at",
        },
    ],
    "optional": False,
}
KEY_SCHEMA = {"type": "int64", "optional": False}
#: 2026-11-22T10:00:00Z in epoch milliseconds: the instant must survive Spark, the driver and the column.
AT_MS = 1_795_341_600_000


def envelope(schema: dict[str, Any], payload: Any) -> bytes:
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":")).encode()


def value(n: int, name: str) -> bytes:
    return envelope(VALUE_SCHEMA, {"id": n, "name": name, "amount": n * 1.5, "at": AT_MS + n * 1000})


class Bench:
    def __init__(self, worker: WorkerProcess, pg: PostgresServer, bootstrap: str) -> None:
        self.worker = worker
        self.pg = pg
        self.bootstrap = bootstrap

    def topic(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": self.bootstrap})
        for future in admin.create_topics([NewTopic(name, 1, 1)]).values():
            future.result(15)
        return name

    def produce(self, topic: str, records: list[tuple[bytes | None, bytes]]) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, **one_record_batches()})
        for key, val in records:
            producer.produce(topic, key=key, value=val)
        assert producer.flush(10) == 0

    def create(self, name: str, config: dict[str, str]) -> None:
        full = {
            "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
            "tasks.max": "1",
            "connection.url": self.pg.jdbc_url,
            "connection.user": USER,
            "connection.password": PASSWORD,
            **config,
        }
        resp = self.worker.request("POST", "/connectors", json={"name": name, "config": full})
        assert resp.status_code == 201, resp.text

    def task_state(self, name: str) -> dict[str, Any] | None:
        resp = self.worker.get(f"/connectors/{name}/status")
        if resp.status_code != 200 or not resp.json().get("tasks"):
            return None
        task: dict[str, Any] = resp.json()["tasks"][0]
        return task

    def rows(self, sql: str) -> list[list[str]]:
        try:
            return self.pg.psql(sql)
        except RuntimeError as exc:
            if "does not exist" in str(exc):  # the task has not created the table yet
                return []
            raise

    def failed(self, name: str) -> dict[str, Any]:
        def check() -> Any:
            state = self.task_state(name)
            return state is not None and state["state"] == "FAILED" and state

        state: dict[str, Any] = wait_until(check, 120, f"the {name} task FAILED")
        return state


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Bench]:
    workdir: Path = tmp_path_factory.mktemp("jdbc")
    pg = start_postgres()  # raises with the server's own words if it cannot start: a failure, not a skip
    props = worker_properties(broker.bootstrap, f"jdbc-{uuid.uuid4().hex[:8]}", free_port())
    props.update(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "spark.jars": DRIVER_JAR,
            "offset.flush.interval.ms": "1000",
        }
    )
    worker = WorkerProcess(workdir, props, name="jdbc-w0", spark=True).start()
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        yield Bench(worker, pg, broker.bootstrap)
    finally:
        worker.stop(60)
        print(worker.log_text()[-3000:])
        pg.stop()


def test_insert_mode_appends_every_record_to_a_created_table(bench: Bench) -> None:
    topic = bench.topic("orders")
    bench.produce(topic, [(None, value(n, f"n{n}")) for n in range(10)])
    bench.create("jdbc-insert", {"topics": topic, "auto.create": "true", "table.name.format": "kc_${topic}"})
    table = f'"kc_{topic}"'
    wait_until(lambda: len(bench.rows(f"SELECT id FROM {table}")) >= 10, 150, "10 rows in PostgreSQL")
    rows = bench.rows(f"SELECT id, name, amount, extract(epoch FROM at)::bigint FROM {table} ORDER BY id")
    assert rows == [[str(n), f"n{n}", f"{n * 1.5:g}", str(AT_MS // 1000 + n)] for n in range(10)]
    # The table was created from the value schema: NOT NULL where the field is required, TIMESTAMPTZ.
    columns = bench.rows(
        "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
        f"WHERE table_name = 'kc_{topic}' ORDER BY ordinal_position"
    )
    assert columns == [
        ["id", "integer", "NO"],
        ["name", "text", "YES"],
        ["amount", "double precision", "NO"],
        ["at", "timestamp with time zone", "NO"],
    ]
    # More records later: appended by the next batch, none written twice.
    bench.produce(topic, [(None, value(n, f"n{n}")) for n in range(10, 13)])
    wait_until(lambda: len(bench.rows(f"SELECT id FROM {table}")) >= 13, 60, "13 rows in PostgreSQL")
    assert bench.rows(f"SELECT count(*), count(DISTINCT id) FROM {table}") == [["13", "13"]]
    state = bench.task_state("jdbc-insert")
    assert state is not None and state["state"] == "RUNNING", state
    # connection.password is a PASSWORD: the validate endpoint masks it.
    resp = bench.worker.request(
        "PUT",
        "/connector-plugins/JdbcSinkConnector/config/validate",
        json={
            "connector.class": "JdbcSinkConnector",
            "name": "v",
            "topics": topic,
            "connection.url": bench.pg.jdbc_url,
            "connection.password": PASSWORD,
        },
    )
    assert resp.status_code == 200, resp.text
    [password] = [c["value"] for c in resp.json()["configs"] if c["value"]["name"] == "connection.password"]
    assert password["value"] == "[hidden]" and password["errors"] == []


def test_upsert_by_key_leaves_the_newest_value_per_key(bench: Bench) -> None:
    topic = bench.topic("accounts")

    def keyed(key: int, n: int) -> tuple[bytes, bytes]:
        return envelope(KEY_SCHEMA, key), value(n, f"k{key}-v{n}")

    # Keys 0..3, each several times within what will likely be one batch.
    bench.produce(topic, [keyed(n % 4, n) for n in range(12)])
    bench.create(
        "jdbc-upsert",
        {
            "topics": topic,
            "auto.create": "true",
            "insert.mode": "upsert",
            "pk.mode": "record_key",
            "pk.fields": "account",
        },
    )
    table = f'"{topic}"'

    def latest() -> list[list[str]]:
        return bench.rows(f"SELECT account, id, name FROM {table} ORDER BY account")

    expected = [[str(k), str(8 + k), f"k{k}-v{8 + k}"] for k in range(4)]
    wait_until(lambda: latest() == expected, 150, f"one row per key with the newest value; have {latest()}")
    # A later batch updates rows in place and adds a key: still one row per key.
    bench.produce(topic, [keyed(1, 20), keyed(4, 21), keyed(1, 22)])
    expected = [expected[0], ["1", "22", "k1-v22"], expected[2], expected[3], ["4", "21", "k4-v21"]]
    wait_until(lambda: latest() == expected, 60, f"the second batch upserted; have {latest()}")
    assert bench.rows(
        f"SELECT count(*) FROM information_schema.table_constraints WHERE table_name = '{topic}' "
        "AND constraint_type = 'PRIMARY KEY'"
    ) == [["1"]]
    # The staging table is dropped in the transaction that applies it.
    assert bench.rows(f"SELECT tablename FROM pg_tables WHERE tablename LIKE '{topic[:20]}%kcstage%'") == []


def test_a_missing_table_or_an_unreachable_database_fails_the_task(bench: Bench) -> None:
    topic = bench.topic("nowhere")
    bench.produce(topic, [(None, value(0, "x"))])
    bench.create("jdbc-no-table", {"topics": topic})
    state = bench.failed("jdbc-no-table")
    assert f"Table {topic} is missing and auto-creation is disabled" in state["trace"], state["trace"]

    closed = free_port()
    bench.create(
        "jdbc-bad-url",
        {"topics": topic, "auto.create": "true", "connection.url": f"jdbc:postgresql://127.0.0.1:{closed}/x"},
    )
    state = bench.failed("jdbc-bad-url")
    assert f"connecting to jdbc:postgresql://127.0.0.1:{closed}/x failed" in state["trace"], state["trace"]
    assert "Connection to 127.0.0.1:" in state["trace"] and "refused" in state["trace"], state["trace"]
    assert PASSWORD not in state["trace"]
