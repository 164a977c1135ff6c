"""The worker's configuration keys: one :class:`Definition` row per key, and the reference made from them.

One table drives parsing, defaults, validation, the error messages and the documentation
(:func:`reference_markdown`, from which the docs site's worker-properties page is generated). Adding a
key means adding one row to the
``keys_*`` module of its concern (cluster, worker, REST, clients, kconnect's own) and one field to
:class:`~kconnect.config.worker.WorkerConfig`, and the documentation cannot drift from the parser. Keys,
types and defaults follow Apache Kafka Connect 3.9's distributed worker wherever a key exists there; keys
that are kconnect's own are marked as such in the table.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .key_definition import GROUP_RECORDS_TOPIC_SUFFIX, Definition, Importance
from .keys_clients import CLIENT_KEYS
from .keys_cluster import CLUSTER_KEYS
from .keys_kconnect import KCONNECT_KEYS
from .keys_rest import REST_KEYS
from .keys_worker import WORKER_KEYS
from .worker_modes import (
    ConnectProtocol,
    ExactlyOnceSourceSupport,
    GroupProtocol,
    SinkTaskPlacement,
    SourceTaskPlacement,
)

__all__ = [
    "BY_KEY",
    "DEFINITIONS",
    "GROUP_RECORDS_TOPIC_SUFFIX",
    "PASSTHROUGH_KEYS",
    "PASSTHROUGH_PREFIXES",
    "PROPERTIES_DOC_HEADER",
    "SPARK_PREFIX",
    "ConnectProtocol",
    "Definition",
    "ExactlyOnceSourceSupport",
    "GroupProtocol",
    "Importance",
    "SinkTaskPlacement",
    "SourceTaskPlacement",
    "definitions",
    "is_passthrough",
    "reference_markdown",
    "unknown_keys",
]

#: Every key in table order; the rows live in one module per concern, the order is the reference's.
DEFINITIONS: tuple[Definition, ...] = (*CLUSTER_KEYS, *WORKER_KEYS, *REST_KEYS, *CLIENT_KEYS, *KCONNECT_KEYS)

#: Each defined key's row, by key.
BY_KEY: Mapping[str, Definition] = MappingProxyType({d.key: d for d in DEFINITIONS})

#: Keys under these prefixes are accepted without a definition and kept verbatim in
#: ``WorkerConfig.passthrough``: Kafka client overrides and security settings, REST TLS settings,
#: converter and config-provider settings, extra internal-topic settings. ``spark.`` keys go to
#: ``WorkerConfig.spark`` instead.
PASSTHROUGH_PREFIXES: tuple[str, ...] = (
    "producer.",
    "consumer.",
    "admin.",
    "listeners.https.",
    "ssl.",
    "sasl.",
    "metrics.",
    "key.converter.",
    "value.converter.",
    "header.converter.",
    "config.providers.",
    "config.storage.",
    "offset.storage.",
    "status.storage.",
    "group.records.storage.",
)
#: Single keys kept verbatim like the prefixed ones.
PASSTHROUGH_KEYS: tuple[str, ...] = ("metric.reporters",)
SPARK_PREFIX = "spark."


def is_passthrough(key: str) -> bool:
    """Whether ``key`` is kept verbatim for the component it belongs to, without a definition of its own."""
    return key in PASSTHROUGH_KEYS or key.startswith(PASSTHROUGH_PREFIXES)


def definitions() -> tuple[Definition, ...]:
    """Every defined key in table order (cluster, topics, worker, REST, clients, kconnect)."""
    return DEFINITIONS


def unknown_keys(props: Mapping[str, str]) -> list[str]:
    """Keys that match no definition and no pass-through prefix, sorted, for the caller to warn about.

    Parsing does not fail on them because Apache Kafka only warns too, and a worker file shared with
    Apache workers may carry keys for features kconnect does not have.
    """
    return sorted(
        key
        for key in props
        if key not in BY_KEY and not is_passthrough(key) and not key.startswith(SPARK_PREFIX)
    )


def _markdown_cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def reference_markdown() -> str:
    """The worker configuration reference as a Markdown table, generated from :func:`definitions`."""
    lines = [
        "| Key | Type | Default | Valid values | Importance | Description |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in DEFINITIONS:
        if d.required:
            default = "(required)"
        elif d.default_text is not None:
            default = f"`{d.default_text}`"
        elif d.default is None:
            default = "(unset)"
        elif d.default == "":
            default = '""'
        else:
            default = f"`{d.default}`"
        description = ("kconnect only. " if d.kconnect else "") + d.documentation
        cells = [f"`{d.key}`", d.type.value, default, d.allowed, d.importance.value, description]
        lines.append("| " + " | ".join(_markdown_cell(cell) for cell in cells) + " |")
    prefixes = ", ".join(f"`{p}*`" for p in PASSTHROUGH_PREFIXES)
    keys = ", ".join(f"`{k}`" for k in PASSTHROUGH_KEYS)
    lines += [
        "",
        f"Keys starting with {prefixes}, and {keys}, are accepted without validation and handed to the "
        "Kafka clients, REST TLS setup, converters, config providers or internal-topic creation they "
        "belong to. Keys starting with `spark.` are passed to the SparkSession. Any other key is "
        "reported as unknown and ignored.",
    ]
    return "\n".join(lines) + "\n"


PROPERTIES_DOC_HEADER = (
    "# Worker properties\n\n"
    "Generated from `config/worker_keys.py` (`python -m kconnect.config.worker` prints it; the docs "
    "site's page is built from the same table). Keys, types and defaults follow Apache Kafka Connect 3.9 "
    "where the names match.\n\n"
)
