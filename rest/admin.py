"""``/admin/loggers``: read and change log levels at run time, as Apache Kafka Connect 3.9's LoggingResource.

``?scope=worker`` (the default; anything else than ``cluster`` counts as worker, with a warning, as in
Java) changes this worker's levels and answers the loggers it changed. ``?scope=cluster`` writes a
``logger-cluster-<namespace>`` record to the config topic and answers 204: every worker, this one
included, applies the level when it reads the record (``stores._apply_cluster_log_level``).

Status codes and messages are Java's, checked against the reference worker, including its 404 for an
unknown level name; a body that is not a JSON object is a 400 here (Java answers 500).
"""

from __future__ import annotations

import json
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from kconnect.rest.bodies import parse_json
from kconnect.runtime import logs
from kconnect.runtime.errors import BadRequestError, NotFoundError
from kconnect.runtime.shell.log_levels import LEVELS, from_java
from kconnect.runtime.shell.worker import Worker

log = logs.get(__name__)

ADMIN_PREFIX = "/admin"


def parse_level_body(raw: bytes) -> str:
    """The ``level`` of a PUT body; 400s name what was wrong."""
    body = parse_json(raw) if raw.strip() else {}
    if not isinstance(body, dict):
        raise BadRequestError('Request body must be a JSON object such as {"level": "DEBUG"}')
    level = body.get("level")
    if level is None:
        raise BadRequestError("Desired 'level' parameter was not specified in request.")
    if not isinstance(level, str):
        raise BadRequestError(f"'level' must be a string such as \"DEBUG\", not {json.dumps(level)}")
    return level


def admin_router(worker: Worker) -> APIRouter:
    """The ``/admin/loggers`` routes, bound to ``worker`` because a cluster-scoped change is written to the
    config topic through that worker's writes (a worker-scoped one only touches this process's levels)."""
    router = APIRouter()

    @router.get("/admin/loggers")
    def list_loggers() -> dict[str, Any]:
        """Root and every logger with an explicitly set level, with when it was last changed (ms)."""
        return {name: lvl.to_json() for name, lvl in LEVELS.all().items()}

    @router.get("/admin/loggers/{logger}")
    def get_logger(logger: str) -> dict[str, Any]:
        found = LEVELS.get(logger)
        if found is None:
            raise NotFoundError(f"Logger {logger} not found.")
        return found.to_json()

    @router.put("/admin/loggers/{logger}")
    async def set_logger(logger: str, request: Request, scope: str | None = None) -> Response:
        level = parse_level_body(await request.body())
        if from_java(level) is None:
            raise NotFoundError(f"invalid log level '{level}'.")
        effective = (scope or "worker").strip().lower()
        if effective not in ("worker", "cluster"):
            log.warning("unknown logger scope; using worker scope", scope=scope, logger=logger)
            effective = "worker"
        if effective == "cluster":
            await run_in_threadpool(worker.writes.put_logger_level, logger, level.strip().upper())
            return Response(status_code=204)
        changed = LEVELS.set(logger, level)
        log.info("log level set", logger=logger, level=level, loggers=changed)
        return JSONResponse(changed)

    return router
