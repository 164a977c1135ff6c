"""Shared fixtures: every integration test gets a real broker that the test run starts itself."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kconnect.runtime import broker as embedded


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
