"""Share groups (KIP-932) with confluent-kafka's ShareConsumer against a real broker process.

One broker for the module, started with `share.auto.offset.reset=earliest` (so records produced before the
consumers join are theirs), a short `group.share.record.lock.duration.ms` (so a stopped consumer's records come
back quickly), a short `group.share.session.timeout.ms` (so a silent member is removed within the test) and
`group.share.delivery.count.limit=3`. Every test uses its own topic and group.
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime as dt
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]
from kio.schema.consumer_group_heartbeat.v0.request import ConsumerGroupHeartbeatRequest
from kio.schema.delete_groups.v2.request import DeleteGroupsRequest
from kio.schema.describe_share_group_offsets.v1.request import (
    DescribeShareGroupOffsetsRequest,
    DescribeShareGroupOffsetsRequestGroup,
)
from kio.schema.errors import ErrorCode
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.list_groups.v5.request import ListGroupsRequest
from kio.schema.read_share_group_state_summary.v1.request import PartitionData as SummaryPartition
from kio.schema.read_share_group_state_summary.v1.request import (
    ReadShareGroupStateSummaryRequest,
    ReadStateSummaryData,
)
from kio.schema.share_fetch.v1.request import AcknowledgementBatch, FetchPartition, FetchTopic, ShareFetchRequest
from kio.schema.share_group_describe.v1.request import ShareGroupDescribeRequest
from kio.schema.share_group_heartbeat.v1.request import ShareGroupHeartbeatRequest
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta, i64

from tests.support.broker_process import BrokerProcess, running_broker
from tests.support.cluster import metadata_at
from tests.support.messages import value_of
from tests.support.polling import wait_until
from tests.support.raw_client import RawClient

LOCK_MS = 2000
DELIVERY_LIMIT = 3
SESSION_TIMEOUT_MS = 6000


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("share-broker"), {
        "share.auto.offset.reset": "earliest",
        "group.share.record.lock.duration.ms": str(LOCK_MS),
        "group.share.delivery.count.limit": str(DELIVERY_LIMIT),
        "group.share.heartbeat.interval.ms": "500",
        "group.share.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    })
    proc.start()
    yield proc
    try:
        proc.stop()
    finally:
        proc.cleanup()


@pytest.fixture(autouse=True)
def no_internal_error(broker: BrokerProcess) -> Iterator[None]:
    """A handler failing closes the client's connection; librdkafka reconnects and carries on, so the tests would
    pass anyway: the broker's log must show none."""
    yield
    assert "internal error" not in broker.log_path.read_text(), broker.log_tail()


def new_topic(broker: BrokerProcess, values: list[bytes], partitions: int = 1) -> str:
    name = f"share-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, partitions, 1)])[name].result()
    produce(broker, name, values)
    return name


def produce(broker: BrokerProcess, topic: str, values: list[bytes]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for value in values:
        producer.produce(topic, value=value)
    assert producer.flush(10) == 0


def share_consumer(broker: BrokerProcess, group: str, topic: str, **config: Any) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **config})
    consumer.subscribe([topic])
    return consumer


def poll_until(consumer: ShareConsumer, done: Any, timeout_s: float = 30.0,
               on_message: Any = None) -> list[Any]:
    """Poll, collecting messages, until `done(collected)`; fails after `timeout_s`."""
    collected: list[Any] = []

    def step() -> bool:
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            collected.append(message)
            if on_message is not None:
                on_message(message)
        return bool(done(collected))

    wait_until(step, timeout_s, "the share consumer never got what it waited for")
    return collected


