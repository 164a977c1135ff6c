"""PostgreSQL change data capture with Debezium's record format: a consistent snapshot, then the changes
streamed by logical replication with the built-in ``pgoutput`` plugin.

Keys are Debezium's (``io.debezium.connector.postgresql.PostgresConnector``, which the connector answers
to): ``database.hostname`` / ``.port`` / ``.user`` / ``.password`` / ``.dbname``, ``topic.prefix``,
``plugin.name`` (only ``pgoutput``), ``slot.name``, ``publication.name``, ``publication.autocreate.mode``,
``table.include.list`` / ``table.exclude.list``, ``snapshot.mode``, ``heartbeat.interval.ms``,
``slot.drop.on.stop``, ``max.batch.size``. Records are Debezium's (``debezium_format``): topic
``<topic.prefix>.<schema>.<table>``, key the primary key, value the envelope; a delete is followed by a
tombstone.

How it reads (one task): on first start it creates the publication and the slot, exporting the slot's
snapshot, and reads every captured table inside that snapshot (``op`` r), so the snapshot and the stream
meet at the slot's consistent point with nothing missed or doubled. Then it streams from the slot.

Offsets are LSNs, Debezium's shape: partition ``{"server": topic.prefix}``, offset ``{"lsn_proc",
"lsn_commit", "lsn", "txId", "ts_usec"}`` (``"snapshot": true`` and ``last_snapshot_record`` while
snapshotting). A restarted task skips every change at or before the stored (commit LSN, LSN) pair, so
nothing repeats; the slot is acknowledged (``send_feedback``) only up to transactions whose every record
the runtime reported written (``commit_record``: after Kafka acknowledged it, or after its transaction
committed with ``exactly.once.source.support=enabled``), so nothing is lost. A lost replication
connection is opened again (at once, then after doubling waits; the task fails naming the cause after
``errors.max.retries`` attempts, ``postgres_reconnect``) and resumes after the last record handed to the
runtime.

Metric (KIP-877): ``slot-retained-wal-bytes``, the WAL the slot keeps on the server.
"""

from __future__ import annotations

import collections
import re
import select
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from kconnect.connectors import debezium_format as dbz
from kconnect.connectors import pgoutput
from kconnect.connectors.postgres_catalog import Catalog, CdcError, connect, replication_connect
from kconnect.connectors.postgres_reconnect import Reconnects
from kconnect.runtime import __version__, logs
from kconnect.runtime.dataplane.connect_data import ConnectField, ConnectSchema
from kconnect.runtime.plugins.api import (
    ConnectorError,
    ExactlyOnceSupport,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    ConfigDef,
    ConfigValidationError,
    Importance,
    NonEmptyString,
    Password,
    Range,
    Type,
    ValidString,
)

log = logs.get(__name__)

#: Reported as ``source.version``: which implementation wrote the record.
VERSION = f"kconnect-{__version__}"
SNAPSHOT_MODES = ("initial", "always", "initial_only", "no_data", "never")
AUTOCREATE_MODES = ("all_tables", "filtered", "disabled")
UNAVAILABLE = "__debezium_unavailable_value"

