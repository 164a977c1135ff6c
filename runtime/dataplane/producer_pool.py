"""One Kafka producer shared by the worker's non-transactional source tasks that have the same settings.

Why: confluent-kafka-python takes a pthread TSS key per client instance and glibc allows 1,024 per
process (``getconf PTHREAD_KEYS_MAX``), so a worker giving each source task a producer of its own could
hold at most about 1,000 tasks (its own internal-topic clients included): the next ``Producer()`` raised
``RuntimeError: Failed to initialize thread local storage`` and the task FAILED. Each producer also
brought about three librdkafka threads. Java's tasks each have a producer too, but the JVM has no such
limit; here 1,000 tasks with the same effective settings use one producer and its few threads.

What stays per task (:class:`TaskProducer`, the handle a task produces through):

- delivery reports: the shared producer's callbacks (run on whichever thread serves it, normally the
  pool's poller thread) only queue each report on its task's handle; the task serves its own queue on
  its own thread (``poll``), so a task's ``on_delivery`` callbacks (and ``commit_record``) run where they
  did when the producer was its own, and a failed record fails only the task that sent it;
- ``flush``: waits for the task's own records only (an in-flight count per handle), never for another
  task's;
- a producer-level fatal error (``error_cb`` with a fatal error: an idempotent producer that lost its
  sequence) fails every task sharing that producer, at its next ``poll``, ``produce`` or ``flush``; the
  pool forgets that producer so tasks started later get a fresh one.

Exactly-once source tasks keep a transactional producer each (a transaction belongs to one producer).
Executor-run source tasks share a pool of their host's Python worker (``spark_source.host_producers``).
"""

from __future__ import annotations

import functools
import itertools
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from typing import Any

from kconnect.runtime import logs
from kconnect.runtime.plugins.api import ConnectorError

log = logs.get(__name__)

#: A producer's settings as the pool keys them: the sorted items of the effective config.
ProducerKey = tuple[tuple[str, Any], ...]

#: Makes a producer from its settings (``confluent_kafka.Producer``; tests pass a fake).
ProducerFactory = Callable[[dict[str, Any]], Any]

#: How long the poller waits in one ``poll``: the most a delivery report waits for it when idle.
POLL_INTERVAL_S = 0.1


def producer_key(settings: Mapping[str, Any]) -> ProducerKey:
    """The pool's key for ``settings``: equal settings, whatever their order, share a producer."""
    return tuple(sorted(settings.items()))


def _confluent_producer(settings: dict[str, Any]) -> Any:
    from confluent_kafka import Producer

    return Producer(settings)


class SharedProducer:
    """One producer, the tasks using it (counted), the thread serving its callbacks, its fatal error."""

    def __init__(
        self,
        key: ProducerKey,
        settings: Mapping[str, Any],
        factory: ProducerFactory,
        name: str,
        on_fatal: Callable[[SharedProducer], None],
    ) -> None:
        self.key = key
        self.name = name
        self.users = 0
        #: The fatal error's text once librdkafka reported one: the producer can send nothing more.
        self.fatal: str | None = None
        self._on_fatal = on_fatal
        self.producer: Any = factory({**settings, "error_cb": self._on_error})
        self._stopping = threading.Event()
        # The poller serves delivery reports (queuing them on their tasks' handles) and error_cb, so that
        # reports flow while every task is busy in its own poll().
        self._poller = threading.Thread(target=self._serve, name=f"producer-poll-{name}", daemon=True)
        self._poller.start()

    def _serve(self) -> None:
        while not self._stopping.is_set():
            try:
                self.producer.poll(POLL_INTERVAL_S)
            except Exception as exc:  # a fatal producer's poll may raise: the tasks hear of it in _check
                log.warning("serving a shared producer failed", producer=self.name, error=str(exc))
                self._stopping.wait(POLL_INTERVAL_S)

    def _on_error(self, error: Any) -> None:
        """librdkafka's error_cb: a fatal error ends the producer for every task using it; others are
        transient (brokers down, a connection reset) and librdkafka retries, so they are only logged
        (setting error_cb stops librdkafka from logging them itself)."""
        fatal = bool(getattr(error, "fatal", lambda: False)())
        if fatal and self.fatal is None:
            self.fatal = str(error)
            log.error(
                "shared source producer failed fatally",
                producer=self.name,
                users=self.users,
                error=str(error),
            )
            self._on_fatal(self)
        elif not fatal:
            log.warning("source producer error", producer=self.name, error=str(error))

    def close(self, timeout_s: float) -> None:
        """Stop serving, send what is left for at most ``timeout_s`` (only records of tasks whose own
        flush gave up), drop the rest, and close: the client's TSS key and threads are released."""
        self._stopping.set()
        self._poller.join()
        producer, self.producer = self.producer, None
        try:
            left = producer.flush(timeout_s) if self.fatal is None else len(producer)
            if left:
                log.warning(
                    "records dropped as their shared producer closed", producer=self.name, records=left
                )
                producer.purge()
                producer.flush(0)
            producer.close()
        except Exception as exc:
            log.warning("closing a shared producer failed", producer=self.name, error=str(exc))


