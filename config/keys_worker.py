"""Worker keys for converters and the worker's behaviour (rows of :mod:`kconnect.config.worker_keys`)."""

from __future__ import annotations

from .classes import CONVERTERS, HEADER_CONVERTERS, OVERRIDE_POLICIES
from .key_definition import HIGH as _H
from .key_definition import MEDIUM as _M
from .key_definition import (
    NON_NEGATIVE_INT as _NON_NEGATIVE_INT,
)
from .key_definition import (
    NON_NEGATIVE_LONG as _NON_NEGATIVE_LONG,
)
from .key_definition import (
    POSITIVE_LONG as _POSITIVE_LONG,
)
from .key_definition import (
    Definition,
)
from .values import (
    Choice,
    ClassAlias,
    ConfigType,
    NonEmptyItems,
)

__all__ = ["WORKER_KEYS"]

WORKER_KEYS: tuple[Definition, ...] = (
    # Converters and worker behaviour
    Definition(
        "key.converter",
        ConfigType.CLASS,
        None,
        "Converter for record keys, between Connect data and bytes in Kafka. Settings for it go under "
        "the key.converter. prefix.",
        ClassAlias(CONVERTERS),
        _H,
        required=True,
    ),
    Definition(
        "value.converter",
        ConfigType.CLASS,
        None,
        "Converter for record values, between Connect data and bytes in Kafka. Settings for it go under "
        "the value.converter. prefix.",
        ClassAlias(CONVERTERS),
        _H,
        required=True,
    ),
    Definition(
        "header.converter",
        ConfigType.CLASS,
        "org.apache.kafka.connect.storage.SimpleHeaderConverter",
        "Converter for record header values. Settings for it go under the header.converter. prefix.",
        ClassAlias(HEADER_CONVERTERS),
    ),
    Definition(
        "task.shutdown.graceful.timeout.ms",
        ConfigType.LONG,
        "5000",
        "Total time given to all tasks being stopped together to finish before they are abandoned.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "connector.method.timeout.ms",
        ConfigType.LONG,
        "30000",
        "How long a connector plugin's start(), stop(), task_configs() or validate() may run before the "
        "connector is reported FAILED (or the validation answered 500) and the call's thread abandoned; "
        "kconnect's own. These calls run off the herder's thread, so a call that hangs holds up no "
        "rebalance, REST write or other connector.",
        _POSITIVE_LONG,
    ),
    Definition(
        "task.method.timeout.ms",
        ConfigType.LONG,
        "300000",
        "How long a task's start(), poll(), put(), flush()/pre_commit() or stop() may run before the task "
        "is reported FAILED and fenced (nothing it returns later is produced or committed); kconnect's "
        "own. The default matches a sink consumer's max.poll.interval.ms.",
        _POSITIVE_LONG,
    ),
    Definition(
        "offset.flush.interval.ms",
        ConfigType.LONG,
        "60000",
        "How often tasks' offsets are committed.",
        _POSITIVE_LONG,
    ),
    Definition(
        "offset.flush.timeout.ms",
        ConfigType.LONG,
        "5000",
        "How long an offset commit may wait for records to flush before it is abandoned and retried "
        "at the next interval.",
        _POSITIVE_LONG,
    ),
    Definition(
        "plugin.path",
        ConfigType.LIST,
        "",
        "Directories searched for connector, converter and transformation plugins.",
        NonEmptyItems(),
    ),
    Definition(
        "file.connectors.enable",
        ConfigType.BOOLEAN,
        "false",
        "Whether this worker offers the FileStream source and sink connectors. They read any file the "
        "worker can read into a topic and append to any file it can write, for whoever may call the REST "
        "API, so, as Apache Kafka Connect since 3.2 leaves them off the default plugin path, they load "
        "only when this is true. For demos and tests.",
        kconnect=True,
    ),
    Definition(
        "plugin.discovery",
        ConfigType.STRING,
        "hybrid_warn",
        "How Apache Kafka discovers Java plugins; accepted so Apache worker files load, without "
        "effect on kconnect's plugin discovery.",
        Choice(["only_scan", "service_load", "hybrid_warn", "hybrid_fail"], case_insensitive=True),
    ),
    Definition(
        "config.providers",
        ConfigType.LIST,
        "",
        "Names of config providers for ${provider:[path:]key} references, each with "
        "config.providers.<name>.class (Apache's FileConfigProvider, DirectoryConfigProvider or "
        "EnvVarConfigProvider) and config.providers.<name>.param.* (allowed.paths, allowlist.pattern). "
        "Connector configs may use only the providers named here; references are resolved where "
        "connectors and tasks start and stored unresolved. The worker file itself always resolves "
        "${env:NAME} and ${file:PATH:KEY} as well.",
        NonEmptyItems(),
    ),
    Definition(
        "connector.client.config.override.policy",
        ConfigType.STRING,
        "All",
        "Which Kafka client settings connector configurations may override: All, None, Principal "
        "(only the client principal), or Allowlist (those in "
        "connector.client.config.override.allowlist, KIP-1188).",
        ClassAlias(OVERRIDE_POLICIES),
        _M,
    ),
    Definition(
        "connector.client.config.override.allowlist",
        ConfigType.LIST,
        "",
        "The client settings connectors may override under the Allowlist policy (KIP-1188); empty: none.",
        NonEmptyItems(),
    ),
    Definition(
        "topic.creation.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether source connectors configured with topic.creation. settings may create their topics.",
    ),
    Definition(
        "topic.tracking.enable",
        ConfigType.BOOLEAN,
        "true",
        "Whether the worker records the topics each connector uses.",
    ),
    Definition(
        "topic.tracking.allow.reset",
        ConfigType.BOOLEAN,
        "true",
        "Whether users may reset a connector's recorded topics through the REST API.",
    ),
    Definition(
        "auto.restart.enable",
        ConfigType.BOOLEAN,
        "false",
        "Whether FAILED connectors and tasks are restarted by the worker that runs them, with a growing "
        "backoff (Apache Kafka Connect leaves them FAILED: false keeps that). A connector config may set "
        "this key and the three below to override the worker's. A paused or stopped connector is never "
        "restarted; a user's restart starts the count again.",
        kconnect=True,
    ),
    Definition(
        "auto.restart.max.attempts",
        ConfigType.INT,
        "10",
        "How many automatic restarts a connector or task gets before it is left FAILED with its last "
        "trace. The count starts again after a user's restart or after it has run for "
        "auto.restart.backoff.max.ms.",
        _NON_NEGATIVE_INT,
        kconnect=True,
    ),
    Definition(
        "auto.restart.backoff.initial.ms",
        ConfigType.LONG,
        "5000",
        "How long after its first failure a connector or task is restarted; the wait doubles with each "
        "automatic restart up to auto.restart.backoff.max.ms.",
        _NON_NEGATIVE_LONG,
        kconnect=True,
    ),
    Definition(
        "auto.restart.backoff.max.ms",
        ConfigType.LONG,
        "300000",
        "The longest wait before an automatic restart.",
        _NON_NEGATIVE_LONG,
        kconnect=True,
    ),
    Definition(
        "auto.include.jmx.reporter",
        ConfigType.BOOLEAN,
        "true",
        "Deprecated in Apache Kafka; accepted so Apache worker files load. kconnect has no JMX.",
    ),
)
