"""The coordinators' batch encoder gives exactly the bytes of kafka-python's generic builder, which it replaced, and
compresses as Kafka's readers expect; loads read the log in chunks of the load buffer size."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from moldau.clock import ManualClock
from moldau.config import BrokerConfig
from moldau.coordinator.group.coordinator import GroupCoordinator
from moldau.coordinator.group.settings import CoordinatorSettings
from moldau.coordinator.internal_topic import ReplicaLog, build_batch, own_batch, read_in_chunks
from moldau.coordinator.share.coordinator import ShareCoordinator, ShareStateSettings
from moldau.coordinator.txn.coordinator import TransactionCoordinator, TxnSettings
from moldau.metadata.image import MetadataImage
from moldau.protocol.record_batch import split_batches
from moldau.protocol.record_codec import decode_batch, whole_batches
from moldau.replication.replica_manager import ReplicaManager
from moldau.storage.log import PartitionLog
from moldau.storage.log_config import LogConfig
from moldau.storage.log_manager import LogManager

_records = st.lists(st.tuples(st.binary(max_size=300), st.none() | st.binary(max_size=300)), min_size=1,
                    max_size=70)


def reference(records: list[tuple[bytes, bytes | None]], now_ms: int, producer_id: int, producer_epoch: int,
              transactional: bool) -> bytes:
    builder = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=transactional,
                                        producer_id=producer_id, producer_epoch=producer_epoch, base_sequence=-1,
                                        batch_size=2**31 - 1)
    for i, (key, value) in enumerate(records):
        builder.append(i, now_ms, key, value, [])
    return bytes(builder.build())


@settings(max_examples=200, deadline=None)
@given(records=_records, now_ms=st.integers(0, 2**42), producer=st.integers(-1, 2**40),
       epoch=st.integers(-1, 2**15 - 1), transactional=st.booleans())
def test_the_batch_is_byte_for_byte_the_generic_builders(records: list[tuple[bytes, bytes | None]], now_ms: int,
                                                        producer: int, epoch: int, transactional: bool) -> None:
    built = build_batch(records, now_ms, producer_id=producer, producer_epoch=epoch, transactional=transactional)
    assert built == reference(records, now_ms, producer, epoch, transactional)
    ((header, _),) = split_batches(built)  # and the broker's own checks (sizes, CRC) accept it
    assert header.records_count == len(records)


@settings(max_examples=200, deadline=None)
@given(records=_records, now_ms=st.integers(0, 2**42))
def test_own_batch_reads_a_built_batch_as_the_client_checks_do(records: list[tuple[bytes, bytes | None]],
                                                                now_ms: int) -> None:
    built = build_batch(records, now_ms)
    own = own_batch(built)
    assert own is not None
    ((header, view),) = split_batches(built)
    assert own[0] == header and bytes(own[1]) == bytes(view) == built


@settings(max_examples=100, deadline=None)
@given(records=_records, now_ms=st.integers(0, 2**42), producer=st.integers(0, 2**40),
       transactional=st.booleans())
def test_anything_but_one_plain_built_batch_goes_through_the_checks(records: list[tuple[bytes, bytes | None]],
                                                                    now_ms: int, producer: int,
                                                                    transactional: bool) -> None:
    plain = build_batch(records, now_ms)
    assert own_batch(build_batch(records, now_ms, producer_id=producer, transactional=transactional)) is None
    assert own_batch(plain + plain) is None  # two batches
    assert own_batch(plain[:-1]) is None  # truncated
    assert own_batch(plain[:40]) is None  # not even a header
    assert own_batch(build_batch(records, now_ms, transactional=True)) is None  # attributes other than 0


@settings(max_examples=60, deadline=None)
@given(records=_records, now_ms=st.integers(0, 2**42), codec=st.integers(1, 4), producer=st.integers(-1, 2**40),
       transactional=st.booleans())
def test_a_compressed_batch_holds_the_same_records_for_kafkas_reader_too(records: list[tuple[bytes, bytes | None]],
                                                                        now_ms: int, codec: int, producer: int,
                                                                        transactional: bool) -> None:
    """offsets.topic.compression.codec and share.coordinator.state.topic.compression.codec: the records section in
    the codec, the codec in the attributes, and the rest of the header as the uncompressed batch's."""
    plain = build_batch(records, now_ms, producer_id=producer, transactional=transactional)
    built = build_batch(records, now_ms, producer_id=producer, transactional=transactional, codec=codec)
    ((header, view),) = split_batches(built)  # the broker's checks: sizes and CRC
    ((plain_header, _),) = split_batches(plain)
    assert header.compression == codec and header.is_transactional == transactional
    assert header._replace(attributes=plain_header.attributes, batch_length=0, crc=0) == plain_header._replace(
        batch_length=0, crc=0)
    assert [(r.key, r.value) for r in decode_batch(view)] == [(key, value) for key, value in records]
    theirs = DefaultRecordBatch(bytearray(built))  # kafka-python's reader, a decoder of its own
    assert theirs.validate_crc() and theirs.compression_type == codec
    assert [(r.key, r.value) for r in theirs] == [(key, value) for key, value in records]


