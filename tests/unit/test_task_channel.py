"""The worker <-> executor channel of source tasks run as Spark jobs (``task_channel``, ``spark_source``):
messages both ways over loopback and how the worker side folds an attempt's events. What a stranger on
the network can and cannot do to the channel is in ``test_task_channel_attacks.py``."""

from __future__ import annotations

import queue
import socket
from typing import Any

import pytest

from kconnect.runtime.dataplane.source_hosts import SourceHosts
from kconnect.runtime.dataplane.spark_source import SparkSourceRunner
from kconnect.runtime.dataplane.task_channel import (
    ChannelClient,
    ChannelServer,
    Connection,
    Message,
    TaskHandler,
    decode,
    encode,
)
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import SourceTask
from kconnect.runtime.plugins.plugin_metrics import PluginMetricsRegistry


class Recorder(TaskHandler):
    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()

    def attached(self, connection: Connection) -> None:
        self.events.put(("attached", connection))
        connection.send({"command": "state", "paused": False})

    def message(self, connection: Connection, message: Message) -> None:
        self.events.put(("message", message))

    def detached(self, connection: Connection) -> None:
        self.events.put(("detached", None))


@pytest.mark.parametrize(
    ("line", "message"),
    [
        (b'{"event":"running"}\n', {"event": "running"}),
        (b"[1, 2]\n", None),
        (b"not json\n", None),
        (b"\xff\xfe\n", None),
    ],
)
def test_decode_keeps_objects_and_skips_anything_else(line: bytes, message: Message | None) -> None:
    assert decode(line) == message


def test_encode_is_one_line() -> None:
    assert encode({"trace": "a\nb"}).count(b"\n") == 1


def test_messages_go_both_ways_and_the_end_is_seen() -> None:
    server = ChannelServer("127.0.0.1", "127.0.0.1")
    handler = Recorder()
    address = server.register(handler)
    try:
        client = ChannelClient(address)
        assert handler.events.get(timeout=5)[0] == "attached"
        assert client.commands.get(timeout=5) == {"command": "state", "paused": False}
        client.send({"event": "running"})
        assert handler.events.get(timeout=5) == ("message", {"event": "running"})
        client.close()
        assert handler.events.get(timeout=5) == ("detached", None)
    finally:
        server.close()


class _Idle(SourceTask):
    def version(self) -> str:
        return "1"

    def start(self, props: Any) -> None:
        pass

    def poll(self) -> list[Any]:
        return []

    def stop(self) -> None:
        pass


class _Sent:
    def __init__(self) -> None:
        self.sent: list[Message] = []

    def send(self, message: Message) -> bool:
        self.sent.append(message)
        return True


def _runner(
    running: list[TaskId] | None = None, metrics: PluginMetricsRegistry | None = None
) -> SparkSourceRunner:
    return SparkSourceRunner(
        TaskId("c", 0),
        _Idle(),
        {},
        lambda _t, _trace: None,
        job=lambda _address: pytest.fail("no job in a unit test"),
        channel=(channel := ChannelServer("127.0.0.1", "127.0.0.1")),
        spark=lambda: None,
        hosts=SourceHosts(lambda: None, channel, lambda: 2, "INFO"),
        plugin_metrics=metrics,
        on_running=running.append if running is not None else None,
    )


