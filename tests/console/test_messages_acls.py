"""The message browser and the produce form act for the signed-in user: on a SASL cluster with ACLs, a user who
may read a topic (and holds no group ACL: the browser joins no group) browses it, and is refused a topic they may
not read and a produce they may not make. Driven through the console's own client factory and reading functions,
without a browser (signing in is another page's concern)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

from moldau.console.clients import ConsoleClients, Credentials
from moldau.console.errors import kafka_error_status
from moldau.console.pages.messages import topic_partitions
from moldau.console.records.decoding import SchemaDecoder
from moldau.console.records.producing import ProduceForm, produce
from moldau.console.records.query import BrowseQuery
from moldau.console.records.reader import browse
from tests.support.clients import ck_produce
from tests.support.console_auth import SecuredBroker

VISIBLE, HIDDEN = "acl-visible", "acl-hidden"


def user_clients(bootstrap: str, user: str) -> ConsoleClients:
    return ConsoleClients({"bootstrap.servers": bootstrap, "security.protocol": "sasl_plaintext"},
                          Credentials("PLAIN", user, f"{user}-secret"))


@pytest.fixture(scope="module")
def sasl_bootstrap(secured_broker: SecuredBroker) -> Iterator[str]:
    """The shared secured broker, where `carol` may read (and describe) VISIBLE only; her ACLs go afterwards, so
    the other modules' users see the ACLs they expect."""
    bootstrap = secured_broker.bootstrap
    admin = AdminClient(user_clients(bootstrap, "admin").config())
    for future in admin.create_topics([NewTopic(VISIBLE, 2, 1), NewTopic(HIDDEN, 1, 1)]).values():
        future.result(timeout=30)
    reads = [AclBinding(ResourceType.TOPIC, VISIBLE, ResourcePatternType.LITERAL, "User:carol", "*", operation,
                        AclPermissionType.ALLOW) for operation in (AclOperation.READ, AclOperation.DESCRIBE)]
    for future in admin.create_acls(reads).values():
        future.result(timeout=30)
    try:
        ck_produce(bootstrap, VISIBLE, [{"key": f"k{i}", "value": f"v{i}", "partition": i % 2} for i in range(6)],
                   **user_clients(bootstrap, "admin").config())
        yield bootstrap
    finally:
        filters = [AclBindingFilter(b.restype, b.name, b.resource_pattern_type, b.principal, b.host, b.operation,
                                    b.permission_type) for b in reads]
        for future in admin.delete_acls(filters).values():
            future.result(timeout=30)

def test_a_reader_browses_without_any_group_acl(sasl_bootstrap: str) -> None:
    config = user_clients(sasl_bootstrap, "carol").config()
    result = browse(config, VISIBLE, [0, 1], BrowseQuery(start="beginning"), SchemaDecoder(None))
    assert sorted((r.partition, r.offset, r.key.text) for r in result.records) == [
        (0, 0, "k0"), (0, 1, "k2"), (0, 2, "k4"), (1, 0, "k1"), (1, 1, "k3"), (1, 2, "k5")]


def test_a_topic_the_user_may_not_read_is_refused(sasl_bootstrap: str) -> None:
    """The page asks for the topic's partitions first: the refusal names the authorization failure (HTTP 403)."""
    with pytest.raises(KafkaException) as refused:
        asyncio.run(topic_partitions(user_clients(sasl_bootstrap, "carol"), HIDDEN))
    assert refused.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    assert kafka_error_status(refused.value.args[0]) == 403
    assert asyncio.run(topic_partitions(user_clients(sasl_bootstrap, "carol"), VISIBLE)) == [0, 1]


def test_a_produce_the_user_may_not_make_is_refused(sasl_bootstrap: str) -> None:
    with pytest.raises(KafkaException) as refused:
        produce(user_clients(sasl_bootstrap, "carol").config(), VISIBLE, ProduceForm(key="k", value="v"))
    assert refused.value.args[0].name() == "TOPIC_AUTHORIZATION_FAILED"
    produced = produce(user_clients(sasl_bootstrap, "admin").config(), VISIBLE, ProduceForm(value="by admin"))
    assert produced.offset >= 3
