"""The converter hook between raw Kafka records and the plugin API's records.

Why so small: converters and single message transforms are built as their own piece of work
(``runtime/dataplane/converters.py``); the data plane only
needs a seam where they plug in. :func:`to_sink_records`
and :func:`to_kafka_record` are that seam: the data plane calls nothing else, so replacing their bodies
with the full converters changes no caller. Until then they cover StringConverter, ByteArrayConverter
and JsonConverter (with or without the ``schema``/``payload`` envelope, primitive values only when
writing with schemas), which is what the built-in FileStream connectors need.

The data plane now converts with ``converters``/``transforms``/``errors_policy`` (see ``sink_batch`` and
``source_encoding``); only :func:`converter_config` is still on its path. The other two stay for callers
that want a quick record-by-record decode without Spark.

Pure functions over a plain mapping: ``config`` is the effective converter configuration of one task,
the worker's ``key.converter``/``value.converter`` (and their ``.*`` settings) overlaid with the
connector's own, as Java's Worker does when it instantiates a task's converters.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from kconnect.config.classes import CONVERTERS, resolve_alias
from kconnect.runtime.plugins.api import Header, SinkRecord, SourceRecord

__all__ = ["CodecError", "converter_config", "to_kafka_record", "to_sink_records"]


class CodecError(ValueError):
    """A record a converter cannot turn into (or out of) bytes; the message names the key and value."""


def converter_config(worker_defaults: Mapping[str, str], task_config: Mapping[str, str]) -> dict[str, str]:
    """The converter settings a task uses: worker ones, overridden by the connector's (Java's rule).

    A connector that names its own ``value.converter`` drops the worker's ``value.converter.*`` settings,
    since they were meant for another class.
    """
    merged: dict[str, str] = {}
    for side in ("key", "value"):
        prefix = f"{side}.converter"
        source = task_config if prefix in task_config else worker_defaults
        merged.update({k: v for k, v in source.items() if k == prefix or k.startswith(prefix + ".")})
        if source is not task_config:
            merged.update({k: v for k, v in task_config.items() if k.startswith(prefix + ".")})
    return merged


def _kind(config: Mapping[str, str], side: str) -> tuple[str, bool]:
    key = f"{side}.converter"
    name = config.get(key)
    if name is None:
        raise CodecError(f"{key} is not set; allowed: one of {', '.join(CONVERTERS)} or their aliases")
    alias = resolve_alias(name, CONVERTERS)
    if alias is None:
        raise CodecError(
            f"{key}={name} is not a converter kconnect implements; allowed: {', '.join(CONVERTERS)}"
        )
    schemas = config.get(f"{key}.schemas.enable", "true").strip().lower() != "false"
    return alias, schemas


def _decode(kind: str, schemas: bool, data: bytes | None, side: str, where: str) -> Any:
    if data is None:
        return None
    if kind == "bytearray":
        return bytes(data)
    if kind == "string":
        return bytes(data).decode("utf-8", errors="replace")
    try:
        parsed = json.loads(bytes(data))
    except ValueError as exc:
        raise CodecError(f"{side} of {where} is not valid JSON for {side}.converter=json: {exc}") from None
    if schemas:
        if not isinstance(parsed, dict) or set(parsed) != {"schema", "payload"}:
            raise CodecError(
                f"{side} of {where}: with {side}.converter.schemas.enable=true the JSON must be an object "
                'with exactly the fields "schema" and "payload"; set schemas.enable=false for plain JSON'
            )
        return parsed["payload"]
    return parsed


_JSON_SCHEMA_TYPES: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),
    (int, "int64"),
    (float, "float64"),
    (str, "string"),
)


def _encode(kind: str, schemas: bool, value: Any, side: str, topic: str) -> bytes | None:
    if value is None:
        return None  # a null (a tombstone's value, a keyless record's key) stays null, as Java writes it
    if kind == "bytearray":
        if not isinstance(value, bytes | bytearray):
            raise CodecError(
                f"{side} for topic {topic} is a {type(value).__name__}; {side}.converter=bytearray "
                "allows only bytes"
            )
        return bytes(value)
    if kind == "string":
        return (value if isinstance(value, str) else str(value)).encode("utf-8")
    if schemas:
        for python_type, name in _JSON_SCHEMA_TYPES:
            if isinstance(value, python_type):
                value = {"schema": {"type": name, "optional": False}, "payload": value}
                break
        else:
            raise CodecError(
                f"{side} for topic {topic} is a {type(value).__name__} without a Connect schema; "
                f"with {side}.converter.schemas.enable=true only str, int, float and bool values are "
                "supported here: set schemas.enable=false"
            )
    try:
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise CodecError(f"{side} for topic {topic} cannot be written as JSON: {exc}") from None


def to_sink_records(rows: Iterable[Sequence[Any]], config: Mapping[str, str]) -> list[SinkRecord]:
    """Rows of ``records.RAW_SCHEMA`` (in its column order) to the records a sink task's ``put`` takes."""
    key_kind, key_schemas = _kind(config, "key")
    value_kind, value_schemas = _kind(config, "value")
    out: list[SinkRecord] = []
    for row in rows:
        topic, partition, offset, timestamp, key, value, headers = row
        where = f"{topic}-{partition}@{offset}"
        out.append(
            SinkRecord(
                topic=topic,
                partition=int(partition),
                offset=int(offset),
                key=_decode(key_kind, key_schemas, key, "key", where),
                value=_decode(value_kind, value_schemas, value, "value", where),
                headers=tuple(Header(h[0], None if h[1] is None else bytes(h[1])) for h in headers or ()),
                timestamp=None if timestamp is None or timestamp < 0 else int(timestamp),
            )
        )
    return out


def to_kafka_record(
    record: SourceRecord, config: Mapping[str, str]
) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
    """A source record's key, value and headers as the bytes the producer sends."""
    key_kind, key_schemas = _kind(config, "key")
    value_kind, value_schemas = _kind(config, "value")
    headers: list[tuple[str, bytes | None]] = []
    for header in record.headers:
        raw = header.value
        if raw is not None and not isinstance(raw, bytes | bytearray):
            raw = str(raw).encode("utf-8")
        headers.append((header.key, None if raw is None else bytes(raw)))
    return (
        _encode(key_kind, key_schemas, record.key, "key", record.topic),
        _encode(value_kind, value_schemas, record.value, "value", record.topic),
        headers,
    )
