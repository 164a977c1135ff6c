"""The group's workers: ``GET /workers`` and KIP-987's static-assignment overrides, all kconnect's own.

``GET /workers`` lists every member as the leader assigned it (others forward to the leader, and fall
back to the group coordinator's DescribeGroups when it cannot answer: a Java leader has no such
endpoint). ``GET/PUT/DELETE /workers/{worker_id}/static-assignment`` read and write the overrides, which
live in the config topic: the leader reads and writes them, and a body that the worker's group metadata
could not carry (Kafka strings, INT32 task numbers) is refused here rather than failing every rebalance.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import httpx
from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse, Response

from kconnect.rest.context import RestContext
from kconnect.runtime.errors import BadRequestError, NotFoundError, NotLeaderError, RebalanceNeededError
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.view import (
    MAX_TASK_NUMBER,
    ConnectAssignment,
    ProtocolName,
    WorkerState,
    WorkerView,
    member_holds,
    metadata_string_problem,
)

#: The protocol name that goes with a member's metadata version, for ``GET /workers``.
PROTOCOL_BY_VERSION: Mapping[int, ProtocolName] = MappingProxyType(
    {name.version: name for name in ProtocolName}
)


def worker_id_of(state: WorkerState | None) -> str | None:
    """A member's worker id: its v3 metadata's, else (Java, or sessioned kconnect workers) the advertised
    host:port, which is what identifies such a worker in Apache Kafka Connect."""
    if state is None:
        return None
    if state.worker_id:
        return state.worker_id
    return state.url.split("://", 1)[-1].rstrip("/")


def static_body(body: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A static assignment's connectors and tasks from a PUT body; 400 for anything the worker's group
    metadata could not carry."""
    if not isinstance(body, dict):
        raise BadRequestError(
            'Static assignment must be a JSON object: {"connectors": [...], "tasks": [...]}'
        )
    unknown = sorted(set(body) - {"connectors", "tasks"})
    if unknown:
        raise BadRequestError(f"Unknown field(s) in static assignment: {', '.join(unknown)}")
    out: list[tuple[str, ...]] = []
    for key in ("connectors", "tasks"):
        items = body.get(key, [])
        if not isinstance(items, list) or not all(isinstance(i, str) and i.strip() for i in items):
            raise BadRequestError(f"'{key}' must be a list of non-empty strings")
        out.append(tuple(dict.fromkeys(items)))
    names = list(out[0])
    for text in out[1]:
        try:
            task = TaskId.parse(text)
        except ValueError as exc:
            raise BadRequestError(f"Invalid task id '{text}': {exc}") from exc
        if task.task > MAX_TASK_NUMBER:
            raise BadRequestError(f"Invalid task id '{text}': task numbers are at most {MAX_TASK_NUMBER}")
        names.append(task.connector)
    # The worker's group metadata carries its static assignment as Kafka strings and INT32s: what they
    # cannot hold, accepted here, would fail every rebalance of the worker it names.
    for name in names:
        problem = metadata_string_problem(name, "a static connector name")
        if problem is not None:
            raise BadRequestError(f"Invalid static assignment: {problem}")
    return out[0], out[1]


def this_worker(me: WorkerView) -> dict[str, Any]:
    """The answering worker's own view: its assignment and rebalance figures."""
    return {
        "id": me.worker_id,
        "member_id": me.member_id,
        "url": me.url,
        "generation": me.generation,
        "protocol": me.protocol,
        "leader_url": me.leader_url,
        "rebalancing": me.rebalancing,
        "assignment": {
            "connectors": list(me.owned_connectors),
            "tasks": [str(t) for t in me.owned_tasks],
        },
        "rebalances_completed": me.rebalances_completed,
        "rebalance_time_ms_total": round(me.rebalance_time_ms_total, 1),
        "last_rebalance_ms": round(me.last_rebalance_ms, 1),
        "scheduled_delay_ms": me.scheduled_delay_ms,
        **me.executor_counters,
    }


