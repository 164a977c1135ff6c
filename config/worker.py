"""The typed, validated configuration of a distributed worker: :class:`WorkerConfig`.

One table of :class:`~kconnect.config.worker_keys.Definition` rows (:mod:`kconnect.config.worker_keys`)
drives everything: parsing, defaults, validation, the error messages and the reference (the docs
site's generated worker-properties page; ``python -m kconnect.config.worker`` prints it). Adding a key
means adding one row there and one field here, and the documentation cannot drift from the parser. How
one value is read is :mod:`kconnect.config.values`; REST listener URLs are :mod:`kconnect.config.listeners`.

Keys, types and defaults follow Apache Kafka Connect 3.9's distributed worker wherever a key exists
there, so an Apache worker file works unchanged; keys that are kconnect's own are marked as such in
the table. Values are parsed the way Kafka's ``ConfigDef`` parses them (strings and lists trimmed,
booleans case-insensitive, integers range-checked for their Java type) so a value accepted by one is
read the same by the other. Some validators are stricter than Apache's (timeouts must not be negative,
listeners, bootstrap servers, topic names and header rules must be well formed, the internal topics
must be distinct, the MAC algorithms must be ones Python's hashlib provides): failing at start-up with
the key named beats failing later inside a client, and the "Valid values" column shows the rule.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from .errors import ConfigError
from .listeners import RestListener, parse_listener
from .values import ConfigType, TopicName, is_topic_name
from .worker_keys import (
    BY_KEY,
    GROUP_RECORDS_TOPIC_SUFFIX,
    PASSTHROUGH_KEYS,
    PASSTHROUGH_PREFIXES,
    PROPERTIES_DOC_HEADER,
    SPARK_PREFIX,
    ConnectProtocol,
    Definition,
    ExactlyOnceSourceSupport,
    GroupProtocol,
    Importance,
    SinkTaskPlacement,
    SourceTaskPlacement,
    definitions,
    is_passthrough,
    reference_markdown,
    unknown_keys,
)

__all__ = [
    "GROUP_RECORDS_TOPIC_SUFFIX",
    "PASSTHROUGH_KEYS",
    "PASSTHROUGH_PREFIXES",
    "PROPERTIES_DOC_HEADER",
    "ConfigType",
    "ConnectProtocol",
    "Definition",
    "ExactlyOnceSourceSupport",
    "GroupProtocol",
    "Importance",
    "RestListener",
    "SinkTaskPlacement",
    "SourceTaskPlacement",
    "WorkerConfig",
    "definitions",
    "parse_listener",
    "reference_markdown",
    "unknown_keys",
]


@dataclass(frozen=True)
class WorkerConfig:
    """A distributed worker's configuration, parsed and checked; build it with :meth:`from_properties`.

    Fields are named after their keys with dots turned into underscores. Lists are tuples and the
    mappings are read-only so that a config shared between the herder, the REST server and the
    executor cannot be changed under one of them. Cross-key checks run in ``__post_init__`` and
    therefore also guard ``dataclasses.replace``.
    """

    # Kafka cluster and group membership
    bootstrap_servers: tuple[str, ...]
    group_id: str
    session_timeout_ms: int
    heartbeat_interval_ms: int
    rebalance_timeout_ms: int
    worker_sync_timeout_ms: int
    worker_unsync_backoff_ms: int
    connect_protocol: ConnectProtocol
    group_protocol: GroupProtocol
    scheduled_rebalance_max_delay_ms: int
    max_warmup_tasks: int
    task_warmup_timeout_ms: int
    exactly_once_source_support: ExactlyOnceSourceSupport
    inter_worker_key_generation_algorithm: str
    inter_worker_key_size: int | None
    inter_worker_key_ttl_ms: int
    inter_worker_signature_algorithm: str
    inter_worker_verification_algorithms: tuple[str, ...]
    # Internal topics
    config_storage_topic: str
    config_storage_replication_factor: int
    offset_storage_topic: str
    offset_storage_replication_factor: int
    offset_storage_partitions: int
    status_storage_topic: str
    status_storage_replication_factor: int
    status_storage_partitions: int
    group_records_storage_topic: str
    group_records_storage_replication_factor: int
    group_records_storage_partitions: int
    # Converters and worker behaviour
    key_converter: str
    value_converter: str
    header_converter: str
    task_shutdown_graceful_timeout_ms: int
    connector_method_timeout_ms: int
    task_method_timeout_ms: int
    offset_flush_interval_ms: int
    offset_flush_timeout_ms: int
    file_connectors_enable: bool
    plugin_path: tuple[str, ...]
    plugin_discovery: str
    config_providers: tuple[str, ...]
    connector_client_config_override_policy: str
    connector_client_config_override_allowlist: tuple[str, ...]
    topic_creation_enable: bool
    topic_tracking_enable: bool
    topic_tracking_allow_reset: bool
    auto_restart_enable: bool
    auto_restart_max_attempts: int
    auto_restart_backoff_initial_ms: int
    auto_restart_backoff_max_ms: int
    auto_include_jmx_reporter: bool
    # REST API
    listeners: tuple[str, ...]
    admin_listeners: tuple[str, ...] | None
    rest_advertised_host_name: str | None
    rest_advertised_port: int | None
    rest_advertised_listener: str | None
    rest_extension_classes: tuple[str, ...]
    access_control_allow_origin: str
    access_control_allow_methods: str
    response_http_headers_config: str
    rest_allowed_hosts: tuple[str, ...]
    rest_request_timeout_ms: int
    rest_max_concurrent_requests: int
    rest_console_enable: bool
    # Kafka clients
    client_id: str
    client_dns_lookup: str
    metadata_max_age_ms: int
    metadata_recovery_strategy: str
    request_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    reconnect_backoff_ms: int
    reconnect_backoff_max_ms: int
    socket_connection_setup_timeout_ms: int
    socket_connection_setup_timeout_max_ms: int
    connections_max_idle_ms: int
    receive_buffer_bytes: int
    send_buffer_bytes: int
    security_protocol: str
    # kconnect's own
    spark_master: str
    source_task_placement: SourceTaskPlacement
    sink_task_placement: SinkTaskPlacement
    sink_task_stall_timeout_ms: int
    worker_id: str | None
    static_connectors: tuple[str, ...]
    static_tasks: tuple[str, ...]
    #: Every ``spark.*`` key, with ``spark.master`` always present (its default applied).
    spark: Mapping[str, str]
    #: Keys accepted by prefix (see PASSTHROUGH_PREFIXES), verbatim and with their full names.
    passthrough: Mapping[str, str]

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> WorkerConfig:
        """Parse substituted worker properties; raises ConfigError for the first bad key.

        Unknown keys are ignored here; call :func:`unknown_keys` to warn about them.
        """
        values: dict[str, Any] = {}
        for definition in definitions():
            raw = props.get(definition.key)
            if raw is not None:
                values[definition.attribute] = definition.parse(raw)
            elif definition.required:
                raise ConfigError.missing(definition.key)
            elif definition.default is not None:
                values[definition.attribute] = definition.parse(definition.default)
            else:
                values[definition.attribute] = None
        if values["group_records_storage_topic"] is None:
            derived = values["group_id"] + GROUP_RECORDS_TOPIC_SUFFIX
            if not is_topic_name(derived):
                raise ConfigError(
                    "group.records.storage.topic",
                    derived,
                    f"must be {TopicName.allowed}; the default is derived from group.id, so set "
                    "group.records.storage.topic explicitly",
                )
            values["group_records_storage_topic"] = derived
        if values["group_records_storage_replication_factor"] is None:
            # Apache Kafka Connect has no such topic, so its properties files never set this factor: the
            # config topic's factor is the one the operator chose for this cluster's internal topics.
            values["group_records_storage_replication_factor"] = values["config_storage_replication_factor"]
        spark = {key: value for key, value in props.items() if key.startswith(SPARK_PREFIX)}
        spark["spark.master"] = values["spark_master"]
        passthrough = {
            key: value for key, value in props.items() if key not in BY_KEY and is_passthrough(key)
        }
        return cls(**values, spark=MappingProxyType(spark), passthrough=MappingProxyType(passthrough))

    def __post_init__(self) -> None:
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ConfigError(
                "heartbeat.interval.ms",
                str(self.heartbeat_interval_ms),
                f"must be lower than session.timeout.ms ({self.session_timeout_ms})",
            )
        if self.inter_worker_signature_algorithm not in self.inter_worker_verification_algorithms:
            raise ConfigError(
                "inter.worker.signature.algorithm",
                self.inter_worker_signature_algorithm,
                "must be one of inter.worker.verification.algorithms ("
                + ", ".join(self.inter_worker_verification_algorithms)
                + ")",
            )
        seen: dict[str, str] = {}
        for key in (
            "config.storage.topic",
            "offset.storage.topic",
            "status.storage.topic",
            "group.records.storage.topic",
        ):
            topic = getattr(self, key.replace(".", "_"))
            if topic in seen:
                # Two stores on one topic would read each other's records as their own.
                raise ConfigError(key, topic, f"must differ from {seen[topic]}, which names the same topic")
            seen[topic] = key

    # --- derived views ----------------------------------------------------------------------------

    @property
    def rest_listeners(self) -> tuple[RestListener, ...]:
        """``listeners`` parsed (already checked at load, so this cannot fail)."""
        return tuple(parse_listener(text) for text in self.listeners)

    @property
    def admin_rest_listeners(self) -> tuple[RestListener, ...] | None:
        """None: serve admin endpoints on the regular listeners; empty: do not serve them."""
        if self.admin_listeners is None:
            return None
        return tuple(parse_listener(text) for text in self.admin_listeners)

    @property
    def rest_url(self) -> str:
        """The URL other workers use to reach this one; see :meth:`advertised_url`."""
        return self.advertised_url()

    def advertised_url(self, *, local_host: str | None = None, bound_port: int | None = None) -> str:
        """Compute the advertised REST URL the way Apache Kafka Connect's REST server does.

        The protocol is rest.advertised.listener, else http if any listener is http, else https. The
        host is rest.advertised.host.name, else the host of the first listener of that protocol, else
        of the first listener; an empty host means this machine, ``local_host`` or the host name.
        (Apache uses the local host's IP address there; a host name survives address changes.) The
        port is rest.advertised.port, else the matching listener's port, else ``bound_port``, which the
        REST server passes once it has bound a listener configured with port 0.

        The trailing slash matches Apache's URLs, which workers exchange in the group protocol and
        which Java workers extend with relative paths.
        """
        listeners = self.rest_listeners
        if self.rest_advertised_listener is not None:
            protocol = self.rest_advertised_listener
        elif any(listener.protocol == "http" for listener in listeners):
            protocol = "http"
        elif any(listener.protocol == "https" for listener in listeners):
            protocol = "https"
        else:
            protocol = "http"
        match = next((listener for listener in listeners if listener.protocol == protocol), None)
        first = listeners[0]
        host = (
            self.rest_advertised_host_name
            or (match.host if match is not None else "")
            or first.host
            or local_host
            or socket.gethostname()
        )
        if self.rest_advertised_port is not None:
            port = self.rest_advertised_port
        elif match is not None and match.port > 0:
            port = match.port
        elif bound_port is not None:
            port = bound_port
        else:
            port = (match or first).port
        if ":" in host:
            host = f"[{host}]"
        return f"{protocol}://{host}:{port}/"

    def prefixed(self, prefix: str) -> dict[str, str]:
        """Pass-through settings under ``prefix``, with the prefix removed (e.g. ``"key.converter."``)."""
        return {
            key[len(prefix) :]: value for key, value in self.passthrough.items() if key.startswith(prefix)
        }

    def storage_topic_settings(self, prefix: str) -> dict[str, str]:
        """Extra topic configs for an internal topic, from keys like ``offset.storage.min.insync.replicas``.

        ``prefix`` is one of ``config.storage.``, ``offset.storage.``, ``status.storage.`` or
        ``group.records.storage.``. cleanup.policy is dropped because internal topics are always
        compacted, and partitions because the config topic always has exactly one.
        """
        settings = self.prefixed(prefix)
        for name in ("topic", "partitions", "replication.factor", "cleanup.policy"):
            settings.pop(name, None)
        return settings


if __name__ == "__main__":
    import sys

    sys.stdout.write(PROPERTIES_DOC_HEADER + reference_markdown())
