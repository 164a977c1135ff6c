"""One worker configuration key as a :class:`Definition` row, and the validators the rows share.

Split from the key table (:mod:`kconnect.config.worker_keys`): the rows, grouped by what they configure,
live in the ``keys_*`` modules and all build on this one shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from .errors import ConfigError
from .values import (
    INT16_MAX,
    INT32_MAX,
    INT64_MAX,
    TYPE_ALLOWED,
    ConfigType,
    IntRange,
    PositiveOrBrokerDefault,
    Rejected,
    Validator,
    parse_type,
)

__all__ = [
    "GROUP_RECORDS_TOPIC_SUFFIX",
    "HIGH",
    "MEDIUM",
    "NON_NEGATIVE_INT",
    "NON_NEGATIVE_LONG",
    "PARTITIONS",
    "POSITIVE_INT",
    "POSITIVE_LONG",
    "REPLICATION",
    "Definition",
    "Importance",
]


class Importance(StrEnum):
    """Apache ConfigDef's importance of a key, shown in the reference so the table reads like Apache's."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


@dataclass(frozen=True)
class Definition:
    """One worker configuration key: how to parse it, its default, and what the README says about it.

    ``default`` is written as it would appear in a properties file and goes through the same parsing
    as a user's value, so a default can never be something a user could not have typed. ``None`` means
    the key is optional with no value; ``required`` keys have no default at all.
    """

    key: str
    type: ConfigType
    default: str | None
    documentation: str
    validator: Validator | None = None
    importance: Importance = Importance.LOW
    required: bool = False
    kconnect: bool = False
    default_text: str | None = None

    @property
    def attribute(self) -> str:
        """The WorkerConfig field holding the parsed value."""
        return self.key.replace(".", "_")

    @property
    def allowed(self) -> str:
        """What a value must be: the same phrase for the error message and the reference table."""
        return self.validator.allowed if self.validator is not None else TYPE_ALLOWED[self.type]

    def parse(self, raw: str) -> Any:
        """Parse and validate one raw value, raising ConfigError that names this key and the value."""
        try:
            value = parse_type(self.type, raw)
            return value if self.validator is None else self.validator(value)
        except Rejected as rejected:
            detail = f"; {rejected.detail}" if rejected.detail else ""
            raise ConfigError(self.key, raw, f"must be {self.allowed}{detail}") from None


HIGH, MEDIUM = Importance.HIGH, Importance.MEDIUM
# The group-records topic default is derived rather than fixed so that two Connect clusters sharing a
# Kafka cluster, which must differ in group.id anyway, never share group records by accident.
GROUP_RECORDS_TOPIC_SUFFIX = "-group-records"
POSITIVE_INT = IntRange(1, INT32_MAX)
NON_NEGATIVE_INT = IntRange(0, INT32_MAX)
NON_NEGATIVE_LONG = IntRange(0, INT64_MAX)
POSITIVE_LONG = IntRange(1, INT64_MAX)
PARTITIONS = PositiveOrBrokerDefault(INT32_MAX)
REPLICATION = PositiveOrBrokerDefault(INT16_MAX)
