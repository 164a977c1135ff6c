"""``GET /group`` (the group records) and ``GET /metrics`` (Prometheus).

Both read what this worker already holds: every worker consumes the group-records topic, so any worker
answers ``GET /group`` without asking the leader.
"""

from __future__ import annotations

import time
from typing import Any

from fastapi import APIRouter
from fastapi.responses import PlainTextResponse

from kconnect.runtime.errors import NotFoundError
from kconnect.runtime.shell import metrics
from kconnect.runtime.shell.view import describe_group
from kconnect.runtime.shell.worker import Worker


def router(worker: Worker) -> APIRouter:
    """``/group`` and ``/metrics`` bound to ``worker``: both answer from what this worker already holds (its
    group records and its figures), never from the leader or another worker."""
    api = APIRouter()

    @api.get("/group")
    def group() -> dict[str, Any]:
        """Epochs, members with their metadata, target and current assignments, and any delay running."""
        state = worker.group_state()
        if state is None:
            raise NotFoundError(
                f"No group records for group '{worker.config.group_id}' yet: they are written by the "
                "leader once it has assigned the first generation"
            )
        return describe_group(state, now_ms=int(time.time() * 1000))

    @api.get("/metrics", response_class=PlainTextResponse, include_in_schema=False)
    def prometheus() -> PlainTextResponse:
        """Worker, rebalance, connector and task metrics under Apache Kafka Connect's names."""
        text = metrics.render(metrics.worker_families(worker.figures()))
        return PlainTextResponse(text, media_type=metrics.CONTENT_TYPE)

    return api
