"""Leader fail-over with memory, live (issue 7): three workers hold a sink connector's 30 tasks.

1. The leader is SIGKILLed while no delay runs. Java's new leader cannot tell its work from new work and
   spreads it at once; kconnect's reads the last target assignment from the group records, knows the
   work was lost, and holds it for ``scheduled.rebalance.max.delay.ms``.
2. The new leader is SIGKILLed during that delay: the last worker continues the delay (with what is
   left of it) instead of spreading the work of both dead workers at once.
3. The first victim returns within the delay: when it runs out, the lost work goes to it (the only
   worker that was empty meanwhile), and the worker that stayed never stopped a task.

Each step is checked in ``GET /workers`` (what every worker holds) and ``GET /group`` (the records).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kconnect.runtime.group.group_records import (
    CurrentMemberAssignmentKey,
    MemberMetadataKey,
    RecordKey,
    decode_key,
)
from tests.integration.test_cooperative import TASKS, _holdings, _settle, _sink
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, start_cluster, wait_until

pytestmark = pytest.mark.integration

DELAY_MS = 45000


def _leader(workers: list[WorkerProcess]) -> WorkerProcess:
    view = wait_until(lambda: workers[0].workers(), 30, "a view of the group")
    return next(w for w in workers if w.url + "/" == view["leader_url"])


def _holding_back(
    workers: list[WorkerProcess], held: int, after_generation: int
) -> dict[str, dict[str, Any]] | None:
    """Settled in one generation later than ``after_generation``, a delay running on every worker, and
    ``held`` tasks held by nobody."""
    h = _holdings(workers)
    if h is None or len(gens := {v["generation"] for v in h.values()}) != 1 or gens.pop() <= after_generation:
        return None
    if not all(v["delay"] > 0 for v in h.values()):
        return None
    if TASKS - sum(len(v["tasks"]) for v in h.values()) != held:
        return None
    return h


def _group(worker: WorkerProcess) -> dict[str, Any] | None:
    resp = worker.get("/group")
    return resp.json() if resp.status_code == 200 else None


def _describe(bootstrap: str, group: str) -> dict[str, Any]:
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "kconnect.runtime.cli.main",
            "group",
            "describe",
            "--bootstrap-server",
            bootstrap,
            "--group",
            group,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout)
    return result


def _read_topic(bootstrap: str, topic: str) -> dict[RecordKey, bytes | None]:
    """The last value of every key in the topic, read back with a plain consumer."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"readback-{time.time_ns()}",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        last: dict[RecordKey, bytes | None] = {}
        seen = dict.fromkeys(partitions, 0)
        deadline = time.monotonic() + 30
        while any(seen[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen[msg.partition()] = msg.offset() + 1
            key = msg.key()
            if key is not None:
                last[decode_key(key)] = msg.value()
        return last
    finally:
        consumer.close()


def test_a_new_leader_remembers_lost_work_and_continues_the_delay(tmp_path: Path, broker: Broker) -> None:
    workers = start_cluster(
        tmp_path,
        broker.bootstrap,
        3,
        scheduled_rebalance_max_delay_ms=DELAY_MS,
        connect_protocol="sessioned",
        # KIP-415's classic rounds (the delay each member is sent, the follow-up rounds) are what this
        # file measures; group.protocol=connect reconciles the same events (test_reconciliation.py).
        group_protocol="classic",
    )
    extra: list[WorkerProcess] = []
    try:
        wait_until(stable_view(workers, 3), 90, "three workers in one group")
        _sink(workers)
        before = _settle(workers, 90, f"{TASKS} tasks held once each")
        records = wait_until(lambda: _group(workers[0]), 30, "the group records")
        assert records["target"]["assignment_epoch"] == records["epoch"]
        assert {t for m in records["target"]["members"] for t in m["tasks"]} == {
            f"sink-{n}" for n in range(TASKS)
        }

        # The command reads the topic alone and agrees with what every worker says in GET /workers.
        described = _describe(broker.bootstrap, workers[0].props["group.id"])
        for w in workers:
            view = w.workers()
            assert view is not None
            assert described["epoch"] == view["generation"]
            assert sorted(m["member_id"] for m in described["members"]) == sorted(
                m["id"] for m in view["members"]
            )
            current = {c["member_id"]: set(c["tasks"]) for c in described["current"]}
            assert current == {m["id"]: set(m["assignment"]["tasks"]) for m in view["members"]}
        for w in workers:
            text = w.get("/metrics").text
            me = f'worker="{w.url.removeprefix("http://")}"'
            assert f"connect_worker_task_count{{{me}}} {len(before[w.url]['tasks'])}\n" in text
            completed = re.search(rf"connect_worker_rebalance_completed_rebalances_total{{{me}}} (\d+)", text)
            assert completed is not None and int(completed.group(1)) >= 1

        # 1. The leader dies with no delay running.
        first = _leader(workers)
        gen0 = next(iter(before.values()))["generation"]
        lost_first = before[first.url]["tasks"]
        first.kill()
        survivors = [w for w in workers if w is not first]
        held1 = wait_until(
            lambda: _holding_back(survivors, len(lost_first), gen0),
            60,
            "the new leader holding the lost work back",
        )
        for w in survivors:
            assert held1[w.url]["tasks"] == before[w.url]["tasks"], "nothing moved"
        group = wait_until(
            lambda: ((g := _group(survivors[0])) and g["scheduled_rebalance"] and g) or None,
            30,
            "the delay in the group records",
        )
        assert set(group["held_back"]["tasks"]) == lost_first
        assert group["scheduled_rebalance"]["remaining_ms"] > 0

        # 2. The new leader dies during the delay.
        gen1 = next(iter(held1.values()))["generation"]
        second = _leader(survivors)
        lost_second = before[second.url]["tasks"]
        last = next(w for w in survivors if w is not second)
        killed_at = time.monotonic()
        second.kill()
        held2 = wait_until(
            lambda: _holding_back([last], len(lost_first) + len(lost_second), gen1),
            60,
            "the last worker continuing the delay",
        )
        assert held2[last.url]["tasks"] == before[last.url]["tasks"]
        left = held2[last.url]["delay"]
        assert 0 < left < DELAY_MS, left  # continued, not restarted
        assert time.monotonic() - killed_at < DELAY_MS / 1000

        # 3. The first victim comes back in time and gets the lost work when the delay runs out.
        reborn = WorkerProcess(tmp_path, first.props, name=first.name + "-again").start()
        extra.append(reborn)
        pair = [last, reborn]
        wait_until(lambda: reborn.workers() is not None, 60, "the returning worker's REST")
        after = _settle(pair, 120, "the lost work given to the returning worker")
        assert after[last.url]["tasks"] == before[last.url]["tasks"]
        assert after[last.url]["stops"] == before[last.url]["stops"], "the staying worker stopped nothing"
        assert after[reborn.url]["tasks"] == lost_first | lost_second
        final = wait_until(
            lambda: ((g := _group(last)) and not g["scheduled_rebalance"] and g) or None,
            30,
            "the records without a delay",
        )
        assert final["held_back"] == {"connectors": [], "tasks": []}
        assert len(final["members"]) == 2

        # Read back: one key per entity, and the dead members' metadata and current assignment end in
        # tombstones (what compaction keeps of them: nothing).
        last_value = _read_topic(broker.bootstrap, first.props["group.records.storage.topic"])
        alive = {m["member_id"] for m in final["members"]}
        member_keys = [
            k for k in last_value if isinstance(k, (MemberMetadataKey, CurrentMemberAssignmentKey))
        ]
        dead = {k.member_id for k in member_keys} - alive
        assert len(dead) >= 2, dead  # the two killed workers, at least
        assert all(last_value[k] is None for k in member_keys if k.member_id in dead)
        assert all(last_value[k] is not None for k in member_keys if k.member_id in alive)
        singletons = [
            k for k in last_value if not isinstance(k, (MemberMetadataKey, CurrentMemberAssignmentKey))
        ]
        assert sorted(type(k).__name__ for k in singletons) == sorted(
            ["GroupMetadataKey", "ConnectorsTasksKey", "TargetAssignmentKey", "GroupConfigurationKey"]
        )
    finally:
        for w in workers + extra:
            if w.alive():
                w.stop()
