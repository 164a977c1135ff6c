"""The worker config accepts what Apache Kafka Connect 3.9 accepts, with the same defaults, and every
rejection names the key, the value as written and what would have been allowed, on one line."""

from __future__ import annotations

import dataclasses
import pickle
import socket
from typing import Any

import pytest

from kconnect.config.classes import CONVERTERS, HEADER_CONVERTERS
from kconnect.config.errors import ConfigError
from kconnect.config.properties import parse_properties, substitute
from kconnect.config.worker import (
    ConfigType,
    ConnectProtocol,
    ExactlyOnceSourceSupport,
    GroupProtocol,
    RestListener,
    WorkerConfig,
    definitions,
    parse_listener,
    reference_markdown,
    unknown_keys,
)
from kconnect.runtime.client_config import role_props

# Apache Kafka's config/connect-distributed.properties (as stored for 3.x), without its license header;
# trailing spaces and long lines kept as shipped.
APACHE_CONNECT_DISTRIBUTED = """\
# This file contains some of the configurations for the Kafka Connect distributed worker. This file is intended
# to be used with the examples, and some settings may differ from those used in a production system, especially
# the `bootstrap.servers` and those specifying replication factors.

# A list of host/port pairs to use for establishing the initial connection to the Kafka cluster.
bootstrap.servers=localhost:9092

# unique name for the cluster, used in forming the Connect cluster group. Note that this must not conflict with consumer group IDs
group.id=connect-cluster

# The converters specify the format of data in Kafka and how to translate it into Connect data. Every Connect user will
# need to configure these based on the format they want their data in when loaded from or stored into Kafka
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
# Converter-specific settings can be passed in by prefixing the Converter's setting with the converter we want to apply
# it to
key.converter.schemas.enable=true
value.converter.schemas.enable=true

# Topic to use for storing offsets. This topic should have many partitions and be replicated and compacted.
# Kafka Connect will attempt to create the topic automatically when needed, but you can always manually create
# the topic before starting Kafka Connect if a specific topic configuration is needed.
# Most users will want to use the built-in default replication factor of 3 or in some cases even specify a larger value.
# Since this means there must be at least as many brokers as the maximum replication factor used, we'd like to be able
# to run this example on a single-broker cluster and so here we instead set the replication factor to 1.
offset.storage.topic=connect-offsets
offset.storage.replication.factor=1
#offset.storage.partitions=25

# Topic to use for storing connector and task configurations; note that this should be a single partition, highly replicated,
# and compacted topic. Kafka Connect will attempt to create the topic automatically when needed, but you can always manually create
# the topic before starting Kafka Connect if a specific topic configuration is needed.
# Most users will want to use the built-in default replication factor of 3 or in some cases even specify a larger value.
# Since this means there must be at least as many brokers as the maximum replication factor used, we'd like to be able
# to run this example on a single-broker cluster and so here we instead set the replication factor to 1.
config.storage.topic=connect-configs
config.storage.replication.factor=1

# Topic to use for storing statuses. This topic can have multiple partitions and should be replicated and compacted.
# Kafka Connect will attempt to create the topic automatically when needed, but you can always manually create
# the topic before starting Kafka Connect if a specific topic configuration is needed.
# Most users will want to use the built-in default replication factor of 3 or in some cases even specify a larger value.
# Since this means there must be at least as many brokers as the maximum replication factor used, we'd like to be able
# to run this example on a single-broker cluster and so here we instead set the replication factor to 1.
status.storage.topic=connect-status
status.storage.replication.factor=1
#status.storage.partitions=5

# Flush much faster than normal, which is useful for testing/debugging
offset.flush.interval.ms=10000

# List of comma-separated URIs the REST API will listen on. The supported protocols are HTTP and HTTPS.
# Specify hostname as 0.0.0.0 to bind to all interfaces.
# Leave hostname empty to bind to default interface.
# Examples of legal listener lists: HTTP://myhost:8083,HTTPS://myhost:8084"
#listeners=HTTP://:8083

# These are provided to inform the user about the presence of the REST host and port configs 
# Hostname & Port for the REST API to listen on. If this is set, it will bind to the interface used to listen to requests.
# DEPRECATED As of 1.1.0: only used when listeners is not set. Use listeners instead.
#rest.host.name=
#rest.port=8083

# The Hostname & Port that will be given out to other workers to connect to i.e. URLs that are routable from other servers.
# If not set, it uses the value for "listeners" or the rest.host.name/port if configured.
#rest.advertised.host.name=
#rest.advertised.port=
#rest.advertised.listener=

# Set to a list of filesystem paths separated by commas (,) to enable class loading isolation for plugins
# (connectors, converters, transformations). The list should consist of top level directories that include 
# any combination of: 
# a) directories immediately containing jars with plugins and their dependencies
# b) uber-jars with plugins and their dependencies
# c) directories immediately containing the package directory structure of classes of plugins and their dependencies
# Examples: 
# plugin.path=/usr/local/share/java,/usr/local/share/kafka/plugins,/opt/connectors,
#plugin.path=
"""  # noqa: E501, W291

