"""Topics the tests and benches make for themselves: created, then waited for until every broker's answer
names them with a leader for every partition.

Why the wait: CreateTopics answers once the controller has the topics, and a broker serves them only when
its own metadata has caught up, a moment later on a KRaft cluster. A commit or a produce that lands in
that moment fails (UNKNOWN_TOPIC_OR_PARTITION) or waits for the client's next metadata refresh, so a test
that acts at once would now and then see an error or a stall that is no part of what it checks.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping

from confluent_kafka.admin import AdminClient, NewTopic, TopicMetadata

#: How often the metadata is asked again while a topic is not served yet.
POLL_S = 0.1


def create_topics(
    bootstrap: str,
    names: Iterable[str],
    partitions: int = 1,
    replication: int = 1,
    config: Mapping[str, str] | None = None,
    timeout_s: float = 30.0,
) -> None:
    """Create ``names`` (each with ``partitions`` partitions, ``replication`` replicas and topic
    ``config``) and return once metadata shows every partition of each with a leader. A topic that exists
    already is an error (``KafkaException``), as it is to the admin client: a test's topics are its own."""
    wanted = list(names)
    deadline = time.monotonic() + timeout_s
    admin = AdminClient({"bootstrap.servers": bootstrap})
    new = [NewTopic(name, partitions, replication, config=dict(config or {})) for name in wanted]
    for future in admin.create_topics(new).values():
        future.result(max(0.1, deadline - time.monotonic()))
    missing = set(wanted)
    while True:
        metadata = admin.list_topics(timeout=max(0.1, deadline - time.monotonic()))
        missing = {name for name in missing if not _served(metadata.topics.get(name), partitions)}
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise TimeoutError(f"topics {sorted(missing)} not served {timeout_s:.0f} s after their creation")
        time.sleep(POLL_S)


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    """One topic of ``partitions`` partitions and one replica (:func:`create_topics`)."""
    create_topics(bootstrap, [name], partitions)


def _served(topic: TopicMetadata | None, partitions: int) -> bool:
    """Whether a topic's metadata has no error and ``partitions`` partitions, each with a leader."""
    if topic is None or topic.error is not None:
        return False
    return len(topic.partitions) == partitions and all(p.leader >= 0 for p in topic.partitions.values())
