"""When the CDC task tries again to open a lost replication connection, and when it gives up.

Why a module of its own: the replication stream (``postgres_stream``) must neither fail its task on the first
dropped connection (a server restart, a failover, a walsender terminated by an administrator) nor retry
silently for ever: Debezium retries ``errors.max.retries`` times and then fails the connector with the
cause. This is that policy, pure (the caller passes the clock), so its schedule is unit tested.

The first attempt is immediate (a terminated walsender is usually back at once); each failed attempt
doubles the wait, from half a second up to ten seconds (Debezium's ``retriable.restart.connector.wait.ms``).
A successful reopen resets the count.

Which errors are a lost connection at all (``transient``): the rest (a publication dropped while
streaming, a slot invalidated because the server removed WAL it needed, a decoding error) cannot be
cured by reconnecting, and retrying them, for ever under ``errors.max.retries=-1``, would leave a task
RUNNING that delivers nothing; they fail the task at once with the server's message.
"""

from __future__ import annotations

from dataclasses import dataclass

FIRST_DELAY_S = 0.5
MAX_DELAY_S = 10.0
#: SQLSTATEs of a connection ended by the server or its state rather than by the request: the server
#: shutting down, crashed or starting up, and a slot still held by the walsender of a connection that was
#: just lost ("replication slot ... is active for PID", which the next attempt usually no longer meets).
TRANSIENT_CODES = frozenset({"57P01", "57P02", "57P03", "55006"})
#: SQLSTATE classes retried likewise: connection exceptions (08) and insufficient resources (53: too many
#: connections, out of memory or disk).
TRANSIENT_CLASSES = ("08", "53")


def transient(pgcode: str | None) -> bool:
    """Whether an error with this SQLSTATE (None: psycopg2's own, the socket or the protocol, such as a
    connection closed mid-stream) is a lost connection worth reopening."""
    return not pgcode or pgcode in TRANSIENT_CODES or pgcode.startswith(TRANSIENT_CLASSES)


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