MINIMAL = {
    "group.id": "g1",
    "config.storage.topic": "g1-configs",
    "offset.storage.topic": "g1-offsets",
    "status.storage.topic": "g1-status",
    "key.converter": "json",
    "value.converter": "json",
}


def config(**overrides: str) -> WorkerConfig:
    """MINIMAL plus overrides; keyword names use __ for dots (session__timeout__ms=...)."""
    props = dict(MINIMAL)
    props.update({k.replace("__", "."): v for k, v in overrides.items()})
    return WorkerConfig.from_properties(props)


def with_props(**props: str) -> dict[str, str]:
    return {**MINIMAL, **props}


@pytest.mark.parametrize(
    ("config_factor", "records_factor", "expected"),
    [
        (None, None, 3),  # both unset: Apache's default of 3
        ("1", None, 1),  # a one-broker file: the fourth topic follows the config topic
        ("-1", None, -1),  # the broker's default for the config topic: the same for the records
        ("1", "2", 2),  # set explicitly: taken as is
        (None, "1", 1),
    ],
)
def test_group_records_replication_factor_defaults_to_the_config_topics(
    config_factor: str | None, records_factor: str | None, expected: int
) -> None:
    props = dict(MINIMAL)
    if config_factor is not None:
        props["config.storage.replication.factor"] = config_factor
    if records_factor is not None:
        props["group.records.storage.replication.factor"] = records_factor
    assert WorkerConfig.from_properties(props).group_records_storage_replication_factor == expected


def test_apache_stock_connect_distributed_properties_is_valid_and_fully_known() -> None:
    props = parse_properties(APACHE_CONNECT_DISTRIBUTED)
    assert unknown_keys(props) == []
    cfg = WorkerConfig.from_properties(props)
    assert cfg.bootstrap_servers == ("localhost:9092",)
    assert cfg.group_id == "connect-cluster"
    assert (cfg.key_converter, cfg.value_converter, cfg.header_converter) == ("json", "json", "simple-header")
    assert cfg.prefixed("key.converter.") == {"schemas.enable": "true"}
    assert cfg.prefixed("value.converter.") == {"schemas.enable": "true"}
    assert (
        cfg.offset_storage_topic,
        cfg.offset_storage_replication_factor,
        cfg.offset_storage_partitions,
    ) == (
        "connect-offsets",
        1,
        25,
    )
    assert (cfg.config_storage_topic, cfg.config_storage_replication_factor) == ("connect-configs", 1)
    assert (
        cfg.status_storage_topic,
        cfg.status_storage_replication_factor,
        cfg.status_storage_partitions,
    ) == (
        "connect-status",
        1,
        5,
    )
    assert cfg.group_records_storage_topic == "connect-cluster-group-records"
    # The stock file is for a one-broker cluster: the fourth topic follows the config topic's factor.
    assert cfg.group_records_storage_replication_factor == 1
    assert cfg.offset_flush_interval_ms == 10000
    assert cfg.listeners == ("http://:8083",)
    # kconnect's default is static (KIP-987), which still offers sessioned to Apache workers.
    assert cfg.connect_protocol is ConnectProtocol.STATIC


