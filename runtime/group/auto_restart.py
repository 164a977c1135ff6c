"""Self-healing: when a FAILED connector or task this worker runs is restarted by itself, as pure functions.

Why a module of its own, beside the herder: Apache Kafka Connect leaves a FAILED connector or task FAILED
until someone restarts it (Strimzi's operator restarts them from outside, with ``autoRestart.enabled`` and
``maxRestarts``). kconnect can do it in the worker that runs them, off by default as Java's behaviour. The
decision (restart now, schedule a restart, give up, cancel a scheduled one) depends only on what the
worker saw of the entry, its policy, its connector's target state and the time, so it is made here and
table-tested; the shell (``runtime/shell/auto_restarts.py``) feeds it the statuses the worker reports
and carries a restart out through the same herder path as a REST restart.

The rules:

* Only a connector or task running on this worker is tracked; one that moved away is forgotten.
* A failed entry whose connector's target state is not STARTED (a user paused or stopped it) is never
  restarted; a restart already scheduled is cancelled. Resumed, it is scheduled again.
* The n-th automatic restart (n from 0) waits ``min(backoff.max, backoff.initial * 2**n)`` after the
  failure; after ``max.attempts`` restarts the entry stays FAILED with its last trace.
* A user's restart (a RESTARTING this tracker did not cause) starts the count again, and so does an entry
  that has run for ``backoff.max`` since its last restart: a task that fails once a week is not given up
  on after ``max.attempts`` weeks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from enum import StrEnum

from kconnect.runtime.storage.config_log import TargetState
from kconnect.runtime.storage.status_log import State

#: The keys, the same in worker properties and (overriding the worker's) in a connector's config.
ENABLE = "auto.restart.enable"
MAX_ATTEMPTS = "auto.restart.max.attempts"
BACKOFF_INITIAL_MS = "auto.restart.backoff.initial.ms"
BACKOFF_MAX_MS = "auto.restart.backoff.max.ms"
KEYS = (ENABLE, MAX_ATTEMPTS, BACKOFF_INITIAL_MS, BACKOFF_MAX_MS)

_INT32_MAX = 2**31 - 1
_INT64_MAX = 2**63 - 1


@dataclass(frozen=True, slots=True)
class Policy:
    """How a connector and its tasks are restarted (the worker's keys, overridden by the connector's)."""

    enabled: bool = False
    max_attempts: int = 10
    backoff_initial_ms: int = 5000
    backoff_max_ms: int = 300000

    def backoff_ms(self, attempts: int) -> int:
        """The wait before the restart that follows ``attempts`` earlier ones: doubling up to the cap."""
        if self.backoff_initial_ms <= 0:
            return 0
        wait = self.backoff_initial_ms << min(attempts, 62)
        return min(self.backoff_max_ms, wait)


def _parse(key: str, raw: str) -> bool | int:
    """One override value, or ValueError saying what it must be."""
    text = raw.strip()
    if key == ENABLE:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{key} must be true or false, not '{raw}'")
        return text.lower() == "true"
    high = _INT32_MAX if key == MAX_ATTEMPTS else _INT64_MAX
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{key} must be an integer from 0 to {high}, not '{raw}'") from None
    if not 0 <= value <= high:
        raise ValueError(f"{key} must be an integer from 0 to {high}, not '{raw}'")
    return value


def config_errors(config: Mapping[str, str | None]) -> list[str]:
    """What is wrong with a connector config's overrides (checked when the config is written: 400)."""
    errors: list[str] = []
    for key in KEYS:
        raw = config.get(key)
        if raw is None:
            continue
        try:
            _parse(key, raw)
        except ValueError as exc:
            errors.append(str(exc))
    return errors


def policy_for(worker: Policy, config: Mapping[str, str | None] | None) -> Policy:
    """The worker's policy with a connector config's overrides applied (a bad one is ignored: the REST
    layer refuses it, so only a config written by another runtime can hold one)."""
    if not config:
        return worker

    def value(key: str, default: int) -> int:
        raw = config.get(key)
        try:
            return default if raw is None else int(_parse(key, raw))
        except ValueError:
            return default

    return Policy(
        enabled=bool(value(ENABLE, worker.enabled)),
        max_attempts=value(MAX_ATTEMPTS, worker.max_attempts),
        backoff_initial_ms=value(BACKOFF_INITIAL_MS, worker.backoff_initial_ms),
        backoff_max_ms=value(BACKOFF_MAX_MS, worker.backoff_max_ms),
    )


