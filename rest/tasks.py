"""A connector's tasks: their configs and status, and the two internal writes between workers.

``GET /connectors/{name}/tasks`` is answered by the leader, as in Apache Kafka Connect: it has read every
committed task config. ``POST /connectors/{name}/tasks`` (a connector's owner hands the leader its task
configs) and ``PUT /connectors/{name}/fence`` (KIP-618: fence the previous task generation before an
exactly-once source task starts) are internal, signed with the session key under ``sessioned`` and
exempt from basic auth (``server._INTERNAL``); they are not in the OpenAPI document. A task's restart is
an operation on the connector (``connectors.py``).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import Response

from kconnect.rest.connectors import task_number
from kconnect.rest.context import RestContext, string_map
from kconnect.runtime.errors import BadRequestError, NotFoundError, NotLeaderError
from kconnect.runtime.ids import TaskId


def tasks_router(ctx: RestContext) -> APIRouter:
    """The task routes of ``ctx``'s worker."""
    router = APIRouter()
    worker, writes = ctx.worker, ctx.writes

    @router.get("/connectors/{name}/tasks")
    async def get_tasks(name: str, request: Request) -> Any:
        """Answered by the leader, as in Apache Kafka Connect: it has read every committed task config."""
        try:
            await run_in_threadpool(writes.require_leader)
        except NotLeaderError as exc:
            return await ctx.forward_or_raise(request, exc, b"")
        snap = worker.snapshot()
        if not snap.contains(name):
            raise NotFoundError(f"Connector {name} not found")
        return [
            {"id": {"connector": name, "task": i}, "config": dict(c)}
            for i, c in enumerate(snap.task_configs(name))
        ]

    @router.get("/connectors/{name}/tasks/{task}/status")
    def get_task_status(name: str, task: str) -> dict[str, Any]:
        number = task_number(task)  # a non-integer is Java's 404, not a validation 400
        snap = worker.snapshot()
        if not snap.contains(name) or number >= len(snap.task_configs(name)) or number < 0:
            raise NotFoundError(f"No status found for task {name}-{number}")
        ts = worker.status_state().task_status(TaskId(name, number))
        return {"id": number, **(ctx.status_entry(ts) if ts else {"state": "UNASSIGNED", "worker_id": ""})}

    @router.post("/connectors/{name}/tasks", include_in_schema=False)
    async def put_task_configs(name: str, request: Request) -> Response:
        """Internal: a connector's owner hands the leader its task configs (signed under sessioned)."""
        raw = await request.body()
        body = await ctx.json_body(request)
        if not isinstance(body, list):
            raise BadRequestError("Task configs must be a JSON array of objects")
        configs = [string_map(c, "task config") for c in body]
        writes.verify(raw, dict(request.headers))
        try:
            await run_in_threadpool(writes.write_task_configs, name, configs)
        except NotLeaderError as exc:
            return await ctx.forward_or_raise(request, exc, raw)
        return Response(status_code=204)

    @router.put("/connectors/{name}/fence", include_in_schema=False)
    async def fence_zombies(name: str, request: Request) -> Response:
        """Internal (KIP-618): a worker about to start an exactly-once source task asks the leader to fence
        the connector's previous task generation (signed under sessioned); 204 once it is fenced."""
        raw = await request.body()
        writes.verify(raw, dict(request.headers))
        try:
            await run_in_threadpool(writes.fence_zombies, name)
        except NotLeaderError as exc:
            return await ctx.forward_or_raise(request, exc, raw)
        return Response(status_code=204)

    return router
