"""What ``density.py`` feeds its pipelines with and how it times them: a feeder thread appending ``--rate``
stamped lines a second to every source file, a tailer noting when each line first appears in its sink
file, and the percentile of the latencies. Split out of ``density.py`` (past 800 lines)."""

from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

#: Bytes of filler after a line's stamp, so a line is about 100 bytes as in ``dataplane.py``.
LINE_FILLER = "x" * 64
#: How often the tailer looks at the sink files (part of every latency figure).
TAIL_POLL_S = 0.02


@dataclass
class Pipeline:
    index: int
    topic: str
    source: Path
    sink: Path


class Feeder(threading.Thread):
    """Appends ``rate`` lines a second to each source file, the N*rate writes spread evenly over each
    second (pipeline ``e % N`` gets write ``e``); each line is ``<pipeline> <seq> <wall time> <filler>``."""

    def __init__(self, pipelines: list[Pipeline], rate: float) -> None:
        super().__init__(daemon=True, name="feeder")
        self.pipelines = pipelines
        self.rate = rate
        self.written = [0] * len(pipelines)
        self.behind_s = 0.0  # the most the feeder fell behind its schedule
        self._halt = threading.Event()

    def run(self) -> None:
        n = len(self.pipelines)
        files: list[IO[str]] = [open(p.source, "a", encoding="ascii") for p in self.pipelines]  # noqa: SIM115
        try:
            period = 1.0 / (self.rate * n)
            started = time.monotonic()
            event = 0
            while not self._halt.is_set():
                due = started + event * period
                delay = due - time.monotonic()
                if delay > 0:
                    if self._halt.wait(delay):
                        break
                else:
                    self.behind_s = max(self.behind_s, -delay)
                i = event % n
                seq = self.written[i]
                files[i].write(f"{i} {seq} {time.time():.6f} {LINE_FILLER}\n")
                files[i].flush()
                self.written[i] = seq + 1
                event += 1
        finally:
            for f in files:
                f.close()

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


class Tailer(threading.Thread):
    """Polls the sink files every ``TAIL_POLL_S`` and notes when each line first appeared."""

    def __init__(self, pipelines: list[Pipeline]) -> None:
        super().__init__(daemon=True, name="tailer")
        self.pipelines = pipelines
        #: Per pipeline: seq -> (write time, first arrival time), both wall clock.
        self.arrived: list[dict[int, tuple[float, float]]] = [{} for _ in pipelines]
        self.duplicates = 0
        self.bad_lines = 0
        self._halt = threading.Event()

    def run(self) -> None:
        handles: list[IO[bytes] | None] = [None] * len(self.pipelines)
        rest = [b""] * len(self.pipelines)
        try:
            while not self._halt.is_set():
                for i, p in enumerate(self.pipelines):
                    handle = handles[i]
                    if handle is None:
                        try:
                            handle = handles[i] = open(p.sink, "rb")  # noqa: SIM115 - closed below
                        except FileNotFoundError:
                            continue
                    data = handle.read()
                    if not data:
                        continue
                    now = time.time()
                    lines = (rest[i] + data).split(b"\n")
                    rest[i] = lines.pop()
                    for line in lines:
                        self._note(i, line, now)
                self._halt.wait(TAIL_POLL_S)
        finally:
            for handle in handles:
                if handle is not None:
                    handle.close()

    def _note(self, i: int, line: bytes, now: float) -> None:
        try:
            pipeline, seq, written = line.split(b" ", 3)[:3]
            key, stamp = int(seq), float(written)
            if int(pipeline) != i:
                raise ValueError
        except ValueError:
            self.bad_lines += 1
            return
        if key in self.arrived[i]:
            self.duplicates += 1
        else:
            self.arrived[i][key] = (stamp, now)

    def stop(self) -> None:
        self._halt.set()
        self.join(10)


def percentile(sorted_values: list[float], q: float) -> float:
    """The nearest-rank percentile ``q`` (0-100) of an ascending list."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), math.ceil(q / 100 * len(sorted_values))))
    return sorted_values[rank - 1]
