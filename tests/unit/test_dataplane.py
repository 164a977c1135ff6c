"""The pure parts of the Spark data plane: offset JSON, range planning, partition spreading, what to
commit after a batch or a producer flush, client settings and the minimal converter hook."""

from __future__ import annotations

import importlib
import json
import re
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.config.worker import SourceTaskPlacement, WorkerConfig
from kconnect.runtime.dataplane.converters import converter_config
from kconnect.runtime.dataplane.kafka_reader import (
    KafkaDataSource,
    KafkaStreamReader,
    PartitionRange,
    advance,
    assigned_partitions,
    client_config,
    decode_offsets,
    encode_offsets,
    plan_ranges,
    subscribed_topics,
    task_data_source,
)
from kconnect.runtime.dataplane.records import RAW_FIELDS, RAW_SCHEMA
from kconnect.runtime.dataplane.sink_runner import consumed_offsets, offsets_to_commit
from kconnect.runtime.dataplane.source_runner import SourceTaskRunner, _Submitted, latest_source_offsets
from kconnect.runtime.dataplane.spark_executor import (
    SparkExecutor,
    python_workers_executable,
    source_placement,
    spark_settings,
)
from kconnect.runtime.dataplane.task_runner import client_settings
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import SourceRecord, SourceTask, TopicPartition
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.storage.offset_log import OffsetState, SourceOffset

topics = st.from_regex(r"[a-zA-Z0-9._-]{1,20}", fullmatch=True)


def test_raw_schema_is_the_agreed_contract() -> None:
    assert RAW_SCHEMA.simpleString() == (
        "struct<topic:string,partition:int,offset:bigint,timestamp:bigint,key:binary,value:binary,"
        "headers:array<struct<key:string,value:binary>>>"
    )
    assert RAW_FIELDS == ("topic", "partition", "offset", "timestamp", "key", "value", "headers")


@given(st.dictionaries(st.tuples(topics, st.integers(0, 1000)), st.integers(0, 2**63 - 1)))
def test_offsets_json_round_trips(offsets: dict[tuple[str, int], int]) -> None:
    encoded = encode_offsets(offsets)
    assert decode_offsets(json.loads(json.dumps(encoded))) == offsets


