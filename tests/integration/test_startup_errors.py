"""A worker that cannot start says why in one line and exits non-zero."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli import broker as embedded
from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import run_worker, worker_properties

pytestmark = pytest.mark.integration


@pytest.mark.parametrize(
    ("change", "fragment"),
    [
        ({"group.id": None}, "group.id"),
        ({"session.timeout.ms": "soon"}, "session.timeout.ms"),
        ({"connect.protocol": "gossip"}, "connect.protocol"),
        ({"scheduled.rebalance.max.delay.ms": "-5"}, "scheduled.rebalance.max.delay.ms"),
        ({"key.converter": "com.example.NoSuchConverter"}, "key.converter"),
        ({"listeners": "ftp://:8083"}, "listeners"),
        # Java client settings kconnect's Kafka clients cannot honour: refused, not silently dropped.
        (
            {
                "consumer.security.protocol": "SSL",
                "consumer.ssl.truststore.location": "/etc/kafka/truststore.jks",
            },
            "consumer.ssl.truststore.location",
        ),
        (
            {"producer.compression.type": "zstd", "producer.compression.zstd.level": "19"},
            "compression.zstd.level",
        ),
    ],
)
def test_bad_worker_properties_exit_2_with_one_line(
    tmp_path: Path, change: dict[str, str | None], fragment: str
) -> None:
    props = worker_properties("127.0.0.1:1", "g-bad", free_port())
    for key, value in change.items():
        if value is None:
            props.pop(key)
        else:
            props[key] = value
    code, errors, _ = run_worker(tmp_path, props)
    assert code == 2
    assert len(errors) == 1, errors
    assert fragment in errors[0]
    for key, value in change.items():
        if value is not None and fragment in key:
            assert value in errors[0]


def test_unreachable_broker_is_a_clear_error_not_a_hang(tmp_path: Path) -> None:
    dead = f"127.0.0.1:{free_port()}"
    props = worker_properties(dead, "g-unreachable", free_port(), request_timeout_ms=20000)
    code, errors, elapsed = run_worker(tmp_path, props)
    assert code == 1
    assert len(errors) == 1 and "could not reach the Kafka cluster" in errors[0] and dead in errors[0]
    assert elapsed < 45


def test_config_topic_that_is_not_compacted_is_refused(tmp_path: Path, broker: Broker) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    props = worker_properties(broker.bootstrap, group, free_port())
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = props["config.storage.topic"]
    admin.create_topics([NewTopic(topic, 1, 1, config={"cleanup.policy": "delete"})])[topic].result(30)
    code, errors, _ = run_worker(tmp_path, props)
    assert code == 1
    assert len(errors) == 1
    assert topic in errors[0] and "cleanup.policy=delete" in errors[0] and "compact" in errors[0]


def test_config_topic_with_two_partitions_is_refused(tmp_path: Path, broker: Broker) -> None:
    group = f"g-{uuid.uuid4().hex[:8]}"
    props = worker_properties(broker.bootstrap, group, free_port())
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    topic = props["config.storage.topic"]
    admin.create_topics([NewTopic(topic, 2, 1, config={"cleanup.policy": "compact"})])[topic].result(30)
    code, errors, _ = run_worker(tmp_path, props)
    assert code == 1
    assert len(errors) == 1 and topic in errors[0] and "2 partitions" in errors[0]


def test_a_failed_sasl_login_is_the_reason_given(tmp_path: Path) -> None:
    """The worker's top-level security settings, written as for Apache Kafka Connect (a JAAS line), reach
    its Kafka clients: against a broker that requires SASL the worker logs in with SCRAM, and the one error
    line says the login failed, not just that the cluster was unreachable.

    A successful login cannot be shown on the test broker: with ``--authentication`` it refuses the
    unauthenticated request that creates its first SCRAM user, and its in-memory store starts empty.
    """
    port = free_port()
    cmd = [*embedded.command(port), "--authentication"]
    broker = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        assert embedded.wait_for_port("127.0.0.1", port, 15)
        props = worker_properties(f"127.0.0.1:{port}", "g-sasl", free_port(), request_timeout_ms=20000)
        props.update(
            {
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "SCRAM-SHA-512",
                "sasl.jaas.config": "org.apache.kafka.common.security.scram.ScramLoginModule required "
                'username="kconnect" password="not-a-user";',
            }
        )
        code, errors, _ = run_worker(tmp_path, props)
    finally:
        broker.kill()
        broker.wait()
    assert code == 1
    assert len(errors) == 1 and "SASL authentication error" in errors[0], errors
    assert "not-a-user" not in errors[0]
