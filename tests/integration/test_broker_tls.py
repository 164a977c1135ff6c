"""TLS to the brokers, live: a worker whose every Kafka client (group membership, internal topics, admin,
tasks' producers and consumers) speaks TLS to a broker behind a TLS-terminating proxy (stunnel, which
demands a client certificate: mutual TLS), forms its group, runs a FileStream pipeline on Spark and
serves REST; a worker that trusts another CA fails start-up with one line naming the setting.

The worker's own clients use PEM stores (its group membership client takes PEM only); the tasks' clients
take a PKCS12 key store, as a Java worker's ``producer.ssl.keystore.*`` would name one.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.cluster import WorkerProcess, run_worker, wait_until, worker_properties
from tests.support.tls_proxy import TlsBroker, make_ca, stunnel_binary, tls_broker

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(stunnel_binary() is None, reason="stunnel is not installed (make test installs it)"),
]


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsBroker]:
    with tls_broker(tmp_path_factory.mktemp("tls")) as broker:
        yield broker


def tls_properties(tls: TlsBroker, group: str) -> dict[str, str]:
    """Worker properties as an Apache Kafka Connect worker file would say them for mutual TLS."""
    pki = tls.pki
    props = worker_properties(tls.bootstrap, group, free_port())
    props.update(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.client_pem),
        }
    )
    for client in ("producer", "consumer"):
        props.update(
            {
                f"{client}.security.protocol": "SSL",
                f"{client}.ssl.truststore.type": "PEM",
                f"{client}.ssl.truststore.location": str(pki.ca),
                f"{client}.ssl.keystore.type": "PKCS12",
                f"{client}.ssl.keystore.location": str(pki.client_p12),
                f"{client}.ssl.keystore.password": pki.password,
            }
        )
    return props


def test_a_worker_over_mutual_tls_forms_its_group_runs_a_pipeline_and_serves_rest(
    tls: TlsBroker, tmp_path: Path
) -> None:
    group = f"tls-{uuid.uuid4().hex[:6]}"
    props = tls_properties(tls, group)
    props.update(
        {
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
        }
    )
    topic = f"tls-lines-{uuid.uuid4().hex[:6]}"
    admin = AdminClient(
        {
            "bootstrap.servers": tls.bootstrap,
            "security.protocol": "SSL",
            "ssl.ca.location": str(tls.pki.ca),
            "ssl.keystore.location": str(tls.pki.client_p12),
            "ssl.keystore.password": tls.pki.password,
        }
    )
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(30)
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(f"secure {n}\n" for n in range(100)))
    worker = WorkerProcess(tmp_path, props, name="tls-w0", spark=True).start()
    try:
        view = wait_until(
            lambda: (v := worker.workers()) and v["this_worker"]["generation"] >= 0 and v, 90, "the group"
        )
        assert view["members"][0]["leader"]
        for name, config in (
            ("tls-src", {"connector.class": "FileStreamSource", "file": str(source), "topic": topic}),
            ("tls-sink", {"connector.class": "FileStreamSink", "file": str(sink), "topics": topic}),
        ):
            resp = worker.request("POST", "/connectors", json={"name": name, "config": config})
            assert resp.status_code == 201, resp.text

        def lines() -> list[str]:
            return sink.read_text().splitlines() if sink.exists() else []

        wait_until(lambda: len(lines()) >= 100, 180, "100 lines through the TLS broker")
        assert lines() == [f"secure {n}" for n in range(100)]
        for name in ("tls-src", "tls-sink"):
            status = worker.get(f"/connectors/{name}/status").json()
            assert status["connector"]["state"] == "RUNNING"
            assert [t["state"] for t in status["tasks"]] == ["RUNNING"], status
        # The connection to the broker really is the proxy's TLS: stunnel logged the worker's certificate.
        log = (tls.pki.ca.parent.parent / "stunnel.log").read_text()
        assert "CN=worker" in log, log[-2000:]
    finally:
        worker.stop(60)


def test_a_worker_trusting_another_ca_fails_start_up_naming_the_setting(
    tls: TlsBroker, tmp_path: Path
) -> None:
    other_ca, _key = make_ca(tmp_path, "other-ca")
    props = tls_properties(tls, f"tls-bad-{uuid.uuid4().hex[:6]}")
    props["ssl.truststore.location"] = str(other_ca)
    code, errors, took = run_worker(tmp_path, props, timeout=120)
    assert code != 0
    assert len(errors) == 1 and "ssl.truststore.location" in errors[0], errors
    assert str(other_ca) in errors[0] and "certificate" in errors[0], errors[0]
    print(f"\nwrong CA: exit {code} after {took:.1f} s: {errors[0]}")
