"""A real Confluent-compatible Schema Registry server for the converters' live tests: Apicurio Registry.

Apicurio Registry 2.0.2.Final serves Confluent's Schema Registry API under ``/apis/ccompat/v6`` (the URL a
converter's ``schema.registry.url`` names). It is published on Maven Central only as a thin Quarkus
application jar, so :func:`registry_server` builds the runnable server the way Apicurio's release does:
``tests/schema-registry/pom.xml`` depends on the app and runs Quarkus's Maven plugin, with the app's own
``application.properties`` plus ``tests/schema-registry/application.properties`` as the build's
configuration (Quarkus reads it from the project being built). The result (the runner jar and its
``lib/``) is kept in ``~/.cache/kconnect/apicurio-registry-<version>``, trusted once its marker is written
(``make registry`` does it ahead of ``make test``). A server that cannot be built or started fails the test
with Maven's or the server's output, never a silent skip.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import httpx

from kconnect.runtime.cli.broker import free_port
from tests.support.maven import MARKER, find_mvn, is_fetched, kconnect_cache, run_mvn
from tests.support.server_process import await_answer, stop_process

REPO = Path(__file__).resolve().parents[2]
PROJECT = REPO / "tests" / "schema-registry"
SETTINGS = PROJECT / "settings.xml"
VERSION = "2.0.2.Final"
APP = f"io.apicurio:apicurio-registry-app:{VERSION}:jar"
#: Where a converter points ``schema.registry.url`` on a server at ``http://host:port``.
CCOMPAT_PATH = "/apis/ccompat/v6"


class RegistryServerError(RuntimeError):
    """The server could not be built, or it did not start."""


def registry_home() -> Path:
    return kconnect_cache(f"apicurio-registry-{VERSION}")


def _mvn(args: list[str], cwd: Path, what: str) -> None:
    mvn = find_mvn(what, RegistryServerError)
    run_mvn(
        mvn,
        args,
        what=what,
        where=str(PROJECT / "pom.xml"),
        error=RegistryServerError,
        settings=SETTINGS,
        cwd=cwd,
    )


def registry_server() -> Path:
    """The runnable server's jar, built with Maven on first use into :func:`registry_home`."""
    home = registry_home()
    runner = home / "apicurio-registry-runner.jar"
    if is_fetched(home) and runner.is_file():
        return runner
    shutil.rmtree(home, ignore_errors=True)
    with tempfile.TemporaryDirectory(prefix="kconnect-apicurio-") as work:
        build = Path(work)
        shutil.copy(PROJECT / "pom.xml", build / "pom.xml")
        _mvn(
            ["dependency:copy", f"-Dartifact={APP}", f"-DoutputDirectory={build / 'app'}"],
            build,
            f"fetch Apicurio Registry {VERSION}",
        )
        (app_jar,) = (build / "app").glob("*.jar")
        with zipfile.ZipFile(app_jar) as jar:
            own = jar.read("application.properties").decode()
        resources = build / "src" / "main" / "resources"
        resources.mkdir(parents=True)
        extra = (PROJECT / "application.properties").read_text()
        (resources / "application.properties").write_text(f"{own}\n\n# kconnect's tests\n{extra}")
        _mvn(["package"], build, f"build Apicurio Registry {VERSION}")
        (built,) = (build / "target").glob("*-runner.jar")
        home.mkdir(parents=True)
        shutil.copytree(build / "target" / "lib", home / "lib")
        shutil.copy(built, runner)
    (home / MARKER).write_text(VERSION + "\n")
    return runner


@dataclass
class RegistryServer:
    proc: subprocess.Popen[bytes]
    port: int
    log: Path

    @property
    def url(self) -> str:
        """What a converter's ``schema.registry.url`` names (Confluent's API)."""
        return f"http://127.0.0.1:{self.port}{CCOMPAT_PATH}"

    def stop(self) -> None:
        stop_process(self.proc)


def start_registry(
    workdir: Path, port: int | None = None, data: Path | None = None, timeout: float = 120
) -> RegistryServer:
    """Start the server on ``port`` or a free one; wait until its Confluent API answers. Its storage is
    in memory (a restart forgets every schema) unless ``data`` names an H2 database file to keep it in,
    which a server started again on the same ``data`` reads back."""
    java = shutil.which("java")
    if java is None:
        raise RegistryServerError("Java 11 or newer is needed to run Apicurio Registry")
    runner = registry_server()
    port = port or free_port()
    log = workdir / f"registry-{port}.log"
    env = {**os.environ, "HTTP_PORT": str(port), "LOG_LEVEL": "WARN"}
    if data is not None:
        env["REGISTRY_DATASOURCE_URL"] = f"jdbc:h2:file:{data}"
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            [java, "-Xmx256m", "-XX:TieredStopAtLevel=1", "-jar", str(runner)],
            stdout=out,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=runner.parent,
        )
    server = RegistryServer(proc, port, log)

    def answers() -> bool:
        try:
            return httpx.get(server.url + "/subjects", timeout=5).status_code == 200
        except httpx.HTTPError:
            return False

    error = RegistryServerError
    await_answer(proc, answers, log=log, timeout=timeout, pause=0.3, error=error, what="the registry")
    return server
