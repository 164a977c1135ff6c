"""REST routes for connectors, shaped as Apache Kafka Connect 4.x's ConnectorsResource.

:func:`connectors_router`: the collection and each connector (``GET/POST /connectors``, with
``?expand=status|info`` and ``initial_state``; ``GET/DELETE /connectors/{name}``, ``GET/PUT
/connectors/{name}/config``, ``GET /connectors/{name}/status``). Creating or replacing a config is the
leader's write: a follower forwards it.

:func:`operations_router`: ``PATCH /connectors/{name}/config``, restarts of a connector and of one task,
pause/resume/stop, ``GET/PATCH/DELETE /connectors/{name}/offsets`` and the active topics. Status codes and
messages were checked against the reference worker: pause and resume answer 202, stop 204, a plain
restart 204 and a restart with ``includeTasks``/``onlyFailed`` 202 with the states it set in motion. Where
Java answers a malformed body with 500, these answer 400 with Connect's error JSON.
``GET /connectors/{name}/tasks-config`` is gone, as in Apache Kafka 4.0 (KIP-970): ``GET
/connectors/{name}/tasks`` (``tasks.py``) carries the same configs.

The handlers are thin: they parse, call the worker's writes or
:class:`~kconnect.runtime.shell.operations.ConnectorOperations` in a thread (they block on Kafka), and
forward to the leader or the owner when told to, through :class:`~kconnect.rest.context.RestContext`.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from kconnect.rest.context import RestContext, string_map
from kconnect.runtime.errors import BadRequestError, NotFoundError, NotLeaderError
from kconnect.runtime.shell import connector_offsets
from kconnect.runtime.shell.operations import ConnectorOperations
from kconnect.runtime.shell.view import TargetState


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


def initial_offsets(value: Any) -> list[connector_offsets.OffsetEntry] | None:
    """KIP-995's ``initial_offsets`` of a create body: the ``PATCH /connectors/{name}/offsets`` body's shape
    (``{"offsets": [...]}``), checked the same way; None when absent or null."""
    if value is None:
        return None
    try:
        return connector_offsets.parse_body(value)
    except BadRequestError as exc:
        raise BadRequestError(f"initial_offsets: {exc}") from exc


def connectors_router(ctx: RestContext) -> APIRouter:
    """The connector collection and each connector's info, config and status, for ``ctx``'s worker."""
    router = APIRouter()
    worker, writes = ctx.worker, ctx.writes
    connector_info, connector_status = ctx.connector_info, ctx.connector_status
    ops = ConnectorOperations(worker)

    def created_info(name: str) -> dict[str, Any]:
        # Java answers a creation with the task configs known when its config record was read back: none,
        # since a connector's tasks are computed after it starts. Ours may have started and written them
        # by the time the snapshot is read, so the answer does not depend on that race.
        return {**connector_info(name), "tasks": []}

    @router.get("/connectors")
    def list_connectors(request: Request) -> Any:
        snap = worker.snapshot()
        names = snap.connectors()
        expand = request.query_params.getlist("expand")
        if not expand:
            return names
        out: dict[str, Any] = {}
        for name in names:
            entry: dict[str, Any] = {}
            if "status" in expand:
                entry["status"] = connector_status(name)
            if "info" in expand:
                entry["info"] = connector_info(name)
            out[name] = entry
        return out

    @router.post("/connectors", status_code=201)
    async def create_connector(request: Request) -> Response:
        raw = await request.body()
        body = await ctx.json_body(request)
        if not isinstance(body, dict):
            raise BadRequestError("Request body must be a JSON object with 'name' and 'config'")
        name = body.get("name")
        config = string_map(body.get("config"), "config") if body.get("config") is not None else None
        if config is None:
            raise BadRequestError("Connector config is missing ('config' field)")
        if name is None:
            name = config.get("name")
        if not isinstance(name, str) or not name.strip():
            raise BadRequestError("Connector name is missing or empty ('name' field)")
        if "name" in config and config["name"] != name:
            raise BadRequestError(
                f"Connector name configuration ({config['name']}) doesn't match connector name "
                f"in the URL ({name})"
            )
        initial_state = body.get("initial_state")
        if initial_state is not None and initial_state not in ("RUNNING", "PAUSED", "STOPPED"):
            raise BadRequestError(
                f"Invalid initial state {initial_state}; must be one of RUNNING, PAUSED, STOPPED"
            )
        # The REST API names the running state RUNNING; the config topic's target state is STARTED.
        target = None if not initial_state else TargetState(initial_state.replace("RUNNING", "STARTED"))
        offsets = initial_offsets(body.get("initial_offsets"))
        try:
            await run_in_threadpool(ops.create, name, config, target, offsets)
        except NotLeaderError as exc:
            return await ctx.forward_or_raise(request, exc, raw)
        content = created_info(name)
        if offsets is not None:
            content["initial_offsets_written"] = True
        return JSONResponse(
            status_code=201,
            content=content,
            headers={"Location": str(request.base_url).rstrip("/") + f"/connectors/{name}"},
        )

    @router.get("/connectors/{name}")
    def get_connector(name: str) -> dict[str, Any]:
        return connector_info(name)

    @router.get("/connectors/{name}/config")
    def get_config(name: str) -> dict[str, str]:
        return dict(connector_info(name)["config"])

    @router.put("/connectors/{name}/config")
    async def put_config(name: str, request: Request) -> Response:
        raw = await request.body()
        config = string_map(await ctx.json_body(request), "Connector config")
        if "name" in config and config["name"] != name:
            raise BadRequestError(
                f"Connector name configuration ({config['name']}) doesn't match connector name "
                f"in the URL ({name})"
            )
        try:
            created = await run_in_threadpool(writes.put_connector_config, name, config, allow_replace=True)
        except NotLeaderError as exc:
            return await ctx.forward_or_raise(request, exc, raw)
        content = created_info(name) if created else connector_info(name)
        return JSONResponse(status_code=201 if created else 200, content=content)

    @router.get("/connectors/{name}/status")
    def get_status(name: str) -> dict[str, Any]:
        return connector_status(name)

    @router.delete("/connectors/{name}", status_code=204)
    async def delete_connector(name: str, request: Request) -> Response:
        try:
            await run_in_threadpool(writes.delete_connector, name)
        except NotLeaderError as exc:
            return await ctx.forward_or_raise(request, exc, b"")
        return Response(status_code=204)

    return router


def operations_router(ctx: RestContext) -> APIRouter:
    """The operations on a connector of ``ctx``'s worker."""
    worker, forward, json_body = ctx.worker, ctx.forward_or_raise, ctx.json_body
    info, status = ctx.connector_info, ctx.connector_status
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
