"""TLS to the brokers for the tests: a private CA and its certificates (the ``openssl`` command), and
stunnel (Debian's ``stunnel4``, which ``make test`` installs) terminating TLS in front of an embedded
broker that advertises the proxy's address, so every client connection, bootstrap and after, is TLS.

Why a proxy: the embedded broker's own TLS listener completes no handshake (DESIGN.md), and a proxy is how
a real deployment's clients would meet a TLS endpoint anyway; what is under test is kconnect's clients.
"""

from __future__ import annotations

import contextlib
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kconnect.runtime.cli import broker as embedded
from kconnect.runtime.cli.broker import EmbeddedBroker, free_port, wait_for_port


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True)


@dataclass(frozen=True)
class Pki:
    """A CA and, signed by it, a server certificate for 127.0.0.1 and a client certificate (PEM files; the
    client's also as a PKCS12 key store with ``password``)."""

    ca: Path
    server_cert: Path
    server_key: Path
    client_pem: Path  # the client's certificate and key in one file (Java's PEM key store)
    client_p12: Path
    password: str = "changeit"


def make_ca(workdir: Path, name: str) -> tuple[Path, Path]:
    """A self-signed CA: (certificate, key)."""
    cert, key = workdir / f"{name}.pem", workdir / f"{name}.key"
    _openssl(
        "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN={name}",
        "-keyout", str(key), "-out", str(cert),
    )  # fmt: skip
    return cert, key


def _signed(workdir: Path, name: str, ca: tuple[Path, Path], extensions: str) -> tuple[Path, Path]:
    key, csr, cert, ext = (workdir / f"{name}.{s}" for s in ("key", "csr", "crt", "ext"))
    ext.write_text(extensions)
    _openssl(
        "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={name}", "-keyout", str(key), "-out", str(csr)
    )  # fmt: skip
    _openssl(
        "x509", "-req", "-in", str(csr), "-CA", str(ca[0]), "-CAkey", str(ca[1]), "-CAcreateserial",
        "-days", "2", "-extfile", str(ext), "-out", str(cert),
    )  # fmt: skip
    return cert, key


def make_pki(workdir: Path) -> Pki:
    """A CA with a server and a client certificate under ``workdir``."""
    workdir.mkdir(parents=True, exist_ok=True)
    ca = make_ca(workdir, "test-ca")
    server = _signed(workdir, "broker", ca, "subjectAltName=IP:127.0.0.1,DNS:localhost\n")
    client = _signed(workdir, "worker", ca, "extendedKeyUsage=clientAuth\n")
    client_pem = workdir / "worker-keystore.pem"
    client_pem.write_text(client[0].read_text() + client[1].read_text())
    p12 = workdir / "worker-keystore.p12"
    _openssl(
        "pkcs12", "-export", "-in", str(client[0]), "-inkey", str(client[1]), "-out", str(p12),
        "-passout", "pass:changeit",
    )  # fmt: skip
    return Pki(ca[0], server[0], server[1], client_pem, p12)


@dataclass
class TlsBroker:
    """An embedded broker reachable only through stunnel: ``bootstrap`` is the TLS address."""

    broker: EmbeddedBroker
    proxy: subprocess.Popen[bytes]
    port: int
    pki: Pki

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"


def stunnel_binary() -> str | None:
    return shutil.which("stunnel4") or shutil.which("stunnel")


@contextlib.contextmanager
def tls_broker(workdir: Path, *, client_auth: bool = True) -> Iterator[TlsBroker]:
    """A broker behind stunnel for the length of a ``with`` block; with ``client_auth`` the proxy demands
    a client certificate signed by the CA (mutual TLS)."""
    binary = stunnel_binary()
    if binary is None:
        raise RuntimeError("stunnel is not installed (make test installs Debian's stunnel4)")
    pki = make_pki(workdir / "pki")
    proxy_port, broker_port = free_port(), free_port()
    verify = f"verifyChain = yes\nCAfile = {pki.ca}\n" if client_auth else ""
    conf = workdir / "stunnel.conf"
    conf.write_text(
        "foreground = yes\n"
        f"output = {workdir / 'stunnel.log'}\n"
        "debug = 5\n"
        "[kafka]\n"
        f"accept = 127.0.0.1:{proxy_port}\n"
        f"connect = 127.0.0.1:{broker_port}\n"
        f"cert = {pki.server_cert}\n"
        f"key = {pki.server_key}\n" + verify
    )
    broker = embedded.start(broker_port, log_path=workdir / "tansu.log", advertised=f"127.0.0.1:{proxy_port}")
    proxy = subprocess.Popen([binary, str(conf)], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        if not wait_for_port("127.0.0.1", proxy_port, 15):
            raise RuntimeError(
                f"stunnel did not listen on {proxy_port}: {(workdir / 'stunnel.log').read_text()}"
            )
        yield TlsBroker(broker, proxy, proxy_port, pki)
    finally:
        proxy.terminate()
        try:
            proxy.wait(10)
        except subprocess.TimeoutExpired:
            proxy.kill()
        broker.stop()
