"""The CDC task's replication stream: the replication connection to PostgreSQL's walsender, the pgoutput
messages it sends turned into Debezium's change records, the slot's acknowledgement, heartbeats, and the
reopening of a lost connection.

Why a module of its own: this is the part of the task that runs for ever after the snapshot, with its own
state (the open transaction, the records handed out and not yet written, the position confirmed to the
server); ``postgres_cdc`` prepares it (publication, slot, snapshot) and hands it the polls.

Acknowledgement: the slot is confirmed (``send_feedback``) only up to transactions whose every record the
runtime reported written (``written``: Kafka acknowledged it, or its transaction committed with
``exactly.once.source.support=enabled``), so nothing is lost; ``(commit LSN, LSN)`` of the last change
handed out is remembered, and anything at or before it the server sends again (after a reconnect or a
restart) is skipped, so nothing repeats. Snapshot records go through the same queue (``handed_out``).
"""

from __future__ import annotations

import collections
import select
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kconnect.connectors import debezium_format as dbz
from kconnect.connectors import pgoutput
from kconnect.connectors.postgres_catalog import Catalog, CdcError, replication_connect
from kconnect.connectors.postgres_cdc_config import CdcConfig
from kconnect.connectors.postgres_reconnect import Reconnects, transient
from kconnect.runtime import __version__, logs
from kconnect.runtime.dataplane.connect_data import ConnectField, ConnectSchema
from kconnect.runtime.plugins.api import ConnectorError, SourceRecord

log = logs.get(__name__)

#: Reported as ``source.version``: which implementation wrote the record.
VERSION = f"kconnect-{__version__}"
UNAVAILABLE = "__debezium_unavailable_value"


def build_record(
    config: CdcConfig,
    partition: dict[str, str],
    relation: Any,
    op: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    info: dbz.SourceInfo,
    offset: dict[str, Any],
) -> SourceRecord:
    """One change (or snapshot row) as Debezium writes it: topic ``<prefix>.<schema>.<table>``, the primary
    key, the envelope."""
    schemas = relation.schemas
    row = after if after is not None else before
    key = dbz.key_value(relation.columns, row) if schemas.key is not None and row is not None else None
    value = dbz.envelope_value(op, before, after, info, int(time.time() * 1e6))
    return SourceRecord(
        partition,
        offset,
        dbz.topic_name(config.prefix, info.schema, info.table),
        key=key,
        value=value,
        key_schema=schemas.key,
        value_schema=schemas.envelope,
    )


@dataclass
class _Txn:
    final_lsn: int
    commit_time_us: int
    xid: int


