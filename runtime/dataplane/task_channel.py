"""The line between a worker and the tasks it runs inside Spark jobs on executors.

Why a channel of its own: a source task that runs as a Spark job (``spark_source``) lives in a Python
worker on an executor, possibly on another machine, while its status, its pause and resume, its stop
within ``task.shutdown.graceful.timeout.ms`` and the worker's metrics belong to the worker that owns the
task. Spark has no way to talk to a running task (accumulators and results arrive only when it ends), so
the executor side connects back to the worker, as Spark's own executors connect back to the driver: one
connection per running task attempt, newline-delimited JSON both ways. The worker listens on one port for
all its tasks. When an executor dies its connection ends, Spark runs the job's task again elsewhere, and the
new attempt connects with the same credentials.

Why TLS and a challenge: with a cluster master the port is reachable from the network, and whoever holds
a task's connection decides what the worker reports for it (status, metrics, topics) and can displace the
real attempt. So (issue 23):

- the worker makes a key and a self-signed certificate when it starts (:class:`WorkerCertificate`) and
  speaks TLS only; the job carries the certificate's SHA-256 fingerprint and the executor side refuses a
  peer whose certificate is another (the pin replaces a CA: nobody else can have signed the worker's
  certificate, and nobody else holds its key);
- each task gets a random secret with its job, which never crosses the channel: the worker sends a fresh
  nonce, and the attempt answers with an HMAC of the nonce and the certificate's fingerprint under the
  secret (:func:`answer`). A recorded answer is worthless for the next nonce, and one relayed from another
  TLS session names the wrong certificate;
- until a connection has answered, nothing it sends is trusted with memory or time: its lines are at most
  ``MAX_HELLO_BYTES``, TLS and the answer must be done within the handshake deadline, and at most
  ``max_pending`` connections may be in that state at once (past it a new one is closed at once), so a
  stranger costs at most a bounded thread for a bounded time.

The secret and fingerprint travel inside the Spark job, over Spark's own RPC: ``spark_executor`` warns at
start-up when a cluster master runs without ``spark.authenticate`` and ``spark.network.crypto.enabled``.

Messages from a task: ``{"event": "running"}``, ``{"event": "failed", "trace": ...}``,
``{"event": "figures", "records": n, "offset_commits": n, "offset_commit_ms_total": x}``,
``{"event": "topics", "topics": [...]}``. To a task: ``{"command": "state", "paused": bool}`` and
``{"command": "stop", "timeout_s": x}``. Before them, in the handshake: ``{"challenge": nonce}`` from the
worker, ``{"task": key, "answer": hmac}`` from the attempt.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import hmac
import json
import os
import queue
import secrets
import select
import socket
import ssl
import tempfile
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from kconnect.runtime import logs

log = logs.get(__name__)

Message = dict[str, Any]

#: The longest line a connection may send before it has answered its challenge (the answer is about 110
#: bytes): a stranger cannot make the worker buffer more than this.
MAX_HELLO_BYTES = 512
#: The longest message an authenticated attempt may send (a failed task's trace, its plugin metrics).
MAX_MESSAGE_BYTES = 8 * 1024 * 1024
#: The time a new connection has for TLS and its answer, in all; past it, it is closed.
HANDSHAKE_S = 10.0
#: Connections in their handshake at once; past this a new one is closed as soon as it is accepted.
MAX_PENDING = 32
#: How long one send may wait on a peer that does not read before the connection counts as gone.
SEND_TIMEOUT_S = 30.0
#: A peer that stops answering (its machine died, the network between is cut: no FIN or RST ever comes)
#: counts as gone after about this long: TCP keepalive probes from the first idle second on both ends, and
#: unacknowledged data given up after it, so a dead executor's tasks start elsewhere in seconds.
DEAD_PEER_S = 10.0
#: What the answer's HMAC covers besides the nonce and the fingerprint: a version, so that an answer can
#: never be mistaken for an HMAC made for some other purpose with the same secret.
_PROTOCOL = b"kconnect-task-channel/1"
#: How often a kind of refused connection is logged at most (a flood must not flood the log too).
_COMPLAIN_EVERY_S = 60.0


def keep_alive(sock: socket.socket, dead_after_s: float = DEAD_PEER_S) -> None:
    """Make a silent peer's end show within about ``dead_after_s``: TCP keepalive (idle 2 s, then a probe
    every 2 s) and ``TCP_USER_TIMEOUT`` for data it never acknowledges. Options the platform lacks are
    skipped (Linux has them all)."""
    interval = 2
    options = [
        (socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPIDLE", None), interval),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPINTVL", None), interval),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_KEEPCNT", None), max(1, int(dead_after_s / interval) - 1)),
        (socket.IPPROTO_TCP, getattr(socket, "TCP_USER_TIMEOUT", None), int(dead_after_s * 1000)),
    ]
    for level, option, value in options:
        if option is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(level, option, value)


def encode(message: Message) -> bytes:
    """One message as one line."""
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


def decode(line: bytes) -> Message | None:
    """One line as a message; None for anything that is not a JSON object (skipped, never fatal)."""
    try:
        message = json.loads(line)
    except ValueError:
        return None
    return message if isinstance(message, dict) else None


def messages(lines: Iterable[bytes]) -> Iterator[Message]:
    """The messages of a connection's lines, until it ends; a line that is no message is skipped."""
    for line in lines:
        message = decode(line)
        if message is not None:
            yield message


