"""A commit round's data files for tables written together: on the driver with pyarrow, or in one Spark job.

Why a module of its own: both ways make the same thing, Parquet files carrying each table's Iceberg field
ids in ``target/<TABLE_INDEX>=<index>`` per table, which the Iceberg task then appends (its shell,
``iceberg.IcebergSinkTask._write_group``, picks the way: ``iceberg_files.picked_together``).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from functools import reduce
from pathlib import Path
from typing import Any

from kconnect.connectors.lakehouse.commits import sql_string
from kconnect.connectors.lakehouse.evolution import quote_name
from kconnect.connectors.lakehouse.iceberg_files import FIELD_ID, TABLE_INDEX, Columns, arrow_rows
from kconnect.connectors.lakehouse.table_sink import Pending, Pick


def files_in_one_job(
    spark: Any, types: Mapping[str, str], columns: Columns, members: list[Pending], target: Path
) -> None:
    """One Spark job writes the members' rows (each cast to the tables' Spark ``types`` by column name),
    ``partitionBy`` the table's index in ``members``: ``target/<TABLE_INDEX>=<index>``."""
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    frames = []
    for index, p in enumerate(members):
        # SQL text: one gateway call per table (Column objects cost several calls each in PySpark 4).
        rows = p.frame()
        present = set(rows.columns)
        frames.append(
            rows.selectExpr(
                *[
                    f"CAST({quote_name(name) if name in present else 'NULL'} AS {types[name]}) "
                    f"AS {quote_name(name)}"
                    for _, name, _, _ in columns
                ],
                f"{index} AS {TABLE_INDEX}",
            )
        )
    united = reduce(DataFrame.union, frames)
    data = united.select(
        *[F.col(quote_name(name)).alias(name, metadata={FIELD_ID: fid}) for fid, name, _, _ in columns],
        TABLE_INDEX,
    )
    data.coalesce(max(1, spark.sparkContext.defaultParallelism)).write.partitionBy(TABLE_INDEX).parquet(
        str(target)
    )


def files_on_driver(columns: Columns, members: list[tuple[Pending, Any]], pick: Pick, target: Path) -> None:
    """The shared frame's rows come to the driver once (Arrow); each member's are written there with
    pyarrow (``iceberg_files.arrow_rows``). A member that drops rows its table holds (``keep``) has
    them dropped in the collect's query."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    frame = pick.source
    keeps = [p for p, _ in members if p.keep is not None and p.pick is not None]
    for p in keeps:
        assert p.pick is not None
        frame = frame.where(f"{pick.column} <> {sql_string(p.pick.value)} OR ({p.keep})")
    present = set(frame.columns)
    names = [name for _, name, _, _ in columns if name in present]
    batch = (
        pick.collected  # collected to route them; no row held by a table to drop
        if pick.collected is not None and not keeps
        else frame.selectExpr(pick.column, *[quote_name(n) for n in names]).toArrow()
    )
    routes = batch.column(pick.column)
    for index, (p, _) in enumerate(members):
        assert p.pick is not None  # picked_together checked every member
        part = batch.filter(pc.equal(routes, p.pick.value))
        if part.num_rows == 0:
            continue  # no file: the table's commit carries the offsets only
        out = target / f"{TABLE_INDEX}={index}"
        out.mkdir(parents=True)
        pq.write_table(
            arrow_rows(part.drop_columns([pick.column]), columns),
            str(out / f"part-00000-{uuid.uuid4()}.parquet"),
            compression="zstd",
        )
