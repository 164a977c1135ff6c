"""The Iceberg and Delta Lake runtimes for Spark from Maven Central, cached like Apache Kafka's jars.

``tests/lakehouse/pom.xml`` names them; :func:`lakehouse_jars` copies them once into
``~/.cache/kconnect/lakehouse-<iceberg>-<delta>/libs`` (``make lakehouse``, which ``make test`` runs, does
the same ahead of the run) and :func:`spark_properties` gives the worker properties that load them.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.maven import copy_dependencies, kconnect_cache

REPO = Path(__file__).resolve().parents[2]
POM = REPO / "tests" / "lakehouse" / "pom.xml"
#: The versions the pom pins (PySpark 4.0.x: Spark 4.0, Scala 2.13); the cache directory is named for them.
ICEBERG_VERSION = "1.10.2"
DELTA_VERSION = "4.0.1"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
DELTA_EXTENSIONS = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


class LakehouseJarsError(RuntimeError):
    """The jars could not be fetched."""


def lakehouse_home() -> Path:
    return kconnect_cache(f"lakehouse-{ICEBERG_VERSION}-{DELTA_VERSION}")


def lakehouse_jars() -> list[Path]:
    """The jars, fetched with Maven on first use; a marker written last makes an interrupted copy redone."""
    libs = copy_dependencies(
        POM,
        lakehouse_home(),
        "libs",
        what=f"the Iceberg {ICEBERG_VERSION} and Delta {DELTA_VERSION} jars for Spark",
        stamp=f"{ICEBERG_VERSION} {DELTA_VERSION}",
        error=LakehouseJarsError,
    )
    return sorted(libs.glob("*.jar"))


def spark_properties() -> dict[str, str]:
    """Worker properties whose SparkSession writes Iceberg and Delta tables: the jars, both SQL extensions
    and Delta's session catalog (Delta needs it; Iceberg's catalogs are registered per connector)."""
    return {
        "spark.jars": ",".join(str(p) for p in lakehouse_jars()),
        "spark.sql.extensions": f"{ICEBERG_EXTENSIONS},{DELTA_EXTENSIONS}",
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        # Delta's log replay shuffles into 50 partitions by default: far too many for a 2-core test machine.
        "spark.databricks.delta.snapshotPartitions": "1",
    }
