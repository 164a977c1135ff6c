"""Which source offsets a run of produced records leaves to write: the last offset per source partition.

Pure functions, split from the poll loop (:mod:`kconnect.runtime.dataplane.source_runner`) that calls
them for every poll it sends (and merges them at each offset flush) and at every transaction commit, so
tables can test them without a task.
"""

from __future__ import annotations

from collections.abc import Sequence

from kconnect.runtime.plugins.api import SourceRecord
from kconnect.runtime.storage.offset_log import OffsetMap, SourceOffset, partition_json

__all__ = ["latest_source_offsets", "merge_source_offsets"]


def latest_source_offsets(connector: str, records: Sequence[SourceRecord]) -> list[SourceOffset]:
    """The offsets-topic records for a run of produced records: the last offset per source partition, in
    the order of those last records.

    Paid for every record produced (once, for its poll or its transaction), so it walks backwards and
    builds (and validates) a ``SourceOffset`` only for each partition's last record; a partition map
    object seen before (tasks usually reuse one per partition) is not keyed again.
    """
    latest: dict[object, SourceOffset] = {}
    keys: dict[int, object] = {}  # id(partition map) -> its key; the records keep the maps alive
    for record in reversed(records):
        if record.source_offset is None:
            continue
        partition: OffsetMap | None = record.source_partition
        key = keys.get(id(partition), _UNKEYED)
        if key is _UNKEYED:
            key = keys[id(partition)] = _partition_key(partition)
        if key not in latest:
            latest[key] = SourceOffset(connector, partition, record.source_offset)
    return list(reversed(latest.values()))


def merge_source_offsets(older: Sequence[SourceOffset], newer: Sequence[SourceOffset]) -> list[SourceOffset]:
    """Offsets a failed write left behind (``older``) joined with the next flush's: one per source
    partition, the newer winning, as Java's OffsetStorageWriter merges a cancelled flush back."""
    merged: dict[object, SourceOffset] = {}
    for offset in (*older, *newer):
        key = _partition_key(offset.partition)
        merged.pop(key, None)  # a partition moves to where its newest offset stands
        merged[key] = offset
    return list(merged.values())


_UNKEYED = object()


def _partition_key(partition: OffsetMap | None) -> object:
    """A cheap identity for a source partition, paid per produced record: its sorted items when they are
    hashable (the common flat map of strings and numbers), else its canonical JSON. The two spellings
    never collide: one is a tuple, the other a string."""
    if partition is None:
        return None
    try:
        key = tuple(sorted(partition.items()))
        hash(key)
    except TypeError:
        return partition_json(partition)
    return key
