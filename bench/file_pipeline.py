"""The FileStream pipeline the data-plane benches move records through: its input file, its topic, the
two connectors' configs (plain or with two sink transforms), the reference worker as the benches run it,
and the checks that the output holds the input (with the test-broker workaround's sentinel lines left
out, ``Sentinels``). Split out of ``dataplane.py``, which still exports these names."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from confluent_kafka import Producer

from tests.support.reference import ReferenceWorker
from tests.support.topics import create_topic as create_topic

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


def produce_all(producer: Producer, topic: str, lines: Iterable[bytes]) -> None:
    """Produce each of ``lines`` to ``topic`` in order; while the producer's queue is full (``BufferError``)
    serve its delivery reports until there is room, so a file larger than the queue goes through whole.
    The caller flushes."""
    for line in lines:
        while True:
            try:
                producer.produce(topic, line)
                break
            except BufferError:
                producer.poll(0.05)


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
