"""REST parity: the same requests against Apache Kafka Connect 4.x and kconnect, compared step by step.

The reference is 4.x (``REFERENCE_4X``, the test brokers' version): the version users upgrade to.

One reference (Java) worker and one kconnect worker, each in a Connect cluster of its own (own group and
internal topics) on the session's broker, both given FileStream connectors by Java's class names. Every
step of :func:`steps` goes to both; the status codes must be equal and the bodies must have the same
shape (``tests/support/parity.py``: keys, element shapes and value types, not values). The differences
that remain are listed in ``KNOWN_DIFFERENCES`` with a justification each (and in README.md, "REST
parity with Apache Kafka Connect"); the test fails on a difference that is not listed and on a listed
one that no longer occurs, so the table cannot go stale.

Both sides run their tasks (kconnect's on its Spark data plane), so beyond shapes the states connectors
and tasks reach are compared as values, and so are the topics a connector used (KIP-558): a source that
read lines lists its topic on both sides. Steps that wait for an asynchronous effect poll on a condition
both sides meet (the connector's and its tasks' states), each side on its own.
"""

from __future__ import annotations

import json
import os
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, wait_until, worker_properties
from tests.support.parity import (
    Answer,
    KnownDifference,
    Outcome,
    Step,
    audit,
    compare,
    summary,
    without_status_versions,
)
from tests.support.reference import REFERENCE_4X, ReferenceWorker, reference_available

_AVAILABLE, _WHY = reference_available(REFERENCE_4X)
pytestmark = [
    pytest.mark.integration,
    pytest.mark.interop,
    pytest.mark.skipif(not _AVAILABLE, reason=f"reference worker unavailable: {_WHY}"),
]

SOURCE = "org.apache.kafka.connect.file.FileStreamSourceConnector"
SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
#: Replaced by each side's own sink connector name: a sink's offsets are its consumer group,
#: ``connect-<name>``, which would be shared by the two clusters on one broker under one name.
SINK_NAME = "{sink}"
#: How long a polled step may wait on either side. A kconnect sink task is RUNNING once its streaming query
#: is active, and the first sink task starts the worker's SparkSession: 13-75 s were seen, more on a loaded
#: two-core CI machine.
POLL_TIMEOUT_S = 180.0
#: Java answers a restart before its herder thread has written RESTARTING, so a status read at once can
#: still be the RUNNING from before; its restart takes milliseconds once begun.
RESTART_SETTLE_S = 2.0

_CLIENT_ERROR = (
    "a body Jackson cannot bind is the client's mistake: Java's exception mapper answers 500 (with "
    "Jackson's message), kconnect 400 naming what is wrong"
)

#: Steps whose answers legitimately differ: step name -> Java's code, kconnect's code, why. Mirrored in
#: README.md ("REST parity with Apache Kafka Connect").
KNOWN_DIFFERENCES: dict[str, KnownDifference] = {
    "validate-malformed": KnownDifference(500, 400, f"malformed JSON: {_CLIENT_ERROR}"),
    "create-malformed": KnownDifference(500, 400, f"malformed JSON: {_CLIENT_ERROR}"),
    "create-config-not-object": KnownDifference(500, 400, f"'config' is a string: {_CLIENT_ERROR}"),
    "create-bad-initial-state": KnownDifference(
        500, 400, f"unknown initial_state (Java: no enum constant): {_CLIENT_ERROR}"
    ),
    "put-config-malformed": KnownDifference(500, 400, f"malformed JSON: {_CLIENT_ERROR}"),
    "put-config-not-object": KnownDifference(500, 400, f"config is an array: {_CLIENT_ERROR}"),
    "patch-config-malformed": KnownDifference(500, 400, f"malformed JSON: {_CLIENT_ERROR}"),
    "alter-offsets-malformed": KnownDifference(500, 400, f"malformed JSON: {_CLIENT_ERROR}"),
    "alter-offsets-wrong-type": KnownDifference(500, 400, f"'offsets' is an object: {_CLIENT_ERROR}"),
    "logger-malformed": KnownDifference(500, 400, f"malformed JSON: {_CLIENT_ERROR}"),
}


