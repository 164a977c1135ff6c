"""The shared sink reader hands a partition to a new task instance even when the old one lets go of it
later (issue 29's cause).

A sink task replaced on the same worker (stopped, abandoned past ``task.shutdown.graceful.timeout.ms``
while a commit waits on a dead coordinator, started again) asks the worker's shared reader for its
partition while the old instance still holds it, and the old instance's unassign comes after. librdkafka
refuses to assign a partition twice (``_CONFLICT``): before the fix the new instance's assignment failed
in the reader's thread, the old one's unassign then removed the partition, and the new instance stayed
RUNNING reading nothing. Here the same order of calls on a real reader against a real broker: the new
inbox must receive what is written afterwards, and the old one nothing more.
"""

from __future__ import annotations

import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.dataplane.sink_reader import Inbox, SinkReader
from kconnect.runtime.plugins.api import TopicPartition
from tests.support.apache_kafka import Broker

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _offsets(inbox: Inbox, want: int, timeout: float) -> list[int]:
    got: list[int] = []
    deadline = time.monotonic() + timeout
    while len(got) < want and time.monotonic() < deadline:
        got += [m.offset() for m in inbox.take(100, 0.2) if hasattr(m, "offset")]
    return got


def test_a_new_inbox_takes_over_a_partition_the_old_one_releases_late(broker: Broker) -> None:
    topic = f"takeover-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    producer = Producer({"bootstrap.servers": broker.bootstrap})

    def write(n: int) -> None:
        for i in range(n):
            producer.produce(topic, f"{i}".encode())
        assert producer.flush(30) == 0

    reader = SinkReader({"bootstrap.servers": broker.bootstrap}, f"takeover-{uuid.uuid4().hex[:4]}")
    try:
        tp = TopicPartition(topic, 0)
        old = Inbox("old")
        reader.assign(old, {tp: 0})
        write(5)
        assert _offsets(old, 5, 30) == [0, 1, 2, 3, 4]

        new = Inbox("new")
        reader.assign(new, {tp: 5})  # the new instance, from the committed offset
        assert reader.unassign(old, [tp]).wait(30)  # the old instance lets go only now
        write(5)
        assert _offsets(new, 5, 30) == [5, 6, 7, 8, 9]
        assert _offsets(old, 1, 1) == []
        assert new.partitions == {tp} and not old.partitions
    finally:
        reader.close()