def test_five_consumers_share_one_partition_and_each_record_goes_to_exactly_one(broker: BrokerProcess) -> None:
    values = [f"r{i}".encode() for i in range(300)]
    topic = new_topic(broker, values)
    received: dict[int, list[bytes]] = {i: [] for i in range(5)}
    lock = threading.Lock()
    stop = threading.Event()

    def consume(index: int) -> None:
        with share_consumer(broker, "five", topic, **{"max.poll.records": 5}) as consumer:
            while not stop.is_set():
                for message in consumer.poll(0.2):
                    if message.error() is None:
                        with lock:
                            received[index].append(value_of(message))
            consumer.poll(0.2)  # implicit acknowledgement of the last poll's records

    threads = [threading.Thread(target=consume, args=(i,)) for i in range(5)]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: sum(len(v) for v in received.values()) >= len(values), 60.0,
                   "the five consumers never got every record")
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    everything = [v for got in received.values() for v in got]
    assert sorted(everything) == sorted(values)  # each record exactly once, none lost
    assert sum(1 for got in received.values() if got) >= 2, "one consumer took every record"


def test_released_records_come_back_with_a_higher_delivery_count_and_rejected_ones_never(
        broker: BrokerProcess) -> None:
    topic = new_topic(broker, [b"release-me", b"reject-me", b"accept-me"])
    with share_consumer(broker, "explicit", topic, **{"share.acknowledgement.mode": "explicit"}) as consumer:
        first = poll_until(consumer, lambda got: len(got) >= 3)
        by_value = {m.value(): m for m in first}
        assert {m.delivery_count() for m in first} == {1}
        consumer.acknowledge(by_value[b"release-me"], AcknowledgeType.RELEASE)
        consumer.acknowledge(by_value[b"reject-me"], AcknowledgeType.REJECT)
        consumer.acknowledge(by_value[b"accept-me"], AcknowledgeType.ACCEPT)
        consumer.commit_sync()
        produce(broker, topic, [b"sentinel"])
        seen: list[tuple[bytes, int]] = []

        def accept(message: Any) -> None:
            seen.append((message.value(), message.delivery_count()))
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)

        poll_until(consumer, lambda got: {b"release-me", b"sentinel"} <= {m.value() for m in got},
                   on_message=accept)
        consumer.commit_sync()
    assert (b"release-me", 2) in seen
    assert all(value not in (b"reject-me", b"accept-me") for value, _ in seen)


def test_records_of_a_closed_consumer_are_redelivered(broker: BrokerProcess) -> None:
    values = [f"c{i}".encode() for i in range(5)]
    topic = new_topic(broker, values)
    explicit = {"share.acknowledgement.mode": "explicit"}
    with share_consumer(broker, "closing", topic, **explicit) as first:
        held = poll_until(first, lambda got: len(got) >= len(values))
    assert sorted(m.value() for m in held) == sorted(values)
    with share_consumer(broker, "closing", topic, **explicit) as second:
        again = poll_until(second, lambda got: len(got) >= len(values),
                           on_message=lambda m: second.acknowledge(m, AcknowledgeType.ACCEPT))
        second.commit_sync()
    assert sorted(m.value() for m in again) == sorted(values)
    assert {m.delivery_count() for m in again} == {2}


HOLDING_CONSUMER = """
import os, sys, time
from confluent_kafka import ShareConsumer
consumer = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                          "share.acknowledgement.mode": "explicit"})
consumer.subscribe([sys.argv[3]])
got = []
while len(got) < int(sys.argv[4]):
    got += [m.offset() for m in consumer.poll(0.5) if m.error() is None]
print(" ".join(map(str, sorted(got))), flush=True)
if sys.argv[5] == "exit":
    os._exit(0)  # killed: no acknowledgement, no session close, no leave; the connection drops
time.sleep(600)  # stopped by the test (SIGSTOP): the connection stays open, nothing is acknowledged
"""


