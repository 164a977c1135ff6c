"""The sink reader's planner against the real broker, without Spark: what each micro-batch would cover,
and, on a transactional topic, what reading the planned ranges returns.

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
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.dataplane import kafka_reader
from kconnect.runtime.dataplane.kafka_reader import KafkaStreamReader, decode_offsets
from tests.support.apache_kafka import Broker, broker_kind
from tests.support.cluster import wait_until

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


def _read_planned(
    reader: KafkaStreamReader, start: dict[str, int], end: dict[str, int]
) -> list[tuple[int, bytes]]:
    """(offset, value) of every record ``read`` returns for the ranges planned in [start, end)."""
    found: list[tuple[int, bytes]] = []
    for part in reader.partitions(start, end):
        for batch in reader.read(part):
            found.extend(
                zip(batch.column("offset").to_pylist(), batch.column("value").to_pylist(), strict=True)
            )
    return found


def test_a_transactional_topic_is_read_to_each_planned_end(
    broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A transactional producer's topic (what an exactly-once source writes): each transaction ends in a
    control record (its commit or abort marker) that takes an offset and that a consumer never returns,
    and a read_committed consumer skips aborted records too. A planned range that ends on a marker must
    still be read to its end, at once, not after ``read.timeout.ms`` (a TimeoutError here): every
    committed record comes back, no aborted one, and the consumer kept for the next micro-batch is kept
    at its true position, past the marker, where the next range starts."""
    topic = f"reader-tx-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    # read_committed, as the reader's: its end offset is the last stable offset.
    probe = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": f"probe-{topic}"})

    def transaction(values: list[bytes], commit: bool, stable_end: int) -> None:
        producer.begin_transaction()
        for value in values:
            producer.produce(topic, value=value, partition=0)
        assert producer.flush(30) == 0  # abort_transaction would drop what is not sent yet
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        # The coordinator writes the markers after the commit returns; the last stable offset passes
        # the marker once it is written.
        wait_until(
            lambda: probe.get_watermark_offsets(TopicPartition(topic, 0), timeout=5)[1] >= stable_end,
            30,
            f"the last stable offset {stable_end}",
        )

    pool = kafka_reader._ConsumerPool(idle_s=3600)
    monkeypatch.setattr(kafka_reader, "_POOL", pool)

    def kept() -> dict[tuple[str, int], int]:
        """Where the pooled consumers are, by topic-partition."""
        return {(k[1], k[2]): at for k, (_, at, _) in pool._kept.items()}

    reader = KafkaStreamReader(
        {
            "topics": topic,
            "group.id": f"g-{uuid.uuid4().hex[:6]}",
            "kafka.bootstrap.servers": broker.bootstrap,
            "read.timeout.ms": "5000",  # a read stuck before a marker fails in 5 s
        }
    )
    key = f"{topic}-0"
    try:
        committed = [f"c{i}".encode() for i in range(RECORDS)]
        transaction(committed, commit=True, stable_end=11)  # offsets 0-9, commit marker at 10
        start = reader.initialOffset()
        first_end = reader.latestOffset()
        assert first_end == {key: 11}  # past the marker
        assert _read_planned(reader, start, first_end) == list(enumerate(committed))
        assert kept() == {(topic, 0): 11}  # past the marker too: the next range reuses the consumer

        aborted = [f"a{i}".encode() for i in range(5)]
        transaction(aborted, commit=False, stable_end=17)  # offsets 11-15, abort marker at 16
        later = [f"d{i}".encode() for i in range(5)]
        transaction(later, commit=True, stable_end=23)  # offsets 17-21, commit marker at 22
        second_end = reader.latestOffset()
        assert second_end == {key: 23}
        assert _read_planned(reader, first_end, second_end) == list(enumerate(later, start=17))
        assert kept() == {(topic, 0): 23}

        # Ranges without a record: a marker alone (where a restarted query starts when its group
        # committed the offset after a transaction's last record, as sink tasks commit), and an aborted
        # transaction with its marker, read by fresh consumers that fetch on past them. The consumer is
        # kept where it truly is, past records beyond the range it dropped, so that a range from the end
        # of this one is read by another consumer and gets those records.
        assert _read_planned(reader, {key: 10}, {key: 11}) == []
        assert _read_planned(reader, {key: 11}, {key: 17}) == []
        assert kept()[(topic, 0)] >= 17
        assert _read_planned(reader, {key: 17}, {key: 23}) == list(enumerate(later, start=17))
        assert kept() == {(topic, 0): 23}
    finally:
        reader.stop()
        probe.close()
        producer.close()
        pool.idle_s = 0
        pool.close_idle()
