"""``kconnect apply`` against a real kconnect worker whose FileStream tasks really run: create, unchanged,
update, dry run, prune and an invalid file, each checked through the REST API and the lines the
pipeline moves, with the exit statuses a script would see."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kconnect.runtime.cli.apply_plan import EXIT_CHANGED, EXIT_FAILED, EXIT_UNCHANGED
from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, wait_until, worker_properties

pytestmark = pytest.mark.integration


def apply(url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kconnect.runtime.cli.main", "apply", *argv, "--url", url],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def sink_yaml(topic: str, out: Path) -> str:
    return (
        f"name: lines-out\nconfig:\n  connector.class: FileStreamSink\n  topics: [{topic}]\n  file: {out}\n"
    )


def test_apply_creates_updates_leaves_alone_prunes_and_refuses_invalid_files(
    tmp_path: Path, broker: Broker
) -> None:
    group = f"apply-{uuid.uuid4().hex[:6]}"
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    source_in = tmp_path / "in.txt"
    source_in.write_text("one\ntwo\n")
    (secrets / "paths.properties").write_text(f"input={source_in}\n")
    props = worker_properties(
        broker.bootstrap,
        group,
        free_port(),
        **{
            "config.providers": "file",
            "config.providers.file.class": "org.apache.kafka.common.config.provider.FileConfigProvider",
            "config.providers.file.param.allowed.paths": str(secrets),
        },
    )
    worker = WorkerProcess(tmp_path, props, spark=True).start()
    desired = tmp_path / "connectors"
    desired.mkdir()
    out1, out2 = tmp_path / "out1.txt", tmp_path / "out2.txt"
    topic = f"{group}-lines"
    reference = f"${{file:{secrets / 'paths.properties'}:input}}"
    try:
        wait_until(stable_view([worker], 1), 120, "the worker to join")
        # A source (JSON; its file a config-provider reference), a sink (YAML), a second sink (.properties).
        (desired / "source.json").write_text(
            json.dumps(
                {
                    "name": "lines-in",
                    "config": {
                        "connector.class": "FileStreamSource",
                        "file": reference,
                        "topic": topic,
                        "tasks.max": 1,
                    },
                }
            )
        )
        (desired / "sink.yaml").write_text(sink_yaml(topic, out1))
        (desired / "copy.properties").write_text(
            f"name=lines-copy\nconnector.class=FileStreamSink\ntopics={topic}\nfile={out2}\n"
        )

        # A dry run on an empty cluster: the plan, exit 3, nothing created.
        dry = apply(worker.url, "-f", str(desired), "--dry-run")
        assert dry.returncode == EXIT_CHANGED, dry.stderr
        assert "+ lines-in: create" in dry.stdout and f"    + file = {reference}" in dry.stdout
        assert dry.stdout.splitlines()[-1] == (
            "apply: dry run, nothing changed: 3 to create, 0 to update, 0 unchanged, 0 to delete"
        )
        assert worker.get("/connectors").json() == []

        # Create: three connectors, whose tasks move the lines end to end.
        created = apply(worker.url, "-f", str(desired))
        assert created.returncode == EXIT_CHANGED, created.stderr
        assert created.stdout.splitlines()[-1] == "apply: 3 created, 0 updated, 0 unchanged, 0 deleted"
        wait_until(lambda: lines(out1) == ["one", "two"] and lines(out2) == ["one", "two"], 120, "the lines")
        # The reference is stored as written (GET .../config answers the unresolved config).
        assert worker.get("/connectors/lines-in/config").json()["file"] == reference

        # Unchanged: a second apply changes nothing and says so with exit 0.
        again = apply(worker.url, "-f", str(desired))
        assert again.returncode == EXIT_UNCHANGED, again.stdout + again.stderr
        assert again.stdout.splitlines()[-1] == "apply: 0 created, 0 updated, 3 unchanged, 0 deleted"

        # Update: the second sink writes elsewhere; only it changes, and its task writes the new file.
        out3 = tmp_path / "out3.txt"
        (desired / "copy.properties").write_text(
            f"name=lines-copy\nconnector.class=FileStreamSink\ntopics={topic}\nfile={out3}\n"
        )
        plan = apply(worker.url, "-f", str(desired), "--dry-run")
        assert plan.returncode == EXIT_CHANGED
        assert f"    ~ file: {out2} -> {out3}" in plan.stdout.splitlines()
        assert worker.get("/connectors/lines-copy/config").json()["file"] == str(out2)
        updated = apply(worker.url, "-f", str(desired))
        assert updated.returncode == EXIT_CHANGED, updated.stderr
        assert updated.stdout.splitlines()[-1] == "apply: 0 created, 1 updated, 2 unchanged, 0 deleted"
        assert worker.get("/connectors/lines-copy/config").json()["file"] == str(out3)
        # Its consumer group may have committed the first lines already: a new line shows the task at work.
        with source_in.open("a") as f:
            f.write("three\n")
        wait_until(lambda: "three" in lines(out3), 120, "the updated sink's lines")

        # Prune: without --prune a connector no file names is kept; with it, deleted.
        (desired / "copy.properties").unlink()
        kept = apply(worker.url, "-f", str(desired))
        assert kept.returncode == EXIT_UNCHANGED
        assert "? lines-copy: named by no file; kept (--prune deletes it)" in kept.stdout
        pruned = apply(worker.url, "-f", str(desired), "--prune")
        assert pruned.returncode == EXIT_CHANGED, pruned.stderr
        assert "- lines-copy: delete" in pruned.stdout
        assert sorted(worker.get("/connectors").json()) == ["lines-in", "lines-out"]

        # Invalid: a file the worker's validation refuses (tasks.max 0) and a file that is no JSON both fail
        # with exit 1 before anything is written, the valid change beside them included.
        (desired / "sink.yaml").write_text(sink_yaml(topic, out3))
        (desired / "bad.json").write_text(
            json.dumps({"name": "bad", "config": {"connector.class": "FileStreamSink", "tasks.max": "0"}})
        )
        invalid = apply(worker.url, "-f", str(desired))
        assert invalid.returncode == EXIT_FAILED
        assert "kconnect apply: bad (" in invalid.stderr and "tasks.max:" in invalid.stderr
        assert "nothing changed" in invalid.stderr
        assert sorted(worker.get("/connectors").json()) == ["lines-in", "lines-out"]
        assert worker.get("/connectors/lines-out/config").json()["file"] == str(out1)
        (desired / "bad.json").write_text("{not json")
        broken = apply(worker.url, "-f", str(desired))
        assert broken.returncode == EXIT_FAILED
        assert broken.stderr.startswith(f"kconnect apply: {desired / 'bad.json'}: not valid JSON")
        assert worker.get("/connectors/lines-out/config").json()["file"] == str(out1)

        # A bad command line is 2, as for every kconnect command.
        assert apply(worker.url, "--prune").returncode == 2
    finally:
        worker.stop()
