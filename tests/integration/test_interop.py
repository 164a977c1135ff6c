"""Interop: Apache Kafka Connect (Java) and kconnect workers in one group, with
``connect.protocol=sessioned``, whichever side leads. Each side decodes the other's metadata and
assignments; writes made through either side's REST reach the leader; both read the same config topic.

Java 3.9 (the workers users still run) is the Java side of the first cases; Java 4.x (the test brokers'
version, ``REFERENCE_4X``) shares running FileStream tasks with kconnect whichever side leads, and joins
a kconnect group that formed on ``static`` (kconnect's default ``connect.protocol``), which Java does not
offer: Apache Kafka's coordinator chooses the group's protocol anew each generation, among those every
member offers, so the group goes over to ``sessioned`` while the Java worker is in it.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

import pytest

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker, broker_kind
from tests.support.cluster import WorkerProcess, read_json_values, wait_until, worker_properties
from tests.support.reference import REFERENCE_4X, REFERENCE_39, ReferenceWorker, reference_available
from tests.support.topics import create_topics

_AVAILABLE, _WHY = reference_available(REFERENCE_39)
_AVAILABLE_4X, _WHY_4X = reference_available(REFERENCE_4X)
pytestmark = [pytest.mark.integration, pytest.mark.interop]
#: The cases with Java 3.9 (interop with the workers users still run) and with Java 4.x.
needs_39 = pytest.mark.skipif(not _AVAILABLE, reason=f"reference worker 3.9 unavailable: {_WHY}")
needs_4x = pytest.mark.skipif(not _AVAILABLE_4X, reason=f"reference worker 4.x unavailable: {_WHY_4X}")

#: Connect's default session timeout: a shorter one let a worker busy starting Spark on CI's loaded 2-core
#: machine miss its session and drop out of the group.
SESSION_MS = 10000
#: No case here is about the delay for a departed member's work; a member that dropped out under load (and
#: joined again) must not leave its tasks unassigned for the default 5 minutes, longer than any wait here.
DELAY_MS = 5000


def _kconnect(
    tmp_path: Path, bootstrap: str, group: str, *, spark: bool = False, protocol: str = "sessioned"
) -> WorkerProcess:
    props = worker_properties(bootstrap, group, free_port(), session_timeout_ms=SESSION_MS)
    # The Java worker's topics are created with 1 partition each by the harness; use the same names.
    props["offset.storage.partitions"] = "1"
    props["status.storage.partitions"] = "1"
    props["rebalance.timeout.ms"] = "60000"
    props["scheduled.rebalance.max.delay.ms"] = str(DELAY_MS)
    props["file.connectors.enable"] = "true"  # the cases run FileStream connectors, as the Java side
    # sessioned unless the case is about the fall-back from static (kconnect's default): the embedded
    # development broker keeps the first generation's protocol, and would refuse the Java worker from a
    # group that started on static.
    props["connect.protocol"] = protocol
    return WorkerProcess(tmp_path, props, name=f"{group}-kconnect", spark=spark)


def _java(bootstrap: str, group: str, log_path: Path, version: str = REFERENCE_39) -> ReferenceWorker:
    return ReferenceWorker(
        bootstrap,
        group_id=group,
        log_path=log_path,
        protocol="sessioned",
        session_timeout_ms=SESSION_MS,
        heartbeat_interval_ms=1000,
        scheduled_rebalance_max_delay_ms=DELAY_MS,
        version=version,
    )


def _two_members(kc: WorkerProcess) -> dict[str, Any] | None:
    view = kc.workers()
    if view is None or view["this_worker"]["rebalancing"] or view["this_worker"]["generation"] < 0:
        return None
    return view if len(view["members"]) == 2 and view["source"] == "leader" else None


def _source_config(tmp_path: Path, topic: str) -> dict[str, str]:
    source = tmp_path / f"{topic}.txt"
    source.write_text("one\ntwo\n")
    return {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": str(source),
        "topic": topic,
        "tasks.max": "1",
    }


@needs_39
def test_kconnect_leads_and_java_follows(tmp_path: Path, broker: Broker) -> None:
    group = f"interop-{uuid.uuid4().hex[:6]}"
    kc = _kconnect(tmp_path, broker.bootstrap, group).start()
    started = time.monotonic()
    try:
        alone = wait_until(
            lambda: (v := kc.workers()) and v["this_worker"]["generation"] >= 0 and v, 60, "kconnect"
        )
        assert alone["members"][0]["leader"]
        with _java(broker.bootstrap, group, tmp_path / "java.log") as java:
            view = wait_until(lambda: _two_members(kc), 90, "kconnect's view of a two-member group")
            joined_s = time.monotonic() - started
            urls = {m["url"] for m in view["members"]}
            assert urls == {kc.url + "/", java.url.rstrip("/") + "/"}
            assert view["protocol"] == "sessioned"
            java_member = next(m for m in view["members"] if m["url"].startswith(java.url.rstrip("/")))
            # kconnect decoded the Java worker's v2 subscription.
            assert java_member["metadata_version"] == 2 and not java_member["leader"]
            # The Java worker decoded kconnect's v2 assignment: it logs it, naming kconnect as leader.
            got = java.wait_for_assignment(lambda a: a["leaderUrl"] == kc.url + "/", 60)
            assert got["protocol_version"] == 2 and got["error"] == 0
            assert got["leader"] == view["leader"]

            # A connector created through the Java follower is forwarded to the kconnect leader,
            # and both sides see it RUNNING from the shared status topic.
            config = _source_config(tmp_path, "from-java")

            def created() -> int | None:
                resp = java.rest("POST", "/connectors", json={"name": "via-java", "config": config})
                return resp.status_code if resp.status_code != 409 else None

            assert wait_until(created, 60, "create via the Java worker") == 201
            wait_until(lambda: kc.get("/connectors").json() == ["via-java"], 30, "kconnect sees it")

            def running_on_both() -> bool:
                k = kc.get("/connectors/via-java/status").json()
                j = java.rest("GET", "/connectors/via-java/status").json()
                return bool(
                    k.get("connector", {}).get("state") == "RUNNING"
                    and j.get("connector", {}).get("state") == "RUNNING"
                    and len(j.get("tasks", [])) == 1
                )

            wait_until(running_on_both, 90, "the connector RUNNING as both sides report it")
            print(f"interop (kconnect leads): two-member group formed {joined_s:.1f} s after start")
    finally:
        if kc.alive():
            kc.stop()


@needs_39
def test_java_leads_and_kconnect_follows(tmp_path: Path, broker: Broker) -> None:
    group = f"interop-{uuid.uuid4().hex[:6]}"
    started = time.monotonic()
    with _java(broker.bootstrap, group, tmp_path / "java.log") as java:
        first = java.wait_for_assignment(lambda a: a["error"] == 0, 60)
        java_leader = first["leader"]
        kc = _kconnect(tmp_path, broker.bootstrap, group).start()
        try:

            def following() -> dict[str, Any] | None:
                view = kc.workers()
                if view is None:
                    return None
                me = view["this_worker"]
                ok = (
                    me["generation"] >= 0
                    and not me["rebalancing"]
                    and me["leader_url"] == java.url.rstrip("/") + "/"
                )
                return view if ok else None

            view = wait_until(following, 90, "kconnect following the Java leader")
            joined_s = time.monotonic() - started
            assert view["this_worker"]["protocol"] == "sessioned"
            # The Java leader logged a two-member assignment round and kept leading.
            later = java.wait_for_assignment(
                lambda a: a["generation"] >= view["this_worker"]["generation"], 60
            )
            assert later["leader"] == java_leader

            # A connector created through kconnect (a follower) is forwarded to the Java leader; the
            # Java leader assigns it and its task, and kconnect applies what it is given.
            config = _source_config(tmp_path, "from-kconnect")

            def created() -> int | None:
                resp = kc.request("POST", "/connectors", json={"name": "via-kc", "config": config})
                return resp.status_code if resp.status_code != 409 else None

            assert wait_until(created, 60, "create via kconnect") == 201
            assert java.rest("GET", "/connectors").json() == ["via-kc"]

            def both_assigned() -> dict[str, Any] | None:
                status = java.rest("GET", "/connectors/via-kc/status").json()
                if status.get("connector", {}).get("state") not in ("RUNNING", "UNASSIGNED"):
                    return None
                if len(status.get("tasks", [])) != 1:
                    return None
                me = kc.workers()
                if me is None:
                    return None
                mine = me["this_worker"]["assignment"]
                owners = {status["connector"]["worker_id"], status["tasks"][0]["worker_id"]}
                kc_id = kc.url.split("://")[1]
                # Whatever the Java leader gave kconnect, kconnect reports it as its own.
                if kc_id in owners and not (mine["connectors"] or mine["tasks"]):
                    return None
                return {"status": status, "mine": mine}

            result = wait_until(both_assigned, 90, "the Java leader's assignment applied on both sides")
            java_says_kc_owns = {
                "connectors": ["via-kc"]
                if result["status"]["connector"]["worker_id"] == kc.url.split("://")[1]
                else [],
            }
            assert result["mine"]["connectors"] == java_says_kc_owns["connectors"]
            print(f"interop (Java leads): kconnect followed {joined_s:.1f} s after the Java worker started")
        finally:
            if kc.alive():
                kc.stop()


def _settled_generation(kc: WorkerProcess, what: str) -> int:
    """The generation ``kc`` settled in (0 is a generation too, so it is not the predicate's answer)."""
    found: list[int] = wait_until(lambda: (g := _generation(kc)) is not None and [g], 30, what)
    return found[0]


def _generation(kc: WorkerProcess) -> int | None:
    view = kc.workers()
    if view is None or view["this_worker"]["rebalancing"]:
        return None
    gen: int = view["this_worker"]["generation"]
    return gen if gen >= 0 else None


def _running(worker: WorkerProcess, name: str) -> bool:
    resp = worker.get(f"/connectors/{name}/status")
    if resp.status_code != 200:
        return False
    body = resp.json()
    tasks = body.get("tasks", [])
    return body["connector"]["state"] == "RUNNING" and bool(tasks) and tasks[0]["state"] == "RUNNING"


@needs_39
def test_a_java_member_turns_the_group_classic_until_it_leaves(tmp_path: Path, broker: Broker) -> None:
    """``group.protocol=connect`` (kconnect's default) in a mixed group (issue 14): while the Java worker
    is a member, a new connector costs a JoinGroup round as in Apache Kafka Connect; once it left, the
    kconnect workers reconcile again and a new connector costs none."""
    group = f"interop-{uuid.uuid4().hex[:6]}"
    workers = [_kconnect(tmp_path / f"k{i}", broker.bootstrap, group, spark=True) for i in range(2)]
    for i, w in enumerate(workers):
        (tmp_path / f"k{i}").mkdir(exist_ok=True)
        w.start()
    kc = workers[0]
    try:

        def members(n: int) -> dict[str, Any] | None:
            view = kc.workers()
            ok = view is not None and not view["this_worker"]["rebalancing"] and view["source"] == "leader"
            return view if ok and view is not None and len(view["members"]) == n else None

        wait_until(lambda: members(2), 90, "two kconnect workers")

        def create(name: str) -> None:
            config = _source_config(tmp_path, name)
            wait_until(
                lambda: (
                    kc.request("POST", "/connectors", json={"name": name, "config": config}).status_code
                    == 201
                ),
                60,
                f"create {name}",
            )
            wait_until(lambda: _running(kc, name), 90, f"{name} RUNNING")

        before = _settled_generation(kc, "a generation")
        create("kc-only-1")
        assert _generation(kc) == before, "reconciling: a new connector needs no JoinGroup round"

        with _java(broker.bootstrap, group, tmp_path / "java.log") as java:
            wait_until(lambda: members(3), 90, "the Java worker in the group")
            mixed = _settled_generation(kc, "the mixed generation")
            create("with-java")
            wait_until(
                lambda: (g := _generation(kc)) is not None and g > mixed, 60, "a classic round for the change"
            )
            assert java.rest("GET", "/connectors").json() is not None
        wait_until(lambda: members(2), 90, "the Java worker gone")
        after = _settled_generation(kc, "the generation without Java")
        create("kc-only-2")
        # A JoinGroup round for the change would come before the connector runs (the classic path above
        # runs it in the new generation), so once both workers report it RUNNING, each one's generation
        # tells whether there was one.
        wait_until(lambda: _running(workers[1], "kc-only-2"), 60, "kc-only-2 RUNNING as the other sees it")
        assert [_generation(w) for w in workers] == [after, after], "reconciling again once Java left"
        for name in ("kc-only-1", "with-java", "kc-only-2"):
            assert _running(workers[1], name)
    finally:
        for w in workers:
            if w.alive():
                w.kill()


# ------------------------------------------------------------------------------------ Java 4.x


def _worker_id(kc: WorkerProcess) -> str:
    return kc.url.split("://")[1]


def _statuses(worker: WorkerProcess | ReferenceWorker, name: str) -> dict[str, Any] | None:
    path = f"/connectors/{name}/status"
    resp = worker.get(path) if isinstance(worker, WorkerProcess) else worker.rest("GET", path)
    return resp.json() if resp.status_code == 200 else None


def _lines_source(tmp_path: Path, name: str, topic: str) -> dict[str, str]:
    """A FileStream source of two lines, written as JSON strings whichever worker runs it."""
    source = tmp_path / f"{name}.txt"
    source.write_text(f"{name} one\n{name} two\n")
    return {
        "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
        "file": str(source),
        "topic": topic,
        "tasks.max": "1",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter.schemas.enable": "false",
    }


@needs_4x
@pytest.mark.parametrize("leader", ["kconnect", "java"])
def test_kconnect_and_a_4x_java_worker_run_tasks_side_by_side(
    tmp_path: Path, broker: Broker, leader: str
) -> None:
    """One group of a kconnect worker and an Apache Kafka Connect 4.x worker under ``sessioned``: the
    follower decodes the leader's assignments (each side leads once), and FileStream tasks run on both
    workers, their lines read back from their topics."""
    group = f"interop4-{uuid.uuid4().hex[:6]}"
    kc = _kconnect(tmp_path, broker.bootstrap, group, spark=True)
    java = _java(broker.bootstrap, group, tmp_path / "java.log", version=REFERENCE_4X)
    names = ["src-a", "src-b"]
    topics = {name: f"{group}-{name}" for name in names}
    create_topics(broker.bootstrap, topics.values())
    started = time.monotonic()
    try:
        if leader == "kconnect":
            kc.start()
            wait_until(lambda: _generation(kc) is not None, 90, "kconnect alone in its group")
            java.start()
        else:
            java.start()
            java.wait_for_assignment(lambda a: a["error"] == 0, 90)
            kc.start()
        java_url = java.url.rstrip("/") + "/"
        leader_url = kc.url + "/" if leader == "kconnect" else java_url

        def settled() -> dict[str, Any] | None:
            """kconnect's view of the group once it has both members and follows ``leader_url`` (with a
            Java leader the members are the coordinator's description of the group)."""
            view = kc.workers()
            if view is None:
                return None
            me = view["this_worker"]
            ok = me["generation"] >= 0 and not me["rebalancing"] and me["leader_url"] == leader_url
            return view if ok and len(view["members"]) == 2 else None

        view = wait_until(settled, 120, f"a two-member group led by {leader}")
        joined_s = time.monotonic() - started
        assert view["this_worker"]["protocol"] == "sessioned"
        # kconnect decoded the Java worker's subscription (v2, sessioned), and the Java worker the leader's
        # assignment, naming the same leader.
        java_member = next(m for m in view["members"] if m["url"] == java_url)
        assert java_member["metadata_version"] == 2
        got = java.wait_for_assignment(lambda a: a["leaderUrl"] == leader_url and a["error"] == 0, 60)
        assert got["protocol_version"] == 2 and got["leader"] == view["leader"]

        # Both connectors created through the follower (forwarded to the leader).
        for name in names:
            body = {"name": name, "config": _lines_source(tmp_path, name, topics[name])}

            def created(body: dict[str, Any] = body) -> int | None:
                if leader == "kconnect":
                    code = java.rest("POST", "/connectors", json=body).status_code
                else:
                    code = kc.request("POST", "/connectors", json=body).status_code
                return code if code != 409 else None

            assert wait_until(created, 60, f"create {name} through the follower") == 201

        ids = {_worker_id(kc), java.worker_id}

        seen_last: dict[str, Any] = {}

        def spread() -> dict[str, str] | None:
            """Each task's worker, once every task RUNNING as both sides report it and on both workers."""
            owners: dict[str, str] = {}
            for name in names:
                seen = [_statuses(kc, name), _statuses(java, name)]
                seen_last[name] = {"kconnect": seen[0], "java": seen[1]}
                if not all(s and len(s["tasks"]) == 1 and s["tasks"][0]["state"] == "RUNNING" for s in seen):
                    return None
                assert seen[0] is not None and seen[1] is not None
                if seen[0]["tasks"][0]["worker_id"] != seen[1]["tasks"][0]["worker_id"]:
                    return None
                owners[name] = seen[1]["tasks"][0]["worker_id"]
            return owners if set(owners.values()) == ids else None

        try:
            owners = wait_until(spread, 240, "the tasks RUNNING, one on each worker")
        except AssertionError as exc:
            raise AssertionError(
                f"{exc}; statuses as each side last reported them: {seen_last}; kconnect's view of the "
                f"group: {kc.workers()}; the Java worker's last assignments: {java.assignments()[-4:]}"
            ) from None
        # What kconnect reports as its own assignment is what the statuses say it runs.
        mine = wait_until(
            lambda: (v := kc.workers()) and v["this_worker"]["assignment"], 30, "kconnect's view"
        )
        kc_tasks = sorted(f"{n}-0" for n, owner in owners.items() if owner == _worker_id(kc))
        assert sorted(mine["tasks"]) == kc_tasks
        for name in names:
            values = read_json_values(broker.bootstrap, topics[name], 2, timeout=120)
            assert values == [f"{name} one", f"{name} two"], f"{name} ran on {owners[name]}"
        print(
            f"interop 4.x ({leader} leads): two-member group {joined_s:.1f} s after start, "
            f"tasks on {owners}, {time.monotonic() - started:.1f} s in all"
        )
    finally:
        java.close()
        if kc.alive():
            kc.stop(60)


@needs_4x
@pytest.mark.skipif(
    broker_kind() != "kafka",
    reason="the embedded broker keeps a group's first protocol and refuses members that do not offer it",
)
def test_a_static_group_admits_a_4x_java_worker_on_sessioned(tmp_path: Path, broker: Broker) -> None:
    """kconnect's default ``connect.protocol=static`` offers static, sessioned, compatible and eager; a
    group that formed on static admits a Java worker offering sessioned and below: Apache Kafka chooses
    the protocol every member offers (sessioned) for the generation the Java worker joins, and static again
    once it left."""
    group = f"interop4s-{uuid.uuid4().hex[:6]}"
    kc = _kconnect(tmp_path, broker.bootstrap, group, protocol="static").start()
    started = time.monotonic()
    try:
        alone = wait_until(
            lambda: (v := kc.workers()) and _generation(kc) is not None and len(v["members"]) == 1 and v,
            90,
            "kconnect alone",
        )
        assert alone["protocol"] == "static"
        with _java(broker.bootstrap, group, tmp_path / "java.log", version=REFERENCE_4X) as java:
            view = wait_until(lambda: _two_members(kc), 120, "the Java worker admitted to the static group")
            joined_s = time.monotonic() - started
            assert view["protocol"] == "sessioned"
            got = java.wait_for_assignment(lambda a: a["leaderUrl"] == kc.url + "/" and a["error"] == 0, 60)
            assert got["protocol_version"] == 2
            config = _source_config(tmp_path, "static-then-sessioned")

            def created() -> int | None:
                resp = java.rest("POST", "/connectors", json={"name": "via-java", "config": config})
                return resp.status_code if resp.status_code != 409 else None

            assert wait_until(created, 60, "create via the Java worker") == 201

            def running_on_both() -> bool:
                k, j = _statuses(kc, "via-java"), _statuses(java, "via-java")
                return bool(
                    k
                    and j
                    and k["connector"]["state"] == j["connector"]["state"] == "RUNNING"
                    and len(j["tasks"]) == 1
                )

            wait_until(running_on_both, 90, "the connector RUNNING as both sides report it")
        back = wait_until(
            lambda: (v := kc.workers()) and _generation(kc) is not None and len(v["members"]) == 1 and v,
            90,
            "kconnect alone again",
        )
        assert back["protocol"] == "static"
        print(f"interop 4.x (static group): Java admitted {joined_s:.1f} s after start")
    finally:
        if kc.alive():
            kc.stop()
