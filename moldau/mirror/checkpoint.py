"""MirrorCheckpointConnector: translates the source's consumer group offsets to the target, as MirrorMaker 2's
does, so a consumer group can fail over to the target and go on where it was.

The connector lists the source's consumer groups that pass the group filter and splits them among its tasks
(`task.assigned.groups`), looking again every `refresh.groups.interval.seconds`. Every
`emit.checkpoints.interval.seconds` a task reads each group's committed offsets on the source, translates those
of replicated topics through the offset syncs (never ahead: see `offset_syncs`), and writes a checkpoint per
partition to `<source alias>.checkpoints.internal` on the target. A checkpoint never moves a group back unless
the group itself moved back on the source. With `sync.group.offsets.enabled`, every
`sync.group.offsets.interval.seconds` it also commits the translated offsets to the target's groups, only for
groups with no active member there and never behind what the group already committed on the target.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import AdminClient

from moldau.connect.api import SourceConnector, SourceRecord, SourceTask, Task
from moldau.connect.config import ConfigDef, ConfigType, Importance, ValidString
from moldau.connect.data import OPTIONAL_BYTES_SCHEMA
from moldau.mirror import topics
from moldau.mirror.clients import admin_config, client_config
from moldau.mirror.filters import DEFAULTS as FILTER_DEFAULTS
from moldau.mirror.filters import GROUPS, GROUPS_EXCLUDE, GroupFilter, TopicFilter
from moldau.mirror.policy import ReplicationPolicy, replication_policy
from moldau.mirror.records import Checkpoint
from moldau.mirror.source import (
    ENABLED,
    SOURCE_ALIAS,
    TARGET_ALIAS,
    between_clusters,
    mirror_connector_config_def,
    periodic,
    should_replicate,
)
from moldau.mirror.sync_reader import OffsetSyncReader

__all__ = ["MirrorCheckpointConnector", "MirrorCheckpointTask"]

log = logging.getLogger(__name__)

TASK_GROUPS = "task.assigned.groups"
ADMIN_TIMEOUT_S = 30.0
INACTIVE = frozenset({ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD, ConsumerGroupState.UNKNOWN})


def checkpoint_config_def() -> ConfigDef:
    definition = between_clusters(mirror_connector_config_def())
    for job, what, enabled, interval in (
            ("emit.checkpoints", "write checkpoints", True, 60.0),
            ("sync.group.offsets", "commit translated offsets to the target's inactive consumer groups", False, 60.0),
            ("refresh.groups", "look for new consumer groups", True, 600.0)):
        definition = periodic(definition, job, what, enabled, interval, ConfigType.DOUBLE)
    return (definition
            .define(GROUPS, ConfigType.LIST, FILTER_DEFAULTS[GROUPS], Importance.HIGH,
                    "Consumer groups (names or regexes)")
            .define(GROUPS_EXCLUDE, ConfigType.LIST, FILTER_DEFAULTS[GROUPS_EXCLUDE], Importance.HIGH,
                    "Consumer groups not to checkpoint; excludes win over includes")
            .define("checkpoints.topic.replication.factor", ConfigType.SHORT, 3, Importance.LOW,
                    "Replication factor of the checkpoints topic (-1: the broker's default)")
            .define("offset-syncs.topic.location", ConfigType.STRING, "source", Importance.LOW,
                    "Which cluster holds the offset syncs topic", validator=ValidString.in_("source", "target")))


def _wait(future: Any) -> Any:
    return future.result(timeout=ADMIN_TIMEOUT_S)


def list_groups(admin: AdminClient, group_filter: GroupFilter) -> list[str]:
    result = _wait(admin.list_consumer_groups(request_timeout=ADMIN_TIMEOUT_S))
    return sorted(g.group_id for g in result.valid if group_filter.should_replicate(g.group_id))


def committed_offsets(admin: AdminClient, group: str) -> dict[tuple[str, int], int]:
    """(topic, partition) -> committed offset, for the partitions `group` has committed."""
    request = [ConsumerGroupTopicPartitions(group)]
    result = _wait(admin.list_consumer_group_offsets(request, request_timeout=ADMIN_TIMEOUT_S)[group])
    return {(tp.topic, tp.partition): tp.offset for tp in result.topic_partitions or [] if tp.offset >= 0}


class MirrorCheckpointConnector(SourceConnector):
    aliases = ("org.apache.kafka.connect.mirror.MirrorCheckpointConnector",)

    def __init__(self) -> None:
        self.props: dict[str, str] = {}
        self._groups: list[str] = []
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._refresher: threading.Thread | None = None
        self._settings: dict[str, Any] = {}

    def config_def(self) -> ConfigDef:
        return checkpoint_config_def()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self._settings = checkpoint_config_def().parse(props)
        if not (self._settings[ENABLED] and self._settings["emit.checkpoints.enabled"]):
            return
        self._source = AdminClient(admin_config(props, "source"))
        self._filter = GroupFilter(props)
        policy = replication_policy(props)
        topics.create_internal_topic(AdminClient(admin_config(props, "target")),
                                     policy.checkpoints_topic(self._settings[SOURCE_ALIAS]), 1,
                                     self._settings["checkpoints.topic.replication.factor"])
        self._groups = list_groups(self._source, self._filter)
        if self._settings["refresh.groups.enabled"]:
            self._stopping.clear()
            self._refresher = threading.Thread(target=self._refresh_loop, name="mirror-groups", daemon=True)
            self._refresher.start()

    def _refresh_loop(self) -> None:
        while not self._stopping.wait(self._settings["refresh.groups.interval.seconds"]):
            try:
                found = list_groups(self._source, self._filter)
            except Exception:
                log.exception("mirror: listing the consumer groups of %s failed", self._settings[SOURCE_ALIAS])
                continue
            with self._lock:
                changed, self._groups = found != self._groups, found
            if changed and self.context is not None:
                self.context.request_task_reconfiguration()

    def task_class(self) -> type[Task]:
        return MirrorCheckpointTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        with self._lock:
            groups = list(self._groups)
        if not groups or not (self._settings.get(ENABLED) and self._settings.get("emit.checkpoints.enabled")):
            return []
        tasks = min(max_tasks, len(groups))
        return [{**self.props, TASK_GROUPS: ",".join(groups[i::tasks])} for i in range(tasks)]

    def stop(self) -> None:
        self._stopping.set()
        if self._refresher is not None:
            self._refresher.join(timeout=30)
            self._refresher = None


class MirrorCheckpointTask(SourceTask):
    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._stopping = threading.Event()
        self._reader: OffsetSyncReader | None = None
        # (group, upstream topic, partition) -> the last checkpoint written, so checkpoints never go back.
        self._last: dict[tuple[str, str, int], Checkpoint] = {}

    def start(self, props: Mapping[str, str]) -> None:
        settings = checkpoint_config_def().parse(props)
        self._source_alias: str = settings[SOURCE_ALIAS]
        self._target_alias: str = settings[TARGET_ALIAS]
        self._policy: ReplicationPolicy = replication_policy(props)
        self._topic_filter = TopicFilter(props)
        self._groups = [g.strip() for g in props.get(TASK_GROUPS, "").split(",") if g.strip()]
        self._checkpoints_topic = self._policy.checkpoints_topic(self._source_alias)
        self._emit_s: float = settings["emit.checkpoints.interval.seconds"]
        self._sync_s: float | None = settings["sync.group.offsets.interval.seconds"] \
            if settings["sync.group.offsets.enabled"] else None
        self._source = AdminClient(admin_config(props, "source"))
        self._target = AdminClient(admin_config(props, "target"))
        on_source = settings["offset-syncs.topic.location"] == "source"
        syncs_topic = self._policy.offset_syncs_topic(self._target_alias if on_source else self._source_alias)
        self._reader = OffsetSyncReader(client_config(props, "source" if on_source else "target", "consumer"),
                                        syncs_topic)
        self._reader.start()
        self._next_sync = self._clock() + (self._sync_s or 0)

    def poll(self) -> list[SourceRecord] | None:
        if self._stopping.wait(self._emit_s):
            return None
        checkpoints = [c for group in self._groups for c in self._group_checkpoints(group)]
        if self._sync_s is not None and self._clock() >= self._next_sync:
            self._next_sync = self._clock() + self._sync_s
            self._sync_group_offsets()
        return [self._record(c) for c in checkpoints] or None

    def _group_checkpoints(self, group: str) -> list[Checkpoint]:
        assert self._reader is not None
        try:
            offsets = committed_offsets(self._source, group)
        except Exception as e:
            log.warning("mirror: cannot read the offsets of group %s on %s: %s", group, self._source_alias, e)
            return []
        out = []
        for (topic, partition), upstream in sorted(offsets.items()):
            if not should_replicate(topic, self._policy, self._topic_filter, self._target_alias):
                continue
            downstream = self._reader.translate(topic, partition, upstream)
            if downstream is None:
                continue
            checkpoint = Checkpoint(group, self._policy.format_remote_topic(self._source_alias, topic), partition,
                                    upstream, downstream)
            previous = self._last.get((group, topic, partition))
            if previous is not None and (previous == checkpoint or (
                    upstream >= previous.upstream_offset and downstream < previous.downstream_offset)):
                continue  # nothing new, or a coarser translation that would move the group back
            self._last[(group, topic, partition)] = checkpoint
            out.append(checkpoint)
        return out

    def _record(self, checkpoint: Checkpoint) -> SourceRecord:
        return SourceRecord(topic=self._checkpoints_topic, kafka_partition=0, key_schema=OPTIONAL_BYTES_SCHEMA,
                            key=checkpoint.key(), value_schema=OPTIONAL_BYTES_SCHEMA, value=checkpoint.value(),
                            source_partition={"group": checkpoint.group, "topic": checkpoint.topic,
                                              "partition": checkpoint.partition},
                            source_offset={"offset": 0})

    def _sync_group_offsets(self) -> None:
        by_group: dict[str, list[Checkpoint]] = {}
        for (group, _, _), checkpoint in self._last.items():
            by_group.setdefault(group, []).append(checkpoint)
        for group, checkpoints in sorted(by_group.items()):
            try:
                self._sync_group(group, checkpoints)
            except Exception as e:
                log.warning("mirror: cannot commit translated offsets of group %s on %s: %s", group,
                            self._target_alias, e)

    def _sync_group(self, group: str, checkpoints: list[Checkpoint]) -> None:
        description = _wait(self._target.describe_consumer_groups([group], request_timeout=ADMIN_TIMEOUT_S)[group])
        if description.state not in INACTIVE or description.members:
            return  # consumers are at work on the target: their own commits win
        current = committed_offsets(self._target, group)
        ahead = [TopicPartition(c.topic, c.partition, c.downstream_offset) for c in checkpoints
                 if current.get((c.topic, c.partition), -1) < c.downstream_offset]
        if ahead:
            request = [ConsumerGroupTopicPartitions(group, ahead)]
            _wait(self._target.alter_consumer_group_offsets(request, request_timeout=ADMIN_TIMEOUT_S)[group])

    def stop(self) -> None:
        self._stopping.set()
        if self._reader is not None:
            self._reader.stop()
            self._reader = None