# ------------------------------------------------------------------------------------------ conditions


def connector_state(state: str, tasks: int | None = None) -> Callable[[int, Any], bool]:
    """A status answer whose connector is in ``state`` and that lists ``tasks`` tasks (if given), each
    in the same state: what both sides settle on, so that :func:`states` can be compared."""

    def check(code: int, body: Any) -> bool:
        if code != 200 or not isinstance(body, dict):
            return False
        got = body.get("connector", {}).get("state")
        listed = body.get("tasks", [])
        return (
            got == state
            and (tasks is None or len(listed) == tasks)
            and all(t.get("state") == state for t in listed)
        )

    return check


def states(body: Any) -> Any:
    """What of a status answer must be equal on both sides: the connector's state and its tasks'."""
    if not isinstance(body, dict) or "connector" not in body:
        return body
    return body["connector"].get("state"), [t.get("state") for t in body.get("tasks", [])]


def config_names(body: Any) -> Any:
    """The keys a plugin config or validate answer defines, sorted (the shape sees a list of entries,
    not which keys are there)."""
    entries = body.get("configs") if isinstance(body, dict) else body
    if not isinstance(entries, list):
        return body
    names = (e.get("definition", e).get("name") if isinstance(e, dict) else e for e in entries)
    return sorted(str(n) for n in names)


def error_message(body: Any) -> Any:
    return body.get("message") if isinstance(body, dict) else body


def task_state(body: Any) -> Any:
    return body.get("state") if isinstance(body, dict) else body


def used_topics(body: Any) -> Any:
    """``GET /connectors/{name}/topics`` without the connector's name (each side names its sink apart)."""
    if not isinstance(body, dict):
        return body
    return sorted(t for v in body.values() if isinstance(v, dict) for t in v.get("topics", []))


def some_topics(code: int, body: Any) -> bool:
    return code == 200 and bool(used_topics(body))


def has_tasks(count: int) -> Callable[[int, Any], bool]:
    """A connector info answer (``GET /connectors/{name}``) listing ``count`` tasks."""
    return lambda code, body: code == 200 and isinstance(body, dict) and len(body.get("tasks", [])) == count


def succeeded(code: int, _body: Any) -> bool:
    return code == 200


def some_offsets(code: int, body: Any) -> bool:
    return code == 200 and isinstance(body, dict) and bool(body.get("offsets"))


def listed(count: int) -> Callable[[int, Any], bool]:
    return lambda code, body: code == 200 and isinstance(body, list | dict) and len(body) == count


# ------------------------------------------------------------------------------------------------ steps


