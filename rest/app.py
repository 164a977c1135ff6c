"""The REST API, shaped as Apache Kafka Connect's: same paths, JSON bodies, status codes and errors.

:func:`create_app` only assembles: the error handlers every route shares, the middleware that guards every
request, and one router per resource, each in the module named for it, where that resource's rules are:

- ``root.py``: ``GET /`` and ``GET /health``;
- ``connectors.py``: the connectors and the operations on one (config patch, restarts, pause/resume/stop,
  offsets, active topics);
- ``tasks.py``: a connector's tasks, and the internal task-config and fencing writes between workers;
- ``workers.py``: ``GET /workers`` and the static-assignment overrides;
- ``plugins.py``, ``admin.py`` (log levels), ``group.py`` (``GET /group``, ``GET /metrics``);
- ``ui/``: the web console's static files at ``/ui`` (``rest.console.enable``).

What the routes share (reading a body, forwarding to the leader, the shapes of a connector's info and
status) is ``context.py``'s :class:`~kconnect.rest.context.RestContext`.
"""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from kconnect.rest import group as group_routes
from kconnect.rest.admin import admin_router
from kconnect.rest.connectors import connectors_router, operations_router
from kconnect.rest.context import RestContext
from kconnect.rest.guards import RequestGuard
from kconnect.rest.limits import BodyDeadline, BodyLimit, ConcurrencyLimit
from kconnect.rest.openapi import install_openapi
from kconnect.rest.plugins import plugins_router
from kconnect.rest.root import root_router
from kconnect.rest.tasks import tasks_router
from kconnect.rest.ui.routes import console_router
from kconnect.rest.workers import workers_router
from kconnect.runtime import __version__
from kconnect.runtime.errors import ConnectError
from kconnect.runtime.shell.worker import Worker

#: Paths that answer before the worker has joined and read its config: liveness and the API's description.
ANSWERED_WHILE_STARTING = frozenset({"/", "/health", "/openapi.json", "/docs"})


def error(status: int, message: str) -> JSONResponse:
    """Apache Kafka Connect's error body (``error_code`` and ``message``), which its clients parse."""
    return JSONResponse(status_code=status, content={"error_code": status, "message": message})


def install_error_handlers(app: FastAPI) -> None:
    """Every failure answers with Connect's error JSON: the worker's own errors with their status, FastAPI's
    404/405 and validation errors with Jersey's messages, anything unexpected as a 500 naming it."""

    @app.exception_handler(ConnectError)
    async def _connect_error(_request: Request, exc: ConnectError) -> JSONResponse:
        return error(exc.status, exc.message)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(_request: Request, exc: StarletteHTTPException) -> JSONResponse:
        reason = {404: "Not Found", 405: "Method Not Allowed"}.get(exc.status_code, str(exc.detail))
        return error(exc.status_code, f"HTTP {exc.status_code} {reason}")

    @app.exception_handler(RequestValidationError)
    async def _validation_error(_request: Request, exc: RequestValidationError) -> JSONResponse:
        return error(400, f"Invalid request: {exc.errors()[0].get('msg', 'malformed')}")

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        return error(500, f"{type(exc).__name__}: {exc}")


def install_middleware(app: FastAPI, worker: Worker) -> None:
    """The checks every request passes, outermost last: the browser checks (``guards``) refuse first, then
    the concurrency bound counts what is left, then the body's deadline and size, then start-up."""

    @app.middleware("http")
    async def starting_up(request: Request, call_next: Any) -> Response:
        # Until the worker has joined and read its config, only liveness-style endpoints answer.
        if not worker.started.is_set() and request.url.path not in ANSWERED_WHILE_STARTING:
            return error(503, "Request cannot be completed because the worker is still starting up")
        response: Response = await call_next(request)
        return response

    app.add_middleware(BodyLimit)
    app.add_middleware(BodyDeadline, timeout_s=worker.config.rest_request_timeout_ms / 1000)
    app.add_middleware(ConcurrencyLimit, max_requests=worker.config.rest_max_concurrent_requests)
    app.add_middleware(RequestGuard, config=worker.config)


def create_app(worker: Worker) -> FastAPI:
    """The REST application of one worker: every route of Apache Kafka Connect's API, plus kconnect's."""
    app = FastAPI(title="kconnect", version=__version__, docs_url="/docs", openapi_url="/openapi.json")
    ctx = RestContext(worker)  # also makes the worker forward its own writes to the leader over HTTP
    install_error_handlers(app)
    install_middleware(app, worker)
    app.include_router(group_routes.router(worker))
    app.include_router(root_router(ctx))
    app.include_router(connectors_router(ctx))
    app.include_router(tasks_router(ctx))
    app.include_router(workers_router(ctx))
    app.include_router(plugins_router(worker))
    app.include_router(admin_router(worker))
    app.include_router(operations_router(ctx))
    if worker.config.rest_console_enable:
        app.include_router(console_router())
    install_openapi(app)  # last: it describes every route included above
    return app
