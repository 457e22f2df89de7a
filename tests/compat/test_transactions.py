"""Transactions (exactly-once, KIP-98) with real clients against a real broker process.

confluent-kafka, kafka-python and aiokafka producers commit and abort; read_committed consumers see committed
records only and stop at the first open transaction (the last stable offset); a consume-transform-produce
application killed mid-transaction and restarted produces every transform exactly once; a second producer with
the same transactional id fences the first; transactions survive broker restarts and crashes; an abandoned
transaction is aborted once its timeout passes.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from aiokafka import AIOKafkaConsumer, AIOKafkaProducer
from aiokafka.structs import OffsetAndMetadata as AioOffsetAndMetadata
from aiokafka.structs import TopicPartition as AioTopicPartition
from confluent_kafka import Consumer, IsolationLevel, KafkaError, KafkaException, Producer, TopicPartition
from kafka import KafkaConsumer, KafkaProducer
from kafka import TopicPartition as KpTopicPartition
from kafka.admin import KafkaAdminClient
from kafka.structs import OffsetAndMetadata

from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_produce, create_topic
from tests.support.groups import unique
from tests.support.polling import wait_until
from tests.support.transactions import (
    READ_COMMITTED,
    READ_UNCOMMITTED,
    ScriptProcess,
    group_offsets,
    latest_offsets,
    read_to_end,
    txn_producer,
    values,
)

pytestmark = pytest.mark.broker_config({
    "offsets.topic.num.partitions": "3",
    "transaction.state.log.num.partitions": "3",
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "500",
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "500",
})

COMMITTED = IsolationLevel.READ_COMMITTED
UNCOMMITTED = IsolationLevel.READ_UNCOMMITTED


def stable_equals_high_watermark(bootstrap: str, topic: str, partitions: int) -> dict[int, int] | None:
    """The high watermarks, once ListOffsets read_committed (the last stable offset) has reached them."""
    high = latest_offsets(bootstrap, topic, partitions, UNCOMMITTED)
    return high if latest_offsets(bootstrap, topic, partitions, COMMITTED) == high else None


def wait_all_decided(bootstrap: str, topic: str, partitions: int, timeout_s: float = 15.0) -> dict[int, int]:
    return wait_until(lambda: stable_equals_high_watermark(bootstrap, topic, partitions), timeout_s,
                      lambda: f"LSO of {topic} {latest_offsets(bootstrap, topic, partitions, COMMITTED)} "
                              f"!= high watermark {latest_offsets(bootstrap, topic, partitions, UNCOMMITTED)}")


def produce_in_txn(producer: Producer, topic: str, vals: list[bytes], partitions: int = 1) -> None:
    """Produce `vals` (round-robin over the partitions) in the producer's open transaction; all acknowledged."""
    failures: list[Any] = []
    for i, value in enumerate(vals):
        producer.produce(topic, value=value, partition=i % partitions,
                         on_delivery=lambda err, _msg: failures.append(err) if err is not None else None)
    assert producer.flush(30) == 0
    assert not failures, failures[:3]


FENCING = (KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH)


def fatal_or_fencing(exc: KafkaException) -> bool:
    error: KafkaError = exc.args[0]
    return bool(error.fatal()) or error.code() in FENCING


def admin_listing(bootstrap: str) -> dict[int, list[Any]]:
    """ListTransactions through kafka-python's admin client: per broker, its transactions."""
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        listing: dict[int, list[Any]] = admin.list_transactions()
        return listing
    finally:
        admin.close()


@pytest.fixture
def scripts() -> Iterator[list[ScriptProcess]]:
    started: list[ScriptProcess] = []
    yield started
    for script in started:
        script.cleanup()


# -- confluent-kafka: consume-transform-produce killed mid-transaction ------------------------------------------


