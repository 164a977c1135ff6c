"""Table maintenance on a schedule: when it is due, and which Iceberg snapshots may be expired. Pure
functions; the task shell (``table_sink``) runs them between its commits and the formats do the work
(Iceberg's ``rewrite_data_files`` and ``expire_snapshots`` procedures, Delta's ``OPTIMIZE`` and ``VACUUM``).

Why maintenance needs care here: a sink that commits every few seconds leaves many small files and
snapshots, and compaction and expiry are what keep such a table fast to read. But the sink's exactly-once
resume reads the Kafka offsets back from the tables' own commits (``commits``). A compaction commit carries
no offsets, so the resume reads back past it (newest mention per partition wins); and an expiry that
removed the only snapshot still naming a partition's offsets would make the task forget where that
partition stands, so :func:`snapshots_to_expire` never picks the newest snapshot that names any
(connector, partition).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from kconnect.connectors.lakehouse.commits import OFFSETS_KEY_PREFIX, decode_offsets
from kconnect.runtime.plugins.api import TopicPartition

#: -1 in a maintenance key: that step is off.
OFF = -1


@dataclass(frozen=True)
class MaintenancePolicy:
    """What maintenance does and how often (``interval_ms`` -1: never; the default)."""

    interval_ms: int = OFF
    #: Compact when a table (or an Iceberg file group) has at least this many small files; -1: no compaction.
    min_input_files: int = 5
    #: The compacted files' target size; -1: the format's own default.
    target_file_size_bytes: int = OFF
    #: Iceberg: expire snapshots older than this (ms); -1: no expiry.
    expire_older_than_ms: int = OFF
    #: Iceberg: always keep this many newest snapshots.
    retain_last: int = 1
    #: Delta: VACUUM files unreferenced for longer than this (ms); -1: no VACUUM.
    vacuum_retention_ms: int = OFF

    @property
    def enabled(self) -> bool:
        return self.interval_ms > 0

    @property
    def compacts(self) -> bool:
        return self.min_input_files > 0


def maintenance_due(policy: MaintenancePolicy, last_s: float, now_s: float) -> bool:
    """True when maintenance is on and ``interval_ms`` has passed since it last ran (or since the task
    started: a task that restarts often must not compact on every start)."""
    return policy.enabled and (now_s - last_s) * 1000 >= policy.interval_ms


def policy_problems(policy: MaintenancePolicy, prefix: str) -> dict[str, str]:
    """Key -> problem for maintenance keys that make no sense together: a schedule with nothing to do."""
    if not policy.enabled:
        return {}
    if policy.compacts or policy.expire_older_than_ms >= 0 or policy.vacuum_retention_ms >= 0:
        return {}
    steps = (
        f"{prefix}tables.maintenance.expire-snapshots.older-than-ms"
        if prefix == "iceberg."
        else f"{prefix}tables.maintenance.vacuum.retention-ms"
    )
    return {
        f"{prefix}tables.maintenance.interval-ms": (
            f"maintenance is scheduled but has nothing to do: set {prefix}tables.maintenance.compact."
            f"min-input-files to a positive number or {steps} to 0 or more (or the interval to -1)"
        )
    }


@dataclass(frozen=True)
class Snapshot:
    """One Iceberg snapshot as maintenance sees it: id, commit time and summary."""

    snapshot_id: int
    committed_ms: int
    summary: Mapping[str, str | None]


def offset_holders(snapshots: Iterable[Snapshot]) -> set[int]:
    """The snapshots a resume needs: for every kconnect connector's offsets key and every partition it
    names, the newest snapshot naming it (``resume_offsets`` reads oldest first, the newest wins)."""
    newest: dict[tuple[str, TopicPartition], tuple[int, int]] = {}
    for snap in snapshots:
        for key, text in snap.summary.items():
            if not key.startswith(OFFSETS_KEY_PREFIX):
                continue
            for tp in decode_offsets(text):
                order = (snap.committed_ms, snap.snapshot_id)
                if (key, tp) not in newest or newest[(key, tp)] < order:
                    newest[(key, tp)] = order
    return {snapshot_id for _, snapshot_id in newest.values()}


def snapshots_to_expire(
    snapshots: Iterable[Snapshot], now_ms: int, older_than_ms: int, retain_last: int
) -> list[int]:
    """Ids of snapshots to expire: older than ``now_ms - older_than_ms``, not among the ``retain_last``
    newest, and not holding offsets a resume needs (:func:`offset_holders`). Oldest first."""
    if older_than_ms < 0:
        return []
    ordered = sorted(snapshots, key=lambda s: (s.committed_ms, s.snapshot_id))
    keep = offset_holders(ordered) | {s.snapshot_id for s in ordered[-max(retain_last, 1) :]}
    cutoff = now_ms - older_than_ms
    return [s.snapshot_id for s in ordered if s.committed_ms < cutoff and s.snapshot_id not in keep]


@dataclass(frozen=True)
class MaintenanceResult:
    """What one table's maintenance did, for its log line."""

    files_rewritten: int = 0
    files_added: int = 0
    snapshots_expired: int = 0
    files_deleted: int = 0
    skipped: str | None = None
