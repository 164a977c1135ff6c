"""Benchmark charts for the documentation site, drawn from ``bench/results/*.json`` at build time.

Why at build time: the figures live in JSON that the benches append to (``bench/results.py``); drawing
them when the site is built means a new run shows up without anyone redrawing or checking in an image.
Each bench gets one PNG (a panel per metric, the workload shapes along the x axis, a bar per system, so
kconnect stands beside Apache Kafka Connect) and a table of the figures drawn, with date, run and load.
"""

from __future__ import annotations

import io
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.append(str(ROOT / "bench"))  # appended: bench/ holds modules with common names (avro, restart)

import results  # noqa: E402  (bench/results.py: bench/ is not a package)

#: Where the charts go under docs/.
CHARTS_DIR = "benchmarks"

#: The benches charted, in page order; a bench without a results file is listed as not yet measured.
CHARTED = ("density", "dataplane", "restart", "handover", "rolling", "lakehouse")

#: Systems named so are the reference, drawn in one colour on every chart; kconnect's rows in blues.
REFERENCE_PREFIX = "Apache Kafka Connect"


@dataclass(frozen=True)
class Chart:
    """One bench's chart: its PNG's path under docs/, the PNG, and the Markdown that shows it."""

    path: str
    png: bytes
    markdown: str


def _systems(figures: Sequence[results.Figure]) -> list[str]:
    """The systems in first-seen order, kconnect's before the reference's."""
    return sorted(dict.fromkeys(f.system for f in figures), key=lambda s: s.startswith(REFERENCE_PREFIX))


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _number(value: float) -> str:
    if value == int(value) and abs(value) >= 100:
        return f"{int(value):,}"
    return f"{value:g}"


def draw(title: str, figures: Sequence[results.Figure]) -> bytes:
    """A PNG: a panel per metric, bars grouped by shape, one colour per system."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    # A metric that is zero for every system (lines lost, say) is in the table below the chart, not a panel.
    metrics = list(
        dict.fromkeys(f.metric for f in figures if any(g.value for g in figures if g.metric == f.metric))
    )
    metrics = metrics or list(dict.fromkeys(f.metric for f in figures))
    systems = _systems(figures)
    columns = min(len(metrics), 3)
    rows = (len(metrics) + columns - 1) // columns
    fig, axes = plt.subplots(rows, columns, figsize=(4.6 * columns, 3.6 * rows), squeeze=False)
    kconnect_colours = iter(("#1f5fa8", "#6fa8dc", "#0b3d73", "#9fc5e8"))
    colour = {
        system: "#e07b20" if system.startswith(REFERENCE_PREFIX) else next(kconnect_colours, "#777777")
        for system in systems
    }
    for index, metric in enumerate(metrics):
        ax = axes[index // columns][index % columns]
        of_metric = [f for f in figures if f.metric == metric]
        shapes = list(dict.fromkeys(f.shape for f in of_metric))
        width = 0.8 / max(len(systems), 1)
        for s, system in enumerate(systems):
            xs, heights = [], []
            for x, shape in enumerate(shapes):
                for f in of_metric:
                    if f.system == system and f.shape == shape:
                        xs.append(x - 0.4 + width * (s + 0.5))
                        heights.append(f.value)
            if xs:
                bars = ax.bar(xs, heights, width, label=system, color=colour[system])
                ax.bar_label(bars, labels=[_number(h) for h in heights], fontsize=7)
        ax.set_xticks(range(len(shapes)))
        ax.set_xticklabels([_wrap(shape) for shape in shapes], fontsize=7)
        unit = of_metric[0].unit
        ax.set_title(f"{metric} ({unit})", fontsize=9)
        ax.margins(y=0.15)
    for index in range(len(metrics), rows * columns):
        axes[index // columns][index % columns].axis("off")
    handles, labels = axes[0][0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(systems), fontsize=8, frameon=False)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout(rect=(0, 0.06, 1, 0.95))
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=110, metadata={"Software": None})
    plt.close(fig)
    return out.getvalue()


def _wrap(text: str, width: int = 22) -> str:
    words, lines, line = text.split(), [], ""
    for word in words:
        if line and len(line) + 1 + len(word) > width:
            lines.append(line)
            line = word
        else:
            line = f"{line} {word}".strip()
    return "\n".join([*lines, line])


def chart(bench: str, directory: Path = results.RESULTS_DIR) -> Chart | None:
    """The chart of one bench, or None when it has no figures yet."""
    data = results.read(bench, directory)
    figures = results.latest(results.figures_of(data))
    if not figures:
        return None
    title = data.get("title") or bench
    path = f"{CHARTS_DIR}/{bench}.png"
    systems = _systems(figures)
    value = {(f.system, f.shape, f.metric): f"{_number(f.value)} {f.unit}" for f in figures}
    rows = ["| shape | metric | " + " | ".join(_cell(s) for s in systems) + " |"]
    rows.append("|" + " --- |" * (2 + len(systems)))
    for shape, metric in dict.fromkeys((f.shape, f.metric) for f in figures):
        cells = [value.get((s, shape, metric), "") for s in systems]
        rows.append("| " + " | ".join(_cell(c) for c in (shape, metric, *cells)) + " |")
    runs = dict.fromkeys((f.system, f.date, f.run, f.load, f.machine) for f in figures)
    rows += ["", "Measured:", ""]
    rows += [
        f"- {_cell(system)}: {date}" + (f", {run}" if run else "") + f"; {load}; {machine}"
        for system, date, run, load, machine in runs
    ]
    note = str(data.get("note") or "")
    markdown = "\n".join(
        [
            f"### {title}",
            "",
            f"![{title}](benchmarks/{bench}.png)",
            "",
            *([note, ""] if note else []),
            f"The figures drawn (the latest per system, shape and metric in `bench/results/{bench}.json`):",
            "",
            *rows,
        ]
    )
    return Chart(path, draw(title, figures), markdown)


def charts_section(directory: Path = results.RESULTS_DIR) -> tuple[list[Chart], str]:
    """Every charted bench's chart, and the Markdown section of the benchmarks page that shows them."""
    charts: list[Chart] = []
    parts = ["## Charts"]
    for bench in CHARTED:
        found = chart(bench, directory)
        if found is None:
            parts.append(
                f"### `{bench}.py`\n\nNo figures recorded yet: `bench/results/{bench}.json` is written "
                f"by the bench's next run."
            )
            continue
        charts.append(found)
        parts.append(found.markdown)
    return charts, "\n\n".join(parts) + "\n"
