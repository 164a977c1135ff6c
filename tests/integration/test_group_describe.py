"""``kconnect group describe`` reads a real group-records topic on the embedded broker, with no worker.

The records are written with ``encode_key``/``encode_value`` by a plain confluent-kafka producer, one
record per produce-and-flush: Tansu reports the end of a partition as the base offset of its last batch
plus one (DESIGN.md, "Test broker"), so a reader stopping there would miss the tail of a multi-record
batch. The command then runs as a subprocess, as a user would run it.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from kconnect.runtime.cli.broker import free_port
from kconnect.runtime.group.group_records import (
    Assigned,
    Assignor,
    ConnectorsTasksKey,
    ConnectorsTasksValue,
    CurrentMemberAssignmentKey,
    CurrentMemberAssignmentValue,
    GroupConfigurationKey,
    GroupConfigurationValue,
    GroupMetadataKey,
    GroupMetadataValue,
    MemberMetadataKey,
    MemberMetadataValue,
    RecordKey,
    RecordValue,
    TargetAssignmentKey,
    TargetAssignmentValue,
    TargetMember,
    encode_key,
    encode_value,
    partition_for,
)
from kconnect.runtime.group.protocol import (
    V2,
    ConnectAssignment,
    WorkerState,
    encode_assignment,
    encode_metadata,
)
from kconnect.runtime.ids import TaskId
from tests.support.apache_kafka import Broker

pytestmark = pytest.mark.integration

PARTITIONS = 3
DELAY_MS = 120_000


def _member(group_epoch: int, n: int) -> MemberMetadataValue:
    metadata = encode_metadata(WorkerState(f"http://w{n}.example:8083/", 17), V2)
    return MemberMetadataValue(
        group_epoch,
        f"w{n}",
        f"connect-{n}",
        f"/10.0.0.{n}",
        assignors=(Assignor("sessioned", 0, 2, 0, 2, metadata),),
    )


def _assignment(delay_ms: int, *tasks: TaskId) -> bytes:
    return encode_assignment(
        ConnectAssignment(2, 0, "m1", "http://w1.example:8083/", 17, (), tasks, delay_ms=delay_ms)
    )


def _produce(
    producer: Producer, topic: str, partition: int, records: list[tuple[bytes | None, bytes | None]]
) -> list[int]:
    """Write each record in a batch of its own; their timestamps, in order."""
    stamps: list[int] = []
    for key, value in records:
        delivered: dict[str, Any] = {}
        producer.produce(
            topic,
            key=key,
            value=value,
            partition=partition,
            on_delivery=lambda err, msg, d=delivered: d.update(err=err, msg=msg),
        )
        producer.flush(10)
        assert delivered.get("err") is None and "msg" in delivered, delivered
        stamps.append(delivered["msg"].timestamp()[1])
    return stamps


def _rec(key: RecordKey, value: RecordValue | None) -> tuple[bytes, bytes | None]:
    return encode_key(key), None if value is None else encode_value(value)


def _describe(bootstrap: str, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "kconnect.runtime.cli.main",
            "group",
            "describe",
            "--bootstrap-server",
            bootstrap,
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def written(broker: Broker) -> dict[str, Any]:
    """A group-records topic holding one group, written the way workers will write it."""
    group = f"describe-{uuid.uuid4().hex[:6]}"
    topic = f"{group}-group-records"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, PARTITIONS, 1, config={"cleanup.policy": "compact"})])[topic].result(
        30
    )
    producer = Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 0})
    sink, source = TaskId("sink", 0), TaskId("source", 0)
    target = TargetAssignmentValue(
        5,
        (
            TargetMember("m1", 0, Assigned(frozenset({"sink"}), frozenset({sink})), 2, _assignment(0, sink)),
            TargetMember("m2", 0, Assigned(frozenset(), frozenset()), 2, _assignment(DELAY_MS)),
            # m3 left without a clean hand-over: its task waits for it during the delay.
            TargetMember(
                "m3", 0, Assigned(frozenset(), frozenset({source})), 2, _assignment(DELAY_MS, source)
            ),
        ),
    )
    records = [
        _rec(
            GroupConfigurationKey(group),
            GroupConfigurationValue((("scheduled.rebalance.max.delay.ms", "120000"),)),
        ),
        *(_rec(MemberMetadataKey(group, f"m{n}"), _member(4, n)) for n in (1, 2, 3)),
        _rec(
            ConnectorsTasksKey(group),
            ConnectorsTasksValue(4, Assigned(frozenset({"sink", "source"}), frozenset({sink, source}))),
        ),
        _rec(
            CurrentMemberAssignmentKey(group, "m1"),
            CurrentMemberAssignmentValue(5, 0, target.members[0].assigned, 2, b""),
        ),
        _rec(
            CurrentMemberAssignmentKey(group, "m3"),
            CurrentMemberAssignmentValue(4, 0, target.members[2].assigned, 2, b""),
        ),
        (encode_key(GroupMetadataKey(group)), b"\x00\x00\xde\xad"),  # corrupt: truncated value
        (b"\x00\x63garbage", b"\x00\x00"),  # an unknown key version
        _rec(GroupMetadataKey(group), GroupMetadataValue(5)),
        _rec(MemberMetadataKey(group, "m3"), None),  # m3 is gone: tombstones for its member records
        _rec(CurrentMemberAssignmentKey(group, "m3"), None),
        _rec(TargetAssignmentKey(group), target),
    ]
    stamps = _produce(producer, topic, partition_for(group, PARTITIONS), records)
    # Another group in the same topic must not leak into this one.
    _produce(
        producer,
        topic,
        partition_for("other", PARTITIONS),
        [_rec(GroupMetadataKey("other"), GroupMetadataValue(1))],
    )
    return {"group": group, "topic": topic, "target_timestamp": stamps[-1], "corrupt_offset": 7}


def test_describe_json_shows_the_group_its_records_describe(broker: Broker, written: dict[str, Any]) -> None:
    done = _describe(broker.bootstrap, "--group", written["group"], "--json")
    assert done.returncode == 0, done.stderr
    view = json.loads(done.stdout)
    assert view["group"] == written["group"] and view["epoch"] == 5
    assert view["connectors_tasks"] == {
        "epoch": 4,
        "connectors": ["sink", "source"],
        "tasks": ["sink-0", "source-0"],
    }
    assert [m["member_id"] for m in view["members"]] == ["m1", "m2"]
    assert view["members"][0]["assignors"][0]["metadata"]["url"] == "http://w1.example:8083/"
    assert {m["member_id"]: m["tasks"] for m in view["target"]["members"]} == {
        "m1": ["sink-0"],
        "m2": [],
        "m3": ["source-0"],
    }
    assert view["current"] == [
        {
            "member_id": "m1",
            "member_epoch": 5,
            "connectors": ["sink"],
            "tasks": ["sink-0"],
            "learners": [],  # the tasks it is warming up (issue 25): none
            "error": 0,
        }
    ]
    assert view["vanished"] == ["m3"]
    assert view["configuration"] == {"scheduled.rebalance.max.delay.ms": "120000"}
    scheduled = view["scheduled_rebalance"]
    assert scheduled["due_ms"] == written["target_timestamp"] + DELAY_MS
    assert 0 <= scheduled["remaining_ms"] <= DELAY_MS
    # The corrupt records were skipped with a warning naming them; the rest was still read.
    assert "skipping group record whose value does not decode" in done.stderr
    assert f'"offset": {written["corrupt_offset"]}' in done.stderr
    assert "skipping group record whose key does not decode" in done.stderr


def test_describe_table_is_readable(broker: Broker, written: dict[str, Any]) -> None:
    done = _describe(broker.bootstrap, "--group", written["group"], "--topic", written["topic"])
    assert done.returncode == 0, done.stderr
    text = done.stdout
    assert text.startswith(f"group {written['group']}   epoch 5\n")
    lines = text.splitlines()
    m1 = next(line for line in lines if line.strip().startswith("m1 ") and "http://" in line)
    assert "http://w1.example:8083/" in m1 and "sessioned/v2" in m1
    m3 = next(line for line in lines if line.strip().startswith("m3 "))
    assert "source-0" in m3 and "vanished" in m3 and f"delay {DELAY_MS} ms" in m3
    assert any(line.startswith("scheduled rebalance: due ") for line in lines)
    assert "vanished members, their work awaits their return: m3" in text
    assert "scheduled.rebalance.max.delay.ms = 120000" in text


def test_unknown_group_is_a_one_line_error(broker: Broker, written: dict[str, Any]) -> None:
    done = _describe(broker.bootstrap, "--group", "nobody", "--topic", written["topic"])
    assert done.returncode == 2
    assert done.stdout == ""
    # The topic's corrupt records are still warned about (JSON log lines); the error is one line of its own.
    errors = [line for line in done.stderr.splitlines() if not line.startswith("{")]
    assert errors == [
        f"kconnect: unknown group 'nobody': the topic '{written['topic']}' holds no records of it "
        f"(groups found: {written['group']}, other)"
    ]


def test_missing_topic_is_a_one_line_error(broker: Broker) -> None:
    done = _describe(broker.bootstrap, "--group", f"absent-{uuid.uuid4().hex[:6]}")
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "does not exist" in lines[0] and "-group-records" in lines[0]


def test_unreachable_broker_is_a_clear_error_not_a_hang() -> None:
    nowhere = f"127.0.0.1:{free_port()}"
    done = _describe(nowhere, "--group", "g", "--timeout", "3", timeout=60)
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and f"could not reach the Kafka cluster at {nowhere}" in lines[0]


def test_command_config_takes_java_named_client_settings(
    broker: Broker, written: dict[str, Any], tmp_path: Path
) -> None:
    """``--command-config`` as Apache Kafka's tools take it: Java names translated (``fetch.max.wait.ms``
    would be refused by librdkafka as written), Java-only ones ignored; a JKS trust store is refused,
    naming the key, before anything is read."""
    good = tmp_path / "client.properties"
    good.write_text("security.protocol=PLAINTEXT\nfetch.max.wait.ms=50\nmax.poll.records=10\n")
    done = _describe(broker.bootstrap, "--group", written["group"], "--json", "--command-config", str(good))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["epoch"] == 5
    bad = tmp_path / "jks.properties"
    bad.write_text("security.protocol=SSL\nssl.truststore.location=/etc/kafka/truststore.jks\n")
    done = _describe(broker.bootstrap, "--group", written["group"], "--command-config", str(bad))
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "kconnect: --command-config: Invalid value '/etc/kafka/truststore.jks' for configuration "
        "ssl.truststore.location: a PEM file with ssl.truststore.type=PEM (it is JKS): kconnect's Kafka "
        "clients (librdkafka) read trust stores as PEM certificates only; export them "
        "(keytool -exportcert -rfc)"
    ]
