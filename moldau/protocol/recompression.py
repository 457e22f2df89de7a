"""Broker-side recompression: a topic's `compression.type` other than `producer` is the codec its batches are
stored in, whatever the producer used, as in Kafka.

Only batches whose codec differs are rewritten; the common case (`producer`, or a producer already using the
topic's codec) passes the request's bytes through untouched. A rewritten batch keeps everything but its
records section's encoding: base offset, leader epoch, timestamps, producer id and epoch, base sequence,
record count and the transactional bit, so idempotence, transactions and offsets are unaffected. Its length,
compression attribute bits and CRC are recomputed. Levels are Kafka's (KIP-390): `compression.gzip.level`
(-1: zlib's default), `compression.lz4.level` (1-17), `compression.zstd.level`.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

import cramjam
import crc32c
import lz4.frame
import zstandard

from moldau.protocol.compression import CODECS, PRODUCER, Compression
from moldau.protocol.record_batch import BATCH_HEADER_SIZE, LOG_OVERHEAD, BatchHeader, crc_matches, parse_header
from moldau.protocol.record_validation import DEFAULT_MAX_DECOMPRESSED_BYTES, decompress_records

_ATTRIBUTES_POS = 21
_CRC_POS = 17
_COMPRESSION_MASK = 0x07
_XERIAL_HEADER = b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
_XERIAL_BLOCK = 32 * 1024
_LZ4_MAX_LEVEL = 16  # lz4's frame API tops out here; Kafka's 17 is the same high-compression mode


Batch = tuple[BatchHeader, memoryview]


def recompress(batches: Sequence[Batch], target: Compression,
               max_decompressed_bytes: int = DEFAULT_MAX_DECOMPRESSED_BYTES) -> list[Batch] | None:
    """The batches re-encoded in the topic's codec, or None when every batch is already fine as sent.

    Raises RecordErrors (CORRUPT_MESSAGE) for a compressed payload that does not decompress."""
    if target.type == PRODUCER:
        return None
    codec = CODECS[target.type]
    if all(h.compression == codec or h.is_control for h, _ in batches):
        return None
    # A batch whose CRC is wrong is left as sent: the log refuses it (CORRUPT_MESSAGE) instead of a rewrite
    # laundering it.
    return [(h, b) if h.compression == codec or h.is_control or not crc_matches(b, h)
            else _rewrite(h, b, codec, target, max_decompressed_bytes) for h, b in batches]


def _rewrite(header: BatchHeader, batch: memoryview, codec: int, target: Compression, limit: int) -> Batch:
    records = bytes(decompress_records(batch, header, limit))
    payload = compress(records, codec, target)
    out = bytearray(batch[:BATCH_HEADER_SIZE])
    attributes = (struct.unpack_from(">h", out, _ATTRIBUTES_POS)[0] & ~_COMPRESSION_MASK) | codec
    struct.pack_into(">h", out, _ATTRIBUTES_POS, attributes)
    out += payload
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD)
    struct.pack_into(">I", out, _CRC_POS, crc32c.crc32c(bytes(out[_ATTRIBUTES_POS:])))
    view = memoryview(bytes(out))
    return parse_header(view), view


def compress(records: bytes, codec: int, target: Compression) -> bytes:
    """A records section encoded as Kafka's clients encode it for `codec`."""
    if codec == 0:
        return records
    if codec == 1:
        level = zlib.Z_DEFAULT_COMPRESSION if target.gzip_level == -1 else target.gzip_level
        deflater = zlib.compressobj(level, zlib.DEFLATED, 31)  # 16 + 15: a gzip stream
        return deflater.compress(records) + deflater.flush()
    if codec == 2:
        # Xerial framing, as Kafka's Java clients write snappy (every client reads it).
        blocks = (bytes(cramjam.snappy.compress_raw(records[i:i + _XERIAL_BLOCK]))
                  for i in range(0, len(records), _XERIAL_BLOCK))
        return _XERIAL_HEADER + b"".join(struct.pack(">i", len(b)) + b for b in blocks)
    if codec == 3:
        # Independent blocks and no content size: the frame Kafka's own LZ4 stream reads.
        return bytes(lz4.frame.compress(records, compression_level=min(target.lz4_level, _LZ4_MAX_LEVEL),
                                        block_linked=False, store_size=False, content_checksum=False))
    return bytes(zstandard.ZstdCompressor(level=target.zstd_level).compress(records))
