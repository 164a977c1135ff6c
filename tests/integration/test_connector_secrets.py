"""Issue 23 rows 2 and 6 on live workers: a connector config's ``${file:...}`` reference reaches the task
resolved, and nowhere else (config topic, REST, the worker's log); a path outside ``allowed.paths`` is
refused; a worker that did not enable the FileStream connectors neither lists nor creates them."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer

from tests.support.apache_kafka import Broker
from tests.support.cluster import read_json_values, stable_view, start_cluster, wait_until

pytestmark = pytest.mark.integration

FILE_PROVIDER = "org.apache.kafka.common.config.provider.FileConfigProvider"
LINES = 5


def _config_topic_text(bootstrap: str, topic: str, until: str, timeout: float = 60) -> str:
    """Every key and value of the config topic as text, read until ``until`` appears in it."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"cfg-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    seen: list[str] = []
    try:
        consumer.subscribe([topic])

        def has_it() -> bool:
            for message in consumer.consume(num_messages=100, timeout=0.5):
                if message.error() is None:
                    seen.append((message.key() or b"").decode() + " " + (message.value() or b"").decode())
            return until in "\n".join(seen)

        wait_until(has_it, timeout, f"{until} in the config topic", interval=0)
    finally:
        consumer.close()
    return "\n".join(seen)


def test_a_referenced_secret_reaches_the_task_and_nothing_else(tmp_path: Path, broker: Broker) -> None:
    token = uuid.uuid4().hex  # in the source file's name: the task reading that file proves resolution
    password = f"pw-{uuid.uuid4().hex}"  # a credential: nowhere but in the connector instance
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    source = tmp_path / f"in-{token}.txt"
    source.write_text("".join(f"line {n}\n" for n in range(LINES)))
    (secrets / "src.properties").write_text(f"path={source}\npassword={password}\n")
    (tmp_path / "outside.properties").write_text(f"password=outside-{token}\n")
    [worker] = start_cluster(
        tmp_path,
        broker.bootstrap,
        1,
        spark=True,
        spark_master="local[1]",
        spark_ui_enabled="false",
        offset_flush_interval_ms="1000",
        config_providers="file",
        config_providers_file_class=FILE_PROVIDER,
        config_providers_file_param_allowed_paths=str(secrets),
    )
    topic = f"secrets-{token[:8]}"
    path_ref = f"${{file:{secrets}/src.properties:path}}"
    config = {
        "connector.class": "FileStreamSource",
        "file": path_ref,
        "topic": topic,
        "connection.password": f"${{file:{secrets}/src.properties:password}}",
    }
    try:
        wait_until(stable_view([worker], 1), 120, "the worker in its group")
        outside = {**config, "connection.password": f"${{file:{tmp_path}/outside.properties:password}}"}
        refused = worker.request("POST", "/connectors", json={"name": "out", "config": outside})
        assert refused.status_code == 400, refused.text
        assert "is not allowed: it must lie under allowed.paths" in refused.json()["message"]
        assert "outside-" not in refused.text

        created = worker.request("POST", "/connectors", json={"name": "src", "config": config})
        assert created.status_code == 201, created.text
        # The task read the file the reference names: it got the resolved value.
        records = read_json_values(broker.bootstrap, topic, LINES, timeout=180)
        assert "line 0" in str(records[0])

        shown = worker.get("/connectors/src/config").json()
        assert shown["file"] == path_ref
        tasks = worker.get("/connectors/src/tasks").json()
        assert tasks and tasks[0]["config"]["file"] == path_ref
        stored = _config_topic_text(broker.bootstrap, worker.props["config.storage.topic"], "task-")
        assert path_ref in stored
        for where, text in {
            "GET config": str(shown),
            "GET tasks": str(tasks),
            "the config topic": stored,
        }.items():
            assert token not in text, f"the resolved path is in {where}"
            assert password not in text, f"the password is in {where}"
        # The FileStream source itself logs the file it reads, as Java's does; the password is nowhere.
        assert password not in worker.log_text()
    finally:
        worker.stop()


def test_a_worker_without_file_connectors_enabled_offers_none(tmp_path: Path, broker: Broker) -> None:
    [worker] = start_cluster(tmp_path, broker.bootstrap, 1, file_connectors_enable="false")
    try:
        wait_until(stable_view([worker], 1), 60, "the worker in its group")
        listed = [p["class"] for p in worker.get("/connector-plugins").json()]
        assert listed and not any("FileStream" in name for name in listed)
        for name in ("FileStreamSource", "org.apache.kafka.connect.file.FileStreamSinkConnector"):
            config = {"connector.class": name, "file": "/etc/passwd", "topic": "t", "topics": "t"}
            resp = worker.request("POST", "/connectors", json={"name": "f", "config": config})
            assert resp.status_code == 400, resp.text
            assert "set file.connectors.enable=true" in resp.json()["message"]
        assert worker.get("/connectors").json() == []
    finally:
        worker.stop()
