"""Data-plane throughput, side by side on one embedded broker: file -> Kafka -> file.

Three systems move the same input file (``--records`` lines of ``--size`` bytes, default 1,000,000 x 100)
from a file through a fresh topic into an output file, one after the other:

1. **ceiling**: a plain confluent-kafka producer and consumer (consumer on a thread, started first): what
   this machine and broker allow a Python client at all.
2. **reference**: Apache Kafka Connect 3.9 (``/work/shared/tools/reference-connect``), one distributed
   worker, FileStreamSource (``batch.size`` 2000) and FileStreamSink, StringConverter both sides.
3. **kconnect**: one kconnect worker with the Spark executor, the same connectors, converters and
   settings. Its SparkSession is started before the clock (a warm-up sink connector), as a worker that
   already runs tasks has it; the reference worker is likewise started and joined before its clock.
   Once per ``--group-protocol`` value (default ``connect,classic``), each on a fresh worker and group:
   under ``connect`` the new connectors and tasks are reconciled without a JoinGroup/SyncGroup round,
   under ``classic`` each assignment is a round, as in Apache Kafka Connect.

Each time runs from connector creation (ceiling: first produce) until the output file holds every line;
the outputs are then compared with the input. Peak resident memory is sampled from ``/proc`` every
0.2 s: a worker's RSS with its two tasks running minus its idle RSS (per task), and for kconnect the Spark
JVM and Spark's Python workers separately. Then, when ``kconnect.connectors.parquet.ParquetSinkConnector``
is importable, Kafka -> Parquet records per second on the same kconnect worker.

``transforms`` runs the reference and kconnect FileStream pipelines again with two sink transforms that
both implement and that work on string values (``TRANSFORMS``: RegexRouter, then TimestampRouter).
``pipelines`` runs ``--pipelines`` (default 1, 2, 4) independent FileStream pipelines at once on the first
kconnect worker and prints their aggregate records/s. For the reference and kconnect rows a second table
puts side by side: wall seconds, records/s, CPU seconds of the worker process and of the processes below it
(kconnect's Spark JVM and Python workers), µs of CPU per record, the broker's CPU seconds and the worker
tree's peak RSS; then whether each target holds (CPU per record at most the reference's, wall time at most
half, records/s at least 2x).

    .venv/bin/python bench/dataplane.py                     # 1,000,000 records; minutes on 2 cores
    .venv/bin/python bench/dataplane.py --records 100000    # a quick run
    .venv/bin/python bench/dataplane.py --only ceiling,kconnect
    .venv/bin/python bench/dataplane.py --group-protocol connect    # kconnect rows for one protocol only
    .venv/bin/python bench/dataplane.py --only reference,kconnect,transforms   # the side-by-side rows
    .venv/bin/python bench/dataplane.py --only reference,kconnect --group-protocol connect \
        --source-placement worker,executor    # the source task on the worker's thread, then as a Spark job
    .venv/bin/python bench/dataplane.py --only reference,kconnect --group-protocol connect \
        --sink-placement auto,query    # the sink as a consumer loop (issue 22), then as a streaming query

Test-broker workaround, in this bench only (the product targets Apache Kafka): a sink task that runs as a
Structured Streaming query (``--sink-placement query``, the transforms rows, Parquet) plans each
micro-batch up to the high watermark, and the embedded broker reports it as the base offset of a
partition's last batch + 1 (DESIGN.md, test broker quirk 2), so the tail of the source's last batch would
never be read. While such a sink runs, the bench therefore writes a one-record "sentinel" batch (value
``#``) to its topic every second, and sentinel lines are left out when the output is counted and compared
(``Sentinels``); the Parquet row's pre-loaded topic ends with a batch of one record instead. A consumer
loop (the default under this local master) and the reference read every record the broker serves and need
neither.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx
import process_cpu
import results as bench_results
from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli import broker as embedded
from kconnect.runtime.cli.broker import free_port
from tests.support.cluster import WorkerProcess, wait_until, worker_properties
from tests.support.processes import command_name, descendants
from tests.support.reference import ReferenceWorker, reference_available

STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
#: The value of the test-broker workaround's one-record batches (module docstring, ``Sentinels``).
SENTINEL = b"#"
PARQUET_CLASS = "kconnect.connectors.parquet.ParquetSinkConnector"
#: The JVM options ``connect-distributed.sh`` runs a worker with (its heap, kafka-run-class.sh's GC settings),
#: not the test harness's small C1-only JVM, which is tuned for start-up time, not throughput.
REFERENCE_JAVA_OPTS = (
    "-Xms256M -Xmx2G -server -XX:+UseG1GC -XX:MaxGCPauseMillis=20 -XX:InitiatingHeapOccupancyPercent=35 "
    "-XX:+ExplicitGCInvokesConcurrent -Djava.awt.headless=true"
)
#: Both workers commit sink offsets / flush source offsets this often (the reference harness's setting).
FLUSH_INTERVAL_MS = "1000"


def bench_reference_worker(
    bootstrap: str,
    group: str,
    log_path: Path,
    extra: Mapping[str, str] | None = None,
    **options: Any,
) -> ReferenceWorker:
    """An Apache Kafka Connect worker as the benches run one (not started): String converters, offsets
    flushed every ``FLUSH_INTERVAL_MS``, ``connect-distributed.sh``'s JVM options, internal topics named
    for ``group``; ``extra`` worker properties on top, ``options`` to ``ReferenceWorker`` (its version,
    partitions)."""
    return ReferenceWorker(
        bootstrap,
        group_id=group,
        config_topic=f"{group}-configs",
        offset_topic=f"{group}-offsets",
        status_topic=f"{group}-status",
        log_path=log_path,
        extra={
            "key.converter": STRING_CONVERTER,
            "value.converter": STRING_CONVERTER,
            "offset.flush.interval.ms": FLUSH_INTERVAL_MS,
            **(extra or {}),
        },
        java_opts=REFERENCE_JAVA_OPTS,
        **options,
    )


# ------------------------------------------------------------------------------------------ /proc


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


#: The process tree read from /proc (one implementation for the benches and the tests).
_comm = command_name
_descendants = descendants


#: The CPU reading every bench shares (process_cpu.py); the old names stay for the benches that use them.
_TICK = process_cpu.TICK
_cpu_ticks = process_cpu.cpu_ticks
tree_cpu = process_cpu.tree_cpu


class Meter:
    """CPU seconds of a process tree and of the broker, and the tree's peak RSS, from enter to stop()."""

    def __init__(self, pid: int, broker_pid: int | None) -> None:
        self.pid = pid
        self.broker_pid = broker_pid
        self.sampler = PeakSampler(pid)
        self.cpu: dict[str, float] = {}

    def _broker(self) -> float:
        return sum(_cpu_ticks(self.broker_pid)) / _TICK if self.broker_pid else 0.0

    def __enter__(self) -> Meter:
        self._start = {**tree_cpu(self.pid), "broker": self._broker()}
        self.sampler.__enter__()
        return self

    def stop(self) -> None:
        """Take the CPU figures now (the moment the output is complete)."""
        end = {**tree_cpu(self.pid), "broker": self._broker()}
        self.cpu = {k: end[k] - self._start[k] for k in end}

    def __exit__(self, *exc: object) -> None:
        if not self.cpu:
            self.stop()
        self.sampler.__exit__()

    @property
    def peak(self) -> dict[str, int]:
        return self.sampler.peak


