"""Java-named Kafka client settings translated for librdkafka and kafka-python (pure tables).

The librdkafka side of each row was probed against the installed library on 2026-11-22: every
translated setting below is one confluent-kafka accepts (``test_every_translated_table_row_builds_a_client``
builds the clients to prove it, without a broker).
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kconnect.config.errors import ConfigError
from kconnect.runtime.client_config import (
    IGNORED,
    explain_connection_failure,
    parse_jaas,
    task_props,
    to_kafka_python,
    to_librdkafka,
    worker_clients,
)

PLAIN = (
    'org.apache.kafka.common.security.plain.PlainLoginModule required username="alice" password="s3 cr;et";'
)
SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule required username=bob password='p\\'w';"

# (role, Java settings, librdkafka settings, ignored Java keys)
TABLE: list[tuple[str, dict[str, str], dict[str, str], tuple[str, ...]]] = [
    ("consumer", {"max.poll.records": "500"}, {}, ("max.poll.records",)),
    ("consumer", {"fetch.max.wait.ms": "100"}, {"fetch.wait.max.ms": "100"}, ()),
    ("consumer", {"auto.offset.reset": "none"}, {"auto.offset.reset": "error"}, ()),
    ("consumer", {"auto.offset.reset": "earliest"}, {"auto.offset.reset": "earliest"}, ()),
    (
        "consumer",
        {"key.deserializer": "org.apache.kafka.common.serialization.ByteArrayDeserializer"},
        {},
        ("key.deserializer",),
    ),
    (
        "consumer",
        {
            "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RangeAssignor,"
            "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"
        },
        {"partition.assignment.strategy": "range"},
        (),
    ),
    (
        "consumer",
        {"partition.assignment.strategy": "org.apache.kafka.clients.consumer.StickyAssignor"},
        {},
        ("partition.assignment.strategy",),
    ),
    ("producer", {"buffer.memory": "33554432"}, {"queue.buffering.max.kbytes": "32768"}, ()),
    ("producer", {"max.request.size": "2097152"}, {"message.max.bytes": "2097152"}, ()),
    ("producer", {"linger.ms": "5", "acks": "all"}, {"linger.ms": "5", "acks": "all"}, ()),
    (
        "producer",
        {"compression.type": "zstd", "compression.zstd.level": "3", "compression.gzip.level": "9"},
        {"compression.type": "zstd", "compression.level": "3"},
        ("compression.gzip.level",),
    ),
    ("producer", {"send.buffer.bytes": "-1"}, {"socket.send.buffer.bytes": "0"}, ()),
    ("admin", {"receive.buffer.bytes": "65536"}, {"socket.receive.buffer.bytes": "65536"}, ()),
    ("admin", {"metadata.max.age.ms": "60000"}, {"topic.metadata.refresh.interval.ms": "60000"}, ()),
    (
        "admin",
        {"metric.reporters": "x.Y", "interceptor.classes": "a.B"},
        {},
        ("interceptor.classes", "metric.reporters"),
    ),
    (
        "admin",
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "sasl.jaas.config": PLAIN},
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "sasl.username": "alice",
            "sasl.password": "s3 cr;et",
        },
        (),
    ),
    (
        "producer",
        {"security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512", "sasl.jaas.config": SCRAM},
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "bob",
            "sasl.password": "p'w",
        },
        (),
    ),
    (
        "consumer",
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
            'required clientId="kc" clientSecret="sh" scope="kafka";',
        },
        {
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
            "sasl.oauthbearer.method": "oidc",
            "sasl.oauthbearer.client.id": "kc",
            "sasl.oauthbearer.client.secret": "sh",
            "sasl.oauthbearer.scope": "kafka",
        },
        (),
    ),
    (
        "admin",
        {
            "security.protocol": "SSL",
            "ssl.truststore.type": "PEM",
            "ssl.truststore.location": "/etc/ca.pem",
            "ssl.truststore.password": "unused",
            "ssl.endpoint.identification.algorithm": "",
            "ssl.client.auth": "required",
        },
        {
            "security.protocol": "SSL",
            "ssl.ca.location": "/etc/ca.pem",
            "ssl.endpoint.identification.algorithm": "none",
        },
        ("ssl.client.auth", "ssl.truststore.password"),
    ),
    (
        "producer",
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": "/k.p12",
            "ssl.keystore.password": "pw",
        },
        {"security.protocol": "SSL", "ssl.keystore.location": "/k.p12", "ssl.keystore.password": "pw"},
        (),
    ),
    (
        "consumer",
        {
            "security.protocol": "SSL",
            "ssl.keystore.type": "PEM",
            "ssl.keystore.location": "/k.pem",
            "ssl.key.password": "kp",
        },
        {
            "security.protocol": "SSL",
            "ssl.certificate.location": "/k.pem",
            "ssl.key.location": "/k.pem",
            "ssl.key.password": "kp",
        },
        (),
    ),
    (
        "admin",
        {
            "security.protocol": "SSL",
            "ssl.truststore.certificates": "-----BEGIN CERT",
            "ssl.keystore.key": "-----BEGIN KEY",
        },
        {"security.protocol": "SSL", "ssl.ca.pem": "-----BEGIN CERT", "ssl.key.pem": "-----BEGIN KEY"},
        (),
    ),
]


@pytest.mark.parametrize(("role", "java", "expected", "ignored"), TABLE)
def test_translation_table(
    role: str, java: dict[str, str], expected: dict[str, str], ignored: tuple[str, ...]
) -> None:
    out = to_librdkafka(role, java)  # type: ignore[arg-type]
    assert out.settings == expected
    assert out.ignored == ignored


# (Java settings, the key the error names, a phrase of what is allowed)
REFUSED: list[tuple[dict[str, str], str, str]] = [
    ({"ssl.truststore.location": "/etc/ts.jks"}, "ssl.truststore.location", "(it is JKS)"),
    (
        {"ssl.truststore.location": "/t.p12", "ssl.truststore.type": "PKCS12"},
        "ssl.truststore.location",
        "PEM",
    ),
    (
        {"ssl.keystore.location": "/k.jks", "ssl.keystore.password": "x"},
        "ssl.keystore.location",
        "PKCS12 or PEM",
    ),
    ({"ssl.keystore.location": "/k.p12", "ssl.keystore.type": "PKCS12"}, "ssl.keystore.password", "password"),
    (
        {"sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule required useKeyTab=true;"},
        "sasl.jaas.config",
        "PlainLoginModule",
    ),
    ({"sasl.jaas.config": "PlainLoginModule username=a"}, "sasl.jaas.config", "JAAS entry"),
    ({"sasl.jaas.config": f"{PLAIN[:-1]}"}, "sasl.jaas.config", "ending with ;"),
    (
        {
            "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
            'username="a";'
        },
        "sasl.jaas.config",
        "password missing",
    ),
    ({"buffer.memory": "lots"}, "buffer.memory", "integer"),
    ({"compression.type": "zstd", "compression.zstd.level": "22"}, "compression.zstd.level", "-1 to 12"),
]


@pytest.mark.parametrize(("java", "key", "allowed"), REFUSED)
def test_settings_that_cannot_be_dropped_are_refused_naming_the_key(
    java: dict[str, str], key: str, allowed: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        to_librdkafka("producer", {"security.protocol": "SASL_SSL", **java})
    assert caught.value.key == key
    assert allowed in caught.value.allowed
    assert "s3 cr" not in str(caught.value)  # a JAAS line's secrets never reach the message


def test_every_translated_table_row_builds_a_client() -> None:
    """What the table produces, librdkafka accepts: no 'No such configuration property' (no broker needed).
    Rows with files that do not exist here are left out: librdkafka opens key stores when it starts."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka.admin import AdminClient

    for role, java, _, _ in TABLE:
        settings = to_librdkafka(role, java).settings  # type: ignore[arg-type]
        if any(
            k.endswith(".location") or k.endswith(".pem") or k.startswith("sasl.oauthbearer")
            for k in settings
        ):
            continue
        conf = {"bootstrap.servers": "127.0.0.1:1", "log_level": "0", **settings}
        if role == "producer":
            Producer(conf).flush(0)
        elif role == "consumer":
            Consumer({**conf, "group.id": "g"}).close()
        else:
            AdminClient(conf)