def holding_consumer(broker: BrokerProcess, tmp_path: Path, group: str, topic: str, count: int,
                     then: str) -> tuple[subprocess.Popen[str], list[int]]:
    """A consumer in its own process that takes `count` records without acknowledging them; the offsets."""
    script = tmp_path / "holding.py"
    script.write_text(HOLDING_CONSUMER)
    proc = subprocess.Popen([sys.executable, str(script), broker.bootstrap, group, topic, str(count), then],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    return proc, [int(o) for o in line.split()]


def redelivered(broker: BrokerProcess, group: str, topic: str, count: int) -> list[Any]:
    with share_consumer(broker, group, topic) as survivor:
        again = poll_until(survivor, lambda got: len(got) >= count)
        survivor.commit_sync()
    return again


def test_records_of_a_killed_consumer_are_redelivered(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = new_topic(broker, [f"k{i}".encode() for i in range(4)])
    proc, held = holding_consumer(broker, tmp_path, "killed", topic, 4, "exit")
    assert proc.wait(30) == 0 and held == [0, 1, 2, 3]
    again = redelivered(broker, "killed", topic, 4)
    assert sorted(m.offset() for m in again) == held
    assert {m.delivery_count() for m in again} == {2}


def test_records_of_a_stopped_consumer_are_redelivered_when_their_locks_expire(broker: BrokerProcess,
                                                                              tmp_path: Path) -> None:
    topic = new_topic(broker, [f"s{i}".encode() for i in range(4)])
    proc, held = holding_consumer(broker, tmp_path, "stopped", topic, 4, "stop")
    try:
        assert held == [0, 1, 2, 3]
        proc.send_signal(signal.SIGSTOP)  # connected, member of the group, holding its records: only locks expire
        again = redelivered(broker, "stopped", topic, 4)
    finally:
        proc.kill()
        proc.wait(30)
    assert sorted(m.offset() for m in again) == held
    assert {m.delivery_count() for m in again} == {2}


def test_a_record_released_up_to_the_delivery_limit_is_archived(broker: BrokerProcess) -> None:
    topic = new_topic(broker, [b"poison"])
    counts: list[int] = []
    with share_consumer(broker, "limit", topic, **{"share.acknowledgement.mode": "explicit"}) as consumer:
        for _ in range(DELIVERY_LIMIT):
            (message,) = poll_until(consumer, lambda got: len(got) >= 1)
            counts.append(message.delivery_count())
            consumer.acknowledge(message, AcknowledgeType.RELEASE)
            consumer.commit_sync()
        produce(broker, topic, [b"after"])
        rest = poll_until(consumer, lambda got: any(m.value() == b"after" for m in got),
                          on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.ACCEPT))
        consumer.commit_sync()
    assert counts == list(range(1, DELIVERY_LIMIT + 1))
    assert [m.value() for m in rest] == [b"after"]  # the poison record was archived, not delivered again


def test_a_share_group_and_a_classic_group_each_get_every_record(broker: BrokerProcess) -> None:
    values = [f"b{i}".encode() for i in range(50)]
    topic = new_topic(broker, values, partitions=2)
    with share_consumer(broker, "both-share", topic) as shared:
        got = poll_until(shared, lambda got: len(got) >= len(values))
        shared.commit_sync()
    classic = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "both-classic",
                        "auto.offset.reset": "earliest"})
    try:
        classic.subscribe([topic])
        classic_got: list[bytes] = []

        def step() -> bool:
            message = classic.poll(0.5)
            if message is not None and message.error() is None:
                classic_got.append(value_of(message))
            return len(classic_got) >= len(values)

        wait_until(step, 30.0, "the classic consumer never got every record")
    finally:
        classic.close()
    assert sorted(m.value() for m in got) == sorted(values)
    assert sorted(classic_got) == sorted(values)
    with RawClient(broker.bootstrap) as client:  # the classic group's id is not a share group's
        refused = client.request(ShareGroupHeartbeatRequest(group_id=GroupId("both-classic"), member_id="m1",
                                                            member_epoch=i32(0),
                                                            subscribed_topic_names=(TopicName(topic),)))
    assert refused.error_code == ErrorCode.group_id_not_found
    assert join_group_error(broker, "both-share") == ErrorCode.inconsistent_group_protocol
    with RawClient(broker.bootstrap) as client:  # nor the share group's id a consumer group's
        heartbeat = client.request(ConsumerGroupHeartbeatRequest(
            group_id=GroupId("both-share"), member_id="", member_epoch=i32(0), instance_id=None, rack_id=None,
            rebalance_timeout=i32Timedelta.parse(dt.timedelta(seconds=10)),
            subscribed_topic_names=(TopicName(topic),), server_assignor=None, topic_partitions=()))
    assert heartbeat.error_code == ErrorCode.group_id_not_found
    assert heartbeat.error_message == "Group both-share is not a consumer group."


