"""Issue 23, row 3: what a stranger who can reach the worker's task channel can do to it (nothing), and the
pure parts that make it so (``task_channel``: line framing, challenge and response, the certificate pin).

Each attack runs against a real ``ChannelServer`` on loopback with a real task attached (a
``ChannelClient`` holding the task's secret), and afterwards checks that the real task is still the one
attached and still served: a stranger who knows nothing (plain TCP, or TLS without the secret) gets no
message and displaces nothing; one who floods (a line without end, idle connections by the dozen) is cut
off while the worker keeps serving. Against the plain-TCP channel with a token in clear and an unbounded
``readline()`` per connection that these replace, each of them fails.
"""

from __future__ import annotations

import queue
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, replace
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.serialization import Encoding

from kconnect.runtime.dataplane import task_channel
from kconnect.runtime.dataplane.task_channel import (
    MAX_HELLO_BYTES,
    CertificateMismatch,
    ChannelAddress,
    ChannelClient,
    ChannelServer,
    Connection,
    FrameTooLong,
    LineFramer,
    Message,
    TaskHandler,
    WorkerCertificate,
    answer,
    answer_is_right,
    client_context,
    decode,
    encode,
    fingerprint,
)

# ----------------------------------------------------------------------------------------- pure parts


def test_the_framer_cuts_lines_and_keeps_the_unfinished_rest() -> None:
    framer = LineFramer(10)
    assert framer.feed(b'{"a":1}\n{"b"') == [b'{"a":1}']
    assert framer.feed(b":2}\n\n") == [b'{"b":2}', b""]
    assert framer.feed(b"0123456789") == []  # exactly the limit, unfinished: still allowed
    assert framer.feed(b"\n") == [b"0123456789"]


@pytest.mark.parametrize("data", [b"01234567890\n", b"01234567890", b"0123\n" + b"x" * 11])
def test_the_framer_refuses_a_line_past_its_limit_finished_or_not(data: bytes) -> None:
    with pytest.raises(FrameTooLong):
        LineFramer(10).feed(data)


def test_the_framer_refuses_a_line_fed_in_small_pieces_as_soon_as_it_passes_the_limit() -> None:
    framer = LineFramer(10)
    for _ in range(10):
        assert framer.feed(b"x") == []
    with pytest.raises(FrameTooLong):
        framer.feed(b"x")


def test_the_framers_limit_can_be_raised_once_the_peer_is_trusted() -> None:
    framer = LineFramer(4)
    assert framer.feed(b"ok\nlong") == [b"ok"]
    framer.limit = 100
    assert framer.feed(b"er line\n") == [b"longer line"]


def test_the_answer_is_right_only_for_the_secret_the_challenge_and_the_certificate() -> None:
    right = answer("s3cret", "nonce-1", "fp-a")
    assert answer_is_right("s3cret", "nonce-1", "fp-a", right)
    assert len(right) == 64 and "s3cret" not in right
    assert not answer_is_right("other", "nonce-1", "fp-a", right)  # a guessed secret
    assert not answer_is_right("s3cret", "nonce-2", "fp-a", right)  # replayed for a later challenge
    assert not answer_is_right("s3cret", "nonce-1", "fp-b", right)  # relayed from another TLS peer
    for junk in (None, 42, ["x"], "", right.upper(), "é" * 64, right[:-1]):
        assert not answer_is_right("s3cret", "nonce-1", "fp-a", junk)


def test_the_workers_certificate_is_fresh_pinned_by_its_der_form_and_its_key_never_printed() -> None:
    first, second = WorkerCertificate.generate(), WorkerCertificate.generate()
    assert first.fingerprint != second.fingerprint
    der = x509.load_pem_x509_certificate(first.certificate_pem).public_bytes(Encoding.DER)
    assert first.fingerprint == fingerprint(der)
    assert b"PRIVATE KEY" in first.key_pem and "PRIVATE" not in repr(first)
    address = ChannelAddress("h", 1, "t", "the-secret", first.fingerprint)
    assert "the-secret" not in repr(address)


# ------------------------------------------------------------------------------------------- attacks


class Recorder(TaskHandler):
    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()

    def attached(self, connection: Connection) -> None:
        self.events.put(("attached", connection))
        connection.send({"command": "state", "paused": False})

    def message(self, connection: Connection, message: Message) -> None:
        self.events.put(("message", message))

    def detached(self, connection: Connection) -> None:
        self.events.put(("detached", connection))


@dataclass
class Attached:
    server: ChannelServer
    handler: Recorder
    address: ChannelAddress
    real: ChannelClient
    #: The worker's end of the real task's connection.
    connection: Connection

    def still_served(self) -> None:
        """The real task is still the one attached: nothing else attached or detached, it was told
        nothing new (no stop), and its events still arrive."""
        assert self.handler.events.empty(), self.handler.events.get_nowait()
        assert self.real.commands.empty(), self.real.commands.get_nowait()
        assert self.real.send({"event": "running"})
        assert self.handler.events.get(timeout=5) == ("message", {"event": "running"})
        assert self.connection.send({"command": "state", "paused": True})
        assert self.real.commands.get(timeout=5) == {"command": "state", "paused": True}