def test_jaas_values_quoted_unquoted_and_escaped() -> None:
    login = parse_jaas("k", 'a.B required  x="with \\"quote\\" and ;" y=plain z=\'single\' ;')
    assert login.module == "a.B"
    assert login.options == {"x": 'with "quote" and ;', "y": "plain", "z": "single"}


@given(st.dictionaries(st.sampled_from(sorted(IGNORED)), st.text(max_size=5), max_size=6))
def test_ignored_keys_never_reach_librdkafka(java: dict[str, str]) -> None:
    out = to_librdkafka("consumer", {"security.protocol": "SASL_SSL", **java})
    assert out.settings == {"security.protocol": "SASL_SSL"}
    assert set(out.ignored) == set(java)


def test_the_group_member_gets_kafka_python_settings() -> None:
    props = {
        "security.protocol": "sasl_ssl",
        "sasl.mechanism": "SCRAM-SHA-256",
        "sasl.jaas.config": SCRAM,
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "",
    }
    assert to_kafka_python(props) == {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": "bob",
        "sasl_plain_password": "p'w",
        "ssl_cafile": "/ca.pem",
        "ssl_check_hostname": False,
    }
    assert to_kafka_python({"security.protocol": "PLAINTEXT"}) == {"security_protocol": "PLAINTEXT"}
    with pytest.raises(ConfigError) as caught:
        to_kafka_python(
            {
                "security.protocol": "SSL",
                "ssl.keystore.type": "PKCS12",
                "ssl.keystore.location": "/k.p12",
                "ssl.keystore.password": "x",
            }
        )
    assert caught.value.key == "ssl.keystore.location"