@dataclass(frozen=True, slots=True)
class Entry:
    """What this worker knows of one connector or task it runs, for self-healing."""

    #: Automatic restarts made since the count last started again.
    attempts: int = 0
    #: The last status this worker reported for it is FAILED (and no restart followed yet).
    failed: bool = False
    #: When the scheduled restart is due (ms since the epoch); None when none is scheduled.
    next_attempt_ms: int | None = None
    #: When it was reported RUNNING (None: not running since its last failure or restart).
    running_since_ms: int | None = None
    #: An automatic restart was carried out and its RESTARTING report not seen yet.
    restarting: bool = False
    #: The maximum was reached and reported; nothing more is done until the count starts again.
    gave_up: bool = False


def observe(entry: Entry, state: State, now_ms: int) -> Entry:
    """The worker reported ``state`` for the entry: fold it in.

    A RESTARTING this tracker did not cause is a user's restart: the count starts again.
    """
    if state is State.FAILED:
        if entry.failed:
            return entry  # the same failure reported again (a transition of a failed task, say)
        return replace(entry, failed=True, running_since_ms=None, next_attempt_ms=None)
    if state is State.RUNNING:
        since = entry.running_since_ms if entry.running_since_ms is not None else now_ms
        return replace(entry, failed=False, next_attempt_ms=None, running_since_ms=since, gave_up=False)
    if state is State.RESTARTING:
        return replace(entry, restarting=False) if entry.restarting else Entry()
    return entry


class Verdict(StrEnum):
    """What the shell does for an entry after :func:`decide`."""

    #: Nothing to do now.
    NONE = "none"
    #: A restart is now scheduled: report FAILED again, with the attempts and when the restart is due.
    SCHEDULE = "schedule"
    #: Restart it now (the herder's restart path) and count the attempt.
    RESTART = "restart"
    #: A scheduled restart was called off (paused, stopped, self-healing disabled): report it not due.
    CANCEL = "cancel"
    #: The maximum was reached: report FAILED with the attempts and no restart due; leave it FAILED.
    GIVE_UP = "give_up"
    #: It ran long enough since its last restart: the count starts again (nothing to report).
    RESET = "reset"
    #: No longer run here: forget it.
    FORGET = "forget"


@dataclass(frozen=True, slots=True)
class Decision:
    """The entry after the decision (None: forget it) and what the shell does."""

    entry: Entry | None
    verdict: Verdict


def at_rest(entry: Entry) -> bool:
    """Whether :func:`decide` has nothing to do for an entry still run here, whatever its policy: never
    failed since its count last started and never restarted. Most entries are, so the shell skips them
    instead of reading their connector's policy on every tick (200 tasks made that a tenth of the worker's
    Python time in ``bench/density.py``)."""
    return not entry.failed and entry.attempts == 0


def decide(entry: Entry, policy: Policy, target_state: TargetState, runs_here: bool, now_ms: int) -> Decision:
    """When to restart what: one entry's next step, given what was seen of it, its policy and the time."""
    if not runs_here:
        return Decision(None, Verdict.FORGET)
    scheduled = entry.next_attempt_ms is not None
    if not entry.failed:
        since = entry.running_since_ms
        if entry.attempts > 0 and since is not None and now_ms - since >= policy.backoff_max_ms:
            return Decision(replace(entry, attempts=0, gave_up=False), Verdict.RESET)
        return Decision(entry, Verdict.NONE)
    if not policy.enabled or target_state is not TargetState.STARTED:
        if scheduled:
            return Decision(replace(entry, next_attempt_ms=None), Verdict.CANCEL)
        return Decision(entry, Verdict.NONE)
    if entry.attempts >= policy.max_attempts:
        if entry.gave_up:
            return Decision(entry, Verdict.NONE)
        return Decision(replace(entry, next_attempt_ms=None, gave_up=True), Verdict.GIVE_UP)
    if entry.next_attempt_ms is None:
        due = now_ms + policy.backoff_ms(entry.attempts)
        return Decision(replace(entry, next_attempt_ms=due), Verdict.SCHEDULE)
    if now_ms >= entry.next_attempt_ms:
        restarted = Entry(attempts=entry.attempts + 1, restarting=True)
        return Decision(restarted, Verdict.RESTART)
    return Decision(entry, Verdict.NONE)
