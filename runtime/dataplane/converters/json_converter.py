"""Apache Kafka Connect's JsonConverter, in Java's exact bytes."""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple, cast

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    StringType,
    StructField,
    StructType,
)

from kconnect.runtime.codecs import java_json
from kconnect.runtime.dataplane.connect_data import (
    ConnectDataError,
    ConnectSchema,
    SchemaAndValue,
    from_json_value,
    schema_from_json,
    schema_to_json,
    to_json_value,
)
from kconnect.runtime.dataplane.converters.base import Converter
from kconnect.runtime.dataplane.converters.json_columns import (
    CORRUPT_COLUMN,
    ENVELOPE_ERROR,
    MALFORMED,
    decode_json,
    encode_json,
    is_envelope,
    json_read_type,
    json_text,
)
from kconnect.runtime.dataplane.converters.schema_columns import (
    derive_schema,
    error_column,
    with_schema,
)
from kconnect.runtime.plugins.config_def import ConfigDef, ConfigValidationError
from kconnect.runtime.plugins.converter_configs import converter_config_def

__all__ = [
    "BOUNDS_PER_COLUMN",
    "SCHEMA_TEXT_CACHE",
    "JsonConverter",
    "Sample",
    "envelope_bounds",
    "guess_flag",
    "guess_holds",
    "guessed_sample",
    "sample_envelopes",
    "samples_from_bounds",
]


#: How many schema objects' envelope JSON a JsonConverter keeps written (Java's ``schemas.cache.size``
#: default).
SCHEMA_TEXT_CACHE = 1000


_SCHEMA_SPELLINGS = 16

#: How Java's JsonConverter starts an envelope, and what comes between its schema and its payload.
_SCHEMA_HEAD = '{"schema":'
_PAYLOAD_HEAD = ',"payload":'
_SCHEMA_HEAD_BYTES = _SCHEMA_HEAD.encode()
_PAYLOAD_HEAD_BYTES = _PAYLOAD_HEAD.encode()
#: An envelope prefix (``{"schema":<text>,"payload":``) whose text is not one JSON schema: such records are
#: read whole. ``_UNSEEN``: a prefix not read before.
_NOT_A_SCHEMA = object()
_UNSEEN = object()


class Sample(NamedTuple):
    """A batch's sampled envelope schema (None: no record names one) and the texts that spell it.

    ``prefix``: when known, the exact text ``{"schema":<text>,"payload":`` that the batch's records start
    with (every one of them, or, for a batch of mixed schemas, those naming the sampled schema so), as
    Java's JsonConverter writes them. A record that starts with it names the sampled schema, so its schema
    need not be parsed: only its payload is (:meth:`JsonConverter.to_columns`).
    """

    schema: ConnectSchema | None
    spellings: frozenset[str]
    prefix: str | None = None


