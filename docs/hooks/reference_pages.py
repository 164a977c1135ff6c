"""The reference pages of the documentation site, generated from the code when the site is built.

Why generated: a reference written by hand drifts from the definitions the worker validates with; these
pages are rendered from those definitions themselves (the worker keys, every built-in plugin's ConfigDef,
the OpenAPI document the REST app serves, the metric families ``/metrics`` renders), so they cannot.
Nothing here is checked in as Markdown: ``docs/hooks/kconnect_docs.py`` adds the pages to the site at
build time, and ``tests/unit/test_reference_docs.py`` fails when a key or a metric has no documentation.

Only public names are imported (module splits keep them importable), and nothing here starts a worker or
talks to Kafka: the OpenAPI document comes from the app of a worker that is constructed, never started.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kconnect.config.worker import PASSTHROUGH_KEYS, PASSTHROUGH_PREFIXES, Definition, definitions
from kconnect.runtime.plugins.catalog import PluginCatalog
from kconnect.runtime.plugins.config_def import ConfigDef, ConfigKey, convert_to_string
from kconnect.runtime.plugins.connector_config import base_config_def, plugin_config_def
from kconnect.runtime.plugins.registry import PluginRegistry

#: The package built-in connectors live in; plugins installed from elsewhere are not the product's.
BUILTIN_CONNECTORS_PACKAGE = "kconnect.connectors."

#: The reference pages, by their path under docs/.
WORKER_PROPERTIES_PAGE = "reference/worker-properties.md"
PLUGINS_PAGE = "reference/plugins.md"
REST_API_PAGE = "reference/rest-api.md"
OPENAPI_FILE = "reference/openapi.json"
METRICS_PAGE = "reference/metrics.md"


@dataclass(frozen=True)
class PluginConfig:
    """One built-in plugin's keys as the reference lists them: what kind it is, its class name and its
    ConfigDef (for a connector its own keys only; the keys every source or sink has come separately)."""

    kind: str
    class_name: str
    config_def: ConfigDef


def cell(text: str) -> str:
    """A Markdown table cell: pipes escaped, line breaks flattened."""
    return text.replace("|", "\\|").replace("\n", " ").strip()


def _table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return lines


# ---- worker properties


def worker_definitions() -> tuple[Definition, ...]:
    """Every worker property the worker validates, in the order the reference lists them."""
    return definitions()


def _worker_default(d: Definition) -> str:
    if d.required:
        return "(required)"
    if d.default_text is not None:
        return f"`{d.default_text}`"
    if d.default is None:
        return "(unset)"
    if d.default == "":
        return '`""`'
    return f"`{d.default}`"


def worker_properties_page() -> str:
    """Every worker property: name, type, default, valid values, importance and documentation."""
    rows = [
        (
            f"`{d.key}`",
            str(d.type.value),
            _worker_default(d),
            d.allowed,
            str(d.importance.value),
            ("kconnect only. " if d.kconnect else "") + d.documentation,
        )
        for d in worker_definitions()
    ]
    prefixes = ", ".join(f"`{p}*`" for p in PASSTHROUGH_PREFIXES)
    keys = ", ".join(f"`{k}`" for k in PASSTHROUGH_KEYS)
    lines = [
        "# Worker properties",
        "",
        "Generated from the definitions the worker validates its properties file with (`config/`, "
        "`kconnect.config.worker.definitions()`) when this site was built. Keys, types and defaults follow "
        "Apache Kafka Connect where the names match; keys only kconnect has say so. The ones a first "
        "cluster needs are explained in [Running workers](../running-workers.md).",
        "",
        *_table(("Key", "Type", "Default", "Valid values", "Importance", "Description"), rows),
        "",
        f"Keys starting with {prefixes}, and {keys}, are accepted without validation and handed to the "
        "Kafka clients, REST TLS setup, converters, config providers or internal-topic creation they "
        "belong to. Keys starting with `spark.` are passed to the SparkSession. Any other key is reported "
        "as unknown and ignored.",
    ]
    return "\n".join(lines) + "\n"


# ---- plugins


def builtin_catalog() -> PluginCatalog:
    """The plugins a worker with ``file.connectors.enable=true`` offers, from the installed entry points."""
    return PluginCatalog.of(PluginRegistry.discover(file_connectors=True))


def builtin_plugin_configs(catalog: PluginCatalog | None = None) -> list[PluginConfig]:
    """Every built-in connector's, converter's, header converter's, transformation's and predicate's keys,
    connectors first (sorted by class name), then the other kinds in Java's listing order."""
    catalog = catalog or builtin_catalog()
    configs = [
        PluginConfig(str(desc.type), desc.class_name, plugin_config_def(desc.cls()))
        for desc in sorted(catalog.connectors(), key=lambda d: (d.type != "source", d.class_name))
        if desc.class_name.startswith(BUILTIN_CONNECTORS_PACKAGE)
    ]
    configs += [PluginConfig(p.type, p.class_name, p.config_def()) for p in catalog.others]
    return configs


