"""The worker's enumerated modes: the values of the keys that choose a protocol, a rollout step or where
tasks run.

Split from the key table (:mod:`kconnect.config.worker_keys`) because the runtime reads these enums
(group member, metrics, sink loop) without needing the table itself.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = [
    "ConnectProtocol",
    "ExactlyOnceSourceSupport",
    "GroupProtocol",
    "SinkTaskPlacement",
    "SourceTaskPlacement",
]


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
