"""The Schema Registry converters against a real registry server: Apicurio Registry 2.0.2.Final, whose
Confluent-compatible API the converters and confluent-kafka's serializers both talk to
(tests/support/schema_registry_server.py builds it from Maven Central; ``make registry``).

One kconnect worker on local Spark whose worker properties name Confluent's AvroConverter and the
registry's URL, as a user's ``connect-distributed.properties`` would; a real PostgreSQL server:

- records written by confluent-kafka's Avro, Protobuf and JSON Schema serializers land in the JDBC sink's
  tables with every field's value and column type (Avro through the worker's converter, the other two
  through connector overrides);
- rows a JDBC source reads leave through the converters and are read back by confluent-kafka's Avro and
  JSON Schema deserializers; a column added to the table is a new schema version that flows on; a change
  the registry refuses (the subject's compatibility set to BACKWARD, a column's type changed) fails the
  task with the registry's message;
- Avro records make an Iceberg table (Spark's Iceberg runtime) typed from their schema, and a later
  version of the schema (a field added with a default, an int widened to a long) evolves it;
- a record framed with an id the registry does not know is dead-lettered with the registry's answer;
- while the registry is down a sink that needs a schema retries (its converter, then its batch), and
  once the registry is back every record arrives.

Not here: bad credentials (the registry's authentication is Keycloak's OpenID Connect, which no package
registry here serves; the converters' credentials settings are unit-tested), and JSON Schema
compatibility rules (the server is built without everit's JSON Schema library, which Maven Central does
not serve: see tests/schema-registry/pom.xml).
"""

from __future__ import annotations

import datetime as dt
import decimal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, Producer
from confluent_kafka.schema_registry import SchemaRegistryClient
from confluent_kafka.schema_registry.avro import AvroDeserializer, AvroSerializer
from confluent_kafka.schema_registry.json_schema import JSONDeserializer, JSONSerializer
from confluent_kafka.schema_registry.protobuf import ProtobufSerializer
from confluent_kafka.serialization import MessageField, SerializationContext
from google.protobuf import descriptor_pb2, timestamp_pb2
from google.protobuf.descriptor_pool import DescriptorPool
from google.protobuf.message_factory import GetMessageClass
from pyspark.sql import SparkSession

from kconnect.runtime.cli.broker import free_port
from kconnect.runtime.dataplane.schema_registry.wire import frame
from tests.support.apache_kafka import Broker, one_record_batches
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.lakehouse_jars import spark_properties
from tests.support.lakehouse_reader import rows_unless_evolved_meanwhile
from tests.support.postgres import DRIVER_JAR, PASSWORD, USER, PostgresServer, start_postgres
from tests.support.schema_registry_server import RegistryServer, start_registry
from tests.support.topics import create_topic

pytestmark = pytest.mark.integration

AVRO = "io.confluent.connect.avro.AvroConverter"
PROTOBUF = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA = "io.confluent.connect.json.JsonSchemaConverter"

ORDER_AVRO = """{
  "type": "record", "name": "Order", "namespace": "shop",
  "fields": [
    {"name": "id", "type": "int"},
    {"name": "customer", "type": ["null", "string"], "default": null},
    {"name": "amount", "type": "double"},
    {"name": "paid", "type": "boolean"},
    {"name": "qty", "type": "long"},
    {"name": "price", "type": {"type": "bytes", "logicalType": "decimal", "precision": 10, "scale": 2}},
    {"name": "day", "type": {"type": "int", "logicalType": "date"}},
    {"name": "at", "type": {"type": "long", "logicalType": "timestamp-millis"}}
  ]
}"""
#: 2026-11-22T10:00:00Z: the instant must survive the converter, Spark, the driver and the column.
AT = dt.datetime(2026, 11, 22, 10, 0, tzinfo=dt.UTC)


