"""The OpenAPI document describes every public endpoint with typed bodies and answers."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from kconnect.config.worker import WorkerConfig
from kconnect.rest import openapi
from kconnect.rest.app import create_app
from kconnect.rest.openapi import EXAMPLE_CONNECTOR, describe
from kconnect.runtime.plugins.catalog import PluginCatalog
from kconnect.runtime.shell.worker import Worker
from tests.support.cluster import worker_properties


def _config() -> WorkerConfig:
    return WorkerConfig.from_properties(worker_properties("127.0.0.1:1", "g", 8083))


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    worker = Worker(_config())
    schema: dict[str, Any] = create_app(worker).openapi()
    return json.loads(json.dumps(schema))  # what clients get: plain JSON


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        return ([node["$ref"]] if "$ref" in node else []) + [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


#: Writes that take no body in Apache Kafka Connect: their parameters are in the path and query.
BODILESS = {
    "/connectors/{name}/restart",
    "/connectors/{name}/tasks/{task}/restart",
    "/connectors/{name}/pause",
    "/connectors/{name}/resume",
    "/connectors/{name}/stop",
    "/connectors/{name}/topics/reset",
}


#: 202 Accepted with no answer body, as Java's pause, resume and topics reset.
ACCEPTED_WITHOUT_ANSWER = {
    "/connectors/{name}/pause",
    "/connectors/{name}/resume",
    "/connectors/{name}/topics/reset",
}


def test_every_operation_has_a_typed_success_answer_and_error_shape(document: dict[str, Any]) -> None:
    operations = [(m, p, op) for p, item in document["paths"].items() for m, op in item.items()]
    assert len(operations) >= 20
    for method, path, op in operations:
        codes = set(op["responses"])
        assert {"400", "404", "500"} <= codes, (method, path)
        success = [c for c in codes if c.startswith("2")]
        assert success, (method, path)
        for code in success:
            if code != "204" and not (code == "202" and path in ACCEPTED_WITHOUT_ANSWER):
                assert "schema" in op["responses"][code]["content"]["application/json"], (method, path, code)
        if method in ("put", "post", "patch") and path not in BODILESS:
            assert "schema" in op["requestBody"]["content"]["application/json"], (method, path)


def test_internal_endpoints_are_not_described(document: dict[str, Any]) -> None:
    assert "post" not in document["paths"].get("/connectors/{name}/tasks", {})


def test_every_reference_resolves_and_models_validate_javas_answers(document: dict[str, Any]) -> None:
    schemas = document["components"]["schemas"]
    for ref in _refs(document):
        assert ref.startswith("#/components/schemas/") and ref.rsplit("/", 1)[1] in schemas, ref

    def validate(instance: Any, name: str) -> None:
        jsonschema.validate(
            instance, {"$ref": f"#/components/schemas/{name}", "components": document["components"]}
        )

    # Bodies as the Java 3.9 worker answered them (tests/golden/reference_findings.md).
    validate(
        {"name": "src", "config": {"a": "b"}, "tasks": [{"connector": "src", "task": 0}], "type": "source"},
        "ConnectorInfo",
    )
    task = {"id": 0, "state": "FAILED", "worker_id": "w:1", "trace": "x"}
    status = {
        "name": "s",
        "connector": {"state": "RUNNING", "worker_id": "w:1"},
        "tasks": [task],
        "type": "sink",
    }
    validate(status, "ConnectorStateInfo")
    validate({"class": "org.x.Y", "type": "source", "version": "3.9.0"}, "PluginInfo")
    validate({"level": "WARN", "last_modified": 1795331770007}, "LoggerLevel")
    validate({"error_code": 404, "message": "Connector x not found"}, "ErrorMessage")
    with pytest.raises(jsonschema.ValidationError):
        validate({"level": "LOUD"}, "LoggerLevelRequest")
    with pytest.raises(jsonschema.ValidationError):
        validate({"name": "x"}, "CreateConnectorRequest")


def test_request_bodies_are_as_strict_as_the_api(document: dict[str, Any]) -> None:
    """A body the schema admits is one the API can accept: a config names its class, a name has a
    character other than whitespace and no control character (Java trims it first)."""

    def check(instance: Any, schema: dict[str, Any]) -> bool:
        try:
            jsonschema.validate(instance, {**schema, "components": document["components"]})
        except jsonschema.ValidationError:
            return False
        return True

    create = {"$ref": "#/components/schemas/CreateConnectorRequest"}
    config = {"connector.class": "FileStreamSource", "file": "/tmp/x"}
    assert check({"name": "src", "config": config}, create)
    assert check({"name": " a b ", "config": config}, create)  # trimmed to "a b"
    assert check({"name": "\u00e9t\u00e9/x", "config": config}, create)
    for name in ("", "   ", "a\u0001b", "a\u0085b", "\t"):
        assert not check({"name": name, "config": config}, create), repr(name)
    assert not check({"name": "src", "config": {"file": "/tmp/x"}}, create)
    assert not check({"name": "src", "config": {"connector.class": ""}}, create)
    paths = document["paths"]
    put = paths["/connectors/{name}/config"]["put"]["requestBody"]["content"]["application/json"]["schema"]
    assert check(config, put) and not check({"file": "/tmp/x"}, put)
    validate = paths["/connector-plugins/{plugin}/config/validate"]["put"]["requestBody"]["content"]
    schema = validate["application/json"]["schema"]
    assert check({**config, "batch.size": None}, schema) and not check({"batch.size": "1"}, schema)


def test_links_lead_from_a_named_connector_or_worker_to_the_operations_on_it(
    document: dict[str, Any],
) -> None:
    operation_ids = {
        op["operationId"]: (method, path)
        for path, item in document["paths"].items()
        for method, op in item.items()
    }
    created = document["paths"]["/connectors"]["post"]["responses"]["201"]["links"]
    targets = {operation_ids[link["operationId"]] for link in created.values()}
    named = {
        (m, p) for p, item in document["paths"].items() for m in item if p.startswith("/connectors/{name}")
    }
    assert targets == named and len(targets) >= 15
    for link in created.values():
        _method, path = operation_ids[link["operationId"]]
        # Every path parameter of the target is filled from the answer (a ConnectorInfo).
        wanted = {part.strip("{}") for part in path.split("/") if part.startswith("{")}
        assert set(link["parameters"]) == wanted, (path, link)
        assert link["parameters"]["name"] == "$response.body#/name"
    workers = document["paths"]["/workers"]["get"]["responses"]["200"]["links"]
    assert {operation_ids[link["operationId"]][1] for link in workers.values()} == {
        "/workers/{worker_id}/static-assignment"
    }


def _body(document: dict[str, Any], method: str, path: str) -> dict[str, Any]:
    media: dict[str, Any] = document["paths"][path][method]["requestBody"]["content"]["application/json"]
    return media


def _admits(document: dict[str, Any], instance: Any, schema: dict[str, Any]) -> bool:
    try:
        jsonschema.validate(instance, {**schema, "components": document["components"]})
    except jsonschema.ValidationError:
        return False
    return True


def test_examples_name_this_workers_connector_plugins_and_a_config_the_api_accepts(
    document: dict[str, Any],
) -> None:
    """A fuzzer reading only the document can create a connector: ``connector.class`` lists the classes
    ``GET /connector-plugins`` answers, and the bodies that create or validate one have a FileStream sink
    example. Examples, not an enum: an alias the API accepts stays admitted."""
    listed = {p["class"] for p in PluginCatalog.of(Worker(_config()).registry).listing()}
    create = document["components"]["schemas"]["CreateConnectorRequest"]["properties"]["config"]
    put = _body(document, "put", "/connectors/{name}/config")["schema"]
    validate = _body(document, "put", "/connector-plugins/{plugin}/config/validate")["schema"]
    for config_schema in (create, put, validate):
        assert set(config_schema["properties"]["connector.class"]["examples"]) == listed
        assert "enum" not in config_schema["properties"]["connector.class"]
    assert _admits(document, {"connector.class": "FileStreamSink", "topics": "t"}, put)
    for method, path in (
        ("post", "/connectors"),
        ("put", "/connectors/{name}/config"),
        ("put", "/connector-plugins/{plugin}/config/validate"),
    ):
        media = _body(document, method, path)
        values = [example["value"] for example in media["examples"].values()]
        assert values and all(_admits(document, value, media["schema"]) for value in values), (method, path)
        for value in values:
            config = value.get("config", value)
            assert config["connector.class"] in listed and config["topics"] == EXAMPLE_CONNECTOR
    # The shared table is untouched: another worker's document lists its own plugins.
    assert "examples" not in openapi._CONFIG_NAMES_ITS_CLASS["properties"]["connector.class"]


def test_a_document_without_plugins_still_describes_every_body() -> None:
    app = FastAPI()
    schema = describe(get_openapi(title="t", version="1", routes=app.routes), connector_plugins=())
    assert schema["paths"] == {} and "CreateConnectorRequest" in schema["components"]["schemas"]


def test_path_examples_name_the_example_connector_task_zero_and_the_root_logger(
    document: dict[str, Any],
) -> None:
    def parameter(method: str, path: str, name: str) -> dict[str, Any]:
        found: dict[str, Any] = next(
            p for p in document["paths"][path][method]["parameters"] if p["name"] == name
        )
        return found["schema"]

    assert parameter("get", "/connectors/{name}", "name")["examples"] == [EXAMPLE_CONNECTOR]
    task = parameter("post", "/connectors/{name}/tasks/{task}/restart", "task")
    # Java binds {task} with Integer.valueOf: a 32-bit integer, anything else is its 404.
    assert task["type"] == "integer" and task["examples"] == [0]
    assert task["minimum"] == -(2**31) and task["maximum"] == 2**31 - 1
    assert parameter("get", "/admin/loggers/{logger}", "logger")["examples"] == ["root"]
    # Setting a level on the root logger would be the whole worker's: no example there.
    assert "examples" not in parameter("put", "/admin/loggers/{logger}", "logger")
    plugins = parameter("get", "/connector-plugins/{plugin}/config", "plugin")["examples"]
    assert any(p.endswith(".FileStreamSinkConnector") for p in plugins)


def test_lists_link_to_the_operations_on_one_of_their_items(document: dict[str, Any]) -> None:
    paths = document["paths"]

    def links(path: str) -> dict[str, Any]:
        found: dict[str, Any] = paths[path]["get"]["responses"]["200"]["links"]
        return found

    by_list = links("/connectors")
    assert {link["parameters"]["name"] for link in by_list.values()} == {"$response.body#/0"}
    assert "task" not in by_list["post_connectors_name_tasks_task_restart"]["parameters"]
    for path, task in (
        ("/connectors/{name}/tasks", "$response.body#/0/id/task"),
        ("/connectors/{name}/status", "$response.body#/tasks/0/id"),
    ):
        task_links = links(path)
        assert set(task_links) == {
            "get_connectors_name_tasks_task_status",
            "post_connectors_name_tasks_task_restart",
        }
        assert all(link["parameters"]["task"] == task for link in task_links.values())
    plugin_links = links("/connector-plugins")
    assert {link["parameters"]["plugin"] for link in plugin_links.values()} == {"$response.body#/0/class"}
    assert len(plugin_links) == 2


def test_a_static_assignment_body_is_as_strict_as_the_api(document: dict[str, Any]) -> None:
    schema = _body(document, "put", "/workers/{worker_id}/static-assignment")["schema"]
    for accepted in ({}, {"connectors": ["a b"]}, {"tasks": ["my-conn-12"], "connectors": []}):
        assert _admits(document, accepted, schema), accepted
    for refused in ({"other": []}, {"connectors": [" "]}, {"tasks": ["orders"]}, {"tasks": ["-1"]}):
        assert not _admits(document, refused, schema), refused


def test_create_body_takes_initial_offsets_and_status_shows_auto_restart(document: dict[str, Any]) -> None:
    """KIP-995's ``initial_offsets`` in the create body (the offsets API's shape) and its answer's flag;
    kconnect's ``auto_restart`` beside Java's fields of a status entry."""
    schemas = document["components"]["schemas"]

    def valid(instance: Any, name: str) -> bool:
        try:
            jsonschema.validate(
                instance, {"$ref": f"#/components/schemas/{name}", "components": {"schemas": schemas}}
            )
        except jsonschema.ValidationError:
            return False
        return True

    config = {"connector.class": "FileStreamSource", "file": "/tmp/x", "topic": "t"}
    offsets = {"offsets": [{"partition": {"filename": "/tmp/x"}, "offset": {"position": 12}}]}
    assert valid({"name": "src", "config": config, "initial_offsets": offsets}, "CreateConnectorRequest")
    assert not valid({"name": "src", "config": config, "initial_offsets": [1]}, "CreateConnectorRequest")
    answer = document["paths"]["/connectors"]["post"]["responses"]["201"]["content"]["application/json"]
    assert answer["schema"] == {"$ref": "#/components/schemas/CreatedConnectorInfo"}
    created = {
        "name": "src",
        "config": config,
        "tasks": [],
        "type": "source",
        "initial_offsets_written": True,
    }
    assert valid(created, "CreatedConnectorInfo")
    entry = {"state": "FAILED", "worker_id": "w:8083", "trace": "t", "id": 0}
    assert valid({**entry, "auto_restart": {"attempts": 2, "next_attempt_ms": 1795331770007}}, "TaskState")
    assert valid({**entry, "auto_restart": {"attempts": 3, "next_attempt_ms": None}}, "TaskState")
    assert not valid({**entry, "auto_restart": {"attempts": "2", "next_attempt_ms": None}}, "TaskState")
