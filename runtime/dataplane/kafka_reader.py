"""A Structured Streaming source that reads Kafka through confluent-kafka (PySpark's Python Data Source API).

Why not Spark's own Kafka source: it needs the spark-sql-kafka jars, which a plain PySpark install does
not have; the Python Data Source API reads Kafka with the client kconnect already uses and needs no jars.

Shape of the work: ``initialOffset``/``latestOffset``/``partitions`` run on the driver side (in the
Python process Spark keeps for the query) and only look at offsets; ``read`` runs in an executor and
consumes one partition's ``[start, end)``. Offsets travel as JSON objects ``{"topic-partition": offset}``
(Spark's Kafka source spells them the same way), whose values are next offsets to read. Where a sink task
starts is the committed offsets of its consumer group, else ``auto.offset.reset``: Spark's checkpoint is
deliberately not the source of truth, because a task moved to another worker has no checkpoint there.

The pure parts (offset JSON, range planning, partition assignment) are module functions, unit-tested.
"""

from __future__ import annotations

import bisect
import re
import threading
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.dataplane.zip_imports import keep_zip_directories

__all__ = [
    "FORMAT",
    "KafkaDataSource",
    "PartitionRange",
    "TopicPartitionKey",
    "arrow_raw_schema",
    "assigned_partitions",
    "decode_offsets",
    "encode_offsets",
    "plan_ranges",
    "raw_batch",
    "subscribed_topics",
    "task_data_source",
]

FORMAT = "kconnect_kafka"
#: Options with this prefix are handed to the confluent-kafka clients without it.
CLIENT_PREFIX = "kafka."

TopicPartitionKey = tuple[str, int]


# ------------------------------------------------------------------------------------------ pure core


def encode_offsets(offsets: Mapping[TopicPartitionKey, int]) -> dict[str, int]:
    """``{(topic, partition): offset}`` -> ``{"topic-partition": offset}``, sorted for stable JSON."""
    return {f"{topic}-{partition}": int(offset) for (topic, partition), offset in sorted(offsets.items())}


def decode_offsets(data: Mapping[str, Any]) -> dict[TopicPartitionKey, int]:
    """The inverse of :func:`encode_offsets`; a topic may itself contain dashes, the partition is last."""
    out: dict[TopicPartitionKey, int] = {}
    for key, offset in data.items():
        topic, sep, number = str(key).rpartition("-")
        if not sep or not topic or not number.isdigit():
            raise ValueError(f"offset key '{key}' is not of the form <topic>-<partition>")
        if not isinstance(offset, int) or isinstance(offset, bool) or offset < 0:
            raise ValueError(f"offset of '{key}' is {offset!r}; allowed: a non-negative integer")
        out[(topic, int(number))] = offset
    return out


@dataclass(frozen=True, slots=True)
class PartitionRange:
    """One partition's records ``[start, end)`` to read in one micro-batch."""

    topic: str
    partition: int
    start: int
    end: int


def plan_ranges(
    start: Mapping[TopicPartitionKey, int], end: Mapping[TopicPartitionKey, int]
) -> list[PartitionRange]:
    """The non-empty ranges between two offset maps; a partition new in ``end`` is read from 0.

    Reading a new partition from offset 0 means "from the beginning": if older records were deleted the
    reader's ``auto.offset.reset=earliest`` moves it to the first one there is.
    """
    ranges = []
    for tp, stop in sorted(end.items()):
        begin = start.get(tp, 0)
        if stop > begin:
            ranges.append(PartitionRange(tp[0], tp[1], begin, stop))
    return ranges


#: Topics a pattern never matches: the broker's own (Java's consumers leave them out of a pattern
#: subscription by default, ``exclude.internal.topics=true``).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