def order(n: int) -> dict[str, Any]:
    return {
        "id": n,
        "customer": None if n % 3 == 0 else f"c{n}",
        "amount": n * 1.5,
        "paid": n % 2 == 0,
        "qty": 10_000_000_000 + n,
        "price": decimal.Decimal(f"{n}.25"),
        "day": dt.date(2026, 11, 1) + dt.timedelta(days=n),
        "at": AT + dt.timedelta(seconds=n),
    }


def ctx(topic: str) -> SerializationContext:
    return SerializationContext(topic, MessageField.VALUE)


def reading_class() -> Any:
    """A Protobuf message built at run time (what protoc would generate): scalars and a Timestamp."""
    file = descriptor_pb2.FileDescriptorProto(
        name="reading.proto",
        package="plant",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    reading = file.message_type.add(name="Reading")
    t = descriptor_pb2.FieldDescriptorProto
    reading.field.add(name="id", number=1, type=t.TYPE_INT32, label=t.LABEL_OPTIONAL)
    reading.field.add(name="sensor", number=2, type=t.TYPE_STRING, label=t.LABEL_OPTIONAL)
    reading.field.add(name="value", number=3, type=t.TYPE_DOUBLE, label=t.LABEL_OPTIONAL)
    reading.field.add(name="ok", number=4, type=t.TYPE_BOOL, label=t.LABEL_OPTIONAL)
    reading.field.add(
        name="at",
        number=5,
        type=t.TYPE_MESSAGE,
        label=t.LABEL_OPTIONAL,
        type_name=".google.protobuf.Timestamp",
    )
    pool = DescriptorPool()
    pool.AddSerializedFile(timestamp_pb2.DESCRIPTOR.serialized_pb)
    pool.Add(file)
    return GetMessageClass(pool.FindMessageTypeByName("plant.Reading"))


class Bench:
    def __init__(
        self,
        worker: WorkerProcess,
        pg: PostgresServer,
        registry: RegistryServer,
        bootstrap: str,
        workdir: Path,
    ) -> None:
        self.worker = worker
        self.pg = pg
        self.registry = registry
        self.bootstrap = bootstrap
        self.workdir = workdir

    def client(self) -> SchemaRegistryClient:
        return SchemaRegistryClient({"url": self.registry.url})

    def topic(self, prefix: str) -> str:
        name = f"{prefix}-{uuid.uuid4().hex[:6]}"
        create_topic(self.bootstrap, name)
        return name

    def produce(self, topic: str, values: list[bytes]) -> None:
        producer = Producer({"bootstrap.servers": self.bootstrap, **one_record_batches()})
        for value in values:
            producer.produce(topic, value=value)
        assert producer.flush(10) == 0

    def consume(self, topic: str, count: int, timeout: float = 120, raw: bool = False) -> list[Any]:
        """The first ``count`` values of ``topic`` (the messages themselves when ``raw``)."""
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": f"read-{uuid.uuid4().hex[:6]}",
                "auto.offset.reset": "earliest",
            }
        )
        consumer.subscribe([topic])
        values: list[Any] = []
        deadline = time.monotonic() + timeout
        try:
            while len(values) < count and time.monotonic() < deadline:
                message = consumer.poll(0.5)
                if message is not None and message.error() is None and message.value() is not None:
                    values.append(message if raw else message.value())
        finally:
            consumer.close()
        assert len(values) >= count, f"{len(values)} of {count} records on {topic}"
        return values

    def create(self, name: str, config: dict[str, str]) -> None:
        full = {
            "tasks.max": "1",
            "connection.url": self.pg.jdbc_url,
            "connection.user": USER,
            "connection.password": PASSWORD,
            **config,
        }
        resp = self.worker.request("POST", "/connectors", json={"name": name, "config": full})
        assert resp.status_code == 201, resp.text

    def sink(self, name: str, topic: str, **overrides: str) -> None:
        self.create(
            name,
            {
                "connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
                "topics": topic,
                "auto.create": "true",
                **{k.replace("_", "."): v for k, v in overrides.items()},
            },
        )

    def task(self, name: str) -> dict[str, Any]:
        resp = self.worker.get(f"/connectors/{name}/status")
        tasks = resp.json().get("tasks") if resp.status_code == 200 else None
        return dict(tasks[0]) if tasks else {}

    def rows(self, sql: str) -> list[list[str]]:
        try:
            return self.pg.psql(sql)
        except RuntimeError as exc:
            if "does not exist" in str(exc):  # the task has not created the table yet
                return []
            raise

    def columns(self, table: str) -> list[list[str]]:
        return self.rows(
            "SELECT column_name, data_type, is_nullable FROM information_schema.columns "
            f"WHERE table_name = '{table}' ORDER BY ordinal_position"
        )


