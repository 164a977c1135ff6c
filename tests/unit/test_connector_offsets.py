"""The offsets API's parsing and Java's messages, as a table (checked against Connect 3.9's worker)."""

from __future__ import annotations

from typing import Any

import pytest

from kconnect.config.errors import ConfigError
from kconnect.rest.connectors import config_patch, java_boolean
from kconnect.runtime.errors import BadRequestError
from kconnect.runtime.shell import connector_offsets as co
from kconnect.runtime.storage.offset_log import SourceOffset

SINK_P = {"kafka_topic": "t", "kafka_partition": 0}

# Java's messages we reproduce, each with a body that provokes it.
JAVA_MESSAGES: list[tuple[str, Any, str]] = [
    ("source", {}, "Partitions / offsets need to be provided for an alter offsets request"),
    ("source", {"offsets": []}, "Partitions / offsets need to be provided for an alter offsets request"),
    ("source", {"offsets": [{"offset": {"position": 1}}]}, "Partition objects cannot be null"),
    (
        "source",
        {"offsets": [{"partition": {"filename": "x"}, "offset": {"position": [1]}}]},
        "Offsets may only contain primitive types as values, but field position contains ARRAY",
    ),
    (
        "source",
        {"offsets": [{"partition": {"filename": {"a": 1}}, "offset": None}]},
        "Offsets may only contain primitive types as values, but field filename contains MAP",
    ),
    (
        "sink",
        {"offsets": [{"offset": None}]},
        "The partition for a sink connector offset cannot be null or missing",
    ),
    (
        "sink",
        {"offsets": [{"partition": {"kafka_topic": "t"}, "offset": {"kafka_offset": 1}}]},
        "The partition for a sink connector offset must contain the keys 'kafka_topic' and 'kafka_partition'",
    ),
    (
        "sink",
        {"offsets": [{"partition": {"kafka_topic": 5, "kafka_partition": 0}, "offset": None}]},
        "Kafka topic names must be valid strings and may not be null",
    ),
    (
        "sink",
        {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": "x"}, "offset": None}]},
        "Failed to parse the following Kafka partition value in the provided offsets: 'x'. "
        "Partition values for sink connectors need to be integers.",
    ),
    (
        "sink",
        {"offsets": [{"partition": SINK_P, "offset": {}}]},
        "The offset for a sink connector should either be null or contain the key 'kafka_offset'",
    ),
    (
        "sink",
        {"offsets": [{"partition": SINK_P, "offset": {"kafka_offset": "x"}}]},
        "Failed to parse the following Kafka offset value in the provided offsets: 'x'. "
        "Offset values for sink connectors need to be integers.",
    ),
    (
        "sink",
        {"offsets": [{"partition": SINK_P, "offset": {"kafka_offset": 1.5}}]},
        "Failed to parse the following Kafka offset value in the provided offsets: '1.5'. "
        "Offset values for sink connectors need to be integers.",
    ),
]


@pytest.mark.parametrize(("kind", "body", "message"), JAVA_MESSAGES)
def test_java_messages(kind: str, body: Any, message: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        entries = co.parse_body(body)
        if kind == "source":
            co.source_records("c", entries)
        else:
            co.sink_offsets(entries)
    assert caught.value.message == message
    assert caught.value.status == 400


def test_fixed_messages_match_the_reference_worker() -> None:
    assert co.not_stopped("src") == (
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for "
        "the specified connector by issuing a 'PUT' request to the '/connectors/src/stop' endpoint"
    )
    assert co.modified_message(False, True) == "The offsets for this connector have been altered successfully"
    assert co.modified_message(True, True) == "The offsets for this connector have been reset successfully"
    assert co.modified_message(True, False) == (
        "The Connect framework-managed offsets for this connector have been reset successfully. However, if "
        "this connector manages offsets externally, they will need to be manually reset in the system that "
        "the connector uses."
    )


@pytest.mark.parametrize(
    ("body", "fragment"),
    [
        ([1], "must be a JSON object"),
        ({"bogus": 1}, "Unrecognized field(s) 'bogus'"),
        ({"offsets": {"a": 1}}, "'offsets' must be a JSON array"),
        ({"offsets": [1]}, "offsets[0] must be a JSON object"),
        ({"offsets": [{"partition": {}, "offset": None, "x": 1}]}, "Unrecognized field(s) 'x' in offsets[0]"),
        ({"offsets": [{"partition": [1], "offset": None}]}, "offsets[0].partition must be a JSON object"),
    ],
)
def test_malformed_bodies_name_what_is_wrong(body: Any, fragment: str) -> None:
    with pytest.raises(BadRequestError) as caught:
        co.parse_body(body)
    assert fragment in caught.value.message


def test_sink_offsets_accept_java_integers_and_nulls() -> None:
    entries = co.parse_body(
        {
            "offsets": [
                {"partition": {"kafka_topic": "t", "kafka_partition": "1"}, "offset": {"kafka_offset": "7"}},
                {"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None},
            ]
        }
    )
    assert co.sink_offsets(entries) == {("t", 1): 7, ("t", 0): None}


def test_source_records_keep_tombstones_and_shapes() -> None:
    entries = co.parse_body(
        {
            "offsets": [
                {"partition": {"f": "a"}, "offset": {"p": 3}},
                {"partition": {"f": "b"}, "offset": None},
            ]
        }
    )
    records = co.source_records("c", entries)
    assert records == [SourceOffset("c", {"f": "a"}, {"p": 3}), SourceOffset("c", {"f": "b"}, None)]
    # GET lists only partitions with an offset.
    assert co.source_offsets_json(records) == {"offsets": [{"partition": {"f": "a"}, "offset": {"p": 3}}]}


def test_sink_shapes_and_group() -> None:
    assert co.sink_offsets_json({("t", 1): 5, ("a", 0): 2}) == {
        "offsets": [
            {"partition": {"kafka_partition": 0, "kafka_topic": "a"}, "offset": {"kafka_offset": 2}},
            {"partition": {"kafka_partition": 1, "kafka_topic": "t"}, "offset": {"kafka_offset": 5}},
        ]
    }
    assert co.sink_group_id("s", {}) == "connect-s"
    assert co.sink_group_id("s", {"consumer.override.group.id": "mine"}) == "mine"


def test_a_sinks_offsets_read_asks_for_every_partition_in_metadata() -> None:
    # Topics the connector no longer reads are asked for too (their committed offsets still show, as in
    # Java's list of the group's offsets); a topic with no partitions in metadata adds nothing.
    topics = {"b": [1, 0], "a": [0], "gone": [], "__consumer_offsets": [0]}
    assert co.all_partitions(topics) == [("__consumer_offsets", 0), ("a", 0), ("b", 0), ("b", 1)]
    assert co.all_partitions({}) == []


def test_query_booleans_and_config_patches() -> None:
    assert [java_boolean(v) for v in ("true", "TRUE", "false", "maybe", None)] == [
        True,
        True,
        False,
        False,
        False,
    ]
    assert config_patch({"a": "x", "b": None, "c": 5, "d": True}) == {
        "a": "x",
        "b": None,
        "c": "5",
        "d": "true",
    }
    with pytest.raises(BadRequestError, match="value of 'a' must be"):
        config_patch({"a": [1]})
    with pytest.raises(BadRequestError, match="must be a JSON object"):
        config_patch([1, 2])


# ------------------------------------------------------- the connector's admin client (Java's adminConfigs)

_WORKER_FILE = {"admin.request.timeout.ms": "5000", "ssl.ca.location": "/ca.pem", "producer.acks": "all"}


def _admin(config: dict[str, str]) -> dict[str, str] | None:
    return co.admin_settings(
        "s",
        config,
        bootstrap_servers=["a:9092", "b:9092"],
        security_protocol="SSL",
        worker_passthrough=_WORKER_FILE,
    )


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        # no override: the worker's own admin client serves
        ({"connector.class": "X", "consumer.override.group.id": "g"}, None),
        # the worker's top-level and admin.* settings, then the connector's overrides (which win)
        (
            {"admin.override.bootstrap.servers": "other:9092", "admin.override.request.timeout.ms": "9000"},
            {
                "bootstrap.servers": "other:9092",
                "client.id": "connector-worker-adminclient-s",
                "security.protocol": "SSL",
                "ssl.ca.location": "/ca.pem",
                "request.timeout.ms": "9000",
            },
        ),
        (
            {"admin.override.client.id": "mine"},
            {
                "bootstrap.servers": "a:9092,b:9092",
                "client.id": "mine",
                "security.protocol": "SSL",
                "ssl.ca.location": "/ca.pem",
                "request.timeout.ms": "5000",
            },
        ),
    ],
)
def test_a_connectors_admin_settings_are_the_workers_then_its_overrides(
    config: dict[str, str], expected: dict[str, str] | None
) -> None:
    assert _admin(config) == expected


def test_an_admin_override_librdkafka_cannot_take_is_named_as_written() -> None:
    with pytest.raises(ConfigError) as err:
        _admin({"admin.override.receive.buffer.bytes": "lots"})
    assert "admin.override.receive.buffer.bytes" in str(err.value)
