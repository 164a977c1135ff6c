"""Tasks on a Spark standalone cluster: ``spark.master=spark://...`` runs the same pipeline there.

The test starts a real standalone master and worker (``tests/support/spark_cluster.py``), points one
kconnect worker at it and runs FileStream source -> topic -> FileStream sink. Every line must arrive,
and the sink's micro-batches must have run on the cluster: the master lists kconnect's application with
cores granted, and the standalone worker launched an executor for it that ran tasks (its own log says so).
The sink's Kafka reads (``runtime/dataplane/kafka_reader.py``) run in that executor's Python workers, so this
also
proves the reader is serializable and that confluent-kafka imports on the executor's interpreter.
"""

from __future__ import annotations

import stat
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import EmbeddedBroker, free_port
from tests.support import spark_cluster
from tests.support.cluster import WorkerProcess, wait_until, worker_properties

pytestmark = pytest.mark.integration

LINES = 300


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[spark_cluster.StandaloneCluster]:
    if spark_cluster.java() is None:
        pytest.skip("a Spark standalone cluster needs Java 17; none is installed")
    workdir = tmp_path_factory.mktemp("spark-standalone")
    # Not waited for here: the test starts its kconnect worker while the JVMs come up.
    with spark_cluster.running(workdir, cores=1, memory="1g", wait=False) as cluster:
        try:
            yield cluster
        finally:
            print(cluster.logs())


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(15)


def executor_logs(cluster: spark_cluster.StandaloneCluster, app_id: str) -> list[Path]:
    """The standalone worker's per-executor stderr files for one application."""
    return sorted((cluster.workdir / "spark-work" / app_id).glob("*/stderr"))


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


# Three JVMs (master, worker, executor) besides the worker's own: measured at 170-275 s on a 2-core
# machine shared with other test runs (load 20-30), about 15 s of it the cluster's start-up.
@pytest.mark.timeout(480)
def test_pipeline_runs_on_the_standalone_cluster(
    tmp_path: Path, broker: EmbeddedBroker, standalone: spark_cluster.StandaloneCluster
) -> None:
    group = f"sa-{uuid.uuid4().hex[:8]}"
    python, python_runs = python_wrapper(tmp_path)
    props = worker_properties(broker.bootstrap, group, free_port())
    props.update(
        {
            "spark.master": standalone.master_url,
            # Executors connect back to the driver (this kconnect worker) and to its Python workers.
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.executor.memory": "512m",
            "spark.cores.max": "1",
            # The executors' Python workers import kconnect and confluent-kafka: the venv's interpreter,
            # through a wrapper that shows the property is honoured and where Python workers ran.
            "spark.pyspark.python": str(python),
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            "offset.flush.interval.ms": "1000",
        }
    )
    worker = WorkerProcess(tmp_path, props, name="sa-w0", spark=True).start()
    topic = f"lines-{uuid.uuid4().hex[:6]}"
    source_file, sink_file = tmp_path / "in.txt", tmp_path / "out.txt"

    def sink_lines() -> list[str]:
        return sink_file.read_text().splitlines() if sink_file.exists() else []

    try:
        standalone.wait_ready()
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

        # The application ran on the standalone master, with cores granted to it...
        [app] = [a for a in standalone.applications() if a["name"] == f"kconnect-{group}"]
        assert app["cores"] >= 1, app

        # ...and its executor, a process of the standalone worker, ran the sink's tasks, among them the
        # Kafka reads: Spark's Python runner logs its timings where a Python worker evaluated rows.
        def executor_ran_tasks() -> Any:
            logs = executor_logs(standalone, app["id"])
            texts = {p: p.read_text(errors="replace") for p in logs}
            return [p for p, t in texts.items() if "Finished task" in t and "Times: total" in t]

        ran = wait_until(executor_ran_tasks, 30, f"an executor of {app['id']} that finished tasks")
        # The Python workers there ran the interpreter spark.pyspark.python names.
        runs = python_runs.read_text().split() if python_runs.exists() else []
        print(f"\napplication {app['id']}: {app['cores']} core(s); executor logs: {ran}; python: {runs}")
        assert "executor" in runs, runs
    finally:
        worker.stop(60)
        print(worker.log_text()[-3000:])
