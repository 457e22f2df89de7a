"""ACLs against a real broker with `authorizer.class.name` set, driven by real clients.

PLAINTEXT connections are all `User:ANONYMOUS`, so the steps vary the ACLs rather than the principal: first the
broker runs with `super.users=User:ANONYMOUS` (the admin path) and the ACLs are created through confluent-kafka's
AdminClient and through `moldau acls`; then it restarts without super users, so the ACLs just created (read back
from the metadata log) are all that allows anything.
"""

from __future__ import annotations

import datetime
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicCollection
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
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta

from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume

TIMEOUT_S = 30
ANON = "User:ANONYMOUS"
REPO = Path(__file__).resolve().parents[2]
STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def acls_cli(bootstrap: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "moldau", "acls", *args, "-b", bootstrap], capture_output=True,
                          text=True, cwd=REPO, timeout=60)


def allow(resource_type: ResourceType, name: str, op: AclOperation,
          pattern: ResourcePatternType = ResourcePatternType.LITERAL,
          permission: AclPermissionType = AclPermissionType.ALLOW) -> AclBinding:
    return AclBinding(resource_type, name, pattern, ANON, "*", op, permission)


def produce_one(bootstrap: str, topic: str, **conf: Any) -> KafkaError | None:
    """Produce one record; the delivery error, or None when it was written."""
    producer = Producer({"bootstrap.servers": bootstrap, "message.timeout.ms": 10_000, "retries": 0, **conf})
    outcome: list[KafkaError | None] = []
    producer.produce(topic, value=b"v", on_delivery=lambda err, msg: outcome.append(err))
    producer.flush(TIMEOUT_S)
    assert outcome, "no delivery report"
    return outcome[0]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    """A broker with the ACLs of this module, created while ANONYMOUS was a super user, then restarted
    without super users."""
    proc = BrokerProcess(tmp_path_factory.mktemp("acl-broker"), {
        "authorizer.class.name": STANDARD_AUTHORIZER,
        "super.users": ANON,
        "allow.everyone.if.no.acl.found": "false",
    })
    proc.start()
    try:
        admin = AdminClient({"bootstrap.servers": proc.bootstrap})
        topics = ["readable", "team-orders", "team-secret", "hidden"]
        for future in admin.create_topics([NewTopic(t, 1, 1) for t in topics], operation_timeout=10).values():
            future.result(timeout=TIMEOUT_S)
        assert produce_one(proc.bootstrap, "readable") is None
        bindings = [
            allow(ResourceType.BROKER, "kafka-cluster", AclOperation.ALTER),
            allow(ResourceType.BROKER, "kafka-cluster", AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, "readable", AclOperation.READ),
            allow(ResourceType.TOPIC, "team-", AclOperation.ALL, ResourcePatternType.PREFIXED),
            allow(ResourceType.TOPIC, "team-secret", AclOperation.WRITE, permission=AclPermissionType.DENY),
            allow(ResourceType.GROUP, "lookers", AclOperation.DESCRIBE),
            allow(ResourceType.TOPIC, "bare", AclOperation.CREATE),
        ]
        for future in admin.create_acls(bindings, request_timeout=TIMEOUT_S).values():
            future.result(timeout=TIMEOUT_S)
        # The consumer group's ACL through the command-line tool.
        done = acls_cli(proc.bootstrap, "add", "--allow-principal", ANON, "--operation", "Read",
                        "--group", "allowed-", "--resource-pattern-type", "prefixed")
        assert done.returncode == 0, done.stderr
        proc.overrides["super.users"] = ""
        proc.restart()
        yield proc
    finally:
        try:
            proc.stop()
        finally:
            proc.cleanup()


