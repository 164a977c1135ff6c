"""The kconnect side of ``dataplane.py``: one kconnect worker per ``--group-protocol``, placement and
Spark master, warmed up before the clock, then the FileStream pipeline (plain and with two transforms),
``--pipelines`` concurrent pipelines and Kafka -> Parquet on it. Split out of ``dataplane.py``, which
still exports these names."""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import shutil
import time
import uuid
from collections.abc import Sequence
from pathlib import Path

import httpx
import spark_standalone
from confluent_kafka import Producer
from file_pipeline import (
    FLUSH_INTERVAL_MS,
    PARQUET_CLASS,
    STRING_CONVERTER,
    TRANSFORMS_LABEL,
    Result,
    Sentinels,
    connector_configs,
    create_topic,
    produce_all,
    same_lines,
    wait_for_lines,
    wait_for_size,
)
from proc_tree import Meter, mib, tree_rss

from kconnect.runtime.cli.broker import free_port
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.spark_cluster import StandaloneCluster


def kconnect_worker(
    bootstrap: str,
    work: Path,
    group_protocol: str,
    source_placement: str = "auto",
    sink_placement: str = "auto",
    cluster: StandaloneCluster | None = None,
) -> WorkerProcess:
    """A started kconnect worker with the bench's converters and flush interval, on ``local[2]`` or, with
    ``cluster``, on that standalone Spark cluster (``spark_standalone``)."""
    group = f"kc-{group_protocol}-{uuid.uuid4().hex[:6]}"
    props = worker_properties(bootstrap, group, free_port())
    props.update(
        {
            "group.protocol": group_protocol,
            "source.task.placement": source_placement,
            "sink.task.placement": sink_placement,
            "key.converter": STRING_CONVERTER,
            "value.converter": STRING_CONVERTER,
            "offset.flush.interval.ms": FLUSH_INTERVAL_MS,
            "spark.master": "local[2]",
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "1",
            # Loopback for both: a driver bound to one address but advertising another cannot fetch
            # its own large task results (a micro-batch's Arrow rows) from its block manager.
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.host": "127.0.0.1",
        }
    )
    if cluster is not None:
        props.update(spark_standalone.worker_properties(cluster))
    return WorkerProcess(work, props, name=group, spark=True).start()


class Health:
    """``alive()`` for a kconnect run: the process is up and (checked every 2 s) no task has FAILED."""

    def __init__(self, worker: WorkerProcess, connectors: list[str]) -> None:
        self.worker = worker
        self.connectors = connectors
        self._next = 0.0

    def __call__(self) -> bool:
        if not self.worker.alive():
            return False
        if time.monotonic() < self._next:
            return True
        self._next = time.monotonic() + 2
        for name in self.connectors:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                body = self.worker.get(f"/connectors/{name}/status").json()
                for task in body.get("tasks", []) if isinstance(body, dict) else []:
                    if task.get("state") == "FAILED":
                        raise RuntimeError(
                            f"{name} task {task.get('id')} FAILED: {task.get('trace', '')[-3000:]}"
                        )
        return True


def create(worker: WorkerProcess, name: str, config: dict[str, str]) -> None:
    resp = worker.request("POST", "/connectors", json={"name": name, "config": config})
    if resp.status_code != 201:
        raise RuntimeError(f"creating {name} on the kconnect worker: {resp.status_code} {resp.text}")


