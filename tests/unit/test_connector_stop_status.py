"""A stopped connector's UNASSIGNED goes through Java's putSafe guard: a connector that moved may already be
RUNNING on its new owner under a newer generation, and the old owner's late report must not replace that."""

from __future__ import annotations

import threading
from typing import Any, cast

import pytest

from kconnect.runtime.plugins.api import SourceConnector, Task
from kconnect.runtime.plugins.config_def import ConfigDef
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.connectors import Connectors
from kconnect.runtime.storage.config_log import TargetState
from kconnect.runtime.storage.status_log import ConnectorStatus, State
from tests.support.connector_stores import FoldedStores


class QuietSource(SourceConnector):
    def version(self) -> str:
        return "1"

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: dict[str, str]) -> None:
        pass

    def stop(self) -> None:
        pass

    def task_class(self) -> type[Task]:
        return Task

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]


def _connectors(stores: FoldedStores) -> Connectors:
    plugins = PluginRegistry()
    plugins.register(QuietSource)
    return Connectors(
        plugins,
        cast(Any, stores),
        cast(Any, None),
        "w1",
        "http://w1",
        generation=lambda: 3,
        request_reconfigure=lambda name: None,
        stopping=threading.Event(),
        post=lambda event: None,
    )


@pytest.mark.parametrize(
    ("standing", "written"),
    [
        (None, True),  # no status yet
        (ConnectorStatus("src", State.RUNNING, None, "w2", 4), False),  # moved, newer generation: stands
        (ConnectorStatus("src", State.RUNNING, None, "w2", 3), True),  # same generation: Java writes
        (ConnectorStatus("src", State.RUNNING, None, "w1", 9), True),  # our own report: ours to replace
    ],
)
def test_a_stopped_connectors_unassigned_respects_a_newer_generation_of_another_worker(
    standing: ConnectorStatus | None, written: bool
) -> None:
    stores = FoldedStores()
    connectors = _connectors(stores)
    connectors.start("src", {"connector.class": "QuietSource"}, TargetState.STARTED, 3, attempt=1)
    if standing is not None:
        stores.fold.add(standing)
    before = len(stores.written)
    connectors.stop("src", 3)
    unassigned = [s for s in stores.written[before:] if s.state is State.UNASSIGNED]
    assert bool(unassigned) is written
    if written:
        assert unassigned[0].worker_id == "w1" and unassigned[0].generation == 3
