"""The source hosts' shell around its pure plan: the application's slots, the scheduler pools' file, and
what a host's tasks share (issue 32)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from typing import Any

import pytest

from kconnect.runtime.dataplane import spark_source
from kconnect.runtime.dataplane.scheduler_pools import (
    POOLS,
    SINKS_POOL,
    SOURCE_HOSTS_POOL,
    allocation_xml,
)
from kconnect.runtime.dataplane.source_hosts import HOSTS_POOL, application_slots


@pytest.mark.parametrize(
    ("settings", "parallelism", "slots"),
    [
        ({}, 2, 2),  # defaultParallelism: the executors' cores (at least two)
        ({"spark.cores.max": "3"}, 8, 3),  # the application's own bound
        ({"spark.cores.max": "4", "spark.task.cpus": "2"}, 8, 2),
        ({"spark.cores.max": "junk"}, 6, 6),
        ({"spark.cores.max": "0"}, 6, 6),
        ({"spark.cores.max": "1"}, 2, 1),
    ],
)
def test_application_slots(settings: dict[str, str], parallelism: int, slots: int) -> None:
    assert application_slots(settings, parallelism) == slots


def test_the_allocation_file_configures_every_pool_the_worker_names() -> None:
    root = ET.fromstring(allocation_xml())
    pools = {p.get("name"): p for p in root.findall("pool")}
    assert set(pools) == set(POOLS) == {SOURCE_HOSTS_POOL, SINKS_POOL}
    assert HOSTS_POOL == SOURCE_HOSTS_POOL
    assert pools[SINKS_POOL].findtext("schedulingMode") == "FAIR"
    assert pools[SINKS_POOL].findtext("minShare") == "1"
    for pool in pools.values():
        assert pool.findtext("schedulingMode") in ("FAIR", "FIFO")
        assert int(pool.findtext("weight") or "0") >= 1


class _View:
    made: list[_View] = []

    def __init__(self, job: Any) -> None:
        self.closed = False
        _View.made.append(self)

    def close(self) -> None:
        self.closed = True


def _job(topic: str = "offsets", settings: dict[str, str] | None = None) -> Any:
    class Job:
        bootstrap = "b:9092"
        offsets_topic = topic
        offsets_settings = settings or {}
        sync_timeout_ms = 3000

    return Job()


def test_a_hosts_tasks_share_one_offsets_view_per_way_of_reading_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(spark_source, "OffsetsTopicView", _View)
    monkeypatch.setattr(spark_source, "_offset_views", {})
    _View.made.clear()
    first = spark_source.acquire_offsets(_job())
    second = spark_source.acquire_offsets(_job())
    other = spark_source.acquire_offsets(_job(settings={"sasl.username": "u"}))
    assert first is second and other is not first and len(_View.made) == 2
    spark_source.release_offsets(_job())
    assert not first.closed  # one user left
    spark_source.release_offsets(_job())
    assert first.closed and not other.closed
    spark_source.release_offsets(_job())  # one release too many: nothing to close
    assert spark_source.acquire_offsets(_job()) is not first  # a new view for the next user