@pytest.fixture(scope="module")
def bench(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[Bench]:
    workdir: Path = tmp_path_factory.mktemp("registry-live")
    pg = start_postgres()
    # File storage, so that the outage test's restarted registry still knows the schemas (as a real
    # deployment's would); the port stays the one the converters name.
    registry = start_registry(workdir, data=workdir / "registry-db")
    props = worker_properties(broker.bootstrap, f"srlive-{uuid.uuid4().hex[:8]}", free_port())
    lakehouse = spark_properties()  # the Iceberg sink's test writes a table with Spark's Iceberg runtime
    props.update(
        {
            **lakehouse,
            # What a user's connect-distributed.properties says for Avro values through a registry.
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": AVRO,
            "value.converter.schema.registry.url": registry.url,
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "spark.jars": f"{DRIVER_JAR},{lakehouse['spark.jars']}",
            "offset.flush.interval.ms": "1000",
            **one_record_batches("producer."),
        }
    )
    worker = WorkerProcess(workdir, props, name="srlive-w0", spark=True).start()
    bench = Bench(worker, pg, registry, broker.bootstrap, workdir)
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        yield bench
    finally:
        worker.stop(60)
        print(worker.log_text()[-3000:])
        bench.registry.stop()
        pg.stop()


def test_avro_records_from_confluents_serializer_land_in_postgresql_with_their_types(bench: Bench) -> None:
    topic = bench.topic("orders")
    serialize = AvroSerializer(bench.client(), ORDER_AVRO)
    bench.produce(topic, [serialize(order(n), ctx(topic)) for n in range(6)])
    bench.sink("sr-avro-jdbc", topic)  # the worker's converter: Avro through the registry
    wait_until(lambda: len(bench.rows(f'SELECT id FROM "{topic}"')) >= 6, 150, "6 rows in PostgreSQL")
    assert bench.columns(topic) == [
        ["id", "integer", "NO"],
        ["customer", "text", "YES"],
        ["amount", "double precision", "NO"],
        ["paid", "boolean", "NO"],
        ["qty", "bigint", "NO"],
        ["price", "numeric", "NO"],
        ["day", "date", "NO"],
        ["at", "timestamp with time zone", "NO"],
    ]
    rows = bench.rows(
        f"SELECT id, coalesce(customer, '-'), amount, paid, qty, price, day, extract(epoch FROM at)::bigint "
        f'FROM "{topic}" ORDER BY id'
    )
    expected = []
    for n in range(6):
        o = order(n)
        expected.append(
            [
                str(n),
                o["customer"] or "-",
                f"{o['amount']:g}",
                "t" if o["paid"] else "f",
                str(o["qty"]),
                str(o["price"]),
                o["day"].isoformat(),
                str(int(o["at"].timestamp())),
            ]
        )
    assert rows == expected
    assert bench.task("sr-avro-jdbc").get("state") == "RUNNING"


def test_protobuf_and_json_schema_records_land_through_connector_overrides(bench: Bench) -> None:
    pb_topic, js_topic = bench.topic("readings"), bench.topic("events")
    reading = reading_class()

    def message(n: int) -> Any:
        m = reading(id=n, sensor=f"s{n}", value=n / 4, ok=n % 2 == 1)
        m.at.seconds = int(AT.timestamp()) + n
        return m

    pb = ProtobufSerializer(reading, bench.client(), {"use.deprecated.format": False})
    bench.produce(pb_topic, [pb(message(n), ctx(pb_topic)) for n in range(4)])
    event_schema = (
        '{"type": "object", "title": "Event", "properties": {'
        '"id": {"type": "integer"}, "kind": {"type": "string"}, "weight": {"type": "number"}, '
        '"flag": {"type": "boolean"}}, "required": ["id", "kind"]}'
    )
    js = JSONSerializer(event_schema, bench.client())
    bench.produce(
        js_topic,
        [js({"id": n, "kind": f"k{n}", "weight": n + 0.5, "flag": n == 1}, ctx(js_topic)) for n in range(4)],
    )
    for name, topic, converter in (("sr-pb-jdbc", pb_topic, PROTOBUF), ("sr-js-jdbc", js_topic, JSON_SCHEMA)):
        bench.sink(
            name,
            topic,
            value_converter=converter,
            value_converter_schema_registry_url=bench.registry.url,
        )
    wait_until(lambda: len(bench.rows(f'SELECT id FROM "{pb_topic}"')) >= 4, 150, "4 Protobuf rows")
    wait_until(lambda: len(bench.rows(f'SELECT id FROM "{js_topic}"')) >= 4, 150, "4 JSON Schema rows")
    # Confluent's ProtobufData: every field optional (proto3 has no required fields); a Timestamp message a
    # Connect Timestamp.
    assert bench.columns(pb_topic) == [
        ["id", "integer", "YES"],
        ["sensor", "text", "YES"],
        ["value", "double precision", "YES"],
        ["ok", "boolean", "YES"],
        ["at", "timestamp with time zone", "YES"],
    ]
    assert bench.rows(
        f'SELECT id, sensor, value, ok, extract(epoch FROM at)::bigint FROM "{pb_topic}" ORDER BY id'
    ) == [
        [str(n), f"s{n}", f"{n / 4:g}", "t" if n % 2 else "f", str(int(AT.timestamp()) + n)] for n in range(4)
    ]
    # Confluent's JsonSchemaData: integer is int64, number float64; a property not required is still a
    # required field unless use.optional.for.nonrequired says otherwise (its default is false).
    assert bench.columns(js_topic) == [
        ["id", "bigint", "NO"],
        ["kind", "text", "NO"],
        ["weight", "double precision", "NO"],
        ["flag", "boolean", "NO"],
    ]
    assert bench.rows(f'SELECT id, kind, weight, flag FROM "{js_topic}" ORDER BY id') == [
        [str(n), f"k{n}", f"{n + 0.5:g}", "t" if n == 1 else "f"] for n in range(4)
    ]


def test_source_records_are_read_by_confluents_deserializers_and_evolve_until_refused(bench: Bench) -> None:
    table = f"parts_{uuid.uuid4().hex[:6]}"
    bench.pg.psql(
        f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, name TEXT NOT NULL, weight DOUBLE PRECISION); "
        f"INSERT INTO {table} VALUES (1, 'bolt', 0.5), (2, 'nut', NULL);"
    )
    common = {
        "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
        "mode": "incrementing",
        "incrementing.column.name": "id",
        "table.whitelist": table,
        "poll.interval.ms": "500",
    }
    bench.create("sr-avro-source", {**common, "topic.prefix": "avro-"})
    bench.create(
        "sr-json-source",
        {
            **common,
            "topic.prefix": "json-",
            "value.converter": JSON_SCHEMA,
            "value.converter.schema.registry.url": bench.registry.url,
        },
    )
    avro_topic, json_topic = f"avro-{table}", f"json-{table}"
    read_avro = AvroDeserializer(bench.client())
    values = [read_avro(v, ctx(avro_topic)) for v in bench.consume(avro_topic, 2)]
    assert values == [{"id": 1, "name": "bolt", "weight": 0.5}, {"id": 2, "name": "nut", "weight": None}]
    read_json = JSONDeserializer(None, schema_registry_client=bench.client())
    values = [read_json(v, ctx(json_topic)) for v in bench.consume(json_topic, 2)]
    assert values == [{"id": 1, "name": "bolt", "weight": 0.5}, {"id": 2, "name": "nut", "weight": None}]

    # A nullable column added: a new version of the subject (the added field optional, defaulting to null).
    bench.pg.psql(
        f"ALTER TABLE {table} ADD COLUMN colour TEXT; INSERT INTO {table} VALUES (3, 'gear', 2.0, 'red');"
    )
    values = [read_avro(v, ctx(avro_topic)) for v in bench.consume(avro_topic, 3)]
    assert values[2] == {"id": 3, "name": "gear", "weight": 2.0, "colour": "red"}
    subject = f"{avro_topic}-value"
    assert bench.client().get_versions(subject) == [1, 2]

    # A change the registry refuses under BACKWARD compatibility: the task fails with the registry's words.
    resp = httpx.put(f"{bench.registry.url}/config/{subject}", json={"compatibility": "BACKWARD"}, timeout=10)
    assert resp.status_code == 200, resp.text
    bench.pg.psql(
        f"ALTER TABLE {table} ALTER COLUMN name TYPE INTEGER USING length(name); "
        f"INSERT INTO {table} VALUES (4, 7, 1.0, 'blue');"
    )

    def failed() -> Any:
        state = bench.task("sr-avro-source")
        return state.get("state") == "FAILED" and state

    state = wait_until(failed, 120, "the Avro source task FAILED on the refused schema")
    assert "Incompatible" in state["trace"] and subject in state["trace"], state["trace"]
    assert bench.client().get_versions(subject) == [1, 2]


