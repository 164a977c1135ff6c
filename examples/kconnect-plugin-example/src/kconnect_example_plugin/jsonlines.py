"""A sink connector that appends each record's value to a file as one line of JSON.

It shows the sink contract: ``put`` receives a batch, ``flush`` makes it durable, and only then does the
runtime commit the consumer offsets, so a restarted task re-delivers at most what was not flushed.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import IO

from kconnect.runtime.plugins.api import SinkConnector, SinkRecord, SinkTask, Task, TopicPartition
from kconnect.runtime.plugins.config_def import NO_DEFAULT, ConfigDef, Importance, NonEmptyString, Type

from . import plugin_version

FILE = "file"

CONFIG_DEF = ConfigDef().define(
    FILE, Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH, "File the values are appended to."
)


class JsonLinesSinkConnector(SinkConnector):
    """Every task appends to the same file, so one task is all that makes sense."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def version(self) -> str:
        return plugin_version()

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def start(self, props: dict[str, str]) -> None:
        CONFIG_DEF.parse(props)
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return JsonLinesSinkTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props)]

    def stop(self) -> None:
        """Nothing runs in the background."""


class JsonLinesSinkTask(SinkTask):
    def __init__(self) -> None:
        self._out: IO[str] | None = None

    def version(self) -> str:
        return plugin_version()

    def start(self, props: dict[str, str]) -> None:
        self._out = open(CONFIG_DEF.parse(props)[FILE], "a", encoding="utf-8")  # noqa: SIM115

    def put(self, records: Sequence[SinkRecord]) -> None:
        assert self._out is not None
        for record in records:
            self._out.write(json.dumps(record.value, sort_keys=True) + "\n")

    def flush(self, current_offsets: Mapping[TopicPartition, int]) -> None:
        if self._out is not None:
            self._out.flush()
            os.fsync(self._out.fileno())

    def stop(self) -> None:
        if self._out is not None:
            self._out.close()
            self._out = None
