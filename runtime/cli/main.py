"""The ``kconnect`` command: ``broker``, ``worker``, ``connectors`` (a REST client), ``apply``
(runtime/cli/apply.py, connectors from files; its own exit statuses: 0 unchanged, 1 failed, 3 changed),
``group describe`` (runtime/cli/group_describe.py, reads the group records alone) and ``demo``.

Exit statuses: 0 clean stop, 1 the worker could not start (broker unreachable, bad internal topic) or
the embedded broker could not (its dev extra not installed), 2 invalid worker properties or command
line. Errors are one line on stderr, naming the problem.
"""

from __future__ import annotations

import argparse
import faulthandler
import gc
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import httpx

    from kconnect.runtime.dataplane.executor import Executor

EXIT_STARTUP = 1
EXIT_CONFIG = 2
#: A worker's last words when a REST listener could not bind; ``kconnect demo`` restarts such a worker.
REST_LISTEN_FAILED = "the REST server could not listen on"


def _fail(code: int, message: str) -> int:
    print(f"kconnect: {message}", file=sys.stderr, flush=True)
    return code


# ============================================================================================= broker


def cmd_broker(args: argparse.Namespace) -> int:
    """``kconnect broker``: Tansu in the foreground until SIGTERM or SIGINT, which it forwards as a
    terminate so the broker exits cleanly; the broker's exit status is the command's.

    Exits 1 with the install hint when the dev extra (which carries the binary) is not installed.
    """
    from kconnect.runtime.cli import broker

    try:
        cmd = broker.command(args.port, args.host, args.storage_engine)
    except broker.BrokerError as exc:  # the dev extra is not installed: say how to get it
        return _fail(EXIT_STARTUP, str(exc))
    data_dir = Path(args.data_dir) if args.data_dir else None
    if data_dir:
        data_dir.mkdir(parents=True, exist_ok=True)
    print(
        f"kconnect: embedded broker on {args.host}:{args.port} (Tansu; data in memory unless "
        f"--storage-engine says otherwise)",
        file=sys.stderr,
        flush=True,
    )
    log_target = open(data_dir / "broker.log", "ab") if data_dir else None  # noqa: SIM115
    import subprocess

    proc = subprocess.Popen(cmd, stdout=log_target or None, stderr=subprocess.STDOUT if log_target else None)

    def _stop(_sig: int, _frame: FrameType | None) -> None:
        proc.terminate()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    return proc.wait()


# ============================================================================================= worker


def load_worker_config(path: str) -> Any:
    """Read a worker properties file into a WorkerConfig, ``${env:...}`` and ``${file:...}`` references
    resolved.

    Everything wrong with the file raises ConfigError here, before anything connects (exit 2): unreadable
    or malformed text, invalid values, Kafka client settings that cannot be translated. Unknown keys only
    warn, as Java's worker only warns.
    """
    from kconnect.config.config_providers import worker_config_providers
    from kconnect.config.errors import ConfigError
    from kconnect.config.properties import PropertiesSyntaxError, load_properties, substitute
    from kconnect.config.worker import WorkerConfig, unknown_keys
    from kconnect.runtime import logs
    from kconnect.runtime.client_config import worker_clients

    try:
        props = substitute(load_properties(path), os.environ)
    except OSError as exc:
        raise ConfigError("<file>", path, f"a readable worker properties file ({exc.strerror})") from exc
    except PropertiesSyntaxError as exc:
        raise ConfigError("<file>", path, f"a valid Java properties file ({exc})") from exc
    config = WorkerConfig.from_properties(props)
    # Java-named Kafka client settings that cannot be translated are config errors too (exit 2).
    worker_clients(config.security_protocol, config.passthrough)
    # So are config providers' parameters (an allowed.paths root that is not absolute or not there).
    providers = worker_config_providers(config)
    for name in providers.unsupported:
        logs.get("kconnect.config").warning(
            "config provider class not supported; its references are left as written", provider=name
        )
    for key in unknown_keys(props):
        logs.get("kconnect.config").warning("unknown worker property (ignored)", key=key)
    return config


