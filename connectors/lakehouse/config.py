"""The table sinks' configuration: Apache Iceberg's sink keys (``iceberg.*``) and their Delta twins
(``delta.*``), parsed into one typed :class:`TableSinkConfig`.

A user moving from Apache Iceberg's Kafka Connect sink keeps their config: its keys are accepted with its
defaults. Keys that drive its coordinator (``iceberg.control.topic``, ``iceberg.control.group-id-prefix``,
``iceberg.control.commit.timeout-ms``, ``iceberg.control.commit.threads``, ``iceberg.kafka.*``) are
accepted and have nothing to drive here: kconnect commits from each task, with no coordinator. Keys for
what kconnect does not do are refused by validation with the reason (:data:`REFUSED`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from kconnect.connectors.lakehouse.commits import CommitPolicy
from kconnect.connectors.lakehouse.maintenance import OFF, MaintenancePolicy, policy_problems
from kconnect.connectors.lakehouse.routing import (
    Routing,
    parse_table_options,
    routing_problems,
    split_list,
)
from kconnect.runtime.plugins.config_def import (
    ConfigDef,
    ConfigValidationError,
    ConfigValue,
    Importance,
    LambdaValidator,
    Range,
)
from kconnect.runtime.plugins.config_def import Type as ConfigType

#: Added by the connector to each task's config: the task's number (names its scratch directory).
TASK_ID_CONFIG = "kconnect.task.id"


def _minus_one_or_positive(name: str, value: Any) -> None:
    if value is not None and value != -1 and value < 1:
        raise ConfigValidationError(name, value, "must be -1 (off) or a positive number")


def _minus_one_or_size(name: str, value: Any) -> None:
    if value is not None and value != -1 and value < 1:
        raise ConfigValidationError(name, value, "must be -1 (the format's default) or a positive number")


def minus_one_or_at_least_zero(name: str, value: Any) -> None:
    if value is not None and value != -1 and value < 0:
        raise ConfigValidationError(name, value, "must be -1 (off) or 0 or more")


def config_def(prefix: str, extra: ConfigDef | None = None) -> ConfigDef:
    """The keys both sinks share, under ``prefix`` (``iceberg.`` or ``delta.``)."""
    p = prefix
    out = ConfigDef(extra)
    return (
        out.define(
            f"{p}tables",
            ConfigType.LIST,
            "",
            None,
            Importance.HIGH,
            "Tables to write, <namespace>.<table>: every record goes to each (or, with a route field, to "
            "those "
            "whose route-regex matches). One name containing ${topic} (e.g. analytics.${topic}) writes one "
            "table per topic.",
        )
        .define(
            f"{p}tables.dynamic-enabled",
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Route each record to the table its route field names.",
        )
        .define(
            f"{p}tables.route-field",
            ConfigType.STRING,
            None,
            None,
            Importance.MEDIUM,
            "The record value's field (dotted path) that routes it: the table name with dynamic routing, "
            "else matched against each table's route-regex.",
        )
        .define(
            f"{p}tables.auto-create-enabled",
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Create a missing table from the first records' schema; else a missing table fails the task.",
        )
        .define(
            f"{p}tables.evolve-schema-enabled",
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Add new record fields as optional columns and widen int to long, float to double; else such "
            "records fail the task naming the field.",
        )
        .define(
            f"{p}tables.default-partition-by",
            ConfigType.LIST,
            "",
            None,
            Importance.MEDIUM,
            "Partitioning of auto-created tables: columns or transforms (days(ts), bucket(16, id)).",
        )
        .define(
            f"{p}tables.default-id-columns",
            ConfigType.LIST,
            "",
            None,
            Importance.MEDIUM,
            "Identifier columns; with upsert mode, rows are updated or deleted by them (MERGE INTO).",
        )
        .define(
            f"{p}tables.upsert-mode-enabled",
            ConfigType.BOOLEAN,
            False,
            None,
            Importance.MEDIUM,
            "Upsert by the id columns instead of appending; a Debezium envelope's op (or the cdc-field's "
            "value d/D) deletes.",
        )
        .define(
            f"{p}tables.cdc-field",
            ConfigType.STRING,
            None,
            None,
            Importance.LOW,
            "A value field holding the operation (c/r/u/d or I/U/D) when the records are not Debezium "
            "envelopes.",
        )
        .define(
            f"{p}control.commit.interval-ms",
            ConfigType.LONG,
            300_000,
            Range.at_least(1),
            Importance.MEDIUM,
            "Commit at least this often while records wait (a trickle topic still commits every interval).",
        )
        .define(
            f"{p}control.commit.max-records",
            ConfigType.LONG,
            -1,
            LambdaValidator.with_(_minus_one_or_positive, "-1 (off) or a positive number"),
            Importance.MEDIUM,
            "Commit as soon as this many records wait (kconnect's; -1: off).",
        )
        .define(
            f"{p}control.commit.max-bytes",
            ConfigType.LONG,
            -1,
            LambdaValidator.with_(_minus_one_or_positive, "-1 (off) or a positive number"),
            Importance.MEDIUM,
            "Commit as soon as this many bytes of staged Parquet wait (kconnect's; -1: off).",
        )
        .define(
            f"{p}tables.maintenance.interval-ms",
            ConfigType.LONG,
            OFF,
            LambdaValidator.with_(_minus_one_or_positive, "-1 (off) or a positive number"),
            Importance.MEDIUM,
            "Run table maintenance (compaction, then snapshot expiry or VACUUM) this often on the tables the "
            "task writes, between its commits, one table at a time (kconnect's; -1, the default: never).",
        )
        .define(
            f"{p}tables.maintenance.compact.min-input-files",
            ConfigType.INT,
            5,
            LambdaValidator.with_(_minus_one_or_positive, "-1 (off) or a positive number"),
            Importance.LOW,
            "Maintenance compacts a table's small files when at least this many would be rewritten together "
            "(-1: no compaction).",
        )
        .define(
            f"{p}tables.maintenance.compact.target-file-size-bytes",
            ConfigType.LONG,
            OFF,
            LambdaValidator.with_(_minus_one_or_size, "-1 (the format's default) or a positive number"),
            Importance.LOW,
            "The size compaction aims for (-1: the format's own default, 512 MiB for Iceberg, 1 GiB for "
            "Delta).",
        )
    )


#: Keys (or key suffixes under ``<prefix>table.<name>.``) kconnect refuses, and why.
REFUSED = {
    "tables.default-commit-branch": "writing to a branch is not supported by kconnect's sink; remove the key",
    "commit-branch": "writing to a branch is not supported by kconnect's sink; remove the key",
    "tables.schema-case-insensitive": "column names are matched exactly by kconnect's sink; remove the key",
}


@dataclass(frozen=True)
class TableSinkConfig:
    """One table sink's config, typed."""

    connector: str
    routing: Routing
    auto_create: bool
    evolve: bool
    partition_by: Mapping[str, tuple[str, ...]]
    default_partition_by: tuple[str, ...]
    id_columns: Mapping[str, tuple[str, ...]]
    default_id_columns: tuple[str, ...]
    upsert: bool
    cdc_field: str | None
    policy: CommitPolicy
    props: Mapping[str, str]
    maintenance: MaintenancePolicy = field(default_factory=MaintenancePolicy)

    def partitioning(self, table: str) -> tuple[str, ...]:
        return self.partition_by.get(table, self.default_partition_by)

    def ids(self, table: str) -> tuple[str, ...]:
        return self.id_columns.get(table, self.default_id_columns)


