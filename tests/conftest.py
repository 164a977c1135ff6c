"""Shared fixtures: every integration test gets a real broker that the test run starts itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from kconnect.runtime.cli import broker as embedded

# Property tests check results, not speed: hypothesis' default 200 ms deadline per example and its
# too-slow health check fail on a shared 2-core CI machine whose other pytest process is starting a JVM
# (seen twice while integration runs shared the cores), and a deadline is a timed assertion, which this
# project's tests do not make. Tests that set their own settings still inherit this.
settings.register_profile("kconnect", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("kconnect")


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[embedded.EmbeddedBroker]:
    """One Tansu broker for the whole session; tests isolate themselves by topic and group names."""
    log = Path(tmp_path_factory.mktemp("broker")) / "tansu.log"
    with embedded.running(log_path=log) as b:
        yield b


@pytest.fixture
def fresh_broker(tmp_path: Path) -> Iterator[embedded.EmbeddedBroker]:
    """A broker of the test's own, for tests that must not see other tests' groups."""
    with embedded.running(log_path=tmp_path / "tansu.log") as b:
        yield b
