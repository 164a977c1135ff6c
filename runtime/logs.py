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


def configure(level: str = "INFO", json_output: bool | None = None) -> None:
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
        processors=[*shared, structlog.processors.format_exc_info, renderer],
        wrapper_class=structlog.make_filtering_bound_logger(logging.getLevelName(level.upper())),
        logger_factory=structlog.PrintLoggerFactory(file=sys.stderr),
        cache_logger_on_first_use=False,
    )
    # Libraries log through the standard library; route them through the same renderer, quieter.
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
            foreign_pre_chain=shared,
        )
    )
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
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
