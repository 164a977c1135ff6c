"""The Iceberg sink's catalog in the worker's SparkSession, from ``iceberg.catalog.*``: pure functions.

Why a module of its own: which Spark catalog options a connector's keys make, the name it is registered
under and what a config lacks are decisions made from the config alone, tested without Spark; the task
(``iceberg.IcebergSinkTask``) registers the catalog they describe.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping

from kconnect.config.masking import is_sensitive

CATALOG_PREFIX = "iceberg.catalog."


def catalog_properties(props: Mapping[str, str]) -> dict[str, str]:
    """Spark catalog options from ``iceberg.catalog.*``: hadoop by default, table caching off (a table
    another worker committed to must be read fresh: its snapshots hold the offsets)."""
    out = {
        k[len(CATALOG_PREFIX) :]: v
        for k, v in props.items()
        if k.startswith(CATALOG_PREFIX) and v is not None
    }
    if "type" not in out and "catalog-impl" not in out:
        out["type"] = "hadoop"
    out["cache-enabled"] = "false"
    return out


def catalog_name(props: Mapping[str, str]) -> str:
    """The connector's catalog's name in the worker's SparkSession: one per distinct catalog config.
    Credentials are left out of the hash: the name is logged, and a short hash of a password is a clue.

    A jdbc catalog keeps its tables under its own name (the ``catalog_name`` column of ``iceberg_tables``),
    so there the name is ``iceberg.catalog`` (default ``iceberg``, as in Apache's sink): readers, and tables
    Apache's sink wrote, see the same tables."""
    if catalog_properties(props).get("type") == "jdbc":
        return props.get("iceberg.catalog") or "iceberg"
    text = "\n".join(
        f"{k}={v}"
        for k, v in sorted(catalog_properties(props).items())
        if not is_sensitive(CATALOG_PREFIX + k)
    )
    return "kc_" + hashlib.sha1(text.encode()).hexdigest()[:12]


def catalog_problems(props: Mapping[str, str | None]) -> dict[str, str]:
    """What the catalog keys lack: the hadoop catalog needs a warehouse, the jdbc catalog a jdbc: uri and a
    warehouse (where its tables' files go)."""
    catalog = catalog_properties({k: v for k, v in props.items() if v is not None})
    kind = catalog.get("type")
    if kind == "hadoop" and not catalog.get("warehouse"):
        return {
            "iceberg.catalog.warehouse": (
                "the hadoop catalog (the default iceberg.catalog.type) needs a warehouse directory"
            )
        }
    if kind == "jdbc":
        if not catalog.get("uri", "").startswith("jdbc:"):
            return {
                "iceberg.catalog.uri": (
                    "the jdbc catalog needs a JDBC URL (jdbc:postgresql://host:port/database)"
                )
            }
        if not catalog.get("warehouse"):
            return {
                "iceberg.catalog.warehouse": "the jdbc catalog needs a warehouse location for table files"
            }
    return {}
