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

Where: this module is the connector and the task's start (publication, slot, snapshot plan) and snapshot;
the keys are parsed in ``postgres_cdc_config``, the stream from the slot (replication connection,
messages, acknowledgement, heartbeats, reconnects) runs in ``postgres_stream``, the catalog's SQL in
``postgres_catalog``. Their names are importable from here as before.

Metric (KIP-877): ``slot-retained-wal-bytes``, the WAL the slot keeps on the server.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from kconnect.connectors import debezium_format as dbz
from kconnect.connectors import pgoutput
from kconnect.connectors.postgres_catalog import Catalog, CdcError, connect
from kconnect.connectors.postgres_cdc_config import (
    AUTOCREATE_MODES,
    CONFIG_DEF,
    SNAPSHOT_MODES,
    CdcConfig,
)
from kconnect.connectors.postgres_stream import UNAVAILABLE, VERSION, ReplicationStream, build_record
from kconnect.runtime import __version__, logs
from kconnect.runtime.plugins.api import (
    ConnectorError,
    ExactlyOnceSupport,
    SourceConnector,
    SourceRecord,
    SourceTask,
    Task,
)
from kconnect.runtime.plugins.config_def import ConfigDef

__all__ = [
    "AUTOCREATE_MODES",
    "CONFIG_DEF",
    "SNAPSHOT_MODES",
    "UNAVAILABLE",
    "VERSION",
    "CdcConfig",
    "PostgresCdcSourceConnector",
    "PostgresCdcSourceTask",
]

log = logs.get(__name__)


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


class PostgresCdcSourceTask(SourceTask):
    """Snapshot, then stream; see the module docstring."""

    idle_wait_s: ClassVar[float] = 0.5

    def __init__(self) -> None:
        self._config: CdcConfig | None = None
        self._stopping = threading.Event()
        self._conn: Any = None
        self._catalog: Catalog | None = None
        self._partition: dict[str, str] = {}
        self._snapshot: Iterator[tuple[str, dict[str, Any], bool]] | None = None
        self._snapshot_offset: dict[str, Any] = {}
        self._stream: ReplicationStream | None = None

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
        self._stream = stream = ReplicationStream(config, catalog, self._partition, self._stopping)
        stream.open(where)
        slot_exists = catalog.slot_exists(config.slot)
        snapshot_done = (bool(stored) and not (stored or {}).get("snapshot")) or bool(
            (stored or {}).get("last_snapshot_record")
        )
        exported: str | None = None
        if not slot_exists:
            exported = stream.create_slot()
        stream.resume_from(stored)
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
            start_lsn=pgoutput.lsn_text(stream.start_lsn),
        )
        if self.context is not None:
            metrics = self.context.plugin_metrics()
            metrics.add_metric(
                metrics.metric_name("slot-retained-wal-bytes", "WAL bytes the replication slot keeps"),
                lambda: stream.retained,
            )

    def _begin_snapshot(self, tables: list[str], exported: str | None) -> None:
        assert self._catalog is not None and self._stream is not None
        xid = self._catalog.begin_snapshot(exported)
        self._snapshot_offset = {
            "lsn": self._stream.start_lsn,
            "txId": xid,
            "ts_usec": int(time.time() * 1e6),
        }
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
            assert self._stream is not None
            return self._stream.poll()
        except (CdcError, dbz.DebeziumFormatError, pgoutput.PgOutputError) as exc:
            raise ConnectorError(str(exc)) from exc

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        """The record is written (Kafka acknowledged it, or its transaction committed)."""
        if self._stream is not None:
            self._stream.written(record)

    def _poll_snapshot(self) -> list[SourceRecord]:
        assert self._snapshot is not None and self._catalog is not None and self._stream is not None
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
                self._stream.start_lsn,
                None,
            )
            offset = {**self._snapshot_offset, "snapshot": True, "last_snapshot_record": last}
            records.append(build_record(self.config, self._partition, relation, "r", None, row, info, offset))
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
        self._stream.handed_out(records)
        return records

    def _close(self) -> None:
        if self._stream is not None:
            self._stream.close()
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
