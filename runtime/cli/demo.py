"""``kconnect demo``: the embedded broker, three workers and a sample pipeline on loopback, the quick start.

The pipeline: a FileStream source reads ``input.txt`` into topic ``demo-lines``; a FileStream sink writes the
topic back out to ``output.txt`` (a consumer loop on its worker, no Spark), and ``IcebergSinkConnector``
writes it to an Apache Iceberg table with Spark on a local warehouse directory, which the demo then queries
with Spark SQL (runtime/cli/demo_table.py). ``kconnect.runtime.cli.main`` keeps the names it had when the demo
lived there.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kconnect.runtime.cli import demo_table

if TYPE_CHECKING:
    import httpx

#: Seconds the demo waits for the table to hold every line once the Iceberg sink was created (the first
#: commit includes its task's SparkSession start: a cold JVM and the Iceberg runtime's classes).
TABLE_WAIT_S = 240


def cmd_demo(args: argparse.Namespace) -> int:
    """Broker, three workers and the sample pipeline on loopback: the quick start's main job."""
    import subprocess

    from kconnect.runtime.cli import broker
    from kconnect.runtime.cli.exits import EXIT_CONFIG, EXIT_STARTUP, REST_LISTEN_FAILED
    from kconnect.runtime.cli.exits import fail as _fail
    from kconnect.runtime.cli.rest_client import ClientError, call_until_answered

    jar: Path | None = None
    if args.iceberg_jar:
        jar = Path(args.iceberg_jar)
        if not jar.is_file():
            return _fail(EXIT_CONFIG, f"--iceberg-jar {jar}: no such file")
    elif not args.no_table:
        jar = demo_table.find_iceberg_jar(os.environ, Path.home())
        if jar is None:
            print(
                "kconnect demo: Spark's Iceberg runtime was not found in ~/.cache/kconnect (`make lakehouse` "
                "fetches it; or pass --iceberg-jar): the pipeline ends in output.txt, with no table"
            )
    work = Path(tempfile.mkdtemp(prefix="kconnect-demo-"))
    try:
        b = broker.start(log_path=work / "broker.log")
    except broker.BrokerError as exc:  # e.g. the dev extra is not installed: one line saying how to get it
        return _fail(EXIT_STARTUP, str(exc))
    warehouse = work / "warehouse"
    # The demo's own SparkSession starts now, beside the workers, so its JVM is warm when the table is.
    reader = None
    if jar is not None:
        reader = demo_table.TableReader(jar, warehouse, work / "spark-reader.log").start()
    procs: list[subprocess.Popen[bytes]] = []
    table_posted = 0.0
    urls: list[str] = []

    def launch(i: int) -> None:
        """Start worker ``i`` on a port free now (worker ``i`` again, on a new port, when it exists)."""
        url = f"http://127.0.0.1:{broker.free_port()}"
        props = work / f"worker-{i}.properties"
        props.write_text(
            "\n".join(
                [
                    f"bootstrap.servers={b.bootstrap}",
                    "group.id=kconnect-demo",
                    "config.storage.topic=demo-configs",
                    "offset.storage.topic=demo-offsets",
                    "status.storage.topic=demo-status",
                    "config.storage.replication.factor=1",
                    "offset.storage.replication.factor=1",
                    "status.storage.replication.factor=1",
                    "group.records.storage.replication.factor=1",
                    f"listeners={url}",
                    "session.timeout.ms=6000",
                    "heartbeat.interval.ms=1000",
                    "key.converter=org.apache.kafka.connect.json.JsonConverter",
                    "value.converter=org.apache.kafka.connect.json.JsonConverter",
                    # The demo's pipeline is FileStream source to FileStream sink: turned on explicitly.
                    "file.connectors.enable=true",
                    *(demo_table.worker_properties(jar) if jar is not None else []),
                ]
            )
            + "\n"
        )
        with open(work / f"worker-{i}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kconnect.runtime.cli.main", "worker", str(props)],
                stdout=log,
                stderr=log,
            )
        if i < len(procs):
            procs[i], urls[i] = proc, url
        else:
            procs.append(proc)
            urls.append(url)

    def port_taken(i: int) -> bool:
        """Worker ``i`` exited because another process bound its port between free_port() and its bind
        (a busy machine hands out ephemeral ports all the time): the one start-up failure worth a retry."""
        with open(work / f"worker-{i}.log", "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 1000))
            tail = log.read().decode(errors="replace")
        return procs[i].poll() is not None and REST_LISTEN_FAILED in tail

    try:
        for i in range(args.workers):
            launch(i)
        print(f"kconnect demo: broker {b.bootstrap}, workers {', '.join(urls)} (logs in {work})")

        def gone() -> str | None:
            """A worker that exited will never answer: say which, and where its log is."""
            for i, p in enumerate(procs):
                if p.poll() is not None:
                    return f"worker {i} exited with status {p.returncode} (log: {work / f'worker-{i}.log'})"
            return None

        def call(method: str, url: str, seconds: float, body: Any = None) -> httpx.Response:
            # Every call waits out "not now" (no connection yet, 503 while a worker starts, 409 during a
            # rebalance): a worker that answers the group's view may not answer anything else yet.
            return call_until_answered(method, url, deadline=time.monotonic() + seconds, body=body, gone=gone)

        try:
            # Every worker's /health, not one worker's view of the group: the demo talks to all of them,
            # and a member of the group may still be reading its config topic (503).
            deadline = time.monotonic() + 120
            pending, restarts = list(range(args.workers)), 0
            while pending:
                try:
                    health = call_until_answered(
                        "GET", urls[pending[0]] + "/health", deadline=deadline, gone=gone
                    )
                except ClientError:
                    taken = [i for i in range(args.workers) if port_taken(i)]
                    if not taken or restarts + len(taken) > 3:
                        raise
                    for i in taken:
                        restarts += 1
                        launch(i)
                        print(f"kconnect demo: worker {i}'s port was taken; restarted it on {urls[i]}")
                    continue
                if health.status_code != 200:
                    raise ClientError(f"GET {urls[pending[0]]}/health -> {health.status_code}: {health.text}")
                pending.pop(0)
            deadline = time.monotonic() + 90
            view: dict[str, Any] = {}
            while len(view.get("members", [])) != args.workers or view.get("generation", -1) < 0:
                if time.monotonic() > deadline:
                    raise ClientError(f"the workers did not form one group within 90 s (last view: {view})")
                time.sleep(0.5)
                view = _json(call("GET", urls[0] + "/workers", deadline - time.monotonic()))
            source = work / "input.txt"
            source.write_text("".join(f"line {n}\n" for n in range(100)))
            body = {
                "name": "demo-file-source",
                "config": {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                    "file": str(source),
                    "topic": "demo-lines",
                    "tasks.max": "1",
                },
            }
            resp = call("POST", urls[-1] + "/connectors", 90, body)
            print(f"POST /connectors -> {resp.status_code}")
            status: dict[str, Any] = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                status = _json(call("GET", urls[1 % len(urls)] + "/connectors/demo-file-source/status", 30))
                tasks = status.get("tasks") or [{}]
                if status.get("connector", {}).get("state") == "RUNNING" and tasks[0].get("worker_id"):
                    break
                time.sleep(1)
            print(f"GET /connectors/demo-file-source/status -> {_status_line(status)}")
            deadline = time.monotonic() + 60
            while (
                time.monotonic() < deadline
            ):  # the leader's view, once the rebalance handing out the task ended
                view = _json(call("GET", urls[0] + "/workers", 30))
                owned = [t for m in view.get("members", []) for t in m["assignment"]["tasks"]]
                if view.get("source") == "leader" and owned == ["demo-file-source-0"]:
                    break
                time.sleep(1)
            print("GET /workers ->")
            for line in _group_lines(view):
                print(f"  {line}")
            # The pipeline's other half: a FileStream sink writes the lines back out of the topic (under the
            # demo's local master, a consumer loop on its worker: README "What runs where").
            output = work / "output.txt"
            sink = {
                "name": "demo-file-sink",
                "config": {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                    "file": str(output),
                    "topics": "demo-lines",
                    "tasks.max": "1",
                },
            }
            resp = call("POST", urls[0] + "/connectors", 90, sink)
            print(f"POST /connectors (demo-file-sink) -> {resp.status_code}")
            if jar is not None:
                # The same topic into an Iceberg table, written by Spark on the worker that runs the task.
                table = demo_table.sink_config(warehouse, "demo-lines")
                table_sink = {"name": "demo-iceberg-sink", "config": table}
                resp = call("POST", urls[1 % len(urls)] + "/connectors", 90, table_sink)
                table_posted = time.monotonic()
                print(f"POST /connectors (demo-iceberg-sink) -> {resp.status_code}")
        except ClientError as exc:
            print(f"kconnect demo: {exc.message} (logs in {work})", file=sys.stderr)
            return EXIT_STARTUP
        arrived = 0
        started = time.monotonic()
        while time.monotonic() - started < 120:
            arrived = len(output.read_text().splitlines()) if output.exists() else 0
            if arrived >= 100:
                break
            time.sleep(1)
        print(
            f"kconnect demo: {arrived} of 100 lines went {source.name} -> topic demo-lines -> {output.name}"
            f" (FileStream source and sink tasks) in {time.monotonic() - started:.0f} s"
        )
        rows = -1 if reader is None else _show_table(reader, work, table_posted)
        print(_next_steps(urls[0], args.keep_running))
        if args.keep_running:
            print("kconnect demo: running; Ctrl-C stops it")
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
        ok = status.get("connector", {}).get("state") == "RUNNING" and arrived >= 100
        ok = ok and (reader is None or rows == 100)
        return 0 if ok else EXIT_STARTUP
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        if reader is not None:
            reader.stop()
        b.stop()


def _show_table(reader: demo_table.TableReader, work: Path, posted: float) -> int:
    """Wait until the table holds every line, then print two Spark SQL queries of it; the row count (-1 when
    the table never appeared or Spark failed, said on stderr)."""
    deadline = time.monotonic() + TABLE_WAIT_S
    row: dict[str, Any] = {}
    try:
        while time.monotonic() < deadline:
            if reader.table_exists():
                (row,) = reader.query(demo_table.SUMMARY_SQL, deadline - time.monotonic())
                if row.get("rows", 0) >= 100:
                    break
            time.sleep(1)
        if not row:
            print(
                f"kconnect demo: the Iceberg table {demo_table.TABLE} did not appear within {TABLE_WAIT_S} s "
                f"(logs in {work})",
                file=sys.stderr,
            )
            return -1
        print(
            f"kconnect demo: topic demo-lines -> Iceberg table {demo_table.TABLE} (IcebergSinkConnector, "
            f"Spark) in {work / 'warehouse'}, {time.monotonic() - posted:.0f} s after its sink was created"
        )
        print(f"spark-sql> {demo_table.SUMMARY_SQL}")
        print(f"  {demo_table.summary_line(row)}")
        print(f"spark-sql> {demo_table.SAMPLE_SQL}")
        for sample in reader.query(demo_table.SAMPLE_SQL, 60):
            print("  " + ", ".join(f"{k}={v}" for k, v in sample.items()))
    except Exception as exc:  # Spark's errors come in many classes; the demo reports any
        print(f"kconnect demo: reading the Iceberg table failed: {exc} (logs in {work})", file=sys.stderr)
        return -1
    return int(row.get("rows", -1))


def _json(resp: httpx.Response) -> dict[str, Any]:
    """An answer's JSON object, or an empty one (an error answer's or a non-object's) for the demo's polls."""
    try:
        body = resp.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _next_steps(url: str, keep_running: bool) -> str:
    """Where to look next: the demo's cluster stops with it unless asked to keep running, so the hint
    says how to keep it before it names what to curl."""
    where = "" if keep_running else "with `kconnect demo --keep-running`, "
    paths = ("/connectors?expand=status", "/workers", "/connectors/demo-file-source/topics", "/metrics")
    return f"kconnect demo: next, {where}try " + ", ".join(f"curl {url}{path}" for path in paths)


def _status_line(status: Mapping[str, Any]) -> str:
    """One line for a connector's status answer (the demo's output; the JSON is one GET away)."""
    connector = status.get("connector") or {}
    parts = [f"connector {connector.get('state', '?')} on {connector.get('worker_id', '?')}"]
    for task in status.get("tasks") or []:
        parts.append(f"task {task.get('id', '?')} {task.get('state', '?')} on {task.get('worker_id', '?')}")
    return "; ".join(parts)


def _group_lines(view: Mapping[str, Any]) -> list[str]:
    """``GET /workers`` as a few lines: the group, then each member's URL and what it runs."""
    lines = [
        f"group {view.get('group')}, protocol {view.get('protocol')}, generation {view.get('generation')}, "
        f"leader {view.get('leader_url')}"
    ]
    for member in view.get("members", []):
        assignment = member.get("assignment") or {}
        held = [*assignment.get("connectors", []), *assignment.get("tasks", [])]
        role = " (leader)" if member.get("leader") else ""
        lines.append(f"{member.get('url')}{role}: {', '.join(held) if held else 'nothing'}")
    return lines
