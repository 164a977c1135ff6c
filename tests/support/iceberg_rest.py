"""A real Apache Iceberg REST catalog server for the Iceberg sink's REST catalog test.

Apache Iceberg's own ``RESTCatalogServer`` (the ``iceberg-open-api`` test fixture that Apache Iceberg's REST
fixture image runs: a JdbcCatalog on SQLite behind the REST protocol, on Jetty; here on a SQLite file), its
jars from Maven Central (``tests/lakehouse/rest-catalog/pom.xml``) copied once into
``~/.cache/kconnect/iceberg-rest-<version>/libs`` (``make lakehouse`` does it ahead of ``make test``), and
Hadoop's client jars (the server writes table metadata through HadoopFileIO) from PySpark's own jars
directory. Configured through its ``CATALOG_*`` environment variables: ``CATALOG_REST_PORT`` and
``CATALOG_WAREHOUSE``. A server that cannot start fails the test with its log, never a silent skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import httpx

from kconnect.runtime.cli.broker import free_port
from tests.support.maven import copy_dependencies, kconnect_cache
from tests.support.server_process import await_answer, stop_process

REPO = Path(__file__).resolve().parents[2]
POM = REPO / "tests" / "lakehouse" / "rest-catalog" / "pom.xml"
VERSION = "1.10.0"


class IcebergRestError(RuntimeError):
    """The server's jars could not be fetched, or it did not start."""


def rest_home() -> Path:
    return kconnect_cache(f"iceberg-rest-{VERSION}")


def rest_jars() -> list[Path]:
    """The server's jars, fetched with Maven on first use (a marker written last: an interrupted copy is
    redone)."""
    libs = copy_dependencies(
        POM,
        rest_home(),
        "libs",
        what=f"Apache Iceberg's REST catalog server {VERSION}",
        stamp=VERSION,
        error=IcebergRestError,
    )
    return sorted(libs.glob("*.jar"))


def hadoop_jars() -> list[Path]:
    """Hadoop's shaded client jars that PySpark ships (the server's HadoopFileIO needs them)."""
    import pyspark

    jars = Path(pyspark.__file__).parent / "jars"
    found = sorted(jars.glob("hadoop-client-api-*.jar")) + sorted(jars.glob("hadoop-client-runtime-*.jar"))
    if len(found) < 2:
        raise IcebergRestError(f"PySpark's Hadoop client jars are missing from {jars}")
    return found


@dataclass
class IcebergRestServer:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def uri(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        stop_process(self.proc)


def start_iceberg_rest(workdir: Path, timeout: float = 180) -> IcebergRestServer:
    """Start the server on a free port with its warehouse under ``workdir``; wait until GET /v1/config
    answers 200."""
    java = shutil.which("java")
    if java is None:
        raise IcebergRestError("Java 17 is needed to run Apache Iceberg's REST catalog server")
    port = free_port()
    classpath = os.pathsep.join(str(p) for p in [*rest_jars(), *hadoop_jars()])
    log = workdir / "iceberg-rest.log"
    env = {
        **os.environ,
        "CATALOG_REST_PORT": str(port),
        "CATALOG_WAREHOUSE": str(workdir / "rest-warehouse"),
        # A file, not the server's default ``jdbc:sqlite::memory:``: each connection of the JdbcCatalog's
        # pool opens its own in-memory database, so a request served while another holds the first
        # connection found no catalog tables ("no such table: iceberg_tables", a 500; CI, 2026-11-29).
        "CATALOG_URI": f"jdbc:sqlite:{workdir / 'rest-catalog.db'}",
    }
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [java, "-Xmx256m", "-cp", classpath, "org.apache.iceberg.rest.RESTCatalogServer"],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
        )
    server = IcebergRestServer(proc, port, log)

    def answers() -> bool:
        try:
            return httpx.get(server.uri + "/v1/config", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    what = "the REST catalog server"
    await_answer(proc, answers, log=log, timeout=timeout, pause=0.5, error=IcebergRestError, what=what)
    return server
