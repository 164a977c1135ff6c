"""A frame sink's micro-batch prepared and held, with its positions, in as few passes as it allows.

Why a module of its own: the sink runner (``sink_runner.SinkTaskRunner._frame_batch``) hands a frame sink
task its batch prepared (converted, each row's first error collected) and held in Spark's cache, and needs
the batch's positions (each partition's first and last offset, the oldest timestamp). Getting both from a
batch of JSON envelopes took two passes: the raw batch was held and read for its positions and envelope
schemas, then converted. Here the batch is first prepared with the last batch's envelope samples and its
positions read in the same job, with a flag per row confirming the guess
(``sink_batch.guessed_samples``): one pass over the batch as read from Kafka, and nothing held raw. A batch
that is not as guessed (a new schema) is let go; the runner then reads it raw first, as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kconnect.runtime import logs
from kconnect.runtime.dataplane.converters.json_converter import Sample
from kconnect.runtime.dataplane.sink_batch import (
    SinkPlan,
    guess_columns,
    guess_confirmed,
    guessed_samples,
    prepare,
)

log = logs.get(__name__)

#: The index of the first extra aggregate in a :func:`batch_positions` row.
EXTRA_AT = 5


def batch_positions(frame: Any, extra: list[Any]) -> list[Any]:
    """Per partition of the batch: topic, partition, first and last offset, the oldest timestamp, then
    the ``extra`` aggregates (from :data:`EXTRA_AT`); one small job."""
    from pyspark.sql import functions as F

    rows: list[Any] = (
        frame.groupBy("topic", "partition")
        .agg(
            F.min("offset"),
            F.max("offset"),
            F.min(F.when(F.col("timestamp") >= 0, F.col("timestamp"))),
            *extra,
        )
        .collect()
    )
    return rows


def prepared_as_guessed(
    plan: SinkPlan, frame: Any, last: Mapping[str, Sample] | None, last_records: int | None
) -> tuple[Any, list[Any]] | None:
    """The batch prepared with the last batch's envelope samples (``last``; ``last_records``: how many
    records it held, which decides how envelopes are read) and held, with its positions from the same job,
    when that job confirms the guess; None when no guess is made or the batch is not as guessed (its held
    frame is let go: the caller reads the batch raw first).

    Measured on a warm Iceberg sink (bench/README.md, issue 31): the raw batch's own pass was about a
    third of the records' JVM CPU. A confirmed guess is exactly the sample that pass would have given."""
    from pyspark.sql import functions as F

    guess = guessed_samples(plan, last)
    if guess is None:
        return None
    flags = guess_columns(guess)
    flagged = frame.withColumns(flags) if flags else frame
    prepared = prepare(plan, flagged, records=last_records, samples=guess).persist()
    try:
        positions = batch_positions(prepared, [F.max(name) for name in flags])
    except BaseException:
        prepared.unpersist()
        raise
    greatest = {
        name: max((r[EXTRA_AT + n] for r in positions if r[EXTRA_AT + n] is not None), default=None)
        for n, name in enumerate(flags)
    }
    if guess_confirmed(guess, greatest):
        return prepared, positions
    prepared.unpersist()
    log.info(
        "the batch's envelope schemas differ from the last batch's; it is read again",
        connector=plan.connector,
        task=plan.task,
    )
    return None
