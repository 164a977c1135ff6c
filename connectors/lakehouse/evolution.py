"""How a table's schema follows its records' schemas: a pure plan from two Spark schemas.

Allowed, as Iceberg's and Delta's schema evolution allow: a new field becomes a new optional column (also
inside structs); an int column widens to long and a float column to double when records bring the wider
type (and a decimal's precision grows at the same scale); a required column becomes optional when records
may leave it null. Records with a narrower type than the column (int into long) need no change. Anything
else (a string where the column is an int, a long where a struct was) cannot be written without losing
data, so the plan fails naming the field rather than dropping or mangling it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pyspark.sql.types import (
    ArrayType,
    ByteType,
    DataType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    ShortType,
    StructType,
)


class SchemaEvolutionError(ValueError):
    """A record field that the table cannot take; the message names the field and both types."""


@dataclass
class Evolution:
    """The changes to make, each a dotted column path: columns to add (with their type), columns to widen
    (to the type), and columns to make optional."""

    add: list[tuple[str, DataType]] = field(default_factory=list)
    widen: list[tuple[str, DataType]] = field(default_factory=list)
    make_optional: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.add or self.widen or self.make_optional)


_INTS = (ByteType, ShortType, IntegerType)


def _fits(record: DataType, column: DataType) -> bool:
    """Whether values of ``record`` type can be written to ``column`` unchanged or by a lossless cast."""
    if record == column:
        return True
    if isinstance(column, LongType) and isinstance(record, (*_INTS, LongType)):
        return True
    if isinstance(column, IntegerType) and isinstance(record, _INTS):
        return True
    if isinstance(column, DoubleType) and isinstance(record, FloatType):
        return True
    if isinstance(record, ArrayType) and isinstance(column, ArrayType):
        return _fits(record.elementType, column.elementType)
    if isinstance(record, MapType) and isinstance(column, MapType):
        return _fits(record.keyType, column.keyType) and _fits(record.valueType, column.valueType)
    return False


def _widened(record: DataType, column: DataType) -> DataType | None:
    """The wider column type that takes ``record`` values, when a table format can widen to it."""
    if isinstance(column, IntegerType) and isinstance(record, LongType):
        return LongType()
    if isinstance(column, FloatType) and isinstance(record, DoubleType):
        return DoubleType()
    if (
        isinstance(column, DecimalType)
        and isinstance(record, DecimalType)
        and record.scale == column.scale
        and record.precision > column.precision
    ):
        return record
    return None


def plan(table: StructType, records: StructType, evolve: bool, prefix: str = "") -> Evolution:
    """What to change in ``table`` so that rows of ``records`` can be written to it; raises
    :class:`SchemaEvolutionError` naming the field when that is impossible, or when it needs a change and
    ``evolve`` is off (nothing is silently dropped)."""
    out = Evolution()
    columns = {f.name: f for f in table.fields}
    for rec in records.fields:
        path = prefix + rec.name
        col = columns.get(rec.name)
        if col is None:
            if not evolve:
                raise SchemaEvolutionError(
                    f"field '{path}' ({rec.dataType.simpleString()}) is not a column of the table, and "
                    "schema "
                    "evolution is off: enable it or drop the field with a transform"
                )
            out.add.append((path, rec.dataType))
            continue
        if rec.nullable and not col.nullable:
            if not evolve:
                raise SchemaEvolutionError(
                    f"field '{path}' is optional but its column is required, and schema evolution is off"
                )
            out.make_optional.append(path)
        if isinstance(rec.dataType, StructType) and isinstance(col.dataType, StructType):
            inner = plan(col.dataType, rec.dataType, evolve, path + ".")
            out.add += inner.add
            out.widen += inner.widen
            out.make_optional += inner.make_optional
            continue
        if _fits(rec.dataType, col.dataType):
            continue
        wider = _widened(rec.dataType, col.dataType)
        if wider is None:
            raise SchemaEvolutionError(
                f"field '{path}' is {rec.dataType.simpleString()} but its column is "
                f"{col.dataType.simpleString()}: no lossless change of the column takes it"
            )
        if not evolve:
            raise SchemaEvolutionError(
                f"field '{path}' is {rec.dataType.simpleString()}, wider than its column "
                f"({col.dataType.simpleString()}), and schema evolution is off"
            )
        out.widen.append((path, wider))
    return out


def quote_name(name: str) -> str:
    """One column name quoted for Spark SQL (dots and all: a name, not a path)."""
    return "`" + name.replace("`", "``") + "`"


def quote_path(path: str) -> str:
    """A dotted column path with each part quoted for Spark SQL."""
    return ".".join(quote_name(part) for part in path.split("."))
