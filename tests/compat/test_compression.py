"""A topic's compression.type decides the codec its batches are stored in: an lz4 producer writing to a zstd
topic leaves zstd batches in the log, which every client reads."""

from __future__ import annotations

import asyncio
import struct
from pathlib import Path

import pytest
from kafka import KafkaConsumer
from kafka import TopicPartition as KpTopicPartition

from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_produce, create_topic

COUNT = 300
ZSTD, LZ4 = 4, 3


def stored_codecs(broker: BrokerProcess, topic: str) -> list[int]:
    """The compression bits of every batch in the partition's log segments, read from the files."""
    codecs = []
    for segment in sorted((broker.data_dir / "logs" / f"{topic}-0").glob("*.log")):
        data = Path(segment).read_bytes()
        pos = 0
        while pos + 61 <= len(data):
            (length,) = struct.unpack_from(">i", data, pos + 8)
            (attributes,) = struct.unpack_from(">h", data, pos + 21)
            codecs.append(attributes & 0x07)
            pos += 12 + length
    return codecs


def expected() -> list[bytes]:
    return [b"value %d " % i * 10 for i in range(COUNT)]


def test_an_lz4_producer_writes_zstd_batches_to_a_zstd_topic(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    create_topic(bootstrap, "zstd-topic", config={"compression.type": "zstd", "compression.zstd.level": "9"})
    create_topic(bootstrap, "as-sent", config={"compression.type": "producer"})
    records = [{"key": b"k%d" % i, "value": value} for i, value in enumerate(expected())]
    for topic in ("zstd-topic", "as-sent"):
        offsets = ck_produce(bootstrap, topic, records, **{"compression.type": "lz4", "enable.idempotence": True,
                                                          "linger.ms": 20})
        assert [offset for _, offset in offsets] == list(range(COUNT))
    assert set(stored_codecs(shared_broker, "zstd-topic")) == {ZSTD}
    assert set(stored_codecs(shared_broker, "as-sent")) == {LZ4}

    assert [r.value for r in ck_consume(bootstrap, "zstd-topic", COUNT)] == expected()
    kp = KafkaConsumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest", enable_auto_commit=False,
                       consumer_timeout_ms=10_000)
    try:
        kp.assign([KpTopicPartition("zstd-topic", 0)])
        assert [m.value for _, m in zip(range(COUNT), kp, strict=False)] == expected()
    finally:
        kp.close()
    assert asyncio.run(_aiokafka_values(bootstrap)) == expected()


async def _aiokafka_values(bootstrap: str) -> list[bytes]:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, enable_auto_commit=False, auto_offset_reset="earliest")
    await consumer.start()
    try:
        consumer.assign([TopicPartition("zstd-topic", 0)])
        out: list[bytes] = []
        async with asyncio.timeout(30):
            while len(out) < COUNT:
                for batch in (await consumer.getmany(timeout_ms=500)).values():
                    out.extend(m.value for m in batch if m.value is not None)
        return out
    finally:
        await consumer.stop()


def test_a_bad_level_is_refused(shared_broker: BrokerProcess) -> None:
    from confluent_kafka import KafkaException

    # confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
    from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

    admin = AdminClient({"bootstrap.servers": shared_broker.bootstrap})
    future = admin.create_topics([NewTopic("bad-level", 1, 1, config={"compression.gzip.level": "0"})])["bad-level"]
    with pytest.raises(KafkaException) as info:
        future.result(timeout=30)
    assert "compression.gzip.level" in str(info.value)
