"""Property-based fuzzing of the REST API from its own OpenAPI description (schemathesis).

One real worker on the test broker; schemathesis generates requests for every operation the OpenAPI
document lists (valid and invalid bodies, path and query parameters) and checks that the worker never
answers 5xx, and that every 4xx carries Apache Kafka Connect's error JSON. Malformed JSON, oversized
bodies and unknown paths are checked explicitly below.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode

from kconnect.runtime.cli.broker import EmbeddedBroker
from tests.support.cluster import WorkerProcess, stable_view, start_cluster, wait_until

pytestmark = pytest.mark.integration

#: Connectors the fuzzer may create are FileStream sinks on a topic of their own; nothing runs them.
EXAMPLES = 15


@schemathesis.check
def connect_error_json(ctx: Any, response: Any, case: Any) -> bool | None:
    """A 4xx answer is ``{"error_code": N, "message": "..."}`` with N the status code."""
    if 400 <= response.status_code < 500 and response.status_code != 405:
        body = response.json()
        assert isinstance(body, dict), body
        assert body.get("error_code") == response.status_code, body
        assert isinstance(body.get("message"), str), body
    return None


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, broker: EmbeddedBroker) -> Iterator[WorkerProcess]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    workers = start_cluster(tmp, broker.bootstrap, 1)
    try:
        wait_until(stable_view(workers, 1), 90, "the worker in its group")
        yield workers[0]
    finally:
        workers[0].stop()


def test_no_server_error_and_connect_error_json(worker: WorkerProcess) -> None:
    """Every operation, with valid (positive) and invalid (negative) generated requests.

    Driven through schemathesis' Python API and hypothesis directly rather than its pytest plugin, which
    does not work with pytest 9.
    """
    schema = schemathesis.openapi.from_url(worker.url + "/openapi.json")
    failures: list[str] = []
    operations = 0
    for result in schema.get_all_operations():
        operation = result.ok()
        operations += 1
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @settings(
                max_examples=EXAMPLES,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                derandomize=True,
                database=None,
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def call(case: Any) -> None:
                case.call_and_validate(checks=[not_a_server_error, connect_error_json], timeout=30)

            try:
                call()
            except Unsatisfiable:
                continue  # no invalid request exists for it (e.g. only free-form string path parameters)
            except Exception as exc:  # a failure of this operation; the others still run
                failures.append(f"{operation.label} [{mode.value}]: {exc}")
    assert operations >= 20, operations
    assert not failures, "\n\n".join(failures)


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/connectors", b"{not json"),
        ("POST", "/connectors", b"[1, 2, 3]"),
        ("POST", "/connectors", b'{"name": 7, "config": "x"}'),
        ("PUT", "/connectors/fuzz/config", b'"just a string"'),
        ("PUT", "/connectors/fuzz/config", b"\xff\xfe\x00garbage"),
        ("POST", "/connectors", b""),
    ],
)
def test_malformed_bodies_get_400_with_the_error_json(
    worker: WorkerProcess, method: str, path: str, body: bytes
) -> None:
    resp = worker.request(method, path, content=body, headers={"Content-Type": "application/json"})
    assert 400 <= resp.status_code < 500, (resp.status_code, resp.text)
    assert resp.json()["error_code"] == resp.status_code


def test_oversized_body_is_refused_with_413(worker: WorkerProcess) -> None:
    big = b'{"name": "big", "config": {"x": "' + b"a" * (17 * 1024 * 1024) + b'"}}'
    resp = worker.request("POST", "/connectors", content=big, headers={"Content-Type": "application/json"})
    assert resp.status_code == 413, resp.status_code
    assert resp.json()["error_code"] == 413


def test_unknown_paths_get_404_with_the_error_json(worker: WorkerProcess) -> None:
    for path in ("/nope", "/connectors/x/y/z", "/connector-plugins/a/b/c/d"):
        resp = worker.get(path)
        assert resp.status_code == 404, (path, resp.status_code)
        assert resp.json() == {"error_code": 404, "message": resp.json()["message"]}
