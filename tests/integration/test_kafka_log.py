"""The internal-topic log (``runtime/storage/kafka_log.py``) against the real broker."""

from __future__ import annotations

import threading
import time
import uuid

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.storage.kafka_log import KafkaLog, LogRecord
from tests.support.apache_kafka import Broker

pytestmark = pytest.mark.integration


def test_read_to_end_passes_the_commit_marker_of_a_transaction(broker: Broker) -> None:
    """An exactly-once source task writes its offsets inside a transaction, so the offsets topic ends
    in a commit marker: an offset no record handed to the log ever has. ``read_to_end`` must still
    finish (it once waited out its whole timeout, and a source task on an executor failed to start)."""
    topic = f"log-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    producer.begin_transaction()
    for i in range(3):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v")
    producer.commit_transaction(30)

    seen: list[LogRecord] = []
    lock = threading.Lock()

    def on_record(record: LogRecord) -> None:
        with lock:
            seen.append(record)

    log = KafkaLog(topic, broker.bootstrap, on_record, client_id="test")
    log.start(15)
    try:
        # commit_transaction returns once the coordinator logged the commit; the partition's marker, and
        # with it the records' visibility to a read_committed reader (its end: the last stable offset),
        # follows a moment later. Each read_to_end must finish, not time out at the marker.
        deadline = time.monotonic() + 30
        while True:
            assert log.read_to_end(15), "read_to_end timed out at the commit marker"
            with lock:
                keys = [r.key for r in seen]
            if keys or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert keys == [b"k0", b"k1", b"k2"]
        log.send(b"k3", b"v")  # a plain write after it is read too
        assert log.read_to_end(15)
        assert [r.key for r in seen][-1] == b"k3"
    finally:
        log.stop()
