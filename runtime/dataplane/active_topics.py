"""Active topics (KIP-558): each topic a task produces to or consumes from, recorded once per connector.

Why here and not in the runners: both kinds of runner call one :class:`ActiveTopics` with the topics a
batch touched, and the rule (what counts as recorded, when to try again) stays in one place. Apache Kafka
Connect's ``WorkerTask.recordActiveTopic`` writes a ``status-topic-<topic>:connector-<name>`` record
whenever its status store's cache (the status topic as read back) lacks one; a source task after the
producer acknowledged the record (under the topic the transforms gave it), a sink task for every record
consumed (under the topic it was read from). Between the write and its read-back Java may write the same
record again; this class remembers what it wrote so that a batch of a million records writes one, and
forgets it once the status topic shows it, so that a ``PUT /connectors/<name>/topics/reset`` is followed
by a fresh record on the next use, as in Java.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

from kconnect.runtime import logs
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.status_log import TopicStatus

log = logs.get(__name__)

#: A written record not read back after this long is written again (its write may have been lost, or a
#: reset may have tombstoned it before this task saw it).
RETRY_S = 30.0


class ActiveTopics:
    """One task's topic tracking: ``known(connector, topic)`` says whether the status topic as read has
    the record, ``write`` writes one (a round trip to the status topic, made once per new topic)."""

    def __init__(
        self,
        task: TaskId,
        known: Callable[[str, str], bool],
        write: Callable[[TopicStatus], None],
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._task = task
        self._known = known
        self._write = write
        self._clock = clock
        #: topic -> when its record was written and not yet read back.
        self._written: dict[str, float] = {}

    def record(self, topics: Iterable[str]) -> None:
        """Record each of ``topics`` that the status topic does not show yet.

        A failed write is logged, not raised: tracking is bookkeeping, and a task must not fail because
        the status topic is briefly unavailable; a batch that touches the topic ``RETRY_S`` later tries
        again (not the next one: each try may wait for the write's timeout).
        """
        connector = self._task.connector
        for topic in topics:
            if self._known(connector, topic):
                self._written.pop(topic, None)
                continue
            now = self._clock()
            at = self._written.get(topic)
            if at is not None and now - at < RETRY_S:
                continue
            self._written[topic] = now  # also after a failure: the next try comes RETRY_S later
            try:
                self._write(TopicStatus(topic, connector, self._task.task, int(now * 1000)))
            except Exception as exc:
                log.warning(
                    "could not record an active topic", topic=topic, task=str(self._task), error=str(exc)
                )
