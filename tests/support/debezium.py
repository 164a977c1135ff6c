"""Debezium's PostgreSQL connector on the Apache Kafka Connect 4.x reference worker: the change data capture
oracle that kconnect's records are compared with field by field, and the other side of ``bench/cdc.py``.

``tests/debezium/pom.xml`` names the connector; :func:`debezium_plugin` copies it and its dependencies
once, with Maven, into a ``plugin.path`` directory in the cache (``make kafka`` fetches Apache Kafka the
same way). :func:`debezium_worker` is a ``ReferenceWorker`` (``tests/support/reference.py``) with that
plugin path and JSON converters with schemas.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.support.apache_kafka import REPO, KafkaError
from tests.support.reference import REFERENCE_4X, ReferenceWorker

DEBEZIUM_VERSION = "3.6.1.Final"
POM = REPO / "tests" / "debezium" / "pom.xml"
CONNECTOR_CLASS = "io.debezium.connector.postgresql.PostgresConnector"


def debezium_home() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "kconnect" / f"debezium-postgres-{DEBEZIUM_VERSION}"


def debezium_plugin() -> Path:
    """The plugin.path directory holding Debezium's PostgreSQL connector (its own folder inside), fetched
    with Maven on first use; a marker written last makes an interrupted copy be redone."""
    home = debezium_home()
    plugin = home / "plugins" / "debezium-connector-postgres"
    marker = home / "complete"
    if marker.is_file():
        return plugin.parent
    if shutil.which("mvn") is None:
        raise KafkaError("Maven (mvn) is needed to fetch Debezium from Maven Central")
    shutil.rmtree(plugin, ignore_errors=True)
    plugin.mkdir(parents=True)
    proc = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", f"-DoutputDirectory={plugin}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise KafkaError(f"mvn could not fetch Debezium {DEBEZIUM_VERSION}: {proc.stdout[-2000:]}")
    marker.write_text(DEBEZIUM_VERSION + "\n")
    return plugin.parent


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
        config_topic=f"{group}-configs",
        offset_topic=f"{group}-offsets",
        status_topic=f"{group}-status",
        log_path=log_path,
        extra=props,
        version=REFERENCE_4X,
        startup_timeout_s=180,
    )
