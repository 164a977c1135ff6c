"""REST routes for connector operations, shaped as Apache Kafka Connect 4.x's ConnectorsResource.

``PATCH /connectors/{name}/config``, restarts of a connector and of one task, pause/resume/stop,
``GET/PATCH/DELETE /connectors/{name}/offsets`` and the active topics. Status codes and messages were
checked against the reference worker: pause and resume answer 202, stop 204, a plain restart 204 and a
restart with ``includeTasks``/``onlyFailed`` 202 with the states it set in motion. Where Java answers a
malformed body with 500, these answer 400 with Connect's error JSON. ``GET /connectors/{name}/tasks-config``
is gone, as in Apache Kafka 4.0 (KIP-970): ``GET /connectors/{name}/tasks`` carries the same configs.

The handlers are thin: they parse, call :class:`~kconnect.runtime.shell.operations.ConnectorOperations` in a
thread (it blocks on Kafka), and forward to the leader or the owner when told to, through the helpers
``rest/app.py`` already has.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from kconnect.runtime.errors import BadRequestError, NotFoundError, NotLeaderError
from kconnect.runtime.shell import connector_offsets
from kconnect.runtime.shell.operations import ConnectorOperations
from kconnect.runtime.shell.worker import Worker
from kconnect.runtime.storage.config_log import TargetState

Forward = Callable[[Request, NotLeaderError, bytes | None], Awaitable[Response]]
JsonBody = Callable[[Request], Awaitable[Any]]
Shape = Callable[[str], dict[str, Any]]


def java_boolean(text: str | None) -> bool:
    """JAX-RS reads a Boolean query parameter with ``Boolean.valueOf``: "true" in any case, else false."""
    return text is not None and text.lower() == "true"


_JAVA_INT = re.compile(r"[+-]?\d+")  # \d: any Unicode decimal digit, as Java's Character.digit
_INT_MIN, _INT_MAX = -(2**31), 2**31 - 1


def task_number(text: str) -> int:
    """A ``{task}`` path segment as Java binds it (``Integer.valueOf``), else the 404 Java answers.

    JAX-RS treats a path parameter that does not convert as a route that does not match, so
    ``/connectors/src/tasks/zero/status`` is "HTTP 404 Not Found", not a 400. ``Integer.valueOf`` takes
    an optional sign and decimal digits within 32 bits; Python's ``int`` would also take blanks and "_".
    """
    if _JAVA_INT.fullmatch(text) is None or not _INT_MIN <= int(text) <= _INT_MAX:
        raise NotFoundError("HTTP 404 Not Found")
    return int(text)


def config_patch(body: Any) -> dict[str, str | None]:
    """A PATCH body: a JSON object whose values are scalars (kept as strings) or null (remove the key)."""
    if not isinstance(body, dict):
        raise BadRequestError("Connector config patch must be a JSON object of string keys and values")
    out: dict[str, str | None] = {}
    for key, value in body.items():
        if isinstance(value, dict | list):
            raise BadRequestError(
                f"Connector config patch: value of '{key}' must be a string, number, boolean or null"
            )
        out[str(key)] = (
            None if value is None else str(value).lower() if isinstance(value, bool) else str(value)
        )
    return out


def operations_router(
    worker: Worker, forward: Forward, json_body: JsonBody, info: Shape, status: Shape
) -> APIRouter:
    """The routes, bound to one worker and to app.py's forwarding, body and shape helpers."""
    ops = ConnectorOperations(worker)
    router = APIRouter()

    async def leader_call(request: Request, raw: bytes, fn: Callable[..., Any], *args: Any) -> Any:
        """Run ``fn``; on NotLeaderError return the forwarded answer instead (a Response)."""
        try:
            return await run_in_threadpool(fn, *args)
        except NotLeaderError as exc:
            return await forward(request, exc, raw)

    @router.patch("/connectors/{name}/config")
    async def patch_config(name: str, request: Request) -> Response:
        raw = await request.body()
        patch = config_patch(await json_body(request))
        if patch.get("name") is not None and patch["name"] != name:
            # Java 3.9 stores such a name; a config naming another connector is refused here instead.
            raise BadRequestError(
                f"Connector name configuration ({patch['name']}) doesn't match connector name "
                f"in the URL ({name})"
            )
        done = await leader_call(request, raw, ops.patch_config, name, patch)
        if isinstance(done, Response):
            return done
        return JSONResponse(info(name))

    @router.post("/connectors/{name}/restart")
    async def restart(name: str, request: Request) -> Response:
        include_tasks = java_boolean(request.query_params.get("includeTasks"))
        only_failed = java_boolean(request.query_params.get("onlyFailed"))
        # Java answers with the statuses its restart plan was built from, taken before the restart writes
        # its own RESTARTING records.
        try:
            before: dict[str, Any] | None = status(name)
        except NotFoundError:
            before = None
        plan = await leader_call(request, b"", ops.restart, name, include_tasks, only_failed)
        if isinstance(plan, Response):
            return plan
        if plan is None:
            return Response(status_code=204)
        body = before if before is not None else status(name)
        # As Java: each entry that restarts keeps its worker, trace and (KIP-891) version, state RESTARTING.
        if plan.connector:
            body["connector"] = {**body["connector"], "state": "RESTARTING"}
        restarting = {t.task for t in plan.tasks}
        body["tasks"] = [{**t, "state": "RESTARTING"} if t["id"] in restarting else t for t in body["tasks"]]
        return JSONResponse(status_code=202, content=body)

    @router.post("/connectors/{name}/tasks/{task}/restart")
    async def restart_task(name: str, task: str, request: Request) -> Response:
        done = await leader_call(request, b"", ops.restart_task, name, task_number(task))
        if isinstance(done, Response):
            return done
        return Response(status_code=204)

    async def target_state(name: str, request: Request, state: TargetState) -> Response:
        done = await leader_call(request, b"", ops.set_target_state, name, state)
        if isinstance(done, Response):
            return done
        return Response(status_code=202)

    @router.put("/connectors/{name}/pause")
    async def pause(name: str, request: Request) -> Response:
        return await target_state(name, request, TargetState.PAUSED)

    @router.put("/connectors/{name}/resume")
    async def resume(name: str, request: Request) -> Response:
        return await target_state(name, request, TargetState.STARTED)

    @router.put("/connectors/{name}/stop")
    async def stop(name: str, request: Request) -> Response:
        done = await leader_call(request, b"", ops.stop, name)
        if isinstance(done, Response):
            return done
        return Response(status_code=204)

    @router.get("/connectors/{name}/offsets")
    async def get_offsets(name: str) -> Response:
        return JSONResponse(await run_in_threadpool(ops.offsets, name))

    @router.patch("/connectors/{name}/offsets")
    async def alter_offsets(name: str, request: Request) -> Response:
        raw = await request.body()
        entries = connector_offsets.parse_body(await json_body(request))
        message = await leader_call(request, raw, ops.alter_offsets, name, entries)
        if isinstance(message, Response):
            return message
        return JSONResponse({"message": message})

    @router.delete("/connectors/{name}/offsets")
    async def reset_offsets(name: str, request: Request) -> Response:
        message = await leader_call(request, b"", ops.reset_offsets, name)
        if isinstance(message, Response):
            return message
        return JSONResponse({"message": message})

    @router.get("/connectors/{name}/topics")
    def topics(name: str) -> dict[str, dict[str, list[str]]]:
        return ops.topics(name)

    @router.put("/connectors/{name}/topics/reset")
    async def reset_topics(name: str) -> Response:
        await run_in_threadpool(ops.reset_topics, name)
        return Response(status_code=202)

    return router
