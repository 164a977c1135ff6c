"""Error handling with Apache Kafka Connect's ``errors.*`` connector keys: a pure planner over Spark frames.

Java's RetryWithToleranceOperator handles one record at a time: retry a failing operation within
``errors.retry.timeout``, then either fail the task (``errors.tolerance=none``) or skip the record,
optionally logging it and writing it to a dead letter queue with ``__connect.errors.*`` context headers.
Here conversion and transformation never raise per row: they leave a message in an error column
(:func:`converters.error_column`, :data:`transforms.TRANSFORM_ERROR`). :func:`split` separates good rows
from bad ones, :func:`dlq_rows` builds the dead letter records (the original raw key and value, with
Java's header names), and :meth:`ErrorPolicy.decide` says what the task must do with a batch. The
executor does the I/O (producing to the DLQ topic, logging, failing the task).
"""

from __future__ import annotations

import enum
import random
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kconnect.runtime.dataplane.converters import error_column
from kconnect.runtime.dataplane.transforms import TRANSFORM_ERROR, TRANSFORM_ERROR_CLASS
from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValidationError, Range
from kconnect.runtime.plugins.connector_config import sink_config_def, source_config_def

__all__ = [
    "DLQ_HEADERS",
    "ERROR_CLASS",
    "ERROR_MESSAGE",
    "ERROR_STAGE",
    "RAW_KEY",
    "RAW_VALUE",
    "Decision",
    "ErrorPolicy",
    "Stage",
    "collect_errors",
    "convert_and_transform",
    "dlq_rows",
    "errors_config_def",
    "retry_delays_ms",
    "split",
]

# Java's DeadLetterQueueReporter header names (connect-runtime 3.9.0, checked with javap).
HEADER_TOPIC: Final = "__connect.errors.topic"
HEADER_PARTITION: Final = "__connect.errors.partition"
HEADER_OFFSET: Final = "__connect.errors.offset"
HEADER_CONNECTOR: Final = "__connect.errors.connector.name"
HEADER_TASK: Final = "__connect.errors.task.id"
HEADER_STAGE: Final = "__connect.errors.stage"
HEADER_CLASS: Final = "__connect.errors.class.name"
HEADER_EXCEPTION: Final = "__connect.errors.exception.class.name"
HEADER_MESSAGE: Final = "__connect.errors.exception.message"
HEADER_STACKTRACE: Final = "__connect.errors.exception.stacktrace"
DLQ_HEADERS: Final = (
    HEADER_TOPIC,
    HEADER_PARTITION,
    HEADER_OFFSET,
    HEADER_CONNECTOR,
    HEADER_TASK,
    HEADER_STAGE,
    HEADER_CLASS,
    HEADER_EXCEPTION,
    HEADER_MESSAGE,
    HEADER_STACKTRACE,
)

#: Columns :func:`collect_errors` adds: the first failure of each row, where and in which class.
ERROR_MESSAGE: Final = "error__message"
ERROR_STAGE: Final = "error__stage"
ERROR_CLASS: Final = "error__class"
#: Where the executor keeps the raw bytes before conversion, so a dead letter carries the original record.
RAW_KEY: Final = "raw__key"
RAW_VALUE: Final = "raw__value"

_DATA_EXCEPTION: Final = "org.apache.kafka.connect.errors.DataException"
#: Java's first retry waits this long, then doubles up to errors.retry.delay.max.ms
#: (RetryWithToleranceOperator).
RETRY_INITIAL_DELAY_MS: Final = 300


class Stage(enum.Enum):
    """Java's error stages (``__connect.errors.stage``): the header tells a dead letter queue's reader
    whether a record failed in a converter, a transform or the task."""

    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"


def errors_config_def(sink: bool = True) -> ConfigDef:
    """The ``errors.*`` keys as the connector config defines them (one definition: connector_config)."""
    every = (sink_config_def() if sink else source_config_def()).config_keys
    d = ConfigDef()
    for name, key in every.items():
        if name.startswith("errors."):
            d.define_key(key)
    return d


class Decision(enum.Enum):
    """What the task does with a batch after conversion and transformation."""

    CONTINUE = "continue"  # no failed rows
    SKIP_FAILED = "skip_failed"  # errors.tolerance=all: drop (and report) failed rows, carry on
    FAIL_TASK = "fail_task"  # errors.tolerance=none and a row failed: Java's ConnectException