def describe(broker: BrokerProcess, group_id: str) -> Any:
    with RawClient(broker.bootstrap) as client:
        (group,) = client.request(ShareGroupDescribeRequest(group_ids=(GroupId(group_id),),
                                                            include_authorized_operations=False)).groups
    return group


def test_share_groups_are_listed_and_described(broker: BrokerProcess) -> None:
    topic = new_topic(broker, [b"x"])
    with share_consumer(broker, "described", topic) as first, share_consumer(broker, "described", topic) as second:
        poll_until(first, lambda got: len(got) >= 1)
        wait_until(lambda: second.poll(0.2) is not None and len(describe(broker, "described").members) == 2, 30.0,
                   "the second member never showed up")
        with RawClient(broker.bootstrap) as client:
            listed = client.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
        group = describe(broker, "described")
    assert ("described", "share", "Stable") in {(g.group_id, g.group_type, g.group_state) for g in listed.groups}
    assert group.group_state == "Stable" and len(group.members) == 2
    for member in group.members:  # both members are assigned the one partition
        assert member.subscribed_topic_names == (topic,) and 0 < member.member_epoch <= group.group_epoch
        assert [(t.topic_name, t.partitions) for t in member.assignment.topic_partitions] == [(topic, (0,))]
    wait_until(lambda: describe(broker, "described").group_state == "Empty", 30.0, "the members never left")
    with RawClient(broker.bootstrap) as client:
        (deleted,) = client.request(DeleteGroupsRequest(groups_names=(GroupId("described"),))).results
    assert deleted.error_code == ErrorCode.none
    assert describe(broker, "described").error_code == ErrorCode.group_id_not_found


def test_a_share_group_with_members_is_not_deleted(broker: BrokerProcess) -> None:
    topic = new_topic(broker, [b"z"])
    with share_consumer(broker, "kept", topic) as consumer:
        poll_until(consumer, lambda got: len(got) >= 1)
        with RawClient(broker.bootstrap) as client:
            (refused,) = client.request(DeleteGroupsRequest(groups_names=(GroupId("kept"),))).results
    assert refused.error_code == ErrorCode.non_empty_group


def test_a_silent_member_is_removed_after_the_session_timeout(broker: BrokerProcess, tmp_path: Path) -> None:
    topic = new_topic(broker, [b"y"])
    proc, held = holding_consumer(broker, tmp_path, "silent", topic, 1, "stop")
    try:
        assert held == [0]
        assert len(describe(broker, "silent").members) == 1
        proc.send_signal(signal.SIGSTOP)  # no more heartbeats, connection open
        wait_until(lambda: not describe(broker, "silent").members, 30.0, "the silent member was never removed")
    finally:
        proc.kill()
        proc.wait(30)


