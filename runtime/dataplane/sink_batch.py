"""One sink micro-batch through the connector's converters, transforms and error policy.

Why a module of its own: the sink runner (``sink_runner.SinkTaskRunner``) does I/O — it collects frames,
produces dead letters, calls the plugin and commits offsets — while everything that decides what a batch
becomes is here and pure: which converters and transforms a task uses (:func:`sink_plan`), the typed frame
with each row's first error (:func:`prepare`, over :func:`errors_policy.convert_and_transform`), and how a
converted Spark row becomes the ``SinkRecord`` a task's ``put`` takes (:func:`sink_record`), with Python
values as Java's Connect data would be (struct -> dict in schema order, Decimal, date, aware UTC datetime,
time, bytes; schemaless JSON -> dict/list/str/int/float/bool).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat
from typing import Any, TypeGuard

from pyspark.sql import DataFrame

from kconnect.runtime.codecs import java_json
from kconnect.runtime.dataplane.connect_data import (
    DATE,
    DECIMAL,
    TIME,
    TIMESTAMP,
    ConnectSchema,
    from_json_value,
)
from kconnect.runtime.dataplane.converters import (
    Converter,
    JsonConverter,
    connect_schema_of,
    converter_from_config,
)
from kconnect.runtime.dataplane.converters.json_converter import (
    BOUNDS_PER_COLUMN,
    Sample,
    envelope_bounds,
    guess_flag,
    guess_holds,
    guessed_sample,
    sample_envelopes,
    samples_from_bounds,
)
from kconnect.runtime.dataplane.errors_policy import (
    ERROR_CLASS,
    ERROR_MESSAGE,
    ERROR_STAGE,
    RAW_KEY,
    RAW_VALUE,
    ErrorPolicy,
    convert_and_transform,
)
from kconnect.runtime.dataplane.transforms import TransformChain, transform_chain
from kconnect.runtime.plugins.api import Header, SinkRecord, frozen_record

__all__ = [
    "FAILURE_COLUMNS",
    "RECORD_COLUMNS",
    "SinkPlan",
    "batch_samples",
    "envelope_aggregates",
    "guess_columns",
    "guess_confirmed",
    "guessed_samples",
    "infers_schemas",
    "merged_bounds",
    "prepare",
    "prepared_on_stream",
    "python_value",
    "record_schemas",
    "records_from_columns",
    "sink_plan",
    "sink_record",
    "tolerance_message",
]

#: The columns of a prepared frame a SinkRecord is built from, in this order.
RECORD_COLUMNS: tuple[str, ...] = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
#: The fewest records a batch has for its JSON envelopes to be read by their payload alone (``Sample.prefix``,
#: :meth:`JsonConverter.to_columns`). Why a floor: that reading saves JVM CPU per record (the schema's text
#: is neither parsed nor copied) but its larger expressions cost every batch more to plan and run (measured
#: with bench/sink_json.py: about 0.15 s of wall and 0.25 s of JVM CPU more on a warm 150-record batch), so
#: a trickle's small batches, whose cycle decides when their records are queryable, read whole envelopes.
FAST_PATH_MIN_RECORDS = 5_000
#: What a failed row's log line and failure message read besides RECORD_COLUMNS.
FAILURE_COLUMNS: tuple[str, ...] = (ERROR_MESSAGE, ERROR_STAGE, ERROR_CLASS, RAW_KEY, RAW_VALUE)


@dataclass(frozen=True)
class SinkPlan:
    """What a sink task does to every batch: its converters, its transform chain, its error policy."""

    key_converter: Converter
    value_converter: Converter
    chain: TransformChain
    policy: ErrorPolicy
    connector: str
    task: int


def sink_plan(
    converters: Mapping[str, str], task_config: Mapping[str, str], connector: str, task: int
) -> SinkPlan:
    """The plan for one sink task; ``converters`` is ``converters.converter_config``'s merge (worker's
    converter settings overlaid with the connector's). A bad key raises ConfigValidationError naming it,
    so the task fails at start with a clear message instead of on its first batch."""
    return SinkPlan(
        key_converter=converter_from_config(converters, "key.converter", True),
        value_converter=converter_from_config(converters, "value.converter", False),
        chain=transform_chain(task_config),
        policy=ErrorPolicy.from_config(task_config, sink=True),
        connector=connector,
        task=task,
    )


def _infers(converter: Converter) -> TypeGuard[JsonConverter]:
    return isinstance(converter, JsonConverter) and not converter.schemas_enable


def _inferred(converter: Converter, frame: DataFrame, column: str) -> ConnectSchema | None:
    return converter.infer_schema(frame, column) if _infers(converter) else None


def infers_schemas(plan: SinkPlan) -> bool:
    """Whether ``prepare`` reads the batch once more before converting it (schemaless JSON under
    transforms: its schema is inferred), so that a caller caches the batch rather than read it twice."""
    return bool(plan.chain.transforms) and (_infers(plan.key_converter) or _infers(plan.value_converter))


def prepared_on_stream(plan: SinkPlan) -> bool:
    """Whether a sink task's conversion and transforms can be set up once, on its streaming frame, instead
    of on every micro-batch: when no converter reads the batch to learn a schema (``reads_batch``: JSON
    envelopes without ``schema.content``) and no schema is inferred (``infers_schemas``).

    Why it matters: building the prepared frame from Python is about a thousand py4j calls, each Column
    and DataFrame made (and re-analysed) in the JVM, 40-60 ms of CPU in each process for every
    micro-batch, more than the records of a small batch cost. Set on the stream, the plan is built once
    and Spark only re-plans it for each batch.
    """
    converters = (plan.key_converter, plan.value_converter)
    return not infers_schemas(plan) and not any(c.reads_batch for c in converters)


def _sampled(plan: SinkPlan) -> dict[str, JsonConverter]:
    """The columns whose JSON envelope schema ``prepare`` samples from the batch, with their converters.
    (A converter that samples has schemas on: never one whose schema is inferred, ``_infers``.)"""
    return {
        column: converter
        for column, converter in (("key", plan.key_converter), ("value", plan.value_converter))
        if isinstance(converter, JsonConverter) and converter.reads_batch
    }


def envelope_aggregates(plan: SinkPlan) -> list[Any]:
    """Aggregate columns a caller may add to a job of its own over the raw batch (grouped or not), so that
    ``prepare`` needs no job to sample the envelope schemas: pass :func:`merged_bounds` of their values
    as ``prepare``'s ``bounds``. Empty when nothing is sampled."""
    return envelope_bounds(_sampled(plan))


