"""``connector.client.config.override.policy`` (KIP-1188's Allowlist among Java's policies): which client
overrides a connector config may carry, checked only for the clients the connector uses, as in Java."""

from __future__ import annotations

import pytest

from kconnect.runtime.plugins.connector_validation import validate_connector_config
from kconnect.runtime.plugins.override_policy import OverridePolicy, clients_used, refused_overrides
from kconnect.runtime.plugins.registry import PluginRegistry

SOURCE = {"connector.class": "FileStreamSource", "file": "/tmp/in.txt", "topic": "t", "name": "in"}
SINK = {"connector.class": "FileStreamSink", "file": "/tmp/out.txt", "topics": "t", "name": "out"}


@pytest.mark.parametrize(
    ("policy", "setting", "allowed"),
    [
        (OverridePolicy.of("All"), "linger.ms", True),
        (OverridePolicy.of("None"), "linger.ms", False),
        (OverridePolicy.of("None"), "sasl.jaas.config", False),
        (OverridePolicy.of("Principal"), "sasl.jaas.config", True),
        (OverridePolicy.of("Principal"), "security.protocol", True),
        (OverridePolicy.of("Principal"), "linger.ms", False),
        (OverridePolicy.of("Allowlist"), "linger.ms", False),  # empty by default: nothing
        (OverridePolicy.of("Allowlist", ["linger.ms", "acks"]), "linger.ms", True),
        (OverridePolicy.of("Allowlist", ["linger.ms"]), "sasl.jaas.config", False),
    ],
)
def test_what_each_policy_allows(policy: OverridePolicy, setting: str, allowed: bool) -> None:
    assert policy.allows(setting) is allowed


def test_an_unknown_policy_is_refused_naming_the_choices() -> None:
    with pytest.raises(ValueError, match="All, None, Principal, Allowlist"):
        OverridePolicy.of("Some")


@pytest.mark.parametrize(
    ("kind", "props", "clients"),
    [
        ("source", {}, ("producer",)),
        ("source", {"topic.creation.default.partitions": "1"}, ("producer", "admin")),
        ("sink", {}, ("consumer",)),
        ("sink", {"errors.deadletterqueue.topic.name": " "}, ("consumer",)),
        ("sink", {"errors.deadletterqueue.topic.name": "dlq"}, ("consumer", "producer", "admin")),
    ],
)
def test_only_the_clients_a_connector_uses_count(
    kind: str, props: dict[str, str], clients: tuple[str, ...]
) -> None:
    assert clients_used(kind, props) == clients  # type: ignore[arg-type]


def test_refused_overrides_name_the_key_in_javas_words() -> None:
    props = {**SINK, "consumer.override.max.poll.records": "10", "producer.override.linger.ms": "5"}
    refused = refused_overrides(OverridePolicy.of("Allowlist", ["auto.offset.reset"]), "sink", props)
    # The producer override does not count: this sink has no dead letter queue, so no producer.
    assert refused == [
        (
            "consumer.override.max.poll.records",
            "The 'Allowlist' policy does not allow 'max.poll.records' to be overridden in the connector "
            "configuration.",
        )
    ]


def test_validation_reports_a_refused_override_on_its_key_and_counts_it() -> None:
    registry = PluginRegistry.discover(file_connectors=True)
    config = {**SOURCE, "producer.override.linger.ms": "5", "producer.override.acks": "all"}
    allowed = validate_connector_config(registry, config)  # the default policy, All
    assert allowed.error_count == 0
    infos = validate_connector_config(
        registry, config, override_policy=OverridePolicy.of("Allowlist", ["acks"])
    )
    errors = {c.value.name: c.value.errors for c in infos.configs if c.value.errors}
    assert infos.error_count == 1
    assert errors == {
        "producer.override.linger.ms": [
            "The 'Allowlist' policy does not allow 'linger.ms' to be overridden in the connector "
            "configuration."
        ]
    }
