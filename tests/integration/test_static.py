"""Static assignments (KIP-987), live: from worker properties, and overridden over REST."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, wait_nudging, wait_until, worker_properties

pytestmark = pytest.mark.integration

SINK = {
    "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
    "topics": "static-in",
    "tasks.max": "6",
}


def _held(workers: list[WorkerProcess]) -> dict[str, set[str]] | None:
    out: dict[str, set[str]] = {}
    for w in workers:
        view = w.workers()
        if view is None or view["this_worker"]["rebalancing"] or view["this_worker"]["scheduled_delay_ms"]:
            return None
        out[w.url] = set(view["this_worker"]["assignment"]["tasks"])
    held = [t for ts in out.values() for t in ts]
    return out if len(held) == 6 and len(set(held)) == 6 else None


def _until(workers: list[WorkerProcess], check: Any, what: str) -> dict[str, set[str]]:
    def nudge() -> None:  # the test broker needs one where Kafka would rebalance by itself (wait_nudging)
        workers[0].request("PUT", "/connectors/sink/config", json=SINK)

    result: dict[str, set[str]] = wait_nudging(
        lambda: (h := _held(workers)) and check(h) and h, nudge, 120, what
    )
    return result


def test_static_tasks_from_properties_and_from_a_rest_override(tmp_path: Path, broker: Broker) -> None:
    group = "static-g"
    props = [
        worker_properties(broker.bootstrap, group, free_port(), connect_protocol="static") for _ in range(3)
    ]
    props[0]["static.tasks"] = "sink-0,sink-1"
    workers = [WorkerProcess(tmp_path, p, name=f"s{i}").start() for i, p in enumerate(props)]
    ids = [w.url.split("://")[1] for w in workers]
    try:
        wait_until(stable_view(workers, 3), 90, "three static-protocol workers in one group")
        assert wait_until(
            lambda: (
                workers[0].request("POST", "/connectors", json={"name": "sink", "config": SINK}).status_code
                == 201
            ),
            60,
            "the sink created",
        )
        held = _until(workers, lambda h: h[workers[0].url] == {"sink-0", "sink-1"}, "static tasks on s0")
        assert not (held[workers[1].url] | held[workers[2].url]) & {"sink-0", "sink-1"}

        view = workers[1].get("/workers").json()  # answered by the leader, wherever asked
        assert view["protocol"] == "static"
        by_id = {m["worker_id"]: m for m in view["members"]}
        assert set(by_id) == set(ids)
        assert by_id[ids[0]]["static_assignment"] == {"connectors": [], "tasks": ["sink-0", "sink-1"]}
        assert by_id[ids[0]]["static_assignment_source"] == "properties"
        assert by_id[ids[0]]["protocol"] == "static"
        got = workers[2].get(f"/workers/{ids[0]}/static-assignment")
        assert got.status_code == 200 and got.json() == {"connectors": [], "tasks": ["sink-0", "sink-1"]}

        # Bad input: 4xx with Connect's error JSON, nothing written.
        bad = workers[2].request("PUT", f"/workers/{ids[1]}/static-assignment", json={"tasks": ["sink"]})
        assert bad.status_code == 400 and "sink" in bad.json()["message"] and bad.json()["error_code"] == 400
        unknown = workers[2].request("PUT", "/workers/10.9.9.9:1/static-assignment", json={"tasks": []})
        assert unknown.status_code == 404 and unknown.json()["error_code"] == 404
        extra = workers[2].request("PUT", f"/workers/{ids[1]}/static-assignment", json={"task": ["sink-2"]})
        assert extra.status_code == 400

        # An override over REST (sent to a follower, forwarded to the leader) makes s1 static for sink-2.
        put = workers[2].request("PUT", f"/workers/{ids[1]}/static-assignment", json={"tasks": ["sink-2"]})
        assert put.status_code == 200 and put.json() == {"connectors": [], "tasks": ["sink-2"]}
        held = _until(workers, lambda h: h[workers[1].url] == {"sink-2"}, "sink-2 alone on s1")
        assert held[workers[0].url] == {"sink-0", "sink-1"}
        view = workers[0].get("/workers").json()
        by_id = {m["worker_id"]: m for m in view["members"]}
        assert by_id[ids[1]]["static_assignment_source"] == "override"
        assert by_id[ids[1]]["static_assignment"]["tasks"] == ["sink-2"]

        # The override lives in the config topic: restarted, s1 comes back static for sink-2.
        assert workers[1].stop() == 0
        workers[1] = WorkerProcess(tmp_path, props[1], name="s1-again").start()
        wait_until(lambda: workers[1].workers() is not None, 60, "s1 back")
        held = _until(workers, lambda h: h[workers[1].url] == {"sink-2"}, "sink-2 on the restarted s1")

        # Clearing it makes s1 a wildcard worker again.
        assert workers[0].request("DELETE", f"/workers/{ids[1]}/static-assignment").status_code == 204
        assert workers[0].request("DELETE", f"/workers/{ids[1]}/static-assignment").status_code == 404
        _until(
            workers, lambda h: len(h[workers[1].url]) >= 1 and h[workers[1].url] != {"sink-2"}, "s1 wildcard"
        )
    finally:
        for w in workers:
            if w.alive():
                w.stop()


def test_static_jobs_no_live_worker_lists_are_reported_unassigned_with_the_reason(
    tmp_path: Path, broker: Broker
) -> None:
    props = worker_properties(broker.bootstrap, "static-only", free_port(), connect_protocol="static")
    props["static.connectors"] = "sink"
    props["static.tasks"] = "sink-0"
    worker = WorkerProcess(tmp_path, props, name="only").start()
    try:
        wait_until(stable_view([worker], 1), 90, "a lone static worker")
        assert worker.request("POST", "/connectors", json={"name": "sink", "config": SINK}).status_code == 201

        def reported() -> dict[str, Any] | None:
            status = worker.get("/connectors/sink/status").json()
            tasks = status.get("tasks", [])
            if len(tasks) != 6 or status["connector"]["state"] != "RUNNING":
                return None
            rest = [t for t in tasks if t["id"] != 0]
            return status if all(t.get("trace") for t in rest) else None

        def nudge() -> None:
            worker.request("PUT", "/connectors/sink/config", json=SINK)

        status = wait_nudging(reported, nudge, 90, "the unlisted tasks reported UNASSIGNED")

        def holds_its_listed_task() -> bool:
            view = worker.workers()
            return view is not None and view["this_worker"]["assignment"]["tasks"] == ["sink-0"]

        # The leader reports the unlisted tasks when it decides the round; the worker takes sink-0 when
        # that round's assignment (or target) reaches it, which may come a moment later.
        wait_nudging(holds_its_listed_task, nudge, 30, "sink-0 in the static worker's assignment")
        for task in status["tasks"]:
            if task["id"] == 0:
                continue
            assert task["state"] == "UNASSIGNED"
            assert "static" in task["trace"]
    finally:
        worker.stop()
