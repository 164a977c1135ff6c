"""The ConfigDefs of Confluent's Schema Registry converters (Avro, Protobuf, JSON Schema), by class name.

Why a module of its own: users copy these keys from worker files and connector configs written for
Confluent's converters (``value.converter.schema.registry.url``, ``...basic.auth.user.info``), so the keys,
types and defaults here are Confluent's (``AbstractKafkaSchemaSerDeConfig``, ``AvroDataConfig``,
``ProtobufDataConfig``, ``JsonSchemaDataConfig``). Credentials are PASSWORD keys, so that
``password_keys`` masks them wherever a config is printed. Pure: ConfigDefs only, no data plane import,
so the plugin catalogue can list them without Spark.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Final

from kconnect.runtime.plugins.config_def import (
    NO_DEFAULT,
    ConfigDef,
    Importance,
    Range,
    Type,
    ValidString,
)
from kconnect.runtime.plugins.converter_type import converter_type_def

__all__ = [
    "AVRO_CONVERTER",
    "JSON_SCHEMA_CONVERTER",
    "PROTOBUF_CONVERTER",
    "SCHEMA_REGISTRY_CONFIG_DEFS",
    "SUBJECT_NAME_STRATEGIES",
]

AVRO_CONVERTER: Final = "io.confluent.connect.avro.AvroConverter"
PROTOBUF_CONVERTER: Final = "io.confluent.connect.protobuf.ProtobufConverter"
JSON_SCHEMA_CONVERTER: Final = "io.confluent.connect.json.JsonSchemaConverter"

_STRATEGY_PACKAGE: Final = "io.confluent.kafka.serializers.subject."
#: Confluent's subject name strategies by Java class name -> kconnect's short name.
SUBJECT_NAME_STRATEGIES: Final[Mapping[str, str]] = MappingProxyType(
    {
        _STRATEGY_PACKAGE + "TopicNameStrategy": "TopicNameStrategy",
        _STRATEGY_PACKAGE + "RecordNameStrategy": "RecordNameStrategy",
        _STRATEGY_PACKAGE + "TopicRecordNameStrategy": "TopicRecordNameStrategy",
    }
)


def _serde_def() -> ConfigDef:
    """``AbstractKafkaSchemaSerDeConfig``: the registry connection and how subjects and ids are chosen."""
    strategies = ValidString.in_(*SUBJECT_NAME_STRATEGIES, *SUBJECT_NAME_STRATEGIES.values())
    d = converter_type_def()
    d.define(
        "schema.registry.url",
        Type.LIST,
        NO_DEFAULT,
        None,
        Importance.HIGH,
        "Comma-separated list of URLs for Schema Registry instances that can be used to register or look "
        "up schemas. A URL may carry user:password@ when basic.auth.credentials.source is URL.",
    )
    d.define(
        "max.schemas.per.subject",
        Type.INT,
        1000,
        Range.at_least(1),
        Importance.LOW,
        "Maximum number of schemas to create or cache locally.",
    )
    d.define(
        "auto.register.schemas",
        Type.BOOLEAN,
        True,
        None,
        Importance.MEDIUM,
        "Specify if the Serializer should attempt to register the Schema with Schema Registry.",
    )
    d.define(
        "use.schema.id",
        Type.INT,
        -1,
        None,
        Importance.LOW,
        "Schema ID to use for serialization (-1: none).",
    )
    d.define(
        "normalize.schemas",
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "Whether to normalize schemas, which generally ignores ordering when it is not significant.",
    )
    d.define(
        "use.latest.version",
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "Use the latest version of the schema in the subject for serialization, instead of registering "
        "one (only with auto.register.schemas=false).",
    )
    d.define(
        "latest.compatibility.strict",
        Type.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "With use.latest.version, check that the latest version is backward compatible with the record's "
        "schema before using it.",
    )
    d.define(
        "latest.cache.size", Type.INT, 1000, Range.at_least(0), Importance.LOW, "Latest versions cached."
    )
    d.define(
        "latest.cache.ttl.sec",
        Type.INT,
        -1,
        None,
        Importance.LOW,
        "How long a latest version is cached, in seconds (-1: no expiry).",
    )
    d.define(
        "basic.auth.credentials.source",
        Type.STRING,
        "URL",
        ValidString.in_("URL", "USER_INFO", "SASL_INHERIT"),
        Importance.MEDIUM,
        "Where the basic auth credentials come from: URL (user:password@ in the URL), USER_INFO "
        "(basic.auth.user.info) or SASL_INHERIT (not supported by kconnect).",
    )
    d.define(
        "basic.auth.user.info",
        Type.PASSWORD,
        "",
        None,
        Importance.MEDIUM,
        "Basic auth user info as user:password, with basic.auth.credentials.source=USER_INFO.",
    )
    d.define(
        "bearer.auth.credentials.source",
        Type.STRING,
        "STATIC_TOKEN",
        ValidString.in_("STATIC_TOKEN", "OAUTHBEARER", "SASL_OAUTHBEARER_INHERIT", "CUSTOM"),
        Importance.MEDIUM,
        "Where bearer auth credentials come from: STATIC_TOKEN (bearer.auth.token) or OAUTHBEARER (the "
        "client credentials grant at bearer.auth.issuer.endpoint.url); the others are not supported.",
    )
    d.define("bearer.auth.token", Type.PASSWORD, "", None, Importance.MEDIUM, "The static bearer token.")
    d.define(
        "bearer.auth.issuer.endpoint.url", Type.STRING, "", None, Importance.MEDIUM, "OAuth token endpoint."
    )
    d.define("bearer.auth.client.id", Type.STRING, "", None, Importance.MEDIUM, "OAuth client id.")
    d.define("bearer.auth.client.secret", Type.PASSWORD, "", None, Importance.MEDIUM, "OAuth client secret.")
    d.define("bearer.auth.scope", Type.STRING, "", None, Importance.LOW, "OAuth scope.")
    d.define(
        "bearer.auth.logical.cluster",
        Type.STRING,
        "",
        None,
        Importance.LOW,
        "Schema Registry logical cluster.",
    )
    d.define("bearer.auth.identity.pool.id", Type.STRING, "", None, Importance.LOW, "Identity pool id.")
    for side in ("key", "value"):
        d.define(
            f"{side}.subject.name.strategy",
            Type.STRING,
            _STRATEGY_PACKAGE + "TopicNameStrategy",
            strategies,
            Importance.MEDIUM,
            f"How the subject a {side}'s schema is registered under is named: TopicNameStrategy "
            "(<topic>-" + side + "), RecordNameStrategy (<record name>) or TopicRecordNameStrategy "
            "(<topic>-<record name>), as Confluent's class names.",
        )
    d.define(
        "schema.registry.ssl.truststore.location",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "A PEM file of the certificates to trust (kconnect reads PEM; JKS/PKCS12 stores are not read).",
    )
    d.define(
        "schema.registry.ssl.truststore.password",
        Type.PASSWORD,
        None,
        None,
        Importance.MEDIUM,
        "Unused (PEM).",
    )
    d.define(
        "schema.registry.ssl.truststore.type", Type.STRING, "JKS", None, Importance.MEDIUM, "Must be PEM."
    )
    d.define(
        "schema.registry.ssl.keystore.location",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "A PEM file of the client certificate for mutual TLS.",
    )
    d.define(
        "schema.registry.ssl.keystore.password", Type.PASSWORD, None, None, Importance.MEDIUM, "Unused (PEM)."
    )
    d.define("schema.registry.ssl.keystore.type", Type.STRING, "JKS", None, Importance.MEDIUM, "Must be PEM.")
    d.define(
        "schema.registry.ssl.key.location",
        Type.STRING,
        None,
        None,
        Importance.MEDIUM,
        "A PEM file of the client's private key (kconnect's addition: Java reads it from the keystore).",
    )
    d.define(
        "schema.registry.ssl.key.password",
        Type.PASSWORD,
        None,
        None,
        Importance.MEDIUM,
        "The key's password.",
    )
    d.define(
        "schema.registry.ssl.endpoint.identification.algorithm",
        Type.STRING,
        "https",
        None,
        Importance.LOW,
        "https checks the registry's host name against its certificate; empty turns the check off.",
    )
    d.define(
        "http.connect.timeout.ms", Type.INT, 60000, Range.at_least(0), Importance.LOW, "Connect timeout."
    )
    d.define("http.read.timeout.ms", Type.INT, 60000, Range.at_least(0), Importance.LOW, "Read timeout.")
    return d


def _common_data_def(d: ConfigDef) -> ConfigDef:
    d.define(
        "schemas.cache.config",
        Type.INT,
        1000,
        Range.at_least(0),
        Importance.LOW,
        "Size of the converted schemas cache.",
    )
    d.define(
        "scrub.invalid.names",
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "Whether to scrub invalid names (characters other than letters, digits and _) to _.",
    )
    return d


def _avro_def() -> ConfigDef:
    d = _common_data_def(_serde_def())
    d.define(
        "connect.meta.data",
        Type.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Toggle for enabling/disabling connect converter to add its meta data to the output schema or not.",
    )
    d.define(
        "enhanced.avro.schema.support",
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "Enable enhanced schema support to preserve package information and Enums.",
    )
    d.define(
        "ignore.default.for.nullables",
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "Whether a null value of an optional field with a default stays null instead of the default.",
    )
    return d


def _protobuf_def() -> ConfigDef:
    d = _common_data_def(_serde_def())
    d.define(
        "enhanced.protobuf.schema.support",
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "Enable enhanced schema support to preserve package information (accepted; not acted on).",
    )
    d.define("int.for.enums", Type.BOOLEAN, False, None, Importance.LOW, "Enums as int32 instead of strings.")
    return d


def _json_schema_def() -> ConfigDef:
    d = _common_data_def(_serde_def())
    d.define(
        "object.additional.properties",
        Type.BOOLEAN,
        True,
        None,
        Importance.LOW,
        "Whether the JSON schemas this converter writes allow additional properties.",
    )
    d.define(
        "use.optional.for.nonrequired",
        Type.BOOLEAN,
        False,
        None,
        Importance.LOW,
        "Whether properties a schema does not list as required are optional in Connect.",
    )
    d.define(
        "decimal.format",
        Type.STRING,
        "BASE64",
        ValidString.in_("BASE64", "NUMERIC"),
        Importance.LOW,
        "How decimals are written: BASE64 or NUMERIC.",
    )
    return d


#: Confluent class name -> a fresh ConfigDef of that converter.
SCHEMA_REGISTRY_CONFIG_DEFS: Final[Mapping[str, Callable[[], ConfigDef]]] = MappingProxyType(
    {
        AVRO_CONVERTER: _avro_def,
        PROTOBUF_CONVERTER: _protobuf_def,
        JSON_SCHEMA_CONVERTER: _json_schema_def,
    }
)