class JsonConverter(Converter):
    """Apache Kafka Connect's JsonConverter: the ``{"schema", "payload"}`` envelope (or the bare payload
    with ``schemas.enable=false``) in Java's exact bytes, so that Java and kconnect workers can share
    topics."""

    java_class = "org.apache.kafka.connect.json.JsonConverter"

    def __init__(self) -> None:
        super().__init__()
        self.schemas_enable = True
        self.decimal_numeric = False
        self.replace_null_with_default = True
        #: ``schema.content`` (KIP-1054), parsed: the schema every record is read with (None: each
        #: record's envelope says).
        self.content_schema: ConnectSchema | None = None
        self._schema_texts: dict[int, tuple[ConnectSchema, str]] = {}
        #: Envelope prefixes read before (``_envelope``) and the schema each spells.
        self._prefix_schemas: dict[bytes, object] = {}
        #: The envelope prefix (``Sample.prefix``) of the last batch sampled: the next batch's records
        #: are checked against it as its positions are read (:func:`envelope_bounds`), so that a topic
        #: whose records keep one schema needs no more than that check to sample it.
        self.envelope_prefix: str | None = None
        #: Whether the last batch sampled had no envelope spelled as Java writes one (another producer's
        #: key order or spacing): the next batch's schema texts are then read whole (``envelope_bounds``).
        self.envelope_texts = False

    def config_def(self) -> ConfigDef:
        """Java's JsonConverter keys: ``schemas.enable``, ``schemas.cache.size``, ``schema.content``,
        ``decimal.format``, ``replace.null.with.default`` and ``converter.type``."""
        return converter_config_def(self.java_class)

    def _configure(self, parsed: Mapping[str, Any]) -> None:
        self.schemas_enable = bool(parsed["schemas.enable"])
        fmt = str(parsed["decimal.format"]).upper()
        if fmt not in ("BASE64", "NUMERIC"):
            raise ConfigValidationError(
                "decimal.format",
                parsed["decimal.format"],
                "String must be one of (case insensitive): BASE64, NUMERIC",
            )
        self.decimal_numeric = fmt == "NUMERIC"
        self.replace_null_with_default = bool(parsed["replace.null.with.default"])
        content = parsed.get("schema.content")
        self.content_schema = None
        if content:
            try:
                self.content_schema = schema_from_json(java_json.read(str(content)))
            except (ValueError, ConnectDataError) as exc:
                raise ConfigValidationError(
                    "schema.content", content, f"must be a Connect JSON schema ({exc})"
                ) from None
            if self.content_schema is None:
                raise ConfigValidationError(
                    "schema.content", content, "must be a Connect JSON schema, not null"
                )

    # -- record by record

    def to_connect(self, data: bytes | None, topic: str = "") -> SchemaAndValue:
        """One record's JSON read as Java reads it: null or empty bytes are a tombstone, and malformed text
        or an envelope with other fields fails with Java's message."""
        if data is None or len(data) == 0:
            return SchemaAndValue(None, None)
        if self.schemas_enable and self.content_schema is None:
            read = self._envelope(data)
            if read is not None:
                return read
        try:
            node = java_json.read(data, exact=True)
        except (ValueError, UnicodeDecodeError) as exc:
            raise ConnectDataError(
                f"Converting byte[] to Kafka Connect data failed due to serialization error: {exc}"
            ) from None
        if not self.schemas_enable:
            return SchemaAndValue(None, from_json_value(None, node))
        if self.content_schema is not None:
            # KIP-1054: the configured schema; the record is an envelope (its payload is read) or the
            # bare payload.
            payload = (
                node["payload"] if isinstance(node, dict) and set(node) == {"schema", "payload"} else node
            )
            value = from_json_value(
                self.content_schema, payload, replace_null_with_default=self.replace_null_with_default
            )
            return SchemaAndValue(self.content_schema, value)
        if not isinstance(node, dict) or set(node) != {"schema", "payload"}:
            raise ConnectDataError(ENVELOPE_ERROR)
        schema = schema_from_json(node["schema"])
        value = from_json_value(
            schema, node["payload"], replace_null_with_default=self.replace_null_with_default
        )
        return SchemaAndValue(schema, value)

    def _envelope(self, data: bytes) -> SchemaAndValue | None:
        """An envelope read by its payload alone when it starts with a schema text read before: None when it
        does not (the record is then read whole, which also gives Java's errors for a malformed one).

        Why: parsing the schema and building its ``ConnectSchema`` for every record cost about two thirds
        of a record's reading (a struct of eight fields: ~90 of ~140 us), although a topic's records keep one
        schema. Java's JsonConverter caches its schemas too (``schemas.cache.size``). Safe because a
        prefix ``{"schema":<text>,"payload":`` is taken only where ``<text>`` is one whole JSON value (a
        proper prefix of an object's text never is, and ``,"payload":`` cannot appear unescaped inside a
        string), and the rest only when it is one whole JSON value followed by the closing brace: an
        envelope with another key, trailing text or a duplicate ``payload`` is read whole."""
        if not data.startswith(_SCHEMA_HEAD_BYTES) or not data.endswith(b"}"):
            return None
        end = data.find(_PAYLOAD_HEAD_BYTES)
        if end < 0:
            return None
        prefix = bytes(data[:end])
        schema = self._prefix_schemas.get(prefix, _UNSEEN)
        if schema is _UNSEEN:
            schema = self._prefix_schema(prefix)
        if schema is _NOT_A_SCHEMA:
            return None
        try:
            payload = java_json.read(data[end + len(_PAYLOAD_HEAD_BYTES) : -1], exact=True)
        except (ValueError, UnicodeDecodeError):
            return None
        connect_schema = cast(ConnectSchema | None, schema)
        value = from_json_value(
            connect_schema, payload, replace_null_with_default=self.replace_null_with_default
        )
        return SchemaAndValue(connect_schema, value)

    def _prefix_schema(self, prefix: bytes) -> object:
        """The schema ``prefix`` spells (None for JSON null), or ``_NOT_A_SCHEMA``; kept (the cache emptied
        at its bound, as ``_schema_text``'s)."""
        try:
            schema: object = schema_from_json(java_json.read(prefix[len(_SCHEMA_HEAD_BYTES) :], exact=True))
        except (ValueError, UnicodeDecodeError, ConnectDataError):
            schema = _NOT_A_SCHEMA
        if len(self._prefix_schemas) >= SCHEMA_TEXT_CACHE:
            self._prefix_schemas.clear()
        self._prefix_schemas[prefix] = schema
        return schema

    def from_connect(self, value: Any, schema: ConnectSchema | None = None, topic: str = "") -> bytes | None:
        """One value written as Java's JsonConverter writes it: a null value without a schema is a
        tombstone (null bytes), anything else the envelope or bare payload in Java's JSON text."""
        if schema is None and value is None:
            return None
        payload = to_json_value(
            schema,
            value,
            decimal_numeric=self.decimal_numeric,
            replace_null_with_default=self.replace_null_with_default,
        )
        if not self.schemas_enable:
            return java_json.write(payload).encode("utf-8")
        return f'{{"schema":{self._schema_text(schema)},"payload":{java_json.write(payload)}}}'.encode()

    def _schema_text(self, schema: ConnectSchema | None) -> str:
        """The envelope's schema JSON, written once per schema object: a source reuses one schema object
        per table, and writing a wide schema (a Debezium envelope: ~100 nodes) for every record cost five
        times the payload (Java's JsonConverter caches it too, ``schemas.cache.size``). Keyed by identity,
        with the schema held so the id stays its own; the cache is emptied when it reaches its bound."""
        if schema is None:
            return "null"
        cached = self._schema_texts.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        if len(self._schema_texts) >= SCHEMA_TEXT_CACHE:
            self._schema_texts.clear()
        text = java_json.write(schema_to_json(schema))
        self._schema_texts[id(schema)] = (schema, text)
        return text

    # -- Spark frames

    @property
    def reads_batch(self) -> bool:
        # Envelopes name their schema, and without schema.content it is sampled from the batch.
        return self.schemas_enable and self.content_schema is None

    def sample_schema(self, df: DataFrame, column: str) -> Sample:
        """The batch's envelope schema when none is given, and every spelling of it the batch holds
        (:func:`sample_envelopes` for one column)."""
        return sample_envelopes(df, {column: self})[column]

    def infer_schema(self, df: DataFrame, column: str) -> ConnectSchema | None:
        """A schema for schemaless JSON, inferred over every record of the batch by Spark's JSON reader.

        Opt-in: pass the result to ``to_columns`` so transforms that need a struct (InsertField, Cast,
        ...) work on schemaless records too. Every field is optional (a record may lack it); integers
        are int64 and other numbers float64, as Java reads schemaless numbers. The inference is one
        more pass over the batch, in the JVM. None when no record holds a JSON value.
        """
        spark = df.sparkSession
        text = F.col(column).cast("string")
        if self.schemas_enable:
            text = F.get_json_object(text, "$.payload")
        wrapped = df.where(F.col(column).isNotNull() & (F.length(F.col(column)) > 0)).select(
            F.concat(F.lit('{"p":'), text, F.lit("}")).alias("value")
        )
        jvm = spark._jvm
        assert jvm is not None
        strings = getattr(wrapped._jdf, "as")(jvm.org.apache.spark.sql.Encoders.STRING())
        inferred = StructType.fromJson(json.loads(spark._jsparkSession.read().json(strings).schema().json()))
        found = [f for f in inferred.fields if f.name == "p"]
        if not found:
            return None
        return derive_schema(found[0].dataType, True)

    def to_columns(
        self,
        df: DataFrame,
        column: str,
        schema: ConnectSchema | None = None,
        *,
        sampled: Sample | None = None,
    ) -> DataFrame:
        """Typed ``column`` from JSON bytes: the envelope's payload (schemas.enable) or the plain JSON.

        With ``schema`` None and schemas.enable, the schema is taken from the first record (``sampled``:
        already taken by :func:`sample_envelopes`, which samples a key and a value in one Spark job);
        records whose envelope names another schema are errors (one frame has one Spark type). Without
        schemas and without ``schema``, the JSON text is kept as a string column (schemaless, as Java's
        maps).
        """
        raw = F.col(column)
        text = raw.cast("string")
        err = error_column(column)
        spellings: frozenset[str] = frozenset()
        prefix: str | None = None
        content = self.schemas_enable and self.content_schema is not None and schema is None
        if content:
            schema = self.content_schema
        elif schema is None and self.schemas_enable:
            schema, spellings, prefix = sampled if sampled is not None else self.sample_schema(df, column)
        if schema is None:
            if self.schemas_enable:
                # No record names a schema: every value is null or a schemaless envelope.
                payload = F.get_json_object(text, "$.payload")
                keys_ok = is_envelope(text)
                present = raw.isNotNull() & (F.length(raw) > 0)
                # Bytes that are not JSON at all are a serialization error, as Java reports them.
                error = F.when(
                    present & F.json_object_keys(F.concat(F.lit('{"p":'), text, F.lit("}"))).isNull(),
                    F.lit(MALFORMED),
                ).when(present & ~F.coalesce(keys_ok, F.lit(False)), F.lit(ENVELOPE_ERROR))
                typed = F.when(error.isNull(), payload)
            else:
                typed = F.when(F.length(raw) > 0, text)
                error = F.when(
                    raw.isNotNull()
                    & (F.length(raw) > 0)
                    & F.json_object_keys(F.concat(F.lit('{"p":'), text, F.lit("}"))).isNull(),
                    F.lit(MALFORMED),
                )
                typed = F.when(error.isNull(), typed)
            # Both from the input frame at once: the error reads the raw bytes the typed column replaces.
            return df.withColumns({column: typed, err: error}).withColumn(
                column, F.col(column).alias(column, metadata={"connect.schemaless": True})
            )
        # With schemas, each record's JSON is parsed once: its envelope's schema text (a StringType field
        # holds the compact JSON text of an object, as get_json_object gives it), payload and top-level
        # keys come from one from_json and one key scan (they were four passes over the text).
        enveloped_read = self.schemas_enable and not content
        both = F.array(F.lit("payload"), F.lit("schema"))
        read_type = StructType(
            [
                *([StructField("schema", StringType(), True)] if enveloped_read else []),
                StructField("payload", json_read_type(schema, self.decimal_numeric), True),
                StructField(CORRUPT_COLUMN, StringType(), True),
            ]
        )
        options = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_COLUMN}
        tmp, tmp_keys = f"__kc_parsed_{column}", f"__kc_keys_{column}"
        parsed, keys = F.col(tmp), F.col(tmp_keys)
        if content:
            # KIP-1054: an envelope is read for its payload, anything else as the bare payload.
            enveloped = is_envelope(text)
            wrapped = F.when(F.coalesce(enveloped, F.lit(False)), text).otherwise(
                F.concat(F.lit('{"payload":'), text, F.lit("}"))
            )
            keys_ok = F.lit(True)
            schema_ok = F.lit(True)
        elif self.schemas_enable:
            wrapped = text
            keys_ok = F.array_sort(keys) == both
            expected = java_json.write(schema_to_json(schema))
            # A record whose payload does not fit may have lost its parsed fields: its schema is read
            # again from the text (rare), so that naming another schema stays the error it reports.
            record_schema = F.when(parsed[CORRUPT_COLUMN].isNull(), parsed["schema"]).otherwise(
                F.get_json_object(text, "$.schema")
            )
            # A schemaless envelope ("schema": null) is read with the given schema too.
            schema_ok = record_schema.isNull() | record_schema.isin(sorted(spellings | {expected}))
        else:
            wrapped = F.concat(F.lit('{"payload":'), text, F.lit("}"))
            keys_ok = F.lit(True)
            schema_ok = F.lit(True)
        parse = {tmp: F.from_json(wrapped, read_type, options), tmp_keys: F.json_object_keys(wrapped)}
        if enveloped_read and prefix is not None:
            # A record that starts with the sampled envelope's exact prefix names the batch's schema: only
            # what follows it is parsed, once, so the schema's text (often longer than the payload) is
            # neither parsed nor copied and no second pass reads the keys. That rest, its closing brace
            # dropped, is read as a one-element array (``{"payload":[<rest>]}``): a key after the payload
            # or a second value breaks the array, so a record that reads as exactly one element that fits
            # is an envelope of that schema with no other key. Any other record, and one of these that
            # does not read so, is read whole as above, and gets that reading's error.
            head = len(prefix.encode())
            body = raw.cast("binary")
            fast = text.startswith(prefix) & (F.substring(body, -1, 1) == F.lit(b"}"))
            rest = body.substr(F.lit(head + 1), F.length(body) - head - 1)
            fast_type = StructType(
                [
                    StructField("payload", ArrayType(read_type["payload"].dataType, True), True),
                    StructField(CORRUPT_COLUMN, StringType(), True),
                ]
            )
            tmp_fast = f"__kc_fast_{column}"
            df = df.withColumn(
                tmp_fast,
                F.when(
                    fast,
                    F.from_json(
                        F.concat(F.lit(b'{"payload":['), rest, F.lit(b"]}")).cast("string"),
                        fast_type,
                        options,
                    ),
                ),
            )
            one = F.col(tmp_fast)
            read = one[CORRUPT_COLUMN].isNull() & (F.size(one["payload"]) == 1)
            fast_read = F.struct(
                F.lit(None).cast("string").alias("schema"),
                F.element_at(one["payload"], 1).alias("payload"),
                F.lit(None).cast("string").alias(CORRUPT_COLUMN),
            )
            parse = {
                tmp: F.when(read, fast_read).otherwise(parse[tmp]),
                tmp_keys: F.when(read, both).otherwise(parse[tmp_keys]),
            }
            schema_ok = F.coalesce(read, F.lit(False)) | schema_ok
        staged = df.withColumns(parse)
        present = raw.isNotNull() & (F.length(raw) > 0)
        null_payload = parsed["payload"].isNull() & parsed[CORRUPT_COLUMN].isNull()
        what = schema.name or schema.type
        error = (
            F.when(~present, F.lit(None))
            .when(keys.isNull(), F.lit(MALFORMED))
            .when(~F.coalesce(keys_ok, F.lit(False)), F.lit(ENVELOPE_ERROR))
            .when(
                ~F.coalesce(schema_ok, F.lit(False)),
                F.lit(f"Record's schema differs from this batch's schema ({what}); one frame holds one type"),
            )
            .when(
                parsed[CORRUPT_COLUMN].isNotNull(),
                F.lit(
                    f"Converting byte[] to Kafka Connect data failed: the payload does not fit schema {what}"
                ),
            )
            .when(
                null_payload & F.lit(not schema.optional and schema.default is None),
                F.lit(f"Invalid null value for required {schema.type.upper()} field"),
            )
        )
        staged = staged.withColumn(err, error)
        typed = F.when(F.col(err).isNull(), decode_json(parsed["payload"], schema, self.decimal_numeric))
        typed_frame = staged.withColumn(column, with_schema(typed, column, schema))
        return typed_frame.drop(tmp, tmp_keys, f"__kc_fast_{column}")

    def from_column(self, c: Column, schema: ConnectSchema | None) -> Column:
        """A typed column as Java's JSON bytes, from column expressions only: the schema text is computed
        once for the batch and concatenated, and a null value stays null (a tombstone)."""
        if schema is None:
            # Schemaless: the column holds JSON text already.
            body = c.cast("string")
            out = (
                F.concat(F.lit('{"schema":null,"payload":'), body, F.lit("}"))
                if self.schemas_enable
                else body
            )
            return F.when(c.isNotNull(), out.cast("binary"))
        payload = json_text(encode_json(c, schema, self.decimal_numeric))
        if self.schemas_enable:
            out = F.concat(
                F.lit('{"schema":' + java_json.write(schema_to_json(schema)) + ',"payload":'),
                payload,
                F.lit("}"),
            )
        else:
            out = payload
        # A null value is a tombstone: Java reads one as (null schema, null value) and writes it back as null.
        return F.when(c.isNotNull(), out.cast("binary"))


