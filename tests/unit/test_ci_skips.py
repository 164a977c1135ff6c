"""Under CI a skipped Java-dependent test fails (the hook in `tests/conftest.py`); elsewhere it only skips.

The hook is checked as pytest runs it: a pytest in a subprocess collects a throwaway test file whose
conftest imports the project's hook itself, once with ``CI=true`` and once without ``CI``, and the JUnit
report says which tests failed and which skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tests.conftest import JAVA_REASON, on_ci

ROOT = Path(__file__).resolve().parents[2]

CONFTEST = """\
from tests.conftest import pytest_runtest_makereport  # noqa: F401  (the project's hook, not a copy)
"""

PYTEST_INI = """\
[pytest]
markers =
    interop: needs Java and the reference Apache Kafka Connect worker
"""

SKIPS = """\
import pytest


def test_java_missing():
    pytest.skip("java missing")


@pytest.mark.skipif(True, reason="needs a JDK")
def test_jdk_missing_at_setup():
    pass


@pytest.mark.interop
def test_interop_skips_for_any_reason():
    pytest.skip("the other side is not there")


def test_needs_windows():
    pytest.skip("needs windows")


@pytest.mark.xfail(reason="java is known to fail here")
def test_expected_java_failure():
    raise AssertionError("expected")
"""


def outcomes(tmp_path: Path, ci: str | None) -> dict[str, str]:
    """Run the throwaway tests with ``CI`` set to `ci` (None: unset); each test's name and outcome."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "pytest.ini").write_text(PYTEST_INI)
    (tmp_path / "test_skips.py").write_text(SKIPS)
    report = tmp_path / f"report-{ci}.xml"
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "PYTEST_ADDOPTS")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    if ci is not None:
        env["CI"] = ci
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
         "--rootdir", str(tmp_path), f"--junitxml={report}", "test_skips.py"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert report.exists(), f"pytest wrote no report (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}"
    result: dict[str, str] = {}
    for case in ET.parse(report).getroot().iter("testcase"):
        tags = {child.tag for child in case}
        result[case.attrib["name"]] = (
            "failed" if tags & {"failure", "error"} else "skipped" if "skipped" in tags else "passed"
        )
    return result


def test_under_ci_a_java_or_interop_skip_fails_and_an_unrelated_one_stays_skipped(tmp_path: Path) -> None:
    assert outcomes(tmp_path, "true") == {
        "test_java_missing": "failed",
        "test_jdk_missing_at_setup": "failed",
        "test_interop_skips_for_any_reason": "failed",
        "test_needs_windows": "skipped",
        "test_expected_java_failure": "skipped",  # an xfail is not a skip, even when its reason names java
    }


def test_without_ci_every_skip_stays_a_skip(tmp_path: Path) -> None:
    assert set(outcomes(tmp_path, None).values()) == {"skipped"}


@pytest.mark.parametrize(
    ("value", "ci"),
    [("true", True), ("1", True), ("yes", True), ("TRUE", True),
     ("", False), ("  ", False), ("0", False), ("false", False), ("False", False), ("no", False)],
)  # fmt: skip
def test_which_values_of_ci_count_as_set(monkeypatch: pytest.MonkeyPatch, value: str, ci: bool) -> None:
    monkeypatch.setenv("CI", value)
    assert on_ci() is ci


def test_an_unset_ci_is_not_ci(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CI", raising=False)
    assert not on_ci()


@pytest.mark.parametrize(
    ("reason", "java"),
    [("java missing", True), ("needs a JDK", True), ("javac not found", True), ("no JVM", True),
     ("interop needs the reference Apache Kafka Connect 3.9.0: absent", True),
     ("needs windows", False), ("javascript runtime missing", False), ("no postgres", False)],
)  # fmt: skip
def test_which_skip_reasons_name_java(reason: str, java: bool) -> None:
    assert bool(JAVA_REASON.search(reason)) is java
