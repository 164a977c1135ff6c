"""MkDocs hooks of kconnect's documentation site (``mkdocs.yml``: ``hooks:``).

What they add at build time, so that nothing generated is checked in:

- the reference pages rendered from the code (``reference_pages``): worker properties, every built-in
  plugin's ConfigDef, the REST API from the OpenAPI document, the metrics ``/metrics`` exports;
- the benchmark charts drawn from ``bench/results/*.json`` (``bench_charts``), put where the benchmarks page
  says ``<!-- bench-charts -->``;
- files of the repository outside ``docs/`` that a page includes with ``<!-- include: PATH -->``
  (``bench/README.md``, the measurement log; ``deploy/README.md``), their headings moved one level down.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

HOOKS = Path(__file__).resolve().parent
ROOT = HOOKS.parents[1]
sys.path.append(str(HOOKS))

import bench_charts  # noqa: E402
import reference_pages  # noqa: E402

_INCLUDE = re.compile(r"^<!-- include: (?P<path>[^ ]+) -->$", re.MULTILINE)
_CHARTS = "<!-- bench-charts -->"
_state: dict[str, str] = {}


def on_files(files: Any, config: Any) -> Any:
    """Add the generated reference pages and the benchmark charts to the site's files."""
    from mkdocs.structure.files import File

    for path, text in reference_pages.pages().items():
        files.append(File.generated(config, path, content=text))
    charts, section = bench_charts.charts_section()
    for chart in charts:
        files.append(File.generated(config, chart.path, content=chart.png))
    _state["charts"] = section
    return files


def demote(markdown: str, levels: int = 1) -> str:
    """Headings moved ``levels`` down (``#`` becomes ``##``), outside fenced code blocks."""
    out, fence = [], False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and re.match(r"#{1,6} ", line):
            line = "#" * levels + line
        out.append(line)
    return "\n".join(out)


_LIST_ITEM = re.compile(r"([-*+]|\d+\.) ")


def blocks_apart(markdown: str) -> str:
    """A blank line before a list or a table that follows a paragraph line directly.

    Why: the pages come from README.md, written for GitHub's Markdown, where a list may start on the line
    after a paragraph; Python-Markdown (MkDocs) would run such a list into the paragraph."""
    out: list[str] = []
    fence = False
    for line in markdown.split("\n"):
        if line.startswith("```"):
            fence = not fence
        previous = out[-1] if out else ""
        if not fence and previous.strip() and not previous.startswith("```"):
            starts_list = bool(_LIST_ITEM.match(line)) and not (
                _LIST_ITEM.match(previous) or previous.startswith((" ", "\t"))
            )
            starts_table = line.startswith("|") and not previous.startswith("|")
            if starts_list or starts_table:
                out.append("")
        out.append(line)
    return "\n".join(out)


def included(path: str) -> str:
    """A repository file's text for a page to include, its headings one level down."""
    target = (ROOT / path).resolve()
    if ROOT not in target.parents:
        raise ValueError(f"include outside the repository: {path}")
    return demote(target.read_text())


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Expand ``<!-- include: PATH -->`` and ``<!-- bench-charts -->``."""
    markdown = blocks_apart(_INCLUDE.sub(lambda m: included(m.group("path")), markdown))
    if _CHARTS in markdown:
        markdown = markdown.replace(_CHARTS, _state.get("charts", ""))
    return markdown
