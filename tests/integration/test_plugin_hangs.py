"""No connector holds the cluster hostage (issue 24 item 2): plugins that hang, on real worker processes.

Plugins in a loose module in ``plugin.path`` block forever (or for long) in one method each. While they
do, other connectors are created, rebalanced and deleted; past ``connector.method.timeout.ms`` /
``task.method.timeout.ms`` the hanging connector or task is FAILED with a trace naming the method,
``/health`` stays 200 and lists the blocked call, and a task whose ``poll()`` returns late has its
records fenced: they never reach Kafka.

Connector methods run in the worker process itself, so held workers (no Spark) run them; the task test
runs the product's own worker (``spark=True``), where task code runs.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, wait_until, worker_properties

pytestmark = pytest.mark.integration

#: The connector bound the tests run with: long enough for a worker's normal calls, short for a test.
CONNECTOR_BOUND_MS = 4000
TASK_BOUND_MS = 5000
#: How long the late task's poll() sleeps: past its bound, then it returns records that must be fenced.
LATE_POLL_S = 12

HANG_PLUGINS = f'''
import threading
import time

from kconnect.runtime.plugins.api import SourceConnector, SourceRecord, SourceTask
from kconnect.runtime.plugins.config_def import ConfigDef

FOREVER = threading.Event()


class QuietTask(SourceTask):
    def version(self):
        return "1"

    def start(self, props):
        pass

    def poll(self):
        time.sleep(0.2)
        return []

    def stop(self):
        pass


class LatePollTask(SourceTask):
    """One record, then a poll() that sleeps past its bound and returns records that must be fenced."""

    def version(self):
        return "1"

    def start(self, props):
        self.topic = props["topic"]
        self.polls = 0

    def poll(self):
        self.polls += 1
        if self.polls == 1:
            return [SourceRecord({{"p": 0}}, {{"n": 1}}, self.topic, value="first")]
        if self.polls == 2:
            time.sleep({LATE_POLL_S})
            return [SourceRecord({{"p": 0}}, {{"n": 2}}, self.topic, value="late")]
        time.sleep(0.2)
        return []

    def stop(self):
        pass


class _Base(SourceConnector):
    task = QuietTask

    def version(self):
        return "1"

    def config_def(self):
        return ConfigDef()

    def start(self, props):
        self.props = dict(props)

    def task_class(self):
        return self.task

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass


class HangStart(_Base):
    def start(self, props):
        FOREVER.wait()


class HangTaskConfigs(_Base):
    def task_configs(self, max_tasks):
        FOREVER.wait()


class HangStop(_Base):
    def stop(self):
        FOREVER.wait()


class HangValidate(_Base):
    def validate(self, configs):
        FOREVER.wait()


class LatePoll(_Base):
    task = LatePollTask
'''


def file_source(workdir: Path, name: str) -> dict[str, Any]:
    source = workdir / f"{name}.txt"
    source.write_text("")
    return {
        "name": name,
        "config": {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
            "file": str(source),
            "topic": f"{name}-topic",
            "tasks.max": "1",
        },
    }


def hanging(name: str, cls: str) -> dict[str, Any]:
    return {"name": name, "config": {"connector.class": f"hang_plugins.{cls}", "tasks.max": "1"}}


def status(worker: WorkerProcess, name: str) -> dict[str, Any] | None:
    resp = worker.get(f"/connectors/{name}/status")
    return resp.json() if resp.status_code == 200 else None


def connector_state(worker: WorkerProcess, name: str) -> str | None:
    s = status(worker, name)
    return s["connector"]["state"] if s else None


def running_with_tasks(worker: WorkerProcess, name: str) -> bool:
    """RUNNING with its task configs published and its task placed (a held worker holds tasks UNASSIGNED)."""
    s = status(worker, name)
    return bool(s and s["connector"]["state"] == "RUNNING" and s["tasks"])


def blocked_calls(worker: WorkerProcess) -> list[dict[str, Any]]:
    resp = worker.get("/health")
    assert resp.status_code == 200, resp.text  # a blocked plugin call never makes the worker unhealthy
    calls: list[dict[str, Any]] = resp.json().get("blocked_plugin_calls", [])
    return calls


@pytest.fixture()
def plugins(tmp_path: Path) -> Path:
    directory = tmp_path / "plugins"
    directory.mkdir()
    (directory / "hang_plugins.py").write_text(HANG_PLUGINS)
    return directory


def props(broker: Broker, group: str, plugins: Path, **extra: Any) -> dict[str, str]:
    return worker_properties(
        broker.bootstrap,
        group,
        free_port(),
        plugin_path=str(plugins),
        connector_method_timeout_ms=str(CONNECTOR_BOUND_MS),
        task_method_timeout_ms=str(TASK_BOUND_MS),
        **extra,
    )


@pytest.fixture()
def workers(tmp_path: Path) -> Iterator[list[WorkerProcess]]:
    started: list[WorkerProcess] = []
    yield started
    for worker in started:
        worker.stop(30)
        print(worker.name, worker.log_text()[-3000:])


def test_hanging_connector_methods_hold_up_no_other_connector_rebalance_or_write(
    tmp_path: Path, broker: Broker, plugins: Path, workers: list[WorkerProcess]
) -> None:
    group = f"hang-{uuid.uuid4().hex[:6]}"
    w0 = WorkerProcess(tmp_path, props(broker, group, plugins), name="hang-w0").start()
    workers.append(w0)
    wait_until(lambda: (w0.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")

    # start() hangs forever; a connector POSTed after it still runs (KAFKA-15563: not in Java).
    assert w0.request("POST", "/connectors", json=hanging("hang-start", "HangStart")).status_code == 201
    assert w0.request("POST", "/connectors", json=file_source(tmp_path, "fs-1")).status_code == 201
    wait_until(lambda: running_with_tasks(w0, "fs-1"), 60, "fs-1 RUNNING beside a hanging start()")

    # Past the bound: FAILED, naming the method and how long; /health 200 listing the blocked call.
    wait_until(lambda: connector_state(w0, "hang-start") == "FAILED", 60, "hang-start FAILED")
    trace = (status(w0, "hang-start") or {})["connector"]["trace"]
    assert trace.startswith("start() of connector hang-start has not returned after ")
    assert "FOREVER.wait()" in trace  # where it is stuck
    blocked = blocked_calls(w0)
    assert [(b["plugin"], b["method"]) for b in blocked] == [("connector hang-start", "start()")]

    # task_configs() that hangs: FAILED the same way; the worker goes on.
    assert (
        w0.request("POST", "/connectors", json=hanging("hang-configs", "HangTaskConfigs")).status_code == 201
    )
    wait_until(lambda: connector_state(w0, "hang-configs") == "FAILED", 60, "hang-configs FAILED")
    trace = (status(w0, "hang-configs") or {})["connector"]["trace"]
    assert trace.startswith("task_configs() of connector hang-configs has not returned after ")

    # validate() that hangs: the request answers 500 naming the call, and writes nothing.
    resp = w0.request("POST", "/connectors", json=hanging("hang-validate", "HangValidate"))
    assert resp.status_code == 500, resp.text
    assert "validate() of connector class hang_plugins.HangValidate has not returned after" in resp.text
    assert w0.get("/connectors/hang-validate").status_code == 404

    # A second worker joins: the group rebalances around the stuck calls, and new connectors run.
    w1 = WorkerProcess(tmp_path, props(broker, group, plugins), name="hang-w1").start()
    workers.append(w1)
    wait_until(lambda: len((w0.workers() or {}).get("members", [])) == 2, 90, "both workers in the group")
    assert w0.request("POST", "/connectors", json=file_source(tmp_path, "fs-2")).status_code == 201
    wait_until(lambda: running_with_tasks(w1, "fs-2"), 60, "fs-2 RUNNING after the rebalance")

    # stop() that hangs: deleting its connector answers at once, and the worker goes on.
    assert w0.request("POST", "/connectors", json=hanging("hang-stop", "HangStop")).status_code == 201
    wait_until(lambda: connector_state(w0, "hang-stop") == "RUNNING", 60, "hang-stop RUNNING")
    for name in ("hang-stop", "hang-start", "fs-1"):
        assert w0.request("DELETE", f"/connectors/{name}").status_code == 204
    assert w0.request("POST", "/connectors", json=file_source(tmp_path, "fs-3")).status_code == 201
    wait_until(lambda: running_with_tasks(w0, "fs-3"), 60, "fs-3 RUNNING after the deletions")
    both = lambda: blocked_calls(w0) + blocked_calls(w1)  # noqa: E731
    wait_until(
        lambda: ("connector hang-stop", "stop()") in {(b["plugin"], b["method"]) for b in both()},
        60,
        "the hanging stop() listed as blocked",
    )
    assert sorted(w0.get("/connectors").json()) == ["fs-2", "fs-3", "hang-configs"]


def _topic_values(bootstrap: str, topic: str) -> list[bytes]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"read-{uuid.uuid4().hex[:6]}"})
    try:
        consumer.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        values: list[bytes] = []
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                values.append(msg.value())
        return values
    finally:
        consumer.close()


def test_a_task_stuck_in_poll_is_failed_and_its_late_records_are_fenced(
    tmp_path: Path, broker: Broker, plugins: Path, workers: list[WorkerProcess]
) -> None:
    group = f"hangt-{uuid.uuid4().hex[:6]}"
    topic = f"late-{uuid.uuid4().hex[:6]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)
    extra = {"spark.master": "local[1]", "spark.ui.enabled": "false", "offset.flush.interval.ms": "500"}
    worker_props = props(broker, group, plugins)
    worker_props.update(extra)
    worker_props["value.converter"] = "org.apache.kafka.connect.storage.StringConverter"
    w0 = WorkerProcess(tmp_path, worker_props, name="hangt-w0", spark=True).start()
    workers.append(w0)
    wait_until(lambda: (w0.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
    body = {
        "name": "late",
        "config": {"connector.class": "hang_plugins.LatePoll", "tasks.max": "1", "topic": topic},
    }
    assert w0.request("POST", "/connectors", json=body).status_code == 201

    def task_failed() -> str | None:
        s = status(w0, "late")
        task = s["tasks"][0] if s and s["tasks"] else None
        return task["trace"] if task and task["state"] == "FAILED" else None

    trace = wait_until(task_failed, 120, "the task stuck in poll() FAILED")
    assert trace.startswith("poll() of task late-0 has not returned after ")
    assert connector_state(w0, "late") == "RUNNING"  # the connector itself is fine
    assert [b["method"] for b in blocked_calls(w0)] == ["poll()"]
    # The poll returns late (its "late" record in hand): the call leaves the blocked list, and its
    # record is never produced.
    wait_until(lambda: not blocked_calls(w0), LATE_POLL_S + 30, "the late poll() to return")
    assert _topic_values(broker.bootstrap, topic) == [b"first"]
    # A restart starts a new instance, which polls again (and hangs again: FAILED once more).
    assert w0.request("POST", "/connectors/late/tasks/0/restart").status_code == 204
    wait_until(
        lambda: (status(w0, "late") or {"tasks": [{}]})["tasks"][0].get("state") == "RUNNING", 60, "restart"
    )