#: How many aggregate columns :func:`envelope_bounds` gives per column.
BOUNDS_PER_COLUMN = 4


def envelope_bounds(columns: Mapping[str, JsonConverter]) -> list[Column]:
    """Per column (in order), what :func:`samples_from_bounds` reads of a batch's envelopes, as aggregate
    columns (``BOUNDS_PER_COLUMN`` each, in least/greatest pairs): the least and greatest hash of the
    records' leading text up to ``,"payload":`` among those that do not start with the converter's last
    envelope prefix (``JsonConverter.envelope_prefix``), and the least and greatest of "does not start with
    it" over the records present. A caller that aggregates over the batch anyway (a sink batch's positions)
    adds these to its own job instead of a job of their own.

    Why hashes and a prefix test, not the schema texts: a text aggregate is a sort aggregate in Spark (a
    grouped one sorts the whole batch), and reading each record's ``$.schema`` parses and copies it; a
    hash and a comparison of leading bytes are neither. A batch whose records all start with the last
    prefix is sampled from it with no job; one whose records all start alike with another, from one
    record read (:func:`samples_from_bounds`). A converter whose last batch was not spelled as Java spells
    envelopes (``JsonConverter.envelope_texts``) reads the least and greatest schema text instead."""
    out: list[Column] = []
    for c, converter in columns.items():
        raw = F.col(c)
        text = raw.cast("string")
        if converter.envelope_texts:
            schema_text = F.when(raw.isNotNull(), F.get_json_object(text, "$.schema"))
            nothing = F.lit(None).cast("boolean")
            out.extend([F.min(schema_text), F.max(schema_text), F.min(nothing), F.max(nothing)])
            continue
        present = raw.isNotNull() & (F.length(raw) > 0)
        held = converter.envelope_prefix
        miss = F.when(present, ~text.startswith(held) if held is not None else F.lit(True))
        head = F.when(miss, F.xxhash64(F.substring_index(text, _PAYLOAD_HEAD, 1)))
        out.extend([F.min(head), F.max(head), F.min(miss), F.max(miss)])
    return out


