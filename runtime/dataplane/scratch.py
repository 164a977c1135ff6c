"""Temporary directories of a worker's data plane (sink queries' checkpoints, the SPARK_HOME of links),
named for the process that made them, so that a worker can remove what a killed one left behind.

Why: a worker removes its scratch directories when a task stops or the worker shuts down, but a worker
that is killed (SIGKILL, OOM, a restarted container that kept /tmp) cannot, and it left a directory per
sink query it ran. Each name carries the creating process's id (``<prefix><pid>-<random>``, with a label
before the random part where one helps a reader); a worker making a directory first removes those of the
same prefix whose process is gone. A directory of a process that is alive is never touched, even if that
is another worker's (or an id reused): it is removed once nothing runs under its id.

The choice of what to remove (:func:`stale`) is a pure function of the names and of which ids are alive.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

from kconnect.runtime import logs

__all__ = ["make_scratch_dir", "pid_alive", "stale"]

log = logs.get(__name__)


def stale(names: Iterable[str], prefix: str, alive: Callable[[int], bool]) -> list[str]:
    """The names, among ``names``, of directories this module made under ``prefix`` for a process that
    is no longer alive. Names of another shape (no id after the prefix) are never chosen."""
    out: list[str] = []
    for name in names:
        if not name.startswith(prefix):
            continue
        pid, dash, _ = name[len(prefix) :].partition("-")
        if dash and pid.isdigit() and not alive(int(pid)):
            out.append(name)
    return sorted(out)


def pid_alive(pid: int) -> bool:
    """Whether a process with this id exists on this machine (signal 0; one of another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def make_scratch_dir(prefix: str, label: str = "") -> Path:
    """A new temporary directory ``<prefix><pid>-[<label>-]<random>``, after removing those of the same
    prefix that processes no longer alive left behind (best effort: one that cannot be removed stays)."""
    root = Path(tempfile.gettempdir())
    try:
        names = [entry.name for entry in os.scandir(root) if entry.is_dir(follow_symlinks=False)]
    except OSError:
        names = []
    for name in stale(names, prefix, pid_alive):
        shutil.rmtree(root / name, ignore_errors=True)
        log.info("removed a scratch directory a stopped worker left", path=str(root / name))
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-{label + '-' if label else ''}", dir=root))
