"""The Iceberg and Delta Lake runtimes for Spark from Maven Central, cached like Apache Kafka's jars.

``tests/lakehouse/pom.xml`` names them; :func:`lakehouse_jars` copies them once into
``~/.cache/kconnect/lakehouse-<iceberg>-<delta>/libs`` (``make lakehouse``, which ``make test`` runs, does
the same ahead of the run) and :func:`spark_properties` gives the worker properties that load them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.support.maven import copy_dependencies, kconnect_cache

REPO = Path(__file__).resolve().parents[2]
POM = REPO / "tests" / "lakehouse" / "pom.xml"
#: Spark's own Kafka source (4.0.0, the 4.0 line PySpark 4.0.x runs), which a sink task's query reads with
#: when it is on the worker's spark.jars (``runtime/dataplane/spark_kafka.py``).
SPARK_KAFKA_POM = REPO / "tests" / "spark-kafka" / "pom.xml"
SPARK_KAFKA_VERSION = "4.0.0"
#: The versions the pom pins (PySpark 4.0.x: Spark 4.0, Scala 2.13); the cache directory is named for them.
ICEBERG_VERSION = "1.10.2"
DELTA_VERSION = "4.0.1"
ICEBERG_EXTENSIONS = "org.apache.iceberg.spark.extensions.IcebergSparkSessionExtensions"
DELTA_EXTENSIONS = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


#: The Iceberg sink's JVM helper (``kconnect.lakehouse.IcebergAppends``: a commit round's appends in one py4j
#: call), compiled from this source by :func:`helper_jar`; the sink falls back to appending through py4j
#: table by table when the class is not on the session's classpath.
HELPER_SOURCES = REPO / "connectors" / "lakehouse" / "java"


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


def spark_kafka_jars() -> list[Path]:
    """Spark's Kafka source and what it needs (the token provider, kafka-clients, commons-pool2), fetched
    with Maven on first use into ``~/.cache/kconnect/spark-kafka-<version>/libs``."""
    libs = copy_dependencies(
        SPARK_KAFKA_POM,
        kconnect_cache(f"spark-kafka-{SPARK_KAFKA_VERSION}"),
        "libs",
        what=f"Spark's Kafka source {SPARK_KAFKA_VERSION}",
        stamp=SPARK_KAFKA_VERSION,
        error=LakehouseJarsError,
    )
    return sorted(libs.glob("*.jar"))


def helper_jar() -> Path | None:
    """The Iceberg sink's helper jar, compiled with the JDK's ``javac`` against Iceberg's Spark runtime the
    first time (``make lakehouse`` does it ahead of a test run) into the cache, under a name carrying a
    hash of its sources, so an edited source is compiled again. None when this machine has no JDK
    compiler (the sink then appends table by table through py4j, as before the helper)."""
    sources = sorted(HELPER_SOURCES.rglob("*.java"))
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if not sources or javac is None or jar_tool is None:
        return None
    iceberg = [p for p in lakehouse_jars() if p.name.startswith("iceberg-spark-runtime")]
    import pyspark  # Spark's own jars: the helper names Spark's schema type

    jars_dir = Path(pyspark.__file__).parent / "jars"
    spark_jars = sorted([*jars_dir.glob("spark-*.jar"), *jars_dir.glob("scala-library-*.jar")])
    digest = hashlib.sha256()
    for source in sources:
        digest.update(source.relative_to(HELPER_SOURCES).as_posix().encode() + b"\0" + source.read_bytes())
    digest.update(" ".join(p.name for p in [*iceberg, *spark_jars]).encode())
    target = lakehouse_home() / "helper" / f"kconnect-lakehouse-helper-{digest.hexdigest()[:12]}.jar"
    if target.is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kconnect-helper-") as work:
        classes = Path(work) / "classes"
        built = Path(work) / target.name
        try:
            subprocess.run(
                [
                    javac,
                    "--release",
                    "17",
                    "-nowarn",
                    "-cp",
                    os.pathsep.join(map(str, [*iceberg, *spark_jars])),
                    "-d",
                    str(classes),
                    *map(str, sources),
                ],
                check=True,
                capture_output=True,
                text=True,
                timeout=300,
            )
            subprocess.run(
                [jar_tool, "cf", str(built), "-C", str(classes), "."],
                check=True,
                capture_output=True,
                text=True,
                timeout=120,
            )
        except subprocess.CalledProcessError as exc:
            raise LakehouseJarsError(
                f"compiling the Iceberg sink's helper ({HELPER_SOURCES}) failed: {exc.stderr or exc.stdout}"
            ) from exc
        os.replace(built, target)  # written whole or not at all: a reader never sees half a jar
    return target


def spark_properties(spark_kafka: bool = True) -> dict[str, str]:
    """Worker properties whose SparkSession writes Iceberg and Delta tables: the jars (and the Iceberg
    sink's helper, when this machine can compile it), both SQL extensions and Delta's session catalog
    (Delta needs it; Iceberg's catalogs are registered per connector). Spark's Kafka source is on the
    jars too unless ``spark_kafka`` is False, as docs/connectors/lakehouse.md advises: the table sinks'
    queries read Kafka with it."""
    helper = helper_jar()
    kafka = spark_kafka_jars() if spark_kafka else []
    jars = [*lakehouse_jars(), *kafka, *([helper] if helper else [])]
    return {
        "spark.jars": ",".join(str(p) for p in jars),
        "spark.sql.extensions": f"{ICEBERG_EXTENSIONS},{DELTA_EXTENSIONS}",
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        # Delta's log replay shuffles into 50 partitions by default: far too many for a 2-core test machine.
        "spark.databricks.delta.snapshotPartitions": "1",
    }