# Apache Kafka Connect 3.9 defaults (from DistributedConfig's generated documentation), plus kconnect's.
DEFAULTS: list[tuple[str, Any]] = [
    ("bootstrap_servers", ("localhost:9092",)),
    ("session_timeout_ms", 10000),
    ("heartbeat_interval_ms", 3000),
    ("rebalance_timeout_ms", 60000),
    ("worker_sync_timeout_ms", 3000),
    ("worker_unsync_backoff_ms", 300000),
    ("connect_protocol", ConnectProtocol.STATIC),
    ("group_protocol", GroupProtocol.CONNECT),
    ("scheduled_rebalance_max_delay_ms", 300000),
    ("max_warmup_tasks", 2),
    ("task_warmup_timeout_ms", 60000),
    ("exactly_once_source_support", ExactlyOnceSourceSupport.DISABLED),
    ("inter_worker_key_generation_algorithm", "HmacSHA256"),
    ("inter_worker_key_size", None),
    ("inter_worker_key_ttl_ms", 3600000),
    ("inter_worker_signature_algorithm", "HmacSHA256"),
    ("inter_worker_verification_algorithms", ("HmacSHA256",)),
    ("config_storage_replication_factor", 3),
    ("offset_storage_replication_factor", 3),
    ("offset_storage_partitions", 25),
    ("status_storage_replication_factor", 3),
    ("status_storage_partitions", 5),
    ("group_records_storage_topic", "g1-group-records"),
    ("group_records_storage_replication_factor", 3),
    ("group_records_storage_partitions", 1),
    ("header_converter", "simple-header"),
    ("task_shutdown_graceful_timeout_ms", 5000),
    ("offset_flush_interval_ms", 60000),
    ("offset_flush_timeout_ms", 5000),
    ("plugin_path", ()),
    ("plugin_discovery", "hybrid_warn"),
    ("config_providers", ()),
    ("connector_client_config_override_policy", "All"),
    ("topic_creation_enable", True),
    ("topic_tracking_enable", True),
    ("topic_tracking_allow_reset", True),
    ("auto_restart_enable", False),
    ("auto_restart_max_attempts", 10),
    ("auto_restart_backoff_initial_ms", 5000),
    ("auto_restart_backoff_max_ms", 300000),
    ("auto_include_jmx_reporter", True),
    ("listeners", ("http://:8083",)),
    ("admin_listeners", None),
    ("rest_advertised_host_name", None),
    ("rest_advertised_port", None),
    ("rest_advertised_listener", None),
    ("rest_extension_classes", ()),
    ("rest_console_enable", True),
    ("access_control_allow_origin", ""),
    ("access_control_allow_methods", ""),
    ("response_http_headers_config", ""),
    ("client_id", ""),
    ("client_dns_lookup", "use_all_dns_ips"),
    ("metadata_max_age_ms", 300000),
    ("metadata_recovery_strategy", "none"),
    ("request_timeout_ms", 40000),
    ("retry_backoff_ms", 100),
    ("retry_backoff_max_ms", 1000),
    ("reconnect_backoff_ms", 50),
    ("reconnect_backoff_max_ms", 1000),
    ("socket_connection_setup_timeout_ms", 10000),
    ("socket_connection_setup_timeout_max_ms", 30000),
    ("connections_max_idle_ms", 540000),
    ("receive_buffer_bytes", 32768),
    ("send_buffer_bytes", 131072),
    ("security_protocol", "PLAINTEXT"),
    ("spark_master", "local[*]"),
    ("worker_id", None),
    ("static_connectors", ()),
    ("static_tasks", ()),
]


@pytest.mark.parametrize(("attribute", "expected"), DEFAULTS, ids=[d[0] for d in DEFAULTS])
def test_defaults(attribute: str, expected: Any) -> None:
    assert getattr(config(), attribute) == expected


def test_every_definition_has_a_field_and_every_field_a_definition_or_a_reason() -> None:
    fields = {f.name for f in dataclasses.fields(WorkerConfig)}
    attributes = [d.attribute for d in definitions()]
    assert len(attributes) == len(set(attributes))
    assert fields - set(attributes) == {"spark", "passthrough"}
    assert set(attributes) <= fields


def test_every_default_is_valid_for_its_own_definition() -> None:
    for d in definitions():
        if d.default is not None:
            d.parse(d.default)


def test_required_keys_are_those_apache_requires() -> None:
    assert {d.key for d in definitions() if d.required} == set(MINIMAL)


