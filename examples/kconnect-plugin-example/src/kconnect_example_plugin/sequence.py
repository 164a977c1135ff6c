"""A source connector that counts: records with values ``{"seq": n}`` for n = 0, 1, 2, ...

It shows the parts every source needs: a config definition (validated by ``PUT
/connector-plugins/.../config/validate`` and at start), task configs, records that carry a source
partition and offset, and a task that resumes from the offset the runtime committed for it.
"""

from __future__ import annotations

import threading
from typing import Any

from kconnect.runtime.plugins.api import SourceConnector, SourceRecord, SourceTask, Task
from kconnect.runtime.plugins.config_def import NO_DEFAULT, ConfigDef, Importance, NonEmptyString, Range, Type

from . import plugin_version

TOPIC = "topic"
COUNT = "count"
BATCH_SIZE = "batch.size"
INTERVAL_MS = "poll.interval.ms"

CONFIG_DEF = (
    ConfigDef()
    .define(TOPIC, Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH, "Topic to write to.")
    .define(
        COUNT,
        Type.LONG,
        -1,
        Range.at_least(-1),
        Importance.MEDIUM,
        "How many numbers to write in all; -1 writes forever.",
    )
    .define(BATCH_SIZE, Type.INT, 100, Range.at_least(1), Importance.LOW, "Most records per poll.")
    .define(INTERVAL_MS, Type.LONG, 100, Range.at_least(0), Importance.LOW, "Pause between two polls, in ms.")
)


class SequenceSourceConnector(SourceConnector):
    """One sequence, so one task whatever ``tasks.max`` says."""

    def __init__(self) -> None:
        self._props: dict[str, str] = {}

    def version(self) -> str:
        return plugin_version()

    def config_def(self) -> ConfigDef:
        return CONFIG_DEF

    def start(self, props: dict[str, str]) -> None:
        CONFIG_DEF.parse(props)  # a bad value fails the connector with a message naming the key
        self._props = dict(props)

    def task_class(self) -> type[Task]:
        return SequenceSourceTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self._props)]

    def stop(self) -> None:
        """Nothing runs in the background."""


class SequenceSourceTask(SourceTask):
    def __init__(self) -> None:
        self._stopped = threading.Event()
        self._next = 0
        self._topic = ""
        self._count = -1
        self._batch = 100
        self._interval_s = 0.1
        self._partition: dict[str, Any] = {}

    def version(self) -> str:
        return plugin_version()

    def start(self, props: dict[str, str]) -> None:
        parsed = CONFIG_DEF.parse(props)
        self._topic = parsed[TOPIC]
        self._count = int(parsed[COUNT])
        self._batch = int(parsed[BATCH_SIZE])
        self._interval_s = int(parsed[INTERVAL_MS]) / 1000
        # One source partition per connector: its offset is the next number to write.
        self._partition = {"sequence": props.get("name", "sequence")}
        if self.context is not None:
            committed = self.context.offset_storage_reader.offset(self._partition)
            if committed is not None:
                self._next = int(committed["next"])

    def poll(self) -> list[SourceRecord] | None:
        if self._stopped.wait(self._interval_s):
            return None
        end = self._next + self._batch
        if self._count >= 0:
            end = min(end, self._count)
        if end <= self._next:
            return None  # all written; the runtime polls again later
        records = [
            SourceRecord(self._partition, {"next": n + 1}, self._topic, value={"seq": n})
            for n in range(self._next, end)
        ]
        self._next = end
        return records

    def stop(self) -> None:
        self._stopped.set()
