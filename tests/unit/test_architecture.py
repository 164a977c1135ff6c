"""The house rules, read from the source tree: module size, no import circles, layers kept to their floor.

Pure and ast-based: nothing is imported, so a circle that only a lazy import inside a function keeps from
breaking at run time is still seen (Python resolves such an import when the function first runs, which hides
the circle rather than removing it), and so is an import under ``if TYPE_CHECKING:``. Each rule's failure
names every offender (module, line, the import) so the message alone says what to move.

The rules (issue 35, "the house"): no module under ``runtime/``, ``rest/``, ``config/`` or ``connectors/`` is
past 800 lines; no import circle between kconnect's modules; ``config/`` (the lowest floor: worker
properties) imports nothing from ``runtime/``; ``rest/`` reads the worker through the shell's view
(``runtime/shell/view.py``) and the plain types it hands out, never ``runtime/group/`` or
``runtime/storage/``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: The folders installed under ``kconnect`` (pyproject's ``package-dir``) that the rules cover.
LAYERS = ("runtime", "rest", "config", "connectors")
MAX_LINES = 800


@dataclass(frozen=True)
class Import:
    """One import statement's edge: ``source`` imports ``target`` (both dotted kconnect module names)."""

    source: str
    target: str
    line: int

    def where(self) -> str:
        return f"{self.source}:{self.line} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(["kconnect", *parts])


@cache
def _modules() -> Mapping[str, Path]:
    """Every kconnect module of the four layers by dotted name (a package by its ``__init__``)."""
    found: dict[str, Path] = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            found[_module_name(path)] = path
    return found


def _is_package(name: str) -> bool:
    return _modules()[name].name == "__init__.py"


def _absolute(module: str, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names, relative forms (``from .x import y``) resolved."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".")
    if not _is_package(module):
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _known(name: str) -> str | None:
    """The kconnect module ``name`` lands in: itself, or the closest enclosing package or module we hold."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in _modules():
            return candidate
        parts.pop()
    return None


def _imports_of(module: str, source: str) -> Iterator[Import]:
    """Every kconnect module ``module`` (whose text is ``source``) imports, wherever the statement sits: top
    level, inside a function, under ``if TYPE_CHECKING:``.

    ``from package import name`` is an edge to ``package.name`` when that is a module and to the package
    otherwise (a name its ``__init__`` defines or re-exports).
    """
    for node in ast.walk(ast.parse(source)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _absolute(module, node)
            named = [f"{base}.{alias.name}" for alias in node.names]
            targets = [name if name in _modules() else base for name in named]
        for known in dict.fromkeys(_known(target) for target in targets):
            if known is not None and known != module:
                yield Import(module, known, node.lineno)


@cache
def _graph() -> Mapping[str, tuple[Import, ...]]:
    return {
        module: tuple(_imports_of(module, path.read_text(encoding="utf-8")))
        for module, path in _modules().items()
    }


def _circles(graph: Mapping[str, Sequence[Import]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work: list[tuple[str, Iterator[str]]] = [(root, iter(sorted({i.target for i in graph[root]})))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted({i.target for i in graph[child]}))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component: list[str] = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def _layer_violations(source_prefix: str, forbidden: Sequence[str]) -> list[str]:
    return [
        imp.where()
        for module, imports in sorted(_graph().items())
        if module == source_prefix or module.startswith(source_prefix + ".")
        for imp in imports
        if any(imp.target == f or imp.target.startswith(f + ".") for f in forbidden)
    ]


def test_no_module_is_past_800_lines() -> None:
    long = sorted(
        (lines, str(path.relative_to(ROOT)))
        for path in _modules().values()
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    )
    assert not long, f"modules past {MAX_LINES} lines (split each along a concept it holds):\n" + "\n".join(
        f"  {path}: {lines} lines" for lines, path in reversed(long)
    )


def test_no_import_circle_between_kconnect_modules() -> None:
    graph = _graph()
    circles = _circles(graph)
    report = []
    for circle in circles:
        members = set(circle)
        edges = [imp.where() for module in circle for imp in graph[module] if imp.target in members]
        report.append("  circle of " + ", ".join(circle) + ":\n" + "\n".join(f"    {e}" for e in edges))
    assert not circles, (
        "import circles (lazy imports in functions and TYPE_CHECKING imports count: move what both sides "
        "need to a module both import from below):\n" + "\n".join(report)
    )


def test_config_imports_nothing_from_runtime() -> None:
    offenders = _layer_violations("kconnect.config", ["kconnect.runtime"])
    assert not offenders, "config/ is the lowest floor and imports nothing from runtime/:\n" + "\n".join(
        f"  {o}" for o in offenders
    )


def test_rest_reads_the_worker_through_the_shell_view() -> None:
    offenders = _layer_violations("kconnect.rest", ["kconnect.runtime.group", "kconnect.runtime.storage"])
    assert not offenders, (
        "rest/ reads the worker through runtime/shell/view.py and the plain types it hands out, "
        "not runtime/group/ or runtime/storage/:\n" + "\n".join(f"  {o}" for o in offenders)
    )


# The rules' own machinery, on a made-up graph: a test that could not fail would prove nothing.


def test_circles_finds_a_three_module_circle_and_ignores_a_chain() -> None:
    def edges(source: str, *targets: str) -> tuple[Import, ...]:
        return tuple(Import(source, t, 1) for t in targets)

    graph = {
        "a": edges("a", "b"),
        "b": edges("b", "c"),
        "c": edges("c", "a", "d"),
        "d": edges("d", "e"),
        "e": (),
    }
    assert _circles(graph) == [["a", "b", "c"]]
    assert _circles({"d": edges("d", "e"), "e": ()}) == []


def test_lazy_relative_and_type_checking_imports_are_edges() -> None:
    source = (
        "from typing import TYPE_CHECKING\n"
        "from .protocol import ConnectAssignment\n"
        "if TYPE_CHECKING:\n"
        "    from kconnect.runtime.group.herder import Herder\n"
        "def f() -> None:\n"
        "    from kconnect.runtime.group import coordinator\n"
        "    import kconnect.runtime.storage.wire\n"
        "    import json\n"
    )
    edges = {(i.target, i.line) for i in _imports_of("kconnect.runtime.group.group_view", source)}
    assert edges == {
        ("kconnect.runtime.group.protocol", 2),
        ("kconnect.runtime.group.herder", 4),
        ("kconnect.runtime.group.coordinator", 6),
        ("kconnect.runtime.storage.wire", 7),
    }
