"""Replica placement: even leaders and followers, distinct brokers and racks, clear errors."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from moldau.metadata.placement import place_replicas
from moldau.protocol.errors import ErrorCode, KafkaError


def no_racks(n: int) -> list[tuple[int, str | None]]:
    return [(b, None) for b in range(1, n + 1)]


@pytest.mark.parametrize("num_brokers", [3, 5])
@pytest.mark.parametrize("seed", [0, 1, 7])
def test_leaders_and_followers_spread_evenly(num_brokers: int, seed: int) -> None:
    placement = place_replicas(1000, 3, no_racks(num_brokers), random.Random(seed))
    assert len(placement) == 1000
    assert all(len(set(replicas)) == 3 for replicas in placement)
    leaders = Counter(replicas[0] for replicas in placement)
    replicas = Counter(b for r in placement for b in r)
    assert set(leaders) == set(replicas) == set(range(1, num_brokers + 1))
    assert max(leaders.values()) - min(leaders.values()) <= 1
    # Followers: each round of n partitions gives every broker the same number of follower slots.
    followers = replicas - leaders
    assert max(followers.values()) - min(followers.values()) <= 2
    # No fixed follower pattern: every broker follows every other broker's leaders.
    pairs = {(r[0], f) for r in placement for f in r[1:]}
    assert len(pairs) == num_brokers * (num_brokers - 1)


def test_deterministic_for_a_seed() -> None:
    first = place_replicas(50, 2, no_racks(4), random.Random(3))
    assert place_replicas(50, 2, no_racks(4), random.Random(3)) == first
    assert place_replicas(50, 2, list(reversed(no_racks(4))), random.Random(3)) == first  # input order is irrelevant


def test_start_partition_continues_the_pattern() -> None:
    whole = place_replicas(20, 2, no_racks(3), random.Random(5))
    rng = random.Random(5)
    assert place_replicas(8, 2, no_racks(3), rng, start_partition=12) == whole[12:]


def test_replicas_land_on_distinct_racks() -> None:
    brokers: list[tuple[int, str | None]] = [(1, "a"), (2, "a"), (3, "b"), (4, "b"), (5, "c"), (6, "c")]
    placement = place_replicas(300, 3, brokers, random.Random(1))
    rack = dict(brokers)
    assert all(len({rack[b] for b in r}) == 3 for r in placement)
    leaders = Counter(r[0] for r in placement)
    assert set(leaders.values()) == {50}


def test_uneven_racks_still_use_every_rack() -> None:
    brokers: list[tuple[int, str | None]] = [(1, "a"), (2, "a"), (3, "a"), (4, "b")]
    placement = place_replicas(100, 2, brokers, random.Random(2))
    assert all({dict(brokers)[b] for b in r} == {"a", "b"} for r in placement)
    # More replicas than racks: racks first, then any broker not yet used.
    placement = place_replicas(100, 3, brokers, random.Random(2))
    assert all(4 in r and len(set(r)) == 3 for r in placement)


def test_replication_factor_equal_to_broker_count() -> None:
    placement = place_replicas(10, 3, no_racks(3), random.Random(0))
    assert all(sorted(r) == [1, 2, 3] for r in placement)
    assert place_replicas(4, 1, no_racks(1), random.Random(0)) == [(1,)] * 4


def test_replication_factor_larger_than_brokers() -> None:
    with pytest.raises(KafkaError) as error:
        place_replicas(1, 4, no_racks(3), random.Random(0))
    assert error.value.code == ErrorCode.invalid_replication_factor
    assert "replication factor 4 is larger than the 3 available brokers" in error.value.message


@pytest.mark.parametrize("factor", [0, -1])
def test_replication_factor_must_be_positive(factor: int) -> None:
    with pytest.raises(KafkaError) as error:
        place_replicas(1, factor, no_racks(3), random.Random(0))
    assert error.value.code == ErrorCode.invalid_replication_factor


@pytest.mark.parametrize("count", [0, -3])
def test_partition_count_must_be_positive(count: int) -> None:
    with pytest.raises(KafkaError) as error:
        place_replicas(count, 1, no_racks(3), random.Random(0))
    assert error.value.code == ErrorCode.invalid_partitions


def test_no_brokers() -> None:
    with pytest.raises(KafkaError) as error:
        place_replicas(1, 1, [], random.Random(0))
    assert error.value.code == ErrorCode.invalid_replication_factor
