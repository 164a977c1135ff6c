"""Zombie fencing (KIP-618): the Kafka side of fencing out older instances of a connector's source tasks.

A new generation of task configs for an exactly-once source connector must not run while an instance
of the previous generation can still commit a transaction: the two would both write records and
offsets. Java's leader fences every transactional id of the previous generation (Admin.fenceProducers)
and records that it did (the ``tasks-fencing-<connector>`` config record); a worker starts a task of the
new generation only after that. kconnect's client (confluent-kafka) has no fenceProducers admin call, so
each id is fenced the way the admin call works underneath: a throwaway producer with that
``transactional.id`` calls ``init_transactions``, which bumps the producer epoch (so the older instance
is fenced) and aborts any transaction it left open.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from confluent_kafka import KafkaException, Producer

from kconnect.runtime import logs
from kconnect.runtime.plugins.api import ConnectorError

log = logs.get(__name__)


def fence_producers(
    bootstrap: str,
    transactional_ids: Iterable[str],
    timeout_s: float = 30.0,
    client_settings: Mapping[str, str] | None = None,
) -> int:
    """Fence each transactional id; returns how many were fenced, or raises a ConnectorError naming the id."""
    count = 0
    for tid in transactional_ids:
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                **(client_settings or {}),
                "transactional.id": tid,
                "client.id": f"connect-fencer-{tid}",
            }
        )
        try:
            producer.init_transactions(timeout_s)
        except KafkaException as exc:
            raise ConnectorError(
                f"fencing transactional.id={tid} failed: {exc.args[0] if exc.args else exc}"
            ) from exc
        finally:
            producer.flush(1)
        count += 1
        log.info("fenced producer", transactional_id=tid)
    return count
