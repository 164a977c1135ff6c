"""Worker processes for integration tests: real ``kconnect worker`` processes on a real broker.

Rebalancing tests count and place tasks, they do not run them: a :class:`WorkerProcess` holds its tasks
(:mod:`tests.support.held_worker`, no JVM per worker) unless it is made with ``spark=True``, which runs
the product's ``kconnect worker`` itself, whose tasks run on Spark (the data-plane tests).
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx

from kconnect.runtime.cli.broker import free_port
from tests.support.held_worker import with_repo_on_path


def topic_names(prefix: str) -> dict[str, str]:
    return {
        "config.storage.topic": f"{prefix}-configs",
        "offset.storage.topic": f"{prefix}-offsets",
        "status.storage.topic": f"{prefix}-status",
        "group.records.storage.topic": f"{prefix}-group-records",
    }


def worker_properties(bootstrap: str, group: str, port: int, **extra: Any) -> dict[str, str]:
    props = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        **topic_names(group),
        "config.storage.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "group.records.storage.replication.factor": "1",
        "offset.storage.partitions": "3",
        "status.storage.partitions": "3",
        "listeners": f"http://127.0.0.1:{port}",
        # The test broker completes a generation about session.timeout.ms / 2 after the first JoinGroup.
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "1000",
        "rebalance.timeout.ms": "20000",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        # The tests' pipelines use the FileStream connectors, which a worker offers only when told to.
        "file.connectors.enable": "true",
    }
    props.update({k.replace("_", "."): str(v) for k, v in extra.items()})
    return props


def worker_command(props_path: Path, *, spark: bool = False) -> list[str]:
    """The command line of a worker process: held tasks (the default) or the product's own, on Spark."""
    if spark:
        return [sys.executable, "-m", "kconnect.runtime.cli.main", "worker", str(props_path)]
    return [sys.executable, "-m", "tests.support.held_worker", str(props_path)]


def run_worker(tmp_path: Path, props: dict[str, str], timeout: float = 60) -> tuple[int, list[str], float]:
    """Run the product's ``kconnect worker`` with ``props`` until it exits (the start-up failure tests):
    its exit code, its ``kconnect:`` error lines, and how long it took."""
    path = tmp_path / f"{uuid.uuid4().hex[:6]}.properties"
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    started = time.monotonic()
    proc = subprocess.run(worker_command(path, spark=True), capture_output=True, text=True, timeout=timeout)
    errors = [line for line in proc.stderr.splitlines() if line.startswith("kconnect:")]
    return proc.returncode, errors, time.monotonic() - started


class WorkerProcess:
    """One worker process on loopback, its properties file and log in ``workdir``.

    ``spark=False`` (the default) holds its tasks without running them; ``spark=True`` runs them.
    """

    def __init__(
        self, workdir: Path, props: dict[str, str], name: str | None = None, *, spark: bool = False
    ) -> None:
        self.name = name or f"w-{uuid.uuid4().hex[:6]}"
        self.spark = spark
        self.workdir = workdir
        self.props = props
        self.port = int(props["listeners"].rsplit(":", 1)[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.props_path = workdir / f"{self.name}.properties"
        self.log_path = workdir / f"{self.name}.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WorkerProcess:
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in self.props.items()))
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        env = with_repo_on_path({**os.environ, "KCONNECT_LOG_LEVEL": "INFO"})
        self.proc = subprocess.Popen(
            worker_command(self.props_path, spark=self.spark),
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        return self

    def get(self, path: str, **kw: Any) -> httpx.Response:
        return httpx.get(self.url + path, timeout=30, **kw)

    def request(self, method: str, path: str, **kw: Any) -> httpx.Response:
        return httpx.request(method, self.url + path, timeout=60, **kw)

    def workers(self) -> dict[str, Any] | None:
        try:
            resp = self.get("/workers")
        except httpx.HTTPError:
            return None
        return resp.json() if resp.status_code == 200 else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self, timeout: float = 30) -> int:
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                raise
        return self.proc.returncode

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def wait_until(predicate: Callable[[], Any], timeout: float, what: str, interval: float = 0.25) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def wait_nudging(
    predicate: Callable[[], Any], nudge: Callable[[], Any], timeout: float, what: str, every: float = 4.0
) -> Any:
    """``wait_until`` that calls ``nudge`` every ``every`` seconds while the predicate is false.

    The test broker starts no new generation when members rejoin with unchanged metadata, not even when
    the leader rejoins (Apache Kafka always rebalances then), so a scheduled delay that runs out, or a
    leader's back-off, waits forever there. A nudge that rewrites an unchanged connector config moves the
    config offset in every member's metadata, the broker starts a generation, and the leader decides as
    it would have on Kafka; nothing restarts.
    """
    deadline = time.monotonic() + timeout
    last_nudge = time.monotonic()
    last: Any = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        if time.monotonic() - last_nudge > every:
            last_nudge = time.monotonic()
            with contextlib.suppress(httpx.HTTPError):
                nudge()
        time.sleep(0.25)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what} (last: {last!r})")


def start_cluster(
    workdir: Path,
    bootstrap: str,
    count: int,
    group: str | None = None,
    *,
    spark: bool = False,
    **extra: Any,
) -> list[WorkerProcess]:
    """Start ``count`` workers of one group; ``spark`` as for :class:`WorkerProcess`."""
    group = group or f"g-{uuid.uuid4().hex[:8]}"
    workers = []
    for i in range(count):
        props = worker_properties(bootstrap, group, free_port(), **extra)
        workers.append(WorkerProcess(workdir, props, name=f"{group}-w{i}", spark=spark).start())
    return workers


def stable_view(workers: list[WorkerProcess], expected_members: int) -> Callable[[], dict[str, Any] | None]:
    """A predicate: every worker reports the same generation with ``expected_members`` members.

    The view must come from the leader's own assignment: a coordinator-sourced view (the fallback a
    worker gives while its leader cannot answer, e.g. just after that leader left) pairs the
    coordinator's current member list with this worker's last generation, which is not a stable view.
    """

    def check() -> dict[str, Any] | None:
        views = [w.workers() for w in workers]
        if any(v is None for v in views):
            return None
        mine = [v["this_worker"] for v in views if v]
        gens = {m["generation"] for m in mine}
        if len(gens) != 1 or -1 in gens or any(m["rebalancing"] for m in mine):
            return None
        first = views[0]
        assert first is not None
        if first.get("source") != "leader":
            return None
        if len(first["members"]) != expected_members or first["generation"] not in gens:
            return None
        return first

    return check


def read_json_values(bootstrap: str, topic: str, count: int, timeout: float = 60) -> list[Any]:
    """The first ``count`` values of ``topic`` decoded as JSON, read from the start by a consumer of
    its own; fails after ``timeout`` seconds without them."""
    import json

    from confluent_kafka import Consumer

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"check-{uuid.uuid4().hex[:6]}",
            "auto.offset.reset": "earliest",
        }
    )
    values: list[Any] = []
    try:
        consumer.subscribe([topic])

        def enough() -> bool:
            for message in consumer.consume(num_messages=100, timeout=0.5):
                value = message.value()
                if message.error() is None and value is not None:
                    values.append(json.loads(value))
            return len(values) >= count

        wait_until(enough, timeout, f"{count} records in {topic}", interval=0)
    finally:
        consumer.close()
    return values
