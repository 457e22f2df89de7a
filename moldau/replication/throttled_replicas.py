"""The value of a topic's `leader.replication.throttled.replicas` and `follower.replication.throttled.replicas`:
`*`, or `partition:broker` pairs (`moldau.replication.throttle` acts on them). A leaf module: the config tables
and the log settings both import it."""

from __future__ import annotations

from dataclasses import dataclass

ALL_REPLICAS = "*"


@dataclass(frozen=True, slots=True)
class ThrottledReplicas:
    """A topic's `*.replication.throttled.replicas`: every replica, or these (partition, broker) pairs."""

    everything: bool = False
    pairs: frozenset[tuple[int, int]] = frozenset()

    def covers(self, partition: int, broker: int) -> bool:
        return self.everything or (partition, broker) in self.pairs


NO_THROTTLED_REPLICAS = ThrottledReplicas()


def throttled_replicas_problem(entries: tuple[str, ...]) -> str | None:
    """Why a `*.replication.throttled.replicas` value is invalid (Kafka's wording), or None."""
    if list(entries) == [ALL_REPLICAS]:
        return None
    for entry in entries:
        partition, sep, broker = entry.strip().partition(":")
        if not sep or not partition.strip().isdigit() or not broker.strip().isdigit():
            return ("must be the literal '*' or a list of replicas in the following format: "
                    "[partitionId]:[brokerId],[partitionId]:[brokerId],...")
    return None


def parse_throttled_replicas(entries: tuple[str, ...]) -> ThrottledReplicas:
    """The replicas a valid config value names (see `throttled_replicas_problem`)."""
    if not entries:
        return NO_THROTTLED_REPLICAS
    if list(entries) == [ALL_REPLICAS]:
        return ThrottledReplicas(everything=True)
    pairs = set()
    for entry in entries:
        partition, _, broker = entry.strip().partition(":")
        pairs.add((int(partition), int(broker)))
    return ThrottledReplicas(pairs=frozenset(pairs))


def check_throttled_replicas(value: object) -> str | None:
    """The config validator's form of `throttled_replicas_problem`."""
    return throttled_replicas_problem(value) if isinstance(value, tuple) else None
