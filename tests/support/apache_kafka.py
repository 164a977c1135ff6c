"""Apache Kafka brokers that the tests start themselves: KRaft nodes from the jars of Maven Central.

``tests/apache-kafka/pom.xml`` names the artifacts; :func:`kafka_libs` copies them once into a cache
(``make kafka`` does the same ahead of the run) and every broker runs ``kafka.Kafka`` from that classpath.
A node is a combined broker and controller, so one JVM makes a one-node cluster; :class:`KafkaCluster`
with ``size=3`` makes three voters that elect a controller among themselves, which the fault tests need
(a broker killed, leadership moved, the group coordinator's broker lost).

    with KafkaCluster(tmp_path, size=3) as cluster:
        cluster.bootstrap            # "127.0.0.1:p1,127.0.0.1:p2,127.0.0.1:p3"
        cluster.kill(2); cluster.restart(2)

The integration suite runs on one of these by default; ``KCONNECT_TEST_BROKER=embedded`` runs it on the
embedded development broker (Tansu) instead, whose differences ../shared/DESIGN.md lists.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Protocol

from kconnect.runtime.cli.broker import free_port
from tests.support.maven import copy_dependencies, is_fetched, kconnect_cache

REPO = Path(__file__).resolve().parents[2]
POM = REPO / "tests" / "apache-kafka" / "pom.xml"
#: The version the pom pins; the cache directory is named for it, so a new pin fetches anew.
KAFKA_VERSION = "4.3.1"


class Broker(Protocol):
    """What a test needs of a broker, whichever kind runs (this module's cluster or the embedded one)."""

    @property
    def bootstrap(self) -> str: ...

    @property
    def host(self) -> str: ...

    @property
    def port(self) -> int: ...


class KafkaError(RuntimeError):
    """Apache Kafka could not be fetched or a node did not start."""


def kafka_home() -> Path:
    explicit = os.environ.get("KCONNECT_KAFKA_HOME")
    if explicit:
        return Path(explicit)
    return kconnect_cache(f"apache-kafka-{KAFKA_VERSION}")


def kafka_libs() -> Path:
    """The folder of Apache Kafka's jars, fetched with Maven on first use (``make kafka`` does it too).

    A marker file is written last, so an interrupted copy is redone rather than trusted
    (``tests/support/maven.py``).
    """
    if not is_fetched(kafka_home()) and shutil.which("java") is None:
        raise KafkaError("java (17+) is needed to run Apache Kafka")
    return copy_dependencies(
        POM, kafka_home(), "libs", what=f"Apache Kafka {KAFKA_VERSION}", stamp=KAFKA_VERSION, error=KafkaError
    )


def classpath() -> str:
    return ":".join(str(p) for p in sorted(kafka_libs().glob("*.jar")))


JAVA_OPTS = ["-Xms64m", "-Xmx768m", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true"]

LOG4J2 = """\
status = warn
rootLogger.level = {level}
rootLogger.appenderRef.out.ref = OUT
appender.out.type = Console
appender.out.name = OUT
appender.out.layout.type = PatternLayout
appender.out.layout.pattern = [%d] %p %m (%c{{1}})%n
logger.kafka.name = kafka
logger.kafka.level = {level}
logger.state.name = state.change.logger
logger.state.level = WARN
"""

# Nodes still running when the interpreter exits (a test that raised before its cleanup) are killed.
_LIVE: weakref.WeakSet[KafkaNode] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for node in list(_LIVE):
        with contextlib.suppress(Exception):
            node.kill()


@dataclass(eq=False)
class KafkaNode:
    """One KRaft node (broker and controller in one JVM) with its data directory under ``workdir``."""

    node_id: int
    port: int
    controller_port: int
    workdir: Path
    host: str = "127.0.0.1"
    process: subprocess.Popen[bytes] | None = field(default=None, repr=False)
    #: Ports of the cluster's extra listeners (``KafkaCluster(listeners=...)``), by listener name.
    extra_ports: dict[str, int] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.workdir / "server.log"

    @property
    def properties_path(self) -> Path:
        return self.workdir / "server.properties"

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, cp: str) -> None:
        log = open(self.log_path, "ab")  # noqa: SIM115 - owned by the child
        self.process = subprocess.Popen(
            [
                "java",
                *JAVA_OPTS,
                f"-Dlog4j2.configurationFile={self.workdir / 'log4j2.properties'}",
                "-cp",
                cp,
                "kafka.Kafka",
                str(self.properties_path),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        _LIVE.add(self)

    def kill(self) -> None:
        """SIGKILL: the node gets no chance to hand over leadership or close its sockets."""
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)

    def stop(self) -> None:
        """SIGTERM (a controlled shutdown), then SIGKILL after 20 s."""
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()


def _accepts(host: str, port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection((host, port), timeout=0.5):
        return True
    return False


class KafkaCluster:
    """``size`` KRaft nodes on loopback; each node is a voter of the controller quorum and a broker.

    ``broker_config`` adds or overrides server properties on every node (e.g. SASL listeners).
    Internal topics of the broker itself (``__consumer_offsets``, the transaction log) are made with
    the cluster's size as replication factor, at most 3, so a fault test's coordinator survives a node.
    """

    def __init__(
        self,
        workdir: Path,
        size: int = 1,
        *,
        broker_config: dict[str, str] | None = None,
        log_level: str = "WARN",
        listeners: dict[str, str] | None = None,
        scram_users: dict[str, str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.size = size
        self.broker_config = dict(broker_config or {})
        self.log_level = log_level
        #: Listeners besides PLAINTEXT and CONTROLLER: name -> security protocol (``{"SASL":
        #: "SASL_PLAINTEXT", "SSL": "SSL"}``), each on a port of its own per node; PLAINTEXT stays the
        #: inter-broker listener. Their settings (JAAS, key stores) come with ``broker_config``.
        self.listeners = dict(listeners or {})
        #: SCRAM-SHA-512 users (name -> password) written into the metadata when the nodes are formatted,
        #: so that a SASL/SCRAM login works from the first request (``StorageTool format --add-scram``).
        self.scram_users = dict(scram_users or {})
        self.cluster_id = _cluster_id()
        self.nodes = [
            KafkaNode(
                node_id=i + 1, port=free_port(), controller_port=free_port(), workdir=workdir / f"node{i + 1}"
            )
            for i in range(size)
        ]
        for node in self.nodes:
            node.extra_ports = {name: free_port() for name in self.listeners}
        self._cp: str | None = None

    # The names EmbeddedBroker has, so a test takes either.
    @property
    def bootstrap(self) -> str:
        return ",".join(n.bootstrap for n in self.nodes)

    @property
    def host(self) -> str:
        return self.nodes[0].host

    @property
    def port(self) -> int:
        return self.nodes[0].port

    def server_properties(self, node: KafkaNode) -> dict[str, str]:
        voters = ",".join(f"{n.node_id}@{n.host}:{n.controller_port}" for n in self.nodes)
        rf = str(min(self.size, 3))
        props = {
            "process.roles": "broker,controller",
            "node.id": str(node.node_id),
            "controller.quorum.voters": voters,
            "listeners": f"PLAINTEXT://{node.host}:{node.port},CONTROLLER://{node.host}:{node.controller_port}",
            "advertised.listeners": f"PLAINTEXT://{node.host}:{node.port}",
            "controller.listener.names": "CONTROLLER",
            "inter.broker.listener.name": "PLAINTEXT",
            "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "log.dirs": str(node.workdir / "data"),
            "num.partitions": "1",
            "default.replication.factor": "1",
            "offsets.topic.replication.factor": rf,
            "offsets.topic.num.partitions": "5" if self.size > 1 else "1",
            "transaction.state.log.replication.factor": rf,
            "transaction.state.log.min.isr": "1" if self.size < 3 else "2",
            "transaction.state.log.num.partitions": "5" if self.size > 1 else "1",
            "share.coordinator.state.topic.replication.factor": rf,
            "share.coordinator.state.topic.min.isr": "1",
            # Tests form groups of fresh workers: Kafka's default 3-s wait for more members of a new
            # group only slows them; and short sessions let a test see a dead member go.
            "group.initial.rebalance.delay.ms": "0",
            "group.min.session.timeout.ms": "1000",
            "log.segment.bytes": str(16 * 1024 * 1024),
            "log.cleaner.dedupe.buffer.size": str(4 * 1024 * 1024),
            "num.network.threads": "2",
            "num.io.threads": "4",
            "num.recovery.threads.per.data.dir": "1",
            "background.threads": "4",
        }
        for name, protocol in self.listeners.items():
            address = f"{name}://{node.host}:{node.extra_ports[name]}"
            props["listeners"] += "," + address
            props["advertised.listeners"] += "," + address
            props["listener.security.protocol.map"] += f",{name}:{protocol}"
        props.update(self.broker_config)
        return props

    def listener_bootstrap(self, name: str) -> str:
        """``bootstrap.servers`` for one of the extra listeners (``KafkaCluster(listeners=...)``)."""
        return ",".join(f"{n.host}:{n.extra_ports[name]}" for n in self.nodes)

    def _write(self, node: KafkaNode) -> None:
        node.workdir.mkdir(parents=True, exist_ok=True)
        node.properties_path.write_text(
            "".join(f"{k}={v}\n" for k, v in self.server_properties(node).items())
        )
        (node.workdir / "log4j2.properties").write_text(LOG4J2.format(level=self.log_level))

    def start(self, timeout: float = 90) -> KafkaCluster:
        self._cp = classpath()
        for node in self.nodes:
            self._write(node)
            proc = subprocess.run(
                [
                    "java",
                    "-Xmx256m",
                    "-XX:TieredStopAtLevel=1",
                    "-cp",
                    self._cp,
                    "kafka.tools.StorageTool",
                    "format",
                    "--ignore-formatted",
                    "-t",
                    self.cluster_id,
                    "-c",
                    str(node.properties_path),
                    *(
                        arg
                        for user, password in self.scram_users.items()
                        for arg in ("--add-scram", f"SCRAM-SHA-512=[name={user},password={password}]")
                    ),
                ],
                capture_output=True,
                text=True,
                timeout=120,
            )
            if proc.returncode != 0:
                raise KafkaError(f"formatting node {node.node_id} failed: {proc.stdout}{proc.stderr}")
        for node in self.nodes:
            node.start(self._cp)
        self.wait_ready(timeout)
        return self

    def wait_ready(self, timeout: float = 90, nodes: list[KafkaNode] | None = None) -> None:
        """Until every node listens and the cluster's metadata names all of them as brokers.

        A listening port is not enough: a broker serves requests only once it has registered with the
        controller, and a client that came too early is told about a cluster without it.
        """
        from confluent_kafka.admin import AdminClient

        nodes = nodes or [n for n in self.nodes if n.alive()]
        deadline = time.monotonic() + timeout
        for node in nodes:
            while not _accepts(node.host, node.port):
                if not node.alive():
                    raise KafkaError(f"node {node.node_id} exited: {self.tail(node)}")
                if time.monotonic() > deadline:
                    raise KafkaError(f"node {node.node_id} did not listen within {timeout:.0f} s")
                time.sleep(0.1)
        admin = AdminClient({"bootstrap.servers": ",".join(n.bootstrap for n in nodes)})
        want = {n.node_id for n in nodes}
        while True:
            with contextlib.suppress(Exception):
                meta = admin.list_topics(timeout=5)
                if want <= set(meta.brokers):
                    return
            if time.monotonic() > deadline:
                raise KafkaError(f"brokers {sorted(want)} did not all register within {timeout:.0f} s")
            time.sleep(0.2)

    def node(self, node_id: int) -> KafkaNode:
        return self.nodes[node_id - 1]

    def kill(self, node_id: int) -> None:
        self.node(node_id).kill()

    def restart(self, node_id: int, timeout: float = 90, *, wait: bool = True) -> None:
        """Start the node again (SIGKILLed first if it still runs); ``wait``: until it has registered
        (``wait_ready``), else return once its process runs (a fault schedule that must keep its times)."""
        node = self.node(node_id)
        node.kill()
        assert self._cp is not None
        node.start(self._cp)
        if wait:
            self.wait_ready(timeout, nodes=[node])

    def stop(self) -> None:
        for node in self.nodes:
            node.kill()

    def tail(self, node: KafkaNode, lines: int = 30) -> str:
        if not node.log_path.exists():
            return ""
        return "\n".join(node.log_path.read_text(errors="replace").splitlines()[-lines:])

    def __enter__(self) -> KafkaCluster:
        return self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _cluster_id() -> str:
    """A KRaft cluster id: 16 random bytes in URL-safe base64 without padding (22 characters), never
    starting with ``-``, as Kafka's ``Uuid.randomUuid`` ensures: ``StorageTool format -t -xyz`` takes such
    an id for an option and fails (seen once in 64 starts)."""
    import base64

    while True:
        text = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not text.startswith("-"):
            return text


def broker_kind() -> str:
    """``kafka`` (Apache Kafka, the default) or ``embedded`` (Tansu), from ``KCONNECT_TEST_BROKER``."""
    kind = os.environ.get("KCONNECT_TEST_BROKER", "kafka").strip().lower()
    if kind not in ("kafka", "embedded"):
        raise KafkaError(f"KCONNECT_TEST_BROKER={kind!r}: allowed are 'kafka' and 'embedded'")
    return kind


def one_record_batches(prefix: str = "") -> dict[str, str]:
    """Producer settings that send every record as a batch of its own on the embedded broker, and none on
    Apache Kafka; ``prefix`` ``producer.`` makes them a worker's (its tasks' producers).

    Why: a sink task that runs as a Structured Streaming query plans each micro-batch up to the partitions'
    high watermarks, as Spark's Kafka source does, and the embedded broker reports a partition's high
    watermark as the base offset of its last batch + 1 (DESIGN.md, test broker quirk 2), so the tail of a
    multi-record batch would wait for the next batch, for ever once the producer stops. The product
    targets Apache Kafka and does nothing about it: the tests that run query sinks produce one record per
    batch there, so that they run under ``KCONNECT_TEST_BROKER=embedded`` too.
    """
    return {f"{prefix}batch.num.messages": "1"} if broker_kind() == "embedded" else {}


# --- Fault-test helpers: where leaders and coordinators are, moving leadership, waiting for the ISR


def java_string_hash(text: str) -> int:
    """Java's ``String.hashCode`` of ``text`` (UTF-16 code units), as a signed 32-bit int."""
    h = 0
    for unit in text.encode("utf-16-be").hex(" ", 2).split():
        h = (31 * h + int(unit, 16)) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_partition(group: str, partitions: int) -> int:
    """The ``__consumer_offsets`` partition that holds ``group`` (``Utils.abs(hashCode) % partitions``):
    its leader is the group's coordinator."""
    h = java_string_hash(group)
    return (h & 0x7FFFFFFF if h == -(1 << 31) else abs(h)) % partitions


def partition_replicas(
    bootstrap: str, topics: list[str]
) -> dict[tuple[str, int], tuple[int, list[int], list[int]]]:
    """(topic, partition) -> (leader, replicas, in-sync replicas), from the cluster's metadata."""
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    found: dict[tuple[str, int], tuple[int, list[int], list[int]]] = {}
    for topic in topics:
        meta = admin.list_topics(topic, timeout=10).topics[topic]
        if meta.error is not None:
            raise KafkaError(f"metadata of {topic}: {meta.error}")
        for p, pm in meta.partitions.items():
            found[(topic, p)] = (pm.leader, list(pm.replicas), list(pm.isrs))
    return found


def group_coordinator(bootstrap: str, group: str) -> int:
    """The node id of ``group``'s coordinator: the leader of its ``__consumer_offsets`` partition."""
    parts = partition_replicas(bootstrap, ["__consumer_offsets"])
    count = len(parts)
    return parts[("__consumer_offsets", offsets_partition(group, count))][0]


def wait_in_sync(bootstrap: str, topics: list[str], timeout: float = 90) -> float:
    """Until every partition of ``topics`` has a leader and all its replicas in sync; the seconds it took."""
    started = time.monotonic()
    last: object = None
    while time.monotonic() - started < timeout:
        with contextlib.suppress(Exception):
            last = {
                tp: (leader, isr)
                for tp, (leader, replicas, isr) in partition_replicas(bootstrap, topics).items()
                if leader < 0 or sorted(isr) != sorted(replicas)
            }
            if not last:
                return time.monotonic() - started
        time.sleep(0.5)
    raise KafkaError(f"partitions not in sync within {timeout:.0f} s: {last}")


def move_leadership(
    bootstrap: str, topics: list[str], timeout: float = 30
) -> dict[tuple[str, int], tuple[int, int]]:
    """Move the leader of every partition of ``topics`` to another live replica, with no broker stopped.

    Each partition's replica list is rotated by one (an AlterPartitionReassignments with the same
    replicas in a new order, so no data moves and it completes at once), then a preferred-leader
    election makes the new first replica the leader. Returns (topic, partition) -> (old, new leader).
    """
    from confluent_kafka import ElectionType
    from confluent_kafka import TopicPartition as CTopicPartition
    from confluent_kafka.admin import AdminClient
    from kafka import TopicPartition as KTopicPartition
    from kafka.admin import KafkaAdminClient

    before = partition_replicas(bootstrap, topics)
    wanted: dict[tuple[str, int], list[int]] = {}
    for tp, (leader, replicas, _isr) in before.items():
        if len(replicas) < 2:
            continue
        rotated = replicas[replicas.index(leader) + 1 :] + replicas[: replicas.index(leader) + 1]
        wanted[tp] = rotated
    kadmin = KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=int(timeout * 1000))
    try:
        errors = kadmin.alter_partition_reassignments(
            {KTopicPartition(t, p): r for (t, p), r in wanted.items()}, timeout_ms=int(timeout * 1000)
        )
        bad = {tp: e for tp, e in errors.items() if e is not None and e.__name__ != "NoError"}
        if bad:
            raise KafkaError(f"reassignment refused: {bad}")
    finally:
        kadmin.close()
    deadline = time.monotonic() + timeout
    admin = AdminClient({"bootstrap.servers": bootstrap})
    while True:
        now = partition_replicas(bootstrap, topics)
        if all(now[tp][1] == r for tp, r in wanted.items()):
            break
        if time.monotonic() > deadline:
            raise KafkaError(f"replica order not applied within {timeout:.0f} s")
        time.sleep(0.2)
    future = admin.elect_leaders(ElectionType.PREFERRED, [CTopicPartition(t, p) for t, p in wanted])
    future.result(timeout)  # per-partition errors are judged by the leaders read back below
    while True:
        now = partition_replicas(bootstrap, topics)
        if all(now[tp][0] == r[0] for tp, r in wanted.items()):
            return {tp: (before[tp][0], now[tp][0]) for tp in wanted}
        if time.monotonic() > deadline:
            raise KafkaError(
                f"leaders not moved within {timeout:.0f} s: { {tp: now[tp][0] for tp in wanted} }"
            )
        time.sleep(0.2)


def describe_group(host: str, port: int, group: str, timeout: float = 10) -> tuple[int, str, str, int]:
    """DescribeGroups v0 sent by hand to the broker at ``host:port`` (the group's coordinator):
    ``(error code, state, protocol type, member count)``. By hand because confluent-kafka describes only
    consumer groups and kafka-python's admin parses every member's metadata as a consumer's; a Connect
    group is neither."""
    import struct

    def string(s: str) -> bytes:
        raw = s.encode()
        return struct.pack(">h", len(raw)) + raw

    body = struct.pack(">hhi", 15, 0, 1) + string("kconnect-test") + struct.pack(">i", 1) + string(group)
    with socket.create_connection((host, port), timeout=timeout) as sock:
        sock.sendall(struct.pack(">i", len(body)) + body)
        size = struct.unpack(">i", _recv_exactly(sock, 4))[0]
        data = _recv_exactly(sock, size)
    pos = 4 + 4  # correlation id, then the groups array's count (one group asked)

    def read_string() -> str:
        nonlocal pos
        (n,) = struct.unpack_from(">h", data, pos)
        pos += 2
        value = data[pos : pos + max(n, 0)].decode()
        pos += max(n, 0)
        return value

    (error,) = struct.unpack_from(">h", data, pos)
    pos += 2
    read_string()  # group id
    state = read_string()
    protocol_type = read_string()
    read_string()  # protocol
    (members,) = struct.unpack_from(">i", data, pos)
    return error, state, protocol_type, members


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise KafkaError("the broker closed the connection")
        out += chunk
    return out


# --- Security: SASL (PLAIN and SCRAM-SHA-512) and SSL listeners, and the standard authorizer


PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def jaas(module: str, username: str, password: str) -> str:
    """A client's ``sasl.jaas.config`` line, as an Apache Kafka client or Connect worker file writes it."""
    return f'{module} required username="{username}" password="{password}";'


def sasl_listener_config(listener: str, plain_users: dict[str, str]) -> dict[str, str]:
    """Server properties for a SASL listener offering PLAIN and SCRAM-SHA-512.

    PLAIN's users are the JAAS entry's ``user_<name>="<password>"`` options; SCRAM's live in the cluster
    metadata (``KafkaCluster(scram_users=...)`` or AlterUserScramCredentials), so its entry has none.
    """
    prefix = f"listener.name.{listener.lower()}"
    users = " ".join(f'user_{name}="{password}"' for name, password in plain_users.items())
    return {
        "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
        f"{prefix}.plain.sasl.jaas.config": f"{PLAIN_LOGIN} required {users};",
        f"{prefix}.scram-sha-512.sasl.jaas.config": f"{SCRAM_LOGIN} required;",
    }


def authorizer_config(*super_users: str) -> dict[str, str]:
    """The KRaft standard authorizer with ``super_users`` (``User:admin``). ``User:ANONYMOUS`` is always
    among them: the PLAINTEXT inter-broker and CONTROLLER listeners, and the tests' own plain admin
    clients (``wait_ready``), speak without a login."""
    return {
        "authorizer.class.name": AUTHORIZER,
        "super.users": ";".join(dict.fromkeys(["User:ANONYMOUS", *super_users])),
    }


def ssl_listener_config(
    listener: str, keystore_p12: Path, password: str, truststore_pem: Path, client_auth: str = "required"
) -> dict[str, str]:
    """Server properties for an SSL listener: a PKCS12 key store and a PEM trust store (the CA that signs
    client certificates; with ``client_auth=required`` a client's principal is its certificate's DN)."""
    prefix = f"listener.name.{listener.lower()}"
    return {
        f"{prefix}.ssl.keystore.type": "PKCS12",
        f"{prefix}.ssl.keystore.location": str(keystore_p12),
        f"{prefix}.ssl.keystore.password": password,
        f"{prefix}.ssl.truststore.type": "PEM",
        f"{prefix}.ssl.truststore.location": str(truststore_pem),
        f"{prefix}.ssl.client.auth": client_auth,
    }
