"""``KafkaLog.end_offsets`` rides out a partition leader election, as Java's KafkaBasedLog does.

Seen live (tests/integration/test_broker_faults.py): a broker SIGKILLed, the group-records topic's leader
gone until the controller elects another, and the probe's watermark query answering
``_UNKNOWN_PARTITION`` meanwhile. Raised at once, it cost a worker the reconcile that follows its join.
"""

from __future__ import annotations

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


def _log(probe: FlakyProbe, partitions: int = 1) -> KafkaLog:
    log = KafkaLog.__new__(KafkaLog)  # no clients: only the probe is used
    log.topic = "t"
    log._partitions = list(range(partitions))
    log._probe = probe
    return log


@pytest.fixture(autouse=True)
def _fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kafka_log, "_RETRY_BACKOFF_S", 0.01)


def test_a_leader_election_is_waited_out() -> None:
    probe = FlakyProbe(KafkaError._UNKNOWN_PARTITION, KafkaError.LEADER_NOT_AVAILABLE, KafkaError._TIMED_OUT)
    assert _log(probe, partitions=2).end_offsets(5.0) == {0: 42, 1: 42}
    assert probe.calls == 5  # three errors, then one answer per partition


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
