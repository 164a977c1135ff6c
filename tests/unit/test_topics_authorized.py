"""A worker whose principal lacks an ACL on an internal topic stops at start-up with one line naming the
topic and the operation (issue 23 row 9); the broker's authorized operations (KIP-430) say which."""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AclOperation

from kconnect.runtime.storage import topics

SPECS = [
    topics.TopicSpec("g-configs", "config.storage.topic", 1, 1, True),
    topics.TopicSpec("g-status", "status.storage.topic", 5, 1),
]


@pytest.mark.parametrize(
    ("authorized", "missing"),
    [
        (None, []),  # the broker did not say
        (["ALL"], []),
        (["READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER"], []),
        (["READ", "DESCRIBE", "DESCRIBE_CONFIGS"], ["WRITE"]),
        (["WRITE", "DESCRIBE"], ["READ", "DESCRIBE_CONFIGS"]),
        ([], ["DESCRIBE", "READ", "WRITE", "DESCRIBE_CONFIGS"]),
    ],
)
def test_missing_operations(authorized: list[str] | None, missing: list[str]) -> None:
    assert topics.missing_operations(authorized) == missing


@dataclass
class _Description:
    authorized_operations: list[AclOperation] | None


class _Admin:
    """Answers ``describe_topics`` per topic: a description, or a KafkaError to fail the future with."""

    def __init__(self, answers: dict[str, _Description | KafkaError]) -> None:
        self.answers = answers
        self.asked: dict[str, Any] = {}

    def describe_topics(self, collection: Any, **kwargs: Any) -> dict[str, Future[Any]]:
        self.asked = kwargs
        futures: dict[str, Future[Any]] = {}
        for name in collection.topic_names:
            future: Future[Any] = Future()
            answer = self.answers[name]
            if isinstance(answer, KafkaError):
                future.set_exception(KafkaException(answer))
            else:
                future.set_result(answer)
            futures[name] = future
        return futures


ALLOWED = _Description(
    [AclOperation.READ, AclOperation.WRITE, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS]
)


def test_a_missing_write_names_the_topic_its_property_and_the_operation() -> None:
    admin = _Admin(
        {
            "g-configs": ALLOWED,
            "g-status": _Description(
                [AclOperation.READ, AclOperation.DESCRIBE, AclOperation.DESCRIBE_CONFIGS]
            ),
        }
    )
    with pytest.raises(topics.TopicError) as caught:
        topics.check_authorized(admin, SPECS)  # type: ignore[arg-type]
    message = str(caught.value)
    assert "\n" not in message
    assert "lacks WRITE on internal topic 'g-status' (status.storage.topic)" in message
    assert admin.asked["include_authorized_operations"] is True


def test_a_topic_the_broker_will_not_describe_lacks_describe() -> None:
    denied = KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED, "Authorization failed")
    with pytest.raises(
        topics.TopicError, match=r"lacks DESCRIBE on internal topic 'g-configs'.*TOPIC_AUTHORIZATION_FAILED"
    ):
        topics.check_authorized(_Admin({"g-configs": denied, "g-status": ALLOWED}), SPECS)  # type: ignore[arg-type]


def test_no_answer_about_operations_or_another_error_is_left_to_the_later_checks() -> None:
    unknown = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, "Unknown topic")
    topics.check_authorized(_Admin({"g-configs": _Description(None), "g-status": unknown}), SPECS)  # type: ignore[arg-type]
    topics.check_authorized(_Admin({"g-configs": ALLOWED, "g-status": ALLOWED}), SPECS)  # type: ignore[arg-type]
