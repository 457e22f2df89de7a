"""The topic config table: every topic config Moldau knows, with its type, documentation, validator, the
broker configs that supply its default (``Synonym``, with the unit of each), and whether it is acted on yet.

Pure data, like ``moldau.config.broker_defs``. A new topic config is one entry here (plus, if Kafka has one,
its broker default in the broker table).
"""

from __future__ import annotations

from collections.abc import Mapping

from moldau.config.schema import (
    CLEANUP_POLICIES,
    COMPRESSION_TYPES,
    GZIP_LEVELS,
    TIMESTAMP_TYPES,
    ConfigType,
    Custom,
    OneOf,
    Range,
    Synonym,
    TopicConfigDef,
    at_least,
)
from moldau.replication.throttled_replicas import check_throttled_replicas

_T = ConfigType


def _syn(*names: str) -> tuple[Synonym, ...]:
    return tuple(Synonym(name) for name in names)


# Broker configs that supply one topic default, highest precedence first; also used by BrokerConfig and
# DescribeConfigs synonyms.
RETENTION = (Synonym("log.retention.ms"), Synonym("log.retention.minutes", 60_000),
             Synonym("log.retention.hours", 3_600_000))
ROLL = (Synonym("log.roll.ms"), Synonym("log.roll.hours", 3_600_000))
ROLL_JITTER = (Synonym("log.roll.jitter.ms"), Synonym("log.roll.jitter.hours", 3_600_000))
FLUSH_MS = _syn("log.flush.interval.ms", "log.flush.scheduler.interval.ms")

# Confluent Server's broker-side schema validation (moldau.registry.validation): off unless a topic turns it on, and
# no broker config supplies a default.
TOPIC_NAME_STRATEGY = "io.confluent.kafka.serializers.subject.TopicNameStrategy"
_STRATEGY_NAMES = ("TopicNameStrategy", "RecordNameStrategy", "TopicRecordNameStrategy")
SUBJECT_NAME_STRATEGIES = OneOf(tuple(f"io.confluent.kafka.serializers.subject.{name}" for name in _STRATEGY_NAMES)
                                + _STRATEGY_NAMES)


def _schema_validation(part: str) -> tuple[TopicConfigDef, TopicConfigDef]:
    return (
        TopicConfigDef(f"confluent.{part}.schema.validation", _T.BOOLEAN,
                       f"Refuse produced records whose {part} is not in the schema registry's wire format with a "
                       f"schema registered under the subject the {part} subject name strategy names, or does not "
                       "decode under that schema (INVALID_RECORD).", (), default="false"),
        TopicConfigDef(f"confluent.{part}.subject.name.strategy", _T.STRING,
                       f"How the {part}'s subject is named for confluent.{part}.schema.validation: "
                       "TopicNameStrategy, RecordNameStrategy or TopicRecordNameStrategy (the short or the full "
                       "class name).", (), SUBJECT_NAME_STRATEGIES, default=TOPIC_NAME_STRATEGY),
    )


