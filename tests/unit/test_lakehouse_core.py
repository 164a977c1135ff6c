"""The table sinks' pure parts: routing rules, commit triggers, offsets in commit metadata, schema
evolution plans, and config validation (refused keys named with the reason)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pyspark.sql.types import (
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from kconnect.connectors.lakehouse import config as cfg
from kconnect.connectors.lakehouse.commits import (
    CommitPolicy,
    below_floors_condition,
    commit_directly,
    commit_due,
    decode_offsets,
    encode_offsets,
    lead_time,
    resume_offsets,
    unwritten_from,
    wait_start,
)
from kconnect.connectors.lakehouse.delta import DeltaSinkConnector
from kconnect.connectors.lakehouse.evolution import SchemaEvolutionError, plan
from kconnect.connectors.lakehouse.iceberg import CONFIG_DEF, IcebergSinkConnector, catalog_properties
from kconnect.connectors.lakehouse.iceberg_files import (
    DRIVER_ROWS,
    appended,
    arrow_rows,
    arrow_type,
    described,
    local_path,
    picked_together,
    together_key,
    writable_alone,
)
from kconnect.connectors.lakehouse.routing import (
    Routing,
    RoutingError,
    routing_problems,
    static_targets,
    table_parts,
    topic_table,
)
from kconnect.connectors.lakehouse.table_sink import Pending, Pick
from kconnect.runtime.plugins.api import TopicPartition
from kconnect.runtime.plugins.config_def import ConfigValidationError

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)


# --- routing


def test_topic_pattern_names_one_table_per_topic() -> None:
    assert topic_table("analytics.${topic}", "orders-eu") == "analytics.orders-eu"
    assert table_parts("analytics.orders-eu") == ("analytics", "orders-eu")


@pytest.mark.parametrize("name", ["orders", "a..b", "a.b c", "a.${x}"])
def test_table_names_a_catalog_cannot_hold_are_refused(name: str) -> None:
    with pytest.raises(RoutingError, match="namespace"):
        table_parts(name)


@pytest.mark.parametrize(
    ("routing", "problems"),
    [
        (Routing(("db.a",), False, None, {}), {}),
        (Routing(("db.${topic}",), False, None, {}), {}),
        (Routing((), True, "t", {}), {}),
        (Routing((), False, None, {}), {"iceberg.tables": "name at least one table"}),
        (Routing((), True, None, {}), {"iceberg.tables.route-field": "needs a route field"}),
        (Routing(("db.a",), True, "t", {}), {"iceberg.tables": "must be empty"}),
        (Routing(("db.${topic}", "db.b"), False, None, {}), {"iceberg.tables": "must be the only table"}),
        (Routing(("db.a", "db.b"), False, "t", {"db.a": "x"}), {"iceberg.tables.route-field": "db.b"}),
    ],
)
def test_routing_problems_name_the_key(routing: Routing, problems: dict[str, str]) -> None:
    found = routing_problems(routing, "iceberg.")
    assert set(found) == set(problems)
    for key, part in problems.items():
        assert part in found[key]


def test_static_routing_by_field_matches_each_tables_regex() -> None:
    routing = Routing(("db.eu", "db.us"), False, "region", {"db.eu": "^eu-", "db.us": "^us-"})
    assert static_targets(routing, "eu-west") == ["db.eu"]
    assert static_targets(routing, "ap-south") == []
    assert static_targets(Routing(("db.a", "db.b"), False, None, {}), None) == ["db.a", "db.b"]


# --- commits


@pytest.mark.parametrize(
    ("records", "size", "age_ms", "expected"),
    [
        (0, 0, None, None),
        (10, 10, 100, None),
        (100, 0, 100, "records"),
        (1, 5000, 100, "bytes"),
        (1, 1, 1000, "interval"),
    ],
)
def test_commit_when_records_bytes_or_time_come_first(
    records: int, size: int, age_ms: int | None, expected: str | None
) -> None:
    policy = CommitPolicy(interval_ms=1000, max_records=100, max_bytes=4096)
    oldest = None if age_ms is None else 50.0 - age_ms / 1000
    assert commit_due(policy, records, size, oldest, 50.0) == expected


def test_a_trickle_commits_every_interval_with_the_other_bounds_off() -> None:
    policy = CommitPolicy(interval_ms=2000)
    assert commit_due(policy, 1, 10, 10.0, 11.9) is None
    assert commit_due(policy, 1, 10, 10.0, 12.0) == "interval"


def test_an_interval_commit_starts_early_by_the_last_commits_time_at_most_an_interval() -> None:
    policy = CommitPolicy(interval_ms=10_000)
    assert lead_time(policy, None) == 0.0  # no commit yet: nothing to go by
    assert lead_time(policy, 3.5) == 3.5
    assert lead_time(policy, 40.0) == 10.0  # a commit longer than the interval: back to back, no sooner
    # The last commit took 3 s: records read at 100 s are committed from 107 s, queryable by about 110 s.
    lead = lead_time(policy, 3.0)
    assert commit_due(policy, 1, 10, 100.0, 106.9, lead) is None
    assert commit_due(policy, 1, 10, 100.0, 107.0, lead) == "interval"
    assert commit_due(policy, 1, 10, 100.0, 100.0, lead_time(policy, 40.0)) == "interval"
    # Checks come a batch (2 s) apart: the commit starts at the last check before it would end late.
    assert lead_time(policy, 3.0, 2.0) == 5.0
    assert lead_time(policy, 3.0, None) == 3.0
    assert lead_time(policy, 9.0, 2.0) == 10.0
    assert commit_due(policy, 1, 10, 100.0, 105.0, lead_time(policy, 3.0, 2.0)) == "interval"

    # A batch due on its own goes straight to the tables exactly when the check after it would commit it.
    assert commit_directly(policy, False, 5, 100.0, 107.0, lead) == "interval"
    assert commit_directly(policy, False, 5, 100.0, 106.0, lead) is None


def test_a_records_wait_counts_from_its_production_not_before_the_last_commits_batch_was_read() -> None:
    # The last commit's newest batch was read at 95 s (its commit ran 98-104 s). Produced at 96 s, so not
    # in it, read at 105 s: its wait counts from 96 s, not from the commit's start.
    assert wait_start(105.0, 96.0, 95.0) == 96.0
    assert wait_start(105.0, 100.0, 95.0) == 100.0
    # A backlog (produced long ago, in Kafka when that batch was read): from that reading, so it still
    # commits about once an interval.
    assert wait_start(105.0, 10.0, 95.0) == 95.0
    assert wait_start(105.0, 10.0, None) == 10.0  # no commit yet: a backlog's first batch is due at once
    assert wait_start(105.0, 200.0, 95.0) == 105.0  # a producer's clock ahead: from the reading
    assert wait_start(105.0, None, 95.0) == 105.0  # no timestamps


@given(
    st.dictionaries(st.tuples(st.sampled_from(["a", "b.c", "d-e"]), st.integers(0, 5)), st.integers(0, 2**62))
)
def test_offsets_round_trip_through_commit_metadata(tree: dict[tuple[str, int], int]) -> None:
    offsets = {TopicPartition(t, p): o for (t, p), o in tree.items()}
    assert decode_offsets(encode_offsets(offsets)) == offsets


@pytest.mark.parametrize("text", [None, "", "x", "[1]", '{"t": 3}', '{"t": {"x": 1}}', '{"t": {"0": "1"}}'])
def test_foreign_or_broken_metadata_reads_as_no_offsets(text: str | None) -> None:
    assert decode_offsets(text) == {}


def test_the_newest_commit_naming_a_partition_wins() -> None:
    commits = [encode_offsets({TP0: 10, TP1: 5}), None, encode_offsets({TP1: 9}), encode_offsets({TP0: 12})]
    assert resume_offsets(commits) == {TP0: 12, TP1: 9}


def test_rows_below_what_a_table_holds_are_not_staged_again() -> None:
    assert unwritten_from(0, 9, None) == (0, 9)
    assert unwritten_from(0, 9, 5) == (5, 9)
    assert unwritten_from(0, 9, 10) is None
    assert unwritten_from(20, 29, 5) == (20, 29)


def test_a_batch_goes_straight_to_the_tables_only_when_nothing_is_staged_and_it_is_due() -> None:
    policy = CommitPolicy(interval_ms=10_000, max_records=1000)
    # The batch's records have waited since 85 s (commits.wait_start: a backlog's first batch, say).
    assert commit_directly(policy, False, 5, 85.0, 100.0) == "interval"
    assert commit_directly(policy, False, 5, 95.0, 100.0) is None  # since 95 s: staged, waits
    assert commit_directly(policy, False, 5, 95.0, 100.0, 5.0) == "interval"  # unless the lead says go
    assert commit_directly(policy, False, 1000, 95.0, 100.0) == "records"
    assert commit_directly(policy, True, 1000, 85.0, 100.0) is None  # staged rows go with the stages
    assert commit_directly(CommitPolicy(interval_ms=10_000), False, 10**9, 95.0, 100.0) is None
    # A trickle: the last commit covered batches read up to 95 s and ended at 104 s; the next batch,
    # reaching the task at 104.3 s, holds records produced from 95.1 s, 9.2 s ago. Counted from their
    # production it is due now (a 3 s commit, checks 3 s apart); counted from the last commit's end
    # (0.3 s ago) it was staged and its records committed a check later still.
    lead = lead_time(policy, 3.0, 3.0)
    waited = wait_start(104.3, 95.1, 95.0)
    assert commit_directly(policy, False, 150, waited, 104.3, lead) == "interval"
    assert commit_directly(policy, False, 150, 104.0, 104.3, lead) is None  # the old measure


def test_the_floors_condition_drops_exactly_the_rows_below_each_partitions_floor() -> None:
    """Evaluated as SQL (SQLite reads the same condition text Spark parses) over every row of three
    partitions: two with floors, one the condition leaves alone; no floors is no condition at all."""
    other = TopicPartition("payments", 0)
    condition = below_floors_condition({TP0: 3, TP1: 10}, "`topic`", "`partition`", "`offset`")
    assert condition is not None
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE r (`topic` TEXT, `partition` INT, `offset` INT)")
    rows = [(tp.topic, tp.partition, o) for tp in (TP0, TP1, other) for o in range(10)]
    db.executemany("INSERT INTO r VALUES (?, ?, ?)", rows)
    picked = set(db.execute(f"SELECT * FROM r WHERE {condition}").fetchall())
    assert picked == {("orders", 0, o) for o in range(3, 10)} | {("payments", 0, o) for o in range(10)}
    assert below_floors_condition({}, "`topic`", "`partition`", "`offset`") is None
    quoted = below_floors_condition({TopicPartition("it's", 0): 1}, "`topic`", "`partition`", "`offset`")
    assert quoted is not None and "'it\\'s'" in quoted


def test_tables_of_the_same_flat_columns_are_written_together_and_others_alone() -> None:
    schema = {
        "type": "struct",
        "schema-id": 0,
        "fields": [
            {"id": 1, "name": "id", "required": True, "type": "long"},
            {"id": 2, "name": "tbl", "required": False, "type": "string"},
            {"id": 3, "name": "amount", "required": False, "type": "decimal(10, 2)"},
        ],
    }
    key = together_key(json.dumps(schema), "file:/w/db/t", False)
    assert key == (
        (1, "id", "long", True),
        (2, "tbl", "string", False),
        (3, "amount", "decimal(10, 2)", False),
    )
    assert together_key(json.dumps({**schema, "schema-id": 4}), "/w/db/u", False) == key  # ids, not versions
    assert together_key(json.dumps(schema), "file:/w/db/t", True) is None  # partitioned
    assert together_key(json.dumps(schema), "s3://bucket/db/t", False) is None  # files would be copied
    nested = {
        **schema,
        "fields": [
            *schema["fields"],
            {"id": 4, "name": "n", "required": False, "type": {"type": "struct", "fields": []}},
        ],
    }
    assert together_key(json.dumps(nested), "/w/db/t", False) is None
    stamp = {**schema, "fields": [{"id": 1, "name": "at", "required": False, "type": "timestamptz"}]}
    assert together_key(json.dumps(stamp), "/w/db/t", False) is None
    # A required column needs its rows' column present and not nullable (else Spark's write says why).
    assert writable_alone(key, {"id": False, "tbl": True})
    assert not writable_alone(key, {"id": True, "tbl": True})
    assert not writable_alone(key, {"tbl": True})
    assert local_path("file:/w/db/t/data/a.parquet") == "/w/db/t/data/a.parquet"
    assert local_path("file:///w/a.parquet") == "/w/a.parquet"
    assert local_path("/w/a.parquet") == "/w/a.parquet"


def test_a_tables_rows_written_on_the_driver_carry_its_field_ids_types_and_order(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    columns = ((1, "id", "long", True), (2, "tbl", "string", False), (3, "amount", "decimal(10, 2)", False))
    # The rows' own order and narrower types (an int id, a table widened since); no amount column.
    rows = pa.table({"tbl": ["a", None], "id": pa.array([7, 8], pa.int32())})
    out = arrow_rows(rows, columns)
    assert out.column_names == ["id", "tbl", "amount"]
    assert out.column("id").to_pylist() == [7, 8] and out.schema.field("id").type == pa.int64()
    assert out.column("amount").null_count == 2 and out.schema.field("amount").type == pa.decimal128(10, 2)
    assert not out.schema.field("id").nullable and out.schema.field("tbl").nullable
    pq.write_table(out, tmp_path / "f.parquet")
    written = pq.read_schema(tmp_path / "f.parquet")
    assert [written.field(n).metadata[b"PARQUET:field_id"] for n in ("id", "tbl", "amount")] == [
        b"1",
        b"2",
        b"3",
    ]
    with pytest.raises(ValueError, match="timestamptz"):
        arrow_type("timestamptz")


def test_tables_picked_from_one_small_frame_by_one_column_are_written_on_the_driver() -> None:
    source, other = object(), object()
    covered = {TopicPartition("t", 0): 5}

    def member(pick: Pick | None) -> Pending:
        return Pending("db.t", None, covered, (), pick)

    a, b = Pick(source, "_kc_route", "db.a", 100), Pick(source, "_kc_route", "db.b", 100)
    assert picked_together([member(a), member(b)]) is a
    assert picked_together([member(a), member(None)]) is None  # one table's rows are not a pick
    assert picked_together([member(a), member(Pick(other, "_kc_route", "db.b", 100))]) is None
    assert picked_together([member(a), member(Pick(source, "_kc_topic", "t", 100))]) is None
    big = Pick(source, "_kc_route", "db.a", DRIVER_ROWS + 1)
    assert picked_together([member(big), member(Pick(source, "_kc_route", "db.b", DRIVER_ROWS + 1))]) is None
    assert picked_together([]) is None


def test_the_iceberg_helpers_answer_reads_as_one_outcome_per_table() -> None:
    answer = "ok\t7\t6\t1\nok\t9\t-\t0\nerror\torg.apache.iceberg.exceptions.CommitFailedException: x\n"
    assert appended(answer, 3) == [
        (7, 6, True),
        (9, None, False),
        "org.apache.iceberg.exceptions.CommitFailedException: x",
    ]
    # An answer of another shape: every table failed (nothing is taken as committed).
    assert appended("ok\t7\t6\t1\n", 2) == ["the Iceberg helper answered 1 lines for 2 tables"] * 2
    assert appended("ok\tseven\t6\t1\n", 1) == ["unreadable answer: 'ok\\tseven\\t6\\t1'"]


def test_the_iceberg_helpers_description_reads_as_one_table_each() -> None:
    iceberg_schema = json.dumps(
        {"type": "struct", "fields": [{"id": 1, "name": "id", "required": True, "type": "long"}]}
    )
    spark_schema = '{"type":"struct","fields":[]}'
    answer = (
        f"found\t12\t1\tfile:/wh/db/a\t{spark_schema}\t{iceberg_schema}\n"
        f"found\t-\t0\tfile:/wh/db/b\t{spark_schema}\t{iceberg_schema}\n"
        "missing\n"
        "error\tjava.io.IOException: disk\n"
    )
    assert described(answer, 4) == [
        (12, spark_schema, ((1, "id", "long", True),)),
        (None, spark_schema, None),  # partitioned: written on its own
        None,
        "java.io.IOException: disk",
    ]
    assert described("missing\n", 2) == ["the Iceberg helper answered 1 lines for 2 tables"] * 2


# --- evolution


def struct(*fields: tuple[str, object, bool]) -> StructType:
    return StructType([StructField(name, t, nullable) for name, t, nullable in fields])  # type: ignore[arg-type]


def test_new_fields_are_added_and_int_and_float_widen() -> None:
    table = struct(("id", IntegerType(), False), ("x", FloatType(), True))
    records = struct(("id", LongType(), False), ("x", DoubleType(), True), ("note", StringType(), True))
    change = plan(table, records, evolve=True)
    assert change.add == [("note", StringType())]
    assert change.widen == [("id", LongType()), ("x", DoubleType())]
    assert change.make_optional == []


def test_narrower_records_need_no_change_and_optional_fields_relax_required_columns() -> None:
    table = struct(("id", LongType(), False), ("x", DoubleType(), True))
    records = struct(("id", ShortType(), True), ("x", FloatType(), True))
    change = plan(table, records, evolve=True)
    assert change.add == [] and change.widen == [] and change.make_optional == ["id"]


def test_nested_fields_are_added_by_path() -> None:
    table = struct(("a", struct(("b", IntegerType(), True)), True))
    records = struct(("a", struct(("b", IntegerType(), True), ("c", StringType(), True)), True))
    assert plan(table, records, evolve=True).add == [("a.c", StringType())]


@pytest.mark.parametrize(
    ("column", "record", "evolve", "message"),
    [
        (IntegerType(), StringType(), True, "field 'v' is string but its column is int"),
        (LongType(), IntegerType(), False, None),
        (IntegerType(), LongType(), False, "wider than its column"),
        (StringType(), struct(("z", IntegerType(), True)), True, "field 'v' is struct<z:int>"),
    ],
)
def test_impossible_changes_fail_naming_the_field(
    column: object, record: object, evolve: bool, message: str | None
) -> None:
    table = struct(("v", column, True))
    records = struct(("v", record, True))
    if message is None:
        assert plan(table, records, evolve).empty
        return
    with pytest.raises(SchemaEvolutionError, match=message.replace("(", r"\(")):
        plan(table, records, evolve)


def test_a_new_field_without_evolution_fails_rather_than_being_dropped() -> None:
    with pytest.raises(SchemaEvolutionError, match=r"field 'note'.*schema evolution is off"):
        plan(
            struct(("id", IntegerType(), False)),
            struct(("id", IntegerType(), False), ("note", StringType(), True)),
            False,
        )


# --- config


BASE = {
    "name": "ice",
    "connector.class": "IcebergSinkConnector",
    "topics": "orders",
    "iceberg.tables": "db.orders",
    "iceberg.catalog.warehouse": "/tmp/wh",
}


def errors(connector: object, props: dict[str, str]) -> dict[str, list[str]]:
    values = connector.validate(props)  # type: ignore[attr-defined]
    return {v.name: v.errors for v in values if v.errors}


def test_apache_sink_keys_are_accepted_with_its_defaults() -> None:
    parsed = cfg.parse(CONFIG_DEF, {**BASE, "iceberg.control.topic": "control-iceberg"}, "iceberg.")
    assert parsed.policy == CommitPolicy(interval_ms=300_000, max_records=-1, max_bytes=-1)
    assert not parsed.auto_create and not parsed.evolve and not parsed.upsert
    assert errors(IcebergSinkConnector(), BASE) == {}


def test_unsupported_keys_are_refused_with_the_reason() -> None:
    found = errors(
        IcebergSinkConnector(),
        {**BASE, "iceberg.tables.default-commit-branch": "b", "iceberg.table.db.orders.commit-branch": "b"},
    )
    assert set(found) == {"iceberg.tables.default-commit-branch", "iceberg.table.db.orders.commit-branch"}
    assert all("branch is not supported" in e[0] for e in found.values())


def test_upsert_needs_id_columns_and_hadoop_needs_a_warehouse() -> None:
    found = errors(IcebergSinkConnector(), {**BASE, "iceberg.tables.upsert-mode-enabled": "true"})
    assert "needs id columns" in found["iceberg.tables.default-id-columns"][0]
    no_warehouse = {k: v for k, v in BASE.items() if k != "iceberg.catalog.warehouse"}
    assert "needs a warehouse" in errors(IcebergSinkConnector(), no_warehouse)["iceberg.catalog.warehouse"][0]
    with pytest.raises(ConfigValidationError, match=r"iceberg\.tables\.default-id-columns"):
        cfg.parse(CONFIG_DEF, {**BASE, "iceberg.tables.upsert-mode-enabled": "true"}, "iceberg.")


def test_partition_transforms_split_on_top_level_commas_and_delta_refuses_them() -> None:
    parsed = cfg.parse(
        CONFIG_DEF, {**BASE, "iceberg.tables.default-partition-by": "bucket(16, id), days(ts)"}, "iceberg."
    )
    assert parsed.default_partition_by == ("bucket(16, id)", "days(ts)")
    delta = {
        "name": "dl",
        "topics": "orders",
        "delta.tables": "db.orders",
        "delta.warehouse": "/tmp/wh",
        "delta.tables.default-partition-by": "days(ts)",
    }
    assert "columns only" in errors(DeltaSinkConnector(), delta)["delta.tables.default-partition-by"][0]


def test_the_catalog_defaults_to_hadoop_and_never_caches_tables() -> None:
    assert catalog_properties(BASE) == {"warehouse": "/tmp/wh", "type": "hadoop", "cache-enabled": "false"}
    rest = catalog_properties({"iceberg.catalog.type": "rest", "iceberg.catalog.uri": "http://x"})
    assert rest == {"type": "rest", "uri": "http://x", "cache-enabled": "false"}
