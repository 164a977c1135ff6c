"""Issue 23, row 6 (executor part): what the job of an executor-run source task carries (the task's own
client settings, never the worker's credentials), and the start-up warning about a cluster master whose
Spark RPC, which carries those jobs, is not authenticated and encrypted."""

from __future__ import annotations

import pickle

import pytest
from structlog.testing import capture_logs

from kconnect.config.worker import WorkerConfig
from kconnect.runtime.dataplane.spark_executor import SparkExecutor, unprotected_spark_rpc
from kconnect.runtime.dataplane.spark_source import SourceJob, SparkSourceRunner, connection_settings
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.storage.offset_log import OffsetState

BASE = {
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
    "key.converter": "json",
    "value.converter": "json",
}
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
#: A worker on a SASL cluster: its own login (config, status and offsets topics, the group) and the one its
#: tasks' producers use (``producer.*``, Java's rule).
SECURED = {
    **BASE,
    "spark.master": "spark://master:7077",
    "security.protocol": "SASL_SSL",
    "sasl.mechanism": "PLAIN",
    "sasl.jaas.config": f'{PLAIN} required username="worker" password="worker-only-secret";',
    "producer.security.protocol": "SASL_SSL",
    "producer.sasl.mechanism": "PLAIN",
    "producer.sasl.jaas.config": f'{PLAIN} required username="task" password="task-secret";',
    "producer.linger.ms": "50",
}


def _executor(props: dict[str, str]) -> SparkExecutor:
    config = WorkerConfig.from_properties(props)
    return SparkExecutor(
        config, PluginRegistry.discover(file_connectors=True), lambda: OffsetState(), lambda records: None
    )


@pytest.mark.parametrize(
    ("settings", "missing"),
    [
        ({"spark.master": "local[2]"}, []),
        ({}, []),  # the default master is local
        ({"spark.master": "spark://m:7077"}, ["spark.authenticate", "spark.network.crypto.enabled"]),
        ({"spark.master": "spark://m:7077", "spark.authenticate": "true"}, ["spark.network.crypto.enabled"]),
        ({"spark.master": "yarn", "spark.network.crypto.enabled": "true"}, ["spark.authenticate"]),
        (
            {
                "spark.master": "k8s://h",
                "spark.authenticate": "TRUE",
                "spark.network.crypto.enabled": " true",
            },
            [],
        ),
        (  # Spark reads these as booleans: only "true" turns them on
            {
                "spark.master": "spark://m:7077",
                "spark.authenticate": "yes",
                "spark.network.crypto.enabled": "1",
            },
            ["spark.authenticate", "spark.network.crypto.enabled"],
        ),
    ],
)
def test_a_cluster_master_needs_spark_rpc_authenticated_and_encrypted(
    settings: dict[str, str], missing: list[str]
) -> None:
    assert unprotected_spark_rpc(settings) == missing


def _rpc_warnings(logs: list[dict[str, object]]) -> list[dict[str, object]]:
    return [e for e in logs if e["log_level"] == "warning" and "Spark's RPC" in str(e["event"])]


def test_a_worker_on_an_unprotected_cluster_master_warns_once_at_start_up() -> None:
    with capture_logs() as logs:
        executor = _executor({**BASE, "spark.master": "spark://master:7077", "spark.authenticate": "true"})
    [warning] = _rpc_warnings(logs)
    assert warning["not_enabled"] == ["spark.network.crypto.enabled"]
    assert warning["spark_master"] == "spark://master:7077"
    with capture_logs() as later:
        executor.start_task(TaskId("c", 0), {"connector.class": "NoSuchConnector"}, "STARTED")
    assert _rpc_warnings(later) == []


@pytest.mark.parametrize(
    "extra",
    [
        {"spark.master": "local[2]"},
        {
            "spark.master": "spark://master:7077",
            "spark.authenticate": "true",
            "spark.authenticate.secret": "s",
            "spark.network.crypto.enabled": "true",
        },
    ],
)
def test_no_warning_with_a_local_master_or_a_protected_one(extra: dict[str, str]) -> None:
    with capture_logs() as logs:
        _executor({**BASE, **extra})
    assert _rpc_warnings(logs) == []


def test_connection_settings_keep_who_and_how_and_drop_tuning() -> None:
    producer = {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "task",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        "enable.ssl.certificate.verification": "true",
        "acks": "1",
        "linger.ms": "50",
        "compression.type": "zstd",
    }
    assert connection_settings(producer) == {
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN",
        "sasl.username": "task",
        "sasl.password": "p",
        "ssl.ca.location": "/ca.pem",
        "enable.ssl.certificate.verification": "true",
    }


def test_an_executor_run_source_tasks_job_carries_the_tasks_credentials_and_never_the_workers() -> None:
    executor = _executor(SECURED)
    try:
        runner = executor._runner(
            TaskId("src", 0), {"connector.class": "FileStreamSource", "file": "/tmp/in", "topic": "t"}
        )
        assert isinstance(runner, SparkSourceRunner)  # auto, with a cluster master: on an executor
        address = executor.channel.register(runner)
        job = runner._make_job(address)
        assert isinstance(job, SourceJob)
        shipped = pickle.dumps(job)  # what Spark sends to the executor
        assert b"worker-only-secret" not in shipped
        assert job.offsets_settings == {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "task",
            "sasl.password": "task-secret",
        }
        assert job.producer_settings["sasl.password"] == "task-secret"
        # The channel's pin and the task's secret go with it; the worker's TLS key does not.
        assert job.channel.fingerprint == executor.channel.certificate.fingerprint
        assert job.channel.secret.encode() in shipped
        assert b"PRIVATE KEY" not in shipped and executor.channel.certificate.key_pem not in shipped
    finally:
        executor.channel.close()