class ChannelError(Exception):
    """The peer broke the channel's rules (a line too long, no challenge, another certificate)."""


class FrameTooLong(ChannelError):
    """A line longer than the connection may send now."""


class LineFramer:
    """Bytes as they arrive, cut into lines of at most ``limit`` bytes (newline excluded).

    Why not ``readline()``: it buffers a line of any length, so a peer that never sends a newline grows the
    reader's memory without end. Here a line (or the unfinished rest) longer than ``limit`` raises
    :class:`FrameTooLong` as soon as it is seen, so at most ``limit`` plus one read is ever held. ``limit``
    may be raised once the peer is trusted with more (after its answer).
    """

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._buffer = bytearray()

    def feed(self, data: bytes) -> list[bytes]:
        """The lines ``data`` completes, in order."""
        self._buffer += data
        lines: list[bytes] = []
        while True:
            end = self._buffer.find(b"\n")
            if end < 0:
                break
            if end > self.limit:
                raise FrameTooLong(f"a line of more than {self.limit} bytes")
            lines.append(bytes(self._buffer[:end]))
            del self._buffer[: end + 1]
        if len(self._buffer) > self.limit:
            raise FrameTooLong(f"more than {self.limit} bytes without a newline")
        return lines


# ------------------------------------------------------------------------------ challenge and response


def fingerprint(der: bytes) -> str:
    """A certificate's pin: the SHA-256 of its DER form, in hex."""
    return hashlib.sha256(der).hexdigest()


def answer(secret: str, challenge: str, certificate_fingerprint: str) -> str:
    """What an attempt that holds ``secret`` answers to ``challenge`` on a connection to the certificate
    pinned as ``certificate_fingerprint``: HMAC-SHA256 under the secret, in hex. The fingerprint is in it
    so that an answer made for one TLS peer is no good to another."""
    text = b"\0".join((_PROTOCOL, challenge.encode(), certificate_fingerprint.encode()))
    return hmac.new(secret.encode(), text, hashlib.sha256).hexdigest()


def answer_is_right(secret: str, challenge: str, certificate_fingerprint: str, given: object) -> bool:
    """Whether ``given`` (whatever the peer sent) is the answer; compared in constant time."""
    if not isinstance(given, str) or not given.isascii():
        return False
    expected = answer(secret, challenge, certificate_fingerprint)
    return hmac.compare_digest(expected.encode(), given.encode())


# ---------------------------------------------------------------------------------------- certificate


