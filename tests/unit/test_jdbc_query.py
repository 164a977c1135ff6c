"""The JDBC source's pure core (connectors/jdbc_query.py): URLs, offsets, the SQL of each mode, the position
after each row, table selection and column schemas, as tables of inputs and expected outputs."""

from __future__ import annotations

import datetime as dt
import decimal
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.connectors.jdbc_query import (
    TS_ALIAS,
    ColumnInfo,
    ConnectionTarget,
    JdbcQueryError,
    Position,
    QuerySpec,
    column_schema,
    epoch_ns,
    from_epoch_ns,
    next_position,
    parse_jdbc_url,
    poll_statement,
    position_from_offset,
    row_value,
    select_tables,
    source_partition,
    split_tables,
    topic_for,
    value_schema,
)
from kconnect.runtime.dataplane.connect_data import ConnectSchema, decimal_schema

UTC = dt.UTC


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("jdbc:postgresql://db:6543/shop", ConnectionTarget("db", 6543, "shop")),
        ("jdbc:postgresql://db/shop", ConnectionTarget("db", 5432, "shop")),
        (
            "jdbc:postgresql://127.0.0.1:5/a%20b?sslmode=require",
            ConnectionTarget("127.0.0.1", 5, "a b", (("sslmode", "require"),)),
        ),
        ("jdbc:postgresql:shop", ConnectionTarget("localhost", 5432, "shop")),
    ],
)
def test_jdbc_urls_become_libpq_targets(url: str, expected: ConnectionTarget) -> None:
    assert parse_jdbc_url(url) == expected


@pytest.mark.parametrize(
    "url",
    ["jdbc:mysql://db/shop", "postgresql://db/shop", "jdbc:postgresql://db:99999/x", "jdbc:postgresql://db/"],
)
def test_bad_jdbc_urls_are_refused_with_the_url(url: str) -> None:
    with pytest.raises(JdbcQueryError, match=r"jdbc:postgresql|port|database"):
        parse_jdbc_url(url)


def test_connector_user_and_password_win_over_the_urls_and_jdbc_params_are_translated() -> None:
    target = parse_jdbc_url("jdbc:postgresql://h/d?user=u1&password=p1&connectTimeout=3&loggerLevel=OFF")
    assert target.dsn_kwargs("u2", "p2") == {
        "host": "h",
        "port": "5432",
        "dbname": "d",
        "user": "u2",
        "password": "p2",
        "connect_timeout": "3",
    }
    assert target.dsn_kwargs(None, None)["user"] == "u1"


@pytest.mark.parametrize(
    ("position", "offset"),
    [
        (Position(), {}),
        (Position(incrementing=41), {"incrementing": 41}),
        # 2026-11-28T08:00:00.123456Z: millis plus the nanos within the second, as java.sql.Timestamp.
        (
            Position(timestamp_ns=1_795_852_800_123_456_000),
            {"timestamp": 1_795_852_800_123, "timestamp_nanos": 123_456_000},
        ),
        (
            Position(timestamp_ns=1_000_000_000, incrementing=7),
            {"incrementing": 7, "timestamp": 1000, "timestamp_nanos": 0},
        ),
    ],
)
def test_offsets_have_confluents_shape_and_read_back(position: Position, offset: dict[str, Any]) -> None:
    assert position.to_offset() == offset
    assert position_from_offset(offset) == position


def test_an_offset_without_nanos_reads_as_its_millis() -> None:
    assert position_from_offset({"timestamp": 1500}) == Position(timestamp_ns=1_500_000_000)


@pytest.mark.parametrize(
    "offset",
    [
        {"incrementing": "7"},
        {"incrementing": True},
        {"timestamp": 1.5},
        {"timestamp": 1, "timestamp_nanos": 10**9},
    ],
)
def test_a_malformed_stored_offset_is_refused_not_restarted_from_zero(offset: dict[str, Any]) -> None:
    with pytest.raises(JdbcQueryError, match="stored offset"):
        position_from_offset(offset)


@given(st.datetimes(min_value=dt.datetime(1970, 1, 1), max_value=dt.datetime(2200, 1, 1)))
def test_timestamps_survive_the_offset_round_trip(moment: dt.datetime) -> None:
    aware = moment.replace(tzinfo=UTC)
    position = Position(timestamp_ns=epoch_ns(aware))
    assert from_epoch_ns(position_from_offset(position.to_offset()).timestamp_ns or 0) == aware


def test_source_partitions() -> None:
    assert source_partition("orders", None, "shop") == {"protocol": "1", "table": "shop.public.orders"}
    assert source_partition("sales.orders", None, "shop") == {"protocol": "1", "table": "shop.sales.orders"}
    assert source_partition(None, "SELECT 1", "shop") == {"query": "SELECT 1"}


