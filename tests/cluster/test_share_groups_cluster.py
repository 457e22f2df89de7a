"""Share groups on a real 3-node cluster: the group coordinated by one broker, the share-partitions on the leaders
of a topic spread over all three, each consumer holding a share session with every one of them, and the
share-partitions' state written to the share coordinators of `__share_group_state` on other brokers, and deleted
from them with the group."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, KafkaException, Producer, ShareConsumer

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.alter_share_group_offsets.v0.request import (
    AlterShareGroupOffsetsRequest,
    AlterShareGroupOffsetsRequestPartition,
    AlterShareGroupOffsetsRequestTopic,
)
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
    DescribeShareGroupOffsetsRequestTopic,
)
from kio.schema.find_coordinator.v4.request import FindCoordinatorRequest
from kio.schema.read_share_group_state.v0.request import PartitionData, ReadShareGroupStateRequest, ReadStateData
from kio.schema.read_share_group_state_summary.v1.request import PartitionData as SummaryPartition
from kio.schema.read_share_group_state_summary.v1.request import (
    ReadShareGroupStateSummaryRequest,
    ReadStateSummaryData,
)
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i64

from moldau.coordinator.record_codec import partition_for
from moldau.coordinator.share.records import SHARE_STATE_TOPIC
from tests.support.cluster import LocalCluster, metadata_at
from tests.support.messages import value_of
from tests.support.polling import wait_until
from tests.support.raw_client import RawClient
from tests.support.replicated import FAST_FAILOVER

pytestmark = pytest.mark.slow

TOPIC = "work"
PARTITIONS = 6
RECORDS = 240


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    overrides = {**FAST_FAILOVER, "offsets.topic.num.partitions": "3", "share.auto.offset.reset": "earliest",
                 # Two state partitions, led by at most two of the three brokers: the third leads share-partitions
                 # whose state lives elsewhere.
                 "share.coordinator.state.topic.num.partitions": "2"}
    with LocalCluster(tmp_path, 3, overrides=overrides) as started:
        started.active_controller(timeout_s=30)
        admin = AdminClient({"bootstrap.servers": started.bootstrap})
        admin.create_topics([NewTopic(TOPIC, PARTITIONS, 1)])[TOPIC].result(30)
        yield started


def test_two_share_consumers_get_every_record_of_partitions_led_by_three_brokers_once(
        cluster: LocalCluster) -> None:
    def leaders() -> list[int] | None:
        """The leader of each partition of the topic, once broker 0 knows one for every partition."""
        found = [p.leader_id for t in metadata_at(cluster.brokers[0].kafka_address or "", [TOPIC]).topics
                 for p in t.partitions]
        return found if len(found) == PARTITIONS and min(found) >= 0 else None

    # CreateTopics answers once the controller committed the topic; broker 0 learns of it a moment later.
    known = wait_until(leaders, 30, "broker 0 to know a leader of each partition of the topic")
    assert len(set(known)) == 3, f"the topic's partitions are led by {set(known)}, not by all three brokers"
    producer = Producer({"bootstrap.servers": cluster.bootstrap})
    values = [f"w{i}".encode() for i in range(RECORDS)]
    for i, value in enumerate(values):
        producer.produce(TOPIC, value=value, partition=i % PARTITIONS)
    assert producer.flush(30) == 0
    received: list[list[bytes]] = [[], []]
    lock = threading.Lock()
    stop = threading.Event()

    def consume(index: int) -> None:
        consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": "workers",
                                  "max.poll.records": 10})
        consumer.subscribe([TOPIC])
        try:
            while not stop.is_set():
                for message in consumer.poll(0.2):
                    if message.error() is None:
                        with lock:
                            received[index].append(value_of(message))
            consumer.poll(0.2)  # implicit acknowledgement of the last records
        finally:
            consumer.close()

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: sum(len(r) for r in received) >= RECORDS, 90.0, "the consumers never got every record")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    assert sorted(received[0] + received[1]) == sorted(values)
    # Some share-partitions have their state on another broker than their leader: their state was read and
    # written with ReadShareGroupState and WriteShareGroupState between brokers.
    metadata = metadata_at(cluster.brokers[0].kafka_address or "", [TOPIC, SHARE_STATE_TOPIC])
    by_name = {t.name: t for t in metadata.topics}
    work, state = by_name[TOPIC], by_name[SHARE_STATE_TOPIC]
    state_leaders = {p.partition_index: p.leader_id for p in state.partitions}
    remote = [p.partition_index for p in work.partitions
              if state_leaders[partition_for(f"workers:{work.topic_id}:{p.partition_index}", len(state_leaders))]
              != p.leader_id]
    assert remote, (state_leaders, [(p.partition_index, p.leader_id) for p in work.partitions])
    addresses = {b.node_id: f"{b.host}:{b.port}" for b in metadata.brokers}
    # The state of those partitions was written remotely: durable, and past the records acknowledged. (The last
    # poll's records are acknowledged as the consumers close, which a loaded machine may cut short, so the
    # SPSO is not required to be at the end.)
    for p in (p for p in work.partitions if p.partition_index in remote):
        coordinator = state_leaders[partition_for(f"workers:{work.topic_id}:{p.partition_index}",
                                                  len(state_leaders))]
        request = ReadShareGroupStateRequest(group_id="workers", topics=(ReadStateData(
            topic_id=work.topic_id, partitions=(PartitionData(partition=p.partition_index,
                                                              leader_epoch=p.leader_epoch),)),))
        with RawClient(addresses[coordinator]) as client:
            ((state,),) = [r.partitions for r in client.request(request).results]
        assert state.error_code == 0 and state.state_epoch >= 0 and state.start_offset > 0, state
    start_again_from_the_beginning(cluster, addresses, values)
    # Deleting the group deletes those states too, on their coordinators (DeleteShareGroupState between brokers).
    wait_until(lambda: group_deleted(cluster, "workers"), 30.0, "the share group was never deleted")
    for p in (p for p in work.partitions if p.partition_index in remote):
        coordinator = state_leaders[partition_for(f"workers:{work.topic_id}:{p.partition_index}",
                                                  len(state_leaders))]
        summary_request = ReadShareGroupStateSummaryRequest(group_id="workers", topics=(ReadStateSummaryData(
            topic_id=work.topic_id, partitions=(SummaryPartition(partition=p.partition_index,
                                                                 leader_epoch=i32(-1)),)),))
        with RawClient(addresses[coordinator]) as client:
            ((summary,),) = [r.partitions for r in client.request(summary_request).results]
        assert (summary.error_code, summary.state_epoch, summary.start_offset) == (0, -1, -1), summary
    for node in cluster.brokers:
        assert "internal error" not in node.log_tail(100000), node.log_tail()


def start_again_from_the_beginning(cluster: LocalCluster, addresses: dict[int, str], values: list[bytes]) -> None:
    """The group is empty: its coordinator describes its start offsets (read from share coordinators on other
    brokers too) and sets them back to 0, and the partition leaders, most of them other brokers, hand every record
    out again."""
    with RawClient(cluster.bootstrap.split(",")[0]) as client:
        (found,) = client.request(FindCoordinatorRequest(key_type=i8(0), coordinator_keys=("workers",))).coordinators
    every = (DescribeShareGroupOffsetsRequestTopic(topic_name=TopicName(TOPIC), partitions=tuple(i32(p) for p in
                                                                                      range(PARTITIONS))),)
    with RawClient(addresses[found.node_id]) as client:
        (described,) = client.request(DescribeShareGroupOffsetsRequest(groups=(
            DescribeShareGroupOffsetsRequestGroup(group_id=GroupId("workers"), topics=every),))).groups
        assert [(p.error_code, p.start_offset >= 0) for t in described.topics for p in t.partitions] == [
            (0, True)] * PARTITIONS, described
        # The lag of every partition is known, also of those led by other brokers (their high watermark asked
        # of their leaders); -1 would mean it is not.
        assert all(p.lag >= 0 for t in described.topics for p in t.partitions), described
        reset = AlterShareGroupOffsetsRequest(group_id=GroupId("workers"), topics=(AlterShareGroupOffsetsRequestTopic(
            topic_name=TopicName(TOPIC), partitions=tuple(AlterShareGroupOffsetsRequestPartition(
                partition_index=i32(p), start_offset=i64(0)) for p in range(PARTITIONS))),))
        # The consumers' leaves may still be on their way.
        done = wait_until(lambda: (r := client.request(reset)).error_code == 0 and r, 30.0, "an empty group")
    assert all(p.error_code == 0 for t in done.responses for p in t.partitions), done
    again: list[bytes] = []
    consumer = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": "workers"})
    consumer.subscribe([TOPIC])
    try:
        def collect() -> bool:
            again.extend(value_of(m) for m in consumer.poll(0.5) if m.error() is None)
            return len(again) >= len(values)

        wait_until(collect, 90.0, lambda: f"got {len(again)} of {len(values)} records after the reset")
    finally:
        consumer.close()
    assert sorted(again) == sorted(values)
def group_deleted(cluster: LocalCluster, group_id: str) -> bool:
    """DeleteGroups through the admin client (to the group's coordinator); False while members are still there."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    try:
        admin.delete_consumer_groups([group_id], request_timeout=10)[group_id].result(30)
    except KafkaException as exc:
        if exc.args[0].name() in ("NON_EMPTY_GROUP", "COORDINATOR_NOT_AVAILABLE", "NOT_COORDINATOR"):
            return False
        raise
    return True


def leader_of(cluster: LocalCluster, topic: str, partition: int, alive: list[int]) -> int:
    node = cluster.node(alive[0])
    (found,) = metadata_at(node.kafka_address or "", [topic]).topics
    return int(next(p.leader_id for p in found.partitions if p.partition_index == partition))


def test_a_new_partition_leader_goes_on_from_the_durable_state(cluster: LocalCluster) -> None:
    """Records accepted through the old leader are never delivered again by the new one after a SIGKILL."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap})
    admin.create_topics([NewTopic("jobs", 1, 3, config={"min.insync.replicas": "2"})])["jobs"].result(30)
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "acks": "all"})
    values = [f"j{i}".encode() for i in range(20)]
    for value in values:
        producer.produce("jobs", value=value)
    assert producer.flush(30) == 0
    first = ShareConsumer({"bootstrap.servers": cluster.bootstrap, "group.id": "jobs-workers",
                           "share.acknowledgement.mode": "explicit", "max.poll.records": 10})
    first.subscribe(["jobs"])
    accepted: list[bytes] = []
    try:
        def take() -> bool:
            for message in first.poll(0.5):
                if message.error() is None:
                    accepted.append(value_of(message))
                    first.acknowledge(message, AcknowledgeType.ACCEPT)
            return bool(accepted)

        wait_until(take, 30.0, "the first consumer got nothing")
        first.commit_sync()
    finally:
        first.close()
    brokers = [n.node_id for n in cluster.brokers]
    old_leader = leader_of(cluster, "jobs", 0, brokers)
    cluster.node(old_leader).kill()
    alive = [b for b in brokers if b != old_leader]
    wait_until(lambda: leader_of(cluster, "jobs", 0, alive) in alive, 30.0, "no new leader for jobs-0")
    bootstrap = ",".join(cluster.node(b).kafka_address or "" for b in alive)
    second = ShareConsumer({"bootstrap.servers": bootstrap, "group.id": "jobs-workers"})
    second.subscribe(["jobs"])
    rest: list[bytes] = []
    try:
        def collect() -> bool:
            rest.extend(value_of(m) for m in second.poll(0.5) if m.error() is None)
            return len(accepted) + len(rest) >= len(values)

        wait_until(collect, 60.0, lambda: f"accepted {len(accepted)}, then got {len(rest)}")
        second.commit_sync()
    finally:
        second.close()
    assert sorted(accepted + rest) == sorted(values)  # nothing accepted before the failover came back


def test_members_carry_on_with_the_next_coordinator_after_a_sigkill(cluster: LocalCluster) -> None:
    """Share group members are written to `__consumer_offsets`, replicated before the heartbeat is answered: when
    the group's coordinator is killed, the broker that takes its partition over takes the members back, and a
    member heartbeating at its epoch carries on there instead of joining again."""
    from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
    from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest

    addresses = {n.node_id: n.kafka_address or "" for n in cluster.brokers}

    def coordinator(alive: list[int]) -> int | None:
        with RawClient(addresses[alive[0]]) as client:
            (found,) = client.request(FindCoordinatorRequest(key_type=i8(0),
                                                             coordinator_keys=("carrying",))).coordinators
        return found.node_id if found.error_code == 0 and found.node_id in alive else None

    def heartbeat(node: int, member_id: str, epoch: int) -> Any:
        request = ShareGroupHeartbeatRequest(group_id=GroupId("carrying"), member_id=member_id,
                                             member_epoch=i32(epoch), rack_id=None,
                                             subscribed_topic_names=(TopicName(TOPIC),) if epoch == 0 else None)
        with RawClient(addresses[node]) as client:
            return client.request(request)

    brokers = sorted(addresses)
    first = wait_until(lambda: coordinator(brokers), 30.0, "no coordinator for the group")
    joined = wait_until(lambda: (r := heartbeat(first, "m1", 0)).error_code == 0 and r, 30.0, "never joined")
    settled = heartbeat(first, "m1", joined.member_epoch)
    assert settled.error_code == 0
    cluster.node(first).kill()
    alive = [b for b in brokers if b != first]
    second = wait_until(lambda: coordinator(alive), 30.0, "no new coordinator for the group")
    carried = wait_until(lambda: (r := heartbeat(second, "m1", settled.member_epoch)).error_code
                         not in (14, 15, 16) and r, 30.0, "the new coordinator never loaded the group")
    assert carried.error_code == 0, carried  # not UNKNOWN_MEMBER_ID (25)
    assert carried.member_epoch >= settled.member_epoch and carried.assignment is not None
    with RawClient(addresses[second]) as client:
        (described,) = client.request(ShareGroupDescribeRequest(group_ids=(GroupId("carrying"),),
                                                                include_authorized_operations=False)).groups
    assert [m.member_id for m in described.members] == ["m1"]
