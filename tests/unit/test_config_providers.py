"""Config providers for connector configs (issue 23 row 6), the masking of credentials, and the FileStream
connectors' opt-in (row 2): config/config_providers.py, config/masking.py, the registry's gate."""

from __future__ import annotations

from pathlib import Path

import pytest

from kconnect.config.config_providers import (
    AllowedPaths,
    ConfigProviders,
    references,
    reverse_transform,
)
from kconnect.config.errors import ConfigError
from kconnect.config.masking import HIDDEN, is_sensitive, masked, masked_repr
from kconnect.runtime.group import herder as hd
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.connector_validation import validate_connector_config
from kconnect.runtime.plugins.override_policy import OverridePolicy
from kconnect.runtime.plugins.registry import PluginNotFoundError, PluginRegistry
from kconnect.runtime.storage.config_log import TargetState

FILE = "org.apache.kafka.common.config.provider.FileConfigProvider"
DIRECTORY = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"
ENV = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("${file:/a/b.properties:pw}", [("file", "/a/b.properties", "pw")]),
        ("${env:HOME}", [("env", None, "HOME")]),
        ("${dir:/s:k:with:colons}", [("dir", "/s", "k:with:colons")]),
        ("x${a:k}y${b:p:q}z", [("a", None, "k"), ("b", "p", "q")]),
        ("${nocolon}", []),
        ("plain", []),
    ],
)
def test_references_follow_kafkas_grammar(text: str, expected: list[tuple[str, str | None, str]]) -> None:
    assert [(r.provider, r.path, r.key) for r in references(text)] == expected


@pytest.fixture
def secrets(tmp_path: Path) -> Path:
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    (allowed / "db.properties").write_text("password=s3cr3t-file\nuser=app\n")
    (allowed / "mounted").mkdir()
    (allowed / "mounted" / "token").write_text("s3cr3t-dir")
    (tmp_path / "outside.properties").write_text("password=must-not-leak\n")
    (allowed / "link.properties").symlink_to(tmp_path / "outside.properties")
    return tmp_path


def _providers(root: Path, pattern: str | None = "^KC_") -> ConfigProviders:
    allowed = str(root / "allowed")
    settings = {
        "file.class": FILE,
        "file.param.allowed.paths": allowed,
        "dir.class": DIRECTORY,
        "dir.param.allowed.paths": allowed,
        "env.class": ENV,
        "open.class": FILE,
        "vault.class": "com.example.VaultConfigProvider",
    }
    if pattern is not None:
        settings["env.param.allowlist.pattern"] = pattern
    environ = {"KC_TOKEN": "s3cr3t-env", "HOME": "/root"}
    return ConfigProviders.of_worker(["file", "dir", "env", "open", "vault"], settings, environ)


@pytest.mark.parametrize(
    ("value", "resolved", "problem"),
    [
        ("${file:ALLOWED/db.properties:password}", "s3cr3t-file", None),
        ("u=${file:ALLOWED/db.properties:user};p=${env:KC_TOKEN}", "u=app;p=s3cr3t-env", None),
        ("${dir:ALLOWED/mounted:token}", "s3cr3t-dir", None),
        ("${open:ROOT/outside.properties:password}", "must-not-leak", None),  # no allowed.paths: anywhere
        ("${file:ROOT/outside.properties:password}", None, "is not allowed: it must lie under allowed.paths"),
        ("${file:ALLOWED/../outside.properties:password}", None, "is not allowed"),
        ("${file:ALLOWED/link.properties:password}", None, "is not allowed"),  # a link out is refused
        ("${file:allowed/db.properties:password}", None, "is not allowed"),  # relative: under no root
        ("${dir:ROOT:outside.properties}", None, "is not allowed"),
        ("${file:ALLOWED/db.properties:nope}", None, "provider file has no key nope"),
        ("${file:ALLOWED/missing.properties:k}", None, "could not read properties from file"),
        ("${env:HOME}", None, "provider env has no key HOME"),  # not matched by allowlist.pattern
        ("${env:x:KC_TOKEN}", None, "Path is not supported for EnvVarConfigProvider"),
        ("${undeclared:p:k}", "${undeclared:p:k}", None),  # not a declared provider: left as written
        ("${vault:secret/db:pw}", "${vault:secret/db:pw}", None),  # a class kconnect lacks: left alone
    ],
)
def test_references_resolve_or_say_why_not(
    secrets: Path, value: str, resolved: str | None, problem: str | None
) -> None:
    text = value.replace("ALLOWED", str(secrets / "allowed")).replace("ROOT", str(secrets))
    resolution = _providers(secrets).resolve({"k": text, "other": "plain"})
    assert resolution.values["other"] == "plain"
    if problem is None:
        assert resolution.values["k"] == resolved
        assert resolution.problems == {}
    else:
        assert problem in resolution.problems["k"][0]
        assert resolution.values["k"] == text  # unresolved, not half-resolved
        assert "must-not-leak" not in resolution.problems["k"][0]


