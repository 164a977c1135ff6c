"""The tests' held-task workers: the executor that only holds tasks, and the launcher that injects it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kconnect.runtime.ids import TaskId
from tests.support.cluster import worker_command, worker_properties
from tests.support.held_executor import HeldTasks
from tests.support.held_worker import kconnect_shim, with_repo_on_path


def test_held_tasks_report_unassigned_or_paused_and_count_starts_and_stops() -> None:
    held = HeldTasks()
    a, b = TaskId("c", 0), TaskId("c", 1)
    assert held.start_task(a, {"k": "v"}, "STARTED").state == "UNASSIGNED"
    assert held.start_task(b, {}, "PAUSED").state == "PAUSED"
    assert held.transition_task(b, "STARTED").state == "UNASSIGNED"
    assert held.transition_task(a, "STOPPED").state == "PAUSED"
    assert held.held() == {a, b}
    held.stop_task(a, 1.0)
    held.stop_task(a, 1.0)  # not held any more: not counted again
    assert held.counters() == {"task_starts": 2, "task_stops": 1}
    held.close(1.0)
    assert held.held() == set()
    assert held.counters() == {"task_starts": 2, "task_stops": 2}
    assert held.task_figures() == {}


def _write(path: Path, props: dict[str, str]) -> Path:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


#: Runs the launcher with the worker's serving replaced by a report of what it would serve with.
_REPORT = (
    "import importlib, sys\n"
    "cli = importlib.import_module('kconnect.runtime.cli.main')\n"
    "cli.serve_worker = lambda config, rest=None, executor=None: print(\n"
    "    type(executor).__name__, config.group_id, config.rest_url) or 0\n"
    "from tests.support.held_worker import main\n"
    "sys.exit(main(sys.argv[1:]))\n"
)


def test_launcher_parses_the_properties_file_and_injects_held_tasks(tmp_path: Path) -> None:
    props = _write(tmp_path / "w.properties", worker_properties("127.0.0.1:1", "g-held", 18083))
    proc = subprocess.run(
        [sys.executable, "-c", _REPORT, str(props)],
        capture_output=True,
        text=True,
        timeout=120,
        env=with_repo_on_path(dict(os.environ)),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["HeldTasks", "g-held", "http://127.0.0.1:18083/"]


def test_launcher_reports_bad_properties_as_kconnect_worker_does(tmp_path: Path) -> None:
    props = worker_properties("127.0.0.1:1", "g-held", 18083)
    del props["group.id"]
    path = _write(tmp_path / "w.properties", props)
    proc = subprocess.run(
        worker_command(path),
        capture_output=True,
        text=True,
        timeout=120,
        env=with_repo_on_path(dict(os.environ)),
    )
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kconnect:")]
    assert proc.returncode == 2, proc.stderr
    assert len(errors) == 1 and "group.id" in errors[0], proc.stderr


def test_kconnect_shim_runs_held_workers_and_the_real_command_otherwise(tmp_path: Path) -> None:
    shim = kconnect_shim(tmp_path)
    props = worker_properties("127.0.0.1:1", "g-held", 18083)
    del props["group.id"]
    path = _write(tmp_path / "w.properties", props)
    worker = subprocess.run([str(shim), "worker", str(path)], capture_output=True, text=True, timeout=120)
    assert worker.returncode == 2 and "group.id" in worker.stderr, worker.stderr
    usage = subprocess.run([str(shim), "--help"], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 0 and "broker" in usage.stdout, usage.stderr
