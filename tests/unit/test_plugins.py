"""Plugin API, registry lookups, and connector-config validation in the shape Apache Kafka Connect returns.

The expected validate answers are those an Apache Kafka Connect 3.9 worker gave for the same configs
(documentation texts aside, which are our own wording).
"""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kconnect.connectors.file import FileStreamSinkConnector, FileStreamSourceConnector
from kconnect.runtime import __version__
from kconnect.runtime.plugins.api import (
    Connector,
    ConnectorError,
    ConnectorTransactionBoundaries,
    ExactlyOnceSupport,
    InMemoryOffsetStorageReader,
    SinkConnector,
    SinkTask,
    SourceConnector,
    SourceTask,
    Task,
    connector_type,
)
from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValidationError, Importance, Type
from kconnect.runtime.plugins.config_infos import ConfigInfos, plugin_config_key_infos
from kconnect.runtime.plugins.connector_config import (
    ConnectorConfigError,
    common_config_def,
    sink_config_def,
    source_config_def,
)
from kconnect.runtime.plugins.connector_validation import (
    connector_name_errors,
    normalize_connector_name,
    parse_connector_config,
    plugin_mismatch_error,
    validate_connector_config,
)
from kconnect.runtime.plugins.registry import AmbiguousPluginError, PluginNotFoundError, PluginRegistry

NULL_ERROR = "Null value can not be supplied as the configuration value."
SOURCE = "kconnect.connectors.file.FileStreamSourceConnector"
SINK = "kconnect.connectors.file.FileStreamSinkConnector"
JDBC = "kconnect.connectors.jdbc.JdbcSinkConnector"
JDBC_SOURCE = "kconnect.connectors.jdbc_source.JdbcSourceConnector"
POSTGRES_CDC = "kconnect.connectors.postgres_cdc.PostgresCdcSourceConnector"
PARQUET = "kconnect.connectors.parquet.ParquetSinkConnector"
ICEBERG = "kconnect.connectors.lakehouse.iceberg.IcebergSinkConnector"
DELTA = "kconnect.connectors.lakehouse.delta.DeltaSinkConnector"
VERIFIABLE = [
    "kconnect.connectors.verifiable.VerifiableSinkConnector",
    "kconnect.connectors.verifiable.VerifiableSourceConnector",
]