def test_offsets_json_spelling() -> None:
    assert encode_offsets({("my-topic", 3): 42, ("a", 0): 1}) == {"a-0": 1, "my-topic-3": 42}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"nodash": 1}, "not of the form <topic>-<partition>"),
        ({"t-x": 1}, "not of the form <topic>-<partition>"),
        ({"-1": 1}, "not of the form <topic>-<partition>"),
        ({"t-1": -1}, "allowed: a non-negative integer"),
        ({"t-1": "5"}, "allowed: a non-negative integer"),
        ({"t-1": True}, "allowed: a non-negative integer"),
    ],
)
def test_bad_offsets_json_is_named(data: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        decode_offsets(data)


@pytest.mark.parametrize(
    ("start", "end", "ranges"),
    [
        ({}, {}, []),
        ({("t", 0): 5}, {("t", 0): 5}, []),
        ({("t", 0): 5}, {("t", 0): 9}, [PartitionRange("t", 0, 5, 9)]),
        # a partition new in end is read from the beginning
        ({("t", 0): 5}, {("t", 0): 5, ("t", 1): 3}, [PartitionRange("t", 1, 0, 3)]),
        # an end behind the start plans nothing (it never happens once advance() is used)
        ({("t", 0): 9}, {("t", 0): 5}, []),
        (
            {("b", 0): 0, ("a", 1): 2},
            {("b", 0): 1, ("a", 1): 4},
            [PartitionRange("a", 1, 2, 4), PartitionRange("b", 0, 0, 1)],
        ),
    ],
)
def test_plan_ranges(
    start: dict[tuple[str, int], int], end: dict[tuple[str, int], int], ranges: list[PartitionRange]
) -> None:
    assert plan_ranges(start, end) == ranges


@given(st.sets(st.tuples(topics, st.integers(0, 50)), max_size=40), st.integers(1, 8))
def test_assigned_partitions_split_everything_once(partitions: set[tuple[str, int]], count: int) -> None:
    shares = [assigned_partitions(partitions, i, count) for i in range(count)]
    flat = [tp for share in shares for tp in share]
    assert sorted(flat) == sorted(partitions)
    assert max(map(len, shares)) - min(map(len, shares)) <= 1


@pytest.mark.parametrize(("index", "count"), [(0, 0), (2, 2), (-1, 3)])
def test_assigned_partitions_rejects_bad_task_numbers(index: int, count: int) -> None:
    with pytest.raises(ValueError, match="the index must be in"):
        assigned_partitions([("t", 0)], index, count)


@pytest.mark.parametrize(
    ("names", "topics", "regex", "expected"),
    [
        (["a", "b", "c"], ["c", "a", "later"], None, ["c", "a"]),  # a listed topic not created yet waits
        (["orders-1", "orders-22", "xorders-3", "orders"], [], r"orders-\d+", ["orders-1", "orders-22"]),
        (["orders-1", "orders-1x"], [], r"orders-\d", ["orders-1"]),  # the whole name must match, as Java's
        (["__consumer_offsets", "__transaction_state", "__mine", "t"], [], r".*", ["__mine", "t"]),
        ([], [], r".*", []),
    ],
)
def test_subscribed_topics_list_or_whole_name_pattern(
    names: list[str], topics: list[str], regex: str | None, expected: list[str]
) -> None:
    pattern = re.compile(regex) if regex is not None else None
    assert subscribed_topics(names, topics, pattern) == expected


def test_advance_never_goes_backwards() -> None:
    assert advance({("t", 0): 10, ("t", 1): 3}, {("t", 0): 7, ("t", 2): 1}) == {
        ("t", 0): 10,
        ("t", 1): 3,
        ("t", 2): 1,
    }


def test_advance_caps_each_batch_per_partition() -> None:
    previous = {("t", 0): 100, ("t", 1): 5}
    latest = {("t", 0): 100_000, ("t", 1): 8, ("t", 2): 50}
    assert advance(previous, latest, cap=1000) == {("t", 0): 1100, ("t", 1): 8, ("t", 2): 50}
    # a new partition is read from 0, so its first batch ends at the cap too
    assert advance({}, {("t", 0): 5000}, cap=1000) == {("t", 0): 1000}


@given(
    st.dictionaries(st.tuples(topics, st.integers(0, 5)), st.integers(0, 10**6)),
    st.dictionaries(st.tuples(topics, st.integers(0, 5)), st.integers(0, 10**6)),
    st.integers(1, 10**4),
)
def test_advance_moves_forward_within_the_cap(
    previous: dict[tuple[str, int], int], latest: dict[tuple[str, int], int], cap: int
) -> None:
    nxt = advance(previous, latest, cap)
    for tp, before in previous.items():
        assert before <= nxt[tp] <= before + cap
    for tp in latest.keys() - previous.keys():
        assert nxt[tp] <= cap


class _WatermarkClient:
    """The planner's one consumer, faked: topic ``t`` with two partitions, nothing committed, and the high
    watermarks a test sets."""

    def __init__(self, highs: dict[int, int]) -> None:
        self.highs = highs
        self.closed = False

    def list_topics(self, timeout: float) -> Any:
        topic = SimpleNamespace(error=None, partitions=dict.fromkeys(self.highs))
        return SimpleNamespace(topics={"t": topic})

    def committed(self, partitions: list[Any], timeout: float) -> list[Any]:
        return [SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=-1001) for tp in partitions]

    def get_watermark_offsets(self, partition: Any, timeout: float) -> tuple[int, int]:
        return 0, self.highs[partition.partition]

    def close(self) -> None:
        self.closed = True