def test_share_fetch_over_the_wire_waits_for_min_bytes_then_answers_what_there_is(broker: BrokerProcess) -> None:
    topic = new_topic(broker, [b"small"])
    (described,) = metadata_at(broker.bootstrap, [topic]).topics
    partition = FetchPartition(partition_index=i32(0), acknowledgement_batches=())
    waiting = ShareFetchRequest(
        group_id=GroupId("raw"), member_id="m1", share_session_epoch=i32(0),
        max_wait=i32Timedelta.parse(dt.timedelta(milliseconds=300)),
        min_bytes=i32(1 << 20), max_records=i32(10), batch_size=i32(10),
        topics=(FetchTopic(topic_id=described.topic_id, partitions=(partition,)),), forgotten_topics_data=())
    accept = FetchPartition(partition_index=i32(0), acknowledgement_batches=(
        AcknowledgementBatch(first_offset=i64(0), last_offset=i64(0), acknowledge_types=(i8(1),)),))
    with RawClient(broker.bootstrap) as client:
        first = client.request(waiting)
        again = client.request(dataclasses.replace(
            waiting, share_session_epoch=i32(1), min_bytes=i32(1), max_wait=i32Timedelta.parse(dt.timedelta(0)),
            topics=(FetchTopic(topic_id=described.topic_id, partitions=(accept,)),)))
        stale = client.request(dataclasses.replace(waiting, share_session_epoch=i32(1), topics=()))
    ((got,),) = [t.partitions for t in first.responses]
    assert got.error_code == ErrorCode.none and got.records
    assert [(r.first_offset, r.last_offset, r.delivery_count) for r in got.acquired_records] == [(0, 0, 1)]
    assert first.acquisition_lock_timeout == dt.timedelta(milliseconds=LOCK_MS)
    ((acked,),) = [t.partitions for t in again.responses]
    assert acked.acknowledge_error_code == ErrorCode.none and acked.acquired_records == ()
    assert stale.error_code == ErrorCode.invalid_share_session_epoch


@contextlib.contextmanager
def own_broker(tmp_path: Path, **configs: str) -> Iterator[BrokerProcess]:
    """A broker of the test's own, for tests that kill and restart it."""
    with running_broker(tmp_path, {"share.auto.offset.reset": "earliest", **configs}) as proc:
        yield proc


def test_acknowledged_state_survives_a_broker_crash(tmp_path: Path) -> None:
    """The share-partition's state is in __share_group_state: after a SIGKILL and a restart, what was accepted or
    rejected is never delivered again, and what was released or still held comes back with its deliveries
    counted."""
    with own_broker(tmp_path, **{"group.share.record.lock.duration.ms": str(LOCK_MS)}) as proc:
        topic = new_topic(proc, [f"d{i}".encode() for i in range(6)])
        explicit = {"share.acknowledgement.mode": "explicit"}
        with share_consumer(proc, "durable", topic, **explicit) as consumer:
            first = {m.value(): m for m in poll_until(consumer, lambda got: len(got) >= 6)}
            for value in (b"d0", b"d1", b"d2"):
                consumer.acknowledge(first[value], AcknowledgeType.ACCEPT)
            consumer.acknowledge(first[b"d3"], AcknowledgeType.RELEASE)
            consumer.acknowledge(first[b"d4"], AcknowledgeType.REJECT)
            consumer.commit_sync()  # d5 stays acquired
            proc.kill()
        proc.start()
        produce(proc, topic, [b"sentinel"])
        with share_consumer(proc, "durable", topic, **explicit) as consumer:
            seen = poll_until(consumer, lambda got: b"sentinel" in {m.value() for m in got},
                              on_message=lambda m: consumer.acknowledge(m, AcknowledgeType.ACCEPT))
            consumer.commit_sync()
        assert sorted((m.value(), m.delivery_count()) for m in seen) == [
            (b"d3", 2), (b"d5", 2), (b"sentinel", 1)]


def join_group_error(broker: BrokerProcess, group_id: str) -> ErrorCode:
    """A classic consumer's first JoinGroup (v9) for the group id."""
    with RawClient(broker.bootstrap) as client:
        joined = client.request(JoinGroupRequest(
            group_id=GroupId(group_id), session_timeout=i32Timedelta.parse(dt.timedelta(seconds=10)),
            rebalance_timeout=i32Timedelta.parse(dt.timedelta(seconds=10)), member_id="", group_instance_id=None,
            protocol_type="consumer", protocols=(JoinGroupRequestProtocol(name="range", metadata=b""),),
            reason=None))
    error: ErrorCode = joined.error_code
    return error


def listed_share_groups(broker: BrokerProcess) -> set[tuple[str, str]]:
    with RawClient(broker.bootstrap) as client:
        listed = client.request(ListGroupsRequest(states_filter=(), types_filter=("share",)))
    return {(g.group_id, g.group_state) for g in listed.groups}


