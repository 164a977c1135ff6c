"""KIP-507 in a mixed group (issue 23, row 4): an Apache Kafka Connect worker that signs its internal
requests with HmacSHA512 follows a kconnect leader that accepts HmacSHA256 and HmacSHA512 and rotates the
session key every few seconds.

The Java worker reads each new ``session-key`` record from the config topic and signs with it; the task
configs of every connector it runs reach the kconnect leader through the signed internal request, so
every connector ends up with its tasks. Before this row kconnect checked HmacSHA256 only and answered
such a worker 403 for ever: its connectors never got tasks.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.reference import REFERENCE_39, ReferenceWorker, reference_available

_AVAILABLE, _WHY = reference_available(REFERENCE_39)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.interop,
    pytest.mark.timeout(400),
    pytest.mark.skipif(not _AVAILABLE, reason=f"reference worker 3.9 unavailable: {_WHY}"),
]

#: Connect's default session: the test is about key rotation within one generation, and a shorter session
#: let a worker stalled on the loaded CI machine (two cores, Spark tests beside it) drop out mid-test, which
#: bumped the generation (3 == 2 failed once in a clean-clone run) without saying anything of the keys.
SESSION_MS = 10000
TTL_MS = 4000
BOTH = "HmacSHA256,HmacSHA512"


def _two_members(kc: WorkerProcess) -> dict[str, Any] | None:
    view = kc.workers()
    if view is None or view["this_worker"]["rebalancing"] or view["this_worker"]["generation"] < 0:
        return None
    return view if len(view["members"]) == 2 and view["source"] == "leader" else None


def test_a_java_worker_signing_hmacsha512_follows_a_rotating_kconnect_leader(
    tmp_path: Path, broker: Broker
) -> None:
    group = f"keys-mixed-{uuid.uuid4().hex[:6]}"
    props = worker_properties(broker.bootstrap, group, free_port(), session_timeout_ms=SESSION_MS)
    props.update(
        {
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "rebalance.timeout.ms": "60000",
            "file.connectors.enable": "true",
            "connect.protocol": "sessioned",
            "inter.worker.key.ttl.ms": str(TTL_MS),
            "inter.worker.verification.algorithms": BOTH,
        }
    )
    kc = WorkerProcess(tmp_path, props, name=f"{group}-kconnect").start()
    java_settings = {
        "inter.worker.signature.algorithm": "HmacSHA512",
        "inter.worker.verification.algorithms": BOTH,
    }
    try:
        wait_until(lambda: (v := kc.workers()) and v["this_worker"]["generation"] >= 0 and v, 60, "kconnect")
        with ReferenceWorker(
            broker.bootstrap,
            group_id=group,
            log_path=tmp_path / "java.log",
            protocol="sessioned",
            session_timeout_ms=SESSION_MS,
            heartbeat_interval_ms=1000,
            version=REFERENCE_39,
            extra=java_settings,
        ) as java:
            view = wait_until(lambda: _two_members(kc), 120, "a two-member group led by kconnect")
            assert view["protocol"] == "sessioned" and view["leader_url"] == kc.url + "/"
            keys_at_join = kc.log_text().count("leader wrote a new session key")
            time.sleep(2 * TTL_MS / 1000)  # the Java worker signs with a key rotated since it joined
            # Rotated on the leader's ticks within one generation, not only after a JoinGroup round (the
            # row-4 bug: a stable group never rotated).
            after = _two_members(kc)
            assert after and after["this_worker"]["generation"] == view["this_worker"]["generation"], (
                after,
                [line for line in kc.log_text().splitlines() if "rebalanc" in line or "join" in line][-20:],
            )
            assert kc.log_text().count("leader wrote a new session key") > keys_at_join, kc.log_text()[-2000:]

            source = tmp_path / "in.txt"
            source.write_text("one\ntwo\n")
            names = [f"src-{i}" for i in range(4)]
            for name in names:
                config = {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                    "file": str(source),
                    "topic": f"t-{name}",
                    "tasks.max": "1",
                }

                def created(name: str = name, config: dict[str, str] = config) -> int | None:
                    resp = kc.request("POST", "/connectors", json={"name": name, "config": config})
                    return resp.status_code if resp.status_code != 409 else None

                assert wait_until(created, 60, f"create {name}") == 201

            java_id = java.url.split("://", 1)[1].rstrip("/")

            def every_connector_has_tasks() -> dict[str, str] | None:
                owners: dict[str, str] = {}
                for name in names:
                    status = kc.get(f"/connectors/{name}/status").json()
                    if not status.get("tasks") or status.get("connector", {}).get("state") != "RUNNING":
                        return None
                    owners[name] = status["connector"]["worker_id"]
                return owners

            owners = wait_until(every_connector_has_tasks, 120, "every connector with its tasks")
            on_java = [name for name, owner in owners.items() if owner == java_id]
            assert on_java, f"no connector ran on the Java worker {java_id}: {owners}"
            log = (tmp_path / "java.log").read_text(errors="replace")
            assert "does not support the 'HmacSHA512'" not in log and "invalid signature" not in log
            keys = kc.log_text().count("leader wrote a new session key")
            assert keys >= 2, kc.log_text()[-2000:]
            print(f"\nmixed group: connectors on Java {on_java}, session keys written by kconnect {keys}")
    finally:
        if kc.alive():
            kc.stop()
