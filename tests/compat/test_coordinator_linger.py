"""group.coordinator.append.linger.ms on a real broker: a client's offset commit is answered only once the linger has
passed (nothing else makes the coordinator append sooner here), and what it wrote is there."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition

from tests.support.broker_process import BrokerProcess
from tests.support.clients import create_topic
from tests.support.groups import unique

LINGER_S = 0.4


@pytest.fixture
def lingering_broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    linger = str(int(LINGER_S * 1000))
    proc = BrokerProcess(tmp_path, {"group.coordinator.append.linger.ms": linger,
                                    "offsets.topic.num.partitions": "1"})
    proc.start()
    try:
        yield proc
        assert "internal error" not in proc.log_path.read_text(), proc.log_tail()
    finally:
        try:
            proc.stop()
        finally:
            proc.cleanup()


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

