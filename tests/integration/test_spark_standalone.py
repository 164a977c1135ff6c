"""Tasks on a Spark standalone cluster of two workers: ``spark.master=spark://...`` runs the pipeline there,
an executor killed mid-flow loses nothing, and a failure in an executor shows in the task's status.

The test starts a real standalone master and two workers (``tests/support/spark_cluster.py``, one core
each), points one kconnect worker at it (``source.task.placement`` left at ``auto``: executor with a cluster
master) and runs FileStream source
-> topic -> FileStream sink. Every line must arrive, and both tasks must have run on the cluster: the
master lists kconnect's application, each standalone worker launched an executor for it, the source task's
poll loop runs in a Spark task on one executor (a source host's, holding that executor's core; its log
says so) and the sink's Kafka reads (``runtime/dataplane/kafka_reader.py``, ``sink.task.placement=query``)
ran on the other. So this also proves the reader
and the source job are serializable and that kconnect and confluent-kafka import on the executors'
interpreter.

Then issue 15's failure cases: the executor running the source task is SIGKILLed while lines keep coming.
Its Spark task is lost with it; Spark runs it again on the other executor, where the task resumes from its
offset in Kafka, the master launches a replacement executor, and every line arrives (duplicates would be
allowed: records produced after the last offset commit are produced again). Last, a frame sink plugin
whose write raises inside a Spark task (on an executor) goes FAILED, and its status trace carries the
executor-side Python traceback, not only the driver's.

Under a cluster master the sink is a Structured Streaming query, which plans up to the high watermark:
under ``KCONNECT_TEST_BROKER=embedded`` the source produces one record per batch (``one_record_batches``),
as that broker reports the watermark short of a multi-record batch's tail (DESIGN.md, test broker quirk 2).
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support import spark_cluster
from tests.support.apache_kafka import Broker, one_record_batches
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.plugin_sources import one_task_connector

pytestmark = pytest.mark.integration

LINES = 300


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[spark_cluster.StandaloneCluster]:
    if spark_cluster.java() is None:
        pytest.skip("a Spark standalone cluster needs Java 17; none is installed")
    workdir = tmp_path_factory.mktemp("spark-standalone")
    # Not waited for here: the test starts its kconnect worker while the JVMs come up.
    with spark_cluster.running(workdir, cores=1, memory="1g", wait=False, workers=2) as cluster:
        try:
            yield cluster
        finally:
            print(cluster.logs())


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)


def finished_tasks(cluster: spark_cluster.StandaloneCluster, app_id: str) -> dict[str, int]:
    """Per executor id of an application, how many Spark tasks it finished, read from the executor's own
    log in its standalone worker's work directory."""
    counts: dict[str, int] = {}
    for directory in cluster.executor_dirs(app_id):
        log = directory / "stderr"
        text = log.read_text(errors="replace") if log.exists() else ""
        counts[directory.name] = text.count("Finished task")
    return counts


def source_executor(
    cluster: spark_cluster.StandaloneCluster, app_id: str, other_than: str = ""
) -> str | None:
    """The live executor whose Python worker runs the source task's poll loop (the executor side logs it,
    to the executor's own output files), other than ``other_than``."""
    alive = executor_pids(app_id)
    for directory in cluster.executor_dirs(app_id):
        if directory.name == other_than or directory.name not in alive:
            continue
        text = "".join(
            (directory / f).read_text(errors="replace")
            for f in ("stdout", "stderr")
            if (directory / f).exists()
        )
        if "source task running in a Spark task" in text:
            return directory.name
    return None


def executor_pids(app_id: str) -> dict[str, int]:
    """Executor id -> pid of the application's live executor JVMs (``CoarseGrainedExecutorBackend``)."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        words = [a.decode(errors="replace") for a in args]
        if "org.apache.spark.executor.CoarseGrainedExecutorBackend" in words and app_id in words:
            found[words[words.index("--executor-id") + 1]] = int(entry.name)
    return found


#: A frame sink (plugin.path) whose write raises inside a Spark task: where it raised shows in the message.
EXPLODING_SINK = r"""
import os

from kconnect.runtime.plugins.api import FrameSinkTask


class ExplodingSinkTask(FrameSinkTask):
    def version(self):
        return "1.0"

    def start(self, props):
        pass

    def put_frame(self, batch):
        def explode(rows):
            where = "an executor" if os.environ.get("SPARK_EXECUTOR_DIRS") else "the driver"
            raise RuntimeError(f"exploded in {where}")

        batch.frame.foreachPartition(explode)
        return None

    def stop(self):
        pass

