"""The Iceberg sink's catalog keys: the jdbc catalog's needs named by key, its password a secret (hidden in
validation answers, out of the catalog name the logs carry)."""

from __future__ import annotations

from kconnect.connectors.lakehouse.iceberg import IcebergSinkConnector, catalog_name, catalog_properties

JDBC = {
    "name": "ice",
    "connector.class": "IcebergSinkConnector",
    "topics": "orders",
    "iceberg.tables": "db.orders",
    "iceberg.catalog.type": "jdbc",
    "iceberg.catalog.uri": "jdbc:postgresql://127.0.0.1:5432/postgres",
    "iceberg.catalog.jdbc.user": "kconnect",
    "iceberg.catalog.jdbc.password": "s3cret-pw",
    "iceberg.catalog.warehouse": "/tmp/wh",
}


BASE_REST = {
    "name": "ice",
    "topics": "orders",
    "iceberg.tables": "db.orders",
    "iceberg.catalog.type": "rest",
    "iceberg.catalog.uri": "http://catalog:8181",
}


def answers(props: dict[str, str]) -> dict[str, tuple[object, list[str]]]:
    return {v.name: (v.value, v.errors) for v in IcebergSinkConnector().validate(props)}


def test_a_jdbc_catalog_passes_its_keys_to_spark_and_validates_clean() -> None:
    assert catalog_properties(JDBC) == {
        "type": "jdbc",
        "uri": "jdbc:postgresql://127.0.0.1:5432/postgres",
        "jdbc.user": "kconnect",
        "jdbc.password": "s3cret-pw",
        "warehouse": "/tmp/wh",
        "cache-enabled": "false",
    }
    assert {k: e for k, (_, e) in answers(JDBC).items() if e} == {}


def test_the_jdbc_password_is_hidden_in_the_validate_answer() -> None:
    value, _ = answers(JDBC)["iceberg.catalog.jdbc.password"]
    assert "s3cret-pw" not in str(value)
    assert "s3cret-pw" not in repr(IcebergSinkConnector().validate(JDBC))


def test_a_jdbc_catalog_is_named_by_iceberg_catalog_as_in_apaches_sink() -> None:
    assert catalog_name(JDBC) == "iceberg"
    assert catalog_name({**JDBC, "iceberg.catalog": "lake"}) == "lake"


def test_the_hashed_catalog_name_does_not_depend_on_a_secret() -> None:
    rest = {**BASE_REST, "iceberg.catalog.credential": "id:s3cret"}
    assert catalog_name(rest) == catalog_name({**rest, "iceberg.catalog.credential": "other"})
    assert catalog_name(rest) != catalog_name({**rest, "iceberg.catalog.uri": "http://other:8181"})


def test_a_jdbc_catalog_without_a_jdbc_url_or_warehouse_is_refused_naming_the_key() -> None:
    no_url = {**JDBC, "iceberg.catalog.uri": "http://catalog:8181"}
    assert "needs a JDBC URL" in answers(no_url)["iceberg.catalog.uri"][1][0]
    no_warehouse = {k: v for k, v in JDBC.items() if k != "iceberg.catalog.warehouse"}
    assert "warehouse" in answers(no_warehouse)["iceberg.catalog.warehouse"][1][0]