@pytest.mark.parametrize(
    ("key", "value", "attribute", "expected"),
    [
        ("session.timeout.ms", " 45000 ", "session_timeout_ms", 45000),
        ("session.timeout.ms", "+45000", "session_timeout_ms", 45000),
        ("connect.protocol", "EAGER", "connect_protocol", ConnectProtocol.EAGER),
        ("connect.protocol", "Compatible", "connect_protocol", ConnectProtocol.COMPATIBLE),
        ("connect.protocol", "static", "connect_protocol", ConnectProtocol.STATIC),
        ("group.protocol", "Classic", "group_protocol", GroupProtocol.CLASSIC),
        ("group.protocol", "connect", "group_protocol", GroupProtocol.CONNECT),
        (
            "exactly.once.source.support",
            "PREPARING",
            "exactly_once_source_support",
            ExactlyOnceSourceSupport.PREPARING,
        ),
        ("security.protocol", "sasl_ssl", "security_protocol", "SASL_SSL"),
        ("metadata.recovery.strategy", "REBOOTSTRAP", "metadata_recovery_strategy", "rebootstrap"),
        ("plugin.discovery", "SERVICE_LOAD", "plugin_discovery", "service_load"),
        ("rest.advertised.listener", "HTTPS", "rest_advertised_listener", "https"),
        ("inter.worker.signature.algorithm", "hmacsha256", "inter_worker_signature_algorithm", "HmacSHA256"),
        (
            "inter.worker.key.generation.algorithm",
            "HMACSHA1",
            "inter_worker_key_generation_algorithm",
            "HmacSHA1",
        ),
        ("topic.creation.enable", "FALSE", "topic_creation_enable", False),
        ("topic.tracking.enable", " True ", "topic_tracking_enable", True),
        ("bootstrap.servers", " a:1 , b:2,[::1]:9092,", "bootstrap_servers", ("a:1", "b:2", "[::1]:9092")),
        ("plugin.path", "/opt/a,/opt/b,", "plugin_path", ("/opt/a", "/opt/b")),
        (
            "listeners",
            "HTTP://myhost:8083,https://[::1]:8443",
            "listeners",
            ("HTTP://myhost:8083", "https://[::1]:8443"),
        ),
        ("admin.listeners", "", "admin_listeners", ()),
        ("admin.listeners", "http://localhost:0", "admin_listeners", ("http://localhost:0",)),
        ("key.converter", "org.apache.kafka.connect.storage.StringConverter", "key_converter", "string"),
        (
            "value.converter",
            "org.apache.kafka.connect.converters.ByteArrayConverter",
            "value_converter",
            "bytearray",
        ),
        ("value.converter", "bytearray", "value_converter", "bytearray"),
        ("header.converter", "org.apache.kafka.connect.json.JsonConverter", "header_converter", "json"),
        ("header.converter", "simple-header", "header_converter", "simple-header"),
        (
            "connector.client.config.override.policy",
            "org.apache.kafka.connect.connector.policy.NoneConnectorClientConfigOverridePolicy",
            "connector_client_config_override_policy",
            "None",
        ),
        (
            "connector.client.config.override.policy",
            "Principal",
            "connector_client_config_override_policy",
            "Principal",
        ),
        ("config.storage.replication.factor", "-1", "config_storage_replication_factor", -1),
        ("offset.storage.partitions", "-1", "offset_storage_partitions", -1),
        ("group.records.storage.topic", "my-records", "group_records_storage_topic", "my-records"),
        ("group.records.storage.partitions", "3", "group_records_storage_partitions", 3),
        ("inter.worker.key.size", "128", "inter_worker_key_size", 128),
        ("rest.advertised.port", "18083", "rest_advertised_port", 18083),
        (
            "response.http.headers.config",
            'set X-Frame-Options:DENY,"add Cache-Control:no-cache, no-store"',
            "response_http_headers_config",
            'set X-Frame-Options:DENY,"add Cache-Control:no-cache, no-store"',
        ),
        ("static.tasks", "my-connector-0, other-12", "static_tasks", ("my-connector-0", "other-12")),
        ("spark.master", "spark://host:7077", "spark_master", "spark://host:7077"),
        ("worker.id", "worker-a", "worker_id", "worker-a"),
        ("max.warmup.tasks", "0", "max_warmup_tasks", 0),
        ("task.warmup.timeout.ms", "120000", "task_warmup_timeout_ms", 120000),
        ("group.id", "  padded  ", "group_id", "padded"),
    ],
)
def test_values_are_parsed_and_normalised(key: str, value: str, attribute: str, expected: Any) -> None:
    assert getattr(WorkerConfig.from_properties(with_props(**{key: value})), attribute) == expected


@pytest.mark.parametrize("name", sorted(set(CONVERTERS) | set(CONVERTERS.values())))
def test_all_converter_names_accepted_for_keys_and_values(name: str) -> None:
    cfg = WorkerConfig.from_properties(with_props(**{"key.converter": name, "value.converter": name}))
    assert cfg.key_converter == cfg.value_converter == CONVERTERS.get(name, name)


