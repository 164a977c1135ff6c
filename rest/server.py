"""How the REST API is exposed: listeners (http, https), the admin listener split, CORS and basic auth.

Everything that decides is pure and works on the worker config: :func:`listener_plan` (which socket
serves what, with which TLS settings), :func:`tls_settings` (Java's ``ssl.*`` keys, PEM only),
:func:`rest_extensions` (``rest.extension.classes``). :func:`wrap_app` turns one FastAPI app into
the ASGI app a given listener serves; ``runtime/cli/main.py`` starts one uvicorn server per listener.

Apache Kafka Connect facts followed here:
- TLS settings for ``https`` listeners come from ``listeners.https.*`` when any such key is set,
  otherwise from the top-level ``ssl.*`` keys (Java's ``valuesWithPrefixAllOrNothing``); the admin
  listener uses ``admin.listeners.https.*`` the same way. ``ssl.keystore.type`` defaults to JKS.
- ``admin.listeners`` unset: ``/admin`` is served on every listener; set: only there, and the other
  listeners answer 404 for it; empty: nowhere.
- CORS is on when ``access.control.allow.origin`` is set (Jetty's CrossOriginFilter: credentials
  allowed, 30 min max age, methods from ``access.control.allow.methods`` or GET, POST, HEAD).
- ``BasicAuthSecurityRestExtension`` reads a JAAS file (``-Djava.security.auth.login.config``) whose
  ``KafkaConnect`` entry names ``PropertyFileLoginModule`` with ``file="..."``, a properties file of
  ``user=password`` lines; the internal task-config and fencing requests are exempt (they are signed).
"""

from __future__ import annotations

import base64
import hmac
import ipaddress
import json
import os
import re
import ssl
import tempfile
from collections.abc import Awaitable, Callable, Mapping, MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from starlette.middleware.cors import CORSMiddleware

from kconnect.config.errors import ConfigError
from kconnect.config.worker import RestListener, WorkerConfig

__all__ = [
    "BASIC_AUTH_EXTENSION",
    "BasicAuth",
    "ListenerSpec",
    "TlsSettings",
    "clear_text_basic_auth",
    "listener_plan",
    "rest_extensions",
    "tls_settings",
    "wrap_app",
]

BASIC_AUTH_EXTENSION = "org.apache.kafka.connect.rest.basic.auth.extension.BasicAuthSecurityRestExtension"
PROPERTY_FILE_LOGIN_MODULE = "org.apache.kafka.connect.rest.basic.auth.extension.PropertyFileLoginModule"
JAAS_CONTEXT = "KafkaConnect"
JAAS_PROPERTY = "java.security.auth.login.config"
#: kconnect's own way to name the JAAS file, for deployments that have no KAFKA_OPTS.
JAAS_ENV = "KCONNECT_JAAS_CONFIG"
UNAUTHORIZED_MESSAGE = "User cannot access the resource."

Role = Literal["main", "admin", "both"]
Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


# ================================================================================================ TLS


@dataclass(frozen=True)
class TlsSettings:
    """What uvicorn needs to serve https, from Java's ``ssl.*`` keys (PEM keystores only)."""

    certfile: str
    keyfile: str | None
    key_password: str | None
    cafile: str | None
    client_auth: Literal["none", "requested", "required"]

    @property
    def cert_reqs(self) -> int:
        """Java's ``ssl.client.auth`` as the ssl module's verify mode (``requested`` asks for a client
        certificate without requiring one), the form uvicorn takes."""
        return {"none": ssl.CERT_NONE, "requested": ssl.CERT_OPTIONAL, "required": ssl.CERT_REQUIRED}[
            self.client_auth
        ]


def _ssl_view(passthrough: Mapping[str, str], prefix: str) -> tuple[dict[str, str], str]:
    """The ssl.* keys that apply to a listener, and how to name them in errors (with their prefix)."""
    prefixed = {k[len(prefix) :]: v for k, v in passthrough.items() if k.startswith(prefix)}
    if prefixed:
        return prefixed, prefix
    return {k: v for k, v in passthrough.items() if k.startswith("ssl.")}, ""


def _write_secret(text: str, suffix: str) -> str:
    """Inline PEM (``ssl.keystore.key`` ...) to a private file, since the ssl module loads files only."""
    fd, path = tempfile.mkstemp(prefix="kconnect-tls-", suffix=suffix)
    with os.fdopen(fd, "w") as out:
        out.write(text if text.endswith("\n") else text + "\n")
    os.chmod(path, 0o600)
    return path