def refused_keys(props: Mapping[str, str | None], prefix: str) -> dict[str, str]:
    """Keys present that kconnect refuses -> why."""
    out: dict[str, str] = {}
    for key, value in props.items():
        if value is None or not key.startswith(prefix):
            continue
        rest = key[len(prefix) :]
        for suffix, why in REFUSED.items():
            if rest == suffix or (rest.startswith("table.") and rest.endswith("." + suffix)):
                out[key] = why
    return out


def cross_key_problems(
    parsed: Mapping[str, Any], props: Mapping[str, str | None], prefix: str
) -> dict[str, str]:
    """Key -> problem for rules spanning keys: routing, upsert needing id columns, refused keys."""
    problems = refused_keys(props, prefix)
    problems.update(policy_problems(maintenance_policy(parsed, prefix), prefix))
    routing = _routing(parsed, {k: v for k, v in props.items() if v is not None}, prefix)
    problems.update(routing_problems(routing, prefix))
    if parsed.get(f"{prefix}tables.upsert-mode-enabled") and not parsed.get(
        f"{prefix}tables.default-id-columns"
    ):
        ids = parse_table_options(
            {k: v for k, v in props.items() if v is not None}, f"{prefix}table.", "id-columns"
        )
        tables = routing.tables
        if not tables or any(t not in ids for t in tables):
            problems[f"{prefix}tables.default-id-columns"] = "upsert mode needs id columns for every table"
    return problems


