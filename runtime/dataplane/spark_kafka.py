"""Spark's own Kafka source as a sink task's reader, where the worker's Spark has it.

Why: a sink task's query reads Kafka through ``kafka_reader``, a Python data source, so every record is
consumed by librdkafka in a Python worker, built into Arrow there and handed to the JVM. Spark's Kafka
source (``spark-sql-kafka-0-10``, the jar a user adds to ``spark.jars`` as they add Iceberg's) reads in
the executors' JVM and hands Spark its rows directly. Measured (bench/README.md, issue 31): about the same
CPU per record (the Python workers' reading was under a tenth of a warm sink's), but no Python workers
holding librdkafka's prefetch queues between micro-batches (1.5 GiB on a 4-partition big topic).

What stays kconnect's: where the task starts and which partitions it reads. Both come from the Python
reader's driver half (``kafka_reader.KafkaStreamReader``: the group's committed offsets, else
``auto.offset.reset``; the task's round-robin share of the partitions), worked out when the query starts
and given to Spark's source as ``assign`` and ``startingOffsets``. Spark's checkpoint is never read back
(each query has a fresh one), offsets are still committed by the sink runner once the output is durable,
and a change in the partitions (a topic created that ``topics.regex`` matches, partitions added) restarts
the query, as a rewind does.

When the Python reader stays: Spark's source is not on the classpath, or the task's consumer settings
carry a secret (a password, a JAAS text, a key): Spark keeps a query's options in its plans and UI, and
this module does not hand it credentials. The pure decisions are module functions, unit-tested.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from kconnect.runtime.dataplane.kafka_reader import (
    DEFAULT_MAX_RECORDS,
    KafkaStreamReader,
    TopicPartitionKey,
    decode_offsets,
)
from kconnect.runtime.dataplane.records import RAW_FIELDS, RAW_SCHEMA

#: Spark's Kafka source's data source class; its presence on the session's classpath enables this reader.
PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"
#: Consumer settings Spark's Kafka source refuses or sets itself (its documentation's "Kafka specific
#: configurations"): the reader decides where to start, and the runner commits.
SPARK_OWNS = frozenset(
    {
        "group.id",
        "auto.offset.reset",
        "key.deserializer",
        "value.deserializer",
        "enable.auto.commit",
        "interceptor.classes",
    }
)
#: ``fetch.max.wait.ms`` of Spark's consumers unless the task's settings name one. Spark keeps a consumer
#: per partition between micro-batches; the Java consumer's prefetch, sent after the last record it read,
#: waits on the broker for the next record until this long (Kafka's default 500 ms), and the next batch's
#: read of that partition waits for that prefetch. For a partition that gets a record now and then, that
#: was ~500 ms per partition per batch: 50 such topics on one task made micro-batches of 12 s (p50 22 s
#: from produce to the table, against 7.5 s with kconnect's reader; 6.4 s with 20 ms: bench/README.md).
#: Spark's consumers fetch only ranges it has planned, which hold records, so a short wait costs nothing
#: while they are idle.
FETCH_MAX_WAIT_MS = 20
#: How often a query read by Spark's Kafka source looks for partitions it was not given (a topic that
#: ``topics.regex`` matches created, partitions added): its assignment is fixed when it starts.
PARTITION_CHECK_S = 5.0
#: A consumer setting whose name says it holds a credential (Java's PASSWORD-typed client settings and
#: the JAAS text): such a task keeps the Python reader.
SECRET_SETTING = re.compile(r"password|jaas|secret|token|(^|\.)key$|credentials", re.IGNORECASE)


@dataclass(frozen=True, slots=True)
class Reader:
    """Which reader a sink task's query uses, and why (logged when the query starts)."""

    spark_kafka: bool
    reason: str


def choose(available: bool, consumer_props: Mapping[str, str]) -> Reader:
    """Spark's Kafka source where it is on the classpath and the consumer settings hold no secret."""
    if not available:
        return Reader(False, f"{PROVIDER} is not on the worker's Spark classpath (spark.jars)")
    secrets = sorted(k for k in consumer_props if SECRET_SETTING.search(k))
    if secrets:
        return Reader(False, "the consumer settings hold credentials (" + ", ".join(secrets) + ")")
    return Reader(True, f"{PROVIDER} is on the worker's Spark classpath")


def spark_offsets(offsets: Mapping[TopicPartitionKey, int]) -> str:
    """Offsets as Spark's Kafka source spells them: ``{"topic": {"partition": offset}}``."""
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = int(offset)
    return json.dumps(out, separators=(",", ":"))


def spark_assignment(partitions: Iterable[TopicPartitionKey]) -> str:
    """Partitions as Spark's ``assign`` option spells them: ``{"topic": [partition, ...]}``."""
    out: dict[str, list[int]] = {}
    for topic, partition in sorted(set(partitions)):
        out.setdefault(topic, []).append(int(partition))
    return json.dumps(out, separators=(",", ":"))


