"""The OpenAPI document (``/openapi.json``, ``/docs``) with Apache Kafka Connect's request and answer shapes.

Most handlers read the raw body themselves (to give Connect's error messages for malformed JSON, and
to forward the exact bytes to the leader), so FastAPI cannot infer their request bodies. This module
states every public endpoint's bodies and answers with typed models instead, so that the document is
good enough for schema-driven fuzzing (schemathesis) and client generation. Endpoints another branch
adds are described here too, and appear in the document once their route exists.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic.json_schema import GenerateJsonSchema

from kconnect.runtime.plugins.config_infos import ConfigInfos, ConfigKeyInfo

__all__ = ["install_openapi"]


class ErrorMessage(BaseModel):
    """Every error answer, as Java's ErrorMessage: the HTTP status repeated in
    ``error_code``, and a message."""

    error_code: int = Field(description="The HTTP status, repeated")
    message: str


class ServerInfo(BaseModel):
    """``GET /``: the worker's version and the Kafka cluster it belongs to, as Java's ServerInfo."""

    version: str
    commit: str
    kafka_cluster_id: str


class ConnectorTaskId(BaseModel):
    """A task's id as Java spells it in JSON: its connector's name and its number."""

    connector: str
    task: int = Field(ge=0)


#: A connector name Apache Kafka Connect accepts: after Java's ``trim`` (which drops U+0000-U+0020 at
#: both ends), non-empty and free of ISO control characters (U+0000-U+001F, U+007F-U+009F).
CONNECTOR_NAME_PATTERN = (
    r"^[\x00-\x20]*[^\x00-\x20\x7f-\x9f](?:[^\x00-\x1f\x7f-\x9f]*[^\x00-\x20\x7f-\x9f])?[\x00-\x20]*$"
)

#: What every connector config must name: its class (the API answers 400 without it).
_CONFIG_NAMES_ITS_CLASS: dict[str, Any] = {
    "required": ["connector.class"],
    "properties": {"connector.class": {"type": "string", "minLength": 1}},
}


class CreateConnectorRequest(BaseModel):
    """``POST /connectors``: a name, a config, and optionally the state to create it in (KIP-980)."""

    name: str = Field(pattern=CONNECTOR_NAME_PATTERN)
    config: dict[str, str] = Field(json_schema_extra=_CONFIG_NAMES_ITS_CLASS)
    initial_state: Literal["RUNNING", "PAUSED", "STOPPED"] | None = None


class ConnectorInfo(BaseModel):
    """A connector's name, config, task ids and type, as Java's ConnectorInfo."""

    name: str
    config: dict[str, str]
    tasks: list[ConnectorTaskId]
    type: Literal["source", "sink", "unknown"]


class ConnectorState(BaseModel):
    """A connector's state as the status topic holds it, with the worker that reported it and, when it failed,
    the trace."""

    state: str = Field(description="UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED or RESTARTING")
    worker_id: str
    trace: str | None = None


class TaskState(ConnectorState):
    """A task's state, as a connector's plus the task's number."""

    id: int


class ConnectorStateInfo(BaseModel):
    """``GET /connectors/{name}/status``: the connector's and every task's state, as Java's
    ConnectorStateInfo."""

    name: str
    connector: ConnectorState
    tasks: list[TaskState]
    type: Literal["source", "sink", "unknown"]


class TaskInfo(BaseModel):
    """One task's id and config, as ``GET /connectors/{name}/tasks`` lists them."""

    id: ConnectorTaskId
    config: dict[str, str]


class ConnectorTopics(BaseModel):
    """``GET /connectors/{name}/topics`` (KIP-558): ``{<name>: {"topics": [...]}}``, keyed by the connector's
    name, hence the open shape."""

    model_config = ConfigDict(extra="allow")


class ConnectorOffset(BaseModel):
    """One partition's offset (KIP-875): a source partition map and offset map, or a sink's
    ``kafka_topic``/``kafka_partition`` and ``kafka_offset``; a null offset resets the partition."""

    partition: dict[str, Any]
    offset: dict[str, Any] | None


