"""``kconnect connectors`` against a real kconnect worker, as a user would run it."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, wait_until, worker_properties

pytestmark = pytest.mark.integration


def kc(url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kconnect.runtime.cli.main", "connectors", *argv, "--url", url],
        capture_output=True, text=True, timeout=90,
    )  # fmt: skip


def test_client_drives_a_worker(tmp_path: Path, broker: Broker) -> None:
    group = f"cli-{uuid.uuid4().hex[:6]}"
    worker = WorkerProcess(tmp_path, worker_properties(broker.bootstrap, group, free_port())).start()
    try:
        wait_until(stable_view([worker], 1), 90, "the worker to join")
        (tmp_path / "in.txt").write_text("a\nb\n")
        props = tmp_path / "lines.properties"
        props.write_text(
            f"name=lines\nconnector.class=FileStreamSource\nfile={tmp_path / 'in.txt'}\ntopic={group}-lines\n"
        )
        created = kc(worker.url, "create", str(props))
        assert created.returncode == 0, created.stderr
        assert created.stdout.startswith("lines (source)")

        listed = wait_until(
            lambda: "lines  source  RUNNING" in (r := kc(worker.url, "list")).stdout and r,
            60,
            "a running connector",
        )
        assert listed.stdout.splitlines()[0].split() == ["NAME", "TYPE", "STATE", "TASKS", "RUNNING"]
        assert listed.stdout.splitlines()[1].split()[:3] == ["lines", "source", "RUNNING"]

        got = json.loads(kc(worker.url, "get", "lines", "--json").stdout)
        assert got["config"]["topic"] == f"{group}-lines" and got["type"] == "source"
        status = kc(worker.url, "status", "lines")
        assert status.returncode == 0 and "connector  RUNNING" in status.stdout

        again = kc(worker.url, "create", str(props))
        assert again.returncode == 1 and "already exists (HTTP 409)" in again.stderr
        assert kc(worker.url, "delete", "lines").stdout == "deleted lines (HTTP 204)\n"
        missing = kc(worker.url, "get", "lines")
        assert (missing.returncode, missing.stderr) == (1, "kconnect: Connector lines not found (HTTP 404)\n")
    finally:
        worker.stop()
