"""A table sink's commit round whose last steps run beside the next micro-batch (the task's round thread).

Why: a trickle's cycle was a micro-batch (reading, converting, sampling schemas: Spark jobs) and then its
commit round (for Iceberg with many tables, mostly their appends in one JVM call), one after the other, so
a record waited up to a batch plus a round past its due time. The appends need nothing of the batch's
frames once the tables' files are written, so they can run while the next batch is read and converted.

What keeps it exactly once: a round's bookkeeping (the offsets ``pre_commit`` answers, the staged files
removed, the timings) is done only once all its steps have ended (:meth:`RoundThread.settle`); the task
settles the round before anything that builds on it (the next batch, commit, close, maintenance), so
rounds never overlap; a round that failed raises at every later settle, failing the task (its rows are in
no snapshot, so no offset past them may reach Kafka: a restart reads them again and each table drops
what its snapshots say it holds).
"""

from __future__ import annotations

import contextvars
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

#: A commit's step left to run beside the next batch: it answers the errors of the tables it attempted.
Deferred = Callable[[], list[BaseException]]


def run_steps(steps: list[Deferred]) -> float:
    """Run a commit's deferred steps, each attempted; answer when they ended, or raise the first error."""
    errors: list[BaseException] = []
    for step in steps:
        try:
            errors.extend(step())
        except Exception as exc:
            errors.append(exc)
    if errors:
        raise errors[0]
    return time.time()


@dataclass(frozen=True)
class InFlight:
    """A round on the thread: ``ended`` answers when its steps ended (or raises the first error); then
    ``finish`` does its bookkeeping given that time, or, if it failed, ``undo`` puts back what it took
    (the staged batches it covered)."""

    ended: Future[float]
    finish: Callable[[float], None]
    undo: Callable[[], None]


class RoundThread:
    """At most one round in flight, on a thread of its own (made when first needed)."""

    def __init__(self) -> None:
        self._pool: ThreadPoolExecutor | None = None
        self.flight: InFlight | None = None
        self.failed: BaseException | None = None

    def submit(
        self, steps: list[Deferred], finish: Callable[[float], None], undo: Callable[[], None]
    ) -> None:
        """Run ``steps`` on the thread (in the caller's log context and Spark local properties)."""
        from pyspark.util import inheritable_thread_target

        if self.flight is not None:
            raise RuntimeError("a commit round is already in flight: settle it first")
        if self._pool is None:
            self._pool = ThreadPoolExecutor(1, thread_name_prefix="kconnect-table-round")
        ended = self._pool.submit(contextvars.copy_context().run, inheritable_thread_target(run_steps), steps)
        self.flight = InFlight(ended, finish, undo)

    def settle(self, wait: bool) -> bool:
        """Take the round's outcome if it has ended (or, ``wait``, once it has): its bookkeeping done;
        True when no round is in flight any more. A round that failed raises, now and at every later call."""
        if self.failed is not None:
            raise self.failed
        flight = self.flight
        if flight is None:
            return True
        if not wait and not flight.ended.done():
            return False
        self.flight = None
        try:
            ended = flight.ended.result()
        except BaseException as exc:
            flight.undo()
            self.failed = exc
            raise
        flight.finish(ended)
        return True

    def shutdown(self) -> None:
        """Let a round in flight end (its files are in the task's scratch directory), then drop it: what it
        committed is in its tables' snapshots, which a task resuming reads."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
        self.flight = None