def steps(source_file: str, sink_file: str, topic: str, lines_file: str, lines_topic: str) -> list[Step]:
    """The sequence, in order; names are unique and are what ``KNOWN_DIFFERENCES`` refers to.

    ``source_file`` is empty (so no offsets of the main source's own come and go); ``lines_file`` has
    lines, which the ``src-lines`` source produces to ``lines_topic``, a topic no sink reads.
    """
    config = {"connector.class": SOURCE, "file": source_file, "topic": topic, "tasks.max": "1"}
    lines = {**config, "file": lines_file, "topic": lines_topic}
    offsets = {"offsets": [{"partition": {"filename": source_file}, "offset": {"position": 3}}]}
    sink = f"/connectors/{SINK_NAME}"
    sink_config = {
        "connector.class": SINK,
        "file": sink_file,
        "topics": topic,
        "tasks.max": "1",
        # Java's stopped task leaves its consumer group only when its session expires on the test
        # broker, and offsets of a group with members cannot be altered: keep the wait short.
        "consumer.override.session.timeout.ms": "6000",
        "consumer.override.heartbeat.interval.ms": "1000",
    }
    sink_partition = {"kafka_topic": topic, "kafka_partition": 0}
    sink_offsets = {"offsets": [{"partition": sink_partition, "offset": {"kafka_offset": 5}}]}
    nope = "/connectors/nope"
    return [
        # -- the worker and its plugins ----------------------------------------------------------------
        Step("root", "GET", "/"),
        Step("health", "GET", "/health"),
        Step("plugins", "GET", "/connector-plugins"),
        Step("plugins-all", "GET", "/connector-plugins?connectorsOnly=false"),
        Step("plugin-config", "GET", f"/connector-plugins/{SOURCE}/config", values=config_names),
        Step("plugin-config-alias", "GET", "/connector-plugins/FileStreamSource/config", values=config_names),
        Step("plugin-config-unknown", "GET", "/connector-plugins/com.example.NoSuchConnector/config"),
        Step(
            "validate-ok",
            "PUT",
            f"/connector-plugins/{SOURCE}/config/validate",
            body=config,
            values=config_names,
        ),
        Step(
            "validate-invalid",
            "PUT",
            f"/connector-plugins/{SOURCE}/config/validate",
            body={**config, "tasks.max": "many", "batch.size": "-"},
            values=config_names,
        ),
        Step(
            "validate-class-mismatch",
            "PUT",
            "/connector-plugins/FileStreamSinkConnector/config/validate",
            body=config,
        ),
        Step("validate-malformed", "PUT", f"/connector-plugins/{SOURCE}/config/validate", raw=b"{nope"),
        # -- create ------------------------------------------------------------------------------------
        Step("create", "POST", "/connectors", body={"name": "src", "config": config}),
        Step("create-duplicate", "POST", "/connectors", body={"name": "src", "config": config}),
        Step("create-missing-name", "POST", "/connectors", body={"config": config}),
        Step(
            "create-missing-class",
            "POST",
            "/connectors",
            body={"name": "no-class", "config": {"file": source_file, "topic": topic}},
        ),
        Step(
            "create-invalid-config",
            "POST",
            "/connectors",
            body={"name": "bad-config", "config": {**config, "tasks.max": "many"}},
        ),
        Step(
            "create-bad-initial-state",
            "POST",
            "/connectors",
            body={"name": "bad-state", "config": config, "initial_state": "SLEEPING"},
        ),
        Step("create-malformed", "POST", "/connectors", raw=b'{"name": "x", "config": {'),
        Step("create-config-not-object", "POST", "/connectors", body={"name": "x", "config": "file=a"}),
        Step(
            "create-number-value",
            "POST",
            "/connectors",
            body={"name": "src-typed", "config": {**config, "tasks.max": 1}},
        ),
        Step(
            "create-paused",
            "POST",
            "/connectors",
            body={"name": "src-paused", "config": config, "initial_state": "PAUSED"},
        ),
        Step(
            "create-stopped",
            "POST",
            "/connectors",
            body={"name": "src-stopped", "config": config, "initial_state": "STOPPED"},
        ),
        # -- read --------------------------------------------------------------------------------------
        Step("info", "GET", "/connectors/src", until=has_tasks(1)),
        Step("list", "GET", "/connectors", until=listed(4)),
        Step("status", "GET", "/connectors/src/status", until=connector_state("RUNNING", 1), values=states),
        Step(
            "paused-status",
            "GET",
            "/connectors/src-paused/status",
            # Created paused, it has computed no task configs yet: no tasks, on both sides.
            until=connector_state("PAUSED", 0),
            values=states,
        ),
        Step(
            "stopped-status",
            "GET",
            "/connectors/src-stopped/status",
            until=connector_state("STOPPED", 0),
            values=states,
        ),
        Step("list-expand-status", "GET", "/connectors?expand=status"),
        Step("list-expand-info", "GET", "/connectors?expand=info"),
        Step("list-expand-both", "GET", "/connectors?expand=status&expand=info"),
        Step("config", "GET", "/connectors/src/config"),
        Step("typed-config", "GET", "/connectors/src-typed/config"),
        Step("tasks", "GET", "/connectors/src/tasks"),
        # Removed in Apache Kafka 4.0 (KIP-970): an unknown path, not an unknown connector.
        Step("tasks-config", "GET", "/connectors/src/tasks-config", values=error_message),
        Step("task-status", "GET", "/connectors/src/tasks/0/status", values=task_state),
        Step("task-status-unknown", "GET", "/connectors/src/tasks/7/status"),
        Step("task-status-not-a-number", "GET", "/connectors/src/tasks/zero/status"),
        Step("task-status-too-big", "GET", "/connectors/src/tasks/2147483648/status"),
        Step("stopped-tasks", "GET", "/connectors/src-stopped/tasks"),
        # An empty file produced nothing: no topic on either side.
        Step("topics", "GET", "/connectors/src/topics", values=used_topics),
        # KIP-558 with a task that produced: both list the topic it wrote to.
        Step("lines-create", "POST", "/connectors", body={"name": "src-lines", "config": lines}),
        Step("lines-topics", "GET", "/connectors/src-lines/topics", until=some_topics, values=used_topics),
        Step("lines-delete", "DELETE", "/connectors/src-lines"),
        # -- update ------------------------------------------------------------------------------------
        Step("put-config-create", "PUT", "/connectors/src-put/config", body=config),
        # Both answer with the tasks known when the config is written: wait until there are some.
        Step("put-info", "GET", "/connectors/src-put", until=has_tasks(1)),
        Step("put-config-update", "PUT", "/connectors/src-put/config", body={**config, "batch.size": "100"}),
        Step("put-config-name-mismatch", "PUT", "/connectors/src-put/config", body={**config, "name": "x"}),
        Step("put-config-malformed", "PUT", "/connectors/src-put/config", raw=b"[1, 2"),
        Step("put-config-not-object", "PUT", "/connectors/src-put/config", body=["file", "topic"]),
        Step("patch-config", "PATCH", "/connectors/src-put/config", body={"batch.size": "200"}),
        Step("patch-config-remove", "PATCH", "/connectors/src-put/config", body={"batch.size": None}),
        Step("patch-config-malformed", "PATCH", "/connectors/src-put/config", raw=b"{,}"),
        Step("delete-put", "DELETE", "/connectors/src-put"),
        # -- lifecycle and offsets ---------------------------------------------------------------------
        Step("pause", "PUT", "/connectors/src/pause"),
        Step(
            "status-paused",
            "GET",
            "/connectors/src/status",
            until=connector_state("PAUSED", 1),
            values=states,
        ),
        Step("resume", "PUT", "/connectors/src/resume"),
        Step(
            "status-resumed",
            "GET",
            "/connectors/src/status",
            until=connector_state("RUNNING", 1),
            values=states,
        ),
        Step("offsets-running", "GET", "/connectors/src/offsets"),
        Step("alter-offsets-running", "PATCH", "/connectors/src/offsets", body=offsets),
        Step("reset-offsets-running", "DELETE", "/connectors/src/offsets"),
        Step("stop", "PUT", "/connectors/src/stop"),
        Step(
            "status-stopped",
            "GET",
            "/connectors/src/status",
            until=connector_state("STOPPED", 0),
            values=states,
        ),
        Step("alter-offsets", "PATCH", "/connectors/src/offsets", body=offsets),
        # Java may answer before its offset store has read what the alteration wrote.
        Step("offsets-altered", "GET", "/connectors/src/offsets", until=some_offsets),
        Step("alter-offsets-malformed", "PATCH", "/connectors/src/offsets", raw=b'{"offsets": ['),
        Step("alter-offsets-wrong-type", "PATCH", "/connectors/src/offsets", body={"offsets": {"a": 1}}),
        Step("reset-offsets", "DELETE", "/connectors/src/offsets"),
        # Java may first list the partition with a null offset: it takes the connector's partitions before
        # its offset store has read the tombstone that the reset wrote.
        Step("offsets-reset", "GET", "/connectors/src/offsets", until=lambda c, b: b == {"offsets": []}),
        Step("resume-stopped", "PUT", "/connectors/src/resume"),
        Step(
            "status-running",
            "GET",
            "/connectors/src/status",
            until=connector_state("RUNNING", 1),
            values=states,
        ),
        # -- restarts ----------------------------------------------------------------------------------
        Step("restart", "POST", "/connectors/src/restart"),
        # Settled before the next restart, which answers with the statuses it finds: a RESTARTING record
        # names no plugin version (null) on either side, a RUNNING one does.
        Step(
            "status-after-plain-restart",
            "GET",
            "/connectors/src/status",
            until=connector_state("RUNNING", 1),
            values=states,
            settle_s=RESTART_SETTLE_S,
        ),
        Step("restart-include-tasks", "POST", "/connectors/src/restart?includeTasks=true"),
        Step(
            "status-after-restart",
            "GET",
            "/connectors/src/status",
            until=connector_state("RUNNING", 1),
            values=states,
            settle_s=RESTART_SETTLE_S,
        ),
        Step("restart-only-failed", "POST", "/connectors/src/restart?includeTasks=true&onlyFailed=true"),
        Step("restart-task", "POST", "/connectors/src/tasks/0/restart"),
        Step("restart-task-unknown", "POST", "/connectors/src/tasks/7/restart"),
        Step("restart-task-not-a-number", "POST", "/connectors/src/tasks/first/restart"),
        Step("topics-reset", "PUT", "/connectors/src/topics/reset"),
        # -- a sink: its offsets are its consumer group's -------------------------------------------------
        Step("sink-create", "POST", "/connectors", body={"name": SINK_NAME, "config": sink_config}),
        Step("sink-status", "GET", f"{sink}/status", until=connector_state("RUNNING", 1), values=states),
        # Its topic is empty: a sink records a topic once it consumed a record from it.
        Step("sink-topics", "GET", f"{sink}/topics", maps=("",), values=used_topics),
        Step("sink-offsets-running", "GET", f"{sink}/offsets"),
        Step("sink-stop", "PUT", f"{sink}/stop"),
        Step(
            "sink-status-stopped",
            "GET",
            f"{sink}/status",
            until=connector_state("STOPPED", 0),
            values=states,
        ),
        # Java refuses (500, "try again") while the stopped task's consumer is still a group member.
        Step("sink-alter-offsets", "PATCH", f"{sink}/offsets", body=sink_offsets, until=succeeded),
        Step("sink-offsets-altered", "GET", f"{sink}/offsets", until=some_offsets),
        Step(
            "sink-alter-offsets-bad-partition",
            "PATCH",
            f"{sink}/offsets",
            body={"offsets": [{"partition": {"kafka_topic": topic}, "offset": {"kafka_offset": 1}}]},
        ),
        Step(
            "sink-alter-offsets-bad-offset",
            "PATCH",
            f"{sink}/offsets",
            body={"offsets": [{"partition": sink_partition, "offset": {"kafka_offset": "five"}}]},
        ),
        Step("sink-reset-offsets", "DELETE", f"{sink}/offsets"),
        Step("sink-offsets-reset", "GET", f"{sink}/offsets", until=lambda c, b: b == {"offsets": []}),
        Step("sink-delete", "DELETE", sink),
        # -- delete ------------------------------------------------------------------------------------
        Step("delete", "DELETE", "/connectors/src"),
        Step("info-deleted", "GET", "/connectors/src"),
        Step("delete-deleted", "DELETE", "/connectors/src"),
        # -- unknown names on every path ---------------------------------------------------------------
        Step("unknown-info", "GET", nope),
        Step("unknown-config", "GET", f"{nope}/config"),
        Step("unknown-patch-config", "PATCH", f"{nope}/config", body={"batch.size": "1"}),
        Step("unknown-status", "GET", f"{nope}/status"),
        Step("unknown-tasks", "GET", f"{nope}/tasks"),
        Step("unknown-tasks-config", "GET", f"{nope}/tasks-config"),
        Step("unknown-task-status", "GET", f"{nope}/tasks/0/status"),
        Step("unknown-pause", "PUT", f"{nope}/pause"),
        Step("unknown-resume", "PUT", f"{nope}/resume"),
        Step("unknown-stop", "PUT", f"{nope}/stop"),
        Step("unknown-restart", "POST", f"{nope}/restart"),
        Step("unknown-restart-task", "POST", f"{nope}/tasks/0/restart"),
        Step("unknown-offsets", "GET", f"{nope}/offsets"),
        Step("unknown-alter-offsets", "PATCH", f"{nope}/offsets", body=offsets),
        Step("unknown-reset-offsets", "DELETE", f"{nope}/offsets"),
        Step("unknown-topics", "GET", f"{nope}/topics"),
        Step("unknown-topics-reset", "PUT", f"{nope}/topics/reset"),
        Step("unknown-delete", "DELETE", nope),
        Step("unknown-path", "GET", "/no/such/path"),
        Step("wrong-method", "DELETE", "/connectors"),
        # -- log levels --------------------------------------------------------------------------------
        Step("loggers", "GET", "/admin/loggers", maps=("",)),
        Step("logger-root", "GET", "/admin/loggers/root"),
        # ERROR, not DEBUG: the reference assembly's /admin/loggers drives an unconfigured log4j 1 API
        # whose default level is DEBUG, and Java records last_modified only for a level that changed.
        Step("logger-set", "PUT", "/admin/loggers/parity.test", body={"level": "ERROR"}),
        Step("logger-get", "GET", "/admin/loggers/parity.test"),
        Step("logger-unknown", "GET", "/admin/loggers/parity.never.set"),
        Step("logger-bad-level", "PUT", "/admin/loggers/parity.test", body={"level": "LOUD"}),
        Step("logger-no-level", "PUT", "/admin/loggers/parity.test", body={"lvl": "ERROR"}),
        Step("logger-malformed", "PUT", "/admin/loggers/parity.test", raw=b"{level"),
        Step(
            "logger-set-cluster", "PUT", "/admin/loggers/parity.cluster?scope=cluster", body={"level": "WARN"}
        ),
    ]


