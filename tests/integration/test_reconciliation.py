"""``group.protocol=connect`` live (issue 14): configuration changes reconciled through the group records.

Three real workers (the product's executor: FileStream source tasks run and report RUNNING) on the
embedded broker:

1. Twenty connectors POSTed in a burst: every connector and task runs, exactly once, and the group never
   goes through another generation (no JoinGroup round at all).
2. The leader is SIGKILLed while the group reconciles a burst of new connectors: the next leader resumes
   from the records, every connector and task ends up RUNNING, and the status topic's history shows no
   connector or task RUNNING on two live workers at once (a worker stops what it hands over, and reports
   UNASSIGNED, before the next one starts it).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition

from kconnect.runtime.storage import status_log
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, start_cluster, topic_names, wait_until

pytestmark = pytest.mark.integration


def _file_source(work: Path, name: str) -> dict[str, str]:
    source = work / "in.txt"
    if not source.exists():
        source.write_text("one line\n")
    return {
        "connector.class": "FileStreamSource",
        "file": str(source),
        "topic": f"t-{name}",
        "tasks.max": "1",
    }


def _post(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    deadline = time.monotonic() + 60
    while True:
        resp = worker.request("POST", "/connectors", json={"name": name, "config": config})
        if resp.status_code == 201:
            return
        assert resp.status_code == 409 and time.monotonic() < deadline, resp.text
        time.sleep(0.2)


def _all_running(worker: WorkerProcess, names: set[str]) -> dict[str, Any] | None:
    resp = worker.get("/connectors?expand=status")
    if resp.status_code != 200:
        return None
    body = resp.json()
    if set(body) != names:
        return None
    for entry in body.values():
        status = entry["status"]
        if status["connector"]["state"] != "RUNNING" or not status["tasks"]:
            return None
        if any(t["state"] != "RUNNING" for t in status["tasks"]):
            return None
    return body


def _held_all(workers: list[WorkerProcess], count: int) -> tuple[list[str], list[str]] | None:
    """What the workers hold, once they hold ``count`` tasks between them."""
    held = _held(workers)
    return held if len(held[1]) == count and len(held[0]) == count else None


def _held(workers: list[WorkerProcess]) -> tuple[list[str], list[str]]:
    connectors: list[str] = []
    tasks: list[str] = []
    for w in workers:
        view = w.workers()
        assert view is not None
        connectors += view["this_worker"]["assignment"]["connectors"]
        tasks += view["this_worker"]["assignment"]["tasks"]
    return connectors, tasks


def _generations(workers: list[WorkerProcess]) -> set[int]:
    views = [w.workers() for w in workers]
    return {v["this_worker"]["generation"] for v in views if v is not None}


def _leader(workers: list[WorkerProcess]) -> WorkerProcess:
    view = wait_until(lambda: workers[0].workers(), 30, "a view of the group")
    return next(w for w in workers if w.url + "/" == view["leader_url"])


def _status_history(bootstrap: str, topic: str) -> list[status_log.StatusRecord]:
    """Every status record, each partition in offset order (a connector's or task's records share one)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"history-{time.time_ns()}",
            "enable.auto.commit": False,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        seen = dict.fromkeys(partitions, 0)
        records: list[status_log.StatusRecord] = []
        deadline = time.monotonic() + 30
        while any(seen[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen[msg.partition()] = msg.offset() + 1
            decoded = status_log.decode(msg.key(), msg.value())
            if decoded is not None:
                records.append(decoded)
        return records
    finally:
        consumer.close()


def _overlaps(history: list[status_log.StatusRecord], dead: set[str]) -> list[str]:
    """Connectors and tasks reported RUNNING by a worker while another live worker still ran them: the
    other's last word was RUNNING, not UNASSIGNED (or anything else that says it stopped)."""
    owner: dict[str, str] = {}
    found: list[str] = []
    for record in history:
        if isinstance(record, status_log.TaskStatus):
            what = f"task {record.task}"
        elif isinstance(record, status_log.ConnectorStatus):
            what = f"connector {record.connector}"
        else:
            continue
        if record.state is status_log.State.RUNNING:
            previous = owner.get(what)
            if previous is not None and previous != record.worker_id and previous not in dead:
                found.append(f"{what}: RUNNING on {record.worker_id} while {previous} ran it")
            owner[what] = record.worker_id
        elif owner.get(what) == record.worker_id:
            del owner[what]
    return found


def test_twenty_connectors_in_a_burst_need_no_generation_and_all_run(tmp_path: Path, broker: Broker) -> None:
    group = "g-reconcile-burst"
    workers = start_cluster(tmp_path, broker.bootstrap, 3, group, spark=True, connect_protocol="sessioned")
    try:
        view = wait_until(stable_view(workers, 3), 120, "three workers in one group")
        generation = view["generation"]
        names = {f"burst-{i}" for i in range(20)}
        for i, name in enumerate(sorted(names)):
            _post(workers[i % 3], name, _file_source(tmp_path, name))
        wait_until(lambda: _all_running(workers[1], names), 60, "all twenty connectors and tasks RUNNING")
        assert _generations(workers) == {generation}, "a configuration change started a JoinGroup round"
        connectors, tasks = wait_until(lambda: _held_all(workers, 20), 30, "what every worker holds")
        assert sorted(connectors) == sorted(names), "each connector runs on exactly one worker"
        assert sorted(tasks) == sorted(f"{n}-0" for n in names), "each task runs on exactly one worker"
        loads = [len(w.workers()["this_worker"]["assignment"]["tasks"]) for w in workers]  # type: ignore[index]
        assert max(loads) - min(loads) <= 1, f"tasks spread evenly: {loads}"
        records = workers[2].get("/group").json()
        reconciliation = records.get("reconciliation")
        if reconciliation is not None:  # the epochs view (GET /group)
            assert reconciliation["assignment_epoch"] == reconciliation["group_epoch"]
        history = _status_history(broker.bootstrap, topic_names(group)["status.storage.topic"])
        assert not _overlaps(history, set())
    finally:
        for w in workers:
            w.kill()


def test_a_leader_killed_mid_reconciliation_leaves_no_task_on_two_workers(
    tmp_path: Path, broker: Broker
) -> None:
    group = "g-reconcile-kill"
    workers = start_cluster(
        tmp_path,
        broker.bootstrap,
        3,
        group,
        spark=True,
        connect_protocol="sessioned",
        scheduled_rebalance_max_delay_ms=2000,
    )
    try:
        wait_until(stable_view(workers, 3), 120, "three workers in one group")
        first = {f"before-{i}" for i in range(6)}
        for i, name in enumerate(sorted(first)):
            _post(workers[i % 3], name, _file_source(tmp_path, name))
        wait_until(lambda: _all_running(workers[0], first), 60, "the first six RUNNING")
        leader = _leader(workers)
        survivors = [w for w in workers if w is not leader]
        burst = {f"during-{i}" for i in range(8)}
        for name in sorted(burst):
            _post(leader, name, _file_source(tmp_path, name))
        leader.kill()  # while the group reconciles the burst: targets written, claims in flight
        dead = {leader.url.split("://", 1)[1]}
        wait_until(stable_view(survivors, 2), 120, "the two survivors in one group")
        everything = first | burst
        wait_until(lambda: _all_running(survivors[0], everything), 120, "all fourteen RUNNING")
        connectors, tasks = wait_until(lambda: _held_all(survivors, len(everything)), 30, "the survivors")
        assert sorted(connectors) == sorted(everything)
        assert sorted(tasks) == sorted(f"{n}-0" for n in everything)
        history = _status_history(broker.bootstrap, topic_names(group)["status.storage.topic"])
        assert any(isinstance(r, status_log.TaskStatus) for r in history)
        assert not _overlaps(history, dead)
    finally:
        for w in workers:
            w.kill()