def test_worker_clients_check_every_role_and_name_what_they_ignore() -> None:
    passthrough = {
        "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": PLAIN,
        "producer.key.serializer": "x",
        "consumer.max.poll.records": "10",
        "admin.metric.reporters": "y",
        "admin.listeners.https.ssl.keystore.location": "/rest.p12",  # the REST admin listener, not a client
    }
    clients = worker_clients("SASL_PLAINTEXT", passthrough)
    assert clients.internal["sasl.username"] == "alice"
    assert clients.internal["security.protocol"] == "SASL_PLAINTEXT"
    assert clients.admin == clients.internal
    assert clients.member["sasl_plain_password"] == "s3 cr;et"
    assert clients.ignored == (
        "admin.metric.reporters",
        "consumer.max.poll.records",
        "producer.key.serializer",
    )
    # Without TLS the ssl.* settings are not used (by Java's clients either): no error, nothing passed.
    plain = worker_clients("PLAINTEXT", {"ssl.truststore.location": "/ts.jks", "ssl.client.auth": "required"})
    assert plain.internal == {"security.protocol": "PLAINTEXT"} and plain.ignored == ()
    with pytest.raises(ConfigError) as caught:
        worker_clients(
            "PLAINTEXT", {"consumer.security.protocol": "SSL", "consumer.ssl.truststore.location": "/ts.jks"}
        )
    assert caught.value.key == "consumer.ssl.truststore.location"
    assert caught.value.value == "/ts.jks"


def test_task_props_worker_role_then_connector_override() -> None:
    worker = {"consumer.fetch.min.bytes": "1", "consumer.override.x": "no", "producer.acks": "1"}
    task = {"consumer.override.fetch.min.bytes": "5", "consumer.override.isolation.level": "read_committed"}
    assert task_props("consumer", worker, task) == {
        "fetch.min.bytes": "5",
        "isolation.level": "read_committed",
    }


def test_connector_validation_reports_an_override_no_client_can_honour_on_its_key() -> None:
    from kconnect.runtime.plugins.connector_validation import validate_connector_config
    from kconnect.runtime.plugins.registry import PluginRegistry

    registry = PluginRegistry.discover(file_connectors=True)
    config = {
        "name": "out",
        "connector.class": "FileStreamSink",
        "topics": "t",
        "file": "/tmp/out.txt",
        "consumer.override.security.protocol": "SSL",
        "consumer.override.ssl.truststore.location": "/etc/ts.jks",
        "consumer.override.max.poll.records": "10",  # ignored at run time, not an error
    }
    infos = validate_connector_config(registry, config)
    assert infos.error_count == 1
    errors = {c.value.name: c.value.errors for c in infos.configs if c.value.errors}
    assert list(errors) == ["consumer.override.ssl.truststore.location"]
    assert "PEM" in errors["consumer.override.ssl.truststore.location"][0]
    # The worker's consumer.ssl.truststore.type=PEM completes it, as the task will merge them.
    ok = validate_connector_config(
        registry, config, worker_passthrough={"consumer.ssl.truststore.type": "PEM"}
    )
    assert ok.error_count == 0


VERIFY_FAILED = (
    "ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: error:0A000086:SSL routines::certificate verify "
    "failed: broker certificate could not be verified, verify that ssl.ca.location is correctly configured"
)


def test_a_certificate_the_trust_store_cannot_verify_names_ssl_truststore_location() -> None:
    said = explain_connection_failure(VERIFY_FAILED, {"ssl.truststore.location": "/etc/kafka/ca.pem"})
    assert said.startswith(
        "the broker's certificate is not signed by a CA in ssl.truststore.location=/etc/kafka/ca.pem"
    )
    assert said.endswith(VERIFY_FAILED) and "\n" not in said
    unset = explain_connection_failure(VERIFY_FAILED, {})
    assert "ssl.truststore.location is not set" in unset


def test_a_refused_client_certificate_names_ssl_keystore_location() -> None:
    reason = "ssl://b:9093/1: SSL handshake failed: error:0A000412:SSL routines::sslv3 alert bad certificate"
    said = explain_connection_failure(reason, {"ssl.keystore.location": "/k.pem"})
    assert said == f"the broker refused this worker's certificate (ssl.keystore.location=/k.pem): {reason}"


def test_other_failures_are_passed_on_as_they_are() -> None:
    reason = "127.0.0.1:9092/bootstrap: Connect to ipv4#127.0.0.1:9092 failed: Connection refused"
    assert explain_connection_failure(reason, {"ssl.truststore.location": "/ca.pem"}) == reason