@contextmanager
def attached(**server_options: Any) -> Iterator[Attached]:
    server = ChannelServer("127.0.0.1", "127.0.0.1", **server_options)
    handler = Recorder()
    address = server.register(handler)
    real = ChannelClient(address, timeout_s=10)
    try:
        kind, connection = handler.events.get(timeout=5)
        assert kind == "attached"
        assert real.commands.get(timeout=5) == {"command": "state", "paused": False}
        yield Attached(server, handler, address, real, connection)
    finally:
        real.close()
        server.close()


def _until_closed(sock: socket.socket, within_s: float) -> tuple[bytes, float]:
    """Everything the peer sends until it closes the connection, and how long that took; fails if it is
    still open after ``within_s``."""
    start = time.monotonic()
    received = b""
    while time.monotonic() - start < within_s:
        sock.settimeout(max(0.01, within_s - (time.monotonic() - start)))
        try:
            data = sock.recv(65536)
        except TimeoutError:
            break
        except OSError:
            return received, time.monotonic() - start
        if not data:
            return received, time.monotonic() - start
        received += data
    pytest.fail(f"the worker kept the connection open for {within_s} s")


def _tls(address: ChannelAddress) -> ssl.SSLSocket:
    """A TLS client that trusts anything (it has no pin to check, and needs none to attack)."""
    raw = socket.create_connection((address.host, address.port), timeout=5)
    return client_context().wrap_socket(raw)


def _challenge(sock: ssl.SSLSocket) -> str:
    line = b""
    while not line.endswith(b"\n"):
        line += sock.recv(1)
    message = decode(line)
    assert message is not None and isinstance(message.get("challenge"), str)
    return str(message["challenge"])


@pytest.mark.parametrize(
    "hello",
    [
        lambda a: {"token": a.secret},  # the old protocol's hello, with the secret itself
        lambda a: {"task": a.task, "secret": a.secret},
        lambda a: {"task": a.task, "answer": answer(a.secret, "", a.fingerprint)},
    ],
    ids=["token-in-clear", "secret-in-clear", "answer-without-challenge"],
)
def test_plain_tcp_gets_nothing_and_displaces_no_task_even_with_the_secret(hello: Any) -> None:
    with attached() as a:
        sniffer = socket.create_connection((a.address.host, a.address.port), timeout=5)
        sniffer.sendall(encode(hello(a.address)) + encode({"event": "failed", "trace": "forged"}))
        received, _ = _until_closed(sniffer, 5)
        sniffer.close()
        assert b"command" not in received and b"challenge" not in received and b"{" not in received
        a.still_served()
        assert a.real.send({"event": "figures", "records": 1})
        assert a.handler.events.get(timeout=5)[1]["records"] == 1


def test_tls_without_the_secret_gets_a_challenge_and_nothing_else_and_displaces_no_task() -> None:
    with attached() as a:
        for guess in ("0" * 64, a.address.task, a.address.fingerprint):
            stranger = _tls(a.address)
            challenge = _challenge(stranger)
            stranger.sendall(
                encode({"task": a.address.task, "answer": answer(guess, challenge, a.address.fingerprint)})
            )
            stranger.sendall(encode({"event": "topics", "topics": ["forged"]}))
            received, _ = _until_closed(stranger, 5)
            stranger.close()
            assert received == b""
        a.still_served()
        assert a.server.refused.get("a wrong answer to the challenge") == 3


def test_an_answer_seen_once_does_not_open_a_second_connection() -> None:
    """Even a stranger who learnt one answer (it never crosses in clear) cannot use it: the next
    connection gets another challenge."""
    with attached() as a:
        first = _tls(a.address)
        seen = answer(a.address.secret, _challenge(first), a.address.fingerprint)
        first.close()
        replay = _tls(a.address)
        _challenge(replay)
        replay.sendall(encode({"task": a.address.task, "answer": seen}))
        assert _until_closed(replay, 5)[0] == b""
        replay.close()
        a.still_served()


def test_the_executor_side_sends_nothing_to_a_peer_whose_certificate_is_not_pinned() -> None:
    """An impostor listening where the worker was (another key): the attempt refuses it before it answers,
    and the impostor, although it knows the task's name and secret, never sees an answer."""
    with attached() as a:
        impostor = ChannelServer("127.0.0.1", "127.0.0.1")
        try:
            impostors_task = Recorder()
            fake = impostor.register(impostors_task)
            aimed = replace(a.address, port=fake.port, task=fake.task, secret=fake.secret)
            with pytest.raises(CertificateMismatch):
                ChannelClient(aimed, timeout_s=5)
            # The impostor's end of that one connection is over: its handshake thread counted why it closed
            # it and then gave its place back (pending 0). Only then is "no answer" evidence, not a guess.
            deadline = time.monotonic() + 5
            while (impostor.pending() or not impostor.refused) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert impostor.pending() == 0 and sum(impostor.refused.values()) == 1, impostor.refused
            (reason,) = impostor.refused
            assert reason.startswith("the handshake failed ("), reason  # the line it read ended: no answer
            assert impostors_task.events.empty(), impostors_task.events.get_nowait()
        finally:
            impostor.close()
        a.still_served()


