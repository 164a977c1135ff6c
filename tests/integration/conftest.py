"""Fixtures shared by integration modules (the broker fixtures every test gets are in tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pyspark.sql import SparkSession

from tests.support.lakehouse_reader import reader_session


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[SparkSession, Path]]:
    """The module's SparkSession (Iceberg and Delta loaded) and the warehouse directory its sinks write
    to: Iceberg's Hadoop catalog ``chk`` on ``<warehouse>/iceberg``, Delta tables by path under it."""
    warehouse = tmp_path_factory.mktemp("lakehouse")
    spark = reader_session("kconnect-lakehouse-reader", warehouse / "iceberg")
    yield spark, warehouse
    spark.stop()
