"""Security against Apache Kafka itself, live (issue 23 row 9): a KRaft node with a SASL_PLAINTEXT
listener (PLAIN and SCRAM-SHA-512), an SSL listener demanding client certificates, and the standard
authorizer (``super.users=User:admin``), all from ``tests/support/apache_kafka.py``.

- A worker logs in with SCRAM-SHA-512, or PLAIN, forms its group and runs FileStream tasks whose own
  clients log in too (``producer.*``/``consumer.*``, Java's rule); its principal holds only the ACLs the
  test grants.
- A worker whose principal lacks an operation on an internal topic exits 1 with one line naming the
  topic and the operation.
- A source task whose principal may not WRITE its topic goes FAILED with the broker's error.
- A worker speaking TLS straight to the broker's SSL listener (no proxy) forms its group and moves records;
  the broker knows it by its certificate (``User:CN=worker``).
"""

from __future__ import annotations

import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import (
    PLAIN_LOGIN,
    SCRAM_LOGIN,
    KafkaCluster,
    authorizer_config,
    broker_kind,
    jaas,
    sasl_listener_config,
    ssl_listener_config,
)
from tests.support.cluster import WorkerProcess, read_json_values, run_worker, wait_until, worker_properties
from tests.support.tls_proxy import Pki, make_pki

pytestmark = [
    pytest.mark.integration,
    pytest.mark.skipif(broker_kind() != "kafka", reason="needs Apache Kafka's SASL, SSL and authorizer"),
    pytest.mark.skipif(shutil.which("openssl") is None, reason="the openssl command makes the test PKI"),
]

ADMIN_PASSWORD = "admin-secret"
WORKER_PASSWORD = "worker-secret"
MECHANISMS = {"SCRAM-SHA-512": SCRAM_LOGIN, "PLAIN": PLAIN_LOGIN}


@dataclass
class SecureKafka:
    cluster: KafkaCluster
    pki: Pki
    admin: AdminClient  # logged in as User:admin (a super user) over SCRAM

    @property
    def sasl(self) -> str:
        return self.cluster.listener_bootstrap("SASL")

    @property
    def ssl(self) -> str:
        return self.cluster.listener_bootstrap("SSL")

    def acl(
        self,
        principal: str,
        kind: ResourceType,
        name: str,
        operation: AclOperation,
        *,
        prefixed: bool = True,
        allow: bool = True,
    ) -> None:
        binding = AclBinding(
            kind,
            name,
            ResourcePatternType.PREFIXED if prefixed else ResourcePatternType.LITERAL,
            principal,
            "*",
            operation,
            AclPermissionType.ALLOW if allow else AclPermissionType.DENY,
        )
        for future in self.admin.create_acls([binding], request_timeout=30).values():
            future.result(30)

    def grant_group(self, principal: str, group: str) -> None:
        """Everything a worker of ``group`` does, as far as the names go: its internal and data topics
        (all named ``<group>-...``), its Connect group and its sink connectors' consumer groups."""
        self.acl(principal, ResourceType.TOPIC, group, AclOperation.ALL)
        self.acl(principal, ResourceType.GROUP, group, AclOperation.ALL)
        self.acl(principal, ResourceType.GROUP, f"connect-{group}", AclOperation.ALL)

    def topic(self, name: str) -> str:
        self.admin.create_topics([NewTopic(name, 1, 1)])[name].result(30)
        return name


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureKafka]:
    workdir = tmp_path_factory.mktemp("secure-kafka")
    pki = make_pki(workdir / "pki")
    keystore = workdir / "broker.p12"
    subprocess.run(
        ["openssl", "pkcs12", "-export", "-in", str(pki.server_cert), "-inkey", str(pki.server_key),
         "-out", str(keystore), "-passout", f"pass:{pki.password}"],
        check=True, capture_output=True,
    )  # fmt: skip
    users = {"admin": ADMIN_PASSWORD, "worker": WORKER_PASSWORD}
    config = {
        **sasl_listener_config("SASL", users),
        **ssl_listener_config("SSL", keystore, pki.password, pki.ca),
        **authorizer_config("User:admin"),
    }
    with KafkaCluster(
        workdir / "kafka",
        listeners={"SASL": "SASL_PLAINTEXT", "SSL": "SSL"},
        scram_users=users,
        broker_config=config,
    ) as cluster:
        admin = AdminClient(
            {
                "bootstrap.servers": cluster.listener_bootstrap("SASL"),
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.username": "admin",
                "sasl.password": ADMIN_PASSWORD,
                "log.connection.close": False,  # the broker closes idle connections: not news
            }
        )
        yield SecureKafka(cluster, pki, admin)


