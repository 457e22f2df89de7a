"""`moldau partitions reassign --execute --throttle BYTES [--replica-alter-log-dirs-throttle BYTES]`: replication
quotas around a reassignment, set and cleared as Kafka's `kafka-reassign-partitions.sh` does.

Setting: for each partition the plan moves, its current replicas are named in the topic's
`leader.replication.throttled.replicas` (they send the data) and the replicas it adds in
`follower.replication.throttled.replicas` (they fetch it); every broker involved gets
`leader.replication.throttled.rate` and `follower.replication.throttled.rate`. Clearing (when `--execute` saw
every partition moved, or on a `--verify` that finds the plan complete, as Kafka's tool clears them): the two
topic configs of the plan's topics and the rates of every broker. The log directory throttle
(`replica.alter.log.dirs.io.max.bytes.per.second`) goes on the brokers whose replicas the plan moves between log
directories, and comes off the same way.

`throttle_configs` is pure (plan in, configs out); the rest sends them with confluent-kafka's AdminClient
(IncrementalAlterConfigs).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

# confluent-kafka re-exports these without __all__, which strict mypy does not treat as public.
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ResourceType,
)

from moldau.cli.common import REQUEST_TIMEOUT_S, CliError, kafka_error, request_failed
from moldau.cli.reassignment_plan import TopicPartition
from moldau.cli.topics import wait_result

LEADER_REPLICAS = "leader.replication.throttled.replicas"
FOLLOWER_REPLICAS = "follower.replication.throttled.replicas"
LEADER_RATE = "leader.replication.throttled.rate"
FOLLOWER_RATE = "follower.replication.throttled.rate"
LOG_DIRS_RATE = "replica.alter.log.dirs.io.max.bytes.per.second"  # moves between a broker's log directories


def throttle_configs(current: Mapping[TopicPartition, Sequence[int]], plan: Mapping[TopicPartition, Sequence[int]]
                     ) -> tuple[dict[str, dict[str, str]], list[int]]:
    """The topic configs naming the replicas to throttle (topic -> config -> value), and the brokers involved."""
    leaders: dict[str, list[str]] = {}
    followers: dict[str, list[str]] = {}
    brokers: set[int] = set()
    for (topic, partition), target in sorted(plan.items()):
        existing = list(current.get((topic, partition), ()))
        if list(target) == existing:
            continue
        added = [b for b in target if b not in existing]
        leaders.setdefault(topic, []).extend(f"{partition}:{b}" for b in existing)
        followers.setdefault(topic, []).extend(f"{partition}:{b}" for b in added)
        brokers.update(existing, target)
    configs: dict[str, dict[str, str]] = {}
    for topic in sorted(leaders.keys() | followers.keys()):
        configs[topic] = {LEADER_REPLICAS: ",".join(leaders.get(topic, [])),
                          FOLLOWER_REPLICAS: ",".join(followers.get(topic, []))}
    return configs, sorted(brokers)


def set_throttle(admin: AdminClient, current: Mapping[TopicPartition, Sequence[int]],
                 plan: Mapping[TopicPartition, Sequence[int]], rate: int) -> list[int]:
    """Throttle the plan's moves to `rate` bytes per second; returns the brokers given the rate."""
    topics, brokers = throttle_configs(current, plan)
    resources = [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET) for name, value in configs.items()
        if value]) for topic, configs in topics.items()]
    resources += [ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=[
        ConfigEntry(name, str(rate), incremental_operation=AlterConfigOpType.SET)
        for name in (LEADER_RATE, FOLLOWER_RATE)]) for broker in brokers]
    _alter(admin, resources, "set the replication throttle")
    return brokers


def set_log_dirs_throttle(admin: AdminClient, brokers: Sequence[int], rate: int | None) -> None:
    """Hold the moves between log directories of `brokers` to `rate` bytes per second (each broker's copying);
    None removes the limit."""
    operation = AlterConfigOpType.SET if rate is not None else AlterConfigOpType.DELETE
    _alter(admin, [ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=[
        ConfigEntry(LOG_DIRS_RATE, None if rate is None else str(rate), incremental_operation=operation)])
        for broker in brokers], "set the log directory throttle" if rate is not None else
        "remove the log directory throttle")


def clear_throttle(admin: AdminClient, topics: Sequence[str], brokers: Sequence[int]) -> None:
    """Remove the throttled replicas of `topics` and the rates of `brokers` (the log directory one too, as Kafka's
    tool removes all three)."""
    def deleting(names: Sequence[str]) -> list[ConfigEntry]:
        return [ConfigEntry(name, None, incremental_operation=AlterConfigOpType.DELETE) for name in names]

    resources = [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=deleting(
        (LEADER_REPLICAS, FOLLOWER_REPLICAS))) for topic in sorted(set(topics))]
    resources += [ConfigResource(ResourceType.BROKER, str(broker), incremental_configs=deleting(
        (LEADER_RATE, FOLLOWER_RATE, LOG_DIRS_RATE))) for broker in sorted(set(brokers))]
    _alter(admin, resources, "remove the replication throttle")


def _alter(admin: AdminClient, resources: list[ConfigResource], what: str) -> None:
    # librdkafka sends a broker's configs to that broker, so one broker resource per call; topics go together.
    topics = [r for r in resources if r.restype != ResourceType.BROKER]
    for batch in ([topics] if topics else []) + [[r] for r in resources if r.restype == ResourceType.BROKER]:
        _alter_batch(admin, batch, what)


def _alter_batch(admin: AdminClient, resources: list[ConfigResource], what: str) -> None:
    futures = admin.incremental_alter_configs(resources, request_timeout=REQUEST_TIMEOUT_S)
    for resource, future in futures.items():
        try:
            wait_result(future)
        except Exception as exc:
            err = kafka_error(exc)
            if err is None:
                raise request_failed(exc, f"cannot {what}") from None
            raise CliError(f"cannot {what} on {resource.name}: {err.name()}: {err.str()}") from None
