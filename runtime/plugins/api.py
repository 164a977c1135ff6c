"""The plugin API (connectors and tasks) and the registry that finds connector plugins.

The API mirrors Apache Kafka Connect's ``Connector`` / ``Task`` contracts so that connector authors,
the herder and the REST layer reason about the same lifecycle Java users know. Records are plain
dataclasses: tasks stay Kafka-free and the data plane converts them to and from Kafka records.

Plugins come from two places, as in Apache Kafka Connect: installed distributions that declare a
``kconnect.plugins`` entry point (Java's service-loader manifests), and ``plugin.path`` directories
whose Python modules and packages are imported and scanned (Java's isolated plugin directories).
"""

from __future__ import annotations

import abc
import enum
import importlib
import inspect
import json
import logging
import pkgutil
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import Any, ClassVar, Literal, Protocol, TypeVar, runtime_checkable

from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValue
from kconnect.runtime.plugins.plugin_metrics import PluginMetrics
from kconnect.runtime.plugins.plugin_versions import newest, not_found_message, requirement, version_key

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "kconnect.plugins"

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
    ``partition`` None lets the producer's partitioner choose.
    """

    source_partition: Mapping[str, Any] | None
    source_offset: Mapping[str, Any] | None
    topic: str
    partition: int | None = None
    key: Any = None
    value: Any = None
    headers: tuple[Header, ...] = ()
    timestamp: int | None = None


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
                f"{_qualified_name(type(self))}.config_def() must return a ConfigDef that is not None."
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
    at 0 with the query: do not use it as a durable name.
    """

    frame: Any
    key_schema: Any
    value_schema: Any
    offsets: Mapping[TopicPartition, tuple[int, int]]
    batch_id: int


class FrameSinkTask(SinkTask):
    """A sink task that takes each micro-batch whole, as a DataFrame, instead of row by row.

    Why: a Parquet or JDBC sink writes far faster, and on Spark's executors rather than the driver, when
    it hands the batch to Spark's own writers; collecting rows into ``SinkRecord`` objects only to turn
    them back into a frame would cost the distributed data plane its point. The runtime calls
    ``put_frame`` once per micro-batch, then ``pre_commit`` (default: ``flush`` and commit all consumed
    offsets), exactly as it calls ``put`` for other sink tasks.
    """

    def put(self, records: Sequence[SinkRecord]) -> None:
        """Refused: the runtime hands a frame sink task whole batches through ``put_frame``."""
        raise ConnectorError(f"{type(self).__name__} is a frame sink task: the runtime calls put_frame")

    @abc.abstractmethod
    def put_frame(self, batch: FrameBatch) -> int | None:
        """Write (or stage) the batch; return how many records it holds if known without another Spark
        job (for metrics), else None. Everything written must be durable by the next ``flush``."""


# --------------------------------------------------------------------------------------------------
# Registry


class PluginError(LookupError):
    """A connector class name that resolves to no plugin, or to more than one."""


class PluginNotFoundError(PluginError):
    """No plugin has this name; the message lists the available connectors, as Java's does."""

    pass


class PluginVersionError(PluginError):
    """A plugin is installed, but no version of it meets the requirement (``connector.version`` and the
    like, KIP-891); ``available`` lists the versions there are."""

    def __init__(self, message: str, available: Sequence[str]) -> None:
        super().__init__(message)
        self.available = list(available)


class AmbiguousPluginError(PluginError):
    """An alias several plugins share; ``candidates`` names them so the user can pick a full class name."""

    def __init__(self, message: str, candidates: Sequence[str]) -> None:
        super().__init__(message)
        self.candidates = list(candidates)


def connector_type(cls: type[Connector]) -> ConnectorType:
    """``source`` or ``sink``: the layer of keys the connector's config gets and how its tasks run."""
    if issubclass(cls, SourceConnector):
        return "source"
    if issubclass(cls, SinkConnector):
        return "sink"
    raise TypeError(f"{_qualified_name(cls)} is neither a SourceConnector nor a SinkConnector")


def _qualified_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def pruned_plugin_name(simple: str) -> str:
    """A name without its ``Connector`` suffix: the alias Java gives connector plugins."""
    suffix = "Connector"
    return simple[: -len(suffix)] if simple.endswith(suffix) and len(simple) > len(suffix) else simple


