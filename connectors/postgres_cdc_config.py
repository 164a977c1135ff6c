"""The PostgreSQL CDC source's keys: Debezium's names and defaults (``plugin.name`` defaults to pgoutput),
parsed once into :class:`CdcConfig`.

Why a module of its own: both the task (``postgres_cdc``: publication, slot, snapshot) and the replication
stream (``postgres_stream``) read the parsed keys; here neither imports the other for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    ConfigDef,
    ConfigValidationError,
    Importance,
    NonEmptyString,
    Password,
    Range,
    Type,
    ValidString,
)

SNAPSHOT_MODES = ("initial", "always", "initial_only", "no_data", "never")
AUTOCREATE_MODES = ("all_tables", "filtered", "disabled")

CONFIG_DEF = (
    ConfigDef()
    .define("database.hostname", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH, "Server host.")
    .define("database.port", Type.INT, 5432, Range.between(1, 65535), Importance.HIGH, "Server port.")
    .define(
        "database.user", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH, "User (REPLICATION)."
    )
    .define("database.password", Type.PASSWORD, None, None, Importance.HIGH, "Password.")
    .define("database.dbname", Type.STRING, NO_DEFAULT, NonEmptyString(), Importance.HIGH, "Database.")
    .define("database.sslmode", Type.STRING, "prefer", None, Importance.MEDIUM, "libpq sslmode.")
    .define(
        "topic.prefix",
        Type.STRING,
        NO_DEFAULT,
        NonEmptyString(),
        Importance.HIGH,
        "Logical server name: topics are <topic.prefix>.<schema>.<table>; also the offsets' partition.",
    )
    .define(
        "plugin.name",
        Type.STRING,
        "pgoutput",
        ValidString(("pgoutput",)),
        Importance.MEDIUM,
        "Logical decoding plugin; PostgreSQL's built-in pgoutput (decoderbufs needs a server extension).",
    )
    .define("slot.name", Type.STRING, "debezium", NonEmptyString(), Importance.MEDIUM, "Replication slot.")
    .define(
        "slot.drop.on.stop", Type.BOOLEAN, False, None, Importance.LOW, "Drop the slot when the task stops."
    )
    .define(
        "publication.name",
        Type.STRING,
        "dbz_publication",
        NonEmptyString(),
        Importance.MEDIUM,
        "Publication.",
    )
    .define(
        "publication.autocreate.mode",
        Type.STRING,
        "all_tables",
        ValidString(AUTOCREATE_MODES),
        Importance.LOW,
        "Create a missing publication for all tables, for the included tables (filtered), or not at all.",
    )
    .define(
        "table.include.list",
        Type.LIST,
        "",
        None,
        Importance.HIGH,
        "Regular expressions matched against schema.table: the tables captured (all when empty).",
    )
    .define(
        "table.exclude.list",
        Type.LIST,
        "",
        None,
        Importance.MEDIUM,
        "Regular expressions of tables not captured.",
    )
    .define(
        "snapshot.mode",
        Type.STRING,
        "initial",
        ValidString(SNAPSHOT_MODES),
        Importance.MEDIUM,
        "initial: snapshot when no offsets are stored, then stream; always; initial_only: snapshot then stop "
        "reading; no_data/never: stream only.",
    )
    .define(
        "heartbeat.interval.ms",
        Type.INT,
        0,
        Range.at_least(0),
        Importance.MEDIUM,
        "How often a heartbeat record (topic __debezium-heartbeat.<topic.prefix>) carries the latest LSN "
        "as an offset while captured tables are quiet; 0 disables.",
    )
    .define(
        "errors.max.retries",
        Type.INT,
        10,
        Range.at_least(-1),
        Importance.LOW,
        "Attempts to reopen a lost replication connection (waits doubling from 0.5 s to 10 s) before the "
        "task fails with the cause; -1 retries for ever (Debezium's default), 0 fails at once.",
    )
    .define("max.batch.size", Type.INT, 2048, Range.at_least(1), Importance.LOW, "Most records per poll.")
    .define("poll.interval.ms", Type.INT, 500, Range.at_least(1), Importance.LOW, "Longest wait of one poll.")
)


@dataclass(frozen=True)
class CdcConfig:
    """The keys parsed once."""

    host: str
    port: int
    user: str
    password: str | None = field(repr=False)
    database: str
    sslmode: str
    prefix: str
    slot: str
    drop_slot: bool
    publication: str
    autocreate: str
    include: tuple[str, ...]
    exclude: tuple[str, ...]
    snapshot_mode: str
    heartbeat_ms: int
    max_retries: int
    batch: int
    poll_ms: int

    @classmethod
    def from_props(cls, props: Mapping[str, str | None]) -> CdcConfig:
        v = CONFIG_DEF.parse(props)
        password = v["database.password"]
        for key in ("table.include.list", "table.exclude.list"):
            for pattern in v[key]:
                try:
                    re.compile(pattern)
                except re.error as exc:
                    raise ConfigValidationError(key, pattern, f"not a regular expression: {exc}") from exc
        return cls(
            host=v["database.hostname"],
            port=v["database.port"],
            user=v["database.user"],
            password=password.value if isinstance(password, Password) else password,
            database=v["database.dbname"],
            sslmode=v["database.sslmode"],
            prefix=v["topic.prefix"],
            slot=v["slot.name"],
            drop_slot=v["slot.drop.on.stop"],
            publication=v["publication.name"],
            autocreate=v["publication.autocreate.mode"],
            include=tuple(v["table.include.list"]),
            exclude=tuple(v["table.exclude.list"]),
            snapshot_mode=v["snapshot.mode"],
            heartbeat_ms=v["heartbeat.interval.ms"],
            max_retries=v["errors.max.retries"],
            batch=v["max.batch.size"],
            poll_ms=v["poll.interval.ms"],
        )

    def dsn(self) -> dict[str, str]:
        """psycopg2 keyword arguments."""
        kwargs = {
            "host": self.host,
            "port": str(self.port),
            "user": self.user,
            "dbname": self.database,
            "sslmode": self.sslmode,
            "connect_timeout": "10",
        }
        if self.password is not None:
            kwargs["password"] = self.password
        return kwargs

    def captured(self, table: str) -> bool:
        """Whether ``schema.table`` is captured: Debezium matches whole names against the lists."""
        if self.include:
            return any(re.fullmatch(p, table) for p in self.include)
        return not any(re.fullmatch(p, table) for p in self.exclude)
