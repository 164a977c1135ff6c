"""What ``kconnect demo`` asks again: no answer, 503 (a worker still starting) and 409 (a rebalance) are
"not now"; every other status is the answer, and so is a 409 saying the connector already exists."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from kconnect.runtime.cli.broker import free_port
from kconnect.runtime.cli.rest_client import ClientError, call_until_answered, not_yet


@pytest.mark.parametrize(
    ("status", "message", "again"),
    [
        (None, None, True),  # connection refused, reset or timed out: the worker is not listening yet
        (503, "Request cannot be completed because the worker is still starting up", True),
        (409, "Cannot complete request because of a conflicting operation (e.g. worker rebalance)", True),
        (409, None, True),
        (409, "Connector demo-file-source already exists", False),  # a create whose reply was lost landed
        (200, None, False),
        (201, None, False),
        (400, "Connector configuration is invalid", False),
        (404, "Connector demo-file-source not found", False),
        (500, "boom", False),
    ],
)
def test_not_yet(status: int | None, message: str | None, again: bool) -> None:
    assert not_yet(status, message) is again


class _Scripted(BaseHTTPRequestHandler):
    """Answers each request with the next (status, body) of the server's script, the last one forever."""

    def do_POST(self) -> None:
        server: _Server = self.server  # type: ignore[assignment]
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        with server.lock:
            status, body = server.script[min(server.calls, len(server.script) - 1)]
            server.calls += 1
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *_args: object) -> None:
        pass


class _Server(ThreadingHTTPServer):
    script: list[tuple[int, object]]
    calls = 0
    lock = threading.Lock()


@pytest.fixture
def server() -> Iterator[_Server]:
    s = _Server(("127.0.0.1", 0), _Scripted)
    thread = threading.Thread(target=s.serve_forever, daemon=True)
    thread.start()
    try:
        yield s
    finally:
        s.shutdown()
        s.server_close()


def test_503_then_409_then_created(server: _Server) -> None:
    starting = {
        "error_code": 503,
        "message": "Request cannot be completed because the worker is still starting up",
    }
    server.script = [
        (503, starting),
        (503, starting),
        (409, {"error_code": 409, "message": "rebalance"}),
        (201, {}),
    ]
    url = f"http://127.0.0.1:{server.server_address[1]}/connectors"
    resp = call_until_answered("POST", url, deadline=time.monotonic() + 30, body={}, pause_s=0.05)
    assert resp.status_code == 201 and server.calls == 4


def test_a_real_error_is_the_answer_at_once(server: _Server) -> None:
    server.script = [(400, {"error_code": 400, "message": "invalid"})]
    url = f"http://127.0.0.1:{server.server_address[1]}/connectors"
    resp = call_until_answered("POST", url, deadline=time.monotonic() + 30, body={}, pause_s=0.05)
    assert resp.status_code == 400 and server.calls == 1


def test_the_deadline_ends_it_naming_the_last_answer(server: _Server) -> None:
    server.script = [(503, {"error_code": 503, "message": "still starting up"})]
    url = f"http://127.0.0.1:{server.server_address[1]}/connectors"
    with pytest.raises(ClientError, match=r"not answered in time \(last: HTTP 503: still starting up\)"):
        call_until_answered("POST", url, deadline=time.monotonic() + 0.5, body={}, pause_s=0.05)
    assert server.calls >= 2


def test_no_listener_is_retried_until_gone_says_why() -> None:
    """Connection refused is "not yet"; a ``gone`` reason (an exited worker) ends the wait at once."""
    url = f"http://127.0.0.1:{free_port()}/health"
    attempts: list[float] = []

    def gone() -> str | None:
        attempts.append(time.monotonic())
        return "worker 1 exited with status 1" if len(attempts) >= 3 else None

    with pytest.raises(ClientError, match="worker 1 exited with status 1"):
        call_until_answered("GET", url, deadline=time.monotonic() + 30, pause_s=0.05, gone=gone)
    assert len(attempts) == 3
