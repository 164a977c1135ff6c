"""The herder's handling of what connector instances answer from their own threads (issue 24 item 2).

A connector's ``start()``, ``stop()`` and ``task_configs()`` run off the herder's thread; their outcomes
come back as events naming the instance (``StartConnector.attempt``). These tests replay those events:
an answer of the current instance is reported; one of an instance stopped, replaced or abandoned since
changes nothing; a call past ``connector.method.timeout.ms`` fails the connector with a trace naming the
method and how long it has been stuck, and nothing starts the instance again until a restart.
"""

from __future__ import annotations

from kconnect.runtime.group.herder import (
    AbandonConnector,
    Herder,
    PublishTaskConfigs,
    ReportConnector,
    RequestTaskConfigs,
    StartConnector,
    StopConnector,
)
from kconnect.runtime.storage import config_log
from kconnect.runtime.storage.config_log import RestartRequest, TargetState
from kconnect.runtime.storage.status_log import State
from tests.unit.test_herder_operations import ConfigTopic, assignment, running, statuses


def started_attempt(h: Herder, name: str = "a") -> int:
    return h.connector_attempts[name]


def test_each_started_instance_gets_its_own_attempt() -> None:
    topic = ConfigTopic()
    topic.connector("a", 0)
    topic.connector("b", 0)
    h = Herder("w1", topic.state.snapshot())
    actions = h.on_rebalanced(1, "m1", "sessioned", assignment(("a", "b"), ()), statuses(State.RUNNING))
    starts = [a for a in actions if isinstance(a, StartConnector)]
    assert [s.name for s in starts] == ["a", "b"]
    assert len({s.attempt for s in starts}) == 2
    assert {s.name: s.attempt for s in starts} == h.connector_attempts


def test_a_start_that_returned_reports_running_and_asks_its_instance_for_task_configs() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    h = running(topic, ())
    attempt = started_attempt(h)
    assert h.on_connector_call_done("a", attempt, "start", TargetState.STARTED) == [
        ReportConnector("a", State.RUNNING),
        RequestTaskConfigs("a", attempt),
    ]


def test_a_start_into_paused_or_a_pause_reports_the_state_without_asking_for_task_configs() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1, initial=TargetState.PAUSED)
    h = running(topic, ())
    attempt = started_attempt(h)
    assert h.on_connector_call_done("a", attempt, "start", TargetState.PAUSED) == [
        ReportConnector("a", State.PAUSED)
    ]
    assert h.on_connector_call_done("a", attempt, "stop", TargetState.STOPPED) == [
        ReportConnector("a", State.STOPPED)
    ]


def test_a_start_that_raised_is_failed_with_its_trace() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    h = running(topic, ())
    assert h.on_connector_call_done(
        "a", started_attempt(h), "start", TargetState.STARTED, "Traceback: boom"
    ) == [ReportConnector("a", State.FAILED, "Traceback: boom")]


def test_a_start_timed_out_fails_the_connector_naming_the_method_and_abandons_the_instance() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    h = running(topic, ())
    attempt = started_attempt(h)
    actions = h.on_connector_call_timed_out("a", attempt, "start", 30.04, stack='  File "plugin.py", line 9')
    assert actions[0] == AbandonConnector("a", attempt)
    report = actions[1]
    assert isinstance(report, ReportConnector) and report.state is State.FAILED
    assert report.trace is not None
    assert report.trace.startswith("start() of connector a has not returned after 30.0 s")
    assert 'File "plugin.py", line 9' in report.trace
    assert len(actions) == 2
    # Its late answers change nothing: no RUNNING over the FAILED, no task configs published.
    assert h.on_connector_call_done("a", attempt, "start", TargetState.STARTED) == []
    assert h.on_task_configs("a", [{"task": "new"}], attempt) == []
    # Nothing starts it again by itself: another config event converges to no new start.
    assert not [a for a in h.on_config(topic.state.snapshot()) if isinstance(a, StartConnector)]


def test_a_timed_out_connector_restarts_as_a_new_instance_on_a_restart_request() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    h = running(topic, ())
    old = started_attempt(h)
    h.on_connector_call_timed_out("a", old, "start", 31.0)
    h.statuses = statuses(State.FAILED)
    actions = h.on_config(topic.write(RestartRequest("a", include_tasks=False, only_failed=True)))
    assert StopConnector("a") in actions
    restart = next(a for a in actions if isinstance(a, StartConnector))
    assert restart.attempt != old and h.connector_attempts["a"] == restart.attempt
    # The old instance's late start still counts for nothing; the new one's does.
    assert h.on_connector_call_done("a", old, "start", TargetState.STARTED) == []
    assert h.on_connector_call_done("a", restart.attempt, "start", TargetState.STARTED)[0] == ReportConnector(
        "a", State.RUNNING
    )


def test_a_stop_that_hangs_only_abandons_its_thread() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    h = running(topic, ())
    attempt = started_attempt(h)
    actions = h.on_config(topic.write(config_log.ConnectorDeletion("a")))
    assert StopConnector("a") in actions
    assert h.on_connector_call_timed_out("a", attempt, "stop", 30.0) == [AbandonConnector("a", attempt)]


def test_task_configs_of_a_replaced_instance_are_not_published() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    h = running(topic, ())
    old = started_attempt(h)
    new_config = {"connector.class": "x", "name": "a", "changed": "yes"}
    actions = h.on_config(topic.write(config_log.ConnectorConfig("a", new_config)))
    new = next(a for a in actions if isinstance(a, StartConnector)).attempt
    assert h.on_task_configs("a", [{"task": "stale"}], old) == []
    assert h.on_task_configs("a", [{"task": "fresh"}], new) == [PublishTaskConfigs("a", ({"task": "fresh"},))]


def test_a_task_configs_call_timed_out_fails_the_connector() -> None:
    topic = ConfigTopic()
    topic.connector("a", 1)
    h = running(topic, ())
    actions = h.on_connector_call_timed_out("a", started_attempt(h), "task_configs", 45.0)
    report = actions[-1]
    assert isinstance(report, ReportConnector) and report.state is State.FAILED
    assert report.trace is not None and report.trace.startswith(
        "task_configs() of connector a has not returned after 45.0 s"
    )