class ConnectorOffsets(BaseModel):
    """``GET``/``PATCH /connectors/{name}/offsets`` (KIP-875): a list of partitions with their offsets."""

    offsets: list[ConnectorOffset]


class Message(BaseModel):
    """An answer that is only a message, such as the result of altering or resetting offsets."""

    message: str


class PluginInfo(BaseModel):
    """One installed plugin, as Java's PluginInfo: its class, kind and version."""

    model_config = ConfigDict(populate_by_name=True)
    class_: str = Field(alias="class")
    type: str = Field(description="source, sink, transformation, predicate, converter or header_converter")
    version: str


class PluginLoadError(BaseModel):
    """kconnect's own: why a plugin could not be loaded, so that a plugin missing from the
    list is explained."""

    error: str


class LoggerLevel(BaseModel):
    """One logger's level and when it was last set through the API (KIP-976; null when never)."""

    level: str
    last_modified: int | None = Field(description="When the level was last set, ms since the epoch")


class LoggerLevelRequest(BaseModel):
    """``PUT /admin/loggers/{logger}``: a log4j level name (KIP-495)."""

    level: Literal["OFF", "FATAL", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"] = Field(
        description="A log4j level name; case-insensitive"
    )


class StaticAssignment(BaseModel):
    """kconnect's own: the connectors and tasks pinned to one worker under the static protocol."""

    connectors: list[str]
    tasks: list[str] = Field(description="Task ids such as orders-0")


class Health(BaseModel):
    """``GET /health`` (KIP-1017): ``healthy``, ``starting`` or ``unhealthy``, with a message saying why."""

    status: str
    message: str


#: Answers whose one definition is the runtime's own dataclass (the REST entities of config keys and
#: validation results); their schemas are derived from it, so the document cannot drift from the answers.
_ENTITIES: list[type[Any]] = [ConfigKeyInfo, ConfigInfos]

_MODELS: list[type[BaseModel]] = [
    ErrorMessage,
    ServerInfo,
    CreateConnectorRequest,
    ConnectorInfo,
    ConnectorStateInfo,
    TaskState,
    TaskInfo,
    ConnectorTopics,
    ConnectorOffsets,
    Message,
    PluginInfo,
    PluginLoadError,
    LoggerLevel,
    LoggerLevelRequest,
    StaticAssignment,
    Health,
]


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


_STRING_MAP: dict[str, Any] = {"type": "object", "additionalProperties": {"type": "string"}}
_NULLABLE_STRING_MAP: dict[str, Any] = {
    "type": "object",
    "additionalProperties": {"anyOf": [{"type": "string"}, {"type": "null"}]},
}
#: A whole connector config (``PUT .../config``, ``PUT .../config/validate``): it names its class.
_CONNECTOR_CONFIG: dict[str, Any] = {**_STRING_MAP, **_CONFIG_NAMES_ITS_CLASS}
_CONNECTOR_CONFIG_TO_VALIDATE: dict[str, Any] = {**_NULLABLE_STRING_MAP, **_CONFIG_NAMES_ITS_CLASS}


def _array(item: dict[str, Any]) -> dict[str, Any]:
    return {"type": "array", "items": item}


