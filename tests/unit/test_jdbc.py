"""The JDBC sink's pure parts: config checks, the type mapping, the column plan and the SQL it writes.

The SQL strings are asserted whole: they are what PostgreSQL runs, and the integration test
(tests/integration/test_jdbc_sink.py) runs them against a real server through Spark.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.connectors.jdbc import (
    OFFSET_COLUMN,
    TASK_INDEX,
    Column,
    JdbcSinkConfig,
    JdbcSinkConnector,
    TablePlan,
    create_table_sql,
    drop_table_sql,
    missing_driver_message,
    plan_table,
    qualified,
    quote_ident,
    sql_type,
    staging_table,
    table_name,
    upsert_sql,
)
from kconnect.runtime.dataplane.connect_data import (
    DATE,
    TIME,
    TIMESTAMP,
    ConnectField,
    ConnectSchema,
    decimal_schema,
)
from kconnect.runtime.plugins.api import ConnectorError
from kconnect.runtime.plugins.config_def import ConfigValidationError
from kconnect.runtime.plugins.registry import PluginRegistry

URL = "jdbc:postgresql://127.0.0.1:5432/db"


def config(**overrides: str) -> JdbcSinkConfig:
    props = {"connection.url": URL, **{k.replace("_", "."): v for k, v in overrides.items()}}
    return JdbcSinkConfig.from_props(props)


def struct(*fields: tuple[str, ConnectSchema]) -> ConnectSchema:
    return ConnectSchema("struct", fields=tuple(ConnectField(n, s) for n, s in fields))


INT = ConnectSchema("int32")
LONG = ConnectSchema("int64")
TEXT = ConnectSchema("string", optional=True)
VALUE = struct(("id", INT), ("name", TEXT))


# ------------------------------------------------------------------------------------------ config


def test_defaults_follow_confluents_sink() -> None:
    parsed = config()
    assert parsed.table_format == "${topic}"
    assert parsed.insert_mode == "insert"
    assert parsed.pk_mode == "none"
    assert parsed.pk_fields == ()
    assert parsed.auto_create is False
    assert parsed.batch_size == 3000
    assert parsed.user is None and parsed.password is None


def test_the_password_never_shows_in_the_config_repr() -> None:
    parsed = JdbcSinkConfig.from_props({"connection.url": URL, "connection.password": "s3cret"})
    assert parsed.password == "s3cret"
    assert "s3cret" not in repr(parsed)


@pytest.mark.parametrize(
    ("props", "key", "words"),
    [
        ({}, "connection.url", 'Missing required configuration "connection.url"'),
        ({"connection.url": "jdbc:mysql://h/db"}, "connection.url", "must be a PostgreSQL JDBC URL"),
        ({"connection.url": URL, "insert.mode": "update"}, "insert.mode", "String must be one of: insert"),
        ({"connection.url": URL, "pk.mode": "kafka"}, "pk.mode", "none, record_key, record_value"),
        ({"connection.url": URL, "insert.mode": "upsert"}, "pk.mode", "upsert needs a primary key"),
        ({"connection.url": URL, "pk.fields": "id"}, "pk.fields", "only used with pk.mode"),
        ({"connection.url": URL, "batch.size": "0"}, "batch.size", "Value must be at least 1"),
        ({"connection.url": URL, "auto.create": "maybe"}, "auto.create", "Expected value to be"),
    ],
)
def test_bad_configs_name_the_key_the_value_and_what_is_allowed(
    props: dict[str, str], key: str, words: str
) -> None:
    with pytest.raises(ConfigValidationError) as caught:
        JdbcSinkConfig.from_props(props)
    assert key in str(caught.value) and words in str(caught.value), str(caught.value)


def test_validate_attaches_cross_key_problems_to_their_key_and_hides_the_password() -> None:
    values = {
        v.name: v
        for v in JdbcSinkConnector().validate(
            {"connection.url": URL, "insert.mode": "upsert", "connection.password": "s3cret"}
        )
    }
    assert values["pk.mode"].errors == [
        "Invalid value none for configuration pk.mode: insert.mode=upsert needs a primary key: set pk.mode "
        "to record_key or record_value"
    ]
    assert values["connection.url"].errors == []
    assert str(values["connection.password"].value) == "[hidden]"


def test_the_connector_gives_each_task_its_index_and_is_found_by_confluents_class_name() -> None:
    connector = JdbcSinkConnector()
    connector.start({"connection.url": URL, "topics": "a"})
    configs = connector.task_configs(3)
    assert [c[TASK_INDEX] for c in configs] == ["0", "1", "2"]
    assert all(c["topics"] == "a" for c in configs)
    registry = PluginRegistry()
    registry.register(JdbcSinkConnector)
    assert registry.connector_class("io.confluent.connect.jdbc.JdbcSinkConnector") is JdbcSinkConnector
    assert registry.connector_class("JdbcSink") is JdbcSinkConnector


def test_a_bad_config_fails_the_connector_at_start() -> None:
    with pytest.raises(ConfigValidationError, match=r"pk\.mode"):
        JdbcSinkConnector().start({"connection.url": URL, "insert.mode": "upsert"})


# ------------------------------------------------------------------------------------------ names


def test_table_name_substitutes_the_topic() -> None:
    assert table_name("${topic}", "orders") == "orders"
    assert table_name("kafka_${topic}", "orders-eu") == "kafka_orders-eu"
    assert table_name("fixed", "orders") == "fixed"


@given(st.text(min_size=1).filter(lambda s: "\0" not in s))
def test_quoted_identifiers_round_trip(name: str) -> None:
    quoted = quote_ident(name)
    assert quoted[0] == quoted[-1] == '"'
    assert quoted[1:-1].replace('""', '"') == name


def test_qualified_names_quote_each_part() -> None:
    assert qualified("orders") == '"orders"'
    assert qualified("sales.Orders-EU") == '"sales"."Orders-EU"'


@given(st.text(min_size=1, max_size=200).filter(lambda s: "." not in s), st.integers(0, 1000))
def test_staging_tables_fit_postgres_identifiers_and_differ_per_task(table: str, task: int) -> None:
    name = staging_table(table, "conn", task)
    assert len(name.encode()) <= 63  # PostgreSQL's identifier limit, in bytes
    assert name != staging_table(table, "conn", task + 1)
    assert name != staging_table(table, "other", task)


def test_staging_tables_stay_in_the_targets_schema() -> None:
    assert staging_table("sales.orders", "c", 0).startswith("sales.orders_kcstage_")


# ------------------------------------------------------------------------------------------ types


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        (ConnectSchema("int8"), "SMALLINT"),
        (ConnectSchema("int16"), "SMALLINT"),
        (INT, "INTEGER"),
        (LONG, "BIGINT"),
        (ConnectSchema("float"), "REAL"),
        (ConnectSchema("double"), "DOUBLE PRECISION"),
        (ConnectSchema("boolean"), "BOOLEAN"),
        (ConnectSchema("string"), "TEXT"),
        (ConnectSchema("bytes"), "BYTEA"),
        (decimal_schema(2), "NUMERIC"),
        (ConnectSchema("int32", name=DATE, version=1), "DATE"),
        (ConnectSchema("int64", name=TIMESTAMP, version=1), "TIMESTAMPTZ"),
    ],
)
def test_type_mapping(schema: ConnectSchema, expected: str) -> None:
    assert sql_type(schema, "f") == expected


@pytest.mark.parametrize(
    ("schema", "words"),
    [
        (ConnectSchema("int32", name=TIME, version=1), "Time values are not supported"),
        (ConnectSchema("array", items=INT), "has type array"),
        (ConnectSchema("map", keys=TEXT, values=INT), "has type map"),
        (struct(("a", INT)), "has type struct"),
    ],
)
def test_unsupported_types_name_the_field(schema: ConnectSchema, words: str) -> None:
    with pytest.raises(ConnectorError, match=words) as caught:
        sql_type(schema, "payload")
    assert "'payload'" in str(caught.value)


# ------------------------------------------------------------------------------------------ plan


def test_plan_without_a_key_takes_every_value_field() -> None:
    plan = plan_table(config(), None, VALUE)
    assert plan == TablePlan(
        (Column("id", "INTEGER", False, "value", "id"), Column("name", "TEXT", True, "value", "name")), ()
    )


def test_plan_with_a_primary_key_from_the_value() -> None:
    assert plan_table(config(pk_mode="record_value", pk_fields="id"), None, VALUE).pk == ("id",)
    # pk.fields empty: every value field is part of the key (Confluent's rule)
    assert plan_table(config(pk_mode="record_value"), None, VALUE).pk == ("id", "name")


def test_plan_with_a_primitive_key_names_its_column_from_pk_fields() -> None:
    plan = plan_table(config(pk_mode="record_key", pk_fields="key_id"), LONG, VALUE)
    assert plan.columns[0] == Column("key_id", "BIGINT", False, "key", None)
    assert plan.pk == ("key_id",)
    assert plan.names == ("key_id", "id", "name")


def test_plan_with_a_struct_key() -> None:
    key = struct(("region", ConnectSchema("string")), ("no", INT))
    plan = plan_table(config(pk_mode="record_key"), key, VALUE)
    assert plan.pk == ("region", "no")
    assert plan.columns[:2] == (
        Column("region", "TEXT", False, "key", "region"),
        Column("no", "INTEGER", False, "key", "no"),
    )
    assert plan_table(config(pk_mode="record_key", pk_fields="no"), key, VALUE).pk == ("no",)


@pytest.mark.parametrize(
    ("cfg", "key", "value", "words"),
    [
        ({}, None, None, "schemaless JSON"),
        ({}, None, INT, "got a int32"),
        ({"pk_mode": "record_key", "pk_fields": "k"}, None, VALUE, "needs record keys with a schema"),
        ({"pk_mode": "record_key"}, LONG, VALUE, "needs exactly one name in pk.fields"),
        ({"pk_mode": "record_key", "pk_fields": "id"}, LONG, VALUE, "also fields of the record value"),
        ({"pk_mode": "record_key", "pk_fields": "x"}, struct(("k", INT)), VALUE, "no field of"),
        ({"pk_mode": "record_value", "pk_fields": "nope"}, None, VALUE, "['nope']"),
    ],
)
def test_plans_that_cannot_work_say_why(
    cfg: dict[str, str], key: ConnectSchema | None, value: ConnectSchema | None, words: str
) -> None:
    with pytest.raises(ConnectorError) as caught:
        plan_table(config(**cfg), key, value)
    assert words in str(caught.value), str(caught.value)


# ------------------------------------------------------------------------------------------ SQL


def test_create_table_sql() -> None:
    plan = plan_table(config(pk_mode="record_value", pk_fields="id"), None, VALUE)
    assert create_table_sql("sales.orders-eu", plan) == (
        'CREATE TABLE IF NOT EXISTS "sales"."orders-eu" ("id" INTEGER NOT NULL, "name" TEXT, '
        'PRIMARY KEY ("id"))'
    )
    assert create_table_sql("t", plan_table(config(), None, VALUE)) == (
        'CREATE TABLE IF NOT EXISTS "t" ("id" INTEGER NOT NULL, "name" TEXT)'
    )


def test_upsert_sql_keeps_the_newest_row_per_key() -> None:
    plan = plan_table(config(pk_mode="record_value", pk_fields="id"), None, VALUE)
    assert upsert_sql("t", "t_stage", plan) == (
        'INSERT INTO "t" ("id", "name") SELECT "id", "name" FROM (SELECT DISTINCT ON ("id") "id", "name" '
        f'FROM "t_stage" ORDER BY "id", "{OFFSET_COLUMN}" DESC) AS latest '
        'ON CONFLICT ("id") DO UPDATE SET "name" = EXCLUDED."name"'
    )


def test_upsert_sql_with_only_key_columns_does_nothing_on_conflict() -> None:
    plan = plan_table(config(pk_mode="record_value"), None, VALUE)
    assert upsert_sql("t", "s", plan).endswith('ON CONFLICT ("id", "name") DO NOTHING')


def test_upsert_without_a_key_is_refused() -> None:
    with pytest.raises(ConnectorError, match="primary key"):
        upsert_sql("t", "s", plan_table(config(), None, VALUE))


def test_drop_and_driver_messages() -> None:
    assert drop_table_sql("s.t") == 'DROP TABLE IF EXISTS "s"."t"'
    message = missing_driver_message(URL)
    assert "spark.jars=/usr/share/java/postgresql.jar" in message and "org.postgresql.Driver" in message
