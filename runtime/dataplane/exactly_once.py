"""Exactly-once source delivery (KIP-618): the pure decisions behind a source task's transactions.

With ``exactly.once.source.support=enabled`` on the worker, each source task produces through a
transactional producer whose ``transactional.id`` is ``<group.id>-<connector>-<task>`` (Java's
``Worker.taskTransactionalId``). Because the id is stable per task, ``init_transactions`` by a new
instance of a task fences every older instance (a "zombie" left on a worker that lost its assignment or
is about to die) and aborts whatever transaction it left open. Records and their source offsets go to
Kafka in the same transaction, so a reader with ``isolation.level=read_committed`` sees a record if and
only if the offset that covers it is also visible: a task that restarts elsewhere resumes exactly after
the last committed record, with neither loss nor duplicates.

Where a transaction ends is the connector's ``transaction.boundary``: ``poll`` (one transaction per
non-empty batch a task returns), ``interval`` (commit once ``transaction.boundary.interval.ms``, or the
worker's ``offset.flush.interval.ms`` when unset, has passed since the transaction began), or
``connector`` (the task decides through a TransactionContext, which kconnect does not offer yet: such a
task fails at start with a clear message). The decision is :func:`commit_due`, a pure function, so that
the runner (``source_runner.SourceTaskRunner``) only does the I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

from kconnect.runtime.plugins.api import ConnectorError
from kconnect.runtime.plugins.connector_config import (
    OFFSETS_TOPIC_CONFIG,
    TRANSACTION_BOUNDARY_CONFIG,
    TRANSACTION_BOUNDARY_INTERVAL_CONFIG,
)

__all__ = [
    "ExactlyOnce",
    "TransactionBoundary",
    "TransactionPolicy",
    "commit_due",
    "exactly_once",
    "producer_settings",
    "transaction_policy",
    "transactional_id",
    "zombie_ids",
]


class TransactionBoundary(enum.Enum):
    """The values of the connector key ``transaction.boundary`` (KIP-618), as an enum so that a misspelt
    boundary fails where it is parsed rather than where a transaction should end."""

    POLL = "poll"
    INTERVAL = "interval"
    CONNECTOR = "connector"


@dataclass(frozen=True, slots=True)
class TransactionPolicy:
    """When a source task's transaction ends: the boundary plus, for ``interval``, its length, resolved once
    at task start so that :func:`commit_due` stays pure."""

    boundary: TransactionBoundary
    #: Only meaningful for ``INTERVAL``: how long a transaction stays open at most, in milliseconds.
    interval_ms: int


@dataclass(frozen=True, slots=True)
class ExactlyOnce:
    """What a source task needs to run transactionally (built from the worker and connector configs)."""

    transactional_id: str
    policy: TransactionPolicy
    #: Where the task's offsets go, inside its transactions: the worker's ``offset.storage.topic``.
    offsets_topic: str


def transactional_id(group_id: str, connector: str, task: int) -> str:
    """Java's ``Worker.taskTransactionalId``: ``${groupId}-${connector}-${taskId}``.

    Stable across restarts and workers on purpose: it is what lets a new instance fence the old one,
    and what the leader's zombie fencing enumerates for a connector.
    """
    return f"{group_id}-{connector}-{task}"


def zombie_ids(group_id: str, connector: str, task_count_record: int | None) -> list[str]:
    """The transactional ids a round of zombie fencing must fence before a new task generation starts.

    ``task_count_record`` is the ``tasks-fencing-<connector>`` record: how many tasks the generation
    fenced last time had, i.e. how many instances may still be alive from before. None (no round yet:
    the connector never ran with exactly-once) means there is nothing transactional to fence.
    """
    return [transactional_id(group_id, connector, t) for t in range(task_count_record or 0)]


def transaction_policy(config: Mapping[str, str], default_interval_ms: int) -> TransactionPolicy:
    """The connector's transaction boundary, or a ConnectorError naming the key, the value and what is
    allowed (the REST validation rejects these earlier; a task config written some other way is checked
    again here, where it would otherwise misbehave)."""
    raw = config.get(TRANSACTION_BOUNDARY_CONFIG, TransactionBoundary.POLL.value)
    try:
        boundary = TransactionBoundary(raw.strip().lower())
    except ValueError:
        allowed = ", ".join(b.value for b in TransactionBoundary)
        raise ConnectorError(
            f"Invalid value {raw} for configuration {TRANSACTION_BOUNDARY_CONFIG}: "
            f"String must be one of (case insensitive): {allowed}"
        ) from None
    interval_ms = default_interval_ms
    raw_interval = config.get(TRANSACTION_BOUNDARY_INTERVAL_CONFIG)
    if raw_interval is not None and raw_interval.strip():
        try:
            interval_ms = int(raw_interval.strip())
        except ValueError:
            raise ConnectorError(
                f"Invalid value {raw_interval} for configuration {TRANSACTION_BOUNDARY_INTERVAL_CONFIG}: "
                "Not a number of type LONG"
            ) from None
        if interval_ms < 0:
            raise ConnectorError(
                f"Invalid value {interval_ms} for configuration {TRANSACTION_BOUNDARY_INTERVAL_CONFIG}: "
                "Value must be at least 0"
            )
    if boundary is TransactionBoundary.CONNECTOR:
        raise ConnectorError(
            f"{TRANSACTION_BOUNDARY_CONFIG}=connector is not supported by kconnect yet (tasks have no "
            "TransactionContext); use poll or interval"
        )
    return TransactionPolicy(boundary, interval_ms)


def exactly_once(
    group_id: str,
    connector: str,
    task: int,
    config: Mapping[str, str],
    default_interval_ms: int,
    offsets_topic: str,
) -> ExactlyOnce:
    """The exactly-once settings of one task, or a ConnectorError for what kconnect cannot honour.

    A connector-specific ``offsets.storage.topic`` is refused rather than ignored: the worker reads only
    its own offsets topic, so offsets committed elsewhere would never be read back, and a restarted task
    would replay its input — the duplicates exactly-once delivery exists to prevent.
    """
    own = config.get(OFFSETS_TOPIC_CONFIG)
    if own is not None and own.strip() and own.strip() != offsets_topic:
        raise ConnectorError(
            f"{OFFSETS_TOPIC_CONFIG}={own} is not supported by kconnect yet with exactly.once.source.support="
            f"enabled: this worker reads source offsets only from {offsets_topic}; unset it"
        )
    return ExactlyOnce(
        transactional_id(group_id, connector, task),
        transaction_policy(config, default_interval_ms),
        offsets_topic,
    )


#: Producer settings a task's overrides may not change under exactly-once (Java rejects such overrides).
_FORCED = ("transactional.id", "enable.idempotence")


def producer_settings(base: Mapping[str, str], eos: ExactlyOnce) -> dict[str, str]:
    """The transactional producer's settings: the task's own, then what exactly-once needs.

    ``partitioner=murmur2_random`` is Java's placement for keyed records. The task writes its offsets
    through this producer, and the worker's offsets writer (``kafka_log``) places the same keys with
    murmur2: one source partition's offsets must always land in the same offsets-topic partition, or the
    latest offset would not reliably win when the topic is read back.
    """
    settings = {k: v for k, v in base.items() if k not in _FORCED}
    settings.update(
        {
            "transactional.id": eos.transactional_id,
            "enable.idempotence": "true",
            "acks": "all",
            "partitioner": "murmur2_random",
        }
    )
    return settings


def commit_due(policy: TransactionPolicy, *, open_records: int, now_s: float, begun_s: float) -> bool:
    """Whether to commit the open transaction after a poll.

    ``open_records`` is how many records the open transaction holds (0: none is open, nothing to commit).
    ``poll``: every non-empty batch is its own transaction, so commit whenever one is open. ``interval``:
    commit once the transaction has been open for the interval, checked after every poll (empty ones too,
    so a quiet task still commits what it has).
    """
    if open_records <= 0:
        return False
    if policy.boundary is TransactionBoundary.POLL:
        return True
    if policy.boundary is TransactionBoundary.INTERVAL:
        return (now_s - begun_s) * 1000 >= policy.interval_ms
    return False
