"""The shared source producers (``producer_pool``): keys, reference counts, closing on the last release,
and the per-task accounting of delivery reports, flushes and errors, against a fake producer."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from kconnect.runtime.dataplane.producer_pool import ProducerPool, TaskProducer
from kconnect.runtime.dataplane.source_runner import SourceTaskRunner
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import ConnectorError, SourceRecord, SourceTask
from kconnect.runtime.storage.offset_log import OffsetState, SourceOffset


class _Message:
    def __init__(self, topic: str) -> None:
        self._topic = topic

    def topic(self) -> str:
        return self._topic


class _Error:
    def __init__(self, text: str, fatal: bool) -> None:
        self._text, self._fatal = text, fatal

    def fatal(self) -> bool:
        return self._fatal

    def __str__(self) -> str:
        return self._text


class FakeProducer:
    """Records what is produced; the test delivers (or fails) records by hand, on any thread."""

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings = settings
        self.sent: list[tuple[str, Any, Any]] = []  # topic, value, on_delivery
        self.closed = False
        self.full = False  # produce raises BufferError, as librdkafka's full local queue

    def produce(self, topic: str, value: Any = None, key: Any = None, **kwargs: Any) -> None:
        if self.full:
            raise BufferError("queue full")
        self.sent.append((topic, value, kwargs["on_delivery"]))

    def poll(self, timeout: float = 0) -> int:
        time.sleep(min(timeout, 0.01))  # the pool's poller thread: nothing to serve
        return 0

    def flush(self, _timeout: float = 0) -> int:
        return 0

    def __len__(self) -> int:
        return 0

    def purge(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True

    def deliver(self, value: Any, error: Any = None) -> None:
        """Report the record sent with ``value``, as the thread serving the producer would."""
        for topic, sent_value, on_delivery in self.sent:
            if sent_value == value:
                on_delivery(error, _Message(topic))
                return
        raise AssertionError(f"{value!r} was never produced")

    def fail_fatally(self, text: str) -> None:
        self.settings["error_cb"](_Error(text, fatal=True))


class _Factory:
    def __init__(self) -> None:
        self.made: list[FakeProducer] = []

    def __call__(self, settings: dict[str, Any]) -> FakeProducer:
        producer = FakeProducer(settings)
        self.made.append(producer)
        return producer


@pytest.fixture
def factory() -> _Factory:
    return _Factory()


@pytest.fixture
def pool(factory: _Factory) -> ProducerPool:
    return ProducerPool(factory)


def test_tasks_with_equal_settings_share_one_producer_whatever_the_order(
    pool: ProducerPool, factory: _Factory
) -> None:
    first = pool.acquire({"bootstrap.servers": "b:9092", "acks": "all"})
    second = pool.acquire({"acks": "all", "bootstrap.servers": "b:9092"})
    other = pool.acquire({"bootstrap.servers": "b:9092", "acks": "1"})
    assert first.shared is second.shared
    assert other.shared is not first.shared
    assert len(factory.made) == 2 and len(pool) == 2
    assert pool.users({"bootstrap.servers": "b:9092", "acks": "all"}) == 2
    # A client.id the settings do not give names the shared producer, not one of its tasks.
    assert factory.made[0].settings["client.id"] != factory.made[1].settings["client.id"]
    assert factory.made[0].settings["client.id"].startswith("connector-producer-pool-")
    for handle in (first, second, other):
        pool.release(handle, 1.0)


def test_a_producer_closes_when_its_last_task_releases_it_and_a_later_task_gets_a_new_one(
    pool: ProducerPool, factory: _Factory
) -> None:
    settings = {"bootstrap.servers": "b:9092"}
    first, second = pool.acquire(settings), pool.acquire(settings)
    pool.release(first, 1.0)
    pool.release(first, 1.0)  # twice: still one release
    assert pool.users(settings) == 1
    assert not factory.made[0].closed
    pool.release(second, 1.0)
    assert factory.made[0].closed
    assert len(pool) == 0 and pool.users(settings) == 0
    third = pool.acquire(settings)
    assert len(factory.made) == 2 and third.shared is not first.shared
    with pytest.raises(ConnectorError, match="released"):
        first.produce("t", b"late")
    pool.release(third, 1.0)


def test_delivery_reports_run_on_their_own_tasks_thread_and_flush_waits_for_its_own_records_only(
    pool: ProducerPool, factory: _Factory
) -> None:
    settings = {"bootstrap.servers": "b:9092"}
    a, b = pool.acquire(settings), pool.acquire(settings)
    heard: list[tuple[str, Any, int]] = []

    def callback(task: str) -> Any:
        return lambda error, _message: heard.append((task, error, threading.get_ident()))

    a.produce("t", b"a1", on_delivery=callback("a"))
    b.produce("t", b"b1", on_delivery=callback("b"))
    assert (a.in_flight, b.in_flight) == (1, 1)
    server = threading.Thread(target=factory.made[0].deliver, args=(b"a1",))
    server.start()
    server.join()
    assert heard == []  # queued for task a, not run on the thread that served the producer
    assert a.flush(0) == 0  # a's record is in; b's still on its way does not count for a
    assert heard == [("a", None, threading.get_ident())]
    assert b.flush(0) == 1
    assert b.poll(0) == 0 and len(heard) == 1
    factory.made[0].deliver(b"b1")
    assert b.poll(0) == 1
    assert heard[-1][0] == "b"
    pool.release(a, 1.0)
    pool.release(b, 1.0)


def test_a_failed_record_reaches_only_its_own_tasks_callback(pool: ProducerPool, factory: _Factory) -> None:
    settings = {"bootstrap.servers": "b:9092"}
    a, b = pool.acquire(settings), pool.acquire(settings)
    errors: dict[str, list[Any]] = {"a": [], "b": []}
    a.produce("t", b"a1", on_delivery=lambda error, _m: errors["a"].append(error))
    b.produce("t", b"b1", on_delivery=lambda error, _m: errors["b"].append(error))
    factory.made[0].deliver(b"a1", error="MSG_SIZE_TOO_LARGE")
    factory.made[0].deliver(b"b1")
    a.poll(0)
    b.poll(0)
    assert errors == {"a": ["MSG_SIZE_TOO_LARGE"], "b": [None]}
    b.produce("t", b"b2")  # b carries on with the same producer
    pool.release(a, 1.0)
    pool.release(b, 1.0)


def test_a_record_the_full_queue_refused_is_not_counted_in_flight(
    pool: ProducerPool, factory: _Factory
) -> None:
    handle = pool.acquire({"bootstrap.servers": "b:9092"})
    factory.made[0].full = True
    with pytest.raises(BufferError):
        handle.produce("t", b"x")
    assert handle.in_flight == 0 and handle.flush(0) == 0
    pool.release(handle, 1.0)


def test_a_fatal_producer_error_fails_every_task_sharing_it_and_is_not_handed_out_again(
    pool: ProducerPool, factory: _Factory
) -> None:
    settings = {"bootstrap.servers": "b:9092"}
    a, b = pool.acquire(settings), pool.acquire(settings)
    other = pool.acquire({"bootstrap.servers": "b:9092", "acks": "1"})
    factory.made[0].fail_fatally("OUT_OF_ORDER_SEQUENCE_NUMBER")
    for handle in (a, b):
        with pytest.raises(ConnectorError, match="OUT_OF_ORDER_SEQUENCE_NUMBER"):
            handle.poll(0)
        with pytest.raises(ConnectorError, match="failed fatally"):
            handle.produce("t", b"x")
    other.poll(0)  # a producer of other settings is not affected
    fresh = pool.acquire(settings)
    assert fresh.shared is not a.shared and len(factory.made) == 3
    pool.release(a, 1.0)
    pool.release(b, 1.0)
    assert factory.made[0].closed  # its last user released the failed producer
    for handle in (fresh, other):
        pool.release(handle, 1.0)


class _Source(SourceTask):
    def version(self) -> str:
        return "test"

    def start(self, props: dict[str, str]) -> None:
        pass

    def poll(self) -> list[SourceRecord] | None:
        return None

    def stop(self) -> None:
        pass


def _runner(name: str, written: list[list[SourceOffset]], pool: ProducerPool) -> SourceTaskRunner:
    return SourceTaskRunner(
        TaskId(name, 0),
        _Source(),
        {},
        lambda _task, _trace: None,
        bootstrap="unused:9092",
        converters={
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
        },
        producer_settings={},
        read_offsets=OffsetState,
        write_offsets=written.append,
        flush_interval_ms=1000,
        flush_timeout_ms=0,
        producers=pool,
    )


def test_a_tasks_offset_commit_waits_only_for_its_own_records_on_a_shared_producer(
    pool: ProducerPool, factory: _Factory
) -> None:
    """Two source tasks on one producer: a's final flush commits a's offset although b's record is still
    on its way, and b's offset is committed once b's own record is in."""
    written_a: list[list[SourceOffset]] = []
    written_b: list[list[SourceOffset]] = []
    runner_a, runner_b = _runner("a", written_a, pool), _runner("b", written_b, pool)
    handle_a: TaskProducer = pool.acquire({"bootstrap.servers": "b:9092"})
    handle_b: TaskProducer = pool.acquire({"bootstrap.servers": "b:9092"})
    runner_a._send(handle_a, [SourceRecord({"f": "a"}, {"position": 1}, "t", value="a1")])
    runner_b._send(handle_b, [SourceRecord({"f": "b"}, {"position": 1}, "t", value="b1")])
    factory.made[0].deliver(b"a1")
    runner_a._flush(handle_a, final=True)
    assert written_a == [[SourceOffset("a", {"f": "a"}, {"position": 1})]]
    runner_b._flush(handle_b, final=True)  # offset.flush.timeout.ms 0: b's record is not in yet
    assert written_b == []
    factory.made[0].deliver(b"b1")
    runner_b._flush(handle_b, final=True)
    assert written_b == [[SourceOffset("b", {"f": "b"}, {"position": 1})]]
    pool.release(handle_a, 1.0)
    pool.release(handle_b, 1.0)


def test_a_failed_record_fails_only_the_task_that_sent_it(pool: ProducerPool, factory: _Factory) -> None:
    written: list[list[SourceOffset]] = []
    runner_a, runner_b = _runner("a", written, pool), _runner("b", written, pool)
    handle_a = pool.acquire({"bootstrap.servers": "b:9092"})
    handle_b = pool.acquire({"bootstrap.servers": "b:9092"})
    runner_a._send(handle_a, [SourceRecord({"f": "a"}, {"position": 1}, "t", value="a1")])
    runner_b._send(handle_b, [SourceRecord({"f": "b"}, {"position": 1}, "t", value="b1")])
    factory.made[0].deliver(b"a1", error="TOPIC_AUTHORIZATION_FAILED")
    factory.made[0].deliver(b"b1")
    with pytest.raises(ConnectorError, match="TOPIC_AUTHORIZATION_FAILED"):
        runner_a._flush(handle_a)
    runner_b._flush(handle_b, final=True)
    assert written == [[SourceOffset("b", {"f": "b"}, {"position": 1})]]
    pool.release(handle_a, 1.0)
    pool.release(handle_b, 1.0)
