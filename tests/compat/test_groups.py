"""Consumer groups with real clients (confluent-kafka, kafka-python, aiokafka) against a real broker process.

Timeouts are short (session 3 s, heartbeat 200 ms, no initial rebalance delay) so that rebalances take
fractions of a second.
"""

from __future__ import annotations

import asyncio
import datetime
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_groups.v5.request import DescribeGroupsRequest
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v7 import request as join_req
from kio.schema.list_groups.v4.request import ListGroupsRequest
from kio.schema.offset_commit.v8 import request as commit_req
from kio.schema.offset_delete.v0 import request as delete_req
from kio.schema.offset_fetch.v8 import request as fetch_req
from kio.schema.sync_group.v5 import request as sync_req
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from moldau.coordinator.group.records import OFFSETS_TOPIC
from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.groups import GroupMember, covers, poll_until, produce_spread, unique, values
from tests.support.raw_client import RawClient

pytestmark = pytest.mark.broker_config({
    "offsets.topic.num.partitions": "3",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
})

CK_GROUP_CONF = {"session.timeout.ms": 3000, "heartbeat.interval.ms": 200, "max.poll.interval.ms": 10000,
                 "auto.offset.reset": "earliest", "enable.auto.commit": False, "enable.metrics.push": False}


class CkMember(GroupMember):
    """A classic-protocol member with the short timeouts these tests use."""

    def __init__(self, bootstrap: str, group: str, topic: str, **conf: Any) -> None:
        super().__init__(bootstrap, group, topic, CK_GROUP_CONF, **conf)


@pytest.fixture
def members() -> Any:
    created: list[CkMember] = []
    yield created
    for m in created:
        m.close()


# -- confluent-kafka --------------------------------------------------------------------------------------


def test_members_split_partitions_without_overlap_or_gap(broker: BrokerProcess, members: list[CkMember]) -> None:
    topic, group = unique("split"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=6)
    members += [CkMember(broker.bootstrap, group, topic) for _ in range(3)]
    poll_until(members, lambda: covers(members, 6) and all(len(m.assigned) == 2 for m in members))
    produce_spread(broker.bootstrap, topic, 300, 6)
    poll_until(members, lambda: len(values(members)) >= 300)
    assert values(members) == sorted(f"v{i}".encode() for i in range(300))
    for m in members:
        assert {p for p, _, _ in m.records} <= m.assigned


def test_join_and_leave_rebalance_until_all_partitions_are_owned(broker: BrokerProcess,
                                                                  members: list[CkMember]) -> None:
    topic, group = unique("rebalance"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=4)
    members += [CkMember(broker.bootstrap, group, topic) for _ in range(2)]
    poll_until(members, lambda: covers(members, 4) and all(m.assigned for m in members))
    members.append(CkMember(broker.bootstrap, group, topic))
    poll_until(members, lambda: covers(members, 4) and all(m.assigned for m in members))
    leaving = members.pop(0)
    leaving.close()
    poll_until(members, lambda: covers(members, 4) and all(m.assigned for m in members))
    produce_spread(broker.bootstrap, topic, 100, 4)
    poll_until(members, lambda: len(values(members)) >= 100)
    assert values(members) == sorted(f"v{i}".encode() for i in range(100))


