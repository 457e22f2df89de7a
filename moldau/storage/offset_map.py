"""The cleaner's key -> latest offset map over the dirty part of a log, in bounded memory.

As in Kafka, keys are stored as fixed-size digests (16-byte BLAKE2b), so an entry's size does not depend
on the key's; two keys sharing a digest is as unlikely as an MD5 collision in Kafka's map. The map holds at
most `capacity` entries, derived from a memory budget (`log.cleaner.dedupe.buffer.size`) and the measured
cost of one entry in a CPython dict (about 140 bytes; `ENTRY_COST_BYTES` leaves headroom for resizing), times
the load factor (`log.cleaner.io.buffer.load.factor`: in Kafka, how full its hash table may become).
A cleaning that would exceed the capacity stops mapping at a batch boundary and cleans only up to the
last mapped offset; the rest stays dirty for the next cleaning.

Invariants: `latest_offset` is the largest offset put (-1 when empty), and offsets are put in increasing
order, so `get(key)` is the last offset at which the key was seen. Used by one thread at a time.
"""

from __future__ import annotations

import hashlib

__all__ = ["ENTRY_COST_BYTES", "OffsetMap"]

ENTRY_COST_BYTES = 160
_DIGEST_BYTES = 16


class OffsetMap:
    """Bounded map from key digests to the latest offset of that key."""

    def __init__(self, memory_bytes: int, load_factor: float = 1.0) -> None:
        self.capacity = max(1, int(memory_bytes // ENTRY_COST_BYTES * load_factor))
        self.latest_offset = -1
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def has_room_for(self, count: int) -> bool:
        """Whether `count` more (possibly new) keys certainly fit."""
        return len(self._offsets) + count <= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        self._offsets[_digest(key)] = offset
        self.latest_offset = max(self.latest_offset, offset)

    def get(self, key: bytes) -> int:
        """The latest offset put for `key`, -1 when absent."""
        return self._offsets.get(_digest(key), -1)


def _digest(key: bytes) -> bytes:
    return hashlib.blake2b(key, digest_size=_DIGEST_BYTES).digest()