def test_a_compressed_plain_batch_is_still_the_brokers_own_and_no_other_codec_is_built() -> None:
    records = [(b"key", b"value" * 50)] * 20
    for codec in range(1, 5):
        own = own_batch(build_batch(records, 1, codec=codec))
        assert own is not None and own[0].compression == codec
        assert own_batch(build_batch(records, 1, codec=codec, transactional=True)) is None
    with pytest.raises(ValueError, match="no codec"):
        build_batch(records, 1, codec=5)


def test_a_load_reads_the_log_in_chunks_of_its_buffer_size_a_larger_batch_whole(tmp_path: Path) -> None:
    """offsets.load.buffer.size and the like: each read for replay holds whole batches of at most that many bytes,
    but a batch larger than it is read whole, alone (Kafka's soft limit); together the reads are the whole log."""
    plog = PartitionLog.open(str(tmp_path / "__consumer_offsets-0"), LogConfig(), ManualClock())
    try:
        sizes = [300, 300, 300, 300, 2000, 300, 300]
        for size in sizes:
            batch = build_batch([(b"k", b"v" * size)], 1)
            plog.append([own_batch(batch) or pytest.fail("not the broker's own")], leader_epoch=0, own=True)
        chunks = list(read_in_chunks(plog, 800))
        batches_per_chunk = [[header.last_offset for header, _ in whole_batches(chunk)] for chunk in chunks]
        assert batches_per_chunk == [[0, 1], [2, 3], [4], [5, 6]]
        assert all(len(chunk) <= 800 for i, chunk in enumerate(chunks) if i != 2) and len(chunks[2]) > 2000
        assert [len(list(whole_batches(chunk))) for chunk in read_in_chunks(plog, 5 * 1024 * 1024)] == [7]
    finally:
        plog.close()


def test_each_coordinator_loads_its_topic_in_reads_of_its_own_load_buffer_size(tmp_path: Path) -> None:
    logs = LogManager([str(tmp_path)], ManualClock(), LogConfig())
    try:
        replicas = ReplicaManager(1, logs, lambda image, topic: LogConfig())
        settings = CoordinatorSettings.from_config(BrokerConfig({"offsets.load.buffer.size": "1000"}))
        logs_read = [
            GroupCoordinator(1, settings, MetadataImage, lambda: None, replicas).log,
            TransactionCoordinator(1, TxnSettings(load_buffer_size=2000), MetadataImage, lambda: None, replicas).log,
            ShareCoordinator(1, ShareStateSettings(load_buffer_size=3000), MetadataImage, lambda: None, replicas).log,
        ]
        chunks = [log.read_chunk_bytes if isinstance(log, ReplicaLog) else None for log in logs_read]
        assert chunks == [1000, 2000, 3000]
    finally:
        logs.close()
