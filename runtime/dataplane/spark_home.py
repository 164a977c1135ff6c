"""The ``SPARK_HOME`` a worker's SparkContext is launched with, when PySpark came from pip.

Spark starts its Python processes (the daemon that forks the executors' Python workers, and one process
per streaming Python data source, which plans every micro-batch of a sink task) with
``$SPARK_HOME/python/lib/pyspark.zip`` first on their path. A pip-installed PySpark's home is its package
directory, which ships that zip next to the installed modules; Python compiles what it imports from a zip
every time (it caches no bytecode for zips), so each such process spent about 0.45 CPU s compiling PySpark
before doing anything, measured 2026-11-27 on 2 vCPUs: a sink query's planning process took 0.67 CPU s in
a 400,000-record pipeline, 0.28-0.30 with the modules imported from the installed, compiled package.

So where nothing else decides it (no ``SPARK_HOME`` in the environment), the Python processes run this
worker's own interpreter (which has PySpark installed), and the master runs the driver's Python processes
on this machine the same way (``local``, or a standalone ``spark://`` master; YARN's client mode wants
``pyspark.zip`` under the home), the SparkContext is launched with a home of symbolic links to the
package's ``bin``, ``jars`` and (if present) ``conf``, without ``python/lib``: the JVM still builds the
same path for its Python processes, whose zip entries then do not exist and are skipped, and PySpark is
imported from the installed package. Executors of a cluster use their own machines' homes, unchanged.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

from kconnect.runtime.dataplane.scratch import make_scratch_dir

__all__ = ["SPARK_HOME_LINKS", "ShadowSparkHome", "shadows_spark_home"]

#: What a launch needs from the package directory (``spark-submit``, the jars, configuration files).
SPARK_HOME_LINKS: tuple[str, ...] = ("bin", "jars", "conf")


def shadows_spark_home(
    environ: Mapping[str, str], master: str, workers_python: str, this_python: str, package_home: str
) -> bool:
    """Whether to launch the SparkContext with a home of links instead of PySpark's package directory."""
    if environ.get("SPARK_HOME"):
        return False  # a Spark installation the user chose
    if os.path.realpath(workers_python) != os.path.realpath(this_python):
        return False  # another interpreter may find PySpark only in the zip
    if not Path(package_home, "jars").is_dir() or not Path(package_home, "bin").is_dir():
        return False  # not a pip-installed PySpark
    master = master.strip().lower()
    return master.startswith("local") or master.startswith("spark://")


class ShadowSparkHome:
    """A temporary directory of links into PySpark's package directory; removed by ``close``."""

    def __init__(self, package_home: str) -> None:
        """Raises OSError, leaving nothing behind, where the links cannot be made."""
        self.path = make_scratch_dir("kconnect-spark-home-")
        try:
            for name in SPARK_HOME_LINKS:
                target = Path(package_home, name)
                if target.exists():
                    (self.path / name).symlink_to(target, target_is_directory=True)
        except OSError:
            self.close()
            raise

    def close(self) -> None:
        """Remove the links (the package directory is untouched)."""
        shutil.rmtree(self.path, ignore_errors=True)
