"""Bounded plugin calls (issue 24 item 2): the registry's watchdog step, the bounded wait a validation
uses, and a connector instance whose ``start()`` hangs, on the shell's side (no worker, no broker).

The watchdog's step takes the time it judges by, so no test waits for a bound to pass on a clock.
"""

from __future__ import annotations

import threading
import time
from typing import Any, cast

import pytest

from kconnect.runtime.plugins.api import SourceConnector, Task
from kconnect.runtime.plugins.config_def import ConfigDef
from kconnect.runtime.plugins.plugin_calls import PluginCall, PluginCalls, PluginCallTimeout
from kconnect.runtime.plugins.registry import PluginRegistry
from kconnect.runtime.shell.connectors import ConnectorCallDone, ConnectorCallTimedOut, Connectors
from kconnect.runtime.shell.view import health
from kconnect.runtime.storage.config_log import TargetState

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


class _Stores:
    def put_status(self, status: Any) -> None:
        pass

    def snapshot(self) -> Any:
        return type("Snapshot", (), {"contains": staticmethod(lambda name: True)})()


def test_a_hanging_start_returns_at_once_times_out_and_its_late_answer_is_dropped() -> None:
    RELEASE.clear()
    plugins = PluginRegistry()
    plugins.register(HangingSource)
    calls = PluginCalls()
    answers: list[object] = []
    connectors = Connectors(
        plugins,
        cast(Any, _Stores()),
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