CONFIG_DEF = (
    ConfigDef()
    .define("database.hostname", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH, "Server host.")
    .define("database.port", Type.INT, 5432, Range.between(1, 65535), Importance.HIGH, "Server port.")
    .define(
        "database.user", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH, "User (REPLICATION)."
    )
    .define("database.password", Type.PASSWORD, None, None, Importance.HIGH, "Password.")
    .define("database.dbname", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH, "Database.")
    .define("database.sslmode", Type.STRING, "prefer", None, Importance.MEDIUM, "libpq sslmode.")
    .define(
        "topic.prefix",
        Type.STRING,
        NO_DEFAULT,
        NonEmptyString(),
        Importance.HIGH,
        "Logical server name: topics are <topic.prefix>.<schema>.<table>; also the offsets' partition.",
    )
    .define(
        "plugin.name",
        Type.STRING,
        "pgoutput",
        ValidString(("pgoutput",)),
        Importance.MEDIUM,
        "Logical decoding plugin; PostgreSQL's built-in pgoutput (decoderbufs needs a server extension).",
    )
    .define("slot.name", Type.STRING, "debezium", NonEmptyString(), Importance.MEDIUM, "Replication slot.")
    .define(
        "slot.drop.on.stop", Type.BOOLEAN, False, None, Importance.LOW, "Drop the slot when the task stops."
    )
    .define(
        "publication.name",
        Type.STRING,
        "dbz_publication",
        NonEmptyString(),
        Importance.MEDIUM,
        "Publication.",
    )
    .define(
        "publication.autocreate.mode",
        Type.STRING,
        "all_tables",
        ValidString(AUTOCREATE_MODES),
        Importance.LOW,
        "Create a missing publication for all tables, for the included tables (filtered), or not at all.",
    )
    .define(
        "table.include.list",
        Type.LIST,
        "",
        None,
        Importance.HIGH,
        "Regular expressions matched against schema.table: the tables captured (all when empty).",
    )
    .define(
        "table.exclude.list",
        Type.LIST,
        "",
        None,
        Importance.MEDIUM,
        "Regular expressions of tables not captured.",
    )
    .define(
        "snapshot.mode",
        Type.STRING,
        "initial",
        ValidString(SNAPSHOT_MODES),
        Importance.MEDIUM,
        "initial: snapshot when no offsets are stored, then stream; always; initial_only: snapshot then stop "
        "reading; no_data/never: stream only.",
    )
    .define(
        "heartbeat.interval.ms",
        Type.INT,
        0,
        Range.at_least(0),
        Importance.MEDIUM,
        "How often a heartbeat record (topic __debezium-heartbeat.<topic.prefix>) carries the latest LSN "
        "as an offset while captured tables are quiet; 0 disables.",
    )
    .define(
        "errors.max.retries",
        Type.INT,
        10,
        Range.at_least(-1),
        Importance.LOW,
        "Attempts to reopen a lost replication connection (waits doubling from 0.5 s to 10 s) before the "
        "task fails with the cause; -1 retries for ever (Debezium's default), 0 fails at once.",
    )
    .define("max.batch.size", Type.INT, 2048, Range.at_least(1), Importance.LOW, "Most records per poll.")
    .define("poll.interval.ms", Type.INT, 500, Range.at_least(1), Importance.LOW, "Longest wait of one poll.")
)


@dataclass(frozen=True)
class CdcConfig:
    """The keys parsed once."""

    host: str
    port: int
    user: str
    password: str | None = field(repr=False)
    database: str
    sslmode: str
    prefix: str
    slot: str
    drop_slot: bool
    publication: str
    autocreate: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    snapshot_mode: str
    heartbeat_ms: int
    max_retries: int
    batch: int
    poll_ms: int

    @classmethod
    def from_props(cls, props: Mapping[str, str | None]) -> CdcConfig:
        v = CONFIG_DEF.parse(props)
        password = v["database.password"]
        for key in ("table.include.list", "table.exclude.list"):
            for pattern in v[key]:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigValidationError(key, pattern, f"not a regular expression: {exc}") from exc
        return cls(
            host=v["database.hostname"],
            port=v["database.port"],
            user=v["database.user"],
            password=password.value if isinstance(password, Password) else password,
            database=v["database.dbname"],
            sslmode=v["database.sslmode"],
            prefix=v["topic.prefix"],
            slot=v["slot.name"],
            drop_slot=v["slot.drop.on.stop"],
            publication=v["publication.name"],
            autocreate=v["publication.autocreate.mode"],
            include=tuple(v["table.include.list"]),
            exclude=tuple(v["table.exclude.list"]),
            snapshot_mode=v["snapshot.mode"],
            heartbeat_ms=v["heartbeat.interval.ms"],
            max_retries=v["errors.max.retries"],
            batch=v["max.batch.size"],
            poll_ms=v["poll.interval.ms"],
        )

    def dsn(self) -> dict[str, str]:
        """psycopg2 keyword arguments."""
        kwargs = {
            "host": self.host,
            "port": str(self.port),
            "user": self.user,
            "dbname": self.database,
            "sslmode": self.sslmode,
            "connect_timeout": "10",
        }
        if self.password is not None:
            kwargs["password"] = self.password
        return kwargs

    def captured(self, table: str) -> bool:
        """Whether ``schema.table`` is captured: Debezium matches whole names against the lists."""
        if self.include:
            return any(re.fullmatch(p, table) for p in self.include)
        return not any(re.fullmatch(p, table) for p in self.exclude)


