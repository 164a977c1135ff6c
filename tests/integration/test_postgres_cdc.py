"""PostgreSQL change data capture end to end: a real PostgreSQL with ``wal_level=logical`` the tests start,
the suite's Apache Kafka broker, and kconnect workers with ``exactly.once.source.support=enabled``.

A snapshot then inserts, updates and deletes reach Kafka in Debezium's shapes, checked field by field
(key, envelope, source block, ``op``, tombstones, REPLICA IDENTITY FULL and default, the types); a worker
SIGKILLed while rows are being written loses and repeats none of them; wrong credentials, a server
without ``wal_level=logical`` and a slot held by another client fail the connector naming the cause; a
table dropped (or altered) before its changes are decoded leaves the task streaming, while a publication
dropped or a slot invalidated while streaming fails the task at once naming it; a terminated
walsender is reopened with nothing lost or repeated, and a slot taken meanwhile fails the task after
``errors.max.retries``; heartbeats carry the server's position while the captured table is quiet.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg2
import psycopg2.extras
import pytest
from confluent_kafka import Consumer

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.postgres import (
    DATABASE,
    PASSWORD,
    USER,
    PostgresServer,
    captured_table,
    cdc_config,
    start_postgres,
)

pytestmark = pytest.mark.integration


class Reader:
    """read_committed JSON records (key, value) of some topics, collected across calls."""

    def __init__(self, bootstrap: str, topics: list[str]) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": f"cdc-check-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
                "isolation.level": "read_committed",
                "topic.metadata.refresh.interval.ms": "1000",
            }
        )
        self.consumer.subscribe(topics)
        self.records: list[tuple[str, Any, Any]] = []

    def _drain(self) -> None:
        for message in self.consumer.consume(num_messages=500, timeout=0.5):
            if message.error() is None:
                key, value = message.key(), message.value()
                self.records.append(
                    (
                        message.topic(),
                        None if key is None else json.loads(key),
                        None if value is None else json.loads(value),
                    )
                )

    def until(self, count: int, timeout: float) -> list[tuple[str, Any, Any]]:
        def enough() -> bool:
            self._drain()
            return len(self.records) >= count

        wait_until(enough, timeout, f"{count} records (have {len(self.records)})", interval=0)
        return self.records

    def settle(self, seconds: float) -> list[tuple[str, Any, Any]]:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self._drain()
        return self.records

    def close(self) -> None:
        self.consumer.close()


class Bench:
    def __init__(self, tmp: Path, broker: Broker, pg: PostgresServer) -> None:
        self.tmp = tmp
        self.broker = broker
        self.pg = pg
        self.group = f"cdc-{uuid.uuid4().hex[:8]}"
        self.port = free_port()
        self.worker = self.start_worker("w0")

    def start_worker(self, name: str) -> WorkerProcess:
        props = worker_properties(self.broker.bootstrap, self.group, self.port)
        props.update(
            {
                "exactly.once.source.support": "enabled",
                "offset.flush.interval.ms": "500",
                "scheduled.rebalance.max.delay.ms": "0",
            }
        )
        worker = WorkerProcess(self.tmp, props, name=name, spark=True).start()
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 90, "the worker to join")
        return worker

    def create(self, name: str, config: dict[str, str], port: int | None = None) -> None:
        full = cdc_config(port or self.pg.port, config)
        resp = self.worker.request("POST", "/connectors", json={"name": name, "config": full})
        assert resp.status_code == 201, resp.text

    def capture(self, prefix: str, table: str, config: dict[str, str] | None = None) -> str:
        """Connector ``cdc-<prefix>`` capturing ``public.<table>`` alone (``captured_table``), its task
        RUNNING; returns its name."""
        name = f"cdc-{prefix}"
        self.create(name, {**captured_table(prefix, table), **(config or {})})
        running(self, name)
        return name

    def status(self, name: str) -> dict[str, Any]:
        resp = self.worker.get(f"/connectors/{name}/status")
        return dict(resp.json()) if resp.status_code == 200 else {}

    def failure(self, name: str) -> str:
        def failed() -> Any:
            status = self.status(name)
            if status.get("connector", {}).get("state") == "FAILED":
                return status["connector"]["trace"]
            tasks = status.get("tasks") or []
            return tasks and tasks[0]["state"] == "FAILED" and tasks[0]["trace"]

        trace: str = wait_until(failed, 90, f"{name} FAILED")
        return trace


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Bench]:
    pg = start_postgres(logical=True)
    b = Bench(tmp_path_factory.mktemp("cdc"), broker, pg)
    try:
        yield b
    finally:
        if b.worker.alive():
            b.worker.stop(60)
        print(b.worker.log_text()[-4000:])
        pg.stop()


def trickle(pg: PostgresServer, insert: str, total: int) -> threading.Thread:
    """A started thread writing rows 0 .. total-1, one every 10 ms, each in a transaction of its own:
    ``insert`` takes the row's number for each ``%s``."""

    def write() -> None:
        connection = psycopg2.connect(
            host="127.0.0.1", port=pg.port, user=USER, password=PASSWORD, dbname=DATABASE
        )
        connection.autocommit = True
        try:
            with connection.cursor() as cursor:
                for i in range(total):
                    cursor.execute(insert, (i,) * insert.count("%s"))
                    time.sleep(0.01)
        finally:
            connection.close()

    writer = threading.Thread(target=write)
    writer.start()
    return writer


