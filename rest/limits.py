"""A bound on request bodies, enforced before any handler reads one.

Apache Kafka Connect's Jetty takes any body, and a connector config too large for a config-topic record
then fails deep in the producer. kconnect refuses such a body up front with 413 and Connect's error JSON:
1,000,000 bytes, just under Kafka's default ``max.message.bytes`` (1,048,588), so anything accepted fits
one record of a topic created with defaults.
"""

from __future__ import annotations

from typing import Any

from kconnect.rest.server import send_error

MAX_BODY_BYTES = 1_000_000

Scope = dict[str, Any]
Message = dict[str, Any]


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
        started = False

        async def limited_receive() -> Message:
            nonlocal seen
            message: Message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise BodyTooLarge
            return message

        async def tracking_send(message: Message) -> None:
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
            await send(message)

        try:
            await self.app(scope, limited_receive, tracking_send)
        except BodyTooLarge:
            if not started:
                await send_error(send, 413, self._message(seen))

    def _message(self, size: int) -> str:
        return f"Request body of {size} bytes is larger than the {self.max_bytes} bytes a request may carry"
