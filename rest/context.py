"""What every resource's routes share: the worker, its body parsing, forwarding to the leader, and the shapes
of a connector's info and status.

Each resource module (``connectors.py``, ``tasks.py``, ``workers.py``, ``root.py``, ...) builds its
router from one :class:`RestContext`, so that a route's own rules live in the module named for its
resource while the rules all routes obey (how a body is read, how a request reaches the leader, what
a connector looks like in an answer) are written once, here.
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from typing import Any

import httpx
from fastapi import Request
from fastapi.responses import Response

from kconnect.rest.bodies import parse_json
from kconnect.rest.server import client_verify
from kconnect.runtime.errors import (
    BadRequestError,
    ConnectError,
    NotFoundError,
    NotLeaderError,
    RebalanceNeededError,
)
from kconnect.runtime.shell.worker import Worker

__all__ = ["FORWARD_TIMEOUT_S", "RestContext", "string_map"]

#: How long a request forwarded to the leader may take before this worker answers with an error.
FORWARD_TIMEOUT_S = 90.0


def string_map(value: Any, what: str) -> dict[str, str]:
    """A JSON object of scalars as Connect's string map (booleans as Java writes them: lower case)."""
    if not isinstance(value, dict):
        raise BadRequestError(f"{what} must be a JSON object of string keys and values")
    out: dict[str, str] = {}
    for k, v in value.items():
        if v is None or isinstance(v, dict | list):
            raise BadRequestError(f"{what}: value of '{k}' must be a string, number or boolean")
        out[str(k)] = str(v).lower() if isinstance(v, bool) else str(v)
    return out


class RestContext:
    """One worker as its REST routes see it: read through its read-only values (``worker.snapshot()``,
    ``worker.status_state()``, ``worker.view()``), written through ``worker.writes``, never through the
    worker's lock or herder."""

    def __init__(self, worker: Worker) -> None:
        self.worker = worker
        self.writes = worker.writes
        #: Requests to other workers (forwarding to the leader, task configs) trust what this worker trusts.
        self.verify: ssl.SSLContext | bool = client_verify(worker.config.passthrough)
        worker.set_forwarder(self.forward_http)

    # ---------------------------------------------------------------------------------- forwarding

    def forward_http(
        self, method: str, leader_url: str, path: str, body: Any, headers: dict[str, str]
    ) -> None:
        """The worker's own requests to the leader (task configs, fencing), made from its threads."""
        resp = httpx.request(
            method,
            leader_url.rstrip("/") + path,
            content=body if isinstance(body, bytes) else json.dumps(body).encode(),
            headers={"Content-Type": "application/json", **headers},
            params={"forward": "false"},
            timeout=FORWARD_TIMEOUT_S,
            verify=self.verify,
        )
        if resp.status_code >= 400:
            raise ConnectError(f"leader answered {resp.status_code}: {resp.text}")

    async def forward_or_raise(
        self, request: Request, exc: NotLeaderError, body: bytes | None = None
    ) -> Response:
        """A user's request this worker may not answer, sent on to the leader (Apache Kafka Connect's
        ``completeOrForwardRequest``), whose answer is returned as is.

        Java's rule: a user's request (no ``forward``) may be forwarded twice, e.g. a follower to the
        leader (forward=true), then the leader to a task's owner (forward=false); never a third time, so
        two workers with different views of the leader cannot bounce a request between them forever.
        """
        forward = request.query_params.get("forward")
        if forward == "false":
            raise RebalanceNeededError(
                "Cannot complete request because of a conflicting operation (e.g. worker rebalance)"
            )
        async with httpx.AsyncClient(timeout=FORWARD_TIMEOUT_S, verify=self.verify) as client:
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

    # ---------------------------------------------------------------------------------- bodies

    @staticmethod
    async def json_body(request: Request) -> Any:
        """The request's JSON body; an empty or malformed one is a 400 (``bodies.parse_json``)."""
        raw = await request.body()
        if not raw.strip():
            raise BadRequestError("Request body is empty; a JSON document was expected")
        return parse_json(raw)

    # ---------------------------------------------------------------------------------- shapes

    def connector_info(self, name: str) -> dict[str, Any]:
        """Connect's ConnectorInfo: name, config, tasks and type."""
        snap = self.worker.snapshot()
        if not snap.contains(name):
            raise NotFoundError(f"Connector {name} not found")
        config = {k: v for k, v in (snap.connector_config(name) or {}).items() if v is not None}
        return {
            "name": name,
            "config": config,
            "tasks": [{"connector": t.connector, "task": t.task} for t in snap.tasks(name)],
            "type": self.plugin_type(config),
        }

    def plugin_type(self, config: Mapping[str, str | None] | None) -> str:
        """``source`` or ``sink`` for the connector class a config names; ``unknown`` for one this worker
        cannot find, as Java answers rather than failing the whole listing."""
        try:
            return str(self.worker.registry.find((config or {}).get("connector.class") or "").type)
        except Exception:
            return "unknown"

    @staticmethod
    def status_entry(entry: Any) -> dict[str, Any]:
        """One connector's or task's state, worker and trace, as Connect's status answers carry them."""
        out: dict[str, Any] = {"state": entry.state, "worker_id": entry.worker_id}
        if entry.trace:
            out["trace"] = entry.trace
        # The plugin version running (KIP-891, Kafka 4.1): always written, null when the worker did not
        # say (a RESTARTING record, a worker before 4.1), as Apache Kafka 4.x writes it; only the
        # placeholder "undefined" is left out, as Java's NoVersionFilter does.
        if entry.version != "undefined":
            out["version"] = entry.version or None
        # kconnect's self-healing, beside Java's fields: restarts made, and when the next is due (or null).
        auto = getattr(entry, "auto_restart", None)
        if auto is not None:
            out["auto_restart"] = {"attempts": auto.attempts, "next_attempt_ms": auto.next_attempt_ms}
        return out

    def connector_status(self, name: str) -> dict[str, Any]:
        """Connect's ConnectorStateInfo: the connector's state and each task's."""
        snap = self.worker.snapshot()
        if not snap.contains(name):
            raise NotFoundError(f"No status found for connector {name}")
        states = self.worker.status_state()
        conn = states.connector_status(name)
        tasks = []
        for t in snap.tasks(name):
            ts = states.task_status(t)
            entry = {
                "id": t.task,
                **(self.status_entry(ts) if ts else {"state": "UNASSIGNED", "worker_id": ""}),
            }
            tasks.append(entry)
        return {
            "name": name,
            "connector": self.status_entry(conn) if conn else {"state": "UNASSIGNED", "worker_id": ""},
            "tasks": tasks,
            "type": self.plugin_type(snap.connector_config(name)),
        }