def assert_each_once(records: list[tuple[str, Any, Any]], total: int) -> None:
    """The change records' ``after.id`` are 0 .. total-1, each once: nothing lost, nothing repeated."""
    ids = Counter(v["payload"]["after"]["id"] for _, _, v in records if v is not None)
    assert sorted(ids) == list(range(total)), f"missing: {sorted(set(range(total)) - set(ids))[:20]}"
    repeated = {i: n for i, n in ids.items() if n > 1}
    assert repeated == {}, f"repeated: {list(repeated.items())[:20]}"


def replication_client(pg: PostgresServer) -> Any:
    """A replication connection of the test's own: another client of a slot."""
    return psycopg2.connect(
        host="127.0.0.1",
        port=pg.port,
        user=USER,
        password=PASSWORD,
        dbname=DATABASE,
        connection_factory=psycopg2.extras.LogicalReplicationConnection,
    )


def fields(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {f["field"]: f for f in schema["fields"]}


def test_snapshot_and_changes_in_debeziums_shapes(bench: Bench) -> None:
    pg = bench.pg
    pg.psql("CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy')")
    pg.psql(
        "CREATE TABLE shop (id int PRIMARY KEY, name text NOT NULL, price numeric(10,2), m mood, "
        "tags text[], doc jsonb, u uuid, at timestamptz, d date, b bytea, flag boolean)"
    )
    pg.psql("CREATE TABLE audit (id int PRIMARY KEY, note text)")
    pg.psql("ALTER TABLE audit REPLICA IDENTITY FULL")
    pg.psql(
        "INSERT INTO shop VALUES (1, 'one', 1.50, 'ok', '{x,\"y z\"}', '{\"k\": 1}', "
        "'ef9b5beb-9c21-4d66-a769-47207c205bbe', '2026-11-28 08:00:00.5+00', '2026-11-28', '\\x0102', true)"
    )
    pg.psql("INSERT INTO audit VALUES (1, 'first')")
    bench.create(
        "cdc-shapes",
        {
            "topic.prefix": "srv",
            "slot.name": "kc_shapes",
            "publication.name": "kc_shapes_pub",
            "table.include.list": "public\\.shop,public\\.audit",
        },
    )
    reader = Reader(bench.broker.bootstrap, ["srv.public.shop", "srv.public.audit"])
    try:
        records = reader.until(2, 120)  # the snapshot
        shop = [(k, v) for t, k, v in records if t == "srv.public.shop"]
        assert len(shop) == 1
        key, value = shop[0]
        assert key == {
            "schema": {
                "type": "struct",
                "fields": [{"type": "int32", "optional": False, "field": "id"}],
                "optional": False,
                "name": "srv.public.shop.Key",
            },
            "payload": {"id": 1},
        }
        envelope = value["schema"]
        assert envelope["version"] == 2
        assert [f["field"] for f in envelope["fields"]] == [
            "before",
            "after",
            "source",
            "transaction",
            "op",
            "ts_ms",
            "ts_us",
            "ts_ns",
        ]
        row = fields(fields(envelope)["after"])
        assert row["name"] == {"type": "string", "optional": False, "field": "name"}
        assert row["price"]["name"] == "org.apache.kafka.connect.data.Decimal"
        assert row["price"]["parameters"] == {"scale": "2", "connect.decimal.precision": "10"}
        assert row["m"]["name"] == "io.debezium.data.Enum" and row["m"]["parameters"] == {
            "allowed": "sad,ok,happy"
        }
        assert row["tags"] == {
            "type": "array",
            "items": {"type": "string", "optional": True},
            "optional": True,
            "field": "tags",
        }
        assert row["doc"]["name"] == "io.debezium.data.Json"
        assert row["u"]["name"] == "io.debezium.data.Uuid"
        assert row["at"]["name"] == "io.debezium.time.ZonedTimestamp"
        assert row["d"]["name"] == "io.debezium.time.Date"
        payload = value["payload"]
        assert payload["op"] == "r" and payload["before"] is None
        assert payload["after"] == {
            "id": 1,
            "name": "one",
            "price": "AJY=",  # 150 unscaled, base64 as JsonConverter writes Decimal
            "m": "ok",
            "tags": ["x", "y z"],
            "doc": '{"k": 1}',
            "u": "ef9b5beb-9c21-4d66-a769-47207c205bbe",
            "at": "2026-11-28T08:00:00.500000Z",
            "d": 20785,
            "b": "AQI=",
            "flag": True,
        }
        source = payload["source"]
        assert source["connector"] == "postgresql" and source["name"] == "srv" and source["db"] == DATABASE
        assert (source["schema"], source["table"]) == ("public", "shop")
        assert source["snapshot"] in ("true", "last") and isinstance(source["lsn"], int)

        # Streaming: insert, update, delete on a default-identity table and a FULL one.
        pg.psql("INSERT INTO shop (id, name) VALUES (2, 'two')")
        pg.psql("UPDATE shop SET name = 'TWO' WHERE id = 2")
        pg.psql("DELETE FROM shop WHERE id = 2")
        pg.psql("UPDATE audit SET note = 'second' WHERE id = 1")
        pg.psql("DELETE FROM audit WHERE id = 1")
        records = reader.until(2 + 7, 90)
        changes = [
            (k["payload"], None if v is None else v["payload"])
            for t, k, v in records[2:]
            if t == "srv.public.shop"
        ] + [
            (k["payload"], None if v is None else v["payload"])
            for t, k, v in records[2:]
            if t == "srv.public.audit"
        ]
        ops = [(key, None if value is None else value["op"]) for key, value in changes]
        assert ops == [
            ({"id": 2}, "c"),
            ({"id": 2}, "u"),
            ({"id": 2}, "d"),
            ({"id": 2}, None),  # the tombstone
            ({"id": 1}, "u"),
            ({"id": 1}, "d"),
            ({"id": 1}, None),
        ]
        insert, update, delete = changes[0][1], changes[1][1], changes[2][1]
        assert insert["after"]["name"] == "two" and insert["source"]["snapshot"] == "false"
        assert update["before"] is None and update["after"]["name"] == "TWO"  # default identity: no before
        # Default identity: the old row has only its key; a required column gets its type's zero.
        assert delete["after"] is None and delete["before"]["id"] == 2 and delete["before"]["name"] == ""
        assert delete["before"]["price"] is None
        full_update, full_delete = changes[4][1], changes[5][1]
        assert full_update["before"] == {"id": 1, "note": "first"} and full_update["after"] == {
            "id": 1,
            "note": "second",
        }
        assert full_delete["before"] == {"id": 1, "note": "second"}
        lsns = [v["source"]["lsn"] for _, v in changes if v is not None]
        assert lsns == sorted(lsns)  # shop's changes were committed before audit's
        assert json.loads(insert["source"]["sequence"])[1] == str(insert["source"]["lsn"])

        # A column added while streaming: the next change carries it, and its schema has it.
        pg.psql("ALTER TABLE audit ADD COLUMN extra int")
        pg.psql("INSERT INTO audit VALUES (5, 'fifth', 7)")
        records = reader.until(2 + 8, 60)
        _, _, added = records[-1]
        assert added["payload"]["after"] == {"id": 5, "note": "fifth", "extra": 7}
        assert fields(fields(added["schema"])["after"])["extra"] == {
            "type": "int32",
            "optional": True,
            "field": "extra",
        }
    finally:
        reader.close()
    # The slot is acknowledged as records are committed: its confirmed position moves past the changes.
    wait_until(
        lambda: (
            int(
                pg.psql(
                    "SELECT confirmed_flush_lsn - '0/0' FROM pg_replication_slots "
                    "WHERE slot_name = 'kc_shapes'"
                )[0][0]
            )
            >= lsns[-1]
        ),
        30,
        "the slot acknowledged",
    )
    offsets = bench.worker.get("/connectors/cdc-shapes/offsets").json()["offsets"]
    assert offsets[0]["partition"] == {"server": "srv"}
    assert {"lsn", "lsn_commit", "txId"} <= set(offsets[0]["offset"])


def test_a_worker_killed_mid_stream_loses_and_repeats_nothing(bench: Bench) -> None:
    pg = bench.pg
    pg.psql("CREATE TABLE events (id int PRIMARY KEY, payload text)")
    bench.capture("kill", "events", {"max.batch.size": "50"})
    total = 600
    writer = trickle(pg, "INSERT INTO events VALUES (%s, 'event ' || %s)", total)
    reader = Reader(bench.broker.bootstrap, ["kill.public.events"])
    try:
        reader.until(50, 60)  # streaming is under way
        bench.worker.kill()  # SIGKILL: transactions open, offsets and the slot unacknowledged
        writer.join(60)
        bench.worker = bench.start_worker("w1")
        records = reader.until(total, 180)
        records = reader.settle(3)
    finally:
        reader.close()
    assert_each_once(records, total)


def test_bad_input_fails_the_connector_naming_the_cause(bench: Bench) -> None:
    bench.create(
        "cdc-badpw",
        {"topic.prefix": "bad", "slot.name": "kc_bad", "database.password": "not-the-password"},
    )
    trace = bench.failure("cdc-badpw")
    assert "password authentication failed" in trace and "not-the-password" not in trace, trace

    # A slot another client streams from.
    pg = bench.pg
    pg.psql("SELECT pg_create_logical_replication_slot('kc_busy', 'pgoutput')")
    holder = replication_client(pg)
    try:
        cursor = holder.cursor()
        pg.psql("CREATE PUBLICATION kc_busy_pub FOR ALL TABLES")
        cursor.start_replication(
            slot_name="kc_busy",
            decode=False,
            options={"proto_version": "1", "publication_names": "kc_busy_pub"},
        )
        bench.create(
            "cdc-busy", {"topic.prefix": "busy", "slot.name": "kc_busy", "publication.name": "kc_busy_pub"}
        )
        trace = bench.failure("cdc-busy")
        assert "replication slot 'kc_busy' is in use by another client" in trace, trace
    finally:
        holder.close()

    # A server without wal_level=logical.
    plain = start_postgres()
    try:
        bench.create("cdc-nolog", {"topic.prefix": "nolog", "slot.name": "kc_nolog"}, port=plain.port)
        trace = bench.failure("cdc-nolog")
        assert "wal_level is 'replica'" in trace and "wal_level=logical" in trace, trace
    finally:
        plain.stop()


def running(bench: Bench, name: str) -> None:
    wait_until(
        lambda: (bench.status(name).get("tasks") or [{}])[0].get("state") == "RUNNING", 60, f"{name} RUNNING"
    )


def payloads(records: list[tuple[str, Any, Any]], topic: str) -> list[dict[str, Any]]:
    return [v["payload"] for t, _, v in records if t == topic and v is not None]


def test_a_dropped_table_leaves_the_task_streaming(bench: Bench) -> None:
    """Debezium's behaviour: the changes committed before the DROP arrive (described by the stream, as
    the catalog no longer has the table), other tables keep streaming, and a table created again under
    the name is captured again; a column added after a change is decoded does not fail it either."""
    pg = bench.pg
    pg.psql(
        "CREATE TABLE keep_t (id int PRIMARY KEY, v text); CREATE TABLE gone_t (id int PRIMARY KEY, v text)"
    )
    bench.create(
        "cdc-drop",
        {
            "topic.prefix": "drop",
            "slot.name": "kc_drop",
            "publication.name": "kc_drop_pub",
            "table.include.list": "public\\.keep_t,public\\.gone_t",
        },
    )
    running(bench, "cdc-drop")
    reader = Reader(bench.broker.bootstrap, ["drop.public.keep_t", "drop.public.gone_t"])
    try:
        # Decoded at the commit, after the DROP: the stream's Relation message names a table that is gone.
        pg.psql("BEGIN; INSERT INTO gone_t VALUES (1, 'last words'); DROP TABLE gone_t; COMMIT")
        # Decoded after the ALTER: the stream has two columns, the catalog three.
        pg.psql(
            "BEGIN; INSERT INTO keep_t VALUES (1, 'before'); ALTER TABLE keep_t ADD COLUMN extra int; COMMIT"
        )
        pg.psql("INSERT INTO keep_t VALUES (2, 'after', 7)")
        pg.psql("CREATE TABLE gone_t (id int PRIMARY KEY, w text); INSERT INTO gone_t VALUES (5, 'again')")
        records = reader.until(4, 60)
        records = reader.settle(1)
    finally:
        reader.close()
    gone = payloads(records, "drop.public.gone_t")
    assert [(p["op"], p["after"]) for p in gone] == [
        ("c", {"id": 1, "v": "last words"}),
        ("c", {"id": 5, "w": "again"}),
    ]
    keys = [k["payload"] for t, k, v in records if t == "drop.public.gone_t"]
    assert keys == [{"id": 1}, {"id": 5}]
    kept = payloads(records, "drop.public.keep_t")
    assert [p["after"] for p in kept] == [{"id": 1, "v": "before"}, {"id": 2, "v": "after", "extra": 7}]
    assert bench.status("cdc-drop")["tasks"][0]["state"] == "RUNNING"
    bench.worker.request("DELETE", "/connectors/cdc-drop")


def test_a_terminated_walsender_is_reopened_losing_and_repeating_nothing(bench: Bench) -> None:
    pg = bench.pg
    pg.psql("CREATE TABLE lost_t (id int PRIMARY KEY)")
    bench.capture("lost", "lost_t", {"max.batch.size": "20"})
    total = 300

    def terminate() -> list[list[str]]:
        return pg.psql(
            "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
            "WHERE slot_name = 'kc_lost' AND active"
        )

    writer = trickle(pg, "INSERT INTO lost_t VALUES (%s)", total)
    reader = Reader(bench.broker.bootstrap, ["lost.public.lost_t"])
    try:
        reader.until(40, 60)
        assert terminate() == [["t"]]  # mid-stream: records handed out, the slot not yet confirmed
        reader.until(120, 60)  # streaming again
        wait_until(lambda: terminate() == [["t"]], 30, "the reopened walsender")
        writer.join(60)
        records = reader.until(total, 90)
        records = reader.settle(2)
    finally:
        reader.close()
    assert_each_once(records, total)
    assert bench.status("cdc-lost")["tasks"][0]["state"] == "RUNNING"
    log = bench.worker.log_text()
    assert log.count("replication connection lost; reconnecting") >= 2, log[-3000:]
    assert "terminating connection due to administrator command" in log
    bench.worker.request("DELETE", "/connectors/cdc-lost")


def test_heartbeats_confirm_the_slot_while_the_captured_table_is_quiet(bench: Bench) -> None:
    """The WAL-retention case Debezium's heartbeats solve: pgoutput sends nothing for tables outside the
    publication; heartbeat records carry the server's position into the offsets, and the slot is confirmed
    past the busy table's WAL."""
    pg = bench.pg
    pg.psql("CREATE TABLE hb_idle (id int PRIMARY KEY); CREATE TABLE hb_busy (id int PRIMARY KEY, pad text)")
    bench.capture("hb", "hb_idle", {"heartbeat.interval.ms": "300"})

    def confirmed() -> int:
        [[lsn]] = pg.psql(
            "SELECT confirmed_flush_lsn - '0/0'::pg_lsn FROM pg_replication_slots WHERE slot_name = 'kc_hb'"
        )
        return int(lsn)

    start = confirmed()
    pg.psql("INSERT INTO hb_busy SELECT g, repeat('x', 200) FROM generate_series(1, 2000) g")
    [[written]] = pg.psql("SELECT pg_current_wal_lsn() - '0/0'::pg_lsn")
    pg.psql("INSERT INTO hb_busy VALUES (0, 'later')")  # WAL beyond the mark
    wait_until(lambda: confirmed() >= int(written), 30, f"the slot confirmed past {written} (from {start})")
    reader = Reader(bench.broker.bootstrap, ["__debezium-heartbeat.hb"])
    try:
        beats = reader.until(1, 30)
    finally:
        reader.close()
    assert beats[0][1]["payload"] == {"serverName": "hb"}
    offsets = bench.worker.get("/connectors/cdc-hb/offsets").json()["offsets"]
    assert int(offsets[0]["offset"]["lsn_proc"]) >= int(written)
    bench.worker.request("DELETE", "/connectors/cdc-hb")


def test_a_slot_taken_while_reconnecting_fails_the_task_after_its_retries(bench: Bench) -> None:
    """Never a silent stall: another client takes the slot while the task is away; the task's reopen
    attempts meet "is active for PID", and after errors.max.retries it fails saying so."""
    pg = bench.pg
    pg.psql("CREATE TABLE taken_t (id int PRIMARY KEY)")
    bench.capture("taken", "taken_t", {"errors.max.retries": "3"})
    wait_until(
        lambda: pg.psql("SELECT active FROM pg_replication_slots WHERE slot_name = 'kc_taken'") == [["t"]],
        30,
        "the task streaming",
    )
    thief = replication_client(pg)
    try:
        cursor = thief.cursor()

        def take() -> bool:
            pg.psql(
                "SELECT pg_terminate_backend(active_pid) FROM pg_replication_slots "
                "WHERE slot_name = 'kc_taken' AND active"
            )
            try:
                cursor.start_replication(
                    slot_name="kc_taken",
                    decode=False,
                    options={"proto_version": "1", "publication_names": "kc_taken_pub"},
                )
            except psycopg2.OperationalError:
                return False
            return True

        wait_until(take, 30, "the slot taken from the task", interval=0.05)
        trace = bench.failure("cdc-taken")
    finally:
        thief.close()
    assert "errors.max.retries=3 attempts to reopen it failed" in trace, trace
    assert 'replication slot "kc_taken" is active for PID' in trace, trace
    bench.worker.request("DELETE", "/connectors/cdc-taken")


def test_a_server_restart_is_survived_losing_and_repeating_nothing(bench: Bench) -> None:
    """Every connection drops (the walsender and the catalog's): the task reconnects with backoff while
    the server is down and resumes after the last change it handed out.

    The server stays "shutting down" until every walsender's client confirmed the shutdown checkpoint or
    ``wal_sender_timeout`` (60 s) ran out, and the other tests' idle connectors, without heartbeats,
    confirm nothing: about 55 s of refused attempts here, more on a loaded machine, which the default
    ``errors.max.retries=10`` (about 65 s of waits) does not always outlast (CI, 2026-11-29). The retries
    are Debezium's default, unlimited, so what is tested is the reconnection, not the server's shutdown."""
    pg = bench.pg
    pg.psql("CREATE TABLE restart_t (id int PRIMARY KEY)")
    bench.capture("restart", "restart_t", {"errors.max.retries": "-1"})
    reader = Reader(bench.broker.bootstrap, ["restart.public.restart_t"])
    try:
        pg.psql("INSERT INTO restart_t SELECT generate_series(0, 49)")
        reader.until(50, 60)
        pg.restart()
        pg.psql("INSERT INTO restart_t SELECT generate_series(50, 99)")
        records = reader.until(100, 90)
        records = reader.settle(2)
    finally:
        reader.close()
    assert_each_once(records, 100)
    assert bench.status("cdc-restart")["tasks"][0]["state"] == "RUNNING"
    assert "replication connection lost; reconnecting" in bench.worker.log_text()
    bench.worker.request("DELETE", "/connectors/cdc-restart")


def test_a_publication_dropped_while_streaming_fails_the_task_naming_it(bench: Bench) -> None:
    """The walsender raises "publication ... does not exist" at the next change it decodes; reconnecting
    cannot cure that (the server decodes with the catalog as of each change), so the task fails at once
    with the server's message, as Debezium's does, never a RUNNING task that delivers nothing."""
    pg = bench.pg
    pg.psql("CREATE TABLE pubdrop_t (id int PRIMARY KEY)")
    name = bench.capture("pubdrop", "pubdrop_t")
    reader = Reader(bench.broker.bootstrap, ["pubdrop.public.pubdrop_t"])
    try:
        pg.psql("INSERT INTO pubdrop_t VALUES (0)")
        reader.until(1, 60)  # streaming
        pg.psql("DROP PUBLICATION kc_pubdrop_pub")
        pg.psql("INSERT INTO pubdrop_t VALUES (1)")
        trace = bench.failure(name)
    finally:
        reader.close()
    assert "streaming from slot 'kc_pubdrop' failed" in trace, trace
    assert 'publication "kc_pubdrop_pub" does not exist' in trace, trace
    bench.worker.request("DELETE", f"/connectors/{name}")
    pg.psql("SELECT pg_drop_replication_slot('kc_pubdrop')")  # the server's max_replication_slots is 10


def test_a_slot_invalidated_while_streaming_fails_the_task_at_once(bench: Bench) -> None:
    """The server removes WAL the slot still needs (``max_slot_wal_keep_size``) and ends its walsender;
    the slot can never be read again ("This slot has been invalidated"). With ``errors.max.retries=-1``
    (retry for ever) the task still fails at once naming it: that error is no lost connection. Last in
    the module: the other tests' idle slots are invalidated too."""
    pg = bench.pg
    pg.psql("CREATE TABLE inval_t (id int PRIMARY KEY); CREATE TABLE inval_other (id int)")
    name = bench.capture("inval", "inval_t", {"errors.max.retries": "-1"})
    wait_until(
        lambda: pg.psql("SELECT active FROM pg_replication_slots WHERE slot_name = 'kc_inval'") == [["t"]],
        30,
        "the task streaming",
    )
    pg.psql("ALTER SYSTEM SET max_slot_wal_keep_size = '1MB'")
    try:
        pg.psql("SELECT pg_reload_conf()")
        for _ in range(3):  # WAL the slot keeps (nothing in it is captured, so nothing confirms it)
            pg.psql("INSERT INTO inval_other SELECT generate_series(1, 1000)")
            pg.psql("SELECT pg_switch_wal()")
        pg.psql("CHECKPOINT")
        assert pg.psql("SELECT wal_status FROM pg_replication_slots WHERE slot_name = 'kc_inval'") == [
            ["lost"]
        ]
        trace = bench.failure(name)
    finally:
        pg.psql("ALTER SYSTEM RESET max_slot_wal_keep_size")
        pg.psql("SELECT pg_reload_conf()")
    assert "starting replication from slot 'kc_inval' failed" in trace, trace
    assert "This slot has been invalidated" in trace, trace
    bench.worker.request("DELETE", f"/connectors/{name}")
