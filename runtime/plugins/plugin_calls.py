"""Plugin calls in flight, the time bound each has, and the ones abandoned past it.

Why: a connector's ``start()``, ``stop()``, ``task_configs()`` or ``validate()`` and a task's ``start()``,
``poll()``, ``put()``, ``flush()`` or ``stop()`` are user code, and one that hangs must hold up nothing but
itself (KAFKA-15563: in Java a connector whose ``start()`` hangs stops the herder, every rebalance
decision and every REST write of its worker). Every such call runs off the herder's thread, registered
here with its bound (``connector.method.timeout.ms``, ``task.method.timeout.ms``); a watchdog thread
notices a call past its bound and tells its owner (``on_timeout``), which fails the connector or task.

A Python thread cannot be killed: a call past its bound is marked *abandoned*, its thread is never given
work again, and its owner ignores whatever it returns later (a task's late records are fenced). The
abandoned calls that have still not returned are what ``GET /health`` lists as blocked.
"""

from __future__ import annotations

import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TypeVar

from kconnect.runtime import logs

log = logs.get(__name__)

T = TypeVar("T")

#: How often the watchdog looks at the calls in flight: a bound is kept to within this much.
WATCHDOG_INTERVAL_S = 0.5


class PluginCallTimeout(Exception):
    """A plugin call ran past its bound (raised to a caller that waits for it, such as a validation)."""


@dataclass(eq=False)
class PluginCall:
    """One call of a plugin method in flight on ``thread``."""

    #: Whose method it is, as an operator names it: "connector src", "task src-0", "connector class X".
    subject: str
    method: str
    timeout_s: float
    started: float
    thread: threading.Thread
    #: Called once, on the watchdog's thread, when the call passes its bound (with the seconds elapsed).
    on_timeout: Callable[[PluginCall, float], None] | None = None
    abandoned: bool = False
    returned: bool = False
    context: dict[str, str] = field(default_factory=dict)
    #: The call of the same subject this one was made from, on the same thread, if any.
    outer: PluginCall | None = None
    #: The call made from within this one that is in flight now: until it returns, it stands for this one.
    inner: PluginCall | None = None

    def elapsed(self, now: float | None = None) -> float:
        """Seconds since the call began."""
        return (time.monotonic() if now is None else now) - self.started

    def describe(self, elapsed_s: float) -> str:
        """The one line an operator reads in a status trace or a log."""
        return f"{self.method}() of {self.subject} has not returned after {elapsed_s:.1f} s"

    def stack(self) -> str:
        """Where the call's thread is now (empty once it ended): the first thing an operator needs to
        tell a plugin's bug from a slow system it waits for."""
        frame = sys._current_frames().get(self.thread.ident or -1)
        return "".join(traceback.format_stack(frame)) if frame is not None else ""


