"""Remote topics on the target: created with the source's partition count, grown when the source grows, and
their configs and ACLs kept in step with the source's, through each cluster's admin client.

Errors that only mean another task or worker got there first (TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS when
the count is already reached) are not errors here; anything else is raised with the topic's name.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (  # type: ignore[attr-defined]
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    NewPartitions,
    NewTopic,
    ResourcePatternType,
    ResourceType,
)

__all__ = [
    "create_internal_topic", "ensure_remote_topics", "partition_counts", "sync_topic_acls", "sync_topic_configs",
]

log = logging.getLogger(__name__)
ADMIN_TIMEOUT_S = 30.0


def partition_counts(admin: AdminClient, wanted: Callable[[str], bool] = lambda _: True) -> dict[str, int]:
    """Topic name -> partition count, of the cluster's topics `wanted` accepts."""
    metadata = admin.list_topics(timeout=ADMIN_TIMEOUT_S)
    return {name: len(topic.partitions) for name, topic in metadata.topics.items()
            if topic.error is None and wanted(name)}


def _wait(futures: Mapping[str, object], benign: Iterable[int]) -> None:
    ignored = set(benign)
    for name, future in futures.items():
        try:
            future.result(timeout=ADMIN_TIMEOUT_S)  # type: ignore[attr-defined]
        except KafkaException as e:
            error: KafkaError = e.args[0]
            if error.code() not in ignored:
                raise KafkaException(KafkaError(error.code(), f"{name}: {error.str()}")) from e


def create_internal_topic(admin: AdminClient, name: str, partitions: int, replication_factor: int,
                          configs: Mapping[str, str] | None = None) -> None:
    """Create `name` if it is missing (MirrorMaker 2's internal topics: compacted, few partitions)."""
    if name in partition_counts(admin, lambda topic: topic == name):
        return
    topic = NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                     config=dict(configs or {"cleanup.policy": "compact"}))
    _wait(admin.create_topics([topic], request_timeout=ADMIN_TIMEOUT_S), [KafkaError.TOPIC_ALREADY_EXISTS])


def ensure_remote_topics(target: AdminClient, wanted: Mapping[str, int], replication_factor: int) -> None:
    """Every remote topic in `wanted` (name -> the source's partition count) exists on the target with at
    least that many partitions."""
    existing = partition_counts(target, lambda name: name in wanted)
    missing = [NewTopic(name, num_partitions=count, replication_factor=replication_factor)
               for name, count in sorted(wanted.items()) if name not in existing]
    grown = [NewPartitions(name, count) for name, count in sorted(wanted.items())
             if name in existing and existing[name] < count]
    if missing:
        log.info("mirror: creating remote topics %s", ", ".join(t.topic for t in missing))
        _wait(target.create_topics(missing, request_timeout=ADMIN_TIMEOUT_S), [KafkaError.TOPIC_ALREADY_EXISTS])
    if grown:
        log.info("mirror: adding partitions to %s", ", ".join(p.topic for p in grown))
        _wait(target.create_partitions(grown, request_timeout=ADMIN_TIMEOUT_S), [KafkaError.INVALID_PARTITIONS])


def _explicit_configs(admin: AdminClient, topics: Iterable[str]) -> dict[str, dict[str, str]]:
    """Each topic's configs that were set on it (not broker or built-in defaults)."""
    resources = [ConfigResource(ConfigResource.Type.TOPIC, topic) for topic in topics]
    if not resources:
        return {}
    out: dict[str, dict[str, str]] = {}
    for resource, future in admin.describe_configs(resources, request_timeout=ADMIN_TIMEOUT_S).items():
        entries: dict[str, ConfigEntry] = future.result(timeout=ADMIN_TIMEOUT_S)
        out[resource.name] = {name: entry.value for name, entry in entries.items()
                              if entry.source == ConfigSource.DYNAMIC_TOPIC_CONFIG
                              and entry.value is not None}
    return out


def sync_topic_configs(source: AdminClient, target: AdminClient, remote_names: Mapping[str, str],
                       replicate_property: Callable[[str], bool]) -> None:
    """Set on each remote topic (`remote_names`: source topic -> remote topic) the configs set on its source
    topic that `replicate_property` lets through."""
    wanted = {remote_names[topic]: {k: v for k, v in configs.items() if replicate_property(k)}
              for topic, configs in _explicit_configs(source, remote_names).items()}
    current = _explicit_configs(target, wanted)
    changes = []
    for remote, configs in wanted.items():
        differing = [ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
                     for name, value in sorted(configs.items()) if current.get(remote, {}).get(name) != value]
        if differing:
            changes.append(ConfigResource(ConfigResource.Type.TOPIC, remote, incremental_configs=differing))
    if changes:
        log.info("mirror: syncing configs of %s", ", ".join(r.name for r in changes))
        _wait({r.name: f for r, f in target.incremental_alter_configs(changes,
                                                                     request_timeout=ADMIN_TIMEOUT_S).items()}, [])


def _topic_acls(admin: AdminClient) -> list[AclBinding] | None:
    """Every ACL on literal topic names; None when the cluster has no authorizer (nothing to copy)."""
    any_name: Any = None  # the library's stubs say str, but None is its "any" in a filter
    everything = AclBindingFilter(ResourceType.TOPIC, any_name, ResourcePatternType.LITERAL, any_name, any_name,
                                  AclOperation.ANY, AclPermissionType.ANY)
    try:
        bindings: list[AclBinding] = admin.describe_acls(everything, request_timeout=ADMIN_TIMEOUT_S).result(
            timeout=ADMIN_TIMEOUT_S)
    except KafkaException as e:
        if e.args[0].code() == KafkaError.SECURITY_DISABLED:
            return None
        raise
    return bindings


def sync_topic_acls(source: AdminClient, target: AdminClient, remote_name: Callable[[str], str | None]) -> None:
    """Copy the source's ACLs on replicated topics (`remote_name` gives the remote topic, or None for a topic
    not replicated) to the remote topics, as MirrorMaker 2 does: ALLOW WRITE is not copied and ALL becomes
    READ, because only the mirror writes to a remote topic."""
    bindings = _topic_acls(source)
    if not bindings:
        return
    wanted = []
    for binding in bindings:
        remote = remote_name(binding.name) if binding.name != "*" else None
        if remote is None or (binding.permission_type == AclPermissionType.ALLOW
                              and binding.operation == AclOperation.WRITE):
            continue
        operation = AclOperation.READ if binding.operation == AclOperation.ALL else binding.operation
        wanted.append(AclBinding(ResourceType.TOPIC, remote, ResourcePatternType.LITERAL, binding.principal,
                                 binding.host, operation, binding.permission_type))
    existing = {(b.name, b.principal, b.host, b.operation, b.permission_type) for b in _topic_acls(target) or []}
    missing = [b for b in wanted if (b.name, b.principal, b.host, b.operation, b.permission_type) not in existing]
    if missing:
        log.info("mirror: copying %d topic ACLs", len(missing))
        for binding, future in target.create_acls(missing, request_timeout=ADMIN_TIMEOUT_S).items():
            try:
                future.result(timeout=ADMIN_TIMEOUT_S)
            except KafkaException as e:
                raise KafkaException(KafkaError(e.args[0].code(), f"ACL on {binding.name}: {e.args[0].str()}")) from e
