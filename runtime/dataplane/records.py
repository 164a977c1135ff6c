"""The raw Kafka record frame shared by the data plane and the converters.

Why a module of its own: the Spark data source that reads Kafka (``kafka_source``) and the converters
that turn rows into typed columns or ``SinkRecord`` objects are built separately; this schema is the one
contract between them. A row holds exactly what a Kafka consumer hands over, undecoded, so converters
stay pure functions over bytes and the reader never needs to know which converter a task uses.
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

#: One raw Kafka record as a Spark row (timestamp in epoch milliseconds, -1 when absent).
RAW_SCHEMA = StructType(
    [
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", LongType()),
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField(
            "headers",
            ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())])),
        ),
    ]
)

#: Column names of ``RAW_SCHEMA`` in order, for code that builds rows as tuples.
RAW_FIELDS: tuple[str, ...] = tuple(f.name for f in RAW_SCHEMA.fields)