def tls_settings(
    passthrough: Mapping[str, str],
    prefix: str = "listeners.https.",
    write_secret: Callable[[str, str], str] = _write_secret,
) -> TlsSettings:
    """Read a https listener's TLS settings; raises ConfigError naming the key at fault.

    PEM keystores are supported, from a file (``ssl.keystore.location``, key and certificate chain in
    one file) or inline (``ssl.keystore.key`` + ``ssl.keystore.certificate.chain``). JKS and PKCS12
    are refused: Python's ssl module cannot read them.
    """
    ssl_keys, shown = _ssl_view(passthrough, prefix)

    def pem_type(kind: str) -> None:
        key = f"ssl.{kind}.type"
        value = ssl_keys.get(key, "JKS")
        if value.strip().upper() != "PEM":
            raise ConfigError(
                shown + key,
                value,
                "PEM (kconnect reads PEM key and trust stores only; convert JKS or PKCS12 stores with "
                "keytool/openssl"
                + ("; the default is JKS, as in Apache Kafka" if key not in ssl_keys else "")
                + ")",
            )

    pem_type("keystore")
    location = ssl_keys.get("ssl.keystore.location")
    inline_key = ssl_keys.get("ssl.keystore.key")
    inline_chain = ssl_keys.get("ssl.keystore.certificate.chain")
    password = ssl_keys.get("ssl.key.password") or ssl_keys.get("ssl.keystore.password") or None
    if location:
        if inline_key or inline_chain:
            raise ConfigError(
                shown + "ssl.keystore.location",
                location,
                "either a keystore file or ssl.keystore.key with ssl.keystore.certificate.chain, not both",
            )
        if not Path(location).is_file():
            raise ConfigError(shown + "ssl.keystore.location", location, "a readable PEM file")
        certfile, keyfile = location, None
    elif inline_key and inline_chain:
        certfile, keyfile = write_secret(inline_chain, ".crt"), write_secret(inline_key, ".key")
    else:
        missing = "ssl.keystore.certificate.chain" if inline_key else "ssl.keystore.key"
        raise ConfigError(
            shown + ("ssl.keystore.location" if not inline_key and not inline_chain else missing),
            None,
            "a PEM keystore: ssl.keystore.location, or ssl.keystore.key with ssl.keystore.certificate.chain",
        )
    cafile = None
    if ssl_keys.get("ssl.truststore.location") or ssl_keys.get("ssl.truststore.certificates"):
        pem_type("truststore")
        cafile = ssl_keys.get("ssl.truststore.location") or write_secret(
            ssl_keys["ssl.truststore.certificates"], ".crt"
        )
    client_auth = ssl_keys.get("ssl.client.auth", "none").strip().lower()
    if client_auth not in ("none", "requested", "required"):
        raise ConfigError(shown + "ssl.client.auth", client_auth, "one of none, requested, required")
    return TlsSettings(certfile, keyfile, password, cafile, client_auth)  # type: ignore[arg-type]


