"""A bench's figures as JSON next to its printed table: ``bench/results/<bench>.json``.

Why: the printed table is for the person who ran the bench, and bench/README.md keeps it with its reading;
the documentation site draws charts (kconnect beside Apache Kafka Connect) from these files when it is
built (``docs/hooks/bench_charts.py``), so a reader sees the figures without parsing prose. Each figure
carries its own date, machine and load, since runs on a shared machine mean little without them.

A file holds every figure recorded so far (a run appends, it never rewrites older ones); the charts draw
the latest figure per system, shape and metric. Nothing here is timed or asserted: it only writes what a
bench measured.

    from results import Figure, figure, record    # bench/ is on sys.path when a bench runs
    record("density", [figure("kconnect", "10 pipelines at 10 lines/s", "cores", 0.057, "cores")])
"""

from __future__ import annotations

import argparse
import json
import os
import platform
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

#: Where the files live: bench/results/, beside this module.
RESULTS_DIR = Path(__file__).resolve().parent / "results"


@dataclass(frozen=True)
class Figure:
    """One measured figure: which system, at which shape (the workload), what was measured and its value.

    ``date`` is ISO 8601 (UTC, to the minute where known); ``machine`` and ``load`` say where and under
    what load it was measured; ``run`` names the code or run when the bench tells runs apart."""

    system: str
    shape: str
    metric: str
    value: float
    unit: str
    date: str
    machine: str
    load: str
    run: str = ""


def this_machine() -> str:
    """The machine a figure is measured on: CPU model, CPUs, memory, Python."""
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        memory = f", {pages / 2**30:.0f} GiB"
    except (ValueError, OSError):
        pass
    return f"{model}, {os.cpu_count()} CPUs{memory}, Python {platform.python_version()}"


def load_average() -> str:
    """The 1-minute load average now, as the benches print it."""
    try:
        return f"1-min load {os.getloadavg()[0]:.2f}"
    except OSError:
        return "load unknown"


def figure(
    system: str, shape: str, metric: str, value: float, unit: str, *, load: str = "", run: str = ""
) -> Figure:
    """A figure measured now on this machine (``load`` defaults to the load average now)."""
    return Figure(
        system=system,
        shape=shape,
        metric=metric,
        value=float(value),
        unit=unit,
        date=datetime.now(UTC).strftime("%Y-%m-%dT%H:%MZ"),
        machine=this_machine(),
        load=load or load_average(),
        run=run,
    )


def system_name(label: str) -> str:
    """A bench row's label as the charts name systems: a ``reference ...`` row is Apache Kafka Connect
    (``reference Connect 3.9`` and ``reference 3.9`` both become ``Apache Kafka Connect 3.9``)."""
    if not label.startswith("reference"):
        return label
    version = label.removeprefix("reference").strip().removeprefix("Connect").strip()
    return f"Apache Kafka Connect {version}".strip()


def add_argument(parser: argparse.ArgumentParser) -> None:
    """The benches' ``--no-results``: a trial run that should not reach the charts."""
    parser.add_argument(
        "--no-results",
        action="store_true",
        help="do not append this run's figures to bench/results/<bench>.json",
    )


def save(bench: str, figures: Sequence[Figure], args: argparse.Namespace, *, title: str = "") -> None:
    """Append a run's figures to its bench's file unless ``--no-results`` was given, and say where."""
    if getattr(args, "no_results", False) or not figures:
        return
    print(f"{len(figures)} figures appended to {record(bench, figures, title=title)}", flush=True)


def path_of(bench: str, directory: Path = RESULTS_DIR) -> Path:
    """The file of one bench."""
    return directory / f"{bench}.json"


def read(bench: str, directory: Path = RESULTS_DIR) -> dict[str, Any]:
    """A bench's file as stored (``{"bench", "title", "note", "figures": [...]}``), or an empty one."""
    path = path_of(bench, directory)
    if not path.exists():
        return {"bench": bench, "title": "", "note": "", "figures": []}
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def figures_of(data: dict[str, Any]) -> list[Figure]:
    """The figures of a file read with :func:`read`; a malformed entry raises naming its index."""
    out = []
    for i, entry in enumerate(data.get("figures", [])):
        try:
            out.append(Figure(**entry))
        except TypeError as exc:
            raise ValueError(f"{data.get('bench')}: figure {i} is malformed: {exc}") from None
    return out


def record(
    bench: str,
    figures: Sequence[Figure] | Iterable[Figure],
    *,
    title: str = "",
    directory: Path = RESULTS_DIR,
) -> Path:
    """Append ``figures`` to the bench's file (created if missing) and return its path."""
    data = read(bench, directory)
    if title:
        data["title"] = title
    data["figures"] = [*data.get("figures", []), *(asdict(f) for f in figures)]
    path = path_of(bench, directory)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
    return path


def latest(figures: Iterable[Figure]) -> list[Figure]:
    """The newest figure per (system, shape, metric), in the order each key first appears."""
    newest: dict[tuple[str, str, str], Figure] = {}
    for f in figures:
        key = (f.system, f.shape, f.metric)
        if key not in newest or f.date >= newest[key].date:
            newest[key] = f
    return list(newest.values())
