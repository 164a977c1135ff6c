"""Where kconnect keeps what it fetched once and reuses: ``$XDG_CACHE_HOME/kconnect``, else
``~/.cache/kconnect``.

Why one home: ``make kafka`` / ``make lakehouse`` and the tests' Maven fetches (tests/support/maven.py) fill
this folder, and ``kconnect demo`` looks for Spark's Iceberg runtime in it (demo_table.py); the rule stood in
both, so a change to one (another variable honoured, another folder) would have left the demo looking where
nothing is written. Product code holds it because the tests may import the product, never the reverse.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path


def kconnect_cache_dir(environ: Mapping[str, str] | None = None, home: Path | None = None) -> Path:
    """``$XDG_CACHE_HOME/kconnect``, or ``<home>/.cache/kconnect`` when the variable is unset or empty (the
    XDG base directory rule). ``environ`` and ``home`` default to this process's environment and
    ``Path.home()``; callers pass their own to stay pure (and testable)."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CACHE_HOME") or str((Path.home() if home is None else home) / ".cache")
    return Path(base) / "kconnect"
