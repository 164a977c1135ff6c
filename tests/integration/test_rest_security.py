"""Issue 23's REST rows against a real ``kconnect worker`` process (the product's own command).

A web page's ``text/plain`` ``POST /connectors`` (no CORS preflight) creates no connector; clients that
send a request's body or headers slowly are cut off (408, or the connection closed) instead of holding
connections and request slots, and ``GET /health`` answers meanwhile. The in-process tests of every
protection are in tests/unit/test_rest_security.py.
"""

from __future__ import annotations

import json
import socket
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties

pytestmark = pytest.mark.integration

#: Bound on every wait, so that a regression fails instead of hanging; nothing asserts on time.
HANG = 60.0
SINK = {"connector.class": "org.apache.kafka.connect.tools.VerifiableSinkConnector", "topics": "security-t"}


def _healthy(worker: WorkerProcess) -> bool:
    try:
        return worker.get("/health").status_code == 200
    except httpx.HTTPError:
        return False


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[WorkerProcess]:
    workdir: Path = tmp_path_factory.mktemp("security")
    props = worker_properties(
        broker.bootstrap, f"sec-{uuid.uuid4().hex[:6]}", free_port(), **{"rest.request.timeout.ms": "5000"}
    )
    process = WorkerProcess(workdir, props, spark=True).start()  # spark=True: `kconnect worker` itself
    try:
        wait_until(lambda: _healthy(process), 120, "the worker's GET /health 200")
        yield process
    finally:
        process.stop()


def test_a_text_plain_post_creates_no_connector(worker: WorkerProcess) -> None:
    body = {"name": f"csrf-{uuid.uuid4().hex[:6]}", "config": SINK}
    resp = worker.request(
        "POST", "/connectors", content=json.dumps(body).encode(), headers={"Content-Type": "text/plain"}
    )
    assert (resp.status_code, resp.json()) == (
        415,
        {"error_code": 415, "message": "HTTP 415 Unsupported Media Type"},
    )
    assert body["name"] not in worker.get("/connectors").json()
    # The same body sent as JSON does create it: the 415 was the Content-Type's doing.
    created = worker.request("POST", "/connectors", json=body)
    assert created.status_code == 201, created.text
    assert worker.request("DELETE", f"/connectors/{body['name']}").status_code == 204


def _until_closed(sock: socket.socket) -> bytes:
    """Everything the worker sends on ``sock`` until it closes the connection."""
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


def test_slow_clients_are_cut_off_while_health_answers(worker: WorkerProcess) -> None:
    head = (
        b"POST /connectors HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b'Content-Length: 200\r\n\r\n{"name": '
    )
    trickling = [socket.create_connection(("127.0.0.1", worker.port), timeout=HANG) for _ in range(40)]
    silent = [socket.create_connection(("127.0.0.1", worker.port), timeout=HANG) for _ in range(20)]
    try:
        for sock in trickling:
            sock.sendall(head)  # ... and the rest of the body never comes
        for sock in silent:
            sock.sendall(b"GET /connectors HTTP/1.1\r\nHost: ")  # slowloris: headers that never end
        health = httpx.get(worker.url + "/health", timeout=HANG)
        assert health.status_code == 200, health.text
        # Each body-trickling request is answered: 408 at its deadline, or 503 at once past the bound on
        # requests in handlers (rest.max.concurrent.requests); before, none ever was (socket timeout).
        statuses = []
        for sock in trickling:
            answer = _until_closed(sock)
            status = int(answer.split(b" ", 2)[1])
            assert f'"error_code": {status}'.encode() in answer, answer
            statuses.append(status)
        assert set(statuses) <= {408, 503} and 408 in statuses, statuses
        # Connections whose headers never ended are closed without an answer.
        assert [_until_closed(sock) for sock in silent] == [b""] * len(silent)
        assert worker.get("/health").status_code == 200
    finally:
        for sock in trickling + silent:
            sock.close()
