"""Source records to Kafka bytes with the task's configured converters, record by record.

Why record by record: ``SourceTask.poll`` runs on the driver and its records are produced in poll order
(see ``source_runner``), so each is encoded with the converter's ``from_connect`` in Python. A record's own
``key_schema`` / ``value_schema`` is used when set (the JDBC and CDC sources declare theirs); otherwise one
is inferred from the Python value as Java's FileStream source declares it: str -> STRING (required),
bool -> BOOLEAN, int -> INT64, float -> FLOAT64, bytes -> BYTES; dicts and lists have no schema
(JsonConverter writes them schemaless, ``"schema":null``).
Transforms, when a connector has them, run on the encoded batch as a Spark frame (``source_batch``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kconnect.runtime.dataplane.connect_data import ConnectSchema
from kconnect.runtime.dataplane.converters import Converter, converter_from_config
from kconnect.runtime.dataplane.errors_policy import ErrorPolicy
from kconnect.runtime.plugins.api import SourceRecord

__all__ = ["SourceEncoder", "infer_schema", "source_encoder"]

_SCHEMAS: tuple[tuple[type, str], ...] = (
    (bool, "boolean"),  # before int: a bool is an int in Python
    (int, "int64"),
    (float, "double"),
    (str, "string"),
    (bytes, "bytes"),
    (bytearray, "bytes"),
)


#: The schema of each exact type in ``_SCHEMAS``, built once: ``encode`` runs for every source record.
_BY_TYPE: dict[type, ConnectSchema] = {t: ConnectSchema(name, optional=False) for t, name in _SCHEMAS}


def infer_schema(value: Any) -> ConnectSchema | None:
    """The Connect schema a Python value from ``poll`` is written with (None: schemaless)."""
    if value is None:
        return None
    exact = _BY_TYPE.get(type(value))
    if exact is not None:
        return exact
    for python_type, name in _SCHEMAS:
        if isinstance(value, python_type):
            return ConnectSchema(name, optional=False)
    return None


@dataclass(frozen=True)
class SourceEncoder:
    """A source task's key and value converters and its error policy."""

    key_converter: Converter
    value_converter: Converter
    policy: ErrorPolicy

    def encode(
        self, record: SourceRecord
    ) -> tuple[bytes | None, bytes | None, list[tuple[str, bytes | None]]]:
        """Key, value and headers as the producer sends them; ConnectDataError when a value does not fit."""
        headers: list[tuple[str, bytes | None]] = []
        for header in record.headers or ():
            raw = header.value
            if raw is not None and not isinstance(raw, bytes | bytearray):
                raw = str(raw).encode("utf-8")
            headers.append((header.key, None if raw is None else bytes(raw)))
        return (
            self.key_converter.from_connect(
                record.key,
                infer_schema(record.key) if record.key_schema is None else record.key_schema,
                record.topic,
            ),
            self.value_converter.from_connect(
                record.value,
                infer_schema(record.value) if record.value_schema is None else record.value_schema,
                record.topic,
            ),
            headers,
        )


def source_encoder(converters: Mapping[str, str], task_config: Mapping[str, str]) -> SourceEncoder:
    """The encoder for one source task (``converters`` as ``converters.converter_config`` merges them)."""
    return SourceEncoder(
        key_converter=converter_from_config(converters, "key.converter", True),
        value_converter=converter_from_config(converters, "value.converter", False),
        policy=ErrorPolicy.from_config(task_config, sink=False),
    )
