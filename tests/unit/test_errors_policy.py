"""errors.* keys, the tolerance decision, retry delays, and dead letter rows built from a mixed batch."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kconnect.runtime.dataplane.connect_data import ConnectField, ConnectSchema
from kconnect.runtime.dataplane.converters import JsonConverter, StringConverter
from kconnect.runtime.dataplane.errors_policy import (
    DLQ_HEADERS,
    ERROR_CLASS,
    ERROR_STAGE,
    RAW_KEY,
    RAW_VALUE,
    Decision,
    ErrorPolicy,
    convert_and_transform,
    dlq_rows,
    retry_delays_ms,
    split,
)
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.dataplane.transforms import transform_chain
from kconnect.runtime.plugins.config_def import ConfigValidationError
from tests.support.spark import local_spark


def test_defaults_are_javas() -> None:
    policy = ErrorPolicy.from_config({})
    assert policy == ErrorPolicy(False, 0, 60000, False, False, "", 3, False)
    assert not policy.dead_letter


def test_all_keys_parse() -> None:
    policy = ErrorPolicy.from_config(
        {
            "errors.tolerance": "all",
            "errors.retry.timeout": "-1",
            "errors.retry.delay.max.ms": "500",
            "errors.log.enable": "true",
            "errors.log.include.messages": "true",
            "errors.deadletterqueue.topic.name": "dlq",
            "errors.deadletterqueue.topic.replication.factor": "1",
            "errors.deadletterqueue.context.headers.enable": "true",
            "unrelated": "x",
        }
    )
    assert policy == ErrorPolicy(True, -1, 500, True, True, "dlq", 1, True)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"errors.tolerance": "some"},
            "Invalid value some for configuration errors.tolerance: String must be one of: none, all",
        ),
        (
            {"errors.retry.timeout": "soon"},
            "Invalid value soon for configuration errors.retry.timeout: Not a number of type LONG",
        ),
        ({"errors.retry.timeout": "-2"}, "errors.retry.timeout"),
        ({"errors.log.enable": "yes"}, "errors.log.enable: Expected value to be either true or false"),
    ],
)
def test_bad_values_name_key_value_and_rule(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigValidationError, match=message):
        ErrorPolicy.from_config(config)


@pytest.mark.parametrize(
    ("tolerance", "failed", "decision"),
    [
        ("none", 0, Decision.CONTINUE),
        ("none", 1, Decision.FAIL_TASK),
        ("all", 0, Decision.CONTINUE),
        ("all", 5, Decision.SKIP_FAILED),
    ],
)
def test_decision_table(tolerance: str, failed: int, decision: Decision) -> None:
    assert ErrorPolicy.from_config({"errors.tolerance": tolerance}).decide(failed) is decision


def test_no_retry_without_a_timeout() -> None:
    assert list(retry_delays_ms(0, 60000)) == []


def test_retry_delays_double_from_300ms_and_stop_at_the_timeout() -> None:
    assert list(retry_delays_ms(1000, 60000, random.Random(1))) == [300, 600, 100]


def test_capped_delays_get_jitter_and_still_end_at_the_timeout() -> None:
    delays = list(retry_delays_ms(2000, 500, random.Random(1)))
    assert delays[0] == 300 and sum(delays) == 2000
    assert all(500 <= d <= 550 for d in delays[1:-1]) and 0 < delays[-1] <= 550


def test_infinite_retry_never_stops() -> None:
    it = retry_delays_ms(-1, 1000, random.Random(1))
    delays = [next(it) for _ in range(50)]
    assert delays[:2] == [300, 600] and all(1000 <= d <= 1100 for d in delays[2:])


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    return local_spark()


def test_a_mixed_batch_splits_into_good_rows_and_javas_dead_letters(spark) -> None:  # type: ignore[no-untyped-def]
    schema = ConnectSchema("struct", fields=(ConnectField("n", ConnectSchema("string")),))
    values = JsonConverter()
    values.configure({}, False)
    keys = StringConverter()
    keys.configure({}, True)
    raw: list[tuple[Any, ...]] = [
        ("in", 3, 10, 1000, b"a", values.from_connect({"n": "1"}, schema), [("h", b"v")]),
        ("in", 3, 11, 1000, b"b", b"not json", [("h", b"v")]),
        ("in", 3, 12, 1000, b"c", values.from_connect({"n": "x"}, schema), []),
    ]
    chain = transform_chain(
        {
            "transforms": "c",
            "transforms.c.type": "org.apache.kafka.connect.transforms.Cast$Value",
            "transforms.c.spec": "n:int32",
        }
    )
    batch = convert_and_transform(spark.createDataFrame(raw, RAW_SCHEMA), keys, values, chain)
    good, failed = split(batch)
    [kept] = good.collect()
    assert kept["value"]["n"] == 1
    assert kept[RAW_KEY] is None and kept[RAW_VALUE] is None  # only a failed row keeps its bytes
    bad = {r["offset"]: r for r in failed.collect()}
    assert bad[11][ERROR_STAGE] == "VALUE_CONVERTER" and bad[11][ERROR_CLASS] == JsonConverter.java_class
    assert bad[12][ERROR_STAGE] == "TRANSFORMATION" and bad[12][ERROR_CLASS].endswith("Cast$Value")
    policy = ErrorPolicy.from_config(
        {
            "errors.tolerance": "all",
            "errors.deadletterqueue.topic.name": "dlq",
            "errors.deadletterqueue.context.headers.enable": "true",
        }
    )
    assert policy.decide(len(bad)) is Decision.SKIP_FAILED
    letters = dlq_rows(failed, policy, "sink-1", 4)
    assert letters.schema.simpleString() == RAW_SCHEMA.simpleString()
    rows = {bytes(r["key"]): r for r in letters.collect()}
    first = rows[b"b"]
    assert first["topic"] == "dlq" and bytes(first["value"]) == b"not json"  # the original bytes
    headers = [(h["key"], bytes(h["value"]).decode()) for h in first["headers"]]
    assert headers[0] == ("h", "v")  # the record's own headers first, unchanged
    context = dict(headers[1:])
    assert list(context) == list(DLQ_HEADERS)
    assert context["__connect.errors.topic"] == "in" and context["__connect.errors.partition"] == "3"
    assert (
        context["__connect.errors.offset"] == "11" and context["__connect.errors.connector.name"] == "sink-1"
    )
    assert (
        context["__connect.errors.task.id"] == "4" and context["__connect.errors.stage"] == "VALUE_CONVERTER"
    )
    assert context["__connect.errors.class.name"] == JsonConverter.java_class
    assert context["__connect.errors.exception.class.name"] == "org.apache.kafka.connect.errors.DataException"
    assert "serialization error" in context["__connect.errors.exception.message"]
    without = dlq_rows(
        failed, ErrorPolicy.from_config({"errors.deadletterqueue.topic.name": "dlq"}), "sink-1", 4
    )
    assert [len(r["headers"]) for r in without.orderBy("key").collect()] == [1, 0]
    line = policy.log_line(bad[11].asDict())
    assert line["stage"] == "VALUE_CONVERTER" and "value" not in line