INVALID = [
    ("session.timeout.ms", "abc", "must be an integer between 1 and 2147483647"),
    ("session.timeout.ms", "0", "must be an integer between 1 and 2147483647"),
    ("session.timeout.ms", "2147483648", "must be an integer between 1 and 2147483647"),
    ("session.timeout.ms", "1_000", "must be an integer between 1 and 2147483647"),
    ("session.timeout.ms", "", "must be an integer between 1 and 2147483647"),
    ("heartbeat.interval.ms", "1.5", "must be an integer between 1 and 2147483647"),
    ("scheduled.rebalance.max.delay.ms", "-1", "must be an integer between 0 and 2147483647"),
    ("max.warmup.tasks", "-1", "must be an integer between 0 and 2147483647"),
    ("max.warmup.tasks", "two", "must be an integer between 0 and 2147483647"),
    ("task.warmup.timeout.ms", "0", "must be an integer between 1 and 9223372036854775807"),
    (
        "offset.flush.interval.ms",
        "9223372036854775808",
        "must be an integer between 1 and 9223372036854775807",
    ),
    (
        "connections.max.idle.ms",
        "x",
        "must be an integer between -9223372036854775808 and 9223372036854775807",
    ),
    ("receive.buffer.bytes", "-2", "must be an integer between -1 and 2147483647"),
    ("inter.worker.key.size", "39", "must be an integer between 40 and 2147483647"),
    ("rest.advertised.port", "65536", "must be an integer between 1 and 65535"),
    (
        "offset.storage.partitions",
        "0",
        "must be a positive integer up to 2147483647, or -1 to use the broker's default",
    ),
    (
        "status.storage.partitions",
        "-2",
        "must be a positive integer up to 2147483647, or -1 to use the broker's default",
    ),
    (
        "config.storage.replication.factor",
        "0",
        "must be a positive integer up to 32767, or -1 to use the broker's default",
    ),
    (
        "offset.storage.replication.factor",
        "32768",
        "must be a positive integer up to 32767, or -1 to use the broker's default",
    ),
    (
        "group.records.storage.replication.factor",
        "-5",
        "must be a positive integer up to 32767, or -1 to use the broker's default",
    ),
    ("topic.creation.enable", "yes", "must be true or false"),
    (
        "connect.protocol",
        "cooperative",
        "must be one of eager, compatible, sessioned, static (case-insensitive)",
    ),
    ("exactly.once.source.support", "on", "must be one of disabled, preparing, enabled (case-insensitive)"),
    ("group.protocol", "consumer", "must be one of classic, connect (case-insensitive)"),
    (
        "security.protocol",
        "TLS",
        "must be one of PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL (case-insensitive)",
    ),
    (
        "client.dns.lookup",
        "USE_ALL_DNS_IPS",
        "must be one of use_all_dns_ips, resolve_canonical_bootstrap_servers_only",
    ),
    ("rest.advertised.listener", "ftp", "must be one of http, https (case-insensitive)"),
    ("group.id", "   ", "must be a non-empty string"),
    ("spark.master", "", "must be a non-empty string"),
    ("config.storage.topic", "bad topic", "must be a topic name of 1 to 249 characters"),
    ("offset.storage.topic", "..", "must be a topic name of 1 to 249 characters"),
    ("status.storage.topic", "x" * 250, "must be a topic name of 1 to 249 characters"),
    ("bootstrap.servers", "localhost", "must be a non-empty comma-separated list of host:port pairs"),
    ("bootstrap.servers", "", "must be a non-empty comma-separated list of host:port pairs"),
    ("bootstrap.servers", "a:1,,b:2", "must be a non-empty comma-separated list of host:port pairs"),
    ("bootstrap.servers", "a:0", "must be a non-empty comma-separated list of host:port pairs"),
    ("listeners", "", "must be a non-empty comma-separated list of URLs protocol://host:port"),
    ("listeners", "ftp://host:21", "must be a non-empty comma-separated list of URLs protocol://host:port"),
    ("listeners", "http://host", "must be a non-empty comma-separated list of URLs protocol://host:port"),
    (
        "listeners",
        "http://host:99999",
        "must be a non-empty comma-separated list of URLs protocol://host:port",
    ),
    ("admin.listeners", "localhost:8080", "must be a comma-separated list of URLs protocol://host:port"),
    (
        "key.converter",
        "io.confluent.connect.avro.AvroConverterr",
        "must be one of json, string, bytearray, avro, protobuf, json-schema or an Apache",
    ),
    (
        "value.converter",
        "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        "must be one of json, string, bytearray",
    ),
    ("header.converter", "Json", "must be one of json, string, bytearray, simple-header or an Apache"),
    (
        "connector.client.config.override.policy",
        "all",
        "must be one of All, Allowlist, None, Principal or an Apache",
    ),
    ("inter.worker.key.generation.algorithm", "AES", "must be one of HmacMD5, HmacSHA1"),
    (
        "inter.worker.verification.algorithms",
        "HmacSHA256,HmacFoo",
        "must be a non-empty comma-separated list drawn from",
    ),
    ("inter.worker.verification.algorithms", "", "must be a non-empty comma-separated list drawn from"),
    ("response.http.headers.config", "set X-Frame-Options", "must be comma-separated rules"),
    ("response.http.headers.config", "replace X-Frame-Options:DENY", "must be comma-separated rules"),
    ("response.http.headers.config", "set Bad Name:value", "must be comma-separated rules"),
    ("response.http.headers.config", "set X:a:b", "must be comma-separated rules"),
    (
        "static.tasks",
        "my-connector",
        "must be a comma-separated list of task ids of the form <connector>-<task number>",
    ),
    ("plugin.path", "/a,,/b", "must be a comma-separated list of non-empty names"),
    ("worker.id", "", "must be a non-empty string"),
]


