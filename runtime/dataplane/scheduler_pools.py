"""The FAIR scheduler pools the worker's Spark jobs name, and the allocation file that configures them.

Why a file: Spark's FAIR scheduler creates a pool it was never told about with default settings and
warns, for every such pool, that it "has not been configured"; the worker used to name a pool per task,
so its log repeated the warning for every task (issue 32). Now every job names one of two pools, both
configured in an allocation file the worker writes at start (``spark.scheduler.allocation.file``, unless
worker properties set one of their own, which must then define these pools):

- ``SOURCE_HOSTS_POOL``: the source hosts' long-running jobs (``source_hosts``), FIFO inside: they never
  end, so sharing among them would mean nothing.
- ``SINKS_POOL``: sink tasks' micro-batches (each task still has a job group of its own), FAIR inside so
  that one busy sink does not hold back another's batch, with a minimum share of one core so that it is
  served first whenever it has less than that.
"""

from __future__ import annotations

from xml.sax.saxutils import quoteattr

SOURCE_HOSTS_POOL = "kconnect-source-hosts"
SINKS_POOL = "kconnect-sinks"
#: Pool -> (scheduling mode inside it, weight, minimum share in cores).
POOLS: dict[str, tuple[str, int, int]] = {
    SOURCE_HOSTS_POOL: ("FIFO", 1, 0),
    SINKS_POOL: ("FAIR", 1, 1),
}


def allocation_xml(pools: dict[str, tuple[str, int, int]] = POOLS) -> str:
    """The allocation file's text (Spark's ``fairscheduler.xml`` format)."""
    lines = ['<?xml version="1.0"?>', "<allocations>"]
    for name, (mode, weight, min_share) in pools.items():
        lines += [
            f"  <pool name={quoteattr(name)}>",
            f"    <schedulingMode>{mode}</schedulingMode>",
            f"    <weight>{weight}</weight>",
            f"    <minShare>{min_share}</minShare>",
            "  </pool>",
        ]
    lines.append("</allocations>")
    return "\n".join(lines) + "\n"
