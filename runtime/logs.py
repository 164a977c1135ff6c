"""Structured logging: JSON lines when stderr is not a terminal, readable columns when it is.

Context that every line of a worker should carry (worker id, generation, connector, task) is bound
with structlog's contextvars so that deep code does not have to thread it through arguments.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Any

import structlog

_configured = False
#: The stdlib logger that carries kconnect's own level; every ``get(name)`` logger sits under it unless
#: named otherwise, so ``PUT /admin/loggers/kconnect.runtime`` and friends work as Java's do.
ROOT_NAMESPACE = "kconnect"
_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warning": logging.WARNING,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "exception": logging.ERROR,
    "critical": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}


class _NamedPrintLogger(structlog.PrintLogger):
    """A PrintLogger that remembers its name, so the level filter can look it up per call."""

    def __init__(self, name: str) -> None:
        super().__init__(file=sys.stderr)
        self.name = name


def _named_logger_factory(*args: Any) -> _NamedPrintLogger:
    return _NamedPrintLogger(str(args[0]) if args and args[0] else ROOT_NAMESPACE)


def _level_filter(logger: Any, method_name: str, event_dict: Any) -> Any:
    """Per-logger levels, as set in the stdlib hierarchy (startup level, ``/admin/loggers``)."""
    name = getattr(logger, "name", ROOT_NAMESPACE)
    if not logging.getLogger(name).isEnabledFor(_LEVELS.get(method_name, logging.INFO)):
        raise structlog.DropEvent
    return event_dict


def configure(level: str = "INFO", json_output: bool | None = None) -> None:
    """Set up logging once per process: kconnect's own loggers at ``level``, libraries (kafka-python, uvicorn)
    only from WARNING or ERROR so that their chatter does not drown the worker's lines, and every line through
    one renderer. Levels live in the stdlib hierarchy, which is what ``/admin/loggers`` changes at run time.
    """
    global _configured
    if json_output is None:
        json_output = not sys.stderr.isatty()
    renderer: Any = structlog.processors.JSONRenderer() if json_output else structlog.dev.ConsoleRenderer()
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.processors.add_log_level,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    structlog.configure(
        processors=[_level_filter, *shared, structlog.processors.format_exc_info, renderer],
        # Levels are decided per logger by _level_filter; this only drops what no logger can want.
        wrapper_class=structlog.make_filtering_bound_logger(logging.DEBUG),
        logger_factory=_named_logger_factory,
        cache_logger_on_first_use=False,
    )
    # Libraries log through the standard library; route them through the same renderer, quieter.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            # format_exc_info: a library's (or plugin loader's) exc_info=True keeps its traceback as text
            # instead of becoming the repr of a traceback object.
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                structlog.processors.format_exc_info,
                renderer,
            ],
            foreign_pre_chain=shared,
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    logging.getLogger(ROOT_NAMESPACE).setLevel(logging.getLevelName(level.upper()))
    for noisy in ("kafka", "uvicorn.access"):
        logging.getLogger(noisy).setLevel(logging.ERROR)
    # KCONNECT_CLIENT_LOG_LEVEL=DEBUG shows the group client's protocol exchanges when diagnosing.
    client_level = os.environ.get("KCONNECT_CLIENT_LOG_LEVEL")
    if client_level:
        logging.getLogger("kafka").setLevel(client_level.upper())
        root.setLevel(client_level.upper())
    _configured = True


def get(name: str | None = None, **context: Any) -> Any:
    """A bound logger; ``context`` is added to every line it writes."""
    logger = structlog.get_logger(name)
    return logger.bind(**context) if context else logger


def bind(**context: Any) -> None:
    """Bind worker-wide context (worker id, generation) for every logger in this thread and its children."""
    structlog.contextvars.bind_contextvars(**context)
