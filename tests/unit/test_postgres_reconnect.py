"""The CDC task's reconnection schedule: immediate first attempt, doubling waits up to the cap, a bounded
number of attempts (Debezium's errors.max.retries), a reset once streaming runs again."""

from __future__ import annotations

from kconnect.connectors.postgres_reconnect import MAX_DELAY_S, Reconnects, transient


def test_the_first_attempt_is_immediate_and_failures_double_the_wait_up_to_the_cap() -> None:
    r = Reconnects(max_retries=-1)
    assert not r.due(0.0)
    assert r.connection_lost(100.0, "terminated")
    assert r.due(100.0)
    delays = [r.attempt_failed(100.0, "refused") for _ in range(8)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, MAX_DELAY_S, MAX_DELAY_S, MAX_DELAY_S]
    assert not r.due(105.0) and r.due(110.0)
    assert r.cause == "refused"


def test_the_retries_are_bounded_and_zero_fails_at_once() -> None:
    r = Reconnects(max_retries=3)
    assert r.connection_lost(0.0, "x")
    assert r.attempt_failed(0.0, "a") == 0.5
    assert r.attempt_failed(1.0, "b") == 1.0
    assert r.attempt_failed(3.0, "c") is None  # three attempts made, none left
    assert r.cause == "c"
    assert not Reconnects(max_retries=0).connection_lost(0.0, "x")


def test_a_reopened_connection_starts_the_count_again() -> None:
    r = Reconnects(max_retries=2)
    r.connection_lost(0.0, "x")
    assert r.attempt_failed(0.0, "a") == 0.5
    r.reopened()
    assert not r.due(10.0)
    r.connection_lost(20.0, "y")
    assert r.attempt_failed(20.0, "b") == 0.5


def test_only_a_lost_connection_is_transient() -> None:
    # The socket or protocol (no SQLSTATE), a connection exception, the server going down or starting up,
    # the slot still held by the previous walsender, too many connections: reopen.
    for code in (None, "", "08006", "08003", "57P01", "57P02", "57P03", "55006", "53300"):
        assert transient(code), code
    # A publication dropped (42704), the slot invalidated (55000), an internal decoding error (XX000), a
    # permission taken away (42501): reconnecting cannot cure them, so the task fails at once.
    for code in ("42704", "55000", "XX000", "42501"):
        assert not transient(code), code
