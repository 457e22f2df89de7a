"""Replica placement for new partitions: which brokers hold each partition, the first one being its leader.

The scheme is the rack-aware round robin Kafka used before KRaft. Brokers are laid out in one list that alternates
racks (a1, b1, c1, a2, b2, ...). Partition p is led by the broker at (start + p) in that list, so leaders go round
robin and each broker leads num_partitions / len(brokers) partitions, give or take one. Followers come after the
leader at a distance of 1 + (shift + j) % (n - 1); the shift grows by one after every full round of n partitions,
so the brokers that follow a given leader change from round to round and followers spread evenly too.
A follower whose rack already holds a replica of the partition is skipped while unused racks remain.

Brokers without a rack count as one rack of their own (as in Kafka's StripedReplicaPlacer), so with no racks at all
the rack rule never skips anyone and the scheme is plain round robin.

Pure and deterministic: the only randomness (start and shift) comes from the `rng` the caller passes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from moldau.protocol.errors import ErrorCode, KafkaError

Broker = tuple[int, str | None]  # (broker id, rack)


def place_replicas(num_partitions: int, replication_factor: int, brokers: Sequence[Broker], rng: random.Random,
                   start_partition: int = 0) -> list[tuple[int, ...]]:
    """Replica lists for partitions start_partition .. start_partition + num_partitions - 1, leader first.

    `start_partition` is the first new partition's number when partitions are added to an existing topic, so the
    shift keeps progressing as if the topic had been created with all of them.
    """
    _check(num_partitions, replication_factor, brokers)
    arranged = _rack_alternating(brokers)
    rack_of = dict(brokers)
    n, num_racks = len(arranged), len(set(rack_of.values()))
    start, shift = rng.randrange(n), rng.randrange(n)
    placement = []
    for p in range(start_partition, start_partition + num_partitions):
        # The shift grows by one per full round of n partitions, counted from partition 0.
        placement.append(_replicas_of((start + p) % n, shift + p // n, replication_factor, arranged, rack_of,
                                      num_racks))
    return placement


def _check(num_partitions: int, replication_factor: int, brokers: Sequence[Broker]) -> None:
    if num_partitions <= 0:
        raise KafkaError(ErrorCode.invalid_partitions, f"number of partitions must be positive, not {num_partitions}")
    if replication_factor <= 0:
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         f"replication factor must be positive, not {replication_factor}")
    if replication_factor > len(brokers):
        raise KafkaError(ErrorCode.invalid_replication_factor,
                         f"replication factor {replication_factor} is larger than the {len(brokers)} available "
                         "brokers")
    if len({b for b, _ in brokers}) != len(brokers):
        raise ValueError(f"broker ids must be distinct: {sorted(b for b, _ in brokers)}")


def _rack_alternating(brokers: Sequence[Broker]) -> list[int]:
    """Broker ids ordered so consecutive brokers sit on different racks for as long as racks last."""
    by_rack: dict[str | None, list[int]] = {}
    for broker_id, rack in sorted(brokers, key=lambda b: b[0]):
        by_rack.setdefault(rack, []).append(broker_id)
    racks = [by_rack[r] for r in sorted(by_rack, key=lambda r: (r is not None, r or ""))]
    longest = max(len(ids) for ids in racks)
    return [ids[i] for i in range(longest) for ids in racks if i < len(ids)]


def _replicas_of(first: int, shift: int, replication_factor: int, arranged: list[int],
                 rack_of: dict[int, str | None], num_racks: int) -> tuple[int, ...]:
    n = len(arranged)
    leader = arranged[first]
    replicas, racks = [leader], {rack_of[leader]}
    k = 0
    while len(replicas) < replication_factor:
        # k walks the other n - 1 brokers in order, so every broker is a candidate before any repeats.
        candidate = arranged[(first + 1 + (shift + k) % (n - 1)) % n]
        k += 1
        if candidate in replicas or (rack_of[candidate] in racks and len(racks) < num_racks):
            continue
        replicas.append(candidate)
        racks.add(rack_of[candidate])
    return tuple(replicas)
