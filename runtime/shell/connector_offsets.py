"""The offsets REST API's bodies and rules (KIP-875), as pure functions: parse, validate, shape.

``GET/PATCH/DELETE /connectors/{name}/offsets`` speak one JSON shape for both connector types,
``{"offsets": [{"partition": {...}, "offset": {...} | null}]}``; what the maps may hold differs. Source
partitions and offsets are the connector's own primitive-valued maps, stored in the offsets topic under
``[connector, partition]``. Sink partitions are Kafka topic partitions, ``{"kafka_topic", "kafka_partition"}``
with ``{"kafka_offset"}``, stored as the consumer group's committed offsets. The messages are Apache Kafka
Connect 3.9's (Worker, SinkUtils, OffsetUtils, ConnectorsResource), checked against the reference worker;
where Java answers a malformed body with 500 we answer 400 with the same words.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kconnect.runtime.client_config import task_clients
from kconnect.runtime.errors import BadRequestError
from kconnect.runtime.storage.offset_log import OffsetMap, SourceOffset

KAFKA_TOPIC_KEY = "kafka_topic"
KAFKA_PARTITION_KEY = "kafka_partition"
KAFKA_OFFSET_KEY = "kafka_offset"

NO_OFFSETS = "Partitions / offsets need to be provided for an alter offsets request"
NULL_SOURCE_PARTITION = "Partition objects cannot be null"
NULL_SINK_PARTITION = "The partition for a sink connector offset cannot be null or missing"
SINK_PARTITION_KEYS = (
    f"The partition for a sink connector offset must contain the keys '{KAFKA_TOPIC_KEY}' and "
    f"'{KAFKA_PARTITION_KEY}'"
)
SINK_TOPIC = "Kafka topic names must be valid strings and may not be null"
SINK_PARTITION_NULL = "Kafka partitions must be valid numbers and may not be null"
SINK_OFFSET_KEY = (
    f"The offset for a sink connector should either be null or contain the key '{KAFKA_OFFSET_KEY}'"
)
SINK_OFFSET_NULL = "Kafka offsets must be valid numbers and may not be null"


def not_stopped(connector: str) -> str:
    """Java's answer to PATCH/DELETE offsets of a connector that is not STOPPED (400)."""
    return (
        "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for "
        f"the specified connector by issuing a 'PUT' request to the '/connectors/{connector}/stop' "
        "endpoint"
    )


def modified_message(reset: bool, connector_handled: bool) -> str:
    """The ``{"message": ...}`` of a successful PATCH (altered) or DELETE (reset).

    ``connector_handled`` is what the connector's ``alter_offsets`` returned: False means it does not
    manage offsets itself, so only the framework's offsets changed, and Java says so.
    """
    kind = "reset" if reset else "altered"
    if connector_handled:
        return f"The offsets for this connector have been {kind} successfully"
    return (
        f"The Connect framework-managed offsets for this connector have been {kind} successfully. However, "
        f"if this connector manages offsets externally, they will need to be manually {kind} in the system "
        "that the connector uses."
    )


@dataclass(frozen=True, slots=True)
class OffsetEntry:
    """One ``{"partition": ..., "offset": ...}`` of a request; either map may be null."""

    partition: Mapping[str, Any] | None
    offset: Mapping[str, Any] | None


def parse_body(body: Any) -> list[OffsetEntry]:
    """The entries of a PATCH body, or BadRequestError naming what is wrong with it."""
    if not isinstance(body, dict):
        raise BadRequestError('The offsets request must be a JSON object: {"offsets": [...]}')
    unknown = sorted(set(body) - {"offsets"})
    if unknown:
        raise BadRequestError(
            f"Unrecognized field(s) {', '.join(repr(k) for k in unknown)} in the offsets request; "
            "the only field is 'offsets'"
        )
    entries = body.get("offsets")
    if entries is None or entries == []:
        raise BadRequestError(NO_OFFSETS)
    if not isinstance(entries, list):
        raise BadRequestError('\'offsets\' must be a JSON array of {"partition": ..., "offset": ...} objects')
    out: list[OffsetEntry] = []
    for i, entry in enumerate(entries):
        if not isinstance(entry, dict):
            raise BadRequestError(f"offsets[{i}] must be a JSON object with 'partition' and 'offset'")
        extra = sorted(set(entry) - {"partition", "offset"})
        if extra:
            raise BadRequestError(
                f"Unrecognized field(s) {', '.join(repr(k) for k in extra)} in offsets[{i}]; "
                "allowed are 'partition' and 'offset'"
            )
        partition, offset = entry.get("partition"), entry.get("offset")
        for what, value in (("partition", partition), ("offset", offset)):
            if value is not None and not isinstance(value, dict):
                raise BadRequestError(f"offsets[{i}].{what} must be a JSON object or null")
        out.append(OffsetEntry(partition, offset))
    return out


def _schema_type(value: object) -> str:
    return "ARRAY" if isinstance(value, list) else "MAP"


def _primitive_map(value: Mapping[str, Any]) -> OffsetMap:
    """OffsetUtils.validateFormat: values must be primitives (null allowed)."""
    for key, item in value.items():
        if isinstance(item, list | dict):
            raise BadRequestError(
                f"Offsets may only contain primitive types as values, but field {key} contains "
                f"{_schema_type(item)}"
            )
    return value


