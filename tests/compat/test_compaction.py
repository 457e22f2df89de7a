"""Log compaction against a real broker process, produced to and read by confluent-kafka."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, IsolationLevel, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from moldau.protocol.record_batch import BATCH_HEADER_SIZE, parse_header
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_produce, create_topic
from tests.support.polling import wait_until
from tests.support.transactions import READ_COMMITTED, READ_UNCOMMITTED, latest_offsets, read_to_end, txn_producer

# Small segments rolled every second, cleaned as soon as anything is dirty, tombstones kept for 1 s.
COMPACTED = {"cleanup.policy": "compact", "segment.bytes": "4096", "segment.ms": "1000",
             "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": "1000"}
# A cleaner that looks for work every maintenance pass (Kafka's default waits 15 s after finding none).
EAGER_CLEANER = {"log.cleaner.backoff.ms": "0"}


def read_partition(bootstrap: str, topic: str) -> list[tuple[int, bytes | None, bytes | None]]:
    """(offset, key, value) of every record from the beginning to the end of partition 0."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "compaction-reader",
                         "enable.auto.commit": False, "enable.partition.eof": True,
                         "fetch.wait.max.ms": 20})
    try:
        consumer.assign([TopicPartition(topic, 0, -2)])
        out: list[tuple[int, bytes | None, bytes | None]] = []
        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=10_000, timeout=0.1):
                error = msg.error()
                if error is not None and error.code() == KafkaError._PARTITION_EOF:
                    return out
                assert error is None, error
                offset = msg.offset()
                assert offset is not None
                out.append((offset, msg.key(), msg.value()))
        raise AssertionError(f"no end of partition after {len(out)} records")
    finally:
        consumer.close()


def wait_until_compacted(bootstrap: str, topic: str, expected: dict[bytes, bytes],
                         timeout_s: float = 25.0) -> list[tuple[int, bytes | None, bytes | None]]:
    """Read the partition until it holds exactly one record per key with the expected value."""
    deadline = time.monotonic() + timeout_s
    while True:
        records = read_partition(bootstrap, topic)
        compacted = len(records) == len(expected) and {k: v for _, k, v in records} == expected
        if compacted or time.monotonic() > deadline:
            return records
        time.sleep(0.5)


@pytest.mark.broker_config(EAGER_CLEANER)
def test_a_compacted_topic_keeps_the_latest_value_per_key_across_a_restart(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "compacted", config=COMPACTED)
    updates: list[dict[str, Any]] = [
        {"key": b"k%d" % (i % 20), "value": b"v%d-" % i + b"x" * 50, "headers": [("n", b"%d" % i)]}
        for i in range(3000)
    ]
    idempotent = {"compression.type": "lz4", "batch.size": 3000, "enable.idempotence": True}
    acks = ck_produce(broker.bootstrap, "compacted", updates, **idempotent)
    # Its own producer's only batch: once the tombstone goes, the batch stays as an empty batch (producer
    # state), which the consumer must step over.
    acks += ck_produce(broker.bootstrap, "compacted", [{"key": b"k3", "value": None}], **idempotent)
    expected = {b"k%d" % k: updates[-20 + k]["value"] for k in range(20) if k != 3}
    offset_of = {updates[-20 + k]["key"]: acks[-21 + k][1] for k in range(20)}

    records = wait_until_compacted(broker.bootstrap, "compacted", expected)
    assert [(k, v) for _, k, v in records] == sorted(((k, v) for k, v in expected.items()),
                                                     key=lambda kv: offset_of[kv[0]])
    assert [o for o, _, _ in records] == sorted(offset_of[k] for k in expected), "offsets are unchanged"

    broker.restart()
    assert read_partition(broker.bootstrap, "compacted") == records
    more = ck_produce(broker.bootstrap, "compacted", [{"key": b"k0", "value": b"after"}])
    assert more[0][1] == acks[-1][1] + 1, "the log end did not move"


def test_a_record_without_key_is_refused_by_a_compacted_topic(shared_broker: BrokerProcess) -> None:
    create_topic(shared_broker.bootstrap, "compacted-null-key", config={"cleanup.policy": "compact"})
    errors: list[Any] = []
    producer = Producer({"bootstrap.servers": shared_broker.bootstrap, "retries": 0})
    producer.produce("compacted-null-key", value=b"no key", on_delivery=lambda err, _: errors.append(err))
    assert producer.flush(15) == 0
    assert [e.code() for e in errors] == [KafkaError.INVALID_RECORD]
    ck_produce(shared_broker.bootstrap, "compacted-null-key", [{"key": b"k", "value": b"keyed"}])


