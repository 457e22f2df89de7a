"""Round trips with the real client libraries against a real `moldau server` process."""

from __future__ import annotations

import asyncio
import subprocess
import time
import uuid
from typing import Any

import pytest

from tests.support.broker_process import BrokerProcess
from tests.support.clients import RECENT_TIMESTAMP_MS, ck_consume, ck_produce, create_topic

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def topic_name(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


@pytest.mark.parametrize("codec", CODECS)
def test_confluent_kafka_round_trip(shared_broker: BrokerProcess, codec: str) -> None:
    topic = topic_name(f"ck-{codec}")
    create_topic(shared_broker.bootstrap, topic, partitions=3)
    records = [{"key": f"k{i % 7}".encode(), "value": f"value-{i}".encode() * (1 + i % 5),
                "headers": [("h", str(i).encode()), ("dup", b"a"), ("dup", b"b")], "timestamp": RECENT_TIMESTAMP_MS + i}
               for i in range(500)]
    acks = ck_produce(shared_broker.bootstrap, topic, records, **{"compression.type": codec})
    got = ck_consume(shared_broker.bootstrap, topic, len(records))
    assert len(got) == len(records)
    by_position = {(r.partition, r.offset): r for r in got}
    for (partition, offset), sent in zip(acks, records, strict=True):
        rec = by_position[(partition, offset)]
        assert (rec.key, rec.value, rec.timestamp_ms) == (sent["key"], sent["value"], sent["timestamp"])
        assert list(rec.headers) == sent["headers"]


def test_same_key_same_partition_in_order(shared_broker: BrokerProcess) -> None:
    topic = topic_name("keys")
    create_topic(shared_broker.bootstrap, topic, partitions=4)
    records = [{"key": f"user-{i % 10}".encode(), "value": str(i).encode()} for i in range(1000)]
    ck_produce(shared_broker.bootstrap, topic, records)
    got = ck_consume(shared_broker.bootstrap, topic, len(records))
    partition_of: dict[bytes | None, int] = {}
    for rec in got:
        assert partition_of.setdefault(rec.key, rec.partition) == rec.partition
    assert len(set(partition_of.values())) > 1, "ten keys over four partitions should use more than one"
    for key in partition_of:
        values = [int(r.value or b"") for r in sorted(got, key=lambda r: r.offset) if r.key == key]
        assert values == sorted(values)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_kafka_python_round_trip(shared_broker: BrokerProcess, codec: str) -> None:
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition

    topic = topic_name(f"kp-{codec}")
    create_topic(shared_broker.bootstrap, topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=shared_broker.bootstrap,
                             compression_type=None if codec == "none" else codec, linger_ms=5)
    futures = [producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                             headers=[("n", str(i).encode())], timestamp_ms=RECENT_TIMESTAMP_MS + i)
               for i in range(300)]
    producer.flush(30)
    sent = [f.get(timeout=30) for f in futures]
    producer.close()
    assert len({(m.partition, m.offset) for m in sent}) == 300

    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    got: list[Any] = []  # kafka-python's ConsumerRecords (the library has no type information)
    deadline = time.monotonic() + 30
    while len(got) < 300 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(batch)
    consumer.close()
    assert sorted(int(m.value[1:]) for m in got) == list(range(300))
    for m in got:
        i = int(m.value[1:])
        assert m.key == f"k{i}".encode() and m.timestamp == RECENT_TIMESTAMP_MS + i
        assert m.headers == [("n", str(i).encode())]


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_aiokafka_round_trip(shared_broker: BrokerProcess, codec: str) -> None:
    from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition

    topic = topic_name(f"aio-{codec}")
    create_topic(shared_broker.bootstrap, topic, partitions=2)

    async def run() -> list[tuple[bytes, bytes]]:
        producer = AIOKafkaProducer(bootstrap_servers=shared_broker.bootstrap,
                                    compression_type=None if codec == "none" else codec)
        await producer.start()
        try:
            for i in range(200):
                await producer.send(topic, key=f"k{i}".encode(), value=f"v{i}".encode(),
                                    headers=[("n", str(i).encode())])
            await producer.flush()
        finally:
            await producer.stop()
        consumer = AIOKafkaConsumer(bootstrap_servers=shared_broker.bootstrap, enable_auto_commit=False,
                                    auto_offset_reset="earliest")
        await consumer.start()
        try:
            consumer.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
            out: list[tuple[bytes, bytes]] = []
            async with asyncio.timeout(30):
                while len(out) < 200:
                    for batch in (await consumer.getmany(timeout_ms=500)).values():
                        out.extend((m.key, m.value) for m in batch)
            return out
        finally:
            await consumer.stop()

    got = asyncio.run(run())
    assert sorted(got) == sorted((f"k{i}".encode(), f"v{i}".encode()) for i in range(200))


