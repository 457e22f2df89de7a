"""The metadata log of a single node: metadata records in one append-only file.

Each entry is `length u32 | crc32c u32 | offset i64 | payload` where the CRC covers offset and payload. Every
append is fsynced before the records are applied, because metadata (a topic's id, its partitions) must never be
forgotten after a client was told it exists. Opening the file drops a torn or corrupt tail, which can only be
an append that was never acknowledged. The Raft quorum replaces this class with a replicated log of the same
records.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Sequence

import crc32c

from moldau.metadata.records import MetadataRecord, RecordDecodeError, decode_record, encode_record

log = logging.getLogger(__name__)
_ENTRY = struct.Struct(">IIq")
MAX_ENTRY_BYTES = 16 * 1024 * 1024


class LocalMetadataLog:
    def __init__(self, path: str) -> None:
        self.path = path
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        self.entries: list[tuple[int, MetadataRecord]] = self._load()
        self.next_offset = self.entries[-1][0] + 1 if self.entries else 0
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def _load(self) -> list[tuple[int, MetadataRecord]]:
        if not os.path.exists(self.path):
            return []
        with open(self.path, "rb") as f:
            data = f.read()
        entries: list[tuple[int, MetadataRecord]] = []
        pos = 0
        while pos + _ENTRY.size <= len(data):
            length, crc, offset = _ENTRY.unpack_from(data, pos)
            end = pos + _ENTRY.size + length
            if length > MAX_ENTRY_BYTES or end > len(data):
                break
            if crc32c.crc32c(data[pos + 8 : end]) != crc:
                break
            try:
                entries.append((offset, decode_record(data[pos + _ENTRY.size : end])))
            except RecordDecodeError:
                break
            pos = end
        if pos != len(data):
            log.warning("metadata log %s: dropping %d bytes of torn tail", self.path, len(data) - pos)
            with open(self.path, "r+b") as f:
                f.truncate(pos)
                os.fsync(f.fileno())
        return entries

    def append(self, records: Sequence[MetadataRecord]) -> int:
        """Append durably; returns the offset of the last record. Nothing is kept in memory if the write fails."""
        parts = []
        offset = self.next_offset
        for record in records:
            payload = encode_record(record)
            body = struct.pack(">q", offset) + payload
            parts.append(struct.pack(">II", len(payload), crc32c.crc32c(body)) + body)
            offset += 1
        self._write_all(b"".join(parts))
        self.entries.extend(zip(range(self.next_offset, offset), records, strict=True))
        self.next_offset = offset
        return offset - 1

    def _write_all(self, data: bytes) -> None:
        """Write and fsync, or leave the file as it was: a torn entry would hide every later one on load."""
        size_before = os.fstat(self._fd).st_size
        try:
            written = 0
            while written < len(data):
                written += os.write(self._fd, data[written:])
            os.fsync(self._fd)
        except OSError:
            try:
                os.ftruncate(self._fd, size_before)
            except OSError:
                log.exception("metadata log %s: cannot cut a failed append; it is dropped on the next load",
                              self.path)
            raise

    def close(self) -> None:
        os.close(self._fd)