def subscribed_topics(
    names: Iterable[str], topics: Sequence[str], pattern: re.Pattern[str] | None
) -> list[str]:
    """The topics a sink reads: its ``topics`` list, or every existing topic ``topics.regex`` matches
    whole (Java's ``Pattern.matcher(topic).matches()``), the broker's internal topics excepted. Listed
    topics that do not exist yet are left out until they do."""
    existing = set(names)
    if pattern is None:
        return [t for t in topics if t in existing]
    return sorted(t for t in existing if t not in INTERNAL_TOPICS and pattern.fullmatch(t))


def assigned_partitions(
    partitions: Iterable[TopicPartitionKey], task_index: int, task_count: int
) -> list[TopicPartitionKey]:
    """This task's share of the partitions: round-robin over the sorted list.

    Java's sink tasks share partitions through consumer-group rebalances of group ``connect-<connector>``;
    here each task's share is decided from its number and the connector's task count, so every partition
    is read by exactly one task and tasks never rebalance among themselves (a new task count restarts
    all of them anyway). Partitions created later are picked up by whichever task they fall to.
    """
    if task_count < 1 or not 0 <= task_index < task_count:
        raise ValueError(f"task {task_index} of {task_count}: the index must be in [0, task count)")
    return [tp for i, tp in enumerate(sorted(set(partitions))) if i % task_count == task_index]


def advance(
    previous: Mapping[TopicPartitionKey, int],
    latest: Mapping[TopicPartitionKey, int],
    cap: int | None = None,
) -> dict[TopicPartitionKey, int]:
    """The next end offsets: never behind the previous ones (a stream's offsets only move forward), and
    at most ``cap`` records past them per partition, so one micro-batch (collected on the driver and
    handed to ``put`` at once) stays bounded however large the backlog is."""
    merged = dict(previous)
    for tp, offset in latest.items():
        before = merged.get(tp)
        if before is None:  # a new partition: its first batch is planned from 0 (plan_ranges)
            merged[tp] = offset if cap is None else min(offset, cap)
        elif offset > before:
            merged[tp] = offset if cap is None else min(offset, before + cap)
    return merged


def client_config(options: Mapping[str, str]) -> dict[str, str]:
    """The ``kafka.*`` options without their prefix: the stream reader's options are the one channel Spark
    gives from the task runner to the reader, so the client settings travel inside them."""
    return {k[len(CLIENT_PREFIX) :]: v for k, v in options.items() if k.startswith(CLIENT_PREFIX)}


#: Records per partition per micro-batch unless ``max.records.per.partition`` says otherwise. Each
#: micro-batch costs about a quarter of a second of Spark planning, scheduling and checkpointing whatever
#: its size, so batches must be large for throughput (data-plane bench, 1,000,000 records: 50,000 per
#: batch ran at about 80,000 records/s, 200,000 at about 200,000, 400,000 a little faster again);
#: they are collected on the driver as Arrow (about 50 MB for 400,000 records of 100 bytes; SinkRecords
#: are built 500 at a time), so they must be bounded for memory (152 MiB per running task in the bench).
DEFAULT_MAX_RECORDS = 400000
#: Records per ``consume`` call, and so per Arrow batch, when reading a range.
READ_CHUNK = 10000


def raw_batch(messages: Sequence[Any], topic: str, partition: int) -> Any:
    """One partition's consumed messages (confluent-kafka ``Message`` objects, error-free, in offset
    order) as one Arrow batch of ``records.RAW_SCHEMA``.

    Column by column, one comprehension each, because this runs for every record a sink reads: a
    comprehension per column costs less than a per-record function appending to five lists (though the
    data-plane bench showed the reader's cost to be mostly Spark's, not this). ``topic`` and ``partition``
    are constant within a range.
    """
    import pyarrow as pa

    schema = arrow_raw_schema()
    n = len(messages)
    stamps = [m.timestamp() for m in messages]
    headers = [m.headers() for m in messages]
    if any(headers):
        header_column = pa.array(
            [[{"key": k, "value": v} for k, v in h] if h else [] for h in headers],
            schema.field("headers").type,
        )
    else:  # the common case: n empty lists, built from offsets alone
        header_column = pa.ListArray.from_arrays(
            pa.array([0] * (n + 1), pa.int32()), pa.array([], schema.field("headers").type.value_type)
        )
    return pa.RecordBatch.from_arrays(
        [
            pa.array([topic] * n, pa.string()),
            pa.array([partition] * n, pa.int32()),
            pa.array([m.offset() for m in messages], pa.int64()),
            # Timestamp type 0 is TIMESTAMP_NOT_AVAILABLE: the record has none.
            pa.array([s[1] if s[0] else -1 for s in stamps], pa.int64()),
            pa.array([m.key() for m in messages], pa.binary()),
            pa.array([m.value() for m in messages], pa.binary()),
            header_column,
        ],
        schema=schema,
    )


