"""Connector operations over REST on two real kconnect workers and the embedded broker.

Every write goes to the follower, so each one also proves the forwarding to the leader (and, for a task
restart, on to the task's owner). Statuses and offsets are read back from the real internal topics and
the real consumer group; the shapes, codes and messages asserted here are the ones the reference
Apache Kafka Connect 3.9 worker gave for the same requests.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from tests.support.apache_kafka import Broker
from tests.support.cluster import stable_view, start_cluster, wait_until
from tests.support.topics import create_topic

pytestmark = pytest.mark.integration

#: Malformed bodies must still say they are JSON, or the REST API refuses them with 415 before parsing.
JSON = {"Content-Type": "application/json"}

NOT_STOPPED = (
    "Connectors must be in the STOPPED state before their offsets can be modified. This can be done for "
    "the specified connector by issuing a 'PUT' request to the '/connectors/{}/stop' endpoint"
)


def read_topic(bootstrap: str, topic: str) -> list[tuple[str, Any]]:
    """Every record of a topic, from the beginning: (key, decoded JSON value or None)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"reader-{uuid.uuid4().hex[:6]}",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[tuple[str, Any]] = []
        at_end: set[int] = set()
        deadline = time.monotonic() + 20
        while len(at_end) < len(partitions) and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            err = msg.error()
            if err is not None:
                if err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(msg.partition() or 0)
                continue
            value = msg.value()
            out.append(((msg.key() or b"").decode(), json.loads(value) if value else None))
        return out
    finally:
        consumer.close()


def states(bootstrap: str, topic: str, key: str) -> list[str]:
    return [v["state"] for k, v in read_topic(bootstrap, topic) if k == key and v is not None]


def error_json(resp: httpx.Response, code: int, message: str | None = None) -> None:
    assert resp.status_code == code, resp.text
    body = resp.json()
    assert body["error_code"] == code, body
    if message is not None:
        assert body["message"] == message, body


