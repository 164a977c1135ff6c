"""Three real worker processes on the embedded broker form one group, survive a leader's death, and
rebalance at once when a worker leaves cleanly."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, start_cluster, wait_until

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_S = 6.0


def _leader(view: dict) -> dict:
    leaders = [m for m in view["members"] if m["leader"]]
    assert len(leaders) == 1, view
    return leaders[0]


def _by_url(workers: list[WorkerProcess], url: str) -> WorkerProcess:
    return next(w for w in workers if w.url + "/" == url)


def test_three_workers_one_group_leader_failover_and_clean_leave(tmp_path: Path, broker: Broker) -> None:
    workers = start_cluster(tmp_path, broker.bootstrap, 3)
    try:
        view = wait_until(stable_view(workers, 3), 90, "three workers in one stable generation")
        # Every worker shows the same three members and the same single leader.
        # Advertised URLs end in '/', as Apache Kafka Connect's do.
        urls = sorted(m["url"] for m in view["members"])
        assert urls == sorted(w.url + "/" for w in workers)
        leader = _leader(view)
        for w in workers:
            other = w.workers()
            assert other is not None
            assert sorted(m["url"] for m in other["members"]) == urls
            assert _leader(other)["url"] == leader["url"]
            assert (
                other["protocol"] == "static"
            )  # kconnect's default; sessioned behaviour without static lists

        # SIGKILL the leader: the survivors form a new generation with a new leader once the
        # coordinator expires its session.
        dead = _by_url(workers, leader["url"])
        gen_before = view["generation"]
        killed_at = time.monotonic()
        dead.kill()
        survivors = [w for w in workers if w is not dead]
        after = wait_until(stable_view(survivors, 2), 60, "a new generation without the killed leader")
        elapsed = time.monotonic() - killed_at
        assert after["generation"] > gen_before
        assert _leader(after)["url"] != leader["url"]
        assert leader["url"] not in {m["url"] for m in after["members"]}
        # It took the session timeout to notice: a SIGKILLed member sends no LeaveGroup.
        assert elapsed >= SESSION_TIMEOUT_S * 0.8, elapsed

        # Stop one survivor cleanly: it sends LeaveGroup, so the last one rebalances well before the
        # session timeout would have expired.
        leaving, staying = survivors
        gen_before = after["generation"]
        stopped_at = time.monotonic()
        assert leaving.stop() == 0
        alone = wait_until(stable_view([staying], 1), 30, "the last worker alone in a new generation")
        elapsed = time.monotonic() - stopped_at
        assert alone["generation"] > gen_before
        assert elapsed < SESSION_TIMEOUT_S, (
            f"clean leave took {elapsed:.1f} s, not faster than a session timeout"
        )
        assert "worker stopped" in leaving.log_text()
    finally:
        for w in workers:
            if w.alive():
                w.stop()


def test_connector_visible_everywhere_and_survives_full_restart(tmp_path: Path, broker: Broker) -> None:
    workers = start_cluster(tmp_path, broker.bootstrap, 3)
    source = tmp_path / "input.txt"
    source.write_text("a\nb\n")
    config = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": str(source),
        "topic": "lines",
        "tasks.max": "1",
    }
    try:
        wait_until(stable_view(workers, 3), 90, "three workers in one stable generation")

        # Create through a worker that is (in general) not the leader: the write is forwarded.
        def created() -> int | None:
            resp = workers[2].request("POST", "/connectors", json={"name": "src", "config": config})
            return resp.status_code if resp.status_code != 409 else None

        assert wait_until(created, 60, "connector creation") == 201
        for w in workers:
            got = wait_until(lambda w=w: w.get("/connectors").json() == ["src"], 30, f"connector on {w.url}")
            assert got
            info = w.get("/connectors/src").json()
            assert info["config"]["file"] == str(source)
            assert info["type"] == "source"

        # The connector's owner starts it and publishes one task config; everyone sees the task.
        def running() -> dict | None:
            status = workers[0].get("/connectors/src/status").json()
            ok = status.get("connector", {}).get("state") == "RUNNING" and len(status.get("tasks", [])) == 1
            return status if ok else None

        status = wait_until(running, 60, "connector RUNNING with one task")
        assert status["connector"]["worker_id"] in {w.url.split("://")[1] for w in workers}
        tasks = workers[1].get("/connectors/src/tasks").json()
        assert tasks[0]["id"] == {"connector": "src", "task": 0}
        assert tasks[0]["config"]["task.class"].endswith("FileStreamSourceTask")

        # A duplicate is refused with Connect's error JSON.
        dup = workers[0].request("POST", "/connectors", json={"name": "src", "config": config})
        assert dup.status_code == 409
        assert dup.json() == {"error_code": 409, "message": "Connector src already exists"}

        # Restart every worker: the connector is read back from the config topic. The test broker
        # drops a LeaveGroup that arrives while the member's JoinGroup is pending (Apache Kafka does
        # not) and then elects the departed member leader, so the stops wait for a settled group.
        for i, w in enumerate(workers):
            assert w.stop() == 0
            rest = workers[i + 1 :]
            if rest:
                wait_until(stable_view(rest, len(rest)), 60, "the remaining workers to settle")
        restarted = [WorkerProcess(tmp_path, w.props, name=w.name + "-again").start() for w in workers]
        workers = restarted
        wait_until(stable_view(workers, 3), 90, "the restarted workers in one group")
        for w in workers:
            assert w.get("/connectors").json() == ["src"]
            assert w.get("/connectors/src/config").json()["topic"] == "lines"
        wait_until(running, 60, "connector RUNNING again after the restart")
    finally:
        for w in workers:
            if w.alive():
                w.stop()


def test_worker_that_lost_its_session_releases_its_work_and_rejoins(tmp_path: Path, broker: Broker) -> None:
    """A frozen worker (SIGSTOP) is expelled after the session timeout; thawed, it finds its member id
    unknown, releases what it held and joins again as a new member."""
    workers = start_cluster(tmp_path, broker.bootstrap, 2)
    try:
        view = wait_until(stable_view(workers, 2), 90, "two workers in one stable generation")
        follower = next(w for w in workers if w.url + "/" != view["leader_url"])
        leader = next(w for w in workers if w is not follower)
        old_member = follower.workers()["this_worker"]["member_id"]  # type: ignore[index]
        assert follower.proc is not None
        follower.proc.send_signal(signal.SIGSTOP)
        try:
            wait_until(
                stable_view([leader], 1), 60, "the leader alone after the frozen worker's session expired"
            )
        finally:
            follower.proc.send_signal(signal.SIGCONT)
        again = wait_until(stable_view(workers, 2), 60, "the thawed worker back in the group")
        me = follower.workers()
        assert me is not None
        assert me["this_worker"]["member_id"] != old_member
        assert len(again["members"]) == 2
    finally:
        for w in workers:
            if w.alive():
                w.stop()
