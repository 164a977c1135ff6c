"""Creation and verification of the worker's compacted internal topics.

A wrong internal topic corrupts a cluster silently (a multi-partition config topic reorders
connector and task records; a deleting cleanup policy loses connectors), so a worker refuses to start
on one, with an error that names the topic and the setting to fix.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, ConfigResource, NewTopic, ResourceType

from kconnect.runtime import logs

log = logs.get(__name__)


class TopicError(RuntimeError):
    """An internal topic is missing, misconfigured or could not be created."""


@dataclass(frozen=True, slots=True)
class TopicSpec:
    """What a worker needs of one internal topic; -1 means "the broker's default" as in Kafka."""

    name: str
    purpose: str  # the worker property that names it, for error messages
    partitions: int
    replication_factor: int
    single_partition: bool = False


def ensure_topics(admin: AdminClient, specs: list[TopicSpec], timeout_s: float = 30.0) -> None:
    """Create the topics that are missing (compacted), then verify every one of them."""
    try:
        existing = admin.list_topics(timeout=timeout_s).topics
    except KafkaException as exc:
        raise TopicError(f"could not list topics: {exc}") from exc
    missing = [s for s in specs if s.name not in existing]
    if missing:
        new = [
            NewTopic(
                s.name,
                num_partitions=s.partitions,
                replication_factor=s.replication_factor,
                config={"cleanup.policy": "compact"},
            )
            for s in missing
        ]
        for name, fut in admin.create_topics(new, request_timeout=timeout_s).items():
            try:
                fut.result(timeout=timeout_s)
                log.info("created internal topic", topic=name)
            except KafkaException as exc:
                if exc.args and getattr(exc.args[0], "name", lambda: "")() == "TOPIC_ALREADY_EXISTS":
                    continue  # another worker won the race
                spec = next(s for s in missing if s.name == name)
                if _denied(exc):
                    # Kafka answers so when the principal may not create it (CREATE on the topic or the
                    # cluster), and, not to reveal that it exists, when it exists but is not DESCRIBE-able.
                    raise TopicError(
                        f"the worker's principal lacks CREATE on internal topic '{name}' ({spec.purpose}), "
                        f"or DESCRIBE if it exists already; grant it with an ACL or create the topic "
                        f"beforehand ({_reason(exc)})"
                    ) from exc
                raise TopicError(f"could not create internal topic '{name}': {exc}") from exc
        wait_visible(admin, [s.name for s in missing], timeout_s)
    check_authorized(admin, specs, timeout_s)
    verify_topics(admin, specs, timeout_s)


#: What a worker does with each internal topic: finds it and its partitions (DESCRIBE), reads it to its
#: end (READ), appends records (WRITE) and checks its cleanup policy (DESCRIBE_CONFIGS).
REQUIRED_OPERATIONS: tuple[str, ...] = ("DESCRIBE", "READ", "WRITE", "DESCRIBE_CONFIGS")


def missing_operations(authorized: Iterable[str] | None) -> list[str]:
    """The operations of :data:`REQUIRED_OPERATIONS` missing from a topic's authorized operations (the
    broker's names, ``READ``, ``DESCRIBE_CONFIGS``), in that order; none when the broker did not say."""
    if authorized is None:
        return []
    granted = set(authorized)
    if "ALL" in granted:
        return []
    return [op for op in REQUIRED_OPERATIONS if op not in granted]


def check_authorized(admin: AdminClient, specs: list[TopicSpec], timeout_s: float = 30.0) -> None:
    """Refuse to start when the worker's principal lacks an operation it needs on an internal topic.

    Why up front: without READ the worker would wait out its start-up reading a log that never answers,
    and without WRITE it would start and fail on its first connector or status write, far from the cause.
    The broker says what this principal may do with each topic (DescribeTopics with authorized operations,
    KIP-430; implied operations included, so READ brings DESCRIBE). A broker that does not say (no
    authorized operations in its answer) is not second-guessed: the later steps report what fails.
    """
    futures = admin.describe_topics(
        TopicCollection([s.name for s in specs]),
        request_timeout=timeout_s,
        include_authorized_operations=True,
    )
    for spec in specs:
        try:
            description = futures[spec.name].result(timeout=timeout_s)
        except KafkaException as exc:
            if _denied(exc):
                raise TopicError(_lacks(["DESCRIBE"], spec, exc)) from exc
            continue  # not there (verify_topics says so) or not answered: judged by the later steps
        operations = description.authorized_operations
        names = None if operations is None else [op.name for op in operations]
        lacking = missing_operations(names)
        if lacking:
            raise TopicError(_lacks(lacking, spec))


def _lacks(operations: list[str], spec: TopicSpec, exc: KafkaException | None = None) -> str:
    """One line naming the topic, the operations the worker's principal lacks on it, and the broker's
    words when it refused outright."""
    which = ", ".join(operations)
    line = (
        f"the worker's principal lacks {which} on internal topic '{spec.name}' ({spec.purpose}); "
        f"grant {'them' if len(operations) > 1 else 'it'} with an ACL"
    )
    return f"{line} ({_reason(exc)})" if exc is not None else line