@pytest.mark.parametrize(("key", "value", "allowed"), INVALID, ids=[f"{k}={v[:30]!r}" for k, v, _ in INVALID])
def test_invalid_value_message_names_key_value_and_what_is_allowed(
    key: str, value: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as info:
        WorkerConfig.from_properties(with_props(**{key: value}))
    error = info.value
    assert (error.key, error.value) == (key, value)
    assert error.allowed.startswith(allowed)
    message = str(error)
    assert message == f"Invalid value '{value}' for configuration {key}: {error.allowed}"
    assert "\n" not in message


def test_list_entry_errors_point_at_the_bad_entry() -> None:
    with pytest.raises(ConfigError, match=r"; 'ftp://b:2' is not$"):
        config(listeners="http://a:1,ftp://b:2")
    with pytest.raises(ConfigError, match=r"; 'nohost' is not$"):
        config(bootstrap__servers="ok:9092,nohost")
    with pytest.raises(ConfigError, match=r"; 'HmacFoo' is not$"):
        config(inter__worker__verification__algorithms="HmacSHA256,HmacFoo")


def test_unknown_converter_error_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError) as info:
        config(key__converter="com.example.Unknown")
    for name in [*CONVERTERS, *CONVERTERS.values()]:
        assert name in info.value.allowed
    with pytest.raises(ConfigError) as info:
        config(header__converter="com.example.Unknown")
    for name in [*HEADER_CONVERTERS, *HEADER_CONVERTERS.values()]:
        assert name in info.value.allowed


@pytest.mark.parametrize(
    "key",
    [
        "group.id",
        "config.storage.topic",
        "offset.storage.topic",
        "status.storage.topic",
        "key.converter",
        "value.converter",
    ],
)
def test_missing_required_key(key: str) -> None:
    props = dict(MINIMAL)
    del props[key]
    with pytest.raises(ConfigError) as info:
        WorkerConfig.from_properties(props)
    assert (info.value.key, info.value.value) == (key, None)
    assert str(info.value) == f'Missing required configuration "{key}" which has no default value.'


