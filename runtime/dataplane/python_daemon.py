"""The Python daemon of a kconnect worker's executors: PySpark's own, with kconnect's executor side loaded.

Why: Spark starts one daemon per executor (``python -m <spark.python.daemon.module>``) the first time the
executor runs Python, and forks every Python worker from it. PySpark's daemon loads only PySpark, so each
fresh worker that runs a source host or a hosted task imports kconnect, confluent-kafka and cryptography
itself, seconds of CPU that, on a busy machine, were most of the 20 s between an executor's death and its
tasks running again elsewhere (issue 32). Loading them here once per executor makes a fork all a new host
costs. The worker names this module in ``spark.python.daemon.module`` for a cluster master unless that is
set (``spark_session.spark_settings``), and ``source_hosts`` starts the daemon on every executor early.
"""

from __future__ import annotations

import contextlib

with contextlib.suppress(ImportError):  # a missing optional part must never stop Spark's Python
    from kconnect.runtime.dataplane import source_hosts, spark_source  # noqa: F401

from pyspark import daemon

if __name__ == "__main__":
    daemon.manager()  # type: ignore[no-untyped-call]
