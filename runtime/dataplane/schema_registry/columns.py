"""A Spark frame's BINARY column in Confluent's wire format, decoded into a typed column.

Why this shape: one frame column has one Spark type, but records name their writer schema by id. So
the batch's distinct schema ids are read first (one small Spark job over the 5-byte headers), the
driver fetches each id's schema once (the registry is never called from executors), and the reader
schema is the newest of them (the highest id that decodes): Avro's schema resolution reads older
records under it, so an evolved schema with a defaulted field flows on. Each record is then decoded in
a Python UDF that holds the writer schemas, and a record that cannot be decoded yields null with its
reason in the error column (``converters.error_column``), which ``errors_policy`` tolerates, logs or
dead-letters as ``errors.tolerance`` says.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, StringType, StructField, StructType

from kconnect.runtime.dataplane.connect_data import TIME, ConnectSchema
from kconnect.runtime.dataplane.converters import error_column, spark_type, with_schema
from kconnect.runtime.dataplane.schema_registry.wire import WireFormatError, unframe

__all__ = ["BatchDecoder", "FrameDecoding", "decode_column", "spark_value"]

#: At most this many distinct schema ids are looked at per batch (more is an error for the rest).
MAX_IDS: Final = 64

#: ``decode(schema_id, payload)`` -> the Connect value; raises with the reason.
Decode = Callable[[int, memoryview], Any]


class BatchDecoder(Protocol):
    """What a registry converter offers the frame path: for the batch's schema ids, the Connect schema
    every record is read as, a picklable decode function, and the ids that failed with their reasons."""

    def batch_decoder(self, ids: list[int]) -> tuple[ConnectSchema | None, Decode, Mapping[int, str]]: ...

    @property
    def format_name(self) -> str: ...


class FrameDecoding:
    """The decode function shipped to executors: plain data and a function, so it pickles."""

    def __init__(
        self, schema: ConnectSchema | None, decode: Decode, bad: Mapping[int, str], fmt: str
    ) -> None:
        self.schema = schema
        self.decode = decode
        self.bad = dict(bad)
        self.fmt = fmt

    def __call__(self, data: bytes | None) -> tuple[Any, str | None]:
        if data is None or len(data) == 0:
            return None, None
        try:
            schema_id, payload = unframe(bytes(data))
        except WireFormatError as exc:
            return None, f"Converting byte[] to Kafka Connect data failed due to serialization error: {exc}"
        reason = self.bad.get(schema_id)
        if reason is not None:
            return None, f"Failed to deserialize data to {self.fmt}: {reason}"
        try:
            value = self.decode(schema_id, payload)
            return spark_value(self.schema, value), None
        except Exception as exc:
            what = f"{type(exc).__name__}: {exc}"
            return None, f"Failed to deserialize data to {self.fmt} (schema id {schema_id}): {what}"


def spark_value(schema: ConnectSchema | None, value: Any) -> Any:
    """A Connect Python value as the value of its Spark type (``converters.spark_type``): Time as int32
    milliseconds of the day, structs as tuples in field order, the rest as they are."""
    if value is None or schema is None:
        return value
    if schema.name == TIME and isinstance(value, dt.time):
        return ((value.hour * 60 + value.minute) * 60 + value.second) * 1000 + value.microsecond // 1000
    if schema.type == "struct":
        return tuple(spark_value(f.schema, value.get(f.name)) for f in schema.fields)
    if schema.type == "array":
        assert schema.items is not None
        return [spark_value(schema.items, v) for v in value]
    if schema.type == "map":
        assert schema.values is not None and schema.keys is not None
        return {spark_value(schema.keys, k): spark_value(schema.values, v) for k, v in value.items()}
    return value


def batch_ids(df: DataFrame, column: str) -> list[int]:
    """The distinct schema ids of the column's framed records (one Spark job over the headers)."""
    raw = F.col(column)
    header = F.substring(raw, 1, 5)
    framed = df.where(raw.isNotNull() & (F.length(raw) >= 5) & (F.hex(F.substring(raw, 1, 1)) == F.lit("00")))
    rows = (
        framed.select(F.conv(F.hex(F.substring(header, 2, 4)), 16, 10).cast("long").alias("id"))
        .distinct()
        .limit(MAX_IDS)
        .collect()
    )
    return sorted(int(r["id"]) for r in rows if r["id"] is not None)


def decode_column(
    converter: BatchDecoder, df: DataFrame, column: str, schema: ConnectSchema | None = None
) -> DataFrame:
    """Replace BINARY ``column`` with its decoded, typed form and add its error column."""
    ids = batch_ids(df, column)
    found_schema, decode, bad = converter.batch_decoder(ids)
    target = found_schema if schema is None else schema
    decoding = FrameDecoding(target, decode, bad, converter.format_name)
    value_type = spark_type(target) if target is not None else BinaryType()
    result_type = StructType([StructField("v", value_type, True), StructField("e", StringType(), True)])
    tmp = f"__kc_decoded_{column}"
    udf = F.udf(decoding, result_type)
    staged = df.withColumn(tmp, udf(F.col(column)))
    return (
        staged.withColumn(error_column(column), F.col(tmp)["e"])
        .withColumn(column, with_schema(F.col(tmp)["v"], column, target))
        .drop(tmp)
    )
