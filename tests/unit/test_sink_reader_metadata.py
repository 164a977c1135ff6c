"""The shared sink reader (``dataplane.sink_reader``) asks for the metadata of the topics new to its consumer
once per batch of queued assignments, not once per topic: asked one by one on the reader's thread, a
worker taking 80 sink tasks home held every task of its reader without a record for 2.6 s (issue 34's
rolling restart). The consumer and admin client are fakes that note what the reader's thread calls."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

from kconnect.runtime.dataplane.sink_reader import Inbox, SinkReader
from kconnect.runtime.plugins.api import TopicPartition


class FakeConsumer:
    """Notes each call the reader's thread makes; ``poll`` waits at the gate until the test opens it, so
    that assignments queue up meanwhile as they do while the reader is busy."""

    gate = threading.Event()
    polling = threading.Event()
    made: list[FakeConsumer] = []
    on_metadata: Callable[[], None] | None = None

    def __init__(self, conf: dict[str, Any]) -> None:
        self.calls: list[tuple[str, Any]] = []
        FakeConsumer.made.append(self)

    def poll(self, timeout: float) -> None:
        FakeConsumer.polling.set()
        FakeConsumer.gate.wait(5)
        self.calls.append(("poll", timeout))
        time.sleep(min(timeout, 0.005))

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> None:
        self.calls.append(("list_topics", topic))
        hook, FakeConsumer.on_metadata = FakeConsumer.on_metadata, None
        if hook is not None:  # something queued while the broker is asked
            hook()

    def incremental_assign(self, partitions: list[Any]) -> None:
        self.calls.append(("assign", sorted(p.topic for p in partitions)))

    def incremental_unassign(self, partitions: list[Any]) -> None:
        self.calls.append(("unassign", sorted(p.topic for p in partitions)))

    def position(self, partitions: list[Any]) -> list[Any]:
        return []

    def close(self) -> None:
        pass


class FakeAdmin:
    def __init__(self, conf: dict[str, Any]) -> None:
        pass


@pytest.fixture
def reader(monkeypatch: pytest.MonkeyPatch) -> Any:
    import confluent_kafka
    import confluent_kafka.admin

    monkeypatch.setattr(confluent_kafka, "Consumer", FakeConsumer)
    monkeypatch.setattr(confluent_kafka.admin, "AdminClient", FakeAdmin)
    FakeConsumer.gate.clear()
    FakeConsumer.polling.clear()
    FakeConsumer.made.clear()
    FakeConsumer.on_metadata = None
    made = SinkReader({"bootstrap.servers": "127.0.0.1:1"}, "reader-test")
    yield made
    FakeConsumer.gate.set()
    made.close()


def _calls(reader: SinkReader, assigns: int) -> list[tuple[str, Any]]:
    """The consumer's calls once ``assigns`` assignments ran."""
    consumer = FakeConsumer.made[-1]
    deadline = time.monotonic() + 5
    while sum(1 for c in consumer.calls if c[0] == "assign") < assigns and time.monotonic() < deadline:
        time.sleep(0.005)
    return list(consumer.calls)


def test_assignments_queued_together_ask_for_their_new_topics_in_one_request(reader: SinkReader) -> None:
    assert FakeConsumer.polling.wait(5)  # the reader's thread waits in a poll while they queue up
    for n in range(80):
        reader.assign(Inbox(f"task-{n}"), {TopicPartition(f"topic-{n}", 0): 5})
    FakeConsumer.gate.set()
    calls = _calls(reader, 80)
    asked = [c for c in calls if c[0] == "list_topics"]
    assert asked == [("list_topics", None)]  # one request for every topic, not 80 one after another
    first_assign = next(i for i, c in enumerate(calls) if c[0] == "assign")
    assert calls.index(("list_topics", None)) < first_assign  # known before any partition is assigned
    assigned = sorted(t for c in calls if c[0] == "assign" for t in c[1])
    assert assigned == sorted(f"topic-{n}" for n in range(80))


def test_one_new_topic_is_asked_for_alone_and_a_topic_read_already_not_at_all(reader: SinkReader) -> None:
    FakeConsumer.gate.set()
    first = Inbox("first")
    reader.assign(first, {TopicPartition("lines", 0): 0})
    assert [c for c in _calls(reader, 1) if c[0] == "list_topics"] == [("list_topics", "lines")]
    # Another partition of a topic the reader reads: nothing to learn.
    reader.assign(Inbox("second"), {TopicPartition("lines", 1): 0})
    assert [c for c in _calls(reader, 2) if c[0] == "list_topics"] == [("list_topics", "lines")]


def test_assignments_that_keep_coming_do_not_hold_the_reader_off_its_polls(reader: SinkReader) -> None:
    """An assignment queued while the reader's thread waits for a metadata answer waits for one poll (the
    old loop ran requests until none was left, a metadata request each, and polled nothing meanwhile:
    assignments coming faster than the broker answered held every task's records), and that poll returns
    at once rather than waiting ``POLL_S``."""
    later = Inbox("later")
    FakeConsumer.on_metadata = lambda: reader.assign(later, {TopicPartition("topic-later", 0): 0})
    assert FakeConsumer.polling.wait(5)
    reader.assign(Inbox("first"), {TopicPartition("topic-first", 0): 0})
    FakeConsumer.gate.set()
    calls = _calls(reader, 2)
    assigns = [i for i, c in enumerate(calls) if c[0] == "assign"]
    assert [calls[i][1] for i in assigns] == [["topic-first"], ["topic-later"]]
    between = calls[assigns[0] + 1 : assigns[1]]
    assert ("poll", 0) in between
