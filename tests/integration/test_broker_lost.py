"""A worker whose only broker is gone must wait, not spin (issue 23, row 8).

A real ``kconnect worker`` (the product's command; no connectors, so no JVM of its own) joins a group on a
one-node Apache Kafka of the test's own. The node is SIGKILLed; over the next 30 s the worker's process
tree (the worker and any children) may use under 5 % of one core: the group member backs off
exponentially up to ``retry.backoff.max.ms`` while no coordinator answers, and the internal topics'
Kafka clients reconnect with ``reconnect.backoff.max.ms``. The node is then restarted and the worker must
be a member of its group again, as the coordinator sees it (with no coordinator for longer than
heartbeat.interval.ms it stops its work, as Java's worker does, keeps its generation, and rejoins when a
coordinator is back).

This is the one test that asserts a resource figure over a window, as the issue asks. It prints a
``BROKER-LOST-FIGURES`` line with the measured share of a core.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import KafkaCluster, broker_kind
from tests.support.cluster import WorkerProcess, stable_view, wait_until, worker_properties
from tests.support.processes import descendants, tree_cpu_seconds

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

WINDOW_S = 30.0
#: Longer than the workers' session (tests/support/cluster.py): a member the coordinator dropped hears so
#: from its next heartbeat within it.
SETTLE_S = 12.0
MAX_CORE_SHARE = 0.05


def test_worker_waits_quietly_while_its_broker_is_gone_and_rejoins(tmp_path: Path) -> None:
    if broker_kind() != "kafka":
        pytest.skip("needs a broker the test can kill and restart with its data (Apache Kafka)")
    with KafkaCluster(tmp_path / "kafka", size=1) as kafka:
        group = f"lost-{uuid.uuid4().hex[:8]}"
        props = worker_properties(kafka.bootstrap, group, free_port())
        worker = WorkerProcess(tmp_path, props, name=f"{group}-w0", spark=True).start()
        try:
            first = wait_until(stable_view([worker], 1), 120, "the worker in its group")
            assert worker.proc is not None
            pid = worker.proc.pid

            kafka.kill(1)
            time.sleep(5)  # past the first reactions (failed requests, the member noticing)
            # The tree's CPU as the benches count it: reaped children's time included, so a child that
            # ends in the window still counts, and once.
            before, started = tree_cpu_seconds(pid), time.monotonic()
            time.sleep(WINDOW_S)
            used, elapsed = tree_cpu_seconds(pid) - before, time.monotonic() - started
            pids = [pid, *descendants(pid)]
            share = used / elapsed
            print(
                f"\nBROKER-LOST-FIGURES cpu_s={used:.2f} window_s={elapsed:.1f} "
                f"core_share={share:.3f} processes={len(pids)}"
            )
            assert worker.alive(), worker.log_text()[-3000:]
            assert share < MAX_CORE_SHARE, f"{share:.1%} of a core with the broker gone"

            kafka.restart(1)
            # Back in its group. As Java's member, the worker kept its generation while no coordinator
            # answered; the restarted node loads the group and either takes its heartbeats again (the same
            # generation) or answers the first one that it has dropped the member (then a new generation).
            # A view that holds over a whole session of heartbeats is one the coordinator agrees with.

            def settled() -> dict[str, Any] | None:
                before = stable_view([worker], 1)()
                if before is None:
                    return None
                time.sleep(SETTLE_S)
                after = stable_view([worker], 1)()
                same = after is not None and (after["generation"], after["leader"]) == (
                    before["generation"],
                    before["leader"],
                )
                return after if same else None

            view = wait_until(settled, 180, "the worker back in its group", 1.0)
            assert view["generation"] >= first["generation"], (first, view)
        finally:
            if worker.alive():
                worker.stop(60)
