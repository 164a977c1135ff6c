"""Exactly-once source support (KIP-618): the pure decisions and the configuration checks."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.config.errors import ConfigError
from kconnect.config.worker import ExactlyOnceSourceSupport, WorkerConfig
from kconnect.connectors.verifiable import VerifiableSourceConnector
from kconnect.runtime.dataplane.exactly_once import (
    ExactlyOnce,
    TransactionBoundary,
    TransactionPolicy,
    commit_due,
    exactly_once,
    producer_settings,
    transaction_policy,
    transactional_id,
    zombie_ids,
)
from kconnect.runtime.plugins.api import ConnectorError, ExactlyOnceSupport, SourceConnector
from kconnect.runtime.plugins.connector_validation import validate_connector_config
from kconnect.runtime.plugins.registry import PluginRegistry
from tests.unit.test_worker_config import with_props

POLL = TransactionPolicy(TransactionBoundary.POLL, 60_000)
INTERVAL = TransactionPolicy(TransactionBoundary.INTERVAL, 5_000)


def test_transactional_id_is_javas_format() -> None:
    assert transactional_id("connect-cluster", "my-source", 3) == "connect-cluster-my-source-3"


@pytest.mark.parametrize(
    ("record", "expected"),
    [(None, []), (0, []), (2, ["g-c-0", "g-c-1"])],
)
def test_zombie_ids_cover_the_previous_generation(record: int | None, expected: list[str]) -> None:
    assert zombie_ids("g", "c", record) == expected


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({}, POLL),
        ({"transaction.boundary": "POLL"}, POLL),
        ({"transaction.boundary": "interval"}, TransactionPolicy(TransactionBoundary.INTERVAL, 60_000)),
        (
            {"transaction.boundary": "Interval", "transaction.boundary.interval.ms": "5000"},
            INTERVAL,
        ),
        ({"transaction.boundary": "connector"}, TransactionPolicy(TransactionBoundary.CONNECTOR, 60_000)),
    ],
)
def test_transaction_policy(config: dict[str, str], expected: TransactionPolicy) -> None:
    assert transaction_policy(config, 60_000) == expected


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (
            {"transaction.boundary": "batch"},
            "Invalid value batch for configuration transaction.boundary: String must be one of "
            "(case insensitive): poll, interval, connector",
        ),
        (
            {"transaction.boundary.interval.ms": "soon"},
            "Invalid value soon for configuration transaction.boundary.interval.ms: "
            "Not a number of type LONG",
        ),
        (
            {"transaction.boundary.interval.ms": "-1"},
            "Invalid value -1 for configuration transaction.boundary.interval.ms: Value must be at least 0",
        ),
    ],
)
def test_transaction_policy_rejects_with_key_value_and_allowed(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConnectorError) as info:
        transaction_policy(config, 60_000)
    assert str(info.value).startswith(message)


def test_a_connector_offsets_topic_is_refused_rather_than_silently_ignored() -> None:
    with pytest.raises(ConnectorError, match=r"offsets\.storage\.topic=own-offsets is not supported"):
        exactly_once("g", "c", 0, {"offsets.storage.topic": "own-offsets"}, 1000, "worker-offsets")
    same = exactly_once("g", "c", 0, {"offsets.storage.topic": "worker-offsets"}, 1000, "worker-offsets")
    assert same == ExactlyOnce("g-c-0", TransactionPolicy(TransactionBoundary.POLL, 1000), "worker-offsets")


def test_producer_settings_force_what_transactions_need() -> None:
    eos = ExactlyOnce("g-c-0", POLL, "offsets")
    settings = producer_settings(
        {"transactional.id": "mine", "enable.idempotence": "false", "linger.ms": "5"}, eos
    )
    assert settings == {
        "linger.ms": "5",
        "transactional.id": "g-c-0",
        "enable.idempotence": "true",
        "acks": "all",
        "partitioner": "murmur2_random",
    }


@pytest.mark.parametrize(
    ("policy", "open_records", "elapsed_s", "due"),
    [
        (POLL, 0, 100.0, False),  # nothing open: nothing to commit
        (POLL, 1, 0.0, True),  # every non-empty poll is its own transaction
        (INTERVAL, 0, 100.0, False),
        (INTERVAL, 10, 4.999, False),
        (INTERVAL, 10, 5.0, True),
        (INTERVAL, 1, 60.0, True),
    ],
)
def test_commit_due(policy: TransactionPolicy, open_records: int, elapsed_s: float, due: bool) -> None:
    assert commit_due(policy, open_records=open_records, now_s=1000.0 + elapsed_s, begun_s=1000.0) is due


@given(st.integers(min_value=1, max_value=10_000), st.floats(min_value=0, max_value=1e6))
def test_poll_boundary_commits_any_open_transaction(open_records: int, elapsed: float) -> None:
    assert commit_due(POLL, open_records=open_records, now_s=elapsed, begun_s=0.0)


@given(st.integers(min_value=0, max_value=100_000), st.floats(min_value=0, max_value=1e3))
def test_interval_boundary_commits_exactly_when_the_interval_has_passed(
    interval: int, elapsed: float
) -> None:
    policy = TransactionPolicy(TransactionBoundary.INTERVAL, interval)
    assert commit_due(policy, open_records=1, now_s=elapsed, begun_s=0.0) is (elapsed * 1000 >= interval)


# ------------------------------------------------------------------------------ configuration checks


def test_worker_property_is_validated_with_key_value_and_allowed_values() -> None:
    with pytest.raises(ConfigError) as info:
        WorkerConfig.from_properties(with_props(**{"exactly.once.source.support": "on"}))
    assert str(info.value) == (
        "Invalid value 'on' for configuration exactly.once.source.support: "
        "must be one of disabled, preparing, enabled (case-insensitive)"
    )
    cfg = WorkerConfig.from_properties(with_props(**{"exactly.once.source.support": "Enabled"}))
    assert cfg.exactly_once_source_support is ExactlyOnceSourceSupport.ENABLED


def test_verifiable_source_declares_exactly_once_support() -> None:
    assert VerifiableSourceConnector().exactly_once_support({}) is ExactlyOnceSupport.SUPPORTED


def test_plugin_api_defaults_match_javas() -> None:
    """Java's SourceConnector.exactlyOnceSupport() answers null and canDefineTransactionBoundaries
    UNSUPPORTED unless overridden."""
    connector = VerifiableSourceConnector
    assert SourceConnector.exactly_once_support(connector(), {}) is None
    assert connector().can_define_transaction_boundaries({}).value == "UNSUPPORTED"


def _errors(config: dict[str, str], enabled: bool) -> list[str]:
    infos = validate_connector_config(
        PluginRegistry.discover(file_connectors=True), config, exactly_once_source_enabled=enabled
    )
    return [e for c in infos.configs if c.value.name == "exactly.once.support" for e in c.value.errors]


def test_required_support_is_checked_against_the_connector_and_the_worker() -> None:
    stdin = {
        "name": "s",
        "connector.class": "FileStreamSource",
        "topic": "t",
        "exactly.once.support": "required",
    }
    assert _errors(stdin, True) == [
        "The connector does not support exactly-once semantics with the provided configuration."
    ]
    assert _errors({**stdin, "file": "/tmp/x"}, True) == []
    assert _errors({**stdin, "file": "/tmp/x"}, False) == [
        "This worker does not have exactly-once source support enabled."
    ]
    assert _errors({**stdin, "exactly.once.support": "requested"}, False) == []
    verifiable = {
        "name": "v",
        "connector.class": "VerifiableSource",
        "topic": "t",
        "exactly.once.support": "required",
    }
    assert _errors(verifiable, True) == []
