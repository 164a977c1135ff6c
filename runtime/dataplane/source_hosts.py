"""Source hosts: long-running Spark jobs that each run many executor-placed source tasks (issue 32).

Why: a source task that was a Spark job of its own held an executor core for as long as it ran, so the
number of source tasks on a cluster was capped by its cores, idle or not, and sink micro-batches found no
core once source tasks had taken them all. A host is one Spark job of one Spark task (in the FAIR pool
``HOSTS_POOL``) whose Python worker runs the source tasks the worker places on it, each task's loop on a
thread of its own (``spark_source._run_attempt``, as a task's own Spark job ran it). How many hosts and
which host runs which task are decided in ``source_host_plan`` (pure); this module is its shell.

The host's end (:func:`run_host`) connects to the worker over the task channel with a name and secret of
its own, as a task does, and is told ``{"command": "start", "job": ...}`` (the task's ``SourceJob``,
pickled as Spark would have pickled it; the host takes it only from the worker whose certificate its own
job pins) and ``{"command": "retire"}``; it says ``{"event": "ended", "task": ..., "ended": ...}`` when a
task's thread returns. Each hosted task then opens its own connection with its own secret, exactly as
before, so status, pause and resume, stop, figures, plugin metrics and active topics keep going through
``SparkSourceRunner``, and exactly-once fencing is the task's own producer's, unchanged.

The worker's end (:class:`SourceHosts`) keeps the hosts' jobs submitted (each on a thread of its own,
waiting for its job), places waiting tasks on live hosts, moves tasks to a host that came, and puts a lost
host's tasks back to waiting: an executor that dies ends its host's connection, those tasks start again
on another host (Spark also runs the host's Spark task again elsewhere), from their offsets in Kafka.
"""

from __future__ import annotations

import base64
import contextlib
import json
import pickle
import queue
import threading
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from kconnect.runtime import logs
from kconnect.runtime.dataplane import source_host_plan
from kconnect.runtime.dataplane.scheduler_pools import SOURCE_HOSTS_POOL
from kconnect.runtime.dataplane.task_channel import (
    ChannelAddress,
    ChannelClient,
    ChannelServer,
    Connection,
    Message,
    TaskHandler,
)

log = logs.get(__name__)

#: The FAIR scheduler pool of the hosts' jobs (``scheduler_pools`` configures it).
HOSTS_POOL = SOURCE_HOSTS_POOL
#: How often the worker's end looks at its hosts and tasks when nothing woke it.
ROUND_S = 1.0
#: How often tasks may move between hosts (a move restarts a task).
MOVE_EVERY_S = 10.0
#: How long a host that stops waits for its tasks' threads to return.
HOST_DRAIN_S = 30.0
#: How long after a host's job failed before another is submitted in its place.
RESUBMIT_S = 5.0
#: How often the worker's end looks for executors that came (to start their Python daemon early).
WARM_EVERY_S = 5.0


@dataclass(frozen=True)
class HostJob:
    """What a host's Spark task needs: its name, its channel address, the log level."""

    host: str
    channel: ChannelAddress
    log_level: str


# --------------------------------------------------------------------------------------- executor side