def workers_router(ctx: RestContext) -> APIRouter:
    """``/workers`` and the static-assignment routes of ``ctx``'s worker."""
    router = APIRouter()
    worker, writes = ctx.worker, ctx.writes

    def member_entry(
        member_id: str,
        version: int | None,
        state: WorkerState | None,
        assignment: ConnectAssignment | None,
        leader_id: str,
    ) -> dict[str, Any]:
        owned_c, owned_t = member_holds(member_id, state, assignment, worker.group_state())
        worker_id = worker_id_of(state)
        overrides = worker.snapshot().static_overrides
        override = overrides.get(worker_id or "")
        static_c = list(state.static_connectors) if state else []
        static_t = [str(t) for t in state.static_tasks] if state else []
        if override is not None:
            # Reconciling groups apply an override without a JoinGroup round: it is what counts.
            static_c, static_t = list(override.connectors), list(override.tasks)
        return {
            "id": member_id,
            "worker_id": worker_id,
            "url": state.url if state else None,
            "leader": member_id == leader_id,
            "protocol": PROTOCOL_BY_VERSION.get(version) if version is not None else None,
            "metadata_version": version,
            "config_offset": state.config_offset if state else None,
            # Its static assignment: an override from the config topic, or what it joined with.
            "static_assignment": {"connectors": static_c, "tasks": static_t},
            "static_assignment_source": "override" if worker_id in overrides else "properties",
            "assignment": {"connectors": sorted(owned_c), "tasks": [str(t) for t in sorted(owned_t)]},
        }

    def known_worker_ids() -> set[str]:
        view = worker.view().leader_view
        ids = {worker.worker_id, *worker.snapshot().static_overrides}
        if view is not None:
            ids |= {i for _v, st in view.members.values() if (i := worker_id_of(st))}
        return ids

    def current_static(worker_id: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
        override = worker.snapshot().static_overrides.get(worker_id)
        if override is not None:
            return override.connectors, override.tasks
        if worker_id == worker.worker_id:
            c, t, _ = worker.leader.static_assignment()
            return c, t
        view = worker.view().leader_view
        for _v, st in view.members.values() if view else []:
            if worker_id_of(st) == worker_id:
                return st.static_connectors, tuple(str(t) for t in st.static_tasks)
        return (), ()

    async def static_request(worker_id: str, request: Request) -> Response:
        """Static-assignment overrides live in the config topic: the leader reads and writes them."""
        raw = await request.body()
        try:
            await run_in_threadpool(writes.require_leader)
        except NotLeaderError as exc:
            return await ctx.forward_or_raise(request, exc, raw)
        if worker_id not in known_worker_ids():
            raise NotFoundError(f"Unknown worker id {worker_id}")
        if request.method == "GET":
            connectors, tasks = current_static(worker_id)
            return JSONResponse({"connectors": list(connectors), "tasks": list(tasks)})
        if request.method == "DELETE":
            if worker_id not in worker.snapshot().static_overrides:
                raise NotFoundError(f"No static assignment override for worker {worker_id}")
            await run_in_threadpool(writes.delete_static_assignment, worker_id)
            return Response(status_code=204)
        connectors, tasks = static_body(await ctx.json_body(request))
        await run_in_threadpool(writes.put_static_assignment, worker_id, connectors, tasks)
        return JSONResponse({"connectors": list(connectors), "tasks": list(tasks)})

    @router.get("/workers/{worker_id}/static-assignment")
    async def get_static(worker_id: str, request: Request) -> Response:
        return await static_request(worker_id, request)

    @router.put("/workers/{worker_id}/static-assignment")
    async def put_static(worker_id: str, request: Request) -> Response:
        return await static_request(worker_id, request)

    @router.delete("/workers/{worker_id}/static-assignment")
    async def delete_static(worker_id: str, request: Request) -> Response:
        return await static_request(worker_id, request)

    @router.get("/workers")
    async def workers(request: Request) -> Any:
        """The group's members: the leader answers from the metadata it assigned from; others forward.

        A follower only knows its own assignment, and the group coordinator's DescribeGroups is the
        fallback when the leader cannot answer (a Java leader has no such endpoint).
        """
        now = worker.view()  # one consistent reading of this worker's state for the whole answer
        me = this_worker(now)
        view = now.leader_view
        if now.is_leader and view is not None and view.leader_id == now.member_id:
            members = [
                member_entry(mid, version, state, view.assignments.get(mid), view.leader_id)
                for mid, (version, state) in sorted(view.members.items())
            ]
            return {
                "group": worker.config.group_id,
                "generation": now.generation,
                "protocol": view.protocol,
                "leader": view.leader_id,
                "leader_url": now.leader_url,
                "source": "leader",
                "members": members,
                "this_worker": me,
            }
        if now.group_known and now.leader_url and request.query_params.get("forward") != "false":
            try:
                auth = request.headers.get("authorization")
                async with httpx.AsyncClient(timeout=10, verify=ctx.verify) as client:
                    resp = await client.get(
                        now.leader_url.rstrip("/") + "/workers",
                        params={"forward": "false"},
                        headers={"Authorization": auth} if auth else None,
                    )
                if resp.status_code == 200:
                    body = resp.json()
                    body["this_worker"] = me
                    return body
            except (httpx.HTTPError, ValueError):
                pass
        try:
            desc = await run_in_threadpool(worker.describe_group)
        except Exception as exc:
            raise RebalanceNeededError(f"The group's members are not known yet: {exc}") from exc
        return {
            "group": worker.config.group_id,
            "generation": now.generation,
            "protocol": desc.protocol or now.protocol,
            "leader": now.leader_id,
            "leader_url": now.leader_url,
            "source": "coordinator",
            # The coordinator's member list may be newer than this worker's generation (a member
            # just left); its group state says whether a rebalance is under way.
            "group_state": desc.state,
            "members": [
                member_entry(m.member_id, m.metadata_version, m.state, m.assignment, now.leader_id)
                for m in sorted(desc.members, key=lambda m: m.member_id)
            ],
            "this_worker": me,
        }

    return router