def rest_setup(config: Any) -> tuple[Any, Any]:
    """The listeners to serve and the REST extension (basic auth) to apply; raises ConfigError.

    Warns once when basic auth is on for an ``http`` listener (``clear_text_basic_auth``): a start-up
    that succeeds should still say that passwords cross the network readable."""
    from kconnect.rest.server import clear_text_basic_auth, client_verify, listener_plan, rest_extensions
    from kconnect.runtime import logs

    client_verify(config.passthrough)  # a truststore it cannot read is a config error at start-up
    plan, auth = listener_plan(config), rest_extensions(config, os.environ)
    in_clear = clear_text_basic_auth(plan, auth)
    if in_clear:
        logs.get("kconnect.rest").warning(
            "basic auth is on for http listeners: users' passwords travel in clear (the Authorization "
            "header is base64, not encrypted); serve the REST API on https listeners",
            listeners=in_clear,
        )
    return plan, auth


def serve_worker(
    config: Any,
    ready: threading.Event | None = None,
    rest: tuple[Any, Any] | None = None,
    executor: Executor | None = None,
) -> int:
    """Run a worker and its REST listeners until SIGTERM or SIGINT; ``executor`` None: the Spark data plane.

    The executor is a parameter so that whoever embeds the worker (the tests' held-task workers among
    them) chooses what runs tasks, rather than a worker property.
    """
    import uvicorn

    from kconnect.rest.app import create_app
    from kconnect.rest.limits import server_options
    from kconnect.rest.server import wrap_app
    from kconnect.runtime.shell.worker import StartupError, Worker

    plan, auth = rest if rest is not None else rest_setup(config)
    worker = Worker(config, executor=executor)
    app = create_app(worker)
    servers: list[tuple[Any, threading.Thread, str]] = []
    for spec in plan:
        tls = spec.tls
        server = uvicorn.Server(
            uvicorn.Config(
                wrap_app(app, spec.role, config, auth),
                host=spec.host,
                port=spec.listener.port,
                log_level="warning",
                lifespan="off",
                ssl_certfile=tls.certfile if tls else None,
                ssl_keyfile=tls.keyfile if tls else None,
                ssl_keyfile_password=tls.key_password if tls else None,
                ssl_ca_certs=tls.cafile if tls else None,
                ssl_cert_reqs=tls.cert_reqs if tls else 0,
                **server_options(config.rest_request_timeout_ms),
            )
        )
        # REST answers from the start (GET /health says 503 until the worker has joined), as Java's does.
        thread = threading.Thread(target=server.run, name=f"rest-{spec.listener.port}", daemon=True)
        thread.start()
        servers.append((server, thread, spec.where))
    # A listener that cannot bind ends the process before the worker joins its group, as Java's REST server
    # is initialized before its herder starts: a member that joined and left at once can hold a round up.
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and any(
        not server.started and thread.is_alive() for server, thread, _w in servers
    ):
        time.sleep(0.01)
    unbound = next((where for _s, thread, where in servers if not thread.is_alive()), None)
    if unbound is not None:
        return _fail(EXIT_STARTUP, f"{REST_LISTEN_FAILED} {unbound}")
    try:
        worker.start()
    except StartupError as exc:
        worker.startup_error = str(exc)
        return _fail(EXIT_STARTUP, str(exc))
    stop = threading.Event()

    def _stop(_sig: int, _frame: FrameType | None) -> None:
        stop.set()

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
    if ready is not None:
        ready.set()
    while not stop.is_set():
        stop.wait(0.5)
        dead = next((where for _s, thread, where in servers if not thread.is_alive()), None)
        if dead is not None:
            worker.stop()
            return _fail(EXIT_STARTUP, f"{REST_LISTEN_FAILED} {dead}")
    worker.stop()
    for server, _t, _w in servers:
        server.should_exit = True
    for _s, thread, _w in servers:
        thread.join(timeout=5)
    return 0


#: Collect the youngest generation after this many net allocations (CPython's default: 700), and the
#: oldest after this many of the middle one's collections (default 10); see tune_garbage_collector.
GC_THRESHOLDS = (50_000, 20, 100)


