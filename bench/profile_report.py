"""Where a profiled run's CPU went: the worker's Python (py-spy's raw samples) and the Spark JVM (Flight
Recorder's execution samples), as tables of the hottest frames, for ``bench/lakehouse.py --profile --keep``.

    .venv/bin/python bench/profile_report.py /tmp/kconnect-bench-lakehouse-XXXX

For each ``*.pyspy.txt``: the share of samples per process (the worker, Spark's Python workers), then per
function, self (the sampled frame) and inclusive (anywhere on the stack), the top ``--top``. For each
``*.jfr`` (read with the JDK's ``jfr`` tool): the same per Java method, and per package (three levels),
inclusive. Samples, not seconds: a share of samples is a share of the process's CPU while it ran.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

_LOCATION = re.compile(r" \(([^)]*)\)$")


def _short(frame: str) -> str:
    """``function (path/to/module.py:123)`` as ``function (module.py)``: samples of one function together."""
    match = _LOCATION.search(frame)
    if match is None:
        return frame
    where = match.group(1).rsplit(":", 1)[0]
    return frame[: match.start()] + f" ({where.rsplit('/', 1)[-1]})"


def pyspy(path: Path, top: int) -> None:
    processes: Counter[str] = Counter()
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    total = 0
    for line in path.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        process = frames[0] if frames[0].startswith("process ") else "worker"
        processes[re.sub(r"process \d+:?", "process", process)[:80]] += n
        calls = [_short(f) for f in frames if f.strip() and not f.startswith(("process ", "thread "))]
        if not calls:
            continue
        total += n
        own[calls[-1]] += n
        for call in set(calls):
            anywhere[call] += n
    print(f"\n{path.name}: {total} samples")
    _table("process", processes, total, top)
    _table("self", own, total, top)
    _table("inclusive", anywhere, total, top)


def jfr(path: Path, top: int) -> None:
    tool = shutil.which("jfr")
    if tool is None:
        print(f"\n{path.name}: no jfr tool (the JDK's) to read it")
        return
    text = subprocess.run(
        [tool, "print", "--json", "--events", "jdk.ExecutionSample", str(path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    events = json.loads(text)["recording"]["events"]
    own: Counter[str] = Counter()
    anywhere: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    for event in events:
        frames = (event["values"].get("stackTrace") or {}).get("frames") or []
        names = [f"{f['method']['type']['name']}.{f['method']['name']}" for f in frames]
        if not names:
            continue
        own[names[0]] += 1
        for name in set(names):
            anywhere[name] += 1
        for package in {".".join(n.replace("/", ".").split(".")[:3]) for n in names}:
            packages[package] += 1
    total = len(events)
    print(f"\n{path.name}: {total} execution samples")
    _table("self", own, total, top)
    _table("package (inclusive)", packages, total, top)
    _table("inclusive", anywhere, total, top)


def _table(title: str, counts: Counter[str], total: int, top: int) -> None:
    print(f"  {title}:")
    for name, n in counts.most_common(top):
        print(f"    {100 * n / max(total, 1):5.1f}%  {name[:150]}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("work", type=Path, help="a kept work directory of bench/lakehouse.py --profile")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()
    for path in sorted(args.work.glob("*.pyspy.txt")):
        pyspy(path, args.top)
    for path in sorted(args.work.glob("*.jfr")):
        jfr(path, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
