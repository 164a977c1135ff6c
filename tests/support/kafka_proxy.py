"""A TCP proxy in front of a Kafka listener that can hold one client's connections (issue 29's stall test).

Why: a consumer can stop fetching while its broker, its group and every status look fine (a connection
whose requests go unanswered, a fetcher stuck on a leader it no longer should ask). To see the runtime
notice and re-establish such a reading, a test needs to make one client's fetching stop by its own means,
not through a switch in the product. The proxy reads each connection's first request header for the
client's ``client.id`` (Kafka's request header: api_key, api_version, correlation_id, then client_id as a
nullable INT16-length string in every header version) and, once :meth:`hold` is called, stops passing the
requests of the connections open *then* whose client id matches: they wait, unanswered, as to a broker
that hung. Connections opened later pass, so a client that reconnects afresh reads again.

The broker must advertise the proxy's address on the listener the proxy forwards to (see
``test_sink_stall.py``), so that clients which bootstrap through it stay on it.
"""

from __future__ import annotations

import contextlib
import re
import socket
import struct
import threading


class _Link:
    """One client connection and its broker connection, with the client's id once its first request came."""

    def __init__(self, client: socket.socket, broker: socket.socket) -> None:
        self.client = client
        self.broker = broker
        self.client_id: str | None = None
        #: Requests passed to the broker, by API key (Fetch is 1).
        self.passed: dict[int, int] = {}
        self.held = threading.Event()
        self.released = threading.Event()
        self.released.set()

    def close(self) -> None:
        for s in (self.client, self.broker):
            with contextlib.suppress(OSError):
                s.close()


class KafkaProxy:
    """Forwards ``127.0.0.1:port`` to ``target``; :meth:`hold` freezes matching clients' open connections."""

    def __init__(self, target: tuple[str, int], port: int) -> None:
        self.target = target
        self.port = port
        self._links: list[_Link] = []
        self._lock = threading.Lock()
        self._server = socket.create_server(("127.0.0.1", port))
        self._closed = False
        threading.Thread(target=self._accept, daemon=True, name="kafka-proxy").start()

    def hold(self, client_id: str) -> int:
        """Hold the requests of every open connection whose client id matches ``client_id`` (a regular
        expression, matched whole); returns how many connections that holds."""
        pattern = re.compile(client_id)
        n = 0
        with self._lock:
            for link in self._links:
                if link.client_id is not None and pattern.fullmatch(link.client_id):
                    link.released.clear()
                    link.held.set()
                    n += 1
        return n

    def links(self) -> list[tuple[str | None, bool, bool, dict[int, int]]]:
        """Per connection: its client id, whether it is open, whether it is held, and requests passed."""
        with self._lock:
            return [
                (link.client_id, link.client.fileno() >= 0, link.held.is_set(), dict(link.passed))
                for link in self._links
            ]

    def client_ids(self) -> list[str]:
        with self._lock:
            return sorted({link.client_id for link in self._links if link.client_id})

    def release(self) -> None:
        with self._lock:
            for link in self._links:
                link.held.clear()
                link.released.set()

    def close(self) -> None:
        self._closed = True
        self.release()
        with contextlib.suppress(OSError):
            self._server.close()
        with self._lock:
            for link in self._links:
                link.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            try:
                broker = socket.create_connection(self.target, timeout=10)
                broker.settimeout(None)
            except OSError:
                client.close()
                continue
            link = _Link(client, broker)
            with self._lock:
                self._links.append(link)
            threading.Thread(target=self._requests, args=(link,), daemon=True).start()
            threading.Thread(target=self._responses, args=(link,), daemon=True).start()

    def _requests(self, link: _Link) -> None:
        """Client to broker, one whole request at a time, so that a hold falls between requests."""
        try:
            while True:
                head = _read(link.client, 4)
                (size,) = struct.unpack(">i", head)
                body = _read(link.client, size)
                if link.client_id is None and len(body) >= 10:
                    (length,) = struct.unpack(">h", body[8:10])
                    link.client_id = body[10 : 10 + length].decode(errors="replace") if length >= 0 else ""
                link.released.wait()
                link.broker.sendall(head + body)
                (api_key,) = struct.unpack(">h", body[:2])
                link.passed[api_key] = link.passed.get(api_key, 0) + 1
        except OSError:
            link.close()

    def _responses(self, link: _Link) -> None:
        try:
            while True:
                data = link.broker.recv(65536)
                if not data:
                    break
                link.client.sendall(data)
        except OSError:
            pass
        link.close()


def _read(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise OSError("closed")
        out += chunk
    return bytes(out)
