"""MirrorSourceConnector: copies topics from the source cluster to the target, as MirrorMaker 2's does.

The connector lists the source's topics that the flow replicates (the topic filter, never internal topics,
never a topic that came from the target: that is what stops active/active flows from copying records back
and forth), creates their remote topics on the target with the same partition count, splits the partitions
among its tasks (`task.assigned.partitions`), and looks again every `refresh.topics.interval.seconds` for new
topics and partitions. It also copies topic configs every `sync.topic.configs.interval.seconds` and, when the
source has an authorizer, topic ACLs every `sync.topic.acls.interval.seconds`.

A task reads its partitions with a consumer of its own (no consumer group: positions live in Connect's offset
store, as `{"cluster", "topic", "partition"} -> {"offset"}` like MirrorMaker 2's), and returns each record
with its key, value, headers, timestamp and partition unchanged, as bytes (run it with the ByteArrayConverter:
then, without transforms, the worker produces the consumed messages as they are, see
`moldau.connect.passthrough`). For each record (or run of records) the target acknowledges, it tells the
`OffsetSyncWriter`, and writes the offset syncs that are due to `mm2-offset-syncs.<target alias>.internal`, on
the source cluster unless `offset-syncs.topic.location` says target.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, Message, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import AdminClient

from moldau.connect.api import (
    ExactlyOnceSupport,
    Header,
    RecordMetadata,
    SourceConnector,
    SourceRecord,
    Task,
)
from moldau.connect.config import ConfigDef, ConfigType, Importance, Range, ValidString
from moldau.connect.data import OPTIONAL_BYTES_SCHEMA
from moldau.connect.errors import ConnectException
from moldau.connect.passthrough import PassthroughSourceTask
from moldau.mirror import topics
from moldau.mirror.clients import admin_config, client_config
from moldau.mirror.filters import DEFAULTS as FILTER_DEFAULTS
from moldau.mirror.filters import TOPICS, TOPICS_EXCLUDE, ConfigPropertyFilter, TopicFilter
from moldau.mirror.offset_syncs import OffsetSyncWriter
from moldau.mirror.policy import ReplicationPolicy, replication_policy
from moldau.text import ascii_digits

__all__ = [
    "MirrorSourceConnector", "MirrorSourceTask", "between_clusters", "mirror_connector_config_def", "periodic",
    "requires_cluster", "should_replicate",
]

log = logging.getLogger(__name__)

TASK_PARTITIONS = "task.assigned.partitions"
ENABLED = "enabled"
SOURCE_ALIAS = "source.cluster.alias"
TARGET_ALIAS = "target.cluster.alias"
MAX_POLL_RECORDS = 1000


def mirror_connector_config_def() -> ConfigDef:
    """The settings every mirror connector shares."""
    return (ConfigDef()
            .define(ENABLED, ConfigType.BOOLEAN, True, Importance.LOW, "Whether to replicate source->target")
            .define(SOURCE_ALIAS, ConfigType.STRING, importance=Importance.HIGH, documentation="Alias of the source")
            .define(TARGET_ALIAS, ConfigType.STRING, "target", Importance.LOW, "Alias of the target")
            .define("replication.policy.class", ConfigType.STRING, "DefaultReplicationPolicy", Importance.LOW,
                    "How remote topics are named (DefaultReplicationPolicy, IdentityReplicationPolicy)",
                    validator=ValidString.in_(
                        "DefaultReplicationPolicy", "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
                        "IdentityReplicationPolicy", "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"))
            .define("replication.policy.separator", ConfigType.STRING, ".", Importance.LOW,
                    "Separator of the source alias and the topic in remote topic names"))


def requires_cluster(definition: ConfigDef, side: str) -> ConfigDef:
    """`definition` with `<side>.cluster.bootstrap.servers` required, so a config without it is refused when
    validated (a 400 naming it), not when the connector starts."""
    return definition.define(f"{side}.cluster.bootstrap.servers", ConfigType.STRING, importance=Importance.HIGH,
                             documentation=f"The {side} cluster's bootstrap servers")


def between_clusters(definition: ConfigDef) -> ConfigDef:
    """`definition` with both clusters required and the topic filter (which topics the flow replicates)."""
    return (requires_cluster(requires_cluster(definition, "source"), "target")
            .define(TOPICS, ConfigType.LIST, FILTER_DEFAULTS[TOPICS], Importance.HIGH,
                    "Topics (names or regexes) the flow replicates")
            .define(TOPICS_EXCLUDE, ConfigType.LIST, FILTER_DEFAULTS[TOPICS_EXCLUDE], Importance.HIGH,
                    "Topics the flow does not replicate; excludes win over includes"))


def periodic(definition: ConfigDef, job: str, what: str, enabled: bool, interval: float,
             type_: ConfigType = ConfigType.LONG) -> ConfigDef:
    """`definition` with MirrorMaker 2's pair for a periodic job: `<job>.enabled` and
    `<job>.interval.seconds` (at least one second for whole seconds, 10 ms for fractional ones)."""
    least = Range.at_least(1) if type_ is ConfigType.LONG else Range.at_least(0.01)
    return (definition
            .define(f"{job}.enabled", ConfigType.BOOLEAN, enabled, Importance.LOW, f"Whether to {what}")
            .define(f"{job}.interval.seconds", type_, interval, Importance.LOW, f"How often to {what}",
                    validator=least))


def source_config_def() -> ConfigDef:
    definition = between_clusters(mirror_connector_config_def())
    for job, what in (("refresh.topics", "look for new topics and partitions"),
                      ("sync.topic.configs", "copy topic configs to the remote topics"),
                      ("sync.topic.acls", "copy the source's topic ACLs to the remote topics")):
        definition = periodic(definition, job, what, True, 600)
    return (definition
            .define("replication.factor", ConfigType.INT, 2, Importance.LOW,
                    "Replication factor of new remote topics (-1: the target broker's default)")
            .define("offset-syncs.topic.replication.factor", ConfigType.SHORT, 3, Importance.LOW,
                    "Replication factor of the offset syncs topic (-1: the broker's default)")
            .define("offset-syncs.topic.location", ConfigType.STRING, "source", Importance.LOW,
                    "Which cluster holds the offset syncs topic", validator=ValidString.in_("source", "target"))
            .define("emit.offset-syncs.enabled", ConfigType.BOOLEAN, True, Importance.LOW,
                    "Whether to write offset syncs (consumer group offsets cannot be translated without them)")
            .define("offset.lag.max", ConfigType.LONG, 100, Importance.LOW,
                    "How far behind a translated offset may fall before an offset sync is written at once",
                    validator=Range.at_least(0))
            .define("consumer.poll.timeout.ms", ConfigType.LONG, 1000, Importance.LOW,
                    "How long a task waits for records from the source", validator=Range.at_least(0)))


def _is_cycle(policy: ReplicationPolicy, topic: str, target_alias: str) -> bool:
    """Whether `topic` came, at any hop, from the target: copying it there would send records in a circle."""
    while (source := policy.topic_source(topic)) is not None:
        if source == target_alias:
            return True
        upstream = policy.upstream_topic(topic)
        if upstream is None or upstream == topic:
            return False
        topic = upstream
    return False


def should_replicate(topic: str, policy: ReplicationPolicy, topic_filter: TopicFilter, target_alias: str) -> bool:
    """MirrorMaker 2's rule: filtered in (heartbeats always), not internal, not a cycle."""
    return ((topic_filter.should_replicate(topic) or policy.is_heartbeats_topic(topic))
            and not policy.is_internal_topic(topic) and not _is_cycle(policy, topic, target_alias))


