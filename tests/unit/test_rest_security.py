"""Issue 23's REST rows, attacked in-process as the security review did.

Row 1: a web page's "simple" cross-site writes (text/plain, form or typeless bodies, no preflight) must
not create or restart a connector; a write from a foreign Origin and a request to a Host not allowed are
refused. Row 7: no malformed body or credential answers 500; slow clients and blocking writes cannot
starve ``/health`` or hold connections forever.

Waits carry a generous ``HANG`` bound only so that a regression fails instead of hanging the run; no
assertion is about time.
"""

from __future__ import annotations

import asyncio
import base64
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI

from kconnect.config.worker import WorkerConfig
from kconnect.rest.app import create_app
from kconnect.rest.bodies import MAX_JSON_DEPTH
from kconnect.rest.limits import server_options
from kconnect.rest.server import BasicAuth, wrap_app
from kconnect.runtime.shell.operations import ConnectorOperations
from kconnect.runtime.shell.worker import Worker
from tests.support.cluster import worker_properties

HANG = 30.0
CREATE = b'{"name": "evil", "config": {"connector.class": "FileStreamSink", "topics": "t"}}'


def _worker(**extra: str) -> Worker:
    props = worker_properties("127.0.0.1:1", "g", 8083)
    props.update(extra)
    worker = Worker(WorkerConfig.from_properties(props))
    worker.started.set()  # past start-up: routes answer instead of 503
    return worker


