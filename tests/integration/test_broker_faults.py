"""Broker faults on a three-node Apache Kafka cluster while real pipelines run (issue 21, item 2).

Three KRaft nodes (each a broker and a controller voter) with ``min.insync.replicas=2`` and
``default.replication.factor=3``; workers whose four internal topics have replication factor 3; a
``VerifiableSource`` writing a topic of replication factor 3 that a ``VerifiableSink`` reads, both on the
product's Spark data plane (``local[1]``). The source records what Kafka acknowledged and the sink what it
flushed before its offsets were committed, so every acknowledged seqno must reach the sink's file:

1. the leader of the data partition is SIGKILLed and later restarted while the pipeline runs;
2. the leadership of every partition (data, internal topics, ``__consumer_offsets``) is moved twice,
   no broker stopped (replica order rotated, preferred leader elected);
3. the broker that coordinates the workers' group is SIGKILLed under ``group.protocol=connect`` with two
   workers, restarted, and then the new coordinator's broker likewise: the workers find the new
   coordinator each time (it describes both members, Stable, after more than two session timeouts), and
   no task runs on two workers at once (the status topic's history and the workers' own "task started" /
   "task stopped" log lines say so).

Each test prints one ``FAULT-FIGURES`` line: records acknowledged, flushed by the sink, lost and
duplicated, and the seconds until the pipeline delivered again. The cluster is the module's (a JVM start
costs seconds); every test leaves all three nodes up and every partition in sync.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import time
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from kconnect.connectors.verifiable import Verification, expected_from_last, seen_in_lines, verify
from kconnect.runtime.cli.broker import free_port
from kconnect.runtime.storage import status_log
from tests.support.apache_kafka import (
    KafkaCluster,
    broker_kind,
    describe_group,
    group_coordinator,
    move_leadership,
    partition_replicas,
    wait_in_sync,
)
from tests.support.cluster import WorkerProcess, stable_view, topic_names, wait_until, worker_properties

# Each test runs in about two minutes on an idle 2-core machine (three Kafka JVMs, a Spark JVM per worker
# with a sink task); with other test runs beside it (load average 30 was seen) a sink's first Spark batch
# alone took 68 s, so the waits and the timeout leave room for that.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(480)]

THROUGHPUT = 25  # records per second per source task
SESSION_MS = 6000


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaCluster]:
    if broker_kind() != "kafka":
        pytest.skip("broker faults need Apache Kafka's replication (KCONNECT_TEST_BROKER=embedded has none)")
    config = {"min.insync.replicas": "2", "default.replication.factor": "3"}
    with KafkaCluster(Path(tmp_path_factory.mktemp("kafka3")), size=3, broker_config=config) as c:
        yield c


def _lines(path: Path) -> list[str]:
    return path.read_text(errors="replace").splitlines() if path.exists() else []


def _json_lines(path: Path, marker: str) -> list[dict[str, Any]]:
    out = []
    for line in _lines(path):
        with contextlib.suppress(ValueError):
            data = json.loads(line)
            if isinstance(data, dict) and data.get(marker) is True:
                out.append(data)
    return out


class Pipeline:
    """Workers of one group, a verifiable source into a topic and a verifiable sink out of it."""

    def __init__(self, workdir: Path, cluster: KafkaCluster, *, tasks: int, partitions: int) -> None:
        self.workdir = workdir
        self.cluster = cluster
        self.bootstrap = cluster.bootstrap
        self.group = f"bf-{uuid.uuid4().hex[:8]}"
        self.topic = f"seq-{uuid.uuid4().hex[:6]}"
        self.tasks = tasks
        self.partitions = partitions
        self.source_file = workdir / "source.jsonl"
        self.sink_file = workdir / "sink.jsonl"
        self.workers: list[WorkerProcess] = []
        self.admin = AdminClient({"bootstrap.servers": self.bootstrap})  # held: futures need it alive

    @property
    def internal_topics(self) -> list[str]:
        return list(topic_names(self.group).values())

    def add_worker(self, **extra: Any) -> WorkerProcess:
        props = worker_properties(
            self.bootstrap,
            self.group,
            free_port(),
            config_storage_replication_factor=3,
            offset_storage_replication_factor=3,
            status_storage_replication_factor=3,
            group_records_storage_replication_factor=3,
            session_timeout_ms=SESSION_MS,
            scheduled_rebalance_max_delay_ms=5000,
            **extra,
        )
        props.update(
            {
                "spark.master": "local[1]",
                "spark.ui.enabled": "false",
                "spark.sql.shuffle.partitions": "1",
                "offset.flush.interval.ms": "1000",
            }
        )
        worker = WorkerProcess(self.workdir, props, name=f"{self.group}-w{len(self.workers)}", spark=True)
        self.workers.append(worker.start())
        return worker

    def start_connectors(self) -> None:
        for future in self.admin.create_topics([NewTopic(self.topic, self.partitions, 3)]).values():
            future.result(30)
        src = {
            "connector.class": "VerifiableSourceConnector",
            "topic": self.topic,
            "tasks.max": str(self.tasks),
            "throughput": str(THROUGHPUT),
            "file": str(self.source_file),
        }
        sink = {
            "connector.class": "VerifiableSinkConnector",
            "topics": self.topic,
            "tasks.max": str(self.tasks),
            "file": str(self.sink_file),
        }
        for name, config in (("src", src), ("sink", sink)):
            resp = self.workers[0].request("POST", "/connectors", json={"name": name, "config": config})
            assert resp.status_code == 201, resp.text

    def check_replication(self) -> None:
        """The four internal topics and the data topic have three replicas per partition and an effective
        ``min.insync.replicas`` of 2 (the workers set no topic override, so it is the brokers'): the faults
        below mean something only if one node down still leaves an in-sync quorum for ``acks=all``."""
        topics = [*self.internal_topics, self.topic]
        layout = partition_replicas(self.bootstrap, topics)
        assert {topic for topic, _p in layout} == set(topics), sorted(layout)
        replicas = {f"{t}-{p}": r for (t, p), (_leader, r, _isr) in layout.items() if len(r) != 3}
        assert not replicas, f"partitions without three replicas: {replicas}"
        resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
        min_isr: dict[str, str | None] = {}
        for resource, future in self.admin.describe_configs(resources, request_timeout=30).items():
            entry = future.result(30).get("min.insync.replicas")
            min_isr[resource.name] = None if entry is None else entry.value
        assert min_isr == dict.fromkeys(topics, "2"), min_isr

    def states(self) -> dict[str, str] | None:
        """``src-0`` -> RUNNING ..., for both connectors' tasks, from any worker that answers."""
        for worker in self.workers:
            if not worker.alive():
                continue
            try:
                resp = worker.get("/connectors?expand=status")
            except httpx.HTTPError:
                continue
            if resp.status_code != 200:
                continue
            out: dict[str, str] = {}
            for name, entry in resp.json().items():
                for task in entry["status"]["tasks"]:
                    out[f"{name}-{task['id']}"] = task["state"]
            return out
        return None

    def all_running(self) -> bool:
        states = self.states()
        return (
            bool(states)
            and len(states or {}) == 2 * self.tasks
            and set((states or {}).values()) == {"RUNNING"}
        )

    def last_acked(self) -> dict[int, int]:
        last: dict[int, int] = {}
        for task, seqno in seen_in_lines(_lines(self.source_file), marker="committed"):
            last[task] = max(seqno, last.get(task, -1))
        return last

    def verification(self, expected: dict[int, range] | None = None) -> Verification:
        if expected is None:
            expected = expected_from_last(self.last_acked())
        return verify(seen_in_lines(_lines(self.sink_file)), expected)

    def wait_caught_up(self, what: str, timeout: float) -> Verification:
        expected = expected_from_last(self.last_acked())

        def caught_up() -> Verification | None:
            result = self.verification(expected)
            return result if result.ok else None

        try:
            return wait_until(caught_up, timeout, f"the sink to catch up ({what})", interval=0.5)
        except AssertionError as exc:
            result = self.verification(expected)
            lost = {task: seqnos[:10] for task, seqnos in result.lost.items()}
            raise AssertionError(f"{exc}; lost (first 10 per task): {lost}; {self.topic_state()}") from None

    def ends(self) -> dict[int, int]:
        consumer = Consumer({"bootstrap.servers": self.bootstrap, "group.id": f"ends-{uuid.uuid4().hex[:6]}"})
        try:
            return {
                p: consumer.get_watermark_offsets(TopicPartition(self.topic, p), timeout=10, cached=False)[1]
                for p in range(self.partitions)
            }
        finally:
            consumer.close()

    def topic_state(self) -> str:
        try:
            return f"partition ends {self.ends()}"
        except Exception as exc:  # a diagnostic only
            return f"topic state unavailable: {exc}"

    def delivered_past(self, ends: dict[int, int]) -> bool:
        """Whether the sink flushed, on every partition that had data, a record at or past ``ends``."""
        past = {p: False for p, end in ends.items() if end > 0}
        for data in _json_lines(self.sink_file, "flushed"):
            p, offset = data.get("partition"), data.get("offset")
            if p in past and isinstance(offset, int) and offset >= ends[p]:
                past[p] = True
        return all(past.values())

    def stop_source_and_drain(self, timeout: float = 90) -> Verification:
        resp = self.workers[0].request("PUT", "/connectors/src/stop")
        assert resp.status_code in (202, 204), resp.text

        def stopped() -> bool:
            with contextlib.suppress(httpx.HTTPError, ValueError):
                body = self.workers[0].get("/connectors/src/status").json()
                return (body.get("connector") or {}).get("state") == "STOPPED"
            return False

        wait_until(stopped, 60, "the source STOPPED")
        return self.wait_caught_up("source stopped, drained", timeout)

    def close(self) -> None:
        for w in self.workers:
            if w.alive():
                with contextlib.suppress(Exception):
                    w.stop(60)
        for w in self.workers:
            text = w.log_text()
            if "Traceback" in text:
                print(f"--- {w.name} log tail ---\n{text[-2500:]}")


class StateWatch:
    """Polls task states during a fault: which non-RUNNING states showed and when all ran again."""

    def __init__(self, pipeline: Pipeline) -> None:
        self.pipeline = pipeline
        self.not_running: dict[str, set[str]] = {}
        self.unanswered = 0

    def poll(self) -> None:
        states = self.pipeline.states()
        if states is None:
            self.unanswered += 1
            return
        for task, state in states.items():
            if state != "RUNNING":
                self.not_running.setdefault(task, set()).add(state)

    def poll_for(self, seconds: float, interval: float = 0.5) -> None:
        """Poll through ``seconds``, the last poll at their end: a task out of RUNNING for longer than
        ``interval`` (plus a status request) in that window is recorded."""
        end = time.monotonic() + seconds
        while True:
            self.poll()
            left = end - time.monotonic()
            if left <= 0:
                return
            time.sleep(min(interval, left))


def wait_delivering(
    pipeline: Pipeline, ends: dict[int, int], since: float, watch: StateWatch, timeout: float
) -> float:
    """Seconds from ``since`` until the sink flushed records written after ``ends`` on every partition."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        watch.poll()
        if pipeline.delivered_past(ends):
            return time.monotonic() - since
        time.sleep(0.5)
    raise AssertionError(
        f"the pipeline did not deliver again within {timeout:.0f} s; {pipeline.topic_state()}; "
        f"states {pipeline.states()}"
    )


def worker_events(workers: list[WorkerProcess]) -> dict[str, int]:
    """How often the workers lost their generation, started a task, and had a task fail (their logs)."""
    counts = {"generation_lost": 0, "task_starts": 0, "task_failures": 0}
    names = {"lost the group generation": "generation_lost", "task started": "task_starts"}
    names["task failed"] = "task_failures"
    for worker in workers:
        for line in worker.log_text().splitlines():
            with contextlib.suppress(ValueError, AttributeError):
                event = json.loads(line).get("event")
                if event in names:
                    counts[names[event]] += 1
    return counts


def figures(test: str, final: Verification, workers: list[WorkerProcess], **extra: Any) -> None:
    fields = " ".join(f"{k}={v}" for k, v in {**extra, **worker_events(workers)}.items())
    print(
        f"\nFAULT-FIGURES {test}: written={final.expected} delivered={final.seen} lost={final.lost_count} "
        f"duplicated={final.duplicate_count} {fields}"
    )


def settle(cluster: KafkaCluster, pipeline: Pipeline) -> None:
    """All three nodes up and every partition the test touched in sync: the next test starts whole."""
    for node in cluster.nodes:
        if not node.alive():
            cluster.restart(node.node_id)
    with contextlib.suppress(Exception):
        wait_in_sync(cluster.bootstrap, [pipeline.topic, *pipeline.internal_topics, "__consumer_offsets"], 90)


def test_broker_killed_and_restarted_while_the_pipeline_runs(tmp_path: Path, cluster: KafkaCluster) -> None:
    pipeline = Pipeline(tmp_path, cluster, tasks=1, partitions=1)
    started = time.monotonic()
    try:
        pipeline.add_worker()
        wait_until(stable_view(pipeline.workers, 1), 90, "the worker in its group")
        pipeline.start_connectors()
        wait_until(pipeline.all_running, 120, "both tasks RUNNING")
        pipeline.check_replication()
        wait_until(lambda: pipeline.verification().seen > 2 * THROUGHPUT, 240, "the sink delivering")
        pipeline.wait_caught_up("before the fault", 60)

        topics = [pipeline.topic, *pipeline.internal_topics]
        layout = partition_replicas(cluster.bootstrap, topics)
        victim = layout[(pipeline.topic, 0)][0]
        led = sorted(f"{t}-{p}" for (t, p), (leader, _r, _i) in layout.items() if leader == victim)
        ends = pipeline.ends()
        acked_at_kill = pipeline.verification().expected
        watch = StateWatch(pipeline)
        killed_at = time.monotonic()
        cluster.kill(victim)
        recovered_s = wait_delivering(pipeline, ends, killed_at, watch, 150)

        # The records past ``ends`` may be ones the victim acknowledged just before it died: delivery can
        # come back before the controller has fenced the victim (broker.session.timeout.ms) and named a
        # new leader, so the new leader is waited for rather than read once (make faults, run 2 of 10).
        def leader_moved() -> int | None:
            watch.poll()
            try:
                leader = partition_replicas(cluster.bootstrap, [pipeline.topic])[(pipeline.topic, 0)][0]
            except Exception:  # metadata while the cluster settles: asked again
                return None
            return leader if leader not in (victim, -1, None) else None

        new_leader = wait_until(leader_moved, 90, "a new leader of the data partition", interval=0.5)
        # Down a little longer while data flows on the two survivors (min.insync.replicas=2 still met).
        while time.monotonic() - killed_at < recovered_s + 5:
            watch.poll()
            time.sleep(0.5)
        restart_at = time.monotonic()
        cluster.restart(victim)
        wait_in_sync(cluster.bootstrap, topics, 90)
        rejoined_s = time.monotonic() - restart_at
        ends_after = pipeline.ends()
        after_restart_s = wait_delivering(pipeline, ends_after, restart_at, watch, 120)
        wait_until(pipeline.all_running, 60, "both tasks RUNNING after the restart")
        # When the victim was also the group's coordinator the worker stopped its tasks a second after
        # losing it (Java's KAFKA-9184 rule) and started them again once a coordinator answered, so the
        # source may have produced little by now (make faults, run 6 of 10: 101 records in 29 s): let data
        # flow before the source is stopped, rather than assume the time it takes.
        wait_until(
            lambda: pipeline.verification().expected > acked_at_kill + THROUGHPUT * 5,
            90,
            "the source producing again after the fault",
            interval=0.5,
        )
        final = pipeline.stop_source_and_drain()
        figures(
            "broker-kill-restart",
            final,
            pipeline.workers,
            killed_node=victim,
            new_leader=new_leader,
            killed_node_led=len(led),
            acked_at_kill=acked_at_kill,
            recover_s=f"{recovered_s:.1f}",
            node_back_in_sync_s=f"{rejoined_s:.1f}",
            delivering_after_restart_s=f"{after_restart_s:.1f}",
            not_running_seen=watch.not_running or "none",
            whole_s=f"{time.monotonic() - started:.0f}",
        )
        assert final.ok, final.summary()
        assert final.expected > acked_at_kill + THROUGHPUT * 5, final.summary()  # data flowed through it
        assert new_leader != victim
    finally:
        pipeline.close()
        settle(cluster, pipeline)


def test_leadership_moved_while_data_flows(tmp_path: Path, cluster: KafkaCluster) -> None:
    pipeline = Pipeline(tmp_path, cluster, tasks=1, partitions=1)
    started = time.monotonic()
    try:
        pipeline.add_worker()
        wait_until(stable_view(pipeline.workers, 1), 90, "the worker in its group")
        pipeline.start_connectors()
        wait_until(pipeline.all_running, 120, "both tasks RUNNING")
        pipeline.check_replication()
        wait_until(lambda: pipeline.verification().seen > 2 * THROUGHPUT, 240, "the sink delivering")
        pipeline.wait_caught_up("before the moves", 60)

        topics = [pipeline.topic, *pipeline.internal_topics, "__consumer_offsets"]
        watch = StateWatch(pipeline)
        recover: list[float] = []
        moved = 0
        for _ in range(2):
            ends = pipeline.ends()
            at = time.monotonic()
            moves = move_leadership(cluster.bootstrap, topics)
            moved += sum(1 for old, new in moves.values() if old != new)
            recover.append(wait_delivering(pipeline, ends, at, watch, 120))
            watch.poll_for(3)  # delivering again; a task that leaves RUNNING soon after must show too
        wait_until(pipeline.all_running, 30, "both tasks RUNNING after the moves")
        final = pipeline.stop_source_and_drain()
        figures(
            "leadership-moved",
            final,
            pipeline.workers,
            partitions_moved=moved,
            recover_s="/".join(f"{s:.1f}" for s in recover),
            not_running_seen=watch.not_running or "none",
            whole_s=f"{time.monotonic() - started:.0f}",
        )
        assert final.ok, final.summary()
        assert not watch.not_running, watch.not_running
    finally:
        pipeline.close()
        settle(cluster, pipeline)


def _task_intervals(workers: list[WorkerProcess]) -> dict[str, list[tuple[float, float, str]]]:
    """Per task, the (started, stopped, worker) intervals from the workers' own log lines."""
    out: dict[str, list[tuple[float, float, str]]] = {}
    for worker in workers:
        open_at: dict[str, float] = {}
        for line in worker.log_text().splitlines():
            with contextlib.suppress(ValueError, KeyError, TypeError):
                data = json.loads(line)
                event = data.get("event")
                if event not in ("task started", "task stopped"):
                    continue
                task = f"{data['connector']}-{data['task']}"
                at = datetime.fromisoformat(data["timestamp"].replace("Z", "+00:00")).timestamp()
                if event == "task started":
                    open_at[task] = at
                elif task in open_at:
                    out.setdefault(task, []).append((open_at.pop(task), at, worker.name))
        for task, at in open_at.items():
            out.setdefault(task, []).append((at, float("inf"), worker.name))
    return out


def _overlapping(intervals: dict[str, list[tuple[float, float, str]]]) -> list[str]:
    found = []
    for task, spans in intervals.items():
        spans = sorted(spans)
        for (_s1, e1, w1), (s2, _e2, w2) in itertools.pairwise(spans):
            if w1 != w2 and s2 < e1:
                found.append(f"{task}: started on {w2} at {s2:.3f} while {w1} ran it until {e1:.3f}")
    return found


def _status_history(bootstrap: str, topic: str) -> list[status_log.StatusRecord]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"h-{uuid.uuid4().hex[:6]}"})
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        seen = dict.fromkeys(partitions, 0)
        records: list[status_log.StatusRecord] = []
        deadline = time.monotonic() + 30
        while any(seen[p] < ends[p] for p in partitions) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None or msg.error():
                continue
            seen[msg.partition() or 0] = (msg.offset() or 0) + 1
            decoded = status_log.decode(msg.key(), msg.value())
            if decoded is not None:
                records.append(decoded)
        return records
    finally:
        consumer.close()