@dataclass(frozen=True)
class WorkerCertificate:
    """The worker's TLS identity for its task channel, made when it starts and never written anywhere
    but a private temporary file while OpenSSL loads it.

    Why self-signed: the executor side trusts exactly this certificate (its fingerprint comes with the
    job), not a CA, so no CA is needed and no operator has to issue one. Its validity dates are not what
    is trusted (the client does not check them; the pin is the check), so they are wide.
    """

    certificate_pem: bytes
    key_pem: bytes = field(repr=False)
    fingerprint: str

    @classmethod
    def generate(cls) -> WorkerCertificate:
        key = ec.generate_private_key(ec.SECP256R1())
        name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "kconnect task channel")])
        now = datetime.datetime.now(datetime.UTC)
        certificate = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=3650))
            .sign(key, hashes.SHA256())
        )
        key_pem = key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
        return cls(
            certificate.public_bytes(serialization.Encoding.PEM),
            key_pem,
            fingerprint(certificate.public_bytes(serialization.Encoding.DER)),
        )

    def server_context(self) -> ssl.SSLContext:
        """A TLS server context with this identity. ``ssl`` loads keys from files only: the file lives in
        a directory of its own (mode 0700, the file 0600) for the moment of loading."""
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        with tempfile.TemporaryDirectory(prefix="kconnect-channel-") as directory:
            path = os.path.join(directory, "channel.pem")
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(self.key_pem + self.certificate_pem)
            context.load_cert_chain(path)
        return context


def client_context() -> ssl.SSLContext:
    """The executor side's TLS context: no CA and no host name (the worker's certificate is self-signed
    and its address may be an IP); the peer's certificate is checked against the pin right after the
    handshake instead (:func:`_connect_once`), before anything is sent."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context


@dataclass(frozen=True)
class ChannelAddress:
    """Where a task's executor side connects, and how it proves it is the task: ``task`` names it (not a
    secret), ``secret`` answers the challenge, ``fingerprint`` pins the worker's certificate."""

    host: str
    port: int
    task: str
    secret: str = field(repr=False)
    fingerprint: str


def _read_line(sock: ssl.SSLSocket, framer: LineFramer, deadline: float) -> bytes:
    """The next line, read before ``deadline`` (monotonic) or TimeoutError; longer than the framer
    allows, FrameTooLong; the peer gone, ChannelError. Bytes after the line stay in the framer."""
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError("the handshake's deadline passed")
        sock.settimeout(remaining)
        data = sock.recv(4096)
        if not data:
            raise ChannelError("the connection ended during the handshake")
        lines = framer.feed(data)
        if lines:
            if len(lines) > 1:
                raise ChannelError("more than one line during the handshake")
            return lines[0]


class Connection:
    """One attempt's authenticated TLS connection, either end (the executor's is a :class:`ChannelClient`):
    ``send`` is safe from any thread while one thread reads ``lines``.

    Why a lock around reads too: an OpenSSL connection must not be used by two threads at once, so the
    reader waits for data with ``poll`` outside the lock and takes it only for a read that cannot block.
    """

    def __init__(self, sock: ssl.SSLSocket, framer: LineFramer) -> None:
        self._sock = sock
        self._framer = framer
        self._lock = threading.Lock()
        self._closed = False
        sock.settimeout(SEND_TIMEOUT_S)

    def send(self, message: Message) -> bool:
        """False if the connection is gone (the attempt ended or its executor died)."""
        try:
            with self._lock:
                if self._closed:
                    return False
                self._sock.sendall(encode(message))
            return True
        except (OSError, ValueError):
            return False

    def lines(self) -> Iterator[bytes]:
        """The peer's lines until the connection ends or is closed here; a line longer than the framer's
        limit raises FrameTooLong, a broken connection OSError."""
        poller = select.poll()
        with self._lock:  # closed already (the fd is gone): nothing to read
            if self._closed:
                return
            poller.register(self._sock.fileno(), select.POLLIN)
        while True:
            with self._lock:
                if self._closed:
                    return
                buffered = self._sock.pending() > 0
            if not buffered and not poller.poll(1000):
                continue
            with self._lock:
                if self._closed:
                    return
                self._sock.settimeout(0.0)
                try:
                    data = self._sock.recv(65536)
                except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
                    continue  # part of a TLS record, or a session ticket: nothing to hand out yet
                finally:
                    self._sock.settimeout(SEND_TIMEOUT_S)
            if not data:
                return
            yield from self._framer.feed(data)

    def close(self) -> None:
        """End the connection; a thread in ``lines`` sees the end within a second."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with contextlib.suppress(OSError):
                self._sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                self._sock.close()


class TaskHandler:
    """What the worker side of one task does with its attempts' connections (``spark_source``)."""

    def attached(self, connection: Connection) -> None:
        """An attempt connected: tell it what it must do now (its state, or stop)."""

    def message(self, connection: Connection, message: Message) -> None:
        """An event from the attempt."""

    def detached(self, connection: Connection) -> None:
        """The attempt's connection ended (the task returned, or its executor died)."""


