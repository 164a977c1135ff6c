"""The worker's configuration keys: one :class:`Definition` row per key, and the reference made from them.

One table drives parsing, defaults, validation, the error messages and the documentation
(:func:`reference_markdown`, written to config/PROPERTIES.md). Adding a key means adding one row here and
one field to :class:`~kconnect.config.worker.WorkerConfig`, and the documentation cannot drift from the
parser. Keys, types and defaults follow Apache Kafka Connect 3.9's distributed worker wherever a key
exists there; keys that are kconnect's own are marked as such in the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from .classes import CONVERTERS, HEADER_CONVERTERS, OVERRIDE_POLICIES
from .errors import ConfigError
from .listeners import ListenerList
from .values import (
    INT16_MAX,
    INT32_MAX,
    INT64_MAX,
    TYPE_ALLOWED,
    Choice,
    ClassAlias,
    ConfigType,
    HeaderRules,
    HostPortList,
    IntRange,
    MacAlgorithm,
    MacAlgorithmList,
    NonEmpty,
    NonEmptyItems,
    PositiveOrBrokerDefault,
    Rejected,
    TaskIdList,
    TopicName,
    Validator,
    parse_type,
)


class Importance(StrEnum):
    """Apache ConfigDef's importance of a key, shown in the reference so the table reads like Apache's."""

    HIGH = "high"
    MEDIUM = "medium"
    LOW = "low"


class ConnectProtocol(StrEnum):
    """``connect.protocol``: which embedded-protocol versions this worker offers to the group."""

    EAGER = "eager"
    COMPATIBLE = "compatible"
    SESSIONED = "sessioned"
    STATIC = "static"


class GroupProtocol(StrEnum):
    """``group.protocol`` (the KIP-848 seed's name): how configuration changes reach the group's workers.

    ``classic``: every change of the work set is a JoinGroup/SyncGroup round, as in Apache Kafka Connect.
    ``connect``: the leader reconciles changes through the group records with no round
    (``runtime/group/coordinator``); rounds happen only when membership changes.
    """

    CLASSIC = "classic"
    CONNECT = "connect"


class ExactlyOnceSourceSupport(StrEnum):
    """``exactly.once.source.support``: KIP-618's rollout steps (preparing on every worker, then enabled)."""

    DISABLED = "disabled"
    PREPARING = "preparing"
    ENABLED = "enabled"


class SinkTaskPlacement(StrEnum):
    """``sink.task.placement``: how a sink task reads (``auto``: a consumer loop on the worker with a local
    master, a Structured Streaming query with a cluster master; see ``dataplane.sink_loop``)."""

    AUTO = "auto"
    WORKER = "worker"
    QUERY = "query"


class SourceTaskPlacement(StrEnum):
    """``source.task.placement``: where a source task's poll loop runs (``auto``: on an executor when
    ``spark.master`` is a cluster, on the worker with a local master)."""

    AUTO = "auto"
    WORKER = "worker"
    EXECUTOR = "executor"


@dataclass(frozen=True)
class Definition:
    """One worker configuration key: how to parse it, its default, and what the README says about it.

    ``default`` is written as it would appear in a properties file and goes through the same parsing
    as a user's value, so a default can never be something a user could not have typed. ``None`` means
    the key is optional with no value; ``required`` keys have no default at all.
    """

    key: str
    type: ConfigType
    default: str | None
    documentation: str
    validator: Validator | None = None
    importance: Importance = Importance.LOW
    required: bool = False
    kconnect: bool = False
    default_text: str | None = None

    @property
    def attribute(self) -> str:
        """The WorkerConfig field holding the parsed value."""
        return self.key.replace(".", "_")

    @property
    def allowed(self) -> str:
        """What a value must be: the same phrase for the error message and the reference table."""
        return self.validator.allowed if self.validator is not None else TYPE_ALLOWED[self.type]

    def parse(self, raw: str) -> Any:
        """Parse and validate one raw value, raising ConfigError that names this key and the value."""
        try:
            value = parse_type(self.type, raw)
            return value if self.validator is None else self.validator(value)
        except Rejected as rejected:
            detail = f"; {rejected.detail}" if rejected.detail else ""
            raise ConfigError(self.key, raw, f"must be {self.allowed}{detail}") from None


_H, _M = Importance.HIGH, Importance.MEDIUM
# The group-records topic default is derived rather than fixed so that two Connect clusters sharing a
# Kafka cluster, which must differ in group.id anyway, never share group records by accident.
GROUP_RECORDS_TOPIC_SUFFIX = "-group-records"
_POSITIVE_INT = IntRange(1, INT32_MAX)
_NON_NEGATIVE_INT = IntRange(0, INT32_MAX)
_NON_NEGATIVE_LONG = IntRange(0, INT64_MAX)
_POSITIVE_LONG = IntRange(1, INT64_MAX)
_PARTITIONS = PositiveOrBrokerDefault(INT32_MAX)
_REPLICATION = PositiveOrBrokerDefault(INT16_MAX)


def _storage(
    name: str,
    what: str,
    *,
    partitions: str | None,
    kconnect: bool = False,
    default_topic: str | None = None,
    replication_from: str | None = None,
) -> list[Definition]:
    """The topic / partitions / replication.factor triple that each internal store has.

    ``replication_from`` names another key whose value is this store's replication factor when it is
    unset (the parser applies it): a store that Apache Kafka Connect does not have must not demand a
    factor that a properties file written for Connect never mentions.
    """
    prefix = f"{name}.storage."
    rows = [
        Definition(
            f"{prefix}topic",
            ConfigType.STRING,
            None,
            f"Name of the compacted topic holding {what}.",
            TopicName(),
            _H,
            required=default_topic is None,
            kconnect=kconnect,
            default_text=default_topic,
        ),
        Definition(
            f"{prefix}replication.factor",
            ConfigType.SHORT,
            "3" if replication_from is None else None,
            f"Replication factor used when the worker creates the topic holding {what}."
            + (
                ""
                if replication_from is None
                else f" Unset: the value of {replication_from} (whose default is 3), so a properties file "
                "written for Apache Kafka Connect on a one-broker cluster, with the three internal topics "
                "at factor 1, also starts this fourth topic at 1."
            ),
            _REPLICATION,
            kconnect=kconnect,
            default_text=replication_from,
        ),
    ]
    if partitions is not None:
        rows.append(
            Definition(
                f"{prefix}partitions",
                ConfigType.INT,
                partitions,
                f"Number of partitions used when the worker creates the topic holding {what}.",
                _PARTITIONS,
                kconnect=kconnect,
            )
        )
    return rows


DEFINITIONS: tuple[Definition, ...] = (
    # Kafka cluster and group membership
    Definition(
        "bootstrap.servers",
        ConfigType.LIST,
        "localhost:9092",
        "host:port pairs used for the first connection to the Kafka cluster; the rest of the cluster is "
        "discovered from them, so a few are enough.",
        HostPortList(),
        _H,
    ),
    Definition(
        "group.id",
        ConfigType.STRING,
        None,
        "Names the Connect cluster: workers with the same group.id form one cluster. It must not clash "
        "with any consumer group.",
        NonEmpty(),
        _H,
        required=True,
    ),
    Definition(
        "session.timeout.ms",
        ConfigType.INT,
        "10000",
        "A worker that sends no heartbeat for this long is removed from the group and its work "
        "rebalanced. Must lie within the broker's group.min/max.session.timeout.ms.",
        _POSITIVE_INT,
        _H,
    ),
    Definition(
        "heartbeat.interval.ms",
        ConfigType.INT,
        "3000",
        "Interval between heartbeats to the group coordinator; must be below session.timeout.ms and is "
        "usually at most a third of it. Lower values also make rebalances start sooner.",
        _POSITIVE_INT,
        _H,
    ),
    Definition(
        "rebalance.timeout.ms",
        ConfigType.INT,
        "60000",
        "How long the coordinator waits for every member to rejoin during a rebalance; a worker that "
        "takes longer to stop its work is dropped from the group.",
        _POSITIVE_INT,
        _H,
    ),
    Definition(
        "worker.sync.timeout.ms",
        ConfigType.INT,
        "3000",
        "When this worker is behind the config topic, how long it tries to catch up before it leaves "
        "the group and backs off.",
        _NON_NEGATIVE_INT,
        _M,
    ),
    Definition(
        "worker.unsync.backoff.ms",
        ConfigType.INT,
        "300000",
        "How long a worker that could not catch up within worker.sync.timeout.ms stays out of the "
        "group before rejoining.",
        _NON_NEGATIVE_INT,
        _M,
    ),
    Definition(
        "connect.protocol",
        ConfigType.STRING,
        "static",
        "Embedded protocol this worker offers: eager (stop-the-world), compatible (incremental "
        "cooperative, KIP-415), sessioned (compatible plus signed internal requests, KIP-507) or static "
        "(kconnect's KIP-987 static assignments, the default: it also offers sessioned, compatible and "
        "default, and a group without static workers behaves exactly as sessioned; Apache Kafka Connect "
        "3.9 defaults to sessioned and has no static). Set sessioned where Apache Kafka Connect workers "
        "share the group: the broker then settles on sessioned anyway.",
        Choice([p.value for p in ConnectProtocol], case_insensitive=True, convert=ConnectProtocol),
    ),
    Definition(
        "group.protocol",
        ConfigType.STRING,
        "connect",
        "How configuration changes reach the workers (the KIP-848 seed's name). classic: every "
        "connector created, deleted or re-tasked is a JoinGroup/SyncGroup round of the whole group, as in "
        "Apache Kafka Connect. connect (the default): the leader computes a target assignment and the "
        "workers reconcile to it through the group-records topic, with no round; rounds happen only when "
        "a worker joins or leaves. A group falls back to classic rounds by itself while any member does "
        "not reconcile (an Apache Kafka Connect worker, an older kconnect, a worker with classic, or "
        "connect.protocol=eager), so the default is safe in mixed groups and rolling upgrades.",
        Choice([p.value for p in GroupProtocol], case_insensitive=True, convert=GroupProtocol),
    ),
    Definition(
        "scheduled.rebalance.max.delay.ms",
        ConfigType.INT,
        "300000",
        "How long the leader keeps a departed worker's connectors and tasks unassigned, waiting for it "
        "to return, before giving them to the remaining workers.",
        IntRange(0, INT32_MAX),
    ),
    Definition(
        "max.warmup.tasks",
        ConfigType.INT,
        "2",
        "Warm-up hand-over under group.protocol=connect (the learner seed; as Kafka Streams' "
        "max.warmup.replicas): how many tasks one worker may learn at once. A task the leader moves away "
        "from a worker that runs it is first learned by its new worker (task instantiated, its clients "
        "connected: a sink's consumer with its group's positions fetched, a source's producer; Spark started "
        "where the task needs it; nothing consumed, produced or committed, and the task's start() not "
        "called) while the old worker keeps running it, and moves once the learner is ready; moves beyond "
        "this many wait their turn with their old worker (a leaving worker's go at once). 0 turns warm-up "
        "off: every task moves as in Apache "
        "Kafka Connect. Only workers whose group metadata says they can learn get learners, and classic "
        "rounds never use them.",
        _NON_NEGATIVE_INT,
        kconnect=True,
    ),
    Definition(
        "task.warmup.timeout.ms",
        ConfigType.LONG,
        "60000",
        "How long a learner (see max.warmup.tasks) may take to get ready before it is dropped and its task "
        "moves the plain way (stopped on its old worker, then started cold on the new one). A leaving "
        "worker's tasks wait at most task.shutdown.graceful.timeout.ms for their learners.",
        _POSITIVE_LONG,
        kconnect=True,
    ),
    Definition(
        "exactly.once.source.support",
        ConfigType.STRING,
        "disabled",
        "Exactly-once delivery for source connectors: enabled on a new cluster, or preparing on every "
        "worker first and then enabled when turning it on in a running cluster.",
        Choice(
            [e.value for e in ExactlyOnceSourceSupport],
            case_insensitive=True,
            convert=ExactlyOnceSourceSupport,
        ),
        _H,
    ),
    Definition(
        "inter.worker.key.generation.algorithm",
        ConfigType.STRING,
        "HmacSHA256",
        "Algorithm of the session keys the leader generates for signing internal REST requests.",
        MacAlgorithm(),
    ),
    Definition(
        "inter.worker.key.size",
        ConfigType.INT,
        None,
        "Size in bits of generated session keys; when unset, the algorithm's own default size is used.",
        IntRange(40, INT32_MAX),
    ),
    Definition(
        "inter.worker.key.ttl.ms",
        ConfigType.INT,
        "3600000",
        "How long a session key is used before the leader rotates it.",
        IntRange(0, INT32_MAX),
    ),
    Definition(
        "inter.worker.signature.algorithm",
        ConfigType.STRING,
        "HmacSHA256",
        "Algorithm used to sign internal REST requests; must be listed in "
        "inter.worker.verification.algorithms.",
        MacAlgorithm(),
    ),
    Definition(
        "inter.worker.verification.algorithms",
        ConfigType.LIST,
        "HmacSHA256",
        "Algorithms accepted when verifying signed internal REST requests.",
        MacAlgorithmList(),
    ),
    # Internal topics
    *_storage("config", "connector and task configurations", partitions=None),
    *_storage("offset", "source connector offsets", partitions="25"),
    *_storage("status", "connector and task statuses", partitions="5"),
    *_storage(
        "group.records",
        "the group records (target and current assignments)",
        partitions="1",
        kconnect=True,
        default_topic=f"<group.id>{GROUP_RECORDS_TOPIC_SUFFIX}",
        replication_from="config.storage.replication.factor",
    ),
    # Converters and worker behaviour
    Definition(
        "key.converter",
        ConfigType.CLASS,
        None,
        "Converter for record keys, between Connect data and bytes in Kafka. Settings for it go under "
        "the key.converter. prefix.",
        ClassAlias(CONVERTERS),
        _H,
        required=True,
    ),
    Definition(
        "value.converter",
        ConfigType.CLASS,
        None,
        "Converter for record values, between Connect data and bytes in Kafka. Settings for it go under "
        "the value.converter. prefix.",
        ClassAlias(CONVERTERS),
        _H,
        required=True,
    ),
    Definition(
        "header.converter",
        ConfigType.CLASS,
        "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        "Converter for record header values. Settings for it go under the header.converter. prefix.",
        ClassAlias(HEADER_CONVERTERS),
    ),
    Definition(
        "task.shutdown.graceful.timeout.ms",
        ConfigType.LONG,
        "5000",
        "Total time given to all tasks being stopped together to finish before they are abandoned.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "connector.method.timeout.ms",
        ConfigType.LONG,
        "30000",
        "How long a connector plugin's start(), stop(), task_configs() or validate() may run before the "
        "connector is reported FAILED (or the validation answered 500) and the call's thread abandoned; "
        "kconnect's own. These calls run off the herder's thread, so a call that hangs holds up no "
        "rebalance, REST write or other connector.",
        _POSITIVE_LONG,
    ),
    Definition(
        "task.method.timeout.ms",
        ConfigType.LONG,
        "300000",
        "How long a task's start(), poll(), put(), flush()/pre_commit() or stop() may run before the task "
        "is reported FAILED and fenced (nothing it returns later is produced or committed); kconnect's "
        "own. The default matches a sink consumer's max.poll.interval.ms.",
        _POSITIVE_LONG,
    ),
    Definition(
        "offset.flush.interval.ms",
        ConfigType.LONG,
        "60000",
        "How often tasks' offsets are committed.",
        _POSITIVE_LONG,
    ),
    Definition(
        "offset.flush.timeout.ms",
        ConfigType.LONG,
        "5000",
        "How long an offset commit may wait for records to flush before it is abandoned and retried "
        "at the next interval.",
        _POSITIVE_LONG,
    ),
    Definition(
        "plugin.path",
        ConfigType.LIST,
        "",
        "Directories searched for connector, converter and transformation plugins.",
        NonEmptyItems(),
    ),
    Definition(
        "file.connectors.enable",
        ConfigType.BOOLEAN,
        "false",
        "Whether this worker offers the FileStream source and sink connectors. They read any file the "
        "worker can read into a topic and append to any file it can write, for whoever may call the REST "
        "API, so, as Apache Kafka Connect since 3.2 leaves them off the default plugin path, they load "
        "only when this is true. For demos and tests.",
        kconnect=True,
    ),
    Definition(
        "plugin.discovery",
        ConfigType.STRING,
        "hybrid_warn",
        "How Apache Kafka discovers Java plugins; accepted so Apache worker files load, without "
        "effect on kconnect's plugin discovery.",
        Choice(["only_scan", "service_load", "hybrid_warn", "hybrid_fail"], case_insensitive=True),
    ),
    Definition(
        "config.providers",
        ConfigType.LIST,
        "",
        "Names of config providers for ${provider:[path:]key} references, each with "
        "config.providers.<name>.class (Apache's FileConfigProvider, DirectoryConfigProvider or "
        "EnvVarConfigProvider) and config.providers.<name>.param.* (allowed.paths, allowlist.pattern). "
        "Connector configs may use only the providers named here; references are resolved where "
        "connectors and tasks start and stored unresolved. The worker file itself always resolves "
        "${env:NAME} and ${file:PATH:KEY} as well.",
        NonEmptyItems(),
    ),
    Definition(
        "connector.client.config.override.policy",
        ConfigType.STRING,
        "All",
        "Which Kafka client settings connector configurations may override: All, None, Principal "
        "(only the client principal), or Allowlist (those in "
        "connector.client.config.override.allowlist, KIP-1188).",
        ClassAlias(OVERRIDE_POLICIES),
        _M,
    ),
    Definition(
        "connector.client.config.override.allowlist",
        ConfigType.LIST,
        "",
        "The client settings connectors may override under the Allowlist policy (KIP-1188); empty: none.",
        NonEmptyItems(),
    ),
    Definition(
        "topic.creation.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether source connectors configured with topic.creation. settings may create their topics.",
    ),
    Definition(
        "topic.tracking.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether the worker records the topics each connector uses.",
    ),
    Definition(
        "topic.tracking.allow.reset",
        ConfigType.BOOLEAN,
        "true",
        "Whether users may reset a connector's recorded topics through the REST API.",
    ),
    Definition(
        "auto.restart.enable",
        ConfigType.BOOLEAN,
        "false",
        "Whether FAILED connectors and tasks are restarted by the worker that runs them, with a growing "
        "backoff (Apache Kafka Connect leaves them FAILED: false keeps that). A connector config may set "
        "this key and the three below to override the worker's. A paused or stopped connector is never "
        "restarted; a user's restart starts the count again.",
        kconnect=True,
    ),
    Definition(
        "auto.restart.max.attempts",
        ConfigType.INT,
        "10",
        "How many automatic restarts a connector or task gets before it is left FAILED with its last "
        "trace. The count starts again after a user's restart or after it has run for "
        "auto.restart.backoff.max.ms.",
        _NON_NEGATIVE_INT,
        kconnect=True,
    ),
    Definition(
        "auto.restart.backoff.initial.ms",
        ConfigType.LONG,
        "5000",
        "How long after its first failure a connector or task is restarted; the wait doubles with each "
        "automatic restart up to auto.restart.backoff.max.ms.",
        _NON_NEGATIVE_LONG,
        kconnect=True,
    ),
    Definition(
        "auto.restart.backoff.max.ms",
        ConfigType.LONG,
        "300000",
        "The longest wait before an automatic restart.",
        _NON_NEGATIVE_LONG,
        kconnect=True,
    ),
    Definition(
        "auto.include.jmx.reporter",
        ConfigType.BOOLEAN,
        "true",
        "Deprecated in Apache Kafka; accepted so Apache worker files load. kconnect has no JMX.",
    ),
    # REST API
    Definition(
        "listeners",
        ConfigType.LIST,
        "http://:8083",
        "URLs the REST API listens on. An empty host binds every interface, as Apache Kafka Connect's Jetty"
        " does (its documentation says the default interface), and so does 0.0.0.0.",
        ListenerList(may_be_empty=False),
    ),
    Definition(
        "admin.listeners",
        ConfigType.LIST,
        None,
        "URLs for the admin endpoints (/admin/...). Unset: they are served on listeners; empty: they are "
        "disabled.",
        ListenerList(may_be_empty=True),
        default_text="(served on listeners)",
    ),
    Definition(
        "rest.advertised.host.name",
        ConfigType.STRING,
        None,
        "Host name other workers use to reach this one, if not the listener's.",
    ),
    Definition(
        "rest.advertised.port",
        ConfigType.INT,
        None,
        "Port other workers use to reach this one, if not the listener's.",
        IntRange(1, 65535),
    ),
    Definition(
        "rest.advertised.listener",
        ConfigType.STRING,
        None,
        "Protocol (http or https) of the URL advertised to other workers.",
        Choice(["http", "https"], case_insensitive=True),
    ),
    Definition(
        "rest.extension.classes",
        ConfigType.LIST,
        "",
        "REST extensions to load, in order. They often implement authentication, so a worker must "
        "refuse to start rather than run without one it cannot load.",
        NonEmptyItems(),
    ),
    Definition(
        "access.control.allow.origin",
        ConfigType.STRING,
        "",
        "Value of the Access-Control-Allow-Origin header; empty allows only the REST API's own origin, "
        "'*' allows any. kconnect also refuses (403) a write (POST, PUT, PATCH, DELETE) whose Origin "
        "header names an origin not allowed here, since browsers send simple cross-site writes anyway.",
    ),
    Definition(
        "access.control.allow.methods",
        ConfigType.STRING,
        "",
        "Value of the Access-Control-Allow-Methods header; empty allows GET, POST and HEAD.",
    ),
    Definition(
        "response.http.headers.config",
        ConfigType.STRING,
        "",
        "Rules adding headers to every REST response, e.g. 'set X-Frame-Options:DENY'.",
        HeaderRules(),
    ),
    Definition(
        "rest.allowed.hosts",
        ConfigType.LIST,
        "",
        "Host header values (host or host:port, case-insensitive) the REST API answers; any other gets 403, "
        "which keeps a DNS-rebinding web page from reaching the API through a name it controls. Empty: "
        "any host. GET /health answers whatever the Host, for probes that address a pod by IP.",
        NonEmptyItems(),
        kconnect=True,
    ),
    Definition(
        "rest.request.timeout.ms",
        ConfigType.INT,
        "30000",
        "How long a REST client may take to send a request's headers, and then its body; past it the "
        "connection is closed (headers) or answered 408 (body), so slow clients cannot hold connections "
        "and request slots.",
        IntRange(1, INT32_MAX),
        kconnect=True,
    ),
    Definition(
        "rest.max.concurrent.requests",
        ConfigType.INT,
        "32",
        "REST requests handled at once, GET /health and GET / excepted; more are answered 503 at once. "
        "Below the 40 threads REST handlers share, so reads still find a thread while writes wait on "
        "Kafka, and /health always answers.",
        IntRange(1, INT32_MAX),
        kconnect=True,
    ),
    Definition(
        "rest.console.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether the REST listeners also serve the web console at /ui (static files from the kconnect "
        "package, no external assets). It calls the same REST API from the browser, so it needs no "
        "rights of its own: basic auth and the cross-site write checks apply to it as to any client. "
        "false answers /ui with 404.",
        kconnect=True,
    ),
    # Kafka clients
    Definition(
        "client.id",
        ConfigType.STRING,
        "",
        "Client id sent to brokers by the worker's clients, for request logging and quotas.",
    ),
    Definition(
        "client.dns.lookup",
        ConfigType.STRING,
        "use_all_dns_ips",
        "How clients use the addresses a broker host name resolves to.",
        Choice(["use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"], case_insensitive=False),
        _M,
    ),
    Definition(
        "metadata.max.age.ms",
        ConfigType.LONG,
        "300000",
        "Clients refresh cluster metadata at least this often.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "metadata.recovery.strategy",
        ConfigType.STRING,
        "none",
        "What clients do when no known broker is reachable: none (fail) or rebootstrap (start again "
        "from bootstrap.servers).",
        Choice(["none", "rebootstrap"], case_insensitive=True),
    ),
    Definition(
        "request.timeout.ms",
        ConfigType.INT,
        "40000",
        "How long a client waits for a broker's response before retrying or failing the request.",
        _NON_NEGATIVE_INT,
        _M,
    ),
    Definition(
        "retry.backoff.ms",
        ConfigType.LONG,
        "100",
        "Initial wait before a client retries a failed request.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "retry.backoff.max.ms",
        ConfigType.LONG,
        "1000",
        "Upper bound of the growing wait between retries.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "reconnect.backoff.ms",
        ConfigType.LONG,
        "50",
        "Initial wait before a client reconnects to a broker.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "reconnect.backoff.max.ms",
        ConfigType.LONG,
        "1000",
        "Upper bound of the growing wait between reconnection attempts.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "socket.connection.setup.timeout.ms",
        ConfigType.LONG,
        "10000",
        "Initial time a client waits for a socket connection to be established.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "socket.connection.setup.timeout.max.ms",
        ConfigType.LONG,
        "30000",
        "Upper bound of the growing socket connection setup timeout.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "connections.max.idle.ms",
        ConfigType.LONG,
        "540000",
        "Clients close connections idle for longer than this.",
        importance=_M,
    ),
    Definition(
        "receive.buffer.bytes",
        ConfigType.INT,
        "32768",
        "TCP receive buffer size of client sockets; -1 uses the OS default.",
        IntRange(-1, INT32_MAX),
        _M,
    ),
    Definition(
        "send.buffer.bytes",
        ConfigType.INT,
        "131072",
        "TCP send buffer size of client sockets; -1 uses the OS default.",
        IntRange(-1, INT32_MAX),
        _M,
    ),
    Definition(
        "security.protocol",
        ConfigType.STRING,
        "PLAINTEXT",
        "Protocol used to talk to brokers; the ssl.* and sasl.* settings configure it.",
        Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], case_insensitive=True),
        _M,
    ),
    # kconnect's own
    Definition(
        "spark.master",
        ConfigType.STRING,
        "local[*]",
        "Spark master URL for the SparkSession that runs this worker's tasks. Every other spark.* key is "
        "passed to the SparkSession as is.",
        NonEmpty(),
        _M,
        kconnect=True,
    ),
    Definition(
        "source.task.placement",
        ConfigType.STRING,
        "auto",
        "Where source tasks run: executor (each task one long-running Spark job, polling and producing on "
        "an executor, where it holds a core while it runs), worker (a thread of this worker process; Spark "
        "runs only their transforms), or auto: executor when spark.master is a cluster, worker with a "
        "local master. Tasks whose connector has transforms run on the worker either way.",
        Choice([p.value for p in SourceTaskPlacement], case_insensitive=True, convert=SourceTaskPlacement),
        _M,
        kconnect=True,
    ),
    Definition(
        "sink.task.placement",
        ConfigType.STRING,
        "auto",
        "How sink tasks read: worker (a consumer loop on a thread of this worker process that converts "
        "records and calls put() as they arrive, as Java's WorkerSinkTask: no Spark job, its cost follows "
        "its records), query (each task a Structured Streaming query whose micro-batches Spark reads and "
        "converts on its executors, about a tenth of a second of CPU per micro-batch whatever its size), "
        "or auto: worker with a local spark.master, query with a cluster one. Tasks whose connector has "
        "transforms, a dead letter queue or a DataFrame writer (Parquet, JDBC) are queries either way. "
        "/metrics says where each task runs (kconnect_task_placement).",
        Choice([p.value for p in SinkTaskPlacement], case_insensitive=True, convert=SinkTaskPlacement),
        _M,
        kconnect=True,
    ),
    Definition(
        "sink.task.stall.timeout.ms",
        ConfigType.LONG,
        "60000",
        "How long a sink task read by the worker (sink.task.placement worker) may stay behind the end of "
        "its partitions without its position moving before its reading counts as stalled: GET /health then "
        "names the task (stalled_sink_tasks) and the worker re-establishes its reading (its partitions "
        "re-seeked at its position), once per such period, with a log line each time. Apache Kafka Connect "
        "has no such watchdog: a task there can stay RUNNING and read nothing. /metrics shows every sink "
        "task's lag and last progress either way. At least 1000.",
        IntRange(1000, INT64_MAX),
        _M,
        kconnect=True,
    ),
    Definition(
        "worker.id",
        ConfigType.STRING,
        None,
        "A stable name for this worker in logs and status; when unset the advertised REST URL "
        "identifies it, as in Apache Kafka Connect.",
        NonEmpty(),
        kconnect=True,
    ),
    Definition(
        "static.connectors",
        ConfigType.LIST,
        "",
        "With connect.protocol=static: connectors only this and other workers listing them may run "
        "(KIP-987).",
        NonEmptyItems(),
        kconnect=True,
    ),
    Definition(
        "static.tasks",
        ConfigType.LIST,
        "",
        "With connect.protocol=static: tasks (<connector>-<n>) only this and other workers listing them "
        "may run (KIP-987).",
        TaskIdList(),
        kconnect=True,
    ),
)