def test_acls_survive_a_restart_and_are_listed(secured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    # The stubs type a filter's name, principal and host as str; None matches any.
    found = admin.describe_acls(AclBindingFilter(ResourceType.ANY, None, ResourcePatternType.ANY, None, None,  # type: ignore[arg-type]
                                                 AclOperation.ANY, AclPermissionType.ANY),
                                request_timeout=TIMEOUT_S).result(timeout=TIMEOUT_S)
    seen = {(b.restype, b.name, b.resource_pattern_type, b.operation, b.permission_type) for b in found}
    assert (ResourceType.GROUP, "allowed-", ResourcePatternType.PREFIXED, AclOperation.READ,
            AclPermissionType.ALLOW) in seen
    assert (ResourceType.TOPIC, "team-secret", ResourcePatternType.LITERAL, AclOperation.WRITE,
            AclPermissionType.DENY) in seen
    assert len(found) == 8
    listed = acls_cli(secured.bootstrap, "list", "--topic", "team-orders", "--resource-pattern-type", "match")
    assert listed.returncode == 0, listed.stderr
    assert "name=team-, patternType=PREFIXED" in listed.stdout
    assert "operation=ALL, permissionType=ALLOW" in listed.stdout


def test_metadata_lists_only_describable_topics(secured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    topics = set(admin.list_topics(timeout=TIMEOUT_S).topics)
    assert {"readable", "team-orders", "team-secret"} <= topics
    assert "hidden" not in topics
    assert not any(t.startswith("__") for t in topics)


def test_read_without_write(secured: BrokerProcess) -> None:
    error = produce_one(secured.bootstrap, "readable")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    conf: dict[str, Any] = {"group.id": "allowed-assign"}  # librdkafka looks its coordinator up even to assign
    records = ck_consume(secured.bootstrap, "readable", 1, conf=conf)
    assert [r.value for r in records] == [b"v"]


def test_prefixed_allow_and_deny_beating_it(secured: BrokerProcess) -> None:
    assert produce_one(secured.bootstrap, "team-orders") is None
    # An idempotent producer: no IDEMPOTENT_WRITE on the cluster, but WRITE on some topic suffices (KIP-679).
    assert produce_one(secured.bootstrap, "team-orders", **{"enable.idempotence": True, "retries": 5}) is None
    error = produce_one(secured.bootstrap, "team-secret")
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def _join(bootstrap: str, group: str, topic: str) -> tuple[list[bytes | None], KafkaError | None]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "session.timeout.ms": 6000})
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + TIMEOUT_S
        while time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is None:
                continue
            if msg.error() is not None:
                return [], msg.error()
            return [msg.value()], None
        return [], None
    finally:
        consumer.close()


def test_consumer_needs_read_on_its_group(secured: BrokerProcess) -> None:
    values, error = _join(secured.bootstrap, "allowed-consumers", "readable")
    assert (values, error) == ([b"v"], None)
    # Refused at FindCoordinator (DESCRIBE on the group)...
    values, error = _join(secured.bootstrap, "other-consumers", "readable")
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    # ... and, with DESCRIBE but not READ, at JoinGroup.
    values, error = _join(secured.bootstrap, "lookers", "readable")
    assert error is not None and error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED, error
    assert "JoinGroup" in error.str() or "join" in error.str().lower(), error.str()