def common_connector_configs(catalog: PluginCatalog | None = None) -> dict[str, ConfigDef]:
    """The keys every source connector and every sink connector has (``name``, ``tasks.max``, converters,
    ``transforms``, ``errors.*``, ...), by connector type."""
    catalog = catalog or builtin_catalog()
    found: dict[str, ConfigDef] = {}
    for desc in catalog.connectors():
        found.setdefault(str(desc.type), base_config_def(desc.cls))
    return found


def public_keys(config_def: ConfigDef) -> list[ConfigKey]:
    """The keys a user sets: internal keys (Java's ``internalConfig``) are left out, as REST leaves them."""
    return [k for k in config_def.config_keys.values() if not k.internal]


def _key_default(key: ConfigKey) -> str:
    if key.required:
        return "(required)"
    text = convert_to_string(key.default, key.type)
    if text is None:
        return "(unset)"
    return f"`{text}`" if text else '`""`'


def _keys_table(config_def: ConfigDef) -> list[str]:
    rows = [
        (
            f"`{k.name}`",
            k.type.value.lower(),
            _key_default(k),
            str(k.validator) if k.validator is not None else "",
            k.importance.value.lower(),
            k.documentation or "",
        )
        for k in public_keys(config_def)
    ]
    if not rows:
        return ["No keys of its own."]
    return _table(("Key", "Type", "Default", "Valid values", "Importance", "Description"), rows)


_KIND_TITLES: Mapping[str, str] = {
    "source": "Source connectors",
    "sink": "Sink connectors",
    "transformation": "Transformations",
    "predicate": "Predicates",
    "converter": "Converters",
    "header_converter": "Header converters",
}


def plugins_page(catalog: PluginCatalog | None = None) -> str:
    """Every built-in plugin's ConfigDef, a table per plugin, grouped by kind; then the common keys."""
    catalog = catalog or builtin_catalog()
    lines = [
        "# Plugin configuration",
        "",
        "Generated from each built-in plugin's ConfigDef (what `GET /connector-plugins/{plugin}/config` "
        "answers and validation checks) when this site was built: the connectors registered under "
        "`kconnect.plugins` in `pyproject.toml`, and the converters, header converters, transformations "
        "and predicates kconnect implements under Apache Kafka Connect's class names. A connector's table "
        "holds its own keys; the keys every source or sink connector has are at the end of the page.",
    ]
    kind = ""
    for plugin in builtin_plugin_configs(catalog):
        if plugin.kind != kind:
            kind = plugin.kind
            lines += ["", f"## {_KIND_TITLES.get(kind, kind)}"]
        simple = plugin.class_name.rsplit(".", 1)[-1]
        lines += [
            "",
            f"### {simple}",
            "",
            f"Class `{plugin.class_name}`.",
            "",
            *_keys_table(plugin.config_def),
        ]
    lines += [
        "",
        "## Keys every connector has",
        "",
        "Apache Kafka Connect's connector-level keys, with kconnect's additions (`auto.restart.*`, "
        "`source.task.placement`, ...).",
    ]
    for type_, config_def in sorted(common_connector_configs(catalog).items()):
        lines += ["", f"### Every {type_} connector", "", *_keys_table(config_def)]
    return "\n".join(lines) + "\n"


