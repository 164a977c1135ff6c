"""A sink task moved to another worker resumes from its consumer group's committed offsets.

Two real kconnect workers running the Spark data plane; the one that runs the sink task stops cleanly,
hands the task over, and the other worker's new query starts where the group's offsets say: nothing
is lost, and what is read twice (at-least-once) is counted. A file of its own, so that no other
worker's SparkSession shares the two cores with these.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

from tests.support.apache_kafka import Broker
from tests.support.cluster import stable_view, start_cluster, wait_nudging, wait_until

pytestmark = pytest.mark.integration


def produce(bootstrap: str, topic: str, values: range) -> None:
    producer = Producer({"bootstrap.servers": bootstrap})
    for n in values:
        envelope = {"schema": {"type": "string", "optional": False}, "payload": f"line {n}"}
        producer.produce(topic, value=json.dumps(envelope).encode())
    assert producer.flush(30) == 0


def test_moved_sink_task_resumes_from_committed_offsets(tmp_path: Path, broker: Broker) -> None:
    workers = start_cluster(
        tmp_path,
        broker.bootstrap,
        2,
        spark=True,
        spark_master="local[1]",
        spark_ui_enabled="false",
        scheduled_rebalance_max_delay_ms=0,
    )
    topic = f"move-{uuid.uuid4().hex[:6]}"
    out = tmp_path / "out.txt"
    config = {"connector.class": "FileStreamSink", "file": str(out), "topics": topic, "tasks.max": "1"}

    def lines() -> list[str]:
        return out.read_text().splitlines() if out.exists() else []

    def owner() -> Any:
        for w in workers:
            if not w.alive():
                continue
            resp = w.get("/connectors/sink/status")
            tasks = resp.json().get("tasks") if resp.status_code == 200 else None
            if tasks and tasks[0]["state"] == "RUNNING":
                return tasks[0]["worker_id"]
        return None

    try:
        wait_until(stable_view(workers, 2), 90, "two workers in one group")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held: futures need it alive
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(15)
        first = 1000
        produce(broker.bootstrap, topic, range(first))
        resp = workers[0].request("POST", "/connectors", json={"name": "sink", "config": config})
        assert resp.status_code == 201, resp.text
        wait_until(lambda: len(lines()) >= first, 120, f"{first} lines in the sink file")
        assert lines() == [f"line {n}" for n in range(first)]

        running_on = wait_until(owner, 30, "the sink task RUNNING")
        [leaving] = [w for w in workers if w.url.endswith(running_on.rsplit(":", 1)[1])]
        [staying] = [w for w in workers if w is not leaving]
        assert leaving.stop(90) == 0
        assert "work handed over" in leaving.log_text()

        more = 500
        produce(broker.bootstrap, topic, range(first, first + more))
        expected = [f"line {n}" for n in range(first + more)]
        staying_id = staying.url.split("://", 1)[1]

        def resumed() -> bool:
            return owner() == staying_id and set(expected) <= set(lines())

        wait_nudging(
            resumed,
            lambda: staying.request("PUT", "/connectors/sink/config", json=config),
            150,
            "the sink task running on the other worker with every line",
        )
        written = lines()
        duplicates = len(written) - len(set(written))
        print(f"\nafter the move: {len(written)} lines written, {duplicates} read twice")
        assert list(dict.fromkeys(written)) == expected
        assert duplicates < first, "the moved task re-read the topic from its start"
    finally:
        for w in workers:
            if w.alive():
                w.stop(60)
