"""KIP-507 session keys, the pure parts: when the leader rotates, how requests are signed under each
algorithm, and which signed requests a worker accepts (issue 23, row 4)."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from typing import Any

import pytest

from kconnect.config.classes import MAC_ALGORITHMS
from kconnect.config.errors import ConfigError
from kconnect.config.worker import WorkerConfig
from kconnect.runtime.errors import BadRequestError, ForbiddenError
from kconnect.runtime.shell import session_keys as sk
from kconnect.runtime.storage.config_log import SessionKeyRecord
from kconnect.runtime.storage.kafka_log import KafkaLogError

SECRET = bytes(range(32))
KEY = SessionKeyRecord(base64.b64encode(SECRET).decode(), "HmacSHA256", 1_000)
BODY = b'[{"task.class":"x"}]'
HOUR = 3_600_000


# ------------------------------------------------------------------------------------------ rotation


@pytest.mark.parametrize(
    ("current", "now", "ttl", "algorithm", "size", "due"),
    [
        (None, 0, HOUR, "HmacSHA256", 32, True),  # no key yet
        (KEY, 1_000, HOUR, "HmacSHA256", 32, False),  # just made
        (KEY, 1_000 + HOUR - 1, HOUR, "HmacSHA256", 32, False),  # a millisecond before it expires
        (KEY, 1_000 + HOUR, HOUR, "HmacSHA256", 32, True),  # creation + ttl reached
        (KEY, 1_000 + 10 * HOUR, HOUR, "HmacSHA256", 32, True),
        (KEY, 1_500, 500, "HmacSHA256", 32, True),  # a short ttl
        (KEY, 1_499, 500, "HmacSHA256", 32, False),
        (KEY, 1_000, 0, "HmacSHA256", 32, True),  # ttl 0: every tick
        (KEY, 2_000, HOUR, "HmacSHA512", 64, True),  # the leader generates another algorithm
        (KEY, 2_000, HOUR, "HmacSHA256", 16, True),  # or another size
        (KEY, 500, HOUR, "HmacSHA256", 32, False),  # a clock behind the key's stamp: not expired
    ],
)
def test_rotation_is_due_when_there_is_no_key_it_expired_or_the_settings_changed(
    current: SessionKeyRecord | None, now: int, ttl: int, algorithm: str, size: int, due: bool
) -> None:
    reason = sk.rotation_due(current, now, ttl, algorithm, size)
    assert (reason is not None) is due, reason


@pytest.mark.parametrize(
    ("algorithm", "size_bits", "expected"),
    [
        ("HmacSHA256", None, 32),
        ("HmacSHA512", None, 64),
        ("HmacSHA1", None, 64),
        ("HmacSHA384", None, 48),
        ("HmacSHA3-224", None, 28),
        ("HmacSHA256", 128, 16),
        ("HmacSHA256", 41, 6),  # bits rounded up to whole bytes, as a JVM's KeyGenerator does
        ("HmacSHA512", 40, 5),
    ],
)
def test_key_size_follows_the_setting_or_the_algorithms_default(
    algorithm: str, size_bits: int | None, expected: int
) -> None:
    assert sk.key_bytes(algorithm, size_bits) == expected
    key = sk.new_key(algorithm, expected, 7)
    assert len(key.secret()) == expected and key.algorithm == algorithm and key.creation_timestamp == 7
    assert sk.rotation_due(key, 7, HOUR, algorithm, expected) is None  # a fresh key is not due again


# ---------------------------------------------------------------------------------- sign and verify


def _java_signature(secret: bytes, algorithm: str, body: bytes) -> str:
    """What Java's InternalRequestSignature puts in the header: base64 of the HMAC of the body."""
    return base64.b64encode(
        hmac.new(secret, body, getattr(hashlib, MAC_ALGORITHMS[algorithm])).digest()
    ).decode()


@pytest.mark.parametrize("algorithm", sorted(MAC_ALGORITHMS))
def test_signing_uses_the_configured_algorithm_and_verifies_under_it(algorithm: str) -> None:
    headers = sk.sign(KEY, BODY, algorithm)
    assert headers == {
        sk.SIGNATURE_HEADER: _java_signature(SECRET, algorithm, BODY),
        sk.SIGNATURE_ALGORITHM_HEADER: algorithm,
    }
    sk.verify("sessioned", KEY, BODY, headers, (algorithm,))
    sk.verify("static", KEY, BODY, {k.lower(): v for k, v in headers.items()}, ("HmacSHA1", algorithm))


def test_a_java_worker_signing_hmacsha512_is_accepted_when_listed() -> None:
    java = {
        "X-Connect-Authorization": _java_signature(SECRET, "HmacSHA512", BODY),
        "X-Connect-Request-Signature-Algorithm": "HmacSHA512",
    }
    sk.verify("sessioned", KEY, BODY, java, ("HmacSHA256", "HmacSHA512"))
    with pytest.raises(BadRequestError, match="does not support the 'HmacSHA512' key signing algorithm"):
        sk.verify("sessioned", KEY, BODY, java, ("HmacSHA256",))


