"""Durability against a real broker process: restarts, crashes under load, idempotence and retention."""

from __future__ import annotations

import contextlib
import datetime
import struct
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from kafka.record.default_records import DefaultRecordBatchBuilder
from kio.schema.metadata.v12.request import MetadataRequest, MetadataRequestTopic
from kio.schema.produce.v9 import request as produce_req
from kio.schema.types import ProducerId, TopicName
from kio.static.primitive import Records, i16, i32, i32Timedelta

from moldau.protocol.errors import ErrorCode
from tests.support.broker_process import BrokerProcess
from tests.support.clients import ck_consume, ck_consume_to_end, ck_produce, create_topic
from tests.support.raw_client import RawClient


def test_restart_keeps_every_record(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "keep", partitions=3, config={"segment.bytes": "4096"})
    records = [{"key": str(i).encode(), "value": f"v{i}".encode() * 20} for i in range(2000)]
    # Batches must fit in a segment (else RECORD_LIST_TOO_LARGE, as in Kafka).
    acks = ck_produce(broker.bootstrap, "keep", records, **{"compression.type": "lz4", "batch.size": 3000})
    broker.restart()
    got = ck_consume(broker.bootstrap, "keep", len(records))
    assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(
        (p, o, r["value"]) for (p, o), r in zip(acks, records, strict=True))
    # The log goes on at the right offsets after the restart.
    more = ck_produce(broker.bootstrap, "keep", [{"key": b"0", "value": b"after"}])
    partition = more[0][0]
    assert more[0][1] == sum(1 for p, _ in acks if p == partition)


def test_a_topic_of_many_partitions_is_served_at_once_and_its_logs_made_as_they_are_used(
        broker: BrokerProcess) -> None:
    # Above the number of new logs a broker makes in the turn that applies the topic: these are made on first use.
    create_topic(broker.bootstrap, "wide", partitions=200)
    records = [{"key": str(i).encode(), "value": f"w{i}".encode()} for i in range(600)]
    acks = ck_produce(broker.bootstrap, "wide", records)
    written = {p for p, _ in acks}
    assert len(written) > 100
    logs = broker.data_dir / "logs"
    assert all((logs / f"wide-{p}" / "00000000000000000000.log").exists() for p in written)
    for clean in (True, False):
        if clean:
            broker.restart()
        else:
            broker.kill()
            broker.start()
        got = ck_consume(broker.bootstrap, "wide", len(records))
        assert sorted((r.partition, r.offset, r.value) for r in got) == sorted(
            (p, o, r["value"]) for (p, o), r in zip(acks, records, strict=True))
        empty = min(set(range(200)) - written)
        assert ck_produce(broker.bootstrap, "wide", [{"value": b"late", "partition": empty}]) == [(empty, 0)]
        written.add(empty)
        acks.append((empty, 0))
        records.append({"value": b"late"})


def test_restart_after_clean_shutdown_skips_recovery(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "clean", config={"segment.bytes": "2048"})
    ck_produce(broker.bootstrap, "clean", [{"value": b"x" * 100} for _ in range(500)], **{"batch.size": 1500})
    broker.restart()
    assert "clean shutdown, no recovery" in broker.log_tail(12), broker.log_tail(12)
    assert len(ck_consume(broker.bootstrap, "clean", 500)) == 500
    broker.kill()
    broker.start()
    assert "after an unclean shutdown" in broker.log_tail(12), broker.log_tail(12)
    assert len(ck_consume(broker.bootstrap, "clean", 500)) == 500


def _leader_epochs(broker: BrokerProcess, topic: str) -> dict[int, int]:
    with RawClient(broker.bootstrap) as client:
        answer = client.request(MetadataRequest(topics=(MetadataRequestTopic(topic_id=None, name=TopicName(topic)),),
                                                allow_auto_topic_creation=False,
                                                include_topic_authorized_operations=False))
    return {p.partition_index: p.leader_epoch for t in answer.topics for p in t.partitions if p.leader_id >= 0}


