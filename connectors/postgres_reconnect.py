"""When the CDC task tries again to open a lost replication connection, and when it gives up.

Why a module of its own: the replication loop (``postgres_cdc``) must neither fail its task on the first
dropped connection (a server restart, a failover, a walsender terminated by an administrator) nor retry
silently for ever: Debezium retries ``errors.max.retries`` times and then fails the connector with the
cause. This is that policy, pure (the caller passes the clock), so its schedule is unit tested.

The first attempt is immediate (a terminated walsender is usually back at once); each failed attempt
doubles the wait, from half a second up to ten seconds (Debezium's ``retriable.restart.connector.wait.ms``).
A successful reopen resets the count.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0


@dataclass
class Reconnects:
    """The state of one task's reconnection: ``max_retries`` attempts are allowed (-1: no limit)."""

    max_retries: int
    failures: int = 0
    lost: bool = False
    next_at: float = 0.0
    cause: str = ""

    def connection_lost(self, now: float, cause: str) -> bool:
        """The open connection broke: the first attempt is due at once; False when no retry is allowed
        (``errors.max.retries=0``)."""
        self.lost = True
        self.failures = 0
        self.next_at = now
        self.cause = cause
        return self.max_retries != 0

    def due(self, now: float) -> bool:
        return self.lost and now >= self.next_at

    def attempt_failed(self, now: float, cause: str) -> float | None:
        """An attempt to reopen failed: the wait before the next one, or None when the retries are spent."""
        self.failures += 1
        self.cause = cause
        if 0 <= self.max_retries <= self.failures:
            return None
        delay = min(MAX_DELAY_S, FIRST_DELAY_S * 2.0 ** (self.failures - 1))
        self.next_at = now + delay
        return delay

    def reopened(self) -> None:
        """Streaming runs again."""
        self.lost = False
        self.failures = 0
        self.cause = ""