#: (method, path) -> (request body schema or None, success status, response schema or None).
_OPERATIONS: dict[tuple[str, str], tuple[dict[str, Any] | None, int, dict[str, Any] | None]] = {
    ("get", "/"): (None, 200, _ref("ServerInfo")),
    ("get", "/health"): (None, 200, _ref("Health")),
    ("get", "/connectors"): (
        None,
        200,
        {
            "anyOf": [
                _array({"type": "string"}),
                {"type": "object", "additionalProperties": {"type": "object"}},
            ]
        },
    ),
    ("post", "/connectors"): (_ref("CreateConnectorRequest"), 201, _ref("ConnectorInfo")),
    ("get", "/connectors/{name}"): (None, 200, _ref("ConnectorInfo")),
    ("delete", "/connectors/{name}"): (None, 204, None),
    ("get", "/connectors/{name}/config"): (None, 200, _STRING_MAP),
    ("put", "/connectors/{name}/config"): (_CONNECTOR_CONFIG, 200, _ref("ConnectorInfo")),
    ("patch", "/connectors/{name}/config"): (_NULLABLE_STRING_MAP, 200, _ref("ConnectorInfo")),
    ("get", "/connectors/{name}/status"): (None, 200, _ref("ConnectorStateInfo")),
    ("get", "/connectors/{name}/tasks"): (None, 200, _array(_ref("TaskInfo"))),
    # Deprecated in Apache Kafka Connect 3.9 but still served: {"<name>-<n>": {task config}}
    ("get", "/connectors/{name}/tasks-config"): (
        None,
        200,
        {
            "type": "object",
            "additionalProperties": {"type": "object", "additionalProperties": {"type": "string"}},
        },
    ),
    ("get", "/connectors/{name}/tasks/{task}/status"): (None, 200, _ref("TaskState")),
    ("post", "/connectors/{name}/restart"): (None, 204, _ref("ConnectorStateInfo")),
    ("post", "/connectors/{name}/tasks/{task}/restart"): (None, 204, None),
    ("put", "/connectors/{name}/pause"): (None, 202, None),
    ("put", "/connectors/{name}/resume"): (None, 202, None),
    ("put", "/connectors/{name}/stop"): (None, 204, None),
    ("get", "/connectors/{name}/topics"): (None, 200, _ref("ConnectorTopics")),
    ("put", "/connectors/{name}/topics/reset"): (None, 202, None),
    ("get", "/connectors/{name}/offsets"): (None, 200, _ref("ConnectorOffsets")),
    ("patch", "/connectors/{name}/offsets"): (_ref("ConnectorOffsets"), 200, _ref("Message")),
    ("delete", "/connectors/{name}/offsets"): (None, 200, _ref("Message")),
    ("get", "/connector-plugins"): (None, 200, _array(_ref("PluginInfo"))),
    ("get", "/connector-plugins/errors"): (None, 200, _array(_ref("PluginLoadError"))),
    ("get", "/connector-plugins/{plugin}/config"): (None, 200, _array(_ref("ConfigKeyInfo"))),
    ("put", "/connector-plugins/{plugin}/config/validate"): (
        _CONNECTOR_CONFIG_TO_VALIDATE,
        200,
        _ref("ConfigInfos"),
    ),
    ("get", "/admin/loggers"): (None, 200, {"type": "object", "additionalProperties": _ref("LoggerLevel")}),
    ("get", "/admin/loggers/{logger}"): (None, 200, _ref("LoggerLevel")),
    ("put", "/admin/loggers/{logger}"): (_ref("LoggerLevelRequest"), 200, _array({"type": "string"})),
    ("get", "/workers"): (None, 200, {"type": "object"}),
    ("get", "/group"): (None, 200, {"type": "object"}),
    ("get", "/workers/{worker_id}/static-assignment"): (None, 200, _ref("StaticAssignment")),
    ("put", "/workers/{worker_id}/static-assignment"): (
        _ref("StaticAssignment"),
        200,
        _ref("StaticAssignment"),
    ),
    ("delete", "/workers/{worker_id}/static-assignment"): (None, 204, None),
}

_ERRORS = {
    "400": "Malformed request",
    "404": "Not found",
    "409": "Rebalance in progress or conflict",
    "500": "Server error",
}