def test_consume_transform_produce_killed_mid_transaction_is_exactly_once(
        broker: BrokerProcess, tmp_path: Path, scripts: list[ScriptProcess]) -> None:
    source, sink, group, txn_id = unique("in"), unique("out"), unique("g"), unique("txn")
    create_topic(broker.bootstrap, source, partitions=4)
    create_topic(broker.bootstrap, sink, partitions=3)
    count = 1200
    ck_produce(broker.bootstrap, source, [{"key": f"k{i}".encode(), "value": f"v{i}".encode(), "partition": i % 4}
                                          for i in range(count)])
    ends = latest_offsets(broker.bootstrap, source, 4, UNCOMMITTED)
    assert sum(ends.values()) == count

    def run(*extra: str) -> ScriptProcess:
        script = ScriptProcess("tests.support.txn_processor",
                               ["process", "--bootstrap", broker.bootstrap, "--input", source, "--output", sink,
                                "--group", group, "--txn-id", txn_id, "--batch", "50", *extra],
                               tmp_path / "processor.stderr")
        scripts.append(script)
        return script

    # Killed twice with a transaction half done: once with its records acknowledged, once also with the
    # consumed offsets sent to the transaction. Each restart fences the dead one and aborts what it left open.
    aborted = 0
    for stop_at in ("produced", "offsets"):
        script = run("--stop-after", "3", "--stop-at", stop_at)
        line = script.wait_for_line("MID-TXN", 60)
        aborted += int(line.split("produced=")[1].split()[0])
        script.kill()
    assert aborted > 0
    last = run()
    last.wait_for_line("DONE", 90)
    assert last.wait(30) == 0

    sink_ends = wait_all_decided(broker.bootstrap, sink, 3)
    expected = sorted(f"T(v{i})".encode() for i in range(count))
    committed = read_to_end(broker.bootstrap, sink, READ_COMMITTED, sink_ends)
    assert values(committed) == expected, (
        f"{len(committed)} read_committed, {len(set(values(committed)))} distinct, of {count}")
    # What the killed runs produced was acknowledged and is stored, but aborted: only read_uncommitted sees it.
    assert len(read_to_end(broker.bootstrap, sink, READ_UNCOMMITTED, sink_ends)) == count + aborted
    for record in committed:
        assert record.key is not None and record.value == b"T(v" + record.key[1:] + b")"

    assert group_offsets(broker.bootstrap, group, source, 4) == ends


# -- kafka-python -----------------------------------------------------------------------------------------------


def kp_read_to_end(bootstrap: str, topic: str, partitions: int, isolation: str,
                   timeout_s: float = 20.0) -> list[bytes]:
    """Values a kafka-python consumer with `isolation` reads until its position passes each high watermark."""
    ends = latest_offsets(bootstrap, topic, partitions, UNCOMMITTED)
    consumer = KafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                             auto_offset_reset="earliest")
    try:
        tps = [KpTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        consumer.seek_to_beginning()
        got: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp.partition] for tp in tps):
            assert time.monotonic() < deadline, f"{isolation} stopped at {[consumer.position(tp) for tp in tps]}"
            for records in consumer.poll(timeout_ms=200).values():
                got += [r.value for r in records]
        return sorted(got)
    finally:
        consumer.close()


def test_kafka_python_aborted_transaction_is_invisible_to_read_committed(broker: BrokerProcess) -> None:
    topic = unique("kp-txn")
    create_topic(broker.bootstrap, topic, partitions=2)
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("kp"), linger_ms=5)
    try:
        producer.init_transactions()
        for txn, commit in (("c1", True), ("a1", False), ("c2", True), ("a2", False)):
            producer.begin_transaction()
            for i in range(6):
                producer.send(topic, value=f"{txn}-{i}".encode(), partition=i % 2)
            producer.flush()
            if commit:
                producer.commit_transaction()
            else:
                producer.abort_transaction()
    finally:
        producer.close()
    committed = sorted(f"{txn}-{i}".encode() for txn in ("c1", "c2") for i in range(6))
    everything = sorted(f"{txn}-{i}".encode() for txn in ("c1", "a1", "c2", "a2") for i in range(6))
    wait_all_decided(broker.bootstrap, topic, 2)
    assert kp_read_to_end(broker.bootstrap, topic, 2, READ_COMMITTED) == committed
    assert kp_read_to_end(broker.bootstrap, topic, 2, READ_UNCOMMITTED) == everything