def tree_rss(root: int) -> dict[str, int]:
    """RSS in KiB of a process tree by kind: the root itself, JVMs below it, other processes below it."""
    usage = {"root": _rss_kib(root), "jvm": 0, "other": 0}
    for pid in _descendants(root):
        usage["jvm" if _comm(pid) == "java" else "other"] += _rss_kib(pid)
    return usage


class PeakSampler:
    """Samples ``tree_rss(pid)`` every 0.2 s on a thread and keeps the peak of each kind and of their sum."""

    def __init__(self, pid: int) -> None:
        self.pid = pid
        self.peak = {"root": 0, "jvm": 0, "other": 0, "total": 0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            usage = tree_rss(self.pid)
            usage["total"] = sum(usage.values())
            for kind, kib in usage.items():
                self.peak[kind] = max(self.peak[kind], kib)
            self._stop.wait(0.2)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


# ------------------------------------------------------------------------------------------ helpers


@dataclass
class Result:
    system: str
    records: int
    seconds: float | None
    note: str = ""
    memory: dict[str, str] = field(default_factory=dict)
    #: For the side-by-side table: "kconnect" or "reference", and "plain" or "transforms".
    side: str = ""
    variant: str = ""
    #: CPU seconds: "root" the worker process, "below" its child processes (Spark), "broker" the broker's.
    cpu: dict[str, float] = field(default_factory=dict)
    #: Peak RSS in KiB of the whole process tree (worker and, for kconnect, Spark's JVM and Python workers).
    peak_rss: int = 0

    @property
    def rate(self) -> float | None:
        return self.records / self.seconds if self.seconds else None


def make_input(path: Path, records: int, size: int) -> None:
    """``records`` lines, each ``size`` bytes before its newline: a sequence number, then filler."""
    filler = "x" * max(0, size - 10)
    with open(path, "w", encoding="ascii") as f:
        for start in range(0, records, 10000):
            f.write("".join(f"{n:010d}{filler}\n" for n in range(start, min(records, start + 10000))))


def create_topic(bootstrap: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
        future.result(30)


def wait_for_size(path: Path, size: int, timeout: float, alive: Callable[[], bool]) -> float:
    """Wait until ``path`` holds at least ``size`` bytes; the monotonic time it did."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError):
            if path.stat().st_size >= size:
                return time.monotonic()
        if not alive():
            raise RuntimeError("the system under test died")
        time.sleep(0.05)
    have = path.stat().st_size if path.exists() else 0
    raise TimeoutError(f"{path} holds {have} of {size} bytes after {timeout:.0f} s")


def same_lines(expected: Path, actual: Path) -> bool:
    """Whether ``actual`` holds exactly the lines of ``expected``, in order (sentinel lines left out)."""
    with open(expected, "rb") as e, open(actual, "rb") as a:
        lines = (line for line in a if line.rstrip(b"\n") != SENTINEL)
        for want in e:
            if next(lines, None) != want:
                return False
        return next(lines, None) is None


def mib(kib: int) -> str:
    return f"{kib / 1024:.0f} MiB"


# ------------------------------------------------------------------------------------------ systems


def run_ceiling(bootstrap: str, source: Path, out: Path, records: int) -> Result:
    topic = f"ceiling-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    expected_size = source.stat().st_size
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"ceiling-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    done = threading.Event()
    errors: list[str] = []

    def consume() -> None:
        got = 0
        with open(out, "wb") as f:
            while got < records and not done.is_set():
                batch = consumer.consume(num_messages=10000, timeout=0.2)
                lines = []
                for msg in batch:
                    if msg.error() is not None:
                        errors.append(str(msg.error()))
                        continue
                    lines.append(msg.value())
                if lines:
                    lines.append(b"")
                    f.write(b"\n".join(lines))
                    got += len(lines) - 1
            f.flush()

    reader = threading.Thread(target=consume, daemon=True)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    started = time.monotonic()
    reader.start()
    with open(source, "rb") as f:
        for line in f:
            while True:
                try:
                    producer.produce(topic, line.rstrip(b"\n"))
                    break
                except BufferError:
                    producer.poll(0.05)
    producer.flush(60)
    finished = wait_for_size(out, expected_size, 600, reader.is_alive)
    done.set()
    reader.join(30)
    consumer.close()
    ok = same_lines(source, out)
    return Result("confluent-kafka (ceiling)", records, finished - started, "" if ok else "OUTPUT DIFFERS")


#: Client settings that give the reference worker librdkafka's batching (kconnect's clients are
#: librdkafka): the Java producer's defaults (linger.ms 0, batch.size 16 KiB) send many small batches, and
#: on this broker a consumer's fetch costs about the same whatever a batch holds, so the defaults alone
#: slow the Java sink. The "tuned" run shows how much of the gap is defaults rather than the runtime.
REFERENCE_TUNED = {
    "producer.linger.ms": "5",
    "producer.batch.size": "1000000",
    "consumer.max.poll.records": "10000",
    "consumer.max.partition.fetch.bytes": "10485760",
    "consumer.fetch.max.wait.ms": "20",
}


def run_reference(
    bootstrap: str,
    work: Path,
    source: Path,
    out: Path,
    records: int,
    tuned: bool = False,
    transforms: bool = False,
    broker_pid: int | None = None,
) -> Result:
    label = "reference Connect 3.9" + (" (tuned)" if tuned else "") + (TRANSFORMS_LABEL if transforms else "")
    side = "" if tuned else "reference"
    variant = "transforms" if transforms else "plain"
    ok, why = reference_available()
    if not ok:
        return Result(label, records, None, f"not available: {why}", side=side, variant=variant)
    prefix = f"ref-{uuid.uuid4().hex[:6]}"
    topic = f"{prefix}-lines"
    create_topic(bootstrap, topic)
    expected_size = source.stat().st_size
    with bench_reference_worker(
        bootstrap,
        prefix,
        work / f"reference{'-tuned' if tuned else ''}{'-transforms' if transforms else ''}.log",
        REFERENCE_TUNED if tuned else None,
    ) as worker:
        worker.wait_for_log(r"Joined group at generation", 120)
        assert worker.process is not None
        idle = tree_rss(worker.process.pid)
        with Meter(worker.process.pid, broker_pid) as meter:
            started = time.monotonic()
            for name, config in connector_configs(source, out, topic, transforms).items():
                resp = worker.rest("POST", "/connectors", json={"name": name, "config": config})
                if resp.status_code != 201:
                    raise RuntimeError(f"creating {name} on the reference worker: {resp.text}")
            finished = wait_for_size(out, expected_size, 1800, lambda: worker.alive)
            meter.stop()
        peak = meter.peak
    ok = same_lines(source, out)
    jvm_idle = idle["root"] + idle["jvm"]
    jvm_peak = peak["root"] + peak["jvm"]
    memory = {
        "idle worker": mib(jvm_idle),
        "peak with 2 tasks": mib(jvm_peak),
        "per running task": mib((jvm_peak - jvm_idle) // 2),
    }
    return Result(
        label,
        records,
        finished - started,
        "" if ok else "OUTPUT DIFFERS",
        memory,
        side=side,
        variant=variant,
        cpu=meter.cpu,
        peak_rss=peak["total"],
    )


#: The "two transforms" variant's sink transforms. Both are in Apache Kafka Connect 3.9 and in kconnect, and
#: both work on FileStream's schemaless-string records (InsertField, MaskField, ReplaceField and the like
#: need a Struct or Map value; Cast of a whole string value to string is a no-op Spark's optimizer removes).
#: Both run on every record: RegexRouter matches the topic against a regex and rewrites it, TimestampRouter
#: formats the record's timestamp into the topic. FileStreamSink writes values only, so the output file is
#: still the input's lines and is checked as for the plain pipeline. Every bench topic ends in "-lines".
TRANSFORMS = {
    "transforms": "route,stamp",
    "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
    "transforms.route.regex": "(.*)-lines",
    "transforms.route.replacement": "$1-routed",
    "transforms.stamp.type": "org.apache.kafka.connect.transforms.TimestampRouter",
    "transforms.stamp.topic.format": "${topic}-${timestamp}",
    "transforms.stamp.timestamp.format": "yyyyMMdd",
}
TRANSFORMS_LABEL = ", 2 transforms"


def connector_configs(
    source: Path, out: Path, topic: str, transforms: bool = False, prefix: str = "bench"
) -> dict[str, dict[str, str]]:
    return {
        f"{prefix}-source": {
            "connector.class": "FileStreamSource",
            "file": str(source),
            "topic": topic,
            "batch.size": "2000",
            "tasks.max": "1",
        },
        f"{prefix}-sink": {
            "connector.class": "FileStreamSink",
            "file": str(out),
            "topics": topic,
            "tasks.max": "1",
            **(TRANSFORMS if transforms else {}),
        },
    }


class Sentinels:
    """Writes a one-record batch (``SENTINEL``) to topics every second while a query sink reads them: the
    embedded broker's high watermark then reaches past the tail of the source's last batch (module
    docstring). Does nothing when ``active`` is false (a consumer-loop sink needs none)."""

    def __init__(self, bootstrap: str, topics: list[str], active: bool = True) -> None:
        self.topics = topics if active else []
        self._bootstrap = bootstrap
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sentinels", daemon=True)

    def _run(self) -> None:
        producer = Producer({"bootstrap.servers": self._bootstrap, "batch.num.messages": 1, "linger.ms": 0})
        while not self._stop.wait(1.0):
            for topic in self.topics:
                producer.produce(topic, SENTINEL)
            producer.flush(10)

    def __enter__(self) -> Sentinels:
        if self.topics:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()


def count_lines(path: Path) -> int:
    """The lines of ``path``, sentinel lines left out."""
    with open(path, "rb") as f:
        return sum(1 for line in f if line.rstrip(b"\n") != SENTINEL)


def wait_for_lines(
    path: Path, records: int, line_size: int, timeout: float, alive: Callable[[], bool]
) -> float:
    """Wait until ``path`` holds ``records`` lines; the monotonic time it did."""
    deadline = time.monotonic() + timeout
    while True:
        at = wait_for_size(path, records * line_size, max(1.0, deadline - time.monotonic()), alive)
        if count_lines(path) >= records:
            return at
        time.sleep(0.2)


def kconnect_worker(
    bootstrap: str,
    work: Path,
    group_protocol: str,
    source_placement: str = "auto",
    sink_placement: str = "auto",
) -> WorkerProcess:
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


def warm_up(worker: WorkerProcess, bootstrap: str, work: Path, group_protocol: str) -> None:
    """Start the worker's SparkSession with a one-record sink connector, then delete the connector."""
    topic = f"warm-{uuid.uuid4().hex[:6]}"
    create_topic(bootstrap, topic)
    producer = Producer({"bootstrap.servers": bootstrap})
    producer.produce(topic, b"warm")
    producer.flush(10)
    out = work / f"warm-{group_protocol}.txt"
    create(worker, "bench-warm", {"connector.class": "FileStreamSink", "file": str(out), "topics": topic})
    wait_for_size(out, 5, 300, worker.alive)
    generation = worker.get("/workers").json()["this_worker"]["generation"]
    worker.request("DELETE", "/connectors/bench-warm")
    wait_until(lambda: worker.get("/connectors").json() == [], 60, "the warm-up connector to go")

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
    with Meter(worker.proc.pid, broker_pid) as meter, Sentinels(bootstrap, [topic], query_sink or transforms):
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
    with Meter(worker.proc.pid, broker_pid) as meter, Sentinels(bootstrap, topics, query_sink):
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
        lines = iter(f)
        last = next(lines)
        for line in lines:
            while True:
                try:
                    producer.produce(topic, last.rstrip(b"\n"))
                    break
                except BufferError:
                    producer.poll(0.05)
            last = line
    # The last record in a batch of its own: the Parquet sink is a query, and the embedded broker's high
    # watermark reaches past a batch only when it holds one record (module docstring).
    producer.flush(60)
    producer.produce(topic, last.rstrip(b"\n"))
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
) -> list[Result]:
    """The kconnect rows on one fresh kconnect worker with ``group.protocol=group_protocol``: FileStream
    plain and with two transforms, Parquet, and ``pipelines`` (counts of concurrent FileStream pipelines).
    With ``source_placement=executor`` the FileStream source task runs as a Spark job (a Python worker of
    the local master) instead of on the worker's thread; the transforms row's source has no transforms,
    so it moves too. ``sink_placement`` is the worker's ``sink.task.placement``: ``auto`` runs the
    untransformed sink as a consumer loop on this local master, ``query`` as a Structured Streaming query."""
    results: list[Result] = []
    worker = kconnect_worker(bootstrap, work, group_protocol, source_placement, sink_placement)
    placed = " src on executor" if source_placement == "executor" else ""
    placed += " sink query" if sink_placement == "query" else ""
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 120, "the join")
        assert worker.proc is not None
        time.sleep(1)
        idle = tree_rss(worker.proc.pid)
        print(f"kconnect {group_protocol}: starting the SparkSession (warm-up, not timed) ...", flush=True)
        warm_up(worker, bootstrap, work, group_protocol)
        if "kconnect" in only:
            print(f"kconnect {group_protocol}: FileStream source and sink ...", flush=True)
            out = work / f"out-kconnect-{group_protocol}{placed.replace(' ', '-')}.txt"
            results.append(
                run_kconnect(
                    worker,
                    bootstrap,
                    source,
                    out,
                    records,
                    idle,
                    group_protocol,
                    broker_pid=broker_pid,
                    placement_label=placed,
                    query_sink=sink_placement == "query",
                )
            )
        if {"kconnect", "transforms"} <= only:
            print(f"kconnect {group_protocol}: FileStream source and sink, two transforms ...", flush=True)
            out = work / f"out-kconnect-{group_protocol}{placed.replace(' ', '-')}-transforms.txt"
            results.append(
                run_kconnect(
                    worker,
                    bootstrap,
                    source,
                    out,
                    records,
                    idle,
                    group_protocol,
                    transforms=True,
                    broker_pid=broker_pid,
                    placement_label=placed,
                )
            )
        for count in pipelines or []:
            print(f"kconnect {group_protocol}: {count} FileStream pipelines at once ...", flush=True)
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
                    sink_placement == "query",
                )
            )
        if "parquet" in only:
            print(f"kconnect {group_protocol}: Kafka -> Parquet ...", flush=True)
            results.append(run_parquet(worker, bootstrap, source, work, records, group_protocol))
    finally:
        with contextlib.suppress(Exception):
            worker.stop(60)
        if worker.alive():
            worker.kill()
    return results


