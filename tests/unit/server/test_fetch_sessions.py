"""The fetch session cache's rules (KIP-227): what a request's session id and epoch mean, which partitions an
incremental response carries, and which session gives way when the cache is full."""

from __future__ import annotations

import random

from moldau.protocol.errors import ErrorCode
from moldau.protocol.fetch_metadata import FINAL_EPOCH, INITIAL_EPOCH, next_epoch
from moldau.server.fetch_sessions import CachedPartition, FetchSessionCache

EVICTION_MS = 1000


def _cache(slots: int = 10) -> FetchSessionCache:
    return FetchSessionCache(slots, EVICTION_MS, random.Random(7))


def _parts(count: int, offset: int = 0) -> list[CachedPartition]:
    return [CachedPartition("t", p, offset, 1024) for p in range(count)]


def test_a_sessionless_full_fetch_neither_uses_nor_makes_a_session() -> None:
    cache = _cache()
    start = cache.begin(0, FINAL_EPOCH, True, 0)
    assert start.error == ErrorCode.none and start.session is None and not start.create


def test_epoch_zero_asks_for_a_session_whose_next_request_has_epoch_one() -> None:
    cache = _cache()
    start = cache.begin(0, INITIAL_EPOCH, True, 0)
    assert start.create and start.session is None
    session = cache.create(False, True, _parts(3), 0)
    assert session is not None and session.id != 0 and session.epoch == 1
    incremental = cache.begin(session.id, 1, True, 5)
    assert incremental.session is session and session.epoch == 2 and session.last_used_ms == 5


def test_a_wrong_epoch_or_unknown_id_is_refused_and_leaves_the_session_as_it_was() -> None:
    cache = _cache()
    session = cache.create(False, True, _parts(1), 0)
    assert session is not None
    assert cache.begin(session.id, 2, True, 0).error == ErrorCode.invalid_fetch_session_epoch
    assert cache.begin(session.id + 1, 1, True, 0).error == ErrorCode.fetch_session_id_not_found
    assert cache.begin(session.id, 1, False, 0).error == ErrorCode.fetch_session_topic_id_error
    assert session.epoch == 1
    assert cache.begin(session.id, 1, True, 0).session is session


def test_a_full_fetch_naming_a_session_closes_it() -> None:
    cache = _cache()
    first = cache.create(False, True, _parts(1), 0)
    second = cache.create(False, True, _parts(1), 0)
    assert first is not None and second is not None
    assert cache.begin(first.id, INITIAL_EPOCH, True, 0).create
    assert cache.get(first.id) is None
    closing = cache.begin(second.id, FINAL_EPOCH, True, 0)
    assert not closing.create and closing.session is None and len(cache) == 0
    assert cache.begin(second.id, 1, True, 0).error == ErrorCode.fetch_session_id_not_found


def test_epochs_wrap_to_one() -> None:
    assert next_epoch(2**31 - 1) == 1 and next_epoch(0) == 1 and next_epoch(41) == 42


def test_incremental_requests_add_move_and_forget_partitions() -> None:
    cache = _cache()
    session = cache.create(False, False, _parts(3), 0)
    assert session is not None
    session.apply([CachedPartition("t", 1, 50, 2048), CachedPartition("u", 0, 7, 1024)], [("t", 2)])
    assert list(session.partitions) == [("t", 0), ("t", 1), ("u", 0)]
    assert session.partitions[("t", 1)].fetch_offset == 50
    assert session.partitions[("t", 1)].partition_max_bytes == 2048
    assert cache.partitions_cached == 3


def test_a_partition_is_sent_only_with_records_an_error_or_a_changed_offset() -> None:
    cached = CachedPartition("t", 0, 0, 1024)
    assert cached.must_send(False, False, 10, 10, 0)  # never told
    assert not cached.must_send(False, False, 10, 10, 0)
    assert cached.must_send(True, False, 10, 10, 0)  # records
    assert cached.must_send(False, False, 11, 10, 0)  # high watermark
    assert cached.must_send(False, False, 11, 11, 0)  # last stable offset
    assert cached.must_send(False, False, 11, 11, 3)  # log start offset
    assert not cached.must_send(False, False, 11, 11, 3)
    assert cached.must_send(False, True, -1, -1, -1)  # an error, every time
    assert cached.must_send(False, True, -1, -1, -1)
    assert cached.must_send(False, False, 11, 11, 3)  # after the error: sent again though nothing moved


def test_partitions_that_returned_records_move_to_the_end() -> None:
    cache = _cache()
    session = cache.create(False, False, _parts(3), 0)
    assert session is not None
    session.returned_records([("t", 0)])
    assert [p for _, p in session.partitions] == [1, 2, 0]


def test_no_slots_means_no_sessions() -> None:
    assert _cache(0).create(True, True, _parts(5), 0) is None


def test_a_full_cache_evicts_the_least_recently_used_idle_session_first() -> None:
    cache = _cache(2)
    big = cache.create(True, True, _parts(9), 0)
    small = cache.create(False, True, _parts(1), 0)
    assert big is not None and small is not None
    cache.begin(small.id, 1, True, 600)
    # Neither has been idle or existed for the eviction time: nobody gives way, not even to a follower.
    assert cache.create(True, True, _parts(20), 900) is None
    # `big` (a follower's, larger) has been idle the longest, past the eviction time: it goes first.
    newer = cache.create(False, True, _parts(1), EVICTION_MS + 1)
    assert newer is not None and cache.get(big.id) is None and cache.get(small.id) is small
    assert cache.evictions == 1


def test_an_old_enough_session_gives_way_only_to_a_more_valuable_one() -> None:
    cache = _cache(2)
    consumer = cache.create(False, True, _parts(2), 0)
    follower = cache.create(True, True, _parts(2), 0)
    assert consumer is not None and follower is not None
    now = EVICTION_MS  # both existed that long, and both were used just now
    for session in (consumer, follower):
        cache.begin(session.id, 1, True, now)
    assert cache.create(False, True, _parts(2), now) is None  # as many partitions: not worth more
    bigger = cache.create(False, True, _parts(3), now)  # more partitions than the consumer's
    assert bigger is not None and cache.get(consumer.id) is None and cache.get(follower.id) is follower
    # A consumer's session never takes a follower's place while that one is in use; a follower's takes a consumer's.
    assert cache.create(False, True, _parts(50), now) is None
    later = 2 * EVICTION_MS
    for session in (bigger, follower):
        cache.begin(session.id, session.epoch, True, later)
    assert cache.create(True, True, _parts(1), later) is not None
    assert cache.get(bigger.id) is None and cache.get(follower.id) is follower