def test_kafka_python_consume_transform_produce_with_an_aborted_round(broker: BrokerProcess) -> None:
    source, sink, group = unique("kp-in"), unique("kp-out"), unique("kp-g")
    create_topic(broker.bootstrap, source, partitions=2)
    create_topic(broker.bootstrap, sink, partitions=2)
    count = 60
    ck_produce(broker.bootstrap, source, [{"value": f"v{i}".encode(), "partition": i % 2} for i in range(count)])
    ends = latest_offsets(broker.bootstrap, source, 2, UNCOMMITTED)
    consumer = KafkaConsumer(source, bootstrap_servers=broker.bootstrap, group_id=group,
                             isolation_level="read_committed", enable_auto_commit=False,
                             auto_offset_reset="earliest", max_poll_records=15, session_timeout_ms=6000,
                             heartbeat_interval_ms=500)
    # The source's partitions known before the first join (see test_groups_migration.py for why).
    assert source in consumer.topics()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("kp-ctp"), linger_ms=5)
    try:
        producer.init_transactions()
        rounds = aborted = 0
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            batch = [r for records in consumer.poll(timeout_ms=300).values() for r in records]
            if not batch:
                done = all((consumer.committed(KpTopicPartition(source, p)) or 0) >= ends[p] for p in range(2))
                if done:
                    break
                continue
            producer.begin_transaction()
            offsets: dict[KpTopicPartition, OffsetAndMetadata] = {}
            for r in batch:
                producer.send(sink, value=b"T(" + r.value + b")", partition=r.partition)
                offsets[KpTopicPartition(r.topic, r.partition)] = OffsetAndMetadata(r.offset + 1, "", -1)
            producer.send_offsets_to_transaction(offsets, consumer.group_metadata())
            rounds += 1
            if rounds == 2:
                # Abort, and go back to what the group committed: those records are processed again. (Flushed
                # first: an abort drops what the producer has not sent yet, and these must reach the log.)
                producer.flush()
                producer.abort_transaction()
                aborted += len(batch)
                for tp in offsets:
                    committed_offset = consumer.committed(tp)
                    consumer.seek(tp, committed_offset if committed_offset is not None else 0)
            else:
                producer.commit_transaction()
        else:
            raise AssertionError("the group's committed offsets did not reach the input's end")
    finally:
        producer.close()
        consumer.close()
    assert aborted > 0
    wait_all_decided(broker.bootstrap, sink, 2)
    assert kp_read_to_end(broker.bootstrap, sink, 2, READ_COMMITTED) == sorted(
        f"T(v{i})".encode() for i in range(count))
    assert len(kp_read_to_end(broker.bootstrap, sink, 2, READ_UNCOMMITTED)) == count + aborted
    assert group_offsets(broker.bootstrap, group, source, 2) == ends


# -- aiokafka ---------------------------------------------------------------------------------------------------


