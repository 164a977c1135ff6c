"""Many Iceberg tables' data files from one Spark job, each table then committed with Iceberg's own API.

Why: a commit round of a trickle (50 tables, a few rows each) spent about a second of JVM per table in
Spark's ``writeTo(...).append()``: a query planned and a job run per table, however few its rows. Here the
rows of every table of a round whose schema is the same (the same Iceberg field ids, names and types) are
written by one Spark job, ``partitionBy`` the table, as Parquet files carrying the tables' field ids
(Spark writes a column's ``parquet.field.id`` metadata, ``spark.sql.parquet.fieldId.write.enabled``); each
table's files are then moved into its data location and appended in one Iceberg commit whose snapshot
summary carries the Kafka offsets, exactly as the Spark path's snapshot does. A reader cannot tell the
two apart: the files hold the field ids Iceberg reads by, and their metrics come from their footers
(``ParquetUtil.fileMetrics`` under the table's metrics config).

What qualifies (:func:`together_key` and ``IcebergSinkTask._write_together``): append mode (upserts MERGE),
an unpartitioned table (a data file of a partitioned one must hold one partition's rows and name it), on a
local file system (the files are moved, not copied between stores), and flat columns of types whose
Parquet form Spark and Iceberg write alike (no timestamps: Spark writes INT96 by default; no nested
types: their field ids sit below the top level). Anything else goes the Spark way, table by table.

A round of few rows (a trickle: 50 tables of a few rows each; at most ``DRIVER_ROWS`` records in the
commit) whose tables' rows are all picked from one frame by one column (``table_sink.Pick``: the route
field or the topic) skips even that job's writing: the frame comes to the driver once as Arrow
(``toArrow``), and each table's rows are written there with pyarrow (:func:`arrow_rows`: the tables'
types, their field ids as ``PARQUET:field_id``, as pyiceberg writes them). A Spark write of 50 one-row
partitions cost 11-17 s of a round on this project's 2-core machine (a union of 50 selections planned,
compiled and scanned, 50 files through Hadoop's committer); the collect is one small job and the 50 files
are milliseconds.

The pure parts are here; the task's shell (``iceberg.IcebergSinkTask``) runs them.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any
from urllib.parse import urlparse

from kconnect.connectors.lakehouse.table_sink import Pending, Pick

#: Iceberg primitive types written here (decimals too, by prefix): Spark's Parquet writer gives them the
#: physical and logical types Iceberg's own writer does.
FLAT_TYPES = frozenset({"boolean", "int", "long", "float", "double", "string", "binary", "date"})
#: The column naming a row's table (its index in the job) in the job's output: one directory per table.
TABLE_INDEX = "_kc_table"
FIELD_ID = "parquet.field.id"
#: A commit of at most this many records, all its tables picked from one frame, is written on the driver.
DRIVER_ROWS = 50_000
_DECIMAL = re.compile(r"decimal\((\d+),\s*(\d+)\)")

#: (field id, name, Iceberg type, required) per column, in the table's order.
Columns = tuple[tuple[int, str, str, bool], ...]


def together_key(schema_json: str, location: str, partitioned: bool) -> Columns | None:
    """The columns of a table whose data files may be written with other tables' of the same columns, from
    its Iceberg schema's JSON (``SchemaParser.toJson``); None when the table must be written on its own
    (partitioned, not on a local file system, a nested or timestamp column)."""
    if partitioned or urlparse(location).scheme not in ("", "file"):
        return None
    try:
        doc = json.loads(schema_json)
    except ValueError:
        return None
    out = []
    for field in doc.get("fields", []):
        kind = field.get("type")
        if not isinstance(kind, str) or not (kind in FLAT_TYPES or kind.startswith("decimal(")):
            return None
        out.append((int(field["id"]), str(field["name"]), kind, bool(field.get("required", False))))
    return tuple(out) if out else None


def local_path(location: str) -> str:
    """A file's path on this machine from an Iceberg location (``file:/x``, ``file:///x`` or ``/x``)."""
    parsed = urlparse(location)
    return parsed.path if parsed.scheme == "file" else location


def writable_alone(columns: Columns, nullable: Mapping[str, bool]) -> bool:
    """Whether the rows' columns (name -> nullable, absent: filled with nulls) can go to a table of
    ``columns`` without Spark's checks: a required column must be present and not nullable (Spark's write
    refuses otherwise, with its message, so such a table takes the Spark way)."""
    return all(not required or nullable.get(name, True) is False for _, name, _, required in columns)