def run_host(jobs: Iterator[HostJob]) -> Iterator[str]:
    """The host's Spark task (``mapPartitions`` over its one job): runs the tasks the worker starts here,
    until told to retire with none left or the worker's end goes away; then waits for its tasks' threads
    (each stops as it would when its own connection ends) and yields one JSON line of how it ended."""
    from kconnect.runtime.dataplane import spark_source

    for job in jobs:
        spark_source.configure_logs(job.log_level)
        logs.bind(host=job.host)
        client = ChannelClient(job.channel)
        threads: dict[str, threading.Thread] = {}
        retiring = False
        ended = "worker gone"
        try:
            client.send({"event": "host", "executor": spark_source.executor_id()})
            log.info("source host running in a Spark task", executor=spark_source.executor_id())
            while True:
                threads = {name: t for name, t in threads.items() if t.is_alive()}
                if retiring and not threads:
                    ended = "retired"
                    break
                try:
                    command = client.commands.get(timeout=1.0)
                except queue.Empty:
                    continue
                if command is None:
                    break
                if command.get("command") == "start":
                    source_job = pickle.loads(base64.b64decode(str(command["job"])))
                    name = source_job.channel.task
                    thread = threading.Thread(
                        target=_hosted, args=(client, source_job), name=f"source-{source_job.task_id}"
                    )
                    thread.daemon = True
                    threads[name] = thread
                    thread.start()
                elif command.get("command") == "retire":
                    retiring = True
        finally:
            deadline = time.monotonic() + HOST_DRAIN_S
            for thread in threads.values():
                thread.join(max(0.0, deadline - time.monotonic()))
            client.close()
        yield json.dumps({"host": job.host, "ended": ended})


def warm_up(rows: Iterator[Any]) -> Iterator[str]:
    """A warm-up Spark task: loads what a host needs in the executor's Python (and, by being Python, starts
    the executor's daemon, which forks every later Python worker already loaded: ``python_daemon``)."""
    from kconnect.runtime.dataplane import spark_source

    for _ in rows:
        yield str(spark_source.executor_id())


def _hosted(host: ChannelClient, job: Any) -> None:
    """One hosted task's thread: its attempt, on its own connection, then the word to the worker."""
    from kconnect.runtime.dataplane import spark_source

    ended: Any = {"ended": "no answer"}
    try:
        for line in spark_source.run_source_job(iter([job])):
            ended = json.loads(line)
    except Exception:  # the attempt could not even connect: the worker's end restarts it
        ended = {"ended": "failed", "trace": traceback.format_exc()}
    host.send({"event": "ended", "task": job.channel.task, "ended": ended})


# ----------------------------------------------------------------------------------------- worker side


@dataclass
class _Hosted:
    """A task the hosts run: its job (pickled), its load, where it runs and how its attempts ended."""

    name: str
    job: str
    load: Callable[[], float]
    stop_attempt: Callable[[], None]
    stopping: threading.Event
    host: str | None = None
    moving: bool = False
    ended: list[str] = field(default_factory=list)
    done: bool = False


class _Host(TaskHandler):
    """One host on the worker's side: its job's thread and its connection."""

    def __init__(self, owner: SourceHosts, name: str) -> None:
        self.owner = owner
        self.name = name
        self.connection: Connection | None = None
        self.executor: str | None = None
        self.thread: threading.Thread | None = None
        self.address: ChannelAddress | None = None
        self.retired = False
        self.failed_at = 0.0

    def attached(self, connection: Connection) -> None:
        with self.owner._lock:
            previous, self.connection = self.connection, connection
        if previous is not None:  # an older attempt of this host still connected: its tasks are lost
            previous.close()
        if self.retired:
            connection.send({"command": "retire"})
        self.owner._wake.set()

    def message(self, connection: Connection, message: Message) -> None:
        event = message.get("event")
        if event == "host":
            self.executor = str(message.get("executor"))
            log.info("source host connected", host=self.name, executor=self.executor)
        elif event == "ended":
            self.owner._ended(self.name, str(message.get("task")), message.get("ended"))

    def detached(self, connection: Connection) -> None:
        with self.owner._lock:
            if self.connection is not connection:
                return
            self.connection = None
        if self.retired:
            log.info("source host retired", host=self.name)
            self.owner._lost(self.name)
            return
        # Lost: its executor died (or the connection did). Its tasks go back to waiting and a new host is
        # submitted at once, on whatever executor has a free slot, rather than waiting until Spark's
        # driver learns that the executor is gone and runs this host's Spark task again.
        self.retired = True
        self.failed_at = time.monotonic()
        log.warning("source host lost; a new host is submitted and its tasks start there", host=self.name)
        self.owner._lost(self.name, abandon=True)


