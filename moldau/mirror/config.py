"""MirrorMaker 2's dedicated-mode configuration: one properties file describing clusters and the flows
between them, turned into a Connect worker config and connector configs per flow, as MirrorMaker 2 does, so
an existing `mm2.properties` works unchanged.

    clusters = east, west
    east.bootstrap.servers = east-1:9092
    west.bootstrap.servers = west-1:9092
    east->west.enabled = true
    east->west.topics = orders, payments.*

Keys are read at three levels, the most specific winning: top level (`topics = ...`), cluster level
(`east.security.protocol = SSL`, for every client talking to that cluster), and flow level
(`east->west.topics = ...`). A flow `a->b` runs on a Connect worker whose clients talk to the target `b`; its
connectors reach the source through `source.cluster.*` keys and the target through `target.cluster.*` keys.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from moldau.cli.command_config import to_librdkafka

__all__ = ["CLIENT_CONFIG_NAMES", "CONNECTOR_CONFIG_NAMES", "Flow", "MirrorMakerConfig"]

CLUSTERS = "clusters"
ENABLED = "enabled"
EMIT_HEARTBEATS_ENABLED = "emit.heartbeats.enabled"
BYTE_ARRAY_CONVERTER = "org.apache.kafka.connect.converters.ByteArrayConverter"

# The connectors' own settings; other top-level keys are not handed to them (as MirrorMaker 2 filters).
CONNECTOR_CONFIG_NAMES = frozenset({
    "enabled", "tasks.max", "topics", "topics.exclude", "topics.blacklist", "groups", "groups.exclude",
    "groups.blacklist", "config.properties.exclude", "config.properties.blacklist",
    "refresh.topics.enabled", "refresh.topics.interval.seconds", "refresh.groups.enabled",
    "refresh.groups.interval.seconds", "sync.topic.configs.enabled", "sync.topic.configs.interval.seconds",
    "sync.topic.acls.enabled", "sync.topic.acls.interval.seconds", "emit.heartbeats.enabled",
    "emit.heartbeats.interval.seconds", "emit.checkpoints.enabled", "emit.checkpoints.interval.seconds",
    "emit.offset-syncs.enabled", "sync.group.offsets.enabled", "sync.group.offsets.interval.seconds",
    "replication.factor", "offset-syncs.topic.replication.factor", "offset-syncs.topic.location",
    "checkpoints.topic.replication.factor", "heartbeats.topic.replication.factor", "offset.lag.max",
    "consumer.poll.timeout.ms", "admin.timeout.ms", "exactly.once.support", "transaction.boundary",
})
# What every client needs to reach a cluster: a cluster-level value is handed to its producer, consumer and
# admin clients alike, and a top-level value is the default for every cluster.
CLIENT_CONFIG_NAMES = frozenset({
    "bootstrap.servers", "security.protocol", "sasl.mechanism", "sasl.jaas.config", "sasl.username",
    "sasl.password", "ssl.truststore.location", "ssl.truststore.type", "ssl.keystore.location",
    "ssl.keystore.type", "ssl.key.password", "ssl.endpoint.identification.algorithm", "ssl.ca.location",
    "ssl.certificate.location", "ssl.key.location",
})
# Top-level worker settings MirrorMaker 2 passes to every flow's worker.
WORKER_PREFIXES = ("offset.storage", "config.storage", "status.storage", "key.converter", "value.converter",
                   "header.converter", "task", "worker", "replication.policy", "exactly.once.source.support")
_CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")
_ALIAS = re.compile(r"[A-Za-z0-9_\-]+")


@dataclass(frozen=True, slots=True)
class Flow:
    source: str
    target: str

    def __str__(self) -> str:
        return f"{self.source}->{self.target}"


def _boolean(props: Mapping[str, str], key: str, default: bool) -> bool:
    raw = props.get(key)
    if raw is None:
        return default
    value = raw.strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"{key}: expected true or false, got {raw!r}")
    return value == "true"


def _with_prefix_stripped(props: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {key[len(prefix):]: value for key, value in props.items() if key.startswith(prefix)}


class MirrorMakerConfig:
    """A parsed `mm2.properties`. Malformed configs are ValueErrors naming the key at fault."""

    def __init__(self, props: Mapping[str, str]) -> None:
        self.props = {key.strip(): value.strip() for key, value in props.items()}
        raw = self.props.get(CLUSTERS, "")
        self.clusters = [alias.strip() for alias in raw.split(",") if alias.strip()]
        if not self.clusters:
            raise ValueError(f"{CLUSTERS}: list at least one cluster alias")
        for alias in self.clusters:
            if not _ALIAS.fullmatch(alias):
                raise ValueError(f"{CLUSTERS}: cluster alias {alias!r} may hold only letters, digits, '_' and '-'")
        if len(set(self.clusters)) != len(self.clusters):
            raise ValueError(f"{CLUSTERS}: an alias is listed twice in {raw!r}")
        for flow in self.flows():
            for alias in (flow.source, flow.target):
                if not self.cluster_props(alias).get("bootstrap.servers"):
                    raise ValueError(f"{alias}.bootstrap.servers: required for flow {flow}")

    def flows(self) -> list[Flow]:
        """Every pair a worker runs for: enabled flows replicate; the others, unless heartbeats are off, only
        emit heartbeats (so the reverse flow's target learns the source is alive, as MirrorMaker 2 does)."""
        heartbeats = _boolean(self.props, EMIT_HEARTBEATS_ENABLED, True)
        pairs = []
        for source in self.clusters:
            for target in self.clusters:
                if source == target:
                    continue
                flow = Flow(source, target)
                if self.enabled(flow) or _boolean(self.props, f"{flow}.{EMIT_HEARTBEATS_ENABLED}", heartbeats):
                    pairs.append(flow)
        return pairs

    def enabled(self, flow: Flow) -> bool:
        return _boolean(self.props, f"{flow}.{ENABLED}", False)

    def cluster_props(self, alias: str) -> dict[str, str]:
        """Everything said about cluster `alias`, with client settings copied to its producer, consumer and
        admin clients, and top-level client settings as defaults."""
        props = _with_prefix_stripped(self.props, f"{alias}.")
        for key in CLIENT_CONFIG_NAMES:
            for value in (props.get(key), self.props.get(key)):
                if value is not None:
                    props.setdefault(key, value)
                    for prefix in _CLIENT_PREFIXES:
                        props.setdefault(prefix + key, value)
        return props

    def librdkafka(self, alias: str) -> dict[str, Any]:
        """librdkafka settings to connect to cluster `alias` (for the mirror's own tools)."""
        props = self.cluster_props(alias)
        if not props.get("bootstrap.servers"):
            raise ValueError(f"{alias}.bootstrap.servers: required")
        return to_librdkafka({key: value for key, value in props.items()
                              if key == "bootstrap.servers" or key.startswith(("security.", "ssl.", "sasl."))})

    def flow_between(self, source: str | None, target: str | None) -> Flow:
        """The enabled flow from `source` to `target`; either may be left out when only one flow fits."""
        candidates = [f for f in self.flows() if self.enabled(f) and source in (None, f.source)
                      and target in (None, f.target)]
        if len(candidates) != 1:
            wanted = f"{source or '*'}->{target or '*'}"
            found = ", ".join(map(str, candidates)) or "none"
            raise ValueError(f"{wanted}: expected exactly one enabled flow to match, found {found}")
        return candidates[0]

    def worker_config(self, flow: Flow) -> dict[str, str]:
        """The Connect worker config of the flow's worker: it talks to the target, its internal topics are
        MirrorMaker 2's (`mm2-offsets.<source>.internal`...), its converters pass bytes through, and the flow's
        own `a->b.*` keys apply to it."""
        props = self.cluster_props(flow.target)
        for prefix in WORKER_PREFIXES:
            props.update({key: value for key, value in self.props.items() if key.startswith(prefix)})
        # Settings for this flow's worker alone (`east->west.offset.flush.interval.ms = 500`).
        props.update(_with_prefix_stripped(self.props, f"{flow}."))
        defaults = {
            "client.id": str(flow),
            "group.id": f"{flow.source}-mm2",
            "offset.storage.topic": f"mm2-offsets.{flow.source}.internal",
            "status.storage.topic": f"mm2-status.{flow.source}.internal",
            "config.storage.topic": f"mm2-configs.{flow.source}.internal",
            "key.converter": BYTE_ARRAY_CONVERTER,
            "value.converter": BYTE_ARRAY_CONVERTER,
            "header.converter": BYTE_ARRAY_CONVERTER,
        }
        for key, value in defaults.items():
            props.setdefault(key, value)
        return props

    def connector_config(self, flow: Flow, name: str, connector_class: str) -> dict[str, str]:
        """A connector's config for `flow`: the connector settings from the top level, both clusters'
        connection settings (`source.cluster.*`, `source.consumer.*`, `target.cluster.*`, `target.admin.*`...),
        then the flow's own `a->b.*` keys over all of it."""
        props = {key: value for key, value in self.props.items()
                 if key in CONNECTOR_CONFIG_NAMES or key.startswith("replication.policy")}
        for side, alias in (("source", flow.source), ("target", flow.target)):
            for key, value in self.cluster_props(alias).items():
                client_key = key.startswith(_CLIENT_PREFIXES)
                props[f"{side}.{key}" if client_key else f"{side}.cluster.{key}"] = value
        props.update({"name": name, "connector.class": connector_class,
                      "source.cluster.alias": flow.source, "target.cluster.alias": flow.target})
        props.update(_with_prefix_stripped(self.props, f"{flow}."))
        props.setdefault(ENABLED, "false")
        return props
