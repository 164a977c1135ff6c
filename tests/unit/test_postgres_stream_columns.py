"""A Relation message read against the catalog as it is now: a dropped table, a column added or dropped
since, a type changed since, REPLICA IDENTITY FULL. The message decides names, order and types; the
catalog adds nullability and the primary key where it still agrees."""

from __future__ import annotations

from kconnect.connectors import debezium_format as dbz
from kconnect.connectors.pgoutput import Relation, RelationColumn
from kconnect.connectors.postgres_catalog import stream_columns

INT4 = dbz.PgType(23, -1, "int4")
TEXT = dbz.PgType(25, -1, "text")


def type_of(oid: int, modifier: int) -> dbz.PgType:
    return {23: INT4, 25: TEXT}.get(oid, dbz.PgType(oid, modifier, "text"))


def relation(identity: str, *columns: tuple[bool, str, int]) -> Relation:
    return Relation(16389, "public", "t", identity, tuple(RelationColumn(k, n, o, -1) for k, n, o in columns))


def test_a_dropped_table_is_described_by_the_message_alone() -> None:
    columns, described = stream_columns(relation("d", (True, "id", 23), (False, "v", 25)), {}, type_of)
    assert columns == [dbz.PgColumn("id", INT4, True, True), dbz.PgColumn("v", TEXT, True, False)]
    assert described == ["id", "v"]


def test_with_replica_identity_full_no_column_is_taken_for_the_key() -> None:
    columns, _ = stream_columns(relation("f", (True, "id", 23), (True, "v", 25)), {}, type_of)
    assert [c.key for c in columns] == [False, False]


def test_the_catalog_adds_what_it_knows_for_columns_it_still_has() -> None:
    known = {
        "id": dbz.PgColumn("id", INT4, False, True),
        "v": dbz.PgColumn("v", TEXT, False, False),
        "extra": dbz.PgColumn("extra", INT4, True, False),  # added after the change was written
    }
    columns, described = stream_columns(relation("d", (True, "id", 23), (False, "v", 25)), known, type_of)
    assert columns == [known["id"], known["v"]]
    assert described == []


def test_a_column_whose_type_changed_since_keeps_the_streams_type() -> None:
    known = {"id": dbz.PgColumn("id", INT4, False, True), "v": dbz.PgColumn("v", INT4, False, False)}
    columns, described = stream_columns(relation("d", (True, "id", 23), (False, "v", 25)), known, type_of)
    assert columns[1] == dbz.PgColumn("v", TEXT, True, False)
    assert described == ["v"]
