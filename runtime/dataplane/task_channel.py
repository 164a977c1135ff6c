"""The line between a worker and the tasks it runs inside Spark jobs on executors.

Why a channel of its own: a source task that runs as a Spark job (``spark_source``) lives in a Python
worker on an executor, possibly on another machine, while its status, its pause and resume, its stop
within ``task.shutdown.graceful.timeout.ms`` and the worker's metrics belong to the worker that owns the
task. Spark has no way to talk to a running task (accumulators and results arrive only when it ends), so
the executor side connects back to the worker, as Spark's own executors connect back to the driver: one
TCP connection per running task, newline-delimited JSON both ways. The worker listens on one port for all
its tasks; a task's connection is accepted only with the random token it was given with its job, so
another process that finds the port cannot impersonate or steer a task. When an executor dies its
connection ends, Spark runs the job's task again elsewhere, and the new attempt connects with the same
token.

Messages from a task: ``{"event": "running"}``, ``{"event": "failed", "trace": ...}``,
``{"event": "figures", "records": n, "offset_commits": n, "offset_commit_ms_total": x}``,
``{"event": "topics", "topics": [...]}``. To a task: ``{"command": "state", "paused": bool}`` and
``{"command": "stop", "timeout_s": x}``.
"""

from __future__ import annotations

import contextlib
import json
import queue
import secrets
import socket
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from kconnect.runtime import logs

log = logs.get(__name__)

Message = dict[str, Any]


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


def messages(reader: Iterable[bytes]) -> Iterator[Message]:
    """The messages of a connection's lines, until it ends; a line that is no message is skipped."""
    for line in reader:
        message = decode(line)
        if message is not None:
            yield message


@dataclass(frozen=True)
class ChannelAddress:
    """Where a task's executor side connects, and the token that identifies the task there."""

    host: str
    port: int
    token: str


class Connection:
    """One task attempt's connection (the worker's side; the executor's is a :class:`ChannelClient`):
    ``send`` is safe from any thread."""

    def __init__(self, sock: socket.socket) -> None:
        self._sock = sock
        self._lock = threading.Lock()

    def send(self, message: Message) -> bool:
        """False if the connection is gone (the attempt ended or its executor died)."""
        try:
            with self._lock:
                self._sock.sendall(encode(message))
            return True
        except OSError:
            return False

    def close(self) -> None:
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


class ChannelServer:
    """The worker's listening end, shared by all its tasks; started on the first ``register``."""

    def __init__(self, bind_host: str, advertised_host: str) -> None:
        self._bind_host = bind_host
        self._advertised_host = advertised_host
        self._lock = threading.Lock()
        self._handlers: dict[str, TaskHandler] = {}
        self._sock: socket.socket | None = None

    def register(self, handler: TaskHandler) -> ChannelAddress:
        """A fresh token for one task; its attempts connect to the returned address with it."""
        with self._lock:
            if self._sock is None:
                self._sock = socket.create_server((self._bind_host, 0))
                accept = threading.Thread(target=self._accept, args=(self._sock,), daemon=True)
                accept.name = "task-channel"
                accept.start()
            token = secrets.token_hex(16)
            self._handlers[token] = handler
            port = self._sock.getsockname()[1]
        return ChannelAddress(self._advertised_host, port, token)

    def unregister(self, address: ChannelAddress) -> None:
        with self._lock:
            self._handlers.pop(address.token, None)

    def close(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
            self._handlers.clear()
        if sock is not None:
            sock.close()

    def _accept(self, sock: socket.socket) -> None:
        while True:
            try:
                conn, _ = sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), name="task-channel-conn", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        reader = sock.makefile("rb")
        connection = Connection(sock)
        handler: TaskHandler | None = None
        try:
            hello = decode(reader.readline())
            with self._lock:
                handler = self._handlers.get(str((hello or {}).get("token")))
            if handler is None:
                log.warning("task channel: a connection without a known token was closed")
                return
            handler.attached(connection)
            for message in messages(reader):
                handler.message(connection, message)
        except OSError:
            pass
        finally:
            if handler is not None:
                handler.detached(connection)
            reader.close()
            connection.close()


class ChannelClient(Connection):
    """The executor's end for one task attempt: events out, commands queued for the attempt's loop."""

    def __init__(self, address: ChannelAddress, timeout_s: float = 30.0) -> None:
        sock = socket.create_connection((address.host, address.port), timeout=timeout_s)
        sock.settimeout(None)
        super().__init__(sock)
        self.commands: queue.Queue[Message | None] = queue.Queue()  # None: the worker's end closed
        self.send({"token": address.token})
        threading.Thread(target=self._read, name="task-channel-client", daemon=True).start()

    def _read(self) -> None:
        try:
            with self._sock.makefile("rb") as reader:
                for message in messages(reader):
                    self.commands.put(message)
        except OSError:
            pass
        self.commands.put(None)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        super().close()