def sample_envelopes(df: DataFrame, columns: Mapping[str, JsonConverter]) -> dict[str, Sample]:
    """Each column's envelope schema (its first record's) and every spelling of it the batch holds, for all
    ``columns`` in one Spark job over the batch (:func:`envelope_bounds`, then
    :func:`samples_from_bounds`).

    Why one job: a sink batch's key and value converters both sample (a JsonConverter with schemas is
    the default for both), and each job is a pass over the batch plus a shuffle; keys that are all null
    cost nothing more in the shared pass. Producers other than Java write the same schema with its keys in
    another order or with other spacing; each text is parsed here and the ones meaning the first record's
    schema are accepted, so that only records naming another schema are errors.
    """
    if not columns:
        return {}
    row = df.agg(*envelope_bounds(columns)).first()
    return samples_from_bounds(df, columns, None if row is None else list(row))


def samples_from_bounds(
    df: DataFrame, columns: Mapping[str, JsonConverter], bounds: Sequence[Any] | None
) -> dict[str, Sample]:
    """The samples of :func:`sample_envelopes` from the batch's :func:`envelope_bounds` (``bounds``: their
    values, merged over groups, in ``columns``' order; None: the batch has no rows).

    Per column: no record present, no schema; every record starting with the converter's last envelope
    prefix, that prefix's schema (parsed once for as long as it stays the same, :func:`_prefixed`), with
    no job; every record starting alike with another text, the first record is read (one row) and, when
    it starts with an envelope prefix as Java writes one, its schema is the batch's. Read as texts
    (``JsonConverter.envelope_texts``), equal least and greatest texts are every record's. Other columns
    (mixed schemas or spellings, or not Java's spelling) take a second job, which finds the first
    record's schema text and the distinct ones, and the first record's leading text; each converter keeps
    what it found for the next batch."""
    found: dict[str, Sample] = {}
    mixed = []
    for n, (column, converter) in enumerate(columns.items()):
        at = BOUNDS_PER_COLUMN * n
        low, high, all_miss, any_miss = bounds[at : at + BOUNDS_PER_COLUMN] if bounds else (None,) * 4
        sample = None
        if converter.envelope_texts:
            sample = _one_spelling(low) if low == high else None
        elif any_miss is None:  # no record present
            sample = Sample(None, frozenset())
        elif not any_miss and converter.envelope_prefix is not None:
            sample = _prefixed(converter.envelope_prefix)
        elif all_miss and low == high:
            sample = _first_prefixed(df, column)
        if sample is None:
            mixed.append(column)
        else:
            found[column] = sample
            if sample.prefix is not None:
                converter.envelope_prefix = sample.prefix
    if mixed:
        found.update(_mixed_samples(df, {c: columns[c] for c in mixed}))
    return {column: found[column] for column in columns}


