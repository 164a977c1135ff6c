"""Test harness for the reference implementations: Apache Kafka Connect run as a distributed worker.

Two versions run: 3.9 (:data:`REFERENCE_39`), assembled by ``/work/shared/tools/reference-connect``, and
4.x (:data:`REFERENCE_4X`, the version of the test brokers), ``ConnectDistributed`` from the jars Maven
fetched for the brokers (``tests/support/apache_kafka.py``: connect-runtime, -file, -json, -transforms
are among them). This module writes a worker's properties, starts it against a broker, waits for its
REST API, and exposes its REST API and log so that tests can use it as an oracle (REST shapes, protocol
bytes, record formats) or as a group member beside kconnect workers.

    ok, why = reference_available()
    with ReferenceWorker(broker.bootstrap, group_id="g", config_topic="c", offset_topic="o",
                         status_topic="s", log_path=tmp / "ref.log") as w:
        w.rest("POST", "/connectors", json={...})
        w.wait_for_log(r"Finished starting connectors and tasks", 30)
        w.assignments()  # every "Joined group at generation ..." line, parsed
    ReferenceWorker(..., version=REFERENCE_4X)  # the same, Apache Kafka Connect 4.x
"""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
import weakref
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import KAFKA_VERSION, KafkaError, kafka_home, kafka_libs
from tests.support.cluster import topic_names
from tests.support.maven import is_fetched

#: The versions :class:`ReferenceWorker` runs: 3.9 (interop with workers users still run) and 4.x (the
#: version users upgrade to, which REST parity is measured against).
REFERENCE_39 = "3.9.0"
REFERENCE_4X = KAFKA_VERSION
REFERENCE_VERSIONS = (REFERENCE_39, REFERENCE_4X)


def _reference_tool() -> Path:
    """The tool in the ``shared/`` beside this clone (where CI lays it, as the Makefile expects), else the
    workplace's; ``KCONNECT_REFERENCE_CONNECT`` names another."""
    explicit = os.environ.get("KCONNECT_REFERENCE_CONNECT")
    if explicit:
        return Path(explicit)
    beside = Path(__file__).resolve().parents[3] / "shared" / "tools" / "reference-connect"
    return beside if beside.is_file() else Path("/work/shared/tools/reference-connect")


REFERENCE_TOOL = _reference_tool()


def reference_home(version: str = REFERENCE_39) -> Path:
    """Where the reference's jars are: ``reference-connect setup``'s folder (the tool's own default
    rule) for 3.9, the test brokers' Maven cache for 4.x."""
    if version == REFERENCE_4X:
        return kafka_home()
    if version != REFERENCE_39:
        raise ValueError(f"no reference Apache Kafka Connect {version}: {', '.join(REFERENCE_VERSIONS)}")
    explicit = os.environ.get("REFERENCE_CONNECT_HOME")
    if explicit:
        return Path(explicit)
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "reference-connect-3.9.0"


def reference_available(version: str = REFERENCE_39) -> tuple[bool, str]:
    """Whether the reference worker of ``version`` can run here; the reason when it cannot.

    4.x counts as available when its jars are cached or Maven can fetch them (:func:`kafka_libs`, on
    the first start); this does not fetch them, as it is called when tests are collected.
    """
    if shutil.which("java") is None:
        return False, "java (17+) is not on PATH"
    if version == REFERENCE_4X:
        if is_fetched(kafka_home()) or shutil.which("mvn") is not None:
            return True, f"java and Apache Kafka {REFERENCE_4X}'s jars (or Maven to fetch them) are present"
        return False, f"Apache Kafka {REFERENCE_4X}'s jars are not in {kafka_home()} and mvn is not on PATH"
    if not REFERENCE_TOOL.is_file() or not os.access(REFERENCE_TOOL, os.X_OK):
        return False, f"the reference-connect tool is missing or not executable at {REFERENCE_TOOL}"
    cp = reference_home(version) / "classpath.txt"
    if not cp.is_file() or cp.stat().st_size == 0:
        return False, f"the reference classpath {cp} is missing: run `{REFERENCE_TOOL} setup` first"
    return True, "java and the reference Apache Kafka Connect 3.9.0 classpath are present"


