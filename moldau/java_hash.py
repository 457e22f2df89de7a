"""Java's String.hashCode and Kafka's Utils.abs, for the placements Kafka computes from them.

Kafka places a group or transactional id on an internal-topic partition (`moldau.coordinator.record_codec`) and a
followed partition on a replica fetcher (`moldau.replication.fetcher_ids`) from a Java string hash, so Moldau
computes the same numbers and tools agree on where things are.
"""

from __future__ import annotations

import functools

_INT_MASK = 0xFFFFFFFF
INT_MIN = -(1 << 31)


def to_int32(value: int) -> int:
    """`value` in Java's signed 32-bit arithmetic (wrapped as Java's int overflow wraps)."""
    value &= _INT_MASK
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(text: str) -> int:
    """Java's String.hashCode: h = 31*h + c over UTF-16 code units, in signed 32-bit arithmetic."""
    data = text.encode("utf-16-be")
    h = 0
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & _INT_MASK
    return to_int32(h)


# The hash walks the string in Python, tens of microseconds for a typical id; requests look the same ids up
# again and again (a group's every request, a follower's partitions at every image), so recent ones are kept.
cached_java_string_hash = functools.lru_cache(maxsize=65536)(java_string_hash)


def kafka_abs(value: int) -> int:
    """Kafka's Utils.abs: the absolute value, with Integer.MIN_VALUE mapped to 0 rather than to itself."""
    return 0 if value == INT_MIN else abs(value)
