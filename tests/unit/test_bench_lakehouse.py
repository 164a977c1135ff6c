"""bench/lakehouse.py's marginal CPU per record: the worker tree's CPU between a table's first and last
commit over the records those commits added, read at the first poll at or after each commit."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "lakehouse.py"


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_lakehouse", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("bench_lakehouse", module)
    spec.loader.exec_module(module)
    return module


READINGS = [(1000.0, 30.0), (1500.0, 31.0), (2000.0, 33.0), (2500.0, 36.0), (3000.0, 40.0)]


@pytest.mark.parametrize(
    ("commits", "expected"),
    [
        # CPU read at 1500 (31) and 3000 (40): 9 s over 3,000 records.
        ([(1200.0, 1000), (2600.0, 2500), (3000.0, 4000)], 3.0),
        ([(1000.0, 1000), (2000.0, 10000)], 3 / 9),
        ([(1200.0, 1000)], None),  # one commit: no span
        ([(1200.0, 1000), (2600.0, 1000)], None),  # no records between them
        ([(1200.0, 1000), (3500.0, 2000)], None),  # no reading after the last commit
    ],
)
def test_marginal_cpu_spans_the_first_commit_to_the_last(
    commits: list[tuple[float, int]], expected: float | None
) -> None:
    got = _bench().marginal_cpu_per_1k(READINGS, commits)
    assert got == (None if expected is None else pytest.approx(expected))