def sasl_worker(secure: SecureKafka, group: str, mechanism: str = "SCRAM-SHA-512") -> dict[str, str]:
    """A worker file as for Apache Kafka Connect: the worker's own clients and its tasks' log in as
    ``worker`` with ``mechanism``."""
    props = worker_properties(secure.sasl, group, free_port())
    login = {
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": jaas(MECHANISMS[mechanism], "worker", WORKER_PASSWORD),
    }
    props.update(login)
    for client in ("producer", "consumer"):
        props.update({f"{client}.{k}": v for k, v in login.items()})
    props["file.connectors.enable"] = "true"
    return props


def lines_in(secure: SecureKafka, topic: str, count: int) -> list[str]:
    """The payloads of the first ``count`` records of ``topic`` (JsonConverter with schemas), read as
    the PLAINTEXT listener's ANONYMOUS super user."""
    return [v["payload"] for v in read_json_values(secure.cluster.bootstrap, topic, count)]


def create(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    resp = worker.request("POST", "/connectors", json={"name": name, "config": config})
    assert resp.status_code == 201, resp.text


def joined(worker: WorkerProcess) -> None:
    wait_until(lambda: (v := worker.workers()) and v["this_worker"]["generation"] >= 0, 90, "the group")


def test_a_scram_worker_forms_its_group_and_its_tasks_log_in(secure: SecureKafka, tmp_path: Path) -> None:
    group = f"scram-{uuid.uuid4().hex[:6]}"
    secure.grant_group("User:worker", group)
    topic = secure.topic(f"{group}-lines")
    props = sasl_worker(secure, group)
    props.update(
        {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"}
    )
    source, sink = tmp_path / "in.txt", tmp_path / "out.txt"
    source.write_text("".join(f"scram {n}\n" for n in range(50)))
    worker = WorkerProcess(tmp_path, props, name=group, spark=True).start()
    try:
        joined(worker)
        create(
            worker,
            f"{group}-src",
            {"connector.class": "FileStreamSource", "file": str(source), "topic": topic},
        )
        create(
            worker, f"{group}-sink", {"connector.class": "FileStreamSink", "file": str(sink), "topics": topic}
        )

        def lines() -> list[str]:
            return sink.read_text().splitlines() if sink.exists() else []

        # A sink whose group only another principal may use: its consumer and its admin calls log in as
        # that principal (``consumer.override.*``, ``admin.override.*``), and its offsets are read with
        # the connector's admin settings, as Java's are, not the worker's (whose principal may not).
        elsewhere = f"{group}-elsewhere"
        other_group = f"other-{uuid.uuid4().hex[:6]}"  # outside the worker's ACLs
        as_admin = jaas(SCRAM_LOGIN, "admin", ADMIN_PASSWORD)
        create(
            worker,
            elsewhere,
            {
                "connector.class": "FileStreamSink",
                "file": str(tmp_path / "elsewhere.txt"),
                "topics": topic,
                "consumer.override.group.id": other_group,
                "consumer.override.sasl.jaas.config": as_admin,
                "admin.override.sasl.jaas.config": as_admin,
            },
        )

        wait_until(lambda: len(lines()) >= 50, 180, "50 lines through the SCRAM-secured broker")
        assert lines() == [f"scram {n}" for n in range(50)]
        for name in (f"{group}-src", f"{group}-sink", elsewhere):
            status = worker.get(f"/connectors/{name}/status").json()
            assert [t["state"] for t in status["tasks"]] == ["RUNNING"], status

        def committed_elsewhere() -> list[Any] | None:
            resp = worker.get(f"/connectors/{elsewhere}/offsets")
            assert resp.status_code == 200, resp.text  # the worker's own principal would be refused
            offsets = resp.json()["offsets"]
            return offsets if offsets and offsets[0]["offset"]["kafka_offset"] == 50 else None

        [offset] = wait_until(committed_elsewhere, 60, f"{other_group}'s committed offset read over REST")
        assert offset["partition"] == {"kafka_topic": topic, "kafka_partition": 0}
        log = worker.log_text()
        assert WORKER_PASSWORD not in log and ADMIN_PASSWORD not in log
        # The internal topics' readers use no group (as Java's KafkaBasedLog): no group ACL is needed, and
        # the broker's refusal of the one confluent-kafka makes them name is no warning.
        assert "GROUP_AUTHORIZATION_FAILED" not in log, log[-3000:]
    finally:
        worker.stop(60)


def test_a_plain_worker_runs_a_source_task(secure: SecureKafka, tmp_path: Path) -> None:
    group = f"plain-{uuid.uuid4().hex[:6]}"
    secure.grant_group("User:worker", group)
    topic = secure.topic(f"{group}-lines")
    source = tmp_path / "in.txt"
    source.write_text("".join(f"plain {n}\n" for n in range(20)))
    worker = WorkerProcess(tmp_path, sasl_worker(secure, group, "PLAIN"), name=group, spark=True).start()
    try:
        joined(worker)
        create(
            worker,
            f"{group}-src",
            {"connector.class": "FileStreamSource", "file": str(source), "topic": topic},
        )
        assert lines_in(secure, topic, 20) == [f"plain {n}" for n in range(20)]
        assert WORKER_PASSWORD not in worker.log_text()
    finally:
        worker.stop(60)


@pytest.mark.parametrize(
    ("topic_key", "operation"),
    [
        ("status.storage.topic", AclOperation.WRITE),
        ("offset.storage.topic", AclOperation.READ),
        ("config.storage.topic", AclOperation.DESCRIBE_CONFIGS),
        ("config.storage.topic", AclOperation.CREATE),
    ],
)
def test_a_worker_lacking_an_acl_on_an_internal_topic_exits_naming_topic_and_operation(
    secure: SecureKafka, tmp_path: Path, topic_key: str, operation: AclOperation
) -> None:
    group = f"acl-{uuid.uuid4().hex[:6]}"
    secure.grant_group("User:worker", group)
    props = sasl_worker(secure, group)
    topic = props[topic_key]
    secure.acl("User:worker", ResourceType.TOPIC, topic, operation, prefixed=False, allow=False)
    code, errors, took = run_worker(tmp_path, props, timeout=120)
    assert code == 1, errors
    assert len(errors) == 1, errors
    assert f"'{topic}'" in errors[0] and operation.name in errors[0] and topic_key in errors[0], errors
    assert WORKER_PASSWORD not in errors[0]
    print(f"\n{operation.name} denied: exit {code} after {took:.1f} s: {errors[0]}")


def test_a_source_task_without_write_on_its_topic_fails_with_the_brokers_error(
    secure: SecureKafka, tmp_path: Path
) -> None:
    group = f"nowrite-{uuid.uuid4().hex[:6]}"
    secure.grant_group("User:worker", group)
    topic = secure.topic(f"{group}-forbidden")
    secure.acl("User:worker", ResourceType.TOPIC, topic, AclOperation.WRITE, prefixed=False, allow=False)
    source = tmp_path / "in.txt"
    source.write_text("".join(f"line {n}\n" for n in range(5)))
    worker = WorkerProcess(tmp_path, sasl_worker(secure, group), name=group, spark=True).start()
    try:
        joined(worker)
        name = f"{group}-src"
        create(worker, name, {"connector.class": "FileStreamSource", "file": str(source), "topic": topic})

        def failed() -> dict[str, str] | None:
            tasks = worker.get(f"/connectors/{name}/status").json().get("tasks", [])
            return tasks[0] if tasks and tasks[0]["state"] == "FAILED" else None

        task = wait_until(failed, 90, "the task FAILED")
        assert "TOPIC_AUTHORIZATION_FAILED" in task["trace"] and topic in task["trace"], task["trace"]
    finally:
        worker.stop(60)


def test_a_worker_over_tls_straight_to_the_brokers_ssl_listener(secure: SecureKafka, tmp_path: Path) -> None:
    group = f"ssl-{uuid.uuid4().hex[:6]}"
    secure.grant_group("User:CN=worker", group)  # the client certificate's DN is the principal
    topic = secure.topic(f"{group}-lines")
    pki = secure.pki
    props = worker_properties(secure.ssl, group, free_port())
    props.update(
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": str(pki.ca),
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": str(pki.client_pem),
            "file.connectors.enable": "true",
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
    source = tmp_path / "in.txt"
    source.write_text("".join(f"tls {n}\n" for n in range(20)))
    worker = WorkerProcess(tmp_path, props, name=group, spark=True).start()
    try:
        joined(worker)
        create(
            worker,
            f"{group}-src",
            {"connector.class": "FileStreamSource", "file": str(source), "topic": topic},
        )
        assert lines_in(secure, topic, 20) == [f"tls {n}" for n in range(20)]
    finally:
        worker.stop(60)
