"""Apache Kafka class names that worker files name, and the kconnect implementations they stand for.

Worker files written for Apache Kafka Connect name Java classes (converters, config providers,
override policies) and JCA algorithm names. kconnect has no classes by those names, so each
recognised name maps to a short kconnect alias; keeping every such table here means supporting one
more Java plugin is a one-line change, and error messages can list exactly what is supported.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

__all__ = [
    "CONFIG_PROVIDERS",
    "CONVERTERS",
    "HEADER_CONVERTERS",
    "MAC_ALGORITHMS",
    "OVERRIDE_POLICIES",
    "canonical_mac_algorithm",
    "resolve_alias",
]

#: Converters usable as ``key.converter`` / ``value.converter``: Apache class name -> kconnect alias.
CONVERTERS: Mapping[str, str] = MappingProxyType(
    {
        "org.apache.kafka.connect.json.JsonConverter": "json",
        "org.apache.kafka.connect.storage.StringConverter": "string",
        "org.apache.kafka.connect.converters.ByteArrayConverter": "bytearray",
        # Confluent's Schema Registry converters (runtime/dataplane/schema_registry/).
        "io.confluent.connect.avro.AvroConverter": "avro",
        "io.confluent.connect.protobuf.ProtobufConverter": "protobuf",
        "io.confluent.connect.json.JsonSchemaConverter": "json-schema",
    }
)

#: Usable as ``header.converter``. In Apache Kafka the three converters above also implement
#: HeaderConverter, while SimpleHeaderConverter is a header converter only.
HEADER_CONVERTERS: Mapping[str, str] = MappingProxyType(
    {
        "org.apache.kafka.connect.json.JsonConverter": "json",
        "org.apache.kafka.connect.storage.StringConverter": "string",
        "org.apache.kafka.connect.converters.ByteArrayConverter": "bytearray",
        "org.apache.kafka.connect.storage.SimpleHeaderConverter": "simple-header",
    }
)

#: ``config.providers.<name>.class`` values that kconnect resolves itself (config_providers.py for connector
#: configs; properties.substitute for the worker file, which resolves the env and file kinds).
CONFIG_PROVIDERS: Mapping[str, str] = MappingProxyType(
    {
        "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
        "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
        "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "directory",
    }
)

#: ``connector.client.config.override.policy``: Apache accepts the class name or the plugin alias.
OVERRIDE_POLICIES: Mapping[str, str] = MappingProxyType(
    {
        "org.apache.kafka.connect.connector.policy.AllConnectorClientConfigOverridePolicy": "All",
        "org.apache.kafka.connect.connector.policy.AllowlistConnectorClientConfigOverridePolicy": "Allowlist",
        "org.apache.kafka.connect.connector.policy.NoneConnectorClientConfigOverridePolicy": "None",
        "org.apache.kafka.connect.connector.policy.PrincipalConnectorClientConfigOverridePolicy": "Principal",
    }
)

#: JCA Mac / KeyGenerator names for ``inter.worker.*`` algorithms -> :mod:`hashlib` digest names.
#: Only digests that hashlib guarantees on every platform are listed, so the set is the same everywhere.
#: Lookups are case-insensitive, as JCA's are (see :func:`canonical_mac_algorithm`).
MAC_ALGORITHMS: Mapping[str, str] = MappingProxyType(
    {
        "HmacMD5": "md5",
        "HmacSHA1": "sha1",
        "HmacSHA224": "sha224",
        "HmacSHA256": "sha256",
        "HmacSHA384": "sha384",
        "HmacSHA512": "sha512",
        "HmacSHA3-224": "sha3_224",
        "HmacSHA3-256": "sha3_256",
        "HmacSHA3-384": "sha3_384",
        "HmacSHA3-512": "sha3_512",
    }
)

_MAC_BY_FOLDED_NAME = {name.casefold(): name for name in MAC_ALGORITHMS}


def canonical_mac_algorithm(name: str) -> str | None:
    """Spell a MAC algorithm name as the table does, or None if kconnect cannot compute it.

    The canonical spelling matters because the signature algorithm travels in a request header to
    other workers, Java ones included, which compare it case-sensitively against their own list.
    """
    return _MAC_BY_FOLDED_NAME.get(name.casefold())


def resolve_alias(name: str, table: Mapping[str, str]) -> str | None:
    """The kconnect alias for an Apache class name or for an alias itself; None if neither."""
    if name in table:
        return table[name]
    if name in table.values():
        return name
    return None
