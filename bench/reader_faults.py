"""A bounded repeat harness for issue 29: the shared sink reader (``runtime/dataplane/sink_reader.py``) under
partition leaders SIGKILLed and restarted, with nothing else of the worker around it.

Three Apache Kafka nodes (``min.insync.replicas=2``), a topic of replication factor 3, a producer thread
writing ``--rate`` records a second (``acks=all``), one :class:`SinkReader` reading it for an inbox whose
taker commits what it took to a group after every take (as the consumer-loop sink does). Then ``--rounds``
times: the leader of the partition is SIGKILLed, the harness measures the seconds until a record written
after the kill reaches the inbox, restarts the node, waits for the partition to be in sync and measures
the same again. ``--hog N`` runs N busy processes of its own meanwhile (the load under which issue 29's
stall showed); ``--takeover`` also moves the partition to a new inbox while the leader is down, the old
inbox's unassign coming after the new one's assign (a sink task abandoned past
``task.shutdown.graceful.timeout.ms`` while a new instance starts: the race that left the partition
assigned to nobody). A round whose reading does not come back within ``--give-up`` seconds is a stall.

Prints one line per round (``READER-FAULT``) and a summary; exits 1 if any round stalled.

    .venv/bin/python bench/reader_faults.py --rounds 5 --hog 2 --takeover
"""

from __future__ import annotations

import argparse
import contextlib
import multiprocessing
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.dataplane.sink_reader import Inbox, ReadError, SinkReader
from kconnect.runtime.plugins.api import TopicPartition
from tests.support.apache_kafka import KafkaCluster, partition_replicas, wait_in_sync


def _hog() -> None:  # pragma: no cover - a load generator
    while True:
        pass


class Taker(threading.Thread):
    """Takes the inbox's records as a sink task would, notes the highest offset and when it came, and
    commits after every take through the reader (an admin request)."""

    def __init__(self, reader: SinkReader, inbox: Inbox, group: str) -> None:
        super().__init__(daemon=True)
        self.reader, self.inbox, self.group = reader, inbox, group
        self.highest = -1
        self.errors: list[str] = []
        self.stop = threading.Event()

    def run(self) -> None:
        while not self.stop.is_set():
            taken = self.inbox.take(500, 0.5)
            self.reader.drained(self.inbox)
            offsets: dict[TopicPartition, int] = {}
            for item in taken:
                if isinstance(item, ReadError):
                    self.errors.append(item.message)
                    continue
                if hasattr(item, "offset"):
                    self.highest = max(self.highest, item.offset())
                    offsets[TopicPartition(item.topic(), item.partition())] = item.offset() + 1
            if offsets:
                with contextlib.suppress(Exception):
                    self.reader.commit(self.group, offsets, 10.0)


def produce(bootstrap: str, topic: str, rate: float, stop: threading.Event) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    n = 0
    while not stop.is_set():
        with contextlib.suppress(BufferError):
            producer.produce(topic, f"{n}".encode())
            n += 1
        producer.poll(0)
        time.sleep(1 / rate)
    producer.flush(30)


def end_of(bootstrap: str, topic: str) -> int:
    from confluent_kafka import Consumer
    from confluent_kafka import TopicPartition as KTP

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:6]}"})
    try:
        return int(consumer.get_watermark_offsets(KTP(topic, 0), timeout=10, cached=False)[1])
    finally:
        consumer.close()


def wait_past(taker: Taker, end: int, give_up: float) -> float | None:
    started = time.monotonic()
    while time.monotonic() - started < give_up:
        if taker.highest >= end:
            return time.monotonic() - started
        time.sleep(0.2)
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--rate", type=float, default=25.0)
    parser.add_argument("--hog", type=int, default=0, help="busy processes of the harness's own")
    parser.add_argument("--takeover", action="store_true")
    parser.add_argument("--give-up", type=float, default=90.0)
    args = parser.parse_args(argv)

    hogs = [multiprocessing.Process(target=_hog, daemon=True) for _ in range(args.hog)]
    for h in hogs:
        h.start()
    stalls = 0
    figures: list[str] = []
    try:
        with tempfile.TemporaryDirectory() as work:
            config = {"min.insync.replicas": "2", "default.replication.factor": "3"}
            with KafkaCluster(Path(work), size=3, broker_config=config) as cluster:
                bootstrap = cluster.bootstrap
                topic = f"stall-{uuid.uuid4().hex[:6]}"
                admin = AdminClient({"bootstrap.servers": bootstrap})
                admin.create_topics([NewTopic(topic, 1, 3)])[topic].result(30)
                stop = threading.Event()
                threading.Thread(
                    target=produce, args=(bootstrap, topic, args.rate, stop), daemon=True
                ).start()
                reader = SinkReader({"bootstrap.servers": bootstrap}, "reader-faults")
                tp = TopicPartition(topic, 0)
                inbox = Inbox("task-0")
                reader.assign(inbox, {tp: 0})
                taker = Taker(reader, inbox, f"connect-{topic}")
                taker.start()
                wait_past(taker, 20, 60)
                for round_no in range(1, args.rounds + 1):
                    victim = partition_replicas(bootstrap, [topic])[(topic, 0)][0]
                    end = end_of(bootstrap, topic)
                    cluster.kill(victim)
                    if args.takeover:
                        # A new instance of the task takes the partition while the old one still holds it;
                        # the old one's unassign comes after (its thread was abandoned mid-commit).
                        time.sleep(1.0)
                        old, inbox = inbox, Inbox(f"task-{round_no}")
                        taker.stop.set()
                        taker.join(5)
                        position = max(taker.highest + 1, 0)
                        reader.assign(inbox, {tp: position})
                        reader.unassign(old, [tp]).wait(30)
                        taker = Taker(reader, inbox, f"connect-{topic}")
                        taker.highest = position - 1
                        taker.start()
                    after_kill = wait_past(taker, end, args.give_up)
                    cluster.restart(victim)
                    wait_in_sync(bootstrap, [topic], 90)
                    end = end_of(bootstrap, topic)
                    after_restart = wait_past(taker, end, args.give_up)
                    stalled = after_kill is None or after_restart is None
                    stalls += stalled
                    line = (
                        f"READER-FAULT round={round_no} killed=node{victim} "
                        f"after_kill_s={'STALL' if after_kill is None else f'{after_kill:.1f}'} "
                        f"after_restart_s={'STALL' if after_restart is None else f'{after_restart:.1f}'} "
                        f"read_errors={len(taker.errors)}"
                    )
                    print(line, flush=True)
                    figures.append(line)
                    if stalled:
                        break
                stop.set()
                taker.stop.set()
                reader.close()
    finally:
        for h in hogs:
            h.kill()
    print(
        f"READER-FAULT summary: rounds={len(figures)} stalls={stalls} hog={args.hog} takeover={args.takeover}"
    )
    return 1 if stalls else 0


if __name__ == "__main__":
    sys.exit(main())