def encode_partition(topic: str, partition: int) -> str:
    return f"{topic}-{partition}"


def decode_partition(encoded: str) -> tuple[str, int]:
    topic, _, partition = encoded.strip().rpartition("-")
    if not topic or not ascii_digits(partition):
        raise ConnectException(f"{TASK_PARTITIONS}: {encoded!r} is not <topic>-<partition>")
    return topic, int(partition)


class MirrorSourceConnector(SourceConnector):
    aliases = ("org.apache.kafka.connect.mirror.MirrorSourceConnector",)

    def __init__(self) -> None:
        self.props: dict[str, str] = {}
        self._settings: dict[str, Any] = {}
        self._partitions: dict[str, int] = {}
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._refresher: threading.Thread | None = None
        self._source: AdminClient | None = None
        self._target: AdminClient | None = None

    def config_def(self) -> ConfigDef:
        return source_config_def()

    def start(self, props: Mapping[str, str]) -> None:
        self.props = dict(props)
        self._settings = source_config_def().parse(props)
        if not self._settings[ENABLED]:
            return
        self._policy = replication_policy(self.props)
        self._filter = TopicFilter(self.props)
        self._source = AdminClient(admin_config(self.props, "source"))
        self._target = AdminClient(admin_config(self.props, "target"))
        self._create_offset_syncs_topic()
        self._partitions = self._refresh_topics()
        self._sync_configs()
        self._sync_acls()
        self._stopping.clear()
        self._refresher = threading.Thread(target=self._refresh_loop, name="mirror-source-refresh", daemon=True)
        self._refresher.start()

    def task_class(self) -> type[Task]:
        return MirrorSourceTask

    def exactly_once_support(self, props: Mapping[str, str]) -> ExactlyOnceSupport:
        """MirrorMaker 2's answer: exactly-once only when the tasks read the source read_committed (an aborted
        source transaction's records would otherwise be copied as if committed). librdkafka, unlike the Java
        client, reads read_committed unless `source.consumer.isolation.level` says otherwise."""
        level = client_config(props, "source", "consumer").get("isolation.level", "read_committed")
        return ExactlyOnceSupport.SUPPORTED if str(level).strip().lower() == "read_committed" \
            else ExactlyOnceSupport.UNSUPPORTED

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        with self._lock:
            partitions = sorted((topic, p) for topic, count in self._partitions.items() for p in range(count))
        if not self._settings.get(ENABLED) or not partitions:
            return []
        tasks = min(max_tasks, len(partitions))
        # Round robin, so each task gets partitions of many topics rather than whole busy topics.
        return [{**self.props, TASK_PARTITIONS: ",".join(encode_partition(t, p) for t, p in partitions[i::tasks])}
                for i in range(tasks)]

    def stop(self) -> None:
        self._stopping.set()
        if self._refresher is not None:
            self._refresher.join(timeout=30)
            self._refresher = None

    def _create_offset_syncs_topic(self) -> None:
        if not self._settings["emit.offset-syncs.enabled"]:
            return
        on_source = self._settings["offset-syncs.topic.location"] == "source"
        admin = self._source if on_source else self._target
        assert admin is not None
        other = self._settings[TARGET_ALIAS] if on_source else self._settings[SOURCE_ALIAS]
        topics.create_internal_topic(admin, self._policy.offset_syncs_topic(other), 1,
                                     self._settings["offset-syncs.topic.replication.factor"])

    def _replicated(self, topic: str) -> bool:
        return should_replicate(topic, self._policy, self._filter, self._settings[TARGET_ALIAS])

    def _refresh_topics(self) -> dict[str, int]:
        """The source's replicated topics and partition counts, with their remote topics made ready."""
        assert self._source is not None and self._target is not None
        found = topics.partition_counts(self._source, self._replicated)
        source_alias = self._settings[SOURCE_ALIAS]
        topics.ensure_remote_topics(
            self._target, {self._policy.format_remote_topic(source_alias, t): n for t, n in found.items()},
            self._settings["replication.factor"])
        return found

    def _sync_configs(self) -> None:
        if not self._settings["sync.topic.configs.enabled"] or self._source is None or self._target is None:
            return
        source_alias = self._settings[SOURCE_ALIAS]
        with self._lock:
            names = {t: self._policy.format_remote_topic(source_alias, t) for t in self._partitions}
        topics.sync_topic_configs(self._source, self._target, names, ConfigPropertyFilter(self.props).should_replicate)

    def _sync_acls(self) -> None:
        if not self._settings["sync.topic.acls.enabled"] or self._source is None or self._target is None:
            return
        source_alias = self._settings[SOURCE_ALIAS]
        with self._lock:
            replicated = set(self._partitions)
        topics.sync_topic_acls(self._source, self._target,
                               lambda t: self._policy.format_remote_topic(source_alias, t) if t in replicated else None)

    def _periodic_jobs(self) -> list[tuple[int, Callable[[], None]]]:
        """(period in seconds, job) of each periodic job switched on."""
        jobs: list[tuple[int, Callable[[], None]]] = []
        for switch, period, job in (
                ("refresh.topics.enabled", "refresh.topics.interval.seconds",
                 lambda: self._maybe_reconfigure(self._refresh_topics())),
                ("sync.topic.configs.enabled", "sync.topic.configs.interval.seconds", self._sync_configs),
                ("sync.topic.acls.enabled", "sync.topic.acls.interval.seconds", self._sync_acls)):
            if self._settings[switch]:
                jobs.append((self._settings[period], job))
        return jobs

    def _refresh_loop(self) -> None:
        jobs = self._periodic_jobs()
        if not jobs:
            return
        tick = min(period for period, _ in jobs)
        elapsed = 0
        while not self._stopping.wait(tick):
            elapsed += tick
            try:
                for period, job in jobs:
                    if elapsed % period < tick:
                        job()
            except Exception:
                # The source or target may be down for a while; the next round tries again.
                log.exception("mirror: refreshing topics of %s->%s failed", self._settings[SOURCE_ALIAS],
                              self._settings[TARGET_ALIAS])

    def _maybe_reconfigure(self, found: dict[str, int]) -> None:
        with self._lock:
            changed = found != self._partitions
            self._partitions = found
        if changed and self.context is not None:
            log.info("mirror: topics or partitions changed on %s; reassigning tasks", self._settings[SOURCE_ALIAS])
            self.context.request_task_reconfiguration()


