"""What a source task is handed at ``initialize``: its context, and through it the offsets reader.

Split from the poll loop (:mod:`kconnect.runtime.dataplane.source_runner`): this is the task's view of
the worker, the loop is the worker's view of the task.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from kconnect.runtime.dataplane.exactly_once import (
    TaskTransactionContext,
)
from kconnect.runtime.plugins.api import ConnectorError
from kconnect.runtime.plugins.plugin_metrics import PluginMetrics
from kconnect.runtime.storage.offset_log import OffsetState

__all__ = ["OffsetReader", "SourceContext", "no_spark"]


def no_spark() -> Any:
    """The SparkSession of a task that runs without one (on an executor): there is none to give."""
    raise ConnectorError("no SparkSession for this task")


class OffsetReader:
    """The task's ``offset_storage_reader``: the offsets this worker has read for its connector."""

    def __init__(self, connector: str, offsets: Callable[[], OffsetState]) -> None:
        self._connector = connector
        self._offsets = offsets

    def offset(self, partition: Mapping[str, Any]) -> Mapping[str, Any] | None:
        return self._offsets().offset(self._connector, partition)

    def offsets(
        self, partitions: Iterable[Mapping[str, Any]]
    ) -> list[tuple[Mapping[str, Any], Mapping[str, Any] | None]]:
        state = self._offsets()
        return [(p, state.offset(self._connector, p)) for p in partitions]


class SourceContext:
    """Java's ``SourceTaskContext`` as a task sees it: its configs, offsets, plugin metrics and, with
    exactly-once and connector-defined boundaries, its transaction context."""

    def __init__(
        self,
        config: Mapping[str, str],
        reader: OffsetReader,
        metrics: PluginMetrics,
        transactions: TaskTransactionContext | None,
        spark: Callable[[], Any] = no_spark,
    ) -> None:
        self._config = config
        self._reader = reader
        self._metrics = metrics
        self._transactions = transactions
        self._spark = spark

    def spark_session(self) -> Any:
        """The worker's SparkSession (started by the first caller), for a task that reads its input with
        Spark (the JDBC source's bulk loads); ConnectorError where the task runs without one (an executor).
        Not part of ``SourceTaskContext``: a task looks it up with ``getattr`` and does without."""
        return self._spark()

    def configs(self) -> Mapping[str, str]:
        return self._config

    @property
    def offset_storage_reader(self) -> OffsetReader:
        return self._reader

    def plugin_metrics(self) -> PluginMetrics:
        return self._metrics

    def transaction_context(self) -> TaskTransactionContext | None:
        return self._transactions
