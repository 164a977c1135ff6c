"""KIP-891 plugin versions: requirement parsing (Maven's range syntax as Connect reads it), choosing the
newest matching version, and a registry holding two versions of one connector class."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.plugins.api import SourceConnector, SourceRecord, SourceTask, Task
from kconnect.runtime.plugins.config_def import ConfigDef
from kconnect.runtime.plugins.connector_config import connector_version, plugin_version_names
from kconnect.runtime.plugins.connector_validation import parse_connector_config, validate_connector_config
from kconnect.runtime.plugins.plugin_versions import (
    InvalidVersionSpec,
    newest,
    requirement,
    version_key,
)
from kconnect.runtime.plugins.registry import PluginNotFoundError, PluginRegistry, PluginVersionError

VERSIONS = ["0.9", "1.0.0", "1.2.0", "1.10.0", "2.0.0"]


@pytest.mark.parametrize(
    ("spec", "chosen"),
    [
        (None, "2.0.0"),
        ("latest", "2.0.0"),
        ("1.2.0", "1.2.0"),  # a bare version is a hard requirement, as Connect reads it
        ("1.2", "1.2.0"),  # PEP 440: 1.2 == 1.2.0
        ("1.3", None),
        ("[1.0.0,2.0.0)", "1.10.0"),  # 1.10 comes after 1.2: numbers as numbers
        ("[1.0.0,2.0.0]", "2.0.0"),
        ("(,1.0.0]", "1.0.0"),
        ("(,1.0.0)", "0.9"),
        ("[1.2.0,)", "2.0.0"),
        ("(1.2.0,1.10.0)", None),
        ("[1.0.0]", "1.0.0"),
        ("[0.9,1.0.0),(1.2.0,1.10.0]", "1.10.0"),  # either range
        ("[0.9,1.0.0),[1.2.0]", "1.2.0"),
        (" [1.0.0,1.2.0] ", "1.2.0"),
    ],
)
def test_the_newest_version_the_requirement_contains_is_chosen(spec: str | None, chosen: str | None) -> None:
    assert newest(VERSIONS, requirement(spec)) == chosen


@pytest.mark.parametrize(
    ("spec", "words"),
    [
        ("", "required"),
        ("[1.0", "Unbounded range"),
        ("1.0]", "stray bracket"),
        ("[2.0,1.0]", "defies version ordering"),
        ("(1.0,1.0)", "identical boundaries"),
        ("[1.0,)x", "fully-qualified sets"),
        ("[1.0,),", "Unbounded range"),
        ("[,1.0]", "unbounded end"),
        ("(1.0)", "surrounded by []"),
        ("1.0 2.0", "stray bracket"),
    ],
)
def test_a_malformed_requirement_says_what_is_wrong(spec: str, words: str) -> None:
    with pytest.raises(InvalidVersionSpec, match=re.escape(words)):
        requirement(spec)


@given(
    st.lists(st.integers(0, 30), min_size=1, max_size=4), st.lists(st.integers(0, 30), min_size=1, max_size=4)
)
def test_versions_order_numerically_part_by_part(a: list[int], b: list[int]) -> None:
    left, right = ".".join(map(str, a)), ".".join(map(str, b))
    trimmed = (a + [0] * 4)[:4], (b + [0] * 4)[:4]  # PEP 440 pads with zeros
    assert (version_key(left) < version_key(right)) == (trimmed[0] < trimmed[1])


@given(st.lists(st.sampled_from(VERSIONS), min_size=1, unique=True), st.sampled_from(VERSIONS))
def test_a_hard_requirement_picks_that_version_or_none(installed: list[str], wanted: str) -> None:
    assert newest(installed, requirement(wanted)) == (wanted if wanted in installed else None)


def test_a_non_pep440_version_still_orders_and_matches() -> None:
    assert version_key("1.0.0-SNAPSHOT") > version_key("9.9")  # after every PEP 440 version
    assert newest(["1.0.0-SNAPSHOT", "1.0.1-SNAPSHOT"], requirement("[1.0.0-SNAPSHOT]")) == "1.0.0-SNAPSHOT"


# ---- a registry with two versions of one class


def _connector(version: str, marker: str) -> type[SourceConnector]:
    """A class named like every other version of it, as two installations of one plugin are."""

    class _Task(SourceTask):
        def version(self) -> str:
            return version

        def start(self, props: dict[str, str]) -> None:
            pass

        def poll(self) -> list[SourceRecord] | None:
            return None

        def stop(self) -> None:
            pass

    class VersionedSourceConnector(SourceConnector):
        MARKER = marker

        def version(self) -> str:
            return version

        def config_def(self) -> ConfigDef:
            return ConfigDef()

        def start(self, props: dict[str, str]) -> None:
            pass

        def task_class(self) -> type[Task]:
            return _Task

        def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
            return [{}]

        def stop(self) -> None:
            pass

    VersionedSourceConnector.__module__ = "versioned_plugin"
    VersionedSourceConnector.__qualname__ = "VersionedSourceConnector"
    return VersionedSourceConnector


def marker(cls: type[Any]) -> str:
    """Which of the same-named classes this is."""
    return str(cls.__dict__["MARKER"])


@pytest.fixture
def registry() -> PluginRegistry:
    registry = PluginRegistry()
    registry.register(_connector("1.0.0", "old"), "/plugins/v1")
    registry.register(_connector("2.0.0", "new"), "/plugins/v2")
    return registry


def test_both_versions_are_listed_and_resolved_by_any_name(registry: PluginRegistry) -> None:
    assert [(d.class_name, d.version) for d in registry.plugins()] == [
        ("versioned_plugin.VersionedSourceConnector", "1.0.0"),
        ("versioned_plugin.VersionedSourceConnector", "2.0.0"),
    ]
    assert registry.versions("VersionedSource") == ["1.0.0", "2.0.0"]
    assert marker(registry.connector_class("VersionedSource")) == "new"
    assert marker(registry.connector_class("VersionedSourceConnector", "1.0.0")) == "old"
    assert marker(registry.connector_class("versioned_plugin.VersionedSourceConnector", "(,2.0.0)")) == "old"
    assert registry.find("VersionedSource", "1.0.0").location == "/plugins/v1"


def test_no_matching_version_names_the_versions_there_are(registry: PluginRegistry) -> None:
    with pytest.raises(PluginVersionError) as caught:
        registry.find("VersionedSource", "[3.0,)")
    assert str(caught.value) == (
        "Plugin versioned_plugin.VersionedSourceConnector not found that matches the version range [3.0,), "
        "available versions: [1.0.0, 2.0.0]"
    )
    assert caught.value.available == ["1.0.0", "2.0.0"]
    with pytest.raises(PluginNotFoundError):
        registry.find("NoSuchConnector", "1.0.0")


def test_the_same_version_twice_keeps_the_first_and_reports_the_second(registry: PluginRegistry) -> None:
    registry.register(_connector("2.0.0", "impostor"), "/plugins/elsewhere")
    assert marker(registry.connector_class("VersionedSource", "2.0.0")) == "new"
    assert any("2.0.0 from /plugins/elsewhere ignored" in e for e in registry.load_errors)


def test_validation_reports_an_unmet_connector_version_on_its_key(registry: PluginRegistry) -> None:
    props = {"name": "v", "connector.class": "VersionedSource", "topic": "t"}
    assert (
        validate_connector_config(registry, {**props, "connector.plugin.version": "1.0.0"}).error_count == 0
    )
    infos = validate_connector_config(registry, {**props, "connector.plugin.version": "9.9"}).to_json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}
    unmet = [
        "Plugin versioned_plugin.VersionedSourceConnector not found that matches the version range "
        "[9.9,9.9], available versions: [1.0.0, 2.0.0]"
    ]
    # On the class and the version key, as Java 4.x reports it.
    assert errors == {"connector.class": unmet, "connector.plugin.version": unmet}
    assert infos["error_count"] == 2
    bad = validate_connector_config(registry, {**props, "connector.plugin.version": "[1.0"}).to_json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in bad["configs"] if c["value"]["errors"]}
    assert errors == {
        "connector.plugin.version": [
            "Invalid value [1.0 for configuration connector.plugin.version: Unbounded range: [1.0"
        ]
    }


def test_the_connector_version_key_defaults_to_the_newest_and_recommends_every_installed_one(
    registry: PluginRegistry,
) -> None:
    props = {"name": "v", "connector.class": "VersionedSource", "topic": "t"}
    configs = validate_connector_config(registry, props).to_json()["configs"]
    entry = next(c for c in configs if c["definition"]["name"] == "connector.plugin.version")
    assert entry["definition"]["default_value"] == "2.0.0"
    assert entry["value"] == {
        "name": "connector.plugin.version",
        "value": "2.0.0",
        "recommended_values": ["1.0.0", "2.0.0"],
        "errors": [],
        "visible": True,
    }


def test_the_deprecated_version_names_are_read_as_the_4x_names_with_a_warning(
    registry: PluginRegistry, caplog: pytest.LogCaptureFixture
) -> None:
    """Configs written for kconnect before it took Apache Kafka 4.1's names still select their versions."""
    props = {"name": "v", "connector.class": "VersionedSource", "topic": "t", "connector.version": "1.0.0"}
    with caplog.at_level("WARNING"):
        infos = validate_connector_config(registry, props).to_json()
    values = {c["value"]["name"]: c["value"] for c in infos["configs"]}
    assert infos["error_count"] == 0 and values["connector.plugin.version"]["value"] == "1.0.0"
    assert "connector.version" not in values
    assert any(
        "connector.version is deprecated" in r.getMessage() and "connector.plugin.version" in r.getMessage()
        for r in caplog.records
    )
    unmet = validate_connector_config(registry, {**props, "connector.version": "9.9"}).to_json()
    assert unmet["error_count"] == 2
    # The 4.x name wins where both are set.
    both = {**props, "connector.version": "9.9", "connector.plugin.version": "1.0.0"}
    assert validate_connector_config(registry, both).error_count == 0
    assert parse_connector_config(registry, props).plugin.version == "1.0.0"
    assert parse_connector_config(registry, both).plugin.version == "1.0.0"
    converters = {
        **props,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "key.converter.version": "[99,)",
        "transforms": "f",
        "transforms.f.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.f.static.field": "x",
        "transforms.f.version": "0.0.1",
    }
    errors = {
        c["value"]["name"]
        for c in validate_connector_config(registry, converters).to_json()["configs"]
        if c["value"]["errors"]
    }
    assert errors == {"key.converter.plugin.version", "transforms.f.plugin.version"}
    assert connector_version({"connector.version": "1.0.0"}) == "1.0.0"
    assert connector_version({"connector.version": "1.0.0", "connector.plugin.version": "2.0.0"}) == "2.0.0"
    named = plugin_version_names(converters)
    assert (
        named["key.converter.plugin.version"] == "[99,)" and named["transforms.f.plugin.version"] == "0.0.1"
    )
    assert named["connector.plugin.version"] == "1.0.0" and named["key.converter.version"] == "[99,)"
    assert plugin_version_names({"x.version": "1"}) == {"x.version": "1"}  # only the plugins' keys


