"""The next-generation consumer group protocol (KIP-848) with confluent-kafka (`group.protocol=consumer`).

The broker's heartbeat interval is short (200 ms) so that reassignments take fractions of a second; the
session timeout is short (3 s) so that a killed member's partitions move quickly.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import pytest
from confluent_kafka import Consumer, ConsumerGroupState, ConsumerGroupType

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewPartitions  # type: ignore[attr-defined]
from kio.schema.api_versions.v4.request import ApiVersionsRequest as ApiVersionsV4
from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i32Timedelta

from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_produce, create_topic
from tests.support.groups import GroupMember, balanced, covers, poll_until, produce_spread, unique
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.broker_config({
    "offsets.topic.num.partitions": "3",
    "group.consumer.heartbeat.interval.ms": "200",
    "group.consumer.session.timeout.ms": "3000",
})

CONF = {"group.protocol": "consumer", "auto.offset.reset": "earliest", "enable.auto.commit": False,
        "enable.metrics.push": False}


class Member(GroupMember):
    """A KIP-848 member (group.protocol=consumer)."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        super().__init__(bootstrap, group, topic, CONF, **conf)


@pytest.fixture
def members() -> Any:
    created: list[Member] = []
    yield created
    for m in created:
        m.close()


def test_members_split_partitions_without_overlap_or_gap(broker: BrokerProcess, members: list[Member]) -> None:
    topic, group = unique("split"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=6)
    members += [Member(broker.bootstrap, group, topic) for _ in range(3)]
    poll_until(members, lambda: covers(members, 6) and all(len(m.assigned) == 2 for m in members))
    produce_spread(broker.bootstrap, topic, 300, 6)
    poll_until(members, lambda: sum(len(m.records) for m in members) >= 300)
    assert sorted(v for m in members for _, _, v in m.records) == sorted(f"v{i}".encode() for i in range(300))


def test_joining_member_takes_partitions_without_stopping_the_others(broker: BrokerProcess,
                                                                    members: list[Member]) -> None:
    topic, group = unique("join"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=4)
    members += [Member(broker.bootstrap, group, topic) for _ in range(2)]
    poll_until(members, lambda: balanced(members, 4))
    before = [set(m.assigned) for m in members]
    for m in members:
        m.revoked.clear()
    members.append(Member(broker.bootstrap, group, topic))
    poll_until(members, lambda: balanced(members, 4) and all(m.assigned for m in members))
    # Incremental: the old members only gave partitions up, never lost the ones they kept.
    for m, had in zip(members[:2], before, strict=True):
        assert m.assigned <= had
        assert set(m.revoked) == had - m.assigned


def test_leaving_member_partitions_are_reassigned(broker: BrokerProcess, members: list[Member]) -> None:
    topic, group = unique("leave"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=4)
    members += [Member(broker.bootstrap, group, topic) for _ in range(2)]
    poll_until(members, lambda: balanced(members, 4))
    members.pop(0).close()
    poll_until(members, lambda: covers(members, 4))


def test_committed_offsets_resume_after_restart(broker: BrokerProcess, members: list[Member]) -> None:
    topic, group = unique("resume"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce_spread(broker.bootstrap, topic, 20, 2)
    first = Member(broker.bootstrap, group, topic)
    members.append(first)
    poll_until([first], lambda: len(first.records) >= 20)
    first.commit()
    first.close()
    broker.restart()
    produce_spread(broker.bootstrap, topic, 10, 2, start=20)
    second = Member(broker.bootstrap, group, topic)
    members.append(second)
    poll_until([second], lambda: len(second.records) >= 10)
    time.sleep(0.5)
    second.poll()
    assert sorted(v for _, _, v in second.records) == sorted(f"v{i}".encode() for i in range(20, 30))


def test_admin_lists_and_describes_consumer_groups(broker: BrokerProcess, members: list[Member]) -> None:
    topic, group = unique("admin"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    members += [Member(broker.bootstrap, group, topic) for _ in range(2)]
    poll_until(members, lambda: balanced(members, 2))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    listed = admin.list_consumer_groups(types={ConsumerGroupType.CONSUMER}).result(timeout=10)
    assert [(g.group_id, g.type) for g in listed.valid] == [(group, ConsumerGroupType.CONSUMER)]
    classic = admin.list_consumer_groups(types={ConsumerGroupType.CLASSIC}).result(timeout=10)
    assert classic.valid == []
    described = admin.describe_consumer_groups([group])[group].result(timeout=10)
    assert described.type == ConsumerGroupType.CONSUMER
    assert described.state == ConsumerGroupState.STABLE
    assert sorted(p.partition for m in described.members for p in m.assignment.topic_partitions) == [0, 1]


def test_new_partitions_are_assigned(broker: BrokerProcess, members: list[Member]) -> None:
    topic, group = unique("grow"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    members += [Member(broker.bootstrap, group, topic) for _ in range(2)]
    poll_until(members, lambda: balanced(members, 2))
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_partitions([NewPartitions(topic, 4)])[topic].result(timeout=10)
    poll_until(members, lambda: balanced(members, 4))


def test_consumer_group_heartbeat_v0_joins(broker: BrokerProcess) -> None:
    """v0 has no subscribed_topic_regex field; a valid v0 join once failed on it."""
    import datetime

    from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest

    from moldau.protocol.errors import ErrorCode
    from tests.support.polling import wait_until
    from tests.support.raw_client import RawClient

    create_topic(broker.bootstrap, "v0-topic", partitions=2)
    join = ConsumerGroupHeartbeatRequest(
        group_id=GroupId("v0-group"), member_id="", member_epoch=i32(0), instance_id=None, rack_id=None,
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        subscribed_topic_names=(TopicName("v0-topic"),),
        server_assignor=None, topic_partitions=())
    with RawClient(broker.bootstrap) as client:
        # The first request creates __consumer_offsets (COORDINATOR_NOT_AVAILABLE until it is ready).
        response = wait_until(lambda: (r := client.request(join)).error_code != ErrorCode.coordinator_not_available
                              and r, timeout_s=30, what="the group coordinator")
    assert response.error_code == ErrorCode.none, response.error_message
    assert response.member_id and response.member_epoch >= 1


def test_a_regex_subscription_follows_topics_created_later(broker: BrokerProcess) -> None:
    """A librdkafka consumer subscribing with a regex (KIP-848 `SubscribedTopicRegex`): the coordinator resolves
    it against the topics, so a matching topic created later is assigned too, and others never are."""
    from confluent_kafka import Consumer

    from tests.support.clients import ck_produce

    prefix = unique("rx")
    create_topic(broker.bootstrap, f"{prefix}-a", partitions=1)
    create_topic(broker.bootstrap, f"other-{prefix}", partitions=1)
    ck_produce(broker.bootstrap, f"{prefix}-a", [{"value": b"a1"}, {"value": b"a2"}])
    ck_produce(broker.bootstrap, f"other-{prefix}", [{"value": b"never"}])
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), **CONF,
                         "topic.metadata.refresh.interval.ms": 500})
    got: list[tuple[str, bytes]] = []

    def read_until(wanted: set[bytes]) -> None:
        deadline = time.monotonic() + 30
        while {v for _, v in got} < wanted and time.monotonic() < deadline:
            for msg in consumer.consume(100, 0.2):
                assert msg.error() is None, msg.error()
                got.append((msg.topic() or "", msg.value() or b""))
        assert {v for _, v in got} >= wanted, got

    try:
        consumer.subscribe([f"^{prefix}-.*"])
        read_until({b"a1", b"a2"})
        create_topic(broker.bootstrap, f"{prefix}-b", partitions=2)
        ck_produce(broker.bootstrap, f"{prefix}-b", [{"value": v} for v in (b"b1", b"b2", b"b3")])
        read_until({b"a1", b"a2", b"b1", b"b2", b"b3"})
        assert {t for t, _ in got} == {f"{prefix}-a", f"{prefix}-b"}
    finally:
        consumer.close()


