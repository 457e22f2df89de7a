"""ACLs on a real three-node cluster: created through one node, replicated through the metadata log to every
node, enforced by whichever node leads a partition, and kept across a restart.

The nodes talk to each other as `User:ANONYMOUS` over PLAINTEXT, so the cluster runs with
`allow.everyone.if.no.acl.found=true`: resources without ACLs (the cluster, internal topics) stay open to the
nodes, and the ACLs below close one topic.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaError, Producer
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)
from kio.schema.describe_acls.v3.request import DescribeAclsRequest
from kio.static.primitive import i8

from tests.support.cluster import LocalCluster
from tests.support.raw_client import RawClient
from tests.support.replicated import FAST_FAILOVER

pytestmark = pytest.mark.slow

TOPIC = "guarded"
SECURED = {**FAST_FAILOVER, "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
           "allow.everyone.if.no.acl.found": "true"}


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    with LocalCluster(tmp_path, 3, overrides=SECURED) as started:
        started.active_controller(timeout_s=30)
        yield started


def acls_at(address: str) -> set[tuple[str, str, int, int]]:
    """(resource name, principal, operation, permission) of every ACL, as this one node answers DescribeAcls."""
    request = DescribeAclsRequest(resource_type_filter=i8(1), resource_name_filter=None, pattern_type_filter=i8(1),
                                  principal_filter=None, host_filter=None, operation=i8(1), permission_type=i8(1))
    with RawClient(address) as client:
        response = client.request(request)
    assert response.error_code == 0
    return {(r.resource_name, a.principal, a.operation, a.permission_type) for r in response.resources for a in r.acls}


def produce_errors(bootstrap: str, partitions: int) -> set[int | None]:
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 15000, "retries": 0})
    outcomes: list[KafkaError | None] = []
    for p in range(partitions):
        producer.produce(TOPIC, value=b"v", partition=p, on_delivery=lambda err, msg: outcomes.append(err))
    producer.flush(30)
    assert len(outcomes) == partitions
    return {None if err is None else err.code() for err in outcomes}


def test_acls_replicate_to_every_node_and_every_leader_enforces_them(cluster: LocalCluster) -> None:
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic(TOPIC, 3, 3)])[TOPIC].result(timeout=30)
    assert produce_errors(cluster.bootstrap, 3) == {None}
    deny = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:*", "*", AclOperation.WRITE,
                      AclPermissionType.DENY)
    describe = AclBinding(ResourceType.TOPIC, TOPIC, ResourcePatternType.LITERAL, "User:*", "*",
                          AclOperation.DESCRIBE, AclPermissionType.ALLOW)
    for future in admin.create_acls([deny, describe]).values():
        future.result(timeout=30)
    expected = {(TOPIC, "User:*", int(AclOperation.WRITE.value), int(AclPermissionType.DENY.value)),
                (TOPIC, "User:*", int(AclOperation.DESCRIBE.value), int(AclPermissionType.ALLOW.value))}
    addresses = [str(node.kafka_address) for node in cluster.brokers]
    cluster.wait_until(lambda: all(acls_at(a) == expected for a in addresses), 20, "the ACLs on every node")
    # Three partitions with leaders spread over the nodes: each leader refuses.
    assert produce_errors(cluster.bootstrap, 3) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
    restarted = cluster.brokers[-1]
    restarted.restart()
    cluster.wait_until(lambda: acls_at(str(restarted.kafka_address)) == expected, 30, "the ACLs after a restart")
    assert produce_errors(cluster.bootstrap, 3) == {KafkaError.TOPIC_AUTHORIZATION_FAILED}