#: Each defined key's row, by key.
BY_KEY: Mapping[str, Definition] = MappingProxyType({d.key: d for d in DEFINITIONS})

#: Keys under these prefixes are accepted without a definition and kept verbatim in
#: ``WorkerConfig.passthrough``: Kafka client overrides and security settings, REST TLS settings,
#: converter and config-provider settings, extra internal-topic settings. ``spark.`` keys go to
#: ``WorkerConfig.spark`` instead.
PASSTHROUGH_PREFIXES: tuple[str, ...] = (
    "producer.",
    "consumer.",
    "admin.",
    "listeners.https.",
    "ssl.",
    "sasl.",
    "metrics.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "config.providers.",
    "config.storage.",
    "offset.storage.",
    "status.storage.",
    "group.records.storage.",
)
#: Single keys kept verbatim like the prefixed ones.
PASSTHROUGH_KEYS: tuple[str, ...] = ("metric.reporters",)
SPARK_PREFIX = "spark."


def is_passthrough(key: str) -> bool:
    """Whether ``key`` is kept verbatim for the component it belongs to, without a definition of its own."""
    return key in PASSTHROUGH_KEYS or key.startswith(PASSTHROUGH_PREFIXES)


def definitions() -> tuple[Definition, ...]:
    """Every defined key in table order (cluster, topics, worker, REST, clients, kconnect)."""
    return DEFINITIONS


