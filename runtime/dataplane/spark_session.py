"""The worker's one SparkSession: its settings, and its lazy start on the first task that needs it.

Split from the executor (:mod:`kconnect.runtime.dataplane.spark_executor`), which decides what runs; this
module decides how the JVM that runs it is made (driver options, checkpoint file manager, the Python
workers' interpreter, the scheduler pools' file, a SPARK_HOME of links).
"""

from __future__ import annotations

import os
import shutil
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kconnect.config.worker import (
    WorkerConfig,
)
from kconnect.runtime import logs
from kconnect.runtime.dataplane.scheduler_pools import allocation_xml
from kconnect.runtime.dataplane.scratch import make_scratch_dir
from kconnect.runtime.dataplane.spark_home import ShadowSparkHome, shadows_spark_home

__all__ = [
    "CHECKPOINT_FILE_MANAGER",
    "DRIVER_JAVA_OPTIONS",
    "SparkSessionHolder",
    "python_workers_executable",
    "spark_settings",
]

log = logs.get(__name__)


#: the serial collector. The JVM's share of the data plane is moving Arrow batches and running short
#: generated projections: the server compiler (C2) spent more CPU compiling them than it saved, and G1's
#: concurrent threads more than serial collections of a young generation of short-lived batches.
#: Measured 2026-11-27 (2 vCPUs, a FileStream pipeline of 400,000 lines on ``local[2]``, per-thread CPU
#: from ``/proc``, a fresh worker's first and second runs): C2's compiler threads took 1.9-2.8 of the
#: run's 8-11 CPU s; the whole run cost 20.5-28.1 µs of CPU per record with the JVM's defaults, 17.8-18.9
#: with C1 alone, 16.2-18.2 with C1 and the serial collector (bench/README.md has the side-by-side run).
DRIVER_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"

#: How sink queries write their checkpoints (``spark.sql.streaming.checkpointFileManagerClass``, unless a
#: worker sets it): through Hadoop's FileSystem API rather than Spark's default, FileContext. On a local
#: disk without Hadoop's native library (PySpark from pip has none) FileContext resolves every path it
#: renames by forking ``readlink`` (and ``chmod`` for each file it creates): about five processes per
#: micro-batch. Measured 2026-11-27 (2 vCPUs): a sink fed ten records a second spent ~3 CPU s per 30 s in
#: those processes; with this manager only the ``chmod`` of created files remains. Its rename is atomic
#: on local disks and HDFS (Spark's own reason to prefer FileContext is stores whose FileSystem rename is
#: not); kconnect's checkpoints are a task's scratch space anyway, as its offsets live in Kafka.
CHECKPOINT_FILE_MANAGER = "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"


#: The executors' Python daemon with a cluster master (``python_daemon``'s docstring says why).
PYTHON_DAEMON_MODULE = "kconnect.runtime.dataplane.python_daemon"


def spark_settings(config: WorkerConfig) -> dict[str, str]:
    """The SparkSession's settings: every ``spark.*`` worker key; FAIR scheduling, the driver JVM's
    ``DRIVER_JAVA_OPTIONS``, the ``CHECKPOINT_FILE_MANAGER`` and, with a cluster master, the executors'
    ``PYTHON_DAEMON_MODULE``, unless set otherwise."""
    settings = {
        "spark.scheduler.mode": "FAIR",
        "spark.app.name": f"kconnect-{config.group_id}",
        # Progress bars would interleave with the worker's structured log lines on stderr.
        "spark.ui.showConsoleProgress": "false",
        "spark.driver.defaultJavaOptions": DRIVER_JAVA_OPTIONS,
        "spark.sql.streaming.checkpointFileManagerClass": CHECKPOINT_FILE_MANAGER,
    }
    if str(config.spark.get("spark.master", "")).startswith("spark://"):
        # Executors' Python workers fork from a daemon that has kconnect loaded (``python_daemon``).
        settings["spark.python.daemon.module"] = PYTHON_DAEMON_MODULE
    settings.update(config.spark)
    return settings


