"""CPU seconds and resident memory of a process tree, read from ``/proc``: what the data-plane benches
measure a worker with (its own process, the Spark JVM and Python workers below it, and, on a standalone
cluster, the Spark master's and worker's trees beside it). Split out of ``dataplane.py``; that module
still exports these names (``dp.tree_cpu``, ``dp._cpu_ticks`` ...), which other benches use."""

from __future__ import annotations

import threading
from collections.abc import Sequence

import process_cpu

from tests.support.processes import command_name, descendants


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


#: The process tree read from /proc (one implementation for the benches and the tests).
_comm = command_name
_descendants = descendants


#: The clock-tick reading is ``process_cpu``'s, which the other benches count CPU with.
_TICK = process_cpu.TICK
_cpu_ticks = process_cpu.cpu_ticks


def tree_cpu(root: int, others: Sequence[int] = ()) -> dict[str, float]:
    """CPU seconds so far of a process tree: ``root`` itself, and everything below it.

    Below it: every live descendant's own and reaped children's time, plus the children ``root`` itself
    reaped. A process that exits is reaped by its parent (in the tree), whose children's time then holds
    it, so a difference of two samples counts each process once. For a kconnect worker "below" is its
    Spark JVM and Spark's Python workers (``pyspark.daemon`` and the workers it forks); a reference worker
    (the JVM itself) has nothing below it. ``others`` are more roots whose whole trees count as "below"
    (a standalone Spark cluster's master and worker, whose children are the executors).
    """
    own, reaped = _cpu_ticks(root)
    below = reaped
    for pid in _descendants(root):
        below += sum(_cpu_ticks(pid))
    for other in others:
        below += sum(_cpu_ticks(other)) + sum(sum(_cpu_ticks(pid)) for pid in _descendants(other))
    return {"root": own / _TICK, "below": below / _TICK}


class Meter:
    """CPU seconds of a process tree (and of ``others``' trees, as "below") and of the broker, and the
    trees' peak RSS, from enter to stop()."""

    def __init__(self, pid: int, broker_pid: int | None, others: Sequence[int] = ()) -> None:
        self.pid = pid
        self.others = list(others)
        self.broker_pid = broker_pid
        self.sampler = PeakSampler(pid, self.others)
        self.cpu: dict[str, float] = {}

    def _broker(self) -> float:
        return sum(_cpu_ticks(self.broker_pid)) / _TICK if self.broker_pid else 0.0

    def __enter__(self) -> Meter:
        self._start = {**tree_cpu(self.pid, self.others), "broker": self._broker()}
        self.sampler.__enter__()
        return self

    def stop(self) -> None:
        """Take the CPU figures now (the moment the output is complete)."""
        end = {**tree_cpu(self.pid, self.others), "broker": self._broker()}
        self.cpu = {k: end[k] - self._start[k] for k in end}

    def __exit__(self, *exc: object) -> None:
        if not self.cpu:
            self.stop()
        self.sampler.__exit__()

    @property
    def peak(self) -> dict[str, int]:
        return self.sampler.peak


def tree_rss(root: int, others: Sequence[int] = ()) -> dict[str, int]:
    """RSS in KiB of a process tree by kind: the root itself, JVMs below it, other processes below it;
    ``others``' whole trees count as below it."""
    usage = {"root": _rss_kib(root), "jvm": 0, "other": 0}
    for pid in [*_descendants(root), *(p for other in others for p in (other, *_descendants(other)))]:
        usage["jvm" if _comm(pid) == "java" else "other"] += _rss_kib(pid)
    return usage


class PeakSampler:
    """Samples ``tree_rss(pid, others)`` every 0.2 s on a thread and keeps the peak of each kind and of
    their sum."""

    def __init__(self, pid: int, others: Sequence[int] = ()) -> None:
        self.pid = pid
        self.others = list(others)
        self.peak = {"root": 0, "jvm": 0, "other": 0, "total": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            usage = tree_rss(self.pid, self.others)
            usage["total"] = sum(usage.values())
            for kind, kib in usage.items():
                self.peak[kind] = max(self.peak[kind], kib)
            self._stop.wait(0.2)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def mib(kib: int) -> str:
    return f"{kib / 1024:.0f} MiB"
