"""``KafkaLog.end_offsets`` rides out a partition leader election, as Java's KafkaBasedLog does.

Seen live (tests/integration/test_broker_faults.py): a broker SIGKILLed, the group-records topic's leader
gone until the controller elects another, and the probe's watermark query answering
``_UNKNOWN_PARTITION`` meanwhile. Raised at once, it cost a worker the reconcile that follows its join.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException

from kconnect.runtime.storage import kafka_log
from kconnect.runtime.storage.kafka_log import KafkaLog, KafkaLogError, retriable_end_offset_error


class FlakyProbe:
    """Answers with ``errors`` (in order) before it gives ``(0, 42)``."""

    def __init__(self, *errors: int) -> None:
        self.errors = list(errors)
        self.calls = 0

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        self.calls += 1
        assert timeout > 0 and cached is False
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return 0, 42


class CountingProbe:
    """A probe whose partition's end is how many records were 'written' when the query reached it, slow
    enough for callers to pile up behind it."""

    def __init__(self) -> None:
        self.written = 0
        self.queries = 0
        self.lock = threading.Lock()

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        with self.lock:
            self.queries += 1
            end = self.written
        time.sleep(0.02)
        return 0, end


def _log(probe: FlakyProbe | CountingProbe, partitions: int = 1) -> KafkaLog:
    log = KafkaLog.__new__(KafkaLog)  # no clients: only the probe is used
    log.topic = "t"
    log._partitions = list(range(partitions))
    log._probe = kafka_log._SharedProbe(probe)
    log._new_probe = lambda: probe  # a renewed probe (after a timed-out query) is the same fake here
    log._probe_lock = threading.Lock()
    log._probe_renewed = 0.0
    log._ends_cond = threading.Condition()
    log._ends_started = log._ends_done = 0
    log._ends_running = False
    log._ends_last = {}
    return log


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_log, "_RETRY_BACKOFF_S", 0.01)


def test_a_leader_election_is_waited_out() -> None:
    probe = FlakyProbe(KafkaError._UNKNOWN_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TIMED_OUT)
    assert _log(probe, partitions=2).end_offsets(5.0) == {0: 42, 1: 42}
    assert probe.calls == 5  # three errors, then one answer per partition


class DeadLeaderProbe:
    """A probe whose metadata names a dead leader: every query times out (librdkafka never refreshes the
    cached leader of a topic it only queries watermarks of)."""

    def __init__(self) -> None:
        self.calls = 0
        self.closed = False

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        self.calls += 1
        raise KafkaException(KafkaError(KafkaError._TIMED_OUT))

    def close(self) -> None:
        self.closed = True


def test_a_probe_whose_query_timed_out_is_replaced_by_a_fresh_client() -> None:
    stale = DeadLeaderProbe()
    fresh = FlakyProbe()
    log = _log(fresh)
    log._probe = kafka_log._SharedProbe(stale)
    made: list[FlakyProbe] = []
    log._new_probe = lambda: made.append(fresh) or fresh
    assert log.end_offsets(5.0) == {0: 42}
    assert stale.calls == 1 and stale.closed and made == [fresh] and log._probe.client is fresh


class BlockingProbe:
    """A probe whose first query waits until released, and that refuses queries once closed (the real
    client frees its handle on close: a query in flight then reads freed memory and the process dies)."""

    def __init__(self, fail_first: bool = False) -> None:
        self.inside = threading.Event()
        self.release = threading.Event()
        self.closed = False
        self.fail_first = fail_first

    def get_watermark_offsets(self, tp: Any, timeout: float, cached: bool) -> tuple[int, int]:
        assert not self.closed, "queried after close"
        if self.fail_first:
            self.fail_first = False
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        self.inside.set()
        self.release.wait(5)
        assert not self.closed, "closed while a query was inside"
        return 0, 7

    def close(self) -> None:
        self.closed = True


def test_a_probe_renewed_while_another_thread_queries_it_is_closed_by_that_thread_afterwards() -> None:
    """The SIGSEGV of bench/brokers_random.py's worker 0 (issue 29): one thread renews the probe after a
    timeout while another is inside a query on it; the old client must outlive that query."""
    busy = BlockingProbe()
    fresh = FlakyProbe()
    log = _log(fresh)
    log._probe = kafka_log._SharedProbe(busy)
    log._new_probe = lambda: fresh
    answers: list[dict[int, int]] = []
    reader = threading.Thread(target=lambda: answers.append(log.end_offsets(5.0)))
    reader.start()
    assert busy.inside.wait(5)
    log._renew_probe(0, "timed out")  # what a second thread does after its own query timed out
    assert log._probe.client is fresh and not busy.closed  # retired, still in use
    busy.release.set()
    reader.join(5)
    assert answers == [{0: 7}] and busy.closed  # its last user closed it
    assert log.end_offsets(5.0) == {0: 42}  # later queries go to the fresh client


def test_a_stopped_logs_probe_is_closed_once_its_query_returns() -> None:
    busy = BlockingProbe()
    log = _log(FlakyProbe())
    log._probe = kafka_log._SharedProbe(busy)
    reader = threading.Thread(target=lambda: log.end_offsets(5.0))
    reader.start()
    assert busy.inside.wait(5)
    log._retire(log._probe)  # what stop() does
    assert not busy.closed
    busy.release.set()
    reader.join(5)
    assert busy.closed
    with pytest.raises(KafkaLogError, match="stopped"):
        log.end_offsets(1.0)


def test_a_probe_that_finds_the_partition_unknown_is_renewed_at_most_every_interval(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(kafka_log, "_PROBE_RENEW_INTERVAL_S", 60.0)
    probe = FlakyProbe(*[KafkaError._UNKNOWN_PARTITION] * 5)
    log = _log(probe)
    made: list[FlakyProbe] = []
    log._new_probe = lambda: made.append(probe) or probe
    probe.close = lambda: None  # type: ignore[attr-defined]
    assert log.end_offsets(5.0) == {0: 42}
    assert probe.calls == 6 and len(made) == 1  # five unknown-partition answers, one renewal


def test_a_non_retriable_error_fails_at_once() -> None:
    probe = FlakyProbe(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(KafkaLogError, match="could not read the end offsets of 't'"):
        _log(probe).end_offsets(5.0)
    assert probe.calls == 1


def test_a_retriable_error_that_outlasts_the_timeout_is_raised() -> None:
    probe = FlakyProbe(*[KafkaError._UNKNOWN_PARTITION] * 1000)
    with pytest.raises(KafkaLogError, match="Unknown partition"):
        _log(probe).end_offsets(0.2)
    assert 1 < probe.calls < 1000


def test_which_errors_are_retriable() -> None:
    assert retriable_end_offset_error(KafkaError.NOT_LEADER_FOR_PARTITION)
    assert retriable_end_offset_error(KafkaError._TRANSPORT)
    assert not retriable_end_offset_error(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    assert not retriable_end_offset_error(None)


def test_concurrent_reads_to_the_end_share_queries_that_started_after_them() -> None:
    # A thousand source tasks starting at once each read the offsets topic to its end first: they must
    # share the broker queries, and each must get ends from a query that began after its own call.
    probe = CountingProbe()
    log = _log(probe)
    problems: list[str] = []

    def caller(n: int) -> None:
        with probe.lock:
            probe.written += 1
            written_before = probe.written
        ends = log._ends_since_now(10.0)
        if ends[0] < written_before:
            problems.append(f"caller {n}: end {ends[0]} from a query older than its write {written_before}")

    threads = [threading.Thread(target=caller, args=(n,)) for n in range(200)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert not problems, problems[:5]
    assert probe.queries <= 20, probe.queries  # 200 callers, a query every 20 ms at most


def test_a_failed_shared_query_lets_the_next_caller_ask_again() -> None:
    probe = FlakyProbe(KafkaError.TOPIC_AUTHORIZATION_FAILED)
    log = _log(probe)
    with pytest.raises(KafkaLogError):
        log._ends_since_now(5.0)
    assert log._ends_since_now(5.0) == {0: 42}
