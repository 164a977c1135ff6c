"""A source task's poll batch through the connector's transforms and predicates, as one Spark frame.

Why this shape: transforms are Spark column expressions (``transforms``), written once for the sink side.
Rather than a second, per-record implementation, a poll batch is turned into the same raw frame a sink
batch starts from: each record encoded with the task's converters (``source_encoding``), one row each,
its position in the batch as the row's ``offset``. The sink side's pure pieces then apply unchanged —
``sink_batch.prepare`` (converters -> typed columns, the chain, each row's first error) and
``sink_batch.python_value`` — and each surviving row is encoded back with the converters, under the
schema the chain left it with. A record the chain drops (Filter) has no row: the runner still commits its
offset and tells the task ``commit_record(record, None)``, as Java does.

Connectors without transforms never come here: Spark costs a job per poll, so the runner keeps its
record-by-record fast path for them (``source_plan`` answers None).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kconnect.runtime.dataplane.errors_policy import ERROR_MESSAGE, ErrorPolicy
from kconnect.runtime.dataplane.sink_batch import (
    FAILURE_COLUMNS,
    RECORD_COLUMNS,
    SinkPlan,
    prepare,
    python_value,
    record_schemas,
)
from kconnect.runtime.dataplane.source_encoding import SourceEncoder
from kconnect.runtime.dataplane.transforms import transform_chain
from kconnect.runtime.plugins.api import SourceRecord

__all__ = ["Produced", "SourceBatch", "SourcePlan", "raw_row", "source_plan", "transform_batch"]

#: (key bytes, value bytes, headers) as the producer takes them.
Encoded = tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]


@dataclass(frozen=True)
class SourcePlan:
    """The converters, chain and error policy a source task's batches go through (a sink-shaped plan, so
    that ``sink_batch.prepare`` applies as it is)."""

    plan: SinkPlan


@dataclass(frozen=True, slots=True)
class Produced:
    """One record as it leaves the chain: where it goes and its bytes."""

    index: int  # position of the original record in the poll batch
    topic: str
    partition: int | None
    timestamp: int | None
    key: bytes | None
    value: bytes | None
    headers: list[tuple[str, bytes | None]]


@dataclass(frozen=True, slots=True)
class SourceBatch:
    """What one poll batch became after the chain, kept apart by outcome so that the runner produces the
    survivors and hands the failures to the error policy (a dropped record is in neither)."""

    produced: list[Produced]
    #: (index, row as a dict) of records a converter or transform failed on.
    failed: list[tuple[int, dict[str, Any]]]


def source_plan(
    encoder: SourceEncoder, task_config: Mapping[str, str], connector: str, task: int
) -> SourcePlan | None:
    """The plan when the connector has transforms, else None (the fast path: no Spark at all).

    Built when the runner is, so a bad transform or predicate fails the task at start, naming its key.
    """
    chain = transform_chain(task_config)
    if not chain.transforms:
        return None
    policy: ErrorPolicy = encoder.policy
    return SourcePlan(
        SinkPlan(encoder.key_converter, encoder.value_converter, chain, policy, connector, task)
    )


def raw_row(index: int, record: SourceRecord, encoded: Encoded) -> tuple[Any, ...]:
    """A record as a ``records.RAW_SCHEMA`` row; ``offset`` carries its index in the batch."""
    key, value, headers = encoded
    return (
        record.topic,
        -1 if record.partition is None else record.partition,
        index,
        -1 if record.timestamp is None else record.timestamp,
        key,
        value,
        [{"key": k, "value": v} for k, v in headers],
    )


def transform_batch(spark: Any, plan: SourcePlan, rows: Sequence[tuple[Any, ...]]) -> SourceBatch:
    """Run the chain over one batch's raw rows (one Spark job) and encode what survives."""
    from kconnect.runtime.dataplane.records import RAW_SCHEMA

    if not rows:
        return SourceBatch([], [])
    frame = spark.createDataFrame(list(rows), RAW_SCHEMA)
    prepared = prepare(plan.plan, frame)
    collected = prepared.select(*RECORD_COLUMNS, *FAILURE_COLUMNS).collect()
    key_schema, value_schema = record_schemas(prepared)
    produced: list[Produced] = []
    failed: list[tuple[int, dict[str, Any]]] = []
    for row in collected:
        index = int(row["offset"])
        if row[ERROR_MESSAGE] is not None:
            failed.append((index, row.asDict()))
            continue
        topic = str(row["topic"])
        key = plan.plan.key_converter.from_connect(python_value(row["key"], key_schema), key_schema, topic)
        value = plan.plan.value_converter.from_connect(
            python_value(row["value"], value_schema), value_schema, topic
        )
        headers = [
            (h["key"], None if h["value"] is None else bytes(h["value"])) for h in row["headers"] or ()
        ]
        partition = int(row["partition"])
        timestamp = row["timestamp"]
        produced.append(
            Produced(
                index,
                str(row["topic"]),
                None if partition < 0 else partition,
                None if timestamp is None or timestamp < 0 else int(timestamp),
                key,
                value,
                headers,
            )
        )
    produced.sort(key=lambda p: p.index)  # poll order, whatever order Spark returned the rows in
    return SourceBatch(produced, failed)
