"""The benches' CPU reading (tests/support/processes.py; bench/process_cpu.py keeps its names) counts a
process tree's CPU once: a live child under "below" while it runs, and still under "below" (as its
parent's reaped children's time) once it exited and was reaped. A bench's CPU figures are differences of
two samples, so a child that ends between them must neither vanish from the tree's total nor count twice."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.support import processes as process_cpu

#: CPU seconds the child spends (on its own clock, so a loaded machine only makes it take longer).
SPIN_S = 0.3
#: Spin until told, after SPIN_S of CPU: the child is then live and idle while the test samples the tree.
CHILD = f"""
import sys, time
while time.process_time() < {SPIN_S}:
    pass
print("spun", flush=True)
sys.stdin.readline()
"""


def test_a_child_counts_below_while_it_lives_and_once_after_it_is_reaped() -> None:
    me = os.getpid()
    before = process_cpu.tree_cpu(me)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "spun"
        own, _ = process_cpu.cpu_ticks(child.pid)
        assert own / process_cpu.TICK >= SPIN_S * 0.9  # its own CPU, read from /proc/<pid>/stat
        live = process_cpu.tree_cpu(me)
        assert live["below"] - before["below"] >= SPIN_S * 0.9
    finally:
        assert child.stdin is not None
        child.stdin.close()
        child.wait(30)
    reaped = process_cpu.tree_cpu(me)
    # Once reaped, its time is this process's children's time: still below, and not counted twice.
    assert reaped["below"] - before["below"] >= SPIN_S * 0.9
    assert reaped["below"] - before["below"] < 1.5 * SPIN_S  # twice would be 2 * SPIN_S
    assert process_cpu.tree_cpu_seconds(me) >= sum(reaped.values())
    assert process_cpu.cpu_ticks(child.pid) == (0, 0)  # gone: nothing to read
