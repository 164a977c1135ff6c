"""Offsets-topic codec and fold.

Golden values were produced by Apache Kafka Connect 3.9.0's own OffsetStorageWriter (connect-runtime
3.9.0 jar of tools/reference-connect, Jackson 2.16.2, JDK 17): offset(partition, offset), beginFlush()
and doFlush() against a capturing OffsetBackingStore, with the worker's internal JsonConverters
(schemas.enable=false) for key and value. The writer builds the key as
``Arrays.asList(namespace, partition)``; partitions and offsets were LinkedHashMaps, so keys keep their
insertion order. Decoding follows OffsetUtils.processPartitionKey and validateFormat.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.codecs.java_json import write_record
from kconnect.runtime.storage import offset_log as ol
from kconnect.runtime.storage.config_log import CorruptRecord
from kconnect.runtime.storage.offset_log import OffsetState, SourceOffset

MIXED_OFFSET = {
    "lsn": 9007199254740993,
    "ratio": 0.5,
    "big": 1.0e20,
    "small": 1.0e-5,
    "hundred": 100.0,
    "flag": True,
    "none": None,
    "neg": -2.5e-7,
    "ten7": 1.0e7,
    "f32": 1.5,
}

GOLDEN: list[tuple[SourceOffset, bytes, bytes | None]] = [
    (
        SourceOffset("file-source", {"filename": "/tmp/in.txt"}, {"position": 1234}),
        b'["file-source",{"filename":"/tmp/in.txt"}]',
        b'{"position":1234}',
    ),
    (
        SourceOffset("file-source", {"db": "main", "table": "t\u00e9", "shard": 3}, MIXED_OFFSET),
        b'["file-source",{"db":"main","table":"t\xc3\xa9","shard":3}]',
        b'{"lsn":9007199254740993,"ratio":0.5,"big":1.0E20,"small":1.0E-5,"hundred":100.0,"flag":true,'
        b'"none":null,"neg":-2.5E-7,"ten7":1.0E7,"f32":1.5}',
    ),
    # offset(partition, null): the writer sends a tombstone.
    (
        SourceOffset("file-source", {"filename": "/tmp/gone.txt"}, None),
        b'["file-source",{"filename":"/tmp/gone.txt"}]',
        None,
    ),
]


@pytest.mark.parametrize(("record", "key", "value"), GOLDEN)
def test_encode_matches_java_bytes(record: SourceOffset, key: bytes, value: bytes | None) -> None:
    assert ol.encode(record) == (key, value)


@pytest.mark.parametrize(("record", "key", "value"), GOLDEN)
def test_decode_java_bytes(record: SourceOffset, key: bytes, value: bytes | None) -> None:
    decoded = ol.decode(key, value)
    assert decoded == record
    assert decoded.is_tombstone is (value is None)


def test_doubles_are_written_as_java_double_to_string() -> None:
    # JsonConverter output for these doubles (Jackson writes Double.toString). JDK 17 prints 5e-324 as
    # 4.9E-324 and 1e23 as 9.999999999999999E22 where JDK 19+ (and we) print the shortest digits; those
    # two are left out on purpose.
    values = {
        "d2": 2e-3,
        "d3": 123456789.0,
        "d4": 0.1 + 0.2,
        "d5": 1e16,
        "d6": 12345.678,
        "d7": 9999999.999,
        "d8": 1e-3,
        "d9": 0.00099,
        "d10": 1.7976931348623157e308,
        "d11": 4.35,
        "d12": 100.0 / 3,
        "d14": 1.0e22,
        "neg0": -0.0,
        "lmin": -(2**63),
    }
    assert write_record(values) == (
        b'{"d2":0.002,"d3":1.23456789E8,"d4":0.30000000000000004,"d5":1.0E16,"d6":12345.678,'
        b'"d7":9999999.999,"d8":0.001,"d9":9.9E-4,"d10":1.7976931348623157E308,"d11":4.35,'
        b'"d12":33.333333333333336,"d14":1.0E22,"neg0":-0.0,"lmin":-9223372036854775808}'
    )


def test_null_partition_and_empty_value() -> None:
    # Java lets a task use a null partition; empty value bytes read back as no offset.
    assert ol.decode(b'["c",null]', b'{"p":1}') == SourceOffset("c", None, {"p": 1})
    assert ol.decode(b'["c",{"f":"x"}]', b"") == SourceOffset("c", {"f": "x"}, None)
    assert ol.encode(SourceOffset("c", None, {"p": 1})) == (b'["c",null]', b'{"p":1}')


CORRUPT: list[tuple[bytes | None, bytes | None, str]] = [
    (b"not json", b"{}", "key is not valid JSON"),
    (b'{"c":1}', b"{}", "JSON array"),
    (b'["c"]', b"{}", "JSON array"),
    (b'["c",{},1]', b"{}", "JSON array"),
    (b'[1,{"f":"x"}]', b"{}", "first element"),
    (b'["c","x"]', b"{}", "second element"),
    (b'["c",{"f":{"nested":1}}]', b"{}", "partition field 'f'"),
    (b'["c",{"f":"x"}]', b"[1]", "offset should be a JSON object"),
    (b'["c",{"f":"x"}]', b'{"o":[1]}', "offset field 'o'"),
    (b'["c",{"f":"x"}]', b'{"o":NaN}', "not valid JSON"),
    (b'["c",{"f":"x"}]', b'{"o":1e999}', "offset field 'o'"),
    (b'["c",{"f":"x"}]', b'{"o":9223372036854775808}', "Java long"),
    (None, b"{}", "without a key"),
]


@pytest.mark.parametrize(("key", "value", "fragment"), CORRUPT)
def test_corrupt_records_name_the_key(key: bytes | None, value: bytes | None, fragment: str) -> None:
    with pytest.raises(CorruptRecord) as info:
        ol.decode(key, value)
    if key:
        assert f"'{key.decode()}'" in str(info.value)
    assert fragment in str(info.value)


def test_construction_rejects_what_java_rejects() -> None:
    # OffsetUtils.validateFormat: string keys, primitive values only.
    with pytest.raises(ValueError, match="only primitives"):
        SourceOffset("c", {"f": "x"}, {"o": [1]})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="keys must be strings"):
        SourceOffset("c", {1: "x"}, {"o": 1})  # type: ignore[dict-item]
    with pytest.raises(ValueError):
        SourceOffset("c", {"f": float("nan")}, None)


def test_records_copy_their_maps() -> None:
    partition = {"f": "x"}
    record = SourceOffset("c", partition, {"o": 1})
    partition["f"] = "y"
    assert record.partition == {"f": "x"}


# --- fold ----------------------------------------------------------------------------------------------


def test_latest_offset_wins_and_tombstone_forgets() -> None:
    p = {"filename": "a.txt"}
    state = OffsetState()
    for record in (
        SourceOffset("src", p, {"position": 1}),
        SourceOffset("src", {"filename": "b.txt"}, {"position": 7}),
        SourceOffset("src", p, {"position": 2}),
        SourceOffset("other", p, {"position": 99}),
    ):
        state = ol.apply(state, record)
    assert state.offset("src", p) == {"position": 2}
    assert state.offset("other", p) == {"position": 99}
    assert state.offset("src", {"filename": "c.txt"}) is None
    assert state.connectors() == ["other", "src"]
    assert state.partitions("src") == [{"filename": "a.txt"}, {"filename": "b.txt"}]
    assert state.offsets("src") == {
        '{"filename":"a.txt"}': {"position": 2},
        '{"filename":"b.txt"}': {"position": 7},
    }
    state = ol.apply(state, SourceOffset("src", p, None))
    assert state.offset("src", p) is None
    state = ol.apply(state, SourceOffset("other", p, None))
    assert state.connectors() == ["src"]
    # A tombstone for something never written is harmless.
    assert ol.apply(OffsetState(), SourceOffset("x", p, None)) == OffsetState()


def test_partition_found_whatever_the_key_order() -> None:
    # A Java connector's HashMap decides its key order; lookups must not depend on it.
    state = ol.apply(OffsetState(), ol.decode(b'["c",{"table":"t","db":"d"}]', b'{"o":1}'))
    assert state.offset("c", {"db": "d", "table": "t"}) == {"o": 1}
    state = ol.apply(state, ol.decode(b'["c",{"db":"d","table":"t"}]', b'{"o":2}'))
    assert state.offset("c", {"table": "t", "db": "d"}) == {"o": 2}
    assert len(state.partitions("c")) == 1
    assert ol.partition_json({"table": "t", "db": "d"}) == '{"db":"d","table":"t"}'
    assert ol.partition_json(None) == "null"


def test_null_partition_is_its_own_partition() -> None:
    state = ol.apply(OffsetState(), SourceOffset("c", None, {"o": 1}))
    assert state.offset("c", None) == {"o": 1}
    assert state.offset("c", {}) is None


# --- properties ----------------------------------------------------------------------------------------

primitives = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10)
)
maps = st.dictionaries(st.text(max_size=6), primitives, max_size=4)
offsets = st.builds(SourceOffset, st.text(min_size=1, max_size=8), st.none() | maps, st.none() | maps)


@given(offsets)
def test_round_trip(record: SourceOffset) -> None:
    key, value = ol.encode(record)
    assert ol.decode(key, value) == record
    assert json.loads(key) == [record.connector, record.partition]


@given(st.lists(offsets, max_size=20))
def test_fold_never_raises_and_keeps_the_latest(history: list[SourceOffset]) -> None:
    state = OffsetState()
    latest: dict[tuple[str, str], SourceOffset] = {}
    for record in history:
        state = ol.apply(state, ol.decode(*ol.encode(record)))
        latest[(record.connector, ol.partition_json(record.partition))] = record
    for record in latest.values():
        assert state.offset(record.connector, record.partition) == record.offset