def test_a_registry_outage_is_retried_and_every_record_arrives(bench: Bench) -> None:
    topic = bench.topic("outage")
    schema = ORDER_AVRO.replace('"name": "Order"', '"name": "Shipment"')
    serialize = AvroSerializer(bench.client(), schema)
    bench.produce(topic, [serialize(order(n), ctx(topic)) for n in range(5)])
    port, data = bench.registry.port, bench.workdir / "registry-db"
    bench.registry.stop()
    try:
        # A new connector's converter has never seen the schema: it must ask the registry, which is down.
        bench.sink("sr-outage-jdbc", topic)
        time.sleep(8)
        assert bench.rows(f'SELECT id FROM "{topic}"') == []
        assert bench.task("sr-outage-jdbc").get("state") != "FAILED", bench.task("sr-outage-jdbc")
    finally:
        bench.registry = start_registry(bench.workdir, port=port, data=data)
    wait_until(lambda: len(bench.rows(f'SELECT id FROM "{topic}"')) >= 5, 150, "5 rows after the outage")
    assert bench.rows(f'SELECT count(*), count(DISTINCT id) FROM "{topic}"') == [["5", "5"]]
    assert bench.task("sr-outage-jdbc").get("state") == "RUNNING"


LEVEL_V1 = ORDER_AVRO.replace(
    '{"name": "id", "type": "int"},', '{"name": "id", "type": "int"}, {"name": "level", "type": "int"},'
)
#: The next version: ``level`` widened to long, ``note`` added with a default (Avro resolves v1 records).
LEVEL_V2 = LEVEL_V1.replace('{"name": "level", "type": "int"}', '{"name": "level", "type": "long"}').replace(
    '"fields": [', '"fields": [{"name": "note", "type": ["null", "string"], "default": null}, ', 1
)


