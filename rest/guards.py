"""Who may write through the REST API from a browser: Content-Type, Origin and Host checks.

The API has no session or token a web page could lack: any page an operator opens can send requests to
``localhost:8083`` or a worker on the operator's network. Browsers send a cross-site request without
asking first (no CORS preflight) when it is "simple": a GET, HEAD or POST whose Content-Type is
``text/plain``, ``application/x-www-form-urlencoded`` or ``multipart/form-data``, or that has a body
and no Content-Type at all (a typeless Blob). The page cannot read the answer, but a write has done its
harm by then: such a ``POST /connectors`` created a connector, a ``POST .../restart`` restarted one.

So, as Apache Kafka Connect's resources (``@Consumes(APPLICATION_JSON)``, Jersey's 415):
- a write (POST, PUT, PATCH, DELETE) that declares a Content-Type other than ``application/json``
  (parameters such as ``charset`` allowed), or that carries a body with no Content-Type, is refused with
  415, whether or not its route reads a body: bodiless writes such as ``POST .../restart`` were the same
  door. A write with neither Content-Type nor body (curl's ``-X POST``) is let through. A JSON write from a
  page needs a preflight, which fails unless ``access.control.allow.origin`` lets that page in;
- a write whose ``Origin`` header names another origin than the API's own, unless
  ``access.control.allow.origin`` allows it (``*``, or listed), is refused with 403: that key already
  says which origins may use the API from a browser, and kconnect documents its empty default as
  "only the REST API's own origin";
- with ``rest.allowed.hosts`` set, a request whose ``Host`` is not listed is refused with 403 (a
  DNS-rebinding page reaches the API under a name of its own), ``GET /health`` excepted for probes.

Every refusal is Connect's error JSON, sent before the request reaches FastAPI.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import urlsplit

from kconnect.config.worker import WorkerConfig
from kconnect.rest.server import send_error

__all__ = ["RequestGuard", "allowed_host", "same_origin", "write_refusal"]

#: Methods a browser or a client uses to read; everything else changes the worker or the cluster.
READ_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
#: Java's answer to a body its resource does not consume (Jersey's message, kept for clients that match it).
UNSUPPORTED_MEDIA_TYPE = "HTTP 415 Unsupported Media Type"
_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}


def _host_port(value: str) -> tuple[str, int | None]:
    """A ``host[:port]`` (IPv6 in brackets) as a lower-case host and its port, None when it names none."""
    try:
        parts = urlsplit(f"//{value.strip()}")
        return (parts.hostname or "").lower(), parts.port
    except ValueError:  # a port that is no number, or out of range: a name that matches nothing
        return value.strip().lower(), -1


def same_origin(origin: str, host: str | None) -> bool:
    """Whether an ``Origin`` header names the API's own origin: the host and port the request was sent to.

    Schemes are not compared, and a Host without a port matches the origin's host on any port: behind a
    TLS-terminating proxy the browser's ``https://name`` origin reaches a worker listening on ``http``
    with ``Host: name``, and no other site can serve pages from the API's own host.
    """
    if host is None:
        return False
    try:
        parts = urlsplit(origin.strip())
        origin_port = parts.port or _DEFAULT_PORTS.get(parts.scheme.lower())
    except ValueError:
        return False
    if not parts.scheme or not parts.hostname:
        return False  # "null" (sandboxed frames, file: pages) and anything unparseable
    host_name, host_port = _host_port(host)
    return parts.hostname.lower() == host_name and host_port in (None, origin_port)


def _normal_origin(origin: str) -> str:
    return origin.strip().rstrip("/").lower()


def allowed_host(host: str | None, allowed: Iterable[str]) -> bool:
    """Whether a ``Host`` header is one of ``rest.allowed.hosts`` (an entry without a port allows any)."""
    if host is None:
        return False
    name, port = _host_port(host)
    for entry in allowed:
        entry_name, entry_port = _host_port(entry)
        if entry_name == name and entry_port in (None, port):
            return True
    return False


def write_refusal(
    method: str,
    headers: dict[str, str],
    allowed_origins: tuple[str, ...],
) -> tuple[int, str] | None:
    """The status and message a write is refused with, or None to let it through (pure, for tests)."""
    if method.upper() in READ_METHODS:
        return None
    origin = headers.get("origin")
    if (
        origin is not None
        and "*" not in allowed_origins
        and _normal_origin(origin) not in allowed_origins
        and not same_origin(origin, headers.get("host"))
    ):
        return 403, (
            f"Origin {origin} may not write to this REST API: only its own origin and those in "
            "access.control.allow.origin may"
        )
    content_type = headers.get("content-type")
    if content_type is not None:
        if content_type.split(";", 1)[0].strip().lower() != "application/json":
            return 415, UNSUPPORTED_MEDIA_TYPE
    elif headers.get("content-length", "0").strip() not in ("", "0") or "transfer-encoding" in headers:
        return 415, UNSUPPORTED_MEDIA_TYPE  # a body with no type: a typeless Blob needs no preflight
    return None


class RequestGuard:
    """ASGI middleware applying the checks above to every request of the API, on every listener."""

    def __init__(self, app: Any, config: WorkerConfig) -> None:
        self.app = app
        self.allowed_hosts = config.rest_allowed_hosts
        self.allowed_origins = tuple(
            _normal_origin(o) for o in config.access_control_allow_origin.split(",") if o.strip()
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        method: str = scope.get("method", "GET")
        health = method in ("GET", "HEAD") and scope.get("path") == "/health"
        if self.allowed_hosts and not health and not allowed_host(headers.get("host"), self.allowed_hosts):
            await send_error(send, 403, f"Host {headers.get('host')} is not one of rest.allowed.hosts")
            return
        refusal = write_refusal(method, headers, self.allowed_origins)
        if refusal is not None:
            await send_error(send, *refusal)
            return
        await self.app(scope, receive, send)