def test_builtin_converters_and_transforms_come_in_the_runtimes_version(registry: PluginRegistry) -> None:
    from kconnect.runtime import __version__

    props = {
        "name": "v",
        "connector.class": "VersionedSource",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.plugin.version": __version__,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "key.converter.plugin.version": "[99,)",
        "transforms": "f",
        "transforms.f.type": "org.apache.kafka.connect.transforms.InsertField$Value",
        "transforms.f.static.field": "x",
        "transforms.f.plugin.version": "0.0.1",
    }
    infos = validate_connector_config(registry, props).to_json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in infos["configs"] if c["value"]["errors"]}
    assert errors == {
        "key.converter.plugin.version": [
            "Plugin org.apache.kafka.connect.storage.StringConverter not found that matches the version "
            f"range [99,), available versions: [{__version__}]"
        ],
        "transforms.f.plugin.version": [
            "Plugin org.apache.kafka.connect.transforms.InsertField$Value not found that matches the version "
            f"range [0.0.1,0.0.1], available versions: [{__version__}]"
        ],
    }


def test_a_stored_config_runs_the_version_it_names(registry: PluginRegistry) -> None:
    props = {"name": "v", "connector.class": "VersionedSource", "connector.plugin.version": "1.0.0"}
    assert parse_connector_config(registry, props).plugin.version == "1.0.0"
    with pytest.raises(PluginVersionError):
        parse_connector_config(registry, {**props, "connector.plugin.version": "3.0"})


