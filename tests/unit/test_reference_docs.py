"""The documentation site's generated references cover everything, and everything they cover is documented.

The reference pages are rendered from the code at build time (``docs/hooks/reference_pages.py``); these
tests fail when a worker property, a built-in plugin's config key or a metric family has no documentation
of its own (the page would show an empty cell), and when the plugin reference misses a plugin the product
registers. The benchmark results the charts are drawn from must parse and put kconnect beside the
reference.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# Appended, never first: bench/ holds modules with common names (avro, restart) that must not shadow packages
# for the other tests of this process.
sys.path.append(str(ROOT / "docs" / "hooks"))
sys.path.append(str(ROOT / "bench"))

import bench_charts  # noqa: E402
import reference_pages  # noqa: E402
import results  # noqa: E402


@pytest.fixture(scope="module")
def plugin_configs() -> list[reference_pages.PluginConfig]:
    return reference_pages.builtin_plugin_configs()


def test_every_worker_property_has_a_doc_string() -> None:
    undocumented = [d.key for d in reference_pages.worker_definitions() if not d.documentation.strip()]
    assert undocumented == []
    page = reference_pages.worker_properties_page()
    for d in reference_pages.worker_definitions():
        assert f"| `{d.key}` |" in page


def test_every_builtin_plugin_config_key_has_a_doc_string(
    plugin_configs: list[reference_pages.PluginConfig],
) -> None:
    undocumented = [
        f"{p.class_name}: {k.name}"
        for p in plugin_configs
        for k in reference_pages.public_keys(p.config_def)
        if not (k.documentation or "").strip()
    ]
    undocumented += [
        f"every {type_} connector: {k.name}"
        for type_, config_def in reference_pages.common_connector_configs().items()
        for k in reference_pages.public_keys(config_def)
        if not (k.documentation or "").strip()
    ]
    assert undocumented == []


def test_the_plugin_reference_lists_every_registered_connector_and_every_other_kind(
    plugin_configs: list[reference_pages.PluginConfig],
) -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    registered = {v.replace(":", ".") for v in project["entry-points"]["kconnect.plugins"].values()}
    listed = {p.class_name for p in plugin_configs}
    assert registered <= listed
    kinds = {p.kind for p in plugin_configs}
    assert {"source", "sink", "transformation", "predicate", "converter", "header_converter"} <= kinds
    page = reference_pages.plugins_page()
    for p in plugin_configs:
        assert f"Class `{p.class_name}`." in page


def test_every_metric_family_has_help_text_and_the_page_lists_it() -> None:
    docs = reference_pages.metric_docs()
    assert [m.name for m in docs if not m.help.strip()] == []
    assert len({m.name for m in docs}) == len(docs)
    # The families named in the docs' prose are among those rendered.
    names = {m.name for m in docs}
    assert {
        "connect_worker_rebalance_completed_rebalances_total",
        "connect_source_task_source_record_poll_total",
        "connect_sink_task_sink_record_read_total",
        "kconnect_sink_task_stalled",
    } <= names
    page = reference_pages.metrics_page()
    assert all(f"`{m.name}`" in page for m in docs)


def test_the_rest_reference_has_every_operation_of_the_openapi_document() -> None:
    document = reference_pages.openapi_document()
    page = reference_pages.rest_api_page(document)
    for path, item in document["paths"].items():
        for method in item:
            if method in ("get", "post", "put", "patch", "delete"):
                assert f"### `{method.upper()} {path}`" in page


def test_bench_results_parse_and_put_kconnect_beside_apache_kafka_connect() -> None:
    files = sorted(results.RESULTS_DIR.glob("*.json"))
    assert {"density", "dataplane", "restart", "handover"} <= {f.stem for f in files}
    for path in files:
        data = results.read(path.stem)
        figures = results.figures_of(data)
        assert figures, path
        systems = {f.system for f in figures}
        assert any(s.startswith("kconnect") for s in systems), path
        assert any(s.startswith(bench_charts.REFERENCE_PREFIX) for s in systems), path
        for f in figures:
            assert f.date[:4].isdigit() and f.machine and f.load and f.unit, (path, f)


def test_record_appends_and_latest_keeps_the_newest_per_key(tmp_path: Path) -> None:
    old = results.Figure("kconnect", "10 pipelines", "cores", 0.5, "cores", "2026-11-27T10:00Z", "m", "l")
    new = results.Figure("kconnect", "10 pipelines", "cores", 0.4, "cores", "2026-11-28T10:00Z", "m", "l")
    ref = "Apache Kafka Connect 4.3.1"
    other = results.Figure(ref, "10 pipelines", "cores", 0.9, "cores", "2026-11-27", "m", "l")
    results.record("x", [old, other], title="X", directory=tmp_path)
    results.record("x", [new], directory=tmp_path)
    data = results.read("x", tmp_path)
    assert data["title"] == "X"
    assert results.figures_of(data) == [old, other, new]
    assert results.latest(results.figures_of(data)) == [new, other]
    made = results.figure("kconnect", "s", "m", 1, "s")
    assert made.date.endswith("Z") and made.machine and made.load


def test_a_chart_is_drawn_from_a_results_file(tmp_path: Path) -> None:
    figures = [
        results.Figure("kconnect", "shape", "cores", 0.1, "cores", "2026-11-27", "m", "l"),
        results.Figure("Apache Kafka Connect 3.9", "shape", "cores", 0.2, "cores", "2026-11-27", "m", "l"),
    ]
    results.record("demo", figures, title="Demo", directory=tmp_path)
    chart = bench_charts.chart("demo", tmp_path)
    assert chart is not None
    assert chart.png.startswith(b"\x89PNG")
    assert "![Demo](benchmarks/demo.png)" in chart.markdown
    assert bench_charts.chart("missing", tmp_path) is None
