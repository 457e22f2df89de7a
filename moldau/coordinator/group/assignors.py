"""Server-side assignors of consumer groups (KIP-848): `uniform` (the default) and `range`.

An assignor maps each member to the partitions it should own, given every member's subscription and the
partition count of each subscribed topic. Both are deterministic: the same input gives the same output, so a
target assignment recomputed after a restart matches the one written before it.
"""

from __future__ import annotations

from collections.abc import Mapping

TopicPartition = tuple[str, int]
Targets = dict[str, frozenset[TopicPartition]]

UNIFORM = "uniform"
RANGE = "range"
ASSIGNORS = (UNIFORM, RANGE)


def assign(name: str, subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int],
           previous: Mapping[str, frozenset[TopicPartition]]) -> Targets:
    """The target assignment of every member; `name` must be one of ASSIGNORS."""
    if name == RANGE:
        return range_assign(subscriptions, partitions)
    return uniform_assign(subscriptions, partitions, previous)


def range_assign(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int]) -> Targets:
    """Per topic, contiguous ranges to its subscribers in member id order; the first ones get one extra."""
    out: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic, count in sorted(partitions.items()):
        members = sorted(m for m, topics in subscriptions.items() if topic in topics)
        if not members:
            continue
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            out[member].update((topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(tps) for m, tps in out.items()}


def uniform_assign(subscriptions: Mapping[str, frozenset[str]], partitions: Mapping[str, int],
                   previous: Mapping[str, frozenset[TopicPartition]]) -> Targets:
    """Balanced and sticky: counts differ by at most one where subscriptions allow, and a partition stays
    with its previous owner unless balance requires moving it (fewer moves, fewer revocations)."""
    members = sorted(subscriptions)
    if not members:
        return {}
    all_tps = sorted((t, p) for t, n in partitions.items() for p in range(n)
                     if any(t in subscriptions[m] for m in members))
    quota = -(-len(all_tps) // len(members))  # ceiling
    out: dict[str, set[TopicPartition]] = {m: set() for m in members}
    owner: dict[TopicPartition, str] = {}
    for member in members:  # keep what each member had, up to the quota
        for tp in sorted(previous.get(member, frozenset())):
            if tp in owner or tp[0] not in subscriptions[member] or tp[1] >= partitions.get(tp[0], 0):
                continue
            if len(out[member]) < quota:
                out[member].add(tp)
                owner[tp] = member
    for tp in all_tps:  # the rest, each to the least loaded subscriber
        if tp not in owner:
            member = min((m for m in members if tp[0] in subscriptions[m]), key=lambda m: (len(out[m]), m))
            out[member].add(tp)
            owner[tp] = member
    _rebalance(out, subscriptions)
    return {m: frozenset(tps) for m, tps in out.items()}


def _rebalance(out: dict[str, set[TopicPartition]], subscriptions: Mapping[str, frozenset[str]]) -> None:
    """Move partitions from the most to the least loaded members while that narrows the spread."""
    for _ in range(sum(len(tps) for tps in out.values())):
        moved = False
        for big in sorted(out, key=lambda m: (-len(out[m]), m)):
            for small in sorted(out, key=lambda m: (len(out[m]), m)):
                if len(out[big]) - len(out[small]) <= 1:
                    break
                movable = sorted(tp for tp in out[big] if tp[0] in subscriptions[small])
                if movable:
                    tp = movable[-1]
                    out[big].remove(tp)
                    out[small].add(tp)
                    moved = True
                    break
            if moved:
                break
        if not moved:
            return
