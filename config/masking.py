"""Which config values are credentials, and how they are shown: ``[hidden]``, as Kafka prints a PASSWORD.

Why a rule by name and not only by type: wherever a config is printed (a failed action's log line, the
validate answer's echo of a refused ``*.override.*`` key) the key often has no ConfigDef to say it is a
PASSWORD (client overrides, a plugin's undeclared keys), and a ``sasl.jaas.config`` carries a password
in its text. So a key is treated as a credential when its last dotted part names one (``password``,
``secret``, ``token``, ``credentials``, an API key) or it is one of Kafka's credential-bearing client
settings, whatever prefix it carries (``producer.override.sasl.jaas.config``). Where the connector's
ConfigDefs are known, the keys they declare PASSWORD are masked too, whatever their names (``extra``, from
``runtime/plugins/password_keys.py``), as Java masks them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["HIDDEN", "is_sensitive", "masked", "masked_repr", "shown"]

HIDDEN = "[hidden]"

#: Kafka client settings that are PASSWORD-typed or carry credentials, matched at the end of a key.
_SENSITIVE_SUFFIXES = (
    "sasl.jaas.config",
    "ssl.key.password",
    "ssl.keystore.password",
    "ssl.truststore.password",
    "ssl.keystore.key",
    "sasl.oauthbearer.client.credentials.client.secret",
    "basic.auth.user.info",
)
#: Words that make the last dotted part of a key a credential (``connection.password``, ``api.secret``).
_SENSITIVE_WORDS = ("password", "passwd", "secret", "token", "credential", "apikey", "api_key", "private")


def is_sensitive(key: str, extra: Iterable[str] = ()) -> bool:
    """Whether ``key``'s value is a credential; ``extra`` names keys a ConfigDef declares PASSWORD."""
    lowered = key.lower()
    if key in extra or lowered.endswith(_SENSITIVE_SUFFIXES):
        return True
    last = lowered.rsplit(".", 1)[-1]
    return any(word in last for word in _SENSITIVE_WORDS) or lowered.endswith((".api.key", ".key.secret"))


def shown(key: str, value: str | None, extra: Iterable[str] = ()) -> str | None:
    """The value as it may be printed: ``[hidden]`` for a credential (None stays None)."""
    if value is None or not is_sensitive(key, extra):
        return value
    return HIDDEN


def masked(config: Mapping[str, Any], extra: Iterable[str] = ()) -> dict[str, Any]:
    """A copy of a config with every credential shown as ``[hidden]``."""
    names = frozenset(extra)
    return {k: HIDDEN if v is not None and is_sensitive(k, names) else v for k, v in config.items()}


def masked_repr(obj: object, extra: Iterable[str] = ()) -> str:
    """``repr`` of a dataclass (a herder action) with its configs masked: a mapping field, or a sequence
    of mappings (task configs), shows credentials as ``[hidden]``. ``extra`` names the keys the
    connector's ConfigDefs declare PASSWORD (``runtime/plugins/password_keys.py``): this module cannot
    know them, and a name such as ``aws.secret.access.key`` passes the rule by name."""
    if not dataclasses.is_dataclass(obj) or isinstance(obj, type):
        return repr(obj)
    names = frozenset(extra)
    parts = []
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, Mapping):
            value = masked(value, names)
        elif isinstance(value, list | tuple) and value and all(isinstance(v, Mapping) for v in value):
            value = [masked(v, names) for v in value]
        parts.append(f"{f.name}={value!r}")
    return f"{type(obj).__name__}({', '.join(parts)})"
