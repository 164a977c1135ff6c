"""``/connector-plugins`` and ``/admin/loggers`` on real workers, shapes and codes as Java 3.9's."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, stable_view, wait_until, worker_properties

pytestmark = pytest.mark.integration


def _level(worker: WorkerProcess, logger: str) -> dict[str, Any] | None:
    resp = worker.get(f"/admin/loggers/{logger}")
    return resp.json() if resp.status_code == 200 else None


def test_plugins_validation_and_log_levels(tmp_path: Path, broker: Broker) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    broken = f"kc_broken_{uuid.uuid4().hex[:6]}"
    (plugins / f"{broken}.py").write_text("import this_module_does_not_exist\n")
    group = f"rs-{uuid.uuid4().hex[:6]}"
    workers = [
        WorkerProcess(
            tmp_path,
            worker_properties(broker.bootstrap, group, free_port(), plugin_path=str(plugins)),
            name=f"{group}-w{i}",
        ).start()
        for i in range(2)
    ]
    try:
        wait_until(stable_view(workers, 2), 90, "a two-worker group")
        w0, w1 = workers

        # ---- plugins
        listing = w0.get("/connector-plugins").json()
        assert [(p["class"].rsplit(".", 1)[-1], p["type"]) for p in listing] == [
            ("FileStreamSinkConnector", "sink"),
            ("FileStreamSourceConnector", "source"),
            ("JdbcSinkConnector", "sink"),
            ("JdbcSourceConnector", "source"),
            ("DeltaSinkConnector", "sink"),
            ("IcebergSinkConnector", "sink"),
            ("ParquetSinkConnector", "sink"),
            ("PostgresCdcSourceConnector", "source"),
            ("VerifiableSinkConnector", "sink"),
            ("VerifiableSourceConnector", "source"),
        ]
        assert {"class", "type", "version"} == set(listing[0])
        everything = w0.get("/connector-plugins", params={"connectorsOnly": "false"}).json()
        assert everything[: len(listing)] == listing
        assert {"class": "org.apache.kafka.connect.json.JsonConverter", "type": "converter"}.items() <= next(
            p for p in everything if p["class"].endswith("JsonConverter") and p["type"] == "converter"
        ).items()
        errors = w0.get("/connector-plugins/errors").json()
        assert any(broken in e["error"] and "import failed" in e["error"] for e in errors)

        keys = w0.get("/connector-plugins/FileStreamSource/config").json()
        assert [k["name"] for k in keys[:4]] == ["file", "topic", "batch.size", "name"]
        assert set(keys[0]) == {
            "name", "type", "required", "default_value", "importance", "documentation",
            "group", "order_in_group", "width", "display_name", "dependents",
        }  # fmt: skip
        missing = w0.get("/connector-plugins/Nope/config")
        assert (missing.status_code, missing.json()) == (
            404,
            {"error_code": 404, "message": "Unknown plugin Nope."},
        )

        url = "/connector-plugins/FileStreamSource/config/validate"
        answer = w0.request("PUT", url, json={"connector.class": "FileStreamSource", "topic": "x"})
        assert answer.status_code == 200
        body = answer.json()
        # As the Java worker answered the same request: only the missing name is an error.
        assert body["name"] == "FileStreamSource" and body["error_count"] == 1
        assert body["groups"][:2] == ["Common", "Transforms"]
        first = body["configs"][0]
        assert first["value"]["errors"] == [
            'Missing required configuration "name" which has no default value.'
        ]
        mismatch = w0.request(
            "PUT",
            "/connector-plugins/FileStreamSink/config/validate",
            json={"connector.class": "FileStreamSource"},
        )
        assert mismatch.status_code == 400
        assert (
            mismatch.json()["message"]
            == "Included connector type FileStreamSource does not match request type FileStreamSink"
        )
        for bad in (["x"], {}, {"connector.class": "Nope"}):
            resp = w0.request("PUT", url, json=bad)
            assert resp.status_code == 400 and resp.json()["error_code"] == 400, resp.text

        # ---- loggers, worker scope: only this worker changes
        ns = f"kconnect.test{uuid.uuid4().hex[:4]}"
        resp = w0.request("PUT", f"/admin/loggers/{ns}", json={"level": "debug"})
        assert (resp.status_code, resp.json()) == (200, [ns])
        got = _level(w0, ns)
        assert got is not None and got["level"] == "DEBUG" and isinstance(got["last_modified"], int)
        assert ns in w0.get("/admin/loggers").json()
        assert _level(w1, ns) is None
        assert w1.get(f"/admin/loggers/{ns}").json() == {
            "error_code": 404,
            "message": f"Logger {ns} not found.",
        }
        assert w0.get("/admin/loggers/root").json()["last_modified"] is None
        bad_level = w0.request("PUT", f"/admin/loggers/{ns}", json={"level": "LOUD"})
        assert (bad_level.status_code, bad_level.json()["message"]) == (404, "invalid log level 'LOUD'.")
        no_level = w0.request("PUT", f"/admin/loggers/{ns}", json={})
        assert no_level.status_code == 400

        # ---- cluster scope: a config-topic record every worker applies
        resp = w1.request("PUT", f"/admin/loggers/{ns}", params={"scope": "cluster"}, json={"level": "WARN"})
        assert resp.status_code == 204 and resp.content == b""
        for w in workers:
            wait_until(lambda w=w: (lv := _level(w, ns)) and lv["level"] == "WARN", 30, f"WARN on {w.name}")
        assert "cluster log level applied" in w0.log_text()
    finally:
        for w in workers:
            w.stop()