def merged_bounds(rows: Iterable[Any], first: int) -> list[Any]:
    """The :func:`envelope_aggregates` values over all groups of a grouped aggregation (they come in pairs,
    the least of the lows and the greatest of the highs): ``rows`` are its rows, whose values start at
    index ``first``."""
    out: list[Any] = []
    for row in rows:
        values = list(row)[first:]
        if not out:
            out = [None] * len(values)
        for n, value in enumerate(values):
            if value is None:
                continue
            held = out[n]
            low = n % 2 == 0
            if held is None or (value < held if low else value > held):
                out[n] = value
    return out


def batch_samples(plan: SinkPlan, frame: DataFrame, bounds: list[Any] | None = None) -> dict[str, Sample]:
    """The batch's envelope samples, per column ``prepare`` samples: from ``bounds`` (the batch's
    :func:`envelope_aggregates` values, :func:`merged_bounds`) when the caller's job read them, else
    sampled in a job here (one for both columns)."""
    sampling = _sampled(plan)
    if bounds is None or len(bounds) != BOUNDS_PER_COLUMN * len(sampling):
        return sample_envelopes(frame, sampling)
    return samples_from_bounds(frame, sampling, bounds)


def guessed_samples(plan: SinkPlan, last: Mapping[str, Sample] | None) -> dict[str, Sample] | None:
    """Samples to prepare a batch with before anything of it is read: the last batch's
    (``json_converter.guessed_sample``), to be confirmed by the batch's own job (:func:`guess_columns`,
    :func:`guess_confirmed`). Empty when nothing is sampled (nothing to guess); None when a guess cannot
    be made or checked so, or the plan has transforms (a caller's positions are of the rows as read, which
    a transform may drop or re-address: that batch is read raw first), or another converter reads the
    batch before converting it (a Schema Registry converter's schema ids: the raw batch is then held, and
    read once from Kafka)."""
    sampling = _sampled(plan)
    readers = [c for c in (plan.key_converter, plan.value_converter) if c.reads_batch]
    if plan.chain.transforms or len(readers) != len(sampling):
        return None
    out: dict[str, Sample] = {}
    for column, converter in sampling.items():
        guess = guessed_sample(converter, None if last is None else last.get(column))
        if guess is None:
            return None
        out[column] = guess
    return out