def test_a_clean_restart_reads_logs_on_first_use_and_keeps_leader_epochs(broker: BrokerProcess,
                                                                         tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "lazy", partitions=4)
    acks = ck_produce(broker.bootstrap, "lazy", [{"key": str(i).encode(), "value": b"v"} for i in range(200)])
    epochs = _leader_epochs(broker, "lazy")
    assert len(epochs) == 4
    broker.restart()
    assert "read on first use" in broker.log_tail(12), broker.log_tail(12)
    assert "lazy 3 " in (tmp_path / "logs" / "recovery-point-offset-checkpoint").read_text()
    # A lone broker back from a clean stop leads again without new elections: the same leader epochs.
    assert _leader_epochs(broker, "lazy") == epochs
    got = ck_consume(broker.bootstrap, "lazy", len(acks))
    assert sorted((r.partition, r.offset) for r in got) == sorted(acks)
    more = ck_produce(broker.bootstrap, "lazy", [{"key": b"0", "value": b"after"}])  # loads one log and writes it
    partition, offset = more[0]
    assert offset == sum(1 for p, _ in acks if p == partition)
    # kill -9 while some logs were never read: the next start recovers every log from its own files.
    broker.kill()
    broker.start()
    assert "after an unclean shutdown" in broker.log_tail(12), broker.log_tail(12)
    after = _leader_epochs(broker, "lazy")
    assert all(after[p] > epochs[p] for p in epochs), (after, epochs)  # a crash gives every leadership a new epoch
    got = ck_consume(broker.bootstrap, "lazy", len(acks) + 1)
    assert sorted((r.partition, r.offset) for r in got) == sorted([*acks, (partition, offset)])


def test_kill_9_recovery_rereads_only_segments_after_the_recovery_point(broker: BrokerProcess,
                                                                       tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "tail", config={"segment.bytes": "4096"})
    acks = ck_produce(broker.bootstrap, "tail", [{"value": b"r" * 100} for _ in range(400)], **{"batch.size": 1500})
    directory = tmp_path / "logs" / "tail-0"
    logs = sorted(directory.glob("*.log"))
    active_base = int(logs[-1].name.split(".")[0])
    # The periodic flush fsyncs rolled segments and moves the recovery point to the active segment.
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError, ValueError):
            if int((directory / "recovery-point").read_text()) == active_base:
                break
        time.sleep(0.1)
    assert int((directory / "recovery-point").read_text()) == active_base
    below = {p.name: (p.stat().st_mtime_ns, p.read_bytes()) for p in directory.glob("*.index")
             if int(p.name.split(".")[0]) < active_base}
    assert len(below) > 5
    active_size = logs[-1].stat().st_size
    broker.kill()
    with logs[-1].open("ab") as torn:  # what a crash in the middle of a write leaves: half a batch
        torn.write(struct.pack(">qi", 400, 5000) + b"\x00" * 40)
    broker.start()
    assert "recovery cut" in broker.log_tail(40), broker.log_tail(40)
    assert logs[-1].stat().st_size == active_size
    # Segments below the recovery point were neither re-validated nor had their indexes rebuilt.
    assert {p: (directory / p).stat().st_mtime_ns for p in below} == {p: m for p, (m, _) in below.items()}
    assert {p: (directory / p).read_bytes() for p in below} == {p: b for p, (_, b) in below.items()}
    got = ck_consume(broker.bootstrap, "tail", len(acks))
    assert [(r.offset, r.value) for r in got] == [(o, b"r" * 100) for _, o in acks]
    assert ck_produce(broker.bootstrap, "tail", [{"value": b"after"}])[0][1] == 400


def test_kill_9_during_produce_load_loses_no_acknowledged_record(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "crash", partitions=2, config={"segment.bytes": "65536"})
    acked: dict[bytes, tuple[int, int]] = {}
    stop = threading.Event()

    def produce_load() -> None:
        producer = Producer({"bootstrap.servers": broker.bootstrap, "acks": "all", "linger.ms": 2,
                             "message.timeout.ms": 3000, "enable.idempotence": True})

        def on_delivery(err: Any, msg: Any) -> None:
            if err is None:
                acked[msg.value()] = (msg.partition(), msg.offset())

        i = 0
        while not stop.is_set():
            try:
                producer.produce("crash", value=f"r{i}".encode(), key=str(i % 13).encode(), on_delivery=on_delivery)
                i += 1
            except BufferError:
                producer.poll(0.05)
            producer.poll(0)
        producer.flush(5)

    thread = threading.Thread(target=produce_load)
    thread.start()
    deadline = time.monotonic() + 30  # kill mid-load, once enough is acknowledged to prove something
    while len(acked) < 2000 and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.2)
    broker.kill()
    time.sleep(0.5)
    stop.set()
    thread.join(30)
    assert len(acked) > 1000, f"the load produced too little to prove anything ({len(acked)} acks)"
    broker.start()
    # Read to the end, not `len(acked)` records: the log may also hold records written but never acknowledged.
    got = ck_consume_to_end(broker.bootstrap, "crash")
    stored = {(r.partition, r.offset): r.value for r in got}
    lost = [(v, pos) for v, pos in acked.items() if pos not in stored]
    moved = [(v, pos, stored[pos]) for v, pos in acked.items() if pos in stored and stored[pos] != v]
    assert not lost, f"{len(lost)} acknowledged records lost, e.g. {lost[:5]}"
    assert not moved, f"{len(moved)} acknowledged positions hold another record, e.g. {moved[:5]}"
    values = [r.value for r in got]
    assert len(values) == len(set(values)), "a record was written twice"


