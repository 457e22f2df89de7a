"""MirrorHeartbeatConnector: every `emit.heartbeats.interval.seconds`, a heartbeat record into the `heartbeats`
topic of the cluster its worker writes to, keyed by the flow's two aliases, as MirrorMaker 2's does.

Heartbeats are replicated like any topic (and always, whatever the topic filter), so a heartbeat arriving at
`<alias>.heartbeats` on another cluster shows the flow from `<alias>` is alive, and `moldau mirror status`
measures a flow's lag in seconds from the newest one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from confluent_kafka.admin import AdminClient

from moldau.connect.api import SourceConnector, SourceRecord, SourceTask, Task
from moldau.connect.config import ConfigDef, ConfigType, Importance
from moldau.connect.data import OPTIONAL_BYTES_SCHEMA
from moldau.mirror import topics
from moldau.mirror.clients import admin_config
from moldau.mirror.policy import replication_policy
from moldau.mirror.records import Heartbeat
from moldau.mirror.source import SOURCE_ALIAS, TARGET_ALIAS, mirror_connector_config_def, periodic, requires_cluster

__all__ = ["MirrorHeartbeatConnector", "MirrorHeartbeatTask"]


def heartbeat_config_def() -> ConfigDef:
    return (periodic(requires_cluster(mirror_connector_config_def(), "target"), "emit.heartbeats", "emit heartbeats",
                     True, 1.0, ConfigType.DOUBLE)
            .define("heartbeats.topic.replication.factor", ConfigType.SHORT, 3, Importance.LOW,
                    "Replication factor of the heartbeats topic (-1: the broker's default)"))


class MirrorHeartbeatConnector(SourceConnector):
    aliases = ("org.apache.kafka.connect.mirror.MirrorHeartbeatConnector",)

    def __init__(self) -> None:
        self.props: dict[str, str] = {}
        self._emitting = False

    def config_def(self) -> ConfigDef:
        return heartbeat_config_def()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        settings = heartbeat_config_def().parse(props)
        # A flow that is not enabled still emits heartbeats, unless they are switched off (as MirrorMaker 2).
        self._emitting = bool(settings["emit.heartbeats.enabled"])
        if self._emitting:
            topics.create_internal_topic(AdminClient(admin_config(props, "target")),
                                         replication_policy(props).heartbeats_topic(), 1,
                                         settings["heartbeats.topic.replication.factor"])

    def task_class(self) -> type[Task]:
        return MirrorHeartbeatTask

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        return [dict(self.props)] if self._emitting else []

    def stop(self) -> None:
        pass


class MirrorHeartbeatTask(SourceTask):
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._stopping = threading.Event()

    def start(self, props: Mapping[str, str]) -> None:
        settings = heartbeat_config_def().parse(props)
        self._source: str = settings[SOURCE_ALIAS]
        self._target: str = settings[TARGET_ALIAS]
        self._interval_s: float = settings["emit.heartbeats.interval.seconds"]
        self._topic = replication_policy(props).heartbeats_topic()

    def poll(self) -> list[SourceRecord] | None:
        if self._stopping.wait(self._interval_s):
            return None
        heartbeat = Heartbeat(self._source, self._target, int(self._clock() * 1000))
        return [SourceRecord(topic=self._topic, kafka_partition=0, key_schema=OPTIONAL_BYTES_SCHEMA,
                             key=heartbeat.key(), value_schema=OPTIONAL_BYTES_SCHEMA, value=heartbeat.value(),
                             timestamp=heartbeat.timestamp_ms,
                             source_partition={"sourceClusterAlias": self._source,
                                               "targetClusterAlias": self._target},
                             source_offset={"offset": 0})]

    def stop(self) -> None:
        self._stopping.set()