def test_a_share_group_outlives_a_restart_of_its_coordinator(tmp_path: Path) -> None:
    """The group's existence and epoch are in __consumer_offsets: after a crash it is listed and described (empty,
    at its epoch), its id is still not a classic group's, members join it again, and once deleted it stays gone."""
    with own_broker(tmp_path) as proc:
        topic, unread = new_topic(proc, [b"before"]), new_topic(proc, [b"never fetched"])
        with share_consumer(proc, "lasting", topic) as consumer:
            poll_until(consumer, lambda got: len(got) >= 1)
        with RawClient(proc.bootstrap) as client:  # a member subscribed to a topic it never fetches from, then gone
            for epoch, topics in ((0, (TopicName(unread),)), (-1, None)):
                joined = client.request(ShareGroupHeartbeatRequest(
                    group_id=GroupId("lasting"), member_id="raw-member", member_epoch=i32(epoch),
                    subscribed_topic_names=topics))
                assert joined.error_code == ErrorCode.none
        epoch = describe(proc, "lasting").group_epoch
        assert epoch > 0
        proc.kill()
        proc.start()
        assert ("lasting", "Empty") in listed_share_groups(proc)
        again = describe(proc, "lasting")
        assert (again.error_code, again.group_state, again.group_epoch) == (ErrorCode.none, "Empty", epoch)
        assert join_group_error(proc, "lasting") == ErrorCode.inconsistent_group_protocol
        with RawClient(proc.bootstrap) as client:  # its topics are known without naming them
            (offsets,) = client.request(DescribeShareGroupOffsetsRequest(groups=(
                DescribeShareGroupOffsetsRequestGroup(group_id=GroupId("lasting"), topics=None),))).groups
        assert {t.topic_name for t in offsets.topics} == {topic, unread}
        produce(proc, topic, [b"after"])
        with share_consumer(proc, "lasting", topic) as consumer:
            poll_until(consumer, lambda got: b"after" in {m.value() for m in got})
            assert describe(proc, "lasting").group_epoch > epoch  # epochs go on from the written one
        with RawClient(proc.bootstrap) as client:
            (deleted,) = client.request(DeleteGroupsRequest(groups_names=(GroupId("lasting"),))).results
        assert deleted.error_code == ErrorCode.none
        proc.stop()
        proc.start()
        assert "lasting" not in {group for group, _ in listed_share_groups(proc)}
        assert describe(proc, "lasting").error_code == ErrorCode.group_id_not_found
        assert join_group_error(proc, "lasting") == ErrorCode.member_id_required  # free for a classic group now



def share_heartbeat(broker: BrokerProcess, member_id: str, epoch: int, topics: tuple[str, ...] | None = None,
                    group_id: str = "carrying") -> Any:
    """One ShareGroupHeartbeat; retried while the coordinator is (re)loading."""
    def send() -> Any:
        with RawClient(broker.bootstrap) as client:
            return client.request(ShareGroupHeartbeatRequest(
                group_id=GroupId(group_id), member_id=member_id, member_epoch=i32(epoch), rack_id=None,
                subscribed_topic_names=None if topics is None else tuple(TopicName(t) for t in topics)))

    loading = (ErrorCode.coordinator_not_available, ErrorCode.coordinator_load_in_progress,
               ErrorCode.not_coordinator)
    return wait_until(lambda: (r := send()).error_code not in loading and r, 30.0, "the coordinator never loaded")


