"""The standalone Spark cluster the benches run kconnect's worker against (``--spark-master standalone``,
issue 32): one Spark worker with ``CORES`` cores, started from PySpark's jars for one system's run
(``tests/support/spark_cluster.py``) and stopped after it, and the worker properties that point a kconnect
worker at it. One place for ``density.py`` and ``dataplane.py``, so both benches' cluster rows mean the
same cluster: an application takes every core (``spark.cores.max``), its executor 1 GiB (of the worker's
2 GiB), and the executors' Python is this interpreter (kconnect importable there)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support import spark_cluster

#: The cluster's one worker's cores: as many as ``local[2]`` uses, so the two rows compare like for like.
CORES = 2
#: Until the master lists the worker as ALIVE (two JVMs starting on a loaded 2-core machine).
READY_S = 300


def available() -> str | None:
    """None when a cluster can start here, else why not (the row's note)."""
    return None if spark_cluster.java() is not None else "no Java 17 for a standalone cluster"


@contextlib.contextmanager
def running(work: Path) -> Iterator[spark_cluster.StandaloneCluster]:
    """A started cluster under ``work/spark`` for a ``with`` block, stopped afterwards (its master, worker
    and the executors the worker launched)."""
    with spark_cluster.running(work / "spark", cores=CORES, memory="2g", wait=False) as cluster:
        cluster.wait_ready(READY_S)
        yield cluster


def worker_properties(cluster: spark_cluster.StandaloneCluster) -> dict[str, str]:
    """The ``spark.*`` properties of a kconnect worker that runs its tasks on ``cluster``."""
    return {
        "spark.master": cluster.master_url,
        "spark.cores.max": str(cluster.cores * cluster.workers),
        "spark.executor.memory": "1g",
        "spark.pyspark.python": sys.executable,
    }


def roots(cluster: spark_cluster.StandaloneCluster) -> list[int]:
    """The cluster's master and worker processes: with their trees (the executors are the worker's
    children, their Python workers the executors') they count with the kconnect worker's."""
    return [p.pid for p in cluster.processes]


def label(cluster: spark_cluster.StandaloneCluster) -> str:
    return f"standalone, {cluster.cores} cores"
