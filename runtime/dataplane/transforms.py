"""A connector's transformation chain (``transforms``, ``predicates``) applied to a Spark record frame.

Connector configs written for Apache Kafka Connect (``transforms``, ``transforms.<alias>.type``,
``.predicate``, ``.negate``, ``predicates``, ``predicates.<alias>.type`` and each transformation's own
keys) work unchanged: :func:`transform_chain` reads them, and :class:`TransformChain` applies the
transformations (:mod:`transformations`) in order, each only to the rows its predicate (:mod:`predicates`)
selects. A row a transformation cannot handle gets a message in ``TRANSFORM_ERROR`` instead of an
exception, so :mod:`errors_policy` can tolerate or dead-letter it (Java's TRANSFORMATION stage).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kconnect.runtime.dataplane.connect_data import ConnectDataError
from kconnect.runtime.dataplane.predicates import PREDICATES
from kconnect.runtime.dataplane.transformations import TRANSFORMATIONS, Builder, TransformationPlugin
from kconnect.runtime.plugins.config_def import ConfigValidationError
from kconnect.runtime.plugins.transform_configs import find_predicate, find_transformation

__all__ = [
    "DROPPED",
    "TRANSFORM_ERROR",
    "TRANSFORM_ERROR_CLASS",
    "ConfiguredTransform",
    "TransformChain",
    "transform_chain",
]

TRANSFORM_ERROR: Final = "transform__error"


TRANSFORM_ERROR_CLASS: Final = "transform__error_class"

#: With ``apply(..., drop=False)``: true on a row a transformation (Filter) dropped, which the later
#: transformations then leave alone. A sink reads the offsets it consumed from every row it read, dropped
#: or not, in the same pass as the rows it delivers (``sink_runner``).
DROPPED: Final = "transform__dropped"


@dataclass(frozen=True)
class ConfiguredTransform:
    """One alias of ``transforms``: the transformation, its Spark builder and its optional predicate."""

    alias: str
    plugin: TransformationPlugin
    builder: Builder
    predicate: Callable[[DataFrame], Column] | None = None
    negate: bool = False


#: Columns no transformation may write: where a record was read (Java's SMTs may set a sink record's
#: partition, but none of the transformations kconnect runs does).
FIXED_COLUMNS = frozenset({"partition", "offset"})


@dataclass(frozen=True)
class TransformChain:
    """A connector's ``transforms`` in order, each with its optional predicate."""

    transforms: tuple[ConfiguredTransform, ...] = ()

    def apply(self, df: DataFrame, drop: bool = True) -> DataFrame:
        """The frame after every transform; adds ``TRANSFORM_ERROR``/``TRANSFORM_ERROR_CLASS`` (null if fine).

        A row a transformation drops is left out, or with ``drop=False`` kept and marked in ``DROPPED``
        (no later transformation applies to it, and it gets no error).

        Raises ConnectDataError when a transform cannot apply to this frame's types at all (for example
        InsertField on a string value): Java fails every such record too, so the task fails clearly.
        """
        if TRANSFORM_ERROR not in df.columns:
            df = df.withColumn(TRANSFORM_ERROR, F.lit(None).cast("string")).withColumn(
                TRANSFORM_ERROR_CLASS, F.lit(None).cast("string")
            )
        if not drop and DROPPED not in df.columns:
            df = df.withColumn(DROPPED, F.lit(False))
        for t in self.transforms:
            df = self._apply_one(df, t, drop)
        return df

    @staticmethod
    def _apply_one(df: DataFrame, t: ConfiguredTransform, drop: bool = True) -> DataFrame:
        try:
            step = t.builder(df)
        except ConnectDataError as exc:
            raise ConnectDataError(f"Transformation {t.alias} ({t.plugin.class_name}): {exc}") from None
        if FIXED_COLUMNS & set(step.columns):
            # A sink commits the offsets of the rows as read from these columns (``sink_runner.READ_TOPIC``).
            what = f"Transformation {t.alias} ({t.plugin.class_name})"
            raise ConnectDataError(f"{what} would change a record's partition or offset")
        cond: Column | None = None
        if t.predicate is not None:
            cond = t.predicate(df)
            if t.negate:
                cond = ~cond
        cond_col = "__kc_applies"
        applies_to = cond if cond is not None else F.lit(True)
        if not drop:
            applies_to = applies_to & ~F.col(DROPPED)  # a dropped row stays as it was dropped
        df = df.withColumn(cond_col, applies_to)
        applies = F.col(cond_col)
        updates: dict[str, Column] = {}
        for name, expr in step.columns.items():
            if cond is None:
                updates[name] = expr
                continue
            before, after = df.schema[name].dataType, df.select(expr).schema[0].dataType
            if before != after and spark_type_changed(before, after):
                raise ConnectDataError(
                    f"Transformation {t.alias} ({t.plugin.class_name}) changes the {name} type and has a "
                    "predicate; "
                    "in a Spark frame every row must keep one type"
                )
            metadata = df.select(expr).schema[0].metadata
            updates[name] = F.when(applies, expr).otherwise(F.col(name)).alias(name, metadata=metadata)
        if step.error is not None:
            error = F.when(applies, step.error)
            updates[TRANSFORM_ERROR] = F.coalesce(F.col(TRANSFORM_ERROR), error)
            updates[TRANSFORM_ERROR_CLASS] = F.when(
                F.col(TRANSFORM_ERROR).isNull() & error.isNotNull(), F.lit(t.plugin.class_name)
            ).otherwise(F.col(TRANSFORM_ERROR_CLASS))
        if updates:
            df = df.withColumns(updates)
        if step.keep is not None:
            # A row that already failed is kept so the error policy sees it.
            kept = ~applies | step.keep | F.col(TRANSFORM_ERROR).isNotNull()
            # A null condition drops the row, as ``where`` does.
            dropped = F.col(DROPPED) | F.coalesce(~kept, F.lit(True))
            df = df.where(kept) if drop else df.withColumn(DROPPED, dropped)
        return df.drop(cond_col)


