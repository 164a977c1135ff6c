"""The REST API, shaped as Apache Kafka Connect's: same paths, JSON bodies, status codes and errors.

Handlers are thin: they parse, call the worker, and shape the answer. Writes that only the leader may
do are forwarded to the leader, as Apache Kafka Connect's ``completeOrForwardRequest`` does; a request
already forwarded once (``forward=false``) is not forwarded again, so two workers with different views
of the leader cannot bounce a request between them forever.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import httpx
from fastapi import FastAPI, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException

from kconnect.rest import group as group_routes
from kconnect.rest.admin import admin_router
from kconnect.rest.bodies import parse_json
from kconnect.rest.connectors import operations_router, task_number
from kconnect.rest.guards import RequestGuard
from kconnect.rest.limits import BodyDeadline, BodyLimit, ConcurrencyLimit
from kconnect.rest.openapi import install_openapi
from kconnect.rest.plugins import plugins_router
from kconnect.rest.server import client_verify
from kconnect.runtime import __version__
from kconnect.runtime.errors import (
    BadRequestError,
    ConnectError,
    NotFoundError,
    NotLeaderError,
    RebalanceNeededError,
)
from kconnect.runtime.group.protocol import ConnectAssignment, ProtocolName, WorkerState
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.view import WorkerView, member_holds
from kconnect.runtime.shell.worker import Worker
from kconnect.runtime.storage import wire
from kconnect.runtime.storage.config_log import INT32_MAX, TargetState

#: How long a request forwarded to the leader may take before this worker answers with an error.
FORWARD_TIMEOUT_S = 90.0
#: The protocol name that goes with a member's metadata version, for ``GET /workers``.
PROTOCOL_BY_VERSION: Mapping[int, ProtocolName] = MappingProxyType(
    {name.version: name for name in ProtocolName}
)


def error(status: int, message: str) -> JSONResponse:
    """Apache Kafka Connect's error body (``error_code`` and ``message``), which its clients parse."""
    return JSONResponse(status_code=status, content={"error_code": status, "message": message})