@dataclass(frozen=True)
class ErrorPolicy:
    """A connector's ``errors.*`` settings, parsed and validated once when its task starts, so that each batch
    only asks the pure :meth:`decide` and never re-reads the configuration."""

    #: ``errors.tolerance=all``; the default ``none`` fails the task on its first failed record.
    tolerance_all: bool = False
    #: ``errors.retry.timeout``: 0 never retries, -1 retries forever.
    retry_timeout_ms: int = 0
    #: ``errors.retry.delay.max.ms``: the cap of the doubling wait between retries.
    retry_delay_max_ms: int = 60000
    #: ``errors.log.enable``: log each failed record's context.
    log_enable: bool = False
    #: ``errors.log.include.messages``: also log the record's key, value and timestamp.
    log_include_messages: bool = False
    #: ``errors.deadletterqueue.topic.name`` (sink connectors only); empty: no dead letter queue.
    dlq_topic: str = ""
    #: ``errors.deadletterqueue.topic.replication.factor``, for a DLQ topic the sink task creates.
    dlq_replication_factor: int = 3
    #: ``errors.deadletterqueue.context.headers.enable``: add the ``__connect.errors.*`` headers.
    dlq_context_headers: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any], sink: bool = True) -> ErrorPolicy:
        """Parse the ``errors.*`` keys; a bad value raises ConfigValidationError naming key, value, rule."""
        keys = errors_config_def(sink)
        parsed = keys.parse({k: v for k, v in config.items() if k in keys.config_keys})
        if parsed["errors.retry.timeout"] < -1:
            raise ConfigValidationError(
                "errors.retry.timeout",
                parsed["errors.retry.timeout"],
                "Value must be -1 (retry forever) or at least 0",
            )
        if parsed["errors.retry.delay.max.ms"] < 0:
            raise ConfigValidationError(
                "errors.retry.delay.max.ms", parsed["errors.retry.delay.max.ms"], "Value must be at least 0"
            )
        Range.at_least(-1).ensure_valid(
            "errors.deadletterqueue.topic.replication.factor",
            parsed.get("errors.deadletterqueue.topic.replication.factor", 3),
        )
        return cls(
            tolerance_all=parsed["errors.tolerance"] == "all",
            retry_timeout_ms=parsed["errors.retry.timeout"],
            retry_delay_max_ms=parsed["errors.retry.delay.max.ms"],
            log_enable=parsed["errors.log.enable"],
            log_include_messages=parsed["errors.log.include.messages"],
            dlq_topic=parsed.get("errors.deadletterqueue.topic.name", "") or "",
            dlq_replication_factor=parsed.get("errors.deadletterqueue.topic.replication.factor", 3),
            dlq_context_headers=parsed.get("errors.deadletterqueue.context.headers.enable", False),
        )

    def decide(self, failed_rows: int) -> Decision:
        """Java tolerates nothing with ``none`` and everything with ``all`` (no count limit)."""
        if failed_rows == 0:
            return Decision.CONTINUE
        return Decision.SKIP_FAILED if self.tolerance_all else Decision.FAIL_TASK

    @property
    def dead_letter(self) -> bool:
        """Whether failed records go to a dead letter queue: as in Java, setting
        ``errors.deadletterqueue.topic.name`` is what turns it on."""
        return bool(self.dlq_topic)

    def log_line(self, row: Mapping[str, Any]) -> dict[str, Any]:
        """The fields to log for one failed row (Java logs the context; the record itself only if asked)."""
        line: dict[str, Any] = {
            "stage": row.get(ERROR_STAGE),
            "class": row.get(ERROR_CLASS),
            "message": row.get(ERROR_MESSAGE),
            "topic": row.get("topic"),
            "partition": row.get("partition"),
            "offset": row.get("offset"),
        }
        if self.log_include_messages:
            line["timestamp"] = row.get("timestamp")
            line["key"] = row.get(RAW_KEY)
            line["value"] = row.get(RAW_VALUE)
        return line


