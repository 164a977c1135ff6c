"""Apache Kafka Connect's Converter contract, which every converter (here and in ``schema_registry``)
implements.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from kconnect.runtime.dataplane.connect_data import (
    ConnectSchema,
    SchemaAndValue,
)
from kconnect.runtime.dataplane.converters.schema_columns import connect_schema_of
from kconnect.runtime.plugins.config_def import ConfigDef

__all__ = ["Converter"]


class Converter(ABC):
    """Apache Kafka Connect's Converter: configure once, then convert keys or values both ways."""

    java_class: ClassVar[str]

    def __init__(self) -> None:
        self.is_key = False

    @abstractmethod
    def config_def(self) -> ConfigDef:
        """The keys this converter accepts, as Apache Kafka Connect's converter of the same class defines
        them, so that ``configure``, validation and the plugin listing use Java's keys."""
        ...

    def configure(self, props: Mapping[str, Any], is_key: bool) -> None:
        """Parse ``props`` (Java's keys); ConfigValidationError names the key, value and what is allowed."""
        self.is_key = is_key
        self._configure(self.config_def().parse({**props, "converter.type": "key" if is_key else "value"}))

    def _configure(self, parsed: Mapping[str, Any]) -> None:  # noqa: B027 - optional hook
        pass

    @abstractmethod
    def to_connect(self, data: bytes | None, topic: str = "") -> SchemaAndValue:
        """Java's ``toConnectData`` for one record's bytes: the record-by-record reference of what a key or
        value means, which the tests hold the column path (``to_columns``) to."""
        ...

    @abstractmethod
    def from_connect(self, value: Any, schema: ConnectSchema | None = None, topic: str = "") -> bytes | None:
        """Java's ``fromConnectData`` for one value: how a source record's key or value is serialized in
        Python, one record at a time, before it is produced."""
        ...

    @abstractmethod
    def to_columns(self, df: DataFrame, column: str, schema: ConnectSchema | None = None) -> DataFrame:
        """Replace BINARY ``column`` with its typed form and add ``error_column(column)``."""

    @abstractmethod
    def from_column(self, c: Column, schema: ConnectSchema | None) -> Column:
        """A typed column (whose Connect schema is ``schema``) as BINARY, as Java serializes it."""

    def from_columns(self, df: DataFrame, column: str) -> DataFrame:
        """Replace typed ``column`` with the BINARY Java would produce for it."""
        return df.withColumn(column, self.from_column(F.col(column), connect_schema_of(df, column)))

    @property
    def reads_batch(self) -> bool:
        """Whether ``to_columns`` (given no schema) runs a Spark job over the frame to learn a schema from
        its records, which a streaming frame cannot have run on it: see ``sink_batch.prepared_on_stream``."""
        return False