class SourceHosts:
    """The worker's source hosts (module docstring): ``run`` places a task and waits for it to end."""

    def __init__(
        self,
        spark: Callable[[], Any],
        channel: ChannelServer,
        slots: Callable[[], int],
        log_level: str,
        tasks_per_host: int = source_host_plan.TASKS_PER_HOST,
    ) -> None:
        self._spark = spark
        self._channel = channel
        self._slots = slots
        self._log_level = log_level
        self._tasks_per_host = tasks_per_host
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._wake = threading.Event()
        self._hosts: dict[str, _Host] = {}
        self._tasks: dict[str, _Hosted] = {}
        self._next_host = 0
        self._next_moves = 0.0
        self._closed = False
        self._warned_one_slot = False
        self._manager: threading.Thread | None = None
        #: Executors whose Python was warmed (by count: a new one makes the count grow), and when to look.
        self._warmed = 0
        self._next_warm = 0.0
        self._warming: threading.Thread | None = None

    # --- what runners call

    def run(
        self,
        address: ChannelAddress,
        job: Any,
        load: Callable[[], float],
        stop_attempt: Callable[[], None],
        stopping: threading.Event,
    ) -> list[str]:
        """Run the task whose job is ``job`` on a host until it ends (how, as its Spark job's result
        said), or until ``stopping`` is set while it runs on no host."""
        hosted = _Hosted(
            address.task, base64.b64encode(pickle.dumps(job)).decode(), load, stop_attempt, stopping
        )
        with self._lock:
            if self._closed:
                return ["the worker is stopping"]
            self._tasks[hosted.name] = hosted
            self._ensure_manager()
        self._wake.set()
        try:
            with self._changed:
                while not hosted.done:
                    if stopping.is_set() and hosted.host is None:
                        return ["stopped before it ran on a host"]
                    self._changed.wait(0.5)
                return hosted.ended
        finally:
            with self._lock:
                self._tasks.pop(hosted.name, None)
            self._wake.set()

    def where(self) -> dict[str, str | None]:
        """Each task's host (None while it waits), for the log and the tests."""
        with self._lock:
            return {t.name: t.host for t in self._tasks.values()}

    def hosts(self) -> dict[str, str | None]:
        """Each host's executor (None until it connected)."""
        with self._lock:
            return {h.name: (h.executor if h.connection is not None else None) for h in self._hosts.values()}

    def close(self) -> None:
        """Retire every host (their tasks were stopped before) and wait briefly for their jobs."""
        with self._lock:
            self._closed = True
            hosts = list(self._hosts.values())
        self._wake.set()
        for host in hosts:
            host.retired = True
            if host.connection is not None:
                host.connection.send({"command": "retire"})
        deadline = time.monotonic() + 10.0
        for host in hosts:
            if host.thread is not None:
                host.thread.join(max(0.0, deadline - time.monotonic()))
        if self._warming is not None and self._warming.is_alive():
            with contextlib.suppress(Exception):
                self._spark().sparkContext.cancelJobGroup(f"{HOSTS_POOL}-warm-up")
        for host in hosts:
            if host.thread is not None and host.thread.is_alive():
                with contextlib.suppress(Exception):
                    self._spark().sparkContext.cancelJobGroup(f"{HOSTS_POOL}-{host.name}")
            if host.address is not None:
                self._channel.unregister(host.address)

    # --- what hosts' handlers call

    def _ended(self, host: str, task: str, ended: Any) -> None:
        with self._changed:
            hosted = self._tasks.get(task)
            if hosted is None or hosted.host != host:
                return
            hosted.host = None
            if hosted.moving and not hosted.stopping.is_set():
                hosted.moving = False  # it starts on its new host in the next round
            else:
                hosted.ended = [json.dumps(ended)]
                hosted.done = True
            self._changed.notify_all()
        self._wake.set()

    def _lost(self, host: str, abandon: bool = False) -> None:
        """The host's connection ended: its tasks wait for a live host. A host lost (``abandon``: not
        retired) has its Spark job cancelled, so that Spark's retry of its Spark task does not come back to
        take a slot beside its replacement."""
        with self._changed:
            for hosted in self._tasks.values():
                if hosted.host == host:
                    hosted.host, hosted.moving = None, False
            self._changed.notify_all()
        self._wake.set()
        if abandon:
            with contextlib.suppress(Exception):
                self._spark().sparkContext.cancelJobGroup(f"{HOSTS_POOL}-{host}")

    # --- the manager's rounds

    def _ensure_manager(self) -> None:
        if self._manager is None or not self._manager.is_alive():
            self._manager = threading.Thread(target=self._manage, name="source-hosts", daemon=True)
            self._manager.start()

    def _manage(self) -> None:
        while True:
            self._wake.wait(ROUND_S)
            self._wake.clear()
            with self._lock:
                if self._closed:
                    return
            try:
                self._round()
            except Exception as exc:  # a round must never end the manager
                log.warning("source hosts: a round of placement failed", error=str(exc))

    def _round(self) -> None:
        slots = self._slots()
        with self._lock:
            tasks = list(self._tasks.values())
            wanted = source_host_plan.host_count(len(tasks), slots, self._tasks_per_host)
            if slots < 2 and tasks and not self._warned_one_slot:
                self._warned_one_slot = True
                log.warning(
                    "the Spark application has one task slot: its one source host leaves no core for sink "
                    "batches; give it at least two cores (spark.cores.max)",
                    slots=slots,
                )
            now = time.monotonic()
            for name, host in list(self._hosts.items()):
                if host.thread is not None and not host.thread.is_alive() and host.connection is None:
                    del self._hosts[name]
                    if host.address is not None:
                        self._channel.unregister(host.address)
            active = [h for h in self._hosts.values() if not h.retired]
            submit = max(0, wanted - len(active))
            # Surplus hosts retire once empty; a host that connected is kept over one still waiting.
            busy = {t.host for t in tasks if t.host is not None}
            for host in sorted(active, key=lambda h: (h.connection is not None, h.name))[
                : max(0, len(active) - wanted)
            ]:
                if host.name not in busy:
                    host.retired = True
                    if host.connection is not None:
                        host.connection.send({"command": "retire"})
            live = {h.name: h for h in self._hosts.values() if h.connection is not None and not h.retired}
            loads = {t.name: source_host_plan.task_load(t.load()) for t in tasks}
            on_hosts: dict[str, dict[str, float]] = {h: {} for h in live}
            waiting: dict[str, float] = {}
            for t in tasks:
                if t.done or (t.stopping.is_set() and t.host is None):
                    continue
                if t.host is None:
                    waiting[t.name] = loads[t.name]
                elif t.host in on_hosts and not t.moving:
                    on_hosts[t.host][t.name] = loads[t.name]
            moves_due = now >= self._next_moves
            plan = source_host_plan.place(on_hosts, waiting, source_host_plan.MAX_MOVES if moves_due else 0)
            if plan.moves:
                self._next_moves = now + MOVE_EVERY_S
            starts: list[tuple[_Host, _Hosted]] = []
            for name, host_name in plan.starts.items():
                hosted = self._tasks[name]
                hosted.host = host_name
                starts.append((live[host_name], hosted))
            moving = [self._tasks[name] for name in plan.moves]
            for hosted in moving:
                hosted.moving = True
        for _ in range(submit):
            self._submit(now)
        if tasks:
            self._warm(now)
        for host, hosted in starts:
            connection = host.connection
            if connection is None or not connection.send({"command": "start", "job": hosted.job}):
                with self._lock:
                    if hosted.host == host.name:
                        hosted.host = None
                continue
            log.info("source task placed on a host", task=hosted.name, host=host.name, executor=host.executor)
        for hosted in moving:
            log.info("source task moves to a lighter host", task=hosted.name, host=plan.moves[hosted.name])
            hosted.stop_attempt()

    def _warm(self, now: float) -> None:
        """Start the Python daemon on executors that came since the last look, with a small job of one
        Spark task per executor (they run on the free executors; a host's own is busy, and warm already).
        Why: an executor's first Python task pays for starting Python and loading PySpark and kconnect,
        which on a busy machine took most of the 20 s before a lost host's tasks ran again elsewhere; with
        the daemon up a new host costs a fork."""
        if now < self._next_warm or (self._warming is not None and self._warming.is_alive()):
            return
        self._next_warm = now + WARM_EVERY_S
        try:
            context = self._spark().sparkContext
            executors = max(
                0, len(context._jsc.sc().statusTracker().getExecutorInfos()) - 1
            )  # less the driver
        except Exception:  # a session being stopped: the next look tries again
            return
        if executors <= self._warmed:
            self._warmed = executors  # some went: one that comes back is warmed again
            return
        self._warmed = executors
        self._warming = threading.Thread(
            target=self._run_warm_up, args=(context, executors), name="source-hosts-warm-up", daemon=True
        )
        self._warming.start()

    def _run_warm_up(self, context: Any, executors: int) -> None:
        try:
            context.setJobGroup(f"{HOSTS_POOL}-warm-up", "kconnect executors' Python warm-up", True)
            context.setLocalProperty("spark.scheduler.pool", HOSTS_POOL)
            warmed = context.parallelize(range(executors), executors).mapPartitions(warm_up).collect()
            log.info(
                "executors' Python warmed for source hosts", executors=executors, ran_on=sorted(set(warmed))
            )
        except Exception as exc:
            log.info("executors' Python warm-up did not finish", error=str(exc)[-500:])

    def _submit(self, now: float) -> None:
        """A new host: its channel name and secret, and its Spark job on a thread of its own."""
        with self._lock:
            name = f"host-{self._next_host}"
            self._next_host += 1
            host = _Host(self, name)
            self._hosts[name] = host
        host.address = self._channel.register(host)
        job = HostJob(name, host.address, self._log_level)
        host.thread = threading.Thread(target=self._run_host_job, args=(host, job), name=f"source-{name}")
        host.thread.daemon = True
        host.thread.start()
        log.info("source host submitted", host=name)

    def _run_host_job(self, host: _Host, job: HostJob) -> None:
        try:
            context = self._spark().sparkContext
            context.setJobGroup(f"{HOSTS_POOL}-{host.name}", f"kconnect {host.name}", interruptOnCancel=True)
            context.setLocalProperty("spark.scheduler.pool", HOSTS_POOL)
            ended = context.parallelize([job], 1).mapPartitions(run_host).collect()
            log.info("source host job ended", host=host.name, ended=ended)
        except Exception as exc:
            if host.failed_at:  # lost and cancelled: its replacement was submitted already
                log.info("source host job cancelled after its host was lost", host=host.name)
            else:
                log.warning(
                    "source host job failed; another is submitted", host=host.name, error=str(exc)[-2000:]
                )
                time.sleep(RESUBMIT_S)
        finally:
            host.retired = True
            self._wake.set()


def application_slots(settings: Mapping[str, str], default_parallelism: int) -> int:
    """The application's task slots: ``spark.cores.max`` when set (its own bound), else what the
    SparkContext counts (``defaultParallelism``: the executors' cores, at least two), over
    ``spark.task.cpus``."""
    configured = settings.get("spark.cores.max", "").strip()
    cores = int(configured) if configured.isdigit() and int(configured) > 0 else default_parallelism
    task_cpus = settings.get("spark.task.cpus", "1").strip()
    return source_host_plan.host_slots(cores, int(task_cpus) if task_cpus.isdigit() else 1)