# acted_on=False: accepted but not acted on yet, for the reasons given above the broker table.
_TOPIC_DEFS: tuple[TopicConfigDef, ...] = (
    TopicConfigDef("cleanup.policy", _T.LIST, "delete, compact, or both (compact,delete); empty keeps every "
                   "record (no retention, no compaction) until DeleteRecords moves the log start.",
                   _syn("log.cleanup.policy"), CLEANUP_POLICIES),
    TopicConfigDef("compression.type", _T.STRING, "The codec records are stored in; producer: as sent.",
                   _syn("compression.type"), COMPRESSION_TYPES),
    TopicConfigDef("delete.retention.ms", _T.LONG, "How long tombstones are kept when compacting.",
                   _syn("log.cleaner.delete.retention.ms"), at_least(0)),
    TopicConfigDef("file.delete.delay.ms", _T.LONG, "How long a deleted segment's files stay on disk.",
                   _syn("log.segment.delete.delay.ms"), at_least(0)),
    TopicConfigDef("flush.messages", _T.LONG, "Messages appended before the log is flushed.",
                   _syn("log.flush.interval.messages"), at_least(1)),
    TopicConfigDef("flush.ms", _T.LONG, "Time a message may stay unflushed.", FLUSH_MS, at_least(0)),
    TopicConfigDef("index.interval.bytes", _T.INT, "Bytes of log between two offset index entries.",
                   _syn("log.index.interval.bytes"), at_least(0)),
    TopicConfigDef("max.message.bytes", _T.INT, "The largest record batch accepted.",
                   _syn("message.max.bytes"), at_least(0)),
    TopicConfigDef("message.timestamp.type", _T.STRING, "CreateTime or LogAppendTime.",
                   _syn("log.message.timestamp.type"), TIMESTAMP_TYPES),
    TopicConfigDef("message.timestamp.before.max.ms", _T.LONG,
                   "How far a CreateTime timestamp may lie in the past.",
                   _syn("log.message.timestamp.before.max.ms"), at_least(0)),
    TopicConfigDef("message.timestamp.after.max.ms", _T.LONG,
                   "How far a CreateTime timestamp may lie in the future.",
                   _syn("log.message.timestamp.after.max.ms"), at_least(0)),
    TopicConfigDef("min.cleanable.dirty.ratio", _T.DOUBLE, "The dirty share that triggers cleaning.",
                   _syn("log.cleaner.min.cleanable.ratio"), Range(0, 1)),
    TopicConfigDef("min.compaction.lag.ms", _T.LONG, "The least time a record stays uncompacted.",
                   _syn("log.cleaner.min.compaction.lag.ms"), at_least(0)),
    TopicConfigDef("max.compaction.lag.ms", _T.LONG, "The most time a record stays uncompacted.",
                   _syn("log.cleaner.max.compaction.lag.ms"), at_least(1)),
    TopicConfigDef("min.insync.replicas", _T.INT, "Replicas that must acknowledge an acks=all write.",
                   _syn("min.insync.replicas"), at_least(1)),
    TopicConfigDef("retention.bytes", _T.LONG, "The size a partition may reach; -1 means no limit.",
                   _syn("log.retention.bytes")),
    TopicConfigDef("retention.ms", _T.LONG, "How long segments are kept; -1 means no limit.",
                   RETENTION, at_least(-1)),
    TopicConfigDef("segment.bytes", _T.INT, "The largest size of a log segment.",
                   _syn("log.segment.bytes"), at_least(14)),
    TopicConfigDef("segment.index.bytes", _T.INT, "The largest size of an offset index file.",
                   _syn("log.index.size.max.bytes"), at_least(4)),
    TopicConfigDef("segment.ms", _T.LONG, "The time after which a new segment is rolled.",
                   ROLL, at_least(1)),
    TopicConfigDef("segment.jitter.ms", _T.LONG, "The largest random jitter subtracted from segment.ms, drawn "
                   "per segment.", ROLL_JITTER, at_least(0)),
    TopicConfigDef("unclean.leader.election.enable", _T.BOOLEAN, "Allow out-of-sync leaders.",
                   _syn("unclean.leader.election.enable")),
    TopicConfigDef("preallocate", _T.BOOLEAN, "Preallocate segment files.", _syn("log.preallocate"),
                   acted_on=False),
    TopicConfigDef("message.downconversion.enable", _T.BOOLEAN, "Convert records for old consumers.",
                   _syn("log.message.downconversion.enable"), acted_on=False),
    # Kafka's per-codec levels (KIP-390), for batches the broker compresses itself.
    TopicConfigDef("compression.gzip.level", _T.INT, "The gzip level when the broker compresses (-1: zlib's).",
                   _syn("compression.gzip.level"), GZIP_LEVELS),
    TopicConfigDef("compression.lz4.level", _T.INT, "The lz4 level when the broker compresses.",
                   _syn("compression.lz4.level"), Range(1, 17)),
    TopicConfigDef("compression.zstd.level", _T.INT, "The zstd level when the broker compresses.",
                   _syn("compression.zstd.level"), Range(-131072, 22)),
    # Tiered storage: Kafka topic configs with nothing to act on here.
    TopicConfigDef("local.retention.bytes", _T.LONG, "Tiered storage's local size limit; no effect.",
                   _syn("log.local.retention.bytes"), at_least(-2), acted_on=False),
    TopicConfigDef("local.retention.ms", _T.LONG, "Tiered storage's local time limit; no effect.",
                   _syn("log.local.retention.ms"), at_least(-2), acted_on=False),
    TopicConfigDef("remote.storage.enable", _T.BOOLEAN, "Tiered storage for the topic; no effect.", (),
                   acted_on=False, default="false"),
    TopicConfigDef("remote.log.copy.disable", _T.BOOLEAN, "Tiered storage's copy switch; no effect.", (),
                   acted_on=False, default="false"),
    TopicConfigDef("remote.log.delete.on.disable", _T.BOOLEAN, "Tiered storage's cleanup switch; no effect.",
                   (), acted_on=False, default="false"),
    TopicConfigDef("leader.replication.throttled.replicas", _T.LIST,
                   "Replicas whose copying is throttled on the leader's side (leader.replication.throttled.rate of "
                   "the broker named): partitionId:brokerId pairs, or * for all.", (),
                   Custom(check_throttled_replicas, "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
                   default=""),
    TopicConfigDef("follower.replication.throttled.replicas", _T.LIST,
                   "Replicas whose copying is throttled on the follower's side (follower.replication.throttled.rate "
                   "of the broker named): partitionId:brokerId pairs, or * for all.", (),
                   Custom(check_throttled_replicas, "[partitionId]:[brokerId],[partitionId]:[brokerId],..."),
                   default=""),
    *_schema_validation("key"),
    *_schema_validation("value"),
)


TOPIC_CONFIGS: Mapping[str, TopicConfigDef] = {d.name: d for d in _TOPIC_DEFS}
