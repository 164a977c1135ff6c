"""The worker's four internal topics: created or verified at start, then each read on its own thread.

Why a module of its own: every worker keeps the config, status, offset and group-records topics read to
their end and folds them into plain state (``config_log``, ``status_log``, ``offset_log``,
``group_records``); the rest of the shell asks this one object for that state and writes through it, so
neither the worker nor the REST write API handles a ``KafkaLog`` itself.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import KafkaException
from confluent_kafka.admin import AdminClient

from kconnect.config.errors import ConfigError
from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.client_config import (
    WorkerClients,
    explain_connection_failure,
    worker_clients,
    worker_props,
)
from kconnect.runtime.group import group_records
from kconnect.runtime.storage import config_log, offset_log, status_log, topics
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot
from kconnect.runtime.storage.kafka_log import KafkaLog, KafkaLogError, LogRecord
from kconnect.runtime.storage.offset_log import OffsetState, SourceOffset

log = logs.get(__name__)

_LOGGER_CLUSTER_KEY = config_log.LOGGER_CLUSTER_PREFIX.encode()


class StartupError(RuntimeError):
    """The worker cannot start; the message is the one line the CLI prints."""


def startup_timeout_s(cfg: WorkerConfig) -> float:
    """How long each start-up step (reaching the cluster, the topics, the group) may take."""
    return max(5.0, cfg.request_timeout_ms / 1000 / 4)


def connect(cfg: WorkerConfig, worker_id: str) -> tuple[WorkerClients, AdminClient, str]:
    """Translate the worker's client settings and reach the cluster: the clients, an admin client and
    the cluster id. Raises StartupError naming the client's own reason (a failed SASL login, a TLS
    handshake), not only the metadata call's "transport failure"."""
    bootstrap = ",".join(cfg.bootstrap_servers)
    try:
        clients = worker_clients(cfg.security_protocol, cfg.passthrough)
    except ConfigError as exc:
        raise StartupError(str(exc)) from exc
    if clients.ignored:
        # Java's clients warn the same way ("supplied but isn't a known config").
        log.warning(
            "worker Kafka client settings with no counterpart in kconnect's clients (ignored)",
            keys=list(clients.ignored),
        )
    client_errors: list[str] = []
    admin_conf: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        **clients.admin,
        "client.id": f"{worker_id}-admin",
        "error_cb": lambda error: client_errors.append(str(error.str())),
    }
    try:
        admin = AdminClient(admin_conf)
    except KafkaException as exc:  # a setting librdkafka refuses (an unknown ssl.* key, GSSAPI)
        raise StartupError(f"the worker's Kafka client settings: {exc.args[0].str()}") from exc
    timeout_s = startup_timeout_s(cfg)
    try:
        md = admin.list_topics(timeout=timeout_s)
    except KafkaException as exc:
        admin.poll(0)  # serves the error callbacks queued meanwhile
        reason = client_errors[-1] if client_errors else str(exc.args[0] if exc.args else exc)
        explained = explain_connection_failure(reason, worker_props(cfg.security_protocol, cfg.passthrough))
        raise StartupError(
            f"could not reach the Kafka cluster at bootstrap.servers={bootstrap} within {timeout_s:.0f} s"
            f" ({explained})"
        ) from exc
    return clients, admin, md.cluster_id or ""


def topic_specs(cfg: WorkerConfig) -> list[topics.TopicSpec]:
    """The internal topics as the worker properties name and size them (the config topic compacted, one
    partition: its records' order is the cluster's history)."""
    return [
        topics.TopicSpec(
            cfg.config_storage_topic, "config.storage.topic", 1, cfg.config_storage_replication_factor, True
        ),
        topics.TopicSpec(
            cfg.offset_storage_topic,
            "offset.storage.topic",
            cfg.offset_storage_partitions,
            cfg.offset_storage_replication_factor,
        ),
        topics.TopicSpec(
            cfg.status_storage_topic,
            "status.storage.topic",
            cfg.status_storage_partitions,
            cfg.status_storage_replication_factor,
        ),
        topics.TopicSpec(
            cfg.group_records_storage_topic,
            "group.records.storage.topic",
            cfg.group_records_storage_partitions,
            cfg.group_records_storage_replication_factor,
        ),
    ]