class PostgresCdcSourceConnector(SourceConnector):
    """One task: a replication slot is read by one client at a time."""

    class_aliases: ClassVar[tuple[str, ...]] = ("io.debezium.connector.postgresql.PostgresConnector",)

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def version(self) -> str:
        """kconnect's version."""
        return __version__

    def config_def(self) -> ConfigDef:
        """Debezium's keys and defaults (``plugin.name`` defaults to pgoutput here)."""
        return CONFIG_DEF

    def start(self, props: dict[str, str]) -> None:
        """Check the config and that the server can do logical replication at all, so wrong credentials or
        ``wal_level`` fail the connector itself with the cause."""
        config = CdcConfig.from_props(props)
        connection = connect(config.dsn(), f"{config.host}:{config.port}/{config.database}")
        try:
            Catalog(connection, config.prefix).check_logical()
        except CdcError as exc:
            raise ConnectorError(str(exc)) from exc
        finally:
            connection.close()
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        """PostgresCdcSourceTask."""
        return PostgresCdcSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Always one task."""
        return [dict(self._props)]

    def stop(self) -> None:
        """Nothing runs in the connector."""

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """SUPPORTED: offsets name the exact change to continue after and the slot keeps the WAL."""
        return ExactlyOnceSupport.SUPPORTED


@dataclass
class _Txn:
    final_lsn: int
    commit_time_us: int
    xid: int


class PostgresCdcSourceTask(SourceTask):
    """Snapshot, then stream; see the module docstring."""

    idle_wait_s: ClassVar[float] = 0.5

    def __init__(self) -> None:
        self._config: CdcConfig | None = None
        self._stopping = threading.Event()
        self._conn: Any = None
        self._catalog: Catalog | None = None
        self._repl: Any = None
        self._cursor: Any = None
        self._partition: dict[str, str] = {}
        #: (commit LSN, LSN) of the last change handed out (or stored, at start): anything at or before it
        #: that the server sends again is skipped.
        self._done: tuple[int, int] = (0, 0)
        self._start_lsn = 0
        self._snapshot: Iterator[tuple[str, dict[str, Any], bool]] | None = None
        self._snapshot_offset: dict[str, Any] = {}
        self._txn: _Txn | None = None
        self._last_commit_lsn: int | None = None
        #: Records handed out and transaction ends, in order; the slot is acknowledged up to the end of the
        #: last transaction whose every record came back through ``commit_record``.
        self._inflight: collections.deque[tuple[SourceRecord | None, int | None]] = collections.deque()
        self._written: set[int] = set()
        self._lock = threading.Lock()
        self._flush_lsn = 0
        self._last_heartbeat = time.monotonic()
        self._latest_end_lsn = 0
        self._retained = 0.0
        self._retained_at = 0.0
        self._reconnects = Reconnects(-1)

    def version(self) -> str:
        """kconnect's version."""
        return __version__

    @property
    def config(self) -> CdcConfig:
        if self._config is None:
            raise ConnectorError("PostgresCdcSourceTask used before start()")
        return self._config

    # ----------------------------------------------------------------------------------------- start

    def start(self, props: dict[str, str]) -> None:
        """Publication, slot, snapshot plan; replication itself starts when the snapshot is read."""
        self._config = config = CdcConfig.from_props(props)
        self._reconnects = Reconnects(config.max_retries)
        where = f"{config.host}:{config.port}/{config.database}"
        self._conn = connect(config.dsn(), where)
        self._catalog = catalog = Catalog(self._conn, config.prefix, lambda: connect(config.dsn(), where))
        try:
            catalog.check_logical()
            tables = [t for t in catalog.tables() if config.captured(t)]
            catalog.ensure_publication(config.publication, config.autocreate, tables)
            holder = catalog.slot_holder(config.slot)
            if holder is not None:
                raise CdcError(
                    f"replication slot {config.slot!r} is in use by another client (PostgreSQL backend pid "
                    f"{holder}): stop that client, or give this connector its own slot.name"
                )
        except CdcError as exc:
            raise ConnectorError(str(exc)) from exc
        self._partition = {"server": config.prefix}
        reader = self.context.offset_storage_reader if self.context is not None else None
        stored = reader.offset(self._partition) if reader is not None else None
        self._repl = replication_connect(config.dsn(), where)
        slot_exists = catalog.slot_exists(config.slot)
        snapshot_done = (bool(stored) and not (stored or {}).get("snapshot")) or bool(
            (stored or {}).get("last_snapshot_record")
        )
        exported: str | None = None
        if not slot_exists:
            self._start_lsn, exported = self._create_slot()
        if stored and not stored.get("snapshot"):
            self._done = (int(stored.get("lsn_commit") or 0), int(stored.get("lsn") or 0))
            self._start_lsn = max(self._start_lsn, int(stored.get("lsn_commit") or 0))
        elif stored:
            self._start_lsn = max(self._start_lsn, int(stored.get("lsn") or 0))
        wants_snapshot = config.snapshot_mode == "always" or (
            config.snapshot_mode in ("initial", "initial_only") and not snapshot_done
        )
        if wants_snapshot:
            self._begin_snapshot(tables, exported)
        log.info(
            "PostgreSQL CDC task starts",
            slot=config.slot,
            publication=config.publication,
            tables=tables,
            snapshot=wants_snapshot,
            start_lsn=pgoutput.lsn_text(self._start_lsn),
        )
        if self.context is not None:
            metrics = self.context.plugin_metrics()
            metrics.add_metric(
                metrics.metric_name("slot-retained-wal-bytes", "WAL bytes the replication slot keeps"),
                lambda: self._retained,
            )

    def _create_slot(self) -> tuple[int, str]:
        """Create the slot, exporting its snapshot; the replication connection must stay idle until the
        snapshot is imported."""
        cursor = self._repl.cursor()
        try:
            cursor.execute(f'CREATE_REPLICATION_SLOT "{self.config.slot}" LOGICAL pgoutput EXPORT_SNAPSHOT')
            _, consistent, snapshot, _ = cursor.fetchone()
        except Exception as exc:
            raise ConnectorError(f"creating replication slot {self.config.slot!r} failed: {exc}") from exc
        log.info("replication slot created", slot=self.config.slot, consistent_point=consistent)
        return pgoutput.parse_lsn(consistent), str(snapshot)

    def _begin_snapshot(self, tables: list[str], exported: str | None) -> None:
        assert self._catalog is not None
        xid = self._catalog.begin_snapshot(exported)
        self._snapshot_offset = {"lsn": self._start_lsn, "txId": xid, "ts_usec": int(time.time() * 1e6)}
        self._snapshot = self._catalog.snapshot_rows(tables, self.config.batch)

    # ----------------------------------------------------------------------------------------- poll

    def stop(self) -> None:
        """Make ``poll`` return; connections are closed by the poll thread."""
        self._stopping.set()

    def poll(self) -> list[SourceRecord] | None:
        """Snapshot rows first, then streamed changes; at most ``max.batch.size`` records."""
        if self._stopping.is_set():
            self._close()
            return None
        try:
            if self._snapshot is not None:
                return self._poll_snapshot()
            if self.config.snapshot_mode == "initial_only":
                self._stopping.wait(self.idle_wait_s)
                return None
            return self._poll_stream()
        except (CdcError, dbz.DebeziumFormatError, pgoutput.PgOutputError) as exc:
            raise ConnectorError(str(exc)) from exc

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        """The record is written (Kafka acknowledged it, or its transaction committed)."""
        with self._lock:
            self._written.add(id(record))

    def _poll_snapshot(self) -> list[SourceRecord]:
        assert self._snapshot is not None and self._catalog is not None
        records: list[SourceRecord] = []
        for table, texts, last in self._snapshot:
            schema, name = table.split(".", 1)
            relation = self._catalog.relation_by_name(schema, name)
            row = dbz.row_values(relation.columns, [texts[c.name] for c in relation.columns])
            info = dbz.SourceInfo(
                VERSION,
                self.config.prefix,
                self.config.database,
                schema,
                name,
                self._snapshot_offset["ts_usec"],
                "last" if last else "true",
                self._snapshot_offset["txId"],
                self._start_lsn,
                None,
            )
            offset = {**self._snapshot_offset, "snapshot": True, "last_snapshot_record": last}
            records.append(self._record(relation, "r", None, row, info, offset))
            if last:
                self._snapshot = None
                self._catalog.end_snapshot()
                log.info("snapshot done", records=len(records))
                break
            if len(records) >= self.config.batch:
                break
        else:
            # Every captured table was empty: nothing to mark; streaming starts.
            self._snapshot = None
            self._catalog.end_snapshot()
        for record in records:
            self._inflight.append((record, None))
        return records

    def _record(
        self,
        relation: Any,
        op: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        info: dbz.SourceInfo,
        offset: dict[str, Any],
    ) -> SourceRecord:
        schemas = relation.schemas
        row = after if after is not None else before
        key = dbz.key_value(relation.columns, row) if schemas.key is not None and row is not None else None
        value = dbz.envelope_value(op, before, after, info, int(time.time() * 1e6))
        return SourceRecord(
            self._partition,
            offset,
            dbz.topic_name(self.config.prefix, info.schema, info.table),
            key=key,
            value=value,
            key_schema=schemas.key,
            value_schema=schemas.envelope,
        )

    def _start_streaming(self) -> None:
        import psycopg2

        self._cursor = self._repl.cursor()
        try:
            self._cursor.start_replication(
                slot_name=self.config.slot,
                decode=False,
                start_lsn=self._start_lsn,
                options={"proto_version": "1", "publication_names": self.config.publication},
                status_interval=10,
            )
        except (psycopg2.OperationalError, psycopg2.InterfaceError):
            raise  # the connection, not the request: retried as a lost connection
        except psycopg2.Error as exc:
            raise CdcError(
                f"starting replication from slot {self.config.slot!r} failed: {str(exc).strip()}"
            ) from exc
        self._reconnects.reopened()
        log.info(
            "streaming from the slot", slot=self.config.slot, start_lsn=pgoutput.lsn_text(self._start_lsn)
        )

    def _poll_stream(self) -> list[SourceRecord] | None:
        import psycopg2

        if self._repl is None and not self._reopen():
            return None
        records: list[SourceRecord] = []
        deadline = time.monotonic() + self.config.poll_ms / 1000
        try:
            if self._cursor is None:
                self._start_streaming()
            while len(records) < self.config.batch and not self._stopping.is_set():
                message = self._cursor.read_message()
                if message is None:
                    if records or (self._txn is None and time.monotonic() >= deadline):
                        break
                    remaining = deadline - time.monotonic()
                    if remaining <= 0:
                        break
                    select.select([self._cursor], [], [], min(remaining, self.idle_wait_s))
                    continue
                self._handle(message.data_start, pgoutput.decode(message.payload), records)
            self._acknowledge()
            heartbeat = self._heartbeat()
            if heartbeat is not None:
                records.append(heartbeat)
        except psycopg2.Error as exc:
            # The connection, not the request: an operational error (terminated, shut down, network) or
            # one without an SQLSTATE (psycopg2's "no COPY in progress" once the server ended the stream).
            if not isinstance(exc, psycopg2.OperationalError | psycopg2.InterfaceError) and exc.pgcode:
                raise CdcError(
                    f"streaming from slot {self.config.slot!r} failed: {str(exc).strip()}"
                ) from exc
            self._connection_lost(str(exc).strip())
        return records or None

    def _handle(self, lsn: int, message: pgoutput.Message, records: list[SourceRecord]) -> None:
        assert self._catalog is not None
        if isinstance(message, pgoutput.Begin):
            self._txn = _Txn(message.final_lsn, message.commit_time_us, message.xid)
        elif isinstance(message, pgoutput.Commit):
            self._txn = None
            self._last_commit_lsn = message.end_lsn  # what Debezium's sequence names: the commit's end
            self._latest_end_lsn = message.end_lsn
            self._inflight.append((None, message.end_lsn))
        elif isinstance(message, pgoutput.Relation):
            self._catalog.relation(message)
        elif isinstance(message, pgoutput.Insert | pgoutput.Update | pgoutput.Delete):
            txn = self._txn
            if txn is None:
                raise CdcError(
                    f"a {type(message).__name__} at {pgoutput.lsn_text(lsn)} outside a transaction"
                )
            position = (txn.final_lsn, lsn)
            if position <= self._done:
                return  # written before a restart
            self._done = position
            for record in self._change(message, txn, lsn):
                records.append(record)
                self._inflight.append((record, None))

    def _change(self, message: Any, txn: _Txn, lsn: int) -> list[SourceRecord]:
        assert self._catalog is not None
        relation = self._catalog.relation_by_oid(message.relation)
        if not self.config.captured(f"{relation.schema}.{relation.name}"):
            return []  # published (FOR ALL TABLES) but not captured
        columns = relation.columns

        fields = relation.schemas.row.fields

        def row(
            texts: tuple[pgoutput.ColumnValue, ...] | None, key_only: bool = False
        ) -> dict[str, Any] | None:
            """A row's struct; columns the server did not send (a key-only old row, an unchanged TOASTed
            value) are Debezium's: its placeholder for text, else null, or the type's zero if required."""
            if texts is None:
                return None
            values: dict[str, Any] = {}
            for column, text, fld in zip(columns, texts, fields, strict=True):
                if (key_only and not column.key) or text is pgoutput.UNCHANGED:
                    unsent = not key_only and column.type.oid in (dbz.TEXT, dbz.VARCHAR)
                    values[column.name] = UNAVAILABLE if unsent else dbz.fallback(fld.schema)
                else:
                    values[column.name] = dbz.text_value(column.type, text)  # type: ignore[arg-type]
            return values

        info = dbz.SourceInfo(
            VERSION,
            self.config.prefix,
            self.config.database,
            relation.schema,
            relation.name,
            txn.commit_time_us,
            "false",
            txn.xid,
            lsn,
            self._last_commit_lsn,
        )
        offset = {
            "lsn_proc": lsn,
            "lsn_commit": txn.final_lsn,
            "lsn": lsn,
            "txId": txn.xid,
            "ts_usec": txn.commit_time_us,
        }
        if isinstance(message, pgoutput.Insert):
            return [self._record(relation, "c", None, row(message.new), info, offset)]
        if isinstance(message, pgoutput.Update):
            before = row(message.old, key_only=message.old_kind == "K") if message.old_kind else None
            return [self._record(relation, "u", before, row(message.new), info, offset)]
        before = row(message.old, key_only=message.old_kind == "K")
        delete = self._record(relation, "d", before, None, info, offset)
        if delete.key is None:
            return [delete]
        tombstone = SourceRecord(
            self._partition, offset, delete.topic, key=delete.key, value=None, key_schema=delete.key_schema
        )
        return [delete, tombstone]

    def _acknowledge(self) -> None:
        """Confirm to the server every transaction whose records are all written; keepalive otherwise."""
        before = self._flush_lsn
        with self._lock:
            while self._inflight:
                record, end_lsn = self._inflight[0]
                if record is not None:
                    if id(record) not in self._written:
                        break
                    self._written.discard(id(record))
                elif end_lsn is not None:
                    self._flush_lsn = max(self._flush_lsn, end_lsn)
                self._inflight.popleft()
        if self._cursor is not None:
            # Sent at once when it moved (psycopg2 otherwise waits for its status interval).
            self._cursor.send_feedback(
                flush_lsn=self._flush_lsn, write_lsn=self._flush_lsn, force=self._flush_lsn != before
            )
        now = time.monotonic()
        if now - self._retained_at > 5 and self._catalog is not None:
            self._retained_at = now
            self._retained = float(self._catalog.retained_wal(self.config.slot))

    def _heartbeat(self) -> SourceRecord | None:
        """Debezium's heartbeat: when nothing is pending, a record whose offset is the server's latest
        position; once it is written the slot is confirmed up to that position. While the captured tables
        are quiet and other tables write, pgoutput sends nothing for their transactions, only keepalives
        carrying the position: the heartbeat moves the stored offset along with the slot, so the offsets
        topic, the slot and the WAL the server keeps agree. Safe: every change before that position was
        received, and a transaction still open commits after it."""
        interval = self.config.heartbeat_ms
        if interval <= 0 or time.monotonic() - self._last_heartbeat < interval / 1000 or self._inflight:
            return None
        if self._txn is not None or self._cursor is None:
            return None
        self._last_heartbeat = time.monotonic()
        # Ask for a keepalive now, so the next heartbeat carries a fresh position.
        self._cursor.send_feedback(reply=True)
        position = max(self._latest_end_lsn, int(self._cursor.wal_end or 0))
        if not position:
            return None
        offset = {
            "lsn_proc": position,
            "lsn_commit": self._done[0],
            "lsn": self._done[1],
            "ts_usec": int(time.time() * 1e6),
        }
        record = SourceRecord(
            self._partition,
            offset,
            f"__debezium-heartbeat.{self.config.prefix}",
            key={"serverName": self.config.prefix},
            value={"ts_ms": int(time.time() * 1000)},
            key_schema=_HEARTBEAT_KEY,
            value_schema=_HEARTBEAT_VALUE,
        )
        self._inflight.append((record, None))
        self._inflight.append((None, position))
        return record

    def _connection_lost(self, cause: str) -> None:
        """The replication connection broke (or could not start streaming again): close it and schedule
        a reopen; the server resends from the slot's confirmed position and ``_done`` skips what was
        already handed out, so nothing repeats and nothing is lost."""
        self._close_replication()
        self._txn = None
        self._start_lsn = self._flush_lsn or self._start_lsn
        now = time.monotonic()
        if self._reconnects.lost:
            self._attempt_failed(now, cause)
            return
        if not self._reconnects.connection_lost(now, cause):
            raise CdcError(self._gave_up())
        log.warning(
            "replication connection lost; reconnecting",
            slot=self.config.slot,
            resume_lsn=pgoutput.lsn_text(self._start_lsn),
            error=cause,
        )

    def _attempt_failed(self, now: float, cause: str) -> None:
        delay = self._reconnects.attempt_failed(now, cause)
        if delay is None:
            raise CdcError(self._gave_up())
        log.warning(
            "reopening the replication connection failed; retrying",
            slot=self.config.slot,
            attempt=self._reconnects.failures,
            retry_in_s=delay,
            error=cause,
        )

    def _gave_up(self) -> str:
        return (
            f"the replication connection to PostgreSQL at {self.config.host}:{self.config.port} was lost "
            f"(resuming at {pgoutput.lsn_text(self._start_lsn)}) and errors.max.retries="
            f"{self.config.max_retries} attempts to reopen it failed: {self._reconnects.cause}"
        )

    def _reopen(self) -> bool:
        """One attempt to open the replication connection again when it is due; False while waiting."""
        now = time.monotonic()
        if not self._reconnects.due(now):
            self._stopping.wait(min(self.idle_wait_s, max(0.0, self._reconnects.next_at - now)))
            return False
        try:
            self._repl = replication_connect(self.config.dsn(), f"{self.config.host}:{self.config.port}")
        except ConnectorError as exc:
            self._attempt_failed(now, str(exc))
            return False
        self._cursor = None
        return True

    def _close_replication(self) -> None:
        for closable in (self._cursor, self._repl):
            try:
                if closable is not None:
                    closable.close()
            except Exception as exc:  # already broken: nothing more to release
                log.debug("closing the replication connection", error=str(exc))
        self._cursor = None
        self._repl = None

    def _close(self) -> None:
        if self._cursor is not None:
            try:
                self._acknowledge()
            except Exception as exc:
                log.warning("final slot acknowledgement failed", error=str(exc))
        self._close_replication()
        if self._catalog is not None and self._config is not None and self._config.drop_slot:
            try:
                self._catalog.drop_slot(self._config.slot)
            except CdcError as exc:
                log.warning("dropping the slot failed", error=str(exc))
        if self._catalog is not None:
            self._conn = self._catalog.connection  # reopened after a loss, perhaps
        if self._conn is not None:
            self._conn.close()
            self._conn = None


_HEARTBEAT_KEY = ConnectSchema(
    "struct",
    False,
    name="io.debezium.connector.common.ServerNameKey",
    fields=(ConnectField("serverName", ConnectSchema("string")),),
)
_HEARTBEAT_VALUE = ConnectSchema(
    "struct",
    False,
    name="io.debezium.connector.common.Heartbeat",
    fields=(ConnectField("ts_ms", ConnectSchema("int64")),),
)
