"""Worker keys for the Kafka clients the worker makes (rows of :mod:`kconnect.config.worker_keys`)."""

from __future__ import annotations

from .key_definition import MEDIUM as _M
from .key_definition import (
    NON_NEGATIVE_INT as _NON_NEGATIVE_INT,
)
from .key_definition import (
    NON_NEGATIVE_LONG as _NON_NEGATIVE_LONG,
)
from .key_definition import (
    Definition,
)
from .values import (
    INT32_MAX,
    Choice,
    ConfigType,
    IntRange,
)

__all__ = ["CLIENT_KEYS"]

CLIENT_KEYS: tuple[Definition, ...] = (
    # Kafka clients
    Definition(
        "client.id",
        ConfigType.STRING,
        "",
        "Client id sent to brokers by the worker's clients, for request logging and quotas.",
    ),
    Definition(
        "client.dns.lookup",
        ConfigType.STRING,
        "use_all_dns_ips",
        "How clients use the addresses a broker host name resolves to.",
        Choice(["use_all_dns_ips", "resolve_canonical_bootstrap_servers_only"], case_insensitive=False),
        _M,
    ),
    Definition(
        "metadata.max.age.ms",
        ConfigType.LONG,
        "300000",
        "Clients refresh cluster metadata at least this often.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "metadata.recovery.strategy",
        ConfigType.STRING,
        "none",
        "What clients do when no known broker is reachable: none (fail) or rebootstrap (start again "
        "from bootstrap.servers).",
        Choice(["none", "rebootstrap"], case_insensitive=True),
    ),
    Definition(
        "request.timeout.ms",
        ConfigType.INT,
        "40000",
        "How long a client waits for a broker's response before retrying or failing the request.",
        _NON_NEGATIVE_INT,
        _M,
    ),
    Definition(
        "retry.backoff.ms",
        ConfigType.LONG,
        "100",
        "Initial wait before a client retries a failed request.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "retry.backoff.max.ms",
        ConfigType.LONG,
        "1000",
        "Upper bound of the growing wait between retries.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "reconnect.backoff.ms",
        ConfigType.LONG,
        "50",
        "Initial wait before a client reconnects to a broker.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "reconnect.backoff.max.ms",
        ConfigType.LONG,
        "1000",
        "Upper bound of the growing wait between reconnection attempts.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "socket.connection.setup.timeout.ms",
        ConfigType.LONG,
        "10000",
        "Initial time a client waits for a socket connection to be established.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "socket.connection.setup.timeout.max.ms",
        ConfigType.LONG,
        "30000",
        "Upper bound of the growing socket connection setup timeout.",
        _NON_NEGATIVE_LONG,
    ),
    Definition(
        "connections.max.idle.ms",
        ConfigType.LONG,
        "540000",
        "Clients close connections idle for longer than this.",
        importance=_M,
    ),
    Definition(
        "receive.buffer.bytes",
        ConfigType.INT,
        "32768",
        "TCP receive buffer size of client sockets; -1 uses the OS default.",
        IntRange(-1, INT32_MAX),
        _M,
    ),
    Definition(
        "send.buffer.bytes",
        ConfigType.INT,
        "131072",
        "TCP send buffer size of client sockets; -1 uses the OS default.",
        IntRange(-1, INT32_MAX),
        _M,
    ),
    Definition(
        "security.protocol",
        ConfigType.STRING,
        "PLAINTEXT",
        "Protocol used to talk to brokers; the ssl.* and sasl.* settings configure it.",
        Choice(["PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"], case_insensitive=True),
        _M,
    ),
)