def test_multiline_value_keeps_the_message_on_one_line() -> None:
    with pytest.raises(ConfigError) as info:
        config(session__timeout__ms="10\n000")
    assert str(info.value).startswith("Invalid value '10\\n000' for configuration session.timeout.ms: ")
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("overrides", "key", "value", "allowed"),
    [
        (
            {"heartbeat.interval.ms": "10000"},
            "heartbeat.interval.ms",
            "10000",
            "must be lower than session.timeout.ms (10000)",
        ),
        (
            {"session.timeout.ms": "2000", "heartbeat.interval.ms": "3000"},
            "heartbeat.interval.ms",
            "3000",
            "must be lower than session.timeout.ms (2000)",
        ),
        (
            {"inter.worker.signature.algorithm": "HmacSHA512"},
            "inter.worker.signature.algorithm",
            "HmacSHA512",
            "must be one of inter.worker.verification.algorithms (HmacSHA256)",
        ),
        (
            {"status.storage.topic": "g1-offsets"},
            "status.storage.topic",
            "g1-offsets",
            "must differ from offset.storage.topic, which names the same topic",
        ),
        (
            {"group.records.storage.topic": "g1-configs"},
            "group.records.storage.topic",
            "g1-configs",
            "must differ from config.storage.topic, which names the same topic",
        ),
        (
            {"group.id": "my cluster"},
            "group.records.storage.topic",
            "my cluster-group-records",
            "must be a topic name of 1 to 249 characters from a-z, A-Z, 0-9, '.', '_' and '-', "
            "other than '.' and '..'; the default is derived from group.id, so set "
            "group.records.storage.topic explicitly",
        ),
    ],
)
def test_cross_key_checks(overrides: dict[str, str], key: str, value: str, allowed: str) -> None:
    with pytest.raises(ConfigError) as info:
        WorkerConfig.from_properties(with_props(**overrides))
    assert (info.value.key, info.value.value, info.value.allowed) == (key, value, allowed)


def test_cross_key_checks_also_guard_replace() -> None:
    cfg = config()
    assert dataclasses.replace(cfg, heartbeat_interval_ms=100).heartbeat_interval_ms == 100
    with pytest.raises(ConfigError, match=r"heartbeat\.interval\.ms"):
        dataclasses.replace(cfg, session_timeout_ms=3000)


def test_verification_list_may_widen_beyond_the_signature_algorithm() -> None:
    cfg = config(
        inter__worker__signature__algorithm="HmacSHA512",
        inter__worker__verification__algorithms="hmacsha256,HmacSHA512",
    )
    assert cfg.inter_worker_verification_algorithms == ("HmacSHA256", "HmacSHA512")


def test_unknown_keys_reports_only_keys_no_definition_or_prefix_claims() -> None:
    props = with_props(
        **{
            "producer.acks": "all",
            "consumer.max.poll.records": "10",
            "admin.retries": "1",
            "admin.listeners": "",
            "admin.listeners.https.ssl.keystore.location": "/k",
            "listeners.https.ssl.keystore.location": "/k",
            "ssl.truststore.location": "/t",
            "sasl.mechanism": "PLAIN",
            "metric.reporters": "",
            "metrics.sample.window.ms": "30000",
            "metrics.context.resource": "x",
            "key.converter.schemas.enable": "false",
            "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            "offset.storage.min.insync.replicas": "2",
            "spark.executor.memory": "2g",
            "sesion.timeout.ms": "1",
            "rest.port": "8083",
            "metric.reporter": "x",
            "producerx": "1",
        }
    )
    assert unknown_keys(props) == ["metric.reporter", "producerx", "rest.port", "sesion.timeout.ms"]


def test_passthrough_spark_and_client_overrides() -> None:
    cfg = WorkerConfig.from_properties(
        with_props(
            **{
                "producer.acks": "all",
                "admin.retries": "7",
                "admin.listeners.https.ssl.keystore.location": "/admin.jks",
                "ssl.truststore.location": "/t.jks",
                "spark.executor.memory": "2g",
                "offset.storage.min.insync.replicas": "2",
                "offset.storage.cleanup.policy": "delete",
                "config.storage.partitions": "3",
                "typo.key": "x",
            }
        )
    )
    assert dict(cfg.spark) == {"spark.master": "local[*]", "spark.executor.memory": "2g"}
    assert "typo.key" not in cfg.passthrough
    assert "group.id" not in cfg.passthrough
    assert cfg.passthrough["ssl.truststore.location"] == "/t.jks"
    assert role_props("producer", cfg.passthrough) == {"acks": "all"}
    assert role_props("admin", cfg.passthrough) == {"retries": "7"}  # not the REST admin listener's TLS
    assert role_props("consumer", cfg.passthrough) == {}
    assert cfg.storage_topic_settings("offset.storage.") == {"min.insync.replicas": "2"}
    assert cfg.storage_topic_settings("config.storage.") == {}
    with pytest.raises(TypeError):
        cfg.spark["spark.master"] = "x"


def test_spark_master_in_spark_mapping_follows_the_key() -> None:
    assert config(spark__master="spark://m:7077").spark["spark.master"] == "spark://m:7077"