#: ``guess_flag``'s values: the record has no envelope (null or empty), it starts as the guess says, it
#: does not (or, for a guess of no envelope at all, it has one).
_ABSENT, _AS_GUESSED, _NOT_AS_GUESSED = None, 1, 2


def guessed_sample(converter: JsonConverter, last: Sample | None) -> Sample | None:
    """What :func:`samples_from_bounds` would give a batch like the last one (``last``: that batch's
    sample), where :func:`guess_flag` can check it in the batch's own job: no envelope in any record
    (the last batch had none), or every present record starting with the converter's envelope prefix
    (the last batch's, spelled as Java spells it). None when neither can be checked so (mixed schemas or
    spellings, schema texts read instead of prefixes): the batch is then sampled first.

    Why guess: sampling is a pass over the batch before it is converted, so a sink batch was read twice
    and held raw between the two; a topic's records keep their schema batch after batch, and a guess that
    the batch's one job confirms (:func:`guess_holds`) gives exactly the sample the pass would."""
    if last is None or converter.envelope_texts:
        return None
    if last.schema is None and last.prefix is None:
        return Sample(None, frozenset())
    prefix = converter.envelope_prefix
    if last.prefix is None or prefix is None or last.prefix != prefix:
        return None
    sample = _prefixed(prefix)
    return sample if sample.prefix is not None else None


