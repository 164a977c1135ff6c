"""The actions the herder returns: what the worker shell carries out (start, stop, report, write, rejoin).

Why apart from ``herder``: the herder decides, the shell acts, and these frozen values are the whole
contract between the two (the shell's ``Worker._execute_one`` matches on them; tests compare them). Each
says what to do and carries what doing it needs, never how: no I/O here.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from kconnect.runtime.group import group_records
from kconnect.runtime.group.learner import ActivatePreparedTask, DiscardPreparedTask, PrepareTask
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.config_log import Properties, TargetState
from kconnect.runtime.storage.status_log import State

__all__ = [
    "AbandonConnector",
    "Action",
    "ActivatePreparedTask",
    "CatchUpConfig",
    "DiscardPreparedTask",
    "PrepareTask",
    "PublishTaskConfigs",
    "ReadyToLeave",
    "ReportConnector",
    "ReportRestarting",
    "ReportUnassigned",
    "RequestRejoin",
    "RequestTaskConfigs",
    "ResetActiveTopics",
    "StartConnector",
    "StartTask",
    "StopConnector",
    "StopTask",
    "TransitionConnector",
    "TransitionTask",
    "WriteGroupRecords",
]


@dataclass(frozen=True, slots=True)
class StartConnector:
    """Create a connector instance owned here, started only if its target state is STARTED."""

    name: str
    config: Properties
    target_state: TargetState
    #: Which instance this is (the herder numbers them): what the instance's thread answers with, so an
    #: answer from an instance stopped or abandoned since is told apart. Not compared: it names the
    #: instance, not the decision.
    attempt: int = field(default=0, compare=False)


@dataclass(frozen=True, slots=True)
class StopConnector:
    """Stop a connector instance here (released, reassigned elsewhere, deleted or restarting)."""

    name: str


@dataclass(frozen=True, slots=True)
class StartTask:
    """Hand a task owned here to the executor, with its committed config and target state."""

    task: TaskId
    config: Properties
    target_state: TargetState


@dataclass(frozen=True, slots=True)
class StopTask:
    """Stop a task here before anyone else may start it (the rule every rebalance keeps).

    ``acknowledge`` (a task released under reconciliation): the shell stops it without holding up what
    follows and tells the herder once it has stopped (``Herder.on_tasks_stopped``), which releases it in
    the member's record then; until then the herder keeps listing it. Otherwise the stop is finished
    before the shell carries out the next action. Not compared: it says how, not what.
    """

    task: TaskId
    acknowledge: bool = field(default=False, compare=False)


@dataclass(frozen=True, slots=True)
class PublishTaskConfigs:
    """Task configs a connector owned here computed, differing from the committed ones."""

    connector: str
    configs: tuple[Mapping[str, str], ...]


@dataclass(frozen=True, slots=True)
class RequestRejoin:
    """Rejoin the group after ``delay_ms`` (0: at once)."""

    reason: str
    delay_ms: int = 0


@dataclass(frozen=True, slots=True)
class CatchUpConfig:
    """Read the config topic to at least ``offset`` before anything else, then rejoin."""

    offset: int


@dataclass(frozen=True, slots=True)
class ReadyToLeave:
    """A leaving worker holds nothing any more: it can send LeaveGroup and exit."""


@dataclass(frozen=True, slots=True)
class ResetActiveTopics:
    """A deleted connector's work stopped here: forget the topics it used (KIP-558), as Java's herder
    does for revoked work of connectors no longer configured, so that a new connector of the same name
    starts with none."""

    connector: str


@dataclass(frozen=True, slots=True)
class TransitionConnector:
    """A connector running here moves to a new target state (Java's ``Worker.setTargetState``).

    STARTED starts the connector instance if it is not started and reports RUNNING; PAUSED and
    STOPPED stop the instance and report PAUSED or STOPPED. The instance is kept, so a resume needs no
    rebalance.
    """

    name: str
    target_state: TargetState


@dataclass(frozen=True, slots=True)
class TransitionTask:
    """A task held here moves to a new target state; the executor reports the state that results."""

    task: TaskId
    target_state: TargetState


@dataclass(frozen=True, slots=True)
class ReportUnassigned:
    """Write UNASSIGNED, with ``reason``, for static connectors and tasks no live worker lists (KIP-987).

    Only the leader that computed the round knows them; it reports them once the round completed, in the
    generation it completed (``generation``), so a status reader sees why they do not run.
    """

    connectors: frozenset[str]
    tasks: frozenset[TaskId]
    reason: str
    generation: int


@dataclass(frozen=True, slots=True)
class ReportRestarting:
    """Write RESTARTING for a connector (``task`` None) or one of its tasks, between its stop and start."""

    connector: str
    task: TaskId | None = None


@dataclass(frozen=True, slots=True)
class WriteGroupRecords:
    """Write group records (``group.protocol=connect``): a member's acknowledgement and claims, or the
    coordinating leader's epochs, target and fencing tombstones. ``epoch`` is the group epoch the leader
    wrote (-1 for a member's own record)."""

    records: tuple[tuple[group_records.RecordKey, group_records.RecordValue | None], ...]
    epoch: int = -1


@dataclass(frozen=True, slots=True)
class ReportConnector:
    """Write a connector's status (its instance's call answered, failed or timed out); ``trace`` with
    FAILED."""

    name: str
    state: State
    trace: str | None = None


@dataclass(frozen=True, slots=True)
class RequestTaskConfigs:
    """Ask the connector instance ``attempt`` for its task configs, on its own thread."""

    name: str
    attempt: int


@dataclass(frozen=True, slots=True)
class AbandonConnector:
    """A call of instance ``attempt`` of a connector ran past ``connector.method.timeout.ms``: never give
    its thread work again; whatever it answers later is ignored."""

    name: str
    attempt: int


Action = (
    StartConnector
    | StopConnector
    | StartTask
    | StopTask
    | PrepareTask
    | ActivatePreparedTask
    | DiscardPreparedTask
    | PublishTaskConfigs
    | RequestRejoin
    | CatchUpConfig
    | ReadyToLeave
    | ResetActiveTopics
    | TransitionConnector
    | TransitionTask
    | ReportRestarting
    | ReportUnassigned
    | WriteGroupRecords
    | ReportConnector
    | RequestTaskConfigs
    | AbandonConnector
)
