"""Transformations as Spark column expressions against Apache Kafka Connect 3.9.0's own outputs.

``tests/golden/converters.txt`` holds, per case, a transformation config and the record Java's
transformation produced from one sample record, serialized by Java's JsonConverter. Here the same raw
record goes through kconnect's JsonConverter.to_columns, the transform chain and from_columns, and the
bytes must be Java's, schema and payload alike.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kconnect.runtime.dataplane.converters import JsonConverter
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.dataplane.transforms import TRANSFORM_ERROR, transform_chain
from tests.support.spark import local_spark

GOLDEN = Path(__file__).parent.parent / "golden" / "converters.txt"
SMT_CLASSES = {
    "insert_value": "InsertField$Value",
    "replace_exclude_rename": "ReplaceField$Value",
    "replace_include": "ReplaceField$Value",
    "mask": "MaskField$Value",
    "mask_replacement": "MaskField$Value",
    "cast_fields": "Cast$Value",
    "value_to_key": "ValueToKey",
    "extract_value": "ExtractField$Value",
    "extract_value_struct": "ExtractField$Value",
    "flatten": "Flatten$Value",
    "flatten_default": "Flatten$Value",
    "tsconv_string": "TimestampConverter$Value",
    "tsconv_timestamp": "TimestampConverter$Value",
    "tsconv_date": "TimestampConverter$Value",
    "tsconv_time": "TimestampConverter$Value",
    "regex_router": "RegexRouter",
    "regex_router_nomatch": "RegexRouter",
    "timestamp_router": "TimestampRouter",
    "filter": "Filter",
}


def golden_smts() -> dict[str, Any]:
    out = {}
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("smt "):
            _, name, body = line.split(" ", 2)
            out[name] = json.loads(body)
    return out


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    return local_spark()


def _converter() -> JsonConverter:
    c = JsonConverter()
    c.configure({}, False)
    return c


def test_every_golden_case_matches_java(spark) -> None:  # type: ignore[no-untyped-def]
    cases = golden_smts()
    source = cases["regex_router_nomatch"]["record"]  # Java left the record as it was
    raw = [
        (
            "orders",
            2,
            17,
            1700000000999,
            source["key"].encode(),
            source["value"].encode(),
            [("trace", b"abc")],
        )
    ]
    base = spark.createDataFrame(raw, RAW_SCHEMA)
    key_conv, value_conv = _converter(), _converter()
    typed = value_conv.to_columns(key_conv.to_columns(base, "key"), "value").cache()
    mismatches = []
    for name, cls in SMT_CLASSES.items():
        case = cases[name]
        config = {"transforms": "t", "transforms.t.type": "org.apache.kafka.connect.transforms." + cls}
        config.update({f"transforms.t.{k}": v for k, v in case["config"].items()})
        out = transform_chain(config).apply(typed)
        out = value_conv.from_columns(key_conv.from_columns(out, "key"), "value")
        plan = out._jdf.queryExecution().executedPlan().toString()
        assert not any(p in plan for p in ("PythonUDF", "BatchEvalPython", "ArrowEvalPython")), name
        rows = out.select("topic", "key", "value", TRANSFORM_ERROR).collect()
        expected = case["record"]
        if expected is None:
            got = rows or None
        else:
            assert len(rows) == 1, name
            row = rows[0]
            got = {
                "topic": row["topic"],
                "key": bytes(row["key"]).decode(),
                "value": bytes(row["value"]).decode(),
            }
            assert row[TRANSFORM_ERROR] is None, (name, row[TRANSFORM_ERROR])
            expected = {k: expected[k] for k in ("topic", "key", "value")}
        if got != expected:
            mismatches.append((name, got, expected))
    assert not mismatches, mismatches


def test_schemaless_cases_match_javas_payloads(spark) -> None:  # type: ignore[no-untyped-def]
    # Java transforms schemaless values as maps; kconnect infers a batch-wide struct (infer_schema).
    cases = golden_smts()
    payload = b'{"schema":null,"payload":{"id":42,"name":"pen","addr":{"city":"Oslo"}}}'
    raw = [("orders", 2, 17, 1700000000999, b'{"schema":null,"payload":"k1"}', payload, [])]
    base = spark.createDataFrame(raw, RAW_SCHEMA)
    conv = _converter()
    typed = conv.to_columns(base, "value", conv.infer_schema(base, "value"))
    classes = {
        "schemaless_insert": "InsertField$Value",
        "schemaless_flatten": "Flatten$Value",
        "schemaless_mask": "MaskField$Value",
    }
    for name, cls in classes.items():
        case = cases[name]
        config = {"transforms": "t", "transforms.t.type": "org.apache.kafka.connect.transforms." + cls}
        config.update({f"transforms.t.{k}": v for k, v in case["config"].items()})
        row = conv.from_columns(transform_chain(config).apply(typed), "value").collect()[0]
        got = json.loads(bytes(row["value"]))["payload"]
        assert got == json.loads(case["record"]["value"])["payload"], name
