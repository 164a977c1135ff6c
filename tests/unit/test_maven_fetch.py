"""The test support's one Maven fetch routine (tests/support/maven.py): when it runs Maven, what it trusts
and what it says when it cannot. ``mvn`` here is a small script on PATH that records its runs and copies
one jar (or fails as Maven does); the real fetches are ``make kafka`` and ``make lakehouse``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import maven

FAKE_MVN = """#!/bin/sh
echo "$@" >> "$FAKE_MVN_LOG"
for arg in "$@"; do case "$arg" in -DoutputDirectory=*) out="${arg#-DoutputDirectory=}";; esac; done
if [ -n "$FAKE_MVN_FAIL" ]; then
  echo "[ERROR] Failed to execute goal: Could not resolve org.example:x:1.0"; exit 1
fi
: > "$out/x-1.0.jar"
"""


class FetchError(RuntimeError):
    """A caller's own error type."""


@pytest.fixture
def runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fake ``mvn`` alone on PATH; the file it appends each run's arguments to."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "mvn").write_text(FAKE_MVN)
    (bin_dir / "mvn").chmod(0o755)
    log = tmp_path / "mvn-runs"
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("FAKE_MVN_LOG", str(log))
    monkeypatch.delenv("FAKE_MVN_FAIL", raising=False)
    return log


def _fetch(home: Path) -> Path:
    return maven.copy_dependencies(
        Path("/repo/tests/x/pom.xml"), home, "plugins/x", what="X 1.0", stamp="1.0", error=FetchError
    )


def test_the_first_call_copies_and_marks_the_rest_trust_the_marker(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "cache" / "x-1.0"
    dest = _fetch(home)
    assert dest == home / "plugins" / "x"
    assert [p.name for p in dest.iterdir()] == ["x-1.0.jar"]
    assert (home / "complete").read_text() == "1.0\n"
    assert maven.is_fetched(home)
    args = runs.read_text().split()
    assert args[:4] == ["-q", "-B", "-f", "/repo/tests/x/pom.xml"]
    assert f"-DoutputDirectory={dest}" in args
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))  # a filled cache needs no Maven
    assert _fetch(home) == dest
    assert len(runs.read_text().splitlines()) == 1


def test_an_interrupted_copy_is_cleared_and_redone(runs: Path, tmp_path: Path) -> None:
    home = tmp_path / "x-1.0"
    (home / "plugins" / "x").mkdir(parents=True)
    (home / "plugins" / "x" / "half-written.jar").write_bytes(b"PK")  # no marker: cut short
    assert not maven.is_fetched(home)
    dest = _fetch(home)
    assert [p.name for p in dest.iterdir()] == ["x-1.0.jar"]
    assert maven.is_fetched(home)


def test_a_failing_mvn_raises_the_callers_error_with_its_output_and_leaves_no_marker(
    runs: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MVN_FAIL", "1")
    home = tmp_path / "x-1.0"
    wanted = r"mvn could not fetch X 1\.0 .*Could not resolve org\.example:x:1\.0"
    with pytest.raises(FetchError, match=wanted):
        _fetch(home)
    assert not maven.is_fetched(home)
    monkeypatch.delenv("FAKE_MVN_FAIL")
    assert [p.name for p in _fetch(home).iterdir()] == ["x-1.0.jar"]  # the next call tries again
    assert len(runs.read_text().splitlines()) == 2


def test_without_mvn_the_error_names_maven_and_what_was_wanted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(FetchError, match=r"Maven \(mvn\) is needed to fetch X 1\.0 from Maven Central"):
        _fetch(tmp_path / "x-1.0")
    assert not (tmp_path / "x-1.0").exists()


def test_the_cache_is_under_xdg_cache_home_else_home_dot_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert maven.kconnect_cache("x-1.0") == tmp_path / "xdg" / "kconnect" / "x-1.0"
    for unset in ("", None):
        if unset is None:
            monkeypatch.delenv("XDG_CACHE_HOME")
        else:
            monkeypatch.setenv("XDG_CACHE_HOME", unset)
        monkeypatch.setenv("HOME", str(tmp_path / "home"))
        assert maven.kconnect_cache("x-1.0") == tmp_path / "home" / ".cache" / "kconnect" / "x-1.0"


def test_a_connect_plugin_gets_a_folder_of_its_own_in_the_plugin_path(runs: Path, tmp_path: Path) -> None:
    home = tmp_path / "x-1.0"
    path = maven.connect_plugin_path(
        Path("/repo/tests/x/pom.xml"), home, "x-connector", what="X 1.0", stamp="1.0", error=FetchError
    )
    assert path == home / "plugins"
    assert [p.relative_to(path).as_posix() for p in path.rglob("*")] == [
        "x-connector",
        "x-connector/x-1.0.jar",
    ]