@pytest.mark.parametrize(
    ("headers", "accepted", "error", "message"),
    [
        ({}, ("HmacSHA256",), BadRequestError, "Internal request missing required signature"),
        (  # a signature without its algorithm is no signature to Java either
            {sk.SIGNATURE_HEADER: _java_signature(SECRET, "HmacSHA256", BODY)},
            ("HmacSHA256",),
            BadRequestError,
            "Internal request missing required signature",
        ),
        (
            {sk.SIGNATURE_HEADER: "AAAA", sk.SIGNATURE_ALGORITHM_HEADER: "HmacFoo"},
            ("HmacSHA256",),
            BadRequestError,
            "Algorithm HmacFoo not available",
        ),
        (
            {
                sk.SIGNATURE_HEADER: _java_signature(SECRET, "HmacSHA1", BODY),
                sk.SIGNATURE_ALGORITHM_HEADER: "HmacSHA1",
            },
            ("HmacSHA256", "HmacSHA512"),
            BadRequestError,
            "This worker is currently configured to use: [HmacSHA256, HmacSHA512]",
        ),
        (  # the right algorithm, another key
            {
                sk.SIGNATURE_HEADER: _java_signature(b"x" * 32, "HmacSHA256", BODY),
                sk.SIGNATURE_ALGORITHM_HEADER: "HmacSHA256",
            },
            ("HmacSHA256",),
            ForbiddenError,
            "Internal request contained invalid signature.",
        ),
        (  # signed with SHA-256 but labelled SHA-512
            {
                sk.SIGNATURE_HEADER: _java_signature(SECRET, "HmacSHA256", BODY),
                sk.SIGNATURE_ALGORITHM_HEADER: "HmacSHA512",
            },
            ("HmacSHA256", "HmacSHA512"),
            ForbiddenError,
            "invalid signature",
        ),
        (
            {sk.SIGNATURE_HEADER: "not base64!", sk.SIGNATURE_ALGORITHM_HEADER: "HmacSHA256"},
            ("HmacSHA256",),
            ForbiddenError,
            "invalid signature",
        ),
    ],
)
def test_refusals(
    headers: Mapping[str, str], accepted: tuple[str, ...], error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message.replace("[", r"\[").replace("]", r"\]")):
        sk.verify("sessioned", KEY, BODY, headers, accepted)


def test_a_rotated_key_refuses_what_the_old_one_signed() -> None:
    old = sk.sign(KEY, BODY, "HmacSHA256")
    rotated = sk.new_key("HmacSHA256", 32, 2_000)
    sk.verify("sessioned", rotated, BODY, sk.sign(rotated, BODY, "HmacSHA256"))
    with pytest.raises(ForbiddenError):
        sk.verify("sessioned", rotated, BODY, old)


def test_no_check_below_sessioned() -> None:
    sk.verify("compatible", KEY, BODY, {})
    sk.verify(None, None, BODY, {})


# ------------------------------------------------------------------------------------- configuration


def _config(**props: str) -> WorkerConfig:
    base = {
        "bootstrap.servers": "localhost:9092",
        "group.id": "g",
        "config.storage.topic": "c",
        "offset.storage.topic": "o",
        "status.storage.topic": "s",
        "key.converter": "org.apache.kafka.connect.json.JsonConverter",
        "value.converter": "org.apache.kafka.connect.json.JsonConverter",
    }
    return WorkerConfig.from_properties({**base, **props})


def test_the_signature_algorithm_must_be_a_verification_algorithm() -> None:
    with pytest.raises(ConfigError) as caught:
        _config(**{"inter.worker.signature.algorithm": "HmacSHA512"})
    err = caught.value
    assert (err.key, err.value) == ("inter.worker.signature.algorithm", "HmacSHA512")
    assert "inter.worker.verification.algorithms" in err.allowed and "HmacSHA256" in err.allowed
    ok = _config(
        **{
            "inter.worker.signature.algorithm": "HmacSHA512",
            "inter.worker.verification.algorithms": "HmacSHA256,HmacSHA512",
        }
    )
    assert ok.inter_worker_verification_algorithms == ("HmacSHA256", "HmacSHA512")


# ---------------------------------------------------------------------------------- the leader's tick


class _Stores:
    """The two reads and the one write :class:`KeyRotation` makes of the internal topics."""

    def __init__(self) -> None:
        self.key: SessionKeyRecord | None = None
        self.offset = 0  # the next offset the config reader will read
        self.written: list[SessionKeyRecord] = []
        self.fail = False

    def snapshot(self) -> Any:
        return type("Snap", (), {"session_key": self.key})()

    def config_offset(self) -> int:
        return self.offset

    def append_config(self, record: SessionKeyRecord) -> int:
        if self.fail:
            raise KafkaLogError("no broker")
        self.written.append(record)
        return self.offset + len(self.written) - 1

    def read_back(self) -> None:
        self.key = self.written[-1]
        self.offset += len(self.written)
        self.written.clear()


def test_the_leader_rotates_on_ticks_and_waits_for_its_key_to_be_read_back() -> None:
    stores = _Stores()
    rotation = sk.KeyRotation(stores, _config(**{"inter.worker.key.ttl.ms": "1000"}))  # type: ignore[arg-type]
    assert not rotation.tick(True, "compatible", 0)  # below sessioned: no keys at all
    assert not rotation.tick(False, "sessioned", 0)  # followers never write
    assert rotation.tick(True, "static", 10)
    assert not rotation.tick(True, "static", 5_000)  # its key not read back yet: no second write
    stores.read_back()
    assert stores.key is not None and stores.key.creation_timestamp == 10
    assert not rotation.tick(True, "static", 1_009)
    assert rotation.tick(True, "static", 1_010)  # ttl reached: no JoinGroup round needed
    stores.read_back()
    assert stores.key.creation_timestamp == 1_010


def test_a_failed_write_backs_off() -> None:
    stores = _Stores()
    stores.fail = True
    rotation = sk.KeyRotation(stores, _config())  # type: ignore[arg-type]
    assert not rotation.tick(True, "sessioned", 0)
    stores.fail = False
    assert not rotation.tick(True, "sessioned", 0)  # within retry.backoff.ms of the failure