def retry_delays_ms(timeout_ms: int, max_delay_ms: int, rng: random.Random | None = None) -> Iterator[int]:
    """The waits between attempts of a retriable operation, as Java's: 300 ms doubling up to the maximum,
    with jitter once capped, until the total would pass ``timeout_ms`` (0: no retry; -1: forever)."""
    if timeout_ms == 0:
        return
    jitter = rng or random.Random()
    delay, spent = RETRY_INITIAL_DELAY_MS, 0
    while timeout_ms < 0 or spent < timeout_ms:
        wait = min(delay, max_delay_ms)
        if delay >= max_delay_ms:
            wait = max_delay_ms + jitter.randint(0, max(1, max_delay_ms // 10))
        if timeout_ms >= 0:
            wait = min(wait, timeout_ms - spent)
        if wait <= 0:
            return
        yield wait
        spent += wait
        delay *= 2


def collect_errors(df: DataFrame, stages: Mapping[str, tuple[Stage, str]]) -> DataFrame:
    """Add ERROR_MESSAGE/ERROR_STAGE/ERROR_CLASS: each row's first error among ``stages``.

    ``stages`` maps an error column to (its stage, the Java class name to report), in pipeline order,
    e.g. ``{"key__error": (Stage.KEY_CONVERTER, "org.apache.kafka.connect.json.JsonConverter"), ...}``.
    A class column may be named instead of a class (the transform chain records which transform failed).
    """
    message: Column = F.lit(None).cast("string")
    stage: Column = F.lit(None).cast("string")
    klass: Column = F.lit(None).cast("string")
    for column, (st, cls) in reversed(list(stages.items())):
        failed = F.col(column).isNotNull()
        cls_col = F.col(cls) if cls in df.columns else F.lit(cls)
        message = F.when(failed, F.col(column)).otherwise(message)
        stage = F.when(failed, F.lit(st.value)).otherwise(stage)
        klass = F.when(failed, cls_col).otherwise(klass)
    return df.withColumns({ERROR_MESSAGE: message, ERROR_STAGE: stage, ERROR_CLASS: klass})


def split(df: DataFrame) -> tuple[DataFrame, DataFrame]:
    """(good rows, failed rows) of a frame that went through :func:`collect_errors`."""
    failed = F.col(ERROR_MESSAGE).isNotNull()
    return df.where(~failed), df.where(failed)


def dlq_rows(failed: DataFrame, policy: ErrorPolicy, connector: str, task: int) -> DataFrame:
    """The dead letter records for failed rows, in the raw frame's shape (``records.RAW_SCHEMA``).

    As Java's DeadLetterQueueReporter: the original key and value bytes and headers, and with
    ``errors.deadletterqueue.context.headers.enable`` the ``__connect.errors.*`` headers appended (values
    UTF-8 strings). The stack trace header carries the message: kconnect's failures are per-row values,
    not Java exceptions with stacks.
    """

    def header(name: str, value: Column) -> Column:
        return F.struct(F.lit(name).alias("key"), F.encode(value.cast("string"), "UTF-8").alias("value"))

    headers = F.coalesce(F.col("headers"), F.array().cast("array<struct<key:string,value:binary>>"))
    if policy.dlq_context_headers:
        context = F.array(
            header(HEADER_TOPIC, F.col("topic")),
            header(HEADER_PARTITION, F.col("partition")),
            header(HEADER_OFFSET, F.col("offset")),
            header(HEADER_CONNECTOR, F.lit(connector)),
            header(HEADER_TASK, F.lit(str(task))),
            header(HEADER_STAGE, F.col(ERROR_STAGE)),
            header(HEADER_CLASS, F.col(ERROR_CLASS)),
            header(HEADER_EXCEPTION, F.lit(_DATA_EXCEPTION)),
            header(HEADER_MESSAGE, F.col(ERROR_MESSAGE)),
            header(HEADER_STACKTRACE, F.concat(F.lit(_DATA_EXCEPTION + ": "), F.col(ERROR_MESSAGE))),
        )
        headers = F.concat(headers, context)
    return failed.select(
        F.lit(policy.dlq_topic).alias("topic"),
        F.lit(None).cast("int").alias("partition"),
        F.lit(None).cast("long").alias("offset"),
        F.col("timestamp"),
        F.col(RAW_KEY).alias("key"),
        F.col(RAW_VALUE).alias("value"),
        headers.alias("headers"),
    )


def convert_and_transform(
    df: DataFrame,
    key_converter: Any,
    value_converter: Any,
    chain: Any,
    key_schema: Any = None,
    value_schema: Any = None,
    drop: bool = True,
    samples: Mapping[str, Any] | None = None,
) -> DataFrame:
    """A sink batch from the raw frame to typed, transformed rows with each row's first error collected.

    Keeps the raw key and value (RAW_KEY, RAW_VALUE) of failed rows for dead letters (null on good rows);
    ``key_converter``/``value_converter`` are :class:`converters.Converter` and ``chain`` a
    :class:`transforms.TransformChain`. ``key_schema`` /
    ``value_schema`` (a ``ConnectSchema``) are handed to the converters' ``to_columns`` when known, e.g.
    one inferred for schemaless JSON so struct transforms apply. ``drop=False`` keeps the rows a
    transformation drops, marked (``TransformChain.apply``). ``samples`` holds, per column, a JSON
    envelope schema already sampled from the batch (``json_converter.sample_envelopes``), handed to that
    column's converter so it does not sample again.
    """
    staged = df.withColumns({RAW_KEY: F.col("key"), RAW_VALUE: F.col("value")})
    for column, converter, schema in (
        ("key", key_converter, key_schema),
        ("value", value_converter, value_schema),
    ):
        if samples and column in samples:
            staged = converter.to_columns(staged, column, schema, sampled=samples[column])
        else:
            staged = converter.to_columns(staged, column, schema)
    # A row whose conversion failed is not transformed further: its error is already recorded.
    staged = chain.apply(staged, drop)
    collected = collect_errors(
        staged,
        {
            error_column("key"): (Stage.KEY_CONVERTER, key_converter.java_class),
            error_column("value"): (Stage.VALUE_CONVERTER, value_converter.java_class),
            TRANSFORM_ERROR: (Stage.TRANSFORMATION, TRANSFORM_ERROR_CLASS),
        },
    )
    # Only a failed row's raw bytes are read (its dead letter, its log line): a good row keeps none, so
    # that a batch persisted once prepared holds each good record once, converted, not its bytes beside.
    failed = F.col(ERROR_MESSAGE).isNotNull()
    return collected.withColumns(
        {RAW_KEY: F.when(failed, F.col(RAW_KEY)), RAW_VALUE: F.when(failed, F.col(RAW_VALUE))}
    )
