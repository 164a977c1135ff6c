"""``make faults``: the broker-fault scenarios, many times in a row on fresh clusters (issue 29).

One green run of ``tests/integration/test_broker_faults.py`` proves little: issue 29's stall showed once in
a full suite's run and never in three runs alone. This runs that module ``--runs`` N times in a row, each
run a fresh pytest process and so a fresh three-node Apache Kafka cluster (the module's fixture), the three
scenarios in each: a partition leader SIGKILLed and restarted, leadership moved twice, the group
coordinator's broker killed twice under ``group.protocol=connect``. Each scenario prints a
``FAULT-FIGURES`` line; this collects them and prints, per run and scenario, pass or fail and the seconds
until the pipeline delivered again (``recover``), then how many of the N passed per scenario. A failed run
keeps its pytest temporary directory (the brokers' ``server.log``, the workers' logs and files) beside its
output as ``tmp-NN``, so a failure seen once can be read afterwards; a passed run's is removed.

Not part of ``make test`` (N runs take N times three to four minutes). Exits 1 if any run failed.

    make faults                   # N=10
    make faults FAULTS_RUNS=3
    .venv/bin/python bench/faults.py --runs 2 -k leadership
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODULE = "tests/integration/test_broker_faults.py"
SCENARIOS = {
    "test_broker_killed_and_restarted_while_the_pipeline_runs": "broker-kill-restart",
    "test_leadership_moved_while_data_flows": "leadership-moved",
    "test_group_coordinator_killed_under_connect_protocol": "coordinator-killed",
}
FIELDS = ("recover_s", "delivering_after_restart_s", "coordinator_moves", "lost", "duplicated", "whole_s")


def figures_of(output: str) -> dict[str, dict[str, str]]:
    """Scenario name -> its FAULT-FIGURES fields, from one pytest run's output."""
    out: dict[str, dict[str, str]] = {}
    for line in output.splitlines():
        found = re.match(r"FAULT-FIGURES ([\w-]+): (.*)", line.strip())
        if not found:
            continue
        fields = dict(re.findall(r"(\w+)=(\{[^}]*\}|\S+)", found.group(2)))
        out[found.group(1)] = fields
    return out


def outcomes_of(output: str) -> dict[str, str]:
    """Test name -> PASSED / FAILED / ERROR, from pytest's ``-rA`` summary."""
    out: dict[str, str] = {}
    for line in output.splitlines():
        found = re.match(r"(PASSED|FAILED|ERROR) \S+::(\w+)", line.strip())
        if found:
            out[found.group(2)] = found.group(1)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=int(os.environ.get("FAULTS_RUNS", "10")))
    parser.add_argument("-k", default="", help="pytest -k expression (a subset of the scenarios)")
    parser.add_argument("--logs", type=Path, default=ROOT / "build" / "faults", help="each run's output")
    args = parser.parse_args(argv)
    args.logs.mkdir(parents=True, exist_ok=True)
    passed: dict[str, int] = dict.fromkeys(SCENARIOS.values(), 0)
    ran: dict[str, int] = dict.fromkeys(SCENARIOS.values(), 0)
    started = time.monotonic()
    print(f"FAULTS {args.runs} runs of {MODULE}, each on a fresh 3-node Apache Kafka cluster", flush=True)
    for run in range(1, args.runs + 1):
        kept = args.logs / f"tmp-{run:02d}"
        command = [sys.executable, "-m", "pytest", "-q", "-s", "-rA", "-p", "no:cacheprovider", MODULE]
        command += [f"--basetemp={kept}"]
        if args.k:
            command += ["-k", args.k]
        at = time.monotonic()
        proc = subprocess.run(command, cwd=ROOT, capture_output=True, text=True)
        output = proc.stdout + proc.stderr
        (args.logs / f"run-{run:02d}.log").write_text(output)
        figures, outcomes = figures_of(output), outcomes_of(output)
        for test, name in SCENARIOS.items():
            outcome = outcomes.get(test)
            if outcome is None:
                continue
            ran[name] += 1
            passed[name] += outcome == "PASSED"
            shown = " ".join(f"{k}={v}" for k, v in figures.get(name, {}).items() if k in FIELDS)
            print(f"FAULTS run={run} {name} {outcome} {shown}", flush=True)
        if proc.returncode == 0:
            shutil.rmtree(kept, ignore_errors=True)
        else:
            print(f"FAULTS run={run} kept its brokers' and workers' logs in {kept}", flush=True)
        print(f"FAULTS run={run} took {time.monotonic() - at:.0f} s (exit {proc.returncode})", flush=True)
    print(f"FAULTS summary after {time.monotonic() - started:.0f} s:")
    for name in SCENARIOS.values():
        print(f"  {name}: {passed[name]}/{ran[name]} passed")
    return 0 if all(passed[n] == ran[n] for n in SCENARIOS.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
