"""``kconnect connectors``: the client against a small real HTTP server that answers as Java 3.9 does.

The server is a real socket server (http.server), not a mock of httpx: it keeps connectors in memory and
answers with Apache Kafka Connect's paths, status codes and bodies (tests/golden/reference_findings.md).
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

import pytest

from kconnect.runtime.cli.main import build_parser
from kconnect.runtime.cli.rest_client import ClientError, load_connector_file, render_table


class FakeConnect(BaseHTTPRequestHandler):
    connectors: dict[str, dict[str, Any]] = {}
    requests: list[tuple[str, str]] = []

    def log_message(self, *_args: Any) -> None:
        pass

    def _answer(self, status: int, body: Any = None) -> None:
        data = b"" if body is None else json.dumps(body).encode()
        self.send_response(status)
        if body is not None:
            self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def _status(self, name: str, state: str = "RUNNING") -> dict[str, Any]:
        return {
            "name": name,
            "connector": {"state": state, "worker_id": "127.0.0.1:8083"},
            "tasks": [{"id": 0, "state": "FAILED", "worker_id": "127.0.0.1:8083", "trace": "boom\n at x"}],
            "type": "source",
        }

    def _info(self, name: str) -> dict[str, Any]:
        return {
            "name": name,
            "config": self.connectors[name],
            "tasks": [{"connector": name, "task": 0}],
            "type": "source",
        }

    def _route(self, method: str) -> None:
        url = urlsplit(self.path)
        query = parse_qs(url.query)
        parts = [unquote(p) for p in url.path.split("/")[1:]]
        self.requests.append((method, self.path))
        if parts == ["connectors"] and method == "GET":
            if "status" in query.get("expand", []):
                self._answer(
                    200, {n: {"status": self._status(n), "info": self._info(n)} for n in self.connectors}
                )
            else:
                self._answer(200, sorted(self.connectors))
            return
        if parts == ["connectors"] and method == "POST":
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if body["name"] in self.connectors:
                self._answer(409, {"error_code": 409, "message": f"Connector {body['name']} already exists"})
                return
            self.connectors[body["name"]] = {**body["config"], "name": body["name"]}
            self._answer(201, self._info(body["name"]))
            return
        name = parts[1] if len(parts) > 1 else ""
        if name not in self.connectors:
            self._answer(404, {"error_code": 404, "message": f"Connector {name} not found"})
            return
        action = (method, tuple(parts[2:]))
        if action == ("GET", ()):
            self._answer(200, self._info(name))
        elif action == ("DELETE", ()):
            del self.connectors[name]
            self._answer(204)
        elif action in (("PUT", ("pause",)), ("PUT", ("resume",))):
            self._answer(202)
        elif action == ("PUT", ("stop",)):
            self._answer(204)
        elif action == ("POST", ("restart",)):
            if query.get("includeTasks") == ["true"]:
                self._answer(202, self._status(name, "RESTARTING"))
            else:
                self._answer(204)
        elif action == ("GET", ("status",)):
            self._answer(200, self._status(name))
        elif action == ("GET", ("offsets",)):
            self._answer(
                200, {"offsets": [{"partition": {"filename": "/tmp/in"}, "offset": {"position": 42}}]}
            )
        else:
            self._answer(405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})

    def do_GET(self) -> None:
        self._route("GET")

    def do_POST(self) -> None:
        self._route("POST")

    def do_PUT(self) -> None:
        self._route("PUT")

    def do_DELETE(self) -> None:
        self._route("DELETE")


@pytest.fixture
def server() -> Iterator[str]:
    FakeConnect.connectors = {"lines": {"connector.class": "FileStreamSource", "topic": "t", "name": "lines"}}
    FakeConnect.requests = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), FakeConnect)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def kc(url: str, *argv: str) -> tuple[int, str, str]:
    parser = build_parser()
    action, rest = argv[0], argv[1:]
    args = parser.parse_args(["connectors", action, "--url", url, *rest])
    out, err = io.StringIO(), io.StringIO()
    from kconnect.runtime.cli.rest_client import run

    code = run(args, out, err)
    return code, out.getvalue(), err.getvalue()


def test_list_as_table_and_json(server: str) -> None:
    code, out, _ = kc(server, "list")
    assert code == 0
    assert out.splitlines() == ["NAME   TYPE    STATE    TASKS RUNNING", "lines  source  RUNNING  0/1"]
    code, out, _ = kc(server, "list", "--json")
    assert json.loads(out)["lines"]["status"]["connector"]["state"] == "RUNNING"
    assert FakeConnect.requests[0] == ("GET", "/connectors?expand=status&expand=info")


def test_create_from_properties_and_json_files(server: str, tmp_path: Path) -> None:
    props = tmp_path / "c.properties"
    props.write_text("name=from-props\nconnector.class=FileStreamSource\ntopic=t\n")
    code, out, _ = kc(server, "create", str(props))
    assert code == 0 and out.startswith("from-props (source), tasks: 0")
    doc = tmp_path / "c.json"
    doc.write_text(json.dumps({"name": "from-json", "config": {"connector.class": "X", "tasks.max": 2}}))
    code, out, _ = kc(server, "create", str(doc), "--json")
    assert code == 0 and json.loads(out)["config"]["tasks.max"] == "2"
    code, _, err = kc(server, "create", str(doc))
    assert (code, err) == (1, "kconnect: Connector from-json already exists (HTTP 409)\n")


def test_lifecycle_actions_use_javas_paths_and_codes(server: str) -> None:
    assert kc(server, "pause", "lines")[1] == "pausing lines (HTTP 202)\n"
    assert kc(server, "resume", "lines")[1] == "resuming lines (HTTP 202)\n"
    assert kc(server, "stop", "lines")[1] == "stopping lines (HTTP 204)\n"
    assert kc(server, "restart", "lines")[1] == "restarting lines (HTTP 204)\n"
    code, out, _ = kc(server, "restart", "lines", "--include-tasks", "--only-failed")
    assert code == 0 and "RESTARTING" in out
    assert ("POST", "/connectors/lines/restart?includeTasks=true&onlyFailed=true") in FakeConnect.requests
    code, out, _ = kc(server, "status", "lines")
    assert "task 0     FAILED   127.0.0.1:8083  boom" in out
    code, out, _ = kc(server, "offsets", "lines")
    assert out.splitlines()[1] == '{"filename": "/tmp/in"}  {"position": 42}'
    assert kc(server, "delete", "lines")[1] == "deleted lines (HTTP 204)\n"


def test_server_errors_print_the_message_and_exit_1(server: str) -> None:
    code, out, err = kc(server, "get", "nope")
    assert (code, out, err) == (1, "", "kconnect: Connector nope not found (HTTP 404)\n")
    code, _, err = kc("http://127.0.0.1:1", "list")
    assert code == 1 and err.startswith("kconnect: cannot reach http://127.0.0.1:1")


def test_names_are_escaped_in_paths(server: str) -> None:
    FakeConnect.connectors["a/b c"] = {"name": "a/b c"}
    code, out, _ = kc(server, "get", "a/b c", "--json")
    assert code == 0 and json.loads(out)["name"] == "a/b c"
    assert FakeConnect.requests[-1] == ("GET", "/connectors/a%2Fb%20c")


def test_connector_files_must_name_the_connector(tmp_path: Path) -> None:
    bad = tmp_path / "c.properties"
    bad.write_text("connector.class=X\n")
    with pytest.raises(ClientError, match="names no connector"):
        load_connector_file(str(bad))
    flat = tmp_path / "flat.json"
    flat.write_text('{"name": "n", "connector.class": "X"}')
    assert load_connector_file(str(flat)) == ("n", {"name": "n", "connector.class": "X"})
    with pytest.raises(ClientError, match="cannot read"):
        load_connector_file(str(tmp_path / "missing.json"))


def test_table_columns_align() -> None:
    assert render_table(["A", "BB"], [["xxx", None]]) == "A    BB\nxxx"