def test_acls_change_at_runtime(secured: BrokerProcess) -> None:
    topic = "team-runtime"
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    # No CREATE on the cluster, but ALL on team-* includes CREATE on the topic.
    admin.create_topics([NewTopic(topic, 1, 1)], operation_timeout=10)[topic].result(timeout=TIMEOUT_S)
    assert produce_one(secured.bootstrap, topic) is None
    done = acls_cli(secured.bootstrap, "add", "--deny-principal", ANON, "--operation", "Write", "--topic", topic)
    assert done.returncode == 0, done.stderr
    error = produce_one(secured.bootstrap, topic)
    assert error is not None and error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    done = acls_cli(secured.bootstrap, "remove", "--deny-principal", ANON, "--topic", topic, "--force")
    assert done.returncode == 0, done.stderr
    assert "Removed 1 ACL" in done.stdout
    assert produce_one(secured.bootstrap, topic) is None
    # Creating a topic outside team-* needs CREATE on the cluster or the topic.
    result = admin.create_topics([NewTopic("elsewhere", 1, 1)], operation_timeout=10)["elsewhere"]
    with pytest.raises(Exception) as refused:
        result.result(timeout=TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_authorized_operations_come_from_the_acls(secured: BrokerProcess) -> None:
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    cluster = admin.describe_cluster(include_authorized_operations=True, request_timeout=TIMEOUT_S).result(
        timeout=TIMEOUT_S)
    assert set(cluster.authorized_operations) == {AclOperation.ALTER, AclOperation.DESCRIBE}
    topics = admin.describe_topics(TopicCollection(["readable", "team-orders"]), include_authorized_operations=True,
                                   request_timeout=TIMEOUT_S)
    readable = topics["readable"].result(timeout=TIMEOUT_S)
    assert set(readable.authorized_operations) == {AclOperation.READ, AclOperation.DESCRIBE}
    team = topics["team-orders"].result(timeout=TIMEOUT_S)
    assert AclOperation.DELETE in set(team.authorized_operations)


def test_a_transactional_producer_needs_its_transactional_id(secured: BrokerProcess) -> None:
    producer = Producer({"bootstrap.servers": secured.bootstrap, "transactional.id": "not-allowed"})
    with pytest.raises(KafkaException) as refused:
        producer.init_transactions(TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED


def test_kafka_python_admin_creates_describes_and_deletes_acls(secured: BrokerProcess) -> None:
    from kafka.admin import (
        ACL,
        ACLFilter,
        ACLOperation,
        ACLPermissionType,
        ACLResourcePatternType,
        KafkaAdminClient,
        ResourcePattern,
        ResourcePatternFilter,
    )
    from kafka.admin import ResourceType as KpResourceType

    admin = KafkaAdminClient(bootstrap_servers=secured.bootstrap)
    try:
        pattern = ResourcePattern(KpResourceType.GROUP, "kp-group", ACLResourcePatternType.LITERAL)
        created = admin.create_acls([ACL("User:carol", "*", ACLOperation.READ, ACLPermissionType.ALLOW, pattern)])
        assert created["failed"] == []
        wanted = ACLFilter(principal="User:carol", host="*", operation=ACLOperation.ANY,
                           permission_type=ACLPermissionType.ANY,
                           resource_pattern=ResourcePatternFilter(KpResourceType.GROUP, "kp-group",
                                                                  ACLResourcePatternType.ANY))
        found, _ = admin.describe_acls(wanted)
        assert [(a.principal, a.operation) for a in found] == [("User:carol", ACLOperation.READ)]
        ((_, deleted, _),) = admin.delete_acls([wanted])
        assert len(deleted) == 1
        assert admin.describe_acls(wanted)[0] == []
    finally:
        admin.close()


def test_created_topics_configs_need_describe_configs(secured: BrokerProcess) -> None:
    from kio.schema.create_topics.v7 import request as create_v7

    from moldau.protocol.codec import make
    from tests.support.raw_client import RawClient

    topic = make(create_v7.CreatableTopic, name="bare", num_partitions=1, replication_factor=1, assignments=(),
                 configs=())
    request = make(create_v7.CreateTopicsRequest, topics=(topic,), timeout=datetime.timedelta(seconds=10),
                   validate_only=False)
    with RawClient(secured.bootstrap) as client:
        (created,) = client.request(request).topics
    assert (created.name, created.error_code, created.num_partitions) == ("bare", 0, 1)
    assert (created.configs, created.topic_config_error_code) == ((), KafkaError.TOPIC_AUTHORIZATION_FAILED)


def test_share_group_apis_need_read_on_the_group_and_describe_on_subscribed_topics(secured: BrokerProcess) -> None:
    import datetime as dt
    import uuid

    from kio.schema.errors import ErrorCode
    from kio.schema.share_fetch.v1.request import ShareFetchRequest
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest

    from tests.support.raw_client import RawClient

    def heartbeat(group: str, topic: str) -> Any:
        with RawClient(secured.bootstrap) as client:
            return client.request(ShareGroupHeartbeatRequest(group_id=GroupId(group), member_id=uuid.uuid4().hex,
                                                             member_epoch=i32(0),
                                                             subscribed_topic_names=(TopicName(topic),)))

    assert heartbeat("not-allowed", "readable").error_code == ErrorCode.group_authorization_failed
    assert heartbeat("allowed-share", "hidden").error_code == ErrorCode.topic_authorization_failed
    from tests.support.polling import wait_until

    # The first heartbeat may find __consumer_offsets still being created (COORDINATOR_NOT_AVAILABLE).
    joined = wait_until(lambda: (r := heartbeat("allowed-share", "readable")).error_code == ErrorCode.none and r,
                        TIMEOUT_S, "the allowed share group was never joined")
    assert joined.assignment is not None
    with RawClient(secured.bootstrap) as client:
        fetched = client.request(ShareFetchRequest(
            group_id=GroupId("not-allowed"), member_id="m", share_session_epoch=i32(0),
            max_wait=i32Timedelta.parse(dt.timedelta(0)), min_bytes=i32(1),
            max_records=i32(10), batch_size=i32(10), topics=(), forgotten_topics_data=()))
    assert fetched.error_code == ErrorCode.group_authorization_failed


def _consumer_heartbeat(bootstrap: str, group: str, member_id: str, epoch: int, regex: str | None) -> Any:
    from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest

    from tests.support.raw_client import RawClient

    with RawClient(bootstrap) as client:
        return client.request(ConsumerGroupHeartbeatRequest(
            group_id=GroupId(group), member_id=member_id, member_epoch=i32(epoch), instance_id=None, rack_id=None,
            rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), subscribed_topic_names=None,
            subscribed_topic_regex=regex, server_assignor=None, topic_partitions=None if epoch else ()))


def test_a_regex_subscription_gets_only_topics_the_consumer_may_describe(secured: BrokerProcess) -> None:
    """KIP-848 regexes are resolved by the coordinator: only to topics the member's principal may DESCRIBE
    (Kafka's rule), and again when the ACLs change. librdkafka reads through it without an error; a raw member
    sees its assignment shrink."""
    from kio.schema.errors import ErrorCode

    from tests.support.polling import wait_until

    consumer = Consumer({"bootstrap.servers": secured.bootstrap, "group.id": "allowed-regex",
                         "group.protocol": "consumer", "auto.offset.reset": "earliest",
                         "enable.auto.commit": False, "enable.metrics.push": False})
    try:
        consumer.subscribe(["^(readable|hidden)$"])
        deadline = time.monotonic() + TIMEOUT_S
        got: list[Any] = []
        while not got and time.monotonic() < deadline:
            got = consumer.consume(10, 0.5)
        assert [(m.error(), m.topic(), m.value()) for m in got] == [(None, "readable", b"v")]
        assert [tp.topic for tp in consumer.assignment()] == ["readable"]
    finally:
        consumer.close()

    # hidden (no ACL) matches the regex but is never assigned; without the filter it would be a second topic.
    joined = wait_until(lambda: (r := _consumer_heartbeat(secured.bootstrap, "allowed-rx-raw", "m1", 0,
                                                          "^(readable|hidden)$")).error_code == ErrorCode.none
                        and r, TIMEOUT_S, "the raw member never joined")
    assert [len(t.partitions) for t in joined.assignment.topic_partitions] == [1]


def test_describing_a_group_needs_describe_on_every_topic_its_members_use(secured: BrokerProcess) -> None:
    """ConsumerGroupDescribe and ShareGroupDescribe refuse a group naming a topic the client may not DESCRIBE
    (TOPIC_AUTHORIZATION_FAILED, as Kafka does), and a regex member loses the topic at its next heartbeat."""
    import uuid

    from kio.schema.consumer_group_describe.v0.request import ConsumerGroupDescribeRequest
    from kio.schema.errors import ErrorCode
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest

    from tests.support.polling import wait_until
    from tests.support.raw_client import RawClient

    topic = "team-described"
    admin = AdminClient({"bootstrap.servers": secured.bootstrap})
    admin.create_topics([NewTopic(topic, 2, 1)], operation_timeout=10)[topic].result(timeout=TIMEOUT_S)
    joined = wait_until(lambda: (r := _consumer_heartbeat(secured.bootstrap, "allowed-described", "m1", 0,
                                                          f"^{topic}$")).error_code == ErrorCode.none and r,
                        TIMEOUT_S, "the consumer group was never joined")
    assert [len(t.partitions) for t in joined.assignment.topic_partitions] == [2]

    def share_join() -> Any:
        with RawClient(secured.bootstrap) as client:
            return client.request(ShareGroupHeartbeatRequest(
                group_id=GroupId("allowed-shared"), member_id=uuid.uuid4().hex, member_epoch=i32(0), rack_id=None,
                subscribed_topic_names=(TopicName(topic),)))

    # The first share heartbeat may find __share_group_state still being created (COORDINATOR_NOT_AVAILABLE).
    share = wait_until(lambda: (r := share_join()).error_code == ErrorCode.none and r, TIMEOUT_S,
                       "the share group was never joined")
    assert share.assignment is not None

    def describe() -> tuple[Any, Any]:
        with RawClient(secured.bootstrap) as client:
            (consumer,) = client.request(ConsumerGroupDescribeRequest(
                group_ids=(GroupId("allowed-described"),), include_authorized_operations=False)).groups
            (shared,) = client.request(ShareGroupDescribeRequest(
                group_ids=(GroupId("allowed-shared"),), include_authorized_operations=False)).groups
        return consumer, shared

    consumer, shared = describe()
    assert (consumer.error_code, len(consumer.members)) == (ErrorCode.none, 1)
    assert (shared.error_code, len(shared.members)) == (ErrorCode.none, 1)

    deny = AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, ANON, "*", AclOperation.DESCRIBE,
                      AclPermissionType.DENY)
    for future in admin.create_acls([deny], request_timeout=TIMEOUT_S).values():
        future.result(timeout=TIMEOUT_S)
    consumer, shared = describe()
    for group in (consumer, shared):
        assert (group.error_code, group.members) == (ErrorCode.topic_authorization_failed, ()), group
        assert topic not in (group.error_message or "")
    # The same through confluent-kafka's AdminClient.
    with pytest.raises(KafkaException) as refused:
        admin.describe_consumer_groups(["allowed-described"])["allowed-described"].result(timeout=TIMEOUT_S)
    assert refused.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED

    # The member's next heartbeat resolves its regex with the new ACLs: nothing left, and the group describes.
    again = _consumer_heartbeat(secured.bootstrap, "allowed-described", "m1", joined.member_epoch, None)
    assert again.error_code == ErrorCode.none and again.assignment is not None
    assert again.assignment.topic_partitions == ()
    consumer, _ = describe()
    assert consumer.error_code == ErrorCode.none
    assert [m.assignment.topic_partitions for m in consumer.members] == [()]
