"""A ``kconnect worker`` process whose tasks are held, not run: ``python -m tests.support.held_worker PROPS``.

Rebalancing, REST and group tests need real worker processes that place and count tasks but start no
SparkSession (a JVM per worker). The product has no switch for that; this launcher runs the product's
own ``worker`` command (same argument parsing, logging, config errors and exit statuses, REST listeners)
with :class:`tests.support.held_executor.HeldTasks` injected as the worker's executor.
"""

from __future__ import annotations

import os
import shlex
import sys
from pathlib import Path

from kconnect.runtime.cli.main import EXIT_CONFIG, build_parser, cmd_worker
from tests.support.held_executor import HeldTasks

#: The repository's root, which must be on a held worker's import path for ``tests.support`` to import.
REPO_ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    """Parse ``PROPS [--log-level L]`` as ``kconnect worker`` does and run it with held tasks."""
    try:
        args = build_parser().parse_args(["worker", *(sys.argv[1:] if argv is None else argv)])
    except SystemExit as exc:
        return int(exc.code or 0) if exc.code in (0, None) else EXIT_CONFIG
    status: int = cmd_worker(args, executor=HeldTasks())
    return status


def kconnect_shim(directory: Path) -> Path:
    """Write an executable ``kconnect`` into ``directory`` whose ``worker`` command holds its tasks.

    For scripts that exec ``kconnect worker`` from PATH (the image's entrypoint): with ``directory``
    first on PATH they start a held worker; every other command is the real ``kconnect``.
    """
    python = shlex.quote(sys.executable)
    root = shlex.quote(str(REPO_ROOT))
    shim = directory / "kconnect"
    shim.write_text(
        "#!/bin/sh\n"
        "# kconnect with held tasks for `worker` (tests/support/held_worker.py); the real one otherwise\n"
        f'if [ "$1" != worker ]; then exec {python} -m kconnect.runtime.cli.main "$@"; fi\n'
        "shift\n"
        f'PYTHONPATH={root}${{PYTHONPATH:+:$PYTHONPATH}} exec {python} -m tests.support.held_worker "$@"\n'
    )
    shim.chmod(0o755)
    return shim


def with_repo_on_path(env: dict[str, str]) -> dict[str, str]:
    """``env`` with the repository's root first on PYTHONPATH, for a held worker's interpreter."""
    path = os.pathsep.join(p for p in (str(REPO_ROOT), env.get("PYTHONPATH", "")) if p)
    return {**env, "PYTHONPATH": path}


if __name__ == "__main__":
    sys.exit(main())