def arrow_type(kind: str) -> Any:
    """The Arrow type pyarrow writes as the Parquet form Iceberg reads for an Iceberg primitive type
    (``FLAT_TYPES`` or ``decimal(p, s)``)."""
    import pyarrow as pa

    simple = {
        "boolean": pa.bool_(),
        "int": pa.int32(),
        "long": pa.int64(),
        "float": pa.float32(),
        "double": pa.float64(),
        "string": pa.string(),
        "binary": pa.binary(),
        "date": pa.date32(),
    }
    if kind in simple:
        return simple[kind]
    match = _DECIMAL.fullmatch(kind)
    if match is None:
        raise ValueError(
            f"no Arrow form for Iceberg type {kind}; allowed: {sorted(FLAT_TYPES)} and decimal(p,s)"
        )
    return pa.decimal128(int(match.group(1)), int(match.group(2)))


def arrow_rows(rows: Any, columns: Columns) -> Any:
    """A pyarrow Table of ``rows`` (a pyarrow Table: the commit's rows of one table) in the table's column
    order and types, each field carrying its Iceberg field id (``PARQUET:field_id``) and required where
    the table's column is; a column the rows lack is all nulls (the table's column is then optional:
    ``writable_alone``)."""
    import pyarrow as pa

    fields, arrays = [], []
    present = set(rows.column_names)
    for field_id, name, kind, required in columns:
        target = arrow_type(kind)
        field_id_meta = {b"PARQUET:field_id": str(field_id).encode()}
        fields.append(pa.field(name, target, nullable=not required, metadata=field_id_meta))
        arrays.append(rows.column(name).cast(target) if name in present else pa.nulls(rows.num_rows, target))
    return pa.Table.from_arrays(arrays, schema=pa.schema(fields))


def picked_together(members: Sequence[Pending]) -> Pick | None:
    """The pick every member's rows come from when they all are one value's rows of the same frame by the
    same column, and that frame has at most ``DRIVER_ROWS`` rows: the members are then written on the
    driver. None otherwise."""
    first = members[0].pick if members else None
    if first is None or first.bound > DRIVER_ROWS:
        return None
    for p in members:
        if p.pick is None or p.pick.source is not first.source or p.pick.column != first.column:
            return None
    return first


#: The JVM helper that appends a round's tables in one py4j call (``connectors/lakehouse/java``, compiled
#: by ``make lakehouse`` onto Spark's classpath), and the version of its contract this code speaks.
HELPER_CLASS = "kconnect.lakehouse.IcebergAppends"
HELPER_VERSION = 2

#: One table's outcome from the helper: (new snapshot id, its parent's id or None, whether its summary
#: carries the offsets given), or the error's text.
Appended = tuple[int, int | None, bool] | str


def appended(answer: str, tables: int) -> list[Appended]:
    """The helper's answer (``IcebergAppends.appendAll``: a line per table, ``ok<TAB>id<TAB>parent or
    -<TAB>1|0`` or ``error<TAB>text``) as one outcome per table, in order. An answer of the wrong shape is
    every table's error (the helper and this code disagree: nothing is taken as committed)."""
    lines = answer.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != tables:
        return [f"the Iceberg helper answered {len(lines)} lines for {tables} tables"] * tables
    out: list[Appended] = []
    for line in lines:
        parts = line.split("\t")
        if parts[0] == "ok" and len(parts) == 4:
            try:
                out.append((int(parts[1]), None if parts[2] == "-" else int(parts[2]), parts[3] == "1"))
                continue
            except ValueError:
                pass
        out.append(parts[1] if parts[0] == "error" and len(parts) > 1 else f"unreadable answer: {line!r}")
    return out


#: A table as the helper's ``describeAll`` found it: its current snapshot id (None: none yet), its Spark
#: schema's JSON and its :func:`together_key`.
Described = tuple[int | None, str, Columns | None]


def described(answer: str, tables: int) -> list[Described | str | None]:
    """The helper's ``describeAll`` answer (a line per table: ``missing``, ``error<TAB>text`` or
    ``found<TAB>snapshot or -<TAB>1 if unpartitioned<TAB>location<TAB>Spark schema JSON<TAB>Iceberg
    schema JSON``) as one entry per table, in order: the table (:data:`Described`), None when it does not
    exist, or the error's text (that table is then loaded the other way). An answer of the wrong shape is
    every table's error."""
    lines = answer.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != tables:
        return [f"the Iceberg helper answered {len(lines)} lines for {tables} tables"] * tables
    out: list[Described | str | None] = []
    for line in lines:
        parts = line.split("\t")
        if parts == ["missing"]:
            out.append(None)
        elif parts[0] == "found" and len(parts) == 6:
            snapshot = None if parts[1] == "-" else int(parts[1])
            out.append((snapshot, parts[4], together_key(parts[5], parts[3], parts[2] != "1")))
        else:
            out.append(parts[1] if parts[0] == "error" and len(parts) > 1 else f"unreadable answer: {line!r}")
    return out