def test_avro_records_make_an_iceberg_table_typed_from_their_schema_and_evolve_it(
    bench: Bench, reader: tuple[SparkSession, Path]
) -> None:
    spark, warehouse = reader
    topic = bench.topic("iceberg")
    table = f"kc.{topic.replace('-', '_')}"
    first = AvroSerializer(bench.client(), LEVEL_V1)
    bench.produce(topic, [first({**order(n), "level": n}, ctx(topic)) for n in range(3)])
    bench.create(
        "sr-avro-iceberg",
        {
            "connector.class": "IcebergSinkConnector",
            "topics": topic,
            "iceberg.tables": table,
            "iceberg.tables.auto-create-enabled": "true",
            "iceberg.tables.evolve-schema-enabled": "true",
            "iceberg.control.commit.interval-ms": "1000",
            "iceberg.catalog.type": "hadoop",
            "iceberg.catalog.warehouse": str(warehouse / "iceberg"),
        },
    )

    def rows() -> list[tuple[Any, ...]]:
        if not (warehouse / "iceberg" / Path(*table.split(".")) / "metadata").is_dir():
            return []
        return rows_unless_evolved_meanwhile(spark, f"SELECT * FROM chk.{table} ORDER BY id") or []

    wait_until(lambda: len(rows()) >= 3, 150, "3 rows in the Iceberg table")
    types = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE chk.{table}").collect() if r[0] and r[1]}
    assert {
        k: types.get(k) for k in ("id", "level", "customer", "amount", "paid", "qty", "price", "day", "at")
    } == {
        "id": "int",
        "level": "int",
        "customer": "string",
        "amount": "double",
        "paid": "boolean",
        "qty": "bigint",
        # A Connect Decimal carries its scale only: precision 38, as Apache Iceberg's sink creates it.
        "price": "decimal(38,2)",
        "day": "date",
        "at": "timestamp",
    }
    second = AvroSerializer(bench.client(), LEVEL_V2)
    bench.produce(
        topic, [second({**order(n), "level": 2**40 + n, "note": f"v2-{n}"}, ctx(topic)) for n in range(3, 5)]
    )
    wait_until(lambda: len(rows()) >= 5, 150, "5 rows in the Iceberg table")
    got = spark.sql(f"SELECT id, level, note, price, at FROM chk.{table} ORDER BY id").collect()
    assert [(r[0], r[1], r[2], str(r[3])) for r in got] == [
        (0, 0, None, "0.25"),
        (1, 1, None, "1.25"),
        (2, 2, None, "2.25"),
        (3, 2**40 + 3, "v2-3", "3.25"),
        (4, 2**40 + 4, "v2-4", "4.25"),
    ]
    assert [r[4].timestamp() for r in got] == [(AT + dt.timedelta(seconds=n)).timestamp() for n in range(5)]
    types = {r[0]: r[1] for r in spark.sql(f"DESCRIBE TABLE chk.{table}").collect() if r[0] and r[1]}
    assert types["level"] == "bigint" and types["note"] == "string", types
    assert bench.task("sr-avro-iceberg").get("state") == "RUNNING"


