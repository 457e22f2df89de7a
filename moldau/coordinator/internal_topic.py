"""Building the record batches coordinators append, and `ReplicaLog`: their `CoordinatorLog` in the broker.

Coordinators write their records as ordinary record batches through the replica manager (acks=all, so a write is
refused when the ISR is below min.insync.replicas) and rebuild their state by reading a partition from its log
start to its log end when they become its leader, in reads of about their load buffer size each
(`offsets.load.buffer.size` and the like; see `log.py` for the interface and the decoding).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence

import crc32c

from moldau.coordinator.log import Appended
from moldau.protocol.compression import Compression
from moldau.protocol.errors import ErrorCode
from moldau.protocol.recompression import compress
from moldau.protocol.record_batch import (
    BATCH_HEADER_SIZE,
    LOG_OVERHEAD,
    MAGIC_V2,
    MAX_COMPRESSION,
    BatchHeader,
    split_batches,
)
from moldau.protocol.record_codec import append_varint, whole_batches
from moldau.replication.replica_manager import HostedPartition, ReplicaManager
from moldau.storage.log import PartitionLog

__all__ = ["ReplicaLog", "build_batch", "own_batch", "read_in_chunks"]

DEFAULT_READ_CHUNK_BYTES = 1024 * 1024
_MAX_BATCH_BYTES = 2**31 - 1
_HEADER = struct.Struct(">qiibIhiqqqhii")  # the v2 batch header (moldau.protocol.record_batch)
_CRC = struct.Struct(">I")
_CRC_POS = 17
_ATTRIBUTES_POS = 21
_TRANSACTIONAL_BIT = 0x10
_CODEC_BITS = 0x07
# Kafka's coordinators compress with each codec's default level, whatever the broker's compression.*.level.
_DEFAULT_LEVELS = Compression()


def build_batch(records: Sequence[tuple[bytes, bytes | None]], now_ms: int, *, producer_id: int = -1,
                producer_epoch: int = -1, transactional: bool = False, codec: int = 0) -> bytes:
    """One v2 batch holding (key, value) records, all stamped `now_ms`, at base offset 0 (the log assigns offsets
    and the leader epoch), its records compressed with `codec` (Kafka's ids: 0 none, 1 gzip, 2 snappy, 3 lz4,
    4 zstd). Sequence -1: coordinators' batches are not deduplicated; for a transactional batch the producer's
    epoch alone fences an old producer.

    Encoded here rather than with a generic builder: every offset commit writes one, so its cost is per request.
    Uncompressed, the bytes are those of kafka-python's DefaultRecordBatchBuilder
    (tests/unit/coordinator/test_internal_topic.py).
    """
    if not 0 <= codec <= MAX_COMPRESSION:
        raise ValueError(f"no codec has id {codec}")
    out = bytearray(BATCH_HEADER_SIZE)
    record = bytearray()
    for i, (key, value) in enumerate(records):
        del record[:]
        record += b"\x00\x00"  # attributes, timestamp delta
        append_varint(record, i)  # offset delta
        for field in (key, value):
            if field is None:
                record.append(1)  # zigzag(-1): null
            else:
                append_varint(record, len(field))
                record += field
        record.append(0)  # no headers
        append_varint(out, len(record))
        out += record
    if codec:
        plain = bytes(out[BATCH_HEADER_SIZE:])
        del out[BATCH_HEADER_SIZE:]
        out += compress(plain, codec, _DEFAULT_LEVELS)
    if len(out) > _MAX_BATCH_BYTES:
        raise ValueError(f"a batch of {len(out)} bytes is too large")
    attributes = (_TRANSACTIONAL_BIT if transactional else 0) | codec
    _HEADER.pack_into(out, 0, 0, len(out) - LOG_OVERHEAD, 0, MAGIC_V2, 0, attributes, len(records) - 1, now_ms,
                      now_ms, producer_id, producer_epoch, -1, len(records))
    _CRC.pack_into(out, _CRC_POS, crc32c.crc32c(memoryview(out)[_ATTRIBUTES_POS:]))
    return bytes(out)


def own_batch(batch: bytes) -> tuple[BatchHeader, memoryview] | None:
    """`batch` as the log takes a batch the broker built itself (`PartitionLog.append(own=True)`: no CRC check or
    record walk), when it is one whole batch of `build_batch` without a producer id; else None, and it goes through
    the checks of a client's batch (a transactional batch, for its producer's fencing and verification). Attributes
    are a codec's bits only: CreateTime, not transactional, not a control batch.

    Every offset commit is such an append, and checking again what `build_batch` just wrote (split, CRC, every
    record) was paid per commit. The header fields the log relies on are still compared here."""
    if len(batch) < BATCH_HEADER_SIZE:
        return None
    header = BatchHeader._make(_HEADER.unpack_from(batch))
    if (header.producer_id >= 0 or header.attributes & ~_CODEC_BITS or header.attributes > MAX_COMPRESSION
            or header.magic != MAGIC_V2 or header.total_size != len(batch)
            or header.records_count <= 0 or header.last_offset_delta != header.records_count - 1):
        return None
    return header, memoryview(batch)


def read_in_chunks(plog: PartitionLog, chunk_bytes: int) -> Iterator[bytes]:
    """The log from its start to its end as whole batches, about `chunk_bytes` per read: a soft limit, as Kafka's
    load buffer size is, since a batch larger than it is read whole, alone. Only one chunk is held at a time, so it
    bounds the memory a load takes besides the state it builds."""
    offset = plog.log_start_offset
    while offset < plog.log_end_offset:
        data = plog.read(offset, chunk_bytes, min_one_batch=True, max_offset=plog.log_end_offset).read_bytes()
        if not data:
            return
        for header, _ in whole_batches(data):
            offset = header.next_offset
        yield data


class ReplicaLog:
    """The partitions of one internal topic held by the replica manager: a `CoordinatorLog`. `read_chunk_bytes`:
    how much a read for replay takes at a time (see `read_in_chunks`)."""

    def __init__(self, replicas: ReplicaManager, topic: str, read_chunk_bytes: int = DEFAULT_READ_CHUNK_BYTES) -> None:
        self.replicas = replicas
        self._topic = topic
        self._read_chunk_bytes = read_chunk_bytes

    @property
    def topic(self) -> str:
        return self._topic

    @property
    def read_chunk_bytes(self) -> int:
        return self._read_chunk_bytes

    def _leader(self, partition: int) -> HostedPartition:
        return self.replicas.leader_partition(self._topic, partition)

    def append(self, partition: int, batch: bytes, verification_guard: object | None = None) -> Appended:
        hosted = self._leader(partition)
        own = own_batch(batch)
        if own is not None:
            result = self.replicas.append_as_leader(hosted, [own], required_acks=-1, own=True)
        else:
            result = self.replicas.append_as_leader(hosted, split_batches(batch), required_acks=-1,
                                                    verification_guard=verification_guard)
        return Appended(result.first_offset, result.last_offset)

    async def await_durable(self, partition: int, end_offset: int, timeout_ms: int) -> ErrorCode:
        hosted = self.replicas.partitions.get((self._topic, partition))
        if hosted is None:
            return ErrorCode.not_leader_or_follower
        return await self.replicas.wait_for_acks(hosted, end_offset, timeout_ms)

    def read_for_replay(self, partition: int) -> Iterator[bytes]:
        yield from read_in_chunks(self._leader(partition).log, self._read_chunk_bytes)

    def high_watermark(self, partition: int) -> int:
        return self._leader(partition).log.high_watermark

    def log_end_offset(self, partition: int) -> int:
        return self._leader(partition).log.log_end_offset

    def leader_epoch(self, partition: int) -> int:
        return self._leader(partition).leader_epoch

    def needs_verification(self, partition: int, producer_id: int, producer_epoch: int) -> bool:
        return self._leader(partition).log.producer_needs_verification(producer_id, producer_epoch)

    def verification_guard(self, partition: int, producer_id: int) -> object:
        return self._leader(partition).log.verification_guard(producer_id)
