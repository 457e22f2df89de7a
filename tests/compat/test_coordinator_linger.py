"""group.coordinator.append.linger.ms and share.coordinator.append.linger.ms on a real broker: a client's offset
commit, and a share consumer's acknowledgement, are answered only once the linger has passed (nothing else makes
the coordinators append sooner here), and what they wrote is there."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Message, ShareConsumer, TopicPartition

from tests.support.broker_process import BrokerProcess, running_broker
from tests.support.clients import ck_produce, create_topic
from tests.support.groups import unique
from tests.support.messages import value_of
from tests.support.polling import wait_until

LINGER_S = 0.4


@pytest.fixture
def lingering_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    linger = str(int(LINGER_S * 1000))
    with running_broker(tmp_path, {"group.coordinator.append.linger.ms": linger,
                                   "share.coordinator.append.linger.ms": linger,
                                   "offsets.topic.num.partitions": "1",
                                   "share.coordinator.state.topic.num.partitions": "1",
                                   "share.auto.offset.reset": "earliest"}) as proc:
        yield proc


def test_an_offset_commit_is_answered_once_the_linger_has_passed(lingering_broker: BrokerProcess) -> None:
    topic, group = unique("linger"), unique("linger-group")
    create_topic(lingering_broker.bootstrap, topic, 1)
    # Not subscribed: no heartbeats or joins, whose arrival would append the waiting commit early.
    consumer = Consumer({"bootstrap.servers": lingering_broker.bootstrap, "group.id": group,
                         "enable.auto.commit": False, "enable.metrics.push": False})
    try:
        consumer.committed([TopicPartition(topic, 0)], timeout=20)  # the offsets topic created, the coordinator found
        for offset in (5, 9):
            started = time.monotonic()
            consumer.commit(offsets=[TopicPartition(topic, 0, offset)], asynchronous=False)
            assert time.monotonic() - started >= LINGER_S - 0.05
        (found,) = consumer.committed([TopicPartition(topic, 0)], timeout=20)
        assert found.offset == 9
    finally:
        consumer.close()


def test_a_share_acknowledgement_is_answered_once_the_linger_has_passed(lingering_broker: BrokerProcess) -> None:
    topic, group = unique("share-linger"), unique("share-linger-group")
    create_topic(lingering_broker.bootstrap, topic, 1)
    ck_produce(lingering_broker.bootstrap, topic, [{"value": b"a"}, {"value": b"b"}])
    consumer = ShareConsumer({"bootstrap.servers": lingering_broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        seen: list[Message] = []

        def both() -> bool:
            seen.extend(consumer.poll(0.5))
            return len(seen) >= 2

        wait_until(both, 30, "the share consumer never got both records")
        for message in seen:
            consumer.acknowledge(message, AcknowledgeType.ACCEPT)
        started = time.monotonic()
        consumer.commit_sync()
        assert time.monotonic() - started >= LINGER_S - 0.05
        assert sorted(value_of(m) for m in seen) == [b"a", b"b"]
    finally:
        consumer.close()