def guess_flag(column: str, guess: Sample) -> Column:
    """Per record, whether its ``column`` bears out ``guess`` (a :func:`guessed_sample`): null with no
    envelope, 1 when it starts with the guessed prefix, 2 otherwise (any envelope, when the guess is that
    there is none). Its greatest value over the batch is what :func:`guess_holds` reads."""
    raw = F.col(column)
    present = raw.isNotNull() & (F.length(raw) > 0)
    if guess.prefix is None:
        return F.when(present, F.lit(_NOT_AS_GUESSED))
    starts = raw.cast("string").startswith(guess.prefix)
    return F.when(present, F.when(starts, F.lit(_AS_GUESSED)).otherwise(F.lit(_NOT_AS_GUESSED)))


def guess_holds(guess: Sample, greatest: int | None) -> bool:
    """Whether the batch is as guessed, from the greatest :func:`guess_flag` over it: a guess of no
    envelope holds when no record has one; a prefix's, when records have one and all start with it
    (a batch of no envelope at all samples as none, which the prefix's schema would not be)."""
    if guess.prefix is None:
        return greatest is _ABSENT
    return greatest == _AS_GUESSED


def _mixed_samples(df: DataFrame, columns: Mapping[str, JsonConverter]) -> dict[str, Sample]:
    """Samples of columns whose records differ (in schema, spelling or leading text), in one job: the first
    record's schema and the spellings of it among the batch's texts; as prefix, the first record's leading
    text when it is an envelope prefix as Java writes one naming that schema, else the converter's last
    prefix if it names that schema. A converter left with no prefix reads texts for its next batch."""
    aggregates = []
    for c in columns:
        raw = F.col(c)
        text = raw.cast("string")
        schema_text = F.when(raw.isNotNull(), F.get_json_object(text, "$.schema"))
        lead = F.when(raw.isNotNull() & (F.length(raw) > 0), F.substring_index(text, _PAYLOAD_HEAD, 1))
        aggregates += [
            F.first(schema_text, ignorenulls=True),
            F.slice(F.collect_set(schema_text), 1, _SCHEMA_SPELLINGS),
            F.first(lead, ignorenulls=True),
        ]
    row = df.agg(*aggregates).first()
    found: dict[str, Sample] = {}
    for n, (column, converter) in enumerate(columns.items()):
        first, spelled, leading = row[3 * n : 3 * n + 3] if row is not None else (None, None, None)
        sample = _read_sample(first, spelled or [])
        candidates = [] if leading is None else [str(leading) + _PAYLOAD_HEAD]
        candidates += [] if converter.envelope_prefix is None else [converter.envelope_prefix]
        for prefix in candidates:
            if sample.schema is not None and _prefixed(prefix).schema == sample.schema:
                sample = sample._replace(prefix=prefix)
                break
        if sample.prefix is not None:
            converter.envelope_prefix = sample.prefix
        converter.envelope_texts = sample.prefix is None and sample.schema is not None
        found[column] = sample
    return found


