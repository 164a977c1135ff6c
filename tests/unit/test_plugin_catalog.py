"""The plugin catalogue behind ``GET /connector-plugins``: Java's listing order, lookups, config keys.

Expected orders and key lists are those an Apache Kafka Connect 3.9 worker answered (see
tests/golden/reference_findings.md and the probe in the branch's report).
"""

from __future__ import annotations

import pytest

from kconnect.connectors.file import FileStreamSinkConnector, FileStreamSourceConnector
from kconnect.rest.plugins import connectors_only, parse_config_body
from kconnect.runtime.errors import BadRequestError
from kconnect.runtime.plugins.catalog import PluginCatalog, UnknownPluginError, builtin_other_plugins
from kconnect.runtime.plugins.registry import PluginRegistry


@pytest.fixture
def catalog() -> PluginCatalog:
    registry = PluginRegistry()
    registry.register(FileStreamSourceConnector)
    registry.register(FileStreamSinkConnector)
    return PluginCatalog.of(registry)


def test_connectors_only_lists_connectors_sorted_by_class(catalog: PluginCatalog) -> None:
    listing = catalog.listing()
    assert [e["type"] for e in listing] == ["sink", "source"]
    assert listing == sorted(listing, key=lambda e: e["class"])
    assert all(set(e) == {"class", "type", "version"} for e in listing)


def test_all_kinds_come_in_javas_order(catalog: PluginCatalog) -> None:
    kinds = [e["type"] for e in catalog.listing(connectors_only=False)]
    # Connectors, then transformations, predicates, converters, header converters (only those kconnect
    # implements: runtime/plugins/transform_configs.py).
    assert (
        kinds
        == ["sink", "source"]
        + ["transformation"] * 20
        + ["predicate"] * 3
        + ["converter"] * 6  # Apache's three and Confluent's Avro, Protobuf, JSON Schema
        + ["header_converter"] * 4
    )
    listing = catalog.listing(connectors_only=False)
    assert {
        "class": "org.apache.kafka.connect.transforms.InsertField$Value",
        "type": "transformation",
        "version": listing[0]["version"],
    } in listing
    assert "org.apache.kafka.connect.transforms.predicates.TopicNameMatches" in [e["class"] for e in listing]
    converters = [e["class"] for e in catalog.listing(connectors_only=False) if e["type"] == "converter"]
    assert converters == sorted(converters)
    assert "org.apache.kafka.connect.json.JsonConverter" in converters


@pytest.mark.parametrize(
    ("text", "expected"),
    [(None, True), ("true", True), ("TRUE", True), ("false", False), ("xyz", False), ("", False)],
)
def test_connectors_only_parses_as_javas_boolean_valueof(text: str | None, expected: bool) -> None:
    assert connectors_only(text) is expected


@pytest.mark.parametrize(
    "name",
    [
        "FileStreamSource",
        "FileStreamSourceConnector",
        "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "kconnect.connectors.file.FileStreamSourceConnector",
    ],
)
def test_connector_config_keys_resolve_every_alias(catalog: PluginCatalog, name: str) -> None:
    keys = [k.name for k in catalog.config_keys(name)]
    # The plugin's own keys first, then the common ones, as Java lists them.
    assert keys[:3] == ["file", "topic", "batch.size"]
    assert keys[3:5] == ["name", "connector.class"]


def test_transformation_config_keys_are_javas(catalog: PluginCatalog) -> None:
    names = [
        k.name for k in catalog.config_keys("org.apache.kafka.connect.transforms.TimestampConverter$Value")
    ]
    assert names == ["field", "target.type", "format", "unix.precision", "replace.null.with.default"]
    assert [k.name for k in catalog.config_keys("TopicNameMatches")] == ["pattern"]


def test_converter_config_keys_match_javas_json_converter(catalog: PluginCatalog) -> None:
    for name in ("org.apache.kafka.connect.json.JsonConverter", "JsonConverter"):
        infos = catalog.config_keys(name)
        assert [k.name for k in infos] == [
            "converter.type",
            "schemas.enable",
            "schemas.cache.size",
            "schema.content",  # Apache Kafka 4.2, KIP-1054
            "decimal.format",
            "replace.null.with.default",
        ]
        schemas = infos[1].to_json()
        assert (
            schemas["default_value"] == "true"
            and schemas["group"] == "Schemas"
            and schemas["order_in_group"] == 0
        )
        assert infos[0].required is True


def test_unknown_plugin_is_reported_as_java_words_it(catalog: PluginCatalog) -> None:
    with pytest.raises(UnknownPluginError, match=r"^Unknown plugin Nope\.$"):
        catalog.config_keys("Nope")


def test_every_builtin_non_connector_plugin_has_a_config_definition() -> None:
    for plugin in builtin_other_plugins():
        keys = plugin.config_def().config_keys
        assert plugin.type in ("transformation", "predicate", "converter", "header_converter")
        if plugin.type in ("transformation", "predicate"):
            continue  # checked against Java's ConfigDefs in test_transforms.py
        if plugin.class_name.endswith("SimpleHeaderConverter"):
            assert not keys
        else:
            assert "converter.type" in keys


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        (b'{"a": "x", "b": 2, "c": true, "d": null}', {"a": "x", "b": "2", "c": "true", "d": None}),
        (b"{}", {}),
    ],
)
def test_validate_body_keeps_nulls_and_stringifies_scalars(
    raw: bytes, expected: dict[str, str | None]
) -> None:
    assert parse_config_body(raw) == expected


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"", "empty"),
        (b"[1]", "JSON object"),
        (b"{nope", "not valid JSON"),
        (b'{"a": {"b": 1}}', "value of 'a'"),
        (b'{"a": [1]}', "value of 'a'"),
        (b'{"name": "\\ud800"}', "not valid JSON"),  # a lone surrogate: valid JSON, no text
    ],
)
def test_validate_body_errors_say_what_is_wrong(raw: bytes, message: str) -> None:
    with pytest.raises(BadRequestError, match=message):
        parse_config_body(raw)
