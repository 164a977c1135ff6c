"""Documentation generated from code stays in sync with it."""

from __future__ import annotations

from pathlib import Path

from kconnect.config.worker import PROPERTIES_DOC_HEADER, reference_markdown

ROOT = Path(__file__).resolve().parents[2]


def test_properties_reference_is_generated_from_the_definitions() -> None:
    text = (ROOT / "config" / "PROPERTIES.md").read_text()
    assert text == PROPERTIES_DOC_HEADER + reference_markdown(), (
        "config/PROPERTIES.md is stale: run python -m kconnect.config.worker > config/PROPERTIES.md"
    )


def test_readme_quick_start_is_the_two_make_targets_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("##", 1)[0]
    assert "make demo" in quick and "make test" in quick
    assert "make test" in (ROOT / ".ci" / "run").read_text()
