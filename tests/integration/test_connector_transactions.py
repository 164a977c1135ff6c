"""Connector-defined transactions (KIP-618, ``transaction.boundary=connector``) end to end, exactly once
across a worker SIGKILLed with a transaction open.

A source plugin in ``plugin.path`` counts 0, 1, 2, ... three numbers per poll and ends its own
transactions through its TransactionContext: it commits after every number ending a run of five (n % 5 ==
4) and aborts after every multiple of 7, which discards that number and every number of its transaction.
Which numbers a read_committed reader may see is therefore fixed by the numbers alone
(:func:`committed_numbers`), however polls, kills and restarts fall. The task stalls once, with numbers
50-53 sent in a transaction that only 54 would commit; the worker running it is SIGKILLed there, and the
other worker takes the task over: its ``init_transactions`` fences the dead instance and aborts what it
left open, and it resumes after 49, whose abort committed the offsets up to there. A read_committed reader
then sees every committed number exactly once and none of the aborted ones, while a read_uncommitted one
shows that aborted numbers (those sent before their abort), and 50-53 of the killed instance, did reach
the topic.

Apache Kafka only: the embedded test broker serves aborted records to read_committed readers.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.apache_kafka import Broker, broker_kind
from tests.support.cluster import stable_view, start_cluster, wait_nudging, wait_until

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(
        broker_kind() == "embedded", reason="the embedded broker serves aborted records to read_committed"
    ),
]

COMMIT_EVERY = 5
ABORT_DIVISOR = 7
STALL_AFTER = 51  # the batch 51-53 is the last the first instance sends: 50-53 are then uncommitted

#: The plugin: a connector that can define transaction boundaries, and its counting task.
NUMBERS_SOURCE = r"""
import json
import os
import time

from kconnect.runtime.plugins.api import (
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    SourceConnector,
    SourceRecord,
    SourceTask,
)
from kconnect.runtime.plugins.config_def import ConfigDef

PARTITION = {"numbers": 0}


class NumbersSourceConnector(SourceConnector):
    def version(self):
        return "1.0"

    def config_def(self):
        return ConfigDef()

    def start(self, props):
        self.props = dict(props)

    def task_class(self):
        return NumbersSourceTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass

    def exactly_once_support(self, props):
        return ExactlyOnceSupport.SUPPORTED

    def can_define_transaction_boundaries(self, props):
        return ConnectorTransactionBoundaries.SUPPORTED


class NumbersSourceTask(SourceTask):
    def version(self):
        return "1.0"

    def start(self, props):
        self.topic = props["topic"]
        self.commit_every = int(props["numbers.commit.every"])
        self.abort_divisor = int(props["numbers.abort.divisor"])
        self.stall_after = int(props["numbers.stall.after"])
        self.stall_file = props["numbers.stall.file"]
        self.transactions = self.context.transaction_context()
        offset = self.context.offset_storage_reader.offset(PARTITION)
        self.next = int(offset["next"]) if offset else 0
        self.stalled = False
        print(json.dumps({"numbers": "started", "next": self.next}), flush=True)

    def poll(self):
        time.sleep(0.05)
        if self.stalled:
            return None
        if self.next > self.stall_after and not os.path.exists(self.stall_file):
            # Once, for the first instance only: idle with a transaction open, to be killed there.
            with open(self.stall_file, "w") as f:
                f.write(str(self.next))
            self.stalled = True
            return None
        records = []
        for n in range(self.next, self.next + 3):
            record = SourceRecord(PARTITION, {"next": n + 1}, self.topic, value=str(n))
            if n % self.abort_divisor == 0:
                self.transactions.abort_transaction(record)
            elif n % self.commit_every == self.commit_every - 1:
                self.transactions.commit_transaction(record)
            records.append(record)
        self.next += 3
        return records

    def stop(self):
        pass
"""


def committed_numbers(top: int) -> list[int]:
    """The numbers up to ``top`` that end up committed: those whose transaction ends in a commit."""
    committed: list[int] = []
    open_numbers: list[int] = []
    for n in range(top + 1):
        open_numbers.append(n)
        if n % ABORT_DIVISOR == 0:
            open_numbers = []
        elif n % COMMIT_EVERY == COMMIT_EVERY - 1:
            committed += open_numbers
            open_numbers = []
    return committed


def read_numbers(
    bootstrap: str, topic: str, isolation: str, quiet_s: float = 3.0, until: int | None = None
) -> list[int]:
    """Every number a reader with this isolation level is served, from the start, until ``quiet_s``
    passes without one (the end of a transaction is a control record no reader sees), or, with ``until``,
    as soon as that number or a later one is served: while the task still produces, the topic never goes
    quiet, and a reader waiting for quiet would read forever."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"numbers-check-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
    seen: list[int] = []
    last = time.monotonic()
    try:
        while time.monotonic() - last < quiet_s:
            for msg in consumer.consume(500, 0.5):
                if msg.error() is None:
                    seen.append(int(msg.value() or b"-1"))
                    last = time.monotonic()
                    if until is not None and seen[-1] >= until:
                        return seen
    finally:
        consumer.close()
    return seen


def test_committed_numbers_model() -> None:
    """The model the end-to-end test checks against, by hand: 0 aborts alone, 1-4 commit, 5-7 abort
    with 7, 8-9 commit, 10-14 abort with 14 (a multiple of 7 aborts even where it would commit)."""
    assert committed_numbers(16) == [1, 2, 3, 4, 8, 9]