# ------------------------------------------------------------------------------------------ main


def print_table(results: list[Result]) -> None:
    reference = next((r.rate for r in results if r.system.startswith("reference")), None)
    print(f"\n{'system':40} {'records':>10} {'seconds':>8} {'rec/s':>10} {'x reference':>11}  note")
    for r in results:
        seconds = f"{r.seconds:.1f}" if r.seconds else "-"
        rate = f"{r.rate:,.0f}" if r.rate else "-"
        ratio = f"{r.rate / reference:.2f}" if r.rate and reference else "-"
        print(f"{r.system:40} {r.records:>10,} {seconds:>8} {rate:>10} {ratio:>11}  {r.note}")
    for r in results:
        if r.memory:
            print(f"\nresident memory, {r.system}:")
            for what, value in r.memory.items():
                print(f"    {what:28} {value:>9}")


def _cpu_row(r: Result) -> str:
    """Seconds, rec/s, CPU s of the worker, of Spark, in all, µs per record, broker CPU s, peak RSS."""
    if not r.seconds or not r.cpu:
        return f"{'-':>7} {'-':>8} {'-':>8} {'-':>8} {'-':>8} {'-':>7} {'-':>8} {'-':>9}  {r.note}"
    below = f"{r.cpu['below']:.1f}" if r.side != "reference" else "-"
    total = r.cpu["root"] + r.cpu["below"]
    return (
        f"{r.seconds:7.1f} {r.rate:8,.0f} {r.cpu['root']:8.1f} {below:>8} {total:8.1f} "
        f"{total * 1e6 / r.records:7.1f} {r.cpu['broker']:8.1f} {mib(r.peak_rss):>9}  {r.note}"
    )


