"""Which of a broker's replica fetchers towards one leader copies a partition (`num.replica.fetchers`).

Kafka runs `num.replica.fetchers` fetcher threads per leader broker, each with its own connection and fetch session,
and gives a partition to the fetcher `abs(31 * topic.hashCode() + partition) % num.replica.fetchers`
(AbstractFetcherManager.getFetcherId), with Java's String.hashCode and 32-bit arithmetic (`moldau.java_hash`).
Moldau uses the same spread, so a partition lands on the fetcher with the same number it would have in Kafka.
"""

from __future__ import annotations

from moldau.java_hash import cached_java_string_hash, kafka_abs, to_int32


def fetcher_id(topic: str, partition: int, num_fetchers: int) -> int:
    """The fetcher (0 to `num_fetchers` - 1) that copies `topic`-`partition`, as Kafka picks it."""
    if num_fetchers == 1:
        return 0
    if num_fetchers < 1:
        raise ValueError(f"num.replica.fetchers must be at least 1, not {num_fetchers}")
    return kafka_abs(to_int32(31 * cached_java_string_hash(topic) + partition)) % num_fetchers