def test_members_carry_on_after_a_restart_of_their_coordinator(tmp_path: Path) -> None:
    """Members are written to __consumer_offsets (record type 10), as Kafka writes them: after a SIGKILL and a
    restart, a member heartbeating at its epoch carries on (it does not get UNKNOWN_MEMBER_ID and join again) and
    is described as before; one that left stays gone; one that never comes back is removed after its session
    timeout, and that is written too, with no heartbeat to carry it, so it stays removed across the next restart.
    A librdkafka ShareConsumer reads on across both restarts."""
    configs = {"group.share.session.timeout.ms": str(SESSION_TIMEOUT_MS), "group.share.heartbeat.interval.ms": "500"}
    with own_broker(tmp_path, **configs) as proc:
        topic = new_topic(proc, [b"before"])
        epochs = {m: share_heartbeat(proc, m, 0, (topic,)).member_epoch for m in ("stays", "leaves", "lost")}
        assert share_heartbeat(proc, "leaves", -1).error_code == ErrorCode.none
        for member in ("stays", "lost"):  # both move to the group's epoch
            answer = share_heartbeat(proc, member, epochs[member])
            assert answer.error_code == ErrorCode.none
            epochs[member] = answer.member_epoch
        with share_consumer(proc, "carrying", topic) as consumer:
            poll_until(consumer, lambda got: b"before" in {m.value() for m in got})
            before = describe(proc, "carrying")
            members = {m.member_id: (m.member_epoch, m.client_id, m.subscribed_topic_names) for m in before.members}
            assert len(members) == 3 and {"stays", "lost"} < set(members)  # and the ShareConsumer
            proc.kill()
            proc.start()
            after = describe(proc, "carrying")
            assert after.group_epoch >= before.group_epoch  # the consumer's heartbeats may have moved it on
            assert {m.member_id: (m.member_epoch, m.client_id, m.subscribed_topic_names)
                    for m in after.members if m.member_id in ("stays", "lost")} == {
                        m: members[m] for m in ("stays", "lost")}
            carried = share_heartbeat(proc, "stays", epochs["stays"])
            assert carried.error_code == ErrorCode.none and carried.member_epoch >= epochs["stays"]
            assert carried.assignment is not None  # sent again: the group re-learnt its topics
            assert share_heartbeat(proc, "leaves", 1).error_code == ErrorCode.unknown_member_id
            produce(proc, topic, [b"after"])
            poll_until(consumer, lambda got: b"after" in {m.value() for m in got})
        # Nobody heartbeats now: the sweep removes "stays" and "lost" and writes it.
        wait_until(lambda: not describe(proc, "carrying").members, 30.0, "the silent members were never removed")
        time.sleep(3 * 1.0)  # the sweep runs every second: the tombstones are written by now
        proc.kill()
        proc.start()
        share_heartbeat(proc, "probe", -1)  # waits for the coordinator to load
        final = describe(proc, "carrying")
        assert (final.error_code, final.group_state, final.members) == (ErrorCode.none, "Empty", ())


def state_summary(broker: BrokerProcess, group_id: str, topic: str) -> Any:
    """ReadShareGroupStateSummary (v1) of the topic's partition 0, as a broker describing the group asks it."""
    (described,) = metadata_at(broker.bootstrap, [topic]).topics
    request = ReadShareGroupStateSummaryRequest(group_id=group_id, topics=(ReadStateSummaryData(
        topic_id=described.topic_id, partitions=(SummaryPartition(partition=i32(0), leader_epoch=i32(-1)),)),))
    with RawClient(broker.bootstrap) as client:
        ((summary,),) = [r.partitions for r in client.request(request).results]
    return summary


