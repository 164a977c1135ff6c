"""KIP-891 live: two installed versions of one plugin, each selected by ``connector.plugin.version``.

The example plugin (``examples/kconnect-plugin-example``) is built twice with pip, offline: as itself
(0.2.0) and as a copy renamed 0.3.0 whose source writes ``{"seq": n, "edition": 3}`` instead of
``{"seq": n}``. Each goes into a directory of its own under one ``plugin.path`` entry, as ``pip install
--target`` leaves it (Java's plugin.path holds one directory per plugin too). A real worker on the
embedded broker lists both versions, answers each version's config, runs one connector per version,
with the records telling which code ran, and reports the running version in both statuses; a version
nobody installed is refused with the versions there are. Validation offers the installed versions, as
Apache Kafka Connect 4.x does, and a config written with the deprecated ``connector.version`` (the KIP's
text, which kconnect followed before 4.1 shipped ``connector.plugin.version``) still runs its version.
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

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "kconnect-plugin-example"
SEQUENCE = "kconnect_example_plugin.sequence.SequenceSourceConnector"
COUNT = 20


def build(workdir: Path, plugins: Path, version: str) -> None:
    """Install the example plugin at ``version`` into ``plugins/example-<version>``; other than 0.2.0 its
    records carry ``edition``, so a reader can tell which version wrote them."""
    source = workdir / f"src-{version}"
    shutil.copytree(EXAMPLE, source)
    if version != "0.2.0":
        project = source / "pyproject.toml"
        project.write_text(project.read_text().replace('version = "0.2.0"', f'version = "{version}"'))
        module = source / "src" / "kconnect_example_plugin" / "sequence.py"
        text = module.read_text()
        assert 'value={"seq": n}' in text
        module.write_text(text.replace('value={"seq": n}', 'value={"seq": n, "edition": 3}'))
    target = plugins / f"example-{version}"
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
    command += ["--no-build-isolation", "--no-deps", "--no-index", "--target", str(target), str(source)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=False)
    assert done.returncode == 0, done.stdout + done.stderr


def test_two_versions_of_one_plugin_run_side_by_side(tmp_path: Path, broker: Broker) -> None:
    plugins = tmp_path / "plugins"
    for version in ("0.2.0", "0.3.0"):
        build(tmp_path, plugins, version)
    group = f"pv-{uuid.uuid4().hex[:6]}"
    props = worker_properties(broker.bootstrap, group, free_port(), plugin_path=str(plugins))
    props["offset.flush.interval.ms"] = "1000"
    worker = WorkerProcess(tmp_path, props, name=f"{group}-w0", spark=True).start()
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 90, "the worker to join")
        assert worker.get("/connector-plugins/errors").json() == []
        listing = [p for p in worker.get("/connector-plugins").json() if p["class"] == SEQUENCE]
        assert listing == [
            {"class": SEQUENCE, "type": "source", "version": "0.2.0"},
            {"class": SEQUENCE, "type": "source", "version": "0.3.0"},
        ]
        # Each version's config; a version nobody installed is a 404 naming those there are.
        assert worker.get("/connector-plugins/SequenceSource/config?version=0.2.0").status_code == 200
        missing = worker.get("/connector-plugins/SequenceSource/config?version=[1.0,)")
        assert (
            missing.status_code == 404 and "available versions: [0.2.0, 0.3.0]" in missing.json()["message"]
        )
        assert worker.get("/connector-plugins/SequenceSource/config?version=[1.0").status_code == 400

        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        topics = {
            version: f"seq-{version.replace('.', '')}-{uuid.uuid4().hex[:6]}"
            for version in ("old", "new", "legacy")
        }
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()]).values():
            future.result(15)

        def config(topic: str, **extra: str) -> dict[str, str]:
            return {
                "connector.class": "SequenceSource",
                "topic": topic,
                "count": str(COUNT),
                "poll.interval.ms": "10",
                "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                "value.converter.schemas.enable": "false",
                **extra,
            }

        validated = worker.request(
            "PUT", "/connector-plugins/SequenceSource/config/validate", json=config("t")
        )
        entry = next(
            c for c in validated.json()["configs"] if c["definition"]["name"] == "connector.plugin.version"
        )
        assert entry["definition"]["default_value"] == "0.3.0"
        assert (entry["value"]["value"], entry["value"]["recommended_values"]) == (
            "0.3.0",
            ["0.2.0", "0.3.0"],
        )

        refused = worker.request(
            "POST",
            "/connectors",
            json={"name": "seq-none", "config": config("t", **{"connector.plugin.version": "0.9"})},
        )
        assert refused.status_code == 400, refused.text
        assert (
            f"Plugin {SEQUENCE} not found that matches the version range [0.9,0.9], "
            "available versions: [0.2.0, 0.3.0]" in refused.json()["message"]
        )

        old = config(topics["old"], **{"connector.plugin.version": "0.2.0"})
        assert (
            worker.request("POST", "/connectors", json={"name": "seq-old", "config": old}).status_code == 201
        )
        new = config(topics["new"])  # no version: the newest
        assert (
            worker.request("POST", "/connectors", json={"name": "seq-new", "config": new}).status_code == 201
        )

        legacy = config(topics["legacy"], **{"connector.version": "0.2.0"})  # the deprecated name
        assert (
            worker.request("POST", "/connectors", json={"name": "seq-legacy", "config": legacy}).status_code
            == 201
        )

        assert read_json_values(broker.bootstrap, topics["old"], COUNT) == [{"seq": n} for n in range(COUNT)]
        assert read_json_values(broker.bootstrap, topics["legacy"], COUNT) == [
            {"seq": n} for n in range(COUNT)
        ]
        assert read_json_values(broker.bootstrap, topics["new"], COUNT) == [
            {"seq": n, "edition": 3} for n in range(COUNT)
        ]

        def versions(name: str) -> Any:
            status = worker.get(f"/connectors/{name}/status").json()
            tasks = status.get("tasks") or []
            found = [status["connector"].get("version")] + [t.get("version") for t in tasks]
            return len(found) == 2 and found

        assert wait_until(lambda: versions("seq-old"), 30, "seq-old's versions") == ["0.2.0", "0.2.0"]
        assert wait_until(lambda: versions("seq-new"), 30, "seq-new's versions") == ["0.3.0", "0.3.0"]
        assert wait_until(lambda: versions("seq-legacy"), 30, "seq-legacy's versions") == ["0.2.0", "0.2.0"]
        assert worker.alive()
    finally:
        worker.stop(60)
