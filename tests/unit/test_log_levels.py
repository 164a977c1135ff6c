"""Log levels as ``/admin/loggers`` shows and sets them: Java's names, which loggers a change touches."""

from __future__ import annotations

import logging
import uuid

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.rest.admin import parse_level_body
from kconnect.runtime.errors import BadRequestError
from kconnect.runtime.shell.log_levels import JAVA_LEVELS, LoggerLevels, affected_loggers, from_java, to_java


@pytest.mark.parametrize(
    ("java", "python"),
    [
        ("TRACE", 5),
        ("debug", logging.DEBUG),
        (" Info ", logging.INFO),
        ("WARN", logging.WARNING),
        ("ERROR", logging.ERROR),
        ("FATAL", logging.CRITICAL),
        ("OFF", logging.CRITICAL + 10),
        ("WARNING", None),
        ("NOPE", None),
        ("", None),
    ],
)
def test_java_level_names_map_to_python_levels(java: str, python: int | None) -> None:
    assert from_java(java) == python


@given(st.sampled_from(sorted(JAVA_LEVELS)))
def test_every_java_level_survives_the_round_trip(name: str) -> None:
    level = from_java(name)
    assert level is not None
    assert to_java(level) == name


def test_python_only_levels_report_the_nearest_java_level_that_shows_them() -> None:
    assert to_java(logging.NOTSET) == "TRACE"
    assert to_java(15) == "INFO"
    assert to_java(25) == "WARN"


@pytest.mark.parametrize(
    ("namespace", "with_levels", "expected"),
    [
        ("root", ["a", "b.c"], ["a", "b.c", "root"]),
        ("root", [], ["root"]),
        ("a", ["a.b", "a.b.c", "ab", "b"], ["a", "a.b", "a.b.c"]),
        ("new.one", ["a"], ["new.one"]),
        ("a.b", ["a", "root"], ["a.b"]),
    ],
)
def test_a_change_touches_the_namespace_and_the_set_loggers_below_it(
    namespace: str, with_levels: list[str], expected: list[str]
) -> None:
    assert affected_loggers(namespace, with_levels) == expected


def test_levels_are_applied_listed_and_time_stamped() -> None:
    levels = LoggerLevels()
    ns = f"kctest{uuid.uuid4().hex[:6]}"
    assert levels.get(ns) is None  # no explicit level yet: Java's 404
    assert levels.set(ns + ".child", "ERROR", now_ms=1) == [ns + ".child"]
    assert levels.set(ns, "debug", now_ms=2) == [ns, ns + ".child"]
    assert logging.getLogger(ns + ".child").getEffectiveLevel() == logging.DEBUG
    listing = levels.all()
    assert listing[ns].to_json() == {"level": "DEBUG", "last_modified": 2}
    assert listing[ns + ".child"].to_json() == {"level": "DEBUG", "last_modified": 2}
    assert "root" in listing
    with pytest.raises(ValueError, match="invalid log level 'LOUD'"):
        levels.set(ns, "LOUD")


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"{}", "Desired 'level' parameter was not specified in request."),
        (b"", "Desired 'level' parameter was not specified in request."),
        (b"[]", "JSON object"),
        (b"{x", "not valid JSON"),
        (b'{"level": 3}', "must be a string"),
    ],
)
def test_put_body_errors(raw: bytes, message: str) -> None:
    with pytest.raises(BadRequestError, match=message.replace("'", ".").replace("(", r"\(")):
        parse_level_body(raw)


def test_put_body_level() -> None:
    assert parse_level_body(b'{"level": "WARN"}') == "WARN"
