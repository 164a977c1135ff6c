"""The CDC source's conversations with PostgreSQL's catalog over a plain connection: checks that explain a
server that cannot do logical replication, the publication, the slot's state, the snapshot's transaction
and rows, and each table's columns as ``debezium_format`` needs them (types, nullability, primary key,
enum labels, array elements).

Why a module of its own: ``postgres_stream`` is the replication loop; everything here is ordinary SQL whose
failures become a :class:`CdcError` naming the cause (wrong credentials, ``wal_level``, a user without
REPLICATION, a slot in use, a missing publication).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kconnect.connectors import debezium_format as dbz
from kconnect.connectors import pgoutput
from kconnect.runtime import logs
from kconnect.runtime.plugins.api import ConnectorError

log = logs.get(__name__)


class CdcError(RuntimeError):
    """The server cannot serve the CDC source as configured; the message names the cause and the fix."""


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def connect(dsn: dict[str, str], where: str) -> Any:
    """A plain connection in autocommit, with UTC as the session time zone; ConnectorError with the
    server's own reason (never the password) when it cannot be made."""
    import psycopg2

    try:
        connection = psycopg2.connect(**dsn, options="-c TimeZone=UTC")
    except psycopg2.Error as exc:
        raise ConnectorError(
            f"connecting to PostgreSQL at {where} as {dsn.get('user')} failed: {str(exc).strip()}"
        ) from exc
    connection.autocommit = True
    return connection


def replication_connect(dsn: dict[str, str], where: str) -> Any:
    """A logical replication connection (psycopg2's LogicalReplicationConnection)."""
    import psycopg2
    import psycopg2.extras

    try:
        return psycopg2.connect(
            **dsn, options="-c TimeZone=UTC", connection_factory=psycopg2.extras.LogicalReplicationConnection
        )
    except psycopg2.Error as exc:
        reason = str(exc).strip()
        # The hint only where the server's reason is about replication rights, not a server shutting down.
        hint = (
            " (the user needs REPLICATION and pg_hba.conf a replication entry)"
            if "replication" in reason or "pg_hba" in reason
            else ""
        )
        raise ConnectorError(
            f"opening a replication connection to PostgreSQL at {where} as {dsn.get('user')} failed: "
            f"{reason}{hint}"
        ) from exc


def stream_columns(
    message: pgoutput.Relation,
    known: Mapping[str, dbz.PgColumn],
    type_of: Callable[[int, int], dbz.PgType],
) -> tuple[list[dbz.PgColumn], list[str]]:
    """A Relation message's columns, in its order: the catalog's column where it still has one of that
    name and type (its nullability, primary key, enum labels), else one described by the message alone
    (optional; a key column when the replica identity is the default, the primary key), with its type
    from ``type_of(oid, modifier)``. Also the names described by the message alone."""
    columns: list[dbz.PgColumn] = []
    described: list[str] = []
    for column in message.columns:
        current = known.get(column.name)
        if current is not None and (current.type.oid, current.type.modifier) == (
            column.type_oid,
            column.type_modifier,
        ):
            columns.append(current)
            continue
        key = column.key and message.replica_identity == "d"
        columns.append(dbz.PgColumn(column.name, type_of(column.type_oid, column.type_modifier), True, key))
        described.append(column.name)
    return columns, described


def _pg_type(
    oid: Any, modifier: Any, name: Any, labels: Any, elem: Any, elem_name: Any, elem_labels: Any
) -> dbz.PgType:
    """A type from a catalog row: its array element and enum labels, when it has them."""
    element = (
        dbz.PgType(int(elem), -1, str(elem_name), None, tuple(elem_labels) if elem_labels else None)
        if elem is not None
        else None
    )
    return dbz.PgType(int(oid), int(modifier), str(name), element, tuple(labels) if labels else None)


@dataclass(frozen=True)
class TableInfo:
    """One captured table: where it is, its columns in pgoutput's order, and its record schemas."""

    oid: int
    schema: str
    name: str
    columns: tuple[dbz.PgColumn, ...]
    schemas: dbz.TableSchemas


_COLUMNS_SQL = """
SELECT a.attname, a.atttypid::int, a.atttypmod, NOT a.attnotnull, t.typname,
       EXISTS (SELECT 1 FROM pg_index i WHERE i.indrelid = a.attrelid AND i.indisprimary
               AND a.attnum = ANY (i.indkey)),
       (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
          FROM pg_enum e WHERE e.enumtypid = t.oid),
       CASE WHEN t.typcategory = 'A' THEN t.typelem::int END,
       et.typname,
       (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
          FROM pg_enum e WHERE e.enumtypid = et.oid)
FROM pg_attribute a
JOIN pg_type t ON t.oid = a.atttypid
LEFT JOIN pg_type et ON et.oid = t.typelem AND t.typcategory = 'A'
WHERE a.attrelid = %s AND a.attnum > 0 AND NOT a.attisdropped AND a.attgenerated = ''
ORDER BY a.attnum
"""

