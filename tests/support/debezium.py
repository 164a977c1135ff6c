"""Debezium's PostgreSQL connector on the Apache Kafka Connect 4.x reference worker: the change data capture
oracle that kconnect's records are compared with field by field, and the other side of ``bench/cdc.py``.

``tests/debezium/pom.xml`` names the connector; :func:`debezium_plugin` copies it and its dependencies
once, with Maven, into a ``plugin.path`` directory in the cache (``make kafka`` fetches Apache Kafka the
same way). :func:`debezium_worker` is a ``ReferenceWorker`` (``tests/support/reference.py``) with that
plugin path and JSON converters with schemas.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.support.apache_kafka import REPO, KafkaError
from tests.support.maven import connect_plugin_path, kconnect_cache
from tests.support.reference import REFERENCE_4X, ReferenceWorker

DEBEZIUM_VERSION = "3.6.1.Final"
POM = REPO / "tests" / "debezium" / "pom.xml"
CONNECTOR_CLASS = "io.debezium.connector.postgresql.PostgresConnector"


def debezium_home() -> Path:
    """Debezium's cache folder (``debezium-postgres-<version>`` under ~/.cache/kconnect): named for the
    pinned version, so a new pin in the pom fetches anew instead of running the old jars."""
    return kconnect_cache(f"debezium-postgres-{DEBEZIUM_VERSION}")


def debezium_plugin() -> Path:
    """The plugin.path directory holding Debezium's PostgreSQL connector (its own folder inside), fetched
    with Maven on first use; a marker written last makes an interrupted copy be redone."""
    return connect_plugin_path(
        POM,
        debezium_home(),
        "debezium-connector-postgres",
        what=f"Debezium {DEBEZIUM_VERSION}",
        stamp=DEBEZIUM_VERSION,
        error=KafkaError,
    )


def debezium_worker(bootstrap: str, group: str, log_path: Path, **extra: str) -> ReferenceWorker:
    """An Apache Kafka Connect 4.x worker (not started) that has Debezium's connector and writes JSON with
    schemas, as the CDC tests' kconnect workers do."""
    props: dict[str, Any] = {
        "plugin.path": str(debezium_plugin()),
        "plugin.discovery": "hybrid_warn",
        "key.converter.schemas.enable": "true",
        "value.converter.schemas.enable": "true",
        "offset.flush.interval.ms": "1000",
        **extra,
    }
    return ReferenceWorker(
        bootstrap,
        group_id=group,
        log_path=log_path,
        extra=props,
        version=REFERENCE_4X,
        startup_timeout_s=180,
    )