class Writes:
    """Stands in for the cluster writes a route reaches: records calls, and blocks while told to."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = threading.Event()
        self.release.set()
        self.entered = 0
        self._lock = threading.Lock()

    def put_connector_config(self, name: str, *_a: Any, **_kw: Any) -> bool:
        with self._lock:
            self.entered += 1
        self.calls.append(name)
        self.release.wait(HANG)
        return True


@pytest.fixture
def writes(monkeypatch: pytest.MonkeyPatch) -> Writes:
    stub = Writes()
    monkeypatch.setattr(ConnectorOperations, "restart", lambda _self, name, *_a: stub.calls.append(name))
    return stub


def _client(worker: Worker, writes: Writes) -> httpx.AsyncClient:
    worker.writes.put_connector_config = writes.put_connector_config  # type: ignore[method-assign]
    # The worker binds its writes' method at construction (operations call it there): replace both.
    worker.put_connector_config = writes.put_connector_config  # type: ignore[method-assign]
    worker.writes.require_leader = lambda **_kw: None  # type: ignore[method-assign]
    return httpx.AsyncClient(transport=httpx.ASGITransport(create_app(worker)), base_url="http://kc:8083")


def _run(coro: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coro, HANG))


# ===================================================================================== row 1: CSRF


@pytest.mark.parametrize(
    "content_type",
    [
        "text/plain",  # fetch(url, {method: "POST", body: "..."}): no preflight
        "text/plain;charset=UTF-8",
        "application/x-www-form-urlencoded",  # an HTML form
        "multipart/form-data; boundary=x",
        None,  # a typeless Blob: a body and no Content-Type at all
    ],
)
def test_a_cross_site_simple_post_creates_no_connector(writes: Writes, content_type: str | None) -> None:
    async def attack() -> httpx.Response:
        async with _client(_worker(), writes) as client:
            headers = {"Content-Type": content_type} if content_type else {}
            return await client.post("/connectors", content=CREATE, headers=headers)

    resp = _run(attack())
    assert (resp.status_code, resp.json()) == (
        415,
        {"error_code": 415, "message": "HTTP 415 Unsupported Media Type"},
    )
    assert writes.calls == []


def test_a_json_post_still_creates_one(writes: Writes) -> None:
    async def create() -> int:
        async with _client(_worker(), writes) as client:
            resp = await client.post(
                "/connectors", content=CREATE, headers={"Content-Type": "application/json; charset=utf-8"}
            )
            return resp.status_code

    assert _run(create()) != 415
    assert writes.calls == ["evil"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/connectors"),
        ("PUT", "/connectors/c/config"),
        ("PATCH", "/connectors/c/config"),
        ("PATCH", "/connectors/c/offsets"),
        ("POST", "/connectors/c/tasks"),
        ("PUT", "/connectors/c/fence"),
        ("PUT", "/workers/w/static-assignment"),
        ("PUT", "/connector-plugins/FileStreamSink/config/validate"),
        ("PUT", "/admin/loggers/root"),
    ],
)
def test_every_route_that_reads_a_body_takes_only_json(writes: Writes, method: str, path: str) -> None:
    async def send() -> httpx.Response:
        async with _client(_worker(), writes) as client:
            return await client.request(method, path, content=b"{}", headers={"Content-Type": "text/plain"})

    assert _run(send()).status_code == 415


def test_a_cross_site_form_post_restarts_nothing_but_curl_still_does(writes: Writes) -> None:
    async def both() -> tuple[int, list[str], int]:
        async with _client(_worker(), writes) as client:
            form = await client.post(
                "/connectors/c/restart",
                content=b"x=1",
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
            after_form = list(writes.calls)
            plain = await client.post("/connectors/c/restart")  # curl -X POST: no type, no body
            return form.status_code, after_form, plain.status_code

    form_status, after_form, plain_status = _run(both())
    assert (form_status, after_form) == (415, [])
    assert plain_status == 204 and writes.calls == ["c"]


@pytest.mark.parametrize(
    ("allow_origin", "origin", "refused"),
    [
        ("", "https://evil.example", True),
        ("", "null", True),  # a sandboxed frame or a file: page
        ("", "http://kc:8083", False),  # the API's own origin (its /docs page)
        ("https://ui.example", "https://evil.example", True),
        ("https://ui.example, https://ops.example", "https://ops.example", False),
        ("*", "https://evil.example", False),
    ],
)
def test_a_write_from_an_origin_not_allowed_is_refused(
    writes: Writes, allow_origin: str, origin: str, refused: bool
) -> None:
    async def send() -> httpx.Response:
        worker = _worker(**{"access.control.allow.origin": allow_origin})
        async with _client(worker, writes) as client:
            return await client.post(
                "/connectors", content=CREATE, headers={"Content-Type": "application/json", "Origin": origin}
            )

    resp = _run(send())
    if refused:
        assert resp.status_code == 403 and resp.json()["error_code"] == 403
        assert writes.calls == []
    else:
        assert writes.calls == ["evil"]


def test_a_host_not_allowed_is_refused_but_health_answers_probes(writes: Writes) -> None:
    async def send() -> list[int]:
        worker = _worker(**{"rest.allowed.hosts": "connect.internal,127.0.0.1:8083"})
        async with _client(worker, writes) as client:
            return [
                (await client.get("/connectors", headers={"Host": host})).status_code
                for host in ("rebound.evil.example", "connect.internal:8083", "127.0.0.1:8083", "127.0.0.1:9")
            ] + [(await client.get("/health", headers={"Host": "10.1.2.3:8083"})).status_code]

    assert _run(send()) == [403, 200, 200, 403, 200]


# ========================================================================== row 7: malformed input


DEEP = b"[" * 200_000 + b"]" * 200_000


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("POST", "/connectors"),
        ("PUT", "/connectors/c/config"),
        ("PATCH", "/connectors/c/config"),
        ("PATCH", "/connectors/c/offsets"),
        ("PUT", "/workers/{self}/static-assignment"),
        ("PUT", "/connector-plugins/FileStreamSink/config/validate"),
        ("PUT", "/admin/loggers/root"),
    ],
)
@pytest.mark.parametrize(
    "body",
    [
        DEEP,  # RecursionError out of json.loads: was a 500
        b'{"a":' * (MAX_JSON_DEPTH + 1) + b"1" + b"}" * (MAX_JSON_DEPTH + 1),
        b'{"name": "\xff\xfe"}',  # not UTF-8
        b'{"name": "\\ud800"}',  # a lone surrogate
    ],
    ids=["200000-deep", "too-deep", "not-utf8", "surrogate"],
)
def test_a_malformed_body_of_any_depth_or_encoding_is_a_400(
    writes: Writes, method: str, path: str, body: bytes
) -> None:
    async def send() -> httpx.Response:
        worker = _worker()
        async with _client(worker, writes) as client:
            url = path.replace("{self}", worker.worker_id)  # a worker the leader knows, so the body is read
            return await client.request(
                method, url, content=body, headers={"Content-Type": "application/json"}
            )

    resp = _run(send())
    assert resp.status_code == 400, resp.text[:300]
    assert resp.json()["error_code"] == 400


@pytest.mark.parametrize(
    ("header", "status"),
    [
        (b"Basic " + base64.b64encode("ünïcode:pässwörd".encode()), 200),
        (b"Basic " + base64.b64encode("ünïcode:wrông".encode()), 401),  # compare_digest raised TypeError
        (b"Basic " + base64.b64encode("ünïcode:pässwörd".encode("latin-1")), 401),  # not UTF-8
        ("Basic é".encode(), 401),  # non-ASCII base64 text: ValueError, not binascii.Error
        (b"Basic !!!!", 401),
    ],
)
def test_basic_auth_with_any_bytes_is_answered_200_or_401(header: bytes, status: int) -> None:
    api = FastAPI()

    @api.get("/connectors")
    def connectors() -> list[str]:
        return []

    auth = BasicAuth({"ünïcode": "pässwörd"}, "test")
    props = worker_properties("127.0.0.1:1", "g", 8083)
    app = wrap_app(api, "both", WorkerConfig.from_properties(props), auth)

    async def send() -> int:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app), base_url="http://t") as client:
            return (await client.get("/connectors", headers=[(b"Authorization", header)])).status_code

    assert _run(send()) == status


# ====================================================================== row 7: slow and many clients


async def _until(condition: Any) -> None:
    while not condition():
        await asyncio.sleep(0.01)


def test_health_answers_while_writes_hold_the_handler_threads(writes: Writes) -> None:
    """40 writes blocked on Kafka used to take all 40 handler threads, and ``GET /health`` waited for one."""
    writes.release.clear()

    async def scenario() -> tuple[int, list[httpx.Response]]:
        async with _client(_worker(), writes) as client:
            posts = [
                asyncio.create_task(
                    client.post("/connectors", content=CREATE, headers={"Content-Type": "application/json"})
                )
                for _ in range(40)
            ]
            try:
                # The bound (rest.max.concurrent.requests, 32) lets 32 in; the rest are answered at once.
                await _until(lambda: writes.entered >= 32 and sum(p.done() for p in posts) >= 8)
                health = await client.get("/health")
            finally:
                writes.release.set()
            return health.status_code, list(await asyncio.gather(*posts))

    health, answers = _run(scenario())
    assert health == 200
    busy = [r for r in answers if r.status_code == 503]
    assert len(busy) == 8 and writes.entered == 32
    assert busy[0].json() == {
        "error_code": 503,
        "message": "The REST API is handling 32 requests already; try again shortly",
    }


def test_a_body_that_trickles_is_answered_408(writes: Writes) -> None:
    stalled = asyncio.Event()

    async def trickle() -> AsyncIterator[bytes]:
        yield b'{"name": "sl'
        await stalled.wait()  # the client sends nothing more
        yield b'ow"}'

    async def send() -> httpx.Response:
        worker = _worker(**{"rest.request.timeout.ms": "200"})
        async with _client(worker, writes) as client:
            return await client.post(
                "/connectors", content=trickle(), headers={"Content-Type": "application/json"}
            )

    resp = _run(send())
    assert (resp.status_code, resp.json()["error_code"]) == (408, 408)
    assert writes.calls == []


@pytest.fixture
def deadline_server() -> Iterator[int]:
    """A real uvicorn listener with the REST listeners' options (rest.request.timeout.ms=200)."""
    api = FastAPI()

    @api.get("/")
    async def root() -> dict[str, str]:
        return {}

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)  # connections queue until uvicorn accepts them
    server = uvicorn.Server(uvicorn.Config(api, log_level="warning", lifespan="off", **server_options(200)))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield sock.getsockname()[1]
    finally:
        server.should_exit = True
        thread.join(HANG)
        sock.close()