def unknown_keys(props: Mapping[str, str]) -> list[str]:
    """Keys that match no definition and no pass-through prefix, sorted, for the caller to warn about.

    Parsing does not fail on them because Apache Kafka only warns too, and a worker file shared with
    Apache workers may carry keys for features kconnect does not have.
    """
    return sorted(
        key
        for key in props
        if key not in BY_KEY and not is_passthrough(key) and not key.startswith(SPARK_PREFIX)
    )


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference_markdown() -> str:
    """The worker configuration reference as a Markdown table, generated from :func:`definitions`."""
    lines = [
        "| Key | Type | Default | Valid values | Importance | Description |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in DEFINITIONS:
        if d.required:
            default = "(required)"
        elif d.default_text is not None:
            default = f"`{d.default_text}`"
        elif d.default is None:
            default = "(unset)"
        elif d.default == "":
            default = '""'
        else:
            default = f"`{d.default}`"
        description = ("kconnect only. " if d.kconnect else "") + d.documentation
        cells = [f"`{d.key}`", d.type.value, default, d.allowed, d.importance.value, description]
        lines.append("| " + " | ".join(_markdown_cell(cell) for cell in cells) + " |")
    prefixes = ", ".join(f"`{p}*`" for p in PASSTHROUGH_PREFIXES)
    keys = ", ".join(f"`{k}`" for k in PASSTHROUGH_KEYS)
    lines += [
        "",
        f"Keys starting with {prefixes}, and {keys}, are accepted without validation and handed to the "
        "Kafka clients, REST TLS setup, converters, config providers or internal-topic creation they "
        "belong to. Keys starting with `spark.` are passed to the SparkSession. Any other key is "
        "reported as unknown and ignored.",
    ]
    return "\n".join(lines) + "\n"


PROPERTIES_DOC_HEADER = (
    "# Worker properties\n\n"
    "Generated from `config/worker_keys.py` (`python -m kconnect.config.worker > config/PROPERTIES.md` "
    "rewrites it; a test keeps it in sync). Keys, types and defaults follow Apache Kafka Connect 3.9 "
    "where the names match.\n\n"
)
