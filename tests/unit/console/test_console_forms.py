"""What the ACL and quota forms accept, and the TLS settings the console's librdkafka clients get, without a
broker: bad input is a 400 naming what is wrong."""

from __future__ import annotations

import pytest

from moldau.console.cluster_access import ListenerAccess
from moldau.console.errors import ConsoleError
from moldau.console.pages.acls import AclRow, row_from_form
from moldau.console.pages.quotas import entity_from_form, ops_from_form
from moldau.security.tls import TlsSettings

ACL = {"principal": "User:alice", "host": "", "operation": "READ", "permission": "ALLOW", "resource_type": "TOPIC",
       "resource_name": "orders", "pattern_type": "LITERAL"}


def test_an_acl_form_becomes_a_binding() -> None:
    assert row_from_form(ACL) == AclRow("User:alice", "*", "READ", "ALLOW", "TOPIC", "orders", "LITERAL")
    cluster = row_from_form({**ACL, "resource_type": "CLUSTER", "resource_name": "", "operation": "ALTER"})
    assert cluster.resource_name == "kafka-cluster"
    assert row_from_form(dict(row_from_form(ACL).__dict__)) == row_from_form(ACL)  # the delete page's round trip
    tokens = row_from_form({**ACL, "resource_type": "USER", "resource_name": "User:carol",
                            "operation": "CREATE_TOKENS"})
    tokens.binding().validate()  # a User resource (KIP-373), which the broker stores


@pytest.mark.parametrize(("change", "message"), [
    ({"principal": "alice"}, "User:alice"), ({"principal": "User:"}, "User:alice"),
    ({"resource_type": "PRINCIPAL"}, "resource type"), ({"resource_name": " "}, "name the resource"),
    ({"operation": "FLY"}, "operation"), ({"permission": "MAYBE"}, "permission"),
    ({"pattern_type": "MATCH"}, "pattern type"),
])
def test_a_bad_acl_form_is_a_400(change: dict[str, str], message: str) -> None:
    with pytest.raises(ConsoleError) as error:
        row_from_form({**ACL, **change})
    assert error.value.status == 400 and message in error.value.message


def test_a_quota_form_names_an_entity_and_sets_or_removes_each_quota() -> None:
    assert entity_from_form({"user": "alice", "client": ""}) == (("user", "alice"),)
    assert entity_from_form({"user": "<default>", "client": "app"}) == (("user", None), ("client-id", "app"))
    ops = ops_from_form({"producer_byte_rate": "1048576", "consumer_byte_rate": "", "request_percentage": "12.5"})
    assert ops == [("producer_byte_rate", 1048576.0), ("consumer_byte_rate", None), ("request_percentage", 12.5),
                   ("controller_mutation_rate", None)]
    for bad in ({"producer_byte_rate": "fast"}, {"producer_byte_rate": "0"}, {"consumer_byte_rate": "-1"}):
        with pytest.raises(ConsoleError) as error:
            ops_from_form(bad)
        assert error.value.status == 400
    with pytest.raises(ConsoleError):
        entity_from_form({"user": " ", "client": ""})


def test_the_console_trusts_the_listeners_trust_store_and_presents_its_key_store_only_where_required() -> None:
    files = TlsSettings("SSL", keystore_location="/etc/tls/node.pem", truststore_location="/etc/tls/ca.pem",
                        client_auth="requested", endpoint_identification_algorithm="")
    assert ListenerAccess("127.0.0.1", 9093, "SSL", (), files).librdkafka_tls() == {
        "ssl.ca.location": "/etc/tls/ca.pem", "ssl.endpoint.identification.algorithm": "none"}

    inline = TlsSettings("SASL_SSL", keystore_certificate_chain="-----BEGIN CERTIFICATE-----\\nA",
                         keystore_key="-----BEGIN PRIVATE KEY-----\\nB", key_password="pw",
                         truststore_certificates="-----BEGIN CERTIFICATE-----\\nC", client_auth="required",
                         endpoint_identification_algorithm="HTTPS")
    assert ListenerAccess("127.0.0.1", 9093, "SASL_SSL", ("PLAIN",), inline).librdkafka_tls() == {
        "ssl.ca.pem": "-----BEGIN CERTIFICATE-----\nC", "ssl.endpoint.identification.algorithm": "https",
        "ssl.certificate.pem": "-----BEGIN CERTIFICATE-----\nA", "ssl.key.pem": "-----BEGIN PRIVATE KEY-----\nB",
        "ssl.key.password": "pw"}

    no_store = TlsSettings("SSL", keystore_location="/etc/tls/node.pem", endpoint_identification_algorithm="https")
    assert ListenerAccess("h", 1, "SSL", (), no_store).librdkafka_tls()["ssl.ca.location"] == "probe"
    assert ListenerAccess("h", 1, "PLAINTEXT").librdkafka_tls() == {}
