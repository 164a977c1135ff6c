"""``connector.client.config.override.policy=Allowlist`` (KIP-1188) on a live worker: validation names a
refused override on its key and a create or update carrying one is refused with Java's message, while an
allowed one is accepted. No task runs here: the policy refuses a config before any task exists, and what an
accepted override does to a task's clients is the data-plane tests' subject.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.apache_kafka import Broker
from tests.support.cluster import stable_view, start_cluster, wait_until

pytestmark = pytest.mark.integration

REFUSED = "The 'Allowlist' policy does not allow 'acks' to be overridden in the connector configuration."


def test_the_allowlist_policy_refuses_what_it_does_not_list(tmp_path: Path, broker: Broker) -> None:
    [worker] = start_cluster(
        tmp_path,
        broker.bootstrap,
        1,
        connector_client_config_override_policy="Allowlist",
        connector_client_config_override_allowlist="linger.ms,batch.size",
    )
    try:
        wait_until(stable_view([worker], 1), 60, "the worker in its group")
        config = {
            "connector.class": "FileStreamSource",
            "file": str(tmp_path / "in.txt"),
            "topic": "policy-t",
            "producer.override.linger.ms": "5",
        }
        resp = worker.request(
            "PUT",
            "/connector-plugins/FileStreamSource/config/validate",
            json={**config, "name": "p", "producer.override.acks": "all"},
        )
        assert resp.status_code == 200
        body = resp.json()
        assert body["error_count"] == 1
        errors = {c["value"]["name"]: c["value"]["errors"] for c in body["configs"] if c["value"]["errors"]}
        assert errors == {"producer.override.acks": [REFUSED]}

        refused = worker.request(
            "POST", "/connectors", json={"name": "p", "config": {**config, "producer.override.acks": "all"}}
        )
        assert refused.status_code == 400 and REFUSED in refused.json()["message"], refused.text
        assert worker.get("/connectors").json() == []

        created = worker.request("POST", "/connectors", json={"name": "p", "config": config})
        assert created.status_code == 201, created.text
        update = worker.request("PUT", "/connectors/p/config", json={**config, "producer.override.acks": "1"})
        assert update.status_code == 400 and REFUSED in update.json()["message"], update.text
        assert worker.get("/connectors/p/config").json().get("producer.override.acks") is None

        # Creating checks what validating checks: a sink may not consume as the workers' own group.
        group = worker.props["group.id"]
        sink = {"connector.class": "FileStreamSink", "topics": "t", "consumer.override.group.id": group}
        clash = worker.request("POST", "/connectors", json={"name": "s", "config": sink})
        assert clash.status_code == 400, clash.text
        conflict = f"Consumer group {group} conflicts with Connect worker group {group}"
        assert conflict in clash.json()["message"]
    finally:
        worker.stop()
