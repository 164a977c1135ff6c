"""Servers the tests start as child processes: stopping them, and waiting until they answer.

Why one home: Apache Iceberg's REST catalog server, the Schema Registry server and Spark's standalone
master and workers each stood with the same stop (SIGTERM, then SIGKILL) and the same start-up wait (the
process must still live, and answer within a bound, else its log's tail is the error).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

#: How long a SIGTERMed server may take to exit before it is killed.
STOP_S = 20.0


def stop_process(proc: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL if it has not exited within :data:`STOP_S`; nothing if it has exited."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(STOP_S)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def await_answer(
    proc: subprocess.Popen[bytes],
    answers: Callable[[], bool],
    *,
    log: Path,
    timeout: float,
    pause: float,
    error: type[Exception],
    what: str,
) -> None:
    """Return once ``answers()`` is true; raise ``error`` with the tail of ``log`` if ``proc`` exits first, or
    (after stopping it) if ``timeout`` seconds pass. ``answers`` may raise nothing: it says False instead."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise error(f"{what} exited: {log.read_text(errors='replace')[-3000:]}")
        if answers():
            return
        time.sleep(pause)
    stop_process(proc)
    raise error(f"{what} did not answer: {log.read_text(errors='replace')[-3000:]}")