def test_silent_member_is_replaced_after_its_session_times_out(broker: BrokerProcess,
                                                              members: list[CkMember]) -> None:
    topic, group = unique("silent"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    member = CkMember(broker.bootstrap, group, topic)
    members.append(member)
    poll_until(members, lambda: member.assigned == {0, 1})
    with RawClient(broker.bootstrap) as raw:
        # A second member joins, gets one partition from the leader, and then never heartbeats.
        first = raw.request(join_request(group, topic=topic, session_ms=1000))
        joined = while_polling(members, lambda: raw.request(join_request(group, first.member_id, topic=topic,
                                                                            session_ms=1000)))
        while_polling(members, lambda: raw.request(sync_req.SyncGroupRequest(
            group_id=GroupId(group), generation_id=joined.generation_id, member_id=joined.member_id,
            group_instance_id=None, protocol_type="consumer", protocol_name=joined.protocol_name, assignments=())))
        poll_until(members, lambda: len(member.assigned) == 1)
        silent_since = time.monotonic()
        poll_until(members, lambda: member.assigned == {0, 1})
        assert 0.8 < time.monotonic() - silent_since < 10


def test_more_members_than_partitions_leaves_some_idle(broker: BrokerProcess, members: list[CkMember]) -> None:
    topic, group = unique("idle"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    members += [CkMember(broker.bootstrap, group, topic) for _ in range(4)]
    poll_until(members, lambda: covers(members, 2) and sum(1 for m in members if m.assigns) == 4)
    assert sorted(len(m.assigned) for m in members) == [0, 0, 1, 1]


def test_two_groups_each_receive_every_record(broker: BrokerProcess, members: list[CkMember]) -> None:
    topic = unique("fanout")
    create_topic(broker.bootstrap, topic, partitions=3)
    first = [CkMember(broker.bootstrap, "first-" + topic, topic) for _ in range(2)]
    second = [CkMember(broker.bootstrap, "second-" + topic, topic)]
    members += first + second
    poll_until(members, lambda: covers(first, 3) and all(m.assigned for m in first) and covers(second, 3))
    produce_spread(broker.bootstrap, topic, 200, 3)
    poll_until(members, lambda: len(values(first)) >= 200 and len(values(second)) >= 200)
    assert values(first) == values(second) == sorted(f"v{i}".encode() for i in range(200))


def test_committed_offsets_survive_a_restart(broker: BrokerProcess, members: list[CkMember]) -> None:
    topic, group = unique("durable"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce_spread(broker.bootstrap, topic, 100, 2)
    member = CkMember(broker.bootstrap, group, topic)
    members.append(member)
    poll_until(members, lambda: len(member.records) == 100)
    member.consumer.commit(asynchronous=False)
    committed = {tp.partition: tp.offset for tp in member.consumer.committed(
        [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)}
    assert committed == {0: 50, 1: 50}
    member.close()

    broker.kill()  # a crash: the commit was acknowledged, so it must be in the log
    broker.start()
    produce_spread(broker.bootstrap, topic, 20, 2, start=100)
    resumed = CkMember(broker.bootstrap, group, topic)
    members.append(resumed)
    poll_until([resumed], lambda: len(resumed.records) >= 20)
    time.sleep(0.5)
    resumed.poll()
    assert sorted(v for _, _, v in resumed.records) == sorted(f"v{i}".encode() for i in range(100, 120))
    assert min(o for _, o, _ in resumed.records) == 50


def test_static_member_restart_keeps_partitions_without_rebalance(broker: BrokerProcess,
                                                                  members: list[CkMember]) -> None:
    topic, group = unique("static"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=4)
    a = CkMember(broker.bootstrap, group, topic, **{"group.instance.id": "a", "session.timeout.ms": 6000})
    b = CkMember(broker.bootstrap, group, topic, **{"group.instance.id": "b", "session.timeout.ms": 6000})
    members += [a, b]
    poll_until(members, lambda: covers(members, 4) and bool(a.assigned) and bool(b.assigned))
    time.sleep(0.5)
    poll_until(members, lambda: True)
    assigns_before, revokes_before, b_partitions = a.assigns, a.revokes, set(b.assigned)
    b.close()  # a static member leaves no LeaveGroup behind: it is expected back within its session
    restarted = CkMember(broker.bootstrap, group, topic, **{"group.instance.id": "b", "session.timeout.ms": 6000})
    members.append(restarted)
    poll_until([a, restarted], lambda: restarted.assigned == b_partitions)
    deadline = time.monotonic() + 2
    while time.monotonic() < deadline:  # give a rebalance, if any, the time to show
        a.poll()
        restarted.poll()
    assert (a.assigns, a.revokes) == (assigns_before, revokes_before)
    assert restarted.assigned == b_partitions


def test_admin_lists_describes_and_deletes_groups(broker: BrokerProcess, members: list[CkMember]) -> None:
    topic, group = unique("admin"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce_spread(broker.bootstrap, topic, 10, 2)
    member = CkMember(broker.bootstrap, group, topic, **{"client.id": "admin-test"})
    members.append(member)
    poll_until(members, lambda: len(member.records) == 10)
    member.consumer.commit(asynchronous=False)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    listed = admin.list_consumer_groups().result(timeout=10)
    assert group in {g.group_id for g in listed.valid}
    described = admin.describe_consumer_groups([group])[group].result(timeout=10)
    assert str(described.state).endswith("STABLE")
    (m,) = described.members
    assert m.client_id == "admin-test"
    assert {tp.partition for tp in m.assignment.topic_partitions} == {0, 1}
    from confluent_kafka import ConsumerGroupTopicPartitions

    offsets = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)])[group].result(timeout=10)
    assert {(tp.topic, tp.partition, tp.offset) for tp in offsets.topic_partitions} == {(topic, 0, 5), (topic, 1, 5)}

    with pytest.raises(Exception, match="NON_EMPTY_GROUP"):
        admin.delete_consumer_groups([group])[group].result(timeout=10)
    member.close()
    admin.delete_consumer_groups([group])[group].result(timeout=10)
    assert group not in {g.group_id for g in admin.list_consumer_groups().result(timeout=10).valid}


# -- kafka-python and aiokafka ---------------------------------------------------------------------------------


def test_kafka_python_group(broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer
    from kafka import TopicPartition as KpTopicPartition

    topic, group = unique("kp"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=4)
    # metadata_max_age_ms: a leader whose first assignment ran before its metadata had the new topic ("No
    # partition metadata") assigns nothing and waits for its next metadata refresh to notice the partitions and
    # rejoin; kafka-python's default refresh is 5 minutes away.
    consumers = [KafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                               auto_offset_reset="earliest", enable_auto_commit=False, session_timeout_ms=6000,
                               heartbeat_interval_ms=200, max_poll_interval_ms=10000, metadata_max_age_ms=1000)
                 for _ in range(2)]
    # The topic's partitions known before the first join, so that no rejoin is needed for them alone: such a
    # rejoin can leave kafka-python 3.0.12 without heartbeats when a poll times out during it (see
    # test_groups_migration.py).
    for c in consumers:
        assert topic in c.topics()
    got: dict[int, list[bytes]] = {0: [], 1: []}

    def poll_until_kp(done: Callable[[], bool]) -> None:
        deadline = time.monotonic() + 45  # on a busy machine kafka-python's members may rejoin a few times first
        while not done() and time.monotonic() < deadline:
            for i, c in enumerate(consumers):
                for records in c.poll(timeout_ms=50).values():
                    got[i] += [r.value for r in records]

    def split() -> bool:
        owned = [tp.partition for c in consumers for tp in c.assignment()]
        return sorted(owned) == [0, 1, 2, 3] and all(c.assignment() for c in consumers)

    try:
        poll_until_kp(split)
        assert split()
        produce_spread(broker.bootstrap, topic, 200, 4)
        poll_until_kp(lambda: len(got[0]) + len(got[1]) >= 200)
        assert sorted(got[0] + got[1]) == sorted(f"v{i}".encode() for i in range(200))
        assert got[0] and got[1], "both members consumed"
        for c in consumers:
            c.commit()
        assert sum(consumers[0].committed(KpTopicPartition(topic, p)) or 0 for p in range(4)) == 200
    finally:
        for c in consumers:
            c.close()


def test_aiokafka_group(broker: BrokerProcess) -> None:
    from aiokafka import AIOKafkaConsumer
    from aiokafka import TopicPartition as AioTopicPartition

    topic, group = unique("aio"), unique("g")
    create_topic(broker.bootstrap, topic, partitions=3)

    async def run() -> tuple[list[bytes], dict[int, int | None]]:
        consumers = [AIOKafkaConsumer(topic, bootstrap_servers=broker.bootstrap, group_id=group,
                                      auto_offset_reset="earliest", enable_auto_commit=False,
                                      session_timeout_ms=3000, heartbeat_interval_ms=200,
                                      max_poll_interval_ms=10000) for _ in range(2)]
        for c in consumers:
            await c.start()
        got: list[bytes] = []

        async def poll_until(done: Callable[[], bool]) -> None:
            deadline = time.monotonic() + 30
            while not done() and time.monotonic() < deadline:
                for c in consumers:
                    batch = await c.getmany(timeout_ms=50)
                    got.extend(r.value for records in batch.values() for r in records)

        def split() -> bool:
            owned = [tp.partition for c in consumers for tp in c.assignment()]
            return sorted(owned) == [0, 1, 2] and all(c.assignment() for c in consumers)

        try:
            await poll_until(split)
            assert split()
            await asyncio.to_thread(produce_spread, broker.bootstrap, topic, 150, 3)
            await poll_until(lambda: len(got) >= 150)
            for c in consumers:
                await c.commit()
            committed = {p: await consumers[0].committed(AioTopicPartition(topic, p)) for p in range(3)}
        finally:
            for c in consumers:
                await c.stop()
        return got, committed

    got, committed = asyncio.run(run())
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(150))
    assert committed == {0: 50, 1: 50, 2: 50}


# -- the protocol, request by request ----------------------------------------------------------------------------


def subscription(topic: str) -> bytes:
    """A ConsumerProtocolSubscription v0 for one topic."""
    return b"\x00\x00\x00\x00\x00\x01" + len(topic).to_bytes(2, "big") + topic.encode() + b"\xff\xff\xff\xff"


def join_request(group: str, member_id: str = "", protocols: tuple[str, ...] = ("range",),
                 session_ms: int = 3000, topic: str = "t") -> Any:
    return join_req.JoinGroupRequest(
        group_id=GroupId(group), session_timeout=i32Timedelta.parse(datetime.timedelta(milliseconds=session_ms)),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)), member_id=member_id,
        group_instance_id=None, protocol_type="consumer",
        protocols=tuple(join_req.JoinGroupRequestProtocol(name=p, metadata=subscription(topic)) for p in protocols))


