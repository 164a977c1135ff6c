"""CPU seconds of a process and of its whole tree, read from ``/proc``: how the benches count a system's CPU.

Why one reading: ``dataplane.py`` held it and ``cdc.py``, ``lakehouse.py``, ``avro.py``, ``density.py`` and
``cpu_threads.py`` reached into it (``cdc.py`` and ``lakehouse.py`` each summing the tree by hand), so a
bench that wanted the worker tree's CPU had to import the data-plane bench for it. The figures of every
bench that counts CPU this way stay comparable only while they share one reading. It lives in
``tests/support/processes.py`` now, so that a test asserting a CPU figure (``test_broker_lost.py``) counts
as the benches do; this module keeps the benches' names.

    import process_cpu                           # bench/ is on sys.path when a bench runs
    before = process_cpu.tree_cpu_seconds(worker_pid)
"""

from __future__ import annotations

from tests.support.processes import TICK as TICK
from tests.support.processes import cpu_ticks as cpu_ticks
from tests.support.processes import tree_cpu as tree_cpu
from tests.support.processes import tree_cpu_seconds as tree_cpu_seconds
