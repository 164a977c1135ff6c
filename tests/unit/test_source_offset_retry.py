"""A source task's offsets write that fails is retried by the next flush; the task runs on.

Seen live (tests/integration/test_broker_faults.py): a broker SIGKILLed, the offsets topic's leader gone
for longer than the write's read-back waits, and the source task FAILED on it although every record was
in Kafka. Java's WorkerSourceTask logs the failed flush, cancels it (its offsets merge back into the
pending ones) and retries at the next commit interval.
"""

from __future__ import annotations

from kconnect.runtime.dataplane.source_runner import _Submitted, latest_source_offsets, merge_source_offsets
from kconnect.runtime.plugins.api import SourceRecord
from kconnect.runtime.storage.kafka_log import KafkaLogError
from kconnect.runtime.storage.offset_log import SourceOffset
from tests.unit.test_dataplane import _AckRecordingSource, _IdleProducer, _Message, _runner


def _offset(partition: str, position: int) -> SourceOffset:
    return SourceOffset("c", {"f": partition}, {"position": position})


def test_merge_keeps_one_offset_per_partition_the_newer_winning() -> None:
    older = [_offset("a", 1), _offset("b", 7)]
    newer = [_offset("a", 3), _offset("c", 2)]
    assert merge_source_offsets(older, newer) == [_offset("b", 7), _offset("a", 3), _offset("c", 2)]
    assert merge_source_offsets([], newer) == newer
    assert merge_source_offsets(older, []) == older


def test_a_failed_offsets_write_is_retried_by_the_next_flush() -> None:
    attempts: list[list[SourceOffset]] = []
    failures = [KafkaLogError("could not read the end offsets of 'offsets': Local: Timed out")]

    def write(offsets: list[SourceOffset]) -> None:
        attempts.append(list(offsets))
        if failures:
            raise failures.pop()

    runner = _runner(_AckRecordingSource(), write)

    def submit(*positions: tuple[str, int]) -> None:
        records = [SourceRecord({"f": f}, {"position": n}, "t") for f, n in positions]
        poll = _Submitted(latest_source_offsets("c", records), len(records))
        poll.pending = len(records)
        runner._submitted.append(poll)
        runner._batch_callback(poll)(None, _Message())
        for _ in positions[1:]:
            runner._batch_callback(poll)(None, _Message())

    submit(("a", 1), ("b", 1))
    runner._flush(_IdleProducer())  # fails: the task is not failed, the offsets wait
    assert attempts == [[_offset("a", 1), _offset("b", 1)]]
    assert runner._unstored == [_offset("a", 1), _offset("b", 1)]

    runner._flush(_IdleProducer())  # nothing new was acknowledged: the retry alone
    assert attempts[-1] == [_offset("a", 1), _offset("b", 1)]
    assert runner._unstored == []

    failures.append(KafkaLogError("write to 'offsets' was not acknowledged within 30 s"))
    submit(("a", 2))
    runner._flush(_IdleProducer())
    submit(("a", 3), ("c", 1))
    runner._flush(_IdleProducer(), final=True)  # the failed one merged with the newer
    assert attempts[-1] == [_offset("a", 3), _offset("c", 1)]
    assert runner._unstored == []