def stored_control_batches(partition_dir: Path) -> int:
    """How many control batches (transaction markers) the partition's segment files hold, read raw."""
    count = 0
    for path in sorted(partition_dir.glob("*.log")):
        data = path.read_bytes()
        position = 0
        while len(data) - position >= BATCH_HEADER_SIZE:
            header = parse_header(data, position)
            if header.total_size > len(data) - position:
                break  # being appended to
            count += header.is_control
            position += header.total_size
    return count


@pytest.mark.broker_config({"transaction.state.log.num.partitions": "1", **EAGER_CLEANER})
def test_compaction_removes_the_markers_of_transactions_that_left_nothing(broker: BrokerProcess) -> None:
    """A compacted topic written transactionally (as a Kafka Streams changelog is) keeps only the markers of
    transactions that still have records; read_committed readers see the same committed values throughout."""
    topic = "compacted-transactional"
    create_topic(broker.bootstrap, topic, config={**COMPACTED, "delete.retention.ms": "0"})
    producer = txn_producer(broker.bootstrap, "changelog-writer")
    keys = [b"k%d" % k for k in range(10)]
    rounds = 40
    for round_ in range(rounds):
        producer.begin_transaction()
        aborted = round_ % 5 == 2
        for key in keys:
            producer.produce(topic, key=key, value=(b"aborted-%d" if aborted else b"committed-%d") % round_)
        if aborted:
            producer.flush(30)  # stored, so that the abort writes a marker and the cleaner removes the records
            producer.abort_transaction(30)
        else:
            producer.commit_transaction(30)
    expected = {key: b"committed-%d" % (rounds - 1) for key in keys}
    partition_dir = broker.data_dir / "logs" / f"{topic}-0"

    # One marker per transaction was written (the cleaner may have removed some already). Every transaction
    # but the last was superseded or aborted; the last one's marker stays with its records.
    wait_until(lambda: stored_control_batches(partition_dir) == 1, 60,
               lambda: f"{stored_control_batches(partition_dir)} markers left")
    for isolation in (READ_COMMITTED, READ_UNCOMMITTED):
        records = read_to_end(broker.bootstrap, topic, isolation)
        assert {r.key: r.value for r in records} == expected, isolation
        assert len(records) == len(keys), isolation
    high = latest_offsets(broker.bootstrap, topic, 1, IsolationLevel.READ_UNCOMMITTED)
    assert latest_offsets(broker.bootstrap, topic, 1, IsolationLevel.READ_COMMITTED) == high

    broker.restart()
    assert latest_offsets(broker.bootstrap, topic, 1, IsolationLevel.READ_COMMITTED) == high, \
        "no transaction came back open"
    assert {r.key: r.value for r in read_to_end(broker.bootstrap, topic, READ_COMMITTED)} == expected
    producer = txn_producer(broker.bootstrap, "changelog-writer")
    producer.begin_transaction()
    producer.produce(topic, key=b"k0", value=b"after-restart")
    producer.commit_transaction(30)
    assert read_to_end(broker.bootstrap, topic, READ_COMMITTED)[-1].value == b"after-restart"


@pytest.mark.broker_config({**EAGER_CLEANER, "log.cleaner.threads": "0"})
def test_the_cleaner_follows_a_dynamic_change_of_its_threads(broker: BrokerProcess) -> None:
    """With no cleaner thread nothing is cleaned; `log.cleaner.threads` set for the broker through the admin API
    starts cleaning without a restart."""
    create_topic(broker.bootstrap, "compacted-later", config=COMPACTED)
    updates = [{"key": b"k%d" % (i % 10), "value": b"v%d-" % i + b"x" * 100} for i in range(400)]
    ck_produce(broker.bootstrap, "compacted-later", updates, **{"batch.size": 2000})
    partition_dir = broker.data_dir / "logs" / "compacted-later-0"
    wait_until(lambda: len(list(partition_dir.glob("*.log"))) >= 3, 30, "segments to roll")
    time.sleep(2.5)  # maintenance passes, every second, find the rolled segments dirty and clean nothing
    assert len(read_partition(broker.bootstrap, "compacted-later")) == 400

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    this_broker = ConfigResource(ResourceType.BROKER, "1", incremental_configs=[
        ConfigEntry("log.cleaner.threads", "1", incremental_operation=AlterConfigOpType.SET)])
    admin.incremental_alter_configs([this_broker])[this_broker].result(15)
    expected = {u["key"]: u["value"] for u in updates}
    assert {k: v for _, k, v in wait_until_compacted(broker.bootstrap, "compacted-later", expected)} == expected
