"""KIP-877 on a real worker: a connector and its task register metrics of their own through their
contexts, the task moves real records to the embedded broker counting each, and ``GET /metrics`` shows
the counts under Java's ``plugins`` group with the connector and task as labels, until the connector is
deleted, when they go with it.

The plugin is installed through ``plugin.path``. It is a source, so the product's worker runs it without
starting a SparkSession (a source without transforms never needs one).
"""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from kconnect.runtime.cli.broker import free_port
from tests.support.apache_kafka import Broker
from tests.support.cluster import WorkerProcess, read_json_values, wait_until, worker_properties

pytestmark = pytest.mark.integration

COUNT = 40

#: A source connector whose task polls ``count`` numbered records, a few per poll, recording each in a
#: sensor (a total and a rate) as a Java task would record into its ``PluginMetrics``; the connector
#: exposes a gauge of its own.
COUNTING_SOURCE = r"""
import time

from kconnect.runtime.plugins.api import SourceConnector, SourceRecord, SourceTask
from kconnect.runtime.plugins.config_def import ConfigDef
from kconnect.runtime.plugins.plugin_metrics import CumulativeCount, Rate


class CountingSourceConnector(SourceConnector):
    def version(self):
        return "1.0"

    def config_def(self):
        return ConfigDef()

    def start(self, props):
        self.props = dict(props)
        metrics = self.context.plugin_metrics()
        metrics.add_metric(metrics.metric_name("configured-count", "Records the task will send."),
                           lambda: int(self.props["count"]))

    def task_class(self):
        return CountingSourceTask

    def task_configs(self, max_tasks):
        return [dict(self.props)]

    def stop(self):
        pass


class CountingSourceTask(SourceTask):
    def version(self):
        return "1.0"

    def start(self, props):
        self.topic = props["topic"]
        self.count = int(props["count"])
        self.next = 0
        metrics = self.context.plugin_metrics()
        self.sent = metrics.add_sensor("records")
        tags = {"topic": self.topic}
        self.sent.add(metrics.metric_name("records-polled-total", "Records the task polled.", tags),
                      CumulativeCount())
        self.sent.add(metrics.metric_name("records-polled-rate", "Records polled per second.", tags), Rate())

    def poll(self):
        if self.next >= self.count:
            time.sleep(0.2)
            return None
        batch = []
        for _ in range(min(5, self.count - self.next)):
            batch.append(SourceRecord({"source": "counter"}, {"n": self.next}, self.topic, value=self.next))
            self.sent.record()
            self.next += 1
        return batch

    def stop(self):
        pass
"""


def plugin_samples(worker: WorkerProcess) -> dict[str, float]:
    """The ``plugins_*`` samples of ``GET /metrics``, keyed by name and labels as printed."""
    resp = worker.get("/metrics")
    assert resp.status_code == 200, resp.text
    out = {}
    for line in resp.text.splitlines():
        if line.startswith("plugins_"):
            series, value = line.rsplit(" ", 1)
            out[series] = float(value)
    return out


def test_a_tasks_own_metric_counts_the_records_it_moved_and_goes_when_the_connector_is_deleted(
    tmp_path: Path, broker: Broker
) -> None:
    plugins = tmp_path / "plugins"
    plugins.mkdir()
    (plugins / "counting_source.py").write_text(COUNTING_SOURCE)
    group = f"pm-{uuid.uuid4().hex[:8]}"
    props = worker_properties(broker.bootstrap, group, free_port(), plugin_path=str(plugins))
    props["offset.flush.interval.ms"] = "1000"
    worker = WorkerProcess(tmp_path, props, name=f"{group}-w0", spark=True).start()
    topic = f"counted-{uuid.uuid4().hex[:6]}"
    try:
        wait_until(lambda: (worker.workers() or {}).get("generation", -1) >= 0, 60, "the worker to join")
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        for future in admin.create_topics([NewTopic(topic, 1, 1)]).values():
            future.result(15)
        started = time.monotonic()
        config = {
            "connector.class": "CountingSourceConnector",
            "topic": topic,
            "count": str(COUNT),
            "tasks.max": "1",
        }
        resp = worker.request("POST", "/connectors", json={"name": "counted", "config": config})
        assert resp.status_code == 201, resp.text

        envelopes = read_json_values(broker.bootstrap, topic, COUNT)  # JsonConverter, schemas enabled
        assert sorted(e["payload"] for e in envelopes) == list(range(COUNT))
        w = f'worker="{worker.url.removeprefix("http://")}"'
        total = f'plugins_records_polled_total{{{w},connector="counted",task="0",topic="{topic}"}}'
        wait_until(lambda: plugin_samples(worker).get(total) == COUNT, 30, f"{total} {COUNT}")
        got = plugin_samples(worker)
        print(f"\n{COUNT} records moved and counted in {time.monotonic() - started:.1f} s: {got}")
        assert got[f'plugins_configured_count{{{w},connector="counted"}}'] == COUNT
        rate = f'plugins_records_polled_rate{{{w},connector="counted",task="0",topic="{topic}"}}'
        # Per second over the kept windows, never over less than 30 s (Java's floor): at most COUNT / 30.
        assert 0 <= got[rate] <= COUNT / 30 + 1e-9
        text = worker.get("/metrics").text
        assert re.search(r"^# HELP plugins_records_polled_total Records the task polled\.$", text, re.M)
        assert re.search(r"^# TYPE plugins_records_polled_total gauge$", text, re.M)

        resp = worker.request("DELETE", "/connectors/counted")
        assert resp.status_code == 204, resp.text
        wait_until(lambda: not plugin_samples(worker), 30, "the plugin metrics to go with the connector")
    finally:
        worker.stop(60)
        print(worker.log_text()[-3000:])
