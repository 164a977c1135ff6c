"""A creation's answer lists the task configs known when its config was written: none.

Java answers ``POST /connectors`` (and a ``PUT .../config`` that creates) with the tasks of the config
state its write was read back into, before the connector has started; ours reads the snapshot after the
write, when a fast connector may already have committed task configs. The REST parity test saw that race
once in CI; here the snapshot holds tasks already, so the answer cannot depend on timing.
"""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from kconnect.rest.app import create_app
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot
from tests.unit.test_rest_security import HANG, _worker

CONFIG = {"connector.class": "FileStreamSink", "topics": "t", "name": "c"}


def _answers(existing: bool) -> tuple[httpx.Response, httpx.Response]:
    worker = _worker()
    started = ClusterConfigSnapshot(
        offset=3,
        connector_configs={"c": dict(CONFIG)},
        committed_task_counts={"c": 1},
        committed_task_configs={"c": ({"task.class": "x"},)},
    )
    worker.snapshot = lambda: started  # type: ignore[method-assign]
    worker.writes.require_leader = lambda **_kw: None  # type: ignore[method-assign]
    worker.put_connector_config = lambda *_a, **_kw: not existing  # type: ignore[method-assign]
    worker.writes.put_connector_config = worker.put_connector_config  # type: ignore[method-assign]

    async def ask() -> tuple[httpx.Response, httpx.Response]:
        transport = httpx.ASGITransport(create_app(worker))
        async with httpx.AsyncClient(transport=transport, base_url="http://kc:8083") as client:
            post = await client.post("/connectors", json={"name": "c", "config": CONFIG})
            put = await client.put("/connectors/c/config", json=CONFIG)
            return post, put

    out: Any = asyncio.run(asyncio.wait_for(ask(), HANG))
    return out  # type: ignore[no-any-return]


def test_a_creation_answers_with_no_tasks_even_when_they_are_already_written() -> None:
    post, put = _answers(existing=False)
    assert (post.status_code, post.json()["tasks"]) == (201, [])
    assert (put.status_code, put.json()["tasks"]) == (201, [])
    assert post.json()["config"] == CONFIG


def test_an_update_answers_with_the_tasks_it_knows() -> None:
    _, put = _answers(existing=True)
    assert (put.status_code, put.json()["tasks"]) == (200, [{"connector": "c", "task": 0}])
