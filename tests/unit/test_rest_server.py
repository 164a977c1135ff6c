"""Listener planning, TLS settings, REST extensions and the per-listener ASGI wrapper (pure parts)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path

import httpx
import pytest
from fastapi import FastAPI
from structlog.testing import capture_logs

from kconnect.config.errors import ConfigError
from kconnect.config.listeners import RestListener
from kconnect.config.worker import WorkerConfig
from kconnect.rest.server import (
    BASIC_AUTH_EXTENSION,
    PROPERTY_FILE_LOGIN_MODULE,
    BasicAuth,
    ListenerSpec,
    Role,
    TlsSettings,
    basic_auth_from_jaas,
    clear_text_basic_auth,
    jaas_path,
    listener_plan,
    rest_extensions,
    tls_settings,
    wrap_app,
)
from kconnect.runtime.cli.main import rest_setup
from tests.support.cluster import worker_properties


def config(**extra: str) -> WorkerConfig:
    props = worker_properties("127.0.0.1:9092", "g", 8083)
    props.update(extra)
    return WorkerConfig.from_properties(props)


def fake_writer(text: str, suffix: str) -> str:
    return f"/secret/{suffix}:{text}"


def test_listener_prefix_wins_all_or_nothing_over_top_level_ssl_keys(tmp_path: Path) -> None:
    pem = tmp_path / "ks.pem"
    pem.write_text("x")
    top = {"ssl.keystore.type": "PEM", "ssl.keystore.location": "/nope", "ssl.client.auth": "required"}
    prefixed = {
        **top,
        "listeners.https.ssl.keystore.type": "PEM",
        "listeners.https.ssl.keystore.location": str(pem),
    }
    tls = tls_settings(prefixed)
    # ssl.client.auth is not taken from the top level once any listeners.https.* key is set.
    assert (tls.certfile, tls.client_auth) == (str(pem), "none")
    with pytest.raises(ConfigError, match=r"ssl\.keystore\.location"):
        tls_settings(top)


def test_inline_pem_keystore_and_truststore() -> None:
    tls = tls_settings(
        {
            "ssl.keystore.type": "PEM",
            "ssl.keystore.key": "KEY",
            "ssl.keystore.certificate.chain": "CHAIN",
            "ssl.key.password": "pw",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.certificates": "CA",
            "ssl.client.auth": "Requested",
        },
        write_secret=fake_writer,
    )
    assert (tls.certfile, tls.keyfile, tls.cafile) == (
        "/secret/.crt:CHAIN",
        "/secret/.key:KEY",
        "/secret/.crt:CA",
    )
    assert (tls.key_password, tls.client_auth) == ("pw", "requested")


@pytest.mark.parametrize(
    ("props", "key", "value"),
    [
        ({}, "ssl.keystore.type", "JKS"),  # Java's default type, which kconnect cannot read
        ({"ssl.keystore.type": "PKCS12"}, "ssl.keystore.type", "PKCS12"),
        ({"ssl.keystore.type": "PEM"}, "ssl.keystore.location", None),
        ({"ssl.keystore.type": "PEM", "ssl.keystore.key": "K"}, "ssl.keystore.certificate.chain", None),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.key": "K", "ssl.keystore.certificate.chain": "C",
             "ssl.truststore.location": "/t.jks"},
            "ssl.truststore.type",
            "JKS",
        ),
        (
            {"ssl.keystore.type": "PEM", "ssl.keystore.key": "K", "ssl.keystore.certificate.chain": "C",
             "ssl.client.auth": "maybe"},
            "ssl.client.auth",
            "maybe",
        ),
    ],
)  # fmt: skip
def test_tls_errors_name_the_key_and_value(props: dict[str, str], key: str, value: str | None) -> None:
    with pytest.raises(ConfigError) as info:
        tls_settings(props, write_secret=fake_writer)
    assert (info.value.key, info.value.value) == (key, value)


def test_listener_plan_roles() -> None:
    assert [s.role for s in listener_plan(config())] == ["both"]
    split = listener_plan(config(**{"admin.listeners": "http://127.0.0.1:9093"}))
    assert [(s.role, s.listener.port) for s in split] == [("main", 8083), ("admin", 9093)]
    disabled = listener_plan(config(**{"admin.listeners": ""}))
    assert [s.role for s in disabled] == ["main"]


JAAS = "KafkaConnect {\n  " + PROPERTY_FILE_LOGIN_MODULE + ' required\n  file="FILE";\n};\n'


def test_basic_auth_reads_the_jaas_entry_and_credentials(tmp_path: Path) -> None:
    users = tmp_path / "users.properties"
    users.write_text("alice=s3cret\nbob: pw:with:colons\n")
    auth = basic_auth_from_jaas("Other { x required; };\n" + JAAS.replace("FILE", str(users)), "jaas.conf")
    assert auth.credentials == {"alice": "s3cret", "bob": "pw:with:colons"}

    def header(user: str, password: str) -> str:
        return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()

    assert auth.allows(header("alice", "s3cret")) and auth.allows(header("bob", "pw:with:colons"))
    assert not auth.allows(header("alice", "nope")) and not auth.allows(header("eve", ""))
    assert not auth.allows(None) and not auth.allows("Basic !!!") and not auth.allows("Bearer x")


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("Other { x required; };", "'KafkaConnect' entry"),
        ("KafkaConnect { com.example.Login required; };", "PropertyFileLoginModule"),
        (f"KafkaConnect {{ {PROPERTY_FILE_LOGIN_MODULE} required; }};", 'file="..."'),
        (JAAS.replace("FILE", "/no/such/users"), "readable credentials file"),
    ],
)
def test_jaas_problems_are_config_errors(text: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=r"rest\.extension\.classes") as info:
        basic_auth_from_jaas(text, "jaas.conf")
    assert fragment in str(info.value)


def test_jaas_path_from_kafka_opts_or_kconnect_variable() -> None:
    assert (
        jaas_path({"KAFKA_OPTS": "-Xmx1g -Djava.security.auth.login.config=/etc/j.conf -Dx=y"})
        == "/etc/j.conf"
    )
    assert jaas_path({"KCONNECT_JAAS_CONFIG": "/k.conf", "KAFKA_OPTS": ""}) == "/k.conf"
    assert jaas_path({}) is None


def test_only_basic_auth_is_a_known_extension(tmp_path: Path) -> None:
    assert rest_extensions(config(), {}) is None
    with pytest.raises(ConfigError) as info:
        rest_extensions(config(**{"rest.extension.classes": "com.example.X"}), {})
    assert (info.value.key, info.value.value) == ("rest.extension.classes", "com.example.X")
    users = tmp_path / "u.properties"
    users.write_text("a=b\n")
    jaas = tmp_path / "j.conf"
    jaas.write_text(JAAS.replace("FILE", str(users)))
    auth = rest_extensions(
        config(**{"rest.extension.classes": BASIC_AUTH_EXTENSION}), {"KCONNECT_JAAS_CONFIG": str(jaas)}
    )
    assert auth is not None and auth.credentials == {"a": "b"}


_TLS = TlsSettings("/c.pem", None, None, None, "none")
_AUTH = BasicAuth({"a": "b"}, "users.properties")


def _spec(url: str, role: Role = "both") -> ListenerSpec:
    scheme, _, rest = url.partition("://")
    host, _, port = rest.rpartition(":")
    tls = _TLS if scheme == "https" else None
    return ListenerSpec(RestListener(scheme, host.strip("[]"), int(port)), role, tls)


@pytest.mark.parametrize(
    ("listeners", "auth", "in_clear"),
    [
        (["http://:8083"], None, []),  # no basic auth: no password to leak
        (["http://:8083"], _AUTH, ["http://0.0.0.0:8083"]),  # the default listener binds every interface
        (["https://:8443"], _AUTH, []),
        (["http://10.0.0.5:8083", "https://:8443"], _AUTH, ["http://10.0.0.5:8083"]),
        (["http://worker-1.example.com:8083"], _AUTH, ["http://worker-1.example.com:8083"]),
        (["http://[fe80::1]:8083"], _AUTH, ["http://[fe80::1]:8083"]),
        # loopback stays in this machine (a TLS proxy in front): no warning
        (["http://127.0.0.1:8083", "http://localhost:8084", "http://[::1]:8085"], _AUTH, []),
        (["http://127.0.0.2:8083"], _AUTH, []),
    ],
)
def test_basic_auth_on_http_listeners_is_in_clear(
    listeners: list[str], auth: BasicAuth | None, in_clear: list[str]
) -> None:
    assert clear_text_basic_auth([_spec(u) for u in listeners], auth) == in_clear


def test_an_admin_http_listener_is_in_clear_too() -> None:
    # Basic auth guards the admin listener as well (wrap_app), so its passwords cross it too.
    plan = [_spec("https://:8443", "main"), _spec("http://:9093", "admin")]
    assert clear_text_basic_auth(plan, _AUTH) == ["http://0.0.0.0:9093"]


def _clear_text_warnings(logs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [e for e in logs if e["log_level"] == "warning" and "travel in clear" in str(e["event"])]


@pytest.mark.parametrize(
    ("extra", "warned"),
    [
        ({}, None),  # no basic auth
        ({"rest.extension.classes": BASIC_AUTH_EXTENSION, "listeners": "http://127.0.0.1:8083"}, None),
        (
            {
                "rest.extension.classes": BASIC_AUTH_EXTENSION,
                "listeners": "http://:8083,http://10.0.0.5:8084",
                "admin.listeners": "http://:9093",
            },
            ["http://0.0.0.0:8083", "http://10.0.0.5:8084", "http://0.0.0.0:9093"],
        ),
    ],
)
def test_start_up_warns_once_for_basic_auth_in_clear(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, extra: dict[str, str], warned: list[str] | None
) -> None:
    users = tmp_path / "u.properties"
    users.write_text("alice=s3cret\n")
    jaas = tmp_path / "j.conf"
    jaas.write_text(JAAS.replace("FILE", str(users)))
    monkeypatch.setenv("KCONNECT_JAAS_CONFIG", str(jaas))
    with capture_logs() as logs:
        rest_setup(config(**extra))
    warnings = _clear_text_warnings(logs)
    if warned is None:
        assert warnings == []
    else:
        [warning] = warnings
        assert warning["listeners"] == warned
        assert "s3cret" not in str(warning)


def test_wrapper_splits_admin_paths_and_exempts_signed_internal_requests() -> None:
    asyncio.run(_wrapper_checks())


async def _wrapper_checks() -> None:
    api = FastAPI()

    @api.get("/admin/loggers")
    def loggers() -> dict[str, str]:
        return {}

    @api.get("/connectors")
    def connectors() -> list[str]:
        return []

    @api.post("/connectors/{name}/tasks")
    def tasks(name: str) -> dict[str, str]:
        return {"name": name}

    auth = BasicAuth({"u": "p"}, "test")
    main = httpx.AsyncClient(
        transport=httpx.ASGITransport(wrap_app(api, "main", config(), auth)), base_url="http://t"
    )
    admin = httpx.AsyncClient(
        transport=httpx.ASGITransport(wrap_app(api, "admin", config(), None)), base_url="http://t"
    )
    async with main, admin:
        assert (await main.get("/connectors")).status_code == 401
        assert (await main.get("/connectors", auth=("u", "p"))).status_code == 200
        assert (await main.get("/admin/loggers", auth=("u", "p"))).json() == {
            "error_code": 404,
            "message": "HTTP 404 Not Found",
        }
        assert (await main.post("/connectors/c/tasks")).json() == {"name": "c"}
        assert (await admin.get("/admin/loggers")).status_code == 200
        assert (await admin.get("/connectors")).status_code == 404