def describe(schema: dict[str, Any]) -> dict[str, Any]:
    """Apply the operation table to a generated OpenAPI document (pure: returns the same dict, changed)."""
    generator = GenerateJsonSchema(ref_template="#/components/schemas/{model}")
    _, definitions = generator.generate_definitions(
        [(t.__name__, "serialization", TypeAdapter(t).core_schema) for t in [*_MODELS, *_ENTITIES]]
    )
    components = schema.setdefault("components", {}).setdefault("schemas", {})
    components.update(definitions)
    for path, item in schema.get("paths", {}).items():
        for method, operation in item.items():
            spec = _OPERATIONS.get((method, path))
            if spec is None:
                continue
            body, status, response = spec
            if body is not None:
                operation["requestBody"] = {
                    "required": True,
                    "content": {"application/json": {"schema": body}},
                }
            ok: dict[str, Any] = {"description": "Success"}
            if response is not None and status != 204:
                ok["content"] = {"application/json": {"schema": response}}
            responses: dict[str, Any] = {str(status): ok}
            if (method, path) == ("put", "/connectors/{name}/config"):  # 201 when it creates the connector
                responses["201"] = {"description": "Created", "content": ok["content"]}
            if (method, path) == ("put", "/admin/loggers/{logger}"):  # scope=cluster
                responses["204"] = {"description": "Written to the config topic for every worker"}
            if path == "/connectors/{name}/restart":  # 202 with a body when includeTasks/onlyFailed are set
                responses["202"] = {
                    "description": "Restarting",
                    "content": {"application/json": {"schema": response}},
                }
                responses["204"] = {"description": "Restarted"}
            for code, text in _ERRORS.items():
                responses[code] = {
                    "description": text,
                    "content": {"application/json": {"schema": _ref("ErrorMessage")}},
                }
            if path == "/health":
                responses["503"] = {
                    "description": "Starting",
                    "content": {"application/json": {"schema": _ref("Health")}},
                }
            operation["responses"] = responses
    _add_links(schema)
    return schema


#: Answers that name a connector or a worker, and where in them the name is: a stateful client (or
#: fuzzer) follows these links from ``POST /connectors`` to every operation on that connector.
_CONNECTOR_ANSWERS = (
    ("post", "/connectors", "201"),
    ("put", "/connectors/{name}/config", "201"),
    ("put", "/connectors/{name}/config", "200"),
    ("get", "/connectors/{name}", "200"),
)
_LINK_PARAMETERS = {
    "name": "$response.body#/name",
    "task": "$response.body#/tasks/0/task",
    "worker_id": "$response.body#/this_worker/id",
}


def _link_name(method: str, path: str) -> str:
    words = [w.strip("{}") for w in path.split("/") if w]
    return "_".join([method, *words]).replace(".", "_")


def _add_links(schema: dict[str, Any]) -> None:
    """OpenAPI links from the answers that name a connector (its ``ConnectorInfo``) to the operations on
    ``/connectors/{name}...``, and from ``GET /workers`` (this worker's ``id``) to its static assignment."""
    paths: dict[str, dict[str, Any]] = schema.get("paths", {})

    def links(prefix: str, params: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for path, item in paths.items():
            if not path.startswith(prefix):
                continue
            for method, operation in item.items():
                wanted = [p for p in params if "{" + p + "}" in path]
                if "operationId" not in operation or not wanted:
                    continue
                out[_link_name(method, path)] = {
                    "operationId": operation["operationId"],
                    "parameters": {p: _LINK_PARAMETERS[p] for p in wanted},
                }
        return out

    to_connector = links("/connectors/{name}", ("name", "task"))
    for method, path, code in _CONNECTOR_ANSWERS:
        answer = paths.get(path, {}).get(method, {}).get("responses", {}).get(code)
        if answer is not None and to_connector:
            answer["links"] = to_connector
    to_worker = links("/workers/{worker_id}", ("worker_id",))
    answer = paths.get("/workers", {}).get("get", {}).get("responses", {}).get("200")
    if answer is not None and to_worker:
        answer["links"] = to_worker


def install_openapi(app: FastAPI) -> None:
    """Serve the described document at ``/openapi.json`` (built once, on first request)."""

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            generated = get_openapi(
                title=app.title,
                version=app.version,
                description="Apache Kafka Connect 3.9's REST API, as kconnect serves it; "
                "errors are {error_code, message}.",
                routes=app.routes,
            )
            app.openapi_schema = describe(generated)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