def warm_up(
    worker: WorkerProcess, bootstrap: str, work: Path, group_protocol: str, source: bool = False
) -> None:
    """Start the worker's SparkSession with a one-record sink connector, then delete the connector. With
    ``source`` (on a standalone cluster, where ``auto`` places source tasks on a source host, a Spark job
    on an executor) a one-line FileStream source into the same topic too: the executor, its Python daemon
    and a source host are then up before the clock, as on a worker that already runs tasks."""
    topic = f"warm-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"warm")
    producer.flush(10)
    out = work / f"{topic}.txt"  # the topic's name: each warm-up (a master, a protocol) a file of its own
    names = ["bench-warm"]
    create(worker, "bench-warm", {"connector.class": "FileStreamSink", "file": str(out), "topics": topic})
    want = 5
    if source:
        lines = work / f"{topic}-input.txt"
        lines.write_text("warm source\n")
        config = {"connector.class": "FileStreamSource", "file": str(lines), "topic": topic}
        create(worker, "bench-warm-source", config)
        names.append("bench-warm-source")
        want += len("warm source\n")
    wait_for_size(out, want, 900 if source else 300, Health(worker, names))
    generation = worker.get("/workers").json()["this_worker"]["generation"]
    for name in names:
        worker.request("DELETE", f"/connectors/{name}")
    wait_until(lambda: worker.get("/connectors").json() == [], 60, "the warm-up connectors to go")

    def settled() -> bool:
        # The deletion's rebalance done, none under way: else the timed run's first requests would
        # wait it out (a write needs a settled group) and the clock would include the warm-up's round.
        # Under group.protocol=connect a deletion is reconciled without a round (no new generation).
        me = worker.get("/workers").json()["this_worker"]
        idle = not me["rebalancing"] and not me["assignment"]["connectors"] and not me["assignment"]["tasks"]
        return bool(idle and (group_protocol == "connect" or me["generation"] > generation))

    wait_until(settled, 60, "the group to settle after the warm-up")


def delete_all(worker: WorkerProcess, names: list[str]) -> None:
    """Delete connectors and wait until the worker holds none (so the next run starts from an idle worker)."""
    for name in names:
        worker.request("DELETE", f"/connectors/{name}")

    def idle() -> bool:
        me = worker.get("/workers").json()["this_worker"]
        held = me["assignment"]["connectors"] or me["assignment"]["tasks"]
        return worker.get("/connectors").json() == [] and not held and not me["rebalancing"]

    wait_until(idle, 120, "the bench connectors to go")


