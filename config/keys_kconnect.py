"""Worker keys that are kconnect's own: Spark, task placement, the sink watchdog, static assignments
(rows of :mod:`kconnect.config.worker_keys`).
"""

from __future__ import annotations

from .key_definition import MEDIUM as _M
from .key_definition import (
    Definition,
)
from .values import (
    INT64_MAX,
    Choice,
    ConfigType,
    IntRange,
    NonEmpty,
    NonEmptyItems,
    TaskIdList,
)
from .worker_modes import (
    SinkTaskPlacement,
    SourceTaskPlacement,
)

__all__ = ["KCONNECT_KEYS"]

KCONNECT_KEYS: tuple[Definition, ...] = (
    # kconnect's own
    Definition(
        "spark.master",
        ConfigType.STRING,
        "local[*]",
        "Spark master URL for the SparkSession that runs this worker's tasks. Every other spark.* key is "
        "passed to the SparkSession as is.",
        NonEmpty(),
        _M,
        kconnect=True,
    ),
    Definition(
        "source.task.placement",
        ConfigType.STRING,
        "auto",
        "Where source tasks run: executor (each task one long-running Spark job, polling and producing on "
        "an executor, where it holds a core while it runs), worker (a thread of this worker process; Spark "
        "runs only their transforms), or auto: executor when spark.master is a cluster, worker with a "
        "local master. Tasks whose connector has transforms run on the worker either way.",
        Choice([p.value for p in SourceTaskPlacement], case_insensitive=True, convert=SourceTaskPlacement),
        _M,
        kconnect=True,
    ),
    Definition(
        "sink.task.placement",
        ConfigType.STRING,
        "auto",
        "How sink tasks read: worker (a consumer loop on a thread of this worker process that converts "
        "records and calls put() as they arrive, as Java's WorkerSinkTask: no Spark job, its cost follows "
        "its records), query (each task a Structured Streaming query whose micro-batches Spark reads and "
        "converts on its executors, about a tenth of a second of CPU per micro-batch whatever its size), "
        "or auto: worker with a local spark.master, query with a cluster one. Tasks whose connector has "
        "transforms, a dead letter queue or a DataFrame writer (Parquet, JDBC) are queries either way. "
        "/metrics says where each task runs (kconnect_task_placement).",
        Choice([p.value for p in SinkTaskPlacement], case_insensitive=True, convert=SinkTaskPlacement),
        _M,
        kconnect=True,
    ),
    Definition(
        "sink.task.stall.timeout.ms",
        ConfigType.LONG,
        "60000",
        "How long a sink task read by the worker (sink.task.placement worker) may stay behind the end of "
        "its partitions without its position moving before its reading counts as stalled: GET /health then "
        "names the task (stalled_sink_tasks) and the worker re-establishes its reading (its partitions "
        "re-seeked at its position), once per such period, with a log line each time. Apache Kafka Connect "
        "has no such watchdog: a task there can stay RUNNING and read nothing. /metrics shows every sink "
        "task's lag and last progress either way. At least 1000.",
        IntRange(1000, INT64_MAX),
        _M,
        kconnect=True,
    ),
    Definition(
        "worker.id",
        ConfigType.STRING,
        None,
        "A stable name for this worker in logs and status; when unset the advertised REST URL "
        "identifies it, as in Apache Kafka Connect.",
        NonEmpty(),
        kconnect=True,
    ),
    Definition(
        "static.connectors",
        ConfigType.LIST,
        "",
        "With connect.protocol=static: connectors only this and other workers listing them may run "
        "(KIP-987).",
        NonEmptyItems(),
        kconnect=True,
    ),
    Definition(
        "static.tasks",
        ConfigType.LIST,
        "",
        "With connect.protocol=static: tasks (<connector>-<n>) only this and other workers listing them "
        "may run (KIP-987).",
        TaskIdList(),
        kconnect=True,
    ),
)
