"""Transform and predicate configs (Java's keys, ConfigDefs and errors) and predicates on a Spark frame."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from kconnect.runtime.dataplane.connect_data import ConnectDataError, ConnectField, ConnectSchema
from kconnect.runtime.dataplane.converters import JsonConverter, StringConverter
from kconnect.runtime.dataplane.predicates import PREDICATES
from kconnect.runtime.dataplane.records import RAW_SCHEMA
from kconnect.runtime.dataplane.transformations import TRANSFORMATIONS, Step
from kconnect.runtime.dataplane.transforms import (
    DROPPED,
    TRANSFORM_ERROR,
    TRANSFORM_ERROR_CLASS,
    ConfiguredTransform,
    TransformChain,
    transform_chain,
)
from kconnect.runtime.plugins.config_def import ConfigValidationError, convert_to_string
from tests.support.spark import local_spark

GOLDEN = Path(__file__).parent.parent / "golden" / "converters.txt"
PKG = "org.apache.kafka.connect.transforms."


def java_config_defs() -> dict[str, list[dict[str, Any]]]:
    out = {}
    for line in GOLDEN.read_text().splitlines():
        if line.startswith("configdef "):
            _, name, body = line.split(" ", 2)
            out[PKG + name] = json.loads(body)
    return out


@pytest.mark.parametrize(("class_name", "java_keys"), sorted(java_config_defs().items()))
def test_config_defs_have_javas_keys_types_defaults_and_importance(
    class_name: str, java_keys: list[dict[str, Any]]
) -> None:
    plugin = TRANSFORMATIONS.get(class_name) or PREDICATES[class_name]
    ours = plugin.config_def().config_keys
    assert sorted(ours) == sorted(k["name"] for k in java_keys)
    for k in java_keys:
        key = ours[k["name"]]
        assert key.type.value == k["type"], k["name"]
        assert key.importance.value == k["importance"], k["name"]
        text = convert_to_string(key.default, key.type) if key.has_default else "<required>"
        default = "null" if text is None else text
        assert default == k["default"], k["name"]


def test_every_key_and_value_variant_is_there() -> None:
    for base in (
        "Cast",
        "ExtractField",
        "Flatten",
        "InsertField",
        "MaskField",
        "ReplaceField",
        "TimestampConverter",
    ):
        assert {f"{PKG}{base}$Key", f"{PKG}{base}$Value"} <= set(TRANSFORMATIONS)


@pytest.mark.parametrize(
    ("config", "message"),
    [
        ({"transforms": "a"}, "transforms.a.type"),
        (
            {"transforms": "a", "transforms.a.type": "com.example.Nope"},
            "Invalid value com.example.Nope for configuration transforms.a.type",
        ),
        ({"transforms": "a,a", "transforms.a.type": PKG + "Filter"}, "Duplicate alias"),
        (
            {"transforms": "a", "transforms.a.type": PKG + "Filter", "transforms.a.predicate": "p"},
            "transforms.a.predicate",
        ),
        (
            {"transforms": "a", "transforms.a.type": PKG + "Filter", "transforms.a.negate": "maybe"},
            "transforms.a.negate",
        ),
        (
            {
                "transforms": "a",
                "transforms.a.type": PKG + "RegexRouter",
                "transforms.a.regex": "(",
                "transforms.a.replacement": "x",
            },
            "Invalid value \\( for configuration regex",
        ),
        (
            {"transforms": "a", "transforms.a.type": PKG + "RegexRouter", "transforms.a.regex": "x"},
            'Missing required configuration "replacement"',
        ),
        (
            {"transforms": "a", "transforms.a.type": PKG + "Cast$Value", "transforms.a.spec": "a:decimal"},
            "Invalid type found in casting spec: decimal",
        ),
        (
            {"transforms": "a", "transforms.a.type": PKG + "MaskField$Value", "transforms.a.fields": ""},
            "Empty list",
        ),
        (
            {
                "transforms": "a",
                "transforms.a.type": PKG + "TimestampConverter$Value",
                "transforms.a.target.type": "epoch",
            },
            "String must be one of: string, unix, Date, Time, Timestamp",
        ),
        (
            {
                "transforms": "a",
                "transforms.a.type": PKG + "TimestampConverter$Value",
                "transforms.a.target.type": "string",
            },
            "requires format",
        ),
        (
            {
                "transforms": "a",
                "transforms.a.type": PKG + "ReplaceField$Value",
                "transforms.a.renames": "a-b",
            },
            "renames",
        ),
        (
            {"predicates": "p", "predicates.p.type": PKG + "predicates.TopicNameMatches"},
            'Missing required configuration "pattern"',
        ),
        ({"predicates": "p", "predicates.p.type": "Nope"}, "predicates.p.type"),
    ],
)
def test_bad_configs_name_the_key_the_value_and_the_rule(config: dict[str, str], message: str) -> None:
    with pytest.raises(ConfigValidationError, match=message):
        transform_chain(config)


def test_simple_names_are_accepted_as_java_aliases() -> None:
    chain = transform_chain(
        {
            "transforms": "r",
            "transforms.r.type": "RegexRouter",
            "transforms.r.regex": "a",
            "transforms.r.replacement": "b",
        }
    )
    assert chain.transforms[0].plugin.class_name == PKG + "RegexRouter"


# --------------------------------------------------------------------------------------- Spark frames


@pytest.fixture(scope="module")
def spark():  # type: ignore[no-untyped-def]
    return local_spark()


ORDER = ConnectSchema(
    "struct",
    name="Order",
    fields=(ConnectField("id", ConnectSchema("int64")), ConnectField("price", ConnectSchema("string"))),
)


@pytest.fixture(scope="module")
def frame(spark):  # type: ignore[no-untyped-def]
    conv = JsonConverter()
    conv.configure({}, False)
    rows = [
        (
            "orders",
            0,
            0,
            1_000,
            b"k0",
            conv.from_connect({"id": 1, "price": "1.5"}, ORDER),
            [("trace", b"x")],
        ),
        ("orders", 0, 1, None, b"k1", conv.from_connect({"id": 2, "price": "abc"}, ORDER), []),
        ("refunds", 0, 2, 2_000, b"k2", conv.from_connect({"id": 3, "price": "7"}, ORDER), [("other", b"y")]),
        ("orders", 0, 3, 3_000, b"k3", None, []),
    ]
    keys = StringConverter()
    keys.configure({}, True)
    return conv.to_columns(keys.to_columns(spark.createDataFrame(rows, RAW_SCHEMA), "key"), "value").cache()


@pytest.mark.parametrize("column", ["partition", "offset"])
def test_a_transformation_that_would_move_a_record_is_refused(frame: Any, column: str) -> None:
    """A sink commits offsets from the partition and offset columns after its chain (only the topic is
    copied before it): a step writing either is refused when the plan is built, naming the alias."""
    from pyspark.sql import functions as F

    route = transform_chain(
        {
            "transforms": "r",
            "transforms.r.type": PKG + "RegexRouter",
            "transforms.r.regex": "x",
            "transforms.r.replacement": "y",
        }
    )
    mover = ConfiguredTransform("mover", route.transforms[0].plugin, lambda df: Step({column: F.lit(7)}))
    with pytest.raises(ConnectDataError, match=r"mover .* would change a record's partition or offset"):
        TransformChain((*route.transforms, mover)).apply(frame)
    assert TransformChain(route.transforms).apply(frame).count() == 4  # a router alone is fine


def _offsets(df: Any) -> list[int]:
    return sorted(r["offset"] for r in df.select("offset").collect())


@pytest.mark.parametrize(
    ("predicate", "negate", "kept"),
    [
        (
            {"predicates.p.type": PKG + "predicates.TopicNameMatches", "predicates.p.pattern": "ord.*"},
            False,
            [2],
        ),
        (
            {"predicates.p.type": PKG + "predicates.TopicNameMatches", "predicates.p.pattern": "ord"},
            False,
            [0, 1, 2, 3],
        ),
        (
            {"predicates.p.type": PKG + "predicates.HasHeaderKey", "predicates.p.name": "trace"},
            False,
            [1, 2, 3],
        ),
        ({"predicates.p.type": PKG + "predicates.RecordIsTombstone"}, False, [0, 1, 2]),
        ({"predicates.p.type": PKG + "predicates.RecordIsTombstone"}, True, [3]),
    ],
)
def test_filter_drops_what_its_predicate_matches(
    frame, predicate: dict[str, str], negate: bool, kept: list[int]
) -> None:  # type: ignore[no-untyped-def]
    config = {
        "transforms": "f",
        "transforms.f.type": PKG + "Filter",
        "transforms.f.predicate": "p",
        "transforms.f.negate": str(negate).lower(),
        "predicates": "p",
        **predicate,
    }
    out = transform_chain(config).apply(frame)
    plan = out._jdf.queryExecution().executedPlan().toString()
    assert "PythonUDF" not in plan and "BatchEvalPython" not in plan
    assert _offsets(out) == kept
    # Kept and marked instead (a sink reads its consumed offsets from every row): the same rows dropped.
    marked = transform_chain(config).apply(frame, drop=False)
    assert _offsets(marked) == [0, 1, 2, 3]
    assert _offsets(marked.where(~marked[DROPPED])) == kept


def test_a_row_marked_dropped_is_left_alone_by_later_transforms(frame) -> None:  # type: ignore[no-untyped-def]
    config = {
        "transforms": "f,cast",
        "transforms.f.type": PKG + "Filter",
        "transforms.f.predicate": "isOrders",
        "transforms.cast.type": PKG + "Cast$Value",
        "transforms.cast.spec": "price:float64",
        "predicates": "isOrders",
        "predicates.isOrders.type": PKG + "predicates.TopicNameMatches",
        "predicates.isOrders.pattern": "orders",
    }
    rows = {r["offset"]: r for r in transform_chain(config).apply(frame, drop=False).collect()}
    assert {offset for offset, r in rows.items() if r[DROPPED]} == {0, 1, 3}
    # Row 1's price "abc" fails the cast only if the cast runs on it: dropped first, it has no error.
    assert rows[1][TRANSFORM_ERROR] is None
    assert rows[2][DROPPED] is False and rows[2]["value"]["price"] == 7.0


def test_a_predicate_limits_a_transform_to_matching_rows_and_errors_are_per_row(frame) -> None:  # type: ignore[no-untyped-def]
    config = {
        "transforms": "route,cast,stamp",
        "transforms.route.type": PKG + "RegexRouter",
        "transforms.route.regex": "(.*)",
        "transforms.route.replacement": "$1-copy",
        "transforms.route.predicate": "isOrders",
        "transforms.cast.type": PKG + "Cast$Value",
        "transforms.cast.spec": "price:float64",
        "transforms.stamp.type": PKG + "TimestampRouter",
        "transforms.stamp.topic.format": "${topic}_${timestamp}",
        "transforms.stamp.timestamp.format": "yyyy",
        "predicates": "isOrders",
        "predicates.isOrders.type": PKG + "predicates.TopicNameMatches",
        "predicates.isOrders.pattern": "orders",
    }
    rows = {r["offset"]: r for r in transform_chain(config).apply(frame).collect()}
    assert rows[0]["topic"] == "orders-copy_1970" and rows[2]["topic"] == "refunds_1970"
    assert rows[0]["value"]["price"] == 1.5 and rows[2]["value"]["price"] == 7.0
    assert rows[0][TRANSFORM_ERROR] is None
    # Row 1: the first failure is kept (Cast), with the class Java would report.
    assert rows[1][TRANSFORM_ERROR] == "Cannot cast to double: abc"
    assert rows[1][TRANSFORM_ERROR_CLASS] == PKG + "Cast$Value"
    assert rows[3]["value"] is None and rows[3][TRANSFORM_ERROR] is None  # tombstones pass through


def test_a_transform_that_cannot_apply_to_the_type_fails_clearly(frame) -> None:  # type: ignore[no-untyped-def]
    config = {
        "transforms": "i",
        "transforms.i.type": PKG + "InsertField$Key",
        "transforms.i.topic.field": "t",
    }
    with pytest.raises(
        ConnectDataError, match=r"Transformation i .*InsertField\$Key.*Only Struct objects supported"
    ):
        transform_chain(config).apply(frame)
    with pytest.raises(ConnectDataError, match="Unknown field: nope"):
        transform_chain(
            {"transforms": "e", "transforms.e.type": PKG + "ExtractField$Value", "transforms.e.field": "nope"}
        ).apply(frame)


def test_hoist_field_wraps_the_key_or_value_in_a_struct_that_later_transforms_see(frame) -> None:  # type: ignore[no-untyped-def]
    """HoistField (kconnect's demo wraps FileStream's string lines with it for the Iceberg sink): the whole
    key or value becomes the one field of a struct whose schema holds the old one, so a struct
    transformation after it applies; a tombstone's value becomes a struct holding null, as Java's."""
    from kconnect.runtime.dataplane.converters import connect_schema_of

    out = transform_chain(
        {
            "transforms": "hk,hv,stamp",
            "transforms.hk.type": PKG + "HoistField$Key",
            "transforms.hk.field": "k",
            "transforms.hv.type": PKG + "HoistField$Value",
            "transforms.hv.field": "order",
            "transforms.stamp.type": PKG + "InsertField$Key",
            "transforms.stamp.offset.field": "off",
        }
    ).apply(frame)
    key_schema, value_schema = connect_schema_of(out, "key"), connect_schema_of(out, "value")
    assert key_schema is not None and [f.name for f in key_schema.fields] == ["k", "off"]
    assert value_schema is not None and value_schema.type == "struct"
    assert [(f.name, f.schema.name) for f in value_schema.fields] == [("order", "Order")]
    rows = {r["offset"]: r for r in out.collect()}
    assert rows[0]["key"].asDict() == {"k": "k0", "off": 0}
    assert rows[2]["value"]["order"].asDict() == {"id": 3, "price": "7"}
    assert rows[3]["value"].asDict() == {"order": None}
    assert all(r[TRANSFORM_ERROR] is None for r in rows.values())
