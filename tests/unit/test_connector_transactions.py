"""Connector-defined transactions (KIP-618, ``transaction.boundary=connector``): the pure boundary
decisions, the TransactionContext a task gets, and the runner's transactions against a recording producer.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest

from kconnect.runtime.dataplane.exactly_once import (
    BoundaryRequests,
    ExactlyOnce,
    TaskTransactionContext,
    TransactionBoundary,
    TransactionEnd,
    TransactionPolicy,
    connector_boundaries,
)
from kconnect.runtime.dataplane.source_runner import SourceTaskRunner
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import ConnectorError, SourceRecord, SourceTask
from kconnect.runtime.storage.offset_log import OffsetState

C, A = False, True  # TransactionEnd.abort


def _req(
    commit_on: tuple[int, ...] = (),
    abort_on: tuple[int, ...] = (),
    commit_batch: bool = False,
    abort_batch: bool = False,
) -> BoundaryRequests:
    return BoundaryRequests(frozenset(commit_on), frozenset(abort_on), commit_batch, abort_batch)


@pytest.mark.parametrize(
    ("size", "open_before", "requests", "ends"),
    [
        # no request: everything stays in the open transaction, however long
        (5, 0, _req(), ()),
        (0, 7, _req(), ()),
        # a record request ends the transaction right after that record; the rest stays open
        (5, 0, _req(commit_on=(1,)), (TransactionEnd(2, C),)),
        (5, 3, _req(abort_on=(0,)), (TransactionEnd(1, A),)),  # discards the 3 earlier records too
        (5, 0, _req(commit_on=(1, 4)), (TransactionEnd(2, C), TransactionEnd(5, C))),
        (6, 0, _req(commit_on=(4,), abort_on=(1,)), (TransactionEnd(2, A), TransactionEnd(5, C))),
        # batch requests end the transaction after the whole batch, and only if one is open
        (3, 0, _req(commit_batch=True), (TransactionEnd(3, C),)),
        (3, 0, _req(abort_batch=True), (TransactionEnd(3, A),)),
        (0, 2, _req(commit_batch=True), (TransactionEnd(0, C),)),  # after an empty poll too
        (0, 0, _req(commit_batch=True), ()),  # nothing open: nothing to commit
        (0, 0, _req(abort_batch=True), ()),
        (3, 0, _req(commit_on=(2,), commit_batch=True), (TransactionEnd(3, C),)),  # already ended
        (3, 0, _req(commit_on=(1,), abort_batch=True), (TransactionEnd(2, C), TransactionEnd(3, A))),
        (3, 0, _req(abort_on=(2,), commit_batch=True), (TransactionEnd(3, A),)),
        # positions outside the batch are not its records
        (2, 0, _req(commit_on=(5,)), ()),
    ],
)
def test_connector_boundaries(
    size: int, open_before: int, requests: BoundaryRequests, ends: tuple[TransactionEnd, ...]
) -> None:
    assert connector_boundaries(size, open_before, requests) == ends


@pytest.mark.parametrize(
    ("requests", "message"),
    [
        (_req(commit_on=(0, 2), abort_on=(2,)), "both a commit and an abort .* same record \\(record 2 "),
        (_req(commit_batch=True, abort_batch=True), "both a commit and an abort of the same transaction"),
    ],
)
def test_conflicting_requests_fail_the_task(requests: BoundaryRequests, message: str) -> None:
    with pytest.raises(ConnectorError, match=message):
        connector_boundaries(3, 0, requests)


def _record(n: int) -> SourceRecord:
    return SourceRecord({"p": 0}, {"n": n}, "t", value=str(n))


def test_context_matches_records_by_identity_and_keeps_requests_for_later_batches() -> None:
    context = TaskTransactionContext()
    first, second, later = _record(1), _record(2), _record(3)
    context.commit_transaction(second)
    context.abort_transaction(later)  # asked before poll returns it
    context.commit_transaction(_record(1))  # equal to ``first`` but not it: no request for ``first``
    context.abort_transaction()
    assert context.take([first, second]) == _req(commit_on=(1,), abort_batch=True)
    assert context.take([first, second]) == _req()  # taken: each request applies once
    assert context.take([_record(3), later]) == _req(abort_on=(1,))


def test_context_batch_requests_apply_to_an_empty_batch() -> None:
    context = TaskTransactionContext()
    context.commit_transaction()
    assert context.take([]) == _req(commit_batch=True)


# ------------------------------------------------------------------ the runner against a recording producer


class _Message:
    def __init__(self, topic: str, value: bytes | None) -> None:
        self._topic, self._value = topic, value

    def topic(self) -> str:
        return self._topic

    def value(self) -> bytes | None:
        return self._value


class RecordingProducer:
    """A transactional producer that logs calls; records become visible per transaction outcome.

    Delivery reports wait for ``flush``/``commit`` (``poll(0)`` finds none in yet), and an abort reports
    what is still queued as purged (an error), as librdkafka does; an abort while none of the open
    transaction's records was acknowledged fails fatally, as librdkafka's can (librdkafka#4849).
    """

    def __init__(self, _settings: Mapping[str, Any]) -> None:
        self.events: list[tuple[str, Any]] = []
        self._pending: list[tuple[Any, _Message]] = []
        self._open: list[tuple[str, bytes | None]] = []
        self.committed: list[tuple[str, bytes | None]] = []
        self.aborted: list[tuple[str, bytes | None]] = []
        PRODUCERS.append(self)

    def init_transactions(self, _timeout: float) -> None:
        self.events.append(("init", None))

    def begin_transaction(self) -> None:
        self.events.append(("begin", None))

    def produce(self, topic: str, value: bytes | None = None, key: Any = None, **kwargs: Any) -> None:
        self._open.append((topic, value))
        self._pending.append((kwargs.get("on_delivery"), _Message(topic, value)))

    def poll(self, timeout: float = 0) -> int:
        if not timeout:
            return 0  # reports not in yet: an abort then finds the records still queued
        return self._deliver()

    def _deliver(self) -> int:
        pending, self._pending = self._pending, []
        for callback, message in pending:
            if callback is not None:
                callback(None, message)
        return len(pending)

    def flush(self, _timeout: float = 0) -> int:
        self._deliver()
        return 0

    def commit_transaction(self, _timeout: float) -> None:
        self.flush()
        self.events.append(("commit", [v for t, v in self._open if t == "t"]))
        self.committed += self._open
        self._open = []

    def abort_transaction(self, _timeout: float) -> None:
        if self._open and len(self._pending) >= len(self._open):
            # librdkafka#4849: nothing of the transaction acknowledged yet, so its AddPartitionsToTxn may
            # still be in flight, and the coordinator answers the EndTxn with a fatal INVALID_TXN_STATE.
            from confluent_kafka import KafkaError, KafkaException

            self.events.append(("abort refused", [v for t, v in self._open if t == "t"]))
            raise KafkaException(KafkaError(KafkaError.INVALID_TXN_STATE, "EndTxn on Empty", fatal=True))
        purged, self._pending = self._pending, []
        for callback, message in purged:
            if callback is not None:
                callback("Local: Purged in queue", message)
        self.events.append(("abort", [v for t, v in self._open if t == "t"]))
        self.aborted += self._open
        self._open = []


PRODUCERS: list[RecordingProducer] = []


class ScriptedTask(SourceTask):
    """Returns scripted batches of numbered records; asks its TransactionContext as ``rule`` says."""

    def __init__(self, batches: list[list[int]], rule: Any) -> None:
        self.batches = list(batches)
        self.rule = rule
        self.told: list[tuple[int, bool]] = []  # (n, metadata is not None) per commit_record
        self.commits = 0
        self.done = threading.Event()

    def version(self) -> str:
        return "1"

    def start(self, props: dict[str, str]) -> None:
        assert self.context is not None
        self.transactions = self.context.transaction_context()

    def poll(self) -> list[SourceRecord] | None:
        if not self.batches:
            self.done.set()
            time.sleep(0.01)
            return None
        records = [SourceRecord({"p": 0}, {"n": n}, "t", value=str(n)) for n in self.batches.pop(0)]
        self.rule(self.transactions, records)
        return records

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        assert record.source_offset is not None
        self.told.append((record.source_offset["n"], metadata is not None))

    def commit(self) -> None:
        self.commits += 1

    def stop(self) -> None:
        pass


def _run(
    monkeypatch: pytest.MonkeyPatch,
    batches: list[list[int]],
    rule: Any,
    boundary: TransactionBoundary = TransactionBoundary.CONNECTOR,
) -> tuple[RecordingProducer, ScriptedTask, list[str]]:
    import confluent_kafka

    monkeypatch.setattr(confluent_kafka, "Producer", RecordingProducer)
    PRODUCERS.clear()
    task = ScriptedTask(batches, rule)
    failures: list[str] = []
    runner = SourceTaskRunner(
        TaskId("c", 0),
        task,
        {"name": "c"},
        lambda _task, trace: failures.append(trace),
        bootstrap="unused:9092",
        converters={
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        },
        producer_settings={},
        read_offsets=OffsetState,
        write_offsets=lambda _offsets: None,
        flush_interval_ms=60_000,
        flush_timeout_ms=1_000,
        exactly_once=ExactlyOnce("g-c-0", TransactionPolicy(boundary, 60_000), "offsets"),
    )
    runner.start(paused=False)
    assert task.done.wait(10) or failures, "the task's batches were not all polled"
    assert runner.stop(10)
    [producer] = PRODUCERS
    return producer, task, failures


def _offsets_committed(producer: RecordingProducer) -> list[int]:
    """The ``n`` of each offset record the transactions committed, in order."""
    import json

    return [json.loads(v or b"{}")["n"] for t, v in producer.committed if t == "offsets"]


def every_third_commits_sevens_abort(transactions: Any, records: list[SourceRecord]) -> None:
    for record in records:
        n = record.source_offset["n"] if record.source_offset else -1
        if n % 7 == 0:
            transactions.abort_transaction(record)
        elif n % 3 == 2:
            transactions.commit_transaction(record)


def test_runner_ends_transactions_where_the_task_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    producer, task, failures = _run(
        monkeypatch, [[1, 2, 3], [4, 5, 6, 7, 8], [9, 10]], every_third_commits_sevens_abort
    )
    assert not failures, failures
    assert [e for e in producer.events if e[0] != "begin"] == [
        ("init", None),
        ("commit", [b"1", b"2"]),
        ("commit", [b"3", b"4", b"5"]),
        ("abort", [b"6", b"7"]),  # the records go ...
        ("commit", []),  # ... their offsets are committed alone, right after
        ("commit", [b"8"]),
        ("abort", [b"9", b"10"]),  # the clean stop aborts what the task never ended
    ]
    assert _offsets_committed(producer) == [2, 5, 7, 8]  # 9 and 10 are polled again after a restart
    assert task.told == [
        (1, True),
        (2, True),
        (3, True),
        (4, True),
        (5, True),
        (6, False),
        (7, False),
        (8, True),
    ]
    assert task.commits == 4


def test_batch_requests_take_effect_after_the_batch(monkeypatch: pytest.MonkeyPatch) -> None:
    def rule(transactions: Any, records: list[SourceRecord]) -> None:
        first = records[0].source_offset["n"] if records[0].source_offset else -1
        if first == 1:
            transactions.commit_transaction()  # asked before the batch's records are sent
        elif first == 4:
            transactions.abort_transaction()

    producer, _task, failures = _run(monkeypatch, [[1, 2, 3], [4, 5], [6]], rule)
    assert not failures, failures
    assert [e for e in producer.events if e[0] in ("commit", "abort")] == [
        ("commit", [b"1", b"2", b"3"]),
        ("abort", [b"4", b"5"]),
        ("commit", []),
        ("abort", [b"6"]),
    ]
    assert _offsets_committed(producer) == [3, 5]


def test_a_conflicting_request_fails_the_task_and_commits_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def rule(transactions: Any, records: list[SourceRecord]) -> None:
        transactions.commit_transaction(records[1])
        transactions.abort_transaction(records[1])

    producer, _task, failures = _run(monkeypatch, [[1, 2, 3]], rule)
    assert len(failures) == 1 and "both a commit and an abort" in failures[0], failures
    assert producer.committed == []


def test_no_context_unless_the_boundary_is_connector(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[Any] = []
    producer, _task, failures = _run(
        monkeypatch,
        [[1, 2]],
        lambda transactions, _records: seen.append(transactions),
        TransactionBoundary.POLL,
    )
    assert not failures and seen == [None]
    assert [e for e in producer.events if e[0] == "commit"] == [("commit", [b"1", b"2"])]
