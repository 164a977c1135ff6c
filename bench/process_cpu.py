"""CPU seconds of a process and of its whole tree, read from ``/proc``: how the benches count a system's CPU.

Why one module: ``dataplane.py`` held the reading and ``cdc.py``, ``lakehouse.py``, ``avro.py``,
``density.py`` and ``cpu_threads.py`` reached into it (``cdc.py`` and ``lakehouse.py`` each summing the
tree by hand), so a bench that wanted the worker tree's CPU had to import the data-plane bench for it. The
figures of every bench that counts CPU this way stay comparable only while they share one reading.

    import process_cpu                           # bench/ is on sys.path when a bench runs
    before = process_cpu.tree_cpu_seconds(worker_pid)
"""

from __future__ import annotations

import os
from pathlib import Path

from tests.support.processes import descendants

#: Clock ticks per second: the unit of ``/proc/<pid>/stat``'s CPU times.
TICK = os.sysconf("SC_CLK_TCK")


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