def _denied(exc: KafkaException) -> bool:
    """Whether the broker refused for lack of an ACL (on the topic, or on the cluster for a create)."""
    error = exc.args[0] if exc.args else None
    code = error.code() if isinstance(error, KafkaError) else None
    return code in (KafkaError.TOPIC_AUTHORIZATION_FAILED, KafkaError.CLUSTER_AUTHORIZATION_FAILED)


def _reason(exc: KafkaException) -> str:
    error = exc.args[0] if exc.args else None
    return f"{error.name()}: {error.str()}" if isinstance(error, KafkaError) else str(exc)


def visible(metadata: Any, names: list[str]) -> list[str]:
    """Those of ``names`` that ``metadata`` (a ``list_topics`` answer) shows with partitions, each led."""
    shown = []
    for name in names:
        tmd = metadata.topics.get(name)
        if tmd is None or tmd.error is not None or not tmd.partitions:
            continue
        if all(p.leader >= 0 for p in tmd.partitions.values()):
            shown.append(name)
    return shown


def wait_visible(admin: AdminClient, names: list[str], timeout_s: float) -> bool:
    """Wait until the cluster's metadata shows every topic of ``names``; False when the time ran out.

    On a cluster of several brokers a CreateTopics answer comes from the controller before every broker
    has the new topic's metadata: a client asking another broker right away hears it does not exist.
    Java's KafkaBasedLog waits for the partitions likewise (up to 30 s) before it reads or writes.
    """
    deadline = time.monotonic() + timeout_s
    backoff = 0.1
    while True:
        try:
            pending = sorted(set(names) - set(visible(admin.list_topics(timeout=timeout_s), names)))
        except KafkaException:
            pending = sorted(names)
        if not pending:
            return True
        if time.monotonic() + backoff > deadline:
            return False
        log.info("new internal topics not in the metadata yet", topics=pending)
        time.sleep(backoff)
        backoff = min(2 * backoff, 1.0)


def _listed(admin: AdminClient, names: list[str], timeout_s: float) -> dict[str, Any]:
    """The cluster's topics, asked again (up to ``timeout_s``) while one of ``names`` is missing.

    Each ``list_topics`` may be answered by another broker, and one broker showing a new topic says
    nothing of the next: seen on three Apache Kafka nodes (bench/brokers_random.py), a worker's
    ``wait_visible`` saw its four new topics, the next answer came from a broker that did not know them yet
    and the worker exited with "internal topic ... does not exist" while its peer ran on. A topic still
    missing after ``timeout_s`` is missing (the caller says so)."""
    deadline = time.monotonic() + timeout_s
    backoff = 0.1
    while True:
        listed: dict[str, Any] = admin.list_topics(timeout=timeout_s).topics
        pending = [n for n in names if listed.get(n) is None or listed[n].error is not None]
        if not pending or time.monotonic() + backoff > deadline:
            return listed
        log.info("internal topics not in this broker's metadata yet", topics=pending)
        time.sleep(backoff)
        backoff = min(2 * backoff, 1.0)


def verify_topics(admin: AdminClient, specs: list[TopicSpec], timeout_s: float = 30.0) -> None:
    """Refuse topics another tool created wrongly: the config topic must have exactly one partition and every
    internal topic a compact-only cleanup policy, as Java's worker checks at start-up."""
    md = _listed(admin, [s.name for s in specs], timeout_s)
    for spec in specs:
        tmd = md.get(spec.name)
        if tmd is None or tmd.error is not None:
            raise TopicError(f"internal topic '{spec.name}' ({spec.purpose}) does not exist")
        if spec.single_partition and len(tmd.partitions) != 1:
            raise TopicError(
                f"internal topic '{spec.name}' ({spec.purpose}) has {len(tmd.partitions)} partitions;"
                " it must have exactly 1 so that its records keep their order"
            )
    resources = [ConfigResource(ResourceType.TOPIC, s.name) for s in specs]
    for spec, (_res, fut) in zip(
        specs, admin.describe_configs(resources, request_timeout=timeout_s).items(), strict=True
    ):
        try:
            configs = fut.result(timeout=timeout_s)
        except KafkaException as exc:
            raise TopicError(
                f"could not read the configuration of internal topic '{spec.name}': {exc}"
            ) from exc
        policy_entry = configs.get("cleanup.policy")
        policy = (policy_entry.value or "") if policy_entry is not None else ""
        policies = {p.strip() for p in policy.split(",") if p.strip()}
        if "compact" not in policies or "delete" in policies:
            raise TopicError(
                f"internal topic '{spec.name}' ({spec.purpose}) has cleanup.policy={policy or '<unset>'};"
                " it must be 'compact' so that no connector configuration, status or offset is ever deleted"
            )
