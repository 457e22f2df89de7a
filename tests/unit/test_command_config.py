"""`--command-config`: one Kafka client properties file, in the words of each client the tools use."""

from __future__ import annotations

import pytest

from moldau.cli.command_config import jaas_credentials, to_authenticator, to_kafka_python, to_librdkafka, token_auth

JAVA = {"security.protocol": "SASL_SSL", "ssl.truststore.type": "PEM", "ssl.truststore.location": "/ca.pem",
        "ssl.keystore.type": "PEM", "ssl.keystore.location": "/me.pem", "ssl.key.password": "k",
        "sasl.mechanism": "SCRAM-SHA-256", "ssl.endpoint.identification.algorithm": "",
        "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required '
                            'username="alice" password="s3\\"cret";'}


def test_java_client_names_become_librdkafka_names() -> None:
    assert to_librdkafka(JAVA) == {
        "security.protocol": "SASL_SSL", "ssl.ca.location": "/ca.pem", "ssl.certificate.location": "/me.pem",
        "ssl.key.location": "/me.pem", "ssl.key.password": "k", "sasl.mechanism": "SCRAM-SHA-256",
        "ssl.endpoint.identification.algorithm": "", "sasl.username": "alice", "sasl.password": 's3"cret'}
    native = {"security.protocol": "ssl", "ssl.ca.location": "/ca", "ssl.certificate.location": "/c",
              "ssl.key.location": "/k", "sasl.username": "u"}
    assert to_librdkafka(native) == native
    # Java stores (JKS, PKCS12) are read into PEM for librdkafka: tests/unit/security/test_keystores.py.


def test_kafka_python_arguments() -> None:
    assert to_kafka_python(JAVA) == {
        "security_protocol": "SASL_SSL", "ssl_cafile": "/ca.pem", "ssl_certfile": "/me.pem",
        "ssl_keyfile": "/me.pem", "ssl_password": "k", "ssl_check_hostname": False,
        "sasl_mechanism": "SCRAM-SHA-256", "sasl_plain_username": "alice", "sasl_plain_password": 's3"cret'}
    assert to_kafka_python({}) == {}


def test_jaas_options() -> None:
    plain = {"sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule required "
                                 "username=bob password='x';"}
    assert jaas_credentials(plain) == ("bob", "x")
    assert jaas_credentials({}) == (None, None)


def test_a_token_login_is_read_from_the_jaas_config_and_refused_for_clients_without_extensions() -> None:
    props = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-256",
             "sasl.jaas.config": 'org.apache.kafka.common.security.scram.ScramLoginModule required username="tid" '
                                 'password="hmac" tokenauth="true";'}
    assert token_auth(props) and not token_auth({**props, "sasl.jaas.config": "x required tokenauth=false;"})
    assert to_authenticator(props) is not None
    for translate in (to_librdkafka, to_kafka_python):
        with pytest.raises(ValueError, match="delegation token"):
            translate(props)
