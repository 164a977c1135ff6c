"""The demo's table step, its pure parts: where it finds Spark's Iceberg runtime, the sink's config and the
workers' properties (the live run is tests/integration/test_demo.py)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from kconnect.runtime.cli import cache_dir, demo_table
from kconnect.runtime.plugins.transform_configs import TRANSFORMATION_DEFS
from tests.support import lakehouse_jars, maven


def _copy(cache: Path, name: str, version: str, complete: bool) -> Path:
    libs = cache / "kconnect" / name / "libs"
    libs.mkdir(parents=True)
    jar = libs / f"iceberg-spark-runtime-4.0_2.13-{version}.jar"
    jar.write_bytes(b"")
    (libs / "delta-spark_2.13-4.0.1.jar").write_bytes(b"")
    if complete:
        (libs.parent / "complete").write_text("done\n")
    return jar


def test_the_jar_is_found_only_in_a_complete_copy_newest_first(tmp_path: Path) -> None:
    env = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    assert demo_table.find_iceberg_jar(env, tmp_path) is None
    _copy(tmp_path / "cache", "lakehouse-1.11.0-4.0.1", "1.11.0", complete=False)  # interrupted fetch
    assert demo_table.find_iceberg_jar(env, tmp_path) is None
    older = _copy(tmp_path / "cache", "lakehouse-1.10.2-4.0.1", "1.10.2", complete=True)
    assert demo_table.find_iceberg_jar(env, tmp_path) == older
    # Without XDG_CACHE_HOME, ~/.cache.
    home_jar = _copy(tmp_path / "home" / ".cache", "lakehouse-1.10.2-4.0.1", "1.10.2", complete=True)
    assert demo_table.find_iceberg_jar({}, tmp_path / "home") == home_jar


def test_the_sink_wraps_lines_with_transforms_kconnect_has_and_commits_soon(tmp_path: Path) -> None:
    config = demo_table.sink_config(tmp_path / "wh", "demo-lines")
    for alias in config["transforms"].split(","):
        assert config[f"transforms.{alias}.type"] in TRANSFORMATION_DEFS
    assert config["iceberg.tables"] == demo_table.TABLE
    assert config["iceberg.catalog.warehouse"] == str(tmp_path / "wh")
    assert int(config["iceberg.control.commit.interval-ms"]) <= 5000


def test_worker_properties_load_the_jar_and_send_one_record_batches(tmp_path: Path) -> None:
    props = dict(line.split("=", 1) for line in demo_table.worker_properties(tmp_path / "x.jar"))
    assert props["spark.jars"] == str(tmp_path / "x.jar")
    assert props["producer.batch.num.messages"] == "1"  # the embedded broker's high watermark (quirk 2)
    assert props["spark.ui.enabled"] == "false"


def test_the_summary_line_is_what_the_demo_test_reads() -> None:
    row = {"rows": 100, "distinct_lines": 100, "first": 0, "last": 99}
    assert demo_table.summary_line(row) == "100 rows, 100 distinct lines, line 0 .. line 99"


def test_the_demo_looks_where_the_fetch_leaves_the_jars(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One cache rule (kconnect.runtime.cli.cache_dir) for the demo and for ``make lakehouse``'s fetch
    (tests/support/maven.py): an empty XDG_CACHE_HOME counts as unset, as the XDG spec says."""
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    for xdg in (str(tmp_path / "xdg"), ""):
        monkeypatch.setenv("XDG_CACHE_HOME", xdg)
        fetched = maven.kconnect_cache(lakehouse_jars.lakehouse_home().name)
        assert fetched.parent == cache_dir.kconnect_cache_dir()
        jar = _copy(fetched.parent.parent, fetched.name, lakehouse_jars.ICEBERG_VERSION, complete=True)
        assert jar.parent.parent == fetched
        assert demo_table.find_iceberg_jar(os.environ, Path.home()) == jar
    assert cache_dir.kconnect_cache_dir({"XDG_CACHE_HOME": ""}, tmp_path) == tmp_path / ".cache" / "kconnect"