def source_records(connector: str, entries: Sequence[OffsetEntry]) -> list[SourceOffset]:
    """Offsets-topic records for a source connector's PATCH (null offsets become tombstones)."""
    records: list[SourceOffset] = []
    for entry in entries:
        if entry.partition is None:
            raise BadRequestError(NULL_SOURCE_PARTITION)
        partition = _primitive_map(entry.partition)
        offset = None if entry.offset is None else _primitive_map(entry.offset)
        try:
            records.append(SourceOffset(connector, partition, offset))
        except ValueError as exc:
            raise BadRequestError(str(exc)) from exc
    return records


_JAVA_INT = re.compile(r"[+-]?[0-9]+")


def _java_text(value: object) -> str:
    """``String.valueOf`` of a JSON value, for messages that quote what was given."""
    if value is True or value is False:
        return str(value).lower()
    return str(value)


def _parse_java_integer(value: object, low: int, high: int) -> int | None:
    """Java's ``Integer/Long.parseLong(String.valueOf(v))``: numbers and numeric strings, nothing else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and _JAVA_INT.fullmatch(value):
        number = int(value)
    else:
        return None
    return number if low <= number <= high else None


def sink_offsets(entries: Sequence[OffsetEntry]) -> dict[tuple[str, int], int | None]:
    """(topic, partition) -> new consumer offset (None: reset it), validated as Java's SinkUtils does."""
    out: dict[tuple[str, int], int | None] = {}
    for entry in entries:
        if entry.partition is None:
            raise BadRequestError(NULL_SINK_PARTITION)
        if KAFKA_TOPIC_KEY not in entry.partition or KAFKA_PARTITION_KEY not in entry.partition:
            raise BadRequestError(SINK_PARTITION_KEYS)
        topic = entry.partition[KAFKA_TOPIC_KEY]
        if not isinstance(topic, str):
            raise BadRequestError(SINK_TOPIC)
        raw_partition = entry.partition[KAFKA_PARTITION_KEY]
        if raw_partition is None:
            raise BadRequestError(SINK_PARTITION_NULL)
        partition = _parse_java_integer(raw_partition, -(2**31), 2**31 - 1)
        if partition is None:
            raise BadRequestError(
                "Failed to parse the following Kafka partition value in the provided offsets: "
                f"'{_java_text(raw_partition)}'. Partition values for sink connectors need to be integers."
            )
        if entry.offset is None:
            out[(topic, partition)] = None
            continue
        if KAFKA_OFFSET_KEY not in entry.offset:
            raise BadRequestError(SINK_OFFSET_KEY)
        raw_offset = entry.offset[KAFKA_OFFSET_KEY]
        if raw_offset is None:
            raise BadRequestError(SINK_OFFSET_NULL)
        offset = _parse_java_integer(raw_offset, -(2**63), 2**63 - 1)
        if offset is None:
            raise BadRequestError(
                "Failed to parse the following Kafka offset value in the provided offsets: "
                f"'{_java_text(raw_offset)}'. Offset values for sink connectors need to be integers."
            )
        out[(topic, partition)] = offset
    return out


def source_offsets_json(records: Sequence[SourceOffset]) -> dict[str, list[dict[str, Any]]]:
    """``{"offsets": [...]}`` for a source connector, from its latest non-null offsets."""
    return {
        "offsets": [
            {"partition": None if r.partition is None else dict(r.partition), "offset": dict(r.offset or {})}
            for r in records
            if r.offset is not None
        ]
    }


def sink_offsets_json(committed: Mapping[tuple[str, int], int]) -> dict[str, list[dict[str, Any]]]:
    """``{"offsets": [...]}`` for a sink connector, from its consumer group's committed offsets.

    The partition map's key order is Java's (its HashMap iterates ``kafka_partition`` first).
    """
    return {
        "offsets": [
            {
                "partition": {KAFKA_PARTITION_KEY: partition, KAFKA_TOPIC_KEY: topic},
                "offset": {KAFKA_OFFSET_KEY: offset},
            }
            for (topic, partition), offset in sorted(committed.items())
        ]
    }


def all_partitions(topics: Mapping[str, Iterable[int]]) -> list[tuple[str, int]]:
    """Every ``(topic, partition)`` of cluster metadata, in order: what a sink's offsets read asks its
    group for, since a consumer's OffsetFetch must name partitions and the group may hold offsets of
    topics its connector no longer reads (Java's admin call asks for all of them)."""
    return sorted((topic, partition) for topic, partitions in topics.items() for partition in partitions)


def admin_settings(
    connector: str,
    config: Mapping[str, str],
    *,
    bootstrap_servers: Sequence[str],
    security_protocol: str,
    worker_passthrough: Mapping[str, str],
) -> dict[str, str] | None:
    """The librdkafka settings of a connector's admin client for its offsets calls, as Java's
    ``Worker.adminConfigs`` makes them: the worker's top-level settings, its ``admin.*``, then the
    connector's ``admin.override.*`` (the override policy was checked when the config was validated).
    None when the connector overrides nothing: the worker's own admin client has those settings. A sink
    whose consumers read another cluster (``consumer.override.bootstrap.servers``) keeps its group there
    and names that cluster to its admin calls with ``admin.override.bootstrap.servers``. A setting
    librdkafka cannot take raises ConfigError naming the key as written."""
    if not any(key.startswith("admin.override.") for key in config):
        return None
    translated = task_clients("admin", security_protocol, worker_passthrough, config)
    return {
        "bootstrap.servers": ",".join(bootstrap_servers),
        "client.id": f"connector-worker-adminclient-{connector}",  # Java's default for these calls
        **translated.settings,
    }


def sink_group_id(connector: str, config: Mapping[str, str | None]) -> str:
    """The consumer group of a sink connector: ``connect-<name>`` unless the config overrides it."""
    override = config.get("consumer.override.group.id")
    return override if override else f"connect-{connector}"
