"""A worker waits for internal topics it just created to show in the metadata before verifying them.

Seen live on a three-node Apache Kafka cluster (tests/integration/test_broker_faults.py): CreateTopics
answered by the controller, then ``list_topics`` through another broker did not show the topic yet, and
the worker exited with "internal topic ... does not exist". Java's KafkaBasedLog waits for the
partitions (up to 30 s) likewise.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from kconnect.runtime.storage import topics


@dataclass
class _Partition:
    leader: int


@dataclass
class _Topic:
    partitions: dict[int, _Partition]
    error: Any = None


@dataclass
class _Metadata:
    topics: dict[str, _Topic] = field(default_factory=dict)


class _Admin:
    """Answers ``list_topics`` from a script of metadata, the last one repeated."""

    def __init__(self, *answers: _Metadata) -> None:
        self.answers = list(answers)
        self.calls = 0

    def list_topics(self, timeout: float) -> _Metadata:
        self.calls += 1
        return self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]


LED = _Topic({0: _Partition(1)})


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(topics.time, "sleep", lambda _s: None)


def test_visible_needs_partitions_each_with_a_leader() -> None:
    md = _Metadata(
        {
            "led": LED,
            "leaderless": _Topic({0: _Partition(1), 1: _Partition(-1)}),
            "empty": _Topic({}),
            "failed": _Topic({0: _Partition(1)}, error="UNKNOWN_TOPIC_OR_PART"),
        }
    )
    assert topics.visible(md, ["led", "leaderless", "empty", "failed", "absent"]) == ["led"]


def test_wait_visible_waits_for_metadata_to_catch_up() -> None:
    admin = _Admin(_Metadata(), _Metadata({"a": LED}), _Metadata({"a": LED, "b": LED}))
    assert topics.wait_visible(admin, ["a", "b"], timeout_s=5)  # type: ignore[arg-type]
    assert admin.calls == 3


def test_wait_visible_gives_up_after_its_timeout() -> None:
    admin = _Admin(_Metadata())
    assert not topics.wait_visible(admin, ["a"], timeout_s=0.3)  # type: ignore[arg-type]
    assert admin.calls >= 1


def test_verify_asks_again_when_the_next_broker_does_not_know_the_topic_yet() -> None:
    """wait_visible saw the topic on one broker; the next list_topics, from another, did not show it
    (bench/brokers_random.py: the worker exited with "does not exist"). Verification asks again."""
    admin = _Admin(_Metadata(), _Metadata({"a": LED}))
    listed = topics._listed(admin, ["a"], timeout_s=5)  # type: ignore[arg-type]
    assert "a" in listed
    assert admin.calls == 2


def test_a_topic_missing_past_the_timeout_is_reported_missing() -> None:
    admin = _Admin(_Metadata())
    assert "a" not in topics._listed(admin, ["a"], timeout_s=0.3)  # type: ignore[arg-type]
    assert admin.calls >= 1
