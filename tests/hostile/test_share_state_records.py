"""Hostile records in `__share_group_state`, written with a plain producer (the broker lets a client write to the
internal topic, as Kafka lets a principal with WRITE on it): a key of an unknown record type, garbage that is no
key at all, a snapshot value of an unknown version, a truncated snapshot value and an update that is no update —
the last three under the very key of a live share-partition. After a restart the share coordinator replays the
log: each bad record is skipped with a warning, the live share-partition keeps the state written before them
(accepted records are not delivered again, the others are), and another share group works as if nothing happened.

Every write is a whole snapshot here (`share.coordinator.snapshot.update.records.per.snapshot=0`), so the
coordinator prunes the records before the latest one: the replay starts past the log's first records.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Consumer, Producer, ShareConsumer, TopicPartition

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from moldau.coordinator.share.records import (
    SHARE_STATE_TOPIC,
    UPDATE_KEY_VERSION,
    ShareSnapshot,
    StateBatch,
    StateKey,
    encode_key,
    encode_value,
)
from tests.support.broker_process import BrokerProcess
from tests.support.cluster import metadata_at
from tests.support.polling import wait_until


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[BrokerProcess]:
    # One state partition: the bad records land beside the live share-partition's state.
    proc = BrokerProcess(tmp_path, {"share.auto.offset.reset": "earliest",
                                    "share.coordinator.state.topic.num.partitions": "1",
                                    "share.coordinator.snapshot.update.records.per.snapshot": "0",
                                    "group.share.record.lock.duration.ms": "2000"})
    proc.start()
    yield proc
    try:
        proc.stop()
    finally:
        proc.cleanup()


def new_topic(broker: BrokerProcess, name: str, values: list[bytes]) -> Any:
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(name, 1, 1)])[name].result()
    produce(broker, name, [(None, v) for v in values])
    (described,) = metadata_at(broker.bootstrap, [name]).topics
    return described.topic_id


def produce(broker: BrokerProcess, topic: str, records: list[tuple[bytes | None, bytes | None]]) -> None:
    producer = Producer({"bootstrap.servers": broker.bootstrap})
    for key, value in records:
        producer.produce(topic, key=key, value=value, partition=0)
    assert producer.flush(10) == 0


def state_log_start(broker: BrokerProcess) -> int:
    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "watermarks"})
    try:
        low, _ = consumer.get_watermark_offsets(TopicPartition(SHARE_STATE_TOPIC, 0), timeout=10, cached=False)
    finally:
        consumer.close()
    return int(low)


def consume(broker: BrokerProcess, group: str, topic: str, until: bytes, accept: set[bytes]) -> list[Any]:
    """Poll until the record `until` comes, accepting those in `accept` and releasing the others."""
    seen: list[Any] = []
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": group,
                              "share.acknowledgement.mode": "explicit"})
    consumer.subscribe([topic])
    try:
        def step() -> bool:
            for message in consumer.poll(0.5):
                assert message.error() is None, message.error()
                seen.append(message)
                ack = AcknowledgeType.ACCEPT if message.value() in accept else AcknowledgeType.RELEASE
                consumer.acknowledge(message, ack)
            return until in {m.value() for m in seen}

        wait_until(step, 60.0, f"{group} never got {until!r}")
        consumer.commit_sync()
    finally:
        consumer.close()
    return seen


def test_bad_share_state_records_are_skipped_and_the_good_state_kept(broker: BrokerProcess) -> None:
    values = [f"v{i}".encode() for i in range(6)]
    topic_id = new_topic(broker, "hostile-share", values)
    first = consume(broker, "live", "hostile-share", b"v5", accept={b"v0", b"v1", b"v2"})
    assert sorted(m.value() for m in first) == values
    wait_until(lambda: state_log_start(broker) > 0, 30.0, "the share coordinator never pruned its log")

    key = encode_key(StateKey("live", topic_id, 0))
    good = encode_value(ShareSnapshot(0, 0, 0, 0, (StateBatch(0, 5, 2, 1),)))  # as if all were accepted
    produce(broker, SHARE_STATE_TOPIC, [
        (struct.pack(">h", 7) + key[2:], good),  # a record type nobody knows
        (b"\xff\x00garbage", b"\x00\x00"),  # no key at all
        (key, struct.pack(">h", 9) + good[2:]),  # a snapshot value of an unknown version
        (key, good[:-7]),  # a truncated snapshot value
        (struct.pack(">h", UPDATE_KEY_VERSION) + key[2:], b"\x00\x00\x01"),  # an update that is no update
    ])
    broker.kill()
    broker.start()

    produce(broker, "hostile-share", [(None, b"sentinel")])
    again = consume(broker, "live", "hostile-share", b"sentinel", accept={b"v3", b"v4", b"v5", b"sentinel"})
    assert sorted((m.value(), m.delivery_count()) for m in again) == [
        (b"sentinel", 1), (b"v3", 2), (b"v4", 2), (b"v5", 2)]

    new_topic(broker, "hostile-other", [b"o1", b"o2"])
    other = consume(broker, "other", "hostile-other", b"o2", accept={b"o1", b"o2"})
    assert {m.value() for m in other} == {b"o1", b"o2"}

    log = broker.log_path.read_text()
    assert log.count("skipping unreadable record at __share_group_state") >= 5, broker.log_tail()
    assert "internal error" not in log, broker.log_tail()