def test_a_line_without_end_before_the_answer_is_cut_at_once_and_the_worker_serves_on() -> None:
    with attached() as a:  # the handshake deadline is 10 s: the cut below comes from the size alone
        flood = _tls(a.address)
        _challenge(flood)
        start = time.monotonic()
        try:
            for _ in range(64):
                flood.sendall(b"x" * 16384)  # 1 MiB, no newline
        except OSError:
            pass  # cut while still sending
        _until_closed(flood, 5)
        flood.close()
        assert time.monotonic() - start < 5
        assert a.server.refused.get("the handshake failed (FrameTooLong)") == 1
        a.still_served()
        late = ChannelClient(a.address, timeout_s=5)  # and a new attempt is still admitted
        assert a.handler.events.get(timeout=5)[0] == "attached"
        assert late.commands.get(timeout=5) == {"command": "state", "paused": False}
        late.close()


def test_plain_bytes_by_the_megabyte_are_cut_at_once() -> None:
    with attached() as a:
        junk = socket.create_connection((a.address.host, a.address.port), timeout=5)
        try:
            for _ in range(64):
                junk.sendall(b"x" * 16384)
        except OSError:
            pass
        _until_closed(junk, 5)
        junk.close()
        a.still_served()


def test_a_stranger_that_stops_mid_handshake_is_cut_at_the_deadline() -> None:
    with attached(handshake_s=1.0) as a:
        idle_tls = _tls(a.address)
        _challenge(idle_tls)
        idle_tls.sendall(b'{"task": "')  # and then nothing
        idle_tcp = socket.create_connection((a.address.host, a.address.port), timeout=5)  # no TLS at all
        for sock in (idle_tls, idle_tcp):
            _, took = _until_closed(sock, 5)
            assert took < 3
            sock.close()
        # The slot is given back right after the close the stranger saw.
        deadline = time.monotonic() + 2
        while a.server.pending() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert a.server.pending() == 0
        a.still_served()


def _handshake_threads() -> int:
    return sum(1 for t in threading.enumerate() if t.name == "task-channel-handshake")


def test_idle_connections_past_the_cap_are_closed_at_once_and_a_real_attempt_gets_in_after() -> None:
    with attached(handshake_s=3.0, max_pending=4) as a:
        before = _handshake_threads()
        idle = [socket.create_connection((a.address.host, a.address.port), timeout=5) for _ in range(4)]
        deadline = time.monotonic() + 5
        while a.server.pending() < 4 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert a.server.pending() == 4
        for _ in range(40):
            extra = socket.create_connection((a.address.host, a.address.port), timeout=5)
            _, took = _until_closed(extra, 2)
            assert took < 1
            extra.close()
        assert a.server.refused["too many connections in their handshake"] == 40
        assert _handshake_threads() - before <= 4
        # A real attempt that comes now waits out the flood (its tries are closed at once) and gets in.
        late: list[ChannelClient] = []
        trying = threading.Thread(target=lambda: late.append(ChannelClient(a.address, timeout_s=20)))
        trying.start()
        for sock in idle:
            _until_closed(sock, 6)  # the deadline cuts the idle ones
            sock.close()
        trying.join(20)
        assert late, "the real attempt never got in"
        assert a.handler.events.get(timeout=5)[0] == "attached"
        assert late[0].commands.get(timeout=5) == {"command": "state", "paused": False}
        late[0].close()
        assert a.handler.events.get(timeout=5)[0] == "detached"
        a.still_served()  # the first attempt's connection too


def test_an_authenticated_message_past_the_limit_ends_that_connection_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(task_channel, "MAX_MESSAGE_BYTES", 4096)
    with attached() as a:
        second = Recorder()
        other = a.server.register(second)
        noisy = ChannelClient(other, timeout_s=5)
        assert second.events.get(timeout=5)[0] == "attached"
        noisy.send({"event": "failed", "trace": "x" * 10000})
        assert second.events.get(timeout=5)[0] == "detached"
        assert noisy.commands.get(timeout=5) == {"command": "state", "paused": False}
        assert noisy.commands.get(timeout=5) is None
        a.still_served()


def test_a_hello_longer_than_the_limit_is_refused_even_with_the_right_answer() -> None:
    with attached() as a:
        padded = _tls(a.address)
        challenge = _challenge(padded)
        right = answer(a.address.secret, challenge, a.address.fingerprint)
        padded.sendall(encode({"task": a.address.task, "answer": right, "pad": "x" * MAX_HELLO_BYTES}))
        assert _until_closed(padded, 5)[0] == b""
        padded.close()
        a.still_served()
