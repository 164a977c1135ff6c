"""Where the longest output gaps of a kept ``bench/rolling.py`` run went, read from its work directory: the
sink files' arrival times (``<group>-arrivals.json``, written with ``--keep``) against the workers' logs.

    .venv/bin/python bench/rolling_gaps.py /tmp/kconnect-bench-rolling-XXXX [--top 10]

Prints two tables (markdown, for bench/README.md):

1. **the longest roll gaps**, one row per pipeline, split into phases when one of the pipeline's tasks moved
   within the gap: lines in flight before the stop (the last line delivered before the gap to the old
   owner's stop beginning), the stop (``task released``'s seconds), the release record (``tasks released``
   on the old owner), claim to start (that record to the new owner's ``task started``), start to loop
   running (``task running``), loop running to the first line after the gap. A gap with no move of its
   pipeline's tasks is a stall of unmoved tasks (load, a worker busy with the hand-over);
2. **every move** of the roll, by task kind and direction (away from the restarted worker, or home to it),
   each phase's p50 / p95 / max.

With the run's Kafka data kept (``kafka/node*/data``, Apache Kafka only), each line's produce time (its
record's CreateTime, set by the source task's producer) splits a line's way in two: written to produced
(the source side: the FileStream task's poll interval, its producer) and produced to arrived (the sink
side: the broker, the worker's shared reader, the sink task). The first table then gives, for the line
after the gap's last, when it was written, produced and arrived, each from that last arrival; and a third
table those two sides' latencies over every line, in the steady window and the roll.

Pipeline ``i``'s tasks are ``density-<tag>-<i>-source-0`` and ``-sink-0`` (``density.create_pipelines``);
worker ``n`` logs to ``<group>-<n>.log``. The times are the workers' log stamps (one clock, one machine).
"""

from __future__ import annotations

import argparse
import bisect
import itertools
import json
import math
import struct
from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: The task events a move is read from.
TASK_EVENTS = ("task started", "task running", "task released")


@dataclass(frozen=True)
class Event:
    at: float
    worker: int
    name: str
    record: dict[str, Any]


@dataclass(frozen=True)
class Move:
    """One task stopped on ``old`` and started on ``new``: the times of its steps."""

    kind: str  # source | sink
    pipeline: int
    old: int
    new: int
    stop_began: float
    stopped: float
    released: float
    started: float
    running: float


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()


def read_events(work: Path, group: str) -> dict[str, list[Event]]:
    """Per task (``connector-n``), its events from every worker's log, in time order; a ``tasks released``
    record counts as a ``release record`` event of each task it names."""
    per_task: dict[str, list[Event]] = defaultdict(list)
    n = 0
    while (path := work / f"{group}-{n}.log").exists():
        for line in path.open(errors="replace"):
            if not line.startswith("{"):
                continue
            try:
                record = json.loads(line)
                at = _stamp(record["timestamp"])
            except (ValueError, KeyError):
                continue
            name = record.get("event")
            if name in TASK_EVENTS:
                task = record.get("task")
                key = task if isinstance(task, str) else f"{record.get('connector')}-{task}"
                per_task[key].append(Event(at, n, name, record))
            elif name == "tasks released":
                for key in record.get("tasks", []):
                    per_task[key].append(Event(at, n, "release record", record))
        n += 1
    for events in per_task.values():
        events.sort(key=lambda e: e.at)
    return per_task


def moves_of(events: list[Event], kind: str, pipeline: int, start: float, end: float) -> list[Move]:
    """The task's moves started in [start, end]: each start on a worker after a stop on another."""
    out = []
    for e in events:
        if e.name != "task started" or not start <= e.at <= end:
            continue
        stops = [
            s
            for s in events
            if s.name == "task released" and s.worker != e.worker and e.at - 30 < s.at <= e.at
        ]
        if not stops:
            continue
        stop = stops[-1]
        records = [
            r.at for r in events if r.name == "release record" and r.worker == stop.worker and r.at >= stop.at
        ]
        runs = [r.at for r in events if r.name == "task running" and r.worker == e.worker and r.at >= e.at]
        released = records[0] if records else stop.at
        out.append(
            Move(
                kind,
                pipeline,
                stop.worker,
                e.worker,
                stop.at - float(stop.record.get("seconds", 0.0)),
                stop.at,
                released,
                e.at,
                runs[0] if runs else e.at,
            )
        )
    return out


