"""offsets.topic.compression.codec and share.coordinator.state.topic.compression.codec against a real broker: what
confluent-kafka's consumers make the coordinators write is stored in the configured codec (read back from the
partitions' segment files, as the broker wrote them), and a restarted broker loads it back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, ShareConsumer, TopicPartition

from moldau.coordinator.group.records import OFFSETS_TOPIC
from moldau.coordinator.share.records import SHARE_STATE_TOPIC
from moldau.protocol.record_batch import BatchHeader, split_batches
from tests.support.broker_process import BrokerProcess, running_broker
from tests.support.clients import ck_produce, create_topic
from tests.support.groups import GroupMember, poll_until, unique
from tests.support.messages import value_of
from tests.support.polling import wait_until

GROUP_CONF = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 200, "auto.offset.reset": "earliest",
              "enable.auto.commit": False, "enable.metrics.push": False}
PARTITIONS = 3


def stored_batches(broker: BrokerProcess, topic: str) -> list[BatchHeader]:
    """The data batches of every partition of an internal topic, as its segment files hold them (the broker's own
    checks of sizes and CRC applied to each)."""
    headers: list[BatchHeader] = []
    for segment in sorted((broker.data_dir / "logs").glob(f"{topic}-*/*.log")):
        if data := segment.read_bytes():  # a partition never written to has an empty segment
            headers += [header for header, _ in split_batches(data, from_client=False)]
    return [header for header in headers if not header.is_control]


def stop_cleanly(broker: BrokerProcess) -> None:
    """SIGTERM: the segments are then read as the broker left them on disk."""
    assert broker.stop() == 0, broker.log_tail()


@pytest.fixture
def own_broker(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[BrokerProcess]:
    with running_broker(tmp_path, {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3",
                                   "share.coordinator.state.topic.num.partitions": "3",
                                   "share.auto.offset.reset": "earliest", **request.param}) as proc:
        yield proc


def committed(broker: BrokerProcess, group: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group, **GROUP_CONF})
    try:
        found = consumer.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], timeout=20)
    finally:
        consumer.close()
    return {tp.partition: tp.offset for tp in found}


@pytest.mark.parametrize(("own_broker", "codec"), [({"offsets.topic.compression.codec": "4"}, 4),
                                                    ({"offsets.topic.compression.codec": "1"}, 1)],
                         indirect=["own_broker"], ids=["zstd", "gzip"])
def test_group_coordinator_writes_in_the_codec_and_loads_it_back(own_broker: BrokerProcess, codec: int) -> None:
    topic, group = unique("codec"), unique("codec-group")
    create_topic(own_broker.bootstrap, topic, PARTITIONS)
    ck_produce(own_broker.bootstrap, topic, [{"value": f"v{i}".encode(), "partition": i % PARTITIONS}
                                             for i in range(30)])
    member = GroupMember(own_broker.bootstrap, group, topic, GROUP_CONF)
    try:
        poll_until([member], lambda: len(member.records) == 30)
        member.commit()  # the offsets after every record read, as one OffsetCommit
        member.consumer.commit(offsets=[TopicPartition(topic, 0, 4)], asynchronous=False)  # and one more
    finally:
        member.close()  # the group's record of its last generation, then of it being empty
    expected = {0: 4, 1: 10, 2: 10}
    assert committed(own_broker, group, topic) == expected

    stop_cleanly(own_broker)
    batches = stored_batches(own_broker, OFFSETS_TOPIC)
    assert len(batches) >= 4, batches  # the group's records and the two commits at least
    assert {header.compression for header in batches} == {codec}
    own_broker.start()
    assert committed(own_broker, group, topic) == expected


def share_consume(broker: BrokerProcess, group: str, topic: str, until: set[bytes],
                  acknowledge: dict[bytes, AcknowledgeType]) -> list[bytes]:
    """A share consumer reading until it has seen `until`, acknowledging each record as `acknowledge` says
    (accepting the others), its acknowledgements committed before it closes."""
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    seen: list[bytes] = []

    def step() -> bool:
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            seen.append(value_of(message))
            consumer.acknowledge(message, acknowledge.get(value_of(message), AcknowledgeType.ACCEPT))
        return until <= set(seen)

    try:
        wait_until(step, 30, lambda: f"the share consumer saw only {seen}")
        consumer.commit_sync()
    finally:
        consumer.close()
    return seen


@pytest.mark.parametrize(("own_broker", "codec"), [({"share.coordinator.state.topic.compression.codec": "4"}, 4),
                                                    ({"share.coordinator.state.topic.compression.codec": "3"}, 3)],
                         indirect=["own_broker"], ids=["zstd", "lz4"])
def test_share_coordinator_writes_in_the_codec_and_loads_it_back(own_broker: BrokerProcess, codec: int) -> None:
    topic, group = unique("share-codec"), unique("share-codec-group")
    create_topic(own_broker.bootstrap, topic, 1)
    values = [f"s{i}".encode() for i in range(6)]
    ck_produce(own_broker.bootstrap, topic, [{"value": value} for value in values])
    released: dict[bytes, Any] = {b"s2": AcknowledgeType.RELEASE}
    share_consume(own_broker, group, topic, set(values), released)

    stop_cleanly(own_broker)
    batches = stored_batches(own_broker, SHARE_STATE_TOPIC)
    assert len(batches) >= 2, batches  # the state's start, then the acknowledgements
    assert {header.compression for header in batches} == {codec}
    own_broker.start()
    ck_produce(own_broker.bootstrap, topic, [{"value": b"sentinel"}])
    # Only the released record comes back: the state loaded from the compressed batches holds the accepted ones.
    assert sorted(share_consume(own_broker, group, topic, {b"s2", b"sentinel"}, {})) == [b"s2", b"sentinel"]
