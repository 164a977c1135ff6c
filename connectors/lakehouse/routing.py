"""Which table a record goes to: pure rules, turned into Spark column expressions by the task.

Three ways, as Apache Iceberg's sink names them plus the one it never merged:

- *static*: every record goes to every table in the list (``iceberg.tables``), or, with a route field,
  to the tables whose ``route-regex`` matches the field's value;
- *dynamic*: the route field's value *is* the table name;
- *by topic* (kconnect's): a table name with ``${topic}`` in it, e.g. ``analytics.${topic}``, names one
  table per topic.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

TOPIC_TOKEN = "${topic}"
#: A table identifier: dot-separated parts (namespace levels, then the table). Kafka topic names add
#: ``-`` to the usual identifier characters; parts are quoted when used in SQL.
_PART = re.compile(r"^[A-Za-z0-9_\-]+$")


class RoutingError(ValueError):
    """A routing config or a table name that cannot be used; the message names what and why."""


@dataclass(frozen=True)
class Routing:
    """The routing rules of one connector."""

    tables: tuple[str, ...]
    dynamic: bool
    route_field: str | None
    #: Static routing with a route field: table -> regular expression its records' field values match.
    route_regex: Mapping[str, str]

    @property
    def by_topic(self) -> bool:
        return any(TOPIC_TOKEN in t for t in self.tables)


def routing_problems(routing: Routing, prefix: str) -> dict[str, str]:
    """Config key -> why this routing cannot work (empty when it can). ``prefix`` is the connector's
    (``iceberg.``, as Apache's sink spells its keys, or ``delta.``)."""
    tables, dynamic, field = (
        f"{prefix}tables",
        f"{prefix}tables.dynamic-enabled",
        f"{prefix}tables.route-field",
    )
    problems: dict[str, str] = {}
    if routing.dynamic:
        if not routing.route_field:
            problems[field] = f"dynamic routing ({dynamic}=true) needs a route field"
        if routing.tables:
            problems[tables] = f"must be empty with {dynamic}=true: the route field names the table"
        return problems
    if not routing.tables:
        problems[tables] = f"name at least one table (or set {dynamic}=true)"
    for table in routing.tables:
        try:
            table_parts(table.replace(TOPIC_TOKEN, "topic"))
        except RoutingError as exc:
            problems[tables] = str(exc)
    if routing.by_topic and len(routing.tables) > 1:
        problems[tables] = f"a table pattern with {TOPIC_TOKEN} must be the only table"
    if routing.route_field and not routing.by_topic:
        missing = [t for t in routing.tables if t not in routing.route_regex]
        if missing:
            problems[field] = (
                f"static routing by field needs {prefix}table.<table>.route-regex for " + ", ".join(missing)
            )
    return problems


def table_parts(name: str) -> tuple[str, ...]:
    """A table name's parts (namespace levels, table), refusing names a catalog cannot hold."""
    parts = tuple(name.split("."))
    if len(parts) < 2 or not all(_PART.match(p) for p in parts):
        raise RoutingError(
            f"table name '{name}' must be <namespace>.<table> made of letters, digits, '_' and '-'"
        )
    return parts


def topic_table(pattern: str, topic: str) -> str:
    """The table a topic's records go to under a ``${topic}`` pattern."""
    return pattern.replace(TOPIC_TOKEN, topic)


def static_targets(routing: Routing, field_value: str | None) -> list[str]:
    """Static routing: the tables a record with this route-field value goes to (all without a field)."""
    if not routing.route_field:
        return list(routing.tables)
    if field_value is None:
        return []
    return [t for t in routing.tables if re.search(routing.route_regex[t], field_value)]


def parse_table_options(props: Mapping[str, str], prefix: str, option: str) -> dict[str, str]:
    """``<prefix><table>.<option>`` keys (``iceberg.table.db.t.route-regex``) as table -> value."""
    out: dict[str, str] = {}
    suffix = "." + option
    for key, value in props.items():
        if key.startswith(prefix) and key.endswith(suffix):
            table = key[len(prefix) : -len(suffix)]
            if table:
                out[table] = value
    return out


def split_list(value: str | None) -> Sequence[str]:
    """A comma-separated config value as its trimmed, non-empty items."""
    return [item.strip() for item in (value or "").split(",") if item.strip()]
