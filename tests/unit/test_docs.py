"""The README stays a short entry point: the two quick-start commands, then links into the docs site."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_readme_quick_start_is_the_two_make_targets_and_ci_runs_the_test_one() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("##", 1)[0]
    assert "make demo" in quick and "make test" in quick
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_readme_is_short_and_links_into_the_docs_site() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 150
    for target in ("docs/getting-started.md", "docs/architecture.md", "docs/benchmarks.md"):
        assert f"]({target})" in readme