def test_kcat_round_trip(shared_broker: BrokerProcess) -> None:
    topic = topic_name("kcat")
    create_topic(shared_broker.bootstrap, topic)
    lines = "".join(f"key{i}:line {i}\n" for i in range(100))
    subprocess.run(["kcat", "-P", "-b", shared_broker.bootstrap, "-t", topic, "-K:", "-z", "lz4"],
                   input=lines.encode(), check=True, timeout=60)
    out = subprocess.run(["kcat", "-C", "-b", shared_broker.bootstrap, "-t", topic, "-o", "beginning", "-e",
                          "-q", "-f", "%k=%s@%o\n"], check=True, timeout=60, capture_output=True)
    assert out.stdout.decode().splitlines() == [f"key{i}=line {i}@{i}" for i in range(100)]


def test_cross_client_kafka_python_reads_confluent_writes(shared_broker: BrokerProcess) -> None:
    from kafka import KafkaConsumer, TopicPartition

    topic = topic_name("cross")
    create_topic(shared_broker.bootstrap, topic)
    ck_produce(shared_broker.bootstrap, topic, [{"value": f"{i}".encode()} for i in range(50)],
               **{"compression.type": "zstd"})
    consumer = KafkaConsumer(bootstrap_servers=shared_broker.bootstrap, group_id=None,
                             enable_auto_commit=False, auto_offset_reset="earliest")
    consumer.assign([TopicPartition(topic, 0)])
    got: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(got) < 50 and time.monotonic() < deadline:
        for batch in consumer.poll(timeout_ms=500).values():
            got.extend(m.value for m in batch)
    consumer.close()
    assert got == [f"{i}".encode() for i in range(50)]


def test_seek_rewind_and_offsets_for_times(shared_broker: BrokerProcess) -> None:
    from confluent_kafka import Consumer, TopicPartition

    topic = topic_name("seek")
    create_topic(shared_broker.bootstrap, topic)
    base_ts = RECENT_TIMESTAMP_MS
    ck_produce(shared_broker.bootstrap, topic,
               [{"value": str(i).encode(), "timestamp": base_ts + i * 1000} for i in range(100)])
    # Start in the middle.
    got = ck_consume(shared_broker.bootstrap, topic, 10, partitions=[0], start=40)
    assert [r.offset for r in got] == list(range(40, 50))
    consumer = Consumer({"bootstrap.servers": shared_broker.bootstrap, "group.id": "unused"})
    try:
        found = consumer.offsets_for_times([TopicPartition(topic, 0, base_ts + 70_500)], timeout=10)
        assert found[0].offset == 71
        beyond = consumer.offsets_for_times([TopicPartition(topic, 0, base_ts + 10**9)], timeout=10)
        assert beyond[0].offset == -1  # no such record: "end"
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, 0), timeout=10)
        assert (low, high) == (0, 100)
        # Rewind: consume to the end, seek back, read again.
        consumer.assign([TopicPartition(topic, 0, 95)])
        first = [m.offset() for m in consumer.consume(5, timeout=10)]
        consumer.seek(TopicPartition(topic, 0, 90))
        again = [m.offset() for m in consumer.consume(10, timeout=10)]
        assert first == [95, 96, 97, 98, 99]
        assert again == list(range(90, 100))
    finally:
        consumer.close()


def test_tail_receives_new_records_through_long_poll(shared_broker: BrokerProcess) -> None:
    """A consumer at the end gets records produced after it started waiting."""
    import threading

    topic = topic_name("tail")
    create_topic(shared_broker.bootstrap, topic)
    result: list[list[int]] = []
    thread = threading.Thread(target=lambda: result.append(
        [r.offset for r in ck_consume(shared_broker.bootstrap, topic, 5, partitions=[0], start=-1,
                                      conf={"fetch.wait.max.ms": 5000})]))
    thread.start()
    time.sleep(1.5)
    ck_produce(shared_broker.bootstrap, topic, [{"value": b"x"} for _ in range(5)])
    thread.join(30)
    assert result == [[0, 1, 2, 3, 4]]


def test_log_append_time_topic(shared_broker: BrokerProcess) -> None:
    topic = topic_name("lat")
    create_topic(shared_broker.bootstrap, topic, config={"message.timestamp.type": "LogAppendTime"})
    before = int(time.time() * 1000)
    ck_produce(shared_broker.bootstrap, topic, [{"value": b"x", "timestamp": 1000} for _ in range(3)])
    after = int(time.time() * 1000)
    got = ck_consume(shared_broker.bootstrap, topic, 3)
    assert all(before - 5 <= r.timestamp_ms <= after + 5 for r in got), [r.timestamp_ms for r in got]