def create_app(worker: Worker) -> FastAPI:
    """The REST application of one worker: every route of Apache Kafka Connect's API, plus kconnect's.

    Routes read the worker through read-only values (``worker.snapshot()``, ``worker.status_state()``,
    ``worker.view()``) and write through ``worker.writes``, never through the worker's lock or herder.
    """
    writes = worker.writes
    app = FastAPI(title="kconnect", version=__version__, docs_url="/docs", openapi_url="/openapi.json")
    # Requests to other workers (forwarding to the leader, task configs) trust what this worker trusts.
    verify = client_verify(worker.config.passthrough)

    def forward_http(method: str, leader_url: str, path: str, body: Any, headers: dict[str, str]) -> None:
        resp = httpx.request(
            method,
            leader_url.rstrip("/") + path,
            content=body if isinstance(body, bytes) else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **headers},
            params={"forward": "false"},
            timeout=FORWARD_TIMEOUT_S,
            verify=verify,
        )
        if resp.status_code >= 400:
            raise ConnectError(f"leader answered {resp.status_code}: {resp.text}")

    worker.set_forwarder(forward_http)

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

    async def json_body(request: Request) -> Any:
        raw = await request.body()
        if not raw.strip():
            raise BadRequestError("Request body is empty; a JSON document was expected")
        return parse_json(raw)

    def string_map(value: Any, what: str) -> dict[str, str]:
        if not isinstance(value, dict):
            raise BadRequestError(f"{what} must be a JSON object of string keys and values")
        out: dict[str, str] = {}
        for k, v in value.items():
            if v is None or isinstance(v, dict | list):
                raise BadRequestError(f"{what}: value of '{k}' must be a string, number or boolean")
            out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
        return out

    async def forward_or_raise(request: Request, exc: NotLeaderError, body: bytes | None = None) -> Response:
        # Java's rule: a user's request (no ``forward``) may be forwarded twice, e.g. a follower to the
        # leader (forward=true), then the leader to a task's owner (forward=false); never a third time.
        forward = request.query_params.get("forward")
        if forward == "false":
            raise RebalanceNeededError(
                "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"
            )
        async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT_S, verify=verify) as client:
            resp = await client.request(
                request.method,
                exc.leader_url.rstrip("/") + request.url.path,
                params={**dict(request.query_params), "forward": "true" if forward is None else "false"},
                content=body if body is not None else await request.body(),
                # The leader checks the caller's credentials too (basic auth), as Java forwards them.
                headers={
                    "Content-Type": "application/json",
                    **({"Authorization": auth} if (auth := request.headers.get("authorization")) else {}),
                },
            )
        return Response(content=resp.content, status_code=resp.status_code, media_type="application/json")

    # ------------------------------------------------------------------------------------- shapes

    def connector_info(name: str) -> dict[str, Any]:
        snap = worker.snapshot()
        if not snap.contains(name):
            raise NotFoundError(f"Connector {name} not found")
        config = {k: v for k, v in (snap.connector_config(name) or {}).items() if v is not None}
        return {
            "name": name,
            "config": config,
            "tasks": [{"connector": t.connector, "task": t.task} for t in snap.tasks(name)],
            "type": plugin_type(config),
        }

    def plugin_type(config: Mapping[str, str | None] | None) -> str:
        try:
            return str(worker.registry.find((config or {}).get("connector.class") or "").type)
        except Exception:
            return "unknown"

    def status_entry(entry: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"state": entry.state, "worker_id": entry.worker_id}
        if entry.trace:
            out["trace"] = entry.trace
        # The plugin version running (KIP-891, Kafka 4.1): always written, null when the worker did not
        # say (a RESTARTING record, a worker before 4.1), as Apache Kafka 4.x writes it; only the
        # placeholder "undefined" is left out, as Java's NoVersionFilter does.
        if entry.version != "undefined":
            out["version"] = entry.version or None
        return out

    def connector_status(name: str) -> dict[str, Any]:
        snap = worker.snapshot()
        if not snap.contains(name):
            raise NotFoundError(f"No status found for connector {name}")
        states = worker.status_state()
        conn = states.connector_status(name)
        tasks = []
        for t in snap.tasks(name):
            ts = states.task_status(t)
            entry = {"id": t.task, **(status_entry(ts) if ts else {"state": "UNASSIGNED", "worker_id": ""})}
            tasks.append(entry)
        return {
            "name": name,
            "connector": status_entry(conn) if conn else {"state": "UNASSIGNED", "worker_id": ""},
            "tasks": tasks,
            "type": plugin_type(snap.connector_config(name)),
        }

    # ------------------------------------------------------------------------------------- routes

    @app.middleware("http")
    async def starting_up(request: Request, call_next: Any) -> Response:
        # Until the worker has joined and read its config, only liveness-style endpoints answer.
        if not worker.started.is_set() and request.url.path not in ("/", "/health", "/openapi.json", "/docs"):
            return error(503, "Request cannot be completed because the worker is still starting up")
        response: Response = await call_next(request)
        return response

    app.include_router(group_routes.router(worker))
    # Outermost last: the browser checks refuse first, then the concurrency bound counts what is left.
    app.add_middleware(BodyLimit)
    app.add_middleware(BodyDeadline, timeout_s=worker.config.rest_request_timeout_ms / 1000)
    app.add_middleware(ConcurrencyLimit, max_requests=worker.config.rest_max_concurrent_requests)
    app.add_middleware(RequestGuard, config=worker.config)

    # async: answered on the event loop, never waiting for one of the threads blocking handlers hold.
    @app.get("/health")
    async def health() -> JSONResponse:
        status, body = worker.health()
        return JSONResponse(status_code=status, content=body)

    @app.get("/")
    async def root() -> dict[str, str]:
        return {"version": __version__, "commit": "kconnect", "kafka_cluster_id": worker.kafka_cluster_id}

    @app.get("/connectors")
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

    @app.post("/connectors", status_code=201)
    async def create_connector(request: Request) -> Response:
        raw = await request.body()
        body = await json_body(request)
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
        try:
            await run_in_threadpool(
                writes.put_connector_config, name, config, allow_replace=False, initial_state=target
            )
        except NotLeaderError as exc:
            return await forward_or_raise(request, exc, raw)
        return JSONResponse(
            status_code=201,
            content=connector_info(name),
            headers={"Location": str(request.base_url).rstrip("/") + f"/connectors/{name}"},
        )

    @app.get("/connectors/{name}")
    def get_connector(name: str) -> dict[str, Any]:
        return connector_info(name)

    @app.get("/connectors/{name}/config")
    def get_config(name: str) -> dict[str, str]:
        return dict(connector_info(name)["config"])

    @app.put("/connectors/{name}/config")
    async def put_config(name: str, request: Request) -> Response:
        raw = await request.body()
        config = string_map(await json_body(request), "Connector config")
        if "name" in config and config["name"] != name:
            raise BadRequestError(
                f"Connector name configuration ({config['name']}) doesn't match connector name "
                f"in the URL ({name})"
            )
        try:
            created = await run_in_threadpool(writes.put_connector_config, name, config, allow_replace=True)
        except NotLeaderError as exc:
            return await forward_or_raise(request, exc, raw)
        return JSONResponse(status_code=201 if created else 200, content=connector_info(name))

    @app.get("/connectors/{name}/status")
    def get_status(name: str) -> dict[str, Any]:
        return connector_status(name)

    @app.get("/connectors/{name}/tasks")
    async def get_tasks(name: str, request: Request) -> Any:
        """Answered by the leader, as in Apache Kafka Connect: it has read every committed task config."""
        try:
            await run_in_threadpool(writes.require_leader)
        except NotLeaderError as exc:
            return await forward_or_raise(request, exc, b"")
        snap = worker.snapshot()
        if not snap.contains(name):
            raise NotFoundError(f"Connector {name} not found")
        return [
            {"id": {"connector": name, "task": i}, "config": dict(c)}
            for i, c in enumerate(snap.task_configs(name))
        ]

    @app.get("/connectors/{name}/tasks/{task}/status")
    def get_task_status(name: str, task: str) -> dict[str, Any]:
        number = task_number(task)  # a non-integer is Java's 404, not a validation 400
        snap = worker.snapshot()
        if not snap.contains(name) or number >= len(snap.task_configs(name)) or number < 0:
            raise NotFoundError(f"No status found for task {name}-{number}")
        ts = worker.status_state().task_status(TaskId(name, number))
        return {"id": number, **(status_entry(ts) if ts else {"state": "UNASSIGNED", "worker_id": ""})}

    @app.post("/connectors/{name}/tasks", include_in_schema=False)
    async def put_task_configs(name: str, request: Request) -> Response:
        """Internal: a connector's owner hands the leader its task configs (signed under sessioned)."""
        raw = await request.body()
        body = await json_body(request)
        if not isinstance(body, list):
            raise BadRequestError("Task configs must be a JSON array of objects")
        configs = [string_map(c, "task config") for c in body]
        writes.verify(raw, dict(request.headers))
        try:
            await run_in_threadpool(writes.write_task_configs, name, configs)
        except NotLeaderError as exc:
            return await forward_or_raise(request, exc, raw)
        return Response(status_code=204)

    @app.put("/connectors/{name}/fence", include_in_schema=False)
    async def fence_zombies(name: str, request: Request) -> Response:
        """Internal (KIP-618): a worker about to start an exactly-once source task asks the leader to fence
        the connector's previous task generation (signed under sessioned); 204 once it is fenced."""
        raw = await request.body()
        writes.verify(raw, dict(request.headers))
        try:
            await run_in_threadpool(writes.fence_zombies, name)
        except NotLeaderError as exc:
            return await forward_or_raise(request, exc, raw)
        return Response(status_code=204)

    @app.delete("/connectors/{name}", status_code=204)
    async def delete_connector(name: str, request: Request) -> Response:
        try:
            await run_in_threadpool(writes.delete_connector, name)
        except NotLeaderError as exc:
            return await forward_or_raise(request, exc, b"")
        return Response(status_code=204)

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

    def worker_id_of(state: WorkerState | None) -> str | None:
        if state is None:
            return None
        if state.worker_id:
            return state.worker_id
        # Members without v3 metadata (Java, or sessioned kconnect workers): the advertised host:port.
        return state.url.split("://", 1)[-1].rstrip("/")

    def known_worker_ids() -> set[str]:
        view = worker.view().leader_view
        ids = {worker.worker_id, *worker.snapshot().static_overrides}
        if view is not None:
            ids |= {i for _v, st in view.members.values() if (i := worker_id_of(st))}
        return ids

    def static_body(body: Any) -> tuple[tuple[str, ...], tuple[str, ...]]:
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
            if task.task > INT32_MAX:
                raise BadRequestError(f"Invalid task id '{text}': task numbers are at most {INT32_MAX}")
            names.append(task.connector)
        # The worker's group metadata carries its static assignment as Kafka strings and INT32s: what they
        # cannot hold, accepted here, would fail every rebalance of the worker it names.
        for name in names:
            try:
                wire.string(name, "a static connector name")
            except wire.WireError as exc:
                raise BadRequestError(f"Invalid static assignment: {exc}") from exc
        return out[0], out[1]

    async def static_request(worker_id: str, request: Request) -> Response:
        """Static-assignment overrides live in the config topic: the leader reads and writes them."""
        raw = await request.body()
        try:
            await run_in_threadpool(writes.require_leader)
        except NotLeaderError as exc:
            return await forward_or_raise(request, exc, raw)
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
        connectors, tasks = static_body(await json_body(request))
        await run_in_threadpool(writes.put_static_assignment, worker_id, connectors, tasks)
        return JSONResponse({"connectors": list(connectors), "tasks": list(tasks)})

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

    @app.get("/workers/{worker_id}/static-assignment")
    async def get_static(worker_id: str, request: Request) -> Response:
        return await static_request(worker_id, request)

    @app.put("/workers/{worker_id}/static-assignment")
    async def put_static(worker_id: str, request: Request) -> Response:
        return await static_request(worker_id, request)

    @app.delete("/workers/{worker_id}/static-assignment")
    async def delete_static(worker_id: str, request: Request) -> Response:
        return await static_request(worker_id, request)

    def this_worker(me: WorkerView) -> dict[str, Any]:
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

    @app.get("/workers")
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
                async with httpx.AsyncClient(timeout=10, verify=verify) as client:
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

    app.include_router(plugins_router(worker))
    app.include_router(admin_router(worker))
    app.include_router(
        operations_router(worker, forward_or_raise, json_body, connector_info, connector_status)
    )
    install_openapi(app)  # last: it describes every route included above
    return app
