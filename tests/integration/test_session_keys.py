"""KIP-507 session keys on a live group (issue 23, row 4).

Two workers under ``group.protocol=connect`` (the default: configuration changes need no JoinGroup round)
with a short ``inter.worker.key.ttl.ms`` and ``inter.worker.signature.algorithm=HmacSHA512``. The group
stays in one generation, and still the leader writes a new ``session-key`` record to the config topic
each time the key expires. Internal requests keep working across rotations: connectors created while the
keys rotate get their task configs written whichever worker runs them (a follower sends them to the leader
signed), a request the test signs with the newest key read from the config topic is accepted, and one
signed with an expired key is refused with 403.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import json
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.cluster import WorkerProcess, stable_view, start_cluster, topic_names, wait_until

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

TTL_MS = 3000


def _session_keys(bootstrap: str, topic: str) -> list[dict[str, Any]]:
    """Every ``session-key`` record of the config topic so far, in order."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"keys-{uuid.uuid4().hex[:6]}"})
    try:
        partition = TopicPartition(topic, 0)
        _low, high = consumer.get_watermark_offsets(partition, timeout=10)
        consumer.assign([TopicPartition(topic, 0, 0)])
        keys: list[dict[str, Any]] = []
        deadline = time.monotonic() + 30
        position = 0
        while position < high and time.monotonic() < deadline:
            for message in consumer.consume(num_messages=500, timeout=0.5):
                if message.error() is not None:
                    continue
                position = message.offset() + 1
                if message.key() == b"session-key" and message.value() is not None:
                    keys.append(json.loads(message.value()))
        assert position >= high, f"read the config topic to {position} of {high}"
        return keys
    finally:
        consumer.close()


def _signed(key: dict[str, Any], body: bytes) -> dict[str, str]:
    """Headers as a Java worker signing with HmacSHA512 sends them."""
    digest = hmac.new(base64.b64decode(key["key"]), body, hashlib.sha512).digest()
    return {
        "X-Connect-Authorization": base64.b64encode(digest).decode(),
        "X-Connect-Request-Signature-Algorithm": "HmacSHA512",
        "Content-Type": "application/json",
    }


def _tasks_written(worker: WorkerProcess, names: list[str]) -> bool:
    for name in names:
        resp = worker.get(f"/connectors/{name}/tasks")
        if resp.status_code != 200 or not resp.json():
            return False
    return True


def test_keys_rotate_in_a_stable_reconciling_group_and_internal_requests_still_pass(
    tmp_path: Path, broker: Any
) -> None:
    group = f"keys-{uuid.uuid4().hex[:8]}"
    config_topic = topic_names(group)["config.storage.topic"]
    workers = start_cluster(
        tmp_path,
        broker.bootstrap,
        2,
        group,
        group_protocol="connect",
        file_connectors_enable="true",
        inter_worker_key_ttl_ms=TTL_MS,
        inter_worker_signature_algorithm="HmacSHA512",
        inter_worker_verification_algorithms="HmacSHA256,HmacSHA512",
    )
    try:
        first = wait_until(stable_view(workers, 2), 120, "two workers in one generation")
        leader = next(w for w in workers if w.url + "/" == first["leader_url"])

        # Connectors created while the keys rotate: every one gets its task configs written, also those a
        # follower runs (it sends them to the leader signed with the key it read).
        names = [f"src-{i}" for i in range(4)]
        source = tmp_path / "in.txt"
        source.write_text("one line\n")
        for name in names:
            config = {"connector.class": "FileStreamSource", "file": str(source), "topic": f"t-{name}"}
            resp = leader.request("POST", "/connectors", json={"name": name, "config": config})
            assert resp.status_code == 201, resp.text
        time.sleep(3 * TTL_MS / 1000 + 1)
        wait_until(lambda: _tasks_written(leader, names), 60, "every connector's task configs")

        keys = _session_keys(broker.bootstrap, config_topic)
        stamps = [k["creation-timestamp"] for k in keys]
        assert len(set(stamps)) >= 3, stamps  # the first key, then one per expiry
        gaps = [b - a for a, b in itertools.pairwise(stamps)]
        assert all(gap >= TTL_MS for gap in gaps), gaps  # never before the key expired
        assert len({k["key"] for k in keys}) == len(keys)
        assert {k["algorithm"] for k in keys} == {"HmacSHA256"}  # the generation algorithm's default
        assert all(len(base64.b64decode(k["key"])) == 32 for k in keys)

        # No JoinGroup round happened meanwhile: the rotations are the leader's ticks.
        now = wait_until(stable_view(workers, 2), 30, "the group still stable")
        assert now["generation"] == first["generation"], (first["generation"], now["generation"])

        # A request signed with the newest key is accepted; one signed with the first key is refused.
        body = json.dumps([{"task.class": "FileStreamSourceTask", "file": str(source), "topic": "t-src-0"}])
        status = 0
        for _ in range(5):  # a rotation may land between the read and the request
            newest = _session_keys(broker.bootstrap, config_topic)[-1]
            resp = leader.request(
                "POST",
                "/connectors/src-0/tasks",
                content=body.encode(),
                headers=_signed(newest, body.encode()),
            )
            status = resp.status_code
            if status == 204:
                break
        assert status == 204, resp.text
        resp = leader.request(
            "POST", "/connectors/src-0/tasks", content=body.encode(), headers=_signed(keys[0], body.encode())
        )
        assert resp.status_code == 403, resp.text
        assert resp.json()["message"] == "Internal request contained invalid signature."
        unsigned = leader.request(
            "POST",
            "/connectors/src-0/tasks",
            content=body.encode(),
            headers={"Content-Type": "application/json"},
        )
        assert unsigned.status_code == 400, unsigned.text
    finally:
        for w in workers:
            if w.alive():
                w.stop(60)