def longest_gap(times: list[float], start: float, end: float) -> tuple[float, float, float]:
    """(seconds, from, to) of the longest stretch in [start, end] without an arrival (``handover.longest_gap``
    for one pipeline)."""
    before = [t for t in times if t < start]
    points = [before[-1] if before else start, *(t for t in times if start <= t <= end), end]
    best = (0.0, start, start)
    for a, b in itertools.pairwise(points):
        if b - a > best[0]:
            best = (b - a, a, b)
    return best


def _varint(data: bytes, at: int) -> tuple[int, int]:
    """A zigzag varint (Kafka's record fields) at ``at``: its value and the offset after it."""
    shift = result = 0
    while True:
        byte = data[at]
        at += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), at
        shift += 7


def produced_at(work: Path, topic: str) -> dict[int, float]:
    """Line number -> its record's CreateTime (s), from the topic's kept log segments (record batch v2;
    compressed and control batches are skipped: the bench's producers do not compress). Empty when the
    run's Kafka data was not kept."""
    out: dict[int, float] = {}
    for segment in sorted(work.glob(f"kafka/node*/data/{topic}-0/*.log")):
        data = segment.read_bytes()
        at = 0
        while at + 61 <= len(data):
            length = struct.unpack(">i", data[at + 8 : at + 12])[0]
            if length <= 0:
                break
            end = at + 12 + length
            attributes = struct.unpack(">h", data[at + 21 : at + 23])[0]
            base_ms = struct.unpack(">q", data[at + 27 : at + 35])[0]
            count = struct.unpack(">i", data[at + 57 : at + 61])[0]
            if attributes & 0x07 or attributes & 0x20:
                at = end
                continue
            pos = at + 61
            for _ in range(count):
                size, pos = _varint(data, pos)
                after = pos + size
                delta_ms, pos = _varint(data, pos + 1)  # past the record's attributes byte
                _offset_delta, pos = _varint(data, pos)
                key_size, pos = _varint(data, pos)
                pos += max(0, key_size)
                value_size, pos = _varint(data, pos)
                value = data[pos : pos + max(0, value_size)]
                pos = after
                try:
                    out[int(value.split(b" ", 3)[1])] = (base_ms + delta_ms) / 1000
                except (IndexError, ValueError):
                    continue
            at = end
    return out