def _status_overlaps(history: list[status_log.StatusRecord]) -> list[str]:
    """Tasks reported RUNNING by a worker while another still ran them (its last word was RUNNING)."""
    owner: dict[str, str] = {}
    found: list[str] = []
    for record in history:
        if not isinstance(record, status_log.TaskStatus):
            continue
        what = str(record.task)
        if record.state is status_log.State.RUNNING:
            previous = owner.get(what)
            if previous is not None and previous != record.worker_id:
                found.append(f"{what}: RUNNING on {record.worker_id} while {previous} ran it")
            owner[what] = record.worker_id
        elif owner.get(what) == record.worker_id:
            del owner[what]
    return found


def _members(cluster: KafkaCluster, group: str) -> tuple[int, str, int] | None:
    """(coordinator node, state, member count) as the group's coordinator describes it."""
    with contextlib.suppress(Exception):
        node = cluster.node(group_coordinator(cluster.bootstrap, group))
        error, state, _type, members = describe_group(node.host, node.port, group)
        if error == 0:
            return node.node_id, state, members
    return None


def test_group_coordinator_killed_under_connect_protocol(tmp_path: Path, cluster: KafkaCluster) -> None:
    # One task per connector: two connectors and two tasks to spread over two workers, and only the worker
    # with the sink task starts a SparkSession (a source task polls on the worker itself).
    pipeline = Pipeline(tmp_path, cluster, tasks=1, partitions=1)
    started = time.monotonic()
    try:
        pipeline.add_worker(group_protocol="connect")
        pipeline.add_worker(group_protocol="connect")
        wait_until(stable_view(pipeline.workers, 2), 120, "two workers in one group")
        pipeline.start_connectors()
        wait_until(pipeline.all_running, 150, "both tasks RUNNING")
        pipeline.check_replication()
        wait_until(lambda: pipeline.verification().seen > 2 * THROUGHPUT, 240, "the sink delivering")
        pipeline.wait_caught_up("before the fault", 90)
        generation_before = wait_until(stable_view(pipeline.workers, 2), 30, "a stable view")["generation"]

        # Twice: the coordinator's broker killed, the workers on the new one, the broker back; then the
        # coordinator of that moment (another broker, or the same one again) killed the same way.
        watch = StateWatch(pipeline)
        rounds: list[str] = []
        for _ in range(2):
            victim = group_coordinator(cluster.bootstrap, pipeline.group)
            described = _members(cluster, pipeline.group)
            assert described is not None and described[0] == victim, (described, victim)
            ends = pipeline.ends()
            killed_at = time.monotonic()
            cluster.kill(victim)
            recovered_s = wait_delivering(pipeline, ends, killed_at, watch, 150)

            # The new coordinator must still see both members after two session timeouts: only members
            # that found it and heartbeat to it keep their sessions there.
            def new_coordinator_holds_both(victim: int = victim, killed_at: float = killed_at) -> Any:
                watch.poll()
                now = _members(cluster, pipeline.group)
                ok = now is not None and now[0] != victim and now[2] == 2 and "STABLE" in now[1].upper()
                return now if ok and time.monotonic() - killed_at > 2 * SESSION_MS / 1000 else None

            after = wait_until(new_coordinator_holds_both, 90, "the new coordinator holding both members")
            view = wait_until(stable_view(pipeline.workers, 2), 60, "a stable view after the kill")
            rounds.append(
                f"node{victim}->node{after[0]}:delivering_after_{recovered_s:.1f}s,"
                f"generation_{generation_before}->{view['generation']}"
            )
            cluster.restart(victim)
            topics = [pipeline.topic, *pipeline.internal_topics, "__consumer_offsets"]
            wait_in_sync(cluster.bootstrap, topics, 90)
            wait_until(pipeline.all_running, 60, "both tasks RUNNING after the fault")
        final = pipeline.stop_source_and_drain()

        history = _status_history(cluster.bootstrap, topic_names(pipeline.group)["status.storage.topic"])
        status_overlaps = _status_overlaps(history)
        intervals = _task_intervals(pipeline.workers)
        log_overlaps = _overlapping(intervals)
        figures(
            "coordinator-killed",
            final,
            pipeline.workers,
            coordinator_moves="/".join(rounds),
            overlaps=len(status_overlaps) + len(log_overlaps),
            not_running_seen=watch.not_running or "none",
            whole_s=f"{time.monotonic() - started:.0f}",
        )
        assert final.ok, final.summary()
        assert not status_overlaps, status_overlaps
        assert not log_overlaps, log_overlaps
        assert any(isinstance(r, status_log.TaskStatus) for r in history)
    finally:
        pipeline.close()
        settle(cluster, pipeline)
