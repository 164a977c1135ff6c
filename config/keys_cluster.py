"""Worker keys for the Kafka cluster, group membership and the internal topics (rows of
:mod:`kconnect.config.worker_keys`).
"""

from __future__ import annotations

from .key_definition import (
    GROUP_RECORDS_TOPIC_SUFFIX,
    Definition,
)
from .key_definition import HIGH as _H
from .key_definition import MEDIUM as _M
from .key_definition import (
    NON_NEGATIVE_INT as _NON_NEGATIVE_INT,
)
from .key_definition import (
    PARTITIONS as _PARTITIONS,
)
from .key_definition import (
    POSITIVE_INT as _POSITIVE_INT,
)
from .key_definition import (
    POSITIVE_LONG as _POSITIVE_LONG,
)
from .key_definition import (
    REPLICATION as _REPLICATION,
)
from .values import (
    INT32_MAX,
    Choice,
    ConfigType,
    HostPortList,
    IntRange,
    MacAlgorithm,
    MacAlgorithmList,
    NonEmpty,
    TopicName,
)
from .worker_modes import (
    ConnectProtocol,
    ExactlyOnceSourceSupport,
    GroupProtocol,
)

__all__ = ["CLUSTER_KEYS"]


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


CLUSTER_KEYS: tuple[Definition, ...] = (
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
        "this many wait their turn with their old worker, except a leaving worker's tasks and a worker's "
        "own work coming back to it after a graceful restart, which are all learned at once. 0 turns warm-up "
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
)
