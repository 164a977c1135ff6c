"""KIP-987's test plan, live: placement after every step on light workers, then the data on Spark.

Issue 4's "done when". The seed's system test rolls a ``sessioned`` cluster to ``static`` and then adds
static workers (one for a connector, one for a task, one duplicating both), removes a wildcard worker,
adds static workers for the rest and removes the remaining wildcard workers. After each step this test
waits until the group has settled and asserts where every connector and task runs (a static job on a
worker that lists it, nothing else on static workers). The connectors are a verifiable source (2 tasks)
writing a topic that a verifiable sink (2 tasks) reads.

Placement is the assignor's and the herder's business, not Spark's: the plan's workers hold their tasks
without running them (``tests/support/held_worker.py``, no JVM), so every step costs a rebalance, not a
SparkSession. The data is checked once, at the end, on one worker that runs its tasks on Spark: a static
worker listing every job joins the static-only cluster the plan left (step 4 keeps every job where it
runs, so nothing moves to it), then the plan's workers leave one at a time and their jobs move to it
while data flows. The sink task that moves last arrives after its partition has records no sink task has
read (its held instance read none), and every seqno the source had acknowledged must reach the sink's
file (duplicates are allowed, at-least-once, and printed).

The embedded test broker (Tansu) cannot roll protocols: it never re-selects the group protocol after the
first generation (README "Tests"), so a live ``sessioned`` -> ``static`` roll is impossible on it (on
Apache Kafka the group switches when the last ``sessioned`` member has been restarted). The test
therefore starts its wildcard workers with ``connect.protocol=static`` and no static lists, a group the
README (and ``test_a_static_group_without_static_workers_is_assigned_exactly_like_sessioned``) says is
assigned exactly as ``sessioned``: here that shows as the cooperative, balanced shape. The "roll" is a
rolling restart of those workers with the same settings; the plan goes on from there.

Beyond the plan, one cheap step: the static worker of a connector that another static worker also lists
is stopped, and the connector moves to that worker.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.connectors.verifiable import Verification, expected_from_last, seen_in_lines, verify
from kconnect.runtime.cli.broker import free_port
from tests.integration.test_verifiable_e2e import duplicate_origins, last_acked
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, wait_nudging, wait_until, worker_properties

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]  # seven workers, one SparkSession

PARTITIONS = 2
THROUGHPUT = 20  # records per second per source task: light on the shared broker and loaded machines
CONNECTORS = ("src", "sink")
TASKS = 2  # per connector
JOBS = frozenset([*CONNECTORS, *(f"{c}-{n}" for c in CONNECTORS for n in range(TASKS))])

Placement = dict[str, str]  # job ("src", "src-0", ...) -> worker name


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines() if path.exists() else []


class Plan:
    """The cluster, the two verifiable files and the settled placement after each step."""

    def __init__(self, workdir: Path, bootstrap: str) -> None:
        self.workdir = workdir
        self.bootstrap = bootstrap
        self.group = f"plan-{uuid.uuid4().hex[:8]}"
        self.started = time.monotonic()
        self.topic = f"seq-{uuid.uuid4().hex[:6]}"
        self.source_file = workdir / "source.jsonl"
        self.sink_file = workdir / "sink.jsonl"
        self.workers: dict[str, WorkerProcess] = {}
        self.configs = {
            "src": {
                "connector.class": "VerifiableSourceConnector",
                "topic": self.topic,
                "tasks.max": str(TASKS),
                "throughput": str(THROUGHPUT),
                "file": str(self.source_file),
            },
            "sink": {
                "connector.class": "VerifiableSinkConnector",
                "topics": self.topic,
                "tasks.max": str(TASKS),
                "file": str(self.sink_file),
            },
        }

    def add(
        self, name: str, static_connectors: str = "", static_tasks: str = "", *, spark: bool = False
    ) -> WorkerProcess:
        """A worker of the plan's group: held tasks (no JVM), or with ``spark`` the product's own worker."""
        props = worker_properties(
            self.bootstrap,
            self.group,
            free_port(),
            connect_protocol="static",
            scheduled_rebalance_max_delay_ms=3000,
        )
        if spark:
            props.update(
                {
                    "spark.master": "local[1]",
                    "spark.ui.enabled": "false",
                    "spark.sql.shuffle.partitions": "1",
                    "offset.flush.interval.ms": "1000",
                }
            )
        if static_connectors:
            props["static.connectors"] = static_connectors
        if static_tasks:
            props["static.tasks"] = static_tasks
        worker = WorkerProcess(self.workdir, props, name=name, spark=spark).start()
        self.workers[name] = worker
        return worker

    def alive(self) -> list[WorkerProcess]:
        return [w for w in self.workers.values() if w.alive()]

    def nudge(self) -> Any:
        """Rewrite the unchanged sink config: the test broker then starts a generation (see cluster.py)."""
        return self.alive()[0].request("PUT", "/connectors/sink/config", json=self.configs["sink"])

    def placement(self) -> Placement | None:
        """Where each job runs, once settled: every live worker out of its rebalance with no delay
        pending, every job held by exactly one live worker, and the status topic naming that worker:
        RUNNING for a connector and for a task on a Spark worker, UNASSIGNED for a task a held worker
        holds (nothing runs it, ``tests/support/held_executor.py``)."""
        alive = self.alive()
        names = {w.url.split("://", 1)[1]: w.name for w in alive}
        held: dict[str, list[str]] = {}
        for w in alive:
            view = w.workers()
            if view is None:
                return None
            me = view["this_worker"]
            if me["rebalancing"] or me["scheduled_delay_ms"]:
                return None
            for job in [*me["assignment"]["connectors"], *me["assignment"]["tasks"]]:
                held.setdefault(job, []).append(w.name)
        if set(held) != JOBS or any(len(ws) != 1 for ws in held.values()):
            return None
        for connector in CONNECTORS:
            try:
                resp = alive[0].get(f"/connectors/{connector}/status")
            except httpx.HTTPError:
                return None
            if resp.status_code != 200:
                return None
            status = resp.json()
            states = [(connector, status["connector"])] + [
                (f"{connector}-{t['id']}", t) for t in status.get("tasks", [])
            ]
            for job, state in states:
                holder = held[job][0]
                runs = job in CONNECTORS or self.workers[holder].spark
                if state["state"] != ("RUNNING" if runs else "UNASSIGNED"):
                    return None
                if names.get(state["worker_id"]) != holder:
                    return None
        return {job: ws[0] for job, ws in held.items()}

    def settle(self, step: str, expect: Callable[[Placement], bool], timeout: float = 150) -> Placement:
        """Wait until the placement settles as ``expect`` says, then print it."""
        seen: list[Placement | None] = [None]

        def settled() -> Placement | None:
            now = self.placement()
            if now is None:
                return None
            seen[0] = now  # the last settled placement, for the failure message
            return now if expect(now) else None

        try:
            placed: Placement = wait_nudging(settled, self.nudge, timeout, f"the placement after: {step}")
        except AssertionError as exc:
            raise AssertionError(f"{exc}; last settled placement: {seen[0]}") from None
        by_worker: dict[str, list[str]] = {w.name: [] for w in self.alive()}
        for job, name in sorted(placed.items()):
            by_worker[name].append(job)
        print(f"  {time.monotonic() - self.started:5.0f} s  {step:<40} {by_worker}")
        return placed

    def check(self, step: str, expected: dict[int, range] | None = None, final: bool = False) -> Verification:
        if expected is None:
            expected = expected_from_last(last_acked(self.source_file))
        result = verify(seen_in_lines(_lines(self.sink_file)), expected)
        print(
            f"  {time.monotonic() - self.started:5.0f} s  {step:<40} {result.expected:>6} acknowledged, "
            f"{result.seen:>6} flushed, "
            f"{result.lost_count:>5} {'lost' if final else 'not flushed yet'}, "
            f"{result.duplicate_count} duplicate(s)"
        )
        return result

    def fail_on_failed_tasks(self, step: str) -> None:
        """A FAILED task stays failed (as in Connect): say so at once with its trace's last line, rather
        than wait for a catch-up that cannot come."""
        for connector in CONNECTORS:
            try:
                status = self.alive()[0].get(f"/connectors/{connector}/status").json()
            except (httpx.HTTPError, ValueError):
                return
            for task in status.get("tasks", []):
                if task.get("state") == "FAILED":
                    lines = (task.get("trace") or "").strip().splitlines()
                    errors = [line for line in lines if "Error" in line or "Exception" in line]
                    reason = (errors or lines or ["no trace"])[-1][:500]
                    raise AssertionError(
                        f"{connector}-{task['id']} FAILED ({step}) on {task['worker_id']}: {reason}"
                    )

    def caught_up(self, step: str, timeout: float = 300) -> Verification:
        """Every seqno the source had acknowledged when called must reach the sink's file."""

        # RUNNING comes before a source task's first acknowledgement (its producer still connects and
        # the first offset flush is an interval away): wait for every task's first one.
        def acked() -> dict[int, int] | None:
            last = last_acked(self.source_file)
            if len(last) < TASKS:
                self.fail_on_failed_tasks(step)
                return None
            return last

        expected = expected_from_last(wait_until(acked, 120, f"every source task to acknowledge ({step})"))

        def done() -> Verification | None:
            result = verify(seen_in_lines(_lines(self.sink_file)), expected)
            if not result.ok:
                self.fail_on_failed_tasks(step)
            return result if result.ok else None

        wait_nudging(done, self.nudge, timeout, f"the sink to catch up ({step})", every=8.0)
        return self.check(step, expected, final=True)

    def partition_end(self, partition: int) -> int:
        """The end offset the broker reports for one partition of the plan's topic."""
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:6]}"})
        try:
            return int(consumer.get_watermark_offsets(TopicPartition(self.topic, partition), 10, False)[1])
        finally:
            consumer.close()

    def sink_partitions(self) -> set[int]:
        """The topic partitions the sink's flushed lines came from."""
        found: set[int] = set()
        for line in _lines(self.sink_file):
            try:
                data = json.loads(line)
            except ValueError:
                continue
            if isinstance(data, dict) and data.get("flushed") is True:
                found.add(int(data["partition"]))
        return found