def _routing(parsed: Mapping[str, Any], props: Mapping[str, str], prefix: str) -> Routing:
    return Routing(
        tables=tuple(parsed.get(f"{prefix}tables") or ()),
        dynamic=bool(parsed.get(f"{prefix}tables.dynamic-enabled")),
        route_field=parsed.get(f"{prefix}tables.route-field") or None,
        route_regex=parse_table_options(props, f"{prefix}table.", "route-regex"),
    )


def parse(definition: ConfigDef, props: Mapping[str, str], prefix: str) -> TableSinkConfig:
    """Parse and check: one-key rules by the ConfigDef, the rest by :func:`cross_key_problems`; the first
    problem is raised naming its key."""
    parsed = definition.parse(props)
    for key, message in cross_key_problems(parsed, props, prefix).items():
        raise ConfigValidationError(key, props.get(key, parsed.get(key)), message)
    per_table = f"{prefix}table."
    return TableSinkConfig(
        connector=props.get("name", "kconnect"),
        routing=_routing(parsed, props, prefix),
        auto_create=bool(parsed[f"{prefix}tables.auto-create-enabled"]),
        evolve=bool(parsed[f"{prefix}tables.evolve-schema-enabled"]),
        partition_by={
            t: tuple(_transforms(v)) for t, v in parse_table_options(props, per_table, "partition-by").items()
        },
        default_partition_by=tuple(_transforms(props.get(f"{prefix}tables.default-partition-by", ""))),
        id_columns={
            t: tuple(split_list(v)) for t, v in parse_table_options(props, per_table, "id-columns").items()
        },
        default_id_columns=tuple(parsed[f"{prefix}tables.default-id-columns"] or ()),
        upsert=bool(parsed[f"{prefix}tables.upsert-mode-enabled"]),
        cdc_field=parsed[f"{prefix}tables.cdc-field"] or None,
        policy=CommitPolicy(
            interval_ms=int(parsed[f"{prefix}control.commit.interval-ms"]),
            max_records=int(parsed[f"{prefix}control.commit.max-records"]),
            max_bytes=int(parsed[f"{prefix}control.commit.max-bytes"]),
        ),
        props=dict(props),
        maintenance=maintenance_policy(parsed, prefix),
    )


def maintenance_policy(parsed: Mapping[str, Any], prefix: str) -> MaintenancePolicy:
    """The maintenance keys, typed; a format's own keys (expiry for Iceberg, VACUUM for Delta) read as off
    where the format does not define them."""
    m = f"{prefix}tables.maintenance."

    def number(key: str, default: int) -> int:
        value = parsed.get(m + key)
        return default if value is None or isinstance(value, bool) or not isinstance(value, int) else value

    return MaintenancePolicy(
        interval_ms=number("interval-ms", OFF),
        min_input_files=number("compact.min-input-files", 5),
        target_file_size_bytes=number("compact.target-file-size-bytes", OFF),
        expire_older_than_ms=number("expire-snapshots.older-than-ms", OFF),
        retain_last=number("expire-snapshots.retain-last", 1),
        vacuum_retention_ms=number("vacuum.retention-ms", OFF),
    )


def _transforms(value: str) -> list[str]:
    """Partition specs split on top-level commas: ``bucket(16, id), days(ts)`` is two."""
    out: list[str] = []
    depth, current = 0, ""
    for ch in value:
        if ch == "," and depth == 0:
            if current.strip():
                out.append(current.strip())
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    if current.strip():
        out.append(current.strip())
    return out


def validate(definition: ConfigDef, props: Mapping[str, str | None], prefix: str) -> list[ConfigValue]:
    """Per-key answers for the validate endpoint: the ConfigDef's plus the cross-key and refused keys."""
    values = definition.validate_all(props)
    parsed = {name: value.value for name, value in values.items()}
    for key, message in cross_key_problems(parsed, props, prefix).items():
        if key not in values:
            values[key] = ConfigValue(key, props.get(key))
        values[key].add_error(str(ConfigValidationError(key, props.get(key, parsed.get(key)), message)))
    return list(values.values())
