"""``kconnect connectors ...``: a command-line client for any Apache Kafka Connect-compatible REST API.

It speaks Java's REST contract (paths, query parameters, status codes), so it drives kconnect workers
and Apache Kafka Connect workers alike. Output is a table by default and the server's JSON with
``--json``; a 4xx/5xx answer prints the server's ``message`` and exits 1, so scripts can rely on the
exit status. Rendering is pure (``render_*`` functions over decoded JSON); HTTP is in
:class:`ConnectClient`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import httpx

__all__ = [
    "ClientError",
    "ConnectClient",
    "add_parser",
    "call_until_answered",
    "load_connector_file",
    "not_yet",
    "render_table",
]

DEFAULT_URL = os.environ.get("KCONNECT_URL", "http://localhost:8083")
EXIT_ERROR = 1


class ClientError(Exception):
    """The server said no (``status`` set) or could not be reached (``status`` None)."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status


@dataclass(frozen=True)
class Answer:
    """A decoded answer with its status code kept, because for pause, resume, stop, restart and delete the
    code (202 accepted, 204 done) is the result."""

    status: int
    body: Any


class ConnectClient:
    """One method per REST operation; each returns the decoded answer or raises ClientError."""

    def __init__(self, url: str, *, auth: tuple[str, str] | None = None, timeout_s: float = 60.0) -> None:
        self._http = httpx.Client(base_url=url.rstrip("/"), auth=auth, timeout=timeout_s)

    def close(self) -> None:
        """Close the HTTP connection pool; the context manager calls it, so one command
        leaves no socket open."""
        self._http.close()

    def __enter__(self) -> ConnectClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _call(
        self,
        method: str,
        path: str,
        *,
        params: Mapping[str, str] | httpx.QueryParams | None = None,
        body: Any = None,
    ) -> Answer:
        try:
            resp = self._http.request(method, path, params=params, json=body)
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach {self._http.base_url}: {exc}") from exc
        try:
            decoded = resp.json() if resp.content else None
        except ValueError:
            decoded = resp.text
        if resp.status_code >= 400:
            message = decoded.get("message") if isinstance(decoded, dict) else None
            raise ClientError(str(message or resp.text or resp.reason_phrase), resp.status_code)
        return Answer(resp.status_code, decoded)

    def list(self, expand: Sequence[str] = ("status", "info")) -> Any:
        """``GET /connectors`` with ``expand`` (KIP-465) so that one request brings every connector's status
        and info; a server without ``expand`` answers a list of names, which the renderer also takes."""
        return self._call(
            "GET", "/connectors", params=httpx.QueryParams([("expand", e) for e in expand])
        ).body

    def get(self, name: str) -> Any:
        """``GET /connectors/<name>``: the connector's config and task ids; the name is URL-quoted, since
        connector names may hold any character."""
        return self._call("GET", _path(name)).body

    def create(self, name: str, config: Mapping[str, str]) -> Any:
        """``POST /connectors`` with ``{name, config}``, Java's create body; a connector of that name already
        existing is a 409 from the server."""
        return self._call("POST", "/connectors", body={"name": name, "config": dict(config)}).body

    def delete(self, name: str) -> Answer:
        """``DELETE /connectors/<name>``; the answer keeps its status, since a successful
        delete has no body."""
        return self._call("DELETE", _path(name))

    def pause(self, name: str) -> Answer:
        """``PUT /connectors/<name>/pause``: 202, the worker pauses asynchronously."""
        return self._call("PUT", _path(name, "pause"))

    def resume(self, name: str) -> Answer:
        """``PUT /connectors/<name>/resume``: 202, the worker resumes asynchronously."""
        return self._call("PUT", _path(name, "resume"))

    def stop(self, name: str) -> Answer:
        """``PUT /connectors/<name>/stop`` (KIP-875): the connector stays configured but it and its tasks
        shut down; only in that state may its offsets be altered or reset."""
        return self._call("PUT", _path(name, "stop"))

    def restart(self, name: str, *, include_tasks: bool = False, only_failed: bool = False) -> Answer:
        """``POST /connectors/<name>/restart`` with KIP-745's ``includeTasks`` and ``onlyFailed`` always sent,
        so the server never has to guess the defaults; with them the answer is 202 and the connector's status.
        """
        params = {"includeTasks": str(include_tasks).lower(), "onlyFailed": str(only_failed).lower()}
        return self._call("POST", _path(name, "restart"), params=params)

    def status(self, name: str) -> Any:
        """``GET /connectors/<name>/status``: the states the status topic holds for the connector and its
        tasks."""
        return self._call("GET", _path(name, "status")).body

    def put_config(self, name: str, config: Mapping[str, str]) -> Answer:
        """``PUT /connectors/<name>/config``: creates (201) or replaces (200) the connector's whole config,
        so a key left out is removed."""
        return self._call("PUT", _path(name, "config"), body=dict(config))

    def validate(self, plugin: str, config: Mapping[str, str]) -> Any:
        """``PUT /connector-plugins/<class>/config/validate``: Connect's ConfigInfos, whose ``error_count``
        says whether the config is valid and whose ``configs[].value.errors`` say why per key."""
        from urllib.parse import quote

        path = f"/connector-plugins/{quote(plugin, safe='')}/config/validate"
        return self._call("PUT", path, body=dict(config)).body

    def offsets(self, name: str) -> Any:
        """``GET /connectors/<name>/offsets`` (KIP-875): committed offsets, source or sink,
        in Java's shape."""
        return self._call("GET", _path(name, "offsets")).body