def _is_plugin_class(obj: object) -> bool:
    return (
        inspect.isclass(obj)
        and issubclass(obj, SourceConnector | SinkConnector)
        and not inspect.isabstract(obj)
    )


@dataclass(frozen=True)
class PluginDesc:
    """What the registry knows of one connector plugin."""

    cls: type[Connector]
    class_name: str
    type: ConnectorType
    version: str
    location: str

    @property
    def simple_name(self) -> str:
        """The class name without its module, which a config may name the plugin by."""
        return self.cls.__name__

    @property
    def alias(self) -> str:
        """The simple name without ``Connector``, the shortest name a config may use, as in Java."""
        return pruned_plugin_name(self.cls.__name__)

    def info(self) -> dict[str, str]:
        """The entry ``GET /connector-plugins`` lists for this plugin."""
        return {"class": self.class_name, "type": self.type, "version": self.version}

    def __str__(self) -> str:
        return f"{self.class_name} (type={self.type}, version={self.version}, location={self.location})"


@dataclass
class PluginRegistry:
    """Connector plugins by name; resolves names the way Apache Kafka Connect's ``Plugins`` does.

    A name resolves, in order, as a fully qualified class name (or a declared ``class_aliases`` entry,
    such as a Java class name), then as a simple class name or alias (simple name without the
    ``Connector`` suffix). An alias shared by several plugins is an error that lists them, since
    guessing would silently run the wrong connector.
    """

    #: Class name -> version -> plugin: KIP-891 lets one class be installed in several versions.
    _plugins: dict[str, dict[str, PluginDesc]] = field(default_factory=dict)
    #: Problems met while loading plugins; loading goes on past them, as Java's scanning does.
    load_errors: list[str] = field(default_factory=list)

    @classmethod
    def discover(
        cls,
        plugin_path: Iterable[str | Path] = (),
        *,
        entry_point_group: str | None = ENTRY_POINT_GROUP,
    ) -> PluginRegistry:
        """A registry of the installed plugins (entry points) and those in ``plugin_path``: what a worker
        loads at start-up."""
        registry = cls()
        if entry_point_group:
            registry.load_entry_points(entry_point_group)
        for directory in plugin_path:
            registry.load_path(directory)
        return registry

    # ---- registration

    def register(
        self, plugin: type[Connector], location: str = "classpath", version: str | None = None
    ) -> PluginDesc:
        """Add one connector class at one version: ``version`` (its distribution's, when it comes from
        one) or else what its ``version()`` says. Another version of a class already known is added
        beside it (KIP-891); a second class of the same name and version is ignored and reported, as
        Java keeps the first."""
        if not _is_plugin_class(plugin):
            raise TypeError(f"{plugin!r} is not a concrete SourceConnector or SinkConnector subclass")
        name = _qualified_name(plugin)
        if version is None:
            try:
                version = str(plugin().version())
            except Exception as exc:  # a plugin's own bug must not take the registry down
                version = "undefined"
                self.load_errors.append(f"{name}: version() failed: {exc!r}")
        versions = self._plugins.setdefault(name, {})
        existing = versions.get(version)
        if existing is not None:
            if existing.cls is not plugin:
                self.load_errors.append(
                    f"{name} {version} from {location} ignored: a different class of that name and "
                    f"version was loaded from {existing.location}"
                )
            return existing
        desc = PluginDesc(plugin, name, connector_type(plugin), version, location)
        versions[version] = desc
        return desc

    def load_entry_points(self, group: str = ENTRY_POINT_GROUP) -> None:
        """Register the connectors installed packages declare; a broken one is reported and the rest
        still load."""
        for ep in entry_points(group=group):
            try:
                obj = ep.load()
            except Exception as exc:
                self.load_errors.append(f"entry point {ep.name} = {ep.value}: {exc!r}")
                log.warning(
                    "could not load connector plugin entry point %s = %s", ep.name, ep.value, exc_info=True
                )
                continue
            if not _is_plugin_class(obj):
                self.load_errors.append(f"entry point {ep.name} = {ep.value} is not a connector class")
                continue
            # KIP-891 for Python: a plugin's version is its distribution's.
            self.register(obj, f"entry-point:{ep.name}", ep.dist.version if ep.dist is not None else None)

    def load_path(self, path: str | Path) -> None:
        """Import the modules and packages in one ``plugin.path`` entry and register their connectors.

        The directory goes onto ``sys.path`` so plugins import under their natural names (which is
        what users then write in ``connector.class``) and packages can use relative imports. Python
        has no class-loader isolation: plugins share the worker's modules, so a plugin module must
        have a name no other module uses.
        """
        directory = Path(path).expanduser().resolve()
        if directory.is_file() and directory.suffix == ".py":
            self._load_modules(directory.parent, [directory.stem])
            return
        if not directory.is_dir():
            self.load_errors.append(f"plugin path {path} is not a directory; ignored")
            return
        if _is_installation(directory):
            self._load_installation(directory)
            return
        names = []
        for child in sorted(directory.iterdir()):
            if child.name.startswith((".", "_")):
                continue
            if child.is_dir() and _is_installation(child):
                self._load_installation(child)
                continue
            if (child.is_file() and child.suffix == ".py") or (
                child.is_dir() and (child / "__init__.py").is_file()
            ):
                names.append(child.stem)
        self._load_modules(directory, names)

    def _load_modules(self, directory: Path, names: list[str]) -> None:
        # Appended, never prepended: a plugin file must not shadow a module the worker itself imports
        # later. A plugin whose name is already taken elsewhere is reported below instead.
        if str(directory) not in sys.path:
            sys.path.append(str(directory))
        for name in names:
            try:
                module = importlib.import_module(name)
            except Exception as exc:
                self.load_errors.append(f"{directory}/{name}: import failed: {exc!r}")
                log.warning("could not import plugin module %s from %s", name, directory, exc_info=True)
                continue
            origin = getattr(module, "__file__", None)
            if origin is None or directory not in Path(origin).resolve().parents:
                taken_by = origin or "a built-in module"
                self.load_errors.append(
                    f"{directory}/{name}: the name {name!r} is already taken by {taken_by}"
                )
                continue
            for mod in self._walk(module):
                for obj in vars(mod).values():
                    # Only classes defined here: a module that imports another plugin must not re-register it.
                    if _is_plugin_class(obj) and obj.__module__ == mod.__name__:
                        self.register(obj, str(directory))

    def _load_installation(self, directory: Path) -> None:
        """Register the connectors of the distributions installed in one directory (``pip install
        --target``), each at its distribution's version, so that several versions of one plugin can sit
        side by side in ``plugin.path`` (KIP-891), each in a directory of its own.

        Python has one module per name in a process, where Java gives each plugin directory a class
        loader: all of a directory's modules are imported while it is on the path; the first directory to
        bring a module name keeps it in ``sys.modules``; a later one (another version) is imported with the
        earlier modules set aside and then set aside itself, so its classes keep the modules they were
        defined with. A plugin loaded that way must import what it needs when its modules load, not later
        inside functions (such an import finds the first version's module).
        """
        from importlib.metadata import distributions

        found = [
            (dist, ep)
            for dist in distributions(path=[str(directory)])
            for ep in dist.entry_points
            if ep.group == ENTRY_POINT_GROUP
        ]
        if not found:
            self.load_errors.append(f"{directory}: no {ENTRY_POINT_GROUP} entry point in its distributions")
            return
        roots = {ep.module.split(".")[0] for _, ep in found}

        def ours(module_name: str) -> bool:
            return module_name.split(".")[0] in roots

        earlier = {name: module for name, module in sys.modules.items() if ours(name)}
        for name in earlier:
            del sys.modules[name]
        sys.path.insert(0, str(directory))
        importlib.invalidate_caches()
        try:
            for dist, ep in found:
                try:
                    obj = ep.load()
                except Exception as exc:
                    self.load_errors.append(f"{directory}: entry point {ep.name} = {ep.value}: {exc!r}")
                    log.warning(
                        "could not load connector plugin %s from %s", ep.value, directory, exc_info=True
                    )
                    continue
                if not _is_plugin_class(obj):
                    self.load_errors.append(f"{directory}: entry point {ep.name} is not a connector class")
                    continue
                self.register(obj, str(directory), dist.version)
            for root in sorted(roots):  # every module now, while the directory is on the path
                module = sys.modules.get(root)
                if module is not None:
                    self._walk(module)
        finally:
            # Off the path again, so its distributions are not taken for installed ones (entry points).
            sys.path.remove(str(directory))
            if earlier:  # another version came first: it keeps the names
                for name in [n for n in sys.modules if ours(n)]:
                    del sys.modules[name]
                sys.modules.update(earlier)

    def _walk(self, module: ModuleType) -> list[ModuleType]:
        modules = [module]
        search = getattr(module, "__path__", None)
        if search is None:
            return modules
        for info in pkgutil.walk_packages(search, prefix=module.__name__ + "."):
            try:
                modules.append(importlib.import_module(info.name))
            except Exception as exc:
                self.load_errors.append(f"{info.name}: import failed: {exc!r}")
        return modules

    # ---- lookup

    def plugins(self) -> list[PluginDesc]:
        """Every connector plugin at every version, sorted by class name (as Java lists them), then by
        version."""
        descs = [d for versions in self._plugins.values() for d in versions.values()]
        return sorted(descs, key=lambda d: (d.class_name, version_key(d.version)))

    def plugin_info(self) -> list[dict[str, str]]:
        """The ``GET /connector-plugins`` entries of every connector plugin."""
        return [d.info() for d in self.plugins()]

    def connector_class(self, name: str, version: str | None = None) -> type[Connector]:
        """The class a name (and ``connector.version``) resolves to (see ``find``)."""
        return self.find(name, version).cls

    def find(self, name: str, version: str | None = None) -> PluginDesc:
        """The plugin a ``connector.class`` value names, at the newest version ``version`` (a
        ``connector.version`` value: a version, a range, ``latest`` or None) allows.

        Raises PluginNotFoundError or AmbiguousPluginError with Java's messages, PluginVersionError when
        no installed version meets the requirement, InvalidVersionSpec when it is no version range.
        """
        versions = self._versions_of(name)
        wanted = requirement(version)
        chosen = newest(versions, wanted)
        if chosen is None:
            assert wanted is not None  # some version is installed, so only a requirement can miss
            desc = next(iter(versions.values()))
            available = sorted(versions, key=version_key)
            raise PluginVersionError(not_found_message(desc.class_name, wanted, available), available)
        return versions[chosen]

    def versions(self, name: str) -> list[str]:
        """The installed versions of the plugin a name resolves to, oldest first."""
        return sorted(self._versions_of(name), key=version_key)

    def _versions_of(self, name: str) -> dict[str, PluginDesc]:
        exact = self._plugins.get(name)
        if exact is not None:
            return exact
        declared = [v for v in self._plugins.values() if name in _any(v).cls.class_aliases]
        if not declared:
            declared = [v for v in self._plugins.values() if name in (_any(v).simple_name, _any(v).alias)]
        if len(declared) == 1:
            return declared[0]
        if declared:
            candidates = sorted(_any(v).class_name for v in declared)
            raise AmbiguousPluginError(
                f"More than one connector matches alias {name}. Please use full package and class name "
                f"instead. Classes found: {', '.join(candidates)}",
                candidates,
            )
        available = ", ".join(str(d) for d in self.plugins()) or "(none)"
        raise PluginNotFoundError(
            f"Failed to find any class that implements Connector and which name matches {name}, "
            f"available connectors are: {available}"
        )

    def new_connector(self, name: str, version: str | None = None) -> Connector:
        """A fresh instance of the connector a name (and ``connector.version``) resolves to."""
        return self.connector_class(name, version)()

    def __contains__(self, name: object) -> bool:
        if not isinstance(name, str):
            return False
        try:
            self.find(name)
        except PluginError:
            return False
        return True


def _any(versions: Mapping[str, PluginDesc]) -> PluginDesc:
    """One version of a class: they share every name the class is known by."""
    return next(iter(versions.values()))


def _is_installation(directory: Path) -> bool:
    """A directory that distributions were installed into (``pip install --target``)."""
    return any(child.suffix == ".dist-info" and child.is_dir() for child in directory.iterdir())
