"""A balanced replica assignment for `moldau partitions reassign --generate`: pure, deterministic, no I/O.

Given the partitions' current replicas and the target brokers, it proposes new replica lists that keep each
partition's replication factor, give every target broker the same number of replicas (give or take one) and the
same number of preferred leaders (first replicas), and move as few replicas as possible:

1. Replicas on brokers outside the target set must move; every target broker may hold `total // n` replicas, and
   the `total % n` brokers holding the most already may hold one more (so the fewest have to move).
2. A broker over its share gives up replicas, non-leading ones first, from the topic it holds most of; every
   freed slot goes to the broker with the fewest replicas of that topic among those under their share.
   Rarely, every broker with room already holds a replica of the partition: then a replica of another partition
   makes room (two moves instead of one).
3. Preferred leaders are balanced by reordering replicas only (that moves no data): leadership shifts along a
   chain of partitions from a broker leading too many to one leading at least two fewer, until none is left.

Replicas keep their position in the list, so a partition's preferred leader changes only when step 3 says so.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping, Sequence

TopicPartition = tuple[str, int]
Assignment = dict[TopicPartition, tuple[int, ...]]


def plan_reassignment(current: Mapping[TopicPartition, Sequence[int]], brokers: Sequence[int]) -> Assignment:
    """The proposed replicas of every partition in `current` (unchanged ones included). Raises ValueError if a
    partition has more replicas than there are target brokers, or there are none."""
    targets = sorted(set(brokers))
    if not targets:
        raise ValueError("no target brokers")
    for (topic, partition), replicas in sorted(current.items()):
        if len(replicas) > len(targets):
            raise ValueError(f"{topic}-{partition} has {len(replicas)} replicas, more than the {len(targets)} "
                             "target brokers")
    slots = {key: [b if b in targets else None for b in current[key]] for key in sorted(current)}
    _balance_replicas(slots, targets)
    assignment = {key: tuple(b for b in replicas if b is not None) for key, replicas in slots.items()}
    _balance_leaders(assignment, targets)
    return assignment


def moved_replicas(current: Mapping[TopicPartition, Sequence[int]], proposed: Mapping[TopicPartition,
                   Sequence[int]]) -> int:
    """How many replicas the proposal puts on a broker that does not hold them now."""
    return sum(len(set(proposed[key]) - set(current[key])) for key in proposed)


def _balance_replicas(slots: dict[TopicPartition, list[int | None]], targets: list[int]) -> None:
    load = Counter(b for replicas in slots.values() for b in replicas if b is not None)
    total = sum(len(replicas) for replicas in slots.values())
    share, extra = divmod(total, len(targets))
    by_load = sorted(targets, key=lambda b: (-load[b], b))
    cap = {b: share + (i < extra) for i, b in enumerate(by_load)}
    per_topic = Counter((topic, b) for (topic, _), replicas in slots.items() for b in replicas if b is not None)
    for broker in targets:
        while load[broker] > cap[broker]:
            key, index = max(
                ((key, i) for key, replicas in slots.items() for i, b in enumerate(replicas) if b == broker),
                key=lambda item: (per_topic[(item[0][0], broker)], item[1] > 0, item[0]),
            )
            slots[key][index] = None
            load[broker] -= 1
            per_topic[(key[0], broker)] -= 1
    for key, replicas in slots.items():
        for index, slot in enumerate(replicas):
            if slot is not None:
                continue
            room = [b for b in targets if load[b] < cap[b] and b not in replicas]
            if room:
                chosen = min(room, key=lambda b: (per_topic[(key[0], b)], load[b] - cap[b], b))
            else:
                chosen = _make_room(slots, key, targets, load, cap)
            replicas[index] = chosen
            load[chosen] += 1
            per_topic[(key[0], chosen)] += 1


def _make_room(slots: dict[TopicPartition, list[int | None]], key: TopicPartition, targets: list[int],
               load: Counter[int], cap: dict[int, int]) -> int:
    """Every broker with room already holds a replica of `key`: move a replica of another partition to such a
    broker and return that replica's broker for `key` (its load is unchanged; the broker with room gains one)."""
    needing = slots[key]
    for free in (b for b in targets if load[b] < cap[b]):
        for other, replicas in slots.items():
            if other == key or free in replicas:
                continue
            for index, broker in enumerate(replicas):
                if broker is not None and broker not in needing:
                    replicas[index] = free
                    load[free] += 1
                    load[broker] -= 1
                    return broker
    raise ValueError(f"cannot place a replica of {key[0]}-{key[1]}")  # pragma: no cover - needs > brokers replicas


def _balance_leaders(assignment: Assignment, targets: list[int]) -> None:
    while True:
        leads = Counter({b: 0 for b in targets})
        leads.update(replicas[0] for replicas in assignment.values() if replicas)
        for broker in sorted(targets, key=lambda b: (-leads[b], b)):
            path = _leadership_path(assignment, leads, broker)
            if path:
                for key, new_leader in path:
                    replicas = assignment[key]
                    assignment[key] = (new_leader, *(b for b in replicas if b != new_leader))
                break
        else:
            return


def _leadership_path(assignment: Assignment, leads: Counter[int],
                     start: int) -> list[tuple[TopicPartition, int]] | None:
    """Partitions whose leadership to hand on, each to the broker named, so that `start` leads one fewer and a
    broker leading at least two fewer leads one more (breadth first: the shortest such chain), or None."""
    led_by: dict[int, list[TopicPartition]] = {}
    for key, replicas in sorted(assignment.items()):
        if replicas:
            led_by.setdefault(replicas[0], []).append(key)
    came_from: dict[int, tuple[int, TopicPartition] | None] = {start: None}
    queue = deque([start])
    while queue:
        broker = queue.popleft()
        if leads[broker] <= leads[start] - 2:
            path = []
            while (step := came_from[broker]) is not None:
                previous, key = step
                path.append((key, broker))
                broker = previous
            return path[::-1]
        for key in led_by.get(broker, []):
            for follower in assignment[key][1:]:
                if follower not in came_from:
                    came_from[follower] = (broker, key)
                    queue.append(follower)
    return None