def run_kconnect(
    worker: WorkerProcess,
    bootstrap: str,
    source: Path,
    out: Path,
    records: int,
    idle: dict[str, int],
    group_protocol: str,
    transforms: bool = False,
    broker_pid: int | None = None,
    placement_label: str = "",
    query_sink: bool = False,
    others: Sequence[int] = (),
) -> Result:
    topic = f"kc-{uuid.uuid4().hex[:6]}-lines"
    create_topic(bootstrap, topic)
    line_size = source.stat().st_size // records
    assert worker.proc is not None
    # Each sink batch's timings in the worker's log (kept with --keep).
    worker.request("PUT", "/admin/loggers/kconnect.task", json={"level": "DEBUG"})
    # Names of their own per variant: a FileStreamSource named as an earlier one, on the same file, would
    # resume from the earlier one's stored offset (the end of the file) and send nothing.
    configs = connector_configs(source, out, topic, transforms, "bench-tx" if transforms else "bench")
    # A query sink (sink.task.placement=query; transforms make it one whatever the placement) needs the
    # sentinels on this broker.
    sentinels = Sentinels(bootstrap, [topic], query_sink or transforms)
    with Meter(worker.proc.pid, broker_pid, others) as meter, sentinels:
        started = time.monotonic()
        for name, config in configs.items():
            create(worker, name, config)
        finished = wait_for_lines(out, records, line_size, 1800, Health(worker, list(configs)))
        meter.stop()
    peak = meter.peak
    delete_all(worker, list(configs))
    ok = same_lines(source, out)
    memory = {
        "idle worker (no Spark)": mib(idle["root"]),
        "peak with 2 tasks": mib(peak["root"]),
        "per running task": mib((peak["root"] - idle["root"]) // 2),
        "Spark JVM peak": mib(peak["jvm"]),
        "Spark Python workers peak": mib(peak["other"]),
    }
    label = f"kconnect (Spark) {group_protocol}{placement_label}" + (TRANSFORMS_LABEL if transforms else "")
    return Result(
        label,
        records,
        finished - started,
        "" if ok else "OUTPUT DIFFERS",
        memory,
        side="kconnect",
        variant="transforms" if transforms else "plain",
        cpu=meter.cpu,
        peak_rss=peak["total"],
    )


def run_pipelines(
    worker: WorkerProcess,
    bootstrap: str,
    work: Path,
    source: Path,
    records: int,
    count: int,
    group_protocol: str,
    broker_pid: int | None = None,
    query_sink: bool = False,
    others: Sequence[int] = (),
) -> Result:
    """``count`` independent FileStream pipelines at once on one worker, each moving ``records`` lines."""
    line_size = source.stat().st_size // records
    pipes = []
    for i in range(count):
        tag = f"p{count}x{i}"
        src = work / f"pipe-{tag}-input.txt"
        shutil.copyfile(source, src)
        topic = f"kc-{uuid.uuid4().hex[:6]}-{tag}-lines"
        create_topic(bootstrap, topic)
        pipes.append((f"bench-{tag}", src, work / f"pipe-{tag}-out.txt", topic))
    names = [f"{prefix}-{kind}" for prefix, *_ in pipes for kind in ("source", "sink")]
    assert worker.proc is not None
    health = Health(worker, names)
    topics = [topic for *_, topic in pipes]
    with Meter(worker.proc.pid, broker_pid, others) as meter, Sentinels(bootstrap, topics, query_sink):
        started = time.monotonic()
        for prefix, src, out, topic in pipes:
            for name, config in connector_configs(src, out, topic, prefix=prefix).items():
                create(worker, name, config)
        finished = max(wait_for_lines(out, records, line_size, 1800, health) for _, _, out, _ in pipes)
        meter.stop()
    delete_all(worker, names)
    ok = all(same_lines(src, out) for _, src, out, _ in pipes)
    label = f"kconnect {group_protocol}, {count} pipeline{'s' if count > 1 else ''}"
    return Result(
        label,
        records * count,
        finished - started,
        "" if ok else "OUTPUT DIFFERS",
        side="pipelines",
        variant=str(count),
        cpu=meter.cpu,
        peak_rss=meter.peak["total"],
    )


# --- Kafka -> Parquet (the connector is another helper's work; this slot runs once it is importable)


def parquet_available() -> bool:
    try:
        return importlib.util.find_spec("kconnect.connectors.parquet") is not None and hasattr(
            importlib.import_module("kconnect.connectors.parquet"), "ParquetSinkConnector"
        )
    except ImportError:
        return False


def parquet_rows(path: Path) -> int:
    import pyarrow.parquet as pq

    rows = 0
    for file in path.rglob("*.parquet"):
        with contextlib.suppress(Exception):  # a file still being written
            rows += pq.ParquetFile(file).metadata.num_rows
    return rows


def run_parquet(
    worker: WorkerProcess, bootstrap: str, source: Path, work: Path, records: int, group_protocol: str
) -> Result:
    label = f"kconnect Kafka -> Parquet {group_protocol}"
    if not parquet_available():
        return Result(label, records, None, f"not available ({PARQUET_CLASS})")
    topic = f"pq-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    with open(source, "rb") as f:
        lines = (line.rstrip(b"\n") for line in f)
        produce_all(producer, topic, itertools.islice(lines, records - 1))
        # The last record in a batch of its own: the Parquet sink is a query, and the embedded broker's
        # high watermark reaches past a batch only when it holds one record (module docstring).
        producer.flush(60)
        produce_all(producer, topic, lines)
    producer.flush(60)
    path = work / f"parquet-{group_protocol}"
    path.mkdir()
    started = time.monotonic()
    create(
        worker,
        "bench-parquet",
        {
            "connector.class": PARQUET_CLASS,
            "topics": topic,
            "path": str(path),
            "flush.size": str(min(records, 100000)),
            "tasks.max": "1",
        },
    )
    health = Health(worker, ["bench-parquet"])
    wait_until(lambda: parquet_rows(path) >= records or not health(), 1800, "parquet rows", 0.5)
    finished = time.monotonic()
    worker.request("DELETE", "/connectors/bench-parquet")
    return Result(label, records, finished - started, "topic pre-loaded")


def run_kconnect_rows(
    bootstrap: str,
    work: Path,
    source: Path,
    records: int,
    only: set[str],
    group_protocol: str,
    broker_pid: int | None = None,
    pipelines: list[int] | None = None,
    source_placement: str = "auto",
    sink_placement: str = "auto",
    spark_master: str = "local",
) -> list[Result]:
    """The kconnect rows on one fresh kconnect worker with ``group.protocol=group_protocol``: FileStream
    plain and with two transforms, Parquet, and ``pipelines`` (counts of concurrent FileStream pipelines).
    With ``source_placement=executor`` the FileStream source task runs as a Spark job (a Python worker of
    the local master) instead of on the worker's thread; the transforms row's source has no transforms,
    so it moves too. ``sink_placement`` is the worker's ``sink.task.placement``: ``auto`` runs the
    untransformed sink as a consumer loop on this local master, ``query`` as a Structured Streaming query.
    ``spark_master`` ``standalone`` runs the worker on a standalone Spark cluster of its own
    (``spark_standalone``), started for these rows and stopped after them; its master's and worker's
    trees (the executor, its Python workers) then count with the worker's, and the rows are labelled
    ``standalone``."""
    if spark_master == "standalone" and (why := spark_standalone.available()) is not None:
        return [
            Result(f"kconnect (Spark) {group_protocol} standalone", records, None, f"not available: {why}")
        ]
    with contextlib.ExitStack() as stack:
        cluster = (
            stack.enter_context(spark_standalone.running(work)) if spark_master == "standalone" else None
        )
        return _rows_on_worker(
            bootstrap,
            work,
            source,
            records,
            only,
            group_protocol,
            broker_pid,
            pipelines or [],
            source_placement,
            sink_placement,
            cluster,
        )


def _rows_on_worker(
    bootstrap: str,
    work: Path,
    source: Path,
    records: int,
    only: set[str],
    group_protocol: str,
    broker_pid: int | None,
    pipelines: list[int],
    source_placement: str,
    sink_placement: str,
    cluster: StandaloneCluster | None,
) -> list[Result]:
    results: list[Result] = []
    worker = kconnect_worker(bootstrap, work, group_protocol, source_placement, sink_placement, cluster)
    others = spark_standalone.roots(cluster) if cluster is not None else []
    placed = " src on executor" if source_placement == "executor" else ""
    placed += " sink query" if sink_placement == "query" else ""
    placed += " standalone" if cluster is not None else ""
    # On a cluster ``auto`` may make a busy sink a query of its own (issue 32), which needs the sentinels.
    query_sink = sink_placement == "query" or cluster is not None
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 120, "the join")
        assert worker.proc is not None
        time.sleep(1)
        idle = tree_rss(worker.proc.pid)
        print(
            f"kconnect {group_protocol}{placed}: starting the SparkSession (warm-up, not timed) ...",
            flush=True,
        )
        warm_up(worker, bootstrap, work, group_protocol, source=cluster is not None)
        # The plain pipeline, then the one with two transforms (a query sink whatever the placement).
        variants = [False] if "kconnect" in only else []
        if {"kconnect", "transforms"} <= only:
            variants.append(True)
        for transforms in variants:
            what = "FileStream source and sink" + (", two transforms" if transforms else "")
            print(f"kconnect {group_protocol}{placed}: {what} ...", flush=True)
            tail = "-transforms" if transforms else ""
            name = f"out-kconnect-{group_protocol}{placed.replace(' ', '-')}{tail}"
            results.append(
                run_kconnect(
                    worker,
                    bootstrap,
                    source,
                    work / f"{name}.txt",
                    records,
                    idle,
                    group_protocol,
                    transforms=transforms,
                    broker_pid=broker_pid,
                    placement_label=placed,
                    query_sink=query_sink,
                    others=others,
                )
            )
        for count in pipelines:
            print(f"kconnect {group_protocol}{placed}: {count} FileStream pipelines at once ...", flush=True)
            results.append(
                run_pipelines(
                    worker,
                    bootstrap,
                    work,
                    source,
                    records,
                    count,
                    group_protocol,
                    broker_pid,
                    query_sink,
                    others,
                )
            )
        if "parquet" in only:
            print(f"kconnect {group_protocol}{placed}: Kafka -> Parquet ...", flush=True)
            results.append(run_parquet(worker, bootstrap, source, work, records, group_protocol))
    finally:
        with contextlib.suppress(Exception):
            worker.stop(60)
        if worker.alive():
            worker.kill()
    return results
