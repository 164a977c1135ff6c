"""Table maintenance's pure parts: the schedule, the config keys (validated naming key, value and what is
allowed), and which Iceberg snapshots expiry may remove without the sink forgetting its Kafka offsets."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.connectors.lakehouse import config as cfg
from kconnect.connectors.lakehouse.commits import encode_offsets, offsets_key, resume_offsets
from kconnect.connectors.lakehouse.delta import CONFIG_DEF as DELTA_DEF
from kconnect.connectors.lakehouse.delta import DeltaSinkConnector
from kconnect.connectors.lakehouse.iceberg import CONFIG_DEF, IcebergSinkConnector
from kconnect.connectors.lakehouse.maintenance import (
    MaintenancePolicy,
    Snapshot,
    maintenance_due,
    offset_holders,
    snapshots_to_expire,
)
from kconnect.runtime.plugins.api import TopicPartition
from kconnect.runtime.plugins.config_def import ConfigValidationError

TP0, TP1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
KEY = offsets_key("ice")

BASE = {
    "name": "ice",
    "connector.class": "IcebergSinkConnector",
    "topics": "orders",
    "iceberg.tables": "db.orders",
    "iceberg.catalog.warehouse": "/tmp/wh",
}
DELTA = {"name": "dl", "topics": "orders", "delta.tables": "db.orders", "delta.warehouse": "/tmp/wh"}


def errors(connector: object, props: dict[str, str]) -> dict[str, list[str]]:
    values = connector.validate(props)  # type: ignore[attr-defined]
    return {v.name: v.errors for v in values if v.errors}


# --- schedule


def test_maintenance_is_off_by_default_and_never_due() -> None:
    policy = cfg.parse(CONFIG_DEF, BASE, "iceberg.").maintenance
    assert policy == MaintenancePolicy()
    assert not policy.enabled
    assert not maintenance_due(policy, last_s=0.0, now_s=10.0**9)


def test_maintenance_is_due_once_its_interval_has_passed_since_the_last_run() -> None:
    policy = MaintenancePolicy(interval_ms=60_000)
    assert not maintenance_due(policy, last_s=100.0, now_s=159.9)
    assert maintenance_due(policy, last_s=100.0, now_s=160.0)


# --- config


def test_iceberg_maintenance_keys_parse_into_the_policy() -> None:
    props = {
        **BASE,
        "iceberg.tables.maintenance.interval-ms": "600000",
        "iceberg.tables.maintenance.compact.min-input-files": "3",
        "iceberg.tables.maintenance.compact.target-file-size-bytes": "134217728",
        "iceberg.tables.maintenance.expire-snapshots.older-than-ms": "86400000",
        "iceberg.tables.maintenance.expire-snapshots.retain-last": "5",
    }
    assert cfg.parse(CONFIG_DEF, props, "iceberg.").maintenance == MaintenancePolicy(
        interval_ms=600_000,
        min_input_files=3,
        target_file_size_bytes=134_217_728,
        expire_older_than_ms=86_400_000,
        retain_last=5,
    )
    assert errors(IcebergSinkConnector(), props) == {}


def test_delta_maintenance_keys_parse_into_the_policy() -> None:
    props = {
        **DELTA,
        "delta.tables.maintenance.interval-ms": "600000",
        "delta.tables.maintenance.vacuum.retention-ms": "604800000",
    }
    policy = cfg.parse(DELTA_DEF, props, "delta.").maintenance
    assert policy == MaintenancePolicy(interval_ms=600_000, vacuum_retention_ms=604_800_000)
    assert errors(DeltaSinkConnector(), props) == {}


@pytest.mark.parametrize(
    ("key", "value", "allowed"),
    [
        ("iceberg.tables.maintenance.interval-ms", "0", "-1 (off) or a positive number"),
        ("iceberg.tables.maintenance.compact.min-input-files", "0", "-1 (off) or a positive number"),
        ("iceberg.tables.maintenance.compact.target-file-size-bytes", "-5", "-1 (the format's default)"),
        ("iceberg.tables.maintenance.expire-snapshots.older-than-ms", "-2", "-1 (off) or 0 or more"),
        ("iceberg.tables.maintenance.expire-snapshots.retain-last", "0", "at least 1"),
        ("iceberg.tables.maintenance.interval-ms", "often", "Not a number of type LONG"),
    ],
)
def test_bad_maintenance_values_are_refused_naming_key_value_and_what_is_allowed(
    key: str, value: str, allowed: str
) -> None:
    found = errors(IcebergSinkConnector(), {**BASE, key: value})
    assert list(found) == [key], found
    assert f"Invalid value {value} for configuration {key}" in found[key][0]
    assert allowed in found[key][0]
    with pytest.raises(ConfigValidationError, match=key.replace(".", r"\.")):
        cfg.parse(CONFIG_DEF, {**BASE, key: value}, "iceberg.")


def test_a_schedule_with_nothing_to_do_is_refused() -> None:
    props = {
        **BASE,
        "iceberg.tables.maintenance.interval-ms": "60000",
        "iceberg.tables.maintenance.compact.min-input-files": "-1",
    }
    found = errors(IcebergSinkConnector(), props)
    assert "nothing to do" in found["iceberg.tables.maintenance.interval-ms"][0]
    delta = {
        **DELTA,
        "delta.tables.maintenance.interval-ms": "60000",
        "delta.tables.maintenance.compact.min-input-files": "-1",
    }
    message = errors(DeltaSinkConnector(), delta)["delta.tables.maintenance.interval-ms"][0]
    assert "delta.tables.maintenance.vacuum.retention-ms" in message


def test_expiry_keys_are_icebergs_and_vacuum_deltas() -> None:
    assert "iceberg.tables.maintenance.expire-snapshots.older-than-ms" in CONFIG_DEF.names()
    assert "iceberg.tables.maintenance.vacuum.retention-ms" not in CONFIG_DEF.names()
    assert "delta.tables.maintenance.vacuum.retention-ms" in DELTA_DEF.names()
    assert "delta.tables.maintenance.expire-snapshots.older-than-ms" not in DELTA_DEF.names()


# --- which snapshots expiry removes


def snap(snapshot_id: int, at: int, offsets: dict[TopicPartition, int] | None = None) -> Snapshot:
    summary: dict[str, str | None] = {"operation": "append" if offsets else "replace"}
    if offsets:
        summary[KEY] = encode_offsets(offsets)
    return Snapshot(snapshot_id, at, summary)


def test_the_newest_snapshot_naming_each_partition_survives_expiry() -> None:
    # p0 was last committed long ago (snapshot 1); p1 in every later commit; 5 is a compaction.
    snapshots = [
        snap(1, 1_000, {TP0: 10}),
        snap(2, 2_000, {TP1: 10}),
        snap(3, 3_000, {TP1: 20}),
        snap(4, 4_000, {TP1: 30}),
        snap(5, 5_000),
    ]
    expired = snapshots_to_expire(snapshots, now_ms=100_000, older_than_ms=0, retain_last=1)
    assert expired == [2, 3]
    assert offset_holders(snapshots) == {1, 4}
    left = [s for s in snapshots if s.snapshot_id not in expired]
    assert resume_offsets(s.summary.get(KEY) for s in left) == {TP0: 10, TP1: 30}


def test_young_snapshots_and_the_last_n_are_kept() -> None:
    snapshots = [snap(i, i * 1_000) for i in range(1, 8)]
    assert snapshots_to_expire(snapshots, now_ms=10_000, older_than_ms=5_000, retain_last=1) == [1, 2, 3, 4]
    assert snapshots_to_expire(snapshots, now_ms=10_000, older_than_ms=0, retain_last=3) == [1, 2, 3, 4]
    assert snapshots_to_expire(snapshots, now_ms=10_000, older_than_ms=-1, retain_last=1) == []


def test_another_connectors_offsets_are_kept_too() -> None:
    other = Snapshot(1, 1_000, {offsets_key("other"): json.dumps({"orders": {"0": 5}})})
    snapshots = [other, snap(2, 2_000, {TP0: 1}), snap(3, 3_000, {TP0: 2})]
    assert snapshots_to_expire(snapshots, now_ms=10_000, older_than_ms=0, retain_last=1) == [2]


@given(
    st.lists(
        st.tuples(
            st.integers(0, 50),
            st.dictionaries(st.sampled_from([TP0, TP1, TopicPartition("x", 0)]), st.integers(0, 1000)),
        ),
        max_size=25,
    ),
    st.integers(0, 60),
    st.integers(1, 4),
)
def test_expiry_never_changes_where_a_task_resumes(
    commits: list[tuple[int, dict[TopicPartition, int]]], older_than: int, retain_last: int
) -> None:
    snapshots = [snap(i + 1, at, offsets or None) for i, (at, offsets) in enumerate(commits)]
    expired = set(
        snapshots_to_expire(snapshots, now_ms=60, older_than_ms=older_than, retain_last=retain_last)
    )
    ordered = sorted(snapshots, key=lambda s: (s.committed_ms, s.snapshot_id))
    before = resume_offsets(s.summary.get(KEY) for s in ordered)
    after = resume_offsets(s.summary.get(KEY) for s in ordered if s.snapshot_id not in expired)
    assert after == before
    if ordered:
        assert ordered[-1].snapshot_id not in expired
