"""End-to-end tests of `moldau transactions`, run as subprocesses against a live broker.

Open transactions come from confluent-kafka transactional producers that never commit; a hanging one (written
on a partition without its coordinator knowing) is made with raw requests, on a broker that does not verify
transactional writes with the coordinator (KIP-890 off), as brokers before it allowed.
"""

import contextlib
import datetime
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.init_producer_id.v4.request import InitProducerIdRequest
from kio.schema.produce.v9 import request as produce_req

from moldau.protocol.codec import make
from moldau.protocol.errors import ErrorCode
from tests.compat.test_cli import assert_clean_error, moldau, ok
from tests.support.raw_client import RawClient

# Long enough that the coordinator never times a test's transaction out.
TXN_TIMEOUT_MS = 300_000
QUIET_S = 2.0
DEADLINE_S = 20.0


def _txn_id() -> str:
    return f"txn-{uuid.uuid4().hex[:8]}"


def _topic(broker: Any, partitions: int) -> str:
    name = f"tcli-{uuid.uuid4().hex[:8]}"
    ok(broker, "topics", "create", name, "--partitions", str(partitions))
    return name


def _transactional(bootstrap: str, txn_id: str) -> Producer:
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id, "enable.metrics.push": False,
                         "transaction.timeout.ms": TXN_TIMEOUT_MS})
    producer.init_transactions(DEADLINE_S)
    return producer


@pytest.fixture
def producers() -> Iterator[list[Producer]]:
    """Transactional producers a test opens; whatever they leave open is aborted at the end."""
    opened: list[Producer] = []
    yield opened
    for producer in opened:
        with contextlib.suppress(Exception):  # nothing open, or already aborted by the test
            producer.abort_transaction(DEADLINE_S)


def _open(bootstrap: str, txn_id: str, topic: str, partitions: list[int], opened: list[Producer]) -> Producer:
    """Begin a transaction and write one record on each partition, without committing it."""
    producer = _transactional(bootstrap, txn_id)
    opened.append(producer)
    producer.begin_transaction()
    for partition in partitions:
        producer.produce(topic, f"in-txn-{partition}".encode(), partition=partition)
    assert producer.flush(DEADLINE_S) == 0
    return producer


def _plain(bootstrap: str, topic: str, partition: int, count: int) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "enable.metrics.push": False})
    for i in range(count):
        producer.produce(topic, f"plain-{i}".encode(), partition=partition)
    assert producer.flush(DEADLINE_S) == 0