def test_an_installation_directory_is_loaded_at_its_distributions_version(tmp_path: Path) -> None:
    """A ``pip install --target`` layout made by hand: a package plus its dist-info with an entry point."""
    for version, which in (("1.0.0", "old"), ("2.0.0", "new")):
        site = tmp_path / f"twin-{version}"
        package = site / "twin_plugin_pkg"
        package.mkdir(parents=True)
        (package / "__init__.py").write_text(
            "from kconnect.runtime.plugins.api import SourceConnector\n"
            "class TwinSourceConnector(SourceConnector):\n"
            f"    MARKER = {which!r}\n"
            "    def version(self): return 'ignored: the distribution says'\n"
            "    def config_def(self):\n"
            "        from kconnect.runtime.plugins.config_def import ConfigDef\n"
            "        return ConfigDef()\n"
            "    def start(self, props): pass\n"
            "    def task_class(self): raise NotImplementedError\n"
            "    def task_configs(self, max_tasks): return []\n"
            "    def stop(self): pass\n"
        )
        info = site / f"twin_plugin-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: twin-plugin\nVersion: {version}\n")
        (info / "entry_points.txt").write_text(
            "[kconnect.plugins]\nTwinSourceConnector = twin_plugin_pkg:TwinSourceConnector\n"
        )
    registry = PluginRegistry()
    registry.load_path(tmp_path)  # a plugin.path entry holding one directory per installed version
    assert registry.load_errors == []
    assert registry.versions("TwinSource") == ["1.0.0", "2.0.0"]
    assert marker(registry.connector_class("TwinSource", "1.0.0")) == "old"
    assert marker(registry.connector_class("TwinSource")) == "new"
    assert registry.find("TwinSource", "1.0.0").location == str(tmp_path / "twin-1.0.0")


def test_plugin_config_listing_takes_a_version(registry: PluginRegistry) -> None:
    """``GET /connector-plugins/{plugin}/config?version=...``: the keys of the version asked for."""
    from kconnect.runtime import __version__
    from kconnect.runtime.plugins.catalog import PluginCatalog

    catalog = PluginCatalog.of(registry)
    names = [k.name for k in catalog.config_keys("VersionedSource", "1.0.0")]
    assert "connector.plugin.version" in names and "connector.version" not in names
    with pytest.raises(PluginVersionError):
        catalog.config_keys("VersionedSource", "9.9")
    with pytest.raises(InvalidVersionSpec):
        catalog.config_keys("VersionedSource", "[1.0")
    json_converter = "org.apache.kafka.connect.json.JsonConverter"
    assert catalog.config_keys(json_converter, __version__) == catalog.config_keys(json_converter)
    with pytest.raises(PluginVersionError, match="available versions"):
        catalog.config_keys(json_converter, "[99,)")
