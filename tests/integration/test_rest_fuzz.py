"""Property-based fuzzing of the REST API from its own OpenAPI description (schemathesis).

One real worker on the test broker; schemathesis generates requests for every operation the OpenAPI
document lists (valid and invalid bodies, path and query parameters), first operation by operation, then
as stateful scenarios that follow the document's links (create a connector, then act on it), and checks
that the worker never answers 5xx and that every 4xx carries Apache Kafka Connect's error JSON. The
status codes seen show that every operation's logic was reached, not only its 404. Malformed JSON,
oversized bodies and unknown paths are checked explicitly below.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis.errors import Flaky, Unsatisfiable
from schemathesis.checks import not_a_server_error
from schemathesis.engine.errors import is_inconsistent_replay
from schemathesis.generation import GenerationMode
from schemathesis.generation.stateful import run_state_machine_as_test

from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, start_cluster, wait_until

pytestmark = pytest.mark.integration

#: Connectors the fuzzer creates are the document's example, a FileStream sink on a topic of its own that
#: writes to stdout, or such a sink under a generated name (PUT .../config with the example config).
EXAMPLES = 15
#: Stateful scenarios, each up to STEPS requests that follow the links from their first answer.
SCENARIOS = 150
STEPS = 8
#: At most this many runs of the state machine (see below why more than one).
SUITES = 10
#: Operations that may answer only 404 on this one-worker cluster, with the reason. None today: the
#: document's examples and links lead every operation to something that exists.
ONLY_404: dict[str, str] = {}

#: Status codes per operation label (``GET /connectors/{name}``).
Statuses = defaultdict[str, Counter[int]]


@dataclass
class Run:
    """What a fuzzing run saw: the status codes per operation, and the checks that failed."""

    statuses: Statuses = field(default_factory=lambda: defaultdict(Counter))
    failures: list[str] = field(default_factory=list)


@schemathesis.check
def connect_error_json(ctx: Any, response: Any, case: Any) -> bool | None:
    """A 4xx answer is ``{"error_code": N, "message": "..."}`` with N the status code."""
    if 400 <= response.status_code < 500 and response.status_code != 405:
        body = response.json()
        assert isinstance(body, dict), body
        assert body.get("error_code") == response.status_code, body
        assert isinstance(body.get("message"), str), body
    return None


CHECKS = [not_a_server_error, connect_error_json]


@pytest.fixture(scope="module")
def worker(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[WorkerProcess]:
    tmp: Path = tmp_path_factory.mktemp("fuzz")
    workers = start_cluster(tmp, broker.bootstrap, 1)
    try:
        wait_until(stable_view(workers, 1), 90, "the worker in its group")
        yield workers[0]
    finally:
        workers[0].stop()


@pytest.fixture(scope="module")
def per_operation(worker: WorkerProcess) -> Run:
    """Every operation: first with the document's examples (as schemathesis' examples phase sends them),
    then with valid (positive) and invalid (negative) generated requests.

    Driven through schemathesis' Python API and hypothesis directly rather than its pytest plugin, which
    does not work with pytest 9. The examples make ``POST /connectors`` create the example connector and
    the operations after it act on that connector (its name and task 0 are the path's examples); deletes
    run last, so that the operations before them find it.
    """
    schema = schemathesis.openapi.from_url(worker.url + "/openapi.json")
    run = Run()
    operations = [result.ok() for result in schema.get_all_operations()]
    for operation in sorted(operations, key=lambda op: op.method.lower() == "delete"):
        run.statuses[operation.label].update(())  # listed even if hypothesis sends it nothing
        passes = [("examples", strategy, 1) for strategy in operation.get_strategies_from_examples()]
        passes += [(m.value, operation.as_strategy(generation_mode=m), EXAMPLES) for m in GenerationMode]
        for name, strategy, examples in passes:

            @settings(
                max_examples=examples,
                deadline=None,
                suppress_health_check=list(HealthCheck),
                derandomize=True,
                database=None,
            )
            @given(case=strategy)
            def call(case: Any) -> None:
                response = case.call(timeout=30)
                run.statuses[case.operation.label][response.status_code] += 1
                case.validate_response(response, checks=CHECKS)

            try:
                call()
            except Unsatisfiable:
                continue  # no invalid request exists for it (e.g. only free-form string path parameters)
            except Exception as exc:  # a failure of this operation; the others still run
                run.failures.append(f"{operation.label} [{name}]: {exc}")
    assert len(operations) >= 20, len(operations)
    return run


def test_no_server_error_and_connect_error_json(per_operation: Run) -> None:
    assert not per_operation.failures, "\n\n".join(per_operation.failures)
    assert not any(code >= 500 for seen in per_operation.statuses.values() for code in seen)


def test_links_lead_the_fuzzer_to_every_operations_logic(worker: WorkerProcess, per_operation: Run) -> None:
    """Stateful scenarios that follow the document's links: POST /connectors (or the list of connectors,
    plugins, workers) first, then operations on what the answer names, with the same checks.

    Then, across both runs, every operation got an answer other than 404: a fuzzer that only ever hits
    "connector not found" tests nothing behind it.
    """
    schema = schemathesis.openapi.from_url(worker.url + "/openapi.json")
    run = Run()
    scenarios = 0

    class Workflow(schema.as_state_machine()):  # type: ignore[misc]
        def get_call_kwargs(self, case: Any) -> dict[str, Any]:
            return {"timeout": 30}

        def after_call(self, response: Any, case: Any) -> None:
            super().after_call(response, case)
            run.statuses[case.operation.label][response.status_code] += 1

        def validate_response(
            self, response: Any, case: Any, additional_checks: Any = None, **kwargs: Any
        ) -> None:
            try:
                case.validate_response(
                    response, checks=CHECKS, transport_kwargs=kwargs or None, recorder=self.recorder
                )
            except Exception as exc:  # kept even if hypothesis' replay of the scenario goes another way
                run.failures.append(f"stateful {case.operation.label}: {exc}")
                raise

        def teardown(self) -> None:
            nonlocal scenarios
            scenarios += 1
            super().teardown()

    def seen() -> dict[str, set[int]]:
        """Status codes per operation across both runs."""
        return {
            label: set(per_operation.statuses[label]) | set(run.statuses[label])
            for label in per_operation.statuses
        }

    def only_404() -> list[str]:
        return sorted(label for label, codes in seen().items() if not codes - {404})

    # The worker's state changes under the scenarios (a create answers 409 the second time), so hypothesis
    # may find a scenario drawing differently from an earlier one with the same start, and stops the run
    # (Flaky); schemathesis' own runner then starts another suite, and so does this, each with its own
    # order of first steps, until the scenarios are done. Suites go on past SCENARIOS (up to SUITES) while
    # an operation has only answered 404 unexplained: whether the links lead to, say, DELETE .../offsets
    # on a stopped connector depends on the order hypothesis draws steps in (one clean-clone run reached it
    # in none of 190 scenarios over two suites, the next in 6 of 150 over four).
    for suite in range(SUITES):
        if scenarios >= SCENARIOS and set(only_404()) <= set(ONLY_404):
            break
        Workflow.rule_order_seed = suite
        try:
            run_state_machine_as_test(
                Workflow,
                settings=settings(
                    max_examples=max(SCENARIOS - scenarios, SCENARIOS // 5),
                    stateful_step_count=STEPS,
                    phases=[Phase.generate],  # no shrinking: a failure's steps are in its message already
                    deadline=None,
                    suppress_health_check=list(HealthCheck),
                    derandomize=True,
                    database=None,
                ),
            )
        except Exception as exc:
            if not (isinstance(exc, Flaky) or is_inconsistent_replay(exc)):
                run.failures.append(f"stateful: {exc}")
                break
    print(f"\n{scenarios} stateful scenarios in {suite + 1} suites")

    labels = sorted(per_operation.statuses)
    width = max(len(label) for label in labels)
    print(f"{'operation'.ljust(width)}  {'per operation'.ljust(40)}  stateful (status: count)")
    for label in labels:
        columns = [
            " ".join(f"{code}:{n}" for code, n in sorted(run_.statuses[label].items()))
            for run_ in (per_operation, run)
        ]
        print(f"{label.ljust(width)}  {columns[0].ljust(40)}  {columns[1]}")
    codes_seen, answered_404 = seen(), only_404()
    print(f"{len(labels) - len(answered_404)} of {len(labels)} operations answered something other than 404")

    assert not run.failures, "\n\n".join(run.failures)
    assert not any(code >= 500 for codes in codes_seen.values() for code in codes), codes_seen
    unexplained = [label for label in answered_404 if label not in ONLY_404]
    assert not unexplained, f"only 404 for {unexplained}"
    assert set(ONLY_404) <= set(labels), "an exception names an operation the document no longer has"


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("POST", "/connectors", b"{not json"),
        ("POST", "/connectors", b"[1, 2, 3]"),
        ("POST", "/connectors", b'{"name": 7, "config": "x"}'),
        ("PUT", "/connectors/fuzz/config", b'"just a string"'),
        ("PUT", "/connectors/fuzz/config", b"\xff\xfe\x00garbage"),
        ("POST", "/connectors", b""),
        # Valid JSON, but a lone surrogate is no Unicode text: it answered 500 where the name or config
        # was next encoded (found by hand while reading the fuzzer's findings; hypothesis draws none).
        ("POST", "/connectors", b'{"name": "\\ud800", "config": {"connector.class": "FileStreamSink"}}'),
        ("PUT", "/connectors/fuzz/config", b'{"connector.class": "\\udfff"}'),
        ("PATCH", "/connectors/fuzz/config", b'{"\\ud800x": "y"}'),
    ],
)
def test_malformed_bodies_get_400_with_the_error_json(
    worker: WorkerProcess, method: str, path: str, body: bytes
) -> None:
    resp = worker.request(method, path, content=body, headers={"Content-Type": "application/json"})
    assert 400 <= resp.status_code < 500, (resp.status_code, resp.text)
    assert resp.json()["error_code"] == resp.status_code


@pytest.mark.parametrize(
    "assignment",
    [
        {"tasks": ["orders-2147483648"]},
        {"connectors": ["x" * 40_000]},
        {"tasks": ["x" * 40_000 + "-0"]},
        {"connectors": ["\ud800"]},
    ],
)
def test_a_static_assignment_the_group_metadata_cannot_carry_is_refused(
    worker: WorkerProcess, assignment: dict[str, list[str]]
) -> None:
    """Found by the fuzzer: such an override was stored (200), and the worker's every rebalance then failed
    encoding its join metadata, so no connector of it ever got its tasks."""
    worker_id = worker.get("/workers").json()["this_worker"]["id"]
    body = json.dumps(assignment).encode()  # ASCII, escapes included: the lone surrogate goes as \ud800
    resp = worker.request(
        "PUT",
        f"/workers/{worker_id}/static-assignment",
        content=body,
        headers={"Content-Type": "application/json"},
    )
    assert resp.status_code == 400, (resp.status_code, resp.text[:200])
    assert resp.json()["error_code"] == 400
    largest = worker.request(
        "PUT", f"/workers/{worker_id}/static-assignment", json={"tasks": ["orders-2147483647"]}
    )
    assert largest.status_code == 200, largest.text
    assert worker.request("DELETE", f"/workers/{worker_id}/static-assignment").status_code == 204


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