def test_connector_defined_transactions_survive_a_killed_worker(tmp_path: Path, broker: Broker) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "numbers_source.py").write_text(NUMBERS_SOURCE)
    workers = start_cluster(
        tmp_path,
        broker.bootstrap,
        2,
        spark=True,
        spark_master="local[1]",
        spark_ui_enabled="false",
        scheduled_rebalance_max_delay_ms=0,
        exactly_once_source_support="enabled",
        plugin_path=str(plugins),
    )
    topic = f"numbers-{uuid.uuid4().hex[:6]}"
    stall_file = tmp_path / "stalled"
    config = {
        "connector.class": "NumbersSourceConnector",
        "topic": topic,
        "tasks.max": "1",
        "exactly.once.support": "required",
        "transaction.boundary": "connector",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        "numbers.commit.every": str(COMMIT_EVERY),
        "numbers.abort.divisor": str(ABORT_DIVISOR),
        "numbers.stall.after": str(STALL_AFTER),
        "numbers.stall.file": str(stall_file),
    }

    def task_owner(state: str = "RUNNING") -> str | None:
        for w in workers:
            if not w.alive():
                continue
            resp = w.get("/connectors/numbers/status")
            tasks = resp.json().get("tasks") if resp.status_code == 200 else None
            if tasks and tasks[0]["state"] == state:
                return str(tasks[0]["worker_id"])
        return None

    try:
        wait_until(stable_view(workers, 2), 90, "two workers in one group")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held: futures need it alive
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(15)
        # A connector that cannot define its transactions is refused transaction.boundary=connector.
        verifiable = {
            "connector.class": "VerifiableSource",
            "topic": topic,
            "transaction.boundary": "connector",
        }
        refused = workers[0].request(
            "PUT", "/connector-plugins/VerifiableSource/config/validate", json={"name": "v", **verifiable}
        )
        assert refused.status_code == 200, refused.text
        errors = [
            e
            for c in refused.json()["configs"]
            if c["value"]["name"] == "transaction.boundary"
            for e in c["value"]["errors"]
        ]
        assert errors and "does not support connector-defined transaction boundaries" in errors[0], errors
        resp = workers[0].request("POST", "/connectors", json={"name": "numbers", "config": config})
        assert resp.status_code == 201, resp.text

        owner = wait_until(task_owner, 90, "the task RUNNING")
        [victim] = [w for w in workers if w.url.endswith(owner.rsplit(":", 1)[1])]
        [survivor] = [w for w in workers if w is not victim]
        wait_until(stall_file.exists, 60, "the task stalled with a transaction open")
        # 50-53 were sent in the open transaction (a read_uncommitted reader is served them) and never
        # committed; 49's abort committed the offsets up to there.
        wait_until(
            lambda: {50, 51, 52, 53} <= set(read_numbers(broker.bootstrap, topic, "read_uncommitted", 1.0)),
            30,
            "50-53 sent in the open transaction",
        )
        before_kill = read_numbers(broker.bootstrap, topic, "read_committed", 1.0)
        assert sorted(before_kill) == committed_numbers(53), before_kill  # 44 the last: 45-49 aborted
        victim.kill()  # SIGKILL: the transaction stays open, no final commit, no clean hand-over
        survivor_id = survivor.url.split("://", 1)[1]
        wait_nudging(
            lambda: task_owner() == survivor_id or None,
            lambda: survivor.request("PUT", "/connectors/numbers/config", json=config),
            120,
            "the task RUNNING on the surviving worker",
        )
        wait_until(
            lambda: (
                max(read_numbers(broker.bootstrap, topic, "read_committed", 1.0, until=150), default=-1)
                >= 150
            ),
            90,
            "numbers up to 150 committed after the take-over",
        )
        resp = survivor.request("PUT", "/connectors/numbers/stop")
        assert resp.status_code == 204, resp.text
        wait_until(
            lambda: (
                (s := survivor.get("/connectors/numbers/status").json()).get("connector", {}).get("state")
                == "STOPPED"
                and not s.get("tasks")
            ),
            60,
            "the connector STOPPED",
        )

        seen = read_numbers(broker.bootstrap, topic, "read_committed", quiet_s=5.0)
        counts = Counter(seen)
        duplicates = sorted(n for n, c in counts.items() if c > 1)
        expected = committed_numbers(max(seen))
        missing = sorted(set(expected) - set(seen))
        unexpected = sorted(set(seen) - set(expected))
        print(
            f"\nread_committed: {len(seen)} numbers up to {max(seen)}, {len(duplicates)} duplicated, "
            f"{len(missing)} missing, {len(unexpected)} that were aborted"
        )
        assert not duplicates, duplicates[:20]
        assert not missing, missing[:20]
        assert not unexpected, unexpected[:20]
        assert {50, 51, 52, 53, 54} <= set(seen)
        # What reached the topic all the same: aborted numbers sent before their abort (those still in the
        # producer's queue at the abort are purged, never sent), and 50-53 once from each instance.
        everything = Counter(read_numbers(broker.bootstrap, topic, "read_uncommitted", quiet_s=3.0))
        aborted_sent = sorted(set(everything) - set(expected) - {n for n in everything if n > max(seen)})
        print(f"read_uncommitted: {len(aborted_sent)} aborted numbers in the topic, e.g. {aborted_sent[:8]}")
        assert len(aborted_sent) >= 10, aborted_sent
        assert all(everything[n] == 2 for n in (50, 51, 52, 53)), [everything[n] for n in (50, 51, 52, 53)]
        starts = [
            json.loads(line)
            for line in survivor.log_text().splitlines()
            if line.startswith('{"numbers": "started"')
        ]
        assert starts and starts[0]["next"] == 50, starts
    finally:
        for w in workers:
            if w.alive():
                w.stop(60)
