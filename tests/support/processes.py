"""A process's tree read from /proc (no psutil in the test environment): what a worker has forked, and the
CPU seconds it used.

Why the CPU reading is here: the benches count a system's CPU with it (``bench/process_cpu.py`` keeps its
names) and a test that asserts a CPU figure (``test_broker_lost.py``) must count the same way; tests
reach no bench code, and the benches already build on ``tests/support``.
"""

from __future__ import annotations

import os
from pathlib import Path

#: Clock ticks per second: the unit of ``/proc/<pid>/stat``'s CPU times.
TICK = os.sysconf("SC_CLK_TCK")


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid``."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        parents.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            out.append(child)
            todo.append(child)
    return out


def command_name(pid: int) -> str:
    """The process's command name (``comm``), empty once it is gone."""
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def cpu_ticks(pid: int) -> tuple[int, int]:
    """(utime + stime, cutime + cstime) of ``pid`` in clock ticks; (0, 0) once it is gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0, 0
    # After the ")": state ppid ... utime is field 14 of stat, so index 11 here; stime, cutime, cstime follow.
    return int(fields[11]) + int(fields[12]), int(fields[13]) + int(fields[14])


def tree_cpu(root: int) -> dict[str, float]:
    """CPU seconds so far of a process tree: ``root`` itself, and everything below it.

    Below it: every live descendant's own and reaped children's time, plus the children ``root`` itself
    reaped. A process that exits is reaped by its parent (in the tree), whose children's time then holds
    it, so a difference of two samples counts each process once. For a kconnect worker "below" is its
    Spark JVM and Spark's Python workers (``pyspark.daemon`` and the workers it forks); a reference worker
    (the JVM itself) has nothing below it.
    """
    own, reaped = cpu_ticks(root)
    below = reaped
    for pid in descendants(root):
        below += sum(cpu_ticks(pid))
    return {"root": own / TICK, "below": below / TICK}


def tree_cpu_seconds(root: int) -> float:
    """The whole tree's CPU seconds so far (:func:`tree_cpu`'s parts summed): a difference of two samples is
    what a system spent between them."""
    return sum(tree_cpu(root).values())
