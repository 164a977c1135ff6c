"""How many source hosts a worker runs on a Spark cluster, and which host runs which source task (pure).

Why hosts (issue 32): a source task that is a Spark job of its own holds an executor core for as long as
it runs, so a cluster of two cores ran two source tasks, and a third (and every sink's micro-batch) waited
for ever. A source *host* is one long-running Spark job of one Spark task whose Python worker runs many
source tasks, each on a thread (``source_hosts``). How many hosts, and where each task goes, is decided
here, from plain figures, so the rules are tested with tables:

- :func:`host_slots`: how many Spark tasks the application can run at once (its cores divided by
  ``spark.task.cpus``).
- :func:`host_count`: one host per ``tasks_per_host`` source tasks, at least one while there is a source
  task, and never every slot the application has: at least one slot stays for sink batches (with a single
  slot there is one host anyway, and the worker warns: that application has no core for sink batches).
- :func:`place`: waiting tasks go to the least loaded live host (a task's load is one plus its records per
  second over ``RECORDS_PER_LOAD``, so an idle task weighs one and a busy one more); then, while the
  heaviest host carries more than ``SLACK`` over the lightest, the largest task whose move does not tip
  the balance the other way (twice its load at most the gap) moves from the one to the other (a new host
  fills this way), at most ``max_moves`` per round, as every move restarts a task.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

#: Source tasks one host is planned for before another is asked for (they are threads polling mostly
#: idle sources: the bound is the Python worker's, not a core's).
TASKS_PER_HOST = 64
#: Records per second that weigh as much as one more task on a host.
RECORDS_PER_LOAD = 200.0
#: How much more one host may carry than another before a task moves (one idle task's worth): moves
#: restart tasks, so near-even is even enough.
SLACK = 1.0
#: Moves per round of placement at most.
MAX_MOVES = 4


def host_slots(cores: int, task_cpus: int = 1) -> int:
    """Spark tasks the application runs at once: its cores over ``spark.task.cpus`` (at least one)."""
    return max(1, cores // max(1, task_cpus))


def host_count(source_tasks: int, slots: int, tasks_per_host: int = TASKS_PER_HOST) -> int:
    """Hosts wanted for ``source_tasks`` on an application of ``slots`` task slots (see module docstring)."""
    if source_tasks <= 0:
        return 0
    wanted = math.ceil(source_tasks / max(1, tasks_per_host))
    return max(1, min(wanted, slots - 1))


def task_load(records_per_s: float) -> float:
    """One task's weight on its host: an idle task 1, plus its records per second over RECORDS_PER_LOAD."""
    return 1.0 + max(0.0, records_per_s) / RECORDS_PER_LOAD


@dataclass(frozen=True)
class Placement:
    """One round's decisions: tasks to start on a host, and running tasks to move to another host."""

    starts: dict[str, str] = field(default_factory=dict)
    moves: dict[str, str] = field(default_factory=dict)


def place(
    hosts: Mapping[str, Mapping[str, float]],
    waiting: Mapping[str, float],
    max_moves: int = MAX_MOVES,
    slack: float = SLACK,
) -> Placement:
    """Where waiting tasks start and which running tasks move (module docstring).

    ``hosts``: each live host's running tasks and their loads; ``waiting``: tasks on no host, with their
    loads. Deterministic: ties go to the host with fewer tasks, then the smaller name; heavier tasks are
    placed first.
    """
    if not hosts:
        return Placement()
    tasks: dict[str, dict[str, float]] = {h: dict(t) for h, t in hosts.items()}

    def weight(host: str) -> tuple[float, int, str]:
        return (sum(tasks[host].values()), len(tasks[host]), host)

    starts: dict[str, str] = {}
    for task, load in sorted(waiting.items(), key=lambda item: (-item[1], item[0])):
        host = min(tasks, key=weight)
        tasks[host][task] = load
        starts[task] = host
    moves: dict[str, str] = {}
    while len(moves) < max_moves:
        heavy, light = max(tasks, key=weight), min(tasks, key=weight)
        gap = sum(tasks[heavy].values()) - sum(tasks[light].values())
        movable = [
            (load, task)
            for task, load in tasks[heavy].items()
            if task not in starts and task not in moves and gap > slack and 2 * load <= gap
        ]
        if heavy == light or not movable:
            break
        load, task = max(movable)
        del tasks[heavy][task]
        tasks[light][task] = load
        moves[task] = light
    return Placement(starts, moves)
