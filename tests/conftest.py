"""Shared fixtures: every integration test gets a real broker that the test run starts itself.

That broker is Apache Kafka (a one-node KRaft cluster from Maven Central's jars,
`tests/support/apache_kafka.py`) unless ``KCONNECT_TEST_BROKER=embedded`` asks for the embedded
development broker (Tansu), which stays the default of `kconnect broker` and `make demo` and keeps a
smoke test of its own (`tests/integration/test_embedded_broker.py`).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kconnect.runtime.cli import broker as embedded
from tests.support.apache_kafka import Broker, KafkaCluster, broker_kind

# Property tests check results, not speed: hypothesis' default 200 ms deadline per example and its
# too-slow health check fail on a shared 2-core CI machine whose other pytest process is starting a JVM
# (seen twice while integration runs shared the cores), and a deadline is a timed assertion, which this
# project's tests do not make. Tests that set their own settings still inherit this.
settings.register_profile("kconnect", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kconnect")


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """One broker for the whole session; tests isolate themselves by topic and group names."""
    workdir = Path(tmp_path_factory.mktemp("broker"))
    if broker_kind() == "embedded":
        with embedded.running(log_path=workdir / "tansu.log") as b:
            yield b
        return
    with KafkaCluster(workdir, size=1) as cluster:
        yield cluster


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[Broker]:
    """A broker of the test's own, for tests that must not see other tests' groups."""
    if broker_kind() == "embedded":
        with embedded.running(log_path=tmp_path / "tansu.log") as b:
            yield b
        return
    with KafkaCluster(tmp_path / "kafka", size=1) as cluster:
        yield cluster


@pytest.fixture
def embedded_broker(tmp_path: Path) -> Iterator[embedded.EmbeddedBroker]:
    """The embedded development broker itself, for the tests of what `kconnect broker` and the demo run on."""
    with embedded.running(log_path=tmp_path / "tansu.log") as b:
        yield b