def written_at(work: Path, tag: str, pipeline: int) -> dict[int, float]:
    """Line number -> when the feeder wrote it (the stamp in the line), from the pipeline's sink file."""
    out: dict[int, float] = {}
    for line in (work / f"out-{tag}-{pipeline}.txt").read_text(errors="replace").splitlines():
        parts = line.split(" ", 3)
        try:
            out[int(parts[1])] = float(parts[2])
        except (IndexError, ValueError):
            continue
    return out


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return math.nan
    return ordered[max(1, min(len(ordered), math.ceil(q / 100 * len(ordered)))) - 1]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("work", type=Path, help="the run's kept work directory")
    parser.add_argument("--top", type=int, default=10, help="rows of the longest gaps")
    args = parser.parse_args(argv)
    dump_path = next(args.work.glob("*-arrivals.json"))
    group = dump_path.name.removesuffix("-arrivals.json")
    tag = group[-6:]
    dump = json.loads(dump_path.read_text())
    arrivals: list[list[float]] = dump["arrivals"]
    roll_start, roll_end = dump["roll"]
    per_task = read_events(args.work, group)
    ids: dict[str, int] = {}
    n = 0
    while (path := args.work / f"{group}-{n}.log").exists():
        for line in path.open(errors="replace"):
            if '"worker started"' in line:
                ids[json.loads(line)["worker"]] = n
                break
        n += 1
    turns = [(ids.get(worker, -1), a, b) for worker, a, b in dump["turns"]]

    def turn_at(t: float) -> int:
        return next((w for w, a, b in turns if a <= t <= b), -1)

    steady = sorted(longest_gap(times, *dump["steady"])[0] for times in arrivals)
    print(f"{group}: steady window's longest gap {steady[-1]:.2f} s (p95 {_pct(steady, 95):.2f})\n")
    produced = [produced_at(args.work, f"density-{tag}-{i}-lines") for i in range(len(arrivals))]
    kept = any(produced)
    written = [written_at(args.work, tag, i) for i in range(len(arrivals))] if kept else []
    print(
        "| pipeline | gap s | at (roll +s) | turn | what moved | in flight before the stop | stop "
        "| release record | claim to start | start to loop running | loop running to first line |"
        + (" next line written / produced / arrived |" if kept else "")
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|" + ("---|" if kept else ""))
    gaps = sorted(
        ((*longest_gap(times, roll_start, roll_end), i) for i, times in enumerate(arrivals)), reverse=True
    )
    for seconds, a, b, i in gaps[: args.top]:
        moved = [
            m
            for kind in ("sink", "source")
            for m in moves_of(per_task.get(f"density-{tag}-{i}-{kind}-0", []), kind, i, a - 2, b)
        ]
        head = f"| {i} | {seconds:.2f} | {a - roll_start:.1f} | w{turn_at(a)} |"
        tail = ""
        if kept:  # line k arrived k-th: the sink file holds the lines in order, none lost nor repeated
            line = bisect.bisect_right(arrivals[i], a)
            w, p = written[i].get(line), produced[i].get(line)
            tail = f" {w - a:+.2f} / {p - a:+.2f} / {b - a:+.2f} |" if w and p else " - |"
        if not moved:
            print(f"{head} nothing (a stall of unmoved tasks) | | | | | |{tail}")
            continue
        m = moved[0]
        where = "home" if turn_at(m.started) == m.new else "away"
        print(
            f"{head} {m.kind} w{m.old}->w{m.new} ({where}) | {m.stop_began - a:.2f} "
            f"| {m.stopped - m.stop_began:.2f} | {m.released - m.stopped:.2f} | {m.started - m.released:.2f} "
            f"| {m.running - m.started:.2f} | {b - m.running:.2f} |{tail}"
        )
    if kept:
        print(
            "\n| window | lines | written to produced p50 / p99 / max s "
            "| produced to arrived p50 / p99 / max s |"
        )
        print("|---|---|---|---|")
        for name, (lo, hi) in (("steady", dump["steady"]), ("roll", dump["roll"])):
            source_side, sink_side = [], []
            for i, times in enumerate(arrivals):
                for line, arrived in enumerate(times):
                    w, p = written[i].get(line), produced[i].get(line)
                    if w is not None and p is not None and lo <= w <= hi:
                        source_side.append(p - w)
                        sink_side.append(arrived - p)
            if source_side:
                print(
                    f"| {name} | {len(source_side)} | {_pct(source_side, 50):.2f} "
                    f"/ {_pct(source_side, 99):.2f} / {max(source_side):.2f} | {_pct(sink_side, 50):.2f} "
                    f"/ {_pct(sink_side, 99):.2f} / {max(sink_side):.2f} |"
                )

    phases: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for i, times in enumerate(arrivals):
        for kind in ("sink", "source"):
            for m in moves_of(per_task.get(f"density-{tag}-{i}-{kind}-0", []), kind, i, roll_start, roll_end):
                k = bisect.bisect_left(times, m.stop_began)
                after = bisect.bisect_right(times, m.started)
                if k == 0 or after >= len(times):
                    continue
                where = "home" if turn_at(m.started) == m.new else "away"
                row = phases[(kind, where)]
                row["stop"].append(m.stopped - m.stop_began)
                row["release record"].append(m.released - m.stopped)
                row["claim to start"].append(m.started - m.released)
                row["start to loop running"].append(m.running - m.started)
                row["loop running to first line"].append(times[after] - m.running)
                row["the pipeline's gap"].append(times[after] - times[k - 1])
    print("\n| task | moved | moves | phase | p50 s | p95 s | max s |\n|---|---|---|---|---|---|---|")
    for (kind, where), row in sorted(phases.items()):
        count = len(row["stop"])
        for phase, values in row.items():
            print(
                f"| {kind} | {where} | {count} | {phase} | {_pct(values, 50):.2f} | {_pct(values, 95):.2f} "
                f"| {max(values):.2f} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