def test_an_id_the_registry_does_not_know_is_dead_lettered_with_its_answer(bench: Bench) -> None:
    topic, dlq = bench.topic("unknown-id"), f"dlq-{uuid.uuid4().hex[:6]}"
    good = AvroSerializer(bench.client(), ORDER_AVRO)(order(1), ctx(topic))
    assert good is not None
    unknown = frame(987_654, good[5:])  # the same Avro body under an id the registry never gave
    bench.produce(topic, [unknown, good])
    bench.sink(
        "sr-unknown-id",
        topic,
        errors_tolerance="all",
        errors_deadletterqueue_topic_name=dlq,
        errors_deadletterqueue_topic_replication_factor="1",
        errors_deadletterqueue_context_headers_enable="true",
    )
    [letter] = bench.consume(dlq, 1, raw=True)
    headers = {k: (v or b"").decode() for k, v in letter.headers() or []}
    assert letter.value() == unknown
    assert (
        headers["__connect.errors.offset"] == "0" and headers["__connect.errors.stage"] == "VALUE_CONVERTER"
    )
    assert "987654" in headers["__connect.errors.exception.message"], headers
    # The good record beside it arrives; the task stays RUNNING.
    wait_until(lambda: bench.rows(f'SELECT id FROM "{topic}"') == [["1"]], 150, "the good record's row")
    assert bench.task("sr-unknown-id").get("state") == "RUNNING"
