"""A member's learners under ``group.protocol=connect``: from the target's learners to what it prepares,
reports ready, activates and discards (the learner seed's warm-up, issue 25; ``handover`` is the
coordinator's side).

Sans-I/O, like the herder that carries it: events in (the target's learners for this member and its
share, a preparation finished or failed, a task about to start), a new :class:`Learning` and actions out:

* :class:`PrepareTask`: warm a task up, touching none of its records: load and instantiate the plugin,
  start the SparkSession, plan the sink query or connect the source's producer, fetch the consumer's group
  positions. It consumes, produces and commits nothing: the task's active owner still runs it.
* :class:`LearnerReady`: the preparation finished; the member says so in its current-assignment record
  (``IsReady``), which is how the coordinator learns it may promote the task.
* :class:`ActivatePreparedTask`: the task the member learned is now its own (the coordinator promoted it,
  its old owner stopped it, and the member's claim was read back): turn the preparation active without
  repeating it.
* :class:`DiscardPreparedTask`: drop a preparation (the learner was dropped, timed out, the config it
  prepared changed, or the task is started cold anyway).

Why a learner can never run a task: nothing here starts one. Only the reconciler's ``start`` (a claim read
back with nobody else listing the task) makes a task active; this module only decides whether that start
reuses a preparation.

Each preparation is numbered (``attempt``), as connector instances are, so that a late answer for a
preparation discarded since changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from kconnect.runtime.group.group_records import Learner, TargetAssignmentValue
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.config_log import Properties, TargetState

__all__ = [
    "ActivatePreparedTask",
    "DiscardPreparedTask",
    "LearnerAction",
    "LearnerReady",
    "Learning",
    "Preparation",
    "PrepareTask",
    "discard_all",
    "on_preparation_failed",
    "on_prepared",
    "on_start",
    "on_target",
    "reported",
    "targeted",
]


# --------------------------------------------------------------------------------------------- actions


@dataclass(frozen=True, slots=True)
class PrepareTask:
    """Warm ``task`` up with ``config`` without touching its records; answer with ``attempt``."""

    task: TaskId
    config: Properties
    attempt: int


@dataclass(frozen=True, slots=True)
class LearnerReady:
    """``task``'s preparation finished: the member's next record says the learner is ready."""

    task: TaskId


@dataclass(frozen=True, slots=True)
class ActivatePreparedTask:
    """``task`` is this member's now: turn preparation ``attempt`` into the running task, with ``config``
    (the one it was prepared with) and ``target_state``, in place of a ``StartTask``."""

    task: TaskId
    config: Properties
    target_state: TargetState
    attempt: int


@dataclass(frozen=True, slots=True)
class DiscardPreparedTask:
    """Drop preparation ``attempt`` of ``task`` (whatever it holds is released; nothing was written)."""

    task: TaskId
    attempt: int


LearnerAction = PrepareTask | LearnerReady | ActivatePreparedTask | DiscardPreparedTask


# --------------------------------------------------------------------------------------------- state


@dataclass(frozen=True, slots=True)
class Preparation:
    """One task being learned (or learned and waiting for its promotion to take effect)."""

    #: The learner it prepares for (the target's, by its ``since_ms``).
    since_ms: int
    config: Properties
    attempt: int
    ready: bool = False
    #: The data plane said the preparation failed: the learner stays unready until it is dropped.
    failed: bool = False


@dataclass(frozen=True, slots=True)
class Learning:
    """What a member learns: task -> its preparation."""

    tasks: Mapping[TaskId, Preparation] = field(default_factory=lambda: MappingProxyType({}))
    #: The last preparation number handed out.
    last_attempt: int = 0

    def _with(self, tasks: Mapping[TaskId, Preparation], last_attempt: int | None = None) -> Learning:
        return replace(
            self,
            tasks=MappingProxyType(dict(tasks)),
            last_attempt=self.last_attempt if last_attempt is None else last_attempt,
        )


def targeted(target: TargetAssignmentValue | None, member_id: str) -> frozenset[Learner]:
    """The learners ``target`` asks ``member_id`` for (none without a target or an entry)."""
    for member in target.members if target is not None else ():
        if member.member_id == member_id:
            return member.learners
    return frozenset()


def reported(learning: Learning, learners: frozenset[Learner]) -> frozenset[Learner]:
    """The learners as the member's record lists them: the target's, each ready when its preparation (for
    that learner) finished."""
    out = set()
    for learner in learners:
        prep = learning.tasks.get(learner.task)
        ready = prep is not None and prep.ready and prep.since_ms == learner.since_ms
        out.add(Learner(learner.task, ready, learner.since_ms))
    return frozenset(out)


def on_target(
    learning: Learning,
    learners: frozenset[Learner],
    share: frozenset[TaskId],
    configs: Mapping[TaskId, Properties],
) -> tuple[Learning, list[PrepareTask | DiscardPreparedTask]]:
    """The member read a target: prepare the learners it asks for, discard what it no longer wants.

    ``share`` is the member's active share in that target: a learned task that left the learners for the
    share was promoted, and its preparation waits there for the task's start. ``configs`` are the
    committed task configs; a learner whose config is not known yet is not prepared (it stays unready,
    and the coordinator drops it at its deadline), and one whose config changed is prepared again.
    """
    tasks = dict(learning.tasks)
    last = learning.last_attempt
    actions: list[PrepareTask | DiscardPreparedTask] = []
    wanted = {x.task: x for x in learners}
    for task in sorted(tasks):
        prep = tasks[task]
        learner = wanted.get(task)
        keep = (
            learner is not None and learner.since_ms == prep.since_ms and configs.get(task) == prep.config
        ) or (learner is None and task in share and prep.ready and configs.get(task) == prep.config)
        if not keep:
            del tasks[task]
            if not prep.failed:  # a failed one was released when it failed
                actions.append(DiscardPreparedTask(task, prep.attempt))
    for task, learner in sorted(wanted.items()):
        config = configs.get(task)
        if task in tasks or config is None:
            continue
        last += 1
        tasks[task] = Preparation(learner.since_ms, config, last)
        actions.append(PrepareTask(task, config, last))
    return learning._with(tasks, last), actions


def on_prepared(learning: Learning, task: TaskId, attempt: int) -> tuple[Learning, list[LearnerReady]]:
    """Preparation ``attempt`` of ``task`` finished: the learner is ready (a stale answer changes nothing)."""
    prep = learning.tasks.get(task)
    if prep is None or prep.attempt != attempt or prep.ready or prep.failed:
        return learning, []
    return learning._with({**learning.tasks, task: replace(prep, ready=True)}), [LearnerReady(task)]


def on_preparation_failed(
    learning: Learning, task: TaskId, attempt: int
) -> tuple[Learning, list[DiscardPreparedTask]]:
    """Preparation ``attempt`` of ``task`` failed: release it; the learner stays unready until the
    coordinator drops it at its deadline and moves the task the plain way (where it may fail for real,
    and be reported as any task failure is)."""
    prep = learning.tasks.get(task)
    if prep is None or prep.attempt != attempt or prep.failed:
        return learning, []
    failed = replace(prep, ready=False, failed=True)
    return learning._with({**learning.tasks, task: failed}), [DiscardPreparedTask(task, attempt)]


def on_start(
    learning: Learning, task: TaskId, config: Properties, target_state: TargetState
) -> tuple[Learning, ActivatePreparedTask | DiscardPreparedTask | None]:
    """``task`` is about to start here as active: activate its preparation when one is ready for this very
    config; else discard any preparation (None: there is none) and let the caller start it cold."""
    prep = learning.tasks.get(task)
    if prep is None:
        return learning, None
    rest = {t: p for t, p in learning.tasks.items() if t != task}
    if prep.ready and prep.config == config:
        return learning._with(rest), ActivatePreparedTask(task, prep.config, target_state, prep.attempt)
    return learning._with(rest), (None if prep.failed else DiscardPreparedTask(task, prep.attempt))


def discard_all(learning: Learning) -> tuple[Learning, list[DiscardPreparedTask]]:
    """Drop every preparation (leaving, or the group back on classic rounds)."""
    actions = [
        DiscardPreparedTask(task, prep.attempt)
        for task, prep in sorted(learning.tasks.items())
        if not prep.failed
    ]
    return learning._with({}), actions
