"""Shared fixtures: every integration test gets a real broker that the test run starts itself.

That broker is Apache Kafka (a one-node KRaft cluster from Maven Central's jars,
`tests/support/apache_kafka.py`) unless ``KCONNECT_TEST_BROKER=embedded`` asks for the embedded
development broker (Tansu), which stays the default of `kconnect broker` and `make demo` and keeps a
smoke test of its own (`tests/integration/test_embedded_broker.py`).
"""

from __future__ import annotations

import os
import re
from collections.abc import Generator, Iterator
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


#: A skip whose reason names one of these needs Java: the reference worker, a JDK, Spark standalone's JVMs.
JAVA_REASON = re.compile(r"\b(java|javac|jdk|jvm|reference)\b", re.IGNORECASE)


def on_ci() -> bool:
    """CI sets ``CI`` (GitHub Actions: ``CI=true``); empty, 0, false and no count as unset."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    """Under CI a Java-dependent test that skips fails instead: CI has Java and the reference worker,
    so such a skip means a broken setup, and a green run would hide that the comparison never ran.
    Java-dependent: marked ``interop``, or skipped for a reason naming Java or the reference worker."""
    report = yield
    if not report.skipped or hasattr(report, "wasxfail") or not on_ci():
        return report
    longrepr = report.longrepr
    reason = str(longrepr[2]) if isinstance(longrepr, tuple) else str(longrepr)
    if item.get_closest_marker("interop") is None and not JAVA_REASON.search(reason):
        return report
    report.outcome = "failed"
    report.longrepr = f"a Java-dependent test skipped under CI (CI={os.environ['CI']!r}): {reason}"
    return report


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