@pytest.fixture
def isolated_sys_path(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """plugin.path loading extends sys.path; keep that from leaking into other tests."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    yield


@pytest.fixture(scope="module")
def registry() -> PluginRegistry:
    return PluginRegistry.discover(file_connectors=True)


def _unique(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:10]}"


# ---- the plugin API


class _Context:
    def __init__(self) -> None:
        self.reconfigurations = 0
        self.errors: list[BaseException] = []

    def request_task_reconfiguration(self) -> None:
        self.reconfigurations += 1

    def raise_error(self, exc: BaseException) -> None:
        self.errors.append(exc)


class _WatchingSource(SourceConnector):
    """A connector whose input changes: it asks the herder to recompute task configs."""

    def __init__(self) -> None:
        self.tables: list[str] = []
        self.started: list[dict[str, str]] = []

    def version(self) -> str:
        return "1.2.3"

    def config_def(self) -> ConfigDef:
        return ConfigDef().define("tables", Type.LIST, "", None, Importance.HIGH, "tables to copy")

    def start(self, props: dict[str, str]) -> None:
        self.started.append(props)
        self.tables = [t for t in props.get("tables", "").split(",") if t]

    def task_class(self) -> type[Task]:
        return SourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        groups = [self.tables[i::max_tasks] for i in range(min(max_tasks, len(self.tables)))]
        return [{"tables": ",".join(g)} for g in groups]

    def stop(self) -> None:
        self.tables = []

    def table_added(self, table: str) -> None:
        self.tables.append(table)
        self.context.request_task_reconfiguration()


def test_a_running_connector_asks_the_herder_to_reconfigure_tasks() -> None:
    connector = _WatchingSource()
    context = _Context()
    connector.initialize(context)
    connector.start({"tables": "a,b,c"})
    assert connector.task_configs(2) == [{"tables": "a,c"}, {"tables": "b"}]
    connector.table_added("d")
    assert context.reconfigurations == 1
    assert connector.task_configs(2) == [{"tables": "a,c"}, {"tables": "b,d"}]
    connector.context.raise_error(RuntimeError("lost the database"))
    assert [str(e) for e in context.errors] == ["lost the database"]


def test_connector_defaults_mirror_javas() -> None:
    connector = _WatchingSource()
    with pytest.raises(ConnectorError, match="has not been initialized"):
        _ = connector.context
    connector.reconfigure({"tables": "x"})
    assert connector.started == [{"tables": "x"}]
    assert connector.exactly_once_support({}) is None
    assert connector.can_define_transaction_boundaries({}) is ConnectorTransactionBoundaries.UNSUPPORTED
    assert connector.alter_offsets({}, []) is False
    assert [(v.name, v.value, v.errors) for v in connector.validate({"tables": "a, b"})] == [
        ("tables", ["a", "b"], [])
    ]


def test_task_classes_declare_the_lifecycle_as_abstract() -> None:
    assert Task.__abstractmethods__ == {"version", "start", "stop"}
    assert SourceTask.__abstractmethods__ == {"version", "start", "stop", "poll"}
    assert SinkTask.__abstractmethods__ == {"version", "start", "stop", "put"}
    assert Connector.__abstractmethods__ == {
        "version",
        "config_def",
        "start",
        "task_class",
        "task_configs",
        "stop",
    }
    with pytest.raises(TypeError):
        SourceTask()  # type: ignore[abstract]


def test_in_memory_offset_reader_keys_partitions_by_content() -> None:
    reader = InMemoryOffsetStorageReader([({"b": 1, "a": "x"}, {"position": 7})])
    assert reader.offset({"a": "x", "b": 1}) == {"position": 7}
    assert reader.offset({"a": "y"}) is None
    reader.put({"a": "y"}, None)
    assert reader.offsets([{"a": "x", "b": 1}, {"a": "z"}]) == [
        ({"a": "x", "b": 1}, {"position": 7}),
        ({"a": "z"}, None),
    ]


def test_connector_type() -> None:
    assert connector_type(FileStreamSourceConnector) == "source"
    assert connector_type(FileStreamSinkConnector) == "sink"
    with pytest.raises(TypeError, match="neither a SourceConnector nor a SinkConnector"):
        connector_type(Connector)


# ---- the registry


def test_entry_points_provide_the_builtin_connectors(registry: PluginRegistry) -> None:
    assert registry.load_errors == []
    assert registry.plugin_info() == [
        {"class": SINK, "type": "sink", "version": __version__},
        {"class": SOURCE, "type": "source", "version": __version__},
        {"class": JDBC, "type": "sink", "version": __version__},
        {"class": JDBC_SOURCE, "type": "source", "version": __version__},
        {"class": DELTA, "type": "sink", "version": __version__},
        {"class": ICEBERG, "type": "sink", "version": __version__},
        {"class": PARQUET, "type": "sink", "version": __version__},
        {"class": POSTGRES_CDC, "type": "source", "version": __version__},
        {"class": VERIFIABLE[0], "type": "sink", "version": __version__},
        {"class": VERIFIABLE[1], "type": "source", "version": __version__},
    ]
    assert [d.location for d in registry.plugins()] == [
        "entry-point:FileStreamSinkConnector",
        "entry-point:FileStreamSourceConnector",
        "entry-point:JdbcSinkConnector",
        "entry-point:JdbcSourceConnector",
        "entry-point:DeltaSinkConnector",
        "entry-point:IcebergSinkConnector",
        "entry-point:ParquetSinkConnector",
        "entry-point:PostgresCdcSourceConnector",
        "entry-point:VerifiableSinkConnector",
        "entry-point:VerifiableSourceConnector",
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (SOURCE, FileStreamSourceConnector),
        ("FileStreamSourceConnector", FileStreamSourceConnector),
        ("FileStreamSource", FileStreamSourceConnector),
        ("org.apache.kafka.connect.file.FileStreamSourceConnector", FileStreamSourceConnector),
        (SINK, FileStreamSinkConnector),
        ("FileStreamSinkConnector", FileStreamSinkConnector),
        ("FileStreamSink", FileStreamSinkConnector),
        ("org.apache.kafka.connect.file.FileStreamSinkConnector", FileStreamSinkConnector),
    ],
)
def test_lookup_by_every_kind_of_name(registry: PluginRegistry, name: str, expected: type[Connector]) -> None:
    assert registry.connector_class(name) is expected
    assert name in registry
    assert isinstance(registry.new_connector(name), expected)


@pytest.mark.parametrize(
    "name", ["FileStream", "filestreamsink", "org.apache.kafka.connect.file.FileStreamSink", ""]
)
def test_unknown_names_list_what_is_available(registry: PluginRegistry, name: str) -> None:
    with pytest.raises(PluginNotFoundError) as info:
        registry.find(name)
    message = str(info.value)
    assert message.startswith(
        f"Failed to find any class that implements Connector and which name matches {name}, "
        f"available connectors are: "
    )
    assert SOURCE in message and SINK in message
    assert name not in registry


def _connector_class(module: str, simple: str, base: type[Connector] = SinkConnector) -> type[Connector]:
    def version(self: Connector) -> str:
        return "9"

    def config_def(self: Connector) -> ConfigDef:
        return ConfigDef()

    def start(self: Connector, props: dict[str, str]) -> None:
        return None

    def task_class(self: Connector) -> type[Task]:
        return SinkTask

    def task_configs(self: Connector, max_tasks: int) -> list[dict[str, str]]:
        return []

    def stop(self: Connector) -> None:
        return None

    namespace: dict[str, Any] = {
        "__module__": module,
        "__qualname__": simple,
        "version": version,
        "config_def": config_def,
        "start": start,
        "task_class": task_class,
        "task_configs": task_configs,
        "stop": stop,
    }
    cls: type[Connector] = type(simple, (base,), namespace)
    return cls


def test_an_alias_shared_by_two_plugins_is_an_error_listing_both() -> None:
    registry = PluginRegistry()
    first = _connector_class("vendor_a.sinks", "JdbcSinkConnector")
    second = _connector_class("vendor_b.sinks", "JdbcSinkConnector")
    registry.register(first)
    registry.register(second)
    for alias in ("JdbcSink", "JdbcSinkConnector"):
        with pytest.raises(AmbiguousPluginError) as info:
            registry.find(alias)
        assert info.value.candidates == [
            "vendor_a.sinks.JdbcSinkConnector",
            "vendor_b.sinks.JdbcSinkConnector",
        ]
        assert str(info.value) == (
            f"More than one connector matches alias {alias}. Please use full package and class name instead. "
            "Classes found: vendor_a.sinks.JdbcSinkConnector, vendor_b.sinks.JdbcSinkConnector"
        )
    # The full names still resolve.
    assert registry.connector_class("vendor_a.sinks.JdbcSinkConnector") is first
    assert registry.connector_class("vendor_b.sinks.JdbcSinkConnector") is second


def test_register_keeps_the_first_class_of_a_name_and_rejects_non_plugins() -> None:
    registry = PluginRegistry()
    first = _connector_class("dup.mod", "DupConnector")
    registry.register(first)
    assert registry.register(first).cls is first  # the same class again is fine
    registry.register(_connector_class("dup.mod", "DupConnector"))
    assert registry.connector_class("dup.mod.DupConnector") is first
    assert len(registry.load_errors) == 1 and "dup.mod.DupConnector" in registry.load_errors[0]
    with pytest.raises(TypeError):
        registry.register(SinkConnector)  # abstract
    with pytest.raises(TypeError):
        registry.register(str)  # type: ignore[arg-type]


def test_a_connector_whose_version_fails_is_still_registered() -> None:
    cls = _connector_class("flaky.mod", "FlakyConnector")

    def version(self: Connector) -> str:
        raise RuntimeError("no version file")

    cls.version = version  # type: ignore[method-assign]
    registry = PluginRegistry()
    assert registry.register(cls).version == "undefined"
    assert "no version file" in registry.load_errors[0]


PLUGIN_SOURCE = """
from kconnect.runtime.plugins.config_def import ConfigDef, Importance, Type
from kconnect.runtime.plugins.api import SinkTask, SourceConnector, SourceTask
# Imported, not defined here: must not be registered again from this module.
from kconnect.connectors.file import FileStreamSourceConnector


class {simple}(SourceConnector):
    def version(self):
        return "0.0.7"

    def config_def(self):
        return ConfigDef().define("greeting", Type.STRING, "hello", None, Importance.LOW, "what to say")

    def start(self, props):
        self.props = props

    def task_class(self):
        return SourceTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass
"""


def test_plugin_path_modules_and_packages_are_imported_and_scanned(
    tmp_path: Path, isolated_sys_path: None
) -> None:
    module = _unique("kc_greeter")
    package = _unique("kc_pkg")
    (tmp_path / f"{module}.py").write_text(PLUGIN_SOURCE.format(simple="GreeterConnector"))
    (tmp_path / package / "inner").mkdir(parents=True)
    (tmp_path / package / "__init__.py").write_text("")
    (tmp_path / package / "inner" / "__init__.py").write_text("")
    (tmp_path / package / "inner" / "deep.py").write_text(PLUGIN_SOURCE.format(simple="DeepSourceConnector"))
    (tmp_path / "_private.py").write_text("raise RuntimeError('never imported')")
    (tmp_path / "notes.txt").write_text("not python")

    registry = PluginRegistry.discover([tmp_path], file_connectors=True)
    assert registry.load_errors == []
    greeter = f"{module}.GreeterConnector"
    deep = f"{package}.inner.deep.DeepSourceConnector"
    assert [d["class"] for d in registry.plugin_info()] == sorted(
        [SINK, SOURCE, JDBC, JDBC_SOURCE, DELTA, ICEBERG, PARQUET, POSTGRES_CDC, *VERIFIABLE, greeter, deep]
    )
    for name in (greeter, "GreeterConnector", "Greeter"):
        assert registry.find(name).class_name == greeter
    for name in (deep, "DeepSourceConnector", "DeepSource"):
        assert registry.find(name).class_name == deep
    desc = registry.find("Greeter")
    assert (desc.type, desc.version, desc.location) == ("source", "0.0.7", str(tmp_path.resolve()))
    assert registry.find("FileStreamSource").location == "entry-point:FileStreamSourceConnector"


def test_plugin_path_problems_are_recorded_and_loading_goes_on(
    tmp_path: Path, isolated_sys_path: None
) -> None:
    good = _unique("kc_good")
    broken = _unique("kc_broken")
    (tmp_path / f"{good}.py").write_text(PLUGIN_SOURCE.format(simple="GoodConnector"))
    (tmp_path / f"{broken}.py").write_text("import no_such_dependency_anywhere\n")
    (tmp_path / "json.py").write_text("# shadows nothing: the standard library's json is already imported\n")
    registry = PluginRegistry.discover([tmp_path, tmp_path / "missing-dir"], entry_point_group=None)
    assert [d.class_name for d in registry.plugins()] == [f"{good}.GoodConnector"]
    errors = "\n".join(registry.load_errors)
    assert f"{broken}: import failed" in errors and "no_such_dependency_anywhere" in errors
    assert "'json' is already taken" in errors
    assert "missing-dir is not a directory" in errors


def test_plugin_path_entry_may_be_a_single_file(tmp_path: Path, isolated_sys_path: None) -> None:
    module = _unique("kc_single")
    path = tmp_path / f"{module}.py"
    path.write_text(PLUGIN_SOURCE.format(simple="SingleConnector"))
    registry = PluginRegistry.discover([path], entry_point_group=None)
    assert registry.connector_class("Single").__module__ == module


# ---- validate_connector_config: the JSON of PUT /connector-plugins/{plugin}/config/validate

SOURCE_GROUPS = [
    "Common",
    "Transforms",
    "Predicates",
    "Error Handling",
    "Topic Creation",
    "Exactly Once Support",
    "offsets.topic",
]
SINK_GROUPS = ["Common", "Transforms", "Predicates", "Error Handling"]

# (name, type, required, default_value, importance, group, width, display_name, order_in_group),
# as Java 3.9 lists them, plus the four version keys of KIP-891 as Kafka 4.1 names them, each after the key
# naming its plugin, which shift the orders of the common keys after them. As in Java 4.x, the connector's
# version key defaults to the newest installed version of the connector (FileStream's: kconnect's own).
SOURCE_DEFINITIONS = [
    ("name", "STRING", True, None, "HIGH", "Common", "MEDIUM", "Connector name", 1),
    ("connector.class", "STRING", True, None, "HIGH", "Common", "LONG", "Connector class", 2),
    (
        "connector.plugin.version",
        "STRING",
        False,
        __version__,
        "MEDIUM",
        "Common",
        "MEDIUM",
        "Connector version",
        3,
    ),
    ("tasks.max", "INT", False, "1", "HIGH", "Common", "SHORT", "Tasks max", 4),
    ("tasks.max.enforce", "BOOLEAN", False, "true", "LOW", "Common", "SHORT", "Enforce tasks max", 5),
    ("key.converter", "CLASS", False, None, "LOW", "Common", "SHORT", "Key converter class", 6),
    (
        "key.converter.plugin.version",
        "STRING",
        False,
        None,
        "LOW",
        "Common",
        "SHORT",
        "Key converter version",
        7,
    ),
    ("value.converter", "CLASS", False, None, "LOW", "Common", "SHORT", "Value converter class", 8),
    (
        "value.converter.plugin.version",
        "STRING",
        False,
        None,
        "LOW",
        "Common",
        "SHORT",
        "Value converter version",
        9,
    ),
    ("header.converter", "CLASS", False, None, "LOW", "Common", "SHORT", "Header converter class", 10),
    (
        "header.converter.plugin.version",
        "STRING",
        False,
        None,
        "LOW",
        "Common",
        "SHORT",
        "Header converter version",
        11,
    ),
    ("transforms", "LIST", False, "", "LOW", "Transforms", "LONG", "Transforms", 12),
    ("predicates", "LIST", False, "", "LOW", "Predicates", "LONG", "Predicates", 13),
    ("config.action.reload", "STRING", False, "restart", "LOW", "Common", "MEDIUM", "Reload Action", 14),
    (
        "errors.retry.timeout",
        "LONG",
        False,
        "0",
        "MEDIUM",
        "Error Handling",
        "MEDIUM",
        "Retry Timeout for Errors",
        1,
    ),
    (
        "errors.retry.delay.max.ms",
        "LONG",
        False,
        "60000",
        "MEDIUM",
        "Error Handling",
        "MEDIUM",
        "Maximum Delay Between Retries for Errors",
        2,
    ),
    ("errors.tolerance", "STRING", False, "none", "MEDIUM", "Error Handling", "SHORT", "Error Tolerance", 3),
    ("errors.log.enable", "BOOLEAN", False, "false", "MEDIUM", "Error Handling", "SHORT", "Log Errors", 4),
    (
        "errors.log.include.messages",
        "BOOLEAN",
        False,
        "false",
        "MEDIUM",
        "Error Handling",
        "SHORT",
        "Log Error Details",
        5,
    ),
    ("topic.creation.groups", "LIST", False, "", "LOW", "Topic Creation", "LONG", "Topic Creation Groups", 1),
    (
        "exactly.once.support",
        "STRING",
        False,
        "requested",
        "MEDIUM",
        "Exactly Once Support",
        "SHORT",
        "Exactly once support",
        2,
    ),
    (
        "transaction.boundary",
        "STRING",
        False,
        "poll",
        "MEDIUM",
        "Exactly Once Support",
        "SHORT",
        "Transaction Boundary",
        3,
    ),
    (
        "transaction.boundary.interval.ms",
        "LONG",
        False,
        None,
        "LOW",
        "Exactly Once Support",
        "SHORT",
        "Transaction boundary interval",
        4,
    ),
    ("offsets.storage.topic", "STRING", False, None, "LOW", "offsets.topic", "LONG", "Offsets topic", 1),
    ("file", "STRING", False, None, "HIGH", None, "NONE", "file", -1),
    ("topic", "STRING", True, None, "HIGH", None, "NONE", "topic", -1),
    ("batch.size", "INT", False, "2000", "LOW", None, "NONE", "batch.size", -1),
]

# (name, value, errors)
GOOD_SOURCE_VALUES: list[tuple[str, str | None, list[str]]] = [
    ("name", "src", []),
    ("connector.class", "FileStreamSource", []),
    ("connector.plugin.version", __version__, []),
    ("tasks.max", "1", []),
    ("tasks.max.enforce", "true", []),
    ("key.converter", None, []),
    ("key.converter.plugin.version", None, []),
    ("value.converter", None, []),
    ("value.converter.plugin.version", None, []),
    ("header.converter", None, []),
    ("header.converter.plugin.version", None, []),
    ("transforms", "", []),
    ("predicates", "", []),
    ("config.action.reload", "restart", []),
    ("errors.retry.timeout", "0", []),
    ("errors.retry.delay.max.ms", "60000", []),
    ("errors.tolerance", "none", []),
    ("errors.log.enable", "false", []),
    ("errors.log.include.messages", "false", []),
    ("topic.creation.groups", "", []),
    ("exactly.once.support", "requested", []),
    ("transaction.boundary", "poll", []),
    ("transaction.boundary.interval.ms", None, []),
    ("offsets.storage.topic", None, []),
    ("file", "/tmp/x", []),
    ("topic", "t", []),
    ("batch.size", "2000", []),
]

BAD_SOURCE_ERRORS = {
    "name": ("", ["Invalid value  for configuration name: String may not be empty"]),
    "tasks.max": ("0", ["Invalid value 0 for configuration tasks.max: Value must be at least 1"]),
    "topic": ("a,b", []),  # Java 3.9 accepts a comma here; our connector refuses it at start()
    "batch.size": (None, ["Invalid value abc for configuration batch.size: Not a number of type INT"]),
    "file": (None, []),
}


def _compact(infos: dict[str, Any]) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    definitions = []
    values = []
    for config in infos["configs"]:
        d = config["definition"]
        definitions.append(
            (
                d["name"],
                d["type"],
                d["required"],
                d["default_value"],
                d["importance"],
                d["group"],
                d["width"],
                d["display_name"],
                d["order_in_group"],
            )
        )
        v = config["value"]
        values.append((v["name"], v["value"], v["errors"]))
    return definitions, values


def test_good_filestream_source_config_validates_as_java_reports_it(registry: PluginRegistry) -> None:
    props = {"connector.class": "FileStreamSource", "name": "src", "topic": "t", "file": "/tmp/x"}
    body = validate_connector_config(registry, props).to_json()
    assert list(body) == ["name", "error_count", "groups", "configs"]
    assert (body["name"], body["error_count"], body["groups"]) == ("FileStreamSource", 0, SOURCE_GROUPS)
    first = body["configs"][0]
    assert list(first) == ["definition", "value"]
    assert list(first["definition"]) == [
        "name", "type", "required", "default_value", "importance", "documentation",
        "group", "order_in_group", "width", "display_name", "dependents",
    ]  # fmt: skip
    assert first["value"] == {
        "name": "name",
        "value": "src",
        "recommended_values": [],
        "errors": [],
        "visible": True,
    }
    assert all(
        c["definition"]["dependents"] == [] and c["definition"]["documentation"] for c in body["configs"]
    )
    # The connector's version key recommends the installed versions (Java 4.x); the converters' are hidden
    # while no converter is named.
    hidden = {f"{part}.converter.plugin.version" for part in ("key", "value", "header")}
    assert all(c["value"]["visible"] == (c["value"]["name"] not in hidden) for c in body["configs"])
    assert {c["value"]["name"]: c["value"]["recommended_values"] for c in body["configs"]} == {
        c["value"]["name"]: [__version__] if c["value"]["name"] == "connector.plugin.version" else []
        for c in body["configs"]
    }
    assert _compact(body) == (SOURCE_DEFINITIONS, GOOD_SOURCE_VALUES)


def test_bad_filestream_source_config_reports_each_error_on_its_key(registry: PluginRegistry) -> None:
    props = {
        "connector.class": "FileStreamSource",
        "name": "",
        "tasks.max": "0",
        "topic": "a,b",
        "batch.size": "abc",
    }
    infos = validate_connector_config(registry, props)
    body = infos.to_json()
    assert (body["error_count"], body["groups"]) == (3, SOURCE_GROUPS)
    definitions, values = _compact(body)
    assert definitions == SOURCE_DEFINITIONS
    expected = [
        (n, *BAD_SOURCE_ERRORS[n]) if n in BAD_SOURCE_ERRORS else (n, v, e) for n, v, e in GOOD_SOURCE_VALUES
    ]
    expected[1] = ("connector.class", "FileStreamSource", [])
    assert values == expected
    assert infos.invalid_config_message() == (
        "Connector configuration is invalid and contains the following 3 error(s):\n"
        "Invalid value  for configuration name: String may not be empty\n"
        "Invalid value 0 for configuration tasks.max: Value must be at least 1\n"
        "Invalid value abc for configuration batch.size: Not a number of type INT\n"
        "You can also find the above list of errors at the endpoint "
        "`/connector-plugins/{connectorType}/config/validate`"
    )


SINK_TAIL = [
    ("topics", "TOPICS"),
    ("topics.regex", "REGEX"),
    ("errors.deadletterqueue.topic.name", ""),
    ("errors.deadletterqueue.topic.replication.factor", "3"),
    ("errors.deadletterqueue.context.headers.enable", "false"),
    ("file", None),
]


@pytest.mark.parametrize(
    ("props", "topics", "regex", "errors"),
    [
        ({"topics": "t"}, "t", "", {}),
        (
            {"topics": "t", "topics.regex": "x.*"},
            "t",
            "x.*",
            {
                n: ["topics and topics.regex are mutually exclusive options, but both are set."]
                for n in ("topics", "topics.regex")
            },
        ),
        (
            {},
            "",
            "",
            {n: ["Must configure one of topics or topics.regex"] for n in ("topics", "topics.regex")},
        ),
        (
            {"topics": " ", "topics.regex": ""},
            "",
            "",
            {n: ["Must configure one of topics or topics.regex"] for n in ("topics", "topics.regex")},
        ),
        ({"topics": " ", "topics.regex": "a"}, "", "a", {}),
        ({"topics": "a,,b, "}, "a,,b,", "", {}),
        (
            {"topics": "a, b", "errors.deadletterqueue.topic.name": "b"},
            "a,b",
            "",
            {
                "topics": [
                    "The DLQ topic 'b' may not be included in the list of topics ('topics=[a, b]') "
                    "consumed by the connector"
                ]
            },
        ),
        (
            {"topics.regex": "b.*", "errors.deadletterqueue.topic.name": "bq"},
            "",
            "b.*",
            {
                "topics.regex": [
                    "The DLQ topic 'bq' may not be matched by the regex for the topics "
                    "('topics.regex=b.*') consumed by the connector"
                ]
            },
        ),
        ({"topics.regex": "b", "errors.deadletterqueue.topic.name": "bq"}, "", "b", {}),
    ],
)
def test_sink_topics_rules(
    registry: PluginRegistry, props: dict[str, str], topics: str, regex: str, errors: dict[str, list[str]]
) -> None:
    config = {"connector.class": "FileStreamSink", "name": "snk", **props}
    body = validate_connector_config(registry, config).to_json()
    assert (body["name"], body["groups"]) == ("FileStreamSink", SINK_GROUPS)
    assert body["error_count"] == sum(len(e) for e in errors.values())
    definitions, values = _compact(body)
    assert [d[0] for d in definitions[:19]] == [d[0] for d in SOURCE_DEFINITIONS[:19]]
    assert definitions[19:21] == [
        ("topics", "LIST", False, "", "HIGH", "Common", "LONG", "Topics", 4),
        ("topics.regex", "STRING", False, "", "HIGH", "Common", "LONG", "Topics regex", 4),
    ]
    tail = {name: value for name, value, _ in values[19:]}
    dlq = props.get("errors.deadletterqueue.topic.name", "")
    expected_tail = {n: {"TOPICS": topics, "REGEX": regex}.get(str(v), v) for n, v in SINK_TAIL}
    expected_tail["errors.deadletterqueue.topic.name"] = dlq
    assert tail == expected_tail
    assert {name: errs for name, _, errs in values if errs} == errors


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        # Names are trimmed; empty-after-trim and control characters are rejected.
        ({"name": " a "}, {"name": ("a", [])}),
        ({"name": "   "}, {"name": ("", ["Invalid value  for configuration name: String may not be empty"])}),
        (
            {"name": "a\x01b\x7f"},
            {
                "name": (
                    "a\x01b\x7f",
                    [
                        "Invalid value a\x01b\x7f for configuration name: String may not contain "
                        "control sequences but had the following ASCII chars: 1, 127"
                    ],
                )
            },
        ),
        (
            {"name": ..., "topic": ...},
            {
                "name": (None, ['Missing required configuration "name" which has no default value.']),
                "topic": (None, ['Missing required configuration "topic" which has no default value.']),
            },
        ),
        # A JSON null is its own error for runtime keys; for the plugin's keys Java lets it pass.
        ({"name": None, "topic": None}, {"name": (None, [NULL_ERROR]), "topic": (None, [])}),
        (
            {
                "tasks.max": "abc",
                "tasks.max.enforce": "maybe",
                "errors.tolerance": "ALL",
                "config.action.reload": "NONE",
            },
            {
                "tasks.max": (
                    None,
                    [
                        "Invalid value abc for configuration tasks.max: Not a number of type INT",
                        "Invalid value null for configuration tasks.max: Value must be non-null",
                    ],
                ),
                "tasks.max.enforce": (
                    None,
                    [
                        "Invalid value maybe for configuration tasks.max.enforce: Expected value to "
                        "be either true or false"
                    ],
                ),
                "errors.tolerance": (
                    "ALL",
                    [
                        "Invalid value ALL for configuration errors.tolerance: String must be one "
                        "of: none, all"
                    ],
                ),
                "config.action.reload": (
                    "NONE",
                    [
                        "Invalid value NONE for configuration config.action.reload: String must be "
                        "one of: none, restart"
                    ],
                ),
            },
        ),
        (
            {
                "exactly.once.support": "x",
                "transaction.boundary": "bogus",
                "transaction.boundary.interval.ms": "-1",
                "offsets.storage.topic": "",
            },
            {
                "exactly.once.support": (
                    "x",
                    [
                        "Invalid value x for configuration exactly.once.support: String must be one "
                        "of (case insensitive): REQUIRED, REQUESTED"
                    ],
                ),
                "transaction.boundary": (
                    "bogus",
                    [
                        "Invalid value bogus for configuration transaction.boundary: String must be "
                        "one of (case insensitive): INTERVAL, POLL, CONNECTOR"
                    ],
                ),
                "transaction.boundary.interval.ms": (
                    "-1",
                    [
                        "Invalid value -1 for configuration transaction.boundary.interval.ms: Value "
                        "must be at least 0"
                    ],
                ),
                "offsets.storage.topic": (
                    "",
                    ["Invalid value  for configuration offsets.storage.topic: String must be non-empty"],
                ),
            },
        ),
        (
            {"exactly.once.support": "required"},
            {
                "exactly.once.support": (
                    "required",
                    [
                        "This worker does not have exactly-once source support enabled.",
                        "The connector does not support exactly-once semantics with the provided "
                        "configuration.",
                    ],
                )
            },
        ),
        (
            {"exactly.once.support": "REQUIRED", "file": "/f"},
            {
                "exactly.once.support": (
                    "REQUIRED",
                    ["This worker does not have exactly-once source support enabled."],
                )
            },
        ),
        (
            {"transaction.boundary": "connector"},
            {
                "transaction.boundary": (
                    "connector",
                    [
                        "The connector does not support connector-defined transaction boundaries "
                        "with the given configuration. Please reconfigure it to use a different "
                        "transaction boundary definition."
                    ],
                )
            },
        ),
        (
            {"transforms": "a,a", "topic.creation.groups": "g,g"},
            {
                "transforms": (
                    "a,a",
                    ["Invalid value [a, a] for configuration transforms: Duplicate alias provided."],
                ),
                "topic.creation.groups": (
                    "g,g",
                    [
                        "Invalid value [g, g] for configuration topic.creation.groups: Duplicate "
                        "alias provided."
                    ],
                ),
                "transforms.a.type": (
                    None,
                    ['Missing required configuration "transforms.a.type" which has no default value.'],
                ),
            },
        ),
        (
            {"topic": "", "batch.size": " 7 ", "key.converter": "not a class"},
            {
                "topic": ("", ["Invalid value  for configuration topic: String must be non-empty"]),
                "batch.size": ("7", []),
                "key.converter": (
                    None,
                    [
                        "Invalid value not a class for configuration key.converter: Class not a "
                        "class could not be found."
                    ],
                ),
            },
        ),
    ],
)
def test_source_config_errors_match_javas(
    registry: PluginRegistry, props: dict[str, Any], expected: dict[str, tuple[str | None, list[str]]]
) -> None:
    merged = {"connector.class": "FileStreamSource", "name": "x", "topic": "t", **props}
    config = {k: v for k, v in merged.items() if v is not ...}  # ... marks a key left out
    body = validate_connector_config(registry, config).to_json()
    values = {c["value"]["name"]: (c["value"]["value"], c["value"]["errors"]) for c in body["configs"]}
    for name, outcome in expected.items():
        assert values[name] == outcome, name
    assert body["error_count"] == sum(len(errors) for _, errors in expected.values())


def test_worker_side_checks_are_switched_by_the_caller(registry: PluginRegistry) -> None:
    props = {
        "connector.class": "FileStreamSource",
        "name": "x",
        "topic": "t",
        "file": "/f",
        "exactly.once.support": "required",
    }
    assert validate_connector_config(registry, props, exactly_once_source_enabled=True).error_count == 0
    sink = {
        "connector.class": "FileStreamSink",
        "name": "x",
        "topics": "a",
        "consumer.override.group.id": "workers",
    }
    first = validate_connector_config(registry, sink, worker_group_id="workers").to_json()["configs"][0]
    assert first == {
        "definition": None,
        "value": {
            "name": "consumer.override.group.id",
            "value": "workers",
            "recommended_values": [],
            "errors": ["Consumer group workers conflicts with Connect worker group workers"],
            "visible": True,
        },
    }
    named = {"connector.class": "FileStreamSink", "name": "workers", "topics": "a"}
    infos = validate_connector_config(registry, named, worker_group_id="connect-workers")
    assert infos.error_messages() == [
        "Consumer group for sink connector named workers conflicts with Connect worker group connect-workers"
    ]


def test_null_values_are_errors_and_undefined_keys_come_first(registry: PluginRegistry) -> None:
    props = {
        "connector.class": "FileStreamSource",
        "name": "x",
        "topic": "t",
        "zzz": None,
        "file": None,
        "tasks.max": None,
        "ok": "1",
    }
    body = validate_connector_config(registry, props).to_json()
    assert body["configs"][0] == {
        "definition": None,
        "value": {
            "name": "zzz",
            "value": None,
            "recommended_values": [],
            "errors": ["Null value can not be supplied as the configuration value."],
            "visible": True,
        },
    }
    values = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"]}
    assert values["tasks.max"] == [
        "Invalid value null for configuration tasks.max: Value must be non-null",
        "Null value can not be supplied as the configuration value.",
    ]
    # As in Java, the plugin's own result for "file" replaces the runtime's, null complaint included.
    assert values["file"] == []
    assert "ok" not in values
    assert body["error_count"] == 3


def test_validation_needs_a_known_connector_class(registry: PluginRegistry) -> None:
    with pytest.raises(ConnectorConfigError) as info:
        validate_connector_config(registry, {"name": "x", "topic": "t"})
    assert str(info.value) == "Connector config {name, topic} contains no connector type"
    with pytest.raises(PluginNotFoundError, match="which name matches Nope"):
        validate_connector_config(registry, {"connector.class": "Nope", "name": "x"})


_NO_CLASS_WITH_SECRETS = {
    "name": "db",
    "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
    'password="s3cret";',
    "database.password": "hunter2",
    "aws.secret.access.key": "AKIAxyz",  # PASSWORD in its plugin's ConfigDef, not by name: no plugin here
    "connector.clas": "FileStreamSink",  # the typo that usually causes the error
}


@pytest.mark.parametrize(
    "check",
    [
        pytest.param(lambda r, p: validate_connector_config(r, p), id="validate (REST answer)"),
        pytest.param(lambda r, p: parse_connector_config(r, p), id="parse (connector failure trace)"),
    ],
)
def test_no_connector_type_message_names_the_keys_and_no_value(registry: PluginRegistry, check: Any) -> None:
    with pytest.raises(ConnectorConfigError) as info:
        check(registry, _NO_CLASS_WITH_SECRETS)
    message = str(info.value)
    assert message == (
        "Connector config {aws.secret.access.key, connector.clas, database.password, name, sasl.jaas.config} "
        "contains no connector type"
    )
    for secret in ("s3cret", "hunter2", "AKIAxyz"):
        assert secret not in message


def test_config_infos_without_definition_or_value_serialize_as_null() -> None:
    infos = ConfigInfos("X", 0, [], [])
    assert infos.to_json() == {"name": "X", "error_count": 0, "groups": [], "configs": []}


def test_plugin_config_lists_plugin_keys_then_base_keys(registry: PluginRegistry) -> None:
    names = [k.name for k in plugin_config_key_infos(registry, "FileStreamSource")]
    assert names == ["file", "topic", "batch.size"] + [d[0] for d in SOURCE_DEFINITIONS[:24]]
    sink = plugin_config_key_infos(registry, "FileStreamSinkConnector")
    assert sink[0].to_json() == {
        "name": "file",
        "type": "STRING",
        "required": False,
        "default_value": None,
        "importance": "HIGH",
        "documentation": sink[0].documentation,
        "group": None,
        "width": "NONE",
        "display_name": "file",
        "dependents": [],
        "order_in_group": -1,
    }
    assert [k.name for k in sink[1:]] == sink_config_def().names()


def test_base_config_defs_layer_like_javas() -> None:
    common = common_config_def().names()
    assert source_config_def().names()[: len(common)] == common
    assert sink_config_def().names()[: len(common)] == common
    assert common_config_def().config_keys["tasks.max"].default == 1


# ---- names, plugin matching, parsing


@pytest.mark.parametrize(
    ("name", "errors"),
    [
        ("my-connector", []),
        ("sl/ash and spaces", []),
        ("  padded  ", []),
        ("ünïcødé", []),
        ("", ["Invalid value  for configuration name: String may not be empty"]),
        ("   ", ["Invalid value  for configuration name: String may not be empty"]),
        (None, ["Invalid value  for configuration name: String may not be empty"]),
        (
            "a\tb",
            [
                "Invalid value a\tb for configuration name: String may not contain control "
                "sequences but had the following ASCII chars: 9"
            ],
        ),
        (
            "x\u0085y\u009f",
            [
                "Invalid value x\u0085y\u009f for configuration name: String may not contain "
                "control sequences but had the following ASCII chars: 133, 159"
            ],
        ),
    ],
)
def test_connector_name_errors(name: str | None, errors: list[str]) -> None:
    assert connector_name_errors(name) == errors


def test_normalize_connector_name_trims_like_java() -> None:
    assert normalize_connector_name("  sp \n") == "sp"
    assert normalize_connector_name(None) == ""


@pytest.mark.parametrize(
    ("path", "body", "error"),
    [
        ("FileStreamSink", "FileStreamSink", None),
        ("FileStreamSinkConnector", "org.apache.kafka.connect.file.FileStreamSinkConnector", None),
        ("FileStreamSink", "org.apache.kafka.connect.file.FileStreamSinkConnector", None),
        ("FileStreamSink", None, None),
        (
            "FileStreamSource",
            "Nope",
            "Included connector type Nope does not match request type FileStreamSource",
        ),
        (
            "FileStreamSink",
            "FileStreamSource",
            "Included connector type FileStreamSource does not match request type FileStreamSink",
        ),
    ],
)
def test_plugin_mismatch_error(path: str, body: str | None, error: str | None) -> None:
    assert plugin_mismatch_error(path, body) == error


def test_parse_connector_config_gives_typed_values(registry: PluginRegistry) -> None:
    config = parse_connector_config(
        registry,
        {
            "connector.class": "FileStreamSink",
            "name": " snk ",
            "topics": "a, b",
            "tasks.max": "3",
            "transforms": "t",
            "transforms.t.type": "org.apache.kafka.connect.transforms.Filter",
        },
    )
    assert (config.name, config.type, config.tasks_max, config.tasks_max_enforce) == ("snk", "sink", 3, True)
    assert config.plugin.cls is FileStreamSinkConnector
    assert config.get("topics") == ["a", "b"]
    assert config.transforms == ["t"]
    assert config.get("file") is None


@pytest.mark.parametrize(
    ("props", "message"),
    [
        ({"connector.class": "FileStreamSink", "name": "x"}, "Must configure one of topics or topics.regex"),
        (
            {"connector.class": "FileStreamSink", "name": "x", "topics": "a", "tasks.max": "0"},
            "Value must be at least 1",
        ),
        ({"connector.class": "FileStreamSource", "name": "x"}, 'Missing required configuration "topic"'),
        (
            {"connector.class": "FileStreamSource", "name": "x", "topic": "t", "transforms": "a"},
            '"transforms.a.type"',
        ),
        (
            {
                "connector.class": "FileStreamSource",
                "name": "x",
                "topic": "t",
                "transforms": "a",
                "transforms.a.type": "x.Y",
            },
            "Invalid value x.Y for configuration transforms.a.type: Class x.Y could not be found.",
        ),
        (
            {
                "connector.class": "FileStreamSource",
                "name": "x",
                "topic": "t",
                "transforms": "a",
                "transforms.a.type": "org.apache.kafka.connect.transforms.RegexRouter",
                "transforms.a.regex": "x",
            },
            'Missing required configuration "transforms.a.replacement"',
        ),
    ],
)
def test_parse_connector_config_raises_the_first_problem(
    registry: PluginRegistry, props: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigValidationError, match=message):
        parse_connector_config(registry, props)
    with pytest.raises(ConnectorConfigError):
        parse_connector_config(registry, {"name": "x"})


def test_exactly_once_support_enum_is_the_connector_answer() -> None:
    assert FileStreamSourceConnector().exactly_once_support({"file": "/f"}) is ExactlyOnceSupport.SUPPORTED
