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
import threading
import time
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any

# The demo moved to its own module; these names stay importable from here (tests/unit/test_demo_summary.py).
from kconnect.runtime.cli.demo import _group_lines as _group_lines
from kconnect.runtime.cli.demo import _next_steps as _next_steps
from kconnect.runtime.cli.demo import _status_line as _status_line
from kconnect.runtime.cli.demo import cmd_demo

if TYPE_CHECKING:
    from kconnect.runtime.dataplane.executor import Executor

from kconnect.runtime.cli.exits import EXIT_CONFIG as EXIT_CONFIG
from kconnect.runtime.cli.exits import EXIT_STARTUP as EXIT_STARTUP
from kconnect.runtime.cli.exits import REST_LISTEN_FAILED as REST_LISTEN_FAILED
from kconnect.runtime.cli.exits import fail as _fail

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

    p = sub.add_parser(
        "demo", help="embedded broker, three workers and a sample pipeline ending in an Iceberg table"
    )
    p.add_argument("--workers", type=int, default=3)
    p.add_argument("--keep-running", action="store_true")
    p.add_argument(
        "--iceberg-jar",
        help="Spark's Iceberg runtime jar (default: the one `make lakehouse` put in ~/.cache/kconnect)",
    )
    p.add_argument("--no-table", action="store_true", help="end the pipeline in output.txt, no Iceberg table")
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