def _stop_all(workers: list[WorkerProcess], timeout: float = 60) -> None:
    """SIGTERM all at once (they hand over in parallel), then SIGKILL what outlives ``timeout``: a
    failed or timed-out run must leave no worker (and no SparkSession) behind."""
    for w in workers:
        if w.proc is not None:
            w.proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for w in workers:
        if w.proc is None:
            continue
        try:
            w.proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            w.proc.kill()
            w.proc.wait()


def _only(placed: Placement, name: str) -> set[str]:
    return {job for job, w in placed.items() if w == name}


def test_kip_987_rolling_plan_with_data_flowing(tmp_path: Path, broker: Broker) -> None:
    plan = Plan(tmp_path, broker.bootstrap)
    started = time.monotonic()
    print()
    try:
        # A "sessioned-equivalent" cluster: two wildcard workers of a static group with no static lists.
        w0, w1 = plan.add("w0"), plan.add("w1")
        wait_until(stable_view([w0, w1], 2), 90, "two workers in one group")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})  # held: futures need it alive
        for future in admin.create_topics([NewTopic(plan.topic, PARTITIONS, 1)]).values():
            future.result(15)
        for name in CONNECTORS:
            body = {"name": name, "config": plan.configs[name]}
            resp = w0.request("POST", "/connectors", json=body)
            assert resp.status_code == 201, resp.text

        def balanced(placed: Placement) -> bool:
            """The cooperative shape ``sessioned`` gives two workers: one connector and two tasks each."""
            workers = {w.name for w in plan.alive()}
            return set(placed.values()) == workers and all(
                len(_only(placed, w) & set(CONNECTORS)) == 1 and len(_only(placed, w)) == 3 for w in workers
            )

        plan.settle("two wildcard workers", balanced)
        view = w1.get("/workers").json()
        assert view["protocol"] == "static"
        assert all(m["static_assignment"] == {"connectors": [], "tasks": []} for m in view["members"])

        # "Roll" to static: a rolling restart, one worker at a time, the same settings.
        for worker in (w0, w1):
            assert worker.stop(90) == 0
            plan.settle(f"{worker.name} stopped", lambda p: set(p.values()) == {w.name for w in plan.alive()})
            worker.start()
            plan.settle(f"{worker.name} back", balanced)

        # A static worker for a connector: it runs that connector and nothing else.
        plan.add("s_conn", static_connectors="src")
        placed = plan.settle("+ s_conn (src)", lambda p: p["src"] == "s_conn")
        assert _only(placed, "s_conn") == {"src"}
        assert set(placed.values()) == {"s_conn", "w0", "w1"}

        # A static worker for a task.
        s_task = plan.add("s_task", static_tasks="sink-0")
        placed = plan.settle("+ s_task (sink-0)", lambda p: p["sink-0"] == "s_task")
        assert _only(placed, "s_conn") == {"src"}
        assert _only(placed, "s_task") == {"sink-0"}
        assert {placed[j] for j in JOBS - {"src", "sink-0"}} <= {"w0", "w1"}

        # A static worker duplicating both: step 4 keeps each job where it runs, so it stays idle (a
        # standby that takes them over when their worker goes).
        s_dup = plan.add("s_dup", static_connectors="src", static_tasks="sink-0")
        wait_nudging(stable_view(plan.alive(), 5), plan.nudge, 120, "s_dup in the group")
        placed = plan.settle("+ s_dup (src, sink-0)", lambda p: True)
        assert placed["src"] == "s_conn" and placed["sink-0"] == "s_task"
        assert _only(placed, "s_dup") == set()
        assert {placed[j] for j in JOBS - {"src", "sink-0"}} <= {"w0", "w1"}
        by_id = {m["worker_id"]: m for m in s_dup.get("/workers").json()["members"]}
        assert by_id[s_dup.url.split("://", 1)[1]]["static_assignment"] == {
            "connectors": ["src"],
            "tasks": ["sink-0"],
        }

        # Remove a wildcard worker: its jobs go to the other wildcard worker, none to a static one.
        assert w0.stop(90) == 0
        placed = plan.settle("- w0", lambda p: "w0" not in p.values())
        assert _only(placed, "w1") == JOBS - {"src", "sink-0"}

        # Static workers for the rest; then no wildcard work is left for w1.
        rest = "src-0,src-1,sink-1"
        s_rest = plan.add("s_rest", static_connectors="sink", static_tasks=rest)
        placed = plan.settle("+ s_rest (sink, src-0, src-1, sink-1)", lambda p: "w1" not in p.values())
        assert _only(placed, "s_rest") == {"sink", *rest.split(",")}
        assert placed["src"] == "s_conn" and placed["sink-0"] == "s_task"

        # Remove the remaining wildcard worker: nothing moves.
        assert w1.stop(90) == 0
        wait_nudging(stable_view(plan.alive(), 4), plan.nudge, 120, "four static workers")
        after = plan.settle("- w1 (static workers only)", lambda p: True)
        assert after == placed

        # Beyond the plan, cheap: the worker of a job s_dup also lists goes; the job moves to s_dup at
        # once (no scheduled delay: another live worker lists it).
        assert plan.workers["s_conn"].stop(90) == 0
        placed = plan.settle("- s_conn", lambda p: p["src"] == "s_dup")
        assert _only(placed, "s_dup") == {"src"} and placed["sink-0"] == "s_task"
        assert last_acked(plan.source_file) == {}, "a held worker ran a source task"

        # The data, once: a worker that runs its tasks on Spark and lists every job joins the static-only
        # cluster. Step 4 keeps every job where it runs, so nothing moves to it yet.
        every_task = ",".join(sorted(JOBS - set(CONNECTORS)))
        s_data = plan.add(
            "s_data", static_connectors=",".join(CONNECTORS), static_tasks=every_task, spark=True
        )
        wait_nudging(stable_view(plan.alive(), 4), plan.nudge, 120, "s_data in the group")
        with_data = plan.settle("+ s_data (every job, on Spark)", lambda p: True)
        assert with_data == placed

        # s_rest goes: its jobs (sink, src-0, src-1, sink-1) move to s_data, the only other live worker
        # listing them, and run. The source writes both partitions; sink-1 reads partition 1, while
        # partition 0 belongs to sink-0 (kafka_reader.assigned_partitions), still held on s_task.
        assert s_rest.stop(90) == 0
        placed = plan.settle("- s_rest", lambda p: "s_rest" not in p.values())
        assert _only(placed, "s_data") == {"sink", *rest.split(",")}
        assert placed["src"] == "s_dup" and placed["sink-0"] == "s_task"
        first_seqnos = TASKS * THROUGHPUT * 5  # five seconds of data before sink-0 moves
        wait_until(
            lambda: (
                sum(n + 1 for n in last_acked(plan.source_file).values()) >= first_seqnos
                or plan.fail_on_failed_tasks("data flowing on s_data")
            ),
            180,
            f"the source to acknowledge {first_seqnos} records on s_data",
        )
        waiting = wait_until(lambda: plan.partition_end(0), 60, "records in partition 0")
        assert 0 not in plan.sink_partitions(), "a record of partition 0 was flushed while sink-0 was held"
        plan.check(f"sink-0 held, {waiting} offsets in its partition")

        # s_dup goes: the source connector moves to s_data. Then s_task goes: sink-0 moves to s_data while
        # the source writes, and must read its partition from where it was left.
        assert s_dup.stop(90) == 0
        placed = plan.settle("- s_dup", lambda p: p["src"] == "s_data")
        assert placed["sink-0"] == "s_task"
        assert s_task.stop(90) == 0
        placed = plan.settle("- s_task", lambda p: set(p.values()) == {"s_data"})

        def stopped_src() -> Any:
            # s_data may still name the leader that just left until the group's next epoch: a write it
            # forwards there fails to connect (500, as Java's forward does) and is made again.
            resp = s_data.request("PUT", "/connectors/src/stop")
            if resp.status_code == 500 and "connection attempts failed" in resp.text:
                return None
            assert resp.status_code in (202, 204), resp.text
            return resp

        wait_until(stopped_src, 60, "the source's stop accepted", interval=1)
        wait_until(
            lambda: (
                (s_data.get("/connectors/src/status").json().get("connector") or {}).get("state") == "STOPPED"
            ),
            60,
            "the source STOPPED",
        )
        final = plan.caught_up("source stopped, drained")
        reread, reproduced = duplicate_origins(plan.sink_file)
        print(f"  duplicated seqnos per source task: { {t: len(d) for t, d in final.duplicates.items()} }")
        print(f"  duplicates re-read by the sink: {reread}, re-produced by the source: {reproduced}")
        print(f"  whole run: {time.monotonic() - started:.0f} s")
        assert final.ok, f"seqnos lost: { {t: s[:20] for t, s in final.lost.items()} }"
        assert final.expected >= first_seqnos, final.summary()  # the run really carried data
        assert plan.sink_partitions() == set(range(PARTITIONS)), "sink-0 read nothing after its move"
    finally:
        _stop_all(plan.alive())
        for w in plan.workers.values():
            if "Traceback" in w.log_text():
                print(f"--- {w.name} log tail ---\n{w.log_text()[-1500:]}")