@functools.lru_cache(maxsize=_SCHEMA_SPELLINGS)
def _one_spelling(text: str | None) -> Sample:
    """:func:`_read_sample` of a batch whose records all spell their schema ``text``: a topic's batches
    name the same schema batch after batch, and its JSON is parsed once (a Sample is immutable)."""
    return _read_sample(text, [])


def _first_prefixed(df: DataFrame, column: str) -> Sample | None:
    """The sample of a batch whose records all start alike, from its first record (one row read): None
    when that record does not start as Java's JsonConverter writes an envelope with a schema."""
    raw = F.col(column)
    rows = df.where(raw.isNotNull() & (F.length(raw) > 0)).select(raw).limit(1).collect()
    if not rows:
        return None
    try:
        text = bytes(rows[0][0]).decode("utf-8")
    except UnicodeDecodeError:
        return None
    end = text.find(_PAYLOAD_HEAD)
    if not text.startswith(_SCHEMA_HEAD) or end < 0:
        return None
    sample = _prefixed(text[: end + len(_PAYLOAD_HEAD)])
    return sample if sample.schema is not None else None


@functools.lru_cache(maxsize=_SCHEMA_SPELLINGS)
def _prefixed(prefix: str) -> Sample:
    """The sample of records starting with ``prefix`` (``{"schema":<text>,"payload":``; the schema's text
    holding no ``,"payload":``, so the prefix is the first one): ``<text>``'s schema, spelled by it;
    no schema (and no prefix) when it is not one JSON value naming a schema. Parsed once for as long as a
    topic's records keep it (a Sample is immutable)."""
    if not prefix.startswith(_SCHEMA_HEAD) or not prefix.endswith(_PAYLOAD_HEAD):
        return Sample(None, frozenset())
    text = prefix[len(_SCHEMA_HEAD) : -len(_PAYLOAD_HEAD)]
    sample = _read_sample(text, [])
    return sample if sample.schema is None else sample._replace(prefix=prefix)


def _read_sample(first: str | None, texts: list[str]) -> Sample:
    """The first record's schema and the texts (of ``texts``) that mean the same schema."""
    if first is None:
        return Sample(None, frozenset())
    parsed: list[tuple[str, ConnectSchema]] = []
    for text in [first, *texts]:
        try:
            schema = schema_from_json(java_json.read(text))
        except (ValueError, ConnectDataError):
            continue
        if schema is not None:
            parsed.append((str(text), schema))
    if not parsed or parsed[0][0] != first:
        return Sample(None, frozenset())
    head = parsed[0][1]
    return Sample(head, frozenset(text for text, schema in parsed if schema == head))
