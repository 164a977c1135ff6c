"""Apicurio Registry's Avro converter on the Apache Kafka Connect 4.x reference worker: the Apache side of
``bench/avro_pipeline.py``.

Why Apicurio's: an Avro converter for Apache Kafka Connect has to come from Maven Central here, and
Confluent's (``io.confluent.connect.avro.AvroConverter``) is published only in Confluent's repository.
Apicurio's ``io.apicurio.registry.utils.converter.AvroConverter`` 2.0.2.Final is on Maven Central and,
configured as :data:`CONFLUENT_WIRE` says, reads Confluent's wire format (magic byte, 4-byte schema id)
from the same registry server the tests run (``schema_registry_server.py``), whose Confluent API hands out
content ids as schema ids. ``tests/apicurio-converter/pom.xml`` names it; :func:`apicurio_plugin` copies it
and its dependencies once, with Maven, into a ``plugin.path`` folder in the cache.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.apache_kafka import REPO, KafkaError
from tests.support.maven import connect_plugin_path, kconnect_cache

APICURIO_CONVERTER_VERSION = "2.0.2.Final"
POM = REPO / "tests" / "apicurio-converter" / "pom.xml"
SETTINGS = REPO / "tests" / "schema-registry" / "settings.xml"
CONVERTER_CLASS = "io.apicurio.registry.utils.converter.AvroConverter"
#: Apicurio's own API on a registry server, beside Confluent's (``/apis/ccompat/v6``).
REGISTRY_API_PATH = "/apis/registry/v2"


def converter_config(server_root: str, prefix: str = "value.converter.") -> dict[str, str]:
    """The converter's keys (under ``prefix``) for records in Confluent's wire format on the registry at
    ``server_root`` (``http://host:port``): a 4-byte id after the magic byte (``as-confluent``, Apicurio's
    ``Legacy4ByteIdHandler``) that is a content id (what the Confluent API returned as the schema's id),
    and no Apicurio headers (Confluent's producers write none). Writing, it registers the schema of what
    it writes under ``<topic>-value`` (Apicurio's default TopicIdStrategy) as Confluent's converter does."""
    return {
        prefix.rstrip("."): CONVERTER_CLASS,
        f"{prefix}apicurio.registry.url": server_root + REGISTRY_API_PATH,
        f"{prefix}apicurio.registry.as-confluent": "true",
        f"{prefix}apicurio.registry.use-id": "contentId",
        f"{prefix}apicurio.registry.headers.enabled": "false",
        f"{prefix}apicurio.registry.auto-register": "true",
    }


def apicurio_converter_home() -> Path:
    """The converter's cache folder; a new version pin gets a folder (and a fetch) of its own."""
    return kconnect_cache(f"apicurio-converter-{APICURIO_CONVERTER_VERSION}")


def apicurio_plugin() -> Path:
    """The plugin.path directory holding Apicurio's converter (its own folder inside), fetched with Maven
    (every repository through Maven Central) on first use."""
    return connect_plugin_path(
        POM,
        apicurio_converter_home(),
        "apicurio-converter",
        what=f"Apicurio Registry's Avro converter {APICURIO_CONVERTER_VERSION}",
        stamp=APICURIO_CONVERTER_VERSION,
        error=KafkaError,
        settings=SETTINGS,
    )