def _guess_column(column: str) -> str:
    """The name of ``column``'s :func:`guess_columns` flag."""
    return f"__kc_guess_{column}"


def guess_columns(guess: Mapping[str, Sample]) -> dict[str, Any]:
    """Columns to add to the raw batch before ``prepare`` (they are carried through it): per guessed
    column, the flag whose greatest value over the batch confirms the guess or not."""
    return {_guess_column(column): guess_flag(column, sample) for column, sample in guess.items()}


def guess_confirmed(guess: Mapping[str, Sample], greatest: Mapping[str, int | None]) -> bool:
    """Whether every guessed column's batch is as guessed, from the greatest of each of its
    :func:`guess_columns` (by that column's name) over the batch."""
    return all(guess_holds(sample, greatest.get(_guess_column(c))) for c, sample in guess.items())


def prepare(
    plan: SinkPlan,
    frame: DataFrame,
    keep_dropped: bool = False,
    bounds: list[Any] | None = None,
    records: int | None = None,
    samples: Mapping[str, Sample] | None = None,
) -> DataFrame:
    """The raw batch (``records.RAW_SCHEMA``) converted and transformed, each row's first error collected.

    Schemaless JSON stays JSON text unless the connector has transforms: then its schema is inferred over
    the batch (one more Spark pass) so that struct transforms (InsertField, Cast, ...) apply to it, as
    Java's transforms apply to schemaless maps. An inferred struct has every field optional: a key one
    record lacks reaches the task as None, where Java's map would not hold the key. ``keep_dropped``
    keeps the rows a transformation drops, marked in ``transforms.DROPPED``. ``bounds``: the batch's
    :func:`envelope_aggregates` values (:func:`merged_bounds`), read by the caller's own job; without
    them the envelope schemas are sampled in a job here. ``records``: at most how many records the batch
    holds, when known; below :data:`FAST_PATH_MIN_RECORDS` envelopes are read whole. ``samples``: the
    envelope samples to read with, when the caller has them (:func:`batch_samples`, :func:`guessed_samples`).
    """
    key_schema = value_schema = None
    if plan.chain.transforms:
        key_schema = _inferred(plan.key_converter, frame, "key")
        value_schema = _inferred(plan.value_converter, frame, "value")
    # Envelope schemas the converters would each sample in a job of their own: one job for both, or none
    # when the caller's job read them.
    if samples is None:
        samples = batch_samples(plan, frame, bounds)
    if records is not None and records < FAST_PATH_MIN_RECORDS:
        samples = {column: sample._replace(prefix=None) for column, sample in samples.items()}
    return convert_and_transform(
        frame,
        plan.key_converter,
        plan.value_converter,
        plan.chain,
        key_schema,
        value_schema,
        drop=not keep_dropped,
        samples=samples,
    )


def record_schemas(prepared: DataFrame) -> tuple[ConnectSchema | None, ConnectSchema | None]:
    """The Connect schemas of the prepared key and value columns (None: schemaless JSON text)."""
    return connect_schema_of(prepared, "key"), connect_schema_of(prepared, "value")