def while_polling(members: Sequence[CkMember], request: Callable[[], Any]) -> Any:
    """Send a request that waits for other members, polling them meanwhile so they can rebalance."""
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append(request()))
    thread.start()
    while thread.is_alive():
        for m in members:
            m.poll()
    thread.join()
    return result[0]


def raw_member(client: RawClient, group: str, topic: str) -> tuple[str, int]:
    """Join `group` as its only member through the KIP-394 handshake and sync; returns (member id, generation)."""
    first = client.request(join_request(group, topic=topic))
    assert first.error_code == ErrorCode.member_id_required
    joined = client.request(join_request(group, first.member_id, topic=topic))
    assert joined.error_code == ErrorCode.none and joined.leader == first.member_id
    synced = client.request(sync_req.SyncGroupRequest(
        group_id=GroupId(group), generation_id=joined.generation_id, member_id=joined.member_id, group_instance_id=None,
        protocol_type="consumer", protocol_name=joined.protocol_name,
        assignments=(sync_req.SyncGroupRequestAssignment(member_id=joined.member_id, assignment=b"mine"),)))
    assert (synced.error_code, synced.assignment) == (ErrorCode.none, b"mine")
    return joined.member_id, joined.generation_id


def heartbeat(client: RawClient, group: str, member_id: str, generation: int) -> ErrorCode:
    response = client.request(HeartbeatRequest(group_id=GroupId(group), generation_id=i32(generation),
                                               member_id=member_id, group_instance_id=None))
    return ErrorCode(response.error_code)