def test_an_invalid_regex_is_refused(broker: BrokerProcess) -> None:
    import datetime

    from kio.schema.consumer_group_heartbeat.v1.request import ConsumerGroupHeartbeatRequest

    from moldau.protocol.errors import ErrorCode
    from tests.support.polling import wait_until
    from tests.support.raw_client import RawClient

    join = ConsumerGroupHeartbeatRequest(
        group_id=GroupId(unique("g")), member_id="m-regex", member_epoch=i32(0), instance_id=None, rack_id=None,
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)), subscribed_topic_names=None,
        subscribed_topic_regex="orders-(", server_assignor=None, topic_partitions=())
    with RawClient(broker.bootstrap) as client:
        response = wait_until(lambda: (r := client.request(join)).error_code != ErrorCode.coordinator_not_available
                              and r, timeout_s=30, what="the group coordinator")
    assert response.error_code == ErrorCode.invalid_regular_expression
    assert "orders-(" in response.error_message


@pytest.mark.broker_config({"group.coordinator.rebalance.protocols": "classic"})
def test_a_broker_without_the_consumer_protocol_serves_classic_groups_only(broker: BrokerProcess) -> None:
    """group.coordinator.rebalance.protocols without `consumer`: KIP-848's APIs are not advertised and are refused
    with UNSUPPORTED_VERSION, a KIP-848 consumer is never given partitions, a classic one is served."""
    with RawClient(broker.bootstrap) as client:
        versions = client.request(ApiVersionsV4(client_software_name="t", client_software_version="1"))
        assert {int(k.api_key) for k in versions.api_keys} >= {11, 14}  # classic JoinGroup, SyncGroup
        assert not {68, 69} & {int(k.api_key) for k in versions.api_keys}
        heartbeat = client.request(ConsumerGroupHeartbeatRequest(
            group_id=GroupId("g"), member_id="", member_epoch=i32(0),
            rebalance_timeout=i32Timedelta.parse(timedelta(seconds=30)), subscribed_topic_names=(TopicName("t"),),
            topic_partitions=None))
        assert heartbeat.error_code.name == "unsupported_version"
    topic = unique("classic-only")
    create_topic(broker.bootstrap, topic)
    ck_produce(broker.bootstrap, topic, [{"value": b"v"}])
    modern = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "group.protocol": "consumer",
                       "auto.offset.reset": "earliest"})
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": unique("g"), "group.protocol": "classic",
                        "auto.offset.reset": "earliest"})
    try:
        modern.subscribe([topic])
        classic.subscribe([topic])
        got, served_modern, deadline = None, [], time.monotonic() + 30
        while got is None and time.monotonic() < deadline:
            message = classic.poll(0.5)
            if message is not None and message.error() is None:
                got = message.value()
            other = modern.poll(0.1)
            if other is not None and other.error() is None:
                served_modern.append(other.value())
        assert got == b"v"
        for _ in range(10):  # the KIP-848 consumer is never given the partition (librdkafka keeps retrying)
            other = modern.poll(0.3)
            if other is not None and other.error() is None:
                served_modern.append(other.value())
        assert served_modern == []
    finally:
        modern.close()
        classic.close()