T0 = dt.datetime(1970, 1, 1, tzinfo=UTC)
T5 = dt.datetime(2026, 11, 28, 8, 0, 0, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("spec", "position", "sql", "params"),
    [
        (QuerySpec("bulk", table="orders"), Position(), 'SELECT * FROM "orders"', ()),
        (
            QuerySpec("incrementing", table="sales.orders", incrementing_column="id"),
            Position(),
            'SELECT * FROM "sales"."orders" WHERE "id" > %s ORDER BY "id" ASC LIMIT 10',
            (-1,),
        ),
        (
            QuerySpec("incrementing", table="orders", incrementing_column="id"),
            Position(incrementing=41),
            'SELECT * FROM "orders" WHERE "id" > %s ORDER BY "id" ASC LIMIT 10',
            (41,),
        ),
        (
            QuerySpec("timestamp", table="orders", timestamp_columns=("updated",)),
            Position(),
            f'SELECT *, ("updated")::timestamptz AS {TS_ALIAS} FROM "orders" WHERE "updated" > %s AND '
            '"updated" < (now() - %s::interval) ORDER BY "updated" ASC LIMIT 10',
            (T0, "250 milliseconds"),
        ),
        (
            QuerySpec(
                "timestamp+incrementing",
                table="orders",
                incrementing_column="id",
                timestamp_columns=("m", "c"),
            ),
            Position(timestamp_ns=epoch_ns(T5), incrementing=9),
            f'SELECT *, (COALESCE("m", "c"))::timestamptz AS {TS_ALIAS} FROM "orders" '
            'WHERE COALESCE("m", "c") < (now() - %s::interval) '
            'AND ((COALESCE("m", "c") = %s AND "id" > %s) OR COALESCE("m", "c") > %s) '
            'ORDER BY COALESCE("m", "c") ASC, "id" ASC LIMIT 10',
            ("250 milliseconds", T5, 9, T5),
        ),
        (
            QuerySpec("incrementing", query="SELECT id, name FROM t WHERE x", incrementing_column="id"),
            Position(incrementing=3),
            "SELECT * FROM (SELECT id, name FROM t WHERE x) AS kc_query "
            'WHERE "id" > %s ORDER BY "id" ASC LIMIT 10',
            (3,),
        ),
    ],
)
def test_poll_statements_per_mode(
    spec: QuerySpec, position: Position, sql: str, params: tuple[Any, ...]
) -> None:
    statement = poll_statement(spec, position, 10, 250)
    assert statement.sql == sql
    assert statement.params == params


