"""Scratch directories named for their process: which a worker removes (a pure choice, by table) and that
it does, on a real temporary directory, with a real dead process's id."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from kconnect.runtime.dataplane.scratch import make_scratch_dir, pid_alive, stale

ALIVE = {100, os.getpid()}
CP = "kconnect-checkpoint-"


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        ([f"{CP}200-c-0-abc"], [f"{CP}200-c-0-abc"]),  # its process is gone
        ([f"{CP}100-c-0-abc"], []),  # alive: never touched
        ([f"{CP}{os.getpid()}-c-0-abc"], []),  # this process's own
        ([f"{CP}c-0-abc", f"{CP}-x", f"{CP}12"], []),  # no id where the id goes
        (["kconnect-spark-home-200-abc", "other-200-abc", f"{CP}300-x"], [f"{CP}300-x"]),  # another prefix
        ([f"{CP}300-b", f"{CP}200-a"], [f"{CP}200-a", f"{CP}300-b"]),
    ],
)
def test_only_directories_of_processes_that_are_gone_are_stale(names: list[str], expected: list[str]) -> None:
    assert stale(names, CP, lambda pid: pid in ALIVE) == expected


def test_a_new_scratch_directory_removes_what_a_dead_process_left_and_keeps_the_rest() -> None:
    print_pid = [sys.executable, "-c", "import os; print(os.getpid())"]
    dead_pid = int(subprocess.run(print_pid, capture_output=True, text=True, check=True).stdout)
    assert not pid_alive(dead_pid) and pid_alive(os.getpid())
    prefix = f"kconnect-test-scratch-{os.getpid()}x-"  # this test's own prefix: workers' dirs are safe
    root = Path(tempfile.gettempdir())
    left = root / f"{prefix}{dead_pid}-c-0-abc"
    (left / "offsets").mkdir(parents=True)
    (left / "offsets" / "0").write_text("v1")
    kept = root / f"{prefix}{os.getppid()}-c-0-abc"  # the parent (pytest's runner or a shell) is alive
    kept.mkdir()
    made: Path | None = None
    try:
        made = make_scratch_dir(prefix, "c-0")
        assert made.is_dir() and made.name.startswith(f"{prefix}{os.getpid()}-c-0-")
        assert not left.exists() and kept.is_dir()
    finally:
        for path in (left, kept, made):
            if path is not None:
                shutil.rmtree(path, ignore_errors=True)