CPU_HEADER = (
    f"{'wall s':>7} {'rec/s':>8} {'cpu wrk':>8} {'cpu spk':>8} {'cpu all':>8} {'µs/rec':>7} "
    f"{'broker':>8} {'peak RSS':>9}"
)


def print_side_by_side(results: list[Result]) -> None:
    """kconnect against the reference, plain and with two transforms, and the verdict on each target."""
    rows = [r for r in results if r.side in ("kconnect", "reference")]
    if rows:
        print(
            "\nside by side (cpu wrk: the worker process, for the reference its JVM; cpu spk: kconnect's "
            "Spark JVM and\nPython workers; cpu all: both; µs/rec: cpu all per record; broker: the "
            "embedded broker's CPU s, not in cpu all;\npeak RSS: the worker's whole process tree)"
        )
        print(f"{'variant':11} {'system':40} {CPU_HEADER}")
        for variant in ("plain", "transforms"):
            for r in (r for r in rows if r.variant == variant):
                print(f"{variant:11} {r.system:40} {_cpu_row(r)}")
    for variant in ("plain", "transforms"):
        ref = next((r for r in rows if r.variant == variant and r.side == "reference"), None)
        if ref is None or not ref.seconds or not ref.cpu:
            continue
        ref_us = (ref.cpu["root"] + ref.cpu["below"]) * 1e6 / ref.records
        for kc in (r for r in rows if r.variant == variant and r.side == "kconnect"):
            if not kc.seconds or not kc.cpu or not kc.rate or not ref.rate:
                continue
            us = (kc.cpu["root"] + kc.cpu["below"]) * 1e6 / kc.records
            ratio = kc.rate / ref.rate
            print(f"\n{kc.system} against {ref.system}:")
            print(
                f"    CPU per record {us:.1f} µs vs {ref_us:.1f} µs ({us / ref_us:.2f}x): "
                f"at most the reference's? {'yes' if us <= ref_us else 'NO'}"
            )
            print(
                f"    wall {kc.seconds:.1f} s vs {ref.seconds:.1f} s ({kc.seconds / ref.seconds:.2f}x): "
                f"at most half ({ref.seconds / 2:.1f} s)? {'yes' if kc.seconds <= ref.seconds / 2 else 'NO'}"
            )
            print(
                f"    end to end {ratio:.2f}x the reference's records/s: at least 2x? "
                f"{'yes' if ratio >= 2 else 'NO'}"
            )
    pipes = [r for r in results if r.side == "pipelines"]
    if pipes:
        print("\nconcurrent FileStream pipelines on one kconnect worker (local[2]), aggregate:")
        print(f"{'pipelines':>9} {'records':>10} {CPU_HEADER}")
        for r in pipes:
            print(f"{r.variant:>9} {r.records:>10,} {_cpu_row(r)}")