def test_the_planner_plans_up_to_the_high_watermarks_with_its_one_consumer(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each micro-batch ends at the partitions' high watermarks (capped), as Spark's Kafka source plans: no
    fetch past them, no consumer besides the one that asks for metadata and watermarks."""
    import confluent_kafka

    def no_other_consumer(conf: Any) -> Any:
        raise AssertionError(f"a second consumer was made: {conf}")

    monkeypatch.setattr(confluent_kafka, "Consumer", no_other_consumer)
    reader = KafkaStreamReader({"topics": "t", "group.id": "g", "max.records.per.partition": "100"})
    client = _WatermarkClient({0: 10, 1: 0})
    reader._consumer = client
    assert decode_offsets(reader.initialOffset()) == {("t", 0): 0, ("t", 1): 0}
    assert decode_offsets(reader.latestOffset()) == {("t", 0): 10, ("t", 1): 0}
    assert decode_offsets(reader.latestOffset()) == {("t", 0): 10, ("t", 1): 0}  # nothing new: it stays
    client.highs = {0: 12, 1: 250}
    assert decode_offsets(reader.latestOffset()) == {("t", 0): 12, ("t", 1): 100}  # the cap
    reader.stop()
    assert client.closed and reader._consumer is None


def test_client_config_strips_the_prefix() -> None:
    assert client_config({"kafka.bootstrap.servers": "b:1", "topics": "t"}) == {"bootstrap.servers": "b:1"}


def test_consumed_offsets_are_next_offsets() -> None:
    rows = [("t", 0, 5, -1, None, b"", []), ("t", 0, 7, -1, None, b"", []), ("u", 1, 0, -1, None, b"", [])]
    assert consumed_offsets(rows) == {TopicPartition("t", 0): 8, TopicPartition("u", 1): 1}


T0, T1, T2 = TopicPartition("t", 0), TopicPartition("t", 1), TopicPartition("t", 2)


@pytest.mark.parametrize(
    ("consumed", "answer", "committed", "expected"),
    [
        ({T0: 10}, {T0: 10}, {}, {T0: 10}),
        # the task holds records back
        ({T0: 10}, {T0: 6}, {}, {T0: 6}),
        # never past what was consumed, never partitions not consumed
        ({T0: 10}, {T0: 99, T1: 4}, {}, {T0: 10}),
        # nothing new to commit
        ({T0: 10, T2: 3}, {T0: 10, T2: 3}, {T0: 10}, {T2: 3}),
        # a task answering nothing commits nothing
        ({T0: 10}, {}, {}, {}),
    ],
)
def test_offsets_to_commit(
    consumed: dict[TopicPartition, int],
    answer: dict[TopicPartition, int],
    committed: dict[TopicPartition, int],
    expected: dict[TopicPartition, int],
) -> None:
    assert offsets_to_commit(consumed, answer, committed) == expected


def test_latest_source_offsets_keep_the_last_per_partition() -> None:
    records = [
        SourceRecord({"filename": "a"}, {"position": 1}, "t"),
        SourceRecord({"filename": "b"}, {"position": 7}, "t"),
        SourceRecord({"filename": "a"}, {"position": 2}, "t"),
        SourceRecord({"filename": "a"}, None, "t"),  # no offset: nothing to store
        SourceRecord({"b": 1, "a": "x"}, {"n": 1}, "t"),
        SourceRecord({"a": "x", "b": 1}, {"n": 2}, "t"),  # the same partition, keys in another order
        SourceRecord(None, {"n": 9}, "t"),
    ]
    assert latest_source_offsets("c", records) == [  # in the order of each partition's last record
        SourceOffset("c", {"filename": "b"}, {"position": 7}),
        SourceOffset("c", {"filename": "a"}, {"position": 2}),
        SourceOffset("c", {"a": "x", "b": 1}, {"n": 2}),
        SourceOffset("c", None, {"n": 9}),
    ]


def test_client_settings_worker_then_connector_override() -> None:
    worker = {"producer.linger.ms": "5", "producer.acks": "all", "consumer.fetch.min.bytes": "1"}
    task = {"producer.override.linger.ms": "0", "file": "x"}
    assert client_settings("producer", "PLAINTEXT", worker, task) == {"linger.ms": "0", "acks": "all"}
    assert client_settings("consumer", "PLAINTEXT", worker, {}) == {"fetch.min.bytes": "1"}


def test_client_settings_translate_java_names_and_admin_starts_from_the_top_level() -> None:
    worker = {
        "consumer.max.poll.records": "500",
        "consumer.fetch.max.wait.ms": "100",
        "sasl.mechanism": "PLAIN",
        "admin.request.timeout.ms": "9000",
    }
    task = {"consumer.override.auto.offset.reset": "none", "admin.override.retries": "3"}
    assert client_settings("consumer", "PLAINTEXT", worker, task) == {
        "fetch.wait.max.ms": "100",
        "auto.offset.reset": "error",
    }
    # Java's connector admin clients: the worker's top-level settings, then admin.*, then the override.
    assert client_settings("admin", "SASL_SSL", worker, task) == {
        "sasl.mechanism": "PLAIN",
        "security.protocol": "SASL_SSL",
        "request.timeout.ms": "9000",
        "retries": "3",
    }


def test_converter_config_connector_replaces_the_worker_class_and_its_settings() -> None:
    worker = {
        "key.converter": "json",
        "value.converter": "json",
        "value.converter.schemas.enable": "false",
    }
    task = {"value.converter": "org.apache.kafka.connect.storage.StringConverter", "file": "x"}
    assert converter_config(worker, task) == {
        "key.converter": "json",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    }
    assert converter_config(worker, {"key.converter.schemas.enable": "false"}) == {
        "key.converter": "json",
        "key.converter.schemas.enable": "false",
        "value.converter": "json",
        "value.converter.schemas.enable": "false",
    }


BASE = {
    "group.id": "g",
    "config.storage.topic": "c",
    "offset.storage.topic": "o",
    "status.storage.topic": "s",
    "key.converter": "json",
    "value.converter": "json",
}


@pytest.mark.parametrize(
    ("configured", "master", "transforms", "placement"),
    [
        ("auto", "local[*]", "", "worker"),
        ("auto", "local-cluster[2,1,1024]", "", "worker"),
        ("auto", "spark://master:7077", "", "executor"),
        ("auto", "k8s://https://api:6443", "", "executor"),
        ("auto", "spark://master:7077", "route", "worker"),
        ("executor", "local[3]", "", "executor"),
        ("executor", "spark://master:7077", "route", "worker"),
        ("worker", "spark://master:7077", "", "worker"),
    ],
)
def test_source_placement(configured: str, master: str, transforms: str, placement: str) -> None:
    config = {"connector.class": "FileStreamSource", "transforms": transforms}
    chosen, reason = source_placement(SourceTaskPlacement(configured), master, config)
    assert chosen == SourceTaskPlacement(placement)
    assert ("transforms" in reason) == bool(transforms and configured != "worker")


def test_spark_settings_pass_every_spark_key_with_fair_scheduling_and_driver_jvm_defaults() -> None:
    settings = spark_settings(WorkerConfig.from_properties({**BASE, "spark.executor.memory": "2g"}))
    assert settings["spark.master"] == "local[*]"
    assert settings["spark.scheduler.mode"] == "FAIR"
    assert settings["spark.executor.memory"] == "2g"
    assert settings["spark.driver.defaultJavaOptions"] == "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    manager = "org.apache.spark.sql.execution.streaming.FileSystemBasedCheckpointFileManager"
    assert settings["spark.sql.streaming.checkpointFileManagerClass"] == manager
    custom = spark_settings(
        WorkerConfig.from_properties(
            {
                **BASE,
                "spark.master": "local[2]",
                "spark.scheduler.mode": "FIFO",
                "spark.driver.defaultJavaOptions": "-XX:+UseParallelGC",
            }
        )
    )
    assert (custom["spark.master"], custom["spark.scheduler.mode"]) == ("local[2]", "FIFO")
    assert custom["spark.driver.defaultJavaOptions"] == "-XX:+UseParallelGC"


def test_a_cluster_masters_executors_fork_python_from_kconnects_daemon_unless_told_otherwise() -> None:
    daemon = "kconnect.runtime.dataplane.python_daemon"
    assert "spark.python.daemon.module" not in spark_settings(WorkerConfig.from_properties(BASE))
    cluster = {**BASE, "spark.master": "spark://spark-master:7077"}
    assert spark_settings(WorkerConfig.from_properties(cluster))["spark.python.daemon.module"] == daemon
    theirs = {**cluster, "spark.python.daemon.module": "pyspark.daemon"}
    own = spark_settings(WorkerConfig.from_properties(theirs))
    assert own["spark.python.daemon.module"] == "pyspark.daemon"
    module = importlib.import_module(daemon)  # importable, and it runs nothing when imported
    assert module.daemon.manager is not None


@pytest.mark.parametrize(
    ("settings", "environ", "expected"),
    [
        ({}, {}, "/venv/bin/python"),  # the worker's own interpreter: it has kconnect
        ({}, {"PYSPARK_PYTHON": "/env/python"}, "/env/python"),
        ({"spark.pyspark.python": "/conf/python"}, {"PYSPARK_PYTHON": "/env/python"}, "/conf/python"),
        ({"spark.pyspark.python": "/conf/python"}, {}, "/conf/python"),
        ({"spark.pyspark.python": ""}, {"PYSPARK_PYTHON": "/env/python"}, "/env/python"),  # empty: unset
    ],
)
def test_python_workers_executable_follows_spark_precedence(
    settings: dict[str, str], environ: dict[str, str], expected: str
) -> None:
    assert python_workers_executable(settings, environ, "/venv/bin/python") == expected


def _executor() -> SparkExecutor:
    config = WorkerConfig.from_properties(BASE)
    return SparkExecutor(
        config, PluginRegistry.discover(file_connectors=True), lambda: OffsetState(), lambda records: None
    )


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"connector.class": "NoSuchConnector"}, "Failed to find any class that implements Connector"),
        ({}, "names neither task.class nor connector.class"),
        ({"connector.class": "FileStreamSink", "file": "/tmp/x"}, "Must configure one of topics"),
    ],
)
def test_a_task_that_cannot_start_is_failed_with_its_trace_and_starts_no_spark(
    config: dict[str, str], message: str
) -> None:
    executor = _executor()
    state = executor.start_task(TaskId("c", 0), config, "STARTED")
    assert state.state == "FAILED"
    assert state.trace is not None and message in state.trace
    assert executor.held() == set()
    assert executor.counters() == {"task_starts": 1, "task_stops": 0}
    assert not executor.spark.started  # the SparkSession is only created by a running sink task


class _AckRecordingSource(SourceTask):
    def __init__(self) -> None:
        self.acked: list[tuple[SourceRecord, object]] = []

    def version(self) -> str:
        return "test"

    def start(self, props: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        return None

    def stop(self) -> None:
        pass

    def commit_record(self, record: SourceRecord, metadata: object) -> None:
        self.acked.append((record, metadata))


class _Message:
    def topic(self) -> str:
        return "t"


def _runner(task: SourceTask, write_offsets: Callable[[list[SourceOffset]], None]) -> SourceTaskRunner:
    """A source runner with string converters and no broker: only its callbacks and flushes are used."""
    return SourceTaskRunner(
        TaskId("c", 0),
        task,
        {},
        lambda _task, _trace: None,
        bootstrap="unused:9092",
        converters={
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        },
        producer_settings={},
        read_offsets=OffsetState,
        write_offsets=write_offsets,
        flush_interval_ms=1000,
        flush_timeout_ms=1000,
    )


def test_source_runner_tells_the_task_each_acknowledged_record() -> None:
    """A delivered record reaches ``commit_record`` (Java's commitRecord); a failed one does not.

    Without it the verifiable source never learnt what Kafka acknowledged and wrote nothing to its file.
    """
    task = _AckRecordingSource()
    runner = _runner(task, lambda _offsets: None)
    ok = SourceRecord(source_partition={"id": 0}, source_offset={"seqno": 1}, topic="t", value=1)
    bad = SourceRecord(source_partition={"id": 0}, source_offset={"seqno": 2}, topic="t", value=2)
    message = _Message()
    batch = _Submitted(latest_source_offsets("c", [ok, bad]), 2)
    batch.pending = 2
    runner._delivery_callback(batch, ok)(None, message)
    runner._delivery_callback(batch, bad)("broker down", message)
    assert task.acked == [(ok, message)]
    assert runner._delivery_error == "producing to t failed: broker down"
    assert batch.pending == 1  # the failed record is never acknowledged: its poll's offsets never commit


class _IdleProducer:
    """The producer calls ``_flush`` makes when nothing is on its way: a poll, or a flush at stop."""

    def poll(self, _timeout: float) -> int:
        return 0

    def flush(self, _timeout: float) -> int:
        return 0


class _HeldProducer(_IdleProducer):
    """A producer whose records stay on their way until the test acknowledges them, in any order."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[Any, Any], None]] = []

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        self.callbacks.append(kwargs["on_delivery"])


def test_source_offsets_commit_only_up_to_the_first_poll_with_an_unacknowledged_record() -> None:
    """Java's SubmittedRecords rule: acknowledgements may come out of poll order, but an offset is
    stored only when every record before it is in Kafka, and the poll loop never waits for that."""
    written: list[list[SourceOffset]] = []
    runner = _runner(_AckRecordingSource(), written.append)
    producer = _HeldProducer()
    for positions in ((1, 2), (3,), (4,)):
        runner._send(
            producer, [SourceRecord({"f": "a"}, {"position": n}, "t", value=f"{n}") for n in positions]
        )
    ack = [lambda n=n: producer.callbacks[n](None, _Message()) for n in range(4)]
    ack[2]()  # the second poll is in Kafka, the first is not yet
    runner._flush(producer)
    assert written == []
    ack[0]()
    runner._flush(producer)
    assert written == []  # one of the first poll's two records is still on its way
    ack[1]()
    runner._flush(producer)
    assert written == [[SourceOffset("c", {"f": "a"}, {"position": 3})]]
    ack[3]()
    runner._flush(producer, final=True)
    assert written[-1] == [SourceOffset("c", {"f": "a"}, {"position": 4})]
    assert not runner._submitted


def test_records_on_their_way_are_not_held_until_the_offset_flush() -> None:
    """A poll waits for its offsets to be flushed (a minute by default) with its source offsets only: the
    records themselves (keys, values) are free once produced, so a fast source's last minute of records
    is not kept in memory."""
    import gc
    import weakref

    class Source(_AckRecordingSource):  # a task that does not ask to hear of each acknowledged record
        commit_record = SourceTask.commit_record

    runner = _runner(Source(), lambda _offsets: None)
    producer = _HeldProducer()
    records = [SourceRecord({"f": "a"}, {"position": n}, "t", value="x" * 1000) for n in range(3)]
    held = [weakref.ref(r) for r in records]
    runner._send(producer, records)
    for callback in producer.callbacks:
        callback(None, _Message())
    producer.callbacks.clear()  # as librdkafka drops a delivered record's callback
    del records
    gc.collect()
    assert [ref() for ref in held] == [None, None, None]
    assert len(runner._submitted) == 1 and runner._submitted[0].pending == 0  # not flushed yet
    runner._flush(producer)
    assert not runner._submitted


def test_a_sink_query_is_restarted_for_a_few_failed_spark_jobs_in_a_row_then_the_task_fails() -> None:
    from kconnect.connectors.file import FileStreamSinkTask
    from kconnect.runtime.dataplane.sink_runner import SPARK_JOB_RETRIES, SinkTaskRunner

    runner = SinkTaskRunner(
        TaskId("c", 0),
        FileStreamSinkTask(),
        {"topics": "t"},
        lambda _task, _trace: None,
        spark=lambda: None,
        task_count=1,
        bootstrap="unused:9092",
        converters={
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        },
        consumer_settings={},
    )
    failure = RuntimeError("An error occurred\njava.io.OptionalDataException\n\tat ...")
    assert [runner._spark_failed(failure) for _ in range(SPARK_JOB_RETRIES + 1)] == [
        True
    ] * SPARK_JOB_RETRIES + [False]
    assert runner._restart.is_set()  # the query restarts from the committed offsets


def test_each_sink_task_registers_the_kafka_source_under_a_name_of_its_own() -> None:
    from pyspark import cloudpickle

    first, other = task_data_source("orders-sink-0"), task_data_source("orders.sink-1")
    assert first.name() == "kconnect_kafka_orders_sink_0"
    assert other.name() == "kconnect_kafka_orders_sink_1"
    assert issubclass(first, KafkaDataSource) and KafkaDataSource.name() == "kconnect_kafka"
    # Spark pickles the class to register it (by value: it is made at run time) and its workers unpickle it.
    copy = cloudpickle.loads(cloudpickle.dumps(first))
    assert copy.name() == first.name() and issubclass(copy, KafkaDataSource)
