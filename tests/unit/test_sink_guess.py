"""A sink batch prepared with the last batch's envelope samples (``sink_batch.guessed_samples``) and the
check that confirms the guess in the batch's own job: when the check passes, the prepared rows are
exactly the rows sampling the batch first gives; when the batch is not like the last, the check fails.
Pure decisions in tables, then real local Spark over raw frames (no Kafka)."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql import functions as F

from kconnect.runtime.dataplane.connect_data import ConnectField, ConnectSchema
from kconnect.runtime.dataplane.converters import JsonConverter
from kconnect.runtime.dataplane.converters.json_converter import (
    Sample,
    guess_holds,
    guessed_sample,
)
from kconnect.runtime.dataplane.errors_policy import ERROR_MESSAGE
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.dataplane.sink_batch import (
    RECORD_COLUMNS,
    batch_samples,
    guess_columns,
    guess_confirmed,
    guessed_samples,
    prepare,
    sink_plan,
)
from tests.support.spark import local_spark

JSON = "org.apache.kafka.connect.json.JsonConverter"
STRING = "org.apache.kafka.connect.storage.StringConverter"
ROW = ConnectSchema("struct", fields=(ConnectField("a", ConnectSchema("int32")),))
WIDER = ConnectSchema(
    "struct",
    fields=(ConnectField("a", ConnectSchema("int32")), ConnectField("b", ConnectSchema("string", True))),
)
PREFIX = (
    '{"schema":{"type":"struct","fields":[{"type":"int32","optional":false,"field":"a"}],'
    '"optional":false},"payload":'
)


def _converter(prefix: str | None = None, texts: bool = False) -> JsonConverter:
    c = JsonConverter()
    c.configure({}, False)
    c.envelope_prefix = prefix
    c.envelope_texts = texts
    return c


@pytest.mark.parametrize(
    ("converter", "last", "expected"),
    [
        (_converter(PREFIX), None, None),  # no batch yet: nothing to guess from
        (_converter(), Sample(None, frozenset()), Sample(None, frozenset())),  # no envelope last time
        (_converter(PREFIX), Sample(ROW, frozenset(), PREFIX), "prefixed"),
        (_converter(PREFIX), Sample(ROW, frozenset(), None), None),  # read by texts: not checkable
        (_converter(PREFIX[:-1] + " "), Sample(ROW, frozenset(), PREFIX), None),  # prefix moved on
        (_converter(PREFIX, texts=True), Sample(ROW, frozenset(), PREFIX), None),
        (_converter("not an envelope"), Sample(ROW, frozenset(), "not an envelope"), None),
    ],
)
def test_a_guess_is_the_last_batchs_sample_where_the_batchs_job_can_check_it(
    converter: JsonConverter, last: Sample | None, expected: Any
) -> None:
    guess = guessed_sample(converter, last)
    if expected == "prefixed":
        assert guess is not None and guess.prefix == PREFIX and guess.schema is not None
        assert guess.schema.fields[0].name == "a"
    else:
        assert guess == expected


@pytest.mark.parametrize(
    ("guess", "greatest", "holds"),
    [
        (Sample(None, frozenset()), None, True),  # no record has an envelope, as guessed
        (Sample(None, frozenset()), 2, False),  # one has
        (Sample(ROW, frozenset(), PREFIX), 1, True),  # all present start with the prefix
        (Sample(ROW, frozenset(), PREFIX), 2, False),  # one does not
        (Sample(ROW, frozenset(), PREFIX), None, False),  # none present: that samples as no schema
    ],
)
def test_the_greatest_flag_confirms_a_guess_or_not(guess: Sample, greatest: int | None, holds: bool) -> None:
    assert guess_holds(guess, greatest) is holds


def test_no_guess_under_transforms_or_a_converter_that_reads_the_batch_otherwise() -> None:
    routed = {
        "transforms": "r",
        "transforms.r.type": "org.apache.kafka.connect.transforms.RegexRouter",
        "transforms.r.regex": "(.*)",
        "transforms.r.replacement": "$1-x",
    }
    json_plan = sink_plan({"key.converter": JSON, "value.converter": JSON}, {}, "c", 0)
    assert guessed_samples(
        json_plan, {"key": Sample(None, frozenset()), "value": Sample(None, frozenset())}
    ) == {
        "key": Sample(None, frozenset()),
        "value": Sample(None, frozenset()),
    }
    assert guessed_samples(json_plan, None) is None
    assert (
        guessed_samples(sink_plan({"key.converter": JSON, "value.converter": JSON}, routed, "c", 0), {})
        is None
    )
    # Nothing sampled, nothing read before converting: the guess is that there is nothing to guess.
    assert (
        guessed_samples(sink_plan({"key.converter": STRING, "value.converter": STRING}, {}, "c", 0), None)
        == {}
    )
    registry = sink_plan(
        {
            "key.converter": STRING,
            "value.converter": "io.confluent.connect.avro.AvroConverter",
            "value.converter.schema.registry.url": "http://127.0.0.1:1",
        },
        {},
        "c",
        0,
    )
    assert registry.value_converter.reads_batch and guessed_samples(registry, {}) is None


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    return local_spark()


def _rows(values: list[bytes | None], keys: list[bytes | None] | None = None) -> list[tuple[Any, ...]]:
    keys = keys or [None] * len(values)
    return [
        ("t", i % 2, i, 1700000000000 + i, k, v, [])
        for i, (k, v) in enumerate(zip(keys, values, strict=True))
    ]


def _collected(frame: Any) -> list[tuple[Any, ...]]:
    return [tuple(r) for r in frame.select(*RECORD_COLUMNS, ERROR_MESSAGE).orderBy("offset").collect()]


def _as_guessed(spark: Any, plan: Any, last: Any, values: list[bytes | None], keys: Any = None) -> Any:
    """(confirmed, rows prepared with the guess) for a batch, as the sink runner prepares it."""
    df = spark.createDataFrame(_rows(values, keys), RAW_SCHEMA)
    guess = guessed_samples(plan, last)
    assert guess is not None
    flags = guess_columns(guess)
    prepared = prepare(plan, df.withColumns(flags), samples=guess, records=len(values))
    row = prepared.agg(*[F.max(name).alias(name) for name in flags]).first() if flags else None
    greatest = {name: row[name] for name in flags} if row is not None else {}
    return guess_confirmed(guess, greatest), prepared


def _as_sampled(spark: Any, plan: Any, values: list[bytes | None], keys: Any = None) -> tuple[Any, Any]:
    df = spark.createDataFrame(_rows(values, keys), RAW_SCHEMA)
    samples = batch_samples(plan, df)
    return samples, prepare(plan, df, samples=samples, records=len(values))


def test_a_confirmed_guess_prepares_what_sampling_first_prepares_and_a_change_is_caught(spark) -> None:  # type: ignore[no-untyped-def]
    plan = sink_plan({"key.converter": JSON, "value.converter": JSON}, {}, "c", 0)
    writer = _converter()
    row = [writer.from_connect({"a": i}, ROW) for i in range(6)]
    wider = [writer.from_connect({"a": i, "b": f"v{i}"}, WIDER) for i in range(6)]
    keyed = [writer.from_connect(f"k{i}", ConnectSchema("string")) for i in range(6)]

    last, _ = _as_sampled(spark, plan, row)  # the first batch: sampled, the converters learn
    assert last["value"].prefix is not None and last["key"] == Sample(None, frozenset())
    # The same schema again (a tombstone among them): the guess holds and prepares the same rows.
    batch = [*row[:5], None]
    confirmed, guessed = _as_guessed(spark, plan, last, batch)
    assert confirmed
    assert _collected(guessed) == _collected(_as_sampled(spark, plan, batch)[1])
    # A record of another schema: the check fails (sampling reads that batch by its first record).
    assert not _as_guessed(spark, plan, last, [*row[:3], wider[3]])[0]
    # Keys appear where the last batch had none: the key's guess (no envelope) fails.
    assert not _as_guessed(spark, plan, last, row, keyed)[0]
    # Only tombstones: sampling finds no schema, the guess of the prefix must not stand for it.
    assert not _as_guessed(spark, plan, last, [None, None])[0]
    # A batch of bad records is no guess gone wrong when it starts as guessed: its errors are the same.
    broken = [row[0], PREFIX.encode() + b'{"a": "x"}}']
    confirmed, guessed = _as_guessed(spark, plan, last, broken)
    assert confirmed
    rows = _collected(guessed)
    assert rows == _collected(_as_sampled(spark, plan, broken)[1]) and rows[1][-1] is not None
