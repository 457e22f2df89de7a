"""Which of a broker's replica fetchers towards one leader copies a partition (`num.replica.fetchers`).

Kafka runs `num.replica.fetchers` fetcher threads per leader broker, each with its own connection and fetch session,
and gives a partition to the fetcher `abs(31 * topic.hashCode() + partition) % num.replica.fetchers`
(AbstractFetcherManager.getFetcherId), with Java's String.hashCode and 32-bit arithmetic. Moldau uses the same
spread, so a partition lands on the fetcher with the same number it would have in Kafka.
"""

from __future__ import annotations

import functools

_INT_MASK = 0xFFFFFFFF
_INT_MIN = -(1 << 31)


def _to_int32(value: int) -> int:
    value &= _INT_MASK
    return value - (1 << 32) if value >= 1 << 31 else value


@functools.lru_cache(maxsize=4096)  # a broker following thousands of partitions hashes each topic name once
def java_string_hash(text: str) -> int:
    """Java's String.hashCode: over the UTF-16 code units, `h = 31 * h + unit`, in 32-bit arithmetic."""
    h = 0
    units = text.encode("utf-16-be")
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & _INT_MASK
    return _to_int32(h)


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """The fetcher (0 to `num_fetchers` - 1) that copies `topic`-`partition`, as Kafka picks it."""
    if num_fetchers == 1:
        return 0
    if num_fetchers < 1:
        raise ValueError(f"num.replica.fetchers must be at least 1, not {num_fetchers}")
    h = _to_int32(31 * java_string_hash(topic) + partition)
    # Kafka's Utils.abs: Integer.MIN_VALUE maps to 0 rather than to itself.
    return (0 if h == _INT_MIN else abs(h)) % num_fetchers