def client_verify(passthrough: Mapping[str, str]) -> ssl.SSLContext | bool:
    """How this worker meets other workers' https listeners when it sends them a request (forwarding to
    the leader, posting task configs, fencing): whom it trusts, and the certificate it presents.

    Trust: Java's inter-worker client uses the worker's own ``ssl.*`` settings (its truststore); kconnect
    does the same, falling back to the ``listeners.https.`` ones when no unprefixed truststore is set, and
    to the system's trust roots when there is none at all. ``ssl.endpoint.identification.algorithm`` empty
    turns hostname verification off, as in Kafka.

    Identity: the key store the REST server itself serves with (``listeners.https.ssl.keystore.*`` when any
    ``listeners.https.*`` key is set, else ``ssl.keystore.*``), as Java's RestClient presents it, so that
    workers whose listeners say ``ssl.client.auth=required`` accept each other's requests. Raises
    ConfigError for a trust or key store it cannot read.
    """
    ssl_keys = {k: v for k, v in passthrough.items() if k.startswith("ssl.")}
    shown = ""
    if not (ssl_keys.get("ssl.truststore.location") or ssl_keys.get("ssl.truststore.certificates")):
        ssl_keys, shown = _ssl_view(passthrough, "listeners.https.")
    location = ssl_keys.get("ssl.truststore.location")
    inline = ssl_keys.get("ssl.truststore.certificates")
    identity, identity_shown = _ssl_view(passthrough, "listeners.https.")
    if not location and not inline and not _has_keystore(identity):
        return True
    context: ssl.SSLContext
    if location or inline:
        kind = ssl_keys.get("ssl.truststore.type", "JKS")
        if kind.strip().upper() != "PEM":
            raise ConfigError(
                shown + "ssl.truststore.type", kind, "PEM (kconnect reads PEM trust stores only)"
            )
        try:
            context = (
                ssl.create_default_context(cafile=location)
                if location
                else ssl.create_default_context(cadata=inline)
            )
        except (OSError, ssl.SSLError) as exc:
            key = "ssl.truststore.location" if location else "ssl.truststore.certificates"
            raise ConfigError(
                shown + key, location or "(inline)", f"a readable PEM truststore ({exc})"
            ) from exc
        if ssl_keys.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
            context.check_hostname = False
    else:
        context = ssl.create_default_context()
        if identity.get("ssl.endpoint.identification.algorithm", "https").strip() == "":
            context.check_hostname = False
    if _has_keystore(identity):
        _load_client_keystore(context, identity, identity_shown)
    return context


def _has_keystore(ssl_keys: Mapping[str, str]) -> bool:
    return any(
        ssl_keys.get(k)
        for k in ("ssl.keystore.location", "ssl.keystore.key", "ssl.keystore.certificate.chain")
    )


def _load_client_keystore(context: ssl.SSLContext, ssl_keys: Mapping[str, str], shown: str) -> None:
    """Load the worker's PEM key store into ``context`` as its client certificate.

    Inline PEM (``ssl.keystore.key`` with ``ssl.keystore.certificate.chain``) goes through a private file
    that is removed as soon as it is loaded: the ssl module reads files only, and the context keeps the
    key in memory. Errors name the key as written (with its ``listeners.https.`` prefix when it has one),
    never the password.
    """
    kind = ssl_keys.get("ssl.keystore.type", "JKS")
    if kind.strip().upper() != "PEM":
        raise ConfigError(
            shown + "ssl.keystore.type",
            kind,
            "PEM (the key store shown to other workers; kconnect reads PEM key stores only)",
        )
    password = ssl_keys.get("ssl.key.password") or ssl_keys.get("ssl.keystore.password") or None
    location = ssl_keys.get("ssl.keystore.location")
    if location:
        try:
            context.load_cert_chain(location, password=password)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(
                shown + "ssl.keystore.location", location, f"a readable PEM key store ({exc})"
            ) from exc
        return
    key, chain = ssl_keys.get("ssl.keystore.key"), ssl_keys.get("ssl.keystore.certificate.chain")
    if not key or not chain:
        missing = "ssl.keystore.certificate.chain" if key else "ssl.keystore.key"
        raise ConfigError(shown + missing, None, "ssl.keystore.key with ssl.keystore.certificate.chain")
    path = _write_secret(chain.rstrip("\n") + "\n" + key, ".pem")
    try:
        context.load_cert_chain(path, password=password)
    except ssl.SSLError as exc:
        raise ConfigError(shown + "ssl.keystore.key", "[hidden]", f"a PEM key and its chain ({exc})") from exc
    finally:
        os.unlink(path)


# ========================================================================================== listeners


