"""The sink loop's offset commits: sent asynchronously through the task's committer, never waited for
while the task delivers (issue 29).

Before, each commit went through the shared reader's admin client and waited up to 10 s: with the group's
coordinator on a SIGKILLed broker every commit timed out, holding delivery 10 s at a time, and librdkafka's
admin coordinator requests aborted the worker process once (bench/brokers_random.py). The committer here
is a double of the consumer's ``commit``/``poll`` (its answers reach ``on_commit`` from ``poll``, as
librdkafka's do); the loop's own behaviour with a real broker is in
tests/integration/test_sink_placement.py and tests/integration/test_broker_faults.py.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from connectors.file import FileStreamSinkTask
from kconnect.runtime.dataplane import sink_loop
from kconnect.runtime.dataplane.sink_loop import WorkerSinkTaskRunner
from kconnect.runtime.ids import TaskId
from kconnect.runtime.plugins.api import TopicPartition

STRING = "org.apache.kafka.connect.storage.StringConverter"
TP = TopicPartition("lines", 0)


class Committer:
    """Notes each commit sent; ``answer`` queues an answer that the next ``poll`` hands to on_commit."""

    def __init__(self, runner: WorkerSinkTaskRunner) -> None:
        self.runner = runner
        self.sent: list[dict[TopicPartition, int]] = []
        self.answers: list[tuple[Any, list[Any]]] = []
        self.polls = 0

    def commit(self, offsets: list[Any], asynchronous: bool) -> None:
        assert asynchronous, "the loop must not wait for its commits"
        self.sent.append({TopicPartition(t.topic, t.partition): t.offset for t in offsets})

    def answer(self, error: Any = None, offset: int | None = None) -> None:
        sent = self.sent[-1] if offset is None else {TP: offset}
        self.answers.append((error, [KafkaTopicPartition(t.topic, t.partition, o) for t, o in sent.items()]))

    def poll(self, timeout: float) -> None:
        self.polls += 1
        while self.answers:
            error, partitions = self.answers.pop(0)
            self.runner._on_commit(error, partitions)

    def close(self) -> None:
        pass


def _runner(tmp_path: Path) -> tuple[WorkerSinkTaskRunner, Committer]:
    runner = WorkerSinkTaskRunner(
        TaskId("c", 0),
        FileStreamSinkTask(),
        {"topics": "lines", "file": str(tmp_path / "out.txt")},
        lambda _t, trace: None,
        spark=lambda: None,
        task_count=1,
        bootstrap="unused:9092",
        converters={"key.converter": STRING, "value.converter": STRING},
        consumer_settings={},
        readers=None,  # type: ignore[arg-type]
    )
    committer = Committer(runner)
    runner._committer = committer
    return runner, committer


def test_a_commit_is_sent_and_noted_only_once_answered(tmp_path: Path) -> None:
    runner, committer = _runner(tmp_path)
    runner._commit_durable({TP: 10})
    assert committer.sent == [{TP: 10}]
    assert runner._committed == {}  # sent, not answered: not committed yet
    committer.answer()
    runner._serve_commits()
    assert runner._committed == {TP: 10}
    assert (runner._commits_in_flight, runner._commit_again) == (0, False)


def test_a_failed_commit_is_made_again(tmp_path: Path) -> None:
    runner, committer = _runner(tmp_path)
    runner._commit_durable({TP: 10})
    committer.answer(KafkaError(KafkaError.NOT_COORDINATOR))
    runner._serve_commits()
    assert runner._committed == {} and runner._commit_again


def test_no_second_commit_while_one_waits_for_a_coordinator_until_the_bound(tmp_path: Path) -> None:
    runner, committer = _runner(tmp_path)
    runner._commit_durable({TP: 10})
    runner._commit_durable({TP: 20})
    assert committer.sent == [{TP: 10}] and runner._commit_again  # the second waits for the first
    runner._commit_sent_at -= sink_loop.COMMIT_TIMEOUT_S  # the first unanswered past the bound
    runner._commit_durable({TP: 20})
    assert committer.sent == [{TP: 10}, {TP: 20}] and not runner._commit_again


def test_a_late_answer_never_moves_the_noted_offset_back(tmp_path: Path) -> None:
    runner, committer = _runner(tmp_path)
    runner._commit_durable({TP: 10})
    runner._commit_sent_at -= sink_loop.COMMIT_TIMEOUT_S
    runner._commit_durable({TP: 20})
    committer.answer(offset=20)
    committer.answer(offset=10)  # the older one answered last
    runner._serve_commits()
    assert runner._committed == {TP: 20}


def test_stopping_waits_for_the_last_answer_up_to_a_bound(tmp_path: Path) -> None:
    runner, committer = _runner(tmp_path)
    runner._commit_durable({TP: 10})
    runner._serve_commits(0.3)  # never answered: gives up after its bound
    assert committer.polls >= 2 and runner._commits_in_flight == 1
    committer.answer()
    runner._serve_commits(5.0)
    assert runner._committed == {TP: 10} and runner._commits_in_flight == 0