def test_connector_operations_through_a_follower(tmp_path: Path, broker: Broker) -> None:
    workers = start_cluster(tmp_path, broker.bootstrap, 2)
    group = workers[0].props["group.id"]
    status_topic, offsets_topic = f"{group}-status", f"{group}-offsets"
    source_file = tmp_path / "in.txt"
    source_file.write_text("a\nb\n")
    src_config = {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": str(source_file),
        "topic": f"{group}-lines",
        "tasks.max": "1",
    }
    try:
        view = wait_until(stable_view(workers, 2), 90, "two workers in one stable generation")
        leader = next(w for w in workers if w.url + "/" == view["leader_url"])
        follower = next(w for w in workers if w is not leader)

        def status(name: str) -> dict[str, Any]:
            body: dict[str, Any] = follower.get(f"/connectors/{name}/status").json()
            return body

        def wait_state(name: str, connector: str, tasks: list[str], what: str) -> dict[str, Any]:
            def check() -> dict[str, Any] | None:
                s = status(name)
                got = (s.get("connector", {}).get("state"), [t["state"] for t in s.get("tasks", [])])
                return s if got == (connector, tasks) else None

            result: dict[str, Any] = wait_until(check, 60, what)
            return result

        # -- malformed bodies and bad values: 400 with Connect's error JSON, never 500 -----------------
        error_json(follower.request("POST", "/connectors", content=b"{bad", headers=JSON), 400)
        bogus = {"name": "x", "config": src_config, "initial_state": "BOGUS"}
        error_json(
            follower.request("POST", "/connectors", json=bogus),
            400,
            "Invalid initial state BOGUS; must be one of RUNNING, PAUSED, STOPPED",
        )

        # -- create PAUSED through the follower (a forwarded write) ---------------------------------------
        created = follower.request(
            "POST", "/connectors", json={"name": "src", "config": src_config, "initial_state": "PAUSED"}
        )
        assert created.status_code == 201, created.text
        assert created.json() == {
            "name": "src",
            "config": {**src_config, "name": "src"},
            "tasks": [],
            "type": "source",
        }
        paused = wait_state("src", "PAUSED", [], "src PAUSED with no tasks (a paused connector makes none)")
        owner = paused["connector"]["worker_id"]
        assert owner in {w.url.split("://")[1] for w in workers}

        expanded = follower.get("/connectors?expand=status&expand=info").json()
        assert set(expanded["src"]) == {"status", "info"}
        assert expanded["src"]["info"]["config"]["file"] == str(source_file)
        assert follower.get("/connectors?expand=bogus").json() == {"src": {}}

        # -- resume / pause / resume -----------------------------------------------------------------------
        assert follower.request("PUT", "/connectors/src/resume").status_code == 202
        # Running: the connector computes one task; tasks are held, not run, so they report UNASSIGNED.
        wait_state("src", "RUNNING", ["UNASSIGNED"], "src RUNNING with its task")
        assert follower.request("PUT", "/connectors/src/pause").status_code == 202
        wait_state("src", "PAUSED", ["PAUSED"], "src and its task PAUSED")
        assert follower.request("PUT", "/connectors/src/resume").status_code == 202
        wait_state("src", "RUNNING", ["UNASSIGNED"], "src RUNNING again")

        # -- restarts (before the config patches: a patch rewrites the task configs, and a restart read in the
        # same pass as that rewrite finds its task already stopped for the new config, so it writes no
        # RESTARTING of its own) -------------------------------------------------------------------
        def restarting_count(key: str) -> int:
            return states(broker.bootstrap, status_topic, key).count("RESTARTING")

        # Each request is waited for: requests read together coalesce (the newest per connector wins, as
        # in Java), so one sent at once after another could replace it.
        with_tasks = follower.request("POST", "/connectors/src/restart?includeTasks=true")
        assert with_tasks.status_code == 202, with_tasks.text
        body = with_tasks.json()
        assert body["name"] == "src" and body["type"] == "source"
        assert body["connector"]["state"] == "RESTARTING"
        assert [(t["id"], t["state"]) for t in body["tasks"]] == [(0, "RESTARTING")]
        # The owner carries it out: RESTARTING, then what a started task reports, in the status topic.
        wait_until(
            lambda: (
                states(broker.bootstrap, status_topic, "status-task-src-0")[-2:]
                == ["RESTARTING", "UNASSIGNED"]
                and states(broker.bootstrap, status_topic, "status-connector-src")[-2:]
                == ["RESTARTING", "RUNNING"]
            ),
            30,
            "the connector and its task restarted by their owner",
        )
        connector_restarts = restarting_count("status-connector-src")
        task_restarts = restarting_count("status-task-src-0")
        plain = follower.request("POST", "/connectors/src/restart")
        assert plain.status_code == 204 and plain.content == b""
        wait_until(
            lambda: restarting_count("status-connector-src") > connector_restarts, 30, "the plain restart"
        )
        assert restarting_count("status-task-src-0") == task_restarts  # the plain restart leaves tasks be
        only_failed = follower.request("POST", "/connectors/src/restart?onlyFailed=true&includeTasks=true")
        assert only_failed.status_code == 202
        assert only_failed.json()["connector"]["state"] == "RUNNING"  # nothing failed: nothing restarts
        assert [t["state"] for t in only_failed.json()["tasks"]] == ["UNASSIGNED"]

        # One task, through the worker that does not own it: forwarded to the owner.
        task_owner = status("src")["tasks"][0]["worker_id"]
        not_owner = next(w for w in workers if w.url.split("://")[1] != task_owner)
        before = states(broker.bootstrap, status_topic, "status-task-src-0").count("RESTARTING")
        assert not_owner.request("POST", "/connectors/src/tasks/0/restart").status_code == 204
        wait_until(
            lambda: states(broker.bootstrap, status_topic, "status-task-src-0").count("RESTARTING") > before,
            30,
            "the task restarted on its owner",
        )
        error_json(follower.request("POST", "/connectors/src/tasks/7/restart"), 404, "Unknown task: src-7")
        error_json(follower.request("POST", "/connectors/src/tasks/x/restart"), 404)
        error_json(follower.request("POST", "/connectors/nope/restart"), 404, "Unknown connector: nope")
        error_json(
            follower.request("POST", "/connectors/nope/tasks/0/restart"), 404, "Unknown connector: nope"
        )
        for op in ("pause", "resume", "stop"):
            error_json(follower.request("PUT", f"/connectors/nope/{op}"), 404, "Unknown connector nope")

        # -- PATCH config: a null removes the key ----------------------------------------------------------
        patched = follower.request("PATCH", "/connectors/src/config", json={"foo": "bar"})
        assert patched.status_code == 200, patched.text
        assert patched.json()["config"]["foo"] == "bar"
        patched = follower.request("PATCH", "/connectors/src/config", json={"foo": None})
        assert patched.status_code == 200 and "foo" not in patched.json()["config"]
        assert leader.get("/connectors/src/config").json() == {**src_config, "name": "src"}
        error_json(
            follower.request("PATCH", "/connectors/nope/config", json={"a": "b"}),
            404,
            "Connector nope not found",
        )
        error_json(follower.request("PATCH", "/connectors/src/config", content=b"[1,2]", headers=JSON), 400)
        error_json(follower.request("PATCH", "/connectors/src/config", content=b"{bad", headers=JSON), 400)

        # GET /connectors/{name}/tasks (answered by the leader) carries the task configs; tasks-config is
        # gone, as in Apache Kafka 4.0 (KIP-970), and answers as any unknown path does.
        tasks = wait_until(lambda: (r := follower.get("/connectors/src/tasks").json()) and r, 30, "tasks")
        assert [t["id"] for t in tasks] == [{"connector": "src", "task": 0}]
        assert tasks[0]["config"]["task.class"].endswith("FileStreamSourceTask")
        error_json(follower.get("/connectors/nope/tasks"), 404, "Connector nope not found")
        error_json(follower.get("/connectors/src/tasks-config"), 404, "HTTP 404 Not Found")

        # -- source offsets: written into the offsets topic by hand, read back over REST ------------------
        producer = Producer({"bootstrap.servers": broker.bootstrap, "partitioner": "murmur2_random"})
        partition = {"filename": str(source_file)}
        producer.produce(
            offsets_topic,
            key=json.dumps(["src", partition]).encode(),
            value=json.dumps({"position": 4}).encode(),
        )
        producer.produce(
            offsets_topic,
            key=json.dumps(["other", partition]).encode(),
            value=json.dumps({"position": 9}).encode(),
        )
        producer.flush(10)
        expected = {"offsets": [{"partition": partition, "offset": {"position": 4}}]}
        wait_until(lambda: follower.get("/connectors/src/offsets").json() == expected, 30, "source offsets")
        error_json(follower.get("/connectors/nope/offsets"), 404, "Connector nope not found")
        new = {"offsets": [{"partition": partition, "offset": {"position": 2}}]}
        error_json(
            follower.request("PATCH", "/connectors/src/offsets", json=new), 400, NOT_STOPPED.format("src")
        )
        error_json(follower.request("DELETE", "/connectors/src/offsets"), 400, NOT_STOPPED.format("src"))

        # -- stop: empty task configs, STOPPED, then offsets may change ----------------------------------
        assert follower.request("PUT", "/connectors/src/stop").status_code == 204
        wait_state("src", "STOPPED", [], "src STOPPED with no tasks")
        assert leader.get("/connectors/src").json()["tasks"] == []
        assert leader.get("/connectors/src/tasks").json() == []
        altered = follower.request("PATCH", "/connectors/src/offsets", json=new)
        assert altered.status_code == 200, altered.text
        assert altered.json() == {"message": "The offsets for this connector have been altered successfully"}
        assert follower.get("/connectors/src/offsets").json() == new
        bad = {"offsets": [{"partition": partition, "offset": {"position": -1}}]}
        error_json(
            follower.request("PATCH", "/connectors/src/offsets", json=bad),
            400,
            "The value for the 'position' key in the offset should be a non-negative value",
        )
        error_json(
            follower.request("PATCH", "/connectors/src/offsets", json={"offsets": []}),
            400,
            "Partitions / offsets need to be provided for an alter offsets request",
        )
        error_json(follower.request("PATCH", "/connectors/src/offsets", content=b"nope", headers=JSON), 400)
        reset = follower.request("DELETE", "/connectors/src/offsets")
        assert reset.json() == {"message": "The offsets for this connector have been reset successfully"}
        assert follower.get("/connectors/src/offsets").json() == {"offsets": []}
        # Another connector's offsets were not touched.
        kept = [
            v for k, v in read_topic(broker.bootstrap, offsets_topic) if json.loads(k) == ["other", partition]
        ]
        assert kept == [{"position": 9}]
        error_json(follower.request("DELETE", "/connectors/nope/offsets"), 404, "Connector nope not found")

        # A restart of a stopped connector leaves it stopped; a resume brings its task back.
        assert follower.request("POST", "/connectors/src/restart?includeTasks=true").status_code == 202
        assert follower.request("PUT", "/connectors/src/resume").status_code == 202
        wait_state("src", "RUNNING", ["UNASSIGNED"], "src RUNNING with its task after the stop")

        # -- sink offsets: the consumer group connect-<name> -----------------------------------------------
        sink_topic = f"{group}-sink-in"
        create_topic(broker.bootstrap, sink_topic)
        sink_config = {
            "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
            "file": str(tmp_path / "out.txt"),
            "topics": sink_topic,
        }
        made = follower.request(
            "POST", "/connectors", json={"name": "snk", "config": sink_config, "initial_state": "STOPPED"}
        )
        assert made.status_code == 201, made.text
        wait_state("snk", "STOPPED", [], "snk STOPPED")
        assert follower.get("/connectors/snk/offsets").json() == {"offsets": []}
        committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "connect-snk"})
        committer.commit(offsets=[TopicPartition(sink_topic, 0, 3)], asynchronous=False)
        committer.close()
        sink_p = {"kafka_partition": 0, "kafka_topic": sink_topic}
        assert follower.get("/connectors/snk/offsets").json() == {
            "offsets": [{"partition": sink_p, "offset": {"kafka_offset": 3}}]
        }
        sink_new = {"offsets": [{"partition": sink_p, "offset": {"kafka_offset": 5}}]}
        altered = follower.request("PATCH", "/connectors/snk/offsets", json=sink_new)
        assert altered.status_code == 200, altered.text
        assert follower.get("/connectors/snk/offsets").json() == sink_new
        # The group's offsets of a topic the connector does not read (any more) show too, as Java lists them.
        old_topic = f"{group}-sink-old"
        create_topic(broker.bootstrap, old_topic, partitions=2)
        committer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "connect-snk"})
        committer.commit(offsets=[TopicPartition(old_topic, 1, 7)], asynchronous=False)
        committer.close()
        old_p = {"kafka_partition": 1, "kafka_topic": old_topic}
        assert follower.get("/connectors/snk/offsets").json() == {
            "offsets": [*sink_new["offsets"], {"partition": old_p, "offset": {"kafka_offset": 7}}]
        }
        error_json(
            follower.request(
                "PATCH",
                "/connectors/snk/offsets",
                json={"offsets": [{"partition": {"kafka_topic": "t"}, "offset": None}]},
            ),
            400,
            "The partition for a sink connector offset must contain the keys 'kafka_topic' and "
            "'kafka_partition'",
        )
        reset = follower.request("DELETE", "/connectors/snk/offsets")
        assert reset.status_code == 200, reset.text
        assert follower.get("/connectors/snk/offsets").json() == {"offsets": []}

        # -- active topics: status-topic-<topic>:connector-<name> records ----------------------------------
        record = {"topic": {"name": "used", "connector": "src", "task": 0, "discoverTimestamp": 1}}
        producer.produce(
            status_topic, key=b"status-topic-used:connector-src", value=json.dumps(record).encode()
        )
        producer.flush(10)
        wait_until(
            lambda: follower.get("/connectors/src/topics").json() == {"src": {"topics": ["used"]}},
            30,
            "active topic",
        )
        assert follower.get("/connectors/nope/topics").json() == {"nope": {"topics": []}}
        assert follower.request("PUT", "/connectors/src/topics/reset").status_code == 202
        wait_until(
            lambda: leader.get("/connectors/src/topics").json() == {"src": {"topics": []}}, 30, "topics reset"
        )
        assert ("status-topic-used:connector-src", None) in read_topic(broker.bootstrap, status_topic)

        # -- internal requests: forwarding and signatures -------------------------------------------------
        # A request already forwarded once is not forwarded again (Java's rule and message).
        error_json(
            follower.request("PUT", "/connectors/src/pause?forward=false"),
            409,
            "Cannot complete request because of a conflicting operation (e.g. worker rebalance)",
        )
        # Task configs sent to the leader must be signed with the session key.
        unsigned = leader.request("POST", "/connectors/src/tasks", json=[{"a": "b"}])
        error_json(unsigned, 400, "Internal request missing required signature")
        forged = leader.request(
            "POST",
            "/connectors/src/tasks",
            json=[{"a": "b"}],
            headers={
                "X-Connect-Authorization": "Zm9yZ2Vk",
                "X-Connect-Request-Signature-Algorithm": "HmacSHA256",
            },
        )
        error_json(forged, 403, "Internal request contained invalid signature.")
        assert leader.get("/connectors/src/tasks").json()[0]["config"].get("a") is None
    finally:
        for w in workers:
            if w.alive():
                w.stop()
