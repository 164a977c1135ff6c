"""The sink reader's planner against the real broker, without Spark: what each micro-batch would cover.

The embedded broker reports the base offset of a partition's last batch + 1 as its high watermark
(DESIGN.md, "Test broker", quirk 2), so the tail of a multi-record batch is found only by asking the broker
for records past the reported end (``idle_partitions``). On Apache Kafka the watermark is right and the
first plan already covers every record; the assertions hold there too.
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.dataplane import kafka_reader
from kconnect.runtime.dataplane.kafka_reader import KafkaStreamReader, decode_offsets
from tests.support.apache_kafka import Broker

pytestmark = pytest.mark.integration

RECORDS = 10


def _topic_with_one_batch(broker: Broker) -> str:
    topic = f"reader-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 1000})
    for i in range(RECORDS):
        producer.produce(topic, value=f"line {i}".encode())
    assert producer.flush(15) == 0
    return topic


def test_a_probe_that_got_no_answer_is_asked_again_so_a_stopped_producers_tail_is_delivered(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A probe whose deadline passes before the broker answered (a new client still connecting on a loaded
    machine) must not count as asked: the producer has stopped, the watermark will never move again, and
    the last records of its last batch would never be planned (a CI failure of the verifiable end-to-end
    test: the sink never caught up once the source stopped)."""
    topic = _topic_with_one_batch(broker)
    reader = KafkaStreamReader(
        {
            "topics": topic,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "kafka.bootstrap.servers": broker.bootstrap,
        }
    )
    try:
        assert decode_offsets(reader.initialOffset()) == {(topic, 0): 0}
        monkeypatch.setattr(kafka_reader, "PROBE_S", 0.0)  # every probe ends before any answer
        for _ in range(2):
            unanswered = decode_offsets(reader.latestOffset())[(topic, 0)]
        assert unanswered in (1, RECORDS)  # the test broker's watermark, or Apache Kafka's
        monkeypatch.undo()
        assert decode_offsets(reader.latestOffset()) == {(topic, 0): RECORDS}
        assert decode_offsets(reader.latestOffset()) == {(topic, 0): RECORDS}  # asked, answered: stays
    finally:
        reader.stop()


def test_each_partition_is_planned_to_its_own_served_end(broker: Broker) -> None:
    """One prober serves every partition in turn: what one partition's probe answered (its records, its
    end-of-partition event) must never count for the next. Three partitions, one multi-record batch each,
    probed together; then a stopped producer's last batch on each, probed again."""
    topic = f"reader-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 3, 1)]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 500})

    def batch(count: int) -> None:
        for partition in range(3):
            for i in range(count * (partition + 1)):
                producer.produce(topic, value=f"{partition}-{i}".encode(), partition=partition)
        assert producer.flush(15) == 0

    batch(RECORDS)
    reader = KafkaStreamReader(
        {
            "topics": topic,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "kafka.bootstrap.servers": broker.bootstrap,
        }
    )
    try:
        reader.initialOffset()
        ends = {(topic, p): RECORDS * (p + 1) for p in range(3)}
        planned: dict[tuple[str, int], int] = {}
        for _ in range(4):  # the test broker's watermark first, then the probes' answers
            planned = decode_offsets(reader.latestOffset())
        assert planned == ends
        batch(RECORDS)
        for _ in range(4):
            planned = decode_offsets(reader.latestOffset())
        assert planned == {tp: 2 * end for tp, end in ends.items()}
    finally:
        reader.stop()
