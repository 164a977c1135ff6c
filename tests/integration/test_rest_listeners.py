"""REST listeners on a real worker: https with a self-signed PEM certificate, a separate admin listener,
CORS preflights and opt-in basic authentication; bad settings stop the worker with exit 2."""

from __future__ import annotations

import shutil
import ssl
import subprocess
import uuid
from pathlib import Path

import httpx
import pytest

from kconnect.rest.server import BASIC_AUTH_EXTENSION, PROPERTY_FILE_LOGIN_MODULE
from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, run_worker, wait_until, worker_properties

pytestmark = pytest.mark.integration


def self_signed(tmp_path: Path) -> tuple[Path, Path]:
    """A PEM keystore (key + certificate in one file) and the certificate alone, for the client."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make a test certificate")
    key, cert = tmp_path / "key.pem", tmp_path / "cert.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )  # fmt: skip
    keystore = tmp_path / "keystore.pem"
    keystore.write_text(key.read_text() + cert.read_text())
    return keystore, cert


def test_https_admin_listener_cors_and_basic_auth(
    tmp_path: Path, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    keystore, cert = self_signed(tmp_path)
    (tmp_path / "users.properties").write_text("# user=password\nalice=s3cret\n")
    jaas = tmp_path / "jaas.conf"
    jaas.write_text(
        "KafkaConnect {\n"
        f'  {PROPERTY_FILE_LOGIN_MODULE} required\n  file="{tmp_path / "users.properties"}";\n'
        "};\n"
    )
    monkeypatch.setenv("KAFKA_OPTS", f"-Xmx1g -Djava.security.auth.login.config={jaas}")
    port, admin_port = free_port(), free_port()
    props = worker_properties(broker.bootstrap, f"tls-{uuid.uuid4().hex[:6]}", port)
    props.update(
        {
            "listeners": f"https://127.0.0.1:{port}",
            "admin.listeners": f"http://127.0.0.1:{admin_port}",
            "listeners.https.ssl.keystore.type": "PEM",
            "listeners.https.ssl.keystore.location": str(keystore),
            "access.control.allow.origin": "http://example.com",
            "access.control.allow.methods": "GET,PUT",
            "rest.extension.classes": BASIC_AUTH_EXTENSION,
        }
    )
    worker = WorkerProcess(tmp_path, props).start()
    main = httpx.Client(
        base_url=f"https://127.0.0.1:{port}", verify=ssl.create_default_context(cafile=str(cert)), timeout=10
    )
    admin = httpx.Client(base_url=f"http://127.0.0.1:{admin_port}", timeout=10)
    creds = ("alice", "s3cret")
    try:

        def healthy() -> bool:
            try:
                return main.get("/health", auth=creds).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(healthy, 90, "the worker over https")
        # Basic auth: 401 in Connect's error shape without or with wrong credentials, 200 with them.
        anonymous = main.get("/connectors")
        assert anonymous.status_code == 401
        assert anonymous.json() == {"error_code": 401, "message": "User cannot access the resource."}
        assert main.get("/connectors", auth=("alice", "wrong")).status_code == 401
        assert main.get("/connectors", auth=creds).json() == []
        # A plain-http request to the https port gets no answer from the API.
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"http://127.0.0.1:{port}/connectors", timeout=5)

        # The admin endpoints live on the admin listener only; it serves nothing else.
        assert admin.get("/admin/loggers", auth=creds).status_code == 200
        assert admin.get("/admin/loggers").status_code == 401
        hidden = main.get("/admin/loggers", auth=creds)
        assert (hidden.status_code, hidden.json()["error_code"]) == (404, 404)
        assert admin.get("/connectors", auth=creds).status_code == 404

        # CORS: a preflight from the allowed origin is answered without credentials, as Jetty's filter does.
        pre = main.options(
            "/connectors", headers={"Origin": "http://example.com", "Access-Control-Request-Method": "PUT"}
        )
        assert pre.status_code == 200
        assert pre.headers["access-control-allow-origin"] == "http://example.com"
        assert set(pre.headers["access-control-allow-methods"].split(", ")) == {"GET", "PUT"}
        assert pre.headers["access-control-allow-credentials"] == "true"
        simple = main.get("/connectors", auth=creds, headers={"Origin": "http://example.com"})
        assert simple.headers["access-control-allow-origin"] == "http://example.com"
        other = main.get("/connectors", auth=creds, headers={"Origin": "http://evil.example"})
        assert "access-control-allow-origin" not in other.headers
    finally:
        main.close()
        admin.close()
        worker.stop()


def test_two_https_workers_with_basic_auth_forward_to_each_other(
    tmp_path: Path, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A follower forwards writes and GET /workers to the leader over https, trusting the worker's own
    truststore and passing the caller's credentials on, as Java's inter-worker client does."""
    keystore, cert = self_signed(tmp_path)
    (tmp_path / "users.properties").write_text("alice=s3cret\n")
    jaas = tmp_path / "jaas.conf"
    users = tmp_path / "users.properties"
    jaas.write_text(f'KafkaConnect {{\n  {PROPERTY_FILE_LOGIN_MODULE} required\n  file="{users}";\n}};\n')
    monkeypatch.setenv("KAFKA_OPTS", f"-Djava.security.auth.login.config={jaas}")
    group = f"tls2-{uuid.uuid4().hex[:6]}"
    workers = []
    for _ in range(2):
        port = free_port()
        props = worker_properties(broker.bootstrap, group, port)
        props.update(
            {
                "listeners": f"https://127.0.0.1:{port}",
                "listeners.https.ssl.keystore.type": "PEM",
                "listeners.https.ssl.keystore.location": str(keystore),
                "ssl.truststore.type": "PEM",
                "ssl.truststore.location": str(cert),
                "rest.extension.classes": BASIC_AUTH_EXTENSION,
            }
        )
        workers.append(WorkerProcess(tmp_path, props).start())
    creds = ("alice", "s3cret")
    clients = [
        httpx.Client(
            base_url=w.url.replace("http://", "https://"),
            verify=ssl.create_default_context(cafile=str(cert)),
            auth=creds,
            timeout=30,
        )
        for w in workers
    ]
    try:

        def settled() -> dict[str, object] | None:
            try:
                views = [c.get("/workers").json() for c in clients]
            except (httpx.HTTPError, ValueError):
                return None
            if all(v.get("source") == "leader" and len(v.get("members", [])) == 2 for v in views):
                return views[0]
            return None

        view = wait_until(settled, 90, "both https workers answering from the leader's view")
        leader_url = str(view["leader_url"]).rstrip("/").replace("http://", "https://")
        follower = next(c for c in clients if str(c.base_url).rstrip("/") != leader_url)
        config = {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "topics": "tls-in",
            "tasks.max": "1",
        }
        created = follower.post("/connectors", json={"name": "tls-sink", "config": config})
        assert created.status_code == 201, created.text
        for c in clients:
            assert wait_until(lambda c=c: c.get("/connectors").json() == ["tls-sink"] or None, 30, "visible")
    finally:
        for c in clients:
            c.close()
        for w in workers:
            w.stop()


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"rest.extension.classes": "com.example.MyAuth"}, "rest.extension.classes: "),
        ({"rest.extension.classes": BASIC_AUTH_EXTENSION}, "JAAS"),
        (
            {"listeners": "https://127.0.0.1:{port}"},
            "Invalid value 'JKS' for configuration ssl.keystore.type",
        ),
        (
            {"listeners": "https://127.0.0.1:{port}", "listeners.https.ssl.keystore.type": "PKCS12"},
            "Invalid value 'PKCS12' for configuration listeners.https.ssl.keystore.type",
        ),
    ],
)
def test_rest_settings_kconnect_cannot_honour_exit_2_naming_the_key(
    tmp_path: Path, change: dict[str, str], fragment: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KAFKA_OPTS", raising=False)
    monkeypatch.delenv("KCONNECT_JAAS_CONFIG", raising=False)
    port = free_port()
    props = worker_properties("127.0.0.1:1", "g-rest-bad", port)
    props.update({k: v.format(port=port) for k, v in change.items()})
    code, errors, _took = run_worker(tmp_path, props)
    assert code == 2, errors
    assert len(errors) == 1 and fragment in errors[0], errors
    if "MyAuth" in str(change):
        assert "com.example.MyAuth" in errors[0]


def test_three_https_workers_requiring_client_certificates_forward_and_post_task_configs(
    tmp_path: Path, broker: Broker
) -> None:
    """``ssl.client.auth=required`` on every worker's listener: a worker's calls to another (a follower
    forwarding a create to the leader, a follower posting its connector's task configs to the leader)
    present the worker's own key store, as Java's RestClient does, or the leader refuses the handshake."""
    if shutil.which("openssl") is None:
        pytest.skip("the openssl command is needed to make test certificates")
    from tests.support.tls_proxy import make_pki

    pki = make_pki(tmp_path / "pki")
    # The "broker" certificate names 127.0.0.1 and has no key-usage limit: each worker serves and calls
    # with it. The test's own client presents the "worker" one; both are signed by the test CA.
    keystore = tmp_path / "rest-keystore.pem"
    keystore.write_text(pki.server_cert.read_text() + pki.server_key.read_text())
    group = f"mtls-{uuid.uuid4().hex[:6]}"
    workers = []
    for i in range(3):
        port = free_port()
        props = worker_properties(broker.bootstrap, group, port)
        props.update(
            {
                "listeners": f"https://127.0.0.1:{port}",
                "listeners.https.ssl.keystore.type": "PEM",
                "listeners.https.ssl.keystore.location": str(keystore),
                "listeners.https.ssl.truststore.type": "PEM",
                "listeners.https.ssl.truststore.location": str(pki.ca),
                "listeners.https.ssl.client.auth": "required",
                "file.connectors.enable": "true",
            }
        )
        workers.append(WorkerProcess(tmp_path, props, name=f"{group}-w{i}").start())
    context = ssl.create_default_context(cafile=str(pki.ca))
    context.load_cert_chain(str(pki.client_pem))
    clients = [
        httpx.Client(base_url=w.url.replace("http://", "https://"), verify=context, timeout=30)
        for w in workers
    ]
    try:
        # The listener really demands a certificate: a client without one gets no answer.
        with pytest.raises(httpx.HTTPError):
            httpx.get(
                clients[0].base_url.join("/health"),
                verify=ssl.create_default_context(cafile=str(pki.ca)),
                timeout=10,
            )

        def settled() -> dict[str, object] | None:
            try:
                views = [c.get("/workers").json() for c in clients]
            except (httpx.HTTPError, ValueError):
                return None
            if all(v.get("source") == "leader" and len(v.get("members", [])) == 3 for v in views):
                return views[0]
            return None

        view = wait_until(settled, 120, "three https workers answering from the leader's view")
        leader_url = str(view["leader_url"]).rstrip("/").replace("http://", "https://")
        follower = next(c for c in clients if str(c.base_url).rstrip("/") != leader_url)
        names = [f"mtls-sink-{i}" for i in range(3)]
        for name in names:
            config = {"connector.class": "FileStreamSink", "topics": f"{name}-in", "tasks.max": "1"}
            created = follower.post("/connectors", json={"name": name, "config": config})
            assert created.status_code == 201, created.text

        def placed() -> dict[str, dict[str, object]] | None:
            statuses = {n: clients[0].get(f"/connectors/{n}/status").json() for n in names}
            if all(
                s.get("connector", {}).get("state") == "RUNNING" and s.get("tasks") for s in statuses.values()
            ):
                return statuses
            return None

        statuses = wait_until(placed, 90, "every connector RUNNING with its task (configs at the leader)")
        leader_id = leader_url.split("://", 1)[1]
        on_followers = [n for n, s in statuses.items() if s["connector"]["worker_id"] != leader_id]  # type: ignore[index]
        # A connector on a follower had its task configs posted to the leader over mutual TLS.
        assert on_followers, statuses
        for name in on_followers:
            tasks = clients[0].get(f"/connectors/{name}/tasks").json()
            assert [t["id"] for t in tasks] == [{"connector": name, "task": 0}], tasks
    finally:
        for c in clients:
            c.close()
        for w in workers:
            w.stop()
