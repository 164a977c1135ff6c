"""Apache Iceberg's own Kafka Connect sink on the Apache Kafka Connect 4.x reference worker: the other side of
``bench/lakehouse.py``.

``tests/iceberg-kafka-connect/pom.xml`` names the sink (``org.apache.iceberg:iceberg-kafka-connect``), its
events module, Iceberg's data and Parquet modules and the Hadoop client the Hadoop catalog needs;
:func:`iceberg_plugin` copies them once, with Maven, into a ``plugin.path`` directory in the cache, as
``tests/support/debezium.py`` does for Debezium. Apache publishes the sink's runnable bundle (a zip with
the same jars) only as a build output, not on Maven Central, hence the assembly here.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.apache_kafka import REPO, KafkaError
from tests.support.maven import connect_plugin_path, kconnect_cache

ICEBERG_CONNECT_VERSION = "1.12.0"
POM = REPO / "tests" / "iceberg-kafka-connect" / "pom.xml"
CONNECTOR_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"


def iceberg_connect_home() -> Path:
    """The sink's cache folder, ``iceberg-kafka-connect-<version>``; a new version pin gets a folder (and a
    fetch) of its own."""
    return kconnect_cache(f"iceberg-kafka-connect-{ICEBERG_CONNECT_VERSION}")


def iceberg_plugin() -> Path:
    """The plugin.path directory holding Apache Iceberg's sink (its own folder inside), fetched with Maven on
    first use; a marker written last makes an interrupted copy be redone."""
    return connect_plugin_path(
        POM,
        iceberg_connect_home(),
        "iceberg-kafka-connect",
        what=f"Apache Iceberg's Kafka Connect sink {ICEBERG_CONNECT_VERSION}",
        stamp=ICEBERG_CONNECT_VERSION,
        error=KafkaError,
    )