def reference_classpath(version: str = REFERENCE_39) -> str:
    """The Java classpath of the reference worker of ``version`` (4.x: fetched by Maven if missing)."""
    if version == REFERENCE_4X:
        return ":".join(str(p) for p in sorted(kafka_libs().glob("*.jar")))
    return (reference_home(version) / "classpath.txt").read_text().strip()


#: The 4.x worker's log4j2 configuration: the one reference-connect writes for 3.9 (INFO to stdout,
#: the Kafka clients at WARN), so that both versions log the lines the tests wait for.
LOG4J2 = """\
rootLogger.level=INFO
rootLogger.appenderRef.stdout.ref=STDOUT
appender.stdout.type=Console
appender.stdout.name=STDOUT
appender.stdout.layout.type=PatternLayout
appender.stdout.layout.pattern=[%d] %p %m (%c{1})%n
logger.clients.name=org.apache.kafka.clients
logger.clients.level=WARN
"""


DEFAULT_JAVA_OPTS = "-Xms64m -Xmx512m -XX:+UseSerialGC -XX:TieredStopAtLevel=1"


# Workers still running when the interpreter exits (a script that raised before stop()) are killed: the
# JVM runs in its own session, so nothing else would reach it.
_LIVE: weakref.WeakSet[ReferenceWorker] = weakref.WeakSet()


@atexit.register
def _kill_leftovers() -> None:
    for worker in list(_LIVE):
        with contextlib.suppress(Exception):
            worker.kill()


class ReferenceError(RuntimeError):
    """The reference worker did not start, died, or a log line did not appear in time."""


# Logged by the distributed herder after every completed rebalance (same format under eager, compatible
# and sessioned), on one line:
#   [..] INFO [Worker clientId=connect-127.0.0.1:8083, groupId=g] Joined group at generation 2 with protocol
#   version 2 and got assignment: Assignment{error=0, leader='connect-127.0.0.1:8083-<uuid>',
#   leaderUrl='http://127.0.0.1:8083/', offset=4, connectorIds=[src], taskIds=[src-0],
#   revokedConnectorIds=[], revokedTaskIds=[], delay=0} with rebalance delay: 0 (DistributedHerder)
# connectorIds/taskIds are the worker's whole assignment after applying this rebalance (the wire format of
# the incremental protocols carries only what is newly assigned); the revoked lists are this rebalance's.
_JOINED = re.compile(
    r"Joined group at generation (?P<generation>-?\d+) with protocol version (?P<protocol_version>\d+)"
    r" and got assignment: Assignment\{(?P<body>.*?)\}(?: with rebalance delay: (?P<rebalance_delay>-?\d+))?"
    r"(?= \(|$)",
    re.MULTILINE,
)
_FIELD = re.compile(r"(\w+)=('(?:[^']*)'|\[[^\]]*\]|[^,]*)(?:, |$)")
_LIST_FIELDS = ("connectorIds", "taskIds", "revokedConnectorIds", "revokedTaskIds")
_INT_FIELDS = ("error", "offset", "delay")


def _parse_list(text: str) -> list[str]:
    inner = text.strip()[1:-1].strip()
    return [item.strip() for item in inner.split(",")] if inner else []


def parse_assignments(log: str) -> list[dict[str, Any]]:
    """Every assignment the Java worker logged, in order, as dicts.

    Keys: generation, protocol_version, error, leader, leaderUrl, offset, connectorIds, taskIds,
    revokedConnectorIds, revokedTaskIds, delay, rebalance_delay (when logged) and raw (the line's
    Assignment{...} text). Lists hold strings: connector names, and task ids as ``<connector>-<n>``.
    """
    out: list[dict[str, Any]] = []
    for m in _JOINED.finditer(log):
        entry: dict[str, Any] = {
            "generation": int(m["generation"]),
            "protocol_version": int(m["protocol_version"]),
        }
        for fm in _FIELD.finditer(m["body"]):
            key, value = fm.group(1), fm.group(2).strip()
            if key in _LIST_FIELDS:
                entry[key] = _parse_list(value)
            elif key in _INT_FIELDS:
                entry[key] = int(value)
            elif value.startswith("'") and value.endswith("'"):
                entry[key] = value[1:-1]
            elif value == "null":
                entry[key] = None
            else:
                entry[key] = value
        if m["rebalance_delay"] is not None:
            entry["rebalance_delay"] = int(m["rebalance_delay"])
        entry["raw"] = m["body"]
        out.append(entry)
    return out


