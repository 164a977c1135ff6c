"""Bounds on what one client may take from the REST API: body size, time, and handler slots.

Body size: Apache Kafka Connect's Jetty takes any body, and a connector config too large for a
config-topic record then fails deep in the producer. kconnect refuses such a body up front with 413 and
Connect's error JSON: 1,000,000 bytes, just under Kafka's default ``max.message.bytes`` (1,048,588), so
anything accepted fits one record of a topic created with defaults.

Time and slots (issue 23, row 7): a request's headers and then its body must arrive within
``rest.request.timeout.ms`` (:func:`header_deadline_protocol`, :class:`BodyDeadline`), and at most
``rest.max.concurrent.requests`` requests are in handlers at once (:class:`ConcurrencyLimit`), so that
slow or many clients cannot hold the connections and threads ``GET /health`` and everyone else need.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

from kconnect.rest.server import send_error

MAX_BODY_BYTES = 1_000_000
#: The most a request line and headers may take, h11's default made explicit (uvicorn answers 400 past it).
MAX_HEADER_BYTES = 16 * 1024

Scope = dict[str, Any]
Message = dict[str, Any]


class ResponseTracker:
    """An ASGI ``send`` that remembers whether the answer has begun: a middleware that cuts a request short
    may still send its own error only while nothing of the handler's answer went out."""

    def __init__(self, send: Any) -> None:
        self._send = send
        self.started = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.started = True
        await self._send(message)


class BodyTooLarge(Exception):
    """Raised inside the wrapped ``receive`` when a streamed body passes the limit, to unwind the handler that
    is reading it; the middleware turns it into a 413."""

    pass


class BodyLimit:
    """ASGI middleware: 413 when Content-Length says too much, or when a streamed body grows past it."""

    def __init__(self, app: Any, max_bytes: int = MAX_BODY_BYTES) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    await send_error(send, 400, "Content-Length is not a number")
                    return
                if declared > self.max_bytes:
                    await send_error(send, 413, self._message(declared))
                    return
        seen = 0
        sent = ResponseTracker(send)

        async def limited_receive() -> Message:
            nonlocal seen
            message: Message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge
            return message

        try:
            await self.app(scope, limited_receive, sent)
        except* BodyTooLarge:  # except*: FastAPI's http middleware hands it on inside an ExceptionGroup
            if not sent.started:
                await send_error(send, 413, self._message(seen))

    def _message(self, size: int) -> str:
        return f"Request body of {size} bytes is larger than the {self.max_bytes} bytes a request may carry"


# ====================================================================================== slow clients

#: Paths answered past the concurrency bound: probes must learn the worker is alive while writes pile up.
ALWAYS_ANSWERED = frozenset({"/health", "/"})
BUSY_MESSAGE = "The REST API is handling {limit} requests already; try again shortly"
BODY_TIMEOUT_MESSAGE = "Request body not received within {seconds:g} s"


class ConcurrencyLimit:
    """ASGI middleware: at most ``max_requests`` requests in handlers at once, 503 (Connect's JSON) past it.

    Why: REST handlers that block (writes waiting on Kafka, validation running plugin code) share one
    pool of 40 threads per listener; a crowd of such requests, or of clients sending slowly, held every
    thread, and the requests behind them, ``GET /health`` included, waited without an answer. The bound
    sits below the pool's size so reads still find a thread, and ``GET /health`` and ``GET /`` are
    never counted (they run on the event loop, no thread needed). The count is shared by every listener
    (each serves the same app from its own thread), hence the lock.
    """

    def __init__(self, app: Any, max_requests: int) -> None:
        self.app = app
        self.max_requests = max_requests
        self.in_flight = 0
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or (
            scope.get("method") in ("GET", "HEAD") and scope.get("path") in ALWAYS_ANSWERED
        ):
            await self.app(scope, receive, send)
            return
        with self._lock:
            admitted = self.in_flight < self.max_requests
            if admitted:
                self.in_flight += 1
        if not admitted:
            await send_error(send, 503, BUSY_MESSAGE.format(limit=self.max_requests))
            return
        try:
            await self.app(scope, receive, send)
        finally:
            with self._lock:
                self.in_flight -= 1


class BodyTimedOut(Exception):
    """Raised inside the wrapped ``receive`` when a body is still incomplete at its deadline, to unwind the
    handler waiting for it; the middleware turns it into a 408."""


class BodyDeadline:
    """ASGI middleware: a request's body must have arrived ``timeout_s`` after the request started, or 408.

    Why: a client that sends its headers and then a byte now and then held its connection and its
    request slot (above) for as long as it liked; uvicorn bounds only the idle time between requests.
    Only the body is timed: once it is complete, ``receive`` waits for a disconnect, which is no
    client's delay.
    """

    def __init__(self, app: Any, timeout_s: float) -> None:
        self.app = app
        self.timeout_s = timeout_s

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout_s
        body_done = False
        sent = ResponseTracker(send)

        async def timed_receive() -> Message:
            nonlocal body_done
            if body_done:
                message: Message = await receive()
                return message
            try:
                message = await asyncio.wait_for(receive(), max(deadline - loop.time(), 0.0))
            except TimeoutError:
                raise BodyTimedOut from None
            if message["type"] != "http.request" or not message.get("more_body", False):
                body_done = True
            return message

        try:
            await self.app(scope, timed_receive, sent)
        except* BodyTimedOut:  # except*: FastAPI's http middleware hands it on inside an ExceptionGroup
            if not sent.started:
                await send_error(
                    send,
                    408,
                    BODY_TIMEOUT_MESSAGE.format(seconds=self.timeout_s),
                    [(b"connection", b"close")],
                )


def header_deadline_protocol(timeout_s: float) -> type[H11Protocol]:
    """uvicorn's h11 protocol, closing a connection whose request line and headers take over ``timeout_s``.

    Why: uvicorn times only the idle wait between requests, and its keep-alive timer stops at the first
    byte received, so a client sending a header line now and then (slowloris) kept its connection open
    forever. The deadline runs from the connection's start and again from each answer's end (which also
    bounds the rest of a body the handler never read) until the next request's headers are complete.
    """

    class HeaderDeadlineH11Protocol(H11Protocol):
        _head_timer: asyncio.TimerHandle | None = None
        _head_cycle: object = None

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._arm_head_deadline()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_head_deadline()
            super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self._head_timer is not None and self.cycle is not self._head_cycle:
                self._cancel_head_deadline()  # a new request's headers are in: its handler runs

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
                self._arm_head_deadline()

        def _arm_head_deadline(self) -> None:
            self._cancel_head_deadline()
            self._head_cycle = self.cycle
            self._head_timer = self.loop.call_later(timeout_s, self._head_deadline_passed)

        def _cancel_head_deadline(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def _head_deadline_passed(self) -> None:
            self._head_timer = None
            if not self.transport.is_closing():
                self.transport.close()

    return HeaderDeadlineH11Protocol


def server_options(request_timeout_ms: int) -> dict[str, Any]:
    """The uvicorn settings every REST listener runs with: h11 with the header deadline above (httptools,
    which uvicorn prefers when installed, has no such hook), and h11's bound on a request's headers."""
    return {
        "http": header_deadline_protocol(request_timeout_ms / 1000),
        "h11_max_incomplete_event_size": MAX_HEADER_BYTES,
    }