class TaskProducer:
    """What one source task produces through: the ``produce``/``poll``/``flush`` of a producer, limited
    to the task's own records (see the module docstring)."""

    def __init__(self, shared: SharedProducer, created: bool = False) -> None:
        self.shared = shared
        #: The pool made the producer for this handle (no other task used one): it is not connected yet.
        self.created = created
        self.released = False
        self._cond = threading.Condition()
        self._reports: deque[tuple[Callable[[Any, Any], None] | None, Any, Any]] = deque()
        self._in_flight = 0  # produced and not yet reported

    @property
    def in_flight(self) -> int:
        """The task's records the producer has not reported on yet."""
        return self._in_flight

    def produce(
        self,
        topic: str,
        value: bytes | None = None,
        key: bytes | None = None,
        on_delivery: Callable[[Any, Any], None] | None = None,
        **kwargs: Any,
    ) -> None:
        """``Producer.produce`` for one of the task's records; its report is queued for the task.
        BufferError (the shared queue full) passes through: ``task_runner.produce`` polls and retries."""
        self._check()
        with self._cond:
            self._in_flight += 1
        try:
            self.shared.producer.produce(
                topic,
                value=value,
                key=key,
                on_delivery=functools.partial(self._reported, on_delivery),
                **kwargs,
            )
        except BaseException:
            with self._cond:
                self._in_flight -= 1
            raise

    def _reported(self, callback: Callable[[Any, Any], None] | None, error: Any, message: Any) -> None:
        """The producer's delivery callback, on whichever thread served it: queue it for the task's own
        thread (nothing may raise here: confluent-kafka would surface it from another task's poll)."""
        with self._cond:
            self._in_flight -= 1
            self._reports.append((callback, error, message))
            self._cond.notify_all()

    def poll(self, timeout: float = 0) -> int:
        """Run the task's queued delivery callbacks on this (the task's) thread; with ``timeout``, wait
        that long for one first when none is queued (what ``produce`` does while the queue is full).
        Returns how many were run. Raises ConnectorError once the shared producer failed fatally."""
        self._check()
        with self._cond:
            if not self._reports and timeout > 0:
                self._cond.wait(timeout)
            reports, self._reports = self._reports, deque()
        for callback, error, message in reports:
            if callback is not None:
                callback(error, message)
        return len(reports)

    def flush(self, timeout: float = -1) -> int:
        """Wait until every record of this task was reported (at most ``timeout`` seconds, forever when
        negative), run their callbacks, and return how many are still unreported. Other tasks' records
        are not waited for."""
        deadline = None if timeout < 0 else time.monotonic() + timeout
        with self._cond:
            while self._in_flight and self.shared.fatal is None:
                remaining = POLL_INTERVAL_S if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    break
                self._cond.wait(min(remaining, POLL_INTERVAL_S))
            left = self._in_flight
        self.poll(0)
        return left

    def __len__(self) -> int:
        return self._in_flight

    def _check(self) -> None:
        if self.released:
            raise ConnectorError("the task's producer was released")
        fatal = self.shared.fatal
        if fatal is not None:
            raise ConnectorError(
                f"the producer this task shares with {self.shared.users - 1} other source task(s) of the "
                f"same producer settings ({self.shared.name}) failed fatally: {fatal}"
            )


class ProducerPool:
    """The worker's shared source producers, one per distinct effective settings, reference-counted:
    created by the first task that acquires them, closed when the last one releases them."""

    def __init__(self, factory: ProducerFactory = _confluent_producer) -> None:
        self._factory = factory
        self._lock = threading.Lock()
        self._producers: dict[ProducerKey, SharedProducer] = {}
        self._names = itertools.count(1)

    def acquire(self, settings: Mapping[str, Any]) -> TaskProducer:
        """A handle on the producer for ``settings`` (created now if no task uses one); release it with
        :meth:`release`. ``client.id`` defaults to ``connector-producer-pool-<n>`` (a task's id would
        name only the first of its users)."""
        key = producer_key(settings)
        with self._lock:
            shared = self._producers.get(key)
            created = shared is None
            if shared is None:
                name = f"connector-producer-pool-{next(self._names)}"
                effective = {"client.id": name, **settings}
                shared = SharedProducer(key, effective, self._factory, name, self._forget)
                self._producers[key] = shared
                log.info("shared source producer created", producer=name, producers=len(self._producers))
            shared.users += 1
            return TaskProducer(shared, created)

    def release(self, handle: TaskProducer, timeout_s: float) -> None:
        """The task is done with ``handle`` (idempotent); the last user closes the producer, waiting at
        most ``timeout_s`` for records still on their way."""
        with self._lock:
            if handle.released:
                return
            handle.released = True
            shared = handle.shared
            shared.users -= 1
            last = shared.users == 0
            if last and self._producers.get(shared.key) is shared:
                del self._producers[shared.key]
        if last:
            shared.close(timeout_s)
            log.info("shared source producer closed", producer=shared.name)

    def _forget(self, shared: SharedProducer) -> None:
        """A fatally failed producer is no longer handed out; its users still release it."""
        with self._lock:
            if self._producers.get(shared.key) is shared:
                del self._producers[shared.key]

    def __len__(self) -> int:
        """How many producers the pool hands out now."""
        with self._lock:
            return len(self._producers)

    def users(self, settings: Mapping[str, Any]) -> int:
        """How many tasks use the producer for ``settings`` now (0: none is open)."""
        with self._lock:
            shared = self._producers.get(producer_key(settings))
            return 0 if shared is None else shared.users
