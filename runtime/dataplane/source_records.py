"""A source task's records on their way to the producer: encoded with the converters, through the chain
when the connector has transforms, skipped on errors as ``errors.tolerance`` says.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kconnect.runtime.dataplane.connect_data import ConnectDataError
from kconnect.runtime.dataplane.errors_policy import ERROR_MESSAGE
from kconnect.runtime.dataplane.sink_batch import tolerance_message
from kconnect.runtime.dataplane.source_batch import SourcePlan, raw_row, transform_batch
from kconnect.runtime.dataplane.source_encoding import SourceEncoder
from kconnect.runtime.dataplane.task_runner import TaskRunner
from kconnect.runtime.plugins.api import ConnectorError, SourceRecord, SourceTask

__all__ = ["Outgoing", "SourceRecordPreparation"]


def _produce_kwargs(
    partition: int | None, timestamp: int | None, headers: list[tuple[str, bytes | None]]
) -> dict[str, Any]:
    """``produce``'s optional arguments for one record: only those it has (a fresh dict per record, as
    the caller adds its ``on_delivery``)."""
    kwargs: dict[str, Any] = {}
    if partition is not None:
        kwargs["partition"] = partition
    if timestamp is not None:
        kwargs["timestamp"] = timestamp
    if headers:
        kwargs["headers"] = headers
    return kwargs


#: What the producer is given for one record: topic, key, value and ``produce`` keyword arguments.
Outgoing = tuple[str, bytes | None, bytes | None, dict[str, Any]]


class SourceRecordPreparation(TaskRunner):
    """The per-record half of a source task: encode, transform, skip on errors, tell the task.

    Why a base class of its own: both poll loops (the plain one in ``source_runner`` and the
    transactional one in ``source_transactions``) prepare records and hear of deliveries the same way.
    The attributes below are set by :class:`~kconnect.runtime.dataplane.source_runner.SourceTaskRunner`.
    """

    source: SourceTask
    _encoder: SourceEncoder
    _plan: SourcePlan | None
    _spark: Callable[[], Any]
    _delivery_error: str | None

    def _on_delivery(self, error: Any, message: Any) -> None:
        if error is not None and self._delivery_error is None:
            self._delivery_error = f"producing to {message.topic()} failed: {error}"

    def _prepare(self, records: list[SourceRecord]) -> list[tuple[SourceRecord, Outgoing | None]]:
        """Each polled record with what to produce for it: encoded with the converters, through the
        chain when the connector has transforms (one Spark job per batch), None when it is skipped on an
        error (errors.tolerance=all) or dropped by the chain.

        Runs for every source record on the driver, so the common path (no transforms) goes straight
        from the record to the producer's arguments, with nothing built in between.
        """
        if self._plan is None:
            prepared: list[tuple[SourceRecord, Outgoing | None]] = []
            for record in records:
                encoded = self._encode(record)
                if encoded is None:
                    prepared.append((record, None))
                    continue
                key, value, headers = encoded
                kwargs = _produce_kwargs(record.partition, record.timestamp, headers)
                prepared.append((record, (record.topic, key, value, kwargs)))
            return prepared
        rows: list[tuple[Any, ...]] = []
        for index, record in enumerate(records):
            encoded = self._encode(record)
            if encoded is not None:
                rows.append(raw_row(index, record, encoded))
        out: dict[int, Outgoing] = {}
        if rows:
            batch = transform_batch(self._spark(), self._plan, rows)
            if batch.failed:
                self._handle_failed(records, batch.failed)
            out = {
                p.index: (p.topic, p.key, p.value, _produce_kwargs(p.partition, p.timestamp, p.headers))
                for p in batch.produced
            }
        return [(record, out.get(index)) for index, record in enumerate(records)]

    def _handle_failed(self, records: list[SourceRecord], failed: list[tuple[int, dict[str, Any]]]) -> None:
        """Conversion or transformation failures: fail the task (tolerance none) or log and skip them."""
        policy = self._encoder.policy
        if not policy.tolerance_all:
            raise ConnectorError(tolerance_message(failed[0][1]))
        for index, row in failed:
            self._log_skipped("transforming", records[index], row.get(ERROR_MESSAGE))
        self.log.warning("source records skipped on errors", count=len(failed))

    def _tell_task(self, record: SourceRecord, metadata: Any) -> None:
        """``commit_record``: Java logs a task's failure there and carries on, since the record is in Kafka
        (or was dropped) whatever the task thinks of it."""
        try:
            self.source.commit_record(record, metadata)
        except Exception as exc:
            self.log.warning("commit_record failed", error=str(exc))

    def _encode(
        self, record: SourceRecord
    ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]] | None:
        """The record as bytes; None when it cannot be converted and errors.tolerance=all skips it."""
        try:
            encoded: tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]
            encoded = self._encoder.encode(record)
            return encoded
        except ConnectDataError as exc:
            policy = self._encoder.policy
            message = f"converting a record for topic {record.topic} failed: {exc}"
            if not policy.tolerance_all:
                raise ConnectorError(f"Tolerance exceeded in error handler: {message}") from exc
            self._log_skipped("converting", record, str(exc))
            return None

    def _log_skipped(self, doing: str, record: SourceRecord, message: Any) -> None:
        """Log a record skipped on an error under errors.tolerance=all, as ``errors.log.enable`` and
        ``errors.log.include.messages`` ask: conversion and transformation failures read alike."""
        policy = self._encoder.policy
        if not policy.log_enable:
            return
        fields: dict[str, Any] = {"topic": record.topic, "message": message}
        if policy.log_include_messages:
            fields.update(key=repr(record.key), value=repr(record.value))
        self.log.error(f"error {doing} a source record; skipped (errors.tolerance=all)", **fields)
