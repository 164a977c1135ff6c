"""Source records through transforms: the pure pieces, and one batch through a local SparkSession."""

from __future__ import annotations

from typing import Any

import pytest

from kconnect.runtime.dataplane.errors_policy import ERROR_MESSAGE
from kconnect.runtime.dataplane.source_batch import raw_row, source_plan, transform_batch
from kconnect.runtime.dataplane.source_encoding import source_encoder
from kconnect.runtime.plugins.api import Header, SourceRecord
from tests.support.spark import local_spark

PLAIN = {
    "key.converter": "org.apache.kafka.connect.json.JsonConverter",
    "key.converter.schemas.enable": "false",
    "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    "value.converter.schemas.enable": "false",
}
CHAIN = {
    "transforms": "insert,route",
    "transforms.insert.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.insert.static.field": "origin",
    "transforms.insert.static.value": "kc",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": "in",
    "transforms.route.replacement": "out",
}


def test_no_transforms_means_no_plan_and_no_spark() -> None:
    assert source_plan(source_encoder(PLAIN, {}), {}, "c", 0) is None
    assert source_plan(source_encoder(PLAIN, CHAIN), CHAIN, "c", 0) is not None


def test_raw_row_carries_the_batch_index_as_offset_and_minus_one_for_absent_values() -> None:
    record = SourceRecord({"p": 1}, {"o": 2}, "in", value={"n": 1}, headers=(Header("h", b"v"),))
    row = raw_row(7, record, (None, b'{"n":1}', [("h", b"v")]))
    assert row == ("in", -1, 7, -1, None, b'{"n":1}', [{"key": "h", "value": b"v"}])
    placed = SourceRecord(None, None, "in", partition=2, timestamp=1000)
    assert raw_row(0, placed, (None, None, []))[:4] == ("in", 2, 0, 1000)


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    return local_spark()


def test_a_batch_is_transformed_in_poll_order_with_failures_apart(spark) -> None:  # type: ignore[no-untyped-def]
    config = {**CHAIN, "errors.tolerance": "all"}
    encoder = source_encoder(PLAIN, config)
    plan = source_plan(encoder, config, "c", 0)
    assert plan is not None
    records = [SourceRecord(None, {"n": n}, "in", value={"n": n}, timestamp=1000 + n) for n in range(3)]
    rows: list[tuple[Any, ...]] = [raw_row(i, r, encoder.encode(r)) for i, r in enumerate(records)]
    rows.append(("in", -1, 3, -1, None, b"{not json", []))
    batch = transform_batch(spark, plan, rows)
    assert [(p.index, p.topic, p.timestamp, p.value) for p in batch.produced] == [
        (n, "out", 1000 + n, b'{"n":%d,"origin":"kc"}' % n) for n in range(3)
    ]
    assert [index for index, _row in batch.failed] == [3]
    assert batch.failed[0][1][ERROR_MESSAGE]