def idempotent_batch(producer_id: int, epoch: int, sequence: int, values: list[bytes]) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=False,
                                        producer_id=producer_id, producer_epoch=epoch, base_sequence=sequence,
                                        batch_size=2**20)
    for i, value in enumerate(values):
        builder.append(i, timestamp=None, key=None, value=value, headers=[])
    return bytes(builder.build())


def produce(client: RawClient, topic: str, records: bytes) -> tuple[ErrorCode, int]:
    request = produce_req.ProduceRequest(
        transactional_id=None, acks=i16(-1), timeout=i32Timedelta.parse(datetime.timedelta(seconds=5)),
        topic_data=(produce_req.TopicProduceData(
            name=TopicName(topic), partition_data=(produce_req.PartitionProduceData(index=i32(0),
                                                                                    records=Records(records)),)),))
    part = client.request(request).responses[0].partition_responses[0]
    return part.error_code, part.base_offset


def test_idempotent_retry_is_not_written_twice_even_across_restart(broker: BrokerProcess) -> None:
    from kio.schema.init_producer_id.v4.request import InitProducerIdRequest

    create_topic(broker.bootstrap, "idem")
    with RawClient(broker.bootstrap) as client:
        init = client.request(InitProducerIdRequest(transactional_id=None,
                                                    transaction_timeout=i32Timedelta.parse(datetime.timedelta(0)),
                                                    producer_id=ProducerId(-1), producer_epoch=i16(-1)))
        pid = init.producer_id
        assert init.error_code == ErrorCode.none and pid >= 0
        first = idempotent_batch(pid, 0, 0, [b"a", b"b"])
        assert produce(client, "idem", first) == (ErrorCode.none, 0)
        assert produce(client, "idem", first) == (ErrorCode.none, 0)  # the retry: same offset, not appended
        assert produce(client, "idem", idempotent_batch(pid, 0, 2, [b"c"])) == (ErrorCode.none, 2)
        code, _ = produce(client, "idem", idempotent_batch(pid, 0, 7, [b"gap"]))
        assert code == ErrorCode.out_of_order_sequence_number
    broker.kill()
    broker.start()
    with RawClient(broker.bootstrap) as client:
        # Producer state was rebuilt after the crash: the retried batch is still recognised.
        assert produce(client, "idem", idempotent_batch(pid, 0, 2, [b"c"])) == (ErrorCode.none, 2)
        assert produce(client, "idem", idempotent_batch(pid, 0, 3, [b"d"])) == (ErrorCode.none, 3)
        # A fresh InitProducerId never reuses an id handed out before the crash.
        again = client.request(InitProducerIdRequest(transactional_id=None,
                                                     transaction_timeout=i32Timedelta.parse(datetime.timedelta(0)),
                                                     producer_id=ProducerId(-1), producer_epoch=i16(-1)))
        assert again.producer_id > pid
    assert [r.value for r in ck_consume(broker.bootstrap, "idem", 4)] == [b"a", b"b", b"c", b"d"]


def test_idempotent_confluent_producer_through_restarts_has_no_duplicates(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "idem-ck")
    values = [f"m{i}".encode() for i in range(3000)]
    producer = Producer({"bootstrap.servers": broker.bootstrap, "enable.idempotence": True, "linger.ms": 1,
                         "message.timeout.ms": 60000, "retry.backoff.ms": 100})
    failures: list[Any] = []
    for i, value in enumerate(values):
        producer.produce("idem-ck", value=value,
                         on_delivery=lambda err, msg: failures.append(err) if err is not None else None)
        producer.poll(0)
        if i in (1000, 2000):
            broker.kill()
            broker.start()
    assert producer.flush(60) == 0
    assert not failures
    got = [r.value for r in ck_consume(broker.bootstrap, "idem-ck", len(values))]
    assert got == values  # every value once, in order


