"""The reference harness: Apache Kafka Connect 3.9 and 4.x (Java) as distributed workers on the broker."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.support.apache_kafka import Broker
from tests.support.reference import (
    REFERENCE_VERSIONS,
    ReferenceWorker,
    parse_assignments,
    reference_available,
)


def _version(version: str) -> Any:
    ok, why = reference_available(version)
    return pytest.param(
        version,
        id=version,
        marks=pytest.mark.skipif(not ok, reason=f"reference worker {version} unavailable: {why}"),
    )


# Two lines exactly as the Java worker printed them against Tansu (leader's member id shortened).
_LOG = """\
[2026-11-22 04:35:46,418] INFO [Worker clientId=connect-127.0.0.1:49025, groupId=ref-g] Joined group at \
generation 1 with protocol version 2 and got assignment: Assignment{error=0, \
leader='connect-127.0.0.1:49025-977ac700', leaderUrl='http://127.0.0.1:49025/', offset=2, \
connectorIds=[src], taskIds=[], revokedConnectorIds=[], revokedTaskIds=[], delay=0} with rebalance delay: 0 \
(DistributedHerder)
[2026-11-22 04:36:13,801] INFO [Worker clientId=connect-127.0.0.1:49025, groupId=ref-g] Joined group at \
generation 6 with protocol version 2 and got assignment: Assignment{error=0, \
leader='connect-127.0.0.1:49025-977ac700', leaderUrl='http://127.0.0.1:49025/', offset=13, \
connectorIds=[src2], taskIds=[src2-0], revokedConnectorIds=[src], revokedTaskIds=[src-0], delay=300000} \
with rebalance delay: 300000 (DistributedHerder)
"""


def test_parse_assignments_reads_the_java_log_lines() -> None:
    first, second = parse_assignments(_LOG)
    assert first == {
        "generation": 1,
        "protocol_version": 2,
        "error": 0,
        "leader": "connect-127.0.0.1:49025-977ac700",
        "leaderUrl": "http://127.0.0.1:49025/",
        "offset": 2,
        "connectorIds": ["src"],
        "taskIds": [],
        "revokedConnectorIds": [],
        "revokedTaskIds": [],
        "delay": 0,
        "rebalance_delay": 0,
        "raw": first["raw"],
    }
    assert second["connectorIds"] == ["src2"] and second["taskIds"] == ["src2-0"]
    assert second["revokedConnectorIds"] == ["src"] and second["revokedTaskIds"] == ["src-0"]
    assert second["delay"] == 300000 and second["offset"] == 13


def _wait_running(worker: ReferenceWorker, name: str, timeout_s: float) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    body: dict[str, Any] = {}
    while time.monotonic() < deadline:
        resp = worker.rest("GET", f"/connectors/{name}/status")
        if resp.status_code == 200:
            body = resp.json()
            tasks = body.get("tasks", [])
            if (
                body["connector"]["state"] == "RUNNING"
                and tasks
                and all(t["state"] == "RUNNING" for t in tasks)
            ):
                return body
        time.sleep(0.2)
    raise AssertionError(f"{name} not RUNNING within {timeout_s} s; last status {body}")


@pytest.mark.interop
@pytest.mark.integration
@pytest.mark.parametrize("version", [_version(v) for v in REFERENCE_VERSIONS])
def test_reference_worker_runs_a_filestream_source(broker: Broker, tmp_path: Path, version: str) -> None:
    run = uuid.uuid4().hex[:8]
    source = tmp_path / "x.txt"
    source.write_text("hello\nworld\n")
    with ReferenceWorker(
        broker.bootstrap,
        group_id=f"ref-{run}",
        config_topic=f"ref-{run}-configs",
        offset_topic=f"ref-{run}-offsets",
        status_topic=f"ref-{run}-status",
        log_path=tmp_path / "reference.log",
        # Tansu completes each generation session.timeout.ms / 2 after its first JoinGroup, and this test
        # sits through three (join, connector, task): keep it short.
        session_timeout_ms=2000,
        heartbeat_interval_ms=500,
        version=version,
    ) as worker:
        config = {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(source),
            "topic": f"ref-{run}-data",
            "tasks.max": "1",
        }
        # Accepted even before the worker has joined its group: the request waits for the herder.
        created = worker.rest("POST", "/connectors", json={"name": "src", "config": config})
        assert created.status_code == 201, created.text
        assert created.json() == {
            "name": "src",
            "config": {**config, "name": "src"},
            "tasks": [],
            "type": "source",
        }

        status = _wait_running(worker, "src", 60)
        assert status["connector"]["worker_id"] == worker.worker_id
        assert [t["id"] for t in status["tasks"]] == [0]

        assignment = worker.wait_for_assignment(lambda a: "src" in a["connectorIds"], timeout=30)
        assert assignment["protocol_version"] == 2  # sessioned
        assert assignment["leaderUrl"] == worker.url + "/"
        assert assignment["error"] == 0
        assert any("src-0" in a["taskIds"] for a in worker.assignments())
        # The worker that runs is the version asked for (its root names it).
        assert worker.rest("GET", "/").json()["version"] == version