#: The chart's title on the documentation site's benchmarks page.
TITLE = "One big pipeline: file -> Kafka -> file (bench/dataplane.py)"


def figures_of(results: list[Result], records: int) -> list[bench_results.Figure]:
    """The side-by-side rows' figures for ``bench/results/dataplane.json``: wall time, records/s, CPU per
    record and peak RSS, kconnect beside the reference, plain and with two transforms. A kconnect row is
    named ``kconnect`` when it is the only one of its variant (one ``--group-protocol``), else by its
    label."""
    shapes = {
        "plain": f"{records:,} records, FileStream file -> Kafka -> file",
        "transforms": f"{records:,} records, 2 transforms on the sink",
    }
    figures = []
    for r in results:
        if r.side not in ("kconnect", "reference") or r.variant not in shapes or not r.seconds or not r.rate:
            continue
        alone = sum(1 for o in results if o.side == r.side and o.variant == r.variant) == 1
        system = "kconnect" if r.side == "kconnect" and alone else bench_results.system_name(r.system)
        shape = shapes[r.variant]
        figures.append(bench_results.figure(system, shape, "wall time", round(r.seconds, 1), "s"))
        figures.append(bench_results.figure(system, shape, "records/s", round(r.rate), "records/s"))
        if r.cpu:
            us = (r.cpu["root"] + r.cpu["below"]) * 1e6 / r.records
            figures.append(bench_results.figure(system, shape, "CPU per record", round(us, 1), "µs"))
        if r.peak_rss:
            figures.append(bench_results.figure(system, shape, "peak RSS", r.peak_rss // 1024, "MiB"))
    return figures


@contextlib.contextmanager
def workdir(keep: bool) -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="kconnect-bench-dataplane-"))
    try:
        yield path
    finally:
        if keep:
            print(f"\nkept {path}")
        else:
            shutil.rmtree(path, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=100, help="bytes per line before the newline")
    parser.add_argument(
        "--only",
        default="ceiling,reference,kconnect,parquet,transforms,pipelines",
        help="systems to run, comma-separated; also reference-tuned (the reference with REFERENCE_TUNED). "
        "transforms: the FileStream pipeline again with two sink transforms (TRANSFORMS), for the reference "
        "and kconnect if they run; pipelines: --pipelines concurrent pipelines on one kconnect worker",
    )
    parser.add_argument(
        "--pipelines",
        default="1,2,4",
        help="the pipelines rows: how many concurrent FileStream pipelines, comma-separated (each moves "
        "--records lines; run on the first --group-protocol's worker)",
    )
    parser.add_argument(
        "--group-protocol",
        default="connect,classic",
        help="kconnect's group.protocol values, comma-separated: a fresh worker (and group) for each, "
        "each with its kconnect and parquet rows",
    )
    parser.add_argument(
        "--source-placement",
        default="auto",
        help="source.task.placement of the kconnect workers, comma-separated: a fresh worker for each "
        "(auto: on the worker with this local master; executor: the source task as a Spark job); "
        "pipelines and parquet run with the first only",
    )
    parser.add_argument(
        "--sink-placement",
        default="auto",
        help="sink.task.placement of the kconnect workers, comma-separated: a fresh worker for each (auto: "
        "an untransformed sink as a consumer loop on this local master; query: a streaming query)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directory (logs, outputs)")
    bench_results.add_argument(parser)
    args = parser.parse_args(argv)
    only = {s.strip() for s in args.only.split(",")}
    group_protocols = [g.strip() for g in args.group_protocol.split(",") if g.strip()]
    placements = [p.strip() for p in args.source_placement.split(",") if p.strip()]
    if not placements or set(placements) - {"auto", "worker", "executor"}:
        parser.error(f"--source-placement takes auto, worker and/or executor, not {args.source_placement!r}")
    sink_placements = [p.strip() for p in args.sink_placement.split(",") if p.strip()]
    if not sink_placements or set(sink_placements) - {"auto", "worker", "query"}:
        parser.error(f"--sink-placement takes auto, worker and/or query, not {args.sink_placement!r}")
    pipelines = [int(n) for n in args.pipelines.split(",") if n.strip()] if "pipelines" in only else []
    unknown = set(group_protocols) - {"connect", "classic"}
    if unknown or not group_protocols:
        parser.error(f"--group-protocol takes connect and/or classic, not {args.group_protocol!r}")
    print(
        f"{platform.node()}: {os.cpu_count()} CPUs, Python {platform.python_version()}; "
        f"{args.records:,} records of {args.size} bytes"
    )
    results: list[Result] = []
    with workdir(args.keep) as work:
        source = work / "input.txt"
        make_input(source, args.records, args.size)
        broker = embedded.start(log_path=work / "broker.log")
        pid = broker.process.pid
        try:
            if "ceiling" in only:
                print("ceiling: plain confluent-kafka producer and consumer ...", flush=True)
                results.append(run_ceiling(broker.bootstrap, source, work / "out-ceiling.txt", args.records))
            if "reference" in only:
                print("reference: Apache Kafka Connect 3.9 ...", flush=True)
                out = work / "out-reference.txt"
                results.append(
                    run_reference(broker.bootstrap, work, source, out, args.records, broker_pid=pid)
                )
            if {"reference", "transforms"} <= only:
                print("reference: Apache Kafka Connect 3.9, two transforms ...", flush=True)
                out = work / "out-reference-transforms.txt"
                results.append(
                    run_reference(
                        broker.bootstrap, work, source, out, args.records, transforms=True, broker_pid=pid
                    )
                )
            if "reference-tuned" in only:
                print("reference: Apache Kafka Connect 3.9, clients batching like librdkafka ...", flush=True)
                out = work / "out-reference-tuned.txt"
                results.append(run_reference(broker.bootstrap, work, source, out, args.records, tuned=True))
            runs = [(g, p, s) for g in group_protocols for p in placements for s in sink_placements]
            kconnect_runs = runs if only & {"kconnect", "parquet"} else []
            for i, (group_protocol, placement, sink_placement) in enumerate(kconnect_runs):
                results.extend(
                    run_kconnect_rows(
                        broker.bootstrap,
                        work,
                        source,
                        args.records,
                        only if i == 0 else only - {"parquet"},
                        group_protocol,
                        pid,
                        pipelines if i == 0 else [],
                        placement,
                        sink_placement,
                    )
                )
        except (httpx.HTTPError, RuntimeError, TimeoutError, AssertionError) as exc:
            print(f"\nbench aborted: {exc}", file=sys.stderr)
            print_table(results)
            print_side_by_side(results)
            return 1
        finally:
            broker.stop()
        print_table(results)
        print_side_by_side(results)
        bench_results.save("dataplane", figures_of(results, args.records), args, title=TITLE)
    return 0


if __name__ == "__main__":
    sys.exit(main())