def tune_garbage_collector() -> None:
    """Fewer garbage collections in a worker process.

    Why: the data plane allocates hundreds of thousands of small objects per batch (a sink batch's
    column lists and SinkRecords, a source's SourceRecords and offset maps) that all stay alive until
    the batch is done. With CPython's defaults a collection runs every 700 allocations and keeps
    promoting those objects, and every tenth of the middle generation's collections walks every object
    in the process, PySpark's and py4j's included: measured on the data-plane benchmark, building a
    50,000-record sink batch took 105 ms with the defaults and 28 ms with these thresholds, and the whole
    file -> Kafka -> file run went from 31.8 s to 27.6 s. Reference cycles are still collected, later.
    """
    gc.set_threshold(*GC_THRESHOLDS)


def cmd_worker(args: argparse.Namespace, executor: Executor | None = None) -> int:
    """``kconnect worker``; ``executor`` as in :func:`serve_worker` (None: the Spark data plane)."""
    from kconnect.config.errors import ConfigError
    from kconnect.runtime import logs

    logs.configure(args.log_level)
    # `kill -USR1 <pid>` prints every thread's stack to stderr (Java's jstack): a stuck worker explains
    # itself without a debugger.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    # A fatal signal in native code (librdkafka, the JVM bridge) otherwise ends the process with no line in
    # its log: bench/brokers_random.py saw a worker vanish so (issue 29). Every thread's Python stack then.
    faulthandler.enable(all_threads=True)
    tune_garbage_collector()
    try:
        config = load_worker_config(args.properties)
        rest = rest_setup(config)
    except ConfigError as exc:
        return _fail(EXIT_CONFIG, str(exc))
    return serve_worker(config, rest=rest, executor=executor)


# =============================================================================================== demo