def python_value(value: Any, schema: ConnectSchema | None) -> Any:
    """A Spark row value of a column with this Connect schema as the Python value Java's task would get.

    ``schema`` None marks schemaless JSON, which the converter keeps as JSON text: it is parsed here into
    what Java's JsonConverter gives for schemaless data (maps, lists, strings, numbers, booleans).
    """
    if value is None:
        return None
    if schema is None:
        if isinstance(value, bytes | bytearray):
            return bytes(value)
        if isinstance(value, str):
            return from_json_value(None, java_json.read(value, exact=True))
        return value
    if schema.name == TIME and isinstance(value, int):
        millis = value % 86_400_000
        return (dt.datetime.min + dt.timedelta(milliseconds=millis)).time()
    if schema.name == TIMESTAMP and isinstance(value, dt.datetime):
        # Spark hands back a naive datetime in the session's local time zone; Connect's is an instant.
        return value.astimezone(dt.UTC)
    if schema.name in (DECIMAL, DATE):
        return value
    if schema.type == "struct":
        get = value.asDict() if hasattr(value, "asDict") else dict(value)
        return {f.name: python_value(get.get(f.name), f.schema) for f in schema.fields}
    if schema.type == "array":
        return [python_value(v, schema.items) for v in value]
    if schema.type == "map":
        # A Row's map is a dict; Arrow's (``toArrow``) is a list of (key, value) pairs.
        pairs = value.items() if isinstance(value, Mapping) else value
        return {python_value(k, schema.keys): python_value(v, schema.values) for k, v in pairs}
    if schema.type == "bytes" and isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    return value


def sink_record(
    row: Mapping[str, Any] | Any, key_schema: ConnectSchema | None, value_schema: ConnectSchema | None
) -> SinkRecord:
    """A prepared row (at least ``RECORD_COLUMNS``) as the SinkRecord ``put`` takes."""
    get = row.asDict() if hasattr(row, "asDict") else row
    timestamp = get["timestamp"]
    return SinkRecord(
        topic=str(get["topic"]),
        partition=int(get["partition"]),
        offset=int(get["offset"]),
        key=python_value(get["key"], key_schema),
        value=python_value(get["value"], value_schema),
        headers=tuple(
            Header(h["key"], None if h["value"] is None else bytes(h["value"])) for h in get["headers"] or ()
        ),
        timestamp=None if timestamp is None or timestamp < 0 else int(timestamp),
    )


#: Schema types whose Spark values already are what a task gets (no logical name, nothing nested).
_AS_IS_TYPES = frozenset({"string", "int8", "int16", "int32", "int64", "float", "double", "boolean"})


def _column_values(values: list[Any], schema: ConnectSchema | None) -> list[Any]:
    """A whole column through :func:`python_value`; plain strings and numbers are taken as they are."""
    if schema is not None and schema.name is None and schema.type in _AS_IS_TYPES:
        return values
    return [python_value(v, schema) for v in values]


def records_from_columns(
    columns: Mapping[str, list[Any]],
    key_schema: ConnectSchema | None,
    value_schema: ConnectSchema | None,
) -> list[SinkRecord]:
    """The SinkRecords of a prepared batch given column by column (``RECORD_COLUMNS``, e.g. from a slice
    of ``DataFrame.toArrow``), in order; failed rows are filtered out of the table before.

    Why by column: building records from Spark ``Row`` objects costs a Python lookup per field per row;
    whole columns are converted at once, with no per-value work for strings and numbers.
    """
    pick = columns.__getitem__
    keys = _column_values(pick("key"), key_schema)
    values = _column_values(pick("value"), value_schema)
    timestamps = [None if t is None or t < 0 else t for t in pick("timestamp")]
    headers = pick("headers")
    header_tuples: Iterable[tuple[Header, ...]] = (
        [
            tuple(Header(h["key"], None if h["value"] is None else bytes(h["value"])) for h in hs)
            if hs
            else ()
            for hs in headers
        ]
        if any(headers)
        else repeat((), len(headers))
    )
    return [
        frozen_record(
            SinkRecord,
            {
                "topic": topic,
                "partition": partition,
                "offset": offset,
                "key": key,
                "value": value,
                "headers": hs,
                "timestamp": timestamp,
            },
        )
        for topic, partition, offset, timestamp, key, value, hs in zip(
            pick("topic"),
            pick("partition"),
            pick("offset"),
            timestamps,
            keys,
            values,
            header_tuples,
            strict=True,
        )
    ]


def tolerance_message(row: Mapping[str, Any]) -> str:
    """Why a task with ``errors.tolerance=none`` fails: Java's words, then the failed record and stage."""
    return (
        "Tolerance exceeded in error handler: "
        f"stage {row.get(ERROR_STAGE)} ({row.get(ERROR_CLASS)}) failed on record "
        f"{row.get('topic')}-{row.get('partition')}@{row.get('offset')}: {row.get(ERROR_MESSAGE)}"
    )
