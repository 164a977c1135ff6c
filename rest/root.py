"""``GET /`` (version and cluster id) and ``GET /health`` (KIP-1017): what probes and clients ask first.

Both are ``async`` and read only plain values of the worker, so they run on the event loop and never
wait for one of the threads that blocking handlers share; ``limits.ConcurrencyLimit`` never counts them
either. A probe must learn that the worker is alive even while writes pile up waiting on Kafka.
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import JSONResponse

from kconnect.rest.context import RestContext
from kconnect.runtime import __version__


def root_router(ctx: RestContext) -> APIRouter:
    """``/health`` and ``/`` of ``ctx``'s worker."""
    router = APIRouter()
    worker = ctx.worker

    @router.get("/health")
    async def health() -> JSONResponse:
        status, body = worker.health()
        return JSONResponse(status_code=status, content=body)

    @router.get("/")
    async def root() -> dict[str, str]:
        return {"version": __version__, "commit": "kconnect", "kafka_cluster_id": worker.kafka_cluster_id}

    return router
