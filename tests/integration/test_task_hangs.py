"""No task holds the cluster hostage (issue 24 item 2): sink tasks stuck in ``start``, ``put``, ``flush`` and
``stop``, on the product's own worker (``spark=True``), with real records through a real topic.

One worker serves every case (a Spark worker takes seconds to start): a FileStream source feeds a topic,
and a sink connector per method reads it with a task from a loose module in ``plugin.path`` that blocks in
that one method until the module's teardown releases it. Past ``task.method.timeout.ms`` the task is FAILED
with a trace naming the method and the plugin frame it is stuck in; ``/health`` stays 200 and lists the
call; meanwhile another sink connector is created, writes the topic's lines, and is deleted; and the stuck
connector itself can be deleted.

A task whose ``stop()`` hangs is not FAILED (it is being stopped: a restart's new instance or a deleted
task has nothing left to report the old instance's failure on); what matters there is that its restart
and its delete go through, the herder goes on (a connector created next runs) and each abandoned
``stop()`` is listed as blocked. (A pause calls no ``stop()``: a paused task keeps its plugin task.)

The sink runner may run a task as a Structured Streaming query or as a consumer loop on a thread of its own:
nothing here depends on which (``flush`` is reached through ``pre_commit`` either way).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.integration.test_plugin_hangs import blocked_calls, status
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties

pytestmark = pytest.mark.integration

#: ``task.method.timeout.ms`` of the worker: short for a test, long for a normal call on a busy machine.
TASK_BOUND_MS = 4000
LINES = 20

TASK_HANG_PLUGINS = '''
import os
import time

from kconnect.runtime.plugins.api import SinkConnector, SinkTask
from kconnect.runtime.plugins.config_def import ConfigDef


def blocked_until_released(props):
    """Effectively forever: until the test's teardown creates the release file."""
    while not os.path.exists(props["release.file"]):
        time.sleep(0.05)


class HangingSinkTask(SinkTask):
    """Blocks in the one method ``hang.method`` names; ``put`` notes how many records it was given."""

    def version(self):
        return "1"

    def start(self, props):
        self.props = dict(props)
        if self.props["hang.method"] == "start":
            blocked_until_released(self.props)

    def put(self, records):
        with open(self.props["seen.file"], "a") as seen:
            seen.write(f"{len(records)}\\n")
        if self.props["hang.method"] == "put":
            blocked_until_released(self.props)

    def flush(self, current_offsets):
        if self.props["hang.method"] == "flush":
            blocked_until_released(self.props)

    def stop(self):
        if self.props["hang.method"] == "stop":
            blocked_until_released(self.props)


class HangingSink(SinkConnector):
    def version(self):
        return "1"

    def config_def(self):
        return ConfigDef()

    def start(self, props):
        self.props = dict(props)

    def task_class(self):
        return HangingSinkTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass
'''

METHODS = ("start", "put", "flush", "stop")


@dataclass
class HangWorker:
    worker: WorkerProcess
    workdir: Path
    topic: str
    release: Path

    def hung(self, method: str) -> str:
        return f"sink-hangs-in-{method}"

    def seen(self, method: str) -> int:
        path = self.workdir / f"seen-{method}.txt"
        return sum(int(n) for n in path.read_text().split()) if path.exists() else 0

    def create(self, name: str, config: dict[str, str]) -> None:
        resp = self.worker.request("POST", "/connectors", json={"name": name, "config": config})
        assert resp.status_code == 201, resp.text

    def task(self, name: str) -> dict[str, Any]:
        s = status(self.worker, name)
        return s["tasks"][0] if s and s["tasks"] else {}


@pytest.fixture(scope="module")
def hangs(tmp_path_factory: pytest.TempPathFactory, broker: Broker) -> Iterator[HangWorker]:
    workdir = tmp_path_factory.mktemp("task-hangs")
    plugins = workdir / "plugins"
    plugins.mkdir()
    (plugins / "task_hang_plugins.py").write_text(TASK_HANG_PLUGINS)
    topic = f"hang-lines-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)
    props = worker_properties(
        broker.bootstrap,
        f"hangtasks-{uuid.uuid4().hex[:6]}",
        free_port(),
        plugin_path=str(plugins),
        task_method_timeout_ms=str(TASK_BOUND_MS),
    )
    props.update(
        {"spark.master": "local[2]", "spark.ui.enabled": "false", "offset.flush.interval.ms": "1000"}
    )
    worker = WorkerProcess(workdir, props, name="hangtasks-w0", spark=True).start()
    h = HangWorker(worker, workdir, topic, workdir / "release")
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        source = workdir / "lines.txt"
        source.write_text("".join(f"line {n}\n" for n in range(LINES)))
        h.create(
            "lines",
            {"connector.class": "FileStreamSource", "file": str(source), "topic": topic, "tasks.max": "1"},
        )
        # Every hanging sink at once: their bounds run out together, so the cases cost one bound in all.
        for method in METHODS:
            h.create(
                h.hung(method),
                {
                    "connector.class": "task_hang_plugins.HangingSink",
                    "tasks.max": "1",
                    "topics": topic,
                    "hang.method": method,
                    "seen.file": str(workdir / f"seen-{method}.txt"),
                    "release.file": str(h.release),
                },
            )
        yield h
    finally:
        h.release.touch()  # every stuck call returns (and is ignored): the worker stops cleanly
        worker.stop(60)
        print(worker.log_text()[-5000:])


def beside_the_hang(h: HangWorker, name: str) -> None:
    """Another sink connector, created while a task hangs, runs and writes every line of the topic; its
    delete answers and it is gone."""
    sink = h.workdir / f"{name}.txt"
    h.create(
        name, {"connector.class": "FileStreamSink", "file": str(sink), "topics": h.topic, "tasks.max": "1"}
    )
    wait_until(lambda: h.task(name).get("state") == "RUNNING", 90, f"{name} RUNNING beside the hang")
    wait_until(
        lambda: sink.exists() and len(sink.read_text().splitlines()) >= LINES,
        60,
        f"{name} to write the lines",
    )
    assert sink.read_text().splitlines() == [f"line {n}" for n in range(LINES)]
    assert h.worker.request("DELETE", f"/connectors/{name}").status_code == 204
    wait_until(lambda: h.worker.get(f"/connectors/{name}/status").status_code == 404, 30, f"{name} deleted")


def listed_as_blocked(h: HangWorker, name: str, method: str) -> bool:
    return (f"task {name}-0", f"{method}()") in {(b["plugin"], b["method"]) for b in blocked_calls(h.worker)}


@pytest.mark.parametrize("method", ["start", "put", "flush"])
def test_a_sink_task_stuck_in_a_method_is_failed_and_holds_up_no_other_connector(
    hangs: HangWorker, method: str
) -> None:
    h = hangs
    name = h.hung(method)

    def failed_trace() -> str | None:
        task = h.task(name)
        return task.get("trace") if task.get("state") == "FAILED" else None

    trace = wait_until(failed_trace, 120, f"the task stuck in {method}() FAILED")
    assert trace.startswith(f"{method}() of task {name}-0 has not returned after "), trace
    assert "(task.method.timeout.ms)" in trace.splitlines()[0]
    assert f", in {method}\n" in trace  # the plugin's own frame, where it is stuck
    assert "blocked_until_released" in trace
    if method != "start":
        assert h.seen(method) > 0  # real records reached put() first
    assert (status(h.worker, name) or {})["connector"]["state"] == "RUNNING"  # only the task failed
    # /health answers 200 (blocked_calls asserts it) and names the stuck call, once.
    wait_until(lambda: listed_as_blocked(h, name, method), 30, f"{method}() listed as blocked")
    mine = [b for b in blocked_calls(h.worker) if b["plugin"] == f"task {name}-0"]
    assert [b["method"] for b in mine] == [f"{method}()"], mine
    assert mine[0]["blocked_s"] >= TASK_BOUND_MS / 1000

    beside_the_hang(h, f"beside-{method}")

    # The stuck connector itself can be deleted: its abandoned thread holds up nothing.
    assert h.worker.request("DELETE", f"/connectors/{name}").status_code == 204
    wait_until(lambda: h.worker.get(f"/connectors/{name}/status").status_code == 404, 30, f"{name} deleted")
    assert listed_as_blocked(h, name, method)  # still stuck, still listed, until it returns


def test_a_sink_task_stuck_in_stop_holds_up_neither_its_restart_nor_its_delete_nor_the_worker(
    hangs: HangWorker,
) -> None:
    h = hangs
    name = h.hung("stop")
    plugin = f"task {name}-0"
    wait_until(lambda: h.task(name).get("state") == "RUNNING", 90, f"{name} RUNNING")
    wait_until(lambda: h.seen("stop") >= LINES, 60, f"{name} to be given the topic's lines")
    began = time.monotonic()
    # A restart stops the instance (whose stop() hangs: the herder waits task.shutdown.graceful.timeout.ms
    # for its thread, as Java's does, then abandons it) and starts a new one.
    assert h.worker.request("POST", f"/connectors/{name}/tasks/0/restart").status_code == 204
    wait_until(
        lambda: listed_as_blocked(h, name, "stop"), 60, "the first instance's stop() listed as blocked"
    )
    wait_until(lambda: h.task(name).get("state") == "RUNNING", 60, f"{name} RUNNING again after its restart")
    # The old instance's stop() past its bound fails nothing: a task being stopped is only fenced.
    assert h.task(name).get("state") == "RUNNING", h.task(name)
    # A delete stops the new instance, whose stop() hangs too: it answers, and the worker goes on.
    assert h.worker.request("DELETE", f"/connectors/{name}").status_code == 204
    wait_until(lambda: h.worker.get(f"/connectors/{name}/status").status_code == 404, 30, f"{name} deleted")
    beside_the_hang(h, "beside-stop")
    wait_until(
        lambda: (
            [b["method"] for b in blocked_calls(h.worker) if b["plugin"] == plugin] == ["stop()", "stop()"]
        ),
        60,
        "both instances' stop() listed as blocked",
    )
    stuck = [b for b in blocked_calls(h.worker) if b["plugin"] == plugin]
    assert all(b["message"].startswith(f"stop() of task {name}-0 has not returned after ") for b in stuck)
    abandoned = [
        line
        for line in h.worker.log_text().splitlines()
        if "plugin call past its bound" in line and f"stop() of task {name}-0" in line
    ]
    assert len(abandoned) == 2, abandoned
    print(
        f"\nstop() hangs: restart, delete, another connector run, deleted: {time.monotonic() - began:.1f} s"
    )