def _path(name: str, *rest: str) -> str:
    from urllib.parse import quote

    return "/".join(["/connectors", quote(name, safe=""), *rest])


# ============================================================================================ retry

#: Answers that say "not now" rather than answering: 503, the worker is still starting (every path but
#: ``/``, ``/health`` and the docs answers it until the worker has joined its group and read its config
#: topic); 409, a rebalance is in progress or no leader is known yet, as in Apache Kafka Connect.
NOT_YET_STATUSES = frozenset({409, 503})


def not_yet(status: int | None, message: str | None = None) -> bool:
    """Whether a REST call should be made again: no answer at all (``status`` None: connection refused
    while the worker starts, reset, timed out) or a :data:`NOT_YET_STATUSES` answer. A 409 saying the
    connector already exists is an answer: a create whose reply was lost has landed, and asking again
    cannot change that."""
    if status is None:
        return True
    if status == 409 and message is not None and "already exists" in message:
        return False
    return status in NOT_YET_STATUSES


def _message(resp: httpx.Response) -> str | None:
    try:
        body = resp.json()
    except ValueError:
        return resp.text or None
    return str(body.get("message")) if isinstance(body, dict) and "message" in body else None


def call_until_answered(
    method: str,
    url: str,
    *,
    deadline: float,
    body: Any = None,
    pause_s: float = 1.0,
    timeout_s: float = 30.0,
    gone: Callable[[], str | None] | None = None,
) -> httpx.Response:
    """Make one REST call until it is answered (see :func:`not_yet`) or ``time.monotonic()`` passes
    ``deadline``, for callers that start the workers they talk to (``kconnect demo``): a worker that is
    still starting refuses connections, then answers 503, and neither is its answer. Raises ClientError
    naming the last thing heard when the deadline passes, or at once with what ``gone`` says when it
    says something (a worker process that exited will never answer)."""
    last = "no attempt"
    while True:
        reason = gone() if gone is not None else None
        if reason:
            raise ClientError(f"{method} {url}: {reason}")
        wait = max(0.5, min(timeout_s, deadline - time.monotonic()))
        try:
            resp = httpx.request(method, url, json=body, timeout=wait)
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        else:
            message = _message(resp)
            if not not_yet(resp.status_code, message):
                return resp
            last = f"HTTP {resp.status_code}: {message}"
        if time.monotonic() + pause_s >= deadline:
            raise ClientError(f"{method} {url} was not answered in time (last: {last})")
        time.sleep(pause_s)


