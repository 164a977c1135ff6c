"""Apache Iceberg's own Kafka Connect sink on the Apache Kafka Connect 4.x reference worker: the other side of
``bench/lakehouse.py``.

``tests/iceberg-kafka-connect/pom.xml`` names the sink (``org.apache.iceberg:iceberg-kafka-connect``), its
events module, Iceberg's data and Parquet modules and the Hadoop client the Hadoop catalog needs;
:func:`iceberg_plugin` copies them once, with Maven, into a ``plugin.path`` directory in the cache, as
``tests/support/debezium.py`` does for Debezium. Apache publishes the sink's runnable bundle (a zip with
the same jars) only as a build output, not on Maven Central, hence the assembly here.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from tests.support.apache_kafka import REPO, KafkaError

ICEBERG_CONNECT_VERSION = "1.12.0"
POM = REPO / "tests" / "iceberg-kafka-connect" / "pom.xml"
CONNECTOR_CLASS = "org.apache.iceberg.connect.IcebergSinkConnector"


def iceberg_connect_home() -> Path:
    cache = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(cache) / "kconnect" / f"iceberg-kafka-connect-{ICEBERG_CONNECT_VERSION}"


def iceberg_plugin() -> Path:
    """The plugin.path directory holding Apache Iceberg's sink (its own folder inside), fetched with Maven on
    first use; a marker written last makes an interrupted copy be redone."""
    home = iceberg_connect_home()
    plugin = home / "plugins" / "iceberg-kafka-connect"
    marker = home / "complete"
    if marker.is_file():
        return plugin.parent
    if shutil.which("mvn") is None:
        raise KafkaError(
            "Maven (mvn) is needed to fetch Apache Iceberg's Kafka Connect sink from Maven Central"
        )
    shutil.rmtree(plugin, ignore_errors=True)
    plugin.mkdir(parents=True)
    proc = subprocess.run(
        ["mvn", "-q", "-B", "-f", str(POM), "dependency:copy-dependencies", f"-DoutputDirectory={plugin}"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise KafkaError(
            f"mvn could not fetch Apache Iceberg's Kafka Connect sink {ICEBERG_CONNECT_VERSION}: "
            f"{proc.stdout[-2000:]}"
        )
    marker.write_text(ICEBERG_CONNECT_VERSION + "\n")
    return plugin.parent
