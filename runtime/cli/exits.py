"""How the ``kconnect`` commands end: exit codes and the one line a failure prints.

Why a module of its own: ``main`` (the commands) and ``demo`` (the quick start's main job, which starts
workers and restarts one whose REST listener could not bind) both need them, and neither may import the
other.
"""

from __future__ import annotations

import sys

__all__ = ["EXIT_CONFIG", "EXIT_STARTUP", "REST_LISTEN_FAILED", "fail"]

EXIT_STARTUP = 1
EXIT_CONFIG = 2
#: A worker's last words when a REST listener could not bind; ``kconnect demo`` restarts such a worker.
REST_LISTEN_FAILED = "the REST server could not listen on"


def fail(code: int, message: str) -> int:
    """Print ``kconnect: message`` on stderr and return ``code`` for the command to exit with."""
    print(f"kconnect: {message}", file=sys.stderr, flush=True)
    return code
