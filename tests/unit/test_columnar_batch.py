"""The columnar fast paths of the data plane agree with the row-by-row ones they replace.

Sink batches now reach the driver as Arrow columns (``records_from_columns``, ``consumed_offsets_of_table``),
the Kafka reader yields Arrow batches (``raw_batch``), and the file source cuts many lines per buffer scan
(``_extract_lines``); each is checked here against the slower, simpler definition.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import FrozenInstanceError
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kconnect.connectors.file import FileStreamSourceTask
from kconnect.runtime.dataplane.connect_data import ConnectField, ConnectSchema
from kconnect.runtime.dataplane.kafka_reader import arrow_raw_schema, raw_batch
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.dataplane.sink_batch import RECORD_COLUMNS, records_from_columns, sink_record
from kconnect.runtime.dataplane.sink_runner import consumed_offsets, consumed_offsets_of_table
from kconnect.runtime.plugins.api import Header, SinkRecord, SourceRecord, TopicPartition, frozen_record
from tests.support.spark import local_spark

STRUCT = ConnectSchema(
    "struct",
    fields=(
        ConnectField("id", ConnectSchema("int32")),
        ConnectField(
            "tags", ConnectSchema("map", True, keys=ConnectSchema("string"), values=ConnectSchema("int64"))
        ),
        ConnectField("at", ConnectSchema("int64", True, name="org.apache.kafka.connect.data.Timestamp")),
    ),
)


def test_arrow_raw_schema_is_spark_raw_schema() -> None:
    from pyspark.sql.pandas.types import to_arrow_schema

    assert arrow_raw_schema().equals(to_arrow_schema(RAW_SCHEMA))


class _Message:
    """What ``raw_batch`` reads of a confluent-kafka ``Message``: its accessor methods."""

    def __init__(self, offset: int, stamp: tuple[int, int], key: Any, value: Any, headers: Any) -> None:
        self._fields = (offset, stamp, key, value, headers)

    def offset(self) -> int:
        return int(self._fields[0])

    def timestamp(self) -> tuple[int, int]:
        stamp: tuple[int, int] = self._fields[1]
        return stamp

    def key(self) -> Any:
        return self._fields[2]

    def value(self) -> Any:
        return self._fields[3]

    def headers(self) -> Any:
        return self._fields[4]


def test_raw_batch_holds_what_the_tuple_rows_held() -> None:
    batch = raw_batch(
        [
            _Message(7, (1, 1000), b"k", b"v", [("h", b"x"), ("n", None)]),
            _Message(8, (0, -1), None, None, None),
        ],
        "t",
        3,
    )
    assert batch.schema.equals(arrow_raw_schema())
    assert batch.to_pylist() == [
        {
            "topic": "t",
            "partition": 3,
            "offset": 7,
            "timestamp": 1000,
            "key": b"k",
            "value": b"v",
            "headers": [{"key": "h", "value": b"x"}, {"key": "n", "value": None}],
        },
        # Timestamp type 0 (not available) is -1, as the tuple reader wrote it; no headers is an empty list.
        {
            "topic": "t",
            "partition": 3,
            "offset": 8,
            "timestamp": -1,
            "key": None,
            "value": None,
            "headers": [],
        },
    ]


rows = st.lists(
    st.tuples(st.sampled_from(["a", "b-1", "c"]), st.integers(0, 3), st.integers(0, 10**12)), max_size=50
)


@settings(deadline=None)  # the first call imports Arrow's compute kernels
@given(rows)
def test_consumed_offsets_of_a_table_match_row_by_row(data: list[tuple[str, int, int]]) -> None:
    table = pa.table(
        {
            "topic": pa.array([r[0] for r in data], pa.string()),
            "partition": pa.array([r[1] for r in data], pa.int32()),
            "offset": pa.array([r[2] for r in data], pa.int64()),
        }
    )
    assert consumed_offsets_of_table(table) == consumed_offsets(data)


def test_records_from_columns_match_sink_record_of_rows() -> None:
    """The same prepared frame through ``collect`` + ``sink_record`` and ``toArrow`` + columns."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import LongType, MapType, StringType, StructField, StructType, TimestampType

    spark = local_spark()
    value_type = StructType(
        [
            StructField("id", LongType()),
            StructField("tags", MapType(StringType(), LongType())),
            StructField("at", TimestampType()),
        ]
    )
    at = dt.datetime(2026, 11, 22, 10, 0, 0)
    frame = spark.createDataFrame(
        [
            ("t", 0, 5, 1000, "k1", (1, {"x": 1, "y": 2}, at), [("h", b"v")]),
            ("t", 1, 6, -1, None, None, []),
            ("u", 0, 7, 5, "k3", (3, None, None), None),
        ],
        StructType(
            [
                *RAW_SCHEMA.fields[:4],
                StructField("key", StringType()),
                StructField("value", value_type),
                RAW_SCHEMA.fields[6],
            ]
        ),
    ).withColumn("partition", F.col("partition").cast("int"))
    key_schema = ConnectSchema("string", True)
    by_rows = [sink_record(r, key_schema, STRUCT) for r in frame.select(*RECORD_COLUMNS).collect()]
    table = frame.select(*RECORD_COLUMNS).toArrow()
    columns = {name: table.column(name).to_pylist() for name in RECORD_COLUMNS}
    by_columns = records_from_columns(columns, key_schema, STRUCT)
    assert by_columns == by_rows
    assert by_columns[0].value["tags"] == {"x": 1, "y": 2}
    assert by_columns[0].headers == (Header("h", b"v"),)
    third = {name: values[2:3] for name, values in columns.items()}
    assert records_from_columns(third, key_schema, STRUCT) == [by_rows[2]]


