"""One small local SparkSession for the column-expression unit tests.

Starting a JVM costs seconds, so every test module that needs Spark shares the one session that
``getOrCreate`` returns; it is never stopped by a test (the JVM ends with the test process).
"""

from __future__ import annotations

import os
import shutil

import pytest
from pyspark.sql import SparkSession


def local_spark() -> SparkSession:
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        pytest.skip("Spark needs Java 17; none is installed")
    return (
        SparkSession.builder.master("local[1]")
        .appName("kconnect-unit")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .getOrCreate()
    )