@dataclass(frozen=True)
class _Task:
    handler: TaskHandler
    secret: str = field(repr=False)


class ChannelServer:
    """The worker's listening end, shared by all its tasks: its certificate is made here (worker start),
    it listens from the first ``register`` on."""

    def __init__(
        self,
        bind_host: str,
        advertised_host: str,
        *,
        handshake_s: float = HANDSHAKE_S,
        max_pending: int = MAX_PENDING,
    ) -> None:
        self._bind_host = bind_host
        self._advertised_host = advertised_host
        self._handshake_s = handshake_s
        self._max_pending = max_pending
        self.certificate = WorkerCertificate.generate()
        self._context = self.certificate.server_context()
        self._lock = threading.Lock()
        self._tasks: dict[str, _Task] = {}
        self._sock: socket.socket | None = None
        #: Connections accepted and not yet authenticated or closed (at most ``max_pending``).
        self._pending = 0
        #: Connections closed without being served, by reason (for the tests and the log).
        self.refused: dict[str, int] = {}
        self._complained: dict[str, float] = {}

    def register(self, handler: TaskHandler) -> ChannelAddress:
        """A fresh name and secret for one task; its attempts connect to the returned address with them."""
        with self._lock:
            if self._sock is None:
                self._sock = socket.create_server((self._bind_host, 0))
                accept = threading.Thread(target=self._accept, args=(self._sock,), daemon=True)
                accept.name = "task-channel"
                accept.start()
            task = secrets.token_hex(8)
            secret = secrets.token_hex(32)
            self._tasks[task] = _Task(handler, secret)
            port = self._sock.getsockname()[1]
        return ChannelAddress(self._advertised_host, port, task, secret, self.certificate.fingerprint)

    def unregister(self, address: ChannelAddress) -> None:
        with self._lock:
            self._tasks.pop(address.task, None)

    def close(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
            self._tasks.clear()
        if sock is not None:
            sock.close()

    def pending(self) -> int:
        """Connections in their handshake now."""
        with self._lock:
            return self._pending

    def _refuse(self, reason: str, **fields: Any) -> None:
        """Count a refused connection; log it at most once per ``_COMPLAIN_EVERY_S`` per reason."""
        now = time.monotonic()
        with self._lock:
            self.refused[reason] = self.refused.get(reason, 0) + 1
            count = self.refused[reason]
            due = now - self._complained.get(reason, -_COMPLAIN_EVERY_S) >= _COMPLAIN_EVERY_S
            if due:
                self._complained[reason] = now
        if due:
            log.warning(
                "task channel: a connection was closed unserved", reason=reason, so_far=count, **fields
            )

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, peer = sock.accept()
            except OSError:
                with self._lock:
                    if self._sock is not sock:
                        return  # closed
                time.sleep(0.1)  # out of file descriptors, say: the listener must outlive it
                continue
            with self._lock:
                admitted = self._pending < self._max_pending
                if admitted:
                    self._pending += 1
            if not admitted:
                # Counted before the close, so whoever saw the close also sees it counted.
                self._refuse("too many connections in their handshake", peer=str(peer[0]))
                conn.close()
                continue
            try:
                threading.Thread(
                    target=self._admit, args=(conn, peer), name="task-channel-handshake", daemon=True
                ).start()
            except RuntimeError:  # no thread to be had
                with self._lock:
                    self._pending -= 1
                conn.close()

    def _admit(self, conn: socket.socket, peer: Any) -> None:
        """Admit the connection (:meth:`_handshake`), then serve the attempt on this thread."""
        try:
            admitted = self._handshake(conn, str(peer[0]))
        finally:
            with self._lock:
                self._pending -= 1
        if admitted is not None:
            self._serve(*admitted)

    def _handshake(self, conn: socket.socket, peer: str) -> tuple[TaskHandler, Connection] | None:
        """TLS, the challenge and its answer, all within the handshake deadline: the task's handler and
        the connection, or None for a connection that did not answer right (closed, unserved)."""
        deadline = time.monotonic() + self._handshake_s
        tls: ssl.SSLSocket | None = None
        try:
            keep_alive(conn)
            conn.settimeout(self._handshake_s)
            tls = self._context.wrap_socket(conn, server_side=True, do_handshake_on_connect=False)
            tls.do_handshake()  # bounded by the socket's timeout as a whole
            challenge = secrets.token_hex(32)
            tls.settimeout(max(0.001, deadline - time.monotonic()))
            tls.sendall(encode({"challenge": challenge}))
            framer = LineFramer(MAX_HELLO_BYTES)
            hello = decode(_read_line(tls, framer, deadline)) or {}
            with self._lock:
                task = self._tasks.get(str(hello.get("task")))
            if task is not None and answer_is_right(
                task.secret, challenge, self.certificate.fingerprint, hello.get("answer")
            ):
                framer.limit = MAX_MESSAGE_BYTES
                return task.handler, Connection(tls, framer)
            self._refuse("a wrong answer to the challenge", peer=peer)
        except (OSError, ChannelError) as exc:
            self._refuse(f"the handshake failed ({type(exc).__name__})", peer=peer)
        with contextlib.suppress(OSError):
            (tls or conn).close()
        return None

    def _serve(self, handler: TaskHandler, connection: Connection) -> None:
        handler.attached(connection)
        try:
            for message in messages(connection.lines()):
                handler.message(connection, message)
        except FrameTooLong as exc:
            log.warning("task channel: an attempt's message was too long; connection closed", error=str(exc))
        except (OSError, ChannelError):
            pass
        finally:
            handler.detached(connection)
            connection.close()


class CertificateMismatch(ChannelError):
    """The peer's certificate is not the pinned one: nothing was sent to it."""


#: Between two tries of a client whose connection was closed before its handshake was done.
_RETRY_S = 0.5


def _connect_once(
    address: ChannelAddress, context: ssl.SSLContext, deadline: float
) -> tuple[ssl.SSLSocket, LineFramer]:
    """One try: TLS, the pin checked before anything is sent, the challenge answered. The socket and the
    framer (which may hold the start of the worker's first command)."""
    remaining = max(0.001, deadline - time.monotonic())
    raw = socket.create_connection((address.host, address.port), timeout=remaining)
    try:
        keep_alive(raw)
        raw.settimeout(max(0.001, deadline - time.monotonic()))
        tls = context.wrap_socket(raw, do_handshake_on_connect=False)
        tls.do_handshake()
        der = tls.getpeercert(binary_form=True)
        if der is None or not hmac.compare_digest(fingerprint(der), address.fingerprint):
            raise CertificateMismatch("the task channel's peer is not the worker whose certificate is pinned")
        framer = LineFramer(MAX_HELLO_BYTES)
        challenge = (decode(_read_line(tls, framer, deadline)) or {}).get("challenge")
        if not isinstance(challenge, str):
            raise ChannelError("the worker sent no challenge")
        tls.sendall(
            encode({"task": address.task, "answer": answer(address.secret, challenge, address.fingerprint)})
        )
        framer.limit = MAX_MESSAGE_BYTES
        return tls, framer
    except BaseException:
        raw.close()
        raise


class ChannelClient(Connection):
    """The executor's end for one task attempt: events out, commands queued for the attempt's loop.

    A connection closed before its handshake was done (the worker at its limit of connections in their
    handshake: a stranger's flood) is tried again until ``timeout_s``: a flood delays a task rather than
    failing it. Another certificate fails at once. A wrong answer is not retried either: the worker
    closes the connection, and ``commands`` yields None.
    """

    def __init__(self, address: ChannelAddress, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        context = client_context()
        while True:
            try:
                sock, framer = _connect_once(address, context, deadline)
                break
            except CertificateMismatch:
                raise
            except (OSError, ChannelError):
                if time.monotonic() + _RETRY_S >= deadline:
                    raise
                time.sleep(_RETRY_S)
        super().__init__(sock, framer)
        self.commands: queue.Queue[Message | None] = queue.Queue()  # None: the worker's end closed
        threading.Thread(target=self._read, name="task-channel-client", daemon=True).start()

    def _read(self) -> None:
        try:
            for message in messages(self.lines()):
                self.commands.put(message)
        except (OSError, ChannelError):
            pass
        self.commands.put(None)