class MirrorSourceTask(PassthroughSourceTask):
    """Copies its `task.assigned.partitions` from the source cluster. With MirrorMaker 2's byte-array converters
    and no transforms the worker produces the consumed messages as they are (`poll_messages`, `commit_run`);
    otherwise each becomes a `SourceRecord` (`poll`, `commit_record`)."""

    def __init__(self) -> None:
        self._consumer: Consumer | None = None
        self._sync_producer: Producer | None = None
        self._sync_writer: OffsetSyncWriter | None = None
        self._sync_topic = ""
        self._remote_names: dict[str, str] = {}

    def start(self, props: Mapping[str, str]) -> None:
        settings = source_config_def().parse(props)
        self._source_alias: str = settings[SOURCE_ALIAS]
        self._policy = replication_policy(props)
        self._poll_timeout_s = settings["consumer.poll.timeout.ms"] / 1000
        assigned = [decode_partition(p) for p in props.get(TASK_PARTITIONS, "").split(",") if p.strip()]
        self._consumer = Consumer({**client_config(props, "source", "consumer"), "group.id": "unused-mirror",
                                   "enable.auto.commit": False, "enable.auto.offset.store": False,
                                   "enable.partition.eof": False})
        self._consumer.assign([KafkaTopicPartition(t, p, self._start_offset(t, p)) for t, p in assigned])
        if settings["emit.offset-syncs.enabled"]:
            on_source = settings["offset-syncs.topic.location"] == "source"
            self._sync_producer = Producer(client_config(props, "source" if on_source else "target", "producer"))
            self._sync_topic = self._policy.offset_syncs_topic(
                settings[TARGET_ALIAS] if on_source else settings[SOURCE_ALIAS])
            self._sync_writer = OffsetSyncWriter(settings["offset.lag.max"])
        self._offset_lag_max: int = settings["offset.lag.max"] if self._sync_writer is not None else 2**31
        log.info("mirror: task copying %d partitions from %s", len(assigned), self._source_alias)

    def source_partition(self, topic: str, partition: int) -> dict[str, Any]:
        return {"cluster": self._source_alias, "topic": topic, "partition": partition}

    def source_offset(self, offset: int) -> dict[str, Any]:
        return {"offset": offset}

    def destination(self, topic: str) -> str:
        remote = self._remote_names.get(topic)
        if remote is None:
            remote = self._remote_names[topic] = self._policy.format_remote_topic(self._source_alias, topic)
        return remote

    def _start_offset(self, topic: str, partition: int) -> int:
        committed = self.context.offset_storage_reader.offset(self.source_partition(topic, partition))
        return int(committed["offset"]) + 1 if committed and "offset" in committed else OFFSET_BEGINNING

    def poll_messages(self) -> list[Message] | None:
        assert self._consumer is not None
        # As Kafka's poll: return what has arrived at once, waiting only while nothing has. (librdkafka's batch
        # consume waits for a full batch or the timeout, which would add up to the timeout to every record's lag.)
        messages = self._consumer.consume(MAX_POLL_RECORDS, 0)
        if not messages:
            first = self._consumer.poll(self._poll_timeout_s)
            if first is None:
                return None
            messages = [first, *self._consumer.consume(MAX_POLL_RECORDS - 1, 0)]
        if any(message.error() is not None for message in messages):
            messages = [m for m in messages if self._readable(m)]
        return messages or None

    def _readable(self, message: Message) -> bool:
        error = message.error()
        if error is None:
            return True
        if error.code() == KafkaError._PARTITION_EOF:
            return False
        raise ConnectException(f"mirror: reading from {self._source_alias} failed: {error.str()}")

    def poll(self) -> list[SourceRecord] | None:
        messages = self.poll_messages()
        return [self._record(message) for message in messages] if messages else None

    def _record(self, message: Message) -> SourceRecord:
        topic, partition, offset = message.topic(), message.partition(), message.offset()
        assert topic is not None and partition is not None and offset is not None
        timestamp_type, timestamp = message.timestamp()
        headers = message.headers() or []
        assert isinstance(headers, list)  # a consumed message's headers: (key, value) pairs
        return SourceRecord(
            topic=self.destination(topic), kafka_partition=partition, key_schema=OPTIONAL_BYTES_SCHEMA,
            key=message.key(), value_schema=OPTIONAL_BYTES_SCHEMA, value=message.value(),
            timestamp=timestamp if timestamp_type != TIMESTAMP_NOT_AVAILABLE else None,
            headers=tuple([Header(k, v, OPTIONAL_BYTES_SCHEMA) for k, v in headers]),
            source_partition=self.source_partition(topic, partition), source_offset=self.source_offset(offset))

    def commit_record(self, record: SourceRecord, metadata: RecordMetadata | None) -> None:
        if metadata is None or self._sync_writer is None:
            return
        upstream = record.source_partition
        sync = self._sync_writer.copied(upstream["topic"], upstream["partition"], record.source_offset["offset"],
                                        metadata.offset)
        if sync is not None:
            self._send_syncs([sync])

    def max_run(self) -> int:
        # The offset syncs due inside a run are written at its last record: runs of at most offset.lag.max
        # records keep syncs within about twice that of each other, however many records a poll brings.
        return max(1, self._offset_lag_max)

    def commit_run(self, topic: str, partition: int, first: int, last: int, count: int,
                   first_written: RecordMetadata, last_written: RecordMetadata) -> None:
        if self._sync_writer is not None:
            syncs = self._sync_writer.copied_run(topic, partition, first, first_written.offset, last,
                                                 last_written.offset, count)
            if syncs:
                self._send_syncs(syncs)

    def commit(self) -> None:
        if self._sync_writer is not None:
            self._send_syncs(self._sync_writer.delayed())

    def _send_syncs(self, syncs: Sequence[Any]) -> None:
        assert self._sync_producer is not None
        for sync in syncs:
            # Offset syncs are best effort, as MirrorMaker 2's: a lost one only makes translation coarser.
            self._sync_producer.produce(self._sync_topic, key=sync.key(), value=sync.value(), partition=0)
        self._sync_producer.poll(0)

    def stop(self) -> None:
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None
        if self._sync_producer is not None:
            self._sync_producer.flush(10)
            self._sync_producer = None