# ============================================================================================ input


def load_connector_file(path: str) -> tuple[str, dict[str, str]]:
    """A connector to create, from JSON (``{"name", "config"}`` or a flat config with ``name``) or a
    ``.properties`` file (a flat config with ``name``, as ``connect-standalone`` takes)."""
    from kconnect.config.properties import PropertiesSyntaxError, load_properties

    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise ClientError(f"cannot read {path}: {exc.strerror}") from exc
    config: dict[str, Any]
    if text.lstrip().startswith("{"):
        try:
            doc = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ClientError(f"{path} is not valid JSON: {exc}") from exc
        config = doc.get("config", doc) if isinstance(doc.get("config"), dict) else doc
        name = doc.get("name") or config.get("name")
    else:
        try:
            config = dict(load_properties(path))
        except PropertiesSyntaxError as exc:
            raise ClientError(f"{path} is not a valid properties file: {exc}") from exc
        name = config.get("name")
    if not isinstance(name, str) or not name.strip():
        raise ClientError(f"{path} names no connector: add a 'name'")
    flat = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in config.items()}
    return name, flat


# =========================================================================================== output


def render_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Left-aligned columns, two spaces apart; the header row first."""
    cells = [[str(h) for h in headers], *[["" if c is None else str(c) for c in row] for row in rows]]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in cells)


def render_list(body: Any) -> str:
    """The ``list`` table: name, type, state and how many tasks run, from the expanded answer; a plain list of
    names (a server without ``expand``) becomes a one-column table."""
    if isinstance(body, list):  # a server without ?expand
        return render_table(["NAME"], [[n] for n in body])
    rows = []
    for name, entry in sorted(body.items()):
        status = entry.get("status") or {}
        tasks = status.get("tasks") or []
        running = sum(1 for t in tasks if t.get("state") == "RUNNING")
        kind = status.get("type") or (entry.get("info") or {}).get("type", "")
        rows.append([name, kind, (status.get("connector") or {}).get("state", ""), f"{running}/{len(tasks)}"])
    return render_table(["NAME", "TYPE", "STATE", "TASKS RUNNING"], rows)


def render_info(body: Any) -> str:
    """The ``get``/``create`` view: a header line with the type and task ids, then the config sorted by key so
    that two connectors compare line by line."""
    tasks = ", ".join(str(t.get("task")) for t in body.get("tasks", []))
    head = f"{body.get('name')} ({body.get('type')}), tasks: {tasks or 'none'}"
    return head + "\n" + render_table(["KEY", "VALUE"], sorted(body.get("config", {}).items()))


def render_status(body: Any) -> str:
    """The ``status`` table: one row for the connector and one per task, each with only the first line of its
    trace, so a Java stack trace does not flood the terminal (``--json`` has it whole)."""
    conn = body.get("connector") or {}
    rows: list[list[object]] = [
        ["connector", conn.get("state"), conn.get("worker_id"), _first_line(conn.get("trace"))]
    ]
    for task in body.get("tasks", []):
        rows.append(
            [
                f"task {task.get('id')}",
                task.get("state"),
                task.get("worker_id"),
                _first_line(task.get("trace")),
            ]
        )
    return f"{body.get('name')} ({body.get('type')})\n" + render_table(
        ["WHAT", "STATE", "WORKER", "TRACE"], rows
    )


def render_offsets(body: Any) -> str:
    """The ``offsets`` table: partition and offset as compact JSON with sorted keys, since source partitions
    and offsets are arbitrary maps."""
    rows = [
        [json.dumps(o.get("partition"), sort_keys=True), json.dumps(o.get("offset"), sort_keys=True)]
        for o in (body or {}).get("offsets", [])
    ]
    return render_table(["PARTITION", "OFFSET"], rows)


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if text and text.strip() else ""


# ========================================================================================= commands


def _auth(value: str | None) -> tuple[str, str] | None:
    if not value:
        return None
    user, sep, password = value.partition(":")
    if not sep:
        raise ClientError("--user must be USER:PASSWORD")
    return user, password


def run(args: argparse.Namespace, out: TextIO = sys.stdout, err: TextIO = sys.stderr) -> int:
    """Run one ``kconnect connectors`` action; returns the exit status."""
    try:
        with ConnectClient(args.url, auth=_auth(args.user)) as client:
            text = _ACTIONS[args.action](client, args)
    except ClientError as exc:
        where = f" (HTTP {exc.status})" if exc.status is not None else ""
        print(f"kconnect: {exc.message}{where}", file=err, flush=True)
        return EXIT_ERROR
    if text:
        print(text, file=out, flush=True)
    return 0


def _show(args: argparse.Namespace, body: Any, render: Callable[[Any], str]) -> str:
    return json.dumps(body, indent=2) if args.json else render(body)


def _done(args: argparse.Namespace, answer: Answer, what: str) -> str:
    if args.json:
        return json.dumps(answer.body if answer.body is not None else {"status": answer.status}, indent=2)
    if answer.body is not None and isinstance(answer.body, dict) and "connector" in answer.body:
        return f"{what} (HTTP {answer.status})\n" + render_status(answer.body)
    return f"{what} (HTTP {answer.status})"


_ACTIONS: dict[str, Callable[[ConnectClient, argparse.Namespace], str]] = {
    "list": lambda c, a: _show(a, c.list(), render_list),
    "get": lambda c, a: _show(a, c.get(a.name), render_info),
    "create": lambda c, a: _show(a, c.create(*load_connector_file(a.file)), render_info),
    "delete": lambda c, a: _done(a, c.delete(a.name), f"deleted {a.name}"),
    "pause": lambda c, a: _done(a, c.pause(a.name), f"pausing {a.name}"),
    "resume": lambda c, a: _done(a, c.resume(a.name), f"resuming {a.name}"),
    "stop": lambda c, a: _done(a, c.stop(a.name), f"stopping {a.name}"),
    "restart": lambda c, a: _done(
        a,
        c.restart(a.name, include_tasks=a.include_tasks, only_failed=a.only_failed),
        f"restarting {a.name}",
    ),
    "status": lambda c, a: _show(a, c.status(a.name), render_status),
    "offsets": lambda c, a: _show(a, c.offsets(a.name), render_offsets),
}


def add_parser(sub: Any) -> None:
    """Register ``kconnect connectors <action>`` on the main command's subparsers."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--url", default=DEFAULT_URL, help=f"a worker's REST URL (default {DEFAULT_URL}, $KCONNECT_URL)"
    )
    common.add_argument("--json", action="store_true", help="print the server's JSON instead of a table")
    common.add_argument(
        "--user", default=os.environ.get("KCONNECT_USER"), help="USER:PASSWORD for basic auth"
    )
    parser = sub.add_parser("connectors", help="manage connectors over a worker's REST API")
    actions = parser.add_subparsers(dest="action", required=True)
    actions.add_parser("list", parents=[common], help="connectors with their state")
    for action, text in (
        ("get", "a connector's config and tasks"),
        ("delete", "delete a connector"),
        ("pause", "pause a connector and its tasks"),
        ("resume", "resume a paused or stopped connector"),
        ("stop", "stop a connector and shut its tasks down"),
        ("status", "a connector's and its tasks' states"),
        ("offsets", "a connector's committed offsets"),
    ):
        p = actions.add_parser(action, parents=[common], help=text)
        p.add_argument("name")
    p = actions.add_parser("restart", parents=[common], help="restart a connector (and its tasks)")
    p.add_argument("name")
    p.add_argument("--include-tasks", action="store_true", help="restart its tasks too")
    p.add_argument("--only-failed", action="store_true", help="only the failed instances")
    p = actions.add_parser(
        "create", parents=[common], help="create a connector from a JSON or .properties file"
    )
    p.add_argument("file", help='JSON ({"name": ..., "config": {...}} or a flat config) or .properties')
    parser.set_defaults(func=run)