def test_the_worker_side_folds_an_attempts_events_and_adds_up_attempts() -> None:
    running: list[TaskId] = []
    runner = _runner(running)
    runner._running.set()  # started, not paused
    first: Any = _Sent()
    runner.attached(first)
    assert first.sent == [{"command": "state", "paused": False}]
    assert runner.state() == "UNASSIGNED"  # until the executor says its loop runs
    runner.message(first, {"event": "running"})
    assert runner.state() == "RUNNING" and running == [TaskId("c", 0)]
    runner.message(
        first, {"event": "figures", "records": 10, "offset_commits": 2, "offset_commit_ms_total": 5.0}
    )
    runner.detached(first)  # the executor died: a new attempt counts from zero
    second: Any = _Sent()
    runner.attached(second)
    runner.message(
        second, {"event": "figures", "records": 3, "offset_commits": 1, "offset_commit_ms_total": 1.0}
    )
    assert (runner.counters.records, runner.counters.offset_commits) == (13, 3)
    assert runner.counters.offset_commit_ms_total == pytest.approx(6.0)
    runner.set_paused(True)
    assert second.sent[-1] == {"command": "state", "paused": True}
    runner.message(second, {"event": "failed", "trace": "Traceback ... RuntimeError: boom"})
    assert runner._remote_failure == "Traceback ... RuntimeError: boom"


def test_an_older_attempt_still_connected_is_told_to_stop_when_a_newer_one_connects() -> None:
    runner = _runner()
    runner._running.set()
    older: Any = _Sent()
    newer: Any = _Sent()
    runner.attached(older)
    runner.attached(newer)
    assert older.sent[-1] == {"command": "stop", "timeout_s": 0}
    assert newer.sent == [{"command": "state", "paused": False}]
    runner.detached(older)  # the older one's end changes nothing for the newer
    runner.set_paused(True)
    assert newer.sent[-1] == {"command": "state", "paused": True}


def test_an_attempt_that_connects_after_the_stop_is_told_to_stop() -> None:
    runner = _runner()
    runner._stopping.set()
    late: Any = _Sent()
    runner.attached(late)
    assert late.sent == [{"command": "stop", "timeout_s": 0}]


def test_the_server_listens_only_once_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    created: list[Any] = []
    real = socket.create_server
    monkeypatch.setattr(socket, "create_server", lambda *a, **k: created.append(a) or real(*a, **k))
    server = ChannelServer("127.0.0.1", "127.0.0.1")
    assert created == []
    first = server.register(Recorder())
    second = server.register(Recorder())
    assert len(created) == 1 and first.port == second.port
    assert first.task != second.task and first.secret != second.secret
    server.close()


def test_the_executors_plugin_metrics_show_in_the_workers_registry_and_go_with_the_task() -> None:
    registry = PluginMetricsRegistry()
    runner = _runner(metrics=registry)
    attempt: Any = _Sent()
    task_tags = [["connector", "c"], ["task", "0"]]

    def figures(*samples: list[Any]) -> Message:
        return {"event": "figures", "records": 1, "plugin_metrics": list(samples)}

    runner.message(attempt, figures(["polls", "poll calls", task_tags, 3.0], ["bad"], ["rate", "", [], "x"]))
    [sample] = registry.snapshot()
    assert (sample.name, sample.group, sample.tags, sample.value) == (
        "polls",
        "plugins",
        (("connector", "c"), ("task", "0")),
        3.0,
    )
    runner.message(attempt, figures(["polls", "poll calls", task_tags, 5.0], ["lag", "", task_tags, 1.0]))
    assert {(s.name, s.value) for s in registry.snapshot()} == {("polls", 5.0), ("lag", 1.0)}
    runner.message(attempt, figures(["lag", "", task_tags, 2.0]))  # the plugin removed "polls"
    assert {(s.name, s.value) for s in registry.snapshot()} == {("lag", 2.0)}
    runner.close_plugin_metrics()  # the task stopped: its mirrored metrics go too
    assert registry.snapshot() == ()


def test_a_client_closed_at_once_still_reports_the_end() -> None:
    """The reading thread may start after ``close``: its end must still be reported (None), or the
    attempt's loop would wait for commands forever."""
    server = ChannelServer("127.0.0.1", "127.0.0.1")
    address = server.register(Recorder())
    try:
        for _ in range(5):
            client = ChannelClient(address)
            client.close()
            commands = []
            while (command := client.commands.get(timeout=5)) is not None:
                commands.append(command)
            assert commands in ([], [{"command": "state", "paused": False}])
    finally:
        server.close()
