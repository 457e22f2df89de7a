"""read_committed share groups (`share.isolation.level`) with confluent-kafka's ShareConsumer and transactional
Producer against real broker processes.

Two brokers for the module, both with `share.auto.offset.reset=earliest`: one with
`share.isolation.level=read_committed`, one with read_uncommitted (the default). On each, a transactional producer
commits some transactions and aborts others, then leaves one open with a plain record after it: the
read_committed share group gets only committed records, and nothing past the open transaction until it commits;
the read_uncommitted one gets everything.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest
from confluent_kafka import Producer, ShareConsumer

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import AdminClient, NewTopic  # type: ignore[attr-defined]

from tests.support.broker_process import BrokerProcess
from tests.support.messages import value_of
from tests.support.polling import wait_until

COMMITTED = [f"{txn}-{i}".encode() for txn in ("c1", "c2") for i in range(3)]
ABORTED = [f"{txn}-{i}".encode() for txn in ("a1", "a2") for i in range(3)]
OPEN = [b"o-0", b"o-1"]
AFTER = b"after-open"


# One partition for each internal topic: two brokers start and stop faster with 3 logs than with 150.
SMALL_INTERNAL_TOPICS = {"offsets.topic.num.partitions": "1", "transaction.state.log.num.partitions": "1",
                         "share.coordinator.state.topic.num.partitions": "1"}


@pytest.fixture(scope="module")
def brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, BrokerProcess]]:
    procs = {level: BrokerProcess(tmp_path_factory.mktemp(f"share-{level}"), {
        "share.auto.offset.reset": "earliest", "share.isolation.level": level, **SMALL_INTERNAL_TOPICS})
        for level in ("read_committed", "read_uncommitted")}
    try:
        with ThreadPoolExecutor(2) as pool:  # the two start at once
            list(pool.map(lambda proc: proc.start(), procs.values()))
        yield procs
    finally:
        for proc in procs.values():
            try:
                proc.stop()
            finally:
                proc.cleanup()


def transactions_with_one_open(broker: BrokerProcess) -> tuple[str, Producer]:
    """A topic holding c1 (committed), a1 (aborted), c2 (committed), a2 (aborted), then the open transaction o
    and a plain record after it; returns the topic and the producer whose transaction is still open."""
    topic = f"share-txn-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result()
    producer = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": f"tx-{topic}"})
    producer.init_transactions(30)
    for txn, commit in (("c1", True), ("a1", False), ("c2", True), ("a2", False), ("o", None)):
        producer.begin_transaction()
        for i in range(2 if commit is None else 3):
            producer.produce(topic, value=f"{txn}-{i}".encode())
        producer.flush(10)
        if commit is True:
            producer.commit_transaction(30)
        elif commit is False:
            producer.abort_transaction(30)
    plain = Producer({"bootstrap.servers": broker.bootstrap})
    plain.produce(topic, value=AFTER)
    assert plain.flush(10) == 0
    return topic, producer


def poll_until(consumer: ShareConsumer, seen: list[bytes], wanted: set[bytes]) -> None:
    def step() -> bool:
        for message in consumer.poll(0.5):
            assert message.error() is None, message.error()
            seen.append(value_of(message))
        return wanted <= set(seen)

    wait_until(step, 60.0, f"the share consumer never got {sorted(wanted - set(seen))}")


def consumer_of(broker: BrokerProcess, topic: str) -> ShareConsumer:
    consumer = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": f"g-{topic}",
                              "max.poll.records": 500})
    consumer.subscribe([topic])
    return consumer


def test_a_read_committed_share_group_gets_only_committed_records(brokers: dict[str, BrokerProcess]) -> None:
    broker = brokers["read_committed"]
    topic, open_producer = transactions_with_one_open(broker)
    seen: list[bytes] = []
    with consumer_of(broker, topic) as consumer:
        poll_until(consumer, seen, set(COMMITTED))
        # The plain record after the open transaction was in the log before the first fetch: it would have come
        # with the committed ones had the share-partition gone past the last stable offset.
        assert AFTER not in seen and not set(OPEN) & set(seen)
        open_producer.commit_transaction(30)
        poll_until(consumer, seen, set(OPEN) | {AFTER})
    assert sorted(seen) == sorted(COMMITTED + OPEN + [AFTER])
    assert "internal error" not in broker.log_path.read_text(), broker.log_tail()


def test_a_read_uncommitted_share_group_gets_every_record(brokers: dict[str, BrokerProcess]) -> None:
    broker = brokers["read_uncommitted"]
    topic, open_producer = transactions_with_one_open(broker)
    seen: list[bytes] = []
    with consumer_of(broker, topic) as consumer:
        poll_until(consumer, seen, set(COMMITTED + ABORTED + OPEN + [AFTER]))
    open_producer.commit_transaction(30)
    assert sorted(seen) == sorted(COMMITTED + ABORTED + OPEN + [AFTER])
    assert "internal error" not in broker.log_path.read_text(), broker.log_tail()