def arrow_raw_schema() -> Any:
    """``records.RAW_SCHEMA`` as an Arrow schema (the types Spark expects back from ``read``)."""
    import pyarrow as pa

    header = pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())])
    return pa.schema(
        [
            pa.field("topic", pa.string()),
            pa.field("partition", pa.int32()),
            pa.field("offset", pa.int64()),
            pa.field("timestamp", pa.int64()),
            pa.field("key", pa.binary()),
            pa.field("value", pa.binary()),
            pa.field("headers", pa.list_(header)),
        ]
    )


# ------------------------------------------------------------------------------------------ Spark edge


class _ConsumerPool:
    """Kafka consumers kept between micro-batches in one of Spark's Python worker processes, one per
    client settings and topic-partition, with the offset each has read up to.

    Why: a micro-batch reads on from where the previous one stopped, usually in the same reused Python
    worker. A kept consumer is already connected and has fetched ahead in the background (librdkafka's
    prefetch queue), so the next micro-batch finds its records in memory instead of paying a connection,
    a metadata request and a first fetch. Spark's own Kafka source keeps consumers for the same reason.
    A consumer at another offset than a range starts at is moved there (``assign``); one idle for
    ``idle_s`` is closed (by a sweeper thread), so a partition that moved elsewhere stops prefetching.
    """

    def __init__(self, idle_s: float = 60.0) -> None:
        self.idle_s = idle_s
        self._lock = threading.Lock()
        self._kept: dict[tuple[str, str, int], tuple[Any, int, float]] = {}
        self._sweeper: threading.Thread | None = None

    def _sweep_forever(self) -> None:
        """Close idle consumers even if this process runs no other read (its task moved elsewhere)."""
        while True:
            time.sleep(self.idle_s / 2)
            self.close_idle()

    def close_idle(self) -> None:
        now = time.monotonic()
        with self._lock:
            stale = [k for k, (_, _, at) in self._kept.items() if now - at > self.idle_s]
            idle = [self._kept.pop(k)[0] for k in stale]
        for consumer in idle:
            consumer.close()

    @staticmethod
    def _key(conf: Mapping[str, Any], topic: str, partition: int) -> tuple[str, str, int]:
        return (repr(sorted(conf.items())), topic, partition)

    def take(self, conf: Mapping[str, Any], topic: str, partition: int, start: int) -> tuple[Any, int]:
        """A consumer positioned at ``start`` and that position; the caller owns it until give_back."""
        from confluent_kafka import Consumer, TopicPartition

        with self._lock:
            kept = self._kept.pop(self._key(conf, topic, partition), None)
            if self._sweeper is None:
                self._sweeper = threading.Thread(target=self._sweep_forever, name="kconnect-consumer-sweeper")
                self._sweeper.daemon = True
                self._sweeper.start()
        self.close_idle()
        if kept is not None:
            consumer, position, _ = kept
            if position == start:
                return consumer, start
            # Elsewhere (a rewind, a restarted query): a fresh consumer, because re-assigning a kept one
            # can still hand out what it prefetched from the old position first.
            consumer.close()
        consumer = Consumer(dict(conf))
        consumer.assign([TopicPartition(topic, partition, start)])
        return consumer, start

    def give_back(
        self, conf: Mapping[str, Any], topic: str, partition: int, consumer: Any, position: int
    ) -> None:
        with self._lock:
            previous = self._kept.pop(self._key(conf, topic, partition), None)
            self._kept[self._key(conf, topic, partition)] = (consumer, position, time.monotonic())
        if previous is not None:  # two readers of one partition in this process: keep the newer
            previous[0].close()


