"""Bounded plugin calls (issue 24 item 2): the registry's watchdog step, the bounded wait a validation
uses, and a connector instance whose ``start()`` hangs, on the shell's side (no worker, no broker).

The watchdog's step takes the time it judges by, so no test waits for a bound to pass on a clock.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any, cast

import pytest

from kconnect.runtime.dataplane.task_runner import TaskFenced, TaskRunner
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import SinkRecord, SinkTask, SourceConnector, Task, TopicPartition
from kconnect.runtime.plugins.config_def import ConfigDef
from kconnect.runtime.plugins.plugin_calls import PluginCall, PluginCalls, PluginCallTimeout
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.connectors import ConnectorCallDone, ConnectorCallTimedOut, Connectors
from kconnect.runtime.shell.view import health
from kconnect.runtime.storage.config_log import TargetState
from tests.support.connector_stores import FoldedStores

RELEASE = threading.Event()


def test_a_call_past_its_bound_is_abandoned_once_and_listed_until_it_returns() -> None:
    calls = PluginCalls()
    seen: list[tuple[PluginCall, float]] = []
    call = calls.begin("task a-0", "poll", 5.0, lambda c, elapsed: seen.append((c, elapsed)))
    assert calls.check(call.started + 4.9) == [] and calls.blocked() == []
    assert calls.check(call.started + 5.0) == [call]
    assert calls.check(call.started + 60.0) == []  # told once
    assert [c for c, _ in seen] == [call] and seen[0][1] == pytest.approx(5.0)
    blocked = calls.blocked(call.started + 12.0)
    assert blocked == [
        {
            "plugin": "task a-0",
            "method": "poll()",
            "blocked_s": 12.0,
            "message": "poll() of task a-0 has not returned after 12.0 s",
        }
    ]
    assert calls.end(call) is True  # a late return: its result must be ignored
    assert calls.blocked() == []


def test_a_call_that_returns_in_time_is_never_abandoned() -> None:
    calls = PluginCalls()
    with calls.bounded("connector a", "start", 5.0) as call:
        pass
    assert calls.check(call.started + 100) == [] and not call.abandoned


def test_a_bounded_wait_gives_up_naming_the_call_and_lists_the_thread_as_blocked() -> None:
    calls = PluginCalls()
    gate = threading.Event()
    with pytest.raises(PluginCallTimeout, match=r"validate\(\) of connector class Hang has not returned"):
        calls.run_bounded("connector class Hang", "validate", 0.2, gate.wait)
    assert [b["plugin"] for b in calls.blocked()] == ["connector class Hang"]
    status, body = health(None, True, 0.0, False, calls.blocked())
    assert status == 200 and cast(Any, body["blocked_plugin_calls"])[0]["method"] == "validate()"
    gate.set()
    assert calls.run_bounded("connector class Quick", "validate", 5.0, lambda: 42) == 42


def test_a_bounded_call_passes_on_what_the_plugin_raised() -> None:
    def boom() -> None:
        raise ValueError("bad config")

    with pytest.raises(ValueError, match="bad config"):
        PluginCalls().run_bounded("connector class X", "validate", 5.0, boom)


def test_a_call_made_from_within_another_is_the_one_abandoned_told_and_listed() -> None:
    calls = PluginCalls()
    told: list[str] = []
    tell = lambda c, elapsed: told.append(c.method)  # noqa: E731
    with calls.bounded("task s-0", "pre_commit", 5.0, tell) as outer:
        with calls.bounded("task s-0", "flush", 5.0, tell) as inner:
            assert inner.outer is outer and outer.inner is inner
            # Both past their bound: only the innermost, where the thread is stuck, is abandoned.
            assert calls.check(inner.started + 5.0) == [inner] and told == ["flush"]
            assert [b["method"] for b in calls.blocked(inner.started + 6.0)] == ["flush()"]
        assert outer.inner is None
        # The flush returned (late) and pre_commit is still in flight past its bound: its turn now.
        assert calls.check(outer.started + 7.0) == [outer] and told == ["flush", "pre_commit"]
    assert calls.blocked() == []


def test_an_inner_call_that_returns_in_time_leaves_its_outer_call_bounded_as_any() -> None:
    calls = PluginCalls()
    with calls.bounded("task s-0", "pre_commit", 5.0) as outer:
        with calls.bounded("task s-0", "flush", 5.0):
            pass
        assert calls.check(outer.started + 5.0) == [outer]


def test_calls_of_other_subjects_or_threads_are_not_nested() -> None:
    calls = PluginCalls()
    with (
        calls.bounded("connector a", "start", 5.0) as connector_call,
        calls.bounded("task a-0", "start", 5.0) as task_call,
    ):
        assert task_call.outer is None and connector_call.inner is None
        elsewhere: list[PluginCall] = []
        thread = threading.Thread(target=lambda: elsewhere.append(calls.begin("task a-0", "poll", 5.0)))
        thread.start()
        thread.join()
        assert elsewhere[0].outer is None
        later = max(c.started for c in (connector_call, task_call, elsewhere[0])) + 5.0
        assert set(calls.check(later)) == {connector_call, task_call, elsewhere[0]}


def test_a_sink_task_whose_flush_hangs_in_pre_commit_is_failed_naming_flush() -> None:
    gate = threading.Event()

    class FlushHangs(SinkTask):
        def version(self) -> str:
            return "1"

        def start(self, props: Mapping[str, str]) -> None:
            pass

        def put(self, records: Sequence[SinkRecord]) -> None:
            pass

        def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
            gate.wait(30)

        def stop(self) -> None:
            pass

    failures: list[str] = []
    runner = TaskRunner(TaskId("s", 0), FlushHangs(), {}, lambda task, trace: failures.append(trace))
    calls = PluginCalls()
    runner.bound_calls(calls, 5.0)
    task = cast(Any, runner.task)
    raised: list[BaseException] = []

    def pre_commit() -> None:
        try:
            task.pre_commit({TopicPartition("t", 0): 1})
        except BaseException as exc:
            raised.append(exc)

    thread = threading.Thread(target=pre_commit, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while len(calls._calls) < 2 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert {c.method for c in calls._calls} == {"pre_commit", "flush"}
    calls.check(max(c.started for c in calls._calls) + 5.0)
    (trace,) = failures
    assert trace.startswith("flush() of task s-0 has not returned after 5.0 s (task.method.timeout.ms)")
    assert "gate.wait(30)" in trace and runner.fenced
    assert [b["method"] for b in calls.blocked()] == ["flush()"]
    gate.set()
    thread.join(10)
    assert calls.blocked() == []
    assert [type(e) for e in raised] == [TaskFenced]  # the late flush's return is not passed on


class HangingSource(SourceConnector):
    """``start()`` blocks until the test releases it."""

    def version(self) -> str:
        return "1"

    def config_def(self) -> ConfigDef:
        return ConfigDef()

    def start(self, props: dict[str, str]) -> None:
        RELEASE.wait(30)

    def task_class(self) -> type[Task]:
        raise NotImplementedError

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [{}]

    def stop(self) -> None:
        pass


def test_a_hanging_start_returns_at_once_times_out_and_its_late_answer_is_dropped() -> None:
    RELEASE.clear()
    plugins = PluginRegistry()
    plugins.register(HangingSource)
    calls = PluginCalls()
    answers: list[object] = []
    connectors = Connectors(
        plugins,
        cast(Any, FoldedStores()),
        cast(Any, None),
        "w1",
        "http://w1",
        generation=lambda: 1,
        request_reconfigure=lambda name: None,
        stopping=threading.Event(),
        post=answers.append,
        plugin_calls=calls,
        method_timeout_s=30.0,
    )
    connectors.start("hang", {"connector.class": "HangingSource"}, TargetState.STARTED, 1, attempt=3)
    # The caller (the herder's thread) is back at once; the call runs on the instance's thread.
    deadline = time.monotonic() + 10
    while not calls._calls and time.monotonic() < deadline:
        time.sleep(0.01)
    (call,) = calls._calls
    assert call.thread is not threading.current_thread() and call.method == "start"
    connectors.transition("hang", TargetState.PAUSED, 1)  # queued behind the stuck start
    calls.check(call.started + 30.0)
    (timed_out,) = answers
    assert isinstance(timed_out, ConnectorCallTimedOut)
    assert (timed_out.name, timed_out.attempt, timed_out.method) == ("hang", 3, "start")
    assert "RELEASE.wait" in timed_out.stack  # where it was blocked
    RELEASE.set()
    thread = connectors._running["hang"].thread
    assert thread._thread.join(10) is None and not thread._thread.is_alive()
    # Neither the late start's answer nor the queued transition reached the herder.
    assert not [a for a in answers if isinstance(a, ConnectorCallDone)]
