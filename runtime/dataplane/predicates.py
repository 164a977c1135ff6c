"""Predicates with Apache Kafka Connect's names, as boolean Spark columns over the record frame.

A predicate makes a transformation conditional (``transforms.<alias>.predicate``, ``.negate``); here it
is a function from the record frame to a boolean column, so :mod:`transforms` applies a transformation
only to the rows it selects, inside the JVM. Their keys and ConfigDefs are in
:mod:`kconnect.runtime.plugins.transform_configs`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kconnect.runtime.plugins.config_def import ConfigDef
from kconnect.runtime.plugins.transform_configs import PREDICATE_DEFS

__all__ = ["PREDICATES", "PredicatePlugin"]


@dataclass(frozen=True)
class PredicatePlugin:
    """One Java predicate class: its ConfigDef and how to build its condition from parsed config."""

    class_name: str
    config_def: Callable[[], ConfigDef]
    build: Callable[[Mapping[str, Any]], Callable[[DataFrame], Column]]

    @property
    def simple_name(self) -> str:
        """The class name without its package, which Java also accepts as an alias."""
        return self.class_name.rsplit(".", 1)[-1]


def _topic_name_matches(cfg: Mapping[str, Any]) -> Callable[[DataFrame], Column]:
    anchored = f"^(?:{cfg['pattern']})$"
    return lambda df: F.coalesce(F.col("topic").rlike(anchored), F.lit(False))


def _has_header_key(cfg: Mapping[str, Any]) -> Callable[[DataFrame], Column]:
    name = str(cfg["name"])
    return lambda df: F.coalesce(F.exists(F.col("headers"), lambda h: h["key"] == F.lit(name)), F.lit(False))


def _record_is_tombstone(cfg: Mapping[str, Any]) -> Callable[[DataFrame], Column]:
    return lambda df: F.col("value").isNull()


_BUILDERS: Final[Mapping[str, Callable[[Mapping[str, Any]], Callable[[DataFrame], Column]]]] = {
    "HasHeaderKey": _has_header_key,
    "RecordIsTombstone": _record_is_tombstone,
    "TopicNameMatches": _topic_name_matches,
}

#: The predicates kconnect runs, by Apache class name, in the order of their definitions.
PREDICATES: Final[dict[str, PredicatePlugin]] = {
    d.class_name: PredicatePlugin(d.class_name, d.config_def, _BUILDERS[d.simple_name])
    for d in PREDICATE_DEFS.values()
}
