"""A sink task as a consumer loop on its own thread: the ``worker`` placement (issue 22).

Why a second way to run a sink task: a Structured Streaming query (``sink_runner``) pays about a tenth
of a second of CPU for every micro-batch whatever its size (planning, scheduling, the checkpoint's files,
the Python round trips), and a small connector makes one micro-batch per burst of records. Ten pipelines
at 10 records a second saturated a 2-core worker that way, and a worker that runs only such tasks holds
a Spark JVM and its Python workers (about a gigabyte) for nothing. A consumer loop costs what its records
cost, as Java's WorkerSinkTask does: ``poll`` wakes for a record, converts it in Python with the
converter's record-by-record ``to_connect`` (the reference the column path is tested against), hands
``put`` at most ``MAX_PUT_RECORDS`` at a time and commits what ``pre_commit`` says is durable.

Where it applies (:func:`sink_placement`): only for tasks whose plan needs no Spark: no transforms (a
chain is a Spark plan), not a ``FrameSinkTask`` (it writes a DataFrame), no dead letter queue (whose
records are built as a frame); under a local ``spark.master``, where Spark's "executors" are this machine
anyway, always, and under a cluster master while the task's records are few (issue 32): one that sustains
``QUERY_RECORDS_PER_S`` over a review (``REVIEW_S``) is restarted as a query of its own, so that its
records move on executors.

The records come from the worker's shared reader (``sink_reader``: one consumer for every such task with
the same client settings, so that an idle task costs no fetches and no librdkafka threads of its own). The
loop reads the same partitions the query would (``kafka_reader.assigned_partitions``: each task of a
connector its round-robin share, no group rebalances), starts from the group's committed offsets (else
``consumer.auto.offset.reset``) and commits to the same group, so a task may move between placements and
workers and resume where it stopped.

The loop's commits go through a consumer of the task's own (its committer, never subscribed, as the
query runner's), not the reader's admin client: librdkafka's admin requests to a group coordinator can
abort the whole process when the coordinator's connection drops while one waits (``rd_kafka_enq_once_del_
source_return: Assertion `eonce->refcnt > 0' failed``, librdkafka 2.16.0): a worker died so, with no Python
line, at a broker kill in ``bench/brokers_random.py`` (issue 29), its commits timing out every 10 s on a
coordinator that had gone. The committed offsets are still read through the reader's admin client, once
per partition when the task starts reading it. The commits are asynchronous, as Java's WorkerSinkTask's
``commitAsync``: a coordinator that moves or is down holds no delivery; a failed commit is made again by
the next, and the last one, when the task stops, is waited for up to ``COMMIT_TIMEOUT_S``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import replace
from typing import Any

from kconnect.config.worker_keys import SinkTaskPlacement
from kconnect.runtime.dataplane.errors_policy import (
    ERROR_CLASS,
    ERROR_MESSAGE,
    ERROR_STAGE,
    RAW_KEY,
    RAW_VALUE,
    Stage,
)
from kconnect.runtime.dataplane.kafka_reader import assigned_partitions, subscribed_topics
from kconnect.runtime.dataplane.sink_batch import SinkPlan
from kconnect.runtime.dataplane.sink_reader import (
    Inbox,
    ReadError,
    Rewound,
    SinkReader,
    SinkReaders,
)
from kconnect.runtime.dataplane.sink_runner import MAX_PUT_RECORDS, SinkTaskRunner
from kconnect.runtime.dataplane.stall_watch import Reading, observe, reading, unreadable
from kconnect.runtime.dataplane.stall_watch import start as start_watch
from kconnect.runtime.plugins.api import (
    ConnectorError,
    FrameSinkTask,
    Header,
    SinkRecord,
    SinkTask,
    TopicPartition,
    frozen_record,
)

#: How long a task's thread waits for a record: an idle task's thread wakes this often, to see a stop or
#: a pause; a record that arrives ends the wait at once.
POLL_S = 1.0
#: The bound of the reader's metadata and offset requests (Java's ``default.api.timeout.ms``).
READ_TIMEOUT_S = 60.0
#: The bound of one offset commit: past it the commit is left to the next one (``_commit_durable``).
COMMIT_TIMEOUT_S = 10.0
#: How long the loop waits before asking again for its partitions when the cluster did not answer.
RETRY_S = 1.0
#: How often the task looks for its topics' partitions (new partitions, topics created later, a
#: ``topics.regex`` match); every second while it has none (its topic not created yet).
METADATA_S = 10.0
METADATA_EMPTY_S = 1.0
#: While records keep coming (a backlog), ``pre_commit`` and the commit run at most this often; once the
#: task has caught up they run at once, so that a trickle's records are durable (and a file sink's lines
#: visible) right after their ``put``.
COMMIT_BUSY_S = 1.0
#: How often the stall watch looks at the task's reading (``stall_watch``), at most; a third of the
#: worker's ``sink.task.stall.timeout.ms`` when that is shorter.
LOOK_S = 5.0
#: ``sink.task.stall.timeout.ms``'s default, for runners made without a worker's config (tests).
STALL_TIMEOUT_S = 60.0


#: On a cluster master, a sink task under ``auto`` whose records come faster than this (over one review,
#: ``REVIEW_S``) gets a Structured Streaming query of its own, so that its reads and conversion run on
#: executors; below it, the worker's consumer loop (issue 32).
QUERY_RECORDS_PER_S = 2000.0
#: How often a cluster worker reviews its consumer-loop sink tasks' rates.
REVIEW_S = 30.0


def sink_placement(
    configured: SinkTaskPlacement,
    local_master: bool,
    task: SinkTask,
    plan: SinkPlan,
    records_per_s: float | None = None,
) -> tuple[SinkTaskPlacement, str]:
    """Where a sink task runs (``worker`` or ``query``) and why, from ``sink.task.placement``.

    ``auto`` is ``worker`` under a local master. Under a cluster master it is ``worker`` too while the
    task's records are few (``records_per_s`` below ``QUERY_RECORDS_PER_S``, or not measured yet: a task
    starts on the loop), and ``query`` once they are many: a micro-batch's fixed cost is worth paying only
    for records enough to move their reads and conversion to executors. A task whose plan needs Spark
    (transforms, a frame sink, a dead letter queue) is a query whatever was asked.
    """
    needs_spark = (
        "the connector has transforms (a Spark plan)"
        if plan.chain.transforms
        else "a frame sink task writes a DataFrame"
        if isinstance(task, FrameSinkTask)
        else "the dead letter queue's records are built as a Spark frame"
        if plan.policy.dead_letter
        else ""
    )
    if configured == SinkTaskPlacement.QUERY:
        return SinkTaskPlacement.QUERY, "sink.task.placement=query"
    if needs_spark:
        return SinkTaskPlacement.QUERY, needs_spark
    if configured == SinkTaskPlacement.WORKER:
        return SinkTaskPlacement.WORKER, "sink.task.placement=worker"
    if local_master:
        return SinkTaskPlacement.WORKER, "auto, a local spark.master"
    if records_per_s is not None and records_per_s >= QUERY_RECORDS_PER_S:
        return (
            SinkTaskPlacement.QUERY,
            f"auto, a cluster spark.master and {records_per_s:.0f} records/s (at least "
            f"{QUERY_RECORDS_PER_S:.0f}): a query of its own, its records read on executors",
        )
    return (
        SinkTaskPlacement.WORKER,
        f"auto, a cluster spark.master and few records (under {QUERY_RECORDS_PER_S:.0f}/s): the worker's "
        "consumer loop",
    )


def records_of_messages(
    messages: Sequence[Any], plan: SinkPlan
) -> tuple[list[SinkRecord], list[dict[str, Any]], dict[TopicPartition, int]]:
    """Consumed messages (error-free) as SinkRecords, the rows that failed conversion (with the columns
    ``errors_policy`` reads: stage, class, message, raw key and value), and the next offset to read per
    partition (every message counts as consumed, failed ones too)."""
    records: list[SinkRecord] = []
    failed: list[dict[str, Any]] = []
    consumed: dict[TopicPartition, int] = {}
    key_converter, value_converter = plan.key_converter, plan.value_converter
    for m in messages:
        topic, partition, offset = m.topic(), m.partition(), m.offset()
        tp = TopicPartition(topic, partition)
        consumed[tp] = max(consumed.get(tp, 0), offset + 1)
        raw_key, raw_value = m.key(), m.value()
        stamp_type, stamp = m.timestamp()
        hs = m.headers()
        stage, converter = Stage.KEY_CONVERTER, key_converter
        try:
            key = key_converter.to_connect(raw_key, topic).value
            stage, converter = Stage.VALUE_CONVERTER, value_converter
            value = value_converter.to_connect(raw_value, topic).value
        except Exception as exc:
            failed.append(
                {
                    "topic": topic,
                    "partition": partition,
                    "offset": offset,
                    "timestamp": stamp if stamp_type else None,
                    RAW_KEY: raw_key,
                    RAW_VALUE: raw_value,
                    ERROR_STAGE: stage.value,
                    ERROR_CLASS: converter.java_class,
                    ERROR_MESSAGE: str(exc),
                }
            )
            continue
        records.append(
            frozen_record(
                SinkRecord,
                {
                    "topic": topic,
                    "partition": partition,
                    "offset": offset,
                    "key": key,
                    "value": value,
                    "headers": tuple(Header(k, v) for k, v in hs) if hs else (),
                    # Timestamp type 0 is TIMESTAMP_NOT_AVAILABLE: the record has none.
                    "timestamp": stamp if stamp_type and stamp >= 0 else None,
                },
            )
        )
    return records, failed, consumed


class WorkerSinkTaskRunner(SinkTaskRunner):
    """One sink task as a loop on its own thread over what the worker's shared reader
    (``sink_reader.SinkReader``) reads for it (see the module's docstring); everything after a record is
    read (``open``, ``put`` with retries, ``pre_commit``, ``SinkTaskContext`` rewinds, closing) is the query
    runner's own."""

    placement = SinkTaskPlacement.WORKER.value

    def __init__(
        self, *args: Any, readers: SinkReaders, stall_timeout_s: float = STALL_TIMEOUT_S, **kwargs: Any
    ) -> None:
        super().__init__(*args, **kwargs)
        self._readers = readers
        #: ``sink.task.stall.timeout.ms``: reading behind and unmoved this long is a stall (``stall_watch``).
        self._stall_timeout_s = stall_timeout_s
        self._look_s = min(LOOK_S, max(0.2, stall_timeout_s / 3))
        self._watch = start_watch(time.monotonic())
        #: The task's reading as /metrics and /health show it (replaced whole by each look).
        self.reading = Reading()
        self._reader: SinkReader | None = None
        self._inbox = Inbox(str(self.task_id))
        self._pattern = re.compile(self.topics_regex) if self.topics_regex else None
        #: The partitions the reader reads for this task now.
        self._reading: set[TopicPartition] = set()
        #: Partitions rewound and not yet marked (``Rewound``): their messages read before are dropped.
        self._skipping: set[TopicPartition] = set()
        #: Where the task asked the reader to start each partition (concrete offsets only), for its watch.
        self._assigned_at: dict[TopicPartition, int] = {}
        #: The reader a preparation acquired (:meth:`prepare`), until the loop takes it.
        self._warm_reader: SinkReader | None = None
        #: Asynchronous commits sent and not answered yet, when the oldest of them was sent, and whether
        #: the last answer was a failure (the loop then commits again without waiting for new records).
        self._commits_in_flight = 0
        self._commit_sent_at = 0.0
        self._commit_again = False

    def _acquire(self) -> SinkReader:
        topics = None if self._pattern is not None else self.topics
        return self._readers.acquire(self._client_conf(), self.task_id.connector, topics)

    def prepare(self) -> None:
        """A learner's preparation: the worker's shared reader acquired (made and connected if this is its
        first task), the task's share of the partitions found (metadata) and the group's committed
        positions fetched (which finds the group's coordinator), so that the loop's first assignment goes
        out on warm connections. Nothing is assigned, so nothing is read for it; nothing is committed. The
        positions are read again when the loop assigns the partitions: the task's owner commits until it
        stops."""
        reader = self._acquire()
        try:
            mine = self._mine(reader)
            committed = reader.committed(self.group_id, mine, READ_TIMEOUT_S)
        except BaseException:
            self._readers.release(reader, self.task_id.connector)
            raise
        self._warm_reader = reader
        self.log.info(
            "sink task prepared",
            group=self.group_id,
            reader=reader.name,
            committed={str(tp): offset for tp, offset in sorted(committed.items(), key=lambda i: str(i[0]))},
        )

    def _release_warm(self) -> None:
        super()._release_warm()
        reader, self._warm_reader = self._warm_reader, None
        if reader is not None:
            self._readers.release(reader, self.task_id.connector)

    def _mine(self, reader: SinkReader) -> set[TopicPartition]:
        """This task's share of its topics' partitions, from fresh metadata."""
        metadata = reader.list_topics(READ_TIMEOUT_S)
        usable = [name for name, t in metadata.topics.items() if t.error is None]
        found = [
            (topic, p)
            for topic in subscribed_topics(usable, self.topics, self._pattern)
            for p in metadata.topics[topic].partitions
        ]
        share = assigned_partitions(found, self.task_id.task, max(1, self.task_count))
        return {TopicPartition(t, p) for t, p in share}

    def _starts(self, reader: SinkReader, partitions: set[TopicPartition]) -> dict[TopicPartition, int]:
        """Where each partition is read from: the group's committed offset, else the reset policy."""
        from confluent_kafka import OFFSET_BEGINNING, OFFSET_END

        committed = reader.committed(self.group_id, partitions, READ_TIMEOUT_S)
        reset = self._consumer_settings.get("auto.offset.reset", "earliest").lower()
        starts: dict[TopicPartition, int] = {}
        for tp in partitions:
            if tp in committed:
                starts[tp] = committed[tp]
            elif reset in ("none", "error"):
                raise ConnectorError(
                    f"no committed offset for {tp.topic}-{tp.partition} in group {self.group_id} and "
                    "consumer.auto.offset.reset=none"
                )
            else:
                starts[tp] = OFFSET_END if reset in ("latest", "largest", "end") else OFFSET_BEGINNING
        return starts

    def _assign(self, reader: SinkReader, partitions: set[TopicPartition]) -> None:
        """Start reading the partitions new to this task; stop reading those no longer its own."""
        gone, new = self._reading - partitions, partitions - self._reading
        if gone:
            reader.unassign(self._inbox, gone)
        if new:
            starts = self._starts(reader, new)
            self._assigned_at.update({tp: o for tp, o in starts.items() if o >= 0})
            reader.assign(self._inbox, starts)
        for tp in gone:
            self._assigned_at.pop(tp, None)
        self._reading = set(partitions)

    def _reread_committed(self, reader: SinkReader) -> None:
        """After a rewind (``SinkTaskContext.offset``, committed by ``_rewound``): read every partition
        again from the group's committed offsets, as the query runner restarts its query."""
        self._restart.clear()
        if self._reading:
            self._skipping |= self._reading
            starts = self._starts(reader, self._reading)
            self._assigned_at.update({tp: o for tp, o in starts.items() if o >= 0})
            reader.assign(self._inbox, starts, rewind=True)

    def _new_committer(self) -> Any:
        """The task's committer (the query runner's), answering its asynchronous commits to
        :meth:`_on_commit` when the loop polls it."""
        from confluent_kafka import Consumer

        return Consumer(
            {
                **self._client_conf(),
                "group.id": self.group_id,
                "enable.auto.commit": False,
                "on_commit": self._on_commit,
            }
        )

    def _commit(self, offsets: Mapping[TopicPartition, int]) -> None:
        """A synchronous commit (a rewind's, ``SinkTaskContext.offset``) waits first for the answers of the
        asynchronous commits sent before it: an answer taken after it would note the older commit's
        higher offset as committed while the group holds the rewind's, and nothing would commit again
        past it (the group stayed at the rewind, the task believing it had committed its end)."""
        self._serve_commits(COMMIT_TIMEOUT_S)
        super()._commit(offsets)

    def _committer_ready(self) -> Any:
        if self._committer is None:
            self._committer = self._new_committer()
        return self._committer

    def _commit_durable(self, offsets: Mapping[TopicPartition, int]) -> None:
        """Send a commit of what ``pre_commit`` says is durable and go on delivering (Java's
        ``commitAsync``); its answer comes to :meth:`_on_commit` on a later poll of the committer."""
        from confluent_kafka import KafkaException
        from confluent_kafka import TopicPartition as KafkaTopicPartition

        committer = self._committer_ready()
        if self._commits_in_flight and time.monotonic() - self._commit_sent_at < COMMIT_TIMEOUT_S:
            # Its answer is awaited (a coordinator moving or down): this one goes once it came, or once
            # COMMIT_TIMEOUT_S have passed, rather than a queue of them piling up behind it.
            self._commit_again = True
            return
        try:
            committer.commit(
                offsets=[KafkaTopicPartition(tp.topic, tp.partition, o) for tp, o in offsets.items()],
                asynchronous=True,
            )
        except KafkaException as exc:
            self._commit_again = True
            self.log.warning("offset commit failed; the next commit tries again", error=str(exc))
            return
        if self._commits_in_flight == 0:
            self._commit_sent_at = time.monotonic()
        self._commits_in_flight += 1
        self._commit_again = False

    def _on_commit(self, error: Any, partitions: Sequence[Any]) -> None:
        """The answer to a commit (the committer's callback, on the task's thread): what was committed is
        noted, a failure makes the loop commit again."""
        self._commits_in_flight = max(0, self._commits_in_flight - 1)
        failed = error if error is not None else next((p.error for p in partitions if p.error), None)
        if failed is not None:
            self._commit_again = True
            self.log.warning("offset commit failed; the next commit tries again", error=str(failed))
            return
        self.counters.count_offset_commit(self._commit_sent_at)
        self._commit_sent_at = time.monotonic()  # the next answered, if more are in flight
        for p in partitions:
            tp = TopicPartition(p.topic, p.partition)
            if p.offset >= 0 and p.offset >= self._committed.get(tp, -1):
                self._committed[tp] = p.offset

    def _serve_commits(self, timeout_s: float = 0.0) -> None:
        """Take the committer's answers (``poll`` serves its callbacks; it reads nothing, being assigned
        no partition); with ``timeout_s``, wait up to that long for every commit sent to be answered."""
        if self._committer is None:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            self._committer.poll(0 if timeout_s <= 0 else 0.1)
            if timeout_s <= 0 or self._commits_in_flight == 0 or time.monotonic() >= deadline:
                return

    def _wake(self) -> None:
        super()._wake()
        self._inbox.wake()

    def _loop(self) -> None:
        """Take what the reader read while started, wait while paused; deliver, commit once caught up (or
        every ``COMMIT_BUSY_S`` while a backlog lasts)."""
        connector = self.task_id.connector
        reader, self._warm_reader = self._warm_reader, None  # a learner's preparation, taken over
        reader = self._reader = reader or self._acquire()
        try:
            self._read(reader)
        finally:
            if self._reading:
                reader.unassign(self._inbox, self._reading).wait(READ_TIMEOUT_S)
            self._readers.release(reader, connector)

    def _read(self, reader: SinkReader) -> None:
        from confluent_kafka import KafkaException

        next_metadata = 0.0
        next_look = time.monotonic() + self._look_s
        failing_since: float | None = None  # when the partitions' lookup began failing, if it is failing
        self._watch = start_watch(time.monotonic())
        pending = False  # records put since the last pre_commit
        last_commit = time.monotonic()
        while not self._stopping.is_set():
            if not self._running.is_set():
                if pending:
                    self._pre_commit()
                    pending = False
                if self.reading.stalled:  # a paused task is not stalled; its watch starts again on resume
                    self.reading = replace(self.reading, stalled=False, stalled_s=0.0, partitions=())
                self._watch = start_watch(time.monotonic())
                self._running.wait(0.5)
                continue
            now = time.monotonic()
            if now >= next_metadata:
                try:
                    self._assign(reader, self._mine(reader))
                except (KafkaException, FutureTimeout) as exc:
                    # A broker down or a coordinator moving: asked again, as Java's consumer retries; past
                    # the stall bound the task is named in /health with the error, not only logged.
                    failing_since = now if failing_since is None else failing_since
                    failing_s = time.monotonic() - failing_since
                    self.log.warning(
                        "finding the task's partitions failed; trying again",
                        error=str(exc),
                        failing_s=round(failing_s, 1),
                    )
                    self.reading = unreadable(self.reading, failing_s, self._stall_timeout_s, str(exc))
                    self._stopping.wait(RETRY_S)
                    continue
                if failing_since is not None:
                    failing_since = None
                    if self.reading.cause:
                        self.reading = replace(self.reading, stalled=False, stalled_s=0.0, cause="")
                next_metadata = now + (METADATA_S if self._reading else METADATA_EMPTY_S)
                if not self._began.is_set():
                    self.log.info(
                        "sink consumer loop started",
                        reader=reader.name,
                        group=self.group_id,
                        partitions=len(self._reading),
                    )
                self.loop_began()  # RUNNING once reading, as a query is once active: topics may be empty
            if self._restart.is_set():
                self._reread_committed(reader)
            if now >= next_look and self._reading:
                self._look(reader)
                next_look = now + self._look_s
            taken = self._inbox.take(MAX_PUT_RECORDS, 0.0 if pending else POLL_S)
            reader.drained(self._inbox)
            messages = self._usable(taken)
            if messages:
                self._deliver(messages)
                pending = True
                if self._restart.is_set():
                    continue
            caught_up = len(taken) < MAX_PUT_RECORDS
            self._serve_commits()
            if self._commit_again and not pending and time.monotonic() - last_commit >= COMMIT_BUSY_S:
                self._commit_again = False  # set again if this one fails or must wait too
                pending = True  # the last commit failed or waited: what was delivered is committed again
            if pending and (caught_up or time.monotonic() - last_commit >= COMMIT_BUSY_S):
                self._pre_commit()
                self._rewound()
                pending = False
                last_commit = time.monotonic()
        if (pending or self._commit_again) and self.failed is None and not self.fenced:
            self._pre_commit()  # what was put is made durable and committed before the task closes
        self._serve_commits(COMMIT_TIMEOUT_S)

    def _look(self, reader: SinkReader) -> None:
        """One look of the stall watch (``stall_watch``): where the task's reading stands against where its
        partitions end; a reading stalled past ``sink.task.stall.timeout.ms`` is re-established and said
        so in one log line: its partitions re-seeked in the shared reader, and if that did not bring it
        back by the next bound, the reader's consumer replaced by a fresh one."""
        now = time.monotonic()
        # The task's own partitions, not the reader's view of them: a partition the reader lost (a request
        # it refused) is exactly the one to watch. The furthest of what the reader noted, what the task
        # took and where it asked to start.
        noted = reader.positions(self._inbox)
        positions: dict[TopicPartition, int] = {}
        for tp in self._reading:
            known = [
                p for p in (noted.get(tp), self._consumed.get(tp), self._assigned_at.get(tp)) if p is not None
            ]
            if known and max(known) >= 0:
                positions[tp] = max(known)
        ends = reader.ends(positions)
        self._watch, verdict = observe(
            self._watch, now, self._stall_timeout_s, positions, ends, len(self._inbox)
        )
        self.reading = reading(self._watch, verdict, time.time(), now)
        if verdict.reestablish:
            offsets = {tp: positions[tp] for tp in verdict.reestablish}
            how = "consumer replaced" if verdict.escalate else "partitions re-seeked"
            self.log.warning(
                f"sink task's reading stalled; re-established ({how})",
                stalled_s=round(verdict.stalled_s, 1),
                lag={f"{tp.topic}-{tp.partition}": lag for tp, lag in sorted(verdict.lag.items(), key=str)},
                times=self._watch.reestablished,
                bound_s=self._stall_timeout_s,
                reader=reader.name,
            )
            if verdict.escalate:
                reader.rebuild(self._inbox, offsets)
            else:
                reader.reseek(self._inbox, offsets)

    def _usable(self, taken: list[Any]) -> list[Any]:
        """The messages to deliver of what was taken: markers and errors handled, the messages of a
        rewound partition read before its marker dropped."""
        out = []
        for item in taken:
            if isinstance(item, Rewound):
                self._skipping.discard(item.tp)
            elif isinstance(item, ReadError):
                if item.fatal:
                    raise ConnectorError(f"sink task {self.task_id} cannot read {item.tp}: {item.message}")
                self.log.warning(
                    "consumer error; the client retries", partition=str(item.tp), error=item.message
                )
            elif self._skipping and TopicPartition(item.topic(), item.partition()) in self._skipping:
                continue
            else:
                out.append(item)
        return out

    def _deliver(self, messages: Sequence[Any]) -> None:
        """One poll's messages through the converters and the ``errors.*`` policy to ``put``."""
        records, failed, consumed = records_of_messages(messages, self._plan)
        if failed:
            self._failed_rows(failed)
        self.track_topics({tp.topic for tp in consumed})
        if self._open_new(consumed) and self._rewound():
            return  # open() moved the start (a task that keeps its own offsets): nothing delivered
        if records:
            self._put(records)
        self.counters.records += len(records)
        self._consumed.update(consumed)

    def _failed_rows(self, rows: list[dict[str, Any]]) -> None:
        """Records that failed conversion: fail the task (``errors.tolerance=none``) or log and skip them
        (``all``; a dead letter queue makes the task a query, see :func:`sink_placement`)."""
        self._fail_or_log(rows)
        self.log.warning("records skipped on errors", count=len(rows))
