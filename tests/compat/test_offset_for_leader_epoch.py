"""OffsetForLeaderEpoch against a real `moldau server` process. The clients use it internally (position
validation after a leader change) without exposing it, so the requests are sent with the raw test client;
a confluent-kafka consumer assigned a position with a leader epoch checks the API is usable as clients do."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from kio.schema.list_offsets.v4 import request as list_offsets_v4
from kio.schema.offset_for_leader_epoch.v2 import request as v2
from kio.schema.offset_for_leader_epoch.v3 import request as v3
from kio.schema.offset_for_leader_epoch.v4 import request as v4
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32, i64

from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_produce, create_topic
from tests.support.messages import value_of
from tests.support.raw_client import RawClient


def _request(module: Any, topic: str, partitions: list[tuple[int, int, int]], replica_id: int | None = None) -> Any:
    """(partition, current leader epoch, leader epoch) per partition."""
    parts = tuple(module.OffsetForLeaderPartition(partition=p, current_leader_epoch=current, leader_epoch=epoch)
                  for p, current, epoch in partitions)
    topics = (module.OffsetForLeaderTopic(topic=topic, partitions=parts),)
    if replica_id is None:
        return module.OffsetForLeaderEpochRequest(topics=topics)
    return module.OffsetForLeaderEpochRequest(replica_id=replica_id, topics=topics)


def _answers(response: Any) -> list[tuple[int, ErrorCode, int, int]]:
    return [(p.partition, p.error_code, p.leader_epoch, p.end_offset)
            for t in response.topics for p in t.partitions]


def _leader_epoch(raw: RawClient, topic: str) -> int:
    """The partition's current leader epoch, as ListOffsets v4+ reports it."""
    request = list_offsets_v4.ListOffsetsRequest(
        replica_id=BrokerId(-1), isolation_level=i8(0),
        topics=(list_offsets_v4.ListOffsetsTopic(name=TopicName(topic), partitions=(
            list_offsets_v4.ListOffsetsPartition(partition_index=i32(0), current_leader_epoch=i32(-1),
                                                 timestamp=i64(-1)),)),))
    epoch: int = raw.request(request).topics[0].partitions[0].leader_epoch
    return epoch


@pytest.mark.parametrize("module", [v2, v3, v4], ids=["v2", "v3", "v4"])
def test_end_offset_of_the_current_and_unknown_epochs(shared_broker: BrokerProcess, module: Any) -> None:
    topic = f"ofle-{uuid.uuid4().hex[:8]}"
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    ck_produce(shared_broker.bootstrap, topic, [{"value": b"x%d" % i, "partition": 0} for i in range(5)])
    with RawClient(shared_broker.bootstrap) as raw:
        epoch = _leader_epoch(raw, topic)
        assert epoch >= 0
        response = raw.request(_request(module, topic, [
            (0, epoch, epoch),  # the current epoch ends at the log end offset
            (1, -1, epoch),  # an empty partition
            (0, -1, epoch + 1),  # newer than any epoch in the log
            (0, -1, -1),
        ]))
        answers = _answers(response)
        assert answers[0] == (0, ErrorCode.none, epoch, 5)
        # A leader records where its epoch starts when it takes over (as Kafka does), before any append.
        assert answers[1] in ((1, ErrorCode.none, epoch, 0), (1, ErrorCode.none, -1, -1))
        assert answers[2:] == [(0, ErrorCode.none, -1, -1), (0, ErrorCode.none, -1, -1)]


def test_fencing_and_unknown_partitions(shared_broker: BrokerProcess) -> None:
    topic = f"ofle-{uuid.uuid4().hex[:8]}"
    create_topic(shared_broker.bootstrap, topic)
    ck_produce(shared_broker.bootstrap, topic, [{"value": b"x", "partition": 0}])
    with RawClient(shared_broker.bootstrap) as raw:
        epoch = _leader_epoch(raw, topic)
        answers = _answers(raw.request(_request(v4, topic, [(0, epoch + 1, epoch), (7, -1, epoch)])))
        assert answers == [(0, ErrorCode.unknown_leader_epoch, -1, -1),
                           (7, ErrorCode.unknown_topic_or_partition, -1, -1)]
        if epoch > 0:
            answers = _answers(raw.request(_request(v4, topic, [(0, epoch - 1, epoch)])))
            assert answers == [(0, ErrorCode.fenced_leader_epoch, -1, -1)]
        missing = _answers(raw.request(_request(v4, topic + "-missing", [(0, -1, 0)])))
        assert missing == [(0, ErrorCode.unknown_topic_or_partition, -1, -1)]


def test_a_follower_request_is_answered_alike(shared_broker: BrokerProcess) -> None:
    topic = f"ofle-{uuid.uuid4().hex[:8]}"
    create_topic(shared_broker.bootstrap, topic)
    ck_produce(shared_broker.bootstrap, topic, [{"value": b"x", "partition": 0}] * 3)
    with RawClient(shared_broker.bootstrap) as raw:
        epoch = _leader_epoch(raw, topic)
        answers = _answers(raw.request(_request(v4, topic, [(0, epoch, epoch)], replica_id=2)))
        assert answers == [(0, ErrorCode.none, epoch, 3)]


def test_confluent_kafka_consumer_validates_a_position_with_a_leader_epoch(shared_broker: BrokerProcess) -> None:
    topic = f"ofle-{uuid.uuid4().hex[:8]}"
    create_topic(shared_broker.bootstrap, topic)
    ck_produce(shared_broker.bootstrap, topic, [{"value": b"v%d" % i, "partition": 0} for i in range(6)])
    with RawClient(shared_broker.bootstrap) as raw:
        epoch = _leader_epoch(raw, topic)
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": f"g-{topic}",
                         "enable.auto.commit": False, "auto.offset.reset": "error"})
    try:
        consumer.assign([TopicPartition(topic, 0, 2, leader_epoch=epoch)])
        values: list[bytes] = []
        for _ in range(60):
            msg = consumer.poll(0.5)
            if msg is None:
                if len(values) == 4:
                    break
                continue
            assert msg.error() is None, msg.error()
            values.append(value_of(msg))
            assert msg.leader_epoch() == epoch
        assert values == [b"v2", b"v3", b"v4", b"v5"]
    finally:
        consumer.close()
