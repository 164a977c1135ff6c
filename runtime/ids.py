"""Identifiers shared by the protocol codecs, the assignors, the stores and the herder."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

#: In the embedded protocol's assignment arrays, task id -1 stands for the connector instance itself.
CONNECTOR_TASK = -1


@dataclass(frozen=True, order=True, slots=True)
class TaskId:
    """A task of a connector, numbered from 0, as Apache Kafka Connect's ConnectorTaskId."""

    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"

    @classmethod
    def parse(cls, text: str) -> TaskId:
        """Parse ``<connector>-<n>``; the connector name may itself contain dashes."""
        name, sep, number = text.rpartition("-")
        if not sep or not name or not number.isdigit():
            raise ValueError(f"'{text}' is not a task id of the form <connector>-<task number>")
        return cls(name, int(number))

    @classmethod
    def parse_valid(cls, texts: Iterable[str]) -> tuple[tuple[TaskId, ...], tuple[str, ...]]:
        """The task ids among ``texts``, and the texts that are not one: a static assignment read from
        properties or an override is used for what parses, and the caller decides how to report the rest."""
        valid: list[TaskId] = []
        malformed: list[str] = []
        for text in texts:
            try:
                valid.append(cls.parse(text))
            except ValueError:
                malformed.append(text)
        return tuple(valid), tuple(malformed)
