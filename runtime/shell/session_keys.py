"""Session keys (KIP-507): how workers of a ``sessioned`` group sign the requests they send each other.

Why: internal endpoints (a follower's task configs, a zombie-fencing request) change cluster state; under
the ``sessioned`` protocol and later, only a worker that read the leader's current session key from the
config topic may call them. The leader writes a new key when there is none or it is older than
``inter.worker.key.ttl.ms``; every request is signed with HMAC-SHA256 over its body.

The decisions are pure functions of the key record and the clock; only :func:`ensure` writes.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Mapping

from kconnect.config.worker import WorkerConfig
from kconnect.runtime import logs
from kconnect.runtime.errors import BadRequestError, ForbiddenError
from kconnect.runtime.group import protocol
from kconnect.runtime.shell.stores import InternalTopics
from kconnect.runtime.storage.config_log import SessionKeyRecord

log = logs.get(__name__)

SIGNATURE_HEADER = "X-Connect-Authorization"
SIGNATURE_ALGORITHM_HEADER = "X-Connect-Request-Signature-Algorithm"


def needs_new_key(current: SessionKeyRecord | None, ttl_ms: int, now_ms: int) -> bool:
    """A leader writes a key when there is none or the current one has outlived its TTL."""
    return current is None or current.creation_timestamp + ttl_ms <= now_ms


def new_key(size_bits: int | None, algorithm: str, now_ms: int) -> SessionKeyRecord:
    """A fresh random key (``inter.worker.key.size`` bits, 256 when unset), stamped with ``now_ms``."""
    size = (size_bits or 256) // 8
    return SessionKeyRecord(
        key=base64.b64encode(secrets.token_bytes(size)).decode(),
        algorithm=algorithm,
        creation_timestamp=now_ms,
    )


def ensure(stores: InternalTopics, config: WorkerConfig) -> None:
    """Leader only, after a rebalance under ``sessioned`` or later: write a new key if one is due."""
    now_ms = int(time.time() * 1000)
    if not needs_new_key(stores.snapshot().session_key, config.inter_worker_key_ttl_ms, now_ms):
        return
    stores.append_config(
        new_key(config.inter_worker_key_size, config.inter_worker_key_generation_algorithm, now_ms)
    )
    log.info("leader wrote a new session key")


def sign(session: SessionKeyRecord | None, body: bytes) -> dict[str, str]:
    """The headers that sign ``body`` with the session key (none while no key is known)."""
    if session is None:
        return {}
    digest = hmac.new(base64.b64decode(session.key), body, hashlib.sha256).digest()
    return {SIGNATURE_HEADER: base64.b64encode(digest).decode(), SIGNATURE_ALGORITHM_HEADER: "HmacSHA256"}


def verify(
    group_protocol: str | None, session: SessionKeyRecord | None, body: bytes, headers: Mapping[str, str]
) -> None:
    """Internal requests under ``sessioned`` must carry a signature made with the current session key.

    Raises BadRequestError (no signature) or ForbiddenError (a wrong one), Java's answers.
    """
    if group_protocol is None or protocol.version_for_protocol(group_protocol) < 2:
        return
    signature = headers.get(SIGNATURE_HEADER.lower()) or headers.get(SIGNATURE_HEADER)
    if not signature:
        raise BadRequestError("Internal request missing required signature")
    expected = sign(session, body).get(SIGNATURE_HEADER)
    if expected is None or not hmac.compare_digest(expected, signature):
        raise ForbiddenError("Internal request contained invalid signature.")
