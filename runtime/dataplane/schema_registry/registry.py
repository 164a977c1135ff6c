"""The Schema Registry as the converters see it: settings, subject names, and a caching client.

Why a layer over confluent-kafka's ``SchemaRegistryClient``: the converters take Confluent's Java keys
(``schema.registry.url``, ``basic.auth.user.info``, ``schema.registry.ssl.*``), which
:func:`client_conf` turns into the Python client's (pure, tested with tables); the subject of a schema
follows the configured strategy (:func:`subject_name`, pure); and :class:`Registry` keeps what it learnt
(schemas by id, ids by subject and schema) so that after a schema's first record no record costs a
registry call. Registry failures become :class:`RegistryError`, which says whether retrying can help
(the registry unreachable or answering 5xx) or not (bad credentials, an unknown id, a schema refused).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from kconnect.runtime.plugins.config_def import ConfigValidationError, Password
from kconnect.runtime.plugins.schema_registry_configs import SUBJECT_NAME_STRATEGIES

__all__ = [
    "Registry",
    "RegistryError",
    "RegistrySettings",
    "client_conf",
    "registry_settings",
    "subject_name",
]

T = TypeVar("T")
#: How long one converter call keeps retrying a registry that cannot be reached, and the first pause.
RETRY_FOR_S: Final = 30.0
FIRST_BACKOFF_S: Final = 0.2


class RegistryError(Exception):
    """A registry call failed; ``retriable`` when the registry was unreachable or answered 5xx/429."""

    def __init__(self, message: str, retriable: bool, status: int | None = None) -> None:
        super().__init__(message)
        self.retriable = retriable
        self.status = status


def _secret(value: Any) -> str:
    if isinstance(value, Password):
        return value.value
    return "" if value is None else str(value)


@dataclass(frozen=True)
class RegistrySettings:
    """The parsed serde settings a converter acts on; ``conf`` holds credentials, so it is kept out of
    the repr (logs, tracebacks)."""

    conf: Mapping[str, Any] = field(repr=False)
    auto_register: bool
    use_latest_version: bool
    latest_compatibility_strict: bool
    normalize: bool
    use_schema_id: int
    key_strategy: str
    value_strategy: str
    cache_size: int


def client_conf(parsed: Mapping[str, Any]) -> dict[str, Any]:
    """confluent-kafka client settings from Confluent's Java keys (as ``ConfigDef.parse`` returned them).

    TLS: the Python client reads PEM files, so the trust store and key store locations must be PEM
    (``*.type=PEM``); a JKS or PKCS12 store is refused here, naming the key, rather than failing later.
    """
    urls = parsed["schema.registry.url"]
    url_list = [str(u).strip() for u in (urls if isinstance(urls, list) else str(urls).split(","))]
    url_list = [u for u in url_list if u]
    if not url_list:
        raise ConfigValidationError("schema.registry.url", urls, "at least one URL is needed")
    for url in url_list:
        if not url.startswith(("http://", "https://", "mock://")):
            raise ConfigValidationError("schema.registry.url", url, "URLs start with http:// or https://")
    conf: dict[str, Any] = {"url": ",".join(url_list)}
    source = str(parsed.get("basic.auth.credentials.source", "URL"))
    user_info = _secret(parsed.get("basic.auth.user.info"))
    if source == "USER_INFO":
        if ":" not in user_info:
            raise ConfigValidationError(
                "basic.auth.user.info", "[hidden]", "must be user:password with USER_INFO credentials"
            )
        conf["basic.auth.user.info"] = user_info
    elif source == "SASL_INHERIT":
        raise ConfigValidationError(
            "basic.auth.credentials.source", source, "SASL_INHERIT is not supported; use USER_INFO or URL"
        )
    bearer = str(parsed.get("bearer.auth.credentials.source", "STATIC_TOKEN"))
    token = _secret(parsed.get("bearer.auth.token"))
    if bearer == "STATIC_TOKEN" and token:
        conf["bearer.auth.credentials.source"] = "STATIC_TOKEN"
        conf["bearer.auth.token"] = token
        conf["bearer.auth.logical.cluster"] = str(parsed.get("bearer.auth.logical.cluster") or "")
        if parsed.get("bearer.auth.identity.pool.id"):
            conf["bearer.auth.identity.pool.id"] = str(parsed["bearer.auth.identity.pool.id"])
    elif bearer == "OAUTHBEARER":
        conf["bearer.auth.credentials.source"] = "OAUTHBEARER"
        conf["bearer.auth.client.id"] = str(parsed.get("bearer.auth.client.id") or "")
        conf["bearer.auth.client.secret"] = _secret(parsed.get("bearer.auth.client.secret"))
        conf["bearer.auth.scope"] = str(parsed.get("bearer.auth.scope") or "")
        conf["bearer.auth.issuer.endpoint.url"] = str(parsed.get("bearer.auth.issuer.endpoint.url") or "")
        conf["bearer.auth.logical.cluster"] = str(parsed.get("bearer.auth.logical.cluster") or "")
        conf["bearer.auth.identity.pool.id"] = str(parsed.get("bearer.auth.identity.pool.id") or "")
    elif bearer in ("SASL_OAUTHBEARER_INHERIT", "CUSTOM") and token:
        raise ConfigValidationError(
            "bearer.auth.credentials.source", bearer, "supported: STATIC_TOKEN, OAUTHBEARER"
        )
    for kind in ("truststore", "keystore"):
        location = parsed.get(f"schema.registry.ssl.{kind}.location")
        store_type = str(parsed.get(f"schema.registry.ssl.{kind}.type") or "JKS").upper()
        if location and store_type != "PEM":
            raise ConfigValidationError(
                f"schema.registry.ssl.{kind}.type", store_type, "kconnect reads PEM files only: set PEM"
            )
    if parsed.get("schema.registry.ssl.truststore.location"):
        conf["ssl.ca.location"] = str(parsed["schema.registry.ssl.truststore.location"])
    if parsed.get("schema.registry.ssl.keystore.location"):
        conf["ssl.certificate.location"] = str(parsed["schema.registry.ssl.keystore.location"])
        key = parsed.get("schema.registry.ssl.key.location")
        conf["ssl.key.location"] = str(key or parsed["schema.registry.ssl.keystore.location"])
        key_password = _secret(parsed.get("schema.registry.ssl.key.password"))
        if key_password:
            conf["ssl.key.password"] = key_password
    timeout_ms = max(int(parsed.get("http.read.timeout.ms", 60000)), 1)
    conf["timeout"] = max(timeout_ms // 1000, 1)
    conf["cache.capacity"] = int(parsed.get("max.schemas.per.subject", 1000))
    # Retries inside one call are ours (Registry._call), so that the back-off is one policy.
    conf["max.retries"] = 0
    return conf


def registry_settings(parsed: Mapping[str, Any]) -> RegistrySettings:
    """The settings of one converter from its parsed keys; a bad value raises ConfigValidationError."""
    return RegistrySettings(
        conf=client_conf(parsed),
        auto_register=bool(parsed["auto.register.schemas"]),
        use_latest_version=bool(parsed["use.latest.version"]),
        latest_compatibility_strict=bool(parsed["latest.compatibility.strict"]),
        normalize=bool(parsed["normalize.schemas"]),
        use_schema_id=int(parsed["use.schema.id"]),
        key_strategy=_strategy(str(parsed["key.subject.name.strategy"])),
        value_strategy=_strategy(str(parsed["value.subject.name.strategy"])),
        cache_size=int(parsed.get("schemas.cache.config", 1000)),
    )


def _strategy(name: str) -> str:
    return SUBJECT_NAME_STRATEGIES.get(name, name)


def subject_name(strategy: str, topic: str, is_key: bool, record_name: str | None) -> str:
    """The subject a schema is registered under: ``<topic>-key``/``<topic>-value`` (TopicNameStrategy),
    the record's full name (RecordNameStrategy) or ``<topic>-<record name>`` (TopicRecordNameStrategy)."""
    if strategy == "TopicNameStrategy":
        return f"{topic}-{'key' if is_key else 'value'}"
    if record_name is None:
        raise RegistryError(
            f"{strategy} needs a named record schema (a struct with a name); this schema has none",
            retriable=False,
        )
    if strategy == "RecordNameStrategy":
        return record_name
    return f"{topic}-{record_name}"