# ------------------------------------------------------------------------------------------------- I/O


@dataclass
class Side:
    """One worker's REST API as the steps see it."""

    name: str
    client: httpx.Client
    sink_name: str

    def send(self, step: Step) -> Answer:
        """Send ``step``; with ``until``, repeat it until the answer satisfies it."""
        # A polled write (a sink offsets alteration Java refuses at first) is repeated: it is idempotent.
        deadline = time.monotonic() + POLL_TIMEOUT_S
        path = step.path.replace(SINK_NAME, self.sink_name)
        time.sleep(step.settle_s)
        polls = 0
        while True:
            polls += 1
            if step.raw is not None:
                resp = self.client.request(
                    step.method, path, content=step.raw, headers={"Content-Type": "application/json"}
                )
            elif step.body is not None:
                body = json.loads(json.dumps(step.body).replace(SINK_NAME, self.sink_name))
                resp = self.client.request(step.method, path, json=body)
            else:
                resp = self.client.request(step.method, path)
            answer = Answer(resp.status_code, decode(resp), polls)
            if step.until is None or step.until(answer.status, answer.body):
                return answer
            if time.monotonic() >= deadline:
                raise AssertionError(
                    f"{self.name}: step {step.name} never met its condition within {POLL_TIMEOUT_S:.0f} s; "
                    f"last answer {answer.status} {json.dumps(answer.body)[:400]}"
                )
            time.sleep(0.3)


