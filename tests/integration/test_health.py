"""GET /health as Apache Kafka Connect has it since 3.9 (KIP-1017): 503 while starting, 200 once joined.

The healthy body is compared with the parity reference, Connect 4.x (``REFERENCE_4X``).
"""

from __future__ import annotations

import uuid
from pathlib import Path

import httpx
import pytest

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.reference import REFERENCE_4X, ReferenceWorker, reference_available

pytestmark = pytest.mark.integration

#: What a worker that has completed startup answers, kconnect's and the Java worker's alike.
HEALTHY = {
    "status": "healthy",
    "message": "Worker has completed startup and is ready to handle requests.",
}


def _health(url: str) -> tuple[int, dict[str, str]] | None:
    try:
        resp = httpx.get(url + "/health", timeout=5)
    except httpx.HTTPError:
        return None
    return resp.status_code, resp.json()


def test_health_is_503_until_the_worker_has_joined_then_200(tmp_path: Path, broker: Broker) -> None:
    group = f"health-{uuid.uuid4().hex[:6]}"
    worker = WorkerProcess(tmp_path, worker_properties(broker.bootstrap, group, free_port())).start()
    try:
        # The REST server answers before the worker has joined (the test broker takes at least
        # session.timeout.ms / 2 to complete the first generation).
        first = wait_until(lambda: _health(worker.url), 30, "the REST server")
        assert first == (503, {"status": "starting", "message": "Worker is still starting up."})
        early = httpx.get(worker.url + "/connectors", timeout=5)
        assert early.status_code == 503 and early.json()["error_code"] == 503
        ready = wait_until(lambda: (h := _health(worker.url)) and h[0] == 200 and h, 60, "a healthy worker")
        assert ready[1] == HEALTHY
    finally:
        worker.stop()


_REFERENCE, _WHY = reference_available(REFERENCE_4X)


@pytest.mark.interop
@pytest.mark.skipif(not _REFERENCE, reason=f"reference worker unavailable: {_WHY}")
def test_the_healthy_body_is_the_java_workers(tmp_path: Path, broker: Broker) -> None:
    """The body kconnect answers once healthy (the test above), key for key, is the Java worker's (4.x)."""
    group = f"health-{uuid.uuid4().hex[:6]}"
    with ReferenceWorker(
        broker.bootstrap,
        group_id=f"{group}-java",
        config_topic=f"{group}-java-configs",
        offset_topic=f"{group}-java-offsets",
        status_topic=f"{group}-java-status",
        log_path=tmp_path / "java.log",
        version=REFERENCE_4X,
    ) as java:
        java_health = wait_until(
            lambda: (r := java.rest("GET", "/health")).status_code == 200 and r.json(),
            60,
            "Java health",
        )
    assert java_health == HEALTHY
