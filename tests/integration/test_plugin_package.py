"""Plugins installed as packages of their own, found through the ``kconnect.plugins`` entry point.

The test builds the two distributions under ``examples/`` with pip, offline, into a throwaway target
directory (never the project's venv), and starts a real worker with that directory on its
``PYTHONPATH``, which is all ``importlib.metadata`` needs to see their entry points. The example plugin
must be listed by ``GET /connector-plugins`` with its class, type and version, and its source connector
must run and write its records; the broken one (its module raises on import) must be reported, in the
worker's log and in ``GET /connector-plugins/errors``, be absent from the list as in Java, and change
nothing else.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, read_json_values, wait_until, worker_properties

pytestmark = pytest.mark.integration

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
SEQUENCE = "kconnect_example_plugin.sequence.SequenceSourceConnector"
JSON_LINES = "kconnect_example_plugin.jsonlines.JsonLinesSinkConnector"
COUNT = 50


def install(packages: list[str], workdir: Path) -> Path:
    """``pip install`` the example packages into ``workdir/site``, offline and without dependencies.

    Each is copied first: setuptools builds in the source tree, which must stay clean.
    """
    target = workdir / "site"
    sources = []
    for name in packages:
        copy = workdir / "src" / name
        shutil.copytree(EXAMPLES / name, copy)
        sources.append(str(copy))
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-build-isolation", "--no-deps", "--no-index", "--target", str(target), *sources]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return target


def test_plugin_package_is_listed_and_runs_and_a_broken_one_is_reported(
    tmp_path: Path, broker: Broker, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = install(["kconnect-plugin-example", "kconnect-plugin-broken"], tmp_path)
    assert (site / "kconnect_plugin_example-0.2.0.dist-info").is_dir()
    # The worker process inherits the environment: the plugins are on its path, not on the tests'.
    monkeypatch.setenv("PYTHONPATH", str(site))
    group = f"pp-{uuid.uuid4().hex[:6]}"
    props = worker_properties(broker.bootstrap, group, free_port())
    props["offset.flush.interval.ms"] = "1000"
    worker = WorkerProcess(tmp_path, props, name=f"{group}-w0", spark=True).start()
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 90, "the worker to join")

        listing = worker.get("/connector-plugins").json()
        assert {"class": SEQUENCE, "type": "source", "version": "0.2.0"} in listing
        assert {"class": JSON_LINES, "type": "sink", "version": "0.2.0"} in listing
        # The broken plugin is absent, as Java leaves out plugins it cannot load; the others are there.
        assert not [p for p in listing if "broken" in p["class"].lower()]
        assert any(p["class"].endswith("FileStreamSourceConnector") for p in listing)

        # Reported: over REST (kconnect's own endpoint) and in the worker's log, naming the entry point
        # and the error.
        errors = [e["error"] for e in worker.get("/connector-plugins/errors").json()]
        assert [e for e in errors if "BrokenConnector" in e and "fails on import on purpose" in e], errors
        log = worker.log_text()
        warnings = [line for line in log.splitlines() if "BrokenConnector" in line and "warning" in line]
        assert warnings and "fails on import on purpose" in warnings[0], log[-3000:]

        # The plugin's own config definition, by alias as Java resolves connector names.
        keys = [k["name"] for k in worker.get("/connector-plugins/SequenceSource/config").json()]
        assert keys[:4] == ["topic", "count", "batch.size", "poll.interval.ms"], keys
        resp = worker.request(
            "PUT",
            "/connector-plugins/SequenceSource/config/validate",
            json={"name": "seq", "connector.class": "SequenceSource", "topic": "t", "count": "-5"},
        )
        assert resp.status_code == 200 and resp.json()["error_count"] == 1, resp.text
        [count] = [c["value"] for c in resp.json()["configs"] if c["value"]["name"] == "count"]
        assert count["errors"] == ["Invalid value -5 for configuration count: Value must be at least -1"]

        # It runs: its task writes the sequence to the topic.
        topic = f"seq-{uuid.uuid4().hex[:6]}"
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(15)  # the test broker does not create topics on first produce
        config = {
            "connector.class": "SequenceSource",
            "topic": topic,
            "count": str(COUNT),
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "false",
        }
        resp = worker.request("POST", "/connectors", json={"name": "seq", "config": config})
        assert resp.status_code == 201, resp.text
        values = read_json_values(broker.bootstrap, topic, COUNT)
        assert values == [{"seq": n} for n in range(COUNT)]
        status = worker.get("/connectors/seq/status").json()
        assert status["type"] == "source" and [t["state"] for t in status["tasks"]] == ["RUNNING"], status

        # The committed source offset is the plugin's own: the next number to write.
        def offset() -> Any:
            offsets = worker.get("/connectors/seq/offsets").json().get("offsets") or []
            return offsets and offsets[0]["offset"] == {"next": COUNT} and offsets

        [entry] = wait_until(offset, 30, "the source offset after the last record")
        assert entry["partition"] == {"sequence": "seq"}
        assert worker.alive()
    finally:
        worker.stop(60)
