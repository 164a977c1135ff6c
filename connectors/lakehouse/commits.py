"""When a table sink commits, and which Kafka offsets a table already holds: pure functions.

Exactly once without a coordinator: every table commit carries, in the table format's own commit metadata
(an Iceberg snapshot's summary, a Delta commit's ``userMetadata``), the next Kafka offset of each partition
whose records it covers, under a key naming the connector. A task that opens a partition reads its tables'
commits back (:func:`resume_offsets`) and drops records below what a table already holds, so a record read
again after a crash, a rebalance or a zombie's commit is never written twice; the Kafka consumer offsets
are committed only after the tables, so nothing is skipped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kconnect.runtime.plugins.api import TopicPartition

#: The summary key prefix: ``kconnect.offsets.<connector>`` holds ``{"topic": {"partition": next}}``.
OFFSETS_KEY_PREFIX = "kconnect.offsets."


def offsets_key(connector: str) -> str:
    """The commit-metadata key holding this connector's offsets (one connector never reads another's)."""
    return OFFSETS_KEY_PREFIX + connector


def encode_offsets(offsets: Mapping[TopicPartition, int]) -> str:
    """``{"topic": {"partition": next_offset}}`` as compact JSON, keys sorted (stable bytes)."""
    tree: dict[str, dict[str, int]] = {}
    for tp, offset in offsets.items():
        tree.setdefault(tp.topic, {})[str(tp.partition)] = int(offset)
    return json.dumps(tree, sort_keys=True, separators=(",", ":"))


def decode_offsets(text: str | None) -> dict[TopicPartition, int]:
    """The inverse of :func:`encode_offsets`; anything that is not such a tree reads as no offsets (a
    commit made by someone else under the same key must not stop the task)."""
    if not text:
        return {}
    try:
        tree = json.loads(text)
    except ValueError:
        return {}
    out: dict[TopicPartition, int] = {}
    if not isinstance(tree, dict):
        return out
    for topic, partitions in tree.items():
        if not isinstance(partitions, dict):
            continue
        for partition, offset in partitions.items():
            if str(partition).isdigit() and isinstance(offset, int) and not isinstance(offset, bool):
                out[TopicPartition(str(topic), int(partition))] = offset
    return out


def resume_offsets(commits: Iterable[str | None]) -> dict[TopicPartition, int]:
    """A table's next offset per partition from its commits' offset texts, oldest first: the newest commit
    that mentions a partition wins (each commit names only the partitions it covers, so a commit by the
    task owning other partitions never carries a stale value for these)."""
    out: dict[TopicPartition, int] = {}
    for text in commits:
        out.update(decode_offsets(text))
    return out


@dataclass(frozen=True)
class CommitPolicy:
    """Commit when ``max_records`` records or ``max_bytes`` staged bytes are waiting, or ``interval_ms`` has
    passed since the oldest waiting record was read, whichever comes first (-1 turns a bound off; the
    interval is always on, so a trickle topic still commits every interval)."""

    interval_ms: int
    max_records: int = -1
    max_bytes: int = -1


def lead_time(policy: CommitPolicy, last_commit_s: float | None, check_gap_s: float | None = None) -> float:
    """How much earlier than the interval a commit starts: the time the last commit took plus the time
    between the task's last two commit checks (``check_gap_s``: the next check comes about that much later;
    a batch's time while records flow), at most the interval, so that it ends, and the records are
    queryable, about an interval after the oldest of them was produced rather than an interval plus a
    commit's time plus up to a batch's. Snapshots still come about once an interval, a little sooner
    (a commit that takes the whole interval makes them back to back)."""
    if last_commit_s is None:
        return 0.0
    gap = 0.0 if check_gap_s is None else max(check_gap_s, 0.0)
    return min(max(last_commit_s, 0.0) + gap, policy.interval_ms / 1000)


def wait_start(received_s: float, oldest_record_s: float | None, floor_s: float | None) -> float:
    """When a batch's records' wait for an interval commit counts from: the produce time of its oldest
    record (its Kafka timestamp, ``oldest_record_s``; None: unknown), but never before ``floor_s`` (when the
    newest batch the last commit covered was read; an older record was in Kafka then and is part of a
    backlog, which still commits about once an interval) nor after the batch reached the task
    (``received_s``; a producer's clock running ahead).

    Why not simply when the batch was read: records produced while the task is busy wait in Kafka until
    the next batch is read; counted from their reading, their commit came an interval after that, i.e. up
    to a batch's time and a commit's more than the interval after they were produced. Why the floor is the
    last commit's reading and not its start: a record produced between the two was not in that commit and
    had already waited that long; counted from the commit's start, its wait was understated by up to a
    batch's time (its table's snapshot came that much late)."""
    if oldest_record_s is None:
        return received_s
    floor = oldest_record_s if floor_s is None else max(oldest_record_s, floor_s)
    return min(received_s, floor)


def commit_due(
    policy: CommitPolicy, records: int, size: int, oldest_s: float | None, now_s: float, lead_s: float = 0.0
) -> str | None:
    """Why to commit now (``records``, ``bytes`` or ``interval``), or None. ``oldest_s`` is when the oldest
    waiting record was read (None: nothing waits; then there is nothing to commit); ``lead_s``: see
    :func:`lead_time`."""
    if oldest_s is None:
        return None
    if policy.max_records > 0 and records >= policy.max_records:
        return "records"
    if policy.max_bytes > 0 and size >= policy.max_bytes:
        return "bytes"
    if (now_s + lead_s - oldest_s) * 1000 >= policy.interval_ms:
        return "interval"
    return None


def unwritten_from(first: int, last: int, floor: int | None) -> tuple[int, int] | None:
    """The part of a consumed range ``[first, last]`` at or above ``floor`` (the next offset not yet held
    or staged), or None when all of it is."""
    lo = first if floor is None else max(first, floor)
    return (lo, last) if lo <= last else None


def sql_string(text: str) -> str:
    """``text`` as a Spark SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def below_floors_condition(
    floors: Mapping[TopicPartition, int], topic: str, partition: str, offset: str
) -> str | None:
    """A Spark SQL condition that drops rows below their partition's floor (the next offset not yet held or
    staged) and keeps every other row; None when no partition has a floor to apply (keep all: no filter).

    Why only the partitions that need it: a condition naming every partition of a 50-partition task was
    compiled by Spark for each cached block each job scanned (the in-memory scan's pruning predicate),
    which cost a trickle's 50-table commit round most of a minute. In the steady state no row is below its
    floor (a batch starts where the last one ended, a table holds exactly what the last commit covered),
    so the condition is then no condition at all."""
    if not floors:
        return None
    terms = [
        f"({topic} = {sql_string(tp.topic)} AND {partition} = {int(tp.partition)} AND {offset} < {int(lo)})"
        for tp, lo in sorted(floors.items(), key=lambda i: (i[0].topic, i[0].partition))
    ]
    return "NOT (" + " OR ".join(terms) + ")"


def commit_directly(
    policy: CommitPolicy,
    staged: bool,
    records: int,
    waiting_since_s: float,
    now_s: float,
    lead_s: float = 0.0,
) -> str | None:
    """Why a batch should go straight to its tables instead of being staged first (``records`` or
    ``interval``), or None. Only when nothing is staged: the batch alone is then what a commit would
    cover. It is due when it holds ``max_records`` or its records have waited an interval (less the lead,
    see :func:`lead_time`) since ``waiting_since_s`` (:func:`wait_start`), i.e. exactly when the commit
    check right after it would commit it; writing it once, from the batch, saves staging it as Parquet and
    reading it back. A steady stream still commits about once an interval: until its oldest record is due,
    batches are staged.

    Why the batch's own wait and not the time since the last commit: a trickle's batch holds records
    produced since the last commit's batch was read, which is earlier than that commit's end by a batch and
    a commit; measured from the commit's end, the batch was staged and its records committed a check
    later than they were due."""
    if staged:
        return None
    if policy.max_records > 0 and records >= policy.max_records:
        return "records"
    if (now_s + lead_s - waiting_since_s) * 1000 >= policy.interval_ms:
        return "interval"
    return None