""" + one_task_connector("Sink", "ExplodingSinkTask", "ExplodingSinkConnector")


def python_wrapper(workdir: Path) -> tuple[Path, Path]:
    """An interpreter for ``spark.pyspark.python`` that notes where it runs, then becomes this Python.

    A standalone worker gives the executors it launches ``SPARK_EXECUTOR_DIRS``; the driver has none.
    """
    marks, script = workdir / "python-runs.txt", workdir / "python"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ -n "$SPARK_EXECUTOR_DIRS" ]; then echo executor >> {marks}; else echo driver >> {marks}; fi\n'
        f'exec {sys.executable} "$@"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script, marks


# Four JVMs (master, two workers, an executor each) besides the worker's own, one more after the kill: the
# one-worker version of this test measured 170-275 s on a 2-core machine shared with other test runs.
@pytest.mark.timeout(600)
def test_pipeline_runs_on_the_standalone_cluster_survives_an_executor_kill_and_reports_executor_failures(
    tmp_path: Path, broker: Broker, standalone: spark_cluster.StandaloneCluster
) -> None:
    group = f"sa-{uuid.uuid4().hex[:8]}"
    python, python_runs = python_wrapper(tmp_path)
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "exploding_sink.py").write_text(EXPLODING_SINK)
    props = worker_properties(broker.bootstrap, group, free_port(), plugin_path=str(plugins))
    props.update(
        {
            "spark.master": standalone.master_url,
            # Executors connect back to the driver (this kconnect worker) and to its Python workers.
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "512m",
            "spark.cores.max": "2",  # one executor of one core on each standalone worker
            # The executors' Python workers import kconnect and confluent-kafka: the venv's interpreter,
            # through a wrapper that shows the property is honoured and where Python workers ran.
            "spark.pyspark.python": str(python),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "offset.flush.interval.ms": "1000",
            # The sink's reads on an executor: a query (auto would run this small sink as the worker's
            # consumer loop, issue 32; test_spark_hosts.py covers that).
            "sink.task.placement": "query",
            **one_record_batches("producer."),  # the source's records (module docstring)
        }
    )
    worker = WorkerProcess(tmp_path, props, name="sa-w0", spark=True).start()
    topic = f"lines-{uuid.uuid4().hex[:6]}"
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"

    def sink_lines() -> list[str]:
        return sink_file.read_text().splitlines() if sink_file.exists() else []

    try:
        standalone.wait_ready(300)  # three JVMs starting on a loaded 2-core machine took ~120 s
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        create_topic(broker.bootstrap, topic)
        source_file.write_text("".join(f"line {n}\n" for n in range(LINES)))
        for name, config in (
            ("src", {"connector.class": "FileStreamSource", "file": str(source_file), "topic": topic}),
            ("sink", {"connector.class": "FileStreamSink", "file": str(sink_file), "topics": topic}),
        ):
            resp = worker.request("POST", "/connectors", json={"name": name, "config": config})
            assert resp.status_code == 201, resp.text
        wait_until(lambda: len(sink_lines()) >= LINES, 240, f"{LINES} lines in the sink file")
        assert sink_lines() == [f"line {n}" for n in range(LINES)]
        status = worker.get("/connectors/sink/status").json()
        assert [t["state"] for t in status["tasks"]] == ["RUNNING"], status

        # The application ran on the standalone master, with cores granted to it, an executor on each
        # standalone worker...
        [app] = [a for a in standalone.applications() if a["name"] == f"kconnect-{group}"]
        assert app["cores"] >= 1, app
        wait_until(lambda: len(executor_pids(app["id"])) == 2, 60, "an executor on each standalone worker")
        workers_used = {d.parent.parent.name for d in standalone.executor_dirs(app["id"])}
        assert len(workers_used) == 2, workers_used

        # ...the source task's poll loop runs in a Spark task on one executor (it holds that executor's
        # one core), so the sink's reads ran on the other: Spark's Python runner logs its timings where a
        # Python worker evaluated rows.
        source_on = wait_until(lambda: source_executor(standalone, app["id"]), 30, "the source's executor")

        def busy_executor() -> Any:
            done = finished_tasks(standalone, app["id"])
            alive = executor_pids(app["id"])
            return next((e for e, n in sorted(done.items(), key=lambda i: -i[1]) if n and e in alive), None)

        reader = wait_until(busy_executor, 30, f"an executor of {app['id']} that finished tasks")
        assert reader != source_on, (reader, source_on)
        # The Python workers there ran the interpreter spark.pyspark.python names.
        runs = python_runs.read_text().split() if python_runs.exists() else []
        assert "executor" in runs, runs

        # The source's executor dies (SIGKILL: no goodbye) while lines keep coming: its Spark task is lost
        # with it and runs again on another executor, from the source offset in Kafka; sink reads lost
        # with it run again too.
        before = finished_tasks(standalone, app["id"])
        os.kill(executor_pids(app["id"])[source_on], signal.SIGKILL)
        with source_file.open("a") as out:
            out.write("".join(f"line {n}\n" for n in range(LINES, 2 * LINES)))
        moved_to = wait_until(
            lambda: source_executor(standalone, app["id"], other_than=source_on), 120, "the source elsewhere"
        )
        wait_until(
            lambda: len(set(sink_lines())) >= 2 * LINES, 240, f"{2 * LINES} distinct lines after the kill"
        )
        lines = sink_lines()
        assert set(lines) == {f"line {n}" for n in range(2 * LINES)}
        after = finished_tasks(standalone, app["id"])
        print(
            f"\napplication {app['id']}: source on executor {source_on} (killed), then on {moved_to}; "
            f"sink reads finished per executor before {before}, after {after}; "
            f"duplicate lines (re-produced after the last offset commit): {len(lines) - len(set(lines))}"
        )
        for name in ("src", "sink"):
            status = worker.get(f"/connectors/{name}/status").json()
            assert [t["state"] for t in status["tasks"]] == ["RUNNING"], status

        # A task whose code fails inside a Spark task: FAILED, with the trace from where it ran.
        boom = {"connector.class": "ExplodingSinkConnector", "topics": topic}
        resp = worker.request("POST", "/connectors", json={"name": "boom", "config": boom})
        assert resp.status_code == 201, resp.text

        def failed_trace() -> str | None:
            tasks = worker.get("/connectors/boom/status").json().get("tasks") or []
            return tasks[0].get("trace") if tasks and tasks[0]["state"] == "FAILED" else None

        trace = wait_until(failed_trace, 240, "the exploding sink task FAILED")
        print(f"boom's trace, last lines: {trace.strip().splitlines()[-8:]}")
        assert "RuntimeError: exploded in an executor" in trace, trace[-3000:]
        assert "exploding_sink.py" in trace and "in explode" in trace, trace[-3000:]
    finally:
        worker.stop(60)
        print(worker.log_text()[-3000:])
