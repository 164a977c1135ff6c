"""The worker's log configuration, on lines that come through the standard library."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest
import structlog

from kconnect.runtime import logs


@pytest.fixture
def configured() -> Iterator[None]:
    """``logs.configure`` replaces global state: the root handlers, levels and structlog's config."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    namespace_level = logging.getLogger(logs.ROOT_NAMESPACE).level
    was_configured = logs._configured
    try:
        yield
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.getLogger(logs.ROOT_NAMESPACE).setLevel(namespace_level)
        structlog.reset_defaults()
        logs._configured = was_configured


def test_a_stdlib_warning_with_exc_info_keeps_its_traceback_as_text(
    configured: None, capsys: pytest.CaptureFixture[str]
) -> None:
    logs.configure("INFO", json_output=True)
    try:
        raise RuntimeError("fails on import on purpose")
    except RuntimeError:
        logging.getLogger("some.library").warning("could not load %s", "a plugin", exc_info=True)
    [line] = [json.loads(x) for x in capsys.readouterr().err.splitlines() if x.startswith("{")]
    assert line["event"] == "could not load a plugin" and line["level"] == "warning"
    assert "exc_info" not in line
    assert line["exception"].startswith("Traceback (most recent call last):")
    assert line["exception"].rstrip().endswith("RuntimeError: fails on import on purpose")
