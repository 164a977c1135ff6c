"""``kconnect demo``'s summary lines: short enough to read, and naming what to curl next."""

from __future__ import annotations

from kconnect.runtime.cli.main import _group_lines, _next_steps, _status_line


def test_status_and_group_come_a_line_each() -> None:
    status = {
        "connector": {"state": "RUNNING", "worker_id": "w1:8083"},
        "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w2:8083"}],
    }
    assert _status_line(status) == "connector RUNNING on w1:8083; task 0 RUNNING on w2:8083"
    view = {
        "group": "g",
        "protocol": "static",
        "generation": 3,
        "leader_url": "http://w2:8083/",
        "members": [
            {"url": "http://w1:8083/", "assignment": {"connectors": ["src"], "tasks": ["src-0"]}},
            {"url": "http://w2:8083/", "leader": True, "assignment": {}},
        ],
    }
    assert _group_lines(view) == [
        "group g, protocol static, generation 3, leader http://w2:8083/",
        "http://w1:8083/: src, src-0",
        "http://w2:8083/ (leader): nothing",
    ]


def test_next_steps_say_how_to_keep_the_cluster_before_what_to_curl() -> None:
    stopped = _next_steps("http://127.0.0.1:8083", keep_running=False)
    assert "kconnect demo --keep-running" in stopped
    assert "curl http://127.0.0.1:8083/connectors?expand=status" in stopped
    assert "curl http://127.0.0.1:8083/metrics" in stopped
    kept = _next_steps("http://127.0.0.1:8083", keep_running=True)
    assert "--keep-running" not in kept and "curl http://127.0.0.1:8083/workers" in kept
