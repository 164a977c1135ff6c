"""The plugin API: connectors, tasks, the records they exchange and the contexts the runtime hands them.

The API mirrors Apache Kafka Connect's ``Connector`` / ``Task`` contracts so that connector authors,
the herder and the REST layer reason about the same lifecycle Java users know. Records are plain
dataclasses: tasks stay Kafka-free and the data plane converts them to and from Kafka records. How the
worker finds plugins is :mod:`registry`'s business.
"""

from __future__ import annotations

import abc
import enum
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Literal, Protocol, TypeVar, runtime_checkable

from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValue
from kconnect.runtime.plugins.plugin_metrics import PluginMetrics

ConnectorType = Literal["source", "sink"]


# --------------------------------------------------------------------------------------------------
# Records


@dataclass(frozen=True, slots=True)
class TopicPartition:
    """One partition of a topic: the key sink tasks commit offsets and get assignments by, as in Java."""

    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"


@dataclass(frozen=True, slots=True)
class Header:
    """One record header; a record may repeat a key, as Kafka's headers may, so headers are a sequence."""

    key: str
    value: Any


_Record = TypeVar("_Record", "SourceRecord", "SinkRecord")


@dataclass(frozen=True)
class SourceRecord:
    """A record a source task produced, with the source position it came from.

    ``source_partition`` and ``source_offset`` are JSON-like maps that the runtime stores in the
    offsets topic (keyed ``[connector, partition]``) so a restarted task can resume where it stopped.
    ``partition`` None lets the producer's partitioner choose. ``key_schema`` / ``value_schema`` are
    Connect schemas (``runtime/dataplane/connect_data.ConnectSchema``), as Java's ``keySchema`` /
    ``valueSchema``: a converter with schemas writes them with the data; None infers one from a primitive
    Python value (a dict or list then goes schemaless).
    """

    source_partition: Mapping[str, Any] | None
    source_offset: Mapping[str, Any] | None
    topic: str
    partition: int | None = None
    key: Any = None
    value: Any = None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None
    #: The Connect schemas of key and value (``connect_data.ConnectSchema``), as Java's SourceRecord has;
    #: None infers one from a primitive value. The Schema Registry converters need one for a struct.
    key_schema: Any = None
    value_schema: Any = None


@dataclass(frozen=True)
class SinkRecord:
    """A record consumed from Kafka and handed to a sink task, with its position in the topic."""

    topic: str
    partition: int
    offset: int
    key: Any = None
    value: Any = None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None

    @property
    def topic_partition(self) -> TopicPartition:
        """The partition the record came from, the key of ``flush`` and ``pre_commit`` offsets."""
        return TopicPartition(self.topic, self.partition)


def frozen_record(cls: type[_Record], fields: dict[str, Any]) -> _Record:
    """An instance of ``SourceRecord`` or ``SinkRecord`` from a dict of every one of its fields,
    without the generated ``__init__``, which sets a frozen dataclass's fields one ``object.__setattr__``
    at a time: about a microsecond per record, paid for every record the runtime or a built-in
    connector makes. The instance is the same as the constructor's (equal, hashable alike, still frozen).
    """
    record = object.__new__(cls)
    object.__setattr__(record, "__dict__", fields)
    return record


# --------------------------------------------------------------------------------------------------
# Contexts the runtime hands to plugins


class ConnectorContext(Protocol):
    """How a running connector talks back to the herder."""

    def request_task_reconfiguration(self) -> None:
        """Ask the herder to call ``task_configs`` again, because the connector's inputs changed."""

    def raise_error(self, exc: BaseException) -> None:
        """Report an unrecoverable error from a connector's own background thread; fails the connector."""

    def plugin_metrics(self) -> PluginMetrics:
        """Where the connector registers metrics of its own (KIP-877), tagged with its name; closed when
        the connector stops (``runtime/plugins/plugin_metrics.py``)."""


class OffsetStorageReader(Protocol):
    """Read access to the committed source offsets of the task's connector."""

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The committed offset of one source partition, or None if nothing was committed for it."""

    def offsets(
        self, partitions: Iterable[Mapping[str, Any]]
    ) -> list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
        """Several partitions' committed offsets at once, each paired with its partition."""


class TransactionContext(Protocol):
    """How a source task defines its own transactions (KIP-618's ``TransactionContext``), handed out only
    when the worker runs exactly-once sources and the connector has ``transaction.boundary=connector``.

    Requests take effect when the runtime dispatches the task's records, not when they are made: one naming
    a record ends the transaction right after that record is sent (the record is its last); one without a
    record ends it after the whole batch ``poll`` returned has been sent, and is checked after every poll,
    empty ones too. An abort discards every record of the transaction (a ``read_committed`` reader never
    sees them) but still commits their source offsets, so the task is not handed the same input again.
    Records are matched by identity: name the very object ``poll`` returns. Asking for both a commit and an
    abort of the same record, or of the same batch, fails the task, since either choice could lose data.
    """

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit the open transaction after ``record`` is sent, or after the current batch when None."""

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort the open transaction after ``record`` is sent, or after the current batch when None."""