class PluginCalls:
    """The worker's registry of plugin calls in flight, with the watchdog that keeps their bounds."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: set[PluginCall] = set()
        self._watchdog: threading.Thread | None = None
        #: Each thread's calls in flight, outermost first (begin and end run on the calling thread).
        self._local = threading.local()

    def _thread_calls(self) -> list[PluginCall]:
        calls: list[PluginCall] | None = getattr(self._local, "calls", None)
        if calls is None:
            calls = self._local.calls = []
        return calls

    def begin(
        self,
        subject: str,
        method: str,
        timeout_s: float,
        on_timeout: Callable[[PluginCall, float], None] | None = None,
        **context: str,
    ) -> PluginCall:
        """Register a call the current thread is about to make (from within ``outer``, this thread's
        innermost call in flight, when that is a call of the same subject)."""
        mine = self._thread_calls()
        outer = mine[-1] if mine and mine[-1].subject == subject else None
        call = PluginCall(
            subject,
            method,
            timeout_s,
            time.monotonic(),
            threading.current_thread(),
            on_timeout,
            context=context,
            outer=outer,
        )
        with self._lock:
            self._calls.add(call)
            if outer is not None:
                outer.inner = call
        mine.append(call)
        return call

    def end(self, call: PluginCall) -> bool:
        """The call returned (or raised); True when it had been abandoned, so its result must be ignored."""
        mine = self._thread_calls()
        if call in mine:
            mine.remove(call)
        with self._lock:
            self._calls.discard(call)
            call.returned = True
            abandoned = call.abandoned
            if call.outer is not None and call.outer.inner is call:
                call.outer.inner = None
        if abandoned:
            log.warning(
                "abandoned plugin call returned at last; its result is ignored",
                plugin_call=call.describe(call.elapsed()).replace("has not returned", "returned"),
                **call.context,
            )
        return abandoned

    @contextmanager
    def bounded(
        self,
        subject: str,
        method: str,
        timeout_s: float,
        on_timeout: Callable[[PluginCall, float], None] | None = None,
        **context: str,
    ) -> Iterator[PluginCall]:
        """``begin``/``end`` around a block that makes the call."""
        call = self.begin(subject, method, timeout_s, on_timeout, **context)
        try:
            yield call
        finally:
            self.end(call)

    def check(self, now: float | None = None) -> list[PluginCall]:
        """Abandon the calls past their bound and tell their owners; returns them. The watchdog's step.

        A call with a call of its own in flight (``inner``) waits: the inner one is where it is stuck."""
        now = time.monotonic() if now is None else now
        with self._lock:
            overdue = [
                c
                for c in self._calls
                if not c.abandoned and c.inner is None and c.elapsed(now) >= c.timeout_s
            ]
            for call in overdue:
                call.abandoned = True
        for call in sorted(overdue, key=lambda c: c.started):
            elapsed = call.elapsed(now)
            log.error(
                "plugin call past its bound; its thread is abandoned",
                plugin_call=call.describe(elapsed),
                **call.context,
            )
            if call.on_timeout is not None:
                try:
                    call.on_timeout(call, elapsed)
                except Exception as exc:  # the watchdog must survive an owner's failure
                    log.error("could not fail the owner of a blocked plugin call", error=str(exc))
        return overdue

    def blocked(self, now: float | None = None) -> list[dict[str, object]]:
        """The abandoned calls that have still not returned, oldest first (``GET /health`` lists them)."""
        now = time.monotonic() if now is None else now
        with self._lock:
            stuck = sorted((c for c in self._calls if c.abandoned), key=lambda c: c.started)
        return [
            {
                "plugin": call.subject,
                "method": f"{call.method}()",
                "blocked_s": round(call.elapsed(now), 1),
                "message": call.describe(call.elapsed(now)),
            }
            for call in stuck
        ]

    def start_watchdog(self, stopping: threading.Event, interval_s: float = WATCHDOG_INTERVAL_S) -> None:
        """Check the bounds every ``interval_s`` on a thread of its own until ``stopping`` is set: not on
        the herder's thread, so a task's bound is kept even while the herder is busy."""
        if self._watchdog is not None:
            return

        def watch() -> None:
            while not stopping.wait(interval_s):
                self.check()

        self._watchdog = threading.Thread(target=watch, name="plugin-call-watchdog", daemon=True)
        self._watchdog.start()

    def run_bounded(
        self, subject: str, method: str, timeout_s: float, fn: Callable[[], T], **context: str
    ) -> T:
        """Run ``fn`` on a thread of its own and wait at most ``timeout_s`` for it; past that raise
        :class:`PluginCallTimeout` and leave the thread abandoned (listed as blocked until it returns).

        For a caller that needs the answer (a REST validation): it waits no longer than the bound, and the
        thread it would otherwise have lost is one that only this call ever uses."""
        done = threading.Event()
        outcome: list[T] = []
        failure: list[BaseException] = []
        started = threading.Event()
        holder: list[PluginCall] = []

        def run() -> None:
            call = self.begin(subject, method, timeout_s, None, **context)
            holder.append(call)
            started.set()
            try:
                outcome.append(fn())
            except BaseException as exc:
                failure.append(exc)
            finally:
                self.end(call)
                done.set()

        threading.Thread(target=run, name=f"plugin-{method}", daemon=True).start()
        started.wait()
        if not done.wait(timeout_s):
            call = holder[0]
            with self._lock:
                late = call.returned
                call.abandoned = not late
            if not late:
                elapsed = call.elapsed()
                log.error(
                    "plugin call past its bound; its thread is abandoned",
                    plugin_call=call.describe(elapsed),
                    **context,
                )
                raise PluginCallTimeout(call.describe(elapsed))
            done.wait()
        if failure:
            raise failure[0]
        return outcome[0]