def commit(client: RawClient, group: str, member_id: str, generation: int, topic: str, offset: int) -> ErrorCode:
    response = client.request(commit_req.OffsetCommitRequest(
        group_id=GroupId(group), generation_id_or_member_epoch=i32(generation), member_id=member_id,
        group_instance_id=None, topics=(commit_req.OffsetCommitRequestTopic(
            name=TopicName(topic), partitions=(commit_req.OffsetCommitRequestPartition(
                partition_index=i32(0), committed_offset=i64(offset), committed_leader_epoch=i32(-1),
                committed_metadata="m"),)),)))
    return ErrorCode(response.topics[0].partitions[0].error_code)


def test_bad_group_requests_get_kafkas_codes_and_harm_no_other_group(broker: BrokerProcess,
                                                                      members: list[CkMember]) -> None:
    topic, healthy = unique("bad"), unique("healthy")
    create_topic(broker.bootstrap, topic, partitions=2)
    bystander = CkMember(broker.bootstrap, healthy, topic)
    members.append(bystander)
    poll_until(members, lambda: bystander.assigned == {0, 1})
    assigns = bystander.assigns

    with RawClient(broker.bootstrap) as client:
        found = client.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("x", "y")))
        assert [c.error_code for c in found.coordinators] == [ErrorCode.none, ErrorCode.none]
        # Transactional ids (key type 1) have their own coordinators, on __transaction_state.
        txn = client.request(FindCoordinatorRequest(key_type=i8(1), coordinator_keys=("t",)))
        assert (txn.coordinators[0].error_code, txn.coordinators[0].node_id) == (ErrorCode.none, 1)
        unknown = client.request(FindCoordinatorRequest(key_type=i8(2), coordinator_keys=("t",)))
        assert unknown.coordinators[0].error_code == ErrorCode.invalid_request

        group = unique("raw")
        member_id, generation = raw_member(client, group, topic)
        assert heartbeat(client, group, member_id, generation) == ErrorCode.none
        assert heartbeat(client, unique("nosuch"), "m", 1) == ErrorCode.unknown_member_id
        assert heartbeat(client, group, "stranger", generation) == ErrorCode.unknown_member_id
        assert heartbeat(client, group, member_id, generation + 7) == ErrorCode.illegal_generation
        assert client.request(join_request("")).error_code == ErrorCode.invalid_group_id
        assert client.request(join_request(group, session_ms=100)).error_code == ErrorCode.invalid_session_timeout
        assert client.request(join_request(group, member_id, protocols=("other",))).error_code == \
            ErrorCode.inconsistent_group_protocol
        assert commit(client, group, member_id, generation + 1, topic, 5) == ErrorCode.illegal_generation
        assert commit(client, group, "stranger", generation, topic, 5) == ErrorCode.unknown_member_id
        assert commit(client, group, member_id, generation, "no-such-topic", 5) == \
            ErrorCode.unknown_topic_or_partition
        assert commit(client, group, member_id, generation, topic, 5) == ErrorCode.none

        deleted = client.request(DeleteGroupsRequest(groups_names=(GroupId(group), GroupId(unique("nosuch")))))
        assert [r.error_code for r in deleted.results] == [ErrorCode.non_empty_group, ErrorCode.group_id_not_found]
        kept = client.request(delete_req.OffsetDeleteRequest(group_id=GroupId(group), topics=(
            delete_req.OffsetDeleteRequestTopic(
                name=TopicName(topic),
                partitions=(delete_req.OffsetDeleteRequestPartition(partition_index=i32(0)),)),)))
        assert kept.topics[0].partitions[0].error_code == ErrorCode.group_subscribed_to_topic

        described = client.request(DescribeGroupsRequest(groups=(GroupId(group), GroupId(unique("nosuch"))),
                                                         include_authorized_operations=False))
        assert [g.group_state for g in described.groups] == ["Stable", "Dead"]
        assert described.groups[0].members[0].member_assignment == b"mine"
        listed = client.request(ListGroupsRequest(states_filter=("stable",)))
        assert {group, healthy} <= {g.group_id for g in listed.groups}

        fetched = client.request(fetch_req.OffsetFetchRequest(groups=(
            fetch_req.OffsetFetchRequestGroup(group_id=GroupId(group), topics=None),
            fetch_req.OffsetFetchRequestGroup(group_id=GroupId(unique("nosuch")), topics=(
                fetch_req.OffsetFetchRequestTopics(name=TopicName(topic), partition_indexes=(i32(0),)),)),
        ), require_stable=True))
        mine, other = fetched.groups
        assert [(t.name, p.partition_index, p.committed_offset, p.metadata)
                for t in mine.topics for p in t.partitions] == [(topic, 0, 5, "m")]
        assert other.topics[0].partitions[0].committed_offset == -1

    deadline = time.monotonic() + 1
    while time.monotonic() < deadline:
        bystander.poll()
    assert bystander.assigns == assigns and bystander.assigned == {0, 1}


