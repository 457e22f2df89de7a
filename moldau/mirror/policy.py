"""Replication policies: how a topic replicated from cluster `a` is named on the target, and how MirrorMaker
2's internal topics are named. The names and config keys are MirrorMaker 2's, so a mirrored cluster looks the
same to tools whichever implementation replicated it.

`DefaultReplicationPolicy` prefixes remote topics with the source alias (`a.orders`); that prefix is what lets
active/active flows stop a record from going round in a cycle: a topic whose name says it came from the
target is never copied back there. `IdentityReplicationPolicy` keeps names unchanged (one-way flows, or a
migration), so it cannot detect cycles; heartbeats alone keep the prefixed name.
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = [
    "DEFAULT_HEARTBEATS_TOPIC", "IdentityReplicationPolicy", "ReplicationPolicy", "replication_policy",
]

REPLICATION_POLICY_CLASS = "replication.policy.class"
SEPARATOR = "replication.policy.separator"
INTERNAL_TOPIC_SEPARATOR_ENABLED = "replication.policy.internal.topic.separator.enabled"
HEARTBEATS_TOPIC_NAME = "default.replication.policy.heartbeats.topic.name"
SOURCE_CLUSTER_ALIAS = "source.cluster.alias"
DEFAULT_HEARTBEATS_TOPIC = "heartbeats"


class ReplicationPolicy:
    """MirrorMaker 2's DefaultReplicationPolicy (its class name is an alias): remote topics are
    `<source alias><separator><topic>`. Other policies change what differs from it."""

    aliases: tuple[str, ...] = (
        "DefaultReplicationPolicy", "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
    )

    def __init__(self, separator: str = ".", internal_separator_enabled: bool = True,
                 heartbeats_topic: str = DEFAULT_HEARTBEATS_TOPIC) -> None:
        if not separator:
            raise ValueError(f"{SEPARATOR} must not be empty")
        self.separator = separator
        # Older MirrorMaker 2 versions always used "." in internal topic names; this keeps their names.
        self._internal_separator = separator if internal_separator_enabled else "."
        self._heartbeats_topic = heartbeats_topic

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> str | None:
        """The alias of the cluster `topic` was replicated from, or None for a topic that is not remote."""
        parts = topic.split(self.separator)
        # As Java's String.split: trailing empty parts do not count ("a." is not a remote topic).
        while parts and not parts[-1]:
            parts.pop()
        return parts[0] if len(parts) >= 2 else None

    def upstream_topic(self, topic: str) -> str | None:
        """The topic's name one hop upstream (itself maybe remote), or None for a topic that is not remote."""
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator):]

    def original_topic(self, topic: str) -> str:
        """The topic's name where it was first written, however many hops ago."""
        while (upstream := self.upstream_topic(topic)) is not None and upstream != topic:
            topic = upstream
        return topic

    def heartbeats_topic(self) -> str:
        return self._heartbeats_topic

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        return f"mm2-offset-syncs{self._internal_separator}{cluster_alias}{self._internal_suffix()}"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        return f"{cluster_alias}{self._checkpoints_suffix()}"

    def is_checkpoints_topic(self, topic: str) -> bool:
        return topic.endswith(self._checkpoints_suffix())

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(self._internal_suffix())

    def is_heartbeats_topic(self, topic: str) -> bool:
        """The heartbeats topic itself or a remote copy of it, however many hops away."""
        return self.original_topic(topic) == self._heartbeats_topic

    @staticmethod
    def is_internal_topic(topic: str) -> bool:
        """Topics never replicated: Kafka's and Connect's internal ones (`__consumer_offsets`, `*.internal`...)."""
        return topic.endswith((".internal", "-internal")) or topic.startswith(("__", "."))

    def _internal_suffix(self) -> str:
        return f"{self._internal_separator}internal"

    def _checkpoints_suffix(self) -> str:
        return f"{self._internal_separator}checkpoints{self._internal_suffix()}"


class IdentityReplicationPolicy(ReplicationPolicy):
    """Remote topics keep their names; only heartbeats are prefixed, so the topology stays discoverable.
    `source.cluster.alias`, when given, is what `topic_source` answers for every other topic."""

    aliases = ("IdentityReplicationPolicy", "org.apache.kafka.connect.mirror.IdentityReplicationPolicy")

    def __init__(self, separator: str = ".", internal_separator_enabled: bool = True,
                 heartbeats_topic: str = DEFAULT_HEARTBEATS_TOPIC, source_alias: str | None = None) -> None:
        super().__init__(separator, internal_separator_enabled, heartbeats_topic)
        self._source_alias = source_alias

    def _looks_like_heartbeats(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return super().format_remote_topic(source_alias, topic) if self._looks_like_heartbeats(topic) else topic

    def topic_source(self, topic: str) -> str | None:
        return super().topic_source(topic) if self._looks_like_heartbeats(topic) else self._source_alias

    def upstream_topic(self, topic: str) -> str | None:
        return super().upstream_topic(topic) if self._looks_like_heartbeats(topic) else topic


_POLICIES: dict[str, type[ReplicationPolicy]] = {
    name: policy for policy in (ReplicationPolicy, IdentityReplicationPolicy) for name in policy.aliases
}


def replication_policy(config: Mapping[str, str]) -> ReplicationPolicy:
    """The policy `replication.policy.class` names (Kafka's class names or the short ones), configured from
    `config` as MirrorMaker 2 configures it. An unknown class is a ValueError naming the config."""
    name = config.get(REPLICATION_POLICY_CLASS, "DefaultReplicationPolicy").strip()
    policy = _POLICIES.get(name)
    if policy is None:
        known = ", ".join(sorted(n for n in _POLICIES if "." not in n))
        raise ValueError(f"{REPLICATION_POLICY_CLASS}: unknown replication policy {name!r} (known: {known})")
    separator = config.get(SEPARATOR, ".")
    internal = config.get(INTERNAL_TOPIC_SEPARATOR_ENABLED, "true").strip().lower()
    if internal not in ("true", "false"):
        raise ValueError(f"{INTERNAL_TOPIC_SEPARATOR_ENABLED}: expected true or false, got {internal!r}")
    heartbeats = config.get(HEARTBEATS_TOPIC_NAME, DEFAULT_HEARTBEATS_TOPIC)
    if policy is IdentityReplicationPolicy:
        return IdentityReplicationPolicy(separator, internal == "true", heartbeats, config.get(SOURCE_CLUSTER_ALIAS))
    return policy(separator, internal == "true", heartbeats)