@pytest.mark.parametrize(
    ("props", "url"),
    [
        ({}, "http://HOST:8083/"),
        ({"listeners": "http://0.0.0.0:8083"}, "http://0.0.0.0:8083/"),
        ({"listeners": "HTTP://myhost:9000"}, "http://myhost:9000/"),
        ({"rest.advertised.host.name": "connect-1.example"}, "http://connect-1.example:8083/"),
        ({"rest.advertised.port": "18083"}, "http://HOST:18083/"),
        ({"listeners": "https://:8443"}, "https://HOST:8443/"),
        ({"listeners": "https://secure:8443,http://plain:8083"}, "http://plain:8083/"),
        (
            {"listeners": "https://secure:8443,http://plain:8083", "rest.advertised.listener": "https"},
            "https://secure:8443/",
        ),
        ({"listeners": "http://a:1", "rest.advertised.listener": "https"}, "https://a:1/"),
        ({"listeners": "http://[::1]:8083"}, "http://[::1]:8083/"),
        ({"rest.advertised.host.name": "fe80::1"}, "http://[fe80::1]:8083/"),
        ({"listeners": "http://a:0"}, "http://a:0/"),
    ],
)
def test_rest_url(props: dict[str, str], url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "HOST")
    assert WorkerConfig.from_properties(with_props(**props)).rest_url == url


def test_advertised_url_uses_bound_port_for_port_zero_and_local_host() -> None:
    cfg = config(listeners="http://:0")
    assert cfg.advertised_url(local_host="10.0.0.5", bound_port=41234) == "http://10.0.0.5:41234/"
    assert config().advertised_url(local_host="h", bound_port=1) == "http://h:8083/"


@pytest.mark.parametrize(
    ("text", "listener"),
    [
        ("http://:8083", RestListener("http", "", 8083)),
        ("HTTPS://Host.Example:443/", RestListener("https", "Host.Example", 443)),
        ("http://[fe80::1%eth0]:0", RestListener("http", "fe80::1%eth0", 0)),
    ],
)
def test_parse_listener(text: str, listener: RestListener) -> None:
    assert parse_listener(text) == listener


def test_rest_listener_views() -> None:
    cfg = config(listeners="http://a:1,https://b:2", admin__listeners="http://localhost:9")
    assert cfg.rest_listeners == (RestListener("http", "a", 1), RestListener("https", "b", 2))
    assert cfg.admin_rest_listeners == (RestListener("http", "localhost", 9),)
    assert config().admin_rest_listeners is None


def test_connect_protocol_is_a_str_enum() -> None:
    cfg = config(connect__protocol="Sessioned")
    assert cfg.connect_protocol == "sessioned"
    assert isinstance(cfg.connect_protocol, str)
    assert f"{cfg.connect_protocol}" == "sessioned"


def test_substituted_values_are_validated() -> None:
    props = substitute(with_props(**{"session.timeout.ms": "${env:TIMEOUT}"}), {"TIMEOUT": "abc"})
    with pytest.raises(ConfigError, match=r"^Invalid value 'abc' for configuration session.timeout.ms: "):
        WorkerConfig.from_properties(props)
    props = substitute(with_props(**{"session.timeout.ms": "${env:TIMEOUT}"}), {"TIMEOUT": "30000"})
    assert WorkerConfig.from_properties(props).session_timeout_ms == 30000


def test_config_error_pickles() -> None:
    error = ConfigError("k", "v", "must be x")
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.key, copy.value, copy.allowed, str(copy)) == ("k", "v", "must be x", str(error))


def test_reference_markdown_has_one_row_per_definition() -> None:
    text = reference_markdown()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert [row.split("`")[1] for row in rows] == [d.key for d in definitions()]
    assert "| `group.id` | string | (required) |" in text
    assert "| `connect.protocol` | string | `static` |" in text
    assert "`<group.id>-group-records`" in text
    assert all(row.count(" | ") == 5 for row in rows)
    assert "kconnect only." in text and "`producer.*`" in text


def test_types_in_the_table_match_apache_for_shared_keys() -> None:
    types = {d.key: d.type for d in definitions()}
    assert types["config.storage.replication.factor"] is ConfigType.SHORT
    assert types["offset.flush.interval.ms"] is ConfigType.LONG
    assert types["key.converter"] is ConfigType.CLASS
    assert types["listeners"] is ConfigType.LIST
    assert types["inter.worker.key.size"] is ConfigType.INT