_POOL = _ConsumerPool()


class _Range(InputPartition):
    def __init__(self, value: PartitionRange) -> None:
        super().__init__(value)
        self.range = value


class KafkaDataSource(DataSource):
    """A sink task's Kafka reads, registered by each task under a format name of its own
    (``task_data_source``), with options ``topics``, ``group.id``, ``auto.offset.reset``, ``task.index``,
    ``task.count``, ``read.timeout.ms``, ``max.records.per.partition`` (per micro-batch) and ``kafka.*``."""

    @classmethod
    def name(cls) -> str:
        """The format name Spark looks the source up by once it is registered; ``task_data_source`` gives each
        sink task's subclass one of its own, built on this one."""
        return FORMAT

    def schema(self) -> StructType:
        """Always ``records.RAW_SCHEMA``: the reader hands on bytes as Kafka stores them, and converting them
        is the converters' job, not the source's."""
        return RAW_SCHEMA

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        """A reader over a copy of the options; Spark asks for it once per query, on the driver side."""
        return KafkaStreamReader(dict(self.options))


class KafkaStreamReader(DataSourceStreamReader):
    """The driver-side half of the source: it decides each micro-batch's offset range per partition and plans
    one ``read`` per partition, never reading records itself except in ``read``, which Spark runs in an
    executor."""

    def __init__(self, options: Mapping[str, str]) -> None:
        self.options = dict(options)
        topics = [t.strip() for t in self.options.get("topics", "").split(",") if t.strip()]
        regex = self.options.get("topics.regex", "").strip()
        if bool(topics) == bool(regex):
            raise ValueError("options topics and topics.regex: exactly one must be set")
        self.topics = topics
        #: With ``topics.regex``: topics created later join at their next micro-batch, read from the start.
        self.pattern = re.compile(regex) if regex else None
        self.group_id = self.options["group.id"]
        self.reset = self.options.get("auto.offset.reset", "earliest").lower()
        self.task_index = int(self.options.get("task.index", "0"))
        self.task_count = int(self.options.get("task.count", "1"))
        self.timeout_s = int(self.options.get("read.timeout.ms", "30000")) / 1000
        self.cap = int(self.options.get("max.records.per.partition", str(DEFAULT_MAX_RECORDS)))
        self._last: dict[TopicPartitionKey, int] = {}
        #: Where the query starts, once worked out (``initialOffset``).
        self._start: dict[TopicPartitionKey, int] | None = None
        self._consumer: Any = None

    def _client(self) -> Any:
        from confluent_kafka import Consumer

        if self._consumer is None:
            conf: dict[str, Any] = {**client_config(self.options), "group.id": self.group_id}
            conf["enable.auto.commit"] = False
            self._consumer = Consumer(conf)
        return self._consumer

    def assigned(self) -> list[TopicPartitionKey]:
        """The task's share of the partitions that exist now (what a Spark Kafka query is given to read:
        ``spark_kafka``)."""
        return self._partitions()

    def _partitions(self) -> list[TopicPartitionKey]:
        metadata = self._client().list_topics(timeout=self.timeout_s)
        usable = [name for name, t in metadata.topics.items() if t.error is None]
        found: list[TopicPartitionKey] = []
        for topic in subscribed_topics(usable, self.topics, self.pattern):
            found.extend((topic, p) for p in metadata.topics[topic].partitions)
        return assigned_partitions(found, self.task_index, self.task_count)

    def _watermarks(self, tps: Sequence[TopicPartitionKey]) -> dict[TopicPartitionKey, tuple[int, int]]:
        """Each partition's watermarks. Right after its leadership moved a partition answers with a
        retriable error for a moment (OFFSET_NOT_AVAILABLE: "Leader high watermark is not caught up",
        NOT_LEADER_FOR_PARTITION): asked again until ``timeout_s``, as Java's consumer does, instead of
        failing the sink's query (seen with leadership moved on a three-broker cluster)."""
        from confluent_kafka import KafkaError, KafkaException, TopicPartition

        from kconnect.runtime.storage.kafka_log import retriable_end_offset_error

        consumer = self._client()
        deadline = time.monotonic() + self.timeout_s
        found: dict[TopicPartitionKey, tuple[int, int]] = {}
        for tp in tps:
            while True:
                remaining = max(0.1, deadline - time.monotonic())
                try:
                    partition = TopicPartition(tp[0], tp[1])
                    found[tp] = consumer.get_watermark_offsets(partition, timeout=remaining)
                    break
                except KafkaException as exc:
                    error = exc.args[0] if exc.args else None
                    code = error.code() if isinstance(error, KafkaError) else None
                    if not retriable_end_offset_error(code) or time.monotonic() + 0.2 >= deadline:
                        raise
                    time.sleep(0.2)
        return found

    def initialOffset(self) -> dict[str, int]:
        """Where the query starts: the task's committed consumer-group offsets, else ``auto.offset.reset``
        (``none`` fails as Java's consumer does), never Spark's checkpoint, because a task that moved to
        another worker has none there.

        Worked out once per query: Spark may ask for the latest offset before the initial one, and the
        first end planned must start from here, never from 0 below the committed offsets.
        """
        from confluent_kafka import TopicPartition

        if self._start is not None:
            return encode_offsets(self._start)
        tps = self._partitions()
        committed = self._client().committed([TopicPartition(t, p) for t, p in tps], timeout=self.timeout_s)
        marks = self._watermarks(tps)
        start: dict[TopicPartitionKey, int] = {}
        for tp in committed:
            key = (tp.topic, tp.partition)
            low, high = marks[key]
            if tp.offset >= 0:
                start[key] = tp.offset
            elif self.reset == "latest":
                start[key] = high
            elif self.reset == "none":
                raise ValueError(
                    f"no committed offset for {key[0]}-{key[1]} in group {self.group_id} and "
                    "consumer.auto.offset.reset=none"
                )
            else:
                start[key] = low
        self._start = start
        self._last = dict(start)
        return encode_offsets(start)

    def latestOffset(self) -> dict[str, int]:
        """The end of the next micro-batch: the partitions' high watermarks, capped per partition so that one
        batch stays bounded in memory."""
        if self._start is None:
            self.initialOffset()
        tps = self._partitions()
        highs = {tp: high for tp, (_, high) in self._watermarks(tps).items()}
        self._last = advance(self._last, highs, self.cap)
        return encode_offsets(self._last)

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        """One input partition per Kafka partition that has records in ``[start, end)``, so Spark reads
        partitions in parallel and skips idle ones."""
        return [_Range(r) for r in plan_ranges(decode_offsets(start), decode_offsets(end))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """One partition's ``[start, end)`` as Arrow record batches, one per batch of records consumed.

        Why Arrow: Spark accepts ``pyarrow.RecordBatch`` from a Python data source as is, where tuples
        are converted and type-checked value by value in Python; building the columns here is several
        times cheaper per record, and the records reach the JVM as Arrow either way.

        Not every offset of a range is a record: a transactional producer's topic (an exactly-once
        source's) holds a control record (commit or abort marker) at the end of each transaction, which
        a consumer never returns, and a read_committed consumer skips aborted records as well. The range
        of a caught-up partition ends on such a marker (the planned end is the last stable offset, just
        past it), so how far a range is read comes from the consumer's position, which moves past what
        it skips, not from the offsets of the records returned alone; the consumer kept for the next
        micro-batch is kept at that position.
        """
        from confluent_kafka import TopicPartition

        assert isinstance(partition, _Range)
        keep_zip_directories()  # this process runs the reads of every micro-batch to come
        r = partition.range
        conf: dict[str, Any] = {
            # Without it librdkafka pauses fetching for a second whenever its prefetch queue is full,
            # which a kept consumer (below) reaches between micro-batches.
            "fetch.queue.backoff.ms": 10,
            **client_config(self.options),
            "group.id": f"{self.group_id}-reader",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
        here = [TopicPartition(r.topic, r.partition)]
        consumer, position = _POOL.take(conf, r.topic, r.partition, r.start)
        try:
            deadline = time.monotonic() + self.timeout_s
            while position < r.end:
                want = min(READ_CHUNK, r.end - position)
                # What is fetched already, without waiting: consume() waits out its timeout unless it has
                # num_messages records, and a range's offsets can outnumber its records (see above), so
                # asking for them with a timeout would wait it out at every range ending on a marker.
                messages = consumer.consume(num_messages=want, timeout=0)
                if not messages:
                    # All that was fetched is consumed, the skipped control and aborted records too: the
                    # consumer's position (a local call, -1001 before its first record) is past them.
                    at = consumer.position(here)[0].offset
                    if at > position:
                        position = at
                        deadline = time.monotonic() + self.timeout_s
                        continue
                    if time.monotonic() > deadline:
                        raise TimeoutError(
                            f"read {r.topic}-{r.partition} up to offset {position} of [{r.start}, {r.end}) "
                            f"and no more records came within read.timeout.ms"
                        )
                    # Nothing fetched yet: wait for the next fetch's first record, then take the rest of
                    # what it brought without waiting.
                    messages = consumer.consume(num_messages=1, timeout=0.5)
                    if not messages:
                        continue
                    if want > 1:
                        messages.extend(consumer.consume(num_messages=want - 1, timeout=0))
                for msg in messages:
                    if msg.error() is not None:
                        raise RuntimeError(f"reading {r.topic}-{r.partition}: {msg.error()}")
                offsets = [m.offset() for m in messages]
                # Only [position, end): offsets rise within a partition, so both cuts are bisections.
                low = bisect.bisect_left(offsets, position)
                # Where the consumer now is: past the last record, and past control records after it
                # that the same call skipped.
                position = max(position, offsets[-1] + 1, consumer.position(here)[0].offset)
                messages = messages[low : bisect.bisect_left(offsets, r.end)]
                deadline = time.monotonic() + self.timeout_s
                if messages:
                    yield raw_batch(messages, r.topic, r.partition)
        except BaseException:
            consumer.close()
            raise
        _POOL.give_back(conf, r.topic, r.partition, consumer, position)

    def commit(self, end: dict[str, int]) -> None:
        """Nothing: offsets are committed to the consumer group by the sink runner, after ``put`` and
        ``flush``, because only then is the output durable."""

    def stop(self) -> None:
        """Close the driver-side consumer (metadata and watermarks) when the query stops, so a stopped task
        leaves no connection to the brokers behind."""
        if self._consumer is not None:
            self._consumer.close()
        self._consumer = None


def task_data_source(task: str) -> type[KafkaDataSource]:
    """``KafkaDataSource`` under a format name of one sink task's own (``kconnect_kafka_<task>``), which
    the task registers before it starts its query.

    Why not the one registration every query shares: Spark keeps one ``PythonFunction`` per registered
    Python data source, and its Python runners add their settings to that function's environment map
    (``envVars.put``) each time they start a Python process, while the scheduler serializes the same map
    into the tasks of other queries' jobs. A map that grows while it is serialized makes a task that
    cannot be read (``java.io.OptionalDataException`` in ``HashMap.readObject``, seen when three sink
    queries of one worker started at once, failing every shuffle job of two of them). A registration per
    task gives each query a map of its own, which only its own, sequential, micro-batches touch.
    """
    name = f"{FORMAT}_{re.sub(r'[^0-9A-Za-z_]', '_', task)}"
    return type(
        f"KafkaDataSource_{name}",
        (KafkaDataSource,),
        {"name": classmethod(lambda cls: name), "__module__": __name__},
    )