def test_env_allowlist_defaults_to_every_variable_and_finds_anywhere_in_the_name(secrets: Path) -> None:
    assert _providers(secrets, None).resolve({"k": "${env:HOME}"}).values["k"] == "/root"
    found = _providers(secrets, "TOK").resolve({"k": "${env:KC_TOKEN}"})
    assert found.values["k"] == "s3cr3t-env"


@pytest.mark.parametrize("roots", ["relative/dir", "/does/not/exist", "/tmp,relative"])
def test_allowed_paths_must_be_absolute_and_exist(roots: str) -> None:
    with pytest.raises(ConfigError) as caught:
        ConfigProviders.of_worker(["f"], {"f.class": FILE, "f.param.allowed.paths": roots}, {})
    assert caught.value.key == "config.providers.f.param.allowed.paths"


def test_allowed_paths_compare_whole_components(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    allowed = AllowedPaths.parse(str(tmp_path / "a"))
    assert allowed.allowed(str(tmp_path / "a" / "x"))
    assert not allowed.allowed(str(tmp_path / "ab" / "x"))
    assert AllowedPaths.parse("").allowed("relative/too")


def test_reverse_transform_puts_references_back_into_task_configs() -> None:
    raw = {"file": "${f:/s:path}", "pw": "${f:/s:pw}", "topic": "t", "n": None}
    resolved = {"file": "/data/in.txt", "pw": "hunter2", "topic": "t"}
    tasks = [
        {"file": "/data/in.txt", "topic": "t", "batch.size": "10"},
        {"connection.password": "hunter2", "topic": "t"},  # renamed by the connector
    ]
    assert reverse_transform(raw, resolved, tasks) == [
        {"file": "${f:/s:path}", "topic": "t", "batch.size": "10"},
        {"connection.password": "${f:/s:pw}", "topic": "t"},
    ]


@pytest.mark.parametrize(
    ("key", "sensitive"),
    [
        ("sasl.jaas.config", True),
        ("producer.override.sasl.jaas.config", True),
        ("consumer.override.ssl.keystore.password", True),
        ("connection.password", True),
        ("aws.secret", True),
        ("client.secret", True),
        ("api.token", True),
        ("file", False),
        ("topic", False),
        ("sasl.mechanism", False),
        ("tasks.max", False),
    ],
)
def test_credentials_are_recognised_by_name(key: str, sensitive: bool) -> None:
    assert is_sensitive(key) is sensitive
    assert masked({key: "v"})[key] == (HIDDEN if sensitive else "v")


def test_a_failed_actions_log_line_masks_credentials() -> None:
    config = {"connector.class": "X", "connection.password": "hunter2", "sasl.jaas.config": "pw=hunter2"}
    text = masked_repr(hd.StartTask(TaskId("c", 0), config, TargetState.STARTED))
    assert "hunter2" not in text
    assert "connector.class" in text and "StartTask(" in text


def test_validate_hides_a_refused_overrides_value_and_reports_unresolvable_references(secrets: Path) -> None:
    registry = PluginRegistry.discover(file_connectors=True)
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="hunter2";'
    config = {
        "connector.class": "FileStreamSource",
        "name": "src",
        "topic": "t",
        "file": f"${{file:{secrets}/outside.properties:password}}",
        "producer.override.sasl.jaas.config": jaas,
    }
    infos = validate_connector_config(
        registry,
        config,
        override_policy=OverridePolicy.of("None"),
        config_providers=_providers(secrets),
    ).to_json()
    values = {c["value"]["name"]: c["value"] for c in infos["configs"] if c["value"] is not None}
    assert values["producer.override.sasl.jaas.config"]["value"] == HIDDEN
    assert values["producer.override.sasl.jaas.config"]["errors"]
    assert "is not allowed" in values["file"]["errors"][0]
    assert "hunter2" not in str(infos) and "must-not-leak" not in str(infos)


def test_the_filestream_connectors_load_only_when_enabled() -> None:
    off = PluginRegistry.discover()
    names = [p["class"] for p in off.plugin_info()]
    assert not any("FileStream" in name for name in names)
    for name in ("FileStreamSource", "org.apache.kafka.connect.file.FileStreamSinkConnector"):
        with pytest.raises(PluginNotFoundError, match=r"file\.connectors\.enable=true"):
            off.find(name)
    on = PluginRegistry.discover(file_connectors=True)
    assert on.find("FileStreamSource").class_name == "kconnect.connectors.file.FileStreamSourceConnector"


def test_the_worker_key_defaults_to_off() -> None:
    from kconnect.config.worker import WorkerConfig

    base = {
        "group.id": "g",
        "config.storage.topic": "c",
        "offset.storage.topic": "o",
        "status.storage.topic": "s",
        "key.converter": "json",
        "value.converter": "json",
    }
    assert WorkerConfig.from_properties(base).file_connectors_enable is False
    on = WorkerConfig.from_properties({**base, "file.connectors.enable": "true"})
    assert on.file_connectors_enable is True