def _closed_by_server(port: int, sent: bytes) -> bytes:
    """Send ``sent`` and read until the server closes the connection: everything it answered."""
    with socket.create_connection(("127.0.0.1", port), timeout=HANG) as client:
        client.sendall(sent)
        received = b""
        while chunk := client.recv(4096):
            received += chunk
        return received


@pytest.mark.parametrize(
    "sent",
    [
        b"",  # connects and says nothing
        b"GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ",  # slowloris: headers that never end
        # one answered request, then the next one's headers never end
        b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n",
    ],
    ids=["silent", "slow-headers", "slow-second-request"],
)
def test_a_connection_whose_headers_never_end_is_closed(deadline_server: int, sent: bytes) -> None:
    received = _closed_by_server(deadline_server, sent)  # socket.timeout (HANG) before the fix
    assert received.count(b"HTTP/1.1 200") == sent.count(b"\r\n\r\n")


def test_a_streamed_body_past_the_size_limit_is_a_413_not_a_500(writes: Writes) -> None:
    """Chunked, so no Content-Length to refuse up front: the limit trips while the handler reads, and the
    error reached the limit inside an ExceptionGroup from FastAPI's http middleware (a 500)."""

    async def chunks() -> AsyncIterator[bytes]:
        for _ in range(11):
            yield b" " * 100_000

    async def send() -> httpx.Response:
        async with _client(_worker(), writes) as client:
            return await client.post(
                "/connectors", content=chunks(), headers={"Content-Type": "application/json"}
            )

    resp = _run(send())
    assert (resp.status_code, resp.json()["error_code"]) == (413, 413)
