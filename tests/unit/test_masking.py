"""Issue 23: a secret masked by its ConfigDef type, not only by its key's name (config/masking.py,
runtime/plugins/password_keys.py). A plugin may name its secret ``aws.secret.access.key`` or
``endpoint.token.value``, which the rule by name lets through; declared PASSWORD, its value must not reach
the failed-action log line or the validate answer, while an ordinary key's value still does."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest
from structlog.testing import capture_logs

from kconnect.config.masking import HIDDEN, is_sensitive, masked_repr
from kconnect.config.worker import WorkerConfig
from kconnect.runtime.group import herder as hd
from kconnect.runtime.group.learner import ActivatePreparedTask, PrepareTask
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import SinkConnector, SinkTask, Task
from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValue, Importance, Type
from kconnect.runtime.plugins.connector_validation import validate_connector_config
from kconnect.runtime.plugins.password_keys import config_password_keys, plugin_password_keys
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.worker import Worker
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, TargetState
from tests.support.cluster import worker_properties

AWS_SECRET = "wJalrXUtnFEMI-aws-secret"
TOKEN = "tok-123-endpoint"
REGION = "eu-west-3"
#: Keys whose names the rule by name does not recognise: only their declared type says they are secrets.
PASSWORD_KEYS = frozenset({"aws.secret.access.key", "endpoint.token.value"})


class VaultSink(SinkConnector):
    """A sink declaring two ordinarily named keys PASSWORD, and one ordinary key."""

    config_def_calls = 0

    def version(self) -> str:
        return "1.0"

    def config_def(self) -> ConfigDef:
        type(self).config_def_calls += 1
        return (
            ConfigDef()
            .define("aws.secret.access.key", Type.PASSWORD, None, None, Importance.HIGH, "S3 secret key.")
            .define("endpoint.token.value", Type.PASSWORD, None, None, Importance.HIGH, "Endpoint token.")
            .define("region", Type.STRING, "us-east-1", None, Importance.LOW, "S3 region.")
        )

    def start(self, props: dict[str, str]) -> None:
        pass

    def task_class(self) -> type[Task]:
        return SinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return []

    def stop(self) -> None:
        pass


class EchoingVaultSink(VaultSink):
    """A plugin whose ``validate`` answers each value as given, raw strings and not parsed ``Password``s."""

    def validate(self, props: Mapping[str, str | None]) -> list[ConfigValue]:
        return [ConfigValue(k, value=props.get(k)) for k in self.config_def().names()]


@pytest.fixture
def registry() -> PluginRegistry:
    plugins = PluginRegistry()
    plugins.register(VaultSink)
    plugins.register(EchoingVaultSink)
    return plugins


def _config(cls: type = VaultSink) -> dict[str, str]:
    return {
        "connector.class": f"{cls.__module__}.{cls.__qualname__}",
        "name": "vault",
        "topics": "t",
        "aws.secret.access.key": AWS_SECRET,
        "endpoint.token.value": TOKEN,
        "region": REGION,
    }


def _task_config() -> dict[str, str]:
    """A task's config: the connector's secrets, and no ``connector.class`` to find its ConfigDef by."""
    return {"task.class": "x.VaultTask", "aws.secret.access.key": AWS_SECRET, "region": REGION}


def test_the_names_alone_do_not_reveal_these_secrets() -> None:
    assert not any(is_sensitive(key) for key in PASSWORD_KEYS)


def test_a_plugins_password_keys_are_read_from_its_config_def_once_per_class() -> None:
    plugin_password_keys.cache_clear()
    VaultSink.config_def_calls = 0
    assert plugin_password_keys(VaultSink) == PASSWORD_KEYS
    assert plugin_password_keys(VaultSink) == PASSWORD_KEYS
    assert VaultSink.config_def_calls == 1


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        (_config(), PASSWORD_KEYS),
        ({**_config(), "connector.plugin.version": "[1.0,)"}, PASSWORD_KEYS),
        ({**_config(), "connector.class": "NoSuchConnector"}, frozenset()),  # masked by name only
        ({"name": "no-class"}, frozenset()),
    ],
)
def test_a_configs_password_keys_come_from_the_plugin_it_names(
    registry: PluginRegistry, config: dict[str, str], expected: frozenset[str]
) -> None:
    assert config_password_keys(registry, config) == expected


@pytest.mark.parametrize(
    "action",
    [
        hd.StartConnector("vault", _config(), TargetState.STARTED),
        hd.StartTask(TaskId("vault", 0), _task_config(), TargetState.STARTED),
        hd.PublishTaskConfigs("vault", (_task_config(), _task_config())),
    ],
)
def test_masked_repr_hides_the_password_keys_it_is_given(action: object) -> None:
    text = masked_repr(action, PASSWORD_KEYS)
    assert AWS_SECRET not in text and TOKEN not in text and HIDDEN in text
    assert REGION in text
    assert AWS_SECRET in masked_repr(action)  # without them the name rule lets the secret through


def _worker(registry: PluginRegistry) -> Worker:
    worker = Worker(WorkerConfig.from_properties(worker_properties("127.0.0.1:1", "g", 8083)), registry)
    worker.herder.snapshot = ClusterConfigSnapshot(connector_configs={"vault": _config()})
    return worker


def _fail(action: Any) -> None:
    raise RuntimeError("cannot start")


@pytest.mark.parametrize(
    "action",
    [
        hd.StartConnector("vault", _config(), TargetState.STARTED),
        # A task's config is masked with its connector's keys, found in the config snapshot.
        hd.StartTask(TaskId("vault", 0), _task_config(), TargetState.STARTED),
        PrepareTask(TaskId("vault", 1), _task_config(), 1),
        ActivatePreparedTask(TaskId("vault", 1), _task_config(), TargetState.STARTED, 1),
        hd.PublishTaskConfigs("vault", (_task_config(),)),
    ],
)
def test_the_failed_action_log_line_hides_values_of_password_typed_keys(
    registry: PluginRegistry, monkeypatch: pytest.MonkeyPatch, action: object
) -> None:
    with capture_logs() as logs:
        worker = _worker(registry)
        monkeypatch.setattr(worker, "_execute_one", _fail)
        worker._execute([action])  # type: ignore[list-item]
    [line] = [e for e in logs if e["event"] == "action failed"]
    assert AWS_SECRET not in str(line) and TOKEN not in str(line)
    assert REGION in str(line) and "cannot start" in str(line)


@pytest.mark.parametrize("cls", [VaultSink, EchoingVaultSink])
def test_validate_shows_password_typed_values_as_hidden(registry: PluginRegistry, cls: type) -> None:
    infos = validate_connector_config(registry, _config(cls)).to_json()
    values = {c["value"]["name"]: c["value"]["value"] for c in infos["configs"] if c["value"] is not None}
    assert values["aws.secret.access.key"] == HIDDEN and values["endpoint.token.value"] == HIDDEN
    assert values["region"] == REGION
    assert AWS_SECRET not in str(infos) and TOKEN not in str(infos)
