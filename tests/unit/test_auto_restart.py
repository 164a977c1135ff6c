"""Self-healing (issue 24 item 1): the pure decision as tables, the status record's extra field, the
herder's connector restart, and the shell's tracker fed the statuses a worker reports."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.runtime.group import auto_restart
from kconnect.runtime.group import herder as hd
from kconnect.runtime.group.auto_restart import Decision, Entry, Policy, Verdict, at_rest, decide, observe
from kconnect.runtime.ids import TaskId
from kconnect.runtime.shell.auto_restarts import AutoRestarts
from kconnect.runtime.storage import config_log, status_log
from kconnect.runtime.storage.config_log import ClusterConfigSnapshot, TargetState
from kconnect.runtime.storage.status_log import AutoRestartInfo, State

ON = Policy(enabled=True, max_attempts=3, backoff_initial_ms=1000, backoff_max_ms=5000)
S, P, X = TargetState.STARTED, TargetState.PAUSED, TargetState.STOPPED
FAILED = Entry(failed=True)

# (name, entry, policy, target, runs here, now, expected entry, verdict)
DECISIONS: list[tuple[str, Entry, Policy, TargetState, bool, int, Entry | None, Verdict]] = [
    ("moved away: forgotten", FAILED, ON, S, False, 0, None, Verdict.FORGET),
    ("healthy: nothing", Entry(), ON, S, True, 0, Entry(), Verdict.NONE),
    ("disabled: failed stays failed", FAILED, Policy(), S, True, 0, FAILED, Verdict.NONE),
    ("first failure: scheduled after the initial backoff", FAILED, ON, S, True, 100,
     Entry(failed=True, next_attempt_ms=1100), Verdict.SCHEDULE),
    ("third failure: backoff doubled twice", Entry(attempts=2, failed=True), ON, S, True, 100,
     Entry(attempts=2, failed=True, next_attempt_ms=4100), Verdict.SCHEDULE),
    ("backoff capped", Entry(attempts=2, failed=True), Policy(True, 9, 1000, 3000), S, True, 0,
     Entry(attempts=2, failed=True, next_attempt_ms=3000), Verdict.SCHEDULE),
    ("not due yet", Entry(failed=True, next_attempt_ms=1100), ON, S, True, 1099,
     Entry(failed=True, next_attempt_ms=1100), Verdict.NONE),
    ("due: restarted and counted", Entry(attempts=1, failed=True, next_attempt_ms=1100), ON, S, True, 1100,
     Entry(attempts=2, restarting=True), Verdict.RESTART),
    ("maximum reached: given up once", Entry(attempts=3, failed=True), ON, S, True, 0,
     Entry(attempts=3, failed=True, gave_up=True), Verdict.GIVE_UP),
    ("given up: nothing more", Entry(attempts=3, failed=True, gave_up=True), ON, S, True, 10**9,
     Entry(attempts=3, failed=True, gave_up=True), Verdict.NONE),
    ("maximum 0: never restarted", FAILED, Policy(True, 0, 1000, 5000), S, True, 0,
     Entry(failed=True, gave_up=True), Verdict.GIVE_UP),
    ("paused: not scheduled", FAILED, ON, P, True, 0, FAILED, Verdict.NONE),
    ("stopped: not scheduled", FAILED, ON, X, True, 0, FAILED, Verdict.NONE),
    ("paused while scheduled: cancelled", Entry(attempts=1, failed=True, next_attempt_ms=5), ON, P, True, 10,
     Entry(attempts=1, failed=True), Verdict.CANCEL),
    ("disabled while scheduled: cancelled", Entry(failed=True, next_attempt_ms=5), Policy(), S, True, 10,
     FAILED, Verdict.CANCEL),
    ("running for the cap since the restart: count starts again",
     Entry(attempts=2, running_since_ms=1000), ON, S, True, 6000, Entry(running_since_ms=1000),
     Verdict.RESET),
    ("running, not yet for the cap", Entry(attempts=2, running_since_ms=1000), ON, S, True, 5999,
     Entry(attempts=2, running_since_ms=1000), Verdict.NONE),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "policy", "target", "runs", "now", "expected", "verdict"),
    [d[1:] for d in DECISIONS],
    ids=[d[0] for d in DECISIONS],
)
def test_decide(
    entry: Entry,
    policy: Policy,
    target: TargetState,
    runs: bool,
    now: int,
    expected: Entry | None,
    verdict: Verdict,
) -> None:
    assert decide(entry, policy, target, runs, now) == auto_restart.Decision(expected, verdict)


# (name, entry, state reported, expected entry)
OBSERVATIONS: list[tuple[str, Entry, State, Entry]] = [
    ("a failure", Entry(attempts=1, running_since_ms=5), State.FAILED, Entry(attempts=1, failed=True)),
    ("the same failure again keeps its schedule", Entry(failed=True, next_attempt_ms=9), State.FAILED,
     Entry(failed=True, next_attempt_ms=9)),
    ("running: since now", Entry(attempts=1), State.RUNNING, Entry(attempts=1, running_since_ms=100)),
    ("running again: since the first", Entry(attempts=1, running_since_ms=7), State.RUNNING,
     Entry(attempts=1, running_since_ms=7)),
    ("its own restart", Entry(attempts=2, restarting=True), State.RESTARTING, Entry(attempts=2)),
    ("a user's restart: the count starts again", Entry(attempts=3, failed=True, gave_up=True),
     State.RESTARTING, Entry()),
    ("unassigned: unchanged", Entry(attempts=2, restarting=True), State.UNASSIGNED,
     Entry(attempts=2, restarting=True)),
    ("paused: unchanged", Entry(attempts=1, failed=True), State.PAUSED, Entry(attempts=1, failed=True)),
]  # fmt: skip


@pytest.mark.parametrize(
    ("entry", "state", "expected"), [o[1:] for o in OBSERVATIONS], ids=[o[0] for o in OBSERVATIONS]
)
def test_observe(entry: Entry, state: State, expected: Entry) -> None:
    assert observe(entry, state, 100) == expected


def test_fails_twice_then_runs_then_fails_for_good() -> None:
    """A whole history through observe/decide: two restarts bring it back; later failures use up the rest."""
    entry, now = Entry(), 0
    for attempt in range(2):
        entry = observe(entry, State.FAILED, now)
        d = decide(entry, ON, S, True, now)
        assert d.verdict is Verdict.SCHEDULE and d.entry is not None
        now = d.entry.next_attempt_ms or 0
        d = decide(d.entry, ON, S, True, now)
        assert d.verdict is Verdict.RESTART and d.entry is not None and d.entry.attempts == attempt + 1
        entry = observe(d.entry, State.RESTARTING, now)
    entry = observe(entry, State.RUNNING, now)
    assert decide(entry, ON, S, True, now + 10).verdict is Verdict.NONE
    entry = observe(entry, State.FAILED, now + 10)  # one more attempt is left of three
    d = decide(entry, ON, S, True, now + 10)
    assert d.verdict is Verdict.SCHEDULE and d.entry is not None
    d = decide(d.entry, ON, S, True, 10**9)
    assert d.verdict is Verdict.RESTART and d.entry is not None
    entry = observe(observe(d.entry, State.RESTARTING, 10**9), State.FAILED, 10**9)
    assert decide(entry, ON, S, True, 10**9).verdict is Verdict.GIVE_UP


def test_policy_overrides_and_their_errors() -> None:
    worker = Policy(enabled=False, max_attempts=10, backoff_initial_ms=5000, backoff_max_ms=300000)
    config = {
        "auto.restart.enable": "TRUE",
        "auto.restart.max.attempts": "2",
        "auto.restart.backoff.initial.ms": "100",
        "auto.restart.backoff.max.ms": None,
    }
    assert auto_restart.policy_for(worker, config) == Policy(True, 2, 100, 300000)
    assert auto_restart.policy_for(worker, None) == worker
    bad = {
        "auto.restart.enable": "yes",
        "auto.restart.max.attempts": "-1",
        "auto.restart.backoff.max.ms": "x",
    }
    assert auto_restart.policy_for(worker, bad) == worker  # ignored when read; refused when written
    errors = auto_restart.config_errors(bad)
    assert len(errors) == 3 and "auto.restart.enable must be true or false" in errors[0]
    assert auto_restart.config_errors(config) == []
    assert Policy(True, 9, 0, 10).backoff_ms(5) == 0
    assert Policy(True, 99, 1, 2**62).backoff_ms(80) == 2**62


def test_status_record_carries_auto_restart_beside_java_fields() -> None:
    status = status_log.TaskStatus(
        TaskId("c", 0), State.FAILED, "boom", "w1:8083", 4, "1.0", AutoRestartInfo(2, 1700000000123)
    )
    key, value = status_log.encode(status)
    assert value is not None
    assert b'"auto_restart":{"attempts":2,"next_attempt_ms":1700000000123}' in value
    assert b'"state":"FAILED","trace":"boom","worker_id":"w1:8083","generation":4' in value
    assert status_log.decode(key, value) == status
    given_up = status_log.ConnectorStatus("c", State.FAILED, "t", "w", 1, None, AutoRestartInfo(3, None))
    assert status_log.decode(*status_log.encode(given_up)) == given_up
    plain = status_log.ConnectorStatus("c", State.RUNNING, None, "w", 1)
    assert b"auto_restart" not in (status_log.encode(plain)[1] or b"")
    with pytest.raises(status_log.CorruptRecord):
        status_log.decode(key, value.replace(b'"attempts":2', b'"attempts":"2"'))


def _snapshot(*records: config_log.ConfigRecord) -> ClusterConfigSnapshot:
    return config_log.apply_all(config_log.ConfigState(), [(r, i) for i, r in enumerate(records)]).snapshot()


CONNECTOR = (
    config_log.ConnectorConfig("c", {"connector.class": "X", "name": "c"}),
    config_log.TaskConfig(TaskId("c", 0), {"k": "v"}),
    config_log.TaskCommit("c", 1),
)


def _running(name: str) -> hd.Herder:
    assert name == "c"
    herder = hd.Herder("w1", _snapshot(*CONNECTOR))
    herder.rebalancing = False
    herder.owned_connectors = {name}
    herder.owned_tasks = {TaskId(name, 0)}
    herder._converge()
    return herder


def test_herder_restarts_a_connector_running_here_and_nothing_else() -> None:
    herder = _running("c")
    actions = herder.on_restart_connector("c")
    assert [type(a) for a in actions] == [hd.StopConnector, hd.ReportRestarting, hd.StartConnector]
    assert actions[1] == hd.ReportRestarting("c")
    assert "c" in herder.running_connectors
    assert herder.on_restart_connector("elsewhere") == []


@dataclass
class _Stores:
    """The one call the tracker makes on the stores, and the tracker fed back what it writes."""

    written: list[status_log.ConnectorStatus | status_log.TaskStatus] = field(default_factory=list)
    tracker: AutoRestarts | None = None

    def put_status(self, status: status_log.ConnectorStatus | status_log.TaskStatus) -> None:
        self.written.append(status)
        if self.tracker is not None:
            self.tracker.observe(status, 0)


def test_tracker_schedules_restarts_reports_and_gives_up() -> None:
    herder = _running("c")
    stores = _Stores()
    tracker = AutoRestarts(ON, stores, "w1")  # type: ignore[arg-type]
    stores.tracker = tracker
    task = TaskId("c", 0)
    failed = status_log.TaskStatus(task, State.FAILED, "Traceback: boom", "w1", 3)

    def step(now: int) -> list[object]:
        return list(tracker.step(herder.running_connectors, herder.running_tasks, herder.snapshot, now))

    tracker.observe(status_log.TaskStatus(task, State.FAILED, "from another worker", "w2", 3), 0)
    assert tracker.entry(task) is None
    for attempt in range(3):
        tracker.observe(failed, 0)
        assert step(0) == []  # scheduled, reported
        report = stores.written[-1]
        assert report == status_log.TaskStatus(
            task, State.FAILED, "Traceback: boom", "w1", 3, None, AutoRestartInfo(attempt, 1000 << attempt)
        )
        assert step((1000 << attempt) - 1) == []
        assert step(1000 << attempt) == [task]
        stores.put_status(status_log.TaskStatus(task, State.RESTARTING, None, "w1", 3))
    tracker.observe(failed, 0)
    assert step(0) == []
    assert stores.written[-1].auto_restart == AutoRestartInfo(3, None)  # given up: FAILED, last trace
    assert stores.written[-1].trace == "Traceback: boom"
    count = len(stores.written)
    assert step(10**9) == [] and len(stores.written) == count
    # A user's restart starts the count again.
    stores.put_status(status_log.TaskStatus(task, State.RESTARTING, None, "w1", 3))
    assert tracker.entry(task) == Entry()


def test_tracker_never_restarts_a_paused_connectors_task_and_forgets_what_moved() -> None:
    herder = _running("c")
    stores = _Stores()
    tracker = AutoRestarts(ON, stores, "w1")  # type: ignore[arg-type]
    stores.tracker = tracker
    task = TaskId("c", 0)
    tracker.observe(status_log.TaskStatus(task, State.FAILED, "boom", "w1", 3), 0)
    assert tracker.step(herder.running_connectors, herder.running_tasks, herder.snapshot, 0) == []
    paused = _snapshot(*CONNECTOR, config_log.TargetStateRecord("c", TargetState.PAUSED))
    assert tracker.step(herder.running_connectors, herder.running_tasks, paused, 5000) == []
    assert stores.written[-1].auto_restart == AutoRestartInfo(0, None)  # cancelled
    assert tracker.step(herder.running_connectors, herder.running_tasks, paused, 10**9) == []
    assert tracker.step(herder.running_connectors, set(), herder.snapshot, 10**9) == []
    assert tracker.entry(task) is None


@given(
    entry=st.builds(
        Entry,
        attempts=st.integers(0, 5),
        failed=st.booleans(),
        next_attempt_ms=st.none() | st.integers(0, 10**6),
        running_since_ms=st.none() | st.integers(0, 10**6),
        restarting=st.booleans(),
        gave_up=st.booleans(),
    ),
    enabled=st.booleans(),
    max_attempts=st.integers(0, 5),
    backoff_max_ms=st.integers(0, 10**6),
    target=st.sampled_from(list(TargetState)),
    now_ms=st.integers(0, 2 * 10**6),
)
def test_an_entry_at_rest_needs_no_decision_whatever_its_policy(
    entry: Entry, enabled: bool, max_attempts: int, backoff_max_ms: int, target: TargetState, now_ms: int
) -> None:
    """The shell skips entries at rest that still run here (``at_rest``): ``decide`` must have nothing to
    do for them under any policy, target state or time."""
    policy = Policy(enabled, max_attempts, min(1000, backoff_max_ms), backoff_max_ms)
    decision = decide(entry, policy, target, True, now_ms)
    if at_rest(entry):
        assert decision == Decision(entry, Verdict.NONE)