# ---- REST API


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document a worker serves at ``/openapi.json``, from a worker that is built, not started
    (its plugins are the installed ones, the FileStream connectors included)."""
    from kconnect.config.worker import WorkerConfig
    from kconnect.rest.app import create_app
    from kconnect.runtime.shell.worker import Worker

    config = WorkerConfig.from_properties(
        {
            "bootstrap.servers": "localhost:9092",
            "group.id": "connect-cluster",
            "config.storage.topic": "connect-configs",
            "offset.storage.topic": "connect-offsets",
            "status.storage.topic": "connect-status",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "file.connectors.enable": "true",
        }
    )
    document: dict[str, Any] = create_app(Worker(config)).openapi()
    loaded: dict[str, Any] = json.loads(json.dumps(document))
    return loaded


_METHODS = ("get", "post", "put", "patch", "delete")


def _schema_name(schema: Mapping[str, Any]) -> str:
    ref = schema.get("$ref")
    if isinstance(ref, str):
        name = ref.rsplit("/", 1)[-1]
        return f"[{name}](#{name.lower()})"
    if schema.get("type") == "array" and isinstance(schema.get("items"), Mapping):
        return "array of " + _schema_name(schema["items"])
    if "anyOf" in schema:
        return " or ".join(_schema_name(s) for s in schema["anyOf"] if isinstance(s, Mapping))
    return str(schema.get("type", "object"))


def _body(content: Mapping[str, Any] | None) -> str:
    if not content:
        return ""
    for media, spec in content.items():
        schema = spec.get("schema") if isinstance(spec, Mapping) else None
        return f"{media}: {_schema_name(schema)}" if isinstance(schema, Mapping) else media
    return ""


def rest_api_page(document: Mapping[str, Any] | None = None) -> str:
    """Every operation of the OpenAPI document (method, path, summary, parameters, body, answers), then
    every schema it names with its fields."""
    document = document or openapi_document()
    lines = [
        "# REST API reference",
        "",
        "Generated from the OpenAPI document a worker serves at `/openapi.json` (`rest/openapi.py`) when "
        "this site was built; the document itself is [openapi.json](openapi.json), and a running worker "
        "serves it interactively at `/docs`. What the API does, with its parity to Apache Kafka Connect, "
        "is in [REST API](../rest-api.md).",
        "",
        "## Operations",
    ]
    for path, item in sorted(document.get("paths", {}).items()):
        for method in _METHODS:
            op = item.get(method)
            if not isinstance(op, Mapping):
                continue
            lines += ["", f"### `{method.upper()} {path}`", ""]
            summary = str(op.get("summary") or "")
            description = str(op.get("description") or "").strip()
            if summary:
                lines.append(summary)
            if description and description != summary:
                lines += ["", description]
            params = [p for p in op.get("parameters", []) if isinstance(p, Mapping)]
            if params:
                rows = [
                    (
                        f"`{p.get('name', '')}`",
                        str(p.get("in", "")),
                        "yes" if p.get("required") else "no",
                        _schema_name(p.get("schema", {})),
                        str(p.get("description", "")),
                    )
                    for p in params
                ]
                lines += ["", *_table(("Parameter", "In", "Required", "Type", "Description"), rows)]
            body = op.get("requestBody")
            if isinstance(body, Mapping):
                lines += ["", f"Request body: {_body(body.get('content'))}"]
            answers = [
                (f"`{code}`", str(spec.get("description", "")), _body(spec.get("content")))
                for code, spec in sorted(op.get("responses", {}).items())
                if isinstance(spec, Mapping)
            ]
            if answers:
                lines += ["", *_table(("Status", "Meaning", "Body"), answers)]
    lines += ["", "## Schemas"]
    for name, schema in sorted(document.get("components", {}).get("schemas", {}).items()):
        lines += ["", f"### {name}", ""]
        if schema.get("description"):
            lines += [str(schema["description"]).strip(), ""]
        required = set(schema.get("required", []))
        props = schema.get("properties", {})
        if props:
            fields = [
                (
                    f"`{field}`",
                    _schema_name(spec),
                    "yes" if field in required else "no",
                    str(spec.get("description", "")),
                )
                for field, spec in props.items()
            ]
            lines += _table(("Field", "Type", "Required", "Description"), fields)
        else:
            lines.append(f"Type: {_schema_name(schema)}")
    return "\n".join(lines) + "\n"


# ---- metrics


@dataclass(frozen=True)
class MetricDoc:
    """One metric family ``/metrics`` exports: its name, Prometheus type, labels and HELP text."""

    name: str
    kind: str
    labels: tuple[str, ...]
    help: str


def metric_docs() -> list[MetricDoc]:
    """Every family a worker's ``/metrics`` renders, taken from the renderer itself over figures of one
    connector with one task of each kind, so that every per-connector and per-task family has a sample to
    read its labels from."""
    from kconnect.config.worker import GroupProtocol
    from kconnect.runtime.group.protocol import ProtocolName
    from kconnect.runtime.shell.metrics import TaskFigures, WorkerFigures, worker_families
    from kconnect.runtime.storage.status_log import State

    task = TaskFigures("c", 0, State.RUNNING, placement="worker", sink_lag=0, last_progress_at=1.0)
    figures = WorkerFigures(
        worker="w",
        protocol=ProtocolName.STATIC,
        epoch=1,
        leader="w",
        rebalancing=False,
        completed_rebalances=1,
        rebalance_time_ms_total=1.0,
        rebalance_time_ms_max=1.0,
        time_since_last_rebalance_ms=1.0,
        connectors={"c": State.RUNNING},
        tasks=(task,),
        group_protocol=GroupProtocol.CONNECT,
    )
    docs = []
    for family in worker_families(figures):
        labels = tuple(name for name, _ in family.samples[0].labels) if family.samples else ()
        docs.append(MetricDoc(family.name, family.kind, labels, family.help))
    return docs


def metrics_page() -> str:
    """Every metric family: name, type, labels and HELP text; then how plugins' own metrics are named."""
    rows = [
        (f"`{m.name}`", m.kind, ", ".join(f"`{label}`" for label in m.labels), m.help) for m in metric_docs()
    ]
    lines = [
        "# Metrics",
        "",
        "Generated from the renderer of `GET /metrics` (`runtime/shell/metrics.py`) when this site was "
        "built: every family a worker exports, in Prometheus' text format (version 0.0.4), under the names "
        "a JMX exporter gives Apache Kafka Connect's metrics; HELP texts that start with `kconnect:`, and "
        "the `kconnect_*` families, are kconnect's own. Per-connector and per-task families have a sample "
        "per connector or task this worker runs.",
        "",
        *_table(("Name", "Type", "Labels", "Help"), rows),
        "",
        "Plugins register metrics of their own (KIP-877, `runtime/plugins/plugin_metrics.py`): each is "
        "exported as `plugins_<name>` with the worker, connector and task (a converter's also `converter`) "
        "and the plugin's own tags as labels, and the plugin's description as its HELP text; see "
        "[Rebalancing](../rebalancing.md#group-records-and-leader-fail-over).",
    ]
    return "\n".join(lines) + "\n"


def pages() -> dict[str, str]:
    """Every generated reference file, by its path under docs/."""
    document = openapi_document()
    return {
        WORKER_PROPERTIES_PAGE: worker_properties_page(),
        PLUGINS_PAGE: plugins_page(),
        REST_API_PAGE: rest_api_page(document),
        OPENAPI_FILE: json.dumps(document, indent=2) + "\n",
        METRICS_PAGE: metrics_page(),
    }
