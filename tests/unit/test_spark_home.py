"""When the worker launches Spark with a home of links (``runtime/dataplane/spark_home``), and its links."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from kconnect.runtime.dataplane.spark_home import ShadowSparkHome, shadows_spark_home


@pytest.fixture
def package(tmp_path: Path) -> Path:
    """A directory shaped as a pip-installed PySpark's (``bin``, ``jars``, ``python/lib``)."""
    home = tmp_path / "pyspark"
    for name in ("bin", "jars", "python/lib"):
        (home / name).mkdir(parents=True)
    (home / "python/lib/pyspark.zip").write_bytes(b"")
    return home


@pytest.mark.parametrize(
    ("environ", "master", "workers_python", "expected"),
    [
        ({}, "local[2]", sys.executable, True),
        ({}, "local[*]", sys.executable, True),
        ({}, "spark://master:7077", sys.executable, True),
        ({"SPARK_HOME": "/opt/spark"}, "local[2]", sys.executable, False),  # the user's installation
        ({}, "local[2]", "/usr/bin/python3.9", False),  # another interpreter may need the zip
        ({}, "yarn", sys.executable, False),  # YARN's client mode ships python/lib/pyspark.zip
        ({}, "k8s://https://api:6443", sys.executable, False),
        ({"SPARK_HOME": ""}, "local[2]", sys.executable, True),  # set but empty: nothing decided
    ],
)
def test_a_home_of_links_only_where_nothing_else_decides(
    package: Path, environ: dict[str, str], master: str, workers_python: str, expected: bool
) -> None:
    assert shadows_spark_home(environ, master, workers_python, sys.executable, str(package)) is expected


def test_not_for_a_directory_that_is_no_pip_installed_pyspark(tmp_path: Path) -> None:
    assert not shadows_spark_home({}, "local[2]", sys.executable, sys.executable, str(tmp_path))


def test_the_home_links_bin_jars_and_conf_but_not_the_zip_and_goes_away(package: Path) -> None:
    (package / "conf").mkdir()
    home = ShadowSparkHome(str(package))
    try:
        assert sorted(p.name for p in home.path.iterdir()) == ["bin", "conf", "jars"]
        assert (home.path / "jars").resolve() == (package / "jars").resolve()
        assert not (home.path / "python/lib/pyspark.zip").exists()
    finally:
        home.close()
    assert not home.path.exists()
    assert (package / "jars").is_dir()  # the package itself is untouched