def source_options(
    consumer_props: Mapping[str, str],
    bootstrap: str,
    start: Mapping[TopicPartitionKey, int],
    max_records_per_partition: int,
    group_prefix: str,
) -> dict[str, str]:
    """Spark's Kafka source's options for a task reading ``start``'s partitions from those offsets.

    ``consumer_props`` are the task's consumer settings, Java-named (``consumer.*`` then
    ``consumer.override.*``), which Spark's source hands to its Java consumer under ``kafka.``; those it
    refuses are left out (:data:`SPARK_OWNS`). A micro-batch is bounded as the Python reader bounds it,
    per partition on average (``maxOffsetsPerTrigger`` is spread over the partitions by their backlog).
    Records whose offsets retention removed are skipped as ``auto.offset.reset=earliest`` would
    (``failOnDataLoss=false``): a sink that fell behind the retention reads on from the earliest.
    ``fetch.max.wait.ms`` is :data:`FETCH_MAX_WAIT_MS` and ``isolation.level`` ``read_committed`` unless
    the settings name them: the Python reader's consumers (librdkafka's) read committed records only, and
    a sink must not start reading an exactly-once source's aborted records because its reader changed.
    """
    options = {
        "kafka.fetch.max.wait.ms": str(FETCH_MAX_WAIT_MS),
        "kafka.isolation.level": "read_committed",
    }
    options.update({f"kafka.{k}": v for k, v in consumer_props.items() if k not in SPARK_OWNS})
    options.update(
        {
            "kafka.bootstrap.servers": bootstrap,
            "assign": spark_assignment(start),
            "startingOffsets": spark_offsets(start),
            "maxOffsetsPerTrigger": str(max(1, max_records_per_partition * max(1, len(start)))),
            "failOnDataLoss": "false",
            "includeHeaders": "true",
            "groupIdPrefix": group_prefix,
        }
    )
    return options


def raw_columns() -> list[Any]:
    """Spark's Kafka rows as ``records.RAW_SCHEMA``: the timestamp as epoch milliseconds (-1 where the
    record has none, as Spark keeps Kafka's -1) and no headers as an empty list, not null."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType

    header_type = RAW_SCHEMA["headers"].dataType
    assert isinstance(header_type, ArrayType)
    columns = {
        "topic": F.col("topic"),
        "partition": F.col("partition"),
        "offset": F.col("offset"),
        "timestamp": F.unix_millis(F.col("timestamp")),
        "key": F.col("key"),
        "value": F.col("value"),
        "headers": F.coalesce(F.col("headers"), F.array().cast(header_type)),
    }
    return [columns[name].alias(name) for name in RAW_FIELDS]


def available(spark: Any) -> bool:
    """Whether the session's JVM can load Spark's Kafka source (the jar on ``spark.jars``)."""
    jvm = spark._jvm
    try:
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(PROVIDER, False, loader)
    except Exception:
        return False
    return True


class PartitionWatch:
    """The driver-side reader that worked out a Spark Kafka query's start, kept to notice partitions the
    query was not given: Spark's ``assign`` is fixed for a query's life, where the Python reader looks
    for partitions at every micro-batch."""

    def __init__(self, reader: Any, given: frozenset[TopicPartitionKey]) -> None:
        self._reader = reader
        self.given = given
        self._checked = time.monotonic()

    def changed(self, log: Any) -> bool:
        """Whether the task's share of the partitions is no longer what the query was given (checked every
        :data:`PARTITION_CHECK_S`; a change is logged)."""
        if time.monotonic() - self._checked < PARTITION_CHECK_S:
            return False
        self._checked = time.monotonic()
        found = frozenset(self._reader.assigned())
        if found == self.given:
            return False
        log.info(
            "the task's partitions changed; its query restarts with them",
            added=sorted(f"{t}-{p}" for t, p in found - self.given),
            removed=sorted(f"{t}-{p}" for t, p in self.given - found),
        )
        return True

    def close(self) -> None:
        self._reader.stop()


def stream(
    spark: Any, options: Mapping[str, str], consumer_props: Mapping[str, str], bootstrap: str, prefix: str
) -> tuple[Any, PartitionWatch]:
    """A sink task's stream read by Spark's Kafka source from where the Python reader would start
    (``options`` are that reader's: the group's committed offsets, else ``auto.offset.reset``; the task's
    share of the partitions), with the watch of its partitions. The stream is None when there is no
    partition to read yet (Spark's source needs one): the caller reads with the Python source until the
    watch sees one."""
    reader = KafkaStreamReader(options)
    try:
        start = decode_offsets(reader.initialOffset())
    except BaseException:
        reader.stop()
        raise
    watch = PartitionWatch(reader, frozenset(start))
    if not start:
        return None, watch
    settings = source_options(consumer_props, bootstrap, start, DEFAULT_MAX_RECORDS, prefix)
    return spark.readStream.format("kafka").options(**settings).load().select(*raw_columns()), watch
