"""kconnect's PostgreSQL CDC records against Debezium's own, field by field, for the same changes.

One PostgreSQL (``wal_level=logical``), the suite's Apache Kafka broker, Debezium 3.6.1.Final's PostgreSQL
connector on an Apache Kafka Connect 4.x worker (``tests/support/debezium.py``, fetched from Maven Central)
and a kconnect worker, each with its own slot and publication, capture one table of many types: a snapshot
row, then an insert, an update and a delete. Keys, schemas (the topic prefix aside) and ``before``/``after``
/``op`` must be equal; in ``source``, everything but what names the writer, the clock or the snapshot's
own transaction.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.debezium import CONNECTOR_CLASS, debezium_worker
from tests.support.postgres import DATABASE, PASSWORD, USER, start_postgres

pytestmark = pytest.mark.integration

TABLE_SQL = (
    "CREATE TYPE hue AS ENUM ('red', 'green'); "
    "CREATE TABLE kinds (id bigint PRIMARY KEY, small smallint NOT NULL, i int, r real, d double precision, "
    "n numeric(12,3), nv numeric, t text NOT NULL, vc varchar(20), c char(3), b bytea, flag boolean, "
    "day date, tm time, tm3 time(3), ts timestamp, ts3 timestamp(3), tstz timestamptz, u uuid, j json, "
    "jb jsonb, h hue, ints int[], texts text[])"
)
ROW_1 = (
    "INSERT INTO kinds VALUES (1, 2, 3, 1.5, 2.25, 123.456, 7.125, 'text', 'vc', 'abc', '\\xdead', true, "
    "'2026-11-28', '08:30:00.123456', '08:30:00.123', '2026-11-28 08:00:00.654321', '2026-11-28 08:00:00.5', "
    "'2026-11-28 09:00:00.25+01', 'ef9b5beb-9c21-4d66-a769-47207c205bbe', '{\"a\": 1}', '{\"b\": [1, 2]}', "
    "'green', '{1,2,3}', '{x,\"y z\",NULL}')"
)


def read(bootstrap: str, topic: str, count: int, timeout: float) -> list[tuple[Any, Any]]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"cmp-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    consumer.subscribe([topic])
    records: list[tuple[Any, Any]] = []

    def enough() -> bool:
        for m in consumer.consume(num_messages=100, timeout=0.5):
            if m.error() is None:
                key, value = m.key(), m.value()
                records.append((key and json.loads(key), value and json.loads(value)))
        return len(records) >= count

    try:
        wait_until(enough, timeout, f"{count} records in {topic} (have {len(records)})", interval=0)
    finally:
        consumer.close()
    return records


def normalized(record: tuple[Any, Any], prefix: str) -> tuple[Any, Any]:
    """A record with the topic prefix in schema names replaced, and the fields that name the writer, the
    clock or the snapshot's transaction dropped."""
    text = json.dumps(record).replace(f'"{prefix}.public.kinds.', '"P.public.kinds.')
    key, value = json.loads(text)
    if value is not None:
        payload = value["payload"]
        for name in ("ts_ms", "ts_us", "ts_ns"):
            payload.pop(name)
        source = payload["source"]
        for name in ("version", "name", "ts_ms", "ts_us", "ts_ns"):
            source.pop(name)
        if payload["op"] == "r":
            for name in ("txId", "lsn", "sequence", "snapshot"):
                source.pop(name)
    return key, value


def differences(a: Any, b: Any, path: str = "") -> list[str]:
    """Where two JSON trees differ, as paths with both values."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b), key=str):
            if key not in a or key not in b:
                found.append(f"{path}.{key}: {a.get(key, '<absent>')!r} != {b.get(key, '<absent>')!r}")
            else:
                found.extend(differences(a[key], b[key], f"{path}.{key}"))
        return found
    if isinstance(a, list | tuple) and isinstance(b, list | tuple) and len(a) == len(b):
        return [
            d for i, (x, y) in enumerate(zip(a, b, strict=True)) for d in differences(x, y, f"{path}[{i}]")
        ]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_kconnect_writes_what_debezium_writes(tmp_path: Path, broker: Broker) -> None:
    pg = start_postgres(logical=True)
    kc_worker = None
    try:
        for statement in TABLE_SQL.split("; "):
            pg.psql(statement)
        pg.psql(ROW_1)
        common = {
            "database.hostname": "127.0.0.1",
            "database.port": str(pg.port),
            "database.user": USER,
            "database.password": PASSWORD,
            "database.dbname": DATABASE,
            "plugin.name": "pgoutput",
            "table.include.list": "public.kinds",
            "tasks.max": "1",
        }
        props = worker_properties(broker.bootstrap, f"cmp-kc-{uuid.uuid4().hex[:6]}", free_port())
        props.update({"key.converter.schemas.enable": "true", "value.converter.schemas.enable": "true"})
        kc_worker = WorkerProcess(tmp_path, props, name="kc", spark=True).start()
        with debezium_worker(
            broker.bootstrap, f"cmp-dbz-{uuid.uuid4().hex[:6]}", tmp_path / "dbz.log"
        ) as dbz:
            config = {**common, "topic.prefix": "dbz", "slot.name": "dbz_slot", "publication.name": "dbz_pub"}
            resp = dbz.rest(
                "POST",
                "/connectors",
                json={"name": "dbz", "config": {"connector.class": CONNECTOR_CLASS, **config}},
            )
            assert resp.status_code == 201, resp.text
            wait_until(lambda: (kc_worker.workers() or {}).get("generation", -1) >= 0, 90, "kconnect joined")
            config = {**common, "topic.prefix": "kc", "slot.name": "kc_slot", "publication.name": "kc_pub"}
            resp = kc_worker.request(
                "POST",
                "/connectors",
                json={"name": "kc", "config": {"connector.class": CONNECTOR_CLASS, **config}},
            )
            assert resp.status_code == 201, resp.text
            read(broker.bootstrap, "dbz.public.kinds", 1, 180)
            read(broker.bootstrap, "kc.public.kinds", 1, 90)
            pg.psql(ROW_1.replace("VALUES (1,", "VALUES (2,"))
            pg.psql("UPDATE kinds SET t = 'changed', n = NULL WHERE id = 2")
            pg.psql("DELETE FROM kinds WHERE id = 2")
            theirs = read(broker.bootstrap, "dbz.public.kinds", 5, 120)
            ours = read(broker.bootstrap, "kc.public.kinds", 5, 120)
        (tmp_path / "records.json").write_text(json.dumps({"kconnect": ours, "debezium": theirs}))
        found = [
            f"record {index}: {d}"
            for index, (mine, debeziums) in enumerate(zip(ours, theirs, strict=True))
            for d in differences(normalized(mine, "kc"), normalized(debeziums, "dbz"))
        ]
        assert found == [], "\n".join(found)
    finally:
        if kc_worker is not None and kc_worker.alive():
            kc_worker.stop(60)
        pg.stop()