def python_workers_executable(settings: Mapping[str, str], environ: Mapping[str, str], default: str) -> str:
    """The interpreter Spark's Python workers (driver side and on every executor) run with.

    Spark's own precedence: ``spark.pyspark.python``, else ``PYSPARK_PYTHON``, else (kconnect's choice)
    the worker's own interpreter, which has kconnect and confluent-kafka. Why this is needed at all: a
    SparkContext created in-process, as kconnect's is, takes its Python executable from
    ``PYSPARK_PYTHON`` alone (only ``spark-submit`` turns the property into that variable), so without it
    ``spark.pyspark.python`` in worker properties, the setting a cluster whose machines keep Python
    elsewhere needs, would silently be ignored.
    """
    return settings.get("spark.pyspark.python") or environ.get("PYSPARK_PYTHON") or default


class SparkSessionHolder:
    """Creates the worker's SparkSession on first use, once, whichever task thread asks first."""

    def __init__(self, settings: Mapping[str, str]) -> None:
        self._settings = dict(settings)
        self._lock = threading.Lock()
        self._session: Any = None
        self._home: ShadowSparkHome | None = None
        #: The directory of the scheduler pools' allocation file the worker writes (``scheduler_pools``).
        self._pools: Path | None = None

    @property
    def started(self) -> bool:
        """Whether the SparkSession exists yet: the lazy start is a promise (a worker that only takes part
        in the group holds no JVM), and this is how the tests check it."""
        return self._session is not None

    def get(self) -> Any:
        """The session, created by the first caller; the lock makes tasks that start together share one.

        It runs on the calling task's thread, never the herder's, because creation takes seconds. It sets
        ``PYSPARK_PYTHON`` first, since a SparkContext created in-process reads only that variable, and
        ``SPARK_HOME`` where ``spark_home`` says a home of links saves Spark's Python processes compiling
        PySpark from its zip.
        """
        with self._lock:
            if self._session is None:
                # Spark's Python workers must import kconnect: by default they run this interpreter.
                python = python_workers_executable(self._settings, os.environ, sys.executable)
                os.environ["PYSPARK_PYTHON"] = python
                os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
                import pyspark
                from pyspark.sql import SparkSession

                package_home = os.path.dirname(pyspark.__file__)
                master = self._settings.get("spark.master", "local[*]")
                if shadows_spark_home(os.environ, master, python, sys.executable, package_home):
                    try:
                        self._home = ShadowSparkHome(package_home)
                        os.environ["SPARK_HOME"] = str(self._home.path)
                    except OSError as exc:  # a read-only temporary directory: Spark's own home then
                        log.warning("no SPARK_HOME of links; PySpark's own is used", error=str(exc))

                if "spark.scheduler.allocation.file" not in self._settings:
                    self._pools = make_scratch_dir("kconnect-pools-")
                    allocation = self._pools / "fairscheduler.xml"
                    allocation.write_text(allocation_xml())
                    self._settings["spark.scheduler.allocation.file"] = str(allocation)
                builder = SparkSession.builder
                for key, value in self._settings.items():
                    builder = builder.config(key, value)
                log.info(
                    "starting the SparkSession", master=self._settings.get("spark.master"), python=python
                )
                self._session = builder.getOrCreate()
            return self._session

    def stop(self) -> None:
        """Stop the session if one was created (at worker shutdown, once every task stopped).

        The session is taken under the lock but stopped outside it, so a slow stop does not block a thread
        that calls ``get`` meanwhile; such a call would create a new session.
        """
        with self._lock:
            session, self._session = self._session, None
            home, self._home = self._home, None
        if session is not None:
            session.stop()
        with self._lock:
            pools, self._pools = self._pools, None
        if pools is not None:
            shutil.rmtree(pools, ignore_errors=True)
        if home is not None:
            if os.environ.get("SPARK_HOME") == str(home.path):
                del os.environ["SPARK_HOME"]
            home.close()
