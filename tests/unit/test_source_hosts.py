"""The source hosts' shell around its pure plan: the application's slots, the scheduler pools' file, and
what a host's tasks share (issue 32)."""

from __future__ import annotations

import socket
import threading
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from kconnect.runtime.dataplane import spark_source
from kconnect.runtime.dataplane.scheduler_pools import (
    POOLS,
    SINKS_POOL,
    SOURCE_HOSTS_POOL,
    allocation_xml,
)
from kconnect.runtime.dataplane.source_hosts import HOSTS_POOL, SourceHosts, application_slots
from kconnect.runtime.dataplane.task_channel import ChannelServer, TaskHandler, keep_alive


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


class _Jobs:
    """A SparkContext double for the hosts' jobs: each job blocks until its group is cancelled."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.cancelled: list[str] = []
        self.submitted: list[str] = []
        self.events: dict[str, threading.Event] = {}
        self.lock = threading.Lock()

    @property
    def sparkContext(self) -> _Jobs:
        return self

    def setJobGroup(self, group: str, _description: str, interruptOnCancel: bool = False) -> None:
        self.local.group = group
        with self.lock:
            self.submitted.append(group)
            self.events[group] = threading.Event()

    def setLocalProperty(self, _key: str, _value: str) -> None:
        pass

    def parallelize(self, _data: Any, _slices: int) -> _Jobs:
        return self

    def mapPartitions(self, _function: Any) -> _Jobs:
        return self

    def collect(self) -> list[str]:
        if self.local.group.endswith("-warm-up"):
            return ["1", "2"]
        with self.lock:
            event = self.events[self.local.group]
        event.wait(30)
        raise RuntimeError("Job group cancelled")

    executors = 0

    @property
    def _jsc(self) -> Any:  # the JVM's status tracker: the driver and ``executors`` executors
        infos = ["driver"] + ["executor"] * self.executors
        tracker = SimpleNamespace(getExecutorInfos=lambda: infos)
        return SimpleNamespace(sc=lambda: SimpleNamespace(statusTracker=lambda: tracker))

    def cancelJobGroup(self, group: str) -> None:
        with self.lock:
            self.cancelled.append(group)
            self.events[group].set()


class _Connection:
    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def send(self, message: dict[str, Any]) -> bool:
        self.sent.append(message)
        return True

    def close(self) -> None:
        pass


def _wait(condition: Callable[[], object], what: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def test_a_lost_host_is_replaced_at_once_and_its_job_cancelled() -> None:
    """Its executor died: the worker does not wait for Spark to notice and run the host's Spark task again
    (tens of seconds); a new host is submitted, its tasks start there, and the old job is cancelled so that
    its retry takes no slot."""
    jobs = _Jobs()
    channel = ChannelServer("127.0.0.1", "127.0.0.1")
    hosts = SourceHosts(lambda: jobs, channel, lambda: 2, "INFO")
    stopping = threading.Event()
    address = channel.register(TaskHandler())
    ended: list[list[str]] = []
    runner = threading.Thread(
        target=lambda: ended.append(hosts.run(address, {"job": 1}, lambda: 0.0, lambda: None, stopping))
    )
    runner.start()
    try:
        _wait(lambda: jobs.submitted == [f"{HOSTS_POOL}-host-0"], "the first host's job")
        first = _Connection()
        hosts._hosts["host-0"].attached(first)
        _wait(lambda: [m["command"] for m in first.sent] == ["start"], "the task started on host-0")
        assert hosts.where() == {address.task: "host-0"}

        hosts._hosts["host-0"].detached(first)  # the executor died
        assert jobs.cancelled == [f"{HOSTS_POOL}-host-0"]
        _wait(lambda: len(jobs.submitted) == 2, "a new host submitted")
        assert jobs.submitted[1] == f"{HOSTS_POOL}-host-1"
        assert hosts.where() == {address.task: None}
        second = _Connection()
        hosts._hosts["host-1"].attached(second)
        _wait(lambda: [m["command"] for m in second.sent] == ["start"], "the task started on host-1")
        assert second.sent[0]["job"] == first.sent[0]["job"]
        assert hosts.where() == {address.task: "host-1"}
        _wait(lambda: "host-0" not in hosts._hosts, "the cancelled host forgotten")

        stopping.set()
        hosts._ended("host-1", address.task, {"ended": "stopped"})
        runner.join(5)
        assert ended == [['{"ended": "stopped"}']]
    finally:
        stopping.set()
        hosts.close()
        channel.close()
        runner.join(5)


def test_a_retired_host_that_leaves_is_not_replaced_nor_cancelled() -> None:
    jobs = _Jobs()
    channel = ChannelServer("127.0.0.1", "127.0.0.1")
    hosts = SourceHosts(lambda: jobs, channel, lambda: 2, "INFO")
    try:
        hosts._submit(time.monotonic())
        _wait(lambda: jobs.submitted == [f"{HOSTS_POOL}-host-0"], "the host's job")
        host = hosts._hosts["host-0"]
        connection = _Connection()
        host.attached(connection)
        host.retired = True
        host.detached(connection)
        assert jobs.cancelled == []
        assert host.failed_at == 0.0
        jobs.cancelJobGroup(f"{HOSTS_POOL}-host-0")  # its job ends as a retired host's does
    finally:
        hosts.close()
        channel.close()


def test_a_channel_socket_notices_a_silent_peer_within_seconds() -> None:
    """Keepalive on the task channel's sockets: a dead machine sends no FIN, and without probes its tasks
    would wait for ever for their connection to end."""
    with socket.socket() as sock:
        keep_alive(sock, dead_after_s=10.0)
        assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE) == 1
        if hasattr(socket, "TCP_KEEPIDLE"):
            idle = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE)
            interval = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL)
            count = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT)
            assert idle + interval * count <= 10
        if hasattr(socket, "TCP_USER_TIMEOUT"):
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT) == 10_000


def test_executors_that_come_get_their_python_started_once() -> None:
    """A warm-up job of one Spark task per executor when the count grows, none while it stays: the daemon
    then forks a lost host's replacement in a moment instead of starting Python on a busy machine."""
    jobs = _Jobs()
    channel = ChannelServer("127.0.0.1", "127.0.0.1")
    hosts = SourceHosts(lambda: jobs, channel, lambda: 2, "INFO")
    try:
        hosts._warm(0.0)
        assert jobs.submitted == []  # no executor yet (a local master has none)
        jobs.executors = 2
        hosts._warm(1.0)  # within WARM_EVERY_S of the last look
        assert jobs.submitted == []
        hosts._warm(10.0)
        _wait(lambda: jobs.submitted == [f"{HOSTS_POOL}-warm-up"], "a warm-up job")
        _wait(lambda: hosts._warming is not None and not hosts._warming.is_alive(), "the warm-up done")
        hosts._warm(20.0)
        assert len(jobs.submitted) == 1, "no second warm-up while the executors stay"
        jobs.executors = 3
        hosts._warm(30.0)
        _wait(lambda: len(jobs.submitted) == 2, "a warm-up for the executor that came")
    finally:
        hosts.close()
        channel.close()