class InternalTopics:
    """The internal-topic logs and the states folded from them, guarded by the worker's lock.

    ``on_config_moved`` runs (on the config log's thread) after every config record, so the herder
    thread learns that the config topic moved on; ``on_group_moved`` likewise after every group record
    (``group.protocol=connect`` reconciles from them).
    """

    def __init__(
        self,
        config: WorkerConfig,
        worker_id: str,
        lock: threading.RLock,
        on_config_moved: Callable[[], None],
        on_group_moved: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self.worker_id = worker_id
        self._lock = lock
        self._on_config_moved = on_config_moved
        self._on_group_moved = on_group_moved
        # The folds own plain dicts and freeze a snapshot only when one is asked for, so reading a topic of
        # N records costs O(N) (a frozen state per record made start-up quadratic in the offsets topic).
        self._config_fold = config_log.ConfigFold()
        self._status_fold = status_log.StatusFold()
        self._offset_fold = offset_log.OffsetFold()
        self._group_records = group_records.GroupRecords()
        # Cluster-scoped log levels written before this worker read the config topic to its end are old
        # news and not applied (Java's KafkaConfigBackingStore does the same).
        self._config_caught_up = False
        self._config_log: KafkaLog | None = None
        self._status_log: KafkaLog | None = None
        self._offset_log: KafkaLog | None = None
        self._records_log: KafkaLog | None = None
        #: Told of every status this worker reports (:meth:`put_status`), from whichever thread reports it:
        #: self-healing (``auto_restarts``) learns of failures and restarts here, with no topic lag.
        self.on_status_put: Callable[[status_log.ConnectorStatus | status_log.TaskStatus], None] | None = None

    # ------------------------------------------------------------------------------------------ start

    def open(self, admin: AdminClient, client_settings: Mapping[str, str]) -> None:
        """Create or verify the topics, start the four logs and read each to its end.

        Raises StartupError with the one line a user needs.
        """
        try:
            self._open(admin, client_settings)
        except (topics.TopicError, KafkaLogError) as exc:
            raise StartupError(str(exc)) from exc

    def _open(self, admin: AdminClient, client_settings: Mapping[str, str]) -> None:
        cfg = self.config
        bootstrap = ",".join(cfg.bootstrap_servers)
        timeout_s = startup_timeout_s(cfg)
        topics.ensure_topics(admin, topic_specs(cfg), timeout_s=timeout_s)

        def open_log(topic: str, on_record: Callable[[LogRecord], None]) -> KafkaLog:
            return KafkaLog(topic, bootstrap, on_record, self.worker_id, client_settings=client_settings)

        self._config_log = open_log(cfg.config_storage_topic, self._on_config_record)
        self._status_log = open_log(cfg.status_storage_topic, self._on_status_record)
        self._offset_log = open_log(cfg.offset_storage_topic, self._on_offset_record)
        self._records_log = open_log(cfg.group_records_storage_topic, self._on_group_record)
        sync_s = cfg.worker_sync_timeout_ms / 1000
        started = time.monotonic()
        for klog in self._logs():
            klog.start(timeout_s)
        for klog in self._logs():
            if not klog.read_to_end(max(sync_s, timeout_s)):
                raise KafkaLogError(f"could not read internal topic '{klog.topic}' to its end")
        self._config_caught_up = True
        # Start-up cost grows with the topics (connectors, offsets); the line says how much of it was reading.
        log.info("internal topics read to their end", seconds=round(time.monotonic() - started, 3))

    def stop(self) -> None:
        """Close every log that was opened (shutting down: a failure is only logged)."""
        for klog in self._logs():
            try:
                klog.stop()
            except Exception as exc:  # pragma: no cover - shutting down
                log.warning("closing an internal log failed", error=str(exc))

    # ------------------------------------------------------------------------------------------ reads

    def snapshot(self) -> ClusterConfigSnapshot:
        """The config topic as read so far."""
        with self._lock:
            return self._config_fold.freeze().snapshot()

    def config_offset(self) -> int:
        """The offset the config topic has been read to (the next record's)."""
        return self.snapshot().offset

    def status_state(self) -> status_log.StatusState:
        """The status topic as read so far."""
        with self._lock:
            return self._status_fold.freeze()

    def offset_state(self) -> OffsetState:
        """The offsets topic as read so far (no read to its end: see :meth:`source_offsets`)."""
        with self._lock:
            return self._offset_fold.freeze()

    def group_state(self, group_id: str) -> group_records.GroupState | None:
        """A group as the group records describe it (every worker reads them)."""
        with self._lock:
            return self._group_records.groups.get(group_id)

    def read_config_to_end(self) -> None:
        """Catch up with the config topic (bounded by ``worker.sync.timeout.ms``)."""
        self._require(self._config_log).read_to_end(self.config.worker_sync_timeout_ms / 1000)

    def read_group_records_to_end(self) -> bool:
        """Catch up with the group records; False when they could not be read to their end in time."""
        records_log = self._require(self._records_log)
        return records_log.read_to_end(max(1.0, self.config.worker_sync_timeout_ms / 1000))

    def source_offsets(self) -> OffsetState:
        """The offsets topic read to its end: what ``GET /connectors/{name}/offsets`` answers for sources."""
        self._require(self._offset_log).read_to_end(self.config.worker_sync_timeout_ms / 1000)
        return self.offset_state()

    # ----------------------------------------------------------------------------------------- writes

    def append_config(self, *records: config_log.ConfigRecord) -> int:
        """Write config records in order; the offset of the last one (-1 when none was given)."""
        clog = self._require(self._config_log)
        offset = -1
        for record in records:
            key, value = config_log.encode(record)
            offset = clog.send(key, value)
        return offset

    def await_config(self, offset: int, timeout_s: float = 30.0) -> None:
        """Wait until the record written at ``offset`` is in our snapshot (its offset is the next one)."""
        deadline = time.monotonic() + timeout_s
        while self.config_offset() <= offset and time.monotonic() < deadline:
            time.sleep(0.01)

    def put_status(self, status: status_log.ConnectorStatus | status_log.TaskStatus) -> None:
        """Report a state without waiting for the write (Java's ``KafkaStatusBackingStore.put``); a status
        that cannot be written is logged, never raised into the herder, whose thread must keep polling the
        group while the status topic's leader is elected."""
        key, value = status_log.encode(status)
        what = str(status.task) if isinstance(status, status_log.TaskStatus) else status.connector
        try:
            self._require(self._status_log).send_async(key, value, f"{what} {status.state.value}")
        except KafkaLogError as exc:
            log.warning("could not write a status record", error=str(exc))
        if self.on_status_put is not None:
            self.on_status_put(status)

    def write_status(self, record: status_log.StatusRecord) -> None:
        """Write one status-topic record (any worker may, as in Java)."""
        key, value = status_log.encode(record)
        self._require(self._status_log).send(key, value)

    def reset_active_topics(self, connector: str) -> None:
        """Tombstone every active-topic record of ``connector`` (KIP-558) that the status topic shows."""
        for topic in self.status_state().topics(connector):
            self.write_status(status_log.TopicStatusDeletion(topic.topic, connector))

    def write_source_offsets(self, records: list[SourceOffset]) -> None:
        """Write offsets-topic records (tombstones for None offsets) and read them back."""
        olog = self._require(self._offset_log)
        for record in records:
            key, value = offset_log.encode(record)
            olog.send(key, value)
        olog.read_to_end(self.config.worker_sync_timeout_ms / 1000)

    def write_changed_group_records(
        self,
        records: Sequence[tuple[group_records.RecordKey, group_records.RecordValue | None]],
    ) -> int:
        """Write those of ``records`` whose value the topic does not hold already (a tombstone only for
        what exists); returns how many were written. Raises KafkaLogError when a write fails."""
        changed = group_records.changed_records(self.group_state(self.config.group_id), records)
        if changed:
            self.write_group_records(changed)
        return len(changed)

    def write_group_records(self, records: list[tuple[bytes, bytes | None]]) -> None:
        """Write records of this worker's group to the partition that holds the group's records."""
        records_log = self._require(self._records_log)
        partition = group_records.partition_for(self.config.group_id, records_log.partition_count)
        for key, value in records:
            records_log.send(key, value, partition=partition)

    # ------------------------------------------------------------------------- records (log threads)

    def _on_config_record(self, record: LogRecord) -> None:
        with self._lock:
            corrupt = self._config_fold.add_raw(record.key, record.value, record.offset)
        if corrupt is not None:
            log.warning(
                "skipping corrupt config record", topic=record.topic, offset=record.offset, error=str(corrupt)
            )
        elif self._config_caught_up and (record.key or b"").startswith(_LOGGER_CLUSTER_KEY):
            _apply_cluster_log_level(record)
        self._on_config_moved()

    def _on_status_record(self, record: LogRecord) -> None:
        try:
            decoded = status_log.decode(record.key, record.value)
        except status_log.CorruptRecord as exc:
            log.warning(
                "skipping corrupt status record", topic=record.topic, offset=record.offset, error=str(exc)
            )
            return
        if decoded is None:
            return
        with self._lock:
            self._status_fold.add(decoded)

    def _on_offset_record(self, record: LogRecord) -> None:
        try:
            decoded = offset_log.decode(record.key, record.value)
        except offset_log.CorruptRecord as exc:
            log.warning(
                "skipping corrupt offset record", topic=record.topic, offset=record.offset, error=str(exc)
            )
            return
        with self._lock:
            self._offset_fold.add(decoded)

    def _on_group_record(self, record: LogRecord) -> None:
        with self._lock:
            self._group_records = group_records.apply(
                self._group_records,
                record.key,
                record.value,
                offset=record.offset,
                timestamp_ms=record.timestamp_ms,
            )
        if self._on_group_moved is not None:
            self._on_group_moved()

    def _logs(self) -> list[KafkaLog]:
        return [
            klog
            for klog in (self._config_log, self._status_log, self._offset_log, self._records_log)
            if klog is not None
        ]

    @staticmethod
    def _require(klog: KafkaLog | None) -> KafkaLog:
        if klog is None:
            raise RuntimeError("worker not started")
        return klog


def put_status_safe(
    stores: InternalTopics, status: status_log.ConnectorStatus | status_log.TaskStatus
) -> bool:
    """Java's ``putSafe``: write ``status`` (not awaited) unless the status topic holds another worker's
    status of a newer generation for it (:meth:`status_log.StatusState.can_write_safely`); False, and
    nothing written, when that one stands. A stopped connector's or task's report and a task's RUNNING
    go through it: a rebalance may have moved the work and its new owner reported first."""
    if not stores.status_state().can_write_safely(status):
        return False
    stores.put_status(status)
    return True


def _apply_cluster_log_level(record: LogRecord) -> None:
    """A ``logger-cluster-<namespace>`` record: every worker sets the level when it reads it."""
    from kconnect.runtime.shell.log_levels import LEVELS

    try:
        decoded = config_log.decode(record.key, record.value)
    except config_log.CorruptRecord:
        return  # already reported by apply_raw
    if not isinstance(decoded, config_log.LoggerLevel):
        return
    try:
        changed = LEVELS.set(decoded.namespace, decoded.level)
    except ValueError as exc:
        log.warning("ignoring cluster log level", namespace=decoded.namespace, error=str(exc))
        return
    log.info("cluster log level applied", namespace=decoded.namespace, level=decoded.level, changed=changed)
