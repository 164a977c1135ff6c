"""A source task's exactly-once loop (KIP-618): records and source offsets in one producer transaction
per boundary (``transaction.boundary``: poll, interval or connector).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import Any

from kconnect.runtime.dataplane.exactly_once import (
    ExactlyOnce,
    TaskTransactionContext,
    commit_due,
    connector_boundaries,
    producer_settings,
)
from kconnect.runtime.dataplane.source_offsets import latest_source_offsets
from kconnect.runtime.dataplane.source_records import Outgoing, SourceRecordPreparation
from kconnect.runtime.dataplane.task_runner import produce
from kconnect.runtime.plugins.api import ConnectorError, SourceRecord
from kconnect.runtime.storage.offset_log import OffsetState
from kconnect.runtime.storage.offset_log import encode as encode_offset

__all__ = ["TransactionalSourceLoop"]


class TransactionalSourceLoop(SourceRecordPreparation):
    """The exactly-once (KIP-618) poll loop of a source task: one producer transaction per boundary,
    records and their offsets together.

    Why a base class of its own: the transactional loop shares only record preparation with the plain
    loop; its state (the open transaction's records and acknowledgements) is its own. The attributes
    below are set by :class:`~kconnect.runtime.dataplane.source_runner.SourceTaskRunner`.
    """

    eos: ExactlyOnce | None
    _fence: Callable[[str], None] | None
    _sync_offsets: Callable[[], OffsetState] | None
    _bootstrap: str
    _producer_settings: dict[str, str]
    _flush_timeout_s: float
    _transactions: TaskTransactionContext | None
    _open: list[SourceRecord]
    _acks: dict[int, Any]
    _in_transaction: bool
    _begun: float
    _generation: int

    def _run_transactional(self, eos: ExactlyOnce) -> None:
        """The poll loop with one producer transaction per boundary, records and offsets together.

        Order as Java's: the connector's task generation fenced first (``fence``: the leader's round of
        zombie fencing, done once per new generation), then ``init_transactions`` (fences every older
        instance of this task and aborts what it left open), then the offsets read to the end of the
        topic (only committed ones: the worker reads with read_committed), and only then ``task.start``,
        so the task resumes after the last record that was committed with its offset.
        """
        from confluent_kafka import KafkaException, Producer

        if self._fence is not None:
            self._fence(self.task_id.connector)
        producer = Producer(
            {
                "bootstrap.servers": self._bootstrap,
                "client.id": f"connector-producer-{self.task_id}",
                **producer_settings(self._producer_settings, eos),
            }
        )
        timeout_s = max(self._flush_timeout_s, 30.0)
        try:
            producer.init_transactions(timeout_s)
        except KafkaException as exc:
            raise ConnectorError(self._transaction_failure("initializing transactions", exc)) from exc
        self.log.info("transactional producer ready", transactional_id=eos.transactional_id)
        if self._sync_offsets is not None:
            self._sync_offsets()
        self.source.start(dict(self.config))
        self.loop_began()
        clean = False
        try:
            while not self._stopping.is_set():
                if not self._running.is_set():
                    # Java commits when the task is paused, so that no transaction hangs open (a
                    # connector-defined one only if the task asked: its boundaries are its own).
                    self._end_final_transaction(producer, eos)
                    self._running.wait(0.5)
                    continue
                records = self.source.poll() or []
                self.counters.records += len(records)
                prepared = self._prepare(records)
                if self._transactions is not None:
                    self._dispatch_connector_defined(producer, eos, self._transactions, prepared)
                    continue
                self._dispatch(producer, prepared)
                due = commit_due(
                    eos.policy, open_records=len(self._open), now_s=time.monotonic(), begun_s=self._begun
                )
                if due:
                    self._commit_transaction(producer, eos)
            clean = True
        finally:
            if clean:
                # A clean stop commits what was polled, as Java's final offset commit does.
                self._end_final_transaction(producer, eos)
            self._abort_transaction(producer)  # what a failure, or a task that never ended it, left open
            self._final_flush(producer, clean)

    def _final_flush(self, producer: Any, clean: bool) -> None:
        """Flush what is left; a fenced producer fails here too. After a clean loop that failure is the
        task's, said as every transactional failure is (naming the transactional.id and the fencing); while
        another failure is already on its way out, that one says why and this one must not replace it."""
        from confluent_kafka import KafkaException

        try:
            producer.flush(5)
        except KafkaException as exc:
            if clean:
                raise ConnectorError(self._transaction_failure("flushing at stop", exc)) from exc
            self.log.warning("final flush failed", error=str(exc))

    def _dispatch(self, producer: Any, prepared: list[tuple[SourceRecord, Outgoing | None]]) -> None:
        """Send records into the open transaction (begun by the first), then serve delivery reports."""
        from confluent_kafka import KafkaException

        for record, out in prepared:
            self._begin(producer)
            if out is not None:
                topic, key, value, kwargs = out
                kwargs["on_delivery"] = self._transactional_ack(len(self._open))
                try:
                    produce(producer, topic, key, value, kwargs)
                except KafkaException as exc:
                    raise ConnectorError(self._transaction_failure("producing a record", exc)) from exc
            # Skipped or dropped records' offsets commit with the others (commit_record with None).
            self._open.append(record)
        producer.poll(0)
        if self._delivery_error is not None:
            raise ConnectorError(self._delivery_error)

    def _dispatch_connector_defined(
        self,
        producer: Any,
        eos: ExactlyOnce,
        transactions: TaskTransactionContext,
        prepared: list[tuple[SourceRecord, Outgoing | None]],
    ) -> None:
        """One batch under ``transaction.boundary=connector``: send it in runs, ending the transaction
        where the task's requests say (:func:`connector_boundaries`); the rest stays open.

        The requests are taken once the batch is in hand, so those made while ``poll`` ran (the usual
        place) apply to this batch; a batch request applies after an empty poll too, as in Java.
        """
        requests = transactions.take([record for record, _ in prepared])
        done = 0
        for end in connector_boundaries(len(prepared), len(self._open), requests):
            self._dispatch(producer, prepared[done : end.after])
            done = end.after
            if end.abort:
                self._abort_and_commit_offsets(producer, eos)
            else:
                self._commit_transaction(producer, eos)
        self._dispatch(producer, prepared[done:])  # also when empty: it serves delivery reports

    def _end_final_transaction(self, producer: Any, eos: ExactlyOnce) -> None:
        """At a pause or a clean stop: commit the open transaction, or under ``connector`` boundaries only
        what the task asked for with a batch request (Java's ``shouldCommitFinalTransaction``). What a
        stop leaves open is then aborted without its offsets, so the next instance polls it again: Java
        leaves it to the broker's transaction timeout or the next instance's fencing, to the same end."""
        if self._transactions is None:
            self._commit_transaction(producer, eos)
            return
        for end in connector_boundaries(0, len(self._open), self._transactions.take(())):
            if end.abort:
                self._abort_and_commit_offsets(producer, eos)
            else:
                self._commit_transaction(producer, eos)

    def _begin(self, producer: Any, *, again: bool = False) -> None:
        """Begin a transaction unless one is open; ``again``: after an abort, for its offsets alone."""
        from confluent_kafka import KafkaException

        if not again and (self._open or self._in_transaction):
            return
        try:
            producer.begin_transaction()
        except KafkaException as exc:
            raise ConnectorError(self._transaction_failure("beginning a transaction", exc)) from exc
        self._in_transaction = True
        self._begun = time.monotonic()

    def _transactional_ack(self, index: int) -> Callable[[Any, Any], None]:
        """Delivery callback under a transaction: keep the metadata; ``commit_record`` waits for the commit
        (an acknowledged record of an aborted transaction never reaches a read_committed reader)."""
        generation = self._generation

        def delivered(error: Any, message: Any) -> None:
            # Nothing may raise here: an exception inside a librdkafka callback surfaces as a SystemError
            # from whichever poll or flush served it, without the cause.
            if generation != self._generation:
                return  # a record of a transaction the task aborted: purged or discarded, as it asked
            if error is None:
                self._acks[index] = message
            elif self._delivery_error is None:
                try:
                    self._delivery_error = self._transaction_failure(f"producing to {message.topic()}", error)
                except Exception as exc:
                    self._delivery_error = f"producing to {message.topic()} failed: {error} ({exc!r})"

        return delivered

    def _transaction_failure(self, doing: str, cause: Any) -> str:
        """The task's failure message; names fencing plainly, since it means another instance runs.

        ``cause`` is a KafkaException (which carries a KafkaError) or a KafkaError from a delivery report.
        """
        error = cause.args[0] if isinstance(cause, Exception) and cause.args else cause
        code = getattr(error, "code", lambda: None)()
        from confluent_kafka import KafkaError

        fenced_codes = {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
        transactional_id = self.eos.transactional_id if self.eos is not None else "?"
        if code in fenced_codes or "fenced" in str(error).lower():
            return (
                f"The transactional producer of task {self.task_id} (transactional.id={transactional_id}) "
                f"was fenced out while {doing}: a newer instance of this task has started elsewhere "
                f"(zombie fencing), so this one stops without committing. Cause: {error}"
            )
        return f"Task {self.task_id} failed while {doing} (transactional.id={transactional_id}): {error}"

    def _abort_and_commit_offsets(self, producer: Any, eos: ExactlyOnce) -> None:
        """The task asked for an abort: discard the open transaction's records, then commit their source
        offsets in a transaction of their own, so that the task is not handed the same input again after
        a restart (Java does the same). ``commit_record`` then gets None for them: no reader sees them."""
        from confluent_kafka import KafkaException

        if not self._open:
            return
        if self._in_transaction:
            self._generation += 1
            self._in_transaction = False
            try:
                _settle_then_abort(producer, max(self._flush_timeout_s, 30.0))
            except KafkaException as exc:
                raise ConnectorError(self._transaction_failure("aborting a transaction", exc)) from exc
            self._acks = {}
        self.log.info("transaction aborted as the task asked", records=len(self._open))
        self._begin(producer, again=True)
        self._commit_transaction(producer, eos)

    def _commit_transaction(self, producer: Any, eos: ExactlyOnce) -> None:
        """Add the open records' offsets to the transaction, commit it, then tell the task."""
        from confluent_kafka import KafkaException

        if not self._open:
            return
        started = time.monotonic()
        records, self._open = self._open, []
        try:
            for offset in latest_source_offsets(self.task_id.connector, records):
                key, value = encode_offset(offset)
                produce(producer, eos.offsets_topic, key, value, {"on_delivery": self._on_delivery})
            # commit_transaction flushes and reports a failed send or a fencing as its own error. No
            # flush() before it: with a fenced (fatal) producer confluent-kafka's flush raises a bare
            # SystemError that hides the cause.
            producer.commit_transaction(max(self._flush_timeout_s, 30.0))
        except KafkaException as exc:
            self._in_transaction = False
            message = self._transaction_failure("committing a transaction", exc)
            error = exc.args[0] if exc.args else None
            if not (error is not None and error.fatal()):
                # A fatal (fenced) producer can abort nothing; the newer instance's init aborted it.
                self._try_abort(producer)
            raise ConnectorError(message) from exc
        except ConnectorError:
            self._in_transaction = False
            self._try_abort(producer)
            raise
        self._in_transaction = False
        producer.flush(self._flush_timeout_s)  # nothing is outstanding: this serves the delivery reports
        acks, self._acks = self._acks, {}
        self.counters.count_offset_commit(started)
        if self.active_topics is not None:
            self.track_topics({message.topic() for message in acks.values()})
        for index, record in enumerate(records):
            self._tell_task(record, acks.get(index))  # None: skipped or dropped by the chain, never produced
        self.source.commit()

    def _try_abort(self, producer: Any) -> None:
        try:
            _settle_then_abort(producer, 10.0)
        except Exception as exc:  # fenced or fatal: the broker aborts it when the new instance inits
            self.log.warning("aborting the transaction failed", error=str(exc))

    def _abort_transaction(self, producer: Any) -> None:
        """On failure nothing polled since the last commit may become visible (Java aborts too)."""
        if self._in_transaction:
            self._generation += 1
            self._in_transaction = False
            self._open = []
            self._acks = {}
            self._try_abort(producer)


def _settle_then_abort(producer: Any, timeout_s: float) -> None:
    """Abort the open transaction once what it sent was acknowledged.

    librdkafka sends EndTxn as soon as the transaction's AddPartitionsToTxn request has been *sent*, not
    answered (confluentinc/librdkafka#4849): an abort right after the transaction's first produce can
    reach the coordinator while the transaction is still Empty there, and the coordinator's
    INVALID_TXN_STATE is fatal to the producer (a task failed so, 2026-11-29). A delivered record proves
    its partition was added, so the records are waited for first; they stay invisible to read_committed
    readers all the same, since the transaction is then aborted. The records' delivery reports belong to
    the aborted generation and are ignored. A producer that cannot flush (fenced, fatal) still gets the
    abort, which raises the real cause.
    """
    deadline = time.monotonic() + timeout_s
    # A fatal producer's flush raises a bare SystemError; the abort below raises the cause.
    with contextlib.suppress(Exception):
        producer.flush(timeout_s)
    producer.abort_transaction(max(deadline - time.monotonic(), 1.0))
