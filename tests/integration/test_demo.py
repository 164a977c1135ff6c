"""``kconnect demo`` from a cold start, as a fresh clone's ``make demo`` runs it.

The real command (the development venv's console script) starts the embedded broker, three workers and
the sample pipeline (FileStream source to a topic, then a FileStream sink and an Iceberg sink written by
Spark) in a temporary directory of the test's own (TMPDIR), so no broker, worker or data of an earlier run
is reused. It once posted the source connector to a worker that was still starting (503) and took that for
the answer; it must exit 0 with every line through, in output.txt and in the table.
"""

from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from kconnect.runtime.cli import broker
from kconnect.runtime.cli.main import main
from tests.support.lakehouse_jars import lakehouse_jars

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

KCONNECT = Path(sys.executable).parent / "kconnect"


def test_demo_from_a_cold_start_moves_every_line(tmp_path: Path) -> None:
    lakehouse_jars()  # Spark's Iceberg runtime in the cache, where the demo looks (`make demo` fetches it)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KCONNECT_")}
    env["TMPDIR"] = str(tmp_path)  # the demo's work directory (tempfile.mkdtemp) lands here, new
    started = time.monotonic()
    proc = subprocess.run(
        [str(KCONNECT), "demo"], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=540
    )
    elapsed = time.monotonic() - started
    out = proc.stdout + proc.stderr
    print(f"\nkconnect demo: exit {proc.returncode} in {elapsed:.0f} s\n{out}")
    (work,) = tmp_path.glob("kconnect-demo-*")  # the run's own directory, fresh
    logs = "".join(
        f"\n--- {p.name}\n{p.read_text(errors='replace')[-2000:]}" for p in sorted(work.glob("*.log"))
    )
    assert proc.returncode == 0, out + logs
    assert re.search(r"^POST /connectors -> 201$", proc.stdout, re.M), out
    assert re.search(r"^POST /connectors \(demo-file-sink\) -> 201$", proc.stdout, re.M), out
    assert re.search(
        r"^kconnect demo: 100 of 100 lines went input\.txt -> topic demo-lines -> output\.txt",
        proc.stdout,
        re.M,
    ), out
    # Every line once; the order across the topic's partitions is not the file's (keyless records spread).
    lines = (work / "output.txt").read_text().splitlines()
    assert sorted(lines, key=lambda line: int(line.split()[1])) == [f"line {n}" for n in range(100)]
    # The table: its sink was created, and the demo's Spark SQL query of it counted every line once.
    assert re.search(r"^POST /connectors \(demo-iceberg-sink\) -> 201$", proc.stdout, re.M), out
    assert re.search(r"^spark-sql> SELECT count\(\*\) AS rows, .* FROM lake\.demo\.lines$", proc.stdout, re.M)
    assert re.search(r"^  100 rows, 100 distinct lines, line 0 \.\. line 99$", proc.stdout, re.M), out
    assert re.search(r"^  line=line 0, kafka_partition=\d, kafka_offset=\d+$", proc.stdout, re.M), out
    table = work / "warehouse" / "demo" / "lines"
    assert list((table / "data").glob("*.parquet")) and list((table / "metadata").glob("v*.metadata.json"))
    assert "WARN" not in proc.stdout + proc.stderr  # the demo's own Spark logs to spark-reader.log


def test_a_worker_whose_port_was_taken_is_restarted_on_another(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """free_port() to bind is a race a busy machine loses now and then (another process takes the port
    first; seen here while other test runs shared the machine): the demo restarts that worker on another
    port. The race is made certain by handing worker 0 a port this test holds bound."""
    held = socket.create_server(("127.0.0.1", 0))
    real_free_port = broker.free_port
    handed: list[int] = []

    def free_port(host: str = "127.0.0.1") -> int:
        if not handed and sys._getframe(1).f_code.co_name == "launch":
            handed.append(held.getsockname()[1])
            return handed[0]
        return real_free_port(host)

    monkeypatch.setattr(broker, "free_port", free_port)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    try:
        code = main(["demo", "--no-table"])  # what is tested is the port's retry: no Spark needed
    finally:
        held.close()
    out = capsys.readouterr().out
    print(out)
    assert handed, "the demo did not launch a worker through launch()"
    assert f"http://127.0.0.1:{handed[0]}" in out.splitlines()[0]
    assert re.search(
        r"^kconnect demo: worker 0's port was taken; restarted it on http://127\.0\.0\.1:\d+$", out, re.M
    )
    assert code == 0, out
    assert re.search(r"^kconnect demo: 100 of 100 lines went", out, re.M), out