def spark_type_changed(before: Any, after: Any) -> bool:
    """Whether two Spark types differ as Spark prints them (metadata and nullability aside)."""
    return bool(before.simpleString() != after.simpleString())


def _sub_props(config: Mapping[str, str], prefix: str, skip: Sequence[str] = ()) -> dict[str, str]:
    return {
        k[len(prefix) :]: v
        for k, v in config.items()
        if k.startswith(prefix) and k[len(prefix) :] not in skip
    }


def _aliases(config: Mapping[str, str], key: str) -> list[str]:
    raw = config.get(key, "").strip()
    aliases = [a.strip() for a in raw.split(",") if a.strip()] if raw else []
    if len(set(aliases)) != len(aliases):
        raise ConfigValidationError(key, raw, "Duplicate alias provided.")
    return aliases


def transform_chain(config: Mapping[str, str]) -> TransformChain:
    """The chain a connector config describes, with Java's keys; errors name the key and what is allowed."""
    predicates: dict[str, Callable[[DataFrame], Column]] = {}
    for alias in _aliases(config, "predicates"):
        key = f"predicates.{alias}.type"
        found = find_predicate(config.get(key, ""))
        if found is None:
            raise ConfigValidationError(
                key, config.get(key), "Not a predicate kconnect knows; supported: " + ", ".join(PREDICATES)
            )
        predicate_plugin = PREDICATES[found.class_name]
        parsed = predicate_plugin.config_def().parse(_sub_props(config, f"predicates.{alias}.", ("type",)))
        predicates[alias] = predicate_plugin.build(parsed)
    configured = []
    for alias in _aliases(config, "transforms"):
        key = f"transforms.{alias}.type"
        definition = find_transformation(config.get(key, ""))
        if definition is None:
            raise ConfigValidationError(
                key,
                config.get(key),
                "Not a transformation kconnect knows; supported: " + ", ".join(TRANSFORMATIONS),
            )
        plugin = TRANSFORMATIONS[definition.class_name]
        prefix = f"transforms.{alias}."
        parsed = plugin.config_def().parse(_sub_props(config, prefix, ("type", "predicate", "negate")))
        predicate_alias = config.get(prefix + "predicate")
        negate_raw = config.get(prefix + "negate", "false").strip().lower()
        if negate_raw not in ("true", "false"):
            raise ConfigValidationError(
                prefix + "negate", config[prefix + "negate"], "Expected value to be either true or false"
            )
        predicate = None
        if predicate_alias:
            if predicate_alias not in predicates:
                raise ConfigValidationError(
                    prefix + "predicate",
                    predicate_alias,
                    "Unknown predicate alias; defined in predicates: " + config.get("predicates", ""),
                )
            predicate = predicates[predicate_alias]
        configured.append(
            ConfiguredTransform(
                alias, plugin, plugin.build(parsed, plugin.target or "value"), predicate, negate_raw == "true"
            )
        )
    return TransformChain(tuple(configured))