def _read_committed(bootstrap: str, topic: str, partition: int, want: int, wait_s: float) -> list[int]:
    """Offsets a read_committed consumer gets from the start, until it has `want` or `wait_s` passed."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused", "isolation.level": "read_committed",
                         "enable.auto.commit": False, "enable.metrics.push": False})
    try:
        consumer.assign([TopicPartition(topic, partition, 0)])
        offsets: list[int] = []
        deadline = time.monotonic() + wait_s
        while len(offsets) < want and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and message.error() is None:
                offset = message.offset()
                assert offset is not None
                offsets.append(offset)
        return offsets
    finally:
        consumer.close()


def _field(out: str, name: str) -> str:
    """The value of a `  Name:  value` line of `describe`."""
    return next(line.split(":", 1)[1].strip() for line in out.splitlines() if line.strip().startswith(f"{name}:"))


def _rows(out: str) -> list[list[str]]:
    return [line.split() for line in out.splitlines()]


def test_list_and_describe(broker: Any, producers: list[Producer]) -> None:
    topic, txn_id, idle_id = _topic(broker, 2), _txn_id(), _txn_id()
    _open(broker.bootstrap, txn_id, topic, [0, 1], producers)
    producers.append(_transactional(broker.bootstrap, idle_id))  # initialised, no transaction yet
    described = ok(broker, "transactions", "describe", "--transactional-id", txn_id).out
    assert _field(described, "State") == "Ongoing"
    assert _field(described, "Coordinator").startswith("1 (")
    assert _field(described, "Timeout") == f"{TXN_TIMEOUT_MS} ms"
    assert _field(described, "Partitions") == "2"
    assert "ago)" in _field(described, "Started")
    assert [topic, "0"] in _rows(described) and [topic, "1"] in _rows(described)
    producer_id = _field(described, "Producer id")

    listed = ok(broker, "transactions", "list").out
    assert listed.splitlines()[0].split() == ["TRANSACTIONAL-ID", "COORDINATOR", "PRODUCER-ID", "STATE"]
    assert [txn_id, "1", producer_id, "Ongoing"] in _rows(listed)
    assert idle_id in [row[0] for row in _rows(listed)]
    assert _rows(ok(broker, "transactions", "list", "--state", "ongoing", "--pattern", "txn-.*").out)[1:] == [
        [txn_id, "1", producer_id, "Ongoing"]]
    assert [txn_id, "1", producer_id, "Ongoing"] in _rows(
        ok(broker, "transactions", "list", "--producer-id", producer_id).out)
    assert ok(broker, "transactions", "list", "--duration-ms", "3600000").out.strip() == "no transactions"
    assert ok(broker, "transactions", "list", "--pattern", "nomatch.*").out.strip() == "no transactions"

    idle = ok(broker, "transactions", "describe", "--transactional-id", idle_id).out
    assert _field(idle, "State") == "Empty" and _field(idle, "Started") == "-"
    assert _field(idle, "Partitions") == "0"


def test_describe_and_list_errors(broker: Any) -> None:
    unknown = moldau(broker, "transactions", "describe", "--transactional-id", "no-such-id")
    assert_clean_error(unknown, "'no-such-id' does not exist", "TRANSACTIONAL_ID_NOT_FOUND")
    bad_state = moldau(broker, "transactions", "list", "--state", "Sleeping")
    assert bad_state.code == 2 and "unknown state 'Sleeping'" in bad_state.err
    bad_pattern = moldau(broker, "transactions", "list", "--pattern", "(")
    assert bad_pattern.code == 2 and "invalid regular expression" in bad_pattern.err
    assert ok(broker, "transactions", "list").out.strip() == "no transactions"


def test_abort_unblocks_read_committed_consumers(broker: Any, producers: list[Producer]) -> None:
    topic, txn_id = _topic(broker, 2), _txn_id()
    _plain(broker.bootstrap, topic, 0, 2)  # offsets 0, 1: the transaction starts at 2
    producer = _open(broker.bootstrap, txn_id, topic, [0, 1], producers)
    _plain(broker.bootstrap, topic, 0, 1)  # offset 3, behind the open transaction
    assert _read_committed(broker.bootstrap, topic, 0, 3, QUIET_S) == [0, 1]

    missing = moldau(broker, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "1")
    assert_clean_error(missing, "no open transaction starts at offset 1", "start at 2")
    aborted = ok(broker, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "2").out
    described = ok(broker, "transactions", "describe", "--transactional-id", txn_id).out
    pid, epoch = _field(described, "Producer id"), _field(described, "Producer epoch")
    assert aborted.strip() == (f"aborted the transaction of producer {pid} (epoch {epoch}, coordinator epoch 0) "
                               f"on {topic}-0, started at offset 2")
    assert _read_committed(broker.bootstrap, topic, 0, 3, DEADLINE_S) == [0, 1, 3]
    # The coordinator was not told: to it the transaction is still open on both partitions.
    assert _field(described, "State") == "Ongoing" and [topic, "0"] in _rows(described)
    again = moldau(broker, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "2")
    assert_clean_error(again, "no open transaction starts at offset 2", "none is open there")

    _plain(broker.bootstrap, topic, 1, 1)
    explicit = ok(broker, "transactions", "abort", "--topic", topic, "--partition", "1", "--producer-id", pid,
                  "--producer-epoch", epoch, "--coordinator-epoch", "0").out
    assert explicit.strip() == f"aborted the transaction of producer {pid} (epoch {epoch}, coordinator epoch 0) " \
                               f"on {topic}-1"
    assert _read_committed(broker.bootstrap, topic, 1, 1, DEADLINE_S) == [1]  # 0 was aborted
    # The producer can still end its transaction: the coordinator writes its own abort markers.
    producer.abort_transaction(DEADLINE_S)
    assert _field(ok(broker, "transactions", "describe", "--transactional-id", txn_id).out, "State") == "CompleteAbort"


def test_abort_errors(broker: Any) -> None:
    topic = _topic(broker, 1)
    base = ("transactions", "abort", "--topic", topic, "--partition", "0")
    assert_clean_error(moldau(broker, *base), "give --start-offset, or all of --producer-id")
    assert_clean_error(moldau(broker, *base, "--start-offset", "0", "--producer-id", "1"), "not both")
    assert_clean_error(moldau(broker, *base, "--producer-id", "1", "--producer-epoch", "0"), "all of")
    assert_clean_error(moldau(broker, *base, "--start-offset", "0"), "no open transaction", "none is open there")
    assert_clean_error(moldau(broker, "transactions", "abort", "--topic", topic, "--partition", "3",
                              "--start-offset", "0"), f"topic '{topic}' has no partition 3")
    assert_clean_error(moldau(broker, "transactions", "abort", "--topic", "no-such-topic", "--partition", "0",
                              "--start-offset", "0"), "does not exist", "UNKNOWN_TOPIC_OR_PARTITION")


def _init_producer_id(client: RawClient, txn_id: str) -> Any:
    """InitProducerId for a transactional id, asked again while the transaction state topic is being created."""
    request = make(InitProducerIdRequest, transactional_id=txn_id, producer_id=-1, producer_epoch=-1,
                   transaction_timeout=datetime.timedelta(milliseconds=TXN_TIMEOUT_MS))
    deadline = time.monotonic() + DEADLINE_S
    while (init := client.request(request)).error_code == ErrorCode.coordinator_not_available:
        assert time.monotonic() < deadline, "the transaction coordinator did not become available"
        time.sleep(0.2)
    assert init.error_code == ErrorCode.none
    return init


def _hanging_write(bootstrap: str, txn_id: str, topic: str) -> tuple[int, int]:
    """A transactional write to partition 0 that its coordinator never hears of (no AddPartitionsToTxn).
    Returns the producer id and epoch."""
    with RawClient(bootstrap) as client:
        init = _init_producer_id(client, txn_id)
        builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=True,
                                            producer_id=init.producer_id, producer_epoch=init.producer_epoch,
                                            base_sequence=0, batch_size=2**20)
        builder.append(0, timestamp=int(time.time() * 1000), key=None, value=b"forgotten", headers=[])
        partition = make(produce_req.PartitionProduceData, index=0, records=bytes(builder.build()))
        request = make(produce_req.ProduceRequest, transactional_id=txn_id, acks=-1,
                       timeout=datetime.timedelta(seconds=5),
                       topic_data=(make(produce_req.TopicProduceData, name=topic, partition_data=(partition,)),))
        part = client.request(request).responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (ErrorCode.none, 0)
        return init.producer_id, init.producer_epoch


@pytest.mark.broker_config({"transaction.partition.verification.enable": "false"})
def test_find_hanging_and_abort_it(broker: Any, producers: list[Producer]) -> None:
    topic = _topic(broker, 2)
    pid, epoch = _hanging_write(broker.bootstrap, _txn_id(), topic)
    _open(broker.bootstrap, _txn_id(), topic, [1], producers)  # open, but its coordinator knows it: not hanging
    time.sleep(0.05)
    found = moldau(broker, "transactions", "find-hanging", "--max-transaction-timeout", "0")
    assert found.code == 0, found.err
    assert "2 open transactions, 1 hanging" in found.err
    rows = _rows(found.out)
    assert rows[0] == ["TOPIC", "PARTITION", "PRODUCER-ID", "PRODUCER-EPOCH", "COORDINATOR-EPOCH", "START-OFFSET",
                       "OPEN-FOR"]
    assert [row[:6] for row in rows[1:]] == [[topic, "0", str(pid), str(epoch), "-1", "0"]]
    by_broker = ok(broker, "transactions", "find-hanging", "--broker-id", "1", "--max-transaction-timeout", "0")
    assert [row[:6] for row in _rows(by_broker.out)] == [row[:6] for row in rows]
    assert ok(broker, "transactions", "find-hanging").out.strip() == "no hanging transactions"
    assert_clean_error(moldau(broker, "transactions", "find-hanging", "--broker-id", "7"), "no broker 7")

    ok(broker, "transactions", "abort", "--topic", topic, "--partition", "0", "--start-offset", "0")
    after = moldau(broker, "transactions", "find-hanging", "--max-transaction-timeout", "0")
    assert after.out.strip() == "no hanging transactions" and "1 open transaction, 0 hanging" in after.err
