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

The pure parts are here; the task's shell (``iceberg.IcebergSinkTask``) runs them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from urllib.parse import urlparse

#: Iceberg primitive types written here (decimals too, by prefix): Spark's Parquet writer gives them the
#: physical and logical types Iceberg's own writer does.
FLAT_TYPES = frozenset({"boolean", "int", "long", "float", "double", "string", "binary", "date"})
#: The column naming a row's table (its index in the job) in the job's output: one directory per table.
TABLE_INDEX = "_kc_table"
FIELD_ID = "parquet.field.id"

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