@pytest.mark.broker_config({"log.retention.check.interval.ms": "300"})
def test_time_retention_removes_old_segments(broker: BrokerProcess) -> None:
    create_topic(broker.bootstrap, "old", config={"segment.bytes": "1024", "retention.ms": "60000"})
    hour_ago = int(time.time() * 1000) - 3_600_000
    ck_produce(broker.bootstrap, "old", [{"value": b"o" * 200, "timestamp": hour_ago} for _ in range(50)],
               **{"linger.ms": 0, "batch.num.messages": 1})
    ck_produce(broker.bootstrap, "old", [{"value": b"new" * 50} for _ in range(10)],
               **{"linger.ms": 0, "batch.num.messages": 1})
    # Whole segments go: the one segment holding both old and new records stays, so up to a few old remain.
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        first = ck_consume(broker.bootstrap, "old", 1, start=-2, timeout_s=15)[0]
        if first.offset > 40:
            break
        time.sleep(0.5)
    assert 40 < first.offset <= 50, f"expired segments were not deleted (log starts at {first.offset})"
    rest = ck_consume(broker.bootstrap, "old", 60 - first.offset, start=-2, timeout_s=15)
    assert [r.offset for r in rest] == list(range(first.offset, 60))


@pytest.mark.broker_config({"log.retention.check.interval.ms": "300"})
def test_size_retention_keeps_the_log_bounded(broker: BrokerProcess, tmp_path: Path) -> None:
    create_topic(broker.bootstrap, "big", config={"segment.bytes": "2000", "retention.bytes": "6000"})
    ck_produce(broker.bootstrap, "big", [{"value": bytes(100)} for _ in range(300)],
               **{"linger.ms": 0, "batch.num.messages": 1})
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        files = list((tmp_path / "logs" / "big-0").glob("*.log"))
        size = sum(f.stat().st_size for f in files)
        if size <= 6000 + 2000:
            break
        time.sleep(0.3)
    assert size <= 8000, f"log is {size} bytes over {len(files)} segments"
    low = ck_consume(broker.bootstrap, "big", 1, timeout_s=10)[0].offset
    assert low > 0


def test_topic_ids_survive_restart_and_recreate_gets_new_id(broker: BrokerProcess) -> None:
    from confluent_kafka.admin import AdminClient

    name = f"ids-{uuid.uuid4().hex[:6]}"
    create_topic(broker.bootstrap, name)
    ck_produce(broker.bootstrap, name, [{"value": b"x"}])

    def topic_id() -> str:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        from confluent_kafka import TopicCollection

        desc = admin.describe_topics(TopicCollection([name]))[name].result(timeout=10)
        return str(desc.topic_id)

    before = topic_id()
    broker.restart()
    assert topic_id() == before
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_topics([name])[name].result(timeout=10)
    create_topic(broker.bootstrap, name)
    assert topic_id() != before
    assert ck_consume(broker.bootstrap, name, 1, timeout_s=3) == []  # old data is gone with the old topic


def test_kill_9_during_commit_load_loses_no_acknowledged_commit(broker: BrokerProcess) -> None:
    """Concurrent synchronous committers share appends (group commit); whatever was acknowledged before the crash
    is committed after it."""
    create_topic(broker.bootstrap, "commits-crash", partitions=4)
    groups = [f"crash-group-{i % 2}" for i in range(4)]  # two committers per group, one partition each
    acknowledged: dict[tuple[str, int], int] = {}
    stop = threading.Event()

    def commit_load(index: int) -> None:
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": groups[index],
                             "enable.auto.commit": False, "log_level": 0})
        offset = 0
        while not stop.is_set():
            try:
                consumer.commit(offsets=[TopicPartition("commits-crash", index, offset + 1)], asynchronous=False)
            except KafkaException:
                break
            offset += 1
            acknowledged[(groups[index], index)] = offset
        consumer.close()

    threads = [threading.Thread(target=commit_load, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 30
    while sum(acknowledged.values()) < 2000 and time.monotonic() < deadline:
        time.sleep(0.05)
    broker.kill()
    stop.set()
    # Nothing can be acknowledged while the broker is down; a commit in flight may finish after the restart.
    before_crash = dict(acknowledged)
    assert len(before_crash) == 4 and sum(before_crash.values()) > 500, f"too few commits: {before_crash}"
    broker.start()
    for (group, partition), offset in before_crash.items():
        consumer = Consumer({"bootstrap.servers": broker.bootstrap, "group.id": group})
        try:
            (found,) = consumer.committed([TopicPartition("commits-crash", partition)], timeout=30)
        finally:
            consumer.close()
        assert found.offset >= offset, f"{group} partition {partition}: acknowledged {offset}, found {found.offset}"
    for thread in threads:
        thread.join(60)
