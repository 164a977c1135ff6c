"""The worker placement of sink tasks (``dataplane.sink_loop``), its pure parts: where a task runs, and the
records a consumer loop hands ``put``, which must be the very records a query would hand it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from connectors.file import FileStreamSinkTask
from connectors.parquet import ParquetSinkTask
from kconnect.config.worker_keys import SinkTaskPlacement
from kconnect.runtime.dataplane.errors_policy import ERROR_CLASS, ERROR_MESSAGE, ERROR_STAGE, RAW_VALUE
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.dataplane.sink_batch import (
    RECORD_COLUMNS,
    prepare,
    record_schemas,
    records_from_columns,
    sink_plan,
)
from kconnect.runtime.dataplane.sink_loop import (
    QUERY_RECORDS_PER_S,
    records_of_messages,
    sink_placement,
)
from kconnect.runtime.dataplane.sink_reader import Claims, Inbox, admin_settings
from kconnect.runtime.plugins.api import Header, SinkRecord, TopicPartition
from tests.support.spark import local_spark

JSON = "org.apache.kafka.connect.json.JsonConverter"
STRING = "org.apache.kafka.connect.storage.StringConverter"
ROUTE = {
    "transforms": "route",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": "(.*)",
    "transforms.route.replacement": "$1-routed",
}
W, Q = SinkTaskPlacement.WORKER, SinkTaskPlacement.QUERY


@pytest.mark.parametrize(
    ("configured", "local", "task", "config", "placed", "why"),
    [
        (SinkTaskPlacement.AUTO, True, FileStreamSinkTask, {}, W, "local"),
        (SinkTaskPlacement.AUTO, False, FileStreamSinkTask, {}, W, "few records"),
        (SinkTaskPlacement.WORKER, False, FileStreamSinkTask, {}, W, "placement=worker"),
        (SinkTaskPlacement.QUERY, True, FileStreamSinkTask, {}, Q, "placement=query"),
        (SinkTaskPlacement.AUTO, True, FileStreamSinkTask, ROUTE, Q, "transforms"),
        (SinkTaskPlacement.WORKER, True, FileStreamSinkTask, ROUTE, Q, "transforms"),
        (SinkTaskPlacement.AUTO, True, ParquetSinkTask, {}, Q, "DataFrame"),
        (
            SinkTaskPlacement.WORKER,
            True,
            FileStreamSinkTask,
            {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"},
            Q,
            "dead letter",
        ),
        (SinkTaskPlacement.AUTO, True, FileStreamSinkTask, {"errors.tolerance": "all"}, W, "local"),
    ],
)
def test_where_a_sink_task_runs(
    configured: SinkTaskPlacement,
    local: bool,
    task: type[Any],
    config: dict[str, str],
    placed: SinkTaskPlacement,
    why: str,
) -> None:
    plan = sink_plan({"key.converter": STRING, "value.converter": STRING}, config, "c", 0)
    placement, reason = sink_placement(configured, local, task(), plan)
    assert placement == placed and why in reason


@pytest.mark.parametrize(
    ("configured", "local", "rate", "placed", "why"),
    [
        (SinkTaskPlacement.AUTO, False, None, W, "few records"),  # not measured yet: the loop
        (SinkTaskPlacement.AUTO, False, QUERY_RECORDS_PER_S - 1, W, "few records"),
        (SinkTaskPlacement.AUTO, False, QUERY_RECORDS_PER_S, Q, "a query of its own"),
        (SinkTaskPlacement.AUTO, True, 10 * QUERY_RECORDS_PER_S, W, "local"),  # a local master: no executors
        (SinkTaskPlacement.WORKER, False, 10 * QUERY_RECORDS_PER_S, W, "placement=worker"),
        (SinkTaskPlacement.QUERY, False, 0.0, Q, "placement=query"),
    ],
)
def test_on_a_cluster_a_sink_with_many_records_gets_a_query_of_its_own(
    configured: SinkTaskPlacement, local: bool, rate: float | None, placed: SinkTaskPlacement, why: str
) -> None:
    plan = sink_plan({"key.converter": STRING, "value.converter": STRING}, {}, "c", 0)
    placement, reason = sink_placement(configured, local, FileStreamSinkTask(), plan, rate)
    assert placement == placed and why in reason


@dataclass
class Message:
    """The parts of a confluent-kafka Message the loop reads."""

    t: str
    p: int
    o: int
    k: bytes | None
    v: bytes | None
    ts: tuple[int, int] = (1, 1700000000000)
    h: list[tuple[str, bytes | None]] | None = None

    def topic(self) -> str:
        return self.t

    def partition(self) -> int:
        return self.p

    def offset(self) -> int:
        return self.o

    def key(self) -> bytes | None:
        return self.k

    def value(self) -> bytes | None:
        return self.v

    def timestamp(self) -> tuple[int, int]:
        return self.ts

    def headers(self) -> list[tuple[str, bytes | None]] | None:
        return self.h


ENVELOPE = (
    b'{"schema": {"type": "struct", "fields": [{"field": "id", "type": "int32"}, {"field": "tags", '
    b'"type": "array", "items": {"type": "string"}, "optional": true}, {"field": "at", "type": "int64", '
    b'"name": "org.apache.kafka.connect.data.Timestamp", "optional": true}, {"field": "price", "type": '
    b'"bytes", "name": "org.apache.kafka.connect.data.Decimal", "parameters": {"scale": "2"}, "optional": '
    b'true}], "optional": false}, "payload": {"id": 7, "tags": ["a", "b"], "at": 1700000000123, "price": '
    b'"AQ=="}}'
)
CASES = [
    ({"key.converter": STRING, "value.converter": STRING}, [b"k", "héllo".encode(), None]),
    (
        {"key.converter": STRING, "value.converter": JSON, "value.converter.schemas.enable": "false"},
        [b'{"a": [1, 2.5, "x"], "b": {"c": null}}', b"3", b'"text"', None],
    ),
    ({"key.converter": JSON, "value.converter": JSON}, [ENVELOPE]),
]


@pytest.mark.parametrize(("converters", "values"), CASES)
def test_the_loop_hands_put_the_records_a_query_would(
    converters: dict[str, str], values: list[bytes | None]
) -> None:
    plan = sink_plan(converters, {}, "c", 0)
    key = b'{"schema": {"type": "string"}, "payload": "k1"}' if converters["key.converter"] == JSON else b"k1"
    messages = [
        Message("t", 0, 10 + i, key if i % 2 == 0 else None, v, h=[("h", b"x")] if i == 1 else None)
        for i, v in enumerate(values)
    ]
    records, failed, consumed = records_of_messages(messages, plan)
    assert failed == [] and consumed == {TopicPartition("t", 0): 10 + len(values)}

    spark = local_spark()
    rows = [
        (m.t, m.p, m.o, m.ts[1], m.k, m.v, [{"key": hk, "value": hv} for hk, hv in m.h or []])
        for m in messages
    ]
    prepared = prepare(plan, spark.createDataFrame(rows, RAW_SCHEMA))
    table = prepared.select(*RECORD_COLUMNS).toArrow()
    key_schema, value_schema = record_schemas(prepared)
    expected = records_from_columns(
        {name: table.column(name).to_pylist() for name in RECORD_COLUMNS}, key_schema, value_schema
    )
    assert records == expected


def test_a_record_that_fails_conversion_is_reported_with_its_stage_and_still_consumed() -> None:
    plan = sink_plan({"key.converter": STRING, "value.converter": JSON}, {}, "c", 0)
    good = b'{"schema": {"type": "int32"}, "payload": 5}'
    messages = [
        Message("t", 1, 3, None, good, ts=(0, -1), h=[("a", None)]),
        Message("t", 1, 4, None, b"{not json"),
    ]
    records, failed, consumed = records_of_messages(messages, plan)
    assert records == [SinkRecord("t", 1, 3, None, 5, (Header("a", None),), None)]
    assert consumed == {TopicPartition("t", 1): 5}
    [row] = failed
    assert (row["offset"], row[ERROR_STAGE], row[RAW_VALUE]) == (4, "VALUE_CONVERTER", b"{not json")
    assert row[ERROR_CLASS] == JSON and "Converting byte[] to Kafka Connect data failed" in row[ERROR_MESSAGE]


def test_a_topic_is_read_on_a_reader_for_one_connector_only() -> None:
    claims = Claims()
    assert claims.fits("a", {"t1", "t2"})
    claims.claim("a", {"t1", "t2"})
    claims.claim("a", {"t1", "t2"})  # a second task of the same connector shares its topics' partitions
    assert claims.fits("b", {"t3"}) and not claims.fits("b", {"t2", "t3"})
    assert not claims.fits("c", None)  # a pattern connector needs a reader of its own
    claims.claim("b", {"t3"})
    claims.unclaim("a")
    assert not claims.fits("c", {"t1"})  # a's other task still reads t1
    claims.unclaim("a")
    assert claims.fits("c", {"t1"}) and claims.users == 1
    claims.unclaim("b")
    assert claims.users == 0 and claims.fits("c", None)
    claims.claim("c", None)
    assert not claims.fits("d", {"x"}) and claims.fits("c", None)
    claims.unclaim("c")
    assert claims.exclusive is None and claims.fits("d", {"x"})


def test_an_admin_client_gets_the_connection_settings_of_the_consumer_not_its_own() -> None:
    consumer = {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.password": "s",
        "fetch.wait.max.ms": "100",
        "auto.offset.reset": "earliest",
        "isolation.level": "read_committed",
        "group.instance.id": "x",
    }
    assert admin_settings(consumer) == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.password": "s",
    }


def test_an_inbox_hands_out_in_order_and_a_take_waits_only_for_the_first() -> None:
    inbox = Inbox("t")
    assert inbox.take(10, 0.0) == []
    for n in range(5):
        inbox.put(n)
    assert inbox.take(3, 0.0) == [0, 1, 2]
    assert inbox.take(10, 5.0) == [3, 4]  # returns at once: items were there
    assert len(inbox) == 0


def test_a_committed_offsets_read_asks_again_after_a_bounded_attempt_timed_out() -> None:
    """A bounded attempt's own timeout is asked again (the overall deadline decides), as are the coordinator
    errors; any other error, and a timeout past the deadline, is raised as it was."""
    from confluent_kafka import KafkaError, KafkaException

    from kconnect.runtime.dataplane.sink_reader import _attempt_timed_out, retried_on_coordinator_errors

    answers: list[Any] = [
        KafkaException(KafkaError(KafkaError._TIMED_OUT, "Local: Timed out")),
        KafkaException(KafkaError(KafkaError.NOT_COORDINATOR, "Broker: Not coordinator")),
        ["found"],
    ]

    def call() -> Any:
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert retried_on_coordinator_errors(call, 5.0, _attempt_timed_out) == ["found"]
    assert answers == []

    timed_out = KafkaException(KafkaError(KafkaError._TIMED_OUT, "Local: Timed out"))
    assert _attempt_timed_out(timed_out)
    assert not _attempt_timed_out(KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED, "denied")))

    def always_times_out() -> Any:
        raise timed_out

    with pytest.raises(KafkaException):  # the default judge does not retry a local timeout
        retried_on_coordinator_errors(always_times_out, 5.0)
    with pytest.raises(KafkaException):  # nor does the bounded one past the deadline
        retried_on_coordinator_errors(always_times_out, 0.5, _attempt_timed_out)