def _registry_error(exc: Exception, what: str) -> RegistryError:
    from confluent_kafka.schema_registry.error import SchemaRegistryError

    if isinstance(exc, SchemaRegistryError):
        status = int(exc.http_status_code)
        retriable = status >= 500 or status == 429 or status < 0
        return RegistryError(
            f"{what} failed: Schema Registry answered {status} (error code {exc.error_code}): "
            f"{exc.error_message}",
            retriable=retriable,
            status=status,
        )
    return RegistryError(f"{what} failed: Schema Registry unreachable: {type(exc).__name__}: {exc}", True)


class Registry:
    """One converter's view of the registry: cached lookups with retries and back-off.

    ``client`` is made lazily (and again after a fork: Spark's Python workers unpickle converters) from
    ``settings.conf``. Lookups by id and registrations are cached for the converter's life; Schema
    Registry ids are immutable, so the cache never goes stale.
    """

    def __init__(self, settings: RegistrySettings, retry_for_s: float = RETRY_FOR_S) -> None:
        self.settings = settings
        self.retry_for_s = retry_for_s
        self._client: Any = None
        self._lock = threading.Lock()
        self._by_id: dict[Any, Any] = {}
        self._ids: dict[tuple[str, str], int] = {}
        self._latest: dict[str, Any] = {}
        #: Registry calls made (for tests and metrics: after a schema's first record none should be).
        self.calls = 0

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_client"] = None
        state["_lock"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def use_client(self, client: Any) -> None:
        """Talk through ``client`` (a confluent-kafka ``SchemaRegistryClient``) instead of one made from
        the settings: tests share one in-memory client between Confluent's serializers and a converter."""
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            from confluent_kafka.schema_registry import SchemaRegistryClient

            self._client = SchemaRegistryClient.new_client(dict(self.settings.conf))
        return self._client

    def _call(self, what: str, fn: Callable[[], T]) -> T:
        """``fn`` retried with exponential back-off while the failure is retriable, for ``retry_for_s``."""
        deadline = time.monotonic() + self.retry_for_s
        pause = FIRST_BACKOFF_S
        while True:
            self.calls += 1
            try:
                return fn()
            except Exception as exc:
                error = exc if isinstance(exc, RegistryError) else _registry_error(exc, what)
                if not error.retriable or time.monotonic() + pause > deadline:
                    raise error from None
            time.sleep(pause)
            pause = min(pause * 2, 5.0)

    def schema(self, schema_id: int, fmt: str | None = None) -> Any:
        """The registered schema (confluent-kafka's ``Schema``) with this id, in format ``fmt``."""
        key = schema_id if fmt is None else (schema_id, fmt)
        found = self._by_id.get(key)
        if found is None:
            found = self._call(
                f"Fetching schema id {schema_id}", lambda: self.client.get_schema(schema_id, fmt=fmt)
            )
            self._by_id[key] = found
        return found

    def register(self, subject: str, schema: Any) -> int:
        """The id of ``schema`` under ``subject``: registered when auto.register.schemas, else looked up."""
        key = (subject, schema.schema_str)
        found = self._ids.get(key)
        if found is not None:
            return found
        if self.settings.auto_register:
            found = self._call(
                f"Registering a schema under subject {subject}",
                lambda: self.client.register_schema(subject, schema, self.settings.normalize),
            )
        else:
            found = self._call(
                f"Looking up a schema under subject {subject}",
                lambda: self.client.lookup_schema(subject, schema, self.settings.normalize).schema_id,
            )
        self._ids[key] = int(found)
        self._by_id.setdefault(int(found), schema)
        return int(found)

    def latest(self, subject: str) -> Any:
        """The subject's latest registered version (``RegisteredSchema``), cached."""
        found = self._latest.get(subject)
        if found is None:
            found = self._call(
                f"Fetching the latest version of subject {subject}",
                lambda: self.client.get_latest_version(subject),
            )
            self._latest[subject] = found
            self._by_id.setdefault(found.schema_id, found.schema)
        return found

    def compatible(self, subject: str, schema: Any) -> bool:
        """Whether ``schema`` is compatible with the subject's latest version, as the registry judges."""
        return bool(
            self._call(
                f"Testing compatibility under subject {subject}",
                lambda: self.client.test_compatibility(subject, schema),
            )
        )
