"""The sink reader's planner against the real broker, without Spark: what each micro-batch would cover.

The planner plans each micro-batch up to the partitions' high watermarks, as Spark's Kafka source does.
Apache Kafka's high watermark is the offset after the last record of the log, so the first plan after a
multi-record batch already covers all of it. The embedded broker reports the base offset of a partition's
last batch + 1 instead (DESIGN.md, "Test broker", quirk 2), so there the tail of such a batch waits for the
next batch: the product does nothing about that (it targets Apache Kafka), and this file runs on Apache
Kafka only (skipped under ``KCONNECT_TEST_BROKER=embedded``).
"""

from __future__ import annotations

import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.dataplane.kafka_reader import KafkaStreamReader, decode_offsets
from tests.support.apache_kafka import Broker, broker_kind

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        broker_kind() == "embedded",
        reason="the embedded broker's high watermark stops at its last batch's base offset + 1 (DESIGN.md)",
    ),
]

RECORDS = 10


def test_each_partition_is_planned_to_the_end_of_its_multi_record_batches(broker: Broker) -> None:
    """Three partitions, one multi-record batch each (a linger that holds every record of a flush): the
    first plan reaches every partition's last record, a plan with nothing new stays there, and a second
    batch on each is planned to its end as well."""
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
        assert decode_offsets(reader.initialOffset()) == {(topic, p): 0 for p in range(3)}
        ends = {(topic, p): RECORDS * (p + 1) for p in range(3)}
        assert decode_offsets(reader.latestOffset()) == ends
        assert decode_offsets(reader.latestOffset()) == ends  # nothing new: the plan stays
        batch(RECORDS)
        assert decode_offsets(reader.latestOffset()) == {tp: 2 * end for tp, end in ends.items()}
    finally:
        reader.stop()
