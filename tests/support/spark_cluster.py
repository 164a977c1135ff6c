"""A throwaway Spark standalone cluster (one master, one or more workers) for integration tests.

Why run the classes directly: PySpark's wheel ships the jars and ``bin/spark-class`` but not the
``sbin/start-master.sh`` family, and running ``java -cp <pyspark>/jars/*`` in the foreground gives the
test a process it owns (no daemon pid files to clean up). The worker launches executors with the jars of
its ``SPARK_HOME``, so that is set to the PySpark package directory (and ``SPARK_SCALA_VERSION``, which
``bin/load-spark-env.sh`` would set).

Readiness is the master's own answer: its web UI's ``/json`` lists every worker as ALIVE. The same
document later shows which applications ran there (``activeapps``/``completedapps``), which is how a
test proves that a job ran on the cluster and not in a local master.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyspark

from kconnect.runtime.cli.broker import free_port
from tests.support.server_process import stop_process


def spark_home() -> Path:
    """The PySpark package directory: it has ``jars/`` and ``bin/``, which is all a standalone needs."""
    return Path(pyspark.__file__).parent


def java() -> str | None:
    home = os.environ.get("JAVA_HOME")
    if home and (Path(home) / "bin" / "java").exists():
        return str(Path(home) / "bin" / "java")
    return shutil.which("java")


@dataclass
class StandaloneCluster:
    """One master and ``workers`` workers, all on 127.0.0.1, started by :func:`running`. Each worker has
    ``cores`` cores and ``memory`` for executors, and a work directory of its own (``work_dir``), where
    it keeps each executor's logs under ``<app id>/<executor id>/``."""

    workdir: Path
    port: int = field(default_factory=free_port)
    webui_port: int = field(default_factory=free_port)
    cores: int = 1
    memory: str = "1g"
    workers: int = 1
    processes: list[subprocess.Popen[bytes]] = field(default_factory=list)

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    @property
    def master_log(self) -> Path:
        return self.workdir / "spark-master.log"

    def worker_log(self, index: int = 0) -> Path:
        return self.workdir / f"spark-worker-{index}.log"

    def work_dir(self, index: int = 0) -> Path:
        return self.workdir / f"spark-work-{index}"

    def executor_dirs(self, app_id: str) -> list[Path]:
        """Every executor directory of an application, on every worker (one per executor launched,
        replacements included)."""
        return sorted(
            d for i in range(self.workers) for d in (self.work_dir(i) / app_id).glob("*") if d.is_dir()
        )

    def state(self) -> dict[str, Any] | None:
        """The master's ``/json`` document, or None while it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json", timeout=5) as resp:
                answer: dict[str, Any] = json.loads(resp.read())
                return answer
        except (OSError, ValueError):
            return None

    def applications(self) -> list[dict[str, Any]]:
        """Every application the master knows, active or completed."""
        state = self.state() or {}
        return list(state.get("activeapps", [])) + list(state.get("completedapps", []))

    def _launch(self, main_class: str, args: list[str], log: Path) -> None:
        java_bin = java()
        assert java_bin is not None
        home = spark_home()
        # SPARK_SCALA_VERSION is what bin/load-spark-env.sh would export: without it the worker's
        # executor launcher looks for a source build's directories and fails every executor.
        env = {
            **os.environ,
            "SPARK_HOME": str(home),
            "SPARK_SCALA_VERSION": "2.13",
            "SPARK_LOCAL_IP": "127.0.0.1",
        }
        command = [java_bin, "-Xmx256m", "-cp", f"{home / 'jars'}/*", main_class, *args]
        out = open(log, "ab")  # noqa: SIM115 - owned by the child
        self.processes.append(
            subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.workdir)
        )

    def start(self, timeout: float = 120, wait: bool = True) -> StandaloneCluster:
        """Launch the master and the worker; with ``wait=False`` the caller does other start-up work
        meanwhile (the JVMs take seconds) and calls :meth:`wait_ready` before using the cluster."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._launch(
            "org.apache.spark.deploy.master.Master",
            ["--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(self.webui_port)],
            self.master_log,
        )
        for index in range(self.workers):
            self.work_dir(index).mkdir(exist_ok=True)
            options = {
                "--host": "127.0.0.1",
                "--cores": str(self.cores),
                "--memory": self.memory,
                "--webui-port": str(free_port()),
                "--work-dir": str(self.work_dir(index)),
            }
            args = [part for option in options.items() for part in option]
            self._launch(
                "org.apache.spark.deploy.worker.Worker", [*args, self.master_url], self.worker_log(index)
            )
        return self.wait_ready(timeout) if wait else self

    def wait_ready(self, timeout: float = 120) -> StandaloneCluster:
        """Until the master lists every worker as ALIVE; fails early, with the logs, if a process exits."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            state = self.state() or {}
            if sum(w.get("state") == "ALIVE" for w in state.get("workers", [])) >= self.workers:
                return self
            for proc in self.processes:
                if proc.poll() is not None:
                    raise RuntimeError(f"a Spark standalone process exited:\n{self.logs()}")
            time.sleep(0.5)
        raise RuntimeError(
            f"not all {self.workers} Spark workers registered with the master in {timeout:.0f} s:\n"
            + self.logs()
        )

    def logs(self, tail: int = 3000) -> str:
        parts = []
        for log in (self.master_log, *(self.worker_log(i) for i in range(self.workers))):
            if log.exists():
                parts.append(f"--- {log.name}\n{log.read_text(errors='replace')[-tail:]}")
        return "\n".join(parts)

    def stop(self) -> None:
        # The workers first: they kill their executors when they stop, the master has nothing to kill.
        for proc in reversed(self.processes):
            stop_process(proc)
        self.processes.clear()


@contextlib.contextmanager
def running(
    workdir: Path, cores: int = 1, memory: str = "1g", wait: bool = True, workers: int = 1
) -> Iterator[StandaloneCluster]:
    """A started cluster for a ``with`` block (or a fixture's ``yield``), stopped afterwards."""
    cluster = StandaloneCluster(workdir, cores=cores, memory=memory, workers=workers)
    try:
        yield cluster.start(wait=wait)
    finally:
        cluster.stop()
