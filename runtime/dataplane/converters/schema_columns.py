"""The Connect schema of a typed Spark column: the Spark type a schema is held in, the schema a Spark
type implies, and the column metadata that carries the schema between converters and transforms.

Split from the converters (:mod:`kconnect.runtime.dataplane.converters`) because transforms and the Schema
Registry converters use it without any converter.
"""

from __future__ import annotations

from typing import Final

from pyspark.sql import Column, DataFrame
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from kconnect.runtime.codecs import java_json
from kconnect.runtime.dataplane.connect_data import (
    DATE,
    DECIMAL,
    TIMESTAMP,
    ConnectDataError,
    ConnectField,
    ConnectSchema,
    decimal_schema,
    schema_from_json,
    schema_to_json,
)

__all__ = [
    "SCHEMA_METADATA_KEY",
    "connect_schema_of",
    "derive_schema",
    "error_column",
    "schema_metadata",
    "spark_type",
    "with_schema",
]


#: Column metadata key holding the column's Connect schema (the envelope's JSON of it).
SCHEMA_METADATA_KEY: Final = "connect.schema"


def error_column(column: str) -> str:
    """Where ``to_columns(df, column)`` puts each row's conversion error (null when the row converted)."""
    return f"{column}__error"


# ------------------------------------------------------------------------ Connect schema <-> Spark type


def spark_type(schema: ConnectSchema) -> DataType:
    """The Spark type a value of this Connect schema is held in after conversion.

    Logical types get Spark's own types where Spark has one (Decimal, Date, Timestamp), so SQL on them
    works; Time stays int32 milliseconds of the day (Spark 4.0 has no time-of-day type).
    """
    if schema.name == DECIMAL:
        return DecimalType(38, schema.scale)
    if schema.name == DATE:
        return DateType()
    if schema.name == TIMESTAMP:
        return TimestampType()
    simple: dict[str, DataType] = {
        "int8": ByteType(),
        "int16": ShortType(),
        "int32": IntegerType(),
        "int64": LongType(),
        "float": FloatType(),
        "double": DoubleType(),
        "boolean": BooleanType(),
        "string": StringType(),
        "bytes": BinaryType(),
    }
    if schema.type in simple:
        return simple[schema.type]
    if schema.type == "array":
        assert schema.items is not None
        return ArrayType(spark_type(schema.items), True)
    if schema.type == "map":
        assert schema.keys is not None and schema.values is not None
        return MapType(spark_type(schema.keys), spark_type(schema.values), True)
    return StructType([StructField(f.name, spark_type(f.schema), True) for f in schema.fields])


def derive_schema(data_type: DataType, optional: bool = True) -> ConnectSchema:
    """A Connect schema for a Spark type that carries none (a column a transform built, a given DDL)."""
    simple = {
        ByteType: "int8",
        ShortType: "int16",
        IntegerType: "int32",
        LongType: "int64",
        FloatType: "float",
        DoubleType: "double",
        BooleanType: "boolean",
        StringType: "string",
        BinaryType: "bytes",
    }
    for cls, name in simple.items():
        if isinstance(data_type, cls):
            return ConnectSchema(name, optional)
    if isinstance(data_type, DecimalType):
        return decimal_schema(data_type.scale, optional)
    if isinstance(data_type, DateType):
        return ConnectSchema("int32", optional, name=DATE, version=1)
    if isinstance(data_type, TimestampType):
        return ConnectSchema("int64", optional, name=TIMESTAMP, version=1)
    if isinstance(data_type, ArrayType):
        return ConnectSchema(
            "array", optional, items=derive_schema(data_type.elementType, data_type.containsNull)
        )
    if isinstance(data_type, MapType):
        return ConnectSchema(
            "map",
            optional,
            keys=derive_schema(data_type.keyType, False),
            values=derive_schema(data_type.valueType, data_type.valueContainsNull),
        )
    if isinstance(data_type, StructType):
        return ConnectSchema(
            "struct",
            optional,
            fields=tuple(
                ConnectField(f.name, derive_schema(f.dataType, f.nullable)) for f in data_type.fields
            ),
        )
    raise ConnectDataError(f"Spark type {data_type.simpleString()} has no Connect schema")


def _same_shape(a: DataType, b: DataType) -> bool:
    """Equal types ignoring nullability (``from_json`` marks everything nullable)."""
    if isinstance(a, StructType) and isinstance(b, StructType):
        return len(a.fields) == len(b.fields) and all(
            x.name == y.name and _same_shape(x.dataType, y.dataType)
            for x, y in zip(a.fields, b.fields, strict=True)
        )
    if isinstance(a, ArrayType) and isinstance(b, ArrayType):
        return _same_shape(a.elementType, b.elementType)
    if isinstance(a, MapType) and isinstance(b, MapType):
        return _same_shape(a.keyType, b.keyType) and _same_shape(a.valueType, b.valueType)
    return a == b


def schema_metadata(schema: ConnectSchema | None) -> dict[str, str]:
    """The column metadata that carries ``schema`` as Java's JSON schema text: a Spark type cannot hold all
    a Connect schema says (name, version, doc, default, parameters), so it travels beside."""
    return {} if schema is None else {SCHEMA_METADATA_KEY: java_json.write(schema_to_json(schema))}


def with_schema(column: Column, name: str, schema: ConnectSchema | None) -> Column:
    """``column`` named ``name`` carrying ``schema`` in its metadata (what transforms hand on)."""
    return column.alias(name, metadata=schema_metadata(schema))


def connect_schema_of(df: DataFrame, column: str) -> ConnectSchema | None:
    """The Connect schema of a frame column: its metadata's if it still fits the type, else derived.

    Returns None for a column with no schema at all (schemaless JSON kept as a string).
    """
    struct_field = df.schema[column]
    raw = struct_field.metadata.get(SCHEMA_METADATA_KEY)
    if raw is not None:
        schema = schema_from_json(java_json.read(raw))
        if schema is not None and _same_shape(spark_type(schema), struct_field.dataType):
            return schema
    if struct_field.metadata.get("connect.schemaless"):
        return None
    return derive_schema(struct_field.dataType, True)