@dataclass(frozen=True)
class ListenerSpec:
    """One socket to serve: where, what (main endpoints, admin endpoints or both) and how (TLS)."""

    listener: RestListener
    role: Role
    tls: TlsSettings | None

    @property
    def host(self) -> str:
        """The address to bind: a listener written without a host (``http://:8083``) binds every interface, as
        Java's does."""
        return self.listener.host or "0.0.0.0"

    @property
    def scheme(self) -> str:
        """``http`` or ``https`` as written in ``listeners``, used to say where the worker listens."""
        return self.listener.protocol

    @property
    def where(self) -> str:
        """Where the socket is bound, as a URL (``http://0.0.0.0:8083``, ``http://[::1]:8085``): what
        start-up messages and warnings name."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{self.scheme}://{host}:{self.listener.port}"


def listener_plan(
    config: WorkerConfig, write_secret: Callable[[str, str], str] = _write_secret
) -> list[ListenerSpec]:
    """Every listener the worker serves; raises ConfigError for https settings it cannot use."""
    admin = config.admin_rest_listeners
    specs: list[ListenerSpec] = []
    main_role: Role = "both" if admin is None else "main"
    for listener in config.rest_listeners:
        tls = (
            tls_settings(config.passthrough, "listeners.https.", write_secret)
            if listener.protocol == "https"
            else None
        )
        specs.append(ListenerSpec(listener, main_role, tls))
    for listener in admin or ():
        tls = (
            tls_settings(config.passthrough, "admin.listeners.https.", write_secret)
            if listener.protocol == "https"
            else None
        )
        specs.append(ListenerSpec(listener, "admin", tls))
    return specs


# ====================================================================================== extensions


@dataclass(frozen=True)
class BasicAuth:
    """Users and passwords from the PropertyFileLoginModule's file."""

    credentials: Mapping[str, str]
    source: str

    def allows(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header carries a known user and that user's password; the password is
        compared in constant time so that timing reveals nothing, and a malformed header is simply refused
        (401).

        The comparison is of UTF-8 bytes: ``hmac.compare_digest`` raises TypeError for ``str`` holding
        anything but ASCII, which made a non-ASCII password a 500. Base64 text with non-ASCII characters
        raises ValueError (not binascii.Error) in ``b64decode``: a 401 too."""
        if not header or not header.lower().startswith("basic "):
            return False
        try:
            decoded = base64.b64decode(header[6:].strip(), validate=True).decode("utf-8")
        except ValueError:  # binascii.Error, UnicodeDecodeError, or non-ASCII base64 text
            return False
        user, sep, password = decoded.partition(":")
        expected = self.credentials.get(user)
        return (
            bool(sep)
            and expected is not None
            and hmac.compare_digest(expected.encode("utf-8"), password.encode("utf-8"))
        )


_JAAS_ENTRY = re.compile(r"(?P<name>[A-Za-z0-9_.-]+)\s*\{(?P<body>.*?)\}\s*;", re.DOTALL)
_JAAS_OPTION = re.compile(r"(?P<key>[A-Za-z0-9_.-]+)\s*=\s*\"(?P<value>(?:[^\"\\]|\\.)*)\"")


def jaas_path(env: Mapping[str, str]) -> str | None:
    """The JAAS file: ``-Djava.security.auth.login.config=`` in KAFKA_OPTS, or $KCONNECT_JAAS_CONFIG."""
    if env.get(JAAS_ENV):
        return env[JAAS_ENV]
    match = re.search(r"-D" + re.escape(JAAS_PROPERTY) + r"=(\"[^\"]*\"|\S+)", env.get("KAFKA_OPTS", ""))
    return match.group(1).strip('"') if match else None


def basic_auth_from_jaas(text: str, where: str) -> BasicAuth:
    """Parse the ``KafkaConnect`` entry of a JAAS file and load the credentials file it names."""
    from kconnect.config.properties import load_properties

    key = "rest.extension.classes"
    entries = {m["name"]: m["body"] for m in _JAAS_ENTRY.finditer(text)}
    body = entries.get(JAAS_CONTEXT)
    if body is None:
        raise ConfigError(
            key, BASIC_AUTH_EXTENSION, f"a JAAS file with a '{JAAS_CONTEXT}' entry; {where} has none"
        )
    if PROPERTY_FILE_LOGIN_MODULE not in body:
        raise ConfigError(
            key,
            BASIC_AUTH_EXTENSION,
            f"the '{JAAS_CONTEXT}' entry of {where} to use {PROPERTY_FILE_LOGIN_MODULE} "
            "(kconnect supports no other login module)",
        )
    options = {m["key"]: m["value"] for m in _JAAS_OPTION.finditer(body)}
    file = options.get("file")
    if not file:
        raise ConfigError(
            key, BASIC_AUTH_EXTENSION, f'the login module in {where} to name its credentials file="..."'
        )
    try:
        credentials = load_properties(file)
    except OSError as exc:
        raise ConfigError(
            key, BASIC_AUTH_EXTENSION, f"a readable credentials file {file} ({exc.strerror})"
        ) from exc
    return BasicAuth(dict(credentials), file)


def rest_extensions(config: WorkerConfig, env: Mapping[str, str]) -> BasicAuth | None:
    """Check ``rest.extension.classes``; returns basic auth when configured, refuses anything else.

    An extension that cannot be loaded must stop the worker, never be skipped: it usually guards the API.
    """
    auth: BasicAuth | None = None
    for name in config.rest_extension_classes:
        if name != BASIC_AUTH_EXTENSION:
            raise ConfigError(
                "rest.extension.classes",
                name,
                f"{BASIC_AUTH_EXTENSION} (the only REST extension kconnect has)",
            )
        path = jaas_path(env)
        if path is None:
            raise ConfigError(
                "rest.extension.classes",
                name,
                f"a JAAS file: set KAFKA_OPTS=-D{JAAS_PROPERTY}=PATH (as for Apache Kafka) "
                f"or {JAAS_ENV}=PATH",
            )
        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(
                "rest.extension.classes", name, f"a readable JAAS file {path} ({exc.strerror})"
            ) from exc
        auth = basic_auth_from_jaas(text, path)
    return auth


def _is_loopback(host: str) -> bool:
    """Whether a listener's host is this machine's loopback (``localhost``, 127.0.0.0/8, ``::1``); an empty
    host binds every interface, and a name other than ``localhost`` is not assumed to be loopback."""
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def clear_text_basic_auth(plan: Sequence[ListenerSpec], auth: BasicAuth | None) -> list[str]:
    """The listeners (``http://host:port``) where basic auth's credentials cross the network readable: with
    basic auth on, every ``http`` listener not bound to loopback; [] without basic auth.

    Why: the ``Authorization`` header is base64, not encrypted, so on an ``http`` listener every request
    hands a user's password to whoever is on the path, and the worker serves http by default. Java says
    nothing; the worker warns once at start-up. A loopback listener is left out, as a local Spark master
    is for the Spark RPC warning: its traffic stays in this machine (a TLS proxy in front, say).
    """
    if auth is None:
        return []
    return [spec.where for spec in plan if spec.scheme == "http" and not _is_loopback(spec.listener.host)]


# ============================================================================================== ASGI

_INTERNAL = (
    ("POST", re.compile(r"^/connectors/[^/]+/tasks/?$")),
    ("PUT", re.compile(r"^/connectors/[^/]+/fence/?$")),
)


def _is_admin_path(path: str) -> bool:
    return path == "/admin" or path.startswith("/admin/")


async def send_error(send: Send, status: int, message: str, headers: list[tuple[bytes, bytes]] = []) -> None:  # noqa: B006
    """Answer straight from ASGI middleware with Connect's error JSON, before FastAPI's exception handlers can
    run; the admin split, basic auth and the body limit all refuse this way, so every refusal has the same
    shape."""
    body = json.dumps({"error_code": status, "message": message}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


def wrap_app(app: ASGIApp, spec_role: Role, config: WorkerConfig, auth: BasicAuth | None) -> ASGIApp:
    """The ASGI app one listener serves: CORS outermost (preflights need no credentials, as with
    Jetty's filter), then the admin split, then basic auth, then the API."""

    async def guarded(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        path: str = scope.get("path", "")
        admin_path = _is_admin_path(path)
        if (admin_path and spec_role == "main") or (not admin_path and spec_role == "admin"):
            await send_error(send, 404, "HTTP 404 Not Found")
            return
        if auth is not None:
            method = scope.get("method", "GET")
            internal = any(method == m and rx.match(path) for m, rx in _INTERNAL)
            headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
            if not internal and not auth.allows(headers.get("authorization")):
                await send_error(
                    send,
                    401,
                    UNAUTHORIZED_MESSAGE,
                    [(b"www-authenticate", f'Basic realm="{JAAS_CONTEXT}"'.encode())],
                )
                return
        await app(scope, receive, send)

    origin = config.access_control_allow_origin.strip()
    if not origin:
        return guarded
    methods = [
        m.strip() for m in (config.access_control_allow_methods or "GET,POST,HEAD").split(",") if m.strip()
    ]
    origins = [o.strip() for o in origin.split(",") if o.strip()]
    cors = CORSMiddleware(
        guarded,
        allow_origins=origins,
        allow_methods=methods,
        allow_headers=["X-Requested-With", "Content-Type", "Accept", "Origin", "Authorization"],
        allow_credentials=True,
        max_age=1800,
    )
    return cors
