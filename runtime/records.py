"""The raw Kafka record frame shared by the data plane and the converters.

Why a module of its own: the Spark data source that reads Kafka (``kafka_source``) and the converters
that turn rows into ``SinkRecord`` objects are built separately; this schema is the one contract between
them. A row holds exactly what a Kafka consumer hands over, undecoded, so converters stay pure functions
over bytes and the reader never needs to know which converter a task uses.
"""

from __future__ import annotations

RAW_SCHEMA = (
    "topic STRING, partition INT, offset LONG, timestamp LONG, key BINARY, value BINARY, "
    "headers ARRAY<STRUCT<key: STRING, value: BINARY>>"
)
"""DDL of one raw Kafka record as a Spark row (timestamp in epoch milliseconds, -1 when absent)."""

RAW_FIELDS: tuple[str, ...] = ("topic", "partition", "offset", "timestamp", "key", "value", "headers")
"""Column names of ``RAW_SCHEMA`` in order, for code that builds rows as tuples."""
