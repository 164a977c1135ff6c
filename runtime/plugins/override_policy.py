"""Which Kafka client settings a connector config may override (``connector.client.config.override.policy``).

Why a module of its own: Apache Kafka Connect checks ``producer.override.*``, ``consumer.override.*`` and
``admin.override.*`` against the worker's policy when a connector config is validated (so a create or an
update that breaks it is refused with the key named), and the rule is the same wherever it is asked.
The policies are Java's: ``All`` (the default up to Kafka 4.x), ``None``, ``Principal`` (only the client
principal: ``sasl.jaas.config``, ``sasl.mechanism``, ``security.protocol``) and ``Allowlist`` (KIP-1188,
Kafka 4.2: the names in ``connector.client.config.override.allowlist``, none by default). Only the
clients the connector uses are checked, as in Java: a source's producer, a sink's consumer, a source's
admin client when it configures topic creation, and a sink's producer and admin client when it has a dead
letter queue.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from kconnect.config.worker import WorkerConfig

PRINCIPAL_SETTINGS = frozenset({"sasl.jaas.config", "sasl.mechanism", "security.protocol"})
POLICIES = ("All", "None", "Principal", "Allowlist")

ConnectorKind = Literal["source", "sink"]


@dataclass(frozen=True)
class OverridePolicy:
    """The worker's policy; ``allowlist`` counts only under ``Allowlist``."""

    name: str = "All"
    allowlist: frozenset[str] = frozenset()

    @classmethod
    def of(cls, name: str, allowlist: Iterable[str] = ()) -> OverridePolicy:
        if name not in POLICIES:
            raise ValueError(f"unknown override policy {name!r}; expected one of {', '.join(POLICIES)}")
        return cls(name, frozenset(allowlist))

    @classmethod
    def of_worker(cls, config: WorkerConfig) -> OverridePolicy:
        """The policy the worker properties set."""
        return cls.of(
            config.connector_client_config_override_policy, config.connector_client_config_override_allowlist
        )

    def allows(self, setting: str) -> bool:
        """Whether a connector may override the client setting ``setting`` (unprefixed)."""
        if self.name == "All":
            return True
        if self.name == "Principal":
            return setting in PRINCIPAL_SETTINGS
        if self.name == "Allowlist":
            return setting in self.allowlist
        return False

    def message(self, setting: str) -> str:
        """Java's words for a refused override."""
        return (
            f"The '{self.name}' policy does not allow '{setting}' to be overridden in the connector "
            "configuration."
        )


def clients_used(kind: ConnectorKind, props: Mapping[str, str | None]) -> tuple[str, ...]:
    """The client roles whose overrides count for this connector (Java's ``connectorUses*``)."""
    dlq = bool((props.get("errors.deadletterqueue.topic.name") or "").strip())
    if kind == "source":
        topic_creation = any(k.startswith("topic.creation.") for k in props)
        return ("producer", "admin") if topic_creation else ("producer",)
    return ("consumer", "producer", "admin") if dlq else ("consumer",)


def refused_overrides(
    policy: OverridePolicy, kind: ConnectorKind, props: Mapping[str, str | None]
) -> list[tuple[str, str]]:
    """Each ``<role>.override.<setting>`` key the policy refuses, with Java's message, in key order."""
    refused: list[tuple[str, str]] = []
    for role in clients_used(kind, props):
        prefix = f"{role}.override."
        for key in sorted(k for k in props if k.startswith(prefix)):
            setting = key[len(prefix) :]
            if not policy.allows(setting):
                refused.append((key, policy.message(setting)))
    return refused