def test_plain_string_columns_are_taken_as_they_are() -> None:
    columns: dict[str, list[Any]] = {
        "topic": ["t", "t"],
        "partition": [0, 0],
        "offset": [1, 2],
        "timestamp": [10, -1],
        "key": [None, "k"],
        "value": ["a", "b"],
        "headers": [[], None],
    }
    string = ConnectSchema("string", True)
    assert records_from_columns(columns, string, string) == [
        SinkRecord("t", 0, 1, None, "a", (), 10),
        SinkRecord("t", 0, 2, "k", "b", (), None),
    ]
    first = {name: values[:1] for name, values in columns.items()}
    assert TopicPartition("t", 0) == records_from_columns(first, string, string)[0].topic_partition


def _reference_lines(data: bytes) -> list[tuple[str, int]]:
    """Complete lines and the byte position after each: ``\\n``, ``\\r\\n`` and ``\\r`` end one; a final
    ``\\r`` counts only when a byte follows it (it might be the first half of ``\\r\\n``)."""
    out = []
    i = start = 0
    while i < len(data):
        if data[i : i + 1] == b"\n":
            out.append((data[start:i].decode("utf-8", "replace"), i + 1))
            start = i = i + 1
        elif data[i : i + 1] == b"\r":
            if i + 1 >= len(data):
                break
            end = i + (2 if data[i + 1 : i + 2] == b"\n" else 1)
            out.append((data[start:i].decode("utf-8", "replace"), end))
            start = i = end
        else:
            i += 1
    return out


@settings(max_examples=60, deadline=None)
@given(
    parts=st.lists(st.sampled_from([b"a", b"bc", b"\n", b"\r", b"\r\n", "\u00e9".encode()]), max_size=60),
    read_size=st.integers(1, 7),
    batch_size=st.integers(1, 5),
)
def test_file_source_cuts_lines_and_positions_as_one_line_at_a_time(
    tmp_path_factory: pytest.TempPathFactory, parts: list[bytes], read_size: int, batch_size: int
) -> None:
    data = b"".join(parts)
    path: Path = tmp_path_factory.mktemp("lines") / "in.txt"
    path.write_bytes(data)
    task = FileStreamSourceTask()
    task.read_size = read_size
    task.idle_wait_s = 0
    task.start({"file": str(path), "topic": "t", "batch.size": str(batch_size)})
    got: list[tuple[str, int]] = []
    while True:
        records = task.poll()
        if not records:
            break
        assert len(records) <= batch_size
        got.extend((r.value, r.source_offset["position"]) for r in records)  # type: ignore[index]
    task.stop()
    assert got == _reference_lines(data)


def test_frozen_record_is_the_constructors_record() -> None:
    fields: dict[str, Any] = {
        "topic": "t",
        "partition": 1,
        "offset": 5,
        "key": b"k",
        "value": {"a": 1},
        "headers": (Header("h", b"x"),),
        "timestamp": 7,
    }
    fast = frozen_record(SinkRecord, dict(fields))
    assert fast == SinkRecord(**fields)
    assert repr(fast) == repr(SinkRecord(**fields))
    assert fast.topic_partition == TopicPartition("t", 1)
    with pytest.raises(FrozenInstanceError):
        fast.offset = 6  # type: ignore[misc]
    source = {"source_partition": {"f": "x"}, "source_offset": {"position": 3}, "topic": "t"}
    defaults = {"partition": None, "key": None, "value": "line", "headers": (), "timestamp": None}
    assert frozen_record(SourceRecord, {**source, **defaults}) == SourceRecord(**source, value="line")


def test_raw_batch_without_headers_has_empty_header_lists() -> None:
    batch = raw_batch([_Message(i, (1, i), None, b"v", None) for i in range(3)], "t", 0)
    assert batch.schema.equals(arrow_raw_schema())
    assert batch.column("headers").to_pylist() == [[], [], []]
    assert batch.column("offset").to_pylist() == [0, 1, 2]


def test_consumer_pool_hands_back_a_consumer_where_it_stopped() -> None:
    """A micro-batch that starts where the last one stopped gets the same (connected, prefetching)
    consumer; one that starts elsewhere gets a fresh one (a re-assigned consumer can still hand out what
    it prefetched from its old position); an idle one is closed."""
    from kconnect.runtime.dataplane.kafka_reader import _ConsumerPool

    pool = _ConsumerPool(idle_s=3600)
    conf = {"bootstrap.servers": "127.0.0.1:1", "group.id": "g-reader"}
    first, position = pool.take(conf, "t", 0, 0)
    assert position == 0
    pool.give_back(conf, "t", 0, first, 100)
    again, position = pool.take(conf, "t", 0, 100)
    assert again is first and position == 100
    pool.give_back(conf, "t", 0, again, 200)
    moved, position = pool.take(conf, "t", 0, 50)  # a replayed batch: a new consumer at 50
    assert moved is not first and position == 50
    other, _ = pool.take(conf, "t", 1, 0)  # another partition: another consumer
    assert other is not first
    pool.give_back(conf, "t", 0, moved, 60)
    pool.give_back(conf, "t", 1, other, 10)
    pool.idle_s = 0
    pool.close_idle()
    fresh, _ = pool.take(conf, "t", 0, 60)
    assert fresh is not moved  # the idle one was closed, not kept
    fresh.close()
