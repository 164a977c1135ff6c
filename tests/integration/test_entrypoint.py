"""The image's entrypoint, outside a container: same script, same properties handling, real broker.

deploy/docker-entrypoint.sh is started the way the image starts it (KCONNECT_PROPERTIES names a file
whose values come from ``${env:...}`` references), joins a second, ordinary worker holding a connector's
tasks, and is stopped with SIGTERM as ``docker stop`` or the kubelet would: it must exit 0 after handing
its tasks over, and the other worker must hold them all at once, with no scheduled delay.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from kconnect.runtime.cli.broker import free_port
from tests.integration.test_cooperative import _holdings
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, wait_nudging, wait_until, worker_properties
from tests.support.held_worker import kconnect_shim

pytestmark = pytest.mark.integration

ENTRYPOINT = Path(__file__).resolve().parents[2] / "deploy" / "docker-entrypoint.sh"
TASKS = 6
DELAY_MS = 60000  # an unclean leave would leave the tasks unassigned this long
SINK = {
    "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
    "topics": "entrypoint-in",
    "tasks.max": str(TASKS),
}
#: Values the properties file takes from the environment, as the deployments do.
FROM_ENV = {
    "bootstrap.servers": "KC_BOOTSTRAP",
    "group.id": "KC_GROUP",
    "listeners": "KC_LISTENERS",
    "rest.advertised.host.name": "KC_ADVERTISED_HOST",
}


class EntrypointWorker(WorkerProcess):
    """A worker started through deploy/docker-entrypoint.sh, with ${env:...} references in its file."""

    def start(self) -> EntrypointWorker:
        env = {k: v for k, v in os.environ.items() if not k.startswith("KCONNECT_")}
        lines = []
        for key, value in self.props.items():
            if key in FROM_ENV:
                env[FROM_ENV[key]] = value
                value = f"${{env:{FROM_ENV[key]}}}"
            lines.append(f"{key}={value}\n")
        self.props_path.write_text("".join(lines))
        # `kconnect` of this checkout, as the image has it on PATH; its worker holds its tasks, like the
        # other worker's (tests/support/held_worker.py).
        shim = kconnect_shim(self.workdir).parent
        env.update(
            PATH=f"{shim}{os.pathsep}{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}",
            KCONNECT_PROPERTIES=str(self.props_path),
            KCONNECT_LOG_LEVEL="INFO",
        )
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.proc = subprocess.Popen([str(ENTRYPOINT)], stdout=log, stderr=subprocess.STDOUT, env=env)
        return self


def _balanced(workers: list[WorkerProcess]) -> dict[str, dict[str, Any]] | None:
    """One generation, no delay running, every task held exactly once, and every worker holding some."""
    h = _holdings(workers)
    if h is None or len({v["generation"] for v in h.values()}) != 1:
        return None
    held = [t for v in h.values() for t in v["tasks"]]
    if sorted(held) != sorted(f"sink-{i}" for i in range(TASKS)):
        return None
    if any(v["delay"] or not v["tasks"] for v in h.values()):
        return None
    return h


def test_entrypoint_worker_joins_and_hands_its_tasks_over_on_sigterm(tmp_path: Path, broker: Broker) -> None:
    group = f"g-entrypoint-{os.getpid()}"
    extra = {"scheduled_rebalance_max_delay_ms": DELAY_MS, "connect_protocol": "sessioned"}
    other_props = worker_properties(broker.bootstrap, group, free_port(), **extra)
    ep_props = worker_properties(broker.bootstrap, group, free_port(), **extra)
    ep_props["rest.advertised.host.name"] = "127.0.0.1"
    entry = EntrypointWorker(tmp_path, ep_props, name="entrypoint")
    other = WorkerProcess(tmp_path, other_props, name="other")
    workers: list[WorkerProcess] = [entry.start(), other.start()]
    try:
        assert "${env:KC_BOOTSTRAP}" in entry.props_path.read_text()
        wait_until(stable_view(workers, 2), 90, "the entrypoint's worker and another in one group")

        def created() -> int | None:
            resp = other.request("POST", "/connectors", json={"name": "sink", "config": SINK})
            return resp.status_code if resp.status_code != 409 else None

        assert wait_until(created, 60, "the sink connector created") == 201

        def nudge() -> None:  # the test broker's unchanged-metadata rejoins (tests/support/cluster.py)
            other.request("PUT", "/connectors/sink/config", json=SINK)

        before = wait_nudging(lambda: _balanced(workers), nudge, 120, f"{TASKS} tasks over both workers")
        assert entry.alive(), "the entrypoint exec'd the worker, which keeps running"
        handed = before[entry.url]["tasks"]
        assert handed

        stopping_at = time.monotonic()
        assert entry.stop(timeout=60) == 0, entry.log_text()[-3000:]
        log = entry.log_text()
        assert "work handed over" in log, log[-3000:]

        def all_on_other() -> dict[str, dict[str, Any]] | None:
            h = _holdings([other])
            if h is None:
                return None
            mine = h[other.url]
            full = mine["tasks"] == {f"sink-{i}" for i in range(TASKS)} and mine["connectors"] == {"sink"}
            return h if full and mine["delay"] == 0 else None

        after = wait_nudging(all_on_other, nudge, 60, "the other worker holding every task")
        elapsed = time.monotonic() - stopping_at
        assert elapsed < DELAY_MS / 1000, f"the tasks moved after {elapsed:.1f} s: they waited for the delay"
        assert after[other.url]["stops"] == before[other.url]["stops"], "the staying worker stopped nothing"
        # The hand-over finished while the leaving worker was still a member; its LeaveGroup then
        # starts one more (cheap) generation, after which it is gone from the group.
        wait_until(
            lambda: (v := other.workers()) is not None and len(v["members"]) == 1,
            30,
            "the entrypoint's worker gone from the group",
        )
    finally:
        for w in workers:
            if w.alive():
                w.stop()
