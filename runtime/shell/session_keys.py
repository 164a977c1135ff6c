"""Session keys (KIP-507): how workers of a ``sessioned`` group sign the requests they send each other.

Why: internal endpoints (a follower's task configs, a zombie-fencing request) change cluster state; under
the ``sessioned`` protocol and later, only a worker that read the leader's current session key from the
config topic may call them.

As Apache Kafka Connect's DistributedHerder and InternalRequestSignature do:

* The leader writes a new ``session-key`` record when there is none, when the current one is
  ``inter.worker.key.ttl.ms`` old, or when it was made with another algorithm or size than this worker's
  ``inter.worker.key.generation.algorithm`` / ``inter.worker.key.size``. It checks on every herder tick,
  not only after a JoinGroup round: under ``group.protocol=connect`` a stable group may go without a round
  for as long as it runs, and its key must still expire.
* A request is signed with ``inter.worker.signature.algorithm`` (an HMAC over the body with the session
  key), named in ``X-Connect-Request-Signature-Algorithm``.
* A request is accepted when that header names one of ``inter.worker.verification.algorithms`` and the
  signature matches the current key under that algorithm: 400 when either header is missing or the
  algorithm is unknown or not accepted, 403 when the signature does not match.

The decisions (:func:`rotation_due`, :func:`sign`, :func:`verify`) are pure functions of the key record,
the settings and the clock; only :class:`KeyRotation` writes.
"""

from __future__ import annotations

import base64
import binascii
import hmac
import secrets
import time
from collections.abc import Mapping, Sequence

from kconnect.config.classes import MAC_ALGORITHMS, canonical_mac_algorithm
from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.errors import BadRequestError, ForbiddenError
from kconnect.runtime.group import membership, protocol
from kconnect.runtime.shell.stores import InternalTopics
from kconnect.runtime.storage.config_log import SessionKeyRecord
from kconnect.runtime.storage.kafka_log import KafkaLogError

log = logs.get(__name__)

SIGNATURE_HEADER = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"

#: The key size (bits) a JVM's KeyGenerator picks for each HMAC when ``inter.worker.key.size`` is unset
#: (SunJCE's defaults), so that a kconnect leader's keys are what a Java leader's would be.
DEFAULT_KEY_BITS: Mapping[str, int] = {
    "HmacMD5": 512,
    "HmacSHA1": 512,
    "HmacSHA224": 224,
    "HmacSHA256": 256,
    "HmacSHA384": 384,
    "HmacSHA512": 512,
    "HmacSHA3-224": 224,
    "HmacSHA3-256": 256,
    "HmacSHA3-384": 384,
    "HmacSHA3-512": 512,
}


# =============================================================================================== pure


def key_bytes(algorithm: str, size_bits: int | None) -> int:
    """Length of a generated key: ``inter.worker.key.size`` bits rounded up to whole bytes, as a JVM's
    KeyGenerator makes it, or the algorithm's default size."""
    bits = size_bits if size_bits is not None else DEFAULT_KEY_BITS.get(algorithm, 256)
    return (bits + 7) // 8


def expires_at_ms(current: SessionKeyRecord, ttl_ms: int) -> int:
    """When ``current`` is due for rotation (Java's keyExpiration)."""
    return current.creation_timestamp + ttl_ms


def rotation_due(
    current: SessionKeyRecord | None, now_ms: int, ttl_ms: int, algorithm: str, size_bytes: int
) -> str | None:
    """Why the leader must write a new key now, or None while the current one still serves.

    A key of another algorithm or length than this leader would generate is replaced at once (a
    configuration change on the leader, or a new leader configured differently), as Java's leader does.
    """
    if current is None:
        return "no session key yet"
    if expires_at_ms(current, ttl_ms) <= now_ms:
        return "the session key expired"
    try:
        length = len(current.secret())
    except (binascii.Error, ValueError):
        return "the session key does not decode"
    if current.algorithm != algorithm or length != size_bytes:
        return "the session key's algorithm or size differs from this worker's configuration"
    return None


def new_key(algorithm: str, size_bytes: int, now_ms: int) -> SessionKeyRecord:
    """A fresh random key of ``size_bytes``, stamped with ``now_ms``."""
    return SessionKeyRecord(
        key=base64.b64encode(secrets.token_bytes(size_bytes)).decode(),
        algorithm=algorithm,
        creation_timestamp=now_ms,
    )


def _mac(secret: bytes, algorithm: str, body: bytes) -> bytes:
    return hmac.new(secret, body, MAC_ALGORITHMS[algorithm]).digest()


