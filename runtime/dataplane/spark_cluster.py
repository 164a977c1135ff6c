"""Whether ``spark.master`` is this machine or a cluster, and what follows from it: where source tasks run,
where executor-run tasks reach the worker, and whether Spark's RPC protects what crosses the network.

Split from the executor (:mod:`kconnect.runtime.dataplane.spark_executor`): these are pure decisions on
the worker's settings, tested by tables.
"""

from __future__ import annotations

import socket
from collections.abc import Mapping

from kconnect.config.worker import (
    SourceTaskPlacement,
)

__all__ = [
    "SPARK_RPC_PROTECTION",
    "channel_hosts",
    "is_local_master",
    "source_placement",
    "unprotected_spark_rpc",
]


def is_local_master(spark_master: str) -> bool:
    """Whether ``spark.master`` runs everything in this process's machine (``local``, ``local[N]``,
    ``local-cluster[...]``) rather than on a cluster's executors."""
    return spark_master.strip().lower().startswith("local")


#: Spark's settings that authenticate (a shared secret) and encrypt (AES) its RPC between the driver (the
#: worker), the master and the executors.
SPARK_RPC_PROTECTION = ("spark.authenticate", "spark.network.crypto.enabled")


def unprotected_spark_rpc(settings: Mapping[str, str]) -> list[str]:
    """Which of ``SPARK_RPC_PROTECTION`` a cluster master runs without ([] with a local master, where
    Spark's RPC stays inside this machine's loopback).

    Why it matters to kconnect: an executor-run source task's job crosses that RPC with the task's
    channel secret and the task's Kafka client settings (its credentials), and a sink task's reads with
    its consumer settings; without both, anyone on the path can read them, and anyone who reaches the
    master can submit work to the executors.
    """
    if is_local_master(settings.get("spark.master", "local[*]")):
        return []
    return [key for key in SPARK_RPC_PROTECTION if settings.get(key, "false").strip().lower() != "true"]


def channel_hosts(settings: Mapping[str, str]) -> tuple[str, str]:
    """Where the worker listens for its executor-run tasks and the address they are given: the driver's
    own (``spark.driver.bindAddress``, ``spark.driver.host``), which executors must reach anyway; with a
    local master, the loopback address; else every interface and this host's name."""
    local = is_local_master(settings.get("spark.master", "local[*]"))
    advertised = settings.get("spark.driver.host") or ("127.0.0.1" if local else socket.getfqdn())
    bind = settings.get("spark.driver.bindAddress") or settings.get("spark.driver.host")
    return bind or ("127.0.0.1" if local else ""), advertised


def source_placement(
    configured: SourceTaskPlacement, spark_master: str, task_config: Mapping[str, str]
) -> tuple[SourceTaskPlacement, str]:
    """Where a source task runs (``worker`` or ``executor``, see ``spark_source``), and why when it is not
    simply what ``source.task.placement`` says.

    ``auto`` means executor with a cluster master and worker with a local one: locally the "executor" is
    this machine anyway, and each source task would hold one of its few task slots for as long as it runs.
    A connector with transforms keeps its tasks on the worker: the chain is a Spark plan, and a Spark task
    has no SparkSession to run one.
    """
    placement, reason = configured, ""
    if configured == SourceTaskPlacement.AUTO:
        local = is_local_master(spark_master)
        placement = SourceTaskPlacement.WORKER if local else SourceTaskPlacement.EXECUTOR
        reason = f"auto, spark.master={spark_master}"
    if placement == SourceTaskPlacement.EXECUTOR and task_config.get("transforms", "").strip():
        return SourceTaskPlacement.WORKER, "the connector has transforms (a Spark plan, run on the worker)"
    return placement, reason