def decode(resp: httpx.Response) -> Any:
    if not resp.content:
        return None
    try:
        return resp.json()
    except ValueError:
        return resp.text


@pytest.fixture
def sides(tmp_path: Path, broker: Broker) -> Iterator[tuple[Side, Side]]:
    """The Java worker and the kconnect worker, each alone in its own cluster, both ready for writes."""
    run = uuid.uuid4().hex[:6]
    props = worker_properties(
        broker.bootstrap, f"parity-kc-{run}", free_port(), session_timeout_ms=3000, heartbeat_interval_ms=500
    )
    # Tasks run on the Spark data plane, as a user's do.
    props.update(
        {"spark.master": "local[2]", "spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "1"}
    )
    ours = WorkerProcess(tmp_path, props, name="kconnect", spark=True).start()
    try:
        with ReferenceWorker(
            broker.bootstrap,
            group_id=f"parity-java-{run}",
            config_topic=f"parity-java-{run}-configs",
            offset_topic=f"parity-java-{run}-offsets",
            status_topic=f"parity-java-{run}-status",
            log_path=tmp_path / "java.log",
            # Tansu completes a generation session.timeout.ms / 2 after its first JoinGroup; each
            # connector created or stopped costs one.
            session_timeout_ms=3000,
            heartbeat_interval_ms=500,
            version=REFERENCE_4X,
        ) as java:
            java.wait_for_assignment(lambda a: a["error"] == 0, 60)
            wait_until(stable_view([ours], 1), 60, "the kconnect worker in its group")
            with (
                httpx.Client(base_url=java.url, timeout=60) as jc,
                httpx.Client(base_url=ours.url, timeout=60) as kc,
            ):
                yield Side("Java", jc, f"sink-java-{run}"), Side("kconnect", kc, f"sink-kc-{run}")
    finally:
        ours.stop()


def test_rest_parity_with_the_reference_worker(
    sides: tuple[Side, Side], tmp_path: Path, broker: Broker
) -> None:
    java, ours = sides
    bootstrap = broker.bootstrap
    source_file = tmp_path / "empty.txt"
    source_file.write_text("")  # the task reads nothing, so it commits no offsets of its own
    lines_file = tmp_path / "lines.txt"
    lines_file.write_text("one\ntwo\nthree\n")
    topic, lines_topic = f"parity-{uuid.uuid4().hex[:6]}", f"parity-lines-{uuid.uuid4().hex[:6]}"
    # The sink's offsets name a partition of this topic; Kafka answers offset writes for a topic that
    # does not exist with an error.
    admin = AdminClient({"bootstrap.servers": bootstrap})  # kept referenced until the result is in
    for future in admin.create_topics([NewTopic(topic, 1, 1), NewTopic(lines_topic, 1, 1)]).values():
        future.result(30)
    sequence = steps(str(source_file), str(tmp_path / "sink-out.txt"), topic, str(lines_file), lines_topic)
    assert len({s.name for s in sequence}) == len(sequence), "step names must be unique"

    started = time.monotonic()
    outcomes: list[Outcome] = []
    versions_reported = {"Java": 0, "kconnect": 0}
    for step in sequence:
        java_answer, our_answer = java.send(step), ours.send(step)
        # Kafka 4.1's status "version" (KIP-891) is compared like any field; counted on each side so
        # that the test knows both did report versions (a shape compare passes when both lack them).
        versions_reported["Java"] += without_status_versions(java_answer.body)[1]
        versions_reported["kconnect"] += without_status_versions(our_answer.body)[1]
        outcomes.append(compare(step, java_answer, our_answer))
    took = time.monotonic() - started
    assert all(versions_reported.values()), f"statuses name no plugin version (KIP-891): {versions_reported}"

    print(f"\nREST parity: {len(outcomes)} steps in {took:.1f} s\n{summary(outcomes, KNOWN_DIFFERENCES)}")
    for o in outcomes:
        if not o.same:
            print(f"\n{o.step.name}:")
            for d in o.differences:
                print(f"    {d}")
            print(f"    Java     {o.java.status} {json.dumps(o.java.body)[:300]}")
            print(f"    kconnect {o.ours.status} {json.dumps(o.ours.body)[:300]}")
    dump = os.environ.get("KCONNECT_PARITY_DUMP")
    if dump:  # every answer of both sides, to read the values the shapes leave out
        Path(dump).write_text(
            json.dumps(
                [
                    {
                        "step": o.step.name,
                        "request": f"{o.step.method} {o.step.path}",
                        "java": o.java.__dict__,
                        "kconnect": o.ours.__dict__,
                    }
                    for o in outcomes
                ],
                indent=1,
            )
        )
    problems = audit(outcomes, KNOWN_DIFFERENCES)
    assert not problems, "REST parity problems:\n" + "\n".join(problems)