def assignment(topic: str, partitions: Sequence[int]) -> bytes:
    """A ConsumerProtocolAssignment v0 giving `partitions` of one topic (no user data)."""
    out = b"\x00\x00\x00\x00\x00\x01" + len(topic).to_bytes(2, "big") + topic.encode()
    out += len(partitions).to_bytes(4, "big") + b"".join(p.to_bytes(4, "big") for p in partitions)
    return out + b"\xff\xff\xff\xff"


def test_commits_of_a_generation_rebalanced_away_are_refused(broker: BrokerProcess,
                                                              members: list[CkMember]) -> None:
    """A raw member and a confluent-kafka consumer in one group; the raw member commits at each step of the
    rebalance the consumer's arrival starts, and gets Kafka's answer for that step, whatever the timing."""
    topic, group = unique("rebalanced"), unique("rebalanced")
    create_topic(broker.bootstrap, topic, partitions=2)
    produce_spread(broker.bootstrap, topic, 10, 2)
    with RawClient(broker.bootstrap) as client:
        deadline = time.monotonic() + 20
        while client.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=(group,))).coordinators[0] \
                .error_code != ErrorCode.none:  # the first request creates the offsets topic
            assert time.monotonic() < deadline, "no group coordinator"
            time.sleep(0.05)
        old_id, old_generation = raw_member(client, group, topic)
        newcomer = CkMember(broker.bootstrap, group, topic)
        members.append(newcomer)
        deadline = time.monotonic() + 20
        while heartbeat(client, group, old_id, old_generation) != ErrorCode.rebalance_in_progress:
            assert time.monotonic() < deadline, "the consumer's join did not start a rebalance"
            newcomer.poll()
        # Preparing a rebalance: the generation is still the current one.
        assert commit(client, group, old_id, old_generation, topic, 3) == ErrorCode.none

        joined = while_polling([newcomer], lambda: client.request(join_request(group, old_id, topic=topic)))
        assert joined.error_code == ErrorCode.none and joined.leader == old_id
        generation = joined.generation_id
        assert generation == old_generation + 1
        # The leader has not sent the assignment: the consumer waits in SyncGroup, the group is completing.
        assert commit(client, group, old_id, old_generation, topic, 4) == ErrorCode.illegal_generation
        assert commit(client, group, old_id, generation, topic, 4) == ErrorCode.rebalance_in_progress
        assert commit(client, group, "stranger", generation, topic, 4) == ErrorCode.unknown_member_id

        consumer_id = next(m.member_id for m in joined.members if m.member_id != old_id)
        synced = client.request(sync_req.SyncGroupRequest(
            group_id=GroupId(group), generation_id=generation, member_id=old_id, group_instance_id=None,
            protocol_type="consumer", protocol_name=joined.protocol_name,
            assignments=(sync_req.SyncGroupRequestAssignment(member_id=old_id, assignment=assignment(topic, ())),
                         sync_req.SyncGroupRequestAssignment(member_id=consumer_id,
                                                             assignment=assignment(topic, (0, 1))))))
        assert synced.error_code == ErrorCode.none
        assert commit(client, group, old_id, generation, topic, 5) == ErrorCode.none
        poll_until([newcomer], lambda: newcomer.assigned == {0, 1} and len(newcomer.records) == 10)
        newcomer.commit()  # the real client's commit with the settled generation goes through
        committed = newcomer.consumer.committed([TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=10)
        assert sorted(tp.offset for tp in committed) == [5, 5]


def test_console_consume_joins_no_group(broker: BrokerProcess) -> None:
    import subprocess
    import sys

    topic = unique("cli")
    create_topic(broker.bootstrap, topic, partitions=1)
    produce_spread(broker.bootstrap, topic, 3, 1)
    out = subprocess.run([sys.executable, "-m", "moldau", "consume", topic, "--bootstrap-server", broker.bootstrap,
                          "--from-beginning", "--max-messages", "3"], capture_output=True, timeout=60, check=True)
    assert out.stdout.decode().split() == ["v0", "v1", "v2"]
    with RawClient(broker.bootstrap) as client:
        assert client.request(ListGroupsRequest(states_filter=())).groups == ()
    assert OFFSETS_TOPIC  # the topic may exist (FindCoordinator creates it), but no group does