class ReplicationStream:
    """One task's stream from its slot; see the module docstring. Called from the task's poll thread only,
    except ``written`` (the producer's callback thread)."""

    idle_wait_s = 0.5

    def __init__(
        self, config: CdcConfig, catalog: Catalog, partition: dict[str, str], stopping: threading.Event
    ) -> None:
        self.config = config
        self._catalog = catalog
        self._partition = partition
        self._stopping = stopping
        self._repl: Any = None
        self._cursor: Any = None
        #: (commit LSN, LSN) of the last change handed out (or stored, at start): anything at or before it
        #: that the server sends again is skipped.
        self._done: tuple[int, int] = (0, 0)
        self._start_lsn = 0
        self._txn: _Txn | None = None
        self._last_commit_lsn: int | None = None
        #: Records handed out and transaction ends, in order; the slot is acknowledged up to the end of the
        #: last transaction whose every record came back through ``written``.
        self._inflight: collections.deque[tuple[SourceRecord | None, int | None]] = collections.deque()
        self._written: set[int] = set()
        self._lock = threading.Lock()
        self._flush_lsn = 0
        self._last_heartbeat = time.monotonic()
        self._latest_end_lsn = 0
        #: The WAL the slot keeps on the server (the ``slot-retained-wal-bytes`` metric), every 5 s.
        self.retained = 0.0
        self._retained_at = 0.0
        self._reconnects = Reconnects(config.max_retries)

    @property
    def start_lsn(self) -> int:
        """Where streaming starts: the slot's consistent point, or after the stored offset."""
        return self._start_lsn

    def open(self, where: str) -> None:
        """The replication connection (at start: it creates the slot, then stays idle while the snapshot
        reads); ``where`` names the server in a failure."""
        self._repl = replication_connect(self.config.dsn(), where)

    def create_slot(self) -> str:
        """Create the slot, exporting its snapshot (returned); streaming starts at its consistent point.
        The replication connection must stay idle until the snapshot is imported."""
        cursor = self._repl.cursor()
        try:
            cursor.execute(f'CREATE_REPLICATION_SLOT "{self.config.slot}" LOGICAL pgoutput EXPORT_SNAPSHOT')
            _, consistent, snapshot, _ = cursor.fetchone()
        except Exception as exc:
            raise ConnectorError(f"creating replication slot {self.config.slot!r} failed: {exc}") from exc
        log.info("replication slot created", slot=self.config.slot, consistent_point=consistent)
        self._start_lsn = pgoutput.parse_lsn(consistent)
        return str(snapshot)

    def resume_from(self, stored: Mapping[str, Any] | None) -> None:
        """Continue after a stored offset: after its change when streaming had begun, from its LSN when the
        snapshot was under way."""
        if stored and not stored.get("snapshot"):
            self._done = (int(stored.get("lsn_commit") or 0), int(stored.get("lsn") or 0))
            self._start_lsn = max(self._start_lsn, int(stored.get("lsn_commit") or 0))
        elif stored:
            self._start_lsn = max(self._start_lsn, int(stored.get("lsn") or 0))

    def handed_out(self, records: Sequence[SourceRecord]) -> None:
        """Snapshot records given to the runtime: the slot's acknowledgement waits for them too."""
        for record in records:
            self._inflight.append((record, None))

    def written(self, record: SourceRecord) -> None:
        """The record is written (Kafka acknowledged it, or its transaction committed)."""
        with self._lock:
            self._written.add(id(record))

    def close(self) -> None:
        """A last acknowledgement, then the replication connection is closed."""
        if self._cursor is not None:
            try:
                self._acknowledge()
            except Exception as exc:
                log.warning("final slot acknowledgement failed", error=str(exc))
        self._close_replication()

    def _record(
        self,
        relation: Any,
        op: str,
        before: dict[str, Any] | None,
        after: dict[str, Any] | None,
        info: dbz.SourceInfo,
        offset: dict[str, Any],
    ) -> SourceRecord:
        return build_record(self.config, self._partition, relation, op, before, after, info, offset)

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
        except psycopg2.Error as exc:
            if transient(exc.pgcode):
                raise  # the connection, not the request: retried as a lost connection
            raise CdcError(
                f"starting replication from slot {self.config.slot!r} failed: {str(exc).strip()}"
            ) from exc
        self._reconnects.reopened()
        log.info(
            "streaming from the slot", slot=self.config.slot, start_lsn=pgoutput.lsn_text(self._start_lsn)
        )

    def poll(self) -> list[SourceRecord] | None:
        """The changes the server sent within ``poll.interval.ms`` (at most ``max.batch.size``), a heartbeat
        when due; None when there are none (or the connection is being reopened)."""
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
            # Reopened when the connection broke (terminated, shut down, network; or no SQLSTATE, such as
            # psycopg2's "no COPY in progress" once the server ended the stream); any other error the
            # server raised (a publication dropped, the slot invalidated) fails the task naming it.
            if not transient(exc.pgcode):
                raise CdcError(
                    f"streaming from slot {self.config.slot!r} failed: {str(exc).strip()}"
                ) from exc
            self._connection_lost(str(exc).strip())
        return records or None

    def _handle(self, lsn: int, message: pgoutput.Message, records: list[SourceRecord]) -> None:
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
        if now - self._retained_at > 5:
            self._retained_at = now
            self.retained = float(self._catalog.retained_wal(self.config.slot))

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
