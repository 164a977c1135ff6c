"""Log levels as Apache Kafka Connect's ``/admin/loggers`` shows and changes them (KIP-495, KIP-976).

Java speaks log4j levels (OFF, FATAL, ERROR, WARN, INFO, DEBUG, TRACE); kconnect logs through Python's
``logging`` hierarchy (structlog filters on it, see ``logs.py``), so levels are translated both ways
here. The rules of which loggers a change touches are pure functions; :class:`LoggerLevels` is the
thin shell that applies them to ``logging`` and remembers when each level was last changed.

Java's rules, checked against the reference worker: the listing shows ``root`` and every logger with
an explicitly set level; setting ``root`` sets every such logger too; setting a namespace sets it and
every explicitly set logger below it; level names are case-insensitive; an unknown level is a 404.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = [
    "JAVA_LEVELS",
    "ROOT",
    "LoggerLevel",
    "LoggerLevels",
    "affected_loggers",
    "from_java",
    "to_java",
]

ROOT = "root"
TRACE = 5
OFF = logging.CRITICAL + 10

#: log4j level name -> Python level number. FATAL has no Python twin: CRITICAL is the closest.
JAVA_LEVELS: Mapping[str, int] = {
    "OFF": OFF,
    "FATAL": logging.CRITICAL,
    "ERROR": logging.ERROR,
    "WARN": logging.WARNING,
    "INFO": logging.INFO,
    "DEBUG": logging.DEBUG,
    "TRACE": TRACE,
}

logging.addLevelName(TRACE, "TRACE")


def from_java(level: str) -> int | None:
    """The Python level for a log4j level name (any case), or None when Java would not know it."""
    return JAVA_LEVELS.get(level.strip().upper())


def to_java(level: int) -> str:
    """The log4j name for a Python level: the most verbose Java level that still shows ``level``."""
    for name, number in sorted(JAVA_LEVELS.items(), key=lambda item: item[1]):
        if level <= number:
            return name
    return "OFF"


def affected_loggers(namespace: str, with_levels: Iterable[str]) -> list[str]:
    """Which loggers a change of ``namespace`` sets, sorted as Java answers them.

    ``with_levels`` are the loggers that have an explicit level now (``root`` excluded).
    """
    named = set(with_levels) - {ROOT}
    if namespace == ROOT:
        return sorted(named | {ROOT})
    below = {n for n in named if n.startswith(namespace + ".")}
    return sorted(below | {namespace})


@dataclass(frozen=True)
class LoggerLevel:
    """One entry of ``/admin/loggers``: the log4j level name, and when it was last set through the API
    (KIP-976; None when it never was since start-up)."""

    level: str
    last_modified: int | None

    def to_json(self) -> dict[str, object]:
        """The entry as Java's REST API spells it, ``last_modified`` included even when null, so clients of
        either worker parse the same shape."""
        return {"level": self.level, "last_modified": self.last_modified}


class LoggerLevels:
    """The worker's live log levels; one instance per process, because ``logging`` is process-wide."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._modified: dict[str, int] = {}

    @staticmethod
    def _logger(name: str) -> logging.Logger:
        return logging.getLogger() if name == ROOT else logging.getLogger(name)

    @staticmethod
    def _with_levels() -> list[str]:
        manager = logging.Logger.manager
        return [
            name
            for name, logger in list(manager.loggerDict.items())
            if isinstance(logger, logging.Logger) and logger.level != logging.NOTSET
        ]

    def all(self) -> dict[str, LoggerLevel]:
        """``GET /admin/loggers``: root and every logger with an explicit level, sorted by name."""
        names = sorted({*self._with_levels(), ROOT})
        return {name: self._describe(name) for name in names}

    def get(self, name: str) -> LoggerLevel | None:
        """One logger's level, or None when it has no explicit level (Java's 404)."""
        if name != ROOT and name not in self._with_levels():
            return None
        return self._describe(name)

    def _describe(self, name: str) -> LoggerLevel:
        logger = self._logger(name)
        return LoggerLevel(to_java(logger.getEffectiveLevel()), self._modified.get(name))

    def set(self, namespace: str, java_level: str, now_ms: int | None = None) -> list[str]:
        """Apply a level to ``namespace`` and the loggers below it; returns the loggers changed.

        Raises ValueError for a level log4j would not know.
        """
        level = from_java(java_level)
        if level is None:
            raise ValueError(f"invalid log level '{java_level}'.")
        stamp = int(time.time() * 1000) if now_ms is None else now_ms
        with self._lock:
            names = affected_loggers(namespace, self._with_levels())
            for name in names:
                self._logger(name).setLevel(level)
                self._modified[name] = stamp
        return names


#: The process's levels: the REST layer and the config-topic listener share it.
LEVELS = LoggerLevels()
