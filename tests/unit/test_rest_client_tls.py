"""The certificate a worker presents when it calls another worker's https listener (issue 23 row 5).

Each test runs a real TLS handshake in memory (two ``ssl.MemoryBIO`` pairs) between a server context that
demands a client certificate signed by the test's CA, as uvicorn's does with ``ssl.client.auth=required``,
and the client context :func:`client_verify` builds from worker properties.
"""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import tempfile
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kconnect.config.errors import ConfigError
from kconnect.rest.server import client_verify

Issuer = tuple[x509.Name, ec.EllipticCurvePrivateKey]


def _cert(
    name: str, key: ec.EllipticCurvePrivateKey, issuer: Issuer | None, ca: bool = False
) -> x509.Certificate:
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    issuer_name, issuer_key = issuer or (subject, key)
    now = datetime.datetime.now(datetime.UTC)
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
    )
    if not ca:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False
        )
    return builder.sign(issuer_key, hashes.SHA256())


def _pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode()


def _key_pem(key: ec.EllipticCurvePrivateKey, password: bytes | None = None) -> str:
    encryption = serialization.BestAvailableEncryption(password) if password else serialization.NoEncryption()
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, encryption
    ).decode()


class Pki:
    """A CA, and a worker certificate it signed (the same one for serving and calling, as Java's)."""

    def __init__(self, tmp: Path) -> None:
        ca_key = ec.generate_private_key(ec.SECP256R1())
        self.ca_cert = _cert("test-ca", ca_key, None, ca=True)
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.cert = _cert("worker", self.key, (self.ca_cert.subject, ca_key))
        self.ca = tmp / "ca.pem"
        self.ca.write_text(_pem(self.ca_cert))
        self.keystore = tmp / "worker.pem"
        self.keystore.write_text(_pem(self.cert) + _key_pem(self.key))


def _handshake(pki: Pki, client: ssl.SSLContext | bool) -> None:
    """Complete a handshake against a server that requires a CA-signed client certificate; raises
    ssl.SSLError when the server refuses the client."""
    assert isinstance(client, ssl.SSLContext)
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(str(pki.keystore))
    server.load_verify_locations(str(pki.ca))
    server.verify_mode = ssl.CERT_REQUIRED
    c_in, c_out, s_in, s_out = (ssl.MemoryBIO() for _ in range(4))
    c = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(20):
        for name, conn in (("c", c), ("s", s)):
            if not done[name]:
                try:
                    conn.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            # TLS 1.3: the server judges the client's certificate after the client thinks it is done;
            # a refusal arrives as an alert on the client's first read.
            s.write(b"ok")
            c_in.write(s_out.read())
            assert c.read(2) == b"ok"
            return
    raise AssertionError("handshake did not complete")


@pytest.fixture
def pki(tmp_path: Path) -> Pki:
    return Pki(tmp_path)


def test_without_a_key_store_the_client_presents_nothing_and_is_refused(pki: Pki) -> None:
    context = client_verify({"ssl.truststore.type": "PEM", "ssl.truststore.location": str(pki.ca)})
    with pytest.raises(ssl.SSLError):
        _handshake(pki, context)


def test_the_listeners_key_store_is_presented(pki: Pki) -> None:
    props = {
        "listeners.https.ssl.keystore.type": "PEM",
        "listeners.https.ssl.keystore.location": str(pki.keystore),
        "listeners.https.ssl.truststore.type": "PEM",
        "listeners.https.ssl.truststore.location": str(pki.ca),
        "listeners.https.ssl.client.auth": "required",
    }
    _handshake(pki, client_verify(props))


def test_the_top_level_key_store_is_presented_when_no_listener_key_is_set(pki: Pki) -> None:
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(pki.keystore),
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(pki.ca),
    }
    _handshake(pki, client_verify(props))


def test_an_inline_encrypted_key_is_presented_and_its_temporary_file_removed(pki: Pki) -> None:
    before = set(Path(tempfile.gettempdir()).glob("kconnect-tls-*"))
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": _key_pem(pki.key, b"s3cret"),
        "ssl.keystore.certificate.chain": _pem(pki.cert),
        "ssl.key.password": "s3cret",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.certificates": _pem(pki.ca_cert),
    }
    _handshake(pki, client_verify(props))
    assert set(Path(tempfile.gettempdir()).glob("kconnect-tls-*")) == before


def test_a_key_store_with_system_trust_still_makes_a_context(pki: Pki) -> None:
    context = client_verify({"ssl.keystore.type": "PEM", "ssl.keystore.location": str(pki.keystore)})
    assert isinstance(context, ssl.SSLContext) and context.verify_mode == ssl.CERT_REQUIRED
    assert client_verify({}) is True


@pytest.mark.parametrize(
    ("props", "key", "shown"),
    [
        (
            {"listeners.https.ssl.keystore.location": "/ks.jks"},
            "listeners.https.ssl.keystore.type",
            "JKS",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/no/such.pem"},
            "ssl.keystore.location",
            "/no/such.pem",
        ),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "KEY"}, "ssl.keystore.certificate.chain", None),
    ],
)
def test_a_key_store_it_cannot_use_is_a_config_error_naming_the_key(
    props: dict[str, str], key: str, shown: str | None
) -> None:
    with pytest.raises(ConfigError) as caught:
        client_verify(props)
    assert caught.value.key == key
    if shown is not None:
        assert shown in str(caught.value)


def test_a_wrong_key_password_names_the_key_not_the_password(pki: Pki) -> None:
    props = {
        "ssl.keystore.type": "PEM",
        "ssl.keystore.key": _key_pem(pki.key, b"right"),
        "ssl.keystore.certificate.chain": _pem(pki.cert),
        "ssl.key.password": "wrong-one",
    }
    with pytest.raises(ConfigError) as caught:
        client_verify(props)
    assert caught.value.key == "ssl.keystore.key" and "wrong-one" not in str(caught.value)