class ReferenceWorker:
    """One Apache Kafka Connect distributed worker (``version``: 3.9 or 4.x) in a subprocess, used as a
    context manager. Its internal topics are named for its group (``<group_id>-configs``, ``-offsets``,
    ``-status``) unless given: groups on one broker then never share one, and a kconnect worker of the
    same group names them alike (``tests.support.cluster.topic_names``)."""

    def __init__(
        self,
        bootstrap: str,
        *,
        group_id: str,
        config_topic: str | None = None,
        offset_topic: str | None = None,
        status_topic: str | None = None,
        log_path: Path | None = None,
        protocol: str = "sessioned",
        session_timeout_ms: int = 6000,
        heartbeat_interval_ms: int = 1000,
        rebalance_timeout_ms: int | None = None,
        scheduled_rebalance_max_delay_ms: int | None = None,
        offset_partitions: int = 1,
        status_partitions: int = 1,
        port: int | None = None,
        extra: Mapping[str, str] | None = None,
        startup_timeout_s: float = 90.0,
        java_opts: str | None = None,
        version: str = REFERENCE_39,
    ) -> None:
        if version not in REFERENCE_VERSIONS:
            raise ValueError(f"no reference Apache Kafka Connect {version}: {', '.join(REFERENCE_VERSIONS)}")
        self.version = version
        self.bootstrap = bootstrap
        self.group_id = group_id
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        # What the Java worker reports as worker_id in statuses and uses as its Kafka client id suffix.
        self.worker_id = f"127.0.0.1:{self.port}"
        self.startup_timeout_s = startup_timeout_s
        self._own_dir: tempfile.TemporaryDirectory[str] | None = None
        if log_path is None:
            self._own_dir = tempfile.TemporaryDirectory(prefix="reference-connect-")
            log_path = Path(self._own_dir.name) / "worker.log"
        self.log_path = Path(log_path)
        self.props_path = self.log_path.with_suffix(".properties")
        named = topic_names(group_id)
        props: dict[str, str] = {
            "bootstrap.servers": bootstrap,
            "group.id": group_id,
            "config.storage.topic": config_topic or named["config.storage.topic"],
            "offset.storage.topic": offset_topic or named["offset.storage.topic"],
            "status.storage.topic": status_topic or named["status.storage.topic"],
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": str(offset_partitions),
            "status.storage.partitions": str(status_partitions),
            "listeners": f"http://127.0.0.1:{self.port}",
            "rest.advertised.host.name": "127.0.0.1",
            "rest.advertised.port": str(self.port),
            "rest.advertised.listener": "http",
            "connect.protocol": protocol,
            "session.timeout.ms": str(session_timeout_ms),
            "heartbeat.interval.ms": str(heartbeat_interval_ms),
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "key.converter.schemas.enable": "false",
            "value.converter.schemas.enable": "false",
            "offset.flush.interval.ms": "1000",
            "plugin.discovery": "service_load",
        }
        if rebalance_timeout_ms is not None:
            props["rebalance.timeout.ms"] = str(rebalance_timeout_ms)
        if scheduled_rebalance_max_delay_ms is not None:
            props["scheduled.rebalance.max.delay.ms"] = str(scheduled_rebalance_max_delay_ms)
        props.update(extra or {})
        self.properties = props
        self.java_opts = java_opts
        self.process: subprocess.Popen[bytes] | None = None
        self.started_at: float | None = None  # time.monotonic() at Popen
        self.rest_ready_s: float | None = None  # seconds from Popen to the first REST answer
        self._client = httpx.Client(base_url=self.url, timeout=30.0)
        self._cds_pending: tuple[Path, Path] | None = None

    # -- lifecycle -------------------------------------------------------------------------------

    def start(self) -> ReferenceWorker:
        ok, why = reference_available(self.version)
        if not ok:
            raise ReferenceError(why)
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.props_path.write_text("".join(f"{k}={v}\n" for k, v in self.properties.items()))
        try:
            argv, env = self._command()
        except (KafkaError, OSError) as e:
            raise ReferenceError(f"the reference Apache Kafka Connect {self.version} cannot run: {e}") from e
        log = open(self.log_path, "wb")  # noqa: SIM115 - owned by the child; one log per start()
        try:
            self.started_at = time.monotonic()
            self.process = subprocess.Popen(
                argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # own process group: kill() reaches the JVM behind `exec`
            )
        finally:
            log.close()
        _LIVE.add(self)
        try:
            self._wait_for_rest(self.startup_timeout_s)
        except BaseException:
            self.kill()
            raise
        return self

    def _command(self) -> tuple[list[str], dict[str, str]]:
        """The command line and environment of this version's worker.

        The JVM options: ``java_opts`` if given, else ``REFERENCE_CONNECT_JAVA_OPTS`` if set, else a
        small heap, the C1 compiler only and a class-data-sharing archive (the worker is a test oracle,
        and this halves the time to its first REST answer). 3.9 runs through ``reference-connect run``,
        which reads the options from the environment; 4.x runs ``ConnectDistributed`` from the jars
        directly, logging by :data:`LOG4J2` (``plugin.discovery=service_load`` in the properties: every
        plugin it needs, the FileStream connectors included, is on the classpath with its manifest).
        """
        env = dict(os.environ)
        if self.java_opts is not None:
            opts = self.java_opts
        elif "REFERENCE_CONNECT_JAVA_OPTS" in env:
            opts = env["REFERENCE_CONNECT_JAVA_OPTS"]
        else:
            opts = f"{DEFAULT_JAVA_OPTS} {self._appcds_option()}".strip()
        if self.version == REFERENCE_39:
            env["REFERENCE_CONNECT_JAVA_OPTS"] = opts
            return [str(REFERENCE_TOOL), "run", str(self.props_path)], env
        log4j = self.props_path.with_suffix(".log4j2.properties")
        log4j.write_text(LOG4J2)
        argv = [
            "java",
            *opts.split(),
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            reference_classpath(self.version),
            "org.apache.kafka.connect.cli.ConnectDistributed",
            str(self.props_path),
        ]
        return argv, env

    def _appcds_option(self) -> str:
        """Use the AppCDS archive of the reference classpath, or record one when this JVM exits cleanly.

        The archive (about 45 MB) lives beside the jars, keyed by the classpath and the JVM options; each
        JVM records to a private file that ``stop()`` moves into place, so concurrent workers never share
        a half-written archive. ``KCONNECT_REFERENCE_APPCDS=0`` turns this off.
        """
        self._cds_pending = None
        if os.environ.get("KCONNECT_REFERENCE_APPCDS", "1") == "0":
            return ""
        home = reference_home(self.version)
        try:
            digest = hashlib.sha256(
                (reference_classpath(self.version) + DEFAULT_JAVA_OPTS).encode()
            ).hexdigest()[:16]
        except (KafkaError, OSError):
            return ""
        archive = home / f"kconnect-appcds-{digest}.jsa"
        if archive.is_file() and archive.stat().st_size > 0:
            return f"-XX:SharedArchiveFile={archive}"
        if not os.access(home, os.W_OK):
            return ""
        self._cds_pending = (home / f".kconnect-appcds-{digest}.{os.getpid()}.{id(self)}.tmp", archive)
        return f"-XX:ArchiveClassesAtExit={self._cds_pending[0]}"

    def _settle_appcds(self) -> None:
        if self._cds_pending is None:
            return
        tmp, archive = self._cds_pending
        self._cds_pending = None
        with contextlib.suppress(OSError):
            exited = self.process is not None and self.process.returncode is not None
            if exited and tmp.is_file() and tmp.stat().st_size > 0 and not archive.exists():
                os.replace(tmp, archive)
            tmp.unlink(missing_ok=True)

    def _wait_for_rest(self, timeout_s: float) -> None:
        assert self.process is not None and self.started_at is not None
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise ReferenceError(
                    f"the reference worker exited with {self.process.returncode} before its REST API "
                    f"answered; log tail:\n{self._tail()}"
                )
            with contextlib.suppress(httpx.HTTPError):
                if self._client.get("/", timeout=2.0).status_code == 200:
                    self.rest_ready_s = time.monotonic() - self.started_at
                    return
            time.sleep(0.2)
        raise ReferenceError(
            f"the reference worker's REST API at {self.url} did not answer within {timeout_s:.0f} s; "
            f"log tail:\n{self._tail()}"
        )

    def _signal(self, sig: signal.Signals) -> None:
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, sig)

    def kill(self) -> None:
        """SIGKILL: the worker vanishes without leaving the group (its session must time out)."""
        self._signal(signal.SIGKILL)
        if self.process is not None:
            self.process.wait()
        self._settle_appcds()

    def stop(self, timeout_s: float = 30.0) -> None:
        """SIGTERM and wait: the worker stops its connectors and tasks and leaves the group."""
        self._signal(signal.SIGTERM)
        if self.process is not None:
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        self._settle_appcds()

    def close(self) -> None:
        self.stop()
        self._client.close()
        if self._own_dir is not None:
            self._own_dir.cleanup()
            self._own_dir = None

    def __enter__(self) -> ReferenceWorker:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    # -- REST ------------------------------------------------------------------------------------

    def rest(
        self,
        method: str,
        path: str,
        json: Any = None,
        *,
        content: bytes | str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
    ) -> httpx.Response:
        """One request to the worker's REST API; ``content`` sends raw bytes (e.g. malformed JSON)."""
        hdrs = dict(headers or {})
        if content is not None:
            hdrs.setdefault("Content-Type", "application/json")
            return self._client.request(method, path, content=content, headers=hdrs, timeout=timeout)
        return self._client.request(method, path, json=json, headers=hdrs, timeout=timeout)

    # -- log -------------------------------------------------------------------------------------

    def log_text(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def _tail(self, lines: int = 40) -> str:
        return "\n".join(self.log_text().splitlines()[-lines:])

    def wait_for_log(
        self, pattern: str | re.Pattern[str], timeout: float = 30.0, start: int = 0
    ) -> re.Match[str]:
        """Wait until ``pattern`` matches the log (searched from character ``start``); the match."""
        rx = re.compile(pattern, re.MULTILINE) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        while True:
            m = rx.search(self.log_text(), start)
            if m is not None:
                return m
            if not self.alive:
                raise ReferenceError(
                    f"the reference worker exited while waiting for /{rx.pattern}/; log tail:\n{self._tail()}"
                )
            if time.monotonic() >= deadline:
                raise ReferenceError(f"/{rx.pattern}/ not in the reference worker's log within {timeout} s")
            time.sleep(0.1)

    def log_offset(self) -> int:
        """The current length of the log, to wait for lines written after this point."""
        return len(self.log_text())

    def assignments(self) -> list[dict[str, Any]]:
        """Every "Joined group at generation ..." assignment the worker logged so far, parsed."""
        return parse_assignments(self.log_text())

    def wait_for_assignment(self, predicate: Any = None, timeout: float = 60.0) -> dict[str, Any]:
        """Wait for a logged assignment (the newest one satisfying ``predicate``, if given)."""
        deadline = time.monotonic() + timeout
        while True:
            found = [a for a in self.assignments() if predicate is None or predicate(a)]
            if found:
                return found[-1]
            if not self.alive:
                raise ReferenceError(f"the reference worker exited; log tail:\n{self._tail()}")
            if time.monotonic() >= deadline:
                raise ReferenceError(f"no matching assignment within {timeout} s; log tail:\n{self._tail()}")
            time.sleep(0.1)