class SourceTaskContext(Protocol):
    """What the runtime gives a source task: its config and where it resumes from after a restart."""

    def configs(self) -> Mapping[str, str]:
        """The task's config, as its connector's ``task_configs`` produced it."""

    @property
    def offset_storage_reader(self) -> OffsetStorageReader:
        """The committed offsets of the connector's source partitions, to resume from."""

    def plugin_metrics(self) -> PluginMetrics:
        """Where the task registers metrics of its own (KIP-877), tagged with its connector and task;
        closed when the task stops."""

    def transaction_context(self) -> TransactionContext | None:
        """Where the task ends its own transactions; None unless the worker has exactly-once source
        support enabled and the connector's ``transaction.boundary`` is ``connector`` (Java's rule)."""


class SinkTaskContext(Protocol):
    """What the runtime gives a sink task: its config, its partitions and control over consumption."""

    def configs(self) -> Mapping[str, str]:
        """The task's config, as its connector's ``task_configs`` produced it."""

    def assignment(self) -> set[TopicPartition]:
        """The partitions this task consumes now; changes with rebalances (see ``open``/``close``)."""

    def offset(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Rewind or skip ahead: the consumer resumes these partitions at these offsets."""

    def timeout(self, timeout_ms: int) -> None:
        """After a retriable failure in ``put``, retry the same batch after this long."""

    def pause(self, *partitions: TopicPartition) -> None:
        """Stop fetching these partitions (for back-pressure) until ``resume``; the assignment is kept."""

    def resume(self, *partitions: TopicPartition) -> None:
        """Fetch these paused partitions again."""

    def request_commit(self) -> None:
        """Ask for an offset commit as soon as possible rather than at the next commit interval."""

    def plugin_metrics(self) -> PluginMetrics:
        """Where the task registers metrics of its own (KIP-877), tagged with its connector and task;
        closed when the task stops."""


@runtime_checkable
class Monitorable(Protocol):
    """A converter that registers metrics of its own (Java's ``Monitorable``, KIP-877): the runtime calls
    ``with_plugin_metrics`` once, after configuring it, and closes those metrics when the task stops."""

    def with_plugin_metrics(self, metrics: PluginMetrics) -> None:
        """Register the plugin's metrics on ``metrics``."""


def _partition_key(partition: Mapping[str, Any]) -> str:
    return json.dumps(partition, sort_keys=True, separators=(",", ":"))


class InMemoryOffsetStorageReader:
    """Offsets held in a dict: what tests, standalone runs and the offsets-topic reader build on.

    Source partitions are maps (unhashable), so they are keyed by their canonical JSON, which is also
    how they are compared once they have been through the offsets topic.
    """

    def __init__(self, offsets: Iterable[tuple[Mapping[str, Any], Mapping[str, Any] | None]] = ()) -> None:
        self._offsets: dict[str, Mapping[str, Any] | None] = {}
        for partition, offset in offsets:
            self.put(partition, offset)

    def put(self, partition: Mapping[str, Any], offset: Mapping[str, Any] | None) -> None:
        """Record one partition's offset (None forgets it), as a commit to the offsets topic would."""
        self._offsets[_partition_key(partition)] = offset

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        """The offset held for this partition, or None."""
        return self._offsets.get(_partition_key(partition))

    def offsets(
        self, partitions: Iterable[Mapping[str, Any]]
    ) -> list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
        """The offsets held for these partitions, each paired with its partition."""
        return [(p, self.offset(p)) for p in partitions]


# --------------------------------------------------------------------------------------------------
# Connectors


class ConnectorError(RuntimeError):
    """A connector or task cannot go on (Java's ConnectException)."""


class RetriableError(ConnectorError):
    """Java's RetriableException: an operation that may succeed if tried again. A sink task's ``put`` that
    raises it gets the same records again, after ``SinkTaskContext.timeout`` if the task set one."""


class ExactlyOnceSupport(enum.Enum):
    """A source connector's answer to exactly-once preflight validation (KIP-618), with Java's names."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class ConnectorTransactionBoundaries(enum.Enum):
    """Whether a source connector can define its own transaction boundaries (KIP-618), with Java's names."""

    SUPPORTED = "SUPPORTED"
    UNSUPPORTED = "UNSUPPORTED"


class Connector(abc.ABC):
    """A connector instance: turns one connector config into task configs, and watches its input.

    The herder creates it with no arguments, calls ``initialize`` then ``start``, asks for
    ``task_configs`` whenever it (re)computes the tasks, and calls ``stop`` before discarding it.
    """

    #: Further names the registry resolves to this class, matched like a fully qualified name: for
    #: example the Java class name a connector re-implements, so existing configs keep working.
    class_aliases: ClassVar[tuple[str, ...]] = ()

    _context: ConnectorContext | None = None

    def initialize(self, context: ConnectorContext) -> None:
        """Called by the herder before ``start``: gives the connector its way back to the herder."""
        self._context = context

    @property
    def context(self) -> ConnectorContext:
        """The context ``initialize`` gave; using it earlier is a plugin bug, reported clearly."""
        if self._context is None:
            raise ConnectorError(f"{type(self).__name__} has not been initialized with a ConnectorContext")
        return self._context

    @abc.abstractmethod
    def version(self) -> str:
        """The plugin's version, as ``GET /connector-plugins`` lists it."""

    @abc.abstractmethod
    def config_def(self) -> ConfigDef:
        """The connector's own keys; the runtime adds the common ones (name, tasks.max, ...)."""

    @abc.abstractmethod
    def start(self, props: dict[str, str]) -> None:
        """Begin with this config (already validated): open clients, start watching the input."""

    @abc.abstractmethod
    def task_class(self) -> type[Task]:
        """The Task class the data plane instantiates for each of ``task_configs``."""

    @abc.abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """At most ``max_tasks`` configs, one per task to run."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Release what ``start`` acquired; the herder discards the instance afterwards."""

    def reconfigure(self, props: dict[str, str]) -> None:
        """Apply a new config; restarting is always correct, connectors may do better."""
        self.stop()
        self.start(props)

    def validate(self, props: Mapping[str, str | None]) -> list[ConfigValue]:
        """Per-key outcomes for the validate endpoint; override for checks that span several keys."""
        config_def = self.config_def()
        if config_def is None:
            raise ConnectorError(
                f"{type(self).__module__}.{type(self).__qualname__}.config_def() must return a ConfigDef "
                "that is not None."
            )
        return config_def.validate(props)


class SourceConnector(Connector):
    """A connector that reads from an external system into Kafka; its tasks are SourceTasks."""

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport | None:
        """Whether this config can give exactly-once delivery; None means the connector cannot tell."""
        return None

    def can_define_transaction_boundaries(self, props: Mapping[str, str]) -> ConnectorTransactionBoundaries:
        """Whether ``transaction.boundary=connector`` can work with this config; Java's default is no."""
        return ConnectorTransactionBoundaries.UNSUPPORTED

    def alter_offsets(
        self, props: Mapping[str, str], offsets: Sequence[tuple[Mapping[str, Any], Mapping[str, Any] | None]]
    ) -> bool:
        """Check (and act on) an external request to change committed offsets.

        ``offsets`` pairs each source partition with its new offset, or None to reset it. Return True
        if the connector accepts them, False if it does not support altering offsets at all; raise
        ConnectorError for offsets it rejects.
        """
        return False


class SinkConnector(Connector):
    """A connector that writes Kafka topics to an external system; its tasks are SinkTasks."""

    TOPICS_CONFIG: ClassVar[str] = "topics"

    def alter_offsets(self, props: Mapping[str, str], offsets: Mapping[TopicPartition, int | None]) -> bool:
        """As for sources; consumer offsets are managed by the runtime, so accepting is usually enough."""
        return False


# --------------------------------------------------------------------------------------------------
# Tasks


class Task(abc.ABC):
    """One unit of a connector's work, run by the data plane with a config from ``task_configs``."""

    @abc.abstractmethod
    def version(self) -> str:
        """The task's version, which is usually its connector's."""

    @abc.abstractmethod
    def start(self, props: dict[str, str]) -> None:
        """Begin with one of the connector's ``task_configs``; called once, before any ``poll``/``put``."""

    @abc.abstractmethod
    def stop(self) -> None:
        """Called from another thread than ``poll``/``put``: it must make them return promptly."""


class SourceTask(Task):
    """A task that polls an external system for records; the runtime produces them to Kafka and commits
    their source offsets, so the task itself never talks to Kafka."""

    context: SourceTaskContext | None = None

    def initialize(self, context: SourceTaskContext) -> None:
        """Called by the runtime before ``start``: gives the task its offsets to resume from."""
        self.context = context

    @abc.abstractmethod
    def poll(self) -> list[SourceRecord] | None:
        """New records, or None when there are none for now; may block briefly but not indefinitely."""

    def commit(self) -> None:
        """The offsets of all records returned so far have been committed."""

    def commit_record(self, record: SourceRecord, metadata: Any) -> None:
        """``record`` was written to Kafka (``metadata`` None when a transform dropped it)."""


class SinkTask(Task):
    """A task that receives consumed records (``put``) and makes them durable (``flush``), so the runtime
    can commit their consumer offsets."""

    context: SinkTaskContext | None = None

    def initialize(self, context: SinkTaskContext) -> None:
        """Called by the runtime before ``start``: gives the task its assignment and consumption controls."""
        self.context = context

    @abc.abstractmethod
    def put(self, records: Sequence[SinkRecord]) -> None:
        """Deliver (or buffer) records; everything passed in must be durable by the next ``flush``."""

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        """Make everything ``put`` so far durable; the runtime then commits these consumer offsets.

        A no-op by default, as in Java, for tasks whose ``put`` writes synchronously.
        """

    def pre_commit(self, current_offsets: Mapping[TopicPartition, int]) -> Mapping[TopicPartition, int]:
        """The offsets safe to commit; by default flush and commit everything consumed."""
        self.flush(current_offsets)
        return current_offsets

    def open(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions newly assigned to this task."""

    def close(self, partitions: Iterable[TopicPartition]) -> None:
        """Partitions taken away from this task; release what was held for them."""


@dataclass(frozen=True)
class FrameBatch:
    """One sink micro-batch as a Spark DataFrame, for tasks that write with Spark itself.

    ``frame`` has the columns ``topic, partition, offset, timestamp, key, value, headers`` with key and
    value already converted and transformed: Spark typed columns per their Connect schemas (a struct for
    JSON with schemas, string for StringConverter, binary for ByteArrayConverter) or JSON text for
    schemaless JSON (``key_schema`` / ``value_schema`` None then). Failed rows are not in it (the
    ``errors.*`` policy handled them). ``offsets`` holds, per consumed partition, the first and last offset
    the batch read, including records a transform dropped: what a task that names its output by offsets
    (Parquet) needs to be idempotent across restarts. ``batch_id`` is the streaming query's, which restarts
    at 0 with the query: do not use it as a durable name. ``oldest_ms``: the lowest record timestamp the
    batch read (ms since the epoch; None: none known), so that a task committing by time can count a
    record's wait from when it was produced rather than from when its batch was read. ``read_ms``: when
    the batch's end offsets were fixed, about (ms since the epoch; None: not known): a record produced
    later is in a later batch, so a task can tell a backlog's records (produced before the last batch it
    committed was read) from records that have only just arrived.
    """

    frame: Any
    key_schema: Any
    value_schema: Any
    offsets: Mapping[TopicPartition, tuple[int, int]]
    batch_id: int
    oldest_ms: int | None = None
    read_ms: int | None = None


class FrameSinkTask(SinkTask):
    """A sink task that takes each micro-batch whole, as a DataFrame, instead of row by row.

    Why: a Parquet or JDBC sink writes far faster, and on Spark's executors rather than the driver, when
    it hands the batch to Spark's own writers; collecting rows into ``SinkRecord`` objects only to turn
    them back into a frame would cost the distributed data plane its point. The runtime calls
    ``put_frame`` once per micro-batch, then ``pre_commit`` (default: ``flush`` and commit all consumed
    offsets), exactly as it calls ``put`` for other sink tasks.
    """

    #: Whether the runtime may merge a micro-batch's reads of many Kafka partitions into as many Spark
    #: tasks as the session has cores (``coalesce``, no shuffle) before converting it. Why: a batch is
    #: read as one Spark task per Kafka partition, and every job over it (positions, schema sampling,
    #: conversion, the task's own) runs that many tasks; for a task reading 50 partitions of a few records
    #: each (a trickle over 50 topics routed to tables) those tasks' overhead, not the records, was most of
    #: each batch's seconds. Off by default: a task whose output files follow the batch's partitions
    #: keeps them.
    COALESCE_READS: ClassVar[bool] = False

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Refused: the runtime hands a frame sink task whole batches through ``put_frame``."""
        raise ConnectorError(f"{type(self).__name__} is a frame sink task: the runtime calls put_frame")

    @abc.abstractmethod
    def put_frame(self, batch: FrameBatch) -> int | None:
        """Write (or stage) the batch; return how many records it holds if known without another Spark
        job (for metrics), else None. Everything written must be durable by the next ``flush``."""


def connector_type(cls: type[Connector]) -> ConnectorType:
    """``source`` or ``sink``: the layer of keys the connector's config gets and how its tasks run."""
    if issubclass(cls, SourceConnector):
        return "source"
    if issubclass(cls, SinkConnector):
        return "sink"
    raise TypeError(f"{cls.__module__}.{cls.__qualname__} is neither a SourceConnector nor a SinkConnector")
