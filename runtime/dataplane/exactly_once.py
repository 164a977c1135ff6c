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
``connector`` (the task decides through the :class:`TaskTransactionContext` its context hands out, and
the connector must say it can: ``can_define_transaction_boundaries``, checked at validation). The
decisions are pure functions, :func:`commit_due` and :func:`connector_boundaries`, so that the runner
(``source_runner.SourceTaskRunner``) only does the I/O.
"""

from __future__ import annotations

import enum
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kconnect.runtime.plugins.api import ConnectorError, SourceRecord
from kconnect.runtime.plugins.connector_config import (
    OFFSETS_TOPIC_CONFIG,
    TRANSACTION_BOUNDARY_CONFIG,
    TRANSACTION_BOUNDARY_INTERVAL_CONFIG,
)

__all__ = [
    "BoundaryRequests",
    "ExactlyOnce",
    "TaskTransactionContext",
    "TransactionBoundary",
    "TransactionEnd",
    "TransactionPolicy",
    "commit_due",
    "connector_boundaries",
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


# --- connector-defined transactions (transaction.boundary=connector)


@dataclass(frozen=True, slots=True)
class BoundaryRequests:
    """What a task asked of its TransactionContext for one batch, as positions in that batch.

    ``commit_on`` / ``abort_on``: the batch's records after which the task wants the transaction
    committed / aborted; ``commit_batch`` / ``abort_batch``: a request naming no record, for after the
    whole batch.
    """

    commit_on: frozenset[int] = frozenset()
    abort_on: frozenset[int] = frozenset()
    commit_batch: bool = False
    abort_batch: bool = False


@dataclass(frozen=True, slots=True)
class TransactionEnd:
    """The open transaction ends once ``after`` of the batch's records are dispatched: committed, or
    aborted (its records discarded, their source offsets still committed)."""

    after: int
    abort: bool


def connector_boundaries(
    size: int, open_before: int, requests: BoundaryRequests
) -> tuple[TransactionEnd, ...]:
    """Where a batch of ``size`` records ends transactions under ``transaction.boundary=connector``.

    ``open_before`` is how many records earlier batches left in the open transaction: they end with the
    first boundary of this batch (an abort discards them too). Record requests take effect right after
    their record, in batch order; a batch request after the last record, and only if a transaction is
    then open (a commit or abort of nothing is nothing, as Java's "transaction open or offsets to flush"
    check). Records after the last end stay in the open transaction for later batches. Both a commit and
    an abort for one record, or for the batch, is refused with a ConnectorError: guessing either way could
    lose data or publish what the task meant to discard, so the task fails instead (Java's
    IllegalStateException).
    """
    both = requests.commit_on & requests.abort_on
    if both:
        first = min(both)
        raise ConnectorError(
            f"The task requested both a commit and an abort of the transaction on the same record "
            f"(record {first} of the batch its poll returned)"
        )
    if requests.commit_batch and requests.abort_batch:
        raise ConnectorError("The task requested both a commit and an abort of the same transaction")
    ends: list[TransactionEnd] = []
    open_records = open_before
    for index in range(size):
        open_records += 1
        if index in requests.abort_on or index in requests.commit_on:
            ends.append(TransactionEnd(index + 1, abort=index in requests.abort_on))
            open_records = 0
    if (requests.commit_batch or requests.abort_batch) and open_records > 0:
        ends.append(TransactionEnd(size, abort=requests.abort_batch))
    return tuple(ends)


class TaskTransactionContext:
    """The TransactionContext (``runtime.plugins.api``) a source task gets under
    ``transaction.boundary=connector``: it only notes requests; the runner takes them per batch.

    Why by identity: ``SourceRecord`` maps are unhashable, and equality would also match an equal record
    the task did not mean (Java's HashSet matches by ``equals``). A request for a record not in the batch
    being dispatched waits for a later batch, as in Java, so a task may ask before it returns the record.
    A lock, since a task may ask from a thread of its own while the runner takes.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._commit_on: dict[int, SourceRecord] = {}  # id -> the record, held so its id stays its own
        self._abort_on: dict[int, SourceRecord] = {}
        self._commit_batch = False
        self._abort_batch = False

    def commit_transaction(self, record: SourceRecord | None = None) -> None:
        """Commit after ``record`` is dispatched, or after the current batch when None."""
        with self._lock:
            if record is None:
                self._commit_batch = True
            else:
                self._commit_on[id(record)] = record

    def abort_transaction(self, record: SourceRecord | None = None) -> None:
        """Abort after ``record`` is dispatched, or after the current batch when None."""
        with self._lock:
            if record is None:
                self._abort_batch = True
            else:
                self._abort_on[id(record)] = record

    def take(self, batch: Sequence[SourceRecord]) -> BoundaryRequests:
        """The requests for this batch (positions of its records, and the batch requests), removed."""
        with self._lock:
            commit_on = self._positions(batch, self._commit_on)
            abort_on = self._positions(batch, self._abort_on)
            requests = BoundaryRequests(commit_on, abort_on, self._commit_batch, self._abort_batch)
            self._commit_batch = self._abort_batch = False
        return requests

    @staticmethod
    def _positions(batch: Sequence[SourceRecord], requested: dict[int, SourceRecord]) -> frozenset[int]:
        if not requested:
            return frozenset()
        found = [index for index, record in enumerate(batch) if requested.get(id(record)) is record]
        for index in found:
            del requested[id(batch[index])]
        return frozenset(found)