async def aio_read_to_end(bootstrap: str, topic: str, partitions: int, isolation: str,
                          ends: dict[int, int], timeout_s: float = 20.0) -> list[bytes]:
    consumer = AIOKafkaConsumer(bootstrap_servers=bootstrap, isolation_level=isolation, enable_auto_commit=False,
                                auto_offset_reset="earliest")
    await consumer.start()
    try:
        tps = [AioTopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(tps)
        await consumer.seek_to_beginning(*tps)
        got: list[bytes] = []
        deadline = time.monotonic() + timeout_s
        while any([await consumer.position(tp) < ends[tp.partition] for tp in tps]):
            assert time.monotonic() < deadline, f"{isolation} stopped at {[await consumer.position(tp) for tp in tps]}"
            for records in (await consumer.getmany(timeout_ms=200)).values():
                got += [r.value for r in records if r.value is not None]
        return sorted(got)
    finally:
        await consumer.stop()


def test_aiokafka_commit_abort_and_offsets_in_transactions(broker: BrokerProcess) -> None:
    topic, source, group = unique("aio-txn"), unique("aio-in"), unique("aio-g")
    create_topic(broker.bootstrap, topic, partitions=2)
    create_topic(broker.bootstrap, source, partitions=1)
    ck_produce(broker.bootstrap, source, [{"value": f"s{i}".encode()} for i in range(10)])

    class Abort(Exception):
        pass

    async def scenario() -> None:
        producer = AIOKafkaProducer(bootstrap_servers=broker.bootstrap, transactional_id=unique("aio"))
        await producer.start()
        try:
            async with producer.transaction():
                for i in range(4):
                    await producer.send(topic, value=f"c1-{i}".encode(), partition=i % 2)
                await producer.send_offsets_to_transaction({AioTopicPartition(source, 0): AioOffsetAndMetadata(4, "")},
                                                           group)
            with pytest.raises(Abort):
                async with producer.transaction():
                    for i in range(4):
                        await producer.send_and_wait(topic, value=f"a1-{i}".encode(), partition=i % 2)
                    await producer.send_offsets_to_transaction(
                        {AioTopicPartition(source, 0): AioOffsetAndMetadata(9, "")}, group)
                    raise Abort
            async with producer.transaction():
                for i in range(4):
                    await producer.send(topic, value=f"c2-{i}".encode(), partition=i % 2)
        finally:
            await producer.stop()
        ends = wait_all_decided(broker.bootstrap, topic, 2)
        assert await aio_read_to_end(broker.bootstrap, topic, 2, READ_COMMITTED, ends) == sorted(
            f"{txn}-{i}".encode() for txn in ("c1", "c2") for i in range(4))
        assert await aio_read_to_end(broker.bootstrap, topic, 2, READ_UNCOMMITTED, ends) == sorted(
            f"{txn}-{i}".encode() for txn in ("c1", "a1", "c2") for i in range(4))
        consumer = AIOKafkaConsumer(bootstrap_servers=broker.bootstrap, group_id=group,
                                    isolation_level="read_committed", enable_auto_commit=False)
        await consumer.start()
        try:
            # The aborted transaction's offsets (9) were discarded; the committed one's (4) stand.
            assert await consumer.committed(AioTopicPartition(source, 0)) == 4
        finally:
            await consumer.stop()

    asyncio.run(scenario())


# -- fencing ----------------------------------------------------------------------------------------------------


def test_second_producer_with_same_transactional_id_fences_the_first(broker: BrokerProcess) -> None:
    topic, txn_id = unique("fence"), unique("zombie")
    create_topic(broker.bootstrap, topic, partitions=2)
    reported: list[KafkaError] = []  # the fatal error reaches error_cb (without one, poll and flush raise it)
    zombie = txn_producer(broker.bootstrap, txn_id, error_cb=reported.append)
    zombie.begin_transaction()
    produce_in_txn(zombie, topic, [f"zombie-{i}".encode() for i in range(4)], partitions=2)
    # While the zombie's transaction is open, nothing of it is stable.
    assert latest_offsets(broker.bootstrap, topic, 2, COMMITTED) == {0: 0, 1: 0}

    successor = txn_producer(broker.bootstrap, txn_id)  # bumps the epoch and aborts the zombie's transaction

    # (No delivery callback here: confluent-kafka raises the fatal error inside it, as a SystemError.)
    with pytest.raises(KafkaException) as raised:
        zombie.produce(topic, value=b"zombie-late", partition=0)
        zombie.flush(10)
        zombie.commit_transaction(10)
    assert fatal_or_fencing(raised.value), raised.value
    assert all(e.fatal() or e.code() in FENCING for e in reported), reported

    successor.begin_transaction()
    produce_in_txn(successor, topic, [f"successor-{i}".encode() for i in range(4)], partitions=2)
    successor.commit_transaction(30)
    successor.begin_transaction()
    produce_in_txn(successor, topic, [b"successor-aborted"])
    successor.abort_transaction(30)

    ends = wait_all_decided(broker.bootstrap, topic, 2)
    assert values(read_to_end(broker.bootstrap, topic, READ_COMMITTED, ends)) == sorted(
        f"successor-{i}".encode() for i in range(4))
    uncommitted = values(read_to_end(broker.bootstrap, topic, READ_UNCOMMITTED, ends))
    assert b"zombie-late" not in uncommitted, "a fenced producer's write was appended"
    assert set(uncommitted) >= {f"zombie-{i}".encode() for i in range(4)} | {b"successor-aborted"}


# -- broker restart and crash with a transaction open -------------------------------------------------------------


@pytest.mark.parametrize("crash", [False, True], ids=["clean-restart", "sigkill"])
def test_transaction_open_across_broker_restart_is_completed_or_aborted(broker: BrokerProcess, crash: bool) -> None:
    topic = unique("restart-txn")
    create_topic(broker.bootstrap, topic, partitions=2)
    producer = txn_producer(broker.bootstrap, unique("restart"), **{"transaction.timeout.ms": 60000})
    producer.begin_transaction()
    before = [f"before-{i}".encode() for i in range(10)]
    produce_in_txn(producer, topic, before, partitions=2)
    producer.commit_transaction(30)
    producer.begin_transaction()
    aborted_before = [f"aborted-{i}".encode() for i in range(6)]  # the restart must not forget it was aborted
    produce_in_txn(producer, topic, aborted_before, partitions=2)
    producer.abort_transaction(30)

    producer.begin_transaction()
    first_half = [f"open-a-{i}".encode() for i in range(10)]
    produce_in_txn(producer, topic, first_half, partitions=2)
    stable = latest_offsets(broker.bootstrap, topic, 2, COMMITTED)
    assert stable == {0: 10, 1: 10}  # 5 committed and their marker (0-5), 3 aborted and theirs (6-9)
    if crash:
        broker.kill()
        broker.start()
    else:
        broker.restart()
    # The open transaction is still open after the restart: the last stable offset stays at its start.
    assert wait_until(lambda: latest_offsets(broker.bootstrap, topic, 2, COMMITTED), 15,
                      "ListOffsets after the restart") == stable
    second_half = [f"open-b-{i}".encode() for i in range(10)]
    outcome = "committed"
    try:
        produce_in_txn(producer, topic, second_half, partitions=2)
        producer.commit_transaction(60)
    except (KafkaException, AssertionError) as e:
        if isinstance(e, KafkaException):
            error: KafkaError = e.args[0]
            assert not error.fatal(), f"fatal error after the broker restart: {error}"
        producer.abort_transaction(60)
        outcome = "aborted"

    print(f"the transaction open across the broker's {'crash' if crash else 'restart'} was {outcome}")
    # The producer goes on after either outcome.
    producer.begin_transaction()
    after = [f"after-{i}".encode() for i in range(4)]
    produce_in_txn(producer, topic, after, partitions=2)
    producer.commit_transaction(30)

    ends = wait_all_decided(broker.bootstrap, topic, 2)
    expected = before + after + (first_half + second_half if outcome == "committed" else [])
    got = values(read_to_end(broker.bootstrap, topic, READ_COMMITTED, ends))
    assert got == sorted(expected), f"outcome {outcome}: read_committed read {len(got)} of {len(expected)}"
    uncommitted = values(read_to_end(broker.bootstrap, topic, READ_UNCOMMITTED, ends))
    assert set(uncommitted) >= set(before + first_half + after), "an acknowledged record was lost"
    assert len(uncommitted) == len(set(uncommitted)), "a record was written twice"


# -- transaction timeout ----------------------------------------------------------------------------------------


def test_abandoned_transaction_is_aborted_after_its_timeout(
        broker: BrokerProcess, tmp_path: Path, scripts: list[ScriptProcess]) -> None:
    topic, txn_id = unique("abandoned"), unique("abandoned")
    create_topic(broker.bootstrap, topic, partitions=1)
    timeout_ms = 6000
    script = ScriptProcess("tests.support.txn_processor",
                           ["abandon", "--bootstrap", broker.bootstrap, "--topic", topic, "--txn-id", txn_id,
                            "--timeout-ms", str(timeout_ms), "--count", "5"], tmp_path / "abandon.stderr")
    scripts.append(script)
    script.wait_for_line("OPEN", 30)
    opened = time.monotonic()
    script.kill()
    later = [f"later-{i}".encode() for i in range(3)]
    ck_produce(broker.bootstrap, topic, [{"value": v} for v in later])
    stuck = latest_offsets(broker.bootstrap, topic, 1, COMMITTED)
    assert time.monotonic() - opened < timeout_ms / 1000 - 1, "too slow to observe the transaction still open"
    assert stuck == {0: 0}, "the last stable offset moved past a transaction that is still open"

    ends = wait_all_decided(broker.bootstrap, topic, 1, timeout_s=timeout_ms / 1000 + 10)
    assert ends == {0: 9}  # 5 abandoned + 3 later + the abort marker
    assert values(read_to_end(broker.bootstrap, topic, READ_COMMITTED, ends)) == sorted(later)
    assert len(read_to_end(broker.bootstrap, topic, READ_UNCOMMITTED, ends)) == 8

    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        description = wait_until(lambda: (d := admin.describe_transactions([txn_id])[txn_id]).state.value ==
                                 "CompleteAbort" and d, 10, lambda: f"{admin.describe_transactions([txn_id])}")
    finally:
        admin.close()
    assert description.topic_partitions == set()
    assert description.producer_epoch == 1, f"the timed-out transaction's producer was not fenced: {description}"
    assert description.transaction_timeout_ms == timeout_ms
    listed = {t.transactional_id: t.state.value for ts in admin_listing(broker.bootstrap).values() for t in ts}
    assert listed.get(txn_id) == "CompleteAbort", listed


# -- the last stable offset -------------------------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_read_committed_consumer_waits_at_an_open_transaction(broker: BrokerProcess, commit: bool) -> None:
    topic = unique("lso")
    create_topic(broker.bootstrap, topic, partitions=1)
    producer = txn_producer(broker.bootstrap, unique("lso"))
    producer.begin_transaction()
    produce_in_txn(producer, topic, [b"txn-0", b"txn-1", b"txn-2"])
    ck_produce(broker.bootstrap, topic, [{"value": f"plain-{i}".encode()} for i in range(3)])  # offsets 3-5
    assert latest_offsets(broker.bootstrap, topic, 1, COMMITTED) == {0: 0}
    assert latest_offsets(broker.bootstrap, topic, 1, UNCOMMITTED) == {0: 6}
    assert [r.value for r in read_to_end(broker.bootstrap, topic, READ_UNCOMMITTED)] == [
        b"txn-0", b"txn-1", b"txn-2", b"plain-0", b"plain-1", b"plain-2"]

    consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": "unused-assign-only",
                         "isolation.level": "read_committed", "enable.auto.commit": False,
                         "enable.partition.eof": False, "fetch.wait.max.ms": 100})
    try:
        consumer.assign([TopicPartition(topic, 0, -2)])
        blocked_until = time.monotonic() + 2.0  # a negative check: nothing may arrive during this window
        while time.monotonic() < blocked_until:
            early = consumer.consume(num_messages=100, timeout=0.2)
            assert not early, f"read_committed got {[m.value() for m in early]} past an open transaction"
        decided = time.monotonic()
        if commit:
            producer.commit_transaction(30)
        else:
            producer.abort_transaction(30)
        got: list[bytes] = []
        want = 6 if commit else 3
        deadline = time.monotonic() + 15
        while len(got) < want and time.monotonic() < deadline:
            for msg in consumer.consume(num_messages=100, timeout=0.2):
                assert msg.error() is None, msg.error()
                got.append(msg.value() or b"")
        waited = time.monotonic() - decided
    finally:
        consumer.close()
    expected = ([b"txn-0", b"txn-1", b"txn-2"] if commit else []) + [b"plain-0", b"plain-1", b"plain-2"]
    assert got == expected
    assert waited < 10, f"read_committed consumer got the records {waited:.1f}s after the transaction ended"
    assert latest_offsets(broker.bootstrap, topic, 1, COMMITTED) == {0: 7}
