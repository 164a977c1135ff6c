"""The stall watchdog of a sink task's reading: pure decisions, sans-I/O (issue 29).

Why: a sink task can stay RUNNING while it reads nothing. Issue 29 measured one that delivered nothing for
150 s after its partition's leader was SIGKILLed while the source kept writing, every status green. Java's
WorkerSinkTask has no watchdog either; an operator learns of such a stall from an angry downstream.

The watch is fed, every time the task's loop looks (``observe``), with what it knows at that moment:
where its reading stands on each of its partitions (the next offset the reader will hand it), where each
partition ends (the log end offset from a ListOffsets, not the consumer's own cached watermark: a stalled
fetcher's cache is as stale as its position) and how many read records wait in its inbox. From that alone
it decides:

- *progress*: a position moved (forward, or back after a rewind): the clock of the last progress is reset;
- *behind*: some partition ends past its position;
- *stalled*: behind, nothing waiting in the inbox (a task slow to ``put`` is not a reading stall, and its
  partitions may be paused on purpose), and no progress for ``bound_s`` since it was last both caught up
  or moving;
- *re-establish*: stalled, and the last re-establishment (if any) is at least ``bound_s`` old, so a
  reading that stays stuck is re-established once per bound, not on every look; the first time in a
  stall gently (its partitions re-seeked), every later time in the same stall more strongly
  (*escalate*: the shared reader's consumer replaced, new connections and metadata).

The shell (``sink_loop``) does the I/O: asks for the ends, re-seeks the partitions the verdict names,
logs once per re-establishment, and publishes the :class:`Reading` for ``/metrics`` and ``/health``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace

from kconnect.runtime.plugins.api import TopicPartition


@dataclass(frozen=True, slots=True)
class WatchState:
    """What the watch remembers between looks."""

    #: Positions at the last look (next offset to hand the task, per partition).
    positions: Mapping[TopicPartition, int] = field(default_factory=dict)
    #: Monotonic time of the last progress (a position moved), or of the start of the watch.
    progress_at: float = 0.0
    #: Monotonic time since which the task has been behind without moving; None while caught up/moving.
    behind_since: float | None = None
    #: Monotonic time of the last re-establishment of the task's reading; None if never.
    reestablished_at: float | None = None
    #: Re-establishments made so far.
    reestablished: int = 0
    #: Re-establishments made in the current stall (0 once the task moves or catches up).
    this_stall: int = 0


@dataclass(frozen=True, slots=True)
class Verdict:
    """The decision of one look."""

    #: Records past the position per partition (partitions with an unknown end are left out).
    lag: Mapping[TopicPartition, int]
    #: Whether the task's reading is stalled now (named in ``/health``).
    stalled: bool
    #: Seconds the task has been behind without moving (0.0 when not behind).
    stalled_s: float
    #: The partitions to re-establish now; empty when nothing is to be done.
    reestablish: frozenset[TopicPartition]
    #: Whether a re-establishment of this same stall came before and did not help: the next step is
    #: stronger (the shell replaces the consumer rather than re-seeking its partitions).
    escalate: bool = False


def start(now: float) -> WatchState:
    """The watch of a task whose reading begins at ``now``."""
    return WatchState(progress_at=now)


def observe(
    state: WatchState,
    now: float,
    bound_s: float,
    positions: Mapping[TopicPartition, int],
    ends: Mapping[TopicPartition, int],
    waiting: int,
) -> tuple[WatchState, Verdict]:
    """One look at the task's reading (see the module's docstring); returns the new state and the verdict.

    ``positions``: the task's partitions now and the next offset it reads on each; ``ends``: the log end
    offsets known (a partition missing here counts as not behind: no evidence); ``waiting``: records read
    and not yet taken by the task.
    """
    moved = any(
        state.positions.get(tp) != offset for tp, offset in positions.items() if tp in state.positions
    )
    progress_at = now if moved else state.progress_at
    lag = {tp: ends[tp] - offset for tp, offset in positions.items() if tp in ends and ends[tp] > offset}
    behind = bool(lag) and waiting == 0
    if not behind or moved:
        behind_since = None
    else:
        behind_since = state.behind_since if state.behind_since is not None else now
    # The clock runs from the later of the last progress and the first look that found the task behind:
    # a task idle for an hour whose first new record is still being fetched is not stalled.
    stalled_s = 0.0 if behind_since is None else now - max(behind_since, progress_at)
    stalled = behind_since is not None and stalled_s >= bound_s
    due = state.reestablished_at is None or now - state.reestablished_at >= bound_s
    reestablish = frozenset(lag) if stalled and due else frozenset()
    this_stall = 0 if behind_since is None else state.this_stall
    new_state = replace(
        state,
        positions=dict(positions),
        progress_at=progress_at,
        behind_since=behind_since,
        reestablished_at=now if reestablish else state.reestablished_at,
        reestablished=state.reestablished + (1 if reestablish else 0),
        this_stall=this_stall + (1 if reestablish else 0),
    )
    return new_state, Verdict(lag, stalled, stalled_s, reestablish, bool(reestablish) and this_stall > 0)


@dataclass(frozen=True, slots=True)
class Reading:
    """A sink task's reading as ``/metrics`` and ``/health`` show it (copied out of the task's thread)."""

    #: Records past the task's position, summed over its partitions (-1 before the first look).
    lag: int = -1
    #: Wall-clock time (seconds since the epoch) of the task's last progress; 0.0 before its first look.
    last_progress_at: float = 0.0
    #: Whether the reading is stalled now, and for how long (seconds).
    stalled: bool = False
    stalled_s: float = 0.0
    #: The partitions behind when stalled (``topic-partition`` names, sorted).
    partitions: tuple[str, ...] = ()
    #: Re-establishments of the reading so far.
    reestablished: int = 0
    #: Why the task cannot read at all, when that is the stall (its partitions or the group's committed
    #: offsets could not be read for ``sink.task.stall.timeout.ms``: the client's last error); else "".
    cause: str = ""


def unreadable(previous: Reading, failing_s: float, bound_s: float, error: str) -> Reading:
    """The published view of a task that has not been able to begin (or go on) reading for ``failing_s``:
    stalled once that reaches ``bound_s``, whatever its partitions hold, since nothing it reads moves.
    The watch's next look replaces it once reading works again."""
    if failing_s < bound_s:
        return previous
    return replace(previous, stalled=True, stalled_s=failing_s, cause=error)


def reading(state: WatchState, verdict: Verdict, wall_now: float, now: float) -> Reading:
    """The published view of a look: ``wall_now``/``now`` are the same instant on the wall and monotonic
    clocks (the last progress is kept monotonic and shown as wall-clock time)."""
    return Reading(
        lag=sum(verdict.lag.values()),
        last_progress_at=wall_now - (now - state.progress_at),
        stalled=verdict.stalled,
        stalled_s=verdict.stalled_s,
        partitions=tuple(sorted(f"{tp.topic}-{tp.partition}" for tp in verdict.lag))
        if verdict.stalled
        else (),
        reestablished=state.reestablished,
    )