def cmd_demo(args: argparse.Namespace) -> int:
    """Broker, three workers and a sample connector on loopback: the quick start's main job."""
    import subprocess

    from kconnect.runtime.cli import broker
    from kconnect.runtime.cli.rest_client import ClientError, call_until_answered

    work = Path(tempfile.mkdtemp(prefix="kconnect-demo-"))
    try:
        b = broker.start(log_path=work / "broker.log")
    except broker.BrokerError as exc:  # e.g. the dev extra is not installed: one line saying how to get it
        return _fail(EXIT_STARTUP, str(exc))
    procs: list[subprocess.Popen[bytes]] = []
    urls: list[str] = []

    def launch(i: int) -> None:
        """Start worker ``i`` on a port free now (worker ``i`` again, on a new port, when it exists)."""
        url = f"http://127.0.0.1:{broker.free_port()}"
        props = work / f"worker-{i}.properties"
        props.write_text(
            "\n".join(
                [
                    f"bootstrap.servers={b.bootstrap}",
                    "group.id=kconnect-demo",
                    "config.storage.topic=demo-configs",
                    "offset.storage.topic=demo-offsets",
                    "status.storage.topic=demo-status",
                    "config.storage.replication.factor=1",
                    "offset.storage.replication.factor=1",
                    "status.storage.replication.factor=1",
                    "group.records.storage.replication.factor=1",
                    f"listeners={url}",
                    "session.timeout.ms=6000",
                    "heartbeat.interval.ms=1000",
                    "key.converter=org.apache.kafka.connect.json.JsonConverter",
                    "value.converter=org.apache.kafka.connect.json.JsonConverter",
                    # The demo's pipeline is FileStream source to FileStream sink: turned on explicitly.
                    "file.connectors.enable=true",
                ]
            )
            + "\n"
        )
        with open(work / f"worker-{i}.log", "ab") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "kconnect.runtime.cli.main", "worker", str(props)],
                stdout=log,
                stderr=log,
            )
        if i < len(procs):
            procs[i], urls[i] = proc, url
        else:
            procs.append(proc)
            urls.append(url)

    def port_taken(i: int) -> bool:
        """Worker ``i`` exited because another process bound its port between free_port() and its bind
        (a busy machine hands out ephemeral ports all the time): the one start-up failure worth a retry."""
        with open(work / f"worker-{i}.log", "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - 1000))
            tail = log.read().decode(errors="replace")
        return procs[i].poll() is not None and REST_LISTEN_FAILED in tail

    try:
        for i in range(args.workers):
            launch(i)
        print(f"kconnect demo: broker {b.bootstrap}, workers {', '.join(urls)} (logs in {work})")

        def gone() -> str | None:
            """A worker that exited will never answer: say which, and where its log is."""
            for i, p in enumerate(procs):
                if p.poll() is not None:
                    return f"worker {i} exited with status {p.returncode} (log: {work / f'worker-{i}.log'})"
            return None

        def call(method: str, url: str, seconds: float, body: Any = None) -> httpx.Response:
            # Every call waits out "not now" (no connection yet, 503 while a worker starts, 409 during a
            # rebalance): a worker that answers the group's view may not answer anything else yet.
            return call_until_answered(method, url, deadline=time.monotonic() + seconds, body=body, gone=gone)

        try:
            # Every worker's /health, not one worker's view of the group: the demo talks to all of them,
            # and a member of the group may still be reading its config topic (503).
            deadline = time.monotonic() + 120
            pending, restarts = list(range(args.workers)), 0
            while pending:
                try:
                    health = call_until_answered(
                        "GET", urls[pending[0]] + "/health", deadline=deadline, gone=gone
                    )
                except ClientError:
                    taken = [i for i in range(args.workers) if port_taken(i)]
                    if not taken or restarts + len(taken) > 3:
                        raise
                    for i in taken:
                        restarts += 1
                        launch(i)
                        print(f"kconnect demo: worker {i}'s port was taken; restarted it on {urls[i]}")
                    continue
                if health.status_code != 200:
                    raise ClientError(f"GET {urls[pending[0]]}/health -> {health.status_code}: {health.text}")
                pending.pop(0)
            deadline = time.monotonic() + 90
            view: dict[str, Any] = {}
            while len(view.get("members", [])) != args.workers or view.get("generation", -1) < 0:
                if time.monotonic() > deadline:
                    raise ClientError(f"the workers did not form one group within 90 s (last view: {view})")
                time.sleep(0.5)
                view = _json(call("GET", urls[0] + "/workers", deadline - time.monotonic()))
            source = work / "input.txt"
            source.write_text("".join(f"line {n}\n" for n in range(100)))
            body = {
                "name": "demo-file-source",
                "config": {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                    "file": str(source),
                    "topic": "demo-lines",
                    "tasks.max": "1",
                },
            }
            resp = call("POST", urls[-1] + "/connectors", 90, body)
            print(f"POST /connectors -> {resp.status_code}")
            status: dict[str, Any] = {}
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                status = _json(call("GET", urls[1 % len(urls)] + "/connectors/demo-file-source/status", 30))
                tasks = status.get("tasks") or [{}]
                if status.get("connector", {}).get("state") == "RUNNING" and tasks[0].get("worker_id"):
                    break
                time.sleep(1)
            print(f"GET /connectors/demo-file-source/status -> {_status_line(status)}")
            deadline = time.monotonic() + 60
            while (
                time.monotonic() < deadline
            ):  # the leader's view, once the rebalance handing out the task ended
                view = _json(call("GET", urls[0] + "/workers", 30))
                owned = [t for m in view.get("members", []) for t in m["assignment"]["tasks"]]
                if view.get("source") == "leader" and owned == ["demo-file-source-0"]:
                    break
                time.sleep(1)
            print("GET /workers ->")
            for line in _group_lines(view):
                print(f"  {line}")
            # The pipeline's other half: a FileStream sink writes the lines back out of the topic (under the
            # demo's local master, a consumer loop on its worker: README "What runs where").
            output = work / "output.txt"
            sink = {
                "name": "demo-file-sink",
                "config": {
                    "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                    "file": str(output),
                    "topics": "demo-lines",
                    "tasks.max": "1",
                },
            }
            resp = call("POST", urls[0] + "/connectors", 90, sink)
            print(f"POST /connectors (demo-file-sink) -> {resp.status_code}")
        except ClientError as exc:
            print(f"kconnect demo: {exc.message} (logs in {work})", file=sys.stderr)
            return EXIT_STARTUP
        arrived = 0
        started = time.monotonic()
        while time.monotonic() - started < 120:
            arrived = len(output.read_text().splitlines()) if output.exists() else 0
            if arrived >= 100:
                break
            time.sleep(1)
        print(
            f"kconnect demo: {arrived} of 100 lines went {source.name} -> topic demo-lines -> {output.name}"
            f" (FileStream source and sink tasks) in {time.monotonic() - started:.0f} s"
        )
        print(_next_steps(urls[0], args.keep_running))
        if args.keep_running:
            print("kconnect demo: running; Ctrl-C stops it")
            signal.sigwait({signal.SIGINT, signal.SIGTERM})
        ok = status.get("connector", {}).get("state") == "RUNNING" and arrived >= 100
        return 0 if ok else EXIT_STARTUP
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
        b.stop()


def _json(resp: httpx.Response) -> dict[str, Any]:
    """An answer's JSON object, or an empty one (an error answer's or a non-object's) for the demo's polls."""
    try:
        body = resp.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _next_steps(url: str, keep_running: bool) -> str:
    """Where to look next: the demo's cluster stops with it unless asked to keep running, so the hint
    says how to keep it before it names what to curl."""
    where = "" if keep_running else "with `kconnect demo --keep-running`, "
    paths = ("/connectors?expand=status", "/workers", "/connectors/demo-file-source/topics", "/metrics")
    return f"kconnect demo: next, {where}try " + ", ".join(f"curl {url}{path}" for path in paths)


def _status_line(status: Mapping[str, Any]) -> str:
    """One line for a connector's status answer (the demo's output; the JSON is one GET away)."""
    connector = status.get("connector") or {}
    parts = [f"connector {connector.get('state', '?')} on {connector.get('worker_id', '?')}"]
    for task in status.get("tasks") or []:
        parts.append(f"task {task.get('id', '?')} {task.get('state', '?')} on {task.get('worker_id', '?')}")
    return "; ".join(parts)


def _group_lines(view: Mapping[str, Any]) -> list[str]:
    """``GET /workers`` as a few lines: the group, then each member's URL and what it runs."""
    lines = [
        f"group {view.get('group')}, protocol {view.get('protocol')}, generation {view.get('generation')}, "
        f"leader {view.get('leader_url')}"
    ]
    for member in view.get("members", []):
        assignment = member.get("assignment") or {}
        held = [*assignment.get("connectors", []), *assignment.get("tasks", [])]
        role = " (leader)" if member.get("leader") else ""
        lines.append(f"{member.get('url')}{role}: {', '.join(held) if held else 'nothing'}")
    return lines


# =============================================================================================== main


def build_parser() -> argparse.ArgumentParser:
    """The whole command line. The ``cmd_*`` functions import what they run, so building the parser (for
    ``--help`` or the REST client) does not load the worker or Spark."""
    parser = argparse.ArgumentParser(
        prog="kconnect", description="A Kafka-native, Connect-style worker runtime"
    )
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("broker", help="run the embedded development broker (Tansu) in the foreground")
    p.add_argument("--port", type=int, default=9092)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--data-dir", help="directory for the broker's log (its data is kept in memory)")
    p.add_argument(
        "--storage-engine", help="Tansu storage URL, e.g. postgres://user:pass@host (default memory)"
    )
    p.set_defaults(func=cmd_broker)

    p = sub.add_parser("worker", help="run a distributed worker")
    p.add_argument("properties", help="worker properties file (Apache Kafka Connect's format and keys)")
    p.add_argument("--log-level", default=os.environ.get("KCONNECT_LOG_LEVEL", "INFO"))
    p.set_defaults(func=cmd_worker)

    from kconnect.runtime.cli.rest_client import add_parser as add_client_parser

    add_client_parser(sub)

    from kconnect.runtime.cli.apply import add_parser as add_apply_parser

    add_apply_parser(sub)

    p = sub.add_parser("demo", help="embedded broker, three workers and a sample connector")
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--keep-running", action="store_true")
    p.set_defaults(func=cmd_demo)

    from kconnect.runtime.cli import group_describe as group_cli

    group_cli.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """The ``kconnect`` console script (pyproject's entry point), returning the exit status rather than
    exiting so tests can call it in-process; a bad command line is EXIT_CONFIG, ``--help`` is 0."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_CONFIG
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