def sign(session: SessionKeyRecord | None, body: bytes, algorithm: str = "HmacSHA256") -> dict[str, str]:
    """The headers that sign ``body`` with the session key under ``algorithm`` (none while no key is
    known: the receiver then answers 400, as Java's does to an unsigned request)."""
    if session is None:
        return {}
    digest = _mac(session.secret(), algorithm, body)
    return {SIGNATURE_HEADER: base64.b64encode(digest).decode(), SIGNATURE_ALGORITHM_HEADER: algorithm}


def _header(headers: Mapping[str, str], name: str) -> str | None:
    wanted = name.lower()
    for key, value in headers.items():
        if key.lower() == wanted:
            return value
    return None


def verify(
    group_protocol: str | None,
    session: SessionKeyRecord | None,
    body: bytes,
    headers: Mapping[str, str],
    accepted: Sequence[str] = ("HmacSHA256",),
) -> None:
    """Internal requests under ``sessioned`` or later must carry a signature made with the current session
    key under one of the ``accepted`` algorithms (``inter.worker.verification.algorithms``).

    Raises BadRequestError (no signature, an unknown or refused algorithm) or ForbiddenError (a wrong
    signature), with Java's messages.
    """
    if group_protocol is None or protocol.version_for_protocol(group_protocol) < 2:
        return
    signature = _header(headers, SIGNATURE_HEADER)
    algorithm = _header(headers, SIGNATURE_ALGORITHM_HEADER)
    if not signature or not algorithm:
        raise BadRequestError("Internal request missing required signature")
    known = canonical_mac_algorithm(algorithm)
    if known is None:
        raise BadRequestError(f"Algorithm {algorithm} not available")
    if algorithm not in accepted:
        raise BadRequestError(
            f"This worker does not support the '{algorithm}' key signing algorithm used by other workers. "
            f"This worker is currently configured to use: [{', '.join(accepted)}]. "
            "Check that all workers' configuration files permit the same set of signature algorithms, "
            "and correct any misconfigured worker and restart it."
        )
    try:
        given = base64.b64decode(signature + "=" * (-len(signature) % 4), validate=True)
    except (binascii.Error, ValueError):
        given = b""
    if session is None or not hmac.compare_digest(_mac(session.secret(), known, body), given):
        raise ForbiddenError("Internal request contained invalid signature.")


# ============================================================================================== shell


class KeyRotation:
    """The leader's side: write a new session key whenever :func:`rotation_due` says so.

    Called on every herder tick. After a write it waits until the config topic has been read past that
    record before it judges again (Java sets the expiry to "never" until its own key is read back), so a
    tick that comes before the read does not write a second key. A write that fails is tried again after
    an exponential back-off, so a leader that lost its broker does not retry on every tick.
    """

    def __init__(self, stores: InternalTopics, config: WorkerConfig) -> None:
        self._stores = stores
        self._config = config
        self._size = key_bytes(config.inter_worker_key_generation_algorithm, config.inter_worker_key_size)
        self._written_offset: int | None = None
        self._failures = 0
        self._retry_at = 0.0

    def tick(self, leader: bool, group_protocol: str | None, now_ms: int | None = None) -> bool:
        """Rotate if this worker leads a ``sessioned`` (or later) group and the key is due; True if it
        wrote one."""
        if not leader or group_protocol is None or protocol.version_for_protocol(group_protocol) < 2:
            return False
        if self._written_offset is not None and self._stores.config_offset() <= self._written_offset:
            return False
        if time.monotonic() < self._retry_at:
            return False
        cfg = self._config
        now = int(time.time() * 1000) if now_ms is None else now_ms
        algorithm = cfg.inter_worker_key_generation_algorithm
        reason = rotation_due(
            self._stores.snapshot().session_key, now, cfg.inter_worker_key_ttl_ms, algorithm, self._size
        )
        if reason is None:
            return False
        try:
            self._written_offset = self._stores.append_config(new_key(algorithm, self._size, now))
        except KafkaLogError as exc:
            wait_ms = membership.backoff_ms(self._failures, cfg.retry_backoff_ms, cfg.retry_backoff_max_ms)
            self._failures += 1
            self._retry_at = time.monotonic() + wait_ms / 1000
            log.warning("could not write a new session key", error=str(exc), retry_in_ms=wait_ms)
            return False
        self._failures = 0
        log.info("leader wrote a new session key", reason=reason, algorithm=algorithm, created_ms=now)
        return True
