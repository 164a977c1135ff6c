"""Kafka client settings as Apache Kafka's Java clients name them, translated for the clients kconnect runs.

Why this exists: a worker file or connector config written for Apache Kafka Connect names Java client
settings (``consumer.max.poll.records``, ``producer.buffer.memory``, ``sasl.jaas.config``,
``ssl.truststore.location``). kconnect's Kafka clients are librdkafka (confluent-kafka: task producers
and consumers, the internal topics, admin) and kafka-python (the group member). librdkafka refuses a
name it does not know, so passing Java names through would fail a task, or the worker, on settings
Apache Kafka Connect accepts. Each Java key is therefore

- passed unchanged when librdkafka knows it under the same name and meaning;
- renamed, its value converted where units or spellings differ (``buffer.memory`` in bytes becomes
  ``queue.buffering.max.kbytes``, ``auto.offset.reset=none`` becomes ``error``);
- dropped and reported as ignored when it has no counterpart and only tunes Java-side machinery
  (serializers, interceptors, JMX metrics, login refresh): Java too ignores settings a client does not
  use, with a warning;
- refused with a :class:`ConfigError` naming the key when dropping it would change what the client does
  (a JKS trust store, a JAAS login module librdkafka cannot stand in for): a worker that would connect
  without its credentials or trust store must not start.

Names and semantics: Apache Kafka 3.9's producer, consumer and admin client config references and
librdkafka 2.16's CONFIGURATION.md, probed against the installed library (2026-11-22).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from kconnect.config.errors import ConfigError

Role = Literal["producer", "consumer", "admin"]
ROLES: tuple[Role, ...] = ("producer", "consumer", "admin")

#: Java client settings with no librdkafka counterpart: they tune Java-side machinery only.
IGNORED: frozenset[str] = frozenset(
    {
        "auto.include.jmx.reporter",
        "bootstrap.controllers",
        "default.api.timeout.ms",
        "exclude.internal.topics",
        "interceptor.classes",
        "internal.leave.group.on.close",
        "internal.throw.on.fetch.stable.offset.unsupported",
        "key.deserializer",
        "key.serializer",
        "max.block.ms",
        # librdkafka takes the name but documents it for share consumers only; kconnect's Kafka reader
        # sizes its own micro-batches.
        "max.poll.records",
        "metadata.max.idle.ms",
        "metric.reporters",
        "metrics.num.samples",
        "metrics.recording.level",
        "metrics.sample.window.ms",
        "partitioner.adaptive.partitioning.enable",
        "partitioner.availability.timeout.ms",
        "partitioner.class",
        "partitioner.ignore.keys",
        "sasl.client.callback.handler.class",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.login.callback.handler.class",
        "sasl.login.class",
        "sasl.login.connect.timeout.ms",
        "sasl.login.read.timeout.ms",
        "sasl.login.refresh.buffer.seconds",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.retry.backoff.max.ms",
        "sasl.login.retry.backoff.ms",
        "sasl.oauthbearer.clock.skew.seconds",
        "sasl.oauthbearer.expected.audience",
        "sasl.oauthbearer.expected.issuer",
        "sasl.oauthbearer.header.urlencode",
        "sasl.oauthbearer.jwks.endpoint.refresh.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms",
        "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms",
        "sasl.oauthbearer.jwks.endpoint.url",
        "sasl.oauthbearer.scope.claim.name",
        "security.providers",
        "socket.connection.setup.timeout.max.ms",
        "ssl.client.auth",  # the REST listener's (and a broker's), never a client's
        "ssl.enabled.protocols",
        "ssl.engine.factory.class",
        "ssl.keymanager.algorithm",
        "ssl.protocol",
        "ssl.provider",
        "ssl.secure.random.implementation",
        "ssl.trustmanager.algorithm",
        "value.deserializer",
        "value.serializer",
    }
)

#: Same meaning under another name; a value converter where units or spellings differ.
_RENAMED: dict[str, str] = {
    "buffer.memory": "queue.buffering.max.kbytes",
    "fetch.max.wait.ms": "fetch.wait.max.ms",
    "max.request.size": "message.max.bytes",
    # Java's periodic metadata refresh; librdkafka's metadata.max.age.ms is a cache age instead.
    "metadata.max.age.ms": "topic.metadata.refresh.interval.ms",
    "receive.buffer.bytes": "socket.receive.buffer.bytes",
    "send.buffer.bytes": "socket.send.buffer.bytes",
    "ssl.keystore.certificate.chain": "ssl.certificate.pem",
    "ssl.keystore.key": "ssl.key.pem",
    "ssl.truststore.certificates": "ssl.ca.pem",
}

#: Handled together with other keys (see :func:`to_librdkafka`), never passed as written.
_SPECIAL = frozenset(
    {
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "sasl.jaas.config",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.keystore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.truststore.type",
    }
)

_ASSIGNORS = {
    "org.apache.kafka.clients.consumer.RangeAssignor": "range",
    "org.apache.kafka.clients.consumer.RoundRobinAssignor": "roundrobin",
    "org.apache.kafka.clients.consumer.CooperativeStickyAssignor": "cooperative-sticky",
    "range": "range",
    "roundrobin": "roundrobin",
    "cooperative-sticky": "cooperative-sticky",
}

_PLAIN_MODULE = "org.apache.kafka.common.security.plain.PlainLoginModule"
_SCRAM_MODULE = "org.apache.kafka.common.security.scram.ScramLoginModule"
_OAUTH_MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"


@dataclass(frozen=True)
class Translated:
    """librdkafka settings, and the Java keys dropped on the way (for one warning at start-up)."""

    settings: dict[str, str]
    ignored: tuple[str, ...]


@dataclass(frozen=True)
class JaasLogin:
    """One ``sasl.jaas.config`` entry: the login module class and its options."""

    module: str
    options: dict[str, str]


_JAAS = re.compile(
    r"""\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)(?P<options>(?:\s+[\w.\-]+\s*=\s*(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s;"']+))*)\s*;\s*$""",
    re.DOTALL,
)
_JAAS_OPTION = re.compile(r"""([\w.\-]+)\s*=\s*("(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|[^\s;"']+)""")


def parse_jaas(key: str, text: str) -> JaasLogin:
    """Parse Java's one-entry JAAS line: ``<LoginModule class> <flag> name="value" ... ;``.

    Connect's ``sasl.jaas.config`` holds exactly one login module; quoted values may hold spaces and
    backslash escapes (``\\"``).
    """
    match = _JAAS.fullmatch(text)
    if match is None:
        raise ConfigError(
            key,
            "[hidden]",
            'a JAAS entry "<LoginModule class> required name=\\"value\\" ...;" (one module, ending with ;)',
        )
    options: dict[str, str] = {}
    for name, raw in _JAAS_OPTION.findall(match["options"]):
        if raw[:1] in "\"'":
            raw = re.sub(r"\\(.)", r"\1", raw[1:-1])
        options[name] = raw
    return JaasLogin(match["module"], options)


def _sasl(key: str, jaas: str, mechanism: str) -> dict[str, str]:
    """librdkafka's SASL settings for a JAAS entry; a module it cannot stand in for is refused."""
    login = parse_jaas(key, jaas)
    if login.module in (_PLAIN_MODULE, _SCRAM_MODULE):
        missing = [name for name in ("username", "password") if name not in login.options]
        if missing:
            allowed = f"{login.module} options username and password ({missing[0]} missing)"
            raise ConfigError(key, "[hidden]", allowed)
        return {"sasl.username": login.options["username"], "sasl.password": login.options["password"]}
    if login.module == _OAUTH_MODULE and mechanism.upper() == "OAUTHBEARER":
        if "clientId" not in login.options:
            raise ConfigError(
                key,
                "[hidden]",
                "OAuthBearerLoginModule with clientId and clientSecret (OIDC client credentials; "
                "librdkafka cannot run Java's unsecured or callback-based token logins)",
            )
        out = {
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": login.options["clientId"],
            "sasl.oauthbearer.client.secret": login.options.get("clientSecret", ""),
        }
        if "scope" in login.options:
            out["sasl.oauthbearer.scope"] = login.options["scope"]
        return out
    raise ConfigError(
        key,
        "[hidden]",
        f"a login module kconnect's Kafka clients can stand in for: {_PLAIN_MODULE}, {_SCRAM_MODULE}, or "
        f"{_OAUTH_MODULE} with clientId/clientSecret and sasl.mechanism=OAUTHBEARER (got {login.module})",
    )


def _int(key: str, value: str) -> int:
    try:
        return int(value.strip())
    except ValueError:
        raise ConfigError(key, value, "an integer") from None


def _renamed(key: str, value: str) -> str:
    if key == "buffer.memory":
        return str(max(1, _int(key, value) // 1024))  # bytes -> KiB
    if key in ("receive.buffer.bytes", "send.buffer.bytes") and _int(key, value) == -1:
        return "0"  # the OS default: -1 in Java, 0 in librdkafka
    return value


def _keystore(props: Mapping[str, str]) -> dict[str, str]:
    location = props.get("ssl.keystore.location", "").strip()
    if not location:
        return {}
    kind = props.get("ssl.keystore.type", "JKS").strip().upper()
    if kind == "PKCS12":
        if not props.get("ssl.keystore.password"):
            allowed = "the PKCS12 key store's password (ssl.keystore.location is set)"
            raise ConfigError("ssl.keystore.password", None, allowed)
        return {"ssl.keystore.location": location, "ssl.keystore.password": props["ssl.keystore.password"]}
    if kind == "PEM":
        return {"ssl.certificate.location": location, "ssl.key.location": location}
    raise ConfigError(
        "ssl.keystore.location",
        location,
        f"a PKCS12 or PEM key store with ssl.keystore.type set to match (it is {kind}): kconnect's Kafka "
        "clients (librdkafka) cannot read JKS; convert it (keytool -importkeystore -deststoretype PKCS12)",
    )


def _truststore(props: Mapping[str, str]) -> dict[str, str]:
    location = props.get("ssl.truststore.location", "").strip()
    if not location:
        return {}
    kind = props.get("ssl.truststore.type", "JKS").strip().upper()
    if kind != "PEM":
        raise ConfigError(
            "ssl.truststore.location",
            location,
            f"a PEM file with ssl.truststore.type=PEM (it is {kind}): kconnect's Kafka clients (librdkafka) "
            "read trust stores as PEM certificates only; export them (keytool -exportcert -rfc)",
        )
    return {"ssl.ca.location": location}


def _compression(props: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Java has a level per codec; librdkafka one level for the codec in use."""
    codec = props.get("compression.type", "none").strip().lower()
    out: dict[str, str] = {}
    ignored: list[str] = []
    for name in ("gzip", "lz4", "zstd"):
        key = f"compression.{name}.level"
        if key not in props:
            continue
        if name != codec:
            ignored.append(key)
            continue
        level = _int(key, props[key])
        if not -1 <= level <= 12:
            raise ConfigError(key, props[key], "an integer from -1 to 12 (librdkafka's compression.level)")
        out["compression.level"] = str(level)
    return out, ignored


def _in_use(props: Mapping[str, str]) -> dict[str, str]:
    """Without the ``ssl.*`` settings when the protocol has no TLS, and the ``sasl.*`` ones when it has no
    SASL: Java's clients do not use them then, and a worker's top-level ``ssl.*`` may be there for its REST
    listener alone (``ssl.client.auth`` is not even a client setting)."""
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    tls = protocol in ("SSL", "SASL_SSL")
    sasl = protocol in ("SASL_PLAINTEXT", "SASL_SSL")
    return {
        k: v
        for k, v in props.items()
        if not (k.startswith("ssl.") and not tls) and not (k.startswith("sasl.") and not sasl)
    }


def to_librdkafka(role: Role, props: Mapping[str, str]) -> Translated:
    """librdkafka settings for Java-named client settings (one role's, prefixes already removed).

    Keys librdkafka knows pass unchanged; so do keys neither side knows, and librdkafka names them
    when the client is built. ``ssl.*`` and ``sasl.*`` count only when ``security.protocol`` uses them.
    """
    props = _in_use(props)
    settings: dict[str, str] = {}
    ignored: list[str] = []
    for key, value in props.items():
        if key in IGNORED:
            ignored.append(key)
        elif key in _SPECIAL:
            continue
        elif key in _RENAMED:
            settings[_RENAMED[key]] = _renamed(key, value)
        elif key == "ssl.endpoint.identification.algorithm":
            settings[key] = value.strip() or "none"
        elif key == "auto.offset.reset" and value.strip().lower() == "none":
            settings[key] = "error"
        elif key == "partition.assignment.strategy":
            known = [_ASSIGNORS[c.strip()] for c in value.split(",") if c.strip() in _ASSIGNORS]
            # librdkafka cannot mix eager and cooperative assignors (Java's default lists both, for
            # upgrades, and uses the first): keep those of the first one's kind.
            cooperative = [name == "cooperative-sticky" for name in known]
            known = [name for name, coop in zip(known, cooperative, strict=True) if coop == cooperative[0]]
            if known:
                settings[key] = ",".join(dict.fromkeys(known))
            else:
                ignored.append(key)
        else:
            settings[key] = value
    if "sasl.jaas.config" in props:
        settings.update(_sasl("sasl.jaas.config", props["sasl.jaas.config"], props.get("sasl.mechanism", "")))
    settings.update(_keystore(props))
    settings.update(_truststore(props))
    levels, dropped = _compression(props) if role == "producer" else ({}, [])
    settings.update(levels)
    ignored.extend(dropped)
    if role != "producer":
        ignored.extend(k for k in props if k.startswith("compression.") and k.endswith(".level"))
    if "ssl.truststore.password" in props:
        ignored.append("ssl.truststore.password")  # PEM trust stores have none
    if "ssl.keystore.password" in props and props.get("ssl.keystore.type", "JKS").strip().upper() == "PEM":
        ignored.append("ssl.keystore.password")
    return Translated(settings, tuple(sorted(set(ignored))))


def to_kafka_python(props: Mapping[str, str]) -> dict[str, Any]:
    """kafka-python connection settings (the group member's) for the worker's Java-named settings.

    kafka-python reads PEM files only and authenticates with PLAIN and SCRAM (and GSSAPI with its own
    Kerberos module), so a PKCS12 key store, inline PEM or an OIDC login is refused here rather than
    leaving the member to fail its handshake.
    """
    out: dict[str, Any] = {}
    protocol = props.get("security.protocol", "PLAINTEXT").strip().upper()
    out["security_protocol"] = protocol
    if protocol in ("SASL_PLAINTEXT", "SASL_SSL"):
        mechanism = props.get("sasl.mechanism", "GSSAPI").strip().upper()
        out["sasl_mechanism"] = mechanism
        if "sasl.jaas.config" in props:
            login = parse_jaas("sasl.jaas.config", props["sasl.jaas.config"])
            if login.module not in (_PLAIN_MODULE, _SCRAM_MODULE):
                raise ConfigError(
                    "sasl.jaas.config",
                    "[hidden]",
                    f"{_PLAIN_MODULE} or {_SCRAM_MODULE} for the worker's group membership "
                    f"(got {login.module})",
                )
            out["sasl_plain_username"] = login.options.get("username")
            out["sasl_plain_password"] = login.options.get("password")
    if protocol in ("SSL", "SASL_SSL"):
        for key in ("ssl.keystore.certificate.chain", "ssl.keystore.key", "ssl.truststore.certificates"):
            if key in props:
                allowed = "a file: the worker's group membership reads PEM files (use the *.location keys)"
                raise ConfigError(key, "[hidden]", allowed)
        truststore = _truststore(props)
        if truststore:
            out["ssl_cafile"] = truststore["ssl.ca.location"]
        keystore = _keystore(props)
        if "ssl.keystore.location" in keystore:
            raise ConfigError(
                "ssl.keystore.location",
                keystore["ssl.keystore.location"],
                "a PEM key store (ssl.keystore.type=PEM) among the worker's top-level settings: its group "
                "membership reads PEM only",
            )
        if keystore:
            out["ssl_certfile"] = keystore["ssl.certificate.location"]
            out["ssl_keyfile"] = keystore["ssl.key.location"]
        if "ssl.key.password" in props:
            out["ssl_password"] = props["ssl.key.password"]
        out["ssl_check_hostname"] = bool(props.get("ssl.endpoint.identification.algorithm", "https").strip())
    return out


# ------------------------------------------------------------------------------------------ per worker

_SECURITY_PREFIXES = ("ssl.", "sasl.")


def worker_props(security_protocol: str, passthrough: Mapping[str, str]) -> dict[str, str]:
    """The worker file's top-level client settings, Java-named: what its own clients (internal topics,
    admin, fencing, group membership) connect with, as Java's use the worker's top-level settings."""
    props = {k: v for k, v in passthrough.items() if k.startswith(_SECURITY_PREFIXES)}
    props["security.protocol"] = security_protocol
    return props


def role_props(role: Role, passthrough: Mapping[str, str]) -> dict[str, str]:
    """The worker file's ``<role>.`` settings, prefix removed. Task producers and consumers use these
    only, not the top-level ones (Java's rule: a secured cluster needs ``producer.security.protocol``
    and friends too); ``admin.listeners.https.*`` configures the REST admin listener, not a client."""
    prefix = f"{role}."
    props = {
        k[len(prefix) :]: v
        for k, v in passthrough.items()
        if k.startswith(prefix) and not k.startswith(f"{prefix}override.")
    }
    if role == "admin":
        props = {k: v for k, v in props.items() if not k.startswith("listeners.")}
    return props


def task_props(role: Role, passthrough: Mapping[str, str], task_config: Mapping[str, str]) -> dict[str, str]:
    """A task's client settings, Java-named: the worker's ``<role>.*`` then the connector's
    ``<role>.override.*`` (the worker's override policy was checked when the config was validated:
    ``plugins.override_policy``)."""
    props = role_props(role, passthrough)
    override = f"{role}.override."
    props.update({k[len(override) :]: v for k, v in task_config.items() if k.startswith(override)})
    return props


def task_clients(
    role: Role, security_protocol: str, passthrough: Mapping[str, str], task_config: Mapping[str, str]
) -> Translated:
    """One of a task's clients: the worker's ``<role>.*``, then the connector's ``<role>.override.*``, and
    for ``admin`` the worker's top-level settings first (Java's connector admin clients). An error names
    the key as written: ``<role>.override.<key>`` when the connector set it, else ``<role>.<key>``."""
    override = f"{role}.override."
    overridden = {k[len(override) :] for k in task_config if k.startswith(override)}
    props = task_props(role, passthrough, task_config)
    if role == "admin":
        props = {**worker_props(security_protocol, passthrough), **props}
    try:
        return to_librdkafka(role, props)
    except ConfigError as exc:
        where = override if exc.key in overridden else f"{role}."
        raise ConfigError(where + exc.key, exc.value, exc.allowed) from None


@dataclass(frozen=True)
class WorkerClients:
    """Every client setting of a worker, translated once at start-up (a bad one stops the worker)."""

    #: librdkafka settings of the worker's own clients (internal topics, fencing).
    internal: dict[str, str]
    #: The worker's admin client: the top-level settings, then ``admin.*``.
    admin: dict[str, str]
    #: kafka-python settings of the group member.
    member: dict[str, Any]
    #: Worker keys (as written) that no client uses, for one warning.
    ignored: tuple[str, ...]


def worker_clients(security_protocol: str, passthrough: Mapping[str, str]) -> WorkerClients:
    """Translate the worker's client settings; task roles are checked too, so a bad ``producer.*`` or
    ``consumer.*`` key stops the worker at start-up instead of failing every task later."""
    top = worker_props(security_protocol, passthrough)
    internal = to_librdkafka("admin", top)
    member = to_kafka_python(top)
    admin_props = role_props("admin", passthrough)
    admin = _prefixed("admin", admin_props, lambda: to_librdkafka("admin", {**top, **admin_props}))
    ignored = set(internal.ignored)
    ignored.update(f"admin.{k}" for k in admin.ignored if k in admin_props)
    for role in ("producer", "consumer"):
        props = role_props(role, passthrough)
        checked = _prefixed(role, props, lambda: to_librdkafka(role, props))  # noqa: B023 - called at once
        ignored.update(f"{role}.{k}" for k in checked.ignored)
    return WorkerClients(internal.settings, admin.settings, member, tuple(sorted(ignored)))


def _prefixed(prefix: str, props: Mapping[str, str], translate: Callable[[], Translated]) -> Translated:
    """Run ``translate``; an error about one of ``props`` names the key as written (``consumer.x``)."""
    try:
        return translate()
    except ConfigError as exc:
        if exc.key in props:
            raise ConfigError(f"{prefix}.{exc.key}", exc.value, exc.allowed) from None
        raise


def explain_connection_failure(reason: str, props: Mapping[str, str]) -> str:
    """``reason`` (a client's own words for a failed connection) with the worker setting it points at.

    Why: librdkafka names its own settings (``ssl.ca.location``) and a TLS failure's cause sits inside a
    long OpenSSL message; the operator edits a worker file in Java's names. A failure the setting cannot
    explain is returned as it is.
    """
    text = reason.lower()
    if "certificate verify failed" in text or "certificate could not be verified" in text:
        location = props.get("ssl.truststore.location", "").strip()
        if location:
            cause = f"the broker's certificate is not signed by a CA in ssl.truststore.location={location}"
        else:
            cause = (
                "the broker's certificate is not signed by a CA the system trusts "
                "(ssl.truststore.location is not set)"
            )
        return f"{cause}: {reason}"
    if "ssl" in text and ("alert" in text or "handshake" in text) and "certificate" in text:
        location = props.get("ssl.keystore.location", "").strip() or "(not set)"
        return f"the broker refused this worker's certificate (ssl.keystore.location={location}): {reason}"
    return reason
