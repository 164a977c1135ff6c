"""Which reader a sink task's query uses, and what Spark's Kafka source is given (``spark_kafka``)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.dataplane import spark_kafka
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from tests.support.spark import local_spark


@pytest.mark.parametrize(
    ("available", "props", "spark", "why"),
    [
        (False, {}, False, "not on the worker's Spark classpath"),
        (True, {}, True, "is on the worker's Spark classpath"),
        (True, {"max.poll.records": "1000", "isolation.level": "read_committed"}, True, "is on"),
        (True, {"sasl.jaas.config": "S3cr3t required;"}, False, "sasl.jaas.config"),
        (True, {"ssl.truststore.password": "S3cr3t"}, False, "ssl.truststore.password"),
        (
            True,
            {"ssl.key.password": "S3cr3t", "ssl.keystore.key": "S3cr3t-k"},
            False,
            "ssl.key.password, ssl.keystore.key",
        ),
        (True, {"sasl.oauthbearer.token.endpoint.url": "S3cr3t-u"}, False, "token"),
        (True, {"sasl.client.callback.handler.class": "C", "ssl.keystore.location": "/k"}, True, "is on"),
    ],
)
def test_the_reader_is_sparks_source_where_it_is_loaded_and_no_credential_would_be_handed_to_it(
    available: bool, props: dict[str, str], spark: bool, why: str
) -> None:
    reader = spark_kafka.choose(available, props)
    assert reader.spark_kafka is spark
    assert why in reader.reason
    assert "S3cr3t" not in reader.reason  # names only, never a secret's value


def test_options_carry_the_start_the_assignment_the_bound_and_the_consumer_settings_spark_accepts() -> None:
    start = {("a-b", 1): 7, ("a-b", 0): 5, ("z", 0): 0}
    props = {
        "isolation.level": "read_committed",
        "group.id": "mine",
        "auto.offset.reset": "latest",
        "enable.auto.commit": "true",
        "key.deserializer": "K",
        "value.deserializer": "V",
        "interceptor.classes": "I",
        "bootstrap.servers": "elsewhere:9092",
    }
    options = spark_kafka.source_options(props, "broker:9092", start, 1000, "kconnect-c-0")
    assert json.loads(options["startingOffsets"]) == {"a-b": {"0": 5, "1": 7}, "z": {"0": 0}}
    assert json.loads(options["assign"]) == {"a-b": [0, 1], "z": [0]}
    assert options["maxOffsetsPerTrigger"] == "3000"
    assert options["kafka.bootstrap.servers"] == "broker:9092"  # the worker's, as the Python reader's
    assert options["kafka.isolation.level"] == "read_committed"
    assert options["failOnDataLoss"] == "false"
    assert options["includeHeaders"] == "true"
    assert options["groupIdPrefix"] == "kconnect-c-0"
    refused = {f"kafka.{k}" for k in spark_kafka.SPARK_OWNS}
    assert not refused & set(options)
    # A short broker-side wait for Spark's pooled consumers, unless the task's settings name one.
    assert options["kafka.fetch.max.wait.ms"] == str(spark_kafka.FETCH_MAX_WAIT_MS)
    mine = spark_kafka.source_options(
        {"fetch.max.wait.ms": "300", "isolation.level": "read_uncommitted"}, "b:9092", start, 1, "p"
    )
    assert mine["kafka.fetch.max.wait.ms"] == "300"
    # Committed records only unless the task says otherwise, as the Python reader's consumers.
    assert mine["kafka.isolation.level"] == "read_uncommitted"
    assert (
        spark_kafka.source_options({}, "b:9092", start, 1, "p")["kafka.isolation.level"] == "read_committed"
    )


offsets = st.dictionaries(
    st.tuples(st.text("ab-.x_0", min_size=1, max_size=6), st.integers(0, 50)),
    st.integers(0, 2**40),
    max_size=8,
)


@given(offsets)
def test_spark_offsets_and_assignment_name_every_partition_once(start: dict[tuple[str, int], int]) -> None:
    spelled = json.loads(spark_kafka.spark_offsets(start))
    back = {(t, int(p)): o for t, parts in spelled.items() for p, o in parts.items()}
    assert back == start
    assigned = json.loads(spark_kafka.spark_assignment(start))
    assert sorted((t, p) for t, parts in assigned.items() for p in parts) == sorted(start)


class _Reader:
    """The driver-side reader's partition listing, as the watch sees it."""

    def __init__(self, partitions: list[tuple[str, int]]) -> None:
        self.partitions = partitions
        self.stopped = False
        self.asked = 0

    def assigned(self) -> list[tuple[str, int]]:
        self.asked += 1
        return list(self.partitions)

    def stop(self) -> None:
        self.stopped = True


class _Log:
    def __init__(self) -> None:
        self.lines: list[tuple[str, dict[str, Any]]] = []

    def info(self, event: str, **kw: Any) -> None:
        self.lines.append((event, kw))


def test_the_watch_restarts_a_query_for_partitions_it_was_not_given_at_most_every_few_seconds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [100.0]
    monkeypatch.setattr(spark_kafka.time, "monotonic", lambda: now[0])
    reader, log = _Reader([("t", 0)]), _Log()
    watch = spark_kafka.PartitionWatch(reader, frozenset({("t", 0)}))
    assert not watch.changed(log) and reader.asked == 0  # not due yet
    now[0] += spark_kafka.PARTITION_CHECK_S
    assert not watch.changed(log) and reader.asked == 1  # due, unchanged
    reader.partitions = [("t", 0), ("t", 1), ("u", 0)]
    now[0] += 1
    assert not watch.changed(log)  # changed, but not due
    now[0] += spark_kafka.PARTITION_CHECK_S
    assert watch.changed(log)
    assert log.lines == [
        (
            "the task's partitions changed; its query restarts with them",
            {"added": ["t-1", "u-0"], "removed": []},
        )
    ]
    watch.close()
    assert reader.stopped


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    return local_spark()


def test_sparks_kafka_rows_become_the_raw_rows_the_sink_prepares(spark) -> None:  # type: ignore[no-untyped-def]
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    # Spark's Kafka source's schema with includeHeaders (KafkaRecordToRowConverter).
    kafka = StructType(
        [
            StructField("key", BinaryType()),
            StructField("value", BinaryType()),
            StructField("topic", StringType()),
            StructField("partition", IntegerType()),
            StructField("offset", LongType()),
            StructField("timestamp", TimestampType()),
            StructField("timestampType", IntegerType()),
            StructField(
                "headers",
                ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
            ),
        ]
    )
    at = dt.datetime(2026, 11, 29, 12, 0, 0, 123000, tzinfo=dt.UTC)
    none = dt.datetime.fromtimestamp(-0.001, dt.UTC)  # Kafka's -1: no timestamp
    rows = [
        (b"k", b"v", "t", 0, 5, at, 0, [("h", b"1")]),
        (None, None, "t", 1, 9, none, 0, None),
    ]
    frame = spark.createDataFrame(rows, kafka).select(*spark_kafka.raw_columns())
    # The same columns and types (Spark's source knows a column is never null where the reader cannot).
    assert [(f.name, f.dataType.simpleString()) for f in frame.schema.fields] == [
        (f.name, f.dataType.simpleString()) for f in RAW_SCHEMA.fields
    ]
    got = [tuple(r) for r in frame.collect()]
    assert got[0][:6] == ("t", 0, 5, int(at.timestamp() * 1000), b"k", b"v")
    assert [tuple(h) for h in got[0][6]] == [("h", b"1")]
    assert got[1] == ("t", 1, 9, -1, None, None, [])