def test_identifiers_are_quoted_so_odd_names_cannot_inject() -> None:
    spec = QuerySpec("incrementing", table='we"ird', incrementing_column='i"d')
    assert poll_statement(spec, Position(), 1, 0).sql == (
        'SELECT * FROM "we""ird" WHERE "i""d" > %s ORDER BY "i""d" ASC LIMIT 1'
    )


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mode": "incrementing", "table": "t"}, "incrementing.column.name"),
        ({"mode": "timestamp", "table": "t"}, "timestamp.column.name"),
        ({"mode": "bulk"}, "exactly one"),
        ({"mode": "bulk", "table": "t", "query": "q"}, "exactly one"),
    ],
)
def test_specs_missing_what_their_mode_needs_are_refused(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(JdbcQueryError, match=message):
        QuerySpec(**kwargs)


def test_positions_follow_the_rows() -> None:
    spec = QuerySpec("timestamp+incrementing", table="t", incrementing_column="id", timestamp_columns=("ts",))
    position = next_position(spec, Position(), {"id": 4, TS_ALIAS: T5})
    assert position == Position(epoch_ns(T5), 4)
    # numeric ids that are whole numbers count as integers
    inc = QuerySpec("incrementing", table="t", incrementing_column="id")
    assert next_position(inc, Position(), {"id": decimal.Decimal("12")}) == Position(incrementing=12)


@pytest.mark.parametrize("row", [{"id": None}, {"id": "3"}, {"id": decimal.Decimal("1.5")}])
def test_a_row_whose_id_cannot_be_continued_from_is_an_error(row: dict[str, Any]) -> None:
    with pytest.raises(JdbcQueryError, match="incrementing column 'id'"):
        next_position(QuerySpec("incrementing", table="t", incrementing_column="id"), Position(), row)


def test_a_null_timestamp_is_an_error() -> None:
    spec = QuerySpec("timestamp", table="t", timestamp_columns=("ts",))
    with pytest.raises(JdbcQueryError, match="non-null timestamp"):
        next_position(spec, Position(), {TS_ALIAS: None})


@given(
    st.lists(
        st.tuples(st.integers(0, 5), st.integers(0, 10**6)),
        unique_by=lambda r: r[1],
        max_size=60,
    ),
    st.integers(1, 7),
)
def test_timestamp_incrementing_batches_neither_skip_nor_repeat(
    rows: list[tuple[int, int]], limit: int
) -> None:
    """Simulates the WHERE and ORDER BY of timestamp+incrementing over a table whose timestamps repeat:
    polling batch after batch from the stored position yields every row exactly once."""
    spec = QuerySpec("timestamp+incrementing", table="t", incrementing_column="id", timestamp_columns=("ts",))
    table = [{"id": i, TS_ALIAS: T0 + dt.timedelta(seconds=s)} for s, i in rows]
    position = Position()
    seen: list[int] = []
    for _ in range(len(table) + 2):
        since = from_epoch_ns(position.timestamp_ns or 0)
        last = -1 if position.incrementing is None else position.incrementing
        batch = sorted(
            (r for r in table if (r[TS_ALIAS] == since and r["id"] > last) or r[TS_ALIAS] > since),
            key=lambda r: (r[TS_ALIAS], r["id"]),
        )[:limit]
        for row in batch:
            position = next_position(spec, position, row)
            seen.append(row["id"])
    assert sorted(seen) == sorted(i for _, i in rows)
    assert len(seen) == len(set(seen))


@pytest.mark.parametrize(
    ("whitelist", "blacklist", "expected"),
    [
        ((), (), ["public.a", "public.b", "sales.c"]),
        (("b", "sales.c"), (), ["public.b", "sales.c"]),
        ((), ("a",), ["public.b", "sales.c"]),
        ((), ("sales.c", "public.a"), ["public.b"]),
    ],
)
def test_table_selection(whitelist: tuple[str, ...], blacklist: tuple[str, ...], expected: list[str]) -> None:
    assert select_tables(["public.a", "public.b", "sales.c"], whitelist, blacklist) == expected


def test_a_whitelisted_table_that_does_not_exist_is_named() -> None:
    with pytest.raises(JdbcQueryError, match="'nope'"):
        select_tables(["public.a"], ("nope",), ())


def test_tables_spread_over_tasks() -> None:
    assert split_tables(["a", "b", "c"], 2) == [["a", "c"], ["b"]]
    assert split_tables(["a"], 4) == [["a"]]
    assert topic_for("pg-", "sales.orders") == "pg-orders"
    assert topic_for("all-rows", None) == "all-rows"


@pytest.mark.parametrize(
    ("column", "schema"),
    [
        (ColumnInfo("a", 23, None, False), ConnectSchema("int32", False)),
        (ColumnInfo("a", 20, None, True), ConnectSchema("int64", True)),
        (ColumnInfo("a", 21, None, True), ConnectSchema("int16", True)),
        (ColumnInfo("a", 700, None, True), ConnectSchema("float", True)),
        (ColumnInfo("a", 701, None, True), ConnectSchema("double", True)),
        (ColumnInfo("a", 16, None, True), ConnectSchema("boolean", True)),
        (ColumnInfo("a", 25, None, True), ConnectSchema("string", True)),
        (ColumnInfo("a", 1043, None, False), ConnectSchema("string", False)),
        (ColumnInfo("a", 17, None, True), ConnectSchema("bytes", True)),
        (ColumnInfo("a", 1700, 2, False), decimal_schema(2, False)),
        (ColumnInfo("a", 1700, None, True), ConnectSchema("string", True)),
        (
            ColumnInfo("a", 1082, None, True),
            ConnectSchema("int32", True, name="org.apache.kafka.connect.data.Date", version=1),
        ),
        (
            ColumnInfo("a", 1083, None, True),
            ConnectSchema("int32", True, name="org.apache.kafka.connect.data.Time", version=1),
        ),
        (
            ColumnInfo("a", 1114, None, True),
            ConnectSchema("int64", True, name="org.apache.kafka.connect.data.Timestamp", version=1),
        ),
        (
            ColumnInfo("a", 1184, None, True),
            ConnectSchema("int64", True, name="org.apache.kafka.connect.data.Timestamp", version=1),
        ),
        (ColumnInfo("a", 2950, None, True), ConnectSchema("string", True)),  # uuid as text
        (ColumnInfo("a", 3802, None, True), ConnectSchema("string", True)),  # jsonb as text
    ],
)
def test_column_schemas(column: ColumnInfo, schema: ConnectSchema) -> None:
    assert column_schema(column) == schema


def test_row_values_follow_the_schema() -> None:
    columns = [
        ColumnInfo("id", 23, None, False),
        ColumnInfo("at", 1114, None, True),
        ColumnInfo("doc", 3802, None, True),
        ColumnInfo("blob", 17, None, True),
        ColumnInfo(TS_ALIAS, 1184, None, True),
    ]
    schema = value_schema("orders", columns)
    assert schema.name == "orders" and [f.name for f in schema.fields] == ["id", "at", "doc", "blob"]
    naive = dt.datetime(2026, 1, 2, 3, 4, 5)
    row = {"id": 1, "at": naive, "doc": {"a": [1]}, "blob": memoryview(b"\x00\x01"), TS_ALIAS: T5}
    assert row_value(schema, row) == {
        "id": 1,
        "at": naive.replace(tzinfo=UTC),
        "doc": '{"a":[1]}',
        "blob": b"\x00\x01",
    }