_TYPE_SQL = """
SELECT t.typname,
       (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
          FROM pg_enum e WHERE e.enumtypid = t.oid),
       CASE WHEN t.typcategory = 'A' THEN t.typelem::int END,
       et.typname,
       (SELECT array_agg(e.enumlabel::text ORDER BY e.enumsortorder)
          FROM pg_enum e WHERE e.enumtypid = et.oid)
FROM pg_type t
LEFT JOIN pg_type et ON et.oid = t.typelem AND t.typcategory = 'A'
WHERE t.oid = %s
"""


class Catalog:
    """Catalog queries over one plain connection (autocommit, except inside the snapshot's transaction)."""

    def __init__(self, connection: Any, prefix: str, reopen: Callable[[], Any] | None = None) -> None:
        self.connection = connection
        #: Opens the connection again when it was lost outside a transaction (a server restart, an
        #: administrator's pg_terminate_backend): one new connection and one retry of the statement.
        self._reopen = reopen
        self._by_oid: dict[int, TableInfo] = {}
        self._prefix = prefix

    def _rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        import psycopg2

        for attempt in (1, 2):
            try:
                with self.connection.cursor() as cursor:
                    cursor.execute(sql, tuple(params))
                    return list(cursor.fetchall()) if cursor.description is not None else []
            except (psycopg2.OperationalError, psycopg2.InterfaceError) as exc:
                if attempt == 2 or self._reopen is None or not self.connection.autocommit:
                    raise CdcError(f"{str(exc).strip()} (statement: {' '.join(sql.split())[:200]})") from exc
                log.warning("catalog connection lost; reopening", error=str(exc).strip())
                try:
                    self.connection.close()
                except psycopg2.Error as closing:
                    log.debug("closing the lost catalog connection", error=str(closing))
                self.connection = self._reopen()
            except psycopg2.Error as exc:
                raise CdcError(f"{str(exc).strip()} (statement: {' '.join(sql.split())[:200]})") from exc
        raise AssertionError("unreachable")

    def check_logical(self) -> None:
        """wal_level and the REPLICATION attribute, with the fix in the message."""
        [(level,)] = self._rows("SHOW wal_level")
        if level != "logical":
            raise CdcError(
                f"the server's wal_level is {level!r}: logical replication needs wal_level=logical "
                "(set it in postgresql.conf and restart the server)"
            )
        [(allowed,)] = self._rows(
            "SELECT rolreplication OR rolsuper FROM pg_roles WHERE rolname = current_user"
        )
        if not allowed:
            raise CdcError("the database user lacks the REPLICATION attribute (ALTER ROLE ... REPLICATION)")

    def tables(self) -> list[str]:
        """Every ordinary and partitioned table, ``schema.table``."""
        return [
            str(r[0])
            for r in self._rows(
                "SELECT n.nspname || '.' || c.relname FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE c.relkind IN ('r', 'p') AND n.nspname NOT IN ('pg_catalog', 'information_schema') "
                "AND n.nspname NOT LIKE 'pg_toast%%' ORDER BY 1"
            )
        ]

    def ensure_publication(self, name: str, mode: str, tables: Sequence[str]) -> None:
        """Create the publication when missing, as ``publication.autocreate.mode`` says."""
        if self._rows("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)):
            return
        if mode == "disabled":
            raise CdcError(f"publication {name!r} does not exist and publication.autocreate.mode=disabled")
        if mode == "all_tables":
            self._rows(f"CREATE PUBLICATION {_quote(name)} FOR ALL TABLES")
            return
        if not tables:
            raise CdcError(f"publication {name!r} cannot be created for no tables (check table.include.list)")
        listed = ", ".join(".".join(_quote(p) for p in t.split(".", 1)) for t in tables)
        self._rows(f"CREATE PUBLICATION {_quote(name)} FOR TABLE {listed}")

    def slot_holder(self, slot: str) -> int | None:
        """The backend pid streaming from the slot now, or None."""
        rows = self._rows(
            "SELECT active_pid FROM pg_replication_slots WHERE slot_name = %s AND active", (slot,)
        )
        return int(rows[0][0]) if rows and rows[0][0] is not None else None

    def slot_exists(self, slot: str) -> bool:
        rows = self._rows("SELECT plugin FROM pg_replication_slots WHERE slot_name = %s", (slot,))
        if rows and rows[0][0] != "pgoutput":
            raise CdcError(f"replication slot {slot!r} exists with plugin {rows[0][0]!r}, not pgoutput")
        return bool(rows)

    def retained_wal(self, slot: str) -> int:
        rows = self._rows(
            "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), restart_lsn)::bigint FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (slot,),
        )
        return int(rows[0][0] or 0) if rows else 0

    def drop_slot(self, slot: str) -> None:
        self._rows(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots WHERE slot_name = %s",
            (slot,),
        )

    # --- tables

    def _columns(self, oid: int) -> list[dbz.PgColumn]:
        """The table's columns now (none when it was dropped)."""
        columns = []
        for row in self._rows(_COLUMNS_SQL, (oid,)):
            attname, typid, typmod, nullable, typname, is_pk, labels, elem, elem_name, elem_labels = row
            pg_type = _pg_type(typid, typmod, typname, labels, elem, elem_name, elem_labels)
            columns.append(dbz.PgColumn(str(attname), pg_type, bool(nullable), bool(is_pk)))
        return columns

    def _load(self, oid: int, schema: str, name: str) -> TableInfo:
        columns = self._columns(oid)
        info = TableInfo(
            oid, schema, name, tuple(columns), dbz.table_schemas(self._prefix, schema, name, columns)
        )
        self._by_oid[oid] = info
        return info

    def relation(self, message: pgoutput.Relation) -> TableInfo:
        """A Relation message: the table's columns as the stream describes them (sent before its first
        change and after each change of its columns), so schemas evolve with ALTER TABLE.

        The stream runs behind the catalog: by the time a change is decoded its table may have been
        altered again or dropped. The message is authoritative for names, order and types (the row
        tuples follow it); the catalog only adds what the message lacks (nullability, the primary key,
        enum labels) for columns it still has with the same type. A column the catalog no longer knows is
        optional, and a key column when the table's replica identity is the default (its primary key),
        as Debezium reads a dropped table's last changes, instead of failing the task."""
        known = {c.name: c for c in self._columns(message.oid)}
        columns, described = stream_columns(message, known, self._type)
        if described:
            log.warning(
                "table changed or dropped since these changes: columns taken from the stream",
                table=f"{message.namespace}.{message.name}",
                columns=described,
            )
        info = TableInfo(
            message.oid,
            message.namespace,
            message.name,
            tuple(columns),
            dbz.table_schemas(self._prefix, message.namespace, message.name, columns),
        )
        self._by_oid[message.oid] = info
        return info

    def _type(self, oid: int, modifier: int) -> dbz.PgType:
        """A type by OID (name, array element, enum labels); a type dropped too reads as text."""
        rows = self._rows(_TYPE_SQL, (oid,))
        if not rows:
            return dbz.PgType(oid, modifier, "text")
        return _pg_type(oid, modifier, *rows[0])

    def relation_by_oid(self, oid: int) -> TableInfo:
        info = self._by_oid.get(oid)
        if info is None:
            raise CdcError(f"a change names relation {oid}, which no Relation message described")
        return info

    def relation_by_name(self, schema: str, name: str) -> TableInfo:
        for info in self._by_oid.values():
            if (info.schema, info.name) == (schema, name):
                return info
        rows = self._rows("SELECT %s::regclass::oid::int", (f"{_quote(schema)}.{_quote(name)}",))
        return self._load(int(rows[0][0]), schema, name)

    # --- the snapshot

    def begin_snapshot(self, exported: str | None) -> int:
        """A REPEATABLE READ transaction on the slot's exported snapshot (or a fresh one when the slot
        already existed); returns the snapshot's xmin as its transaction id."""
        self.connection.autocommit = False
        self._rows("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
        if exported is not None:
            self._rows("SET TRANSACTION SNAPSHOT %s", (exported,))
        [(xmin,)] = self._rows("SELECT txid_snapshot_xmin(txid_current_snapshot())")
        return int(xmin)

    def end_snapshot(self) -> None:
        self.connection.commit()
        self.connection.autocommit = True

    def snapshot_rows(self, tables: Sequence[str], batch: int) -> Iterator[tuple[str, dict[str, Any], bool]]:
        """Every row of every table as column texts (the same texts pgoutput sends), the last one flagged."""
        pending: tuple[str, dict[str, Any]] | None = None
        for table in tables:
            schema, name = table.split(".", 1)
            info = self.relation_by_name(schema, name)
            names = [c.name for c in info.columns]
            select = ", ".join(f"{_quote(n)}::text" for n in names)
            with self.connection.cursor(name=f"kc_snapshot_{info.oid}") as cursor:
                cursor.itersize = batch
                cursor.execute(f"SELECT {select} FROM {_quote(schema)}.{_quote(name)}")
                for row in cursor:
                    if pending is not None:
                        yield pending[0], pending[1], False
                    pending = (table, dict(zip(names, row, strict=True)))
        if pending is not None:
            yield pending[0], pending[1], True
