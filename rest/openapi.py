"""The OpenAPI document (``/openapi.json``, ``/docs``) with Apache Kafka Connect's request and answer shapes.

Most handlers read the raw body themselves (to give Connect's error messages for malformed JSON, and
to forward the exact bytes to the leader), so FastAPI cannot infer their request bodies. This module
states every public endpoint's bodies and answers with typed models instead, so that the document is
good enough for schema-driven fuzzing (schemathesis) and client generation. Endpoints another branch
adds are described here too, and appear in the document once their route exists.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Literal

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import iter_route_contexts
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
    """``POST /connectors``: a name, a config, and optionally the state to create it in (KIP-980) and the
    offsets to start from (KIP-995's draft)."""

    name: str = Field(pattern=CONNECTOR_NAME_PATTERN)
    config: dict[str, str] = Field(json_schema_extra=_CONFIG_NAMES_ITS_CLASS)
    initial_state: Literal["RUNNING", "PAUSED", "STOPPED"] | None = None
    initial_offsets: ConnectorOffsets | None = Field(
        default=None,
        description="Offsets written before the connector's tasks start, in the shape PATCH "
        "/connectors/{name}/offsets takes (KIP-995's draft); offsets an earlier connector of the same "
        "name left are wiped first. Invalid ones are a 400 and no connector is created.",
    )


class ConnectorInfo(BaseModel):
    """A connector's name, config, task ids and type, as Java's ConnectorInfo."""

    name: str
    config: dict[str, str]
    tasks: list[ConnectorTaskId]
    type: Literal["source", "sink", "unknown"]


class AutoRestart(BaseModel):
    """kconnect's self-healing of a FAILED entry (``auto.restart.*``), beside Java's fields."""

    attempts: int = Field(description="Automatic restarts made since the count last started again")
    next_attempt_ms: int | None = Field(
        description="When the next automatic restart is due (ms since the epoch); null when none is: the "
        "maximum was reached, or the connector is paused or stopped"
    )


class ConnectorState(BaseModel):
    """A connector's state as the status topic holds it, with the worker that reported it and, when it failed,
    the trace."""

    state: str = Field(description="UNASSIGNED, RUNNING, PAUSED, STOPPED, FAILED or RESTARTING")
    worker_id: str
    trace: str | None = None
    version: str | None = Field(
        default=None, description="The plugin version running (KIP-891); null when the worker did not say"
    )
    auto_restart: AutoRestart | None = Field(
        default=None, description="kconnect only: present while a FAILED entry is being restarted by itself"
    )


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


class CreatedConnectorInfo(ConnectorInfo):
    """``POST /connectors``'s answer: the connector's info and, when ``initial_offsets`` were given, that
    they were written before the connector was created."""

    initial_offsets_written: bool | None = None


CreateConnectorRequest.model_rebuild()


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


class StaticAssignmentRequest(BaseModel):
    """``PUT /workers/{worker_id}/static-assignment``, as strict as the API: no other field, each connector
    name with a character other than whitespace, each task id ``<connector>-<number>``; both lists
    optional (an absent one is empty)."""

    model_config = ConfigDict(extra="forbid")
    connectors: list[Annotated[str, Field(pattern=r"\S")]] = Field(default_factory=list)
    # Python's \d, as the schema's readers (jsonschema, hypothesis) apply it, is the API's int() of the
    # number; $ admits a trailing newline the API refuses, which errs on the lenient side.
    tasks: list[Annotated[str, Field(pattern=r"^[\s\S]+-\d+$")]] = Field(
        default_factory=list, description="Task ids such as orders-0"
    )


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
    CreatedConnectorInfo,
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
    StaticAssignmentRequest,
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
    ("post", "/connectors"): (_ref("CreateConnectorRequest"), 201, _ref("CreatedConnectorInfo")),
    ("get", "/connectors/{name}"): (None, 200, _ref("ConnectorInfo")),
    ("delete", "/connectors/{name}"): (None, 204, None),
    ("get", "/connectors/{name}/config"): (None, 200, _STRING_MAP),
    ("put", "/connectors/{name}/config"): (_CONNECTOR_CONFIG, 200, _ref("ConnectorInfo")),
    ("patch", "/connectors/{name}/config"): (_NULLABLE_STRING_MAP, 200, _ref("ConnectorInfo")),
    ("get", "/connectors/{name}/status"): (None, 200, _ref("ConnectorStateInfo")),
    ("get", "/connectors/{name}/tasks"): (None, 200, _array(_ref("TaskInfo"))),
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
        _ref("StaticAssignmentRequest"),
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


def describe(schema: dict[str, Any], connector_plugins: Sequence[Mapping[str, str]] = ()) -> dict[str, Any]:
    """Apply the operation table to a generated OpenAPI document (pure: returns the same dict, changed).

    ``connector_plugins`` is what this worker's ``GET /connector-plugins`` answers: the document names
    them as examples, so that a client (or fuzzer) reading only the document can create a connector.
    """
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
                    # A copy: the examples added below are this worker's, the table is every worker's.
                    "content": {"application/json": {"schema": copy.deepcopy(body)}},
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
    _add_examples(schema, connector_plugins)
    return schema


#: Answers that name a connector, a task, a plugin or a worker, and where in them the name is: a stateful
#: client (or fuzzer) follows these links from ``POST /connectors`` (or the list of connectors) to every
#: operation on that connector, from a connector's tasks or status to each task's operations, from the
#: plugin list to a plugin's config and validation, and from ``GET /workers`` to this worker's static
#: assignment. (source method, path, status), target path prefix, parameters.
_LINKS: tuple[tuple[tuple[tuple[str, str, str], ...], str, Mapping[str, str]], ...] = (
    (
        (
            ("post", "/connectors", "201"),
            ("put", "/connectors/{name}/config", "201"),
            ("put", "/connectors/{name}/config", "200"),
            ("get", "/connectors/{name}", "200"),
        ),
        "/connectors/{name}",
        {"name": "$response.body#/name", "task": "$response.body#/tasks/0/task"},
    ),
    # A connector's tasks, listed or with their states, lead to each task's operations.
    (
        (("get", "/connectors/{name}/tasks", "200"),),
        "/connectors/{name}/tasks/{task}",
        {"name": "$response.body#/0/id/connector", "task": "$response.body#/0/id/task"},
    ),
    (
        (("get", "/connectors/{name}/status", "200"),),
        "/connectors/{name}/tasks/{task}",
        {"name": "$response.body#/name", "task": "$response.body#/tasks/0/id"},
    ),
    # The plain list is names (sorted); with ?expand= it is an object and the link finds no name.
    ((("get", "/connectors", "200"),), "/connectors/{name}", {"name": "$response.body#/0"}),
    (
        (("get", "/connector-plugins", "200"),),
        "/connector-plugins/{plugin}",
        {"plugin": "$response.body#/0/class"},
    ),
    ((("get", "/workers", "200"),), "/workers/{worker_id}", {"worker_id": "$response.body#/this_worker/id"}),
)


def _link_name(method: str, path: str) -> str:
    words = [w.strip("{}") for w in path.split("/") if w]
    return "_".join([method, *words]).replace(".", "_")


def _add_links(schema: dict[str, Any]) -> None:
    """The links of ``_LINKS``, each to every operation under its target prefix that takes one of its
    parameters (the others, such as a task number after the list of connectors, are the client's)."""
    paths: dict[str, dict[str, Any]] = schema.get("paths", {})
    for sources, prefix, parameters in _LINKS:
        targets: dict[str, Any] = {}
        for path, item in paths.items():
            if not path.startswith(prefix):
                continue
            for method, operation in item.items():
                wanted = {p: e for p, e in parameters.items() if "{" + p + "}" in path}
                if "operationId" in operation and wanted:
                    targets[_link_name(method, path)] = {
                        "operationId": operation["operationId"],
                        "parameters": wanted,
                    }
        for method, path, code in sources:
            answer = paths.get(path, {}).get(method, {}).get("responses", {}).get(code)
            if answer is not None and targets:
                answer.setdefault("links", {}).update(targets)


#: The connector the document's examples create: a FileStream sink on a topic of its own and no file,
#: so that trying it out (by hand or by a fuzzer) writes nothing but the worker's stdout.
EXAMPLE_CONNECTOR = "example-file-sink"
_EXAMPLE_SINK = "FileStreamSinkConnector"


_TASK_NUMBER: dict[str, Any] = {
    "type": "integer",
    "format": "int32",
    "minimum": -(2**31),
    "maximum": 2**31 - 1,
}


def _add_examples(schema: dict[str, Any], connector_plugins: Sequence[Mapping[str, str]]) -> None:
    """Examples a client can send as they are: the worker's connector classes for ``connector.class`` and
    ``{plugin}``, a FileStream sink config for the bodies that create or validate a connector (when the
    worker has that plugin), the example connector's name, task 0, and the root logger to read. A task
    number is the 32-bit integer Java binds.

    Examples, never enums: the API also accepts aliases (``FileStreamSink``, Java's class names), and a
    plugin installed after the document was built."""
    classes = [
        p["class"] for p in connector_plugins if p.get("type") in ("source", "sink") and p.get("class")
    ]
    sink = next((c for c in classes if c.rsplit(".", 1)[-1] == _EXAMPLE_SINK), None)
    config = {"connector.class": sink, "topics": EXAMPLE_CONNECTOR, "tasks.max": "1"} if sink else None
    components = schema.get("components", {}).get("schemas", {})
    paths: dict[str, dict[str, Any]] = schema.get("paths", {})

    def body_schema(method: str, path: str) -> dict[str, Any] | None:
        content = paths.get(path, {}).get(method, {}).get("requestBody", {}).get("content", {})
        found: dict[str, Any] | None = content.get("application/json", {}).get("schema")
        return found

    def name_the_classes(config_schema: dict[str, Any] | None) -> None:
        # New dicts, never an update in place: pydantic's schema shares them with _CONFIG_NAMES_ITS_CLASS.
        properties = config_schema.get("properties", {}) if config_schema is not None else {}
        if config_schema is not None and "connector.class" in properties and classes:
            named = {**properties["connector.class"], "examples": classes}
            config_schema["properties"] = {**properties, "connector.class": named}

    request = components.get("CreateConnectorRequest", {}).get("properties", {})
    name_the_classes(request.get("config"))
    name_the_classes(body_schema("put", "/connectors/{name}/config"))
    name_the_classes(body_schema("put", "/connector-plugins/{plugin}/config/validate"))
    if config is not None:
        bodies = {
            ("post", "/connectors"): {"name": EXAMPLE_CONNECTOR, "config": config},
            ("put", "/connectors/{name}/config"): config,
            ("put", "/connector-plugins/{plugin}/config/validate"): config,
        }
        for (method, path), value in bodies.items():
            media = paths.get(path, {}).get(method, {}).get("requestBody", {}).get("content", {})
            if "application/json" in media:
                media["application/json"]["examples"] = {
                    "file-sink": {"summary": "A FileStream sink writing to stdout", "value": value}
                }
    parameters: dict[str, list[Any]] = {"name": [EXAMPLE_CONNECTOR], "task": [0], "plugin": classes}
    for item in paths.values():
        for method, operation in item.items():
            # The root logger is one that exists; only to read it: setting its level is the whole worker's.
            examples = {**parameters, "logger": ["root"]} if method == "get" else parameters
            for parameter in operation.get("parameters", []):
                if parameter.get("in") != "path" or "schema" not in parameter:
                    continue
                if parameter.get("name") == "task":  # Java binds it with Integer.valueOf; other text is 404
                    parameter["schema"] = {**parameter["schema"], **_TASK_NUMBER}
                values = examples.get(parameter.get("name", ""))
                if values:
                    parameter["schema"]["examples"] = values


def _connector_plugins(app: FastAPI) -> list[dict[str, str]]:
    """What this worker's ``GET /connector-plugins`` answers, asked of its own route: the document is built
    per worker, from the app alone, and the plugins are the worker's (its ``plugin.path``)."""
    for route in iter_route_contexts(app.routes):
        if (
            route.path == "/connector-plugins"
            and "GET" in (route.methods or ())
            and route.endpoint is not None
        ):
            answer = route.endpoint()  # connectors only, by its default
            if isinstance(answer, list):  # an async route would answer a coroutine; no examples then
                return [p for p in answer if isinstance(p, dict)]
    return []


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
            app.openapi_schema = describe(generated, _connector_plugins(app))
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