def test_a_deleted_share_group_starts_afresh(broker: BrokerProcess) -> None:
    """DeleteGroups removes the share group's durable state (DeleteShareGroupState): the share coordinator has
    none left, and a group created again under the same id gets every record again."""
    values = [f"again{i}".encode() for i in range(4)]
    topic = new_topic(broker, values)
    with share_consumer(broker, "reborn", topic) as consumer:
        poll_until(consumer, lambda got: len(got) >= 4)
        consumer.poll(0.5)  # the implicit acknowledgement of the records
        wait_until(lambda: state_summary(broker, "reborn", topic).start_offset == 4, 30.0,
                   "the acknowledgements never reached the share coordinator")
    summary = state_summary(broker, "reborn", topic)
    assert (summary.error_code, summary.state_epoch >= 0, summary.delivery_complete_count) == (ErrorCode.none, True, 0)
    wait_until(lambda: describe(broker, "reborn").group_state == "Empty", 30.0, "the member never left")
    with RawClient(broker.bootstrap) as client:
        (deleted,) = client.request(DeleteGroupsRequest(groups_names=(GroupId("reborn"),))).results
    assert deleted.error_code == ErrorCode.none
    gone = state_summary(broker, "reborn", topic)
    assert (gone.error_code, gone.state_epoch, gone.start_offset) == (ErrorCode.none, -1, -1)
    with share_consumer(broker, "reborn", topic) as consumer:
        again = poll_until(consumer, lambda got: len(got) >= 4)
    assert sorted(m.value() for m in again) == values
    assert {m.delivery_count() for m in again} == {1}


def share_cli(broker: BrokerProcess, *args: str) -> subprocess.CompletedProcess[str]:
    """`moldau share consume ARGS` against the broker, run to its end."""
    return subprocess.run([sys.executable, "-m", "moldau", "share", "consume", "-b", broker.bootstrap, *args],
                          capture_output=True, text=True, timeout=60, check=False)


def test_moldau_share_consume_prints_and_acknowledges(broker: BrokerProcess) -> None:
    """The console share consumer accepts what it prints (by default), or rejects it, and leaves what it did
    not print for the group: two runs of it consume the topic once, and the share-partition's SPSO is past it."""
    topic = new_topic(broker, [f"c{i}".encode() for i in range(5)])
    first = share_cli(broker, "--group", "cli", "--topic", topic, "--max-messages", "3", "--format", "%o %v")
    assert first.returncode == 0, first.stderr
    assert first.stdout.splitlines() == ["0 c0", "1 c1", "2 c2"]
    assert "consumed 3 records" in first.stderr
    second = share_cli(broker, "--group", "cli", "--topic", topic, "--ack", "reject", "--max-messages", "2")
    assert second.returncode == 0, second.stderr
    assert second.stdout.splitlines() == ["c3", "c4"]
    wait_until(lambda: state_summary(broker, "cli", topic).start_offset == 5, 30.0,
               "the acknowledgements of the console share consumer never reached the share coordinator")


def test_share_sessions_beyond_the_brokers_limit_are_refused_until_a_connection_ends(tmp_path: Path) -> None:
    proc = BrokerProcess(tmp_path, {"group.share.max.size": "2", "group.share.max.share.sessions": "2"})
    proc.start()
    try:
        topic = new_topic(proc, [b"r"])
        (described,) = metadata_at(proc.bootstrap, [topic]).topics
        open_session = ShareFetchRequest(
            group_id=GroupId("limited"), member_id="", share_session_epoch=i32(0),
            max_wait=i32Timedelta.parse(dt.timedelta(0)), min_bytes=i32(1), max_records=i32(1), batch_size=i32(1),
            topics=(FetchTopic(topic_id=described.topic_id, partitions=(
                FetchPartition(partition_index=i32(0), acknowledgement_batches=()),)),), forgotten_topics_data=())
        with RawClient(proc.bootstrap) as client:
            opened = [client.request(dataclasses.replace(open_session, member_id=m)) for m in ("m1", "m2", "m3")]
            again = client.request(dataclasses.replace(open_session, member_id="m1"))  # its own, re-opened
        assert [r.error_code for r in opened] == [ErrorCode.none, ErrorCode.none, ErrorCode.share_session_limit_reached]
        assert "group.share.max.share.sessions" in (opened[2].error_message or "")
        assert again.error_code == ErrorCode.none

        def open_m3() -> bool:
            with RawClient(proc.bootstrap) as client:
                return bool(client.request(dataclasses.replace(open_session, member_id="m3")).error_code
                            == ErrorCode.none)

        # The first connection's sessions end as the broker sees it close.
        wait_until(open_m3, 10, "a session to open once the first connection ended")
    finally:
        proc.stop()
