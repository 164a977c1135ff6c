"""KIP-558 topic tracking's rule, with the status topic as a dict (what was read back) and a list (what
was written): a record per new topic, none while one is on its way, a new one after a reset."""

from __future__ import annotations

from kconnect.runtime.dataplane.active_topics import RETRY_S, ActiveTopics
from kconnect.runtime.ids import TaskId
from kconnect.runtime.storage.status_log import TopicStatus


class StatusTopic:
    def __init__(self) -> None:
        self.read: set[tuple[str, str]] = set()
        self.written: list[TopicStatus] = []
        self.now = 1_000.0
        self.fail = False

    def known(self, connector: str, topic: str) -> bool:
        return (connector, topic) in self.read

    def write(self, status: TopicStatus) -> None:
        if self.fail:
            raise RuntimeError("status topic unavailable")
        self.written.append(status)

    def read_back(self) -> None:
        self.read |= {(s.connector, s.topic) for s in self.written}


TASK = TaskId("c", 2)


def tracker(status: StatusTopic) -> ActiveTopics:
    return ActiveTopics(TASK, status.known, status.write, clock=lambda: status.now)


def test_each_new_topic_is_written_once_with_the_task_and_the_time() -> None:
    status = StatusTopic()
    t = tracker(status)
    t.record(["a", "b"])
    t.record(["a", "b"])  # not read back yet: still on its way, not written again
    status.read_back()
    t.record(["a", "b", "a"])
    assert status.written == [TopicStatus("a", "c", 2, 1_000_000), TopicStatus("b", "c", 2, 1_000_000)]


def test_a_topic_another_task_recorded_is_not_written_again() -> None:
    status = StatusTopic()
    status.read.add(("c", "a"))
    tracker(status).record(["a"])
    assert status.written == []


def test_after_a_reset_the_next_use_records_the_topic_anew() -> None:
    status = StatusTopic()
    t = tracker(status)
    t.record(["a"])
    status.read_back()
    t.record(["a"])
    status.read.clear()  # PUT /connectors/c/topics/reset tombstoned it, and the tombstone was read
    status.now += 1
    t.record(["a"])
    assert [s.discover_timestamp for s in status.written] == [1_000_000, 1_001_000]


def test_a_record_never_read_back_is_written_again_after_the_retry_time() -> None:
    status = StatusTopic()
    t = tracker(status)
    t.record(["a"])
    status.now += RETRY_S - 1
    t.record(["a"])
    assert len(status.written) == 1
    status.now += 2
    t.record(["a"])
    assert len(status.written) == 2


def test_a_failed_write_does_not_fail_the_task_and_is_tried_again_later() -> None:
    status = StatusTopic()
    status.fail = True
    t = tracker(status)
    t.record(["a"])  # logged, not raised
    status.fail = False
    t.record(["a"])  # not on every batch: each try may wait for the write's timeout
    assert status.written == []
    status.now += RETRY_S
    t.record(["a"])
    assert [s.topic for s in status.written] == ["a"]
