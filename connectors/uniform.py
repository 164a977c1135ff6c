"""What the built-in connectors have in common: every task runs the connector's own config.

File, verifiable, Parquet and JDBC connectors do no work of their own: they check their config at
``start``, hand each task a copy (sinks let Kafka's group spread the partitions; the verifiable and
Parquet/JDBC tasks also learn their index, which they use to name what they write) and have nothing to stop.
Writing that out six times hid the one line where each really differs, the check; here it is the only
thing a connector overrides, besides naming its ConfigDef, task class and index key.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from kconnect.runtime import __version__
from kconnect.runtime.plugins.api import Task
from kconnect.runtime.plugins.config_def import ConfigDef


class UniformTasks:
    """Mix in before ``SourceConnector``/``SinkConnector``: ``class X(UniformTasks, SinkConnector)``.

    ``max_tasks_cap`` limits the task count (a FileStream source reads one stream: one task).
    """

    CONFIG: ClassVar[ConfigDef]
    TASK: ClassVar[type[Task]]
    #: The key under which each task's config carries its index (0..n-1), or None for identical configs.
    TASK_INDEX_KEY: ClassVar[str | None] = None
    max_tasks_cap: ClassVar[int | None] = None

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def version(self) -> str:
        """kconnect's own version: the built-in connectors ship with the runtime, so they have no other."""
        return __version__

    def config_def(self) -> ConfigDef:
        """The class's ``CONFIG``, so that REST validation and ``start`` check the same definition."""
        return self.CONFIG

    def check(self, props: Mapping[str, str]) -> None:
        """Refuse a bad config at start, naming the key (ConfigValidationError). Default: the ConfigDef."""
        self.CONFIG.parse(props)

    def start(self, props: dict[str, str]) -> None:
        """Check the config, then keep it as every task's base: a bad config fails the connector here, naming
        the key, before any task is started with it."""
        self.check(props)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        """The class's ``TASK``, set after the task class is defined so that a module can read top-down."""
        return self.TASK

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """``max_tasks`` copies of the connector's config (capped by ``max_tasks_cap``), each with its index
        under ``TASK_INDEX_KEY`` when the class names one, so tasks that write files or tables can name them
        apart."""
        count = max_tasks if self.max_tasks_cap is None else min(max_tasks, self.max_tasks_cap)
        key = self.TASK_INDEX_KEY
        if key is None:
            return [dict(self._props) for _ in range(count)]
        return [{**self._props, key: str(i)} for i in range(count)]

    def stop(self) -> None:
        """Nothing runs in the background, so there is nothing to stop."""
